"""FP16 handling rules of NVDLA, vectorised over uint16 bit patterns and float arrays.

Sources:
* seed 000 ("FP16 Supporting"): INF inputs are replaced by a large finite value that depends on
  the sub-module; NVDLA never outputs INF (saturation gives +/-65504); NaN inputs propagate to
  every result that uses them unless the NAN_TO_ZERO register field flushes them to zero; NaN /
  INF input and NaN output counters; denormals are supported on input and output (IEEE 754),
  the internal fp17/fp32 data path has no denormals; rounding is round-to-nearest (even), and a
  result above the maximal normal value is clipped to it.
* seed 001 ("Convertor statistics"): an FP16 value overflows when ``fabs(x) >= 65504``.
* docs/nvdla-precision-semantics.md 3.4 and 8.3: cmod ``Fp32ToFp16`` (round to nearest even),
  ``FpFloatToInt`` (ties away from zero, NaN -> -32768); SDP ``D_PERF_OUT_SATURATION`` counts
  FP16 outputs equal to +/-0x7bff.

Bit patterns are ``uint16`` arrays (any shape); float values are ``float32``/``float64`` arrays.
Conversions FP16 -> FP32 are exact, so ``to_float`` is a plain widening.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fp16_native import (
    fp17_add_native,
    fp17_mul_native,
    fp32_add_native,
    fp32_mul_native,
    nan_operands,
    native_fp32_operand,
)

__all__ = [
    "FP16_MAX", "FP16_MAX_BITS", "FP16_POS_INF", "FP16_NEG_INF", "FP16_QNAN", "FP32_MAX",
    "FP16_TO_FP32_TABLE", "INF_VALUES", "NanInfCounts",
    "as_bits", "to_float", "is_nan", "is_inf", "is_denormal", "is_zero",
    "nan_to_zero", "propagate_nan", "map_inf", "inf_value", "flush_denormals_fp32",
    "from_float", "round_to_fp16", "fp16_to_int", "int_to_fp16",
    "count_nan_inf_inputs", "count_nan_outputs", "count_saturated_outputs", "overflow_flag",
    "prepare_inputs", "finish_outputs",
]

FP16_MAX = 65504.0
FP16_MAX_BITS = 0x7BFF
FP16_POS_INF = 0x7C00
FP16_NEG_INF = 0xFC00
FP16_QNAN = 0x7E00  # canonical quiet NaN used when NVDLA produces a NaN (payload is undefined)
FP32_MAX = float(np.finfo(np.float32).max)  # 3.40282e+38

_EXP_MASK = 0x7C00
_MANT_MASK = 0x03FF
_SIGN = 0x8000

#: seed 000 "Infinity" table: the finite value each sub-module uses in place of +/-INF.
#: ``None`` means the unit keeps INF (PDP max/min pooling).
INF_VALUES: dict[str, float | None] = {
    "conv_dc": 65536.0,
    "conv_image": 65536.0,
    "conv_winograd": 65504.0,
    "sdp": FP32_MAX,
    "cdp": 4292870144.0,
    "pdp_ave": 4292870144.0,
    "pdp_max": None,
    "pdp_min": None,
}


def as_bits(bits: np.ndarray | int | np.integer) -> np.ndarray:
    """Validate and return ``bits`` as a uint16 array (ints must lie in 0..0xffff)."""
    a = np.asarray(bits)
    if a.dtype == np.uint16:
        return a
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if a.dtype.kind not in "iu":
        raise TypeError(f"FP16 bit patterns must be integers, got dtype {a.dtype}")
    if a.size and (a >> 16).any():  # below 0 (the shift keeps the sign) or above 0xffff
        raise ValueError("FP16 bit patterns must lie in 0..0xffff")
    return a.astype(np.uint16)


def to_float(bits: np.ndarray | int, dtype: type = np.float32) -> np.ndarray:
    """FP16 bit patterns -> float values (exact; denormals included, INF/NaN kept)."""
    return as_bits(bits).view(np.float16).astype(dtype)


def is_nan(bits: np.ndarray | int) -> np.ndarray:
    """Exponent all ones and mantissa non-zero: the magnitude bits above the INF pattern's."""
    return (as_bits(bits) & 0x7FFF) > FP16_POS_INF


def is_inf(bits: np.ndarray | int) -> np.ndarray:
    """+INF (0x7c00) or -INF (0xfc00)."""
    b = as_bits(bits)
    return (b & 0x7FFF) == _EXP_MASK


def is_denormal(bits: np.ndarray | int) -> np.ndarray:
    """Exponent zero and mantissa non-zero (0x0001..0x03ff and the negative ones)."""
    b = as_bits(bits)
    return ((b & _EXP_MASK) == 0) & ((b & _MANT_MASK) != 0)


def is_zero(bits: np.ndarray | int) -> np.ndarray:
    return (as_bits(bits) & 0x7FFF) == 0


def nan_to_zero(bits: np.ndarray | int) -> np.ndarray:
    """NAN_TO_ZERO = ENABLE: every NaN input becomes +0 (0x0000); other patterns unchanged."""
    b = as_bits(bits)
    return np.where(is_nan(b), np.uint16(0), b).astype(np.uint16)


#: :func:`nan_to_zero` under a name the ``nan_to_zero`` keyword arguments below do not shadow
_flush_nan = nan_to_zero


def propagate_nan(result: np.ndarray, *operands: np.ndarray) -> np.ndarray:
    """NaN propagation: a float ``result`` is NaN wherever any related operand (float values,
    broadcastable to the result) is NaN. The NaN payload is undefined on hardware."""
    out = np.array(result, dtype=np.result_type(result, np.float32), copy=True)
    mask = np.zeros(out.shape, dtype=bool)
    for op in operands:
        mask |= np.broadcast_to(np.isnan(np.asarray(op, dtype=np.float64)), out.shape)
    out[mask] = np.nan
    return out


def inf_value(unit: str) -> float | None:
    """Finite replacement of +INF for ``unit`` (keys of ``INF_VALUES``), None = INF kept."""
    try:
        return INF_VALUES[unit]
    except KeyError:
        raise ValueError(f"unknown unit {unit!r}; expected one of {sorted(INF_VALUES)}") from None


def map_inf(values: np.ndarray, unit: str) -> np.ndarray:
    """Replace +/-INF in float ``values`` by the unit's finite value (seed 000 INF table).

    Returns float64 (4292870144 and 3.40282e+38 are exactly representable there)."""
    v = np.asarray(values, dtype=np.float64)
    rep = inf_value(unit)
    if rep is None:
        return v.copy()
    return np.where(np.isposinf(v), rep, np.where(np.isneginf(v), -rep, v))


def flush_denormals_fp32(x: np.ndarray) -> np.ndarray:
    """The internal fp17/fp32 data path has no denormals: |x| < 2^-126 becomes a signed zero."""
    v = np.asarray(x, dtype=np.float32)
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(v) < tiny, np.copysign(np.float32(0.0), v), v).astype(np.float32)


def from_float(x: np.ndarray | float, *, clip: bool = True, nan_to_zero: bool = False) -> np.ndarray:
    """Float (FP32/FP64 or integer) values -> FP16 bit patterns, round to nearest even.

    Denormal FP16 results are produced as IEEE 754 requires (gradual underflow). With ``clip``
    (hardware behaviour) every value beyond the maximal normal value, INF included, is clipped
    to +/-65504 (0x7bff / 0xfbff); without it IEEE overflow to INF applies. NaN stays NaN
    (canonical 0x7e00 / 0xfe00) unless ``nan_to_zero``.
    """
    v = np.asarray(x, dtype=np.float64)
    if clip:
        v = np.clip(v, -FP16_MAX, FP16_MAX)  # NaN passes through np.clip
    with np.errstate(over="ignore", invalid="ignore"):
        h = v.astype(np.float16).view(np.uint16)
    nan = np.isnan(v)
    if nan_to_zero:
        h = np.where(nan, np.uint16(0), h)
    else:
        h = np.where(nan, (h & _SIGN) | FP16_QNAN, h)
    return h.astype(np.uint16)


def round_to_fp16(x: np.ndarray | float, *, clip: bool = True) -> np.ndarray:
    """Float values rounded to the nearest FP16 value (RNE, clipped), returned as float64."""
    return to_float(from_float(x, clip=clip), np.float64)


def int_to_fp16(v: np.ndarray | int) -> np.ndarray:
    """Integer (e.g. the SDP 17-bit converter result, cmod ``Int17ToFp16``) -> FP16 bits, RNE,
    clipped to +/-65504."""
    return from_float(np.asarray(v, dtype=np.int64).astype(np.float64))


def fp16_to_int(bits: np.ndarray | int, out_bits: int = 16) -> np.ndarray:
    """FP16 -> signed ``out_bits`` integer (cmod ``FpFloatToInt``, semantics doc 3.4):
    round to nearest with ties away from zero, saturate (INF saturates), NaN -> the minimum
    (-32768 for INT16, -128 for INT8). Returns int64."""
    f = to_float(bits, np.float64)
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    nan = np.isnan(f)
    with np.errstate(invalid="ignore"):
        r = np.where(f >= 0, np.floor(np.abs(f) + 0.5), -np.floor(np.abs(f) + 0.5))
    r = np.clip(np.where(nan, lo, r), lo, hi)
    return r.astype(np.int64)


def overflow_flag(x: np.ndarray) -> np.ndarray:
    """Seed 001 convertor statistics: an FP16 result overflows when fabs(x) >= 65504."""
    return np.abs(np.asarray(x, dtype=np.float64)) >= FP16_MAX


@dataclass
class NanInfCounts:
    """Input NaN/INF counts (``D_NAN_INPUT_NUM``/``D_INF_INPUT_NUM`` style registers)."""

    nan: int = 0
    inf: int = 0


def count_nan_inf_inputs(bits: np.ndarray) -> NanInfCounts:
    """Count NaN and +/-INF patterns in an FP16 input cube (counted before any flush)."""
    b = as_bits(bits)
    if not np.count_nonzero((b & 0x7FFF) >= _EXP_MASK):  # no exponent all ones: neither NaN nor INF
        return NanInfCounts()
    return NanInfCounts(nan=int(np.count_nonzero(is_nan(b))), inf=int(np.count_nonzero(is_inf(b))))


def count_nan_outputs(bits: np.ndarray) -> int:
    """``D_NAN_OUTPUT_NUM``: NaN patterns in the FP16 output cube."""
    return int(np.count_nonzero(is_nan(bits)))


def count_saturated_outputs(bits: np.ndarray) -> int:
    """SDP ``D_PERF_OUT_SATURATION`` for FP16 output: outputs equal to +/-0x7bff (doc 8.3)."""
    b = as_bits(bits)
    return int(np.count_nonzero((b & 0x7FFF) == FP16_MAX_BITS))


def prepare_inputs(bits: np.ndarray, unit: str, *, nan_to_zero: bool = False) -> np.ndarray:
    """The input side of an FP16 unit: optional NaN flush to +0, widen exactly to float64,
    replace +/-INF by the unit's finite value. NaN (when not flushed) stays NaN."""
    b = as_bits(bits)
    if nan_to_zero:
        b = _flush_nan(b)
    return map_inf(to_float(b, np.float64), unit)


def finish_outputs(values: np.ndarray, *, nan_to_zero: bool = False) -> np.ndarray:
    """The output side: FP32/FP64 result -> FP16 bits, RNE with denormals, clip to +/-65504
    (no INF output), NaN kept (or flushed when the unit flushed its inputs)."""
    return from_float(values, clip=True, nan_to_zero=nan_to_zero)


# ---------------------------------------------------------------------------------------
# SDP's fp32 data path, bit for bit as NVDLA's C model computes it (nvdlav1
# cmod/hls/include/nvdla_float.h: FpWidthInc/FpWidthDec/FpAdd/FpMul/FpCmp/FpRelu/FpFloatToInt,
# used by cmod/hls/sdp/sdp_x.cpp, sdp_y_core.cpp, sdp_y_cvt.cpp, sdp_c.cpp). Values are fp32 bit
# patterns held in int64 arrays (0..0xffffffff). The fp32 path is not IEEE 754: there is no INF
# (an overflow gives the signed maximal finite value 0x7f7fffff), no denormal result (flushed to a
# signed zero), the smaller addend is truncated beyond 25 guard bits, x + (-x) keeps the sign of
# the operand with the larger magnitude (the first on a tie), and a NaN operand is returned as is
# (first operand first), so the FP16 NaN payload survives to the output.

_I64 = np.int64
F32_MAX_BITS = 0x7F7FFFFF
_M23 = (1 << 23) - 1


def _fields(x: np.ndarray, e_bits: int, m_bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=_I64)
    return (x >> (e_bits + m_bits)) & 1, (x >> m_bits) & ((1 << e_bits) - 1), x & ((1 << m_bits) - 1)


def _pack(s: np.ndarray | int, e: np.ndarray | int, m: np.ndarray | int, e_bits: int, m_bits: int) -> np.ndarray:
    return (((np.asarray(s, _I64) & 1) << (e_bits + m_bits)) | ((np.asarray(e, _I64) & ((1 << e_bits) - 1)) << m_bits)
            | (np.asarray(m, _I64) & ((1 << m_bits) - 1)))


def f32_fields(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sign, biased exponent (8 bits) and mantissa (23 bits) of fp32 bit patterns."""
    return _fields(x, 8, 23)


def f32_nan(e: np.ndarray, m: np.ndarray, e_bits: int = 8) -> np.ndarray:
    """NaN from the fields: all-ones exponent (``e_bits`` wide) and a non-zero mantissa."""
    return (e == (1 << e_bits) - 1) & (m != 0)


def _pack32(s: np.ndarray | int, e: np.ndarray | int, m: np.ndarray | int) -> np.ndarray:
    return _pack(s, e, m, 8, 23)


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values below 2^53 (exact through float64)."""
    return np.frexp(np.asarray(v, dtype=np.float64))[1].astype(_I64)


def _set_max(s: np.ndarray, e_bits: int, m_bits: int) -> np.ndarray:
    """cmod ``SetToInf``: the signed maximal finite value (exponent all ones but one, mantissa all ones)."""
    return ((np.asarray(s, _I64) & 1) << (e_bits + m_bits)) | ((((1 << e_bits) - 2) << m_bits) | ((1 << m_bits) - 1))


def fp16_to_fp32_bits(bits: np.ndarray | int) -> np.ndarray:
    """cmod ``Fp16ToFp32`` (FpWidthInc<5,10,8,23,DENORM_YES,NAN_YES>): exact widening, denormals
    normalised, +/-INF -> +/-0x7f7fffff (seed 000: SDP's INF value 3.40282e38), NaN -> exponent
    0xff with the 10-bit FP16 payload in the low mantissa bits (not shifted). A lookup in the
    table of all 65536 patterns (:func:`_fp16_to_fp32_rule`, computed once at import)."""
    return np.asarray(_FP16_TO_FP32[as_bits(bits)])


def _fp16_to_fp32_rule(bits: np.ndarray) -> np.ndarray:
    """The rule of :func:`fp16_to_fp32_bits`, vectorised over the patterns (builds its table)."""
    h = as_bits(bits).astype(_I64)
    s, e, m = (h >> 15) & 1, (h >> 10) & 0x1F, h & 0x3FF
    out = _pack32(s, e + 112, m << 13)
    blen = _bit_length(m)
    den = _pack32(s, 102 + blen, (m << np.minimum(np.maximum(24 - blen, 0), 23)))
    out = np.where((e == 0) & (m != 0), den, out)
    out = np.where((e == 0) & (m == 0), s << 31, out)
    out = np.where((e == 0x1F) & (m == 0), (s << 31) | F32_MAX_BITS, out)
    return np.where((e == 0x1F) & (m != 0), _pack32(s, 0xFF, m), out)


def fp32_to_fp16_bits(x: np.ndarray) -> np.ndarray:
    """cmod ``Fp32ToFp16`` (FpWidthDec<8,23,5,10,DENORM_YES,NAN_YES>): round to nearest even,
    FP16 denormals produced, |x| >= 2^16 (or a round-up past 65504) -> +/-65504 (0x7bff), an
    exponent below 2^-25 -> signed zero, NaN -> exponent 0x1f with the low 10 mantissa bits (a
    payload whose low bits are zero gives the INF pattern). Returns uint16.

    For every non-NaN pattern that is IEEE 754's float32 -> binary16 conversion (round to nearest
    even, gradual underflow; an fp32 denormal is below 2^-25 and gives a signed zero as the cmod's
    does) with the infinity it gives on overflow - a value that rounds to 2^16 or more, fp32 INF
    included - replaced by the signed maximum; so numpy's cast does it, and NaN is patched after.
    :func:`_narrow` is the cmod's own algorithm; the two agree on every mantissa of both signs for
    the exponents where its path or shift changes (0-2, 50, 99-116, 126-128, 141-145, 200, 253-255)
    and on 2^24 random patterns. ``x`` may also be float32 values (the patterns they hold)."""
    a = np.asarray(x)
    u: np.ndarray | None = None
    if a.dtype == np.float32:
        f = a
    else:
        u = np.asarray(a, dtype=_I64)
        f = u.astype(np.uint32).view(np.float32)  # the low 32 bits
    with np.errstate(over="ignore", invalid="ignore"):
        h = f.astype(np.float16).view(np.uint16)
    mag = h & 0x7FFF
    inf = mag == 0x7C00
    if np.count_nonzero(inf):
        h = np.where(inf, h - 1, h)  # +/-INF (0x7c00 / 0xfc00) -> +/-0x7bff
    nan = mag > 0x7C00  # the cast keeps NaN a NaN (and makes none)
    if np.count_nonzero(nan):
        u = f.view(np.uint32).astype(_I64) if u is None else u
        h = np.where(nan, ((u >> 16) & 0x8000) | 0x7C00 | (u & 0x3FF), h)
    return np.asarray(h, dtype=np.uint16)


def _narrow(x: np.ndarray, e_out: int, *, denorm: bool) -> np.ndarray:
    """cmod ``FpWidthDec<8,23,e_out,10,...>``: fp32 -> 1+e_out+10 bits (FP16: e_out = 5; fp17: 6)."""
    s, e, m = f32_fields(x)
    emax = (1 << e_out) - 1
    delta = 127 - ((1 << (e_out - 1)) - 1)
    sh_out = e_out + 10
    p1 = m | (1 << 23)
    # normal range: RNE 24 -> 11 bits
    top = p1 >> 13
    g = (p1 >> 12) & 1
    st = (p1 & 0xFFF) != 0
    top = top + (g & (st | (top & 1)))
    ovf = top >> 11
    ne = e - delta + ovf
    nm = np.where(ovf == 1, 0, top & 0x3FF)
    maxv = _set_max(s, e_out, 10)
    out = np.where(ne >= emax, maxv, (s << sh_out) | (ne << 10) | nm)
    # the ranges below, each patched only when an exponent falls in it (few numpy calls on a small cube)
    e_lo, e_hi = (int(e.min()), int(e.max())) if e.size else (0, 0)
    in_den = (e <= delta) & (e >= delta - 10) if e_lo <= delta and e_hi >= delta - 10 else None
    if in_den is not None and in_den.any():
        # denormal range: exponent delta-10 .. delta, shift 1..11 (FpMantDecShiftRight)
        sh = np.minimum(np.maximum(delta + 1 - e, 1), 11)
        gpos = 13 + sh - 1
        gd = (p1 >> gpos) & 1
        sd = (p1 & ((_I64(1) << gpos) - 1)) != 0
        ld = (p1 >> (gpos + 1)) & 1
        o = ((p1 >> sh) >> 13) & 0x7FF
        o = o + (gd & (sd | ld))
        if denorm:
            den = (s << sh_out) | np.where(o >> 10 == 1, 1 << 10, o & 0x3FF)
        else:  # DENORM_NO: only a round-up to the smallest normal survives
            den = (s << sh_out) | np.where(o >> 10 == 1, 1 << 10, 0)
        out = np.where(in_den, den, out)
    if e_lo < delta - 10:
        out = np.where(e < delta - 10, s << sh_out, out)
    if e_hi >= emax + delta:
        out = np.where(e >= emax + delta, maxv, out)
    if e_hi == 0xFF:
        out = np.where(f32_nan(e, m), (s << sh_out) | (emax << 10) | (m & 0x3FF), out)
    return out


def _fp_add(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer, eb_: int, mb_: int) -> np.ndarray:
    """``FpAdd<eb_, mb_>`` on the patterns (see :func:`fp32_add_bits`). The operands are ordered
    by magnitude (exponent and mantissa bits compared as one integer, ``a`` on a tie), so the
    exponent difference is never negative; the normalising shift and the round to nearest even
    are each one integer step (``x + half - 1 + lsb``), and the rounding's carry runs into the
    exponent field by itself: few numpy calls, which is what a small cube's time is."""
    a, b = np.asarray(a, _I64), np.asarray(b, _I64)
    em = eb_ + mb_
    m_mask, one, sign = (1 << mb_) - 1, 1 << mb_, 1 << em
    emax = (1 << eb_) - 1
    more = mb_ + 2  # the larger mantissa sits ``more`` bits up; bits shifted below are dropped
    width = more + mb_ + 1  # internal mantissa width
    mag_a, mag_b = a & (sign - 1), b & (sign - 1)
    big, small = np.maximum(mag_a, mag_b), np.minimum(mag_a, mag_b)
    s_big = np.where(mag_a >= mag_b, a, b) & sign  # the result's sign bit, in place
    e_big = big >> mb_
    # the implied one (for big = +/-0 too: both operands are zero, the sum's exponent 0 flushes it)
    p_big = ((big & m_mask) | one) << more
    p_small = ((small & m_mask) | one) * (small != 0)
    # (p << more) >> d: the smaller operand aligned, truncated (d >= 0: ordered by magnitude)
    aligned = (p_small << more) >> np.minimum(e_big - (small >> mb_), 63)
    tot = np.where((a ^ b) & sign, p_big - aligned, p_big + aligned)  # 0 <= tot < 2^(width+1)
    cy = tot >> width  # carry out: shift right by one (dropping a bit)
    zc = width - np.frexp(tot.astype(np.float64))[1]  # -1 on a carry, else the normalising left shift (tot < 2^53)
    oe = e_big - zc
    mant = (tot << np.maximum(zc, 0)) >> cy
    top = (mant + ((1 << (more - 1)) - 1) + ((mant >> more) & 1)) >> more  # RNE to mb_ + 1 bits, 2^mb_ .. 2^(mb_+1)
    mag = (oe << mb_) + (top - one)  # exponent and mantissa fields; a rounding carry bumps the exponent
    out = s_big | mag
    # the largest operand exponent: the result's is at most 2 above it
    e_top = int(np.maximum.reduce(big, axis=None, initial=0)) >> mb_
    if e_top >= emax - 2:  # a carry (of the sum or of the rounding) to the all-ones exponent: the signed maximum
        out = np.where((mag >= emax << mb_) & ((cy | (top >> (mb_ + 1))) != 0), s_big | ((emax - 1) << mb_) | m_mask, out)
    out = np.where((tot == 0) | (oe <= 0), s_big, out)  # too small: signed zero
    if e_top == emax and (big > (emax << mb_)).any():
        return nan_operands(out, a, b, mag_a, mag_b, emax << mb_)
    return out


def _fp_mul(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer, eb_: int, mb_: int) -> np.ndarray:
    """``FpMul<eb_, mb_>`` on the patterns (see :func:`fp32_mul_bits`). Every overflow condition
    of the C model (exponent sum, carry of the product, carry of the rounding) implies a result
    exponent at or above the all-ones one, so that one test stands for all three; the rounding's
    carry runs into the exponent field by itself."""
    a, b = np.asarray(a, _I64), np.asarray(b, _I64)
    em = eb_ + mb_
    m_mask, one = (1 << mb_) - 1, 1 << mb_
    emax, bias = (1 << eb_) - 1, (1 << (eb_ - 1)) - 1
    pw = 2 * mb_ + 1
    mag_a, mag_b = a & ((1 << em) - 1), b & ((1 << em) - 1)
    p = ((mag_a & m_mask) | one) * (mag_a != 0) * (((mag_b & m_mask) | one) * (mag_b != 0))
    sgn = (a ^ b) & (1 << em)  # the result's sign bit, in place
    es = (mag_a >> mb_) + (mag_b >> mb_)
    hi = p >> pw  # the product's top bit (0 or 1); p1 has it at bit pw (a zero product: flushed below)
    p1 = p << (1 - hi)
    trunc = pw - mb_
    top = (p1 + ((1 << (trunc - 1)) - 1) + ((p1 >> trunc) & 1)) >> trunc  # RNE to mb_ + 1 bits, 2^mb_ .. 2^(mb_+1)
    mag = ((es + (hi - bias)) << mb_) + (top - one)  # exponent and mantissa fields
    ea_top = int(np.maximum.reduce(mag_a, axis=None, initial=0)) >> mb_
    eb_top = int(np.maximum.reduce(mag_b, axis=None, initial=0)) >> mb_
    if ea_top + eb_top + 2 - bias >= emax:  # the result's exponent is at most 2 above the sum's: it may overflow
        out = np.where(mag >= emax << mb_, sgn | ((emax - 1) << mb_) | m_mask, sgn | mag)
    else:
        out = sgn | mag
    out = np.where((p == 0) | (es < bias) | (mag < one), sgn, out)  # a zero operand, underflow: signed zero
    if emax in (ea_top, eb_top) and (np.maximum(mag_a, mag_b) > (emax << mb_)).any():
        return nan_operands(out, a, b, mag_a, mag_b, emax << mb_)
    return out


def fp32_add_bits(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer) -> np.ndarray:
    """cmod ``FpAdd<8,23>``: the larger magnitude (exponent, then mantissa, ``a`` on a tie)
    is placed 25 bits up in a 49-bit field, the other shifted to it (bits below the field are
    dropped, no sticky), added or subtracted; a carry out shifts right by one (dropping a bit)
    or overflows (exponent 254) to the maximal value; otherwise normalised (exponent too small
    -> signed zero with the larger operand's sign); RNE to 24 bits. Operands that are all normal,
    zero or NaN take float32 addition (:func:`.fp16_native.fp32_add_native`), others (the INF
    pattern, an exponent of 0 with a mantissa) the field-by-field :func:`_fp_add`."""
    ua, ea = native_fp32_operand(a)
    ub, eb = native_fp32_operand(b)
    if ea is None or eb is None:
        return _fp_add(a, b, 8, 23)
    return fp32_add_native(a, b, ua, ub, max(ea, eb))


def fp32_sub_bits(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer) -> np.ndarray:
    """cmod ``FpSub``: ``b``'s sign flipped (NaN included), then FpAdd."""
    return fp32_add_bits(a, np.asarray(b, _I64) ^ (1 << 31))


def fp32_mul_bits(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer) -> np.ndarray:
    """cmod ``FpMul<8,23>``: 24 x 24-bit mantissa product, exponent sum below the bias ->
    signed zero, at or above 382 -> maximal value, normalised and RNE to 24 bits; a result
    exponent of 0 is flushed to a signed zero; sign = XOR. Operands that are all normal, zero or
    NaN take a float64 product (:func:`.fp16_native.fp32_mul_native`), others the field-by-field
    :func:`_fp_mul`."""
    ua, ea = native_fp32_operand(a)
    ub, eb = native_fp32_operand(b)
    if ea is None or eb is None:
        return _fp_mul(a, b, 8, 23)
    return fp32_mul_native(a, b, ua, ub, ea, eb)


# ---- fp17 (1 + 6 + 10 bits), the SDP LUT interpolation format (cmod sdp_y_inp.cpp)


def fp17_add_bits(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer) -> np.ndarray:
    """cmod ``Fp17Add`` (FpAdd<6,10>), same rules as :func:`fp32_add_bits`; through float32
    (:func:`.fp16_native.fp17_add_native`) unless an operand is the INF pattern (exponent 63,
    mantissa 0), which takes the field-by-field :func:`_fp_add`."""
    r = fp17_add_native(a, b)
    return _fp_add(a, b, 6, 10) if r is None else r


def fp17_mul_bits(a: np.ndarray | int | np.integer, b: np.ndarray | int | np.integer) -> np.ndarray:
    """cmod ``Fp17Mul`` (FpMul<6,10>), same rules as :func:`fp32_mul_bits`; through float32
    (:func:`.fp16_native.fp17_mul_native`) unless an operand is the INF pattern (exponent 63,
    mantissa 0), which takes the field-by-field :func:`_fp_mul`."""
    r = fp17_mul_native(a, b)
    return _fp_mul(a, b, 6, 10) if r is None else r


def fp16_to_fp17_bits(bits: np.ndarray | int | np.integer) -> np.ndarray:
    """cmod ``Fp16ToFp17`` (FpExpoWidthInc<5,6,10,DENORM_YES,NAN_YES>): exact, denormals
    normalised, +/-INF -> the fp17 maximum (exponent 62, mantissa all ones), NaN kept. A lookup
    in the table of all 65536 patterns (:func:`_fp16_to_fp17_rule`, computed once at import)."""
    return np.asarray(_FP16_TO_FP17[as_bits(bits)])


def _fp16_to_fp17_rule(bits: np.ndarray) -> np.ndarray:
    """The rule of :func:`fp16_to_fp17_bits`, vectorised over the patterns (builds its table)."""
    h = as_bits(bits).astype(_I64)
    s, e, m = (h >> 15) & 1, (h >> 10) & 0x1F, h & 0x3FF
    out = _pack(s, e + 16, m, 6, 10)
    blen = _bit_length(m)
    den = _pack(s, 6 + blen, m << np.minimum(np.maximum(11 - blen, 1), 10), 6, 10)
    out = np.where((e == 0) & (m != 0), den, out)
    out = np.where((e == 0) & (m == 0), s << 16, out)
    out = np.where((e == 0x1F) & (m == 0), _set_max(s, 6, 10), out)
    return np.where((e == 0x1F) & (m != 0), _pack(s, 63, m, 6, 10), out)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


#: every FP16 pattern's fp32 / fp17 pattern (int64), constants computed at import
_ALL_FP16 = np.arange(1 << 16, dtype=np.uint16)
_FP16_TO_FP32 = _read_only(_fp16_to_fp32_rule(_ALL_FP16).astype(_I64))
_FP16_TO_FP17 = _read_only(_fp16_to_fp17_rule(_ALL_FP16).astype(_I64))
#: :func:`fp16_to_fp32_bits` of every FP16 pattern, indexed by the pattern (read-only; for compiled loops)
FP16_TO_FP32_TABLE = _FP16_TO_FP32


def fp17_to_fp32_bits(x: np.ndarray) -> np.ndarray:
    """cmod ``Fp17ToFp32`` (FpWidthInc<6,10,8,23,DENORM_NO,NAN_YES>): exponent + 96, mantissa
    << 13; the fp17 INF pattern -> fp32 maximum; NaN -> exponent 0xff, payload not shifted."""
    s, e, m = _fields(x, 6, 10)
    out = _pack32(s, e + 96, m << 13)
    out = np.where((e == 0) & (m == 0), s << 31, out)
    out = np.where((e == 63) & (m == 0), (s << 31) | F32_MAX_BITS, out)
    return np.where((e == 63) & (m != 0), _pack32(s, 0xFF, m), out)


def fp32_to_fp17_bits(x: np.ndarray) -> np.ndarray:
    """cmod ``Fp32ToFp17`` (FpWidthDec<8,23,6,10,DENORM_NO,NAN_YES>): RNE to 10 mantissa bits,
    no denormals (a value below 2^-30 is a signed zero unless it rounds up to 2^-30), overflow
    -> fp17 maximum, NaN keeps the low 10 payload bits."""
    return _narrow(x, 6, denorm=False)


def fraction_to_fp17_bits(frac: np.ndarray, frac_bits: int = 35) -> np.ndarray:
    """cmod ``FpFractionToFloat<35,6,10>``: an unsigned fraction ``frac / 2^35`` -> fp17, RNE
    to 11 significant bits; 0 -> +0."""
    f = np.asarray(frac, dtype=_I64)
    L = _bit_length(f)  # the leading one at bit L-1, value in [2^(L-1-35), 2^(L-35))
    sh = np.minimum(np.maximum(L - 11, 0), 63)
    top = f >> sh
    g = np.where(L > 11, (f >> np.minimum(np.maximum(sh - 1, 0), 63)) & 1, 0)
    st = np.where(L > 12, (f & ((_I64(1) << np.minimum(np.maximum(sh - 1, 0), 62)) - 1)) != 0, False)
    top = np.where(L > 11, top + (g & (st | (top & 1))), top << np.minimum(np.maximum(11 - L, 0), 11))
    ovf = top >> 11
    e = 31 - (frac_bits - L + 1) + 1 + ovf - 1  # 31 - zero_count - 1 (+1 on round-up)
    out = _pack(0, e, top & 0x3FF, 6, 10)
    zc = frac_bits - L
    return np.where((f == 0) | ((ovf == 0) & (zc + 1 >= 31)), 0, out)


def fp32_max_bits(a: np.ndarray, b: np.ndarray, *, take_max: bool = True) -> np.ndarray:
    """cmod ``FpMax``/``FpMin`` (FpCmp): sign/exponent/mantissa comparison of the patterns, a
    NaN operand wins (``a`` first)."""
    a, b = np.asarray(a, _I64), np.asarray(b, _I64)
    mag_a, mag_b = a & 0x7FFFFFFF, b & 0x7FFFFFFF  # exponent and mantissa compare as one integer
    sa, sb = a & (1 << 31), b & (1 << 31)
    # a > b: the larger magnitude of two positives, the smaller of two negatives (a on a tie), a positive
    a_gt = np.where(sa == sb, (mag_a > mag_b) ^ (sa != 0), sb != 0)
    out = np.where(a_gt if take_max else ~a_gt, a, b)
    if (np.maximum(mag_a, mag_b) > 0x7F800000).any():
        return nan_operands(out, a, b, mag_a, mag_b, 0x7F800000)
    return out


def fp32_relu_bits(x: np.ndarray) -> np.ndarray:
    """cmod ``FpRelu``: negative values (not NaN) -> +0."""
    x = np.asarray(x, _I64)
    return np.where(((x & 0x80000000) == 0) | fp32_is_nan(x), x, 0)


def fp32_is_nan(x: np.ndarray) -> np.ndarray:
    """All-ones exponent and a non-zero mantissa: the magnitude bits above the INF pattern's."""
    return (np.asarray(x, _I64) & 0x7FFFFFFF) > 0x7F800000


def float_to_int_frac(x: np.ndarray, rshift: int, int_bits: int = 9, frac_bits: int = 35) -> tuple[np.ndarray, np.ndarray]:
    """cmod ``FpFloatToIntFrac<8,23,8,9,35>`` (the SDP LUT's linear index of a positive fp32
    value): ``x / 2^rshift`` split into an integer part (saturated to 2^9 - 1) and a 35-bit
    fraction; the implied 1 is always set; the unbiased exponent is held in 8 signed bits, so
    the fp32 INF pattern (a register operand) indexes as 2^-128."""
    _, e, m = f32_fields(x)
    p1 = m | (1 << 23)
    abs_e = ((e - 127 + 128) & 0xFF) - 128  # an 8-bit signed exponent: 128 (INF pattern) wraps to -128
    ls = abs_e - int(rshift) - 23
    m_int = np.where(ls >= 0, (1 << int_bits) - 1, p1 >> np.minimum(np.maximum(-ls, 0), 63))
    m_int = np.minimum(m_int, (1 << int_bits) - 1)
    fs = frac_bits + ls
    fra = np.where(fs >= 0, (p1 << np.minimum(np.maximum(fs, 0), 40)) & ((_I64(1) << frac_bits) - 1),
                   p1 >> np.minimum(np.maximum(-fs, 0), 63))
    return m_int, np.where(ls >= 0, 0, fra)


def fp16_to_int16_cmod(bits: np.ndarray) -> np.ndarray:
    """cmod ``Fp16ToInt16`` (FpFloatToInt<16,5,10>): ties away from zero, saturating (the INF
    pattern saturates), NaN -> -32768; the implied 1 is set even for denormals/zero, which all
    round to 0. Returns int64."""
    return fp16_to_int(bits, 16)
