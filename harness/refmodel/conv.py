"""Bit-exact numpy model of NVDLA's direct-convolution pipeline, INT8 (all profiles) and INT16 (nv_full).

CDMA -> CSC -> CMAC -> CACC -> SDP (flying mode) -> memory or PDP.

* CDMA fetches the feature cube (``D_DAIN_ADDR_*_0``, ``D_LINE_STRIDE``, ``D_SURF_STRIDE``,
  ``D_DATAIN_SIZE_0/1``; feature data format of seed 000) and converts it when
  ``D_CVT_CFG.CVT_EN``: ``SAT8(RSAT((x - CVT_OFFSET) * CVT_SCALE, CVT_TRUNCATE, 17))``
  (semantics doc section 2, CDMA CVT row). Weights come from ``D_WEIGHT_ADDR_*`` in the
  uncompressed direct-convolution format (seed 000): kernel groups of ``atomic_k`` kernels,
  1x1x``atomic_c`` cubes (the last one of a kernel holding the ``C mod atomic_c`` remaining
  channels, no zero fill) scanned C' -> K -> W -> H -> C, groups packed back to back.
* CSC reads the convolution geometry from its own copies (as the RTL datapath does):
  ``D_WEIGHT_SIZE_EXT_0/1`` (kernel W/H/C/K), ``D_DATAOUT_SIZE_0`` (output W/H),
  ``D_CONV_STRIDE_EXT``, ``D_DILATION_EXT`` (value + 1), ``D_ZERO_PADDING`` (left/top only:
  right/bottom padding is implied by the output size) and ``D_ZERO_PADDING_VALUE``. Input
  position ``(ox*SX + kx*DX - PAD_LEFT, oy*SY + ky*DY - PAD_TOP)``; outside the input cube the
  low 8 bits of the pad value (raw, not converted) are used (cmod ``NV_NVDLA_csc.cpp``,
  ``SendDataToMacSequencerDirectConvCommon``).
* CMAC/CACC: ``A = sum_{c,ky,kx} w * d``. The RTL (``NV_NVDLA_CACC_CALC_int8.v``) keeps
  34-bit partial sums saturated after every accumulation step (one step per ``atomic_c``
  channel slice and kernel position, slice outer, position inner); the cmod accumulates
  exactly in 48 bits ([DIFF] 4a). Then ``out = clamp(rnd(A, CLIP_TRUNCATE), 32)``; elements
  flagged by the RSAT rule of section 1.2 (RTL) or whose rounded value leaves int32 (cmod)
  are counted in ``CACC.D_OUT_SATURATION``.
* Output channel lanes ``K .. 8*ceil(K/8)-1`` of the last kernel group carry 0 into SDP.

INT16 (``D_MISC_CFG.IN_PRECISION = PROC_PRECISION = INT16`` in CDMA/CSC/CMAC/CACC; nv_full,
nvdla/hw branch nvdlav1 cmod and RTL; seed 000 allows no conversion in direct convolution):

* Features: 2-byte elements, ``atom / 2`` channels per memory atom (dma.py ``group = atom // bpe``;
  cmod ``NV_NVDLA_cdma.cpp`` ``ELEMENT_PER_ATOM_INT16``). The CDMA convertor takes the 16-bit
  datum sign-extended to 17 bits (``cdma_hls_wrapper.cpp``, ``PIXEL_SIGNED_INT16``) and ends in
  ``IntSaturation<17, 16>`` (``cmod/hls/cdma_libs/cdma_cvt.cpp``, ``cfg_out_precision == ENUM_INT16``):
  ``SAT16(RSAT((x - CVT_OFFSET) * CVT_SCALE, CVT_TRUNCATE, 17))``.
* Padding: the whole 16-bit ``D_ZERO_PADDING_VALUE`` (cmod ``NV_NVDLA_csc.cpp``: INT8 sends
  ``pad_value.range(7,0)``, INT16 both bytes of ``pad_value``).
* Weights: kernel groups of ``atomic_k / 2`` kernels (seed 000: "For int16 and fp16 weight, one
  group has 16 kernels. For int8, one group has 32 kernels"; cmod ``NV_NVDLA_csc.h``
  ``KERNEL_PER_GROUP_INT16 16`` vs ``KERNEL_PER_GROUP_INT8 32``: a MAC cell multiplies one
  int16 kernel where it multiplies two int8 ones, ``NV_NVDLA_cmac.h``
  ``PARALLEL_KERNEL_NUM_INT16 8`` per CMAC half), channel slices of ``atomic_c`` *elements*
  (seed 000: "1x1x64-element small cubes. For int16/fp16 the small cube is 128 bytes";
  ``PARALLEL_CHANNEL_NUM 64`` for both precisions), 2 bytes per weight.
* CMAC: one step = sum over a 64-channel slice of 16 x 16-bit products (cmod
  ``calculation_int16``, ``sc_int<OUTPUT_BIT_WIDTH_INT16 = 44>``; RTL CACC input
  ``in_data[37:0]``), exact.
* CACC: 48-bit partial sums, saturated to 48 bits after every step, in both models (RTL
  ``NV_NVDLA_CACC_CALC_int16.v``: 49-bit sum, ``i_sat_pd3`` clamps on overflow; cmod
  ``NV_NVDLA_cacc.cpp`` ``mac2accu_b_transport``: ``MAX_INT_48BITS``/``MIN_INT_48BITS``).
  The final truncation is the INT8 rule on the 48-bit value (``{i_pre_sft_pd, 16'b0} >>>
  cfg_truncate``, guard bit, 15-bit sticky, ``i_sft_need_sat``), cmod: double rounding, legal
  ``CLIP_TRUNCATE`` 0..16 (``cacc_clip_truncate_ + 32 > 48`` fails).
* Output lanes ``K .. 16*ceil(K/16)-1`` (``atom / 2`` per atom) carry 0 into SDP, which runs
  with PROC_PRECISION INT16 (seed 000: on the fly SDP keeps the bit depth).
* CBUF: an entry holds ``atomic_c`` elements (128 bytes at INT16 on nv_full: nvdlav1 cmod
  ``CBUF_ENTRY_SIZE 128``; ``NV_NVDLA_cdma.cpp`` ``DirectConvDataResponseSequencerCommon``:
  ``atom_per_channel / 4`` full entries per pixel, then 1/2/3 remaining atoms take a quarter /
  half / whole entry), see :func:`feature_entries_per_slice`.

Entry points :func:`run_conv` (whole flying layer) and :func:`run_sdp_pdp` (SDP from memory
streaming into PDP).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import InvalidLayer, LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled, engine_memory
from .dma import CubeGeometry, read_cube
from .ops import rnd, sx

__all__ = [
    "ConvConfig",
    "cacc_truncate",
    "cdma_convert",
    "conv_accumulate",
    "decode_conv_config",
    "direct_conv",
    "pad_input",
    "read_dc_weights",
    "run_conv",
    "run_sdp_pdp",
    "weight_offsets",
]

I64 = np.int64
PSUM_BITS = 34  # RTL nv_small CACC partial-sum width (INT8)
PSUM_BITS_INT16 = 48  # nvdlav1 NV_NVDLA_CACC_CALC_int16.v / cmod MAX_INT_48BITS (INT16)
PREC_INT8, PREC_INT16 = 0, 1
_PREC_NAMES = {0: "INT8", 1: "INT16", 2: "FP16"}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


@dataclass(frozen=True)
class ConvConfig:
    """Decoded geometry of one direct-convolution layer (all sizes real, not minus one)."""

    in_w: int
    in_h: int
    in_c: int
    k_w: int
    k_h: int
    out_w: int
    out_h: int
    out_k: int
    stride_x: int = 1
    stride_y: int = 1
    dil_x: int = 1
    dil_y: int = 1
    pad_left: int = 0
    pad_top: int = 0
    pad_value: int = 0  # int8 (int16 at INT16), already sign-extended


def _addr(view: RegisterView, block: str, high: str, low: str) -> int:
    return (int(view.reg(block, high)) << 32) | int(view.reg(block, low))


# ---------------------------------------------------------------------------------------
# arithmetic stages (pure functions)


def cdma_convert(
    x: np.ndarray, *, offset: int, scale: int, truncate: int, out_bits: int = 8
) -> np.ndarray:
    """CDMA input convertor (doc section 2): ``SAT_out(RSAT((x - offset) * scale, truncate, 17))``."""
    v = (np.asarray(x, dtype=I64) - I64(offset)) * I64(scale)
    v = np.clip(rnd(v, truncate), -(1 << 16), (1 << 16) - 1)
    return np.clip(v, -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1)


def weight_offsets(k: int, c: int, kh: int, kw: int, atomic_k: int, atomic_c: int) -> np.ndarray:
    """Byte offset of weight ``[k, c, y, x]`` in the uncompressed direct-convolution format
    (seed 000): group ``k // atomic_k`` of ``kg`` kernels, channel slice ``c // atomic_c`` of
    ``cs`` channels, then ``((y*KW + x)*kg + k%atomic_k)*cs + c%atomic_c``. Shape (K, C, KH, KW)."""
    kk = np.arange(k, dtype=I64)[:, None, None, None]
    cc = np.arange(c, dtype=I64)[None, :, None, None]
    yy = np.arange(kh, dtype=I64)[None, None, :, None]
    xx = np.arange(kw, dtype=I64)[None, None, None, :]
    g, ki = kk // atomic_k, kk % atomic_k
    kg = np.minimum(atomic_k, k - g * atomic_k)  # kernels in this group
    s, ci = cc // atomic_c, cc % atomic_c
    cs = np.minimum(atomic_c, c - s * atomic_c)  # channels in this slice
    per_kernel = kh * kw * c
    group_base = g * atomic_k * per_kernel
    slice_base = s * atomic_c * kh * kw * kg
    return group_base + slice_base + ((yy * kw + xx) * kg + ki) * cs + ci


def read_dc_weights(
    mem: MemoryPort, base: int, k: int, c: int, kh: int, kw: int, atomic_k: int, atomic_c: int, bpe: int = 1
) -> np.ndarray:
    """Weights as int64 array (K, C, KH, KW) from the direct-convolution format at ``base``;
    ``bpe`` 2 reads little-endian int16 weights (offsets in elements, :func:`weight_offsets`)."""
    off = weight_offsets(k, c, kh, kw, atomic_k, atomic_c)
    raw = np.asarray(mem.read(base, k * c * kh * kw * bpe), dtype=np.uint8)
    return np.ascontiguousarray(raw).view(np.int8 if bpe == 1 else "<i2").astype(I64)[off]


def pad_input(d: np.ndarray, cfg: ConvConfig) -> tuple[np.ndarray, int, int]:
    """Embed the (C, H, W) cube in a pad-value frame covering every input position the
    output touches. Returns (padded, y0, x0): padded[:, y - y0, x - x0] = input (y, x)."""
    need_w = (cfg.out_w - 1) * cfg.stride_x + (cfg.k_w - 1) * cfg.dil_x + 1
    need_h = (cfg.out_h - 1) * cfg.stride_y + (cfg.k_h - 1) * cfg.dil_y + 1
    x0, y0 = -cfg.pad_left, -cfg.pad_top
    pw = max(need_w, cfg.pad_left + cfg.in_w)
    ph = max(need_h, cfg.pad_top + cfg.in_h)
    out = np.full((d.shape[0], ph, pw), cfg.pad_value, dtype=I64)
    h = min(cfg.in_h, ph - cfg.pad_top)
    w = min(cfg.in_w, pw - cfg.pad_left)
    out[:, cfg.pad_top : cfg.pad_top + h, cfg.pad_left : cfg.pad_left + w] = d[:, :h, :w]
    return out, y0, x0


def _tap(padded: np.ndarray, cfg: ConvConfig, ky: int, kx: int) -> np.ndarray:
    """Input values seen by kernel position (ky, kx) for every output: (C, OH, OW)."""
    y = ky * cfg.dil_y
    x = kx * cfg.dil_x
    return padded[
        :,
        y : y + (cfg.out_h - 1) * cfg.stride_y + 1 : cfg.stride_y,
        x : x + (cfg.out_w - 1) * cfg.stride_x + 1 : cfg.stride_x,
    ]


def conv_accumulate(
    d: np.ndarray, w: np.ndarray, cfg: ConvConfig, *, atomic_c: int = 8, semantics: str = "rtl",
    psum_bits: int = PSUM_BITS, cmod_saturates: bool = False,
) -> np.ndarray:  # fmt: skip
    """CMAC + CACC accumulation: (K, OH, OW) int64 sums of ``w[k,c,ky,kx] * d[c, y, x]``.

    ``d`` is the converted (C, H, W) input, ``w`` (K, C, KH, KW). INT8: RTL 34-bit saturating
    partial sums, one step per (channel slice, kernel position) with the slice outer
    ([DIFF] 4a); cmod: exact. INT16 (``psum_bits`` 48, ``cmod_saturates``): both models
    saturate the 48-bit partial sum after every step."""
    padded, _, _ = pad_input(d, cfg)
    k, c = w.shape[0], w.shape[1]
    bound = int(np.abs(w).sum(axis=(1, 2, 3)).max(initial=0)) * int(np.abs(padded).max(initial=0))
    lim = (1 << (psum_bits - 1)) - 1
    exact = (semantics == "cmod" and not cmod_saturates) or bound <= lim
    acc = np.zeros((k, cfg.out_h, cfg.out_w), dtype=I64)
    use_float = bound < (1 << 52)  # float64 BLAS is exact below 2^53
    if exact:
        for ky in range(cfg.k_h):
            for kx in range(cfg.k_w):
                t = _tap(padded, cfg, ky, kx).reshape(c, -1)
                wk = w[:, :, ky, kx]
                if use_float:
                    acc += (
                        (wk.astype(np.float64) @ t.astype(np.float64))
                        .astype(I64)
                        .reshape(acc.shape)
                    )
                else:
                    acc += (wk @ t).reshape(acc.shape)
        return acc
    lo = -(1 << (psum_bits - 1))
    # one step: |sum of atomic_c products| <= atomic_c * 2^30 (INT16), the running sum stays
    # within 48 bits + one step: int64 is exact
    for s in range(0, c, atomic_c):
        for ky in range(cfg.k_h):
            for kx in range(cfg.k_w):
                t = _tap(padded, cfg, ky, kx)[s : s + atomic_c].reshape(-1, cfg.out_h * cfg.out_w)
                acc += (w[:, s : s + atomic_c, ky, kx] @ t).reshape(acc.shape)
                np.clip(acc, lo, lim, out=acc)
    return acc


def cacc_truncate(
    a: np.ndarray, truncate: int, *, semantics: str = "rtl"
) -> tuple[np.ndarray, int]:
    """CACC clip (doc section 4): ``clamp(rnd(A, t), 32)`` and the saturation count.

    RTL (``NV_NVDLA_CACC_CALC_int8.v``): ``{A, 16'b0} >>> t`` gives the floor, a guard bit and
    a 15-bit sticky field; round up when ``guard & (A >= 0 | sticky)``. For ``t > 16`` the
    sticky field misses bits ``t-17 .. 0``, so a negative value just above a tie rounds down
    ([DIFF] 4b). Saturation when the floor leaves int32 or a positive INT32_MAX rounds up
    (rule 1.2). cmod: exact rounding, count when the rounded value leaves int32."""
    a = np.asarray(a, dtype=I64)
    t = int(truncate)
    if semantics == "rtl" and t > 0:
        q = a >> t
        guard = (a >> (t - 1)) & 1
        lo = max(t - 16, 0)
        sticky = ((a >> lo) & ((I64(1) << (t - 1 - lo)) - 1)) != 0
        inc = (guard == 1) & ((a >= 0) | sticky)
        flag = (q < INT32_MIN) | (q > INT32_MAX) | (inc & (q == INT32_MAX))
        out = np.where(flag, np.where(a < 0, INT32_MIN, INT32_MAX), q + inc)
        return out.astype(I64), int(np.count_nonzero(flag))
    r = rnd(a, t)
    out = np.clip(r, INT32_MIN, INT32_MAX)
    if semantics == "rtl":  # t == 0: clamp only
        flag = (a < INT32_MIN) | (a > INT32_MAX)
    else:
        flag = (r < INT32_MIN) | (r > INT32_MAX)
    return out, int(np.count_nonzero(flag))


def direct_conv(d: np.ndarray, w: np.ndarray, cfg: ConvConfig, *, truncate: int, atomic_c: int = 8,
                semantics: str = "rtl", precision: int = PREC_INT8) -> tuple[np.ndarray, int]:  # fmt: skip
    """Convolution + CACC clip: (K, OH, OW) int32 values as int64, saturation count.
    ``precision`` INT16 selects the 48-bit saturating partial sums of both models."""
    if precision == PREC_INT16:
        acc = conv_accumulate(d, w, cfg, atomic_c=atomic_c, semantics=semantics, psum_bits=PSUM_BITS_INT16,
                              cmod_saturates=True)  # fmt: skip
    else:
        acc = conv_accumulate(d, w, cfg, atomic_c=atomic_c, semantics=semantics)
    return cacc_truncate(acc, truncate, semantics=semantics)


# ---------------------------------------------------------------------------------------
# register decoding


def _check_modelled(view: RegisterView) -> int:
    """Refuse what the model does not cover; returns the precision code (INT8 0 / INT16 1)."""
    prec = int(view.field("CDMA", "D_MISC_CFG", "PROC_PRECISION"))
    for b in ("CDMA", "CSC", "CACC"):
        if view.field(b, "D_MISC_CFG", "CONV_MODE"):
            raise UnitNotModelled(f"{b}: Winograd convolution not modelled")
        p = int(view.field(b, "D_MISC_CFG", "PROC_PRECISION"))
        if p not in (PREC_INT8, PREC_INT16):
            raise UnitNotModelled(f"{b}: FP16 convolution not modelled; INT8/INT16 only")
        if p != prec:
            raise UnitNotModelled(f"{b}.D_MISC_CFG.PROC_PRECISION = {_PREC_NAMES.get(p, p)} differs from CDMA's "
                                  f"{_PREC_NAMES.get(prec, prec)}: mixed-precision convolution not modelled")  # fmt: skip
    for b in ("CDMA", "CSC"):
        i = int(view.field(b, "D_MISC_CFG", "IN_PRECISION"))
        if i != prec:
            raise UnitNotModelled(f"{b}: IN_PRECISION {_PREC_NAMES.get(i, i)} != PROC_PRECISION "
                                  f"{_PREC_NAMES.get(prec, prec)}: direct convolution converts no precision (seed 000)")
    if view.field("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT") or view.field(
        "CSC", "D_DATAIN_FORMAT", "DATAIN_FORMAT"
    ):
        raise UnitNotModelled("CDMA: image (pixel) input not modelled; feature input only")
    if view.field("CDMA", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT") or view.field(
        "CSC", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT"
    ):
        raise UnitNotModelled("CDMA: compressed weights (WMB/WGS) not modelled")
    for b in ("CDMA", "CSC", "CACC"):
        if view.field(b, "D_BATCH_NUMBER", "BATCHES"):
            raise UnitNotModelled(f"{b}: batch > 1 not modelled")
    if view.field("CSC", "D_POST_Y_EXTENSION", "Y_EXTENSION"):
        raise UnitNotModelled("CSC: channel post-extension not modelled")
    return prec


def feature_entries_per_slice(width: int, channels: int, options: ModelOptions, bpe: int = 1) -> int:
    """CBUF entries one input line (slice) of a feature cube needs.

    A CBUF entry holds ``mac_atomic_c`` channels (``cbuf_bank_width`` bytes at INT8); a line
    holds ``width`` pixels of ``C // atomic_c`` full entries each, and the remaining
    ``C mod atomic_c`` channels take ``t`` memory atoms rounded up to a power of two, so that
    ``atomic_c / (atom * t)`` pixels share one entry. This is the value every direct-
    convolution trace of nvdla/hw master carries in ``CDMA/CSC.D_ENTRY_PER_SLICE`` (all 42,
    on all six configurations); a smaller value makes slices overlap in CBUF. An entry is
    the profile's ``cbuf_entry_bytes`` (nv_full: 128 bytes at INT8 and INT16 alike).

    INT16 (``bpe`` 2): an entry holds ``atomic_c`` int16 channels (``2 * atomic_c`` bytes, the
    nvdlav1 cmod's 128-byte ``CBUF_ENTRY_SIZE``), the same rule in bytes: nvdlav1
    ``NV_NVDLA_cdma.cpp`` ``DirectConvDataResponseSequencerCommon`` computes
    ``(atom_per_channel / 4) * W`` plus ``W``, ``(W + 1) / 2`` or ``(W + 3) / 4`` for 3, 2, 1
    remaining atoms (v1 traces: 8 x 8 x 32 int16 -> ENTRIES 3, 19 x 19 x 64 -> 18)."""
    entry = max(options.cbuf_entry_bytes, options.mac_atomic_c * bpe)
    atoms_per_entry = max(entry // options.atom_bytes, 1)
    full, rest = divmod(channels * bpe, entry)
    tail = -(-rest // options.atom_bytes)
    tail_pad = 0 if tail == 0 else 1 << (tail - 1).bit_length()
    return -(-width * (full * atoms_per_entry + tail_pad) // atoms_per_entry)


def check_cbuf(view: RegisterView, options: ModelOptions) -> None:
    """Refuse CBUF programming the configuration cannot hold: data + weight banks beyond
    ``cbuf_banks``, CDMA and CSC disagreeing on banks or entries per slice, or fewer entries
    per slice than one input line needs (:func:`feature_entries_per_slice`)."""
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    for reg, flds in (("D_BANK", ("DATA_BANK", "WEIGHT_BANK")), ("D_ENTRY_PER_SLICE", ("ENTRIES",))):
        for fld in flds:
            if f("CDMA", reg, fld) != f("CSC", reg, fld):
                raise InvalidLayer(f"CDMA.{reg}.{fld} = {f('CDMA', reg, fld)} but CSC.{reg}.{fld} = "
                                   f"{f('CSC', reg, fld)}: the two must describe the same CBUF use")  # fmt: skip
    data, weight = f("CDMA", "D_BANK", "DATA_BANK") + 1, f("CDMA", "D_BANK", "WEIGHT_BANK") + 1
    if data + weight > options.cbuf_banks:
        raise InvalidLayer(f"CDMA.D_BANK: {data} data + {weight} weight banks exceed the configuration's "
                           f"{options.cbuf_banks} CBUF banks")  # fmt: skip
    w = f("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    c = f("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    bpe = 2 if f("CDMA", "D_MISC_CFG", "PROC_PRECISION") == PREC_INT16 else 1
    need = feature_entries_per_slice(w, c, options, bpe)
    have = f("CDMA", "D_ENTRY_PER_SLICE", "ENTRIES") + 1
    if have < need:
        raise InvalidLayer(f"CDMA.D_ENTRY_PER_SLICE.ENTRIES = {have - 1} (+1 = {have} entries) but a {w}-pixel "
                           f"line of {c} {'int16' if bpe == 2 else 'int8'} channels needs {need} CBUF entries "
                           f"of {options.mac_atomic_c * bpe if bpe == 2 else options.cbuf_bank_width} bytes")


def decode_conv_config(view: RegisterView) -> ConvConfig:
    f = lambda b, r, n: int(view.field(b, r, n))
    pad_bits = 16 if f("CSC", "D_MISC_CFG", "PROC_PRECISION") == PREC_INT16 else 8
    return ConvConfig(
        in_w=f("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT") + 1,
        in_h=f("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1,
        in_c=f("CSC", "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1,
        k_w=f("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1,
        k_h=f("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1,
        out_w=f("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1,
        out_h=f("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1,
        out_k=f("CSC", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1,
        stride_x=f("CSC", "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT") + 1,
        stride_y=f("CSC", "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT") + 1,
        dil_x=f("CSC", "D_DILATION_EXT", "X_DILATION_EXT") + 1,
        dil_y=f("CSC", "D_DILATION_EXT", "Y_DILATION_EXT") + 1,
        pad_left=f("CSC", "D_ZERO_PADDING", "PAD_LEFT"),
        pad_top=f("CSC", "D_ZERO_PADDING", "PAD_TOP"),
        pad_value=int(sx(f("CSC", "D_ZERO_PADDING_VALUE", "PAD_VALUE"), pad_bits)),
    )


def _fetch_feature(view: RegisterView, mem: MemoryPort, atom: int, bpe: int = 1) -> np.ndarray:
    """CDMA feature fetch + CVT: (C, H, W) int64 (real channels only); ``bpe`` 2 = INT16."""
    w = int(view.field("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH")) + 1
    h = int(view.field("CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT")) + 1
    c = int(view.field("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL")) + 1
    geo = CubeGeometry(
        base=_addr(view, "CDMA", "D_DAIN_ADDR_HIGH_0", "D_DAIN_ADDR_LOW_0"),
        line_stride=int(view.reg("CDMA", "D_LINE_STRIDE")),
        surface_stride=int(view.reg("CDMA", "D_SURF_STRIDE")),
        width=w,
        height=h,
        channels=c,
        group=atom // bpe,
        bpe=bpe,
    )
    d = read_cube(engine_memory(mem, view, "CDMA", "D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"), geo)[0][:c]
    if view.field("CDMA", "D_CVT_CFG", "CVT_EN"):
        d = cdma_convert(
            d,
            offset=int(sx(view.field("CDMA", "D_CVT_OFFSET", "CVT_OFFSET"), 16)),
            scale=int(sx(view.field("CDMA", "D_CVT_SCALE", "CVT_SCALE"), 16)),
            truncate=int(view.field("CDMA", "D_CVT_CFG", "CVT_TRUNCATE")),
            out_bits=8 * bpe,
        )
    return d


def run_conv(
    view: RegisterView, mem: MemoryPort, options: ModelOptions | None = None, live=None
) -> LayerResult:
    """One flying direct-convolution layer: CDMA/CSC/CMAC/CACC, then SDP (flying input) to
    memory, or on to PDP when ``SDP.D_FEATURE_MODE_CFG.OUTPUT_DST`` = PDP."""
    from .sdp import run_sdp

    options = options if options is not None else ModelOptions()
    sem = options.semantics
    atom = options.atom_bytes
    atomic_c, atomic_k = options.mac_atomic_c, options.mac_atomic_k
    prec = _check_modelled(view)
    bpe = 2 if prec == PREC_INT16 else 1
    if bpe == 2:
        atomic_k = max(atomic_k // 2, 1)  # one int16 kernel per MAC cell where int8 has two
    check_cbuf(view, options)
    cfg = decode_conv_config(view)
    d = _fetch_feature(view, mem, atom, bpe)
    if d.shape[1:] != (cfg.in_h, cfg.in_w) or d.shape[0] != cfg.in_c:
        raise UnitNotModelled(f"CDMA input cube {d.shape[::-1]} differs from CSC DATAIN_SIZE_EXT "
                              f"{(cfg.in_w, cfg.in_h, cfg.in_c)} (channel extension not modelled)")  # fmt: skip
    wc = int(view.field("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT")) + 1
    wk = int(view.field("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL")) + 1
    if wc != cfg.in_c or wk != cfg.out_k:
        raise UnitNotModelled(
            f"CSC: weight C/K {wc}/{wk} differ from data C {cfg.in_c} / output K {cfg.out_k}"
        )
    bpk = int(view.field("CDMA", "D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL")) + 1
    if bpk != cfg.k_w * cfg.k_h * cfg.in_c * bpe:
        raise UnitNotModelled(
            f"CDMA: BYTE_PER_KERNEL {bpk} != {cfg.k_w}x{cfg.k_h}x{cfg.in_c}x{bpe} bytes (not modelled)"
        )
    w = read_dc_weights(
        engine_memory(mem, view, "CDMA", "D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE"),
        _addr(view, "CDMA", "D_WEIGHT_ADDR_HIGH", "D_WEIGHT_ADDR_LOW"),
        cfg.out_k, cfg.in_c, cfg.k_h, cfg.k_w, atomic_k, atomic_c, bpe,
    )  # fmt: skip
    y, sat = direct_conv(d, w, cfg, truncate=int(view.field("CACC", "D_CLIP_CFG", "CLIP_TRUNCATE")), atomic_c=atomic_c,
                         semantics=sem, precision=prec)  # fmt: skip
    lanes = atom // bpe  # output channels per memory atom
    kpad = -(-cfg.out_k // lanes) * lanes
    x = np.zeros((kpad, cfg.out_h, cfg.out_w), dtype=I64)
    x[: cfg.out_k] = y
    notes: list[str] = []
    stats: dict[tuple[str, str], int] = {("CACC", "D_OUT_SATURATION"): min(sat, 0xFFFFFFFF)}
    sdp_res = run_sdp(view, mem, options, live=live, source=x)
    stats.update(sdp_res.stats)
    notes.extend(sdp_res.notes)
    return LayerResult(stats=stats, elements=sdp_res.elements, notes=notes)


def run_sdp_pdp(
    view: RegisterView, mem: MemoryPort, options: ModelOptions | None = None, live=None
) -> LayerResult:
    """SDP reading memory, its output streamed on the fly into PDP, PDP writing memory."""
    from .sdp import run_sdp

    options = options if options is not None else ModelOptions()
    return run_sdp(view, mem, options, live=live)
