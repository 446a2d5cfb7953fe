"""CACC: accumulation of the CMAC steps into partial sums, and the final truncation to 32 bits.

INT8: the RTL keeps 34-bit partial sums saturated after every step, the cmod accumulates
exactly ([DIFF] 4a); INT16: both saturate to 48 bits. The truncation ``clamp(rnd(A, t), 32)``
follows ``NV_NVDLA_CACC_CALC_int8.v`` (RTL) or exact rounding (cmod), see :func:`cacc_truncate`.
"""

from __future__ import annotations

import numpy as np

from ..ops import rnd
from ._common import I64, INT32_MAX, INT32_MIN, PREC_INT8, PREC_INT16, PSUM_BITS, PSUM_BITS_INT16
from .cmac import FP44_NAN_EXP, mac_step
from .csc import ConvConfig, pad_input, tap

__all__ = ["cacc_truncate", "conv_accumulate", "direct_conv"]


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
                t = tap(padded, cfg, ky, kx).reshape(c, -1)
                wk = w[:, :, ky, kx]
                acc += mac_step(wk, t, use_float=use_float).reshape(acc.shape)
        return acc
    lo = -(1 << (psum_bits - 1))
    # one step: |sum of atomic_c products| <= atomic_c * 2^30 (INT16), the running sum stays
    # within 48 bits + one step: int64 is exact
    for s in range(0, c, atomic_c):
        for ky in range(cfg.k_h):
            for kx in range(cfg.k_w):
                t = tap(padded, cfg, ky, kx)[s : s + atomic_c].reshape(-1, cfg.out_h * cfg.out_w)
                acc += mac_step(w[:, s : s + atomic_c, ky, kx], t, use_float=False).reshape(acc.shape)
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
# FP16: CACC accumulation in the C model's "FP48" (nvdlav1 cmod/cacc/NV_NVDLA_cacc.cpp
# cacc_fp16_add, FP16_ALEN 48: 8-bit exponent biased by 63 over a 40-bit two's-complement
# mantissa, value = mant * 2^(exp - 101)), then "FP48 -> FP32" (cacc_fp48_to_fp32) into SDP.

FP48_NAN_EXP = 255
_M40 = (1 << 40) - 1


def _bit(v: np.ndarray, i: int | np.ndarray) -> np.ndarray:
    return (v >> i) & 1


def _s40(v: np.ndarray) -> np.ndarray:
    """Low 40 bits as a signed value."""
    v = v & _M40
    return np.where(v >= 1 << 39, v - (1 << 40), v)


def _lead_same(v: np.ndarray, top: int) -> np.ndarray:
    """Number of bits below bit ``top`` (from ``top - 1`` down) equal to bit ``top``, stopping
    at the first that differs (``top`` when every bit equals it)."""
    sign = _bit(v, top)
    x = np.where(sign == 1, ~v, v) & ((I64(1) << top) - 1)  # 1 where a bit differs from the sign
    # the highest differing bit: bit length - 1 (-1 for none), exact through float64 (x < 2^53)
    hb = np.frexp(x.astype(np.float64))[1].astype(I64) - 1
    return (top - 1) - hb


def fp48_add(acc_exp: np.ndarray, acc_mant: np.ndarray, mac_exp: np.ndarray, mac_mant: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``acc + mac`` (FP48 + FP44 -> FP48), elementwise, as ``cacc_fp16_add`` computes it:
    the FP44 input is normalised (left shift to the first bit differing from its sign, exponent
    rebiased by +49), the smaller operand shifted right with the shifted-out bits kept, the
    40-bit sum renormalised (one bit right on overflow, left shifting the kept bits back in
    otherwise), then rounded with a guard bit (and, for negative sums, a sticky bit: ties of
    negative values round down) and renormalised once more. A NaN (exponent all ones) is kept:
    the accumulator's first, else the input's sign and payload."""
    ae = np.asarray(acc_exp, dtype=I64).copy()
    am = _s40(np.asarray(acc_mant, dtype=I64))
    me = np.asarray(mac_exp, dtype=I64)
    mm = np.asarray(mac_mant, dtype=I64)
    mm38 = mm & ((1 << 38) - 1)
    mm = np.where(mm38 >= 1 << 37, mm38 - (1 << 38), mm38)
    skip = mm == 0
    acc_nan = ae == FP48_NAN_EXP
    mac_nan = (me == FP44_NAN_EXP) & ~acc_nan
    # step 1: normalise the MAC input
    sh0 = np.where(_bit(mm, 37) == _bit(mm, 36), _lead_same(mm, 37), 0)
    mreg = (mm << sh0) & ((1 << 38) - 1)
    mreg = np.where(mreg >= 1 << 37, mreg - (1 << 38), mreg)
    mext = mreg << 2  # 40-bit
    mexp = me - sh0 + 49
    ae = np.where(am == 0, 0, ae)
    # step 2: align
    bigger = np.maximum(mexp, ae)
    diff = np.abs(mexp - ae)
    shift_acc = mexp > ae
    small = np.where(shift_acc, am, mext)
    d = np.minimum(diff, 40)
    out_bits = np.where((diff > 0) & (diff <= 40), (small & ((I64(1) << d) - 1)) << (40 - d), 0)  # kept at the top
    small_sh = np.where(diff <= 40, small >> d, 0)
    am2 = np.where(shift_acc, small_sh, am)
    mext2 = np.where(shift_acc, mext, np.where(diff > 0, small_sh, mext))
    # step 3: add and renormalise
    raw = am2 + mext2
    tmp = _s40(raw)
    sa, sm, st = _bit(am2, 39), _bit(mext2, 39), _bit(tmp, 39)
    ovf = (sa == sm) & (sm != st)
    high1 = _bit(tmp, 0)
    sum_ovf = (sm << 39) | ((tmp & _M40) >> 1)
    left = ~ovf & (_bit(tmp, 38) == _bit(tmp, 39))
    sh1 = np.where(left, _lead_same(tmp, 39), 0)
    sum_left = (((tmp & _M40) << sh1) | (out_bits >> (40 - sh1)).astype(I64) * (sh1 > 0)) & _M40
    out_bits_l = (out_bits << sh1) & _M40
    summ = np.where(ovf, sum_ovf, np.where(left, sum_left, tmp & _M40))
    obits = np.where(left, out_bits_l, out_bits)
    rexp = np.where(ovf, bigger + 1, np.where(left, bigger - sh1, bigger))
    # step 4: round
    neg = _bit(summ, 39) == 1
    guard0, sticky0 = _bit(obits, 39), (obits & ((1 << 39) - 1)) != 0
    guard1, sticky1 = high1, obits != 0
    need = np.where(ovf, np.where(neg, (guard1 == 1) & sticky1, guard1 == 1),
                    np.where(neg, (guard0 == 1) & sticky0, guard0 == 1))  # fmt: skip
    rnd_ = (summ + need.astype(I64)) & _M40
    # step 5: renormalise after rounding
    flip = _bit(rnd_, 39) != _bit(summ, 39)
    fin = np.where(flip, (_bit(summ, 39) << 39) | (rnd_ >> 1), rnd_)
    rexp = np.where(flip, rexp + 1, rexp) & 0xFF
    rexp = np.where(fin == 0, 0, rexp)
    fin = _s40(fin)
    # NaN and zero-input cases
    nan_acc_m = _s40(am & ~I64((1 << 29) - 1))
    nan_mac_m = _s40((mm38 >> 27) << 29)
    out_e = np.where(acc_nan, FP48_NAN_EXP, np.where(mac_nan, FP48_NAN_EXP, rexp))
    out_m = np.where(acc_nan, nan_acc_m, np.where(mac_nan, nan_mac_m, fin))
    keep = skip
    return np.where(keep, np.asarray(acc_exp, dtype=I64), out_e), np.where(keep, am, out_m)



def fp48_to_fp32(exp: np.ndarray, mant: np.ndarray) -> np.ndarray:
    """FP48 accumulator -> FP32 bit patterns (int64), ``cacc_fp48_to_fp32``: sign-magnitude,
    round half away from zero on the first dropped bit; NaN keeps sign and the 10-bit payload."""
    e = np.asarray(exp, dtype=I64)
    m = _s40(np.asarray(mant, dtype=I64))
    sign = (m < 0).astype(I64)
    nan = e == FP48_NAN_EXP
    mag = np.abs(m)  # m == -2^39 handled below
    mo = (sign << 39) | (mag & ((1 << 39) - 1))
    et = np.where(m == 0, 0, (e + 64) & 0xFF)
    guard = _bit(mo, 14)
    mt = (mo >> 15) & ((1 << 25) - 1)
    mt1 = (mt + 1) & ((1 << 25) - 1)
    ovf = (guard == 1) & (_bit(mt1, 24) != sign)
    frac = np.where(guard == 1, np.where(ovf, (mt1 >> 1) & ((1 << 23) - 1), mt1 & ((1 << 23) - 1)),
                    (mo >> 15) & ((1 << 23) - 1))  # fmt: skip
    et = np.where(ovf, (et + 1) & 0xFF, et)
    out = (sign << 31) | (et << 23) | frac
    minus2 = m == -(1 << 39)
    out = np.where(minus2, (I64(1) << 31) | (((e + 65) & 0xFF) << 23), out)
    nan_bits = (_bit(m, 39) << 31) | (I64(0xFF) << 23) | ((m >> 29) & 0x3FF)
    return np.where(nan, nan_bits, out).astype(I64)


def fp16_conv_accumulate(d_bits: np.ndarray, w_bits: np.ndarray, cfg: ConvConfig, *, atomic_c: int = 64
                         ) -> np.ndarray:  # fmt: skip
    """FP16 direct convolution through CMAC (:func:`cmac_fp16.fp16_mac_steps`, the steps of a
    slice at once) and the CACC FP48 accumulator, in the CSC's order (64-channel slice outer,
    kernel position row-major inner,
    cmod/csc/NV_NVDLA_csc.cpp SendDataToMacSequencerDirectConvCommon). ``d_bits`` (C, H, W) and
    ``w_bits`` (K, C, KH, KW) are FP16 bit patterns, ``cfg.pad_value`` the raw 16-bit pad.
    Returns (K, OH, OW) FP32 bit patterns as the CACC delivers them to SDP."""
    from .cmac_fp16 import fp16_mac_steps

    padded, _, _ = pad_input(np.asarray(d_bits, dtype=I64) & 0xFFFF, cfg)
    k, c = w_bits.shape[0], w_bits.shape[1]
    n = cfg.out_h * cfg.out_w
    ae = np.zeros((k, n), dtype=I64)
    am = np.zeros((k, n), dtype=I64)
    w = np.asarray(w_bits, dtype=I64) & 0xFFFF
    pos = [(ky, kx) for ky in range(cfg.k_h) for kx in range(cfg.k_w)]
    group = max(1, (1 << 21) // max(k * n, 1))  # steps computed together: their (K, N) results <= 16 MiB
    for s in range(0, c, atomic_c):  # the MAC steps of a slice are independent: computed together
        for g in range(0, len(pos), group):
            ps = pos[g : g + group]
            ws = np.stack([w[:, s : s + atomic_c, ky, kx] for ky, kx in ps])  # (steps, K, Cs)
            ds = np.stack([tap(padded, cfg, ky, kx)[s : s + atomic_c].reshape(-1, n) for ky, kx in ps])
            me, mm = fp16_mac_steps(ws, ds)
            for i in range(len(ps)):  # CACC adds them in order; an all-zero step leaves the sum as it is
                if mm[i].any():
                    ae, am = fp48_add(ae, am, me[i], mm[i])
    return fp48_to_fp32(ae, am).reshape(k, cfg.out_h, cfg.out_w)
