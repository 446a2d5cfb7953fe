"""Winograd convolution F(2x2, 3x3) of NVDLA nv_full, INT8/INT16/FP16 (rules of the nvdlav1 C model).

Conventions below cite ``/work/nvdla-hw-v1/cmod`` (branch nvdlav1).

* CDMA (``cdma/NV_NVDLA_cdma.cpp`` ``WinoConvDataResponseSequencerCommon``, ~l.2972-3240): the
  feature cube is read in whole 32-byte atoms (padding lanes of the last surface included), framed
  by ``D_ZERO_PADDING`` left/right/top/bottom filled with ``D_ZERO_PADDING_VALUE`` (INT8: its low
  byte, ``atom_pad_value_int16`` l.3039; INT16: all 16 bits, l.3045), then channel-extended for
  ``D_CONV_STRIDE`` (sx, sy): extended pixel ``(y', x')``, channel
  ``((dy*sx + dx)*surfaces + s)*lanes + l`` holds padded pixel ``(y'*sy + dy, x'*sx + dx)`` of
  surface ``s``, lane ``l`` (``coor_channel_4x4x4``, l.3199). The padded size must be a multiple of
  ``4*sx`` / ``4*sy`` (the C model FAILs otherwise). The CDMA convertor is not applied in
  Winograd mode (only the direct-convolution response path calls ``hls_convertor``).
* CSC (``csc/NV_NVDLA_csc.cpp`` ``SendDataToMacSequencerWinoConvCommon``, ~l.1898-2290): for each
  2x2 output tile ``(ty, tx)`` the 4x4 input tile at ``(2*ty, 2*tx)`` of the extended cube goes
  through the PRA (``hls/csc_libs/csc_cvt.cpp`` ``NV_NVDLA_CSC_pra_cell``): ``V = B^T d B`` with
  ``B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]`` (17/18-bit exact), then
  ``IntShiftRight<18, trunc, 8|16>`` (csc_cvt.cpp l.243-247, ``hls/include/nvdla_int.h`` l.34; ``ACFIXT`` = ``AC_RND_INF``,
  ``AC_SAT``): round half away from zero by ``D_PRA_CFG.PRA_TRUNCATE``, saturate to 8/16 bits.
  Input channels must be a multiple of 4 (``cube_in_channel%4`` FAIL), output W*H/4 tiles a
  multiple of 4, the weight kernel 4x4 (``assert(kernel_width == 4 && kernel_height == 4)``).
* Weights: the 4x4 pre-transformed kernels (software does ``G g G^T``, seed 000 phase 1) in
  groups of 32 (INT8) / 16 (INT16) kernels, 4x4x4-element cubes scanned channel-block -> kernel,
  inside a cube position (y, x) outer, 4 channels inner (seed 000 phase 2, ``nvdla.weight.winograd``).
  Compressed (``D_WEIGHT_FORMAT``): the WMB/data streams expand into that same surface
  (:func:`compressed.decompressed_weight_bytes`; cmod ``get_decompressed_weight`` in
  ``SendWeightToMacSequencerWinoConvCommon`` l.2518).
* CMAC (``cmac/NV_NVDLA_cmac.h`` ``calculation_int8``/``calculation_int16`` ``winograd_op_``, l.131-160 /
  l.231-254; input order ``NV_NVDLA_csc.cpp`` l.2150, 2176, 2218): per
  step (4 channels) ``M = sum_c U*V`` elementwise, then ``Y = A^T M A`` with
  ``A^T = [[1,1,1,0],[0,1,-1,-1]]`` (phase 2/3), exact in ``sc_int<22>`` / ``sc_int<44>``.
* CACC: the 2x2 results accumulate over the steps like direct convolution (INT8 exact, INT16
  saturated to 48 bits after every step) and are truncated by ``D_CLIP_CFG`` (:func:`cacc.cacc_truncate`).
  RTL semantics (``--model-semantics rtl``): the direct path's RTL CACC rules are applied (INT8 34-bit
  partial sums saturated per step, RTL rounding); the Winograd datapath has only been compared with
  the C model (no nv_full RTL run), so treat RTL-semantics Winograd goldens as unverified.
* FP16: the PRA runs in fp17 (``Fp16ToFp17``, ``FpAdd/FpSub<6,10>`` in the order of
  ``csc_cvt.cpp``, then ``Fp17ToFp16``: INF/overflow -> +-65504, :func:`pra_fp16`); ``D_NAN_FLUSH_TO_ZERO``
  flushes NaN (pad values included) as the CDMA writes CBUF. A CMAC step (4 channels x 16 positions =
  64 products) aligns every product to the step's largest coarse exponent sum with the Booth
  multiplier of direct convolution (:func:`cmac_fp16.fp16_mac_groups`), sums the 4 channels per position
  and applies the integer phases 2/3 (``calculation_fp16`` ``pp_phase1..3``, cmac.h l.717-757): four FP44 results
  sharing one exponent; a NaN among the 64 makes all four that NaN (``cal_fp16_nan``). CACC adds
  the steps in FP48 (:func:`cacc_fp16.fp48_add`) and hands SDP FP32 patterns (:func:`cacc_fp16.fp48_to_fp32`).
"""

from __future__ import annotations

import numpy as np

from ..base import InvalidLayer, MemoryPort, ModelOptions, RegisterView, UnitNotModelled, engine_memory
from ..dma import CubeGeometry, read_cube
from ..ops import sx
from ._common import I64, PREC_FP16, PREC_INT8, PSUM_BITS, PSUM_BITS_INT16, reg_addr
from .cacc import cacc_truncate

__all__ = ["BT", "AT", "is_winograd", "pra", "winograd_conv", "winograd_input", "winograd_output",
           "winograd_weight_offsets", "check_winograd_cbuf", "fp16_wino_mac_steps"]

#: PRA input transform B^T (hls/csc_libs/csc_cvt.cpp, C^T)
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=I64)
#: CMAC output transform A^T (cmod/cmac/NV_NVDLA_cmac.h, winograd phase 2/3)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=I64)
_BLOCKS = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")


def is_winograd(view: RegisterView) -> bool:
    """``D_MISC_CFG.CONV_MODE`` = WINOGRAD (1) in CDMA."""
    return int(view.field("CDMA", "D_MISC_CFG", "CONV_MODE")) == 1


def pra(tiles: np.ndarray, truncate: int, bits: int) -> np.ndarray:
    """PRA of (..., 4, 4) integer tiles: ``sat_bits(round_half_away(B^T d B / 2^truncate))``."""
    t = np.einsum("ij,...jk,lk->...il", BT, np.asarray(tiles, dtype=I64), BT)
    s = int(truncate)
    if s:
        half = I64(1) << (s - 1)
        mag = (np.abs(t) + half) >> s
        t = np.where(t < 0, -mag, mag)
    lim = 1 << (bits - 1)
    return np.clip(t, -lim, lim - 1)


def pra_fp16(tiles: np.ndarray) -> np.ndarray:
    """FP16 PRA of (..., 4, 4) FP16 bit patterns (int64), ``csc_cvt.cpp`` operand order:
    rows ``r0-r2, r1+r2, r2-r1, r1-r3`` then the same on the columns, in fp17, then to FP16."""
    from ..fp16 import fp16_to_fp17_bits, fp17_add_bits
    from ..fp16_extra import fp17_to_fp16_bits

    def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fp17_add_bits(a, np.asarray(b, dtype=I64) ^ (1 << 16))  # FpSub: b's sign flipped

    t = fp16_to_fp17_bits(np.asarray(tiles, dtype=I64) & 0xFFFF).astype(I64)
    r = [t[..., i, :] for i in range(4)]
    m = np.stack([sub(r[0], r[2]), fp17_add_bits(r[1], r[2]), sub(r[2], r[1]), sub(r[1], r[3])], axis=-2).astype(I64)
    c = [m[..., i] for i in range(4)]
    f = np.stack([sub(c[0], c[2]), fp17_add_bits(c[1], c[2]), sub(c[2], c[1]), sub(c[1], c[3])], axis=-1)
    return fp17_to_fp16_bits(f).astype(I64)


def fp16_wino_mac_steps(w_bits: np.ndarray, d_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S FP16 Winograd CMAC steps: weights (S, K, 64) and data (S, 64, N), element ``pos*4 + channel``.
    Every product is aligned to the step's largest coarse exponent sum by the Booth multiplier
    (:func:`.cmac_fp16.fp16_mac_groups`), the 4 channels of each position summed, then ``A^T M A``.
    Returns FP44 ``(exp (S, K, N), mant (S, K, N, 2, 2))``: the four outputs share ``exp``; a
    NaN among the 64 makes all four that NaN (:func:`.cmac_fp16.nan_steps`)."""
    from .cmac_fp16 import FP44_NAN_EXP, fp16_mac_groups, nan_steps

    w = np.asarray(w_bits, dtype=I64) & 0xFFFF
    d = np.asarray(d_bits, dtype=I64) & 0xFFFF
    exp, m = fp16_mac_groups(w, d, 4)  # m: (S, K, N, 16), position y*4 + x
    mant = winograd_output(m.reshape(*m.shape[:3], 4, 4))
    wnan = ((w & 0x7C00) == 0x7C00) & ((w & 0x3FF) != 0)
    dnan = ((d & 0x7C00) == 0x7C00) & ((d & 0x3FF) != 0)
    if wnan.any() or dnan.any():
        is_nan, nm = nan_steps(w, d, wnan, dnan)
        mant = np.where(is_nan[..., None, None], nm[..., None, None], mant)
        exp = np.where(is_nan, FP44_NAN_EXP, exp)
    return exp.astype(I64), mant.astype(I64)


def winograd_output(m: np.ndarray) -> np.ndarray:
    """``A^T M A`` of (..., 4, 4) -> (..., 2, 2)."""
    return np.einsum("ij,...jk,lk->...il", AT, m, AT)


def winograd_weight_offsets(k: int, c: int, atomic_k: int) -> np.ndarray:
    """Element offset of weight ``[k, c, y, x]`` (K, C, 4, 4) in the Winograd phase-2 format."""
    kk = np.arange(k, dtype=I64)[:, None, None, None]
    cc = np.arange(c, dtype=I64)[None, :, None, None]
    yy = np.arange(4, dtype=I64)[None, None, :, None]
    xx = np.arange(4, dtype=I64)[None, None, None, :]
    g, ki = kk // atomic_k, kk % atomic_k
    kg = np.minimum(atomic_k, k - g * atomic_k)
    return g * atomic_k * c * 16 + ((cc // 4) * kg + ki) * 64 + (yy * 4 + xx) * 4 + cc % 4


def check_winograd_cbuf(view: RegisterView, lanes: int, bpe: int) -> None:
    """Entries per slice: CDMA ``(W_ext/4)*surfaces*sx*sy`` (NV_NVDLA_cdma.cpp
    ``cbuf_entry_per_slice/4``), CSC ``W_ext*bpe*C_ext/128`` (NV_NVDLA_csc.cpp); both FAIL otherwise."""
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    w = f("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    c = f("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    sxs, sys_ = f("CDMA", "D_CONV_STRIDE", "CONV_X_STRIDE") + 1, f("CDMA", "D_CONV_STRIDE", "CONV_Y_STRIDE") + 1
    tw = w + f("CDMA", "D_ZERO_PADDING", "PAD_LEFT") + f("CDMA", "D_ZERO_PADDING", "PAD_RIGHT")
    surfaces = -(-c // lanes)
    need = (tw // (4 * sxs)) * surfaces * sxs * sys_
    have = f("CDMA", "D_ENTRY_PER_SLICE", "ENTRIES") + 1
    if have != need:
        raise InvalidLayer(f"CDMA.D_ENTRY_PER_SLICE.ENTRIES = {have - 1}: Winograd needs {need - 1} "
                           f"(cmod/cdma/NV_NVDLA_cdma.cpp WinoConvDataResponseSequencerCommon)")
    cw = f("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT") + 1
    cc = f("CSC", "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1
    if cw * bpe * cc // 128 != have:
        raise InvalidLayer(f"CSC.D_ENTRY_PER_SLICE = {have - 1} but CSC DATAIN_SIZE_EXT {cw}x{cc} needs "
                           f"{cw * bpe * cc // 128 - 1} (cmod/csc/NV_NVDLA_csc.cpp SendDataToMacSequencerWinoConvCommon)")


def winograd_input(view: RegisterView, mem: MemoryPort, options: ModelOptions, bpe: int) -> np.ndarray:
    """CDMA Winograd fetch: the padded, channel-extended cube (C_ext, H_ext, W_ext) int64."""
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    atom = options.atom_bytes
    lanes = atom // bpe
    w = f("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    h = f("CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
    c = f("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    pl, pr = f("CDMA", "D_ZERO_PADDING", "PAD_LEFT"), f("CDMA", "D_ZERO_PADDING", "PAD_RIGHT")
    pt, pb = f("CDMA", "D_ZERO_PADDING", "PAD_TOP"), f("CDMA", "D_ZERO_PADDING", "PAD_BOTTOM")
    sxs, sys_ = f("CDMA", "D_CONV_STRIDE", "CONV_X_STRIDE") + 1, f("CDMA", "D_CONV_STRIDE", "CONV_Y_STRIDE") + 1
    tw, th = pl + w + pr, pt + h + pb
    if tw % (4 * sxs) or th % (4 * sys_):
        raise InvalidLayer(f"CDMA Winograd: padded input {tw}x{th} is not a multiple of 4*stride ({4 * sxs}x{4 * sys_}) "
                           "(cmod/cdma/NV_NVDLA_cdma.cpp 'invalid config on padding and conv_x/y_stride')")
    surfaces = -(-c // lanes)
    geo = CubeGeometry(base=reg_addr(view, "CDMA", "D_DAIN_ADDR_HIGH_0", "D_DAIN_ADDR_LOW_0"),
                       line_stride=int(view.reg("CDMA", "D_LINE_STRIDE")), surface_stride=int(view.reg("CDMA", "D_SURF_STRIDE")),
                       width=w, height=h, channels=surfaces * lanes, group=lanes, bpe=bpe)  # fmt: skip
    d = read_cube(engine_memory(mem, view, "CDMA", "D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"), geo)[0]
    pad = int(sx(f("CDMA", "D_ZERO_PADDING_VALUE", "PAD_VALUE") & ((1 << (8 * bpe)) - 1), 8 * bpe))
    p = np.full((surfaces * lanes, th, tw), pad, dtype=I64)
    p[:, pt : pt + h, pl : pl + w] = d
    if f("CDMA", "D_MISC_CFG", "PROC_PRECISION") == PREC_FP16 and f("CDMA", "D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO"):
        bits = p & 0xFFFF  # NaN -> +0 as CBUF is written (pad values included)
        p = np.where(((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0), 0, p)
    # (S, L, H', dy, W', dx) -> (dy, dx, S, L, H', W')
    e = p.reshape(surfaces, lanes, th // sys_, sys_, tw // sxs, sxs).transpose(3, 5, 0, 1, 2, 4)
    return e.reshape(sys_ * sxs * surfaces * lanes, th // sys_, tw // sxs)


def _check(view: RegisterView) -> int:
    prec = int(view.field("CDMA", "D_MISC_CFG", "PROC_PRECISION"))
    for b in _BLOCKS:
        if int(view.field(b, "D_MISC_CFG", "CONV_MODE")) != 1:
            raise UnitNotModelled(f"{b}.D_MISC_CFG.CONV_MODE is DIRECT while CDMA's is Winograd: mixed modes not modelled")
    if int(view.field("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT")):
        raise InvalidLayer("Winograd convolution takes feature input only (seed 000)")
    return prec


def winograd_conv(view: RegisterView, mem: MemoryPort, options: ModelOptions) -> tuple[np.ndarray, int, tuple[int, int, int]]:
    """The whole CDMA..CACC Winograd pipeline: ((K, OH, OW) int32 values as int64, saturation
    count, (K, OH, OW))."""
    sem = options.semantics
    prec = _check(view)
    bpe = 1 if prec == PREC_INT8 else 2
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    lanes = options.atom_bytes // bpe
    check_winograd_cbuf(view, lanes, bpe)
    e = winograd_input(view, mem, options, bpe)
    cw = f("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT") + 1
    ch = f("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1
    cc = f("CSC", "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1
    if (cc, ch, cw) != e.shape:
        raise UnitNotModelled(f"CSC DATAIN_SIZE_EXT {(cw, ch, cc)} differs from the CDMA's extended cube "
                              f"{e.shape[::-1]} (W, H, C)")
    if cc % 4:
        raise InvalidLayer(f"CSC DATAIN_CHANNEL_EXT + 1 = {cc}: Winograd needs a multiple of 4 (NV_NVDLA_csc.cpp)")
    kw, kh = f("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1, f("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1
    wc, k = f("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT") + 1, f("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL") + 1
    ow, oh = f("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1, f("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1
    ok = f("CSC", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1
    if (kw, kh) != (4, 4) or wc != cc or k != ok:
        raise InvalidLayer(f"CSC Winograd weights {kw}x{kh}x{wc}, {k} kernels: need 4x4x{cc} and {ok} kernels")
    if ow % 4 or oh % 2 or ow + 2 > cw or oh + 2 > ch:
        raise InvalidLayer(f"CSC Winograd output {ow}x{oh}: width a multiple of 4, height of 2, within the input "
                           f"{cw}x{ch} minus 2 (2x2 tiles from 4x4 input tiles; NV_NVDLA_csc.cpp)")
    bpk = f("CDMA", "D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL") + 1
    if bpk != 16 * cc * bpe:
        raise UnitNotModelled(f"CDMA: BYTE_PER_KERNEL {bpk} != 4x4x{cc}x{bpe} bytes (not modelled)")
    atomic_k = options.mac_atomic_k if bpe == 1 else max(options.mac_atomic_k // 2, 1)
    if int(view.field("CDMA", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT")):  # WMB/WGS sparse weights over this format
        from .compressed import decompressed_weight_bytes

        raw = decompressed_weight_bytes(view, mem, options, k, cc * 16)[0]
    else:
        port = engine_memory(mem, view, "CDMA", "D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE")
        raw = np.asarray(port.read(reg_addr(view, "CDMA", "D_WEIGHT_ADDR_HIGH", "D_WEIGHT_ADDR_LOW"), k * cc * 16 * bpe),
                         dtype=np.uint8)  # fmt: skip
    u = np.ascontiguousarray(raw).view(np.int8 if bpe == 1 else "<i2").astype(I64)[winograd_weight_offsets(k, cc, atomic_k)]
    # CSC: 4x4 input tiles at (2*ty, 2*tx), PRA
    ty, tx = oh // 2, ow // 2
    yy = 2 * np.arange(ty)[:, None, None, None] + np.arange(4)[None, None, :, None]
    xx = 2 * np.arange(tx)[None, :, None, None] + np.arange(4)[None, None, None, :]
    tiles = e[:, yy, xx]  # (C, TY, TX, 4, 4)
    if prec == PREC_FP16:
        return _fp16_tail(u, pra_fp16(tiles), k, cc, oh, ow)
    v = pra(tiles, f("CSC", "D_PRA_CFG", "PRA_TRUNCATE"), 8 * bpe)
    # CMAC: elementwise products summed over the channels of a step (4), then A^T M A; CACC adds the steps
    n = ty * tx
    vf = v.reshape(cc, n, 16)
    uf = u.reshape(k, cc, 16)
    bound = int(np.abs(uf).sum(axis=1).max(initial=0)) * int(np.abs(vf).max(initial=0)) * 9
    psum = PSUM_BITS_INT16 if prec != PREC_INT8 else (PSUM_BITS if sem == "rtl" else 64)
    if bound < (1 << (psum - 1)):
        m = np.einsum("kcp,cnp->knp", uf, vf) if bound >= (1 << 52) else \
            np.einsum("kcp,cnp->knp", uf.astype(np.float64), vf.astype(np.float64)).astype(I64)
        acc = winograd_output(m.reshape(k, n, 4, 4))
    else:  # INT16: 48-bit saturation after every 4-channel step (cmod NV_NVDLA_cacc.cpp MAX_INT_48BITS); RTL INT8: 34 bits
        lim = (1 << (psum - 1)) - 1
        acc = np.zeros((k, n, 2, 2), dtype=I64)
        for s in range(0, cc, 4):
            step = np.einsum("kcp,cnp->knp", uf[:, s : s + 4], vf[s : s + 4])
            acc = np.clip(acc + winograd_output(step.reshape(k, n, 4, 4)), -lim - 1, lim)
    y = acc.reshape(k, ty, tx, 2, 2).transpose(0, 1, 3, 2, 4).reshape(k, oh, ow)
    out, sat = cacc_truncate(y, f("CACC", "D_CLIP_CFG", "CLIP_TRUNCATE"), semantics=sem)
    return out, sat, (k, oh, ow)


def _fp16_tail(u: np.ndarray, v: np.ndarray, k: int, cc: int, oh: int, ow: int) -> tuple[np.ndarray, int, tuple[int, int, int]]:
    """FP16 CMAC steps (4 channels each, in channel order as the CSC sends super channels) and
    the CACC FP48 accumulation of the four outputs of every tile."""
    from .cacc_fp16 import fp48_add, fp48_to_fp32

    n = v.shape[1] * v.shape[2]
    vf = v.reshape(cc, n, 16)
    uf = (np.asarray(u, dtype=I64) & 0xFFFF).reshape(k, cc, 16)
    ae = np.zeros((k, n, 2, 2), dtype=I64)
    am = np.zeros((k, n, 2, 2), dtype=I64)
    steps = cc // 4
    w64 = uf.reshape(k, steps, 4, 16).transpose(1, 0, 3, 2).reshape(steps, k, 64)  # element pos*4 + channel
    d64 = vf.reshape(steps, 4, n, 16).transpose(0, 3, 1, 2).reshape(steps, 64, n)
    me, mm = fp16_wino_mac_steps(w64, d64)
    for s in range(steps):  # the CACC adds the steps in channel order
        ae, am = fp48_add(ae, am, np.broadcast_to(me[s][:, :, None, None], mm[s].shape), mm[s])
    y = fp48_to_fp32(ae, am).reshape(k, oh // 2, ow // 2, 2, 2).transpose(0, 1, 3, 2, 4).reshape(k, oh, ow)
    return y, 0, (k, oh, ow)
