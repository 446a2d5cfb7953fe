"""Bit-exact numpy model of NVDLA's direct-convolution pipeline, INT8 (all profiles), INT16 and FP16 (nv_full).

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

FP16 (nv_full; rules of the nvdlav1 C model, bit for bit against it): a CMAC step multiplies
one 64-channel slice in block floating point (:func:`cmac_fp16.fp16_mac_steps`: exponents split in a
coarse and a fine part, products aligned to the largest coarse sum by the Booth/carry-save
multiplier with its truncation, +-0 channels masked out, INF taken as 65536, the first NaN
weight, else datum, propagated with its payload) into "FP44"; CACC adds the steps in CSC order
(slice outer, kernel position inner) into an "FP48" accumulator with its own alignment,
normalisation and rounding (:func:`cacc_fp16.fp48_add`) and hands SDP FP32 bit patterns
(:func:`cacc_fp16.fp48_to_fp32`). Both are compiled loops (numba, :mod:`..jit`), imported with the
first FP16 layer. ``D_NAN_FLUSH_TO_ZERO`` zeroes NaN features in CDMA; the CDMA
convertor does not take FP16 features (the C model fails such a layer).

Entry points :func:`run_conv` (whole flying layer) and :func:`run_sdp_pdp` (SDP from memory
streaming into PDP). The package follows the hardware's blocks: ``cdma`` (feature fetch,
convertor, weight reading), ``csc`` (geometry, padding, CBUF checks), ``cmac`` (multiply),
``cacc`` (accumulate, truncate); optional stages are imported by :func:`run_conv` only when a
layer needs them:

* ``image.fetch_image(view, mem, options) -> np.ndarray`` when ``CDMA.D_DATAIN_FORMAT`` is
  pixel (image) input: the (C, H, W) feature cube after the CDMA pixel path (channel
  pre-extension) and convertor, in the dtype the MAC takes (int64 values at INT8/INT16,
  float16-valued at FP16 as ``np.float16``, or the 16-bit patterns as int64), and
  ``image.image_conv_config(view, cfg) -> ConvConfig``, the geometry the MAC then applies to it
  (the pre-extended cube is an ordinary 1-wide convolution);
* ``compressed.read_compressed_weights(view, mem, options, k, c, kh, kw) -> np.ndarray`` when
  ``CDMA.D_WEIGHT_FORMAT`` is compressed: weights (K, C, KH, KW), same dtype rule.

A missing module leaves the layer refused as :class:`UnitNotModelled`.
"""

from __future__ import annotations

import numpy as np

from ..base import InvalidLayer, LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled, engine_memory
from ._common import I64, PREC_FP16, PREC_INT8, PREC_INT16, PREC_NAMES, PSUM_BITS, PSUM_BITS_INT16, reg_addr
from .cacc import cacc_truncate, conv_accumulate, direct_conv
from .cdma import cdma_convert, fetch_feature, read_dc_weights, weight_offsets
from .cmac import mac_step
from .csc import ConvConfig, check_cbuf, decode_conv_config, feature_entries_per_slice, pad_input

__all__ = [
    "ConvConfig",
    "PSUM_BITS",
    "PSUM_BITS_INT16",
    "cacc_truncate",
    "booth_product",
    "cdma_convert",
    "fp16_conv_accumulate",
    "fp16_mac_step",
    "fp48_add",
    "fp48_to_fp32",
    "check_cbuf",
    "conv_accumulate",
    "decode_conv_config",
    "direct_conv",
    "feature_entries_per_slice",
    "mac_step",
    "pad_input",
    "read_dc_weights",
    "run_conv",
    "run_sdp_pdp",
    "is_image_input",
    "is_compressed_weight",
    "weight_offsets",
]


_FP16_NAMES = {"booth_product": "cmac_fp16", "fp16_mac_step": "cmac_fp16", "fp16_conv_accumulate": "cacc_fp16",
               "fp48_add": "cacc_fp16", "fp48_to_fp32": "cacc_fp16"}


def __getattr__(name: str) -> object:
    """The FP16 MAC and accumulator on first use: their modules compile kernels (numba), which
    INT8/INT16 layers and the CLI's start need not pay for."""
    if name in _FP16_NAMES:
        import importlib

        return getattr(importlib.import_module(f".{_FP16_NAMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _fp16_bits(a: np.ndarray) -> np.ndarray:
    """FP16 bit patterns (int64 0..0xFFFF) of ``a``: float16 values, or 16-bit integers as read."""
    a = np.asarray(a)
    if a.dtype == np.float16:
        return a.view(np.uint16).astype(I64)
    return a.astype(I64) & 0xFFFF


def is_image_input(view: RegisterView) -> bool:
    """``CDMA.D_DATAIN_FORMAT.DATAIN_FORMAT`` = PIXEL (1): image input (seed 000 pixel formats)."""
    return int(view.field("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT")) == 1


def is_compressed_weight(view: RegisterView) -> bool:
    """``CDMA.D_WEIGHT_FORMAT.WEIGHT_FORMAT`` = COMPRESSED (1): WMB/WGS sparse weights."""
    return int(view.field("CDMA", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT")) == 1


def _fetch_input(view: RegisterView, mem: MemoryPort, options: ModelOptions, bpe: int) -> np.ndarray:
    """CDMA input: pixel path (``image.fetch_image``, imported only here) or feature fetch."""
    if is_image_input(view):
        try:
            from .image import fetch_image
        except ImportError:
            raise UnitNotModelled("CDMA: image (pixel) input not modelled; feature input only") from None
        return fetch_image(view, mem, options)
    return fetch_feature(view, mem, options.atom_bytes, bpe)


def _read_weights(view: RegisterView, mem: MemoryPort, options: ModelOptions, cfg: ConvConfig, atomic_k: int,
                  bpe: int) -> np.ndarray:  # fmt: skip
    """Weights (K, C, KH, KW): compressed (``compressed.read_compressed_weights``) or the
    uncompressed direct-convolution format (:func:`read_dc_weights`)."""
    if is_compressed_weight(view):
        try:
            from .compressed import read_compressed_weights
        except ImportError:
            raise UnitNotModelled("CDMA: compressed weights (WMB/WGS) not modelled") from None
        return read_compressed_weights(view, mem, options, cfg.out_k, cfg.in_c, cfg.k_h, cfg.k_w)
    return read_dc_weights(
        engine_memory(mem, view, "CDMA", "D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE"),
        reg_addr(view, "CDMA", "D_WEIGHT_ADDR_HIGH", "D_WEIGHT_ADDR_LOW"),
        cfg.out_k, cfg.in_c, cfg.k_h, cfg.k_w, atomic_k, options.mac_atomic_c, bpe,
    )  # fmt: skip


def _read_post_weights(view: RegisterView, mem: MemoryPort, options: ModelOptions, k: int, ce: int, r: int,
                       atomic_k: int, bpe: int) -> np.ndarray:  # fmt: skip
    """Post-extended image weights as the MAC lanes of each step (``image.post_weights``): from the
    post-extended image weight format (``image.post_weight_offsets``) or, compressed, from the
    direct-convolution format of the ``(K, post*Ce, R/post, 1)`` stacked kernels."""
    from .image import post_weight_offsets, post_weights

    post = 1 << int(view.field("CSC", "D_POST_Y_EXTENSION", "Y_EXTENSION"))
    if is_compressed_weight(view):
        from .compressed import read_compressed_weights

        st = read_compressed_weights(view, mem, options, k, ce * post, r // post, 1)  # channel j*Ce + c, row s
        w = st[..., 0].reshape(k, post, ce, r // post).transpose(0, 2, 3, 1).reshape(k, ce, r)
    else:
        port = engine_memory(mem, view, "CDMA", "D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE")
        raw = np.asarray(port.read(reg_addr(view, "CDMA", "D_WEIGHT_ADDR_HIGH", "D_WEIGHT_ADDR_LOW"), k * ce * r * bpe),
                         dtype=np.uint8)  # fmt: skip
        w = np.ascontiguousarray(raw).view(np.int8 if bpe == 1 else "<i2").astype(I64)[
            post_weight_offsets(k, ce, r, post, atomic_k)]
    return post_weights(w, view, options.mac_atomic_c)


def _check_modelled(view: RegisterView) -> int:
    """Refuse what the model does not cover; returns the precision code (INT8 0 / INT16 1 / FP16 2)."""
    prec = int(view.field("CDMA", "D_MISC_CFG", "PROC_PRECISION"))
    wino = int(view.field("CDMA", "D_MISC_CFG", "CONV_MODE")) == 1  # winograd.py checks the other blocks agree
    image = is_image_input(view)
    for b in ("CDMA", "CSC", "CACC"):
        if view.field(b, "D_MISC_CFG", "CONV_MODE") and not wino:
            raise UnitNotModelled(f"{b}: CONV_MODE WINOGRAD while CDMA's is DIRECT: mixed modes not modelled")
        p = int(view.field(b, "D_MISC_CFG", "PROC_PRECISION"))
        if p not in (PREC_INT8, PREC_INT16, PREC_FP16):
            raise InvalidLayer(f"{b}.D_MISC_CFG.PROC_PRECISION = {p}: not a precision (INT8 0, INT16 1, FP16 2)")
        if p != prec:
            raise UnitNotModelled(f"{b}.D_MISC_CFG.PROC_PRECISION = {PREC_NAMES.get(p, p)} differs from CDMA's "
                                  f"{PREC_NAMES.get(prec, prec)}: mixed-precision convolution not modelled")  # fmt: skip
    for b in ("CDMA", "CSC"):
        i = int(view.field(b, "D_MISC_CFG", "IN_PRECISION"))
        if i != prec and not image:  # the pixel path converts (image.fetch_image checks it)
            raise UnitNotModelled(f"{b}: IN_PRECISION {PREC_NAMES.get(i, i)} != PROC_PRECISION "
                                  f"{PREC_NAMES.get(prec, prec)}: direct convolution converts no precision (seed 000)")
    if int(view.field("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT")) != int(view.field("CSC", "D_DATAIN_FORMAT", "DATAIN_FORMAT")):
        raise UnitNotModelled("CDMA and CSC D_DATAIN_FORMAT.DATAIN_FORMAT differ (feature vs pixel): not modelled")
    if int(view.field("CDMA", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT")) != int(view.field("CSC", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT")):
        raise UnitNotModelled("CDMA and CSC D_WEIGHT_FORMAT.WEIGHT_FORMAT differ (uncompressed vs compressed): not modelled")
    nb = {b: int(view.field(b, "D_BATCH_NUMBER", "BATCHES")) for b in ("CDMA", "CSC", "CACC")}
    nb["SDP"] = int(view.field("SDP", "D_FEATURE_MODE_CFG", "BATCH_NUMBER"))
    if len(set(nb.values())) > 1:
        raise UnitNotModelled(f"batch counts differ between CDMA/CSC/CACC/SDP ({nb}): mixed batch programming not modelled")
    if nb["CDMA"] and (image or wino):
        raise UnitNotModelled("batch > 1 with image input or Winograd not modelled (direct convolution of feature data only)")
    if nb["CDMA"]:
        cs = int(view.field("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL")) + 1
        need = int(view.reg("CDMA", "D_SURF_STRIDE")) * -(-cs * (1 if prec == PREC_INT8 else 2) // 32)
        if int(view.reg("CDMA", "D_BATCH_STRIDE")) < need:
            raise InvalidLayer(f"CDMA.D_BATCH_STRIDE {int(view.reg('CDMA', 'D_BATCH_STRIDE'))} < surface stride x surfaces "
                               f"{need} (cmod NV_NVDLA_cdma.cpp 'invalid configuration batch_stride')")
    if view.field("CSC", "D_POST_Y_EXTENSION", "Y_EXTENSION") and not is_image_input(view):
        raise UnitNotModelled("CSC: channel post-extension not modelled")
    if prec == PREC_FP16 and not image and view.field("CDMA", "D_CVT_CFG", "CVT_EN"):
        raise InvalidLayer("CDMA.D_CVT_CFG.CVT_EN with FP16 feature input: the CDMA convertor takes no FP16 feature data "
                           "(cmod/cdma/NV_NVDLA_cdma.cpp fails 'Incorrect configuration on conversion')")
    return prec


def run_conv(
    view: RegisterView, mem: MemoryPort, options: ModelOptions | None = None, live=None
) -> LayerResult:
    """One flying direct-convolution layer: CDMA/CSC/CMAC/CACC, then SDP (flying input) to
    memory, or on to PDP when ``SDP.D_FEATURE_MODE_CFG.OUTPUT_DST`` = PDP. Winograd
    (``CONV_MODE`` 1) goes through :func:`winograd.winograd_conv` instead of CDMA..CACC."""
    options = options if options is not None else ModelOptions()
    atom = options.atom_bytes
    atomic_k = options.mac_atomic_k
    prec = _check_modelled(view)
    bpe = 1 if prec == PREC_INT8 else 2
    if bpe == 2:
        atomic_k = max(atomic_k // 2, 1)  # one int16 kernel per MAC cell where int8 has two
    check_cbuf(view, options)
    if int(view.field("CDMA", "D_MISC_CFG", "CONV_MODE")) == 1:  # Winograd (winograd.py, imported only here)
        try:
            from .winograd import winograd_conv
        except ImportError:
            raise UnitNotModelled("Winograd convolution not modelled") from None
        y, sat, (out_k, out_h, out_w) = winograd_conv(view, mem, options)
        return _to_sdp(view, mem, options, live, y, sat, out_k, out_h, out_w, atom // bpe)
    nb = int(view.field("CDMA", "D_BATCH_NUMBER", "BATCHES")) + 1
    if nb > 1:  # batches: the same layer on B cubes, weights shared (CSC interleaves them per stripe)
        ys = [_conv_one(view, mem, options, prec, bpe, atomic_k, b) for b in range(nb)]
        y = np.stack([t[0] for t in ys])
        cfg = ys[0][2]
        return _to_sdp(view, mem, options, live, y, sum(t[1] for t in ys), cfg.out_k, cfg.out_h, cfg.out_w, atom // bpe)
    y, sat, cfg = _conv_one(view, mem, options, prec, bpe, atomic_k, 0)
    return _to_sdp(view, mem, options, live, y, sat, cfg.out_k, cfg.out_h, cfg.out_w, atom // bpe)


def _conv_one(view: RegisterView, mem: MemoryPort, options: ModelOptions, prec: int, bpe: int, atomic_k: int,
              batch: int) -> tuple[np.ndarray, int, ConvConfig]:  # fmt: skip
    """CDMA..CACC of one (batch) cube: ((K, OH, OW) values, CACC saturation count, geometry)."""
    sem = options.semantics
    atomic_c = options.mac_atomic_c
    cfg = decode_conv_config(view)
    d = _fetch_input(view, mem, options, bpe) if batch == 0 else fetch_feature(view, mem, options.atom_bytes, bpe, batch)
    post = 1 << int(view.field("CSC", "D_POST_Y_EXTENSION", "Y_EXTENSION"))
    kh = cfg.k_h  # the kernel height before post-extension
    if is_image_input(view):  # the pre-extended cube is an ordinary 1-wide convolution (image.image_conv_config)
        from .image import image_conv_config

        cfg = image_conv_config(view, cfg, atomic_c)
    if d.shape[1:] != (cfg.in_h, cfg.in_w) or d.shape[0] != cfg.in_c:
        raise UnitNotModelled(f"CDMA input cube {d.shape[::-1]} differs from CSC DATAIN_SIZE_EXT "
                              f"{(cfg.in_w, cfg.in_h, cfg.in_c)} (channel extension not modelled)")  # fmt: skip
    wc = int(view.field("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT")) + 1
    wk = int(view.field("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL")) + 1
    if (wc if post == 1 else atomic_c) != cfg.in_c or wk != cfg.out_k:
        raise UnitNotModelled(
            f"CSC: weight C/K {wc}/{wk} differ from data C {cfg.in_c} / output K {cfg.out_k}"
        )
    bpk = int(view.field("CDMA", "D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL")) + 1
    want = cfg.k_w * cfg.k_h * cfg.in_c * bpe if post == 1 else kh * wc * bpe  # cmod csc byte_per_kernel
    if bpk != want:
        raise UnitNotModelled(f"CDMA: BYTE_PER_KERNEL {bpk} != {want} bytes of the layer's kernel (not modelled)")
    w = _read_weights(view, mem, options, cfg, atomic_k, bpe) if post == 1 else \
        _read_post_weights(view, mem, options, wk, wc, kh, atomic_k, bpe)
    if prec == PREC_FP16:
        from .cacc_fp16 import fp16_conv_accumulate

        y, sat = fp16_conv_accumulate(_fp16_bits(d), _fp16_bits(w), cfg, atomic_c=atomic_c), 0
    else:
        y, sat = direct_conv(d, w, cfg, truncate=int(view.field("CACC", "D_CLIP_CFG", "CLIP_TRUNCATE")),
                             atomic_c=atomic_c, semantics=sem, precision=prec)  # fmt: skip
    return y, sat, cfg


def _to_sdp(view: RegisterView, mem: MemoryPort, options: ModelOptions, live, y: np.ndarray, sat: int, out_k: int,  # noqa: ANN001
            out_h: int, out_w: int, lanes: int) -> LayerResult:  # fmt: skip
    """CACC -> SDP on the fly: output lanes ``K .. lanes*ceil(K/lanes)-1`` carry 0; the SDP writes memory or PDP."""
    from ..sdp import run_sdp

    kpad = -(-out_k // lanes) * lanes
    x = np.zeros((*y.shape[:-3], kpad, out_h, out_w), dtype=I64)  # (B, Kpad, H, W) with batches
    x[..., :out_k, :, :] = y
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
    from ..sdp import run_sdp

    options = options if options is not None else ModelOptions()
    return run_sdp(view, mem, options, live=live)
