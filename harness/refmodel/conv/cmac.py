"""CMAC: the multiply stage of direct convolution (INT8/INT16).

One CMAC step multiplies the input values a kernel position sees (``csc.tap``) by that
position's weights and sums over the channels of the step: ``(K, C) @ (C, OH*OW)``. INT8
products are exact in int64 (cmod ``NV_NVDLA_cmac.cpp`` ``calculation_int8``), INT16
products are exact in the cmod's 44-bit ``sc_int`` (``calculation_int16``).
"""

from __future__ import annotations

import numpy as np

from ._common import I64

__all__ = ["mac_step"]


def mac_step(wk: np.ndarray, t: np.ndarray, *, use_float: bool) -> np.ndarray:
    """Exact ``wk @ t`` for int64 ``wk`` (K, C) and ``t`` (C, N): float64 BLAS when every
    partial sum is known to stay below 2^52 (``use_float``), else int64 matmul."""
    if use_float:
        return (wk.astype(np.float64) @ t.astype(np.float64)).astype(I64)
    return wk @ t


# ---------------------------------------------------------------------------------------
# FP16: block-floating-point MAC of the nvdlav1 C model
#
# One CMAC step takes one 64-channel slice (PARALLEL_CHANNEL_NUM) of FP16 data and weights
# (cmod/cmac/NV_NVDLA_cmac.h, calculation_fp16 / cal_fp16_nan / cal_fp16_exp / cal_fp16_mul /
# cal_fp16_booth). A channel takes part when neither its datum nor its weight is +-0 (the CSC
# masks, cmod/csc/NV_NVDLA_csc.cpp "Both +0 and -0"). Each FP16 exponent e splits into a coarse
# part e >> 2 and a fine part e & 3 (1 for subnormals) that pre-shifts the 11-bit significand;
# the products of one step are aligned to the largest coarse exponent sum, in steps of 4 bits,
# by a radix-4 Booth multiplier whose two carry-save outputs are shifted right separately and
# re-joined with a sign-compensation constant, so the truncation differs from an exact shift
# by at most one unit. The step result is "FP44": a 6-bit exponent (4 x the largest coarse sum)
# over a 38-bit two's-complement sum, value = sum * 2^(exp - 50). A NaN weight (the first in
# channel order) or else a NaN datum makes the step a NaN carrying that sign and payload.
# INF is not special here: exponent 31, significand 1.0 (= 65536).

FP44_NAN_EXP = 0x3F
_SIGN_COMP = {0: 0xAAAB0000, 4: 0xFAAAB000, 8: 0xFFAAAB00, 12: 0xFFFAAAB0, 16: 0xFFFFAAAB, 20: 0xFFFFFAAB,
              24: 0xFFFFFFAB, 28: 0xFFFFFFFB}  # cal_fp16_booth: constant per alignment shift


def _csa(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3:2 carry-save adder on 32-bit words (uint32): (sum, carry << 1)."""
    t = a ^ b
    return t ^ c, ((a & b) | (c & t)) << np.uint32(1)  # majority


def booth_product(neg: np.ndarray, wm: np.ndarray, dm: np.ndarray, sft: np.ndarray) -> np.ndarray:
    """``(+-wm * dm) >> sft`` as the C model's Booth/carry-save multiplier computes it (int64).

    ``wm``/``dm``: pre-shifted significands (< 2^14), ``neg``: product sign, ``sft``: alignment
    shift (a multiple of 4; >= 32 gives 0). cmod/cmac/NV_NVDLA_cmac.h ``cal_fp16_booth``."""
    shape = np.broadcast(neg, wm, dm, sft).shape
    # 32-bit words throughout: uint32 arithmetic wraps exactly as the model's 32-bit adders
    w = np.broadcast_to(wm, shape).astype(np.uint32) << np.uint32(1)
    dmu = np.broadcast_to(dm, shape).astype(np.uint32)
    sft = np.broadcast_to(sft, shape).astype(np.int64)
    rev = np.broadcast_to(neg, shape).astype(bool).astype(np.uint32) * np.uint32(7)
    # Booth code c (3 bits of w, inverted for a negative product) -> partial product: magnitude
    # m * dm (m = 0, 1, 1, 2, -2, -1, -1, -0); a negative one is ~(m * dm) & 0xFFFF (its inversion
    # bit added two places up), a positive one has the sign-extension bit 0x10000 set: both are
    # m * dm XOR key (m * dm < 2^15)
    mult = np.array([0, 1, 1, 2, 2, 1, 1, 0], dtype=np.uint32)
    inv = np.array([0, 0, 0, 0, 1, 1, 1, 0], dtype=np.uint32)
    key = np.where(inv == 1, 0xFFFF, 0x10000).astype(np.uint32)
    pps, invs = [], []
    for _ in range(8):
        code = ((w & np.uint32(7)) ^ rev).astype(np.intp)
        w = w >> np.uint32(2)
        pps.append((dmu * mult[code]) ^ key[code])
        invs.append(inv[code])
    u = lambda v, n: v << np.uint32(n)  # noqa: E731
    p = [pps[0], u(pps[1], 2) | invs[0], u(pps[2], 4) | u(invs[1], 2), u(pps[3], 6) | u(invs[2], 4), u(invs[3], 6),
         u(pps[4], 8), u(pps[5], 10) | u(invs[4], 8), u(pps[6], 12) | u(invs[5], 10), u(pps[7], 14) | u(invs[6], 12),
         u(invs[7], 14)]  # fmt: skip

    def reduce5(a, b, c, d, e):  # noqa: ANN001, ANN202 - three CSA levels, in the model's order
        s, cy = _csa(a, b, c)
        s, cy = _csa(s, cy, d)
        return _csa(s, cy, e)

    a0, a1 = reduce5(*p[0:5])
    b0, b1 = reduce5(*p[5:10])
    s, cy = _csa(a0, a1, b0)
    s, cy = _csa(s, cy, b1)
    sh = np.minimum(sft, 31).astype(np.uint32)
    # the sign-compensation constant by alignment shift (0 for a shift not in the table)
    comp_of = np.array([_SIGN_COMP.get(k, 0) for k in range(0, 33, 4)], dtype=np.uint32)
    comp = comp_of[np.where(((sft & 3) == 0) & (sft >= 0) & (sft < 32), sft >> 2, 8)]
    tot = (s >> sh) + (cy >> sh) + comp  # wraps mod 2^32
    out = tot.view(np.int32).astype(np.int64)  # 32-bit two's complement
    return np.where(sft >= 32, 0, out)


def fp16_mac_step(w_bits: np.ndarray, d_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One FP16 CMAC step: weights (K, Cs) and data (Cs, N) as FP16 bit patterns (Cs <= 64
    channels of one slice). Returns FP44 ``(exp, mant)`` int64 arrays (K, N): ``exp`` 0..56
    (or 63 = NaN, ``mant`` then holding sign << 37 | payload << 27), ``mant`` 38-bit signed."""
    w = np.asarray(w_bits, dtype=np.int64)[:, :, None] & 0xFFFF  # (K, Cs, 1)
    d = np.asarray(d_bits, dtype=np.int64)[None, :, :] & 0xFFFF  # (1, Cs, N)
    we, de = (w >> 10) & 31, (d >> 10) & 31
    on = ((w & 0x7FFF) != 0) & ((d & 0x7FFF) != 0)
    coarse = np.where(on, (we >> 2) + (de >> 2), 0)
    mx = coarse.max(axis=1, keepdims=True)  # (K, 1, N)
    sft = (mx - coarse) * 4
    wm = ((w & 0x3FF) | ((we != 0) << 10)) << np.where(we == 0, 1, we & 3)
    dm = ((d & 0x3FF) | ((de != 0) << 10)) << np.where(de == 0, 1, de & 3)
    prod = booth_product(((w ^ d) >> 15) & 1, wm, dm, sft)
    mant = np.where(on, prod, 0).sum(axis=1)  # (K, N), exact in 38 bits
    exp = mx[:, 0, :] * 4
    # NaN: the first NaN weight of the kernel, else the first NaN datum of the pixel
    wnan = (we == 31) & ((w & 0x3FF) != 0)  # (K, Cs, 1)
    dnan = (de == 31) & ((d & 0x3FF) != 0)  # (1, Cs, N)
    nan_mant = lambda v: (((v >> 15) & 1) << 37) | ((v & 0x3FF) << 27)  # noqa: E731
    wfirst = np.argmax(wnan, axis=1)  # (K, 1)
    dfirst = np.argmax(dnan, axis=1)  # (1, N)
    w_any, d_any = wnan.any(axis=1), dnan.any(axis=1)  # (K, 1), (1, N)
    wv = np.take_along_axis(w[:, :, 0], wfirst, axis=1)  # (K, 1)
    dv = np.take_along_axis(d[0], dfirst, axis=0)  # (1, N)
    is_nan = w_any | d_any
    mant = np.where(w_any, nan_mant(wv), np.where(d_any, nan_mant(dv), mant))
    exp = np.where(is_nan, FP44_NAN_EXP, exp)
    return np.broadcast_to(exp, mant.shape).astype(np.int64), mant.astype(np.int64)
