"""CDMA pixel (image) input and the CSC image-mode channel pre-extension (every configuration).

Rules (nvdlav1 cmod ``cdma/NV_NVDLA_cdma.cpp`` ``ImageConvDataRequest/ResponseSequencerCommon``,
``process_one_element_8/16``, ``hls_convertor``; ``hls/cdma_libs/cdma_cvt.cpp``; ``csc/NV_NVDLA_csc.cpp``
``SendImageDataToMacSequencerConvCommon`` / ``csc_read_one_image_entry``; seed 000 "Pixel Format",
"Basic Weight for image input", "Precision Conversion"; checked bit for bit against the nv_small,
nv_small_256_full and nv_large RTL: ``NV_NVDLA_CDMA_IMG_ctrl/sg/pack.v``, ``NV_NVDLA_CDMA_cvt.v``,
``NV_NVDLA_CSC_dl.v``). The memory atom and the CBUF entry come from the profile (``atom_bytes``,
``cbuf_entry_bytes``: 8/8 bytes on nv_small, 8/32 on nv_small_256*, 32/64 on nv_large, 32/128 on
nv_full):

* Pitch linear only. Plane 0 pixel ``x`` of line ``h`` is at ``DAIN_ADDR_0 + h*LINE_STRIDE +
  (PIXEL_X_OFFSET + x)*bpp0``; the UV plane of the semi-planar formats at ``DAIN_ADDR_1 +
  h*LINE_UV_STRIDE + (PIXEL_X_OFFSET*bpp1 mod atom) + x*bpp1`` (RTL ``NV_NVDLA_CDMA_IMG_ctrl.v``
  ``pixel_planar1_x_offset = PIXEL_X_OFFSET & (atom/bpp1 - 1)``: plane 1's base points at the atom
  that holds pixel ``PIXEL_X_OFFSET``). ``PIXEL_X_OFFSET`` lies in the first atom of plane 0
  (:func:`x_offset_max`). The bit fields and the component order come from the layouts'
  ``nvdla.pixel.T_*`` unpacking; components go to CBUF as R,G,B,A / Y,U,V,A (channel 0..3).
* The v2 RTL built with ``FEATURE_DATA_TYPE_INT8`` (every public v2 .spec) decodes only the formats
  with 8-bit components (T_R8, the 8-bit RGB/YUV packed and the 8-bit semi-planar ones;
  ``NV_NVDLA_CDMA_IMG_ctrl.v`` keeps the others under ``#ifndef NVDLA_FEATURE_DATA_TYPE_INT8``); the
  fuzz generator draws the others only on a profile with INT16 (nv_full).
* 10-bit packed formats: each 10-bit component is left-aligned in 16 bits (``<< 6``), the 2-bit
  alpha too (``<< 14``); other formats take the container as is (T_R10, Y10: no shift).
* Convertor (``D_CVT_CFG.CVT_EN``): integer input is unsigned, or signed with
  ``D_DATAIN_FORMAT.PIXEL_SIGN_OVERRIDE`` (the format's own ``_I`` / YUV16 signedness is
  ignored by the cmod); offset = ``D_CVT_OFFSET`` or, with ``D_MEAN_FORMAT`` enabled, the
  channel's ``MEAN_RY/GU/BV/AX``; ``v17 = clamp(rnd((x - offset) * CVT_SCALE, CVT_TRUNCATE), 17)``,
  then INT8/INT16 saturate (RTL ``NV_NVDLA_CDMA_CVT_cell.v``: 18-bit difference, 34-bit product,
  ``NV_NVDLA_HLS_shiftrightsu`` to 17 bits, ``NV_NVDLA_HLS_saturate``), FP16 ``int->fp16`` round to
  nearest even with overflow to +-65504 (``FpIntToFloat``/``SetToInf``). FP16 input
  (``IN_PRECISION`` FP16) passes unchanged. Without the convertor the container bits are taken as
  the output element (low 8/16 bits).
* ``D_NAN_FLUSH_TO_ZERO`` flushes NaN of FP16 input to +0 before anything else.
* Left/right padding: ``CDMA.D_ZERO_PADDING`` PAD_LEFT/PAD_RIGHT pixels of the raw
  ``CDMA.D_ZERO_PADDING_VALUE`` (low 8 bits at INT8), not converted (RTL ``NV_NVDLA_CDMA_cvt.v``
  ``cvt_out_pad_mask``). One CBUF line holds the ``(PAD_LEFT + W + PAD_RIGHT) * E`` elements (``E``
  components per pixel) followed by zeros up to its last entry: ``D_ENTRY_PER_SLICE.ENTRIES + 1 =
  ceil(line bytes / cbuf_entry_bytes)`` (nvdla/sw ``ConvCoreNode::calculateEPS``: ``width_ext * cpa *
  bpe / bufEntryWidth``).
* CSC (image mode, kernel width 1 after pre-extension): output ``(ox, oy)`` and kernel row ``r``
  see the ``WEIGHT_CHANNEL_EXT + 1`` elements of line ``oy*SY + r - PAD_TOP`` starting at element
  ``ox * SX * (DATAIN_CHANNEL_EXT + 1)`` (RTL ``NV_NVDLA_CSC_dl.v`` ``pixel_w_cnt``: a window of
  ``atomic C`` elements per MAC step, the next step ``atomic C`` further, shifted out of two CBUF
  entries); lines outside the image carry ``CSC.D_ZERO_PADDING_VALUE``.

:func:`fetch_image` returns that pre-extended cube ``(Ce, H, OW)`` (``d[e, y, ox]`` = element
``ox*SX*C + e`` of line ``y``), which :func:`image_conv_config` turns into an ordinary
1-wide convolution: the weights are then the image-input weight format without post-extension,
i.e. the direct-convolution format of the pre-extended ``(K, Ce, R, 1)`` kernels (seed 000).
Values are int64: INT8 elements sign-extended, INT16 and FP16 the 16-bit pattern sign-extended
(as the feature fetch delivers them).

Channel post-extension (``CSC.D_POST_Y_EXTENSION`` = 1/2: ``post`` = 2/4 lines per MAC step; the rule of
the nvdlav1 C model, csc ``SendImageDataToMacSequencerConvCommon``, ``csc_read_one_image_entry`` and
``SendWeightToMacSequencerDirectConvCommon``; seed 000 "Basic Weight for image input"; measured bit for
bit against the C model, ``testvectors/conv_postext``): a kernel of height ``R`` takes ``steps =
ceil(R / post)`` MAC steps; step ``s`` of output line ``oy`` puts line ``oy*SY + s*post + j - PAD_TOP``
(``j < post``) into the MAC lanes ``j*L .. j*L + Ce - 1``, ``L = atomic C / post`` (profile
``mac_atomic_c``), so ``Ce <= L`` (:func:`_check_post`); the other lanes of a line are 0, lines outside the
image carry the CSC pad value in their ``Ce`` lanes, and in the last step of a kernel whose height is no
multiple of ``post`` the missing lines are 0 (data and weights). The weights are stored per kernel group,
step, kernel, line, channel without zero fill (:func:`post_weight_offsets`). NVDLA's compiler emits it for
image input with few channels (nvdla/sw ``ConvCoreNode::optionalChnlExtForIMG``: LeNet 5x5, ResNet 7x7).
:func:`fetch_image` returns the steps as rows of a cube, :func:`image_conv_config` the convolution over
it (the step order, slice outer and step inner, is the CSC's, which FP16 accumulation depends on).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...layouts import get_layout
from ...layouts.nvdla import PIXEL_FORMATS, PixelFormat
from ..base import InvalidLayer, MemoryPort, ModelOptions, RegisterView, UnitNotModelled, engine_memory
from ..ops import rnd, sx
from ._common import I64, PREC_FP16, PREC_INT8, PREC_INT16, PREC_NAMES, reg_addr
from .csc import ConvConfig
from ....semantics import Semantics

__all__ = ["ImageGeometry", "fetch_image", "image_conv_config", "image_geometry", "pixel_format", "pixel_convert",
           "post_weight_offsets", "post_weights"]

#: ``D_DATAIN_FORMAT.PIXEL_FORMAT`` codes in register order (cmod ``NVDLA_CDMA_D_DATAIN_FORMAT_0_PIXEL_FORMAT_T_*``
#: 0..35 = seed 000's table order, which ``PIXEL_FORMATS`` keeps)
PIXEL_CODES: tuple[str, ...] = tuple(PIXEL_FORMATS)
_MAX_ELEMS = 1 << 26  # bound on the pixels one layer may ask the model to materialise


def pixel_format(view: RegisterView) -> PixelFormat:
    code = int(view.field("CDMA", "D_DATAIN_FORMAT", "PIXEL_FORMAT"))
    if code >= len(PIXEL_CODES):
        raise InvalidLayer(f"CDMA.D_DATAIN_FORMAT.PIXEL_FORMAT = {code}: no such pixel format (0..{len(PIXEL_CODES) - 1})")
    return PIXEL_FORMATS[PIXEL_CODES[code]]


def _container_bits(fmt: PixelFormat) -> int:
    """Bits of one component container: 8 (8-bit formats) or 16 (16-bit and the 10-bit packed ones
    after left alignment)."""
    return 8 if {w for _, w in fmt.fields} <= {8} else 16


def _in_precision(fmt: PixelFormat) -> int:
    if fmt.float:
        return PREC_FP16
    return PREC_INT8 if _container_bits(fmt) == 8 else PREC_INT16


@dataclasses.dataclass(frozen=True)
class ImageGeometry:
    """Registers of one image layer, decoded and checked."""

    fmt: PixelFormat
    width: int
    height: int
    x_offset: int
    base0: int
    line_stride: int
    base1: int
    uv_line_stride: int
    pad_left: int
    pad_right: int
    in_prec: int
    proc: int
    channels_csc: int
    kernel_channels: int
    post: int = 1  # channel post-extension: lines combined per MAC step (1, 2, 4)
    atom: int = 32  # memory atom in bytes (profile ``atom_bytes``): the X offset and plane-1 start rules


def x_offset_max(fmt: PixelFormat, atom: int) -> int:
    """Largest ``PIXEL_X_OFFSET``: the offset lies within the first memory atom of plane 0,
    ``atom / bpp0 - 1`` pixels (RTL ``NV_NVDLA_CDMA_IMG_ctrl.v``: ``pixel_planar0_mask`` =
    atom/bytes-per-pixel - 1, ``pixel_element_sft`` is ``log2(atom)`` bits wide; seed 000's ranges
    are this rule for 32-byte atoms: 31 for T_R8, 7 for 4-byte pixels, 3 for 8-byte pixels)."""
    return max(atom // _plane_bytes(fmt)[0] - 1, 0)


def image_geometry(view: RegisterView, options: ModelOptions | None = None) -> ImageGeometry:
    """Decode and check the CDMA/CSC registers of an image layer (every value is untrusted).
    ``options`` gives the memory atom (default 32 bytes, nv_full's)."""
    atom = options.atom_bytes if options is not None else 32
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    fmt = pixel_format(view)
    if f("CDMA", "D_DATAIN_FORMAT", "PIXEL_MAPPING") != 0:
        raise UnitNotModelled("CDMA.D_DATAIN_FORMAT.PIXEL_MAPPING: only pitch-linear images are modelled")
    in_prec = f("CDMA", "D_MISC_CFG", "IN_PRECISION")
    proc = f("CDMA", "D_MISC_CFG", "PROC_PRECISION")
    want = _in_precision(fmt)
    if in_prec != want:
        raise InvalidLayer(f"CDMA.D_MISC_CFG.IN_PRECISION = {PREC_NAMES.get(in_prec, in_prec)} but {fmt.name} is "
                           f"{PREC_NAMES[want]} (seed 000 pixel format table)")
    if proc not in PREC_NAMES:
        raise InvalidLayer(f"CDMA.D_MISC_CFG.PROC_PRECISION = {proc}: not INT8/INT16/FP16")
    cvt = f("CDMA", "D_CVT_CFG", "CVT_EN")
    if in_prec != proc and not (cvt and in_prec != PREC_FP16):
        raise InvalidLayer(f"CDMA: image {PREC_NAMES[in_prec]} -> {PREC_NAMES[proc]} needs D_CVT_CFG.CVT_EN "
                           "(and FP16 images convert only to FP16; seed 000 precision conversion table)")
    for b in ("CSC", "CMAC_A", "CMAC_B", "CACC"):
        if f(b, "D_MISC_CFG", "PROC_PRECISION") != proc:
            raise UnitNotModelled(f"{b}.D_MISC_CFG.PROC_PRECISION differs from CDMA's: mixed precision not modelled")
    yext = f("CSC", "D_POST_Y_EXTENSION", "Y_EXTENSION")
    if yext > 2:
        raise InvalidLayer(f"CSC.D_POST_Y_EXTENSION.Y_EXTENSION = {yext}: post-extension is 1, 2 or 4 lines (seed 000)")
    if f("CSC", "D_DILATION_EXT", "X_DILATION_EXT") or f("CSC", "D_DILATION_EXT", "Y_DILATION_EXT"):
        raise UnitNotModelled("CSC.D_DILATION_EXT: dilation with image input not modelled (the cmod ignores it)")
    if f("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") != 0:
        raise InvalidLayer("CSC.D_WEIGHT_SIZE_EXT_0.WEIGHT_WIDTH_EXT must be 0 with image input: the kernel is 1 wide after "
                           "channel pre-extension (cmod NV_NVDLA_csc.cpp SendImageDataToMacSequencerConvCommon)")
    w = f("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    h = f("CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
    if f("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1 != h:
        raise UnitNotModelled("CSC.D_DATAIN_SIZE_EXT_0.DATAIN_HEIGHT_EXT differs from CDMA's DATAIN_HEIGHT: not modelled")
    if w * h > _MAX_ELEMS:
        raise InvalidLayer(f"CDMA.D_DATAIN_SIZE_0: {w}x{h} image exceeds the model's {_MAX_ELEMS} pixel bound")
    xo = f("CDMA", "D_PIXEL_OFFSET", "PIXEL_X_OFFSET")
    xmax = x_offset_max(fmt, atom)
    if xo > xmax:
        raise InvalidLayer(f"CDMA.D_PIXEL_OFFSET.PIXEL_X_OFFSET = {xo} outside 0~{xmax} for {fmt.name} with {atom}-byte "
                           "memory atoms (the offset lies in the line's first atom; seed 000, RTL NV_NVDLA_CDMA_IMG_ctrl.v)")
    if f("CDMA", "D_PIXEL_OFFSET", "PIXEL_Y_OFFSET"):
        raise UnitNotModelled("CDMA.D_PIXEL_OFFSET.PIXEL_Y_OFFSET (block-linear only) not modelled")
    return ImageGeometry(
        fmt=fmt, width=w, height=h, x_offset=xo,
        base0=reg_addr(view, "CDMA", "D_DAIN_ADDR_HIGH_0", "D_DAIN_ADDR_LOW_0"),
        line_stride=int(view.reg("CDMA", "D_LINE_STRIDE")),
        base1=reg_addr(view, "CDMA", "D_DAIN_ADDR_HIGH_1", "D_DAIN_ADDR_LOW_1"),
        uv_line_stride=int(view.reg("CDMA", "D_LINE_UV_STRIDE")),
        pad_left=f("CDMA", "D_ZERO_PADDING", "PAD_LEFT"), pad_right=f("CDMA", "D_ZERO_PADDING", "PAD_RIGHT"),
        in_prec=in_prec, proc=proc,
        channels_csc=f("CSC", "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1,
        kernel_channels=f("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT") + 1, post=1 << yext, atom=atom,
    )  # fmt: skip


def _plane_bytes(fmt: PixelFormat) -> list[int]:
    """Bytes per pixel of each plane (cmod ``cdma_bytes_per_pixel[_planar0/1]``)."""
    b = _container_bits(fmt) // 8
    if fmt.planes == 2:
        return [b, 2 * b]
    if {w for _, w in fmt.fields} & {2}:
        return [4]  # 10-bit packed: one 32-bit word
    return [b * len(fmt.fields)]


def _read_lines(mem: MemoryPort, base: int, stride: int, height: int, nbytes: int) -> np.ndarray:
    """``nbytes`` from each of ``height`` lines: uint8 (height, nbytes)."""
    span = (height - 1) * stride + nbytes
    if stride >= nbytes and span <= 16 * height * nbytes + (1 << 16):
        blob = np.asarray(mem.read(base, span), dtype=np.uint8)
        idx = np.arange(height, dtype=I64)[:, None] * stride + np.arange(nbytes, dtype=I64)[None, :]
        return blob[idx]
    return np.stack([np.asarray(mem.read(base + i * stride, nbytes), dtype=np.uint8) for i in range(height)])


def read_pixels(mem: MemoryPort, g: ImageGeometry) -> np.ndarray:
    """The image's components as stored, (H, W, E) unsigned container values (10-bit packed
    fields left-aligned to 16 bits), channel order R/Y, G/U, B/V, A/X."""
    fmt = g.fmt
    bpp = _plane_bytes(fmt)
    W, H, xo = g.width, g.height, g.x_offset
    # rebuild a compact buffer the layout's unpacking reads (x_offset 0, minimal strides)
    ls0 = -(-W * bpp[0] // 32) * 32
    if g.line_stride < (xo + W) * bpp[0]:
        raise InvalidLayer(f"CDMA.D_LINE_STRIDE = {g.line_stride} is smaller than (PIXEL_X_OFFSET + W) * {bpp[0]} bytes "
                           "(cmod: 'Incorrect configuration on line_stride')")
    p0 = _read_lines(mem, g.base0 + xo * bpp[0], g.line_stride, H, W * bpp[0])
    buf = np.zeros(H * ls0 + (H * (-(-W * bpp[-1] // 32) * 32) if fmt.planes == 2 else 0), dtype=np.uint8)
    buf[: H * ls0].reshape(H, ls0)[:, : W * bpp[0]] = p0
    params: dict[str, object] = {"x_offset": 0, "line_stride": ls0}
    if fmt.planes == 2:
        ls1 = -(-W * bpp[1] // 32) * 32
        first = (xo * bpp[1]) % g.atom  # RTL pixel_planar1_x_offset = PIXEL_X_OFFSET & (atom / bpp1 - 1)
        if g.uv_line_stride < first + W * bpp[1]:
            raise InvalidLayer(f"CDMA.D_LINE_UV_STRIDE = {g.uv_line_stride} is smaller than the {first + W * bpp[1]} bytes "
                               "a UV line needs (cmod: 'Incorrect configuration on uv_line_stride')")
        p1 = _read_lines(mem, g.base1 + first, g.uv_line_stride, H, W * bpp[1])
        buf[H * ls0:].reshape(H, ls1)[:, : W * bpp[1]] = p1
        params.update(uv_line_stride=ls1, uv_offset=H * ls0)
    spec = get_layout(f"nvdla.pixel.{fmt.name}")
    comps = spec.unpack_fn(buf, (H, W, fmt.channels), np.dtype(spec.default_dtype), spec.resolve(params))
    comps = np.asarray(comps).reshape(H, W, fmt.channels)
    bits = np.ascontiguousarray(comps).view(f"<u{comps.dtype.itemsize}").astype(I64)
    if {w for _, w in fmt.fields} & {2}:
        widths = {ch: w for ch, w in ((_ch(n), w) for n, w in fmt.fields)}
        shift = np.array([16 - widths[c] for c in range(fmt.channels)], dtype=I64)
        bits = bits << shift
    return bits


def _ch(name: str) -> int:
    return {"R": 0, "Y": 0, "G": 1, "U": 1, "B": 2, "V": 2, "A": 3, "X": 3}[name]


def int17_to_fp16_bits(v: np.ndarray) -> np.ndarray:
    """``FpIntToFloat<17,5,10>`` (cmod ``hls/include/nvdla_float.h``): round to nearest even,
    results beyond the FP16 range become +-65504 (``SetToInf`` keeps the largest finite value)."""
    v = np.asarray(v, dtype=I64)
    f = np.clip(v, -65504, 65504).astype(np.float64).astype(np.float16)  # one RNE rounding (ints below 2^17 are exact)
    out = f.view(np.uint16).astype(I64)
    big = np.abs(v) >= 65520  # rounds to 65536: overflow
    out = np.where(big, np.where(v < 0, 0xFBFF, 0x7BFF), out)
    return out


def pixel_convert(x: np.ndarray, *, offset: np.ndarray | int, scale: int, truncate: int, proc: int) -> np.ndarray:
    """CDMA convertor (``NV_NVDLA_CDMA_CVT_cell``): ``v17 = clamp(rnd((x - offset) * scale, truncate), 17)``, then
    INT8/INT16 saturation (element value) or FP16 bits (int64, 16-bit pattern)."""
    v = (np.asarray(x, dtype=I64) - np.asarray(offset, dtype=I64)) * I64(scale)
    v = np.clip(rnd(v, truncate), -(1 << 16), (1 << 16) - 1)
    if proc == PREC_FP16:
        return int17_to_fp16_bits(v)
    bits = 8 if proc == PREC_INT8 else 16
    return np.clip(v, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def convert_pixels(view: RegisterView, g: ImageGeometry, bits: np.ndarray) -> np.ndarray:
    """Container values (H, W, E) -> CBUF elements (H, W, E) as int64 (INT8 sign-extended, INT16/FP16
    16-bit patterns sign-extended)."""
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    cbits = _container_bits(g.fmt)
    if g.in_prec == PREC_FP16 and f("CDMA", "D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO"):
        nan = ((bits >> 10) & 0x1F == 0x1F) & ((bits & 0x3FF) != 0)
        bits = np.where(nan, 0, bits)
    if f("CDMA", "D_CVT_CFG", "CVT_EN") and g.in_prec != PREC_FP16:
        signed = bool(f("CDMA", "D_DATAIN_FORMAT", "PIXEL_SIGN_OVERRIDE"))
        x = sx(bits, cbits) if signed else bits
        if f("CDMA", "D_MEAN_FORMAT", "MEAN_FORMAT"):
            means = [f("CDMA", "D_MEAN_GLOBAL_0", "MEAN_RY"), f("CDMA", "D_MEAN_GLOBAL_0", "MEAN_GU"),
                     f("CDMA", "D_MEAN_GLOBAL_1", "MEAN_BV"), f("CDMA", "D_MEAN_GLOBAL_1", "MEAN_AX")]
            offset = np.array([sx(m, 16) for m in means[: bits.shape[-1]]], dtype=I64)
        else:
            offset = np.asarray(sx(f("CDMA", "D_CVT_OFFSET", "CVT_OFFSET"), 16), dtype=I64)
        out = pixel_convert(x, offset=offset, scale=int(sx(f("CDMA", "D_CVT_SCALE", "CVT_SCALE"), 16)),
                            truncate=f("CDMA", "D_CVT_CFG", "CVT_TRUNCATE"), proc=g.proc)
    else:
        out = bits
    ebits = 8 if g.proc == PREC_INT8 else 16
    return sx(np.asarray(out, dtype=I64), ebits)


def _check_post(view: RegisterView, g: ImageGeometry, semantics: Semantics, lanes: int = 64) -> None:
    """Refuse post-extension settings outside the rule of :func:`fetch_image` (``lanes`` = MAC atomic C,
    profile ``mac_atomic_c``; 64 on nv_full): each of the ``post`` lines of a MAC step has ``lanes/post``
    lanes, so the pre-extended kernel may have at most ``lanes/post`` channels (seed 000 "two-line (C<=32) or
    four-line (C<=16)" for 64 lanes; the C model FAILs "only one super channel when post-extension is
    enabled" beyond it, csc ``SendImageDataToMacSequencerConvCommon``).

    RTL (``NV_NVDLA_CSC_dl.v``: ``dat_rsp_img_8b`` puts ``lanes/post`` elements of each of the ``post`` lines
    side by side; ``pixel_x_add = post * pixel_x_stride``): the same rule wherever one output position
    advances ``post * (DATAIN_CHANNEL_EXT + 1) * SX <= lanes`` elements (measured on the nv_small,
    nv_small_256_full and nv_large RTL, sims/cmod/README.md); beyond that bound the nv_small RTL differed in
    17 of 17 layers: not modelled under ``rtl`` semantics (refused), the C model's rule under ``cmod``."""
    if g.post == 1:
        return
    per_line = lanes // g.post
    if g.kernel_channels > per_line:
        raise InvalidLayer(f"CSC.D_POST_Y_EXTENSION = {g.post} lines: WEIGHT_CHANNEL_EXT + 1 = {g.kernel_channels} "
                           f"pre-extended channels exceed the {per_line} MAC lanes of one line ({lanes} lanes / {g.post}; "
                           "seed 000 post-extension limits, cmod csc 'only one super channel')")
    if is_compressed(view) and (int(view.field("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT")) + 1) % g.post:
        raise UnitNotModelled(f"compressed weights with CSC.D_POST_Y_EXTENSION = {g.post} lines and a kernel height "
                              "that is no multiple of it (a shorter last step) not modelled")
    sxs = int(view.field("CSC", "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT")) + 1
    step = g.post * g.channels_csc * sxs
    if semantics == "rtl" and step > lanes:
        raise UnitNotModelled(f"CSC.D_POST_Y_EXTENSION = {g.post} lines x DATAIN_CHANNEL_EXT + 1 = {g.channels_csc} x "
                              f"x stride {sxs} = {step} elements per output position, beyond atomic C ({lanes}): the "
                              "RTL (NV_NVDLA_CSC_dl.v) is not modelled there; use --model-semantics cmod for the C model")


def is_compressed(view: RegisterView) -> bool:
    return int(view.field("CDMA", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT")) == 1


def fetch_image(view: RegisterView, mem: MemoryPort, options: ModelOptions) -> np.ndarray:
    """The pre-extended input cube (Ce, H, OW) the CSC feeds to CMAC in image mode (module doc); with
    post-extension the stacked cube of :func:`image_conv_config` (lanes ``j*Ce + c`` = line ``y + j``)."""
    g = image_geometry(view, options)
    _check_post(view, g, options.semantics, options.mac_atomic_c)
    port = engine_memory(mem, view, "CDMA", "D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE")
    elems = convert_pixels(view, g, read_pixels(port, g))  # (H, W, E)
    H, W, E = elems.shape
    esize = 1 if g.proc == PREC_INT8 else 2
    pad = int(view.field("CDMA", "D_ZERO_PADDING_VALUE", "PAD_VALUE"))
    pad = int(sx(pad, 8 * esize))
    wp = g.pad_left + W + g.pad_right
    line_elems = wp * E
    cbuf_entry = options.cbuf_entry_bytes
    entries = -(-line_elems * esize // cbuf_entry)
    have = int(view.field("CSC", "D_ENTRY_PER_SLICE", "ENTRIES")) + 1
    if have != entries or int(view.field("CDMA", "D_ENTRY_PER_SLICE", "ENTRIES")) + 1 != entries:
        raise InvalidLayer(f"CDMA/CSC.D_ENTRY_PER_SLICE.ENTRIES + 1 = {have} but a padded image line of {wp} pixels x {E} "
                           f"{PREC_NAMES[g.proc]} elements fills {entries} CBUF entries of {cbuf_entry} bytes")
    span = entries * cbuf_entry // esize
    flat = np.zeros((H, span), dtype=I64)
    lines = np.full((H, wp, E), pad, dtype=I64)
    lines[:, g.pad_left : g.pad_left + W] = elems
    flat[:, :line_elems] = lines.reshape(H, line_elems)
    ow = int(view.field("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH")) + 1
    sxs = int(view.field("CSC", "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT")) + 1
    ce = g.kernel_channels
    last = (ow - 1) * sxs * g.channels_csc + ce
    if last > span:
        raise UnitNotModelled(f"CSC: output x {ow - 1} reads elements up to {last} of an image line that holds {span} "
                              "(beyond the line's CBUF entries): not modelled")
    idx = (np.arange(ow, dtype=I64) * sxs * g.channels_csc)[None, :] + np.arange(ce, dtype=I64)[:, None]  # (Ce, OW)
    cube = flat[:, idx].transpose(1, 0, 2).copy()  # (Ce, H, OW)
    if g.post == 1:
        return cube
    return _post_steps(view, cube, options.mac_atomic_c)


def _post_steps(view: RegisterView, cube: np.ndarray, lanes: int) -> np.ndarray:
    """The MAC steps of a post-extended layer (cmod ``SendImageDataToMacSequencerConvCommon``,
    ``csc_read_one_image_entry``): step ``s`` of output line ``oy`` reads lines ``y_j = oy*SY + s*post + j
    - PAD_TOP`` (``j < post``); line ``j`` fills MAC lanes ``j*L .. j*L + Ce - 1`` (``L = lanes/post``),
    lanes ``Ce .. L-1`` of a line are 0; a line outside the image carries ``CSC.D_ZERO_PADDING_VALUE``
    in its ``Ce`` lanes; in the last step of a kernel whose height ``R`` is no multiple of ``post`` the
    lines ``j >= R mod post`` are all 0 (``memset``). Returned as the cube (lanes, OH*steps, OW) whose
    row ``oy*steps + s`` is that step, which :func:`image_conv_config` convolves with a ``steps``-high,
    ``steps``-strided kernel."""
    geo = _post_geometry(view)
    post, steps, r = geo["post"], geo["steps"], geo["r"]
    ce, h, ow = cube.shape
    per_line = lanes // post
    full = np.full((ce, geo["rows"], ow), geo["pad_value"], dtype=I64)  # full row i = image line i - pad_top
    top = geo["pad_top"]
    lo, hi = max(0, top), min(geo["rows"], top + h)
    if hi > lo:
        full[:, lo:hi] = cube[:, lo - top : hi - top]
    oh = geo["oh"]
    out = np.zeros((lanes, oh * steps, ow), dtype=I64)
    for s in range(steps):
        for j in range(post):
            if s * post + j >= r:
                continue  # the short last step: these lines are 0
            rows = np.arange(oh) * geo["sy"] + s * post + j
            out[j * per_line : j * per_line + ce, s::steps] = full[:, rows]
    return out


def _post_geometry(view: RegisterView) -> dict[str, int]:
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    post = 1 << f("CSC", "D_POST_Y_EXTENSION", "Y_EXTENSION")
    prec = f("CSC", "D_MISC_CFG", "PROC_PRECISION")
    r = f("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1
    oh = f("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1
    sy = f("CSC", "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT") + 1
    steps = -(-r // post)  # cmod kernel_atom_num = ceil(R / post)
    return {"post": post, "steps": steps, "r": r, "oh": oh, "sy": sy, "rows": (oh - 1) * sy + steps * post,
            "pad_top": f("CSC", "D_ZERO_PADDING", "PAD_TOP"),
            "pad_value": int(sx(f("CSC", "D_ZERO_PADDING_VALUE", "PAD_VALUE"), 8 if prec == PREC_INT8 else 16))}


def post_weight_offsets(k: int, ce: int, r: int, post: int, atomic_k: int) -> np.ndarray:
    """Element offsets (K, Ce, R) of the post-extended image weights (cmod csc
    ``SendWeightToMacSequencerDirectConvCommon`` with ``post_y_extension > 1``): kernel groups of
    ``atomic_k`` kernels (``kernel_group_stride = BYTE_PER_KERNEL * atomic_k``); in a group of ``kg``
    kernels, step ``s`` starts at ``s * kg * post * Ce``, kernel ``kk`` of it at ``kk * post * Ce``
    (the short last step: ``kk * (R mod post) * Ce``), line ``j`` at ``j * Ce``, then the channel
    (seed 000 image weight post-extension: "do NOT append 0s")."""
    kk = np.arange(k, dtype=I64)[:, None, None]
    e = np.arange(ce, dtype=I64)[None, :, None]
    rr = np.arange(r, dtype=I64)[None, None, :]
    g, ki = kk // atomic_k, kk % atomic_k
    kg = np.minimum(atomic_k, k - g * atomic_k)
    s, j = rr // post, rr % post
    full = r // post
    base = g * atomic_k * ce * r
    short = r - full * post
    off_full = base + s * kg * post * ce + ki * post * ce + j * ce + e
    off_last = base + full * kg * post * ce + ki * short * ce + j * ce + e
    return np.where(s < full, off_full, off_last)


def post_weights(w: np.ndarray, view: RegisterView, lanes: int) -> np.ndarray:
    """Weights (K, Ce, R) as the MAC lanes of the post-extended steps: (K, lanes, steps, 1), lane
    ``j*L + c`` of step ``s`` = kernel line ``s*post + j``, channel ``c`` (cmod csc: payload
    ``ii*cripple_channel_num + c`` to lane ``ii*PARALLEL_CHANNEL_NUM/post + c``, the rest 0)."""
    geo = _post_geometry(view)
    post, steps, r = geo["post"], geo["steps"], geo["r"]
    k, ce, _ = w.shape
    per_line = lanes // post
    out = np.zeros((k, lanes, steps, 1), dtype=w.dtype)
    for line in range(r):
        s, j = divmod(line, post)
        out[:, j * per_line : j * per_line + ce, s, 0] = w[:, :, line]
    return out


def image_conv_config(view: RegisterView, cfg: ConvConfig, lanes: int = 64) -> ConvConfig:
    """The CSC geometry as the ordinary convolution of the pre-extended cube :func:`fetch_image`
    returns: 1-wide kernel of ``WEIGHT_CHANNEL_EXT + 1`` channels, x stride 1, no left padding,
    no dilation (the cmod's image path has none), top/bottom padding with the CSC pad value
    (low 8 bits at INT8, 16 bits at INT16/FP16).

    With post-extension (``post`` lines per MAC step, ``lanes`` = MAC atomic C): the step cube of
    :func:`_post_steps`, ``lanes`` channels, kernel height ``steps = ceil(R / post)`` and y stride
    ``steps`` (one row per step), padding already in it; weights from :func:`post_weights`."""
    geo = _post_geometry(view)
    ce = int(view.field("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT")) + 1
    out = dataclasses.replace(cfg, in_w=cfg.out_w, in_c=ce, k_w=1, stride_x=1, dil_x=1, dil_y=1, pad_left=0,
                              pad_value=geo["pad_value"])
    if geo["post"] > 1:
        steps = geo["steps"]
        out = dataclasses.replace(out, in_c=lanes, in_h=cfg.out_h * steps, k_h=steps, stride_y=steps, pad_top=0)
    return out
