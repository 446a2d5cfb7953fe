"""CACC FP16: accumulation of the FP16 CMAC steps in the C model's "FP48" (nvdlav1
cmod/cacc/NV_NVDLA_cacc.cpp ``cacc_fp16_add``, FP16_ALEN 48: 8-bit exponent biased by 63 over a
40-bit two's-complement mantissa, value = mant * 2^(exp - 101)), then "FP48 -> FP32"
(``cacc_fp48_to_fp32``) into SDP. The adder is compiled (:mod:`..jit`); this module and
:mod:`.cmac_fp16` are imported only when an FP16 convolution runs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..jit import bit_length, kernel
from ._common import I64
from .cmac_fp16 import FP44_NAN_EXP, fp16_mac_steps
from .csc import ConvConfig, pad_input, tap

__all__ = ["FP48_NAN_EXP", "fp16_conv_accumulate", "fp48_add", "fp48_to_fp32"]

FP48_NAN_EXP = 255
_M40 = (1 << 40) - 1


_M38 = (1 << 38) - 1


def _bit(v: np.ndarray, i: int | np.ndarray) -> np.ndarray:
    return (v >> i) & 1


def _s40(v: np.ndarray) -> np.ndarray:
    """Low 40 bits as a signed value."""
    v = v & _M40
    return np.where(v >= 1 << 39, v - (1 << 40), v)


@njit(inline="always")
def _s40_1(v: int) -> int:
    v &= _M40
    return v - ((v >> 39) << 40)


@njit(inline="always")
def _lead_same_1(v: int, top: int) -> int:
    """Number of bits below bit ``top`` (from ``top - 1`` down) equal to bit ``top``, stopping
    at the first that differs (``top`` when every bit equals it)."""
    x = (v ^ -((v >> top) & 1)) & ((1 << top) - 1)  # 1 where a bit differs from the sign
    return top - bit_length(x)


@njit(inline="always")
def _fp48_add_1(acc_exp: int, acc_mant: int, mac_exp: int, mac_mant: int) -> tuple[int, int]:
    """One ``acc + mac`` of :func:`fp48_add` (int64 operands and results). Written without
    early exits (every case computed, the result selected), so that a loop over independent
    elements compiles to vector instructions; every shift amount stays below 64."""
    am = _s40_1(acc_mant)
    mm38 = mac_mant & _M38
    mm = mm38 - ((mm38 >> 37) << 38)
    # step 1: normalise the MAC input
    sh0 = _lead_same_1(mm, 37) if (mm >> 37) & 1 == (mm >> 36) & 1 else 0
    mreg = (mm << sh0) & _M38
    mext = (mreg - ((mreg >> 37) << 38)) << 2  # 40-bit
    mexp = mac_exp - sh0 + 49
    ae = 0 if am == 0 else acc_exp
    # step 2: align
    bigger = max(mexp, ae)
    diff = abs(mexp - ae)
    shift_acc = mexp > ae
    small = am if shift_acc else mext
    d = min(diff, 40)
    out_bits = (small & ((1 << d) - 1)) << (40 - d) if diff <= 40 else 0  # kept at the top (0 for d = 0)
    small_sh = small >> d if diff <= 40 else 0
    am2 = small_sh if shift_acc else am
    mext2 = mext if shift_acc or diff == 0 else small_sh
    # step 3: add and renormalise: one bit right on overflow, else left with the kept bits
    tmp = _s40_1(am2 + mext2)
    sa, sm, st = (am2 >> 39) & 1, (mext2 >> 39) & 1, (tmp >> 39) & 1
    t40 = tmp & _M40
    ovf = sa == sm and sm != st
    sh1 = _lead_same_1(tmp, 39) if not ovf and (tmp >> 38) & 1 == st else 0
    left = ((t40 << sh1) | (out_bits >> (40 - sh1))) & _M40
    summ = (sm << 39) | (t40 >> 1) if ovf else left
    rexp = bigger + 1 if ovf else bigger - sh1
    kept = (out_bits << sh1) & _M40
    guard = tmp & 1 if ovf else (kept >> 39) & 1
    sticky = out_bits != 0 if ovf else (kept & ((1 << 39) - 1)) != 0
    # step 4: round (a negative sum's tie rounds down), step 5: renormalise once more
    top = (summ >> 39) & 1
    rnd_ = (summ + (1 if guard == 1 and (top == 0 or sticky) else 0)) & _M40
    flip = (rnd_ >> 39) & 1 != top
    fin = (top << 39) | (rnd_ >> 1) if flip else rnd_
    rexp = (rexp + flip) & 0xFF
    out_e, out_m = (0 if fin == 0 else rexp), _s40_1(fin)
    # NaN (the accumulator's first) and a zero input (the accumulator as it is)
    out_e = FP48_NAN_EXP if acc_exp == FP48_NAN_EXP or mac_exp == FP44_NAN_EXP else out_e
    out_m = _s40_1((mm38 >> 27) << 29) if mac_exp == FP44_NAN_EXP else out_m
    out_m = _s40_1(am & ~((1 << 29) - 1)) if acc_exp == FP48_NAN_EXP else out_m
    return (acc_exp, am) if mm == 0 else (out_e, out_m)


@kernel
def _fp48_add_flat(ae: np.ndarray, am: np.ndarray, me: np.ndarray, mm: np.ndarray, oe: np.ndarray, om: np.ndarray
                   ) -> None:  # fmt: skip
    for i in range(ae.size):
        oe[i], om[i] = _fp48_add_1(ae[i], am[i], me[i], mm[i])


@kernel
def _fp48_accumulate(ae: np.ndarray, am: np.ndarray, me: np.ndarray, mm: np.ndarray) -> None:
    """``acc += step`` for the steps (S, n) of ``me``/``mm`` in order, into ``ae``/``am`` (n)."""
    for s in range(me.shape[0]):  # elements inner: their additions are independent
        for i in range(ae.size):
            ae[i], am[i] = _fp48_add_1(ae[i], am[i], me[s, i], mm[s, i])


def fp48_add(acc_exp: np.ndarray, acc_mant: np.ndarray, mac_exp: np.ndarray, mac_mant: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``acc + mac`` (FP48 + FP44 -> FP48), elementwise, as ``cacc_fp16_add`` computes it:
    the FP44 input is normalised (left shift to the first bit differing from its sign, exponent
    rebiased by +49), the smaller operand shifted right with the shifted-out bits kept, the
    40-bit sum renormalised (one bit right on overflow, left shifting the kept bits back in
    otherwise), then rounded with a guard bit (and, for negative sums, a sticky bit: ties of
    negative values round down) and renormalised once more. A NaN (exponent all ones) is kept:
    the accumulator's first, else the input's sign and payload. An input of 0 leaves the
    accumulator as it is. Compiled per element (:func:`_fp48_add_1`)."""
    ops = np.broadcast_arrays(*(np.asarray(v, dtype=I64) for v in (acc_exp, acc_mant, mac_exp, mac_mant)))
    flat = [np.ascontiguousarray(v).ravel() for v in ops]
    oe, om = np.empty_like(flat[0]), np.empty_like(flat[0])
    _fp48_add_flat(*flat, oe, om)
    return oe.reshape(ops[0].shape), om.reshape(ops[0].shape)


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
            _fp48_accumulate(ae.reshape(-1), am.reshape(-1), me.reshape(len(ps), -1), mm.reshape(len(ps), -1))  # in order
    return fp48_to_fp32(ae, am).reshape(k, cfg.out_h, cfg.out_w)
