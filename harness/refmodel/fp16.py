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

__all__ = [
    "FP16_MAX", "FP16_MAX_BITS", "FP16_POS_INF", "FP16_NEG_INF", "FP16_QNAN", "FP32_MAX",
    "INF_VALUES", "NanInfCounts",
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


def as_bits(bits: np.ndarray | int) -> np.ndarray:
    """Validate and return ``bits`` as a uint16 array (ints must lie in 0..0xffff)."""
    a = np.asarray(bits)
    if a.dtype == np.uint16:
        return a
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"FP16 bit patterns must be integers, got dtype {a.dtype}")
    if a.size and (a.min() < 0 or a.max() > 0xFFFF):
        raise ValueError("FP16 bit patterns must lie in 0..0xffff")
    return a.astype(np.uint16)


def to_float(bits: np.ndarray | int, dtype: type = np.float32) -> np.ndarray:
    """FP16 bit patterns -> float values (exact; denormals included, INF/NaN kept)."""
    return as_bits(bits).view(np.float16).astype(dtype)


def is_nan(bits: np.ndarray | int) -> np.ndarray:
    """Exponent all ones and mantissa non-zero."""
    b = as_bits(bits)
    return ((b & _EXP_MASK) == _EXP_MASK) & ((b & _MANT_MASK) != 0)


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
