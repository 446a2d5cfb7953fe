"""PDP's FP16 pooling fold, compiled (:mod:`.jit`): every output of a layer folded in the C model's
order in one loop, so a small cube pays no per-tap numpy calls. The rules are :mod:`.pdp`'s
docstring (FP16), the sources nvdlav1 ``cmod/hls_wrapper/pdp_hls_wrapper.cpp``
(``HLS_PDP_PoolingStage0Calc_FP16_W/_H``, ``HLS_PDP_PoolingStage1Calc_FP16``) and
``cmod/hls/include/nvdla_float.h`` (``FpAdd<6,10>``, ``FpMul<6,10>``, ``FpMax/FpMin<5,10>``),
written as :mod:`.fp16` (``_fp_add`` / ``_fp_mul``) and :mod:`.fp16_extra` (``fp16_cmp_bits``)
state them field by field, one element at a time. Imported by :mod:`.pdp_fp` only when an FP16
pooling runs (INT8 / INT16 layers and the CLI do not load numba).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .jit import bit_length, kernel

__all__ = ["pool_fp16_fold"]

AVE, MAX = 0, 1  # D_OPERATION_MODE_CFG.POOLING_METHOD (2 = MIN)
_MAG17 = 0xFFFF  # fp17 exponent and mantissa fields
_INF17 = 63 << 10  # fp17 exponent 63, mantissa 0: above it a NaN
_MAX17 = (62 << 10) | 0x3FF  # the fp17 maximal magnitude


@njit(inline="always")
def _fp17_add_1(a: int, b: int) -> int:
    """``FpAdd<6,10>`` of two fp17 patterns (int64), field by field as :func:`.fp16._fp_add`: the
    larger magnitude (``a`` on a tie) 12 bits up in a 23-bit field, the other aligned to it and
    truncated, added or subtracted; a carry drops a bit, else a normalising left shift; RNE to
    11 bits (the carry runs into the exponent); a carry to exponent 63 -> the signed maximum; a
    zero sum or exponent <= 0 -> the larger operand's signed zero; a NaN operand is the result
    as is, ``a``'s first."""
    mag_a, mag_b = a & _MAG17, b & _MAG17
    if mag_a > _INF17:
        return a
    if mag_b > _INF17:
        return b
    if mag_a >= mag_b:
        big, small, s_big = mag_a, mag_b, a & 0x10000
    else:
        big, small, s_big = mag_b, mag_a, b & 0x10000
    e_big = big >> 10
    p_big = ((big & 0x3FF) | 0x400) << 12
    p_small = ((small & 0x3FF) | 0x400) if small != 0 else 0
    aligned = (p_small << 12) >> min(e_big - (small >> 10), 63)
    tot = p_big - aligned if (a ^ b) & 0x10000 else p_big + aligned  # 0 <= tot < 2^24
    cy = tot >> 23
    zc = 23 - bit_length(tot)  # -1 on a carry, else the normalising left shift
    oe = e_big - zc
    if tot == 0 or oe <= 0:
        return s_big
    mant = (tot << max(zc, 0)) >> cy
    top = (mant + 0x7FF + ((mant >> 12) & 1)) >> 12  # 2^10 .. 2^11
    mag = (oe << 10) + (top - 0x400)
    if mag >= _INF17 and (cy | (top >> 11)) != 0:
        return s_big | _MAX17
    return s_big | mag


@njit(inline="always")
def _fp17_mul_1(a: int, b: int) -> int:
    """``FpMul<6,10>`` of two fp17 patterns (int64), field by field as :func:`.fp16._fp_mul`: the
    22-bit product of the significands, RNE to 11 bits (the carry runs into the exponent);
    exponent 63 or more -> the signed maximum; a zero operand, an exponent sum below the bias
    (31) or a result below exponent 1 -> the signed zero; a NaN operand is the result, ``a`` first."""
    mag_a, mag_b = a & _MAG17, b & _MAG17
    if mag_a > _INF17:
        return a
    if mag_b > _INF17:
        return b
    sgn = (a ^ b) & 0x10000
    es = (mag_a >> 10) + (mag_b >> 10)
    if mag_a == 0 or mag_b == 0 or es < 31:
        return sgn
    p = ((mag_a & 0x3FF) | 0x400) * ((mag_b & 0x3FF) | 0x400)
    hi = p >> 21
    p1 = p << (1 - hi)
    top = (p1 + 0x3FF + ((p1 >> 11) & 1)) >> 11
    mag = ((es + hi - 31) << 10) + (top - 0x400)
    if mag < 0x400:
        return sgn
    if mag >= _INF17:
        return sgn | _MAX17
    return sgn | mag


@njit(inline="always")
def _fp16_cmp_1(a: int, b: int, take_max: bool) -> int:
    """``FpMax<5,10>`` / ``FpMin<5,10>`` of two FP16 patterns, as :func:`.fp16_extra.fp16_cmp_bits`:
    sign, then exponent, then mantissa (+0 above -0); a tie gives ``b``; a NaN ``a`` wins, else a
    NaN ``b``."""
    if (a & 0x7FFF) > 0x7C00:
        return a
    if (b & 0x7FFF) > 0x7C00:
        return b
    abs_gt = (a & 0x7FFF) > (b & 0x7FFF)
    sa, sb = a >> 15, b >> 15
    a_gt = (abs_gt if sb == 0 else True) if sa == 0 else (False if sb == 0 else not abs_gt)
    return a if a_gt == take_max else b


@njit(inline="always")
def _step(method: int, acc: int, v: int) -> int:
    """One fold step ``acc (+) v``: fp17 add (AVERAGE) or FP16 max / min."""
    if method == AVE:
        return _fp17_add_1(acc, v)
    return _fp16_cmp_1(acc, v, method == MAX)


@njit(inline="always")
def _first_real_tap(valid: np.ndarray, o: int) -> int:
    """The first tap of output ``o``'s window inside the input (``valid[o]``), -1 when none is."""
    for t in range(valid.shape[1]):
        if valid[o, t]:
            return t
    return -1


@kernel
def _pool(x: np.ndarray, idx_w: np.ndarray, valid_w: np.ndarray, idx_h: np.ndarray, valid_h: np.ndarray,
          pads: np.ndarray, method: int, recip: np.ndarray, to_fp17: np.ndarray, to_fp16: np.ndarray,
          out: np.ndarray) -> None:  # fmt: skip
    """``out[g, oy, ox, l]`` (uint16) of ``x[g, y, c, l]`` (FP16 patterns, int64): per input row and
    output column, ``acc`` starts at tap 0's value, restarts at the first real tap and steps at
    every later real tap (``step(acc, x)``); then down the rows alike (``step(row, acc)``).
    AVERAGE: the taps are ``Fp16ToFp17`` (``to_fp17``); after an output's last real tap (or its one
    tap) ``pads[0, ox]`` / ``pads[1, ox]`` (PL, PR) and ``pads[2, oy]`` / ``pads[3, oy]`` (PT*KW,
    PB*KW) are added, a side that is +0 for every output skipped (x + (+0) is x for every
    pattern these sums produce); then ``Fp17ToFp16(acc * RW * RH)`` (``recip``, ``to_fp16``)."""
    n_g, n_h, _, n_l = x.shape
    out_h, out_w = out.shape[1], out.shape[2]
    kw, kh = idx_w.shape[1], idx_h.shape[1]
    ave = method == AVE
    side = np.zeros(4, np.bool_)
    for s in range(4):
        side[s] = ave and np.any(pads[s] != 0)
    rows = np.empty((n_h, out_w, n_l), np.int64)
    for g in range(n_g):
        for ox in range(out_w):
            first = _first_real_tap(valid_w, ox)
            keep = first >= 0 or kw == 1
            for y in range(n_h):
                for ln in range(n_l):
                    v = x[g, y, idx_w[ox, 0], ln]
                    acc = to_fp17[v] if ave else v
                    for t in range(max(first, 1), kw):
                        if valid_w[ox, t]:
                            v = x[g, y, idx_w[ox, t], ln]
                            v = to_fp17[v] if ave else v
                            acc = v if t == first else _step(method, acc, v)
                    if keep:
                        if side[0]:
                            acc = _fp17_add_1(acc, pads[0, ox])
                        if side[1]:
                            acc = _fp17_add_1(acc, pads[1, ox])
                    rows[y, ox, ln] = acc
        for oy in range(out_h):
            first = _first_real_tap(valid_h, oy)
            keep = first >= 0 or kh == 1
            for ox in range(out_w):
                for ln in range(n_l):
                    acc = rows[idx_h[oy, 0], ox, ln]
                    for t in range(max(first, 1), kh):
                        if valid_h[oy, t]:
                            v = rows[idx_h[oy, t], ox, ln]
                            acc = v if t == first else _step(method, v, acc)
                    if ave:
                        if keep:
                            if side[2]:
                                acc = _fp17_add_1(acc, pads[2, oy])
                            if side[3]:
                                acc = _fp17_add_1(acc, pads[3, oy])
                        acc = to_fp16[_fp17_mul_1(_fp17_mul_1(acc, recip[0]), recip[1])]
                    out[g, oy, ox, ln] = acc


def pool_fp16_fold(x: np.ndarray, method: int, idx_w: np.ndarray, valid_w: np.ndarray, idx_h: np.ndarray,
                   valid_h: np.ndarray, pads: np.ndarray, recip: tuple[int, int], to_fp17: np.ndarray,
                   to_fp16: np.ndarray) -> np.ndarray:  # fmt: skip
    """The fold of :func:`_pool` of FP16 patterns ``x`` ``[..., H, W, lanes]`` over the windows
    ``idx_w``/``valid_w`` ``[out_w, kw]`` and ``idx_h``/``valid_h`` ``[out_h, kh]``
    (:func:`.pdp_fp.pool_windows`); ``pads`` ``[4, max(out_w, out_h)]`` fp17 (PL, PR per output
    column, PT*KW, PB*KW per output row); ``recip`` (RW, RH) fp17. Returns uint16
    ``[..., out_h, out_w, lanes]``."""
    *lead, h, w, n_l = x.shape
    xs = np.ascontiguousarray(x, dtype=np.int64).reshape(-1, h, w, n_l)
    out = np.empty((xs.shape[0], idx_h.shape[0], idx_w.shape[0], n_l), np.uint16)
    _pool(xs, idx_w, valid_w, idx_h, valid_h, pads, method, np.asarray(recip, np.int64), to_fp17, to_fp16, out)
    return out.reshape(*lead, *out.shape[1:])
