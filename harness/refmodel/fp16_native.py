"""NVDLA's fp32 and fp17 add and multiply (:mod:`.fp16`) on the CPU's own float arithmetic, for the
operands where that is the C model's result (nvdlav1 ``cmod/hls/include/nvdla_float.h``
``FpAdd``/``FpMul``), which a layer's operands nearly always are. :func:`.fp16.fp32_add_bits` and
the others call these, and the field-by-field formulations in :mod:`.fp16` for other operands.

fp32 (``FpAdd<8,23>``, ``FpMul<8,23>``), both operands normal or zero (the others: the INF pattern,
computed on as a number, or an exponent of 0 with a mantissa, which the C model reads with an
implied one; a NaN operand is the result as is, ``a`` first, as in the C model):

* add: with exponents ``d`` apart, ``d <= 25`` keeps every bit of the smaller operand in FpAdd's
  49-bit field (the sum is exact before its one rounding to nearest even, as in IEEE 754; a carry
  drops a 0 bit, or one under a guard pattern that is no tie), and ``d >= 26`` leaves the smaller
  operand below a quarter of the larger one's ulp, which both round away (the larger operand is
  the result). A sum below 2^-126 is exact in IEEE (a subnormal sum of normals is) and the C
  model's zero with the larger operand's sign (``a``'s on a tie: x + (-x) keeps ``a``'s sign); a
  sum that rounds to 2^128 or more is IEEE's INF and the C model's maximal value.
* multiply: the float64 product of two float32 values is exact, its float32 rounding IEEE's RNE.
  The C model flushes a product whose 24-bit rounding is below 2^-126 (the exact product below
  2^-126 - 2^-151), or any product below 2^-126 when the exponent sum is below the bias, and
  saturates at 2^128.

fp17 (1 + 6 + 10 bits, bias 31; ``FpAdd<6,10>``, ``FpMul<6,10>``), no INF pattern (exponent 63,
mantissa 0; a NaN operand is the result as is, ``a`` first): every other pattern's value (an
implied one at exponent 0 too) is exact in float32, and so is a sum with exponents up to 12 apart
(FpAdd's field keeps 12 bits below: the same argument as above) and any product (22 bits); the
result is rounded to 11 bits (nearest even) on the float32 pattern, a value below 2^-30 before
rounding (after it for a product whose exponent sum reaches the bias) is the signed zero, 2^32 or
more the maximal value (exponent 62, mantissa all ones).

``tests/test_fp16_native_arith.py`` checks these against the field-by-field formulations on
random and edge patterns; the bundled suites check both against the C model.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

__all__ = ["MUL_FLUSH", "fp17_add_native", "fp17_mul_native",
           "fp32_add_native", "fp32_add_values", "fp32_mul_native", "fp32_mul_values", "fp32_values", "nan_operands",
           "native_fp32_operand"]

_I64 = np.int64
_SIGN32 = 0x80000000
_F32_MAX_BITS = 0x7F7FFFFF
_F17_MAX_MAG = (62 << 10) | 0x3FF
#: below this the C model's 24-bit rounding of a product stays under 2^-126 (the tie rounds up, to even)
MUL_FLUSH = 2.0**-126 - 2.0**-151
_NO_ERRSTATE = nullcontext()
# numpy scalars of the constants below (an operand made once, not on every call)
_U32_SIGN, _U32_MAX_BITS, _U32_EXP = np.uint32(_SIGN32), np.uint32(_F32_MAX_BITS), np.uint32(0x7F800000)
_U32_23, _U32_FF, _F32_ZERO = np.uint32(23), np.uint32(0xFF), np.float32(0)


def native_fp32_operand(x: np.ndarray | int | np.integer) -> tuple[np.ndarray, int | None]:
    """fp32 patterns as uint32 and their largest biased exponent (255: a NaN among them, which
    the caller returns as is); None when one is neither normal, zero nor NaN."""
    u = np.asarray(x, _I64).astype(np.uint32)
    if u.ndim == 0:  # a register operand: checked in Python
        m = int(u) & 0x7FFFFFFF
        return u, None if 0 < m < 0x800000 or m == 0x7F800000 else m >> 23
    if u.size == 0:
        return u, 0
    mag = u.ravel() & np.uint32(0x7FFFFFFF)  # (a 0-d array's arithmetic gives scalars, which warn on the wrap below)
    top = int(mag.max())
    if int((mag - np.uint32(1)).min()) < 0x7FFFFF:  # a zero wraps to the top
        return u, None
    if top >= 0x7F800000 and np.count_nonzero(mag == 0x7F800000):  # the INF pattern: computed on as a number
        return u, None
    return u, top >> 23


def nan_operands(out: np.ndarray, a: np.ndarray, b: np.ndarray, mag_a: np.ndarray, mag_b: np.ndarray,
                 inf_mag: int) -> np.ndarray:  # fmt: skip
    """A NaN operand (magnitude above the INF pattern's, ``inf_mag``) is the result as is, ``a``
    first, as in the C model; the field-by-field code (:mod:`.fp16`) calls it too."""
    return np.where(mag_a > inf_mag, a, np.where(mag_b > inf_mag, b, out))


def _nan_first(out: np.ndarray, a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer,
               inf_mag: int, mag_bits: int) -> np.ndarray:  # fmt: skip
    """:func:`nan_operands` of operands as given (a register operand may be an int)."""
    a, b = np.asarray(a, _I64), np.asarray(b, _I64)
    return nan_operands(out, a, b, a & mag_bits, b & mag_bits, inf_mag)


def fp32_add_values(fa: np.ndarray, fb: np.ndarray, *, may_overflow: bool = True) -> np.ndarray:
    """``FpAdd<8,23>`` of float32 values that are normal or zero (a NaN gives a NaN the caller
    replaces) as float32 addition, returning float32 values: a sum that rounds to 2^128 (IEEE's
    INF) is the signed maximal value (not looked for unless ``may_overflow``), one below 2^-126
    (an exact zero too) the zero of the larger magnitude's sign, ``fa``'s on a tie."""
    with np.errstate(over="ignore", invalid="ignore") if may_overflow else _NO_ERRSTATE:
        r = np.asarray(fa + fb, np.float32)
    if may_overflow:
        inf = np.isinf(r)
        if np.count_nonzero(inf):
            r = np.where(inf, (r.view(np.uint32) & _U32_SIGN) | _U32_MAX_BITS, r.view(np.uint32)).view(np.float32)
    tiny = (r.view(np.uint32) & _U32_EXP) == 0
    if np.count_nonzero(tiny):  # the zero of the larger magnitude's sign
        r = np.where(tiny, np.copysign(_F32_ZERO, np.where(np.abs(fa) >= np.abs(fb), fa, fb)), r)
    return r


def fp32_mul_values(fa: np.ndarray, fb: np.ndarray, *, may_overflow: bool = True) -> np.ndarray:
    """``FpMul<8,23>`` of float32 values that are normal or zero (a NaN gives a NaN the caller
    replaces) through the exact float64 product, returning float32 values: its float32 rounding
    (IEEE's RNE), 2^128 (IEEE's INF; not looked for unless ``may_overflow``) the signed maximal
    value, a product whose 24-bit rounding is below 2^-126 (or any below 2^-126 when the exponent
    sum is below the bias) the signed zero."""
    with np.errstate(over="ignore", invalid="ignore") if may_overflow else _NO_ERRSTATE:
        p = np.asarray(np.multiply(fa, fb, dtype=np.float64))
        r = np.asarray(p.astype(np.float32))
    if may_overflow:
        inf = np.isinf(r)
        if np.count_nonzero(inf):
            r = np.where(inf, (r.view(np.uint32) & _U32_SIGN) | _U32_MAX_BITS, r.view(np.uint32)).view(np.float32)
    ap = np.abs(p)
    tiny = ap < 2.0**-126
    if np.count_nonzero(tiny):  # a zero operand, an underflow: a signed zero (r has p's sign)
        flush = ap < MUL_FLUSH
        band = tiny & ~flush  # flushed too when the exponent sum is below the bias
        if np.count_nonzero(band):
            ua, ub = np.asarray(fa, np.float32).view(np.uint32), np.asarray(fb, np.float32).view(np.uint32)
            es = ((ua >> _U32_23) & _U32_FF).astype(_I64) + ((ub >> _U32_23) & _U32_FF)
            flush = flush | (band & (es < 127))
        r = np.where(flush, np.copysign(_F32_ZERO, r), r)
    return r


def fp32_add_native(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer, ua: np.ndarray,
                    ub: np.ndarray, e_top: int) -> np.ndarray:  # fmt: skip
    """``FpAdd<8,23>`` of normal, zero or NaN operands ``a``, ``b`` (``ua``, ``ub``: as uint32,
    ``e_top`` their largest exponent, 255 with a NaN): :func:`fp32_add_values`, a NaN operand the
    result as is. Returns int64 patterns."""
    r = fp32_add_values(ua.view(np.float32), ub.view(np.float32), may_overflow=e_top >= 254)
    r = r.view(np.uint32).astype(_I64)
    return _nan_first(r, a, b, 0x7F800000, 0x7FFFFFFF) if e_top == 255 else r


def fp32_mul_native(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer, ua: np.ndarray,
                    ub: np.ndarray, ea: int, eb: int) -> np.ndarray:  # fmt: skip
    """``FpMul<8,23>`` of normal, zero or NaN operands ``a``, ``b`` (``ua``, ``ub``: as uint32,
    ``ea``, ``eb`` their largest exponents, 255 with a NaN): :func:`fp32_mul_values`, a NaN operand
    the result as is. Returns int64 patterns."""
    nan = 255 in (ea, eb)
    r = fp32_mul_values(ua.view(np.float32), ub.view(np.float32), may_overflow=nan or ea + eb >= 127 + 253)
    r = r.view(np.uint32).astype(_I64)
    return _nan_first(r, a, b, 0x7F800000, 0x7FFFFFFF) if nan else r


def fp32_values(x: np.ndarray | int | np.integer) -> np.ndarray | None:
    """fp32 patterns as float32 values for :func:`fp32_add_values` / :func:`fp32_mul_values`, or
    None when one is not normal or zero (NaN, the INF pattern, an exponent of 0 with a mantissa)."""
    u, e = native_fp32_operand(x)
    return None if e is None or e == 255 else u.view(np.float32)


# ---- fp17


def _fp17_values() -> np.ndarray:
    """Every fp17 pattern's value as FpAdd/FpMul read it, as float32: ``1.m * 2^(e - 31)`` (an
    implied one at exponent 0 too), 0 for a zero magnitude; exponent 63 (not used here) as if finite."""
    x = np.arange(1 << 17, dtype=_I64)
    s, e, m = (x >> 16) & 1, (x >> 10) & 0x3F, x & 0x3FF
    bits = (s << 31) | np.where((x & 0xFFFF) == 0, 0, ((e + 96) << 23) | (m << 13))
    out = bits.astype(np.uint32).view(np.float32)
    out.flags.writeable = False
    return out


_FP17_VALUES = _fp17_values()  # a constant computed at import


def _fp17_operand(x: np.ndarray | int | np.integer) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """(17-bit patterns, float32 values, whether a NaN is among them), or None with the INF pattern
    (exponent 63, mantissa 0: computed on as a number)."""
    p = np.asarray(x, _I64) & 0x1FFFF
    if p.ndim == 0:
        p = p.reshape(1)
    nan = False
    if p.size and int((p & 0xFFFF).max()) >= 63 << 10:
        if ((p & 0xFFFF) == 63 << 10).any():
            return None
        nan = True
    return p, _FP17_VALUES[p], nan


def _round_fp17(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A float32 result -> (fp17 sign bit, exponent-and-mantissa fields rounded to nearest even,
    which may be out of range, and the float32 exponent before rounding)."""
    u = r.view(np.uint32).astype(_I64)
    mag = u & 0x7FFFFFFF
    return (u >> 15) & 0x10000, ((mag + 0xFFF + ((mag >> 13) & 1)) >> 13) - (96 << 10), mag >> 23


def fp17_add_native(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer) -> np.ndarray | None:
    """``FpAdd<6,10>`` through float32 (see the module docstring); None with an INF pattern."""
    oa, ob = _fp17_operand(a), _fp17_operand(b)
    if oa is None or ob is None:
        return None
    (pa, fa, na), (pb, fb, nb) = oa, ob
    sign, v, e_pre = _round_fp17(fa + fb)
    out = sign | np.minimum(v, _F17_MAX_MAG)  # 2^32 or more: the maximal value
    tiny = e_pre <= 96
    if tiny.any():  # below 2^-30, an exact zero too: a zero with the larger magnitude's sign, a's on a tie
        ma, mb = pa & 0xFFFF, pb & 0xFFFF
        out = np.where(tiny, np.where(ma >= mb, pa, pb) & 0x10000, out)
    out = out.reshape(np.broadcast_shapes(np.shape(a), np.shape(b)))
    return _nan_first(out, a, b, 0xFC00, 0xFFFF) if na or nb else out


def fp17_mul_native(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer) -> np.ndarray | None:
    """``FpMul<6,10>`` through float32 (see the module docstring); None with an INF pattern."""
    oa, ob = _fp17_operand(a), _fp17_operand(b)
    if oa is None or ob is None:
        return None
    (pa, fa, na), (pb, fb, nb) = oa, ob
    sign, v, e_pre = _round_fp17(fa * fb)
    out = sign | np.minimum(v, _F17_MAX_MAG)  # 2^32 or more: the maximal value
    low = e_pre <= 96
    if low.any():  # below 2^-30 before rounding: zero unless it rounds up and the exponent sum reaches the bias
        es = ((pa >> 10) & 0x3F) + ((pb >> 10) & 0x3F)
        out = np.where(low & ((v < 1 << 10) | (es < 31)), (pa ^ pb) & 0x10000, out)
    out = out.reshape(np.broadcast_shapes(np.shape(a), np.shape(b)))
    return _nan_first(out, a, b, 0xFC00, 0xFFFF) if na or nb else out
