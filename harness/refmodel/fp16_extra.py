"""FP16/fp17 primitives PDP needs beyond :mod:`.fp16` (kept here until they move there).

Both follow NVDLA's C model (nvdla/hw nvdlav1 ``cmod/hls/include/nvdla_float.h``), bit patterns
as integer arrays:

* :func:`fp17_to_fp16_bits` — ``Fp17ToFp16`` = ``FpExpoWidthDec<6,5,10,DENORM_YES,NAN_YES>``
* :func:`fp16_cmp_bits` — ``FpMax<5,10>`` / ``FpMin<5,10>`` (``FpCmp``)
"""

from __future__ import annotations

import numpy as np

__all__ = ["fp16_cmp_bits", "fp17_to_fp16_bits"]

_I64 = np.int64


def fp17_to_fp16_bits(x: np.ndarray | int) -> np.ndarray:
    """fp17 (1+6+10, bias 31) -> FP16, as ``FpExpoWidthDec<6,5,10>``:

    * exponent >= 47 (including the fp17 INF/NaN exponent 63) -> signed 0x7bff (``SetToInf``);
    * exponent < 6 -> signed zero; 6..16 -> FP16 denormal, the mantissa with its implied 1
      shifted right by ``17 - e`` and rounded to nearest even (``FpMantDecShiftRight``; a carry
      out gives exponent 1);
    * otherwise exponent - 16, mantissa kept;
    * NaN (exponent 63, mantissa != 0) -> exponent 31 with the 10-bit payload.
    Returns uint16: a lookup (bits above the 17 ignored) in the table of all 2^17 patterns
    (:func:`_fp17_to_fp16_rule`, computed once at import)."""
    return np.asarray(_FP17_TO_FP16[np.asarray(x, dtype=_I64) & 0x1FFFF])


def _fp17_to_fp16_rule(x: np.ndarray) -> np.ndarray:
    """The rule of :func:`fp17_to_fp16_bits`, vectorised over the patterns (builds its table)."""
    v = np.asarray(x, dtype=_I64) & 0x1FFFF
    s, e, m = (v >> 16) & 1, (v >> 10) & 0x3F, v & 0x3FF
    out = (s << 15) | (np.clip(e - 16, 0, 31) << 10) | m
    p1 = m | 0x400
    sh = np.clip(17 - e, 1, 11)
    guard = (p1 >> (sh - 1)) & 1
    stick = (p1 & ((_I64(1) << (sh - 1)) - 1)) != 0
    least = (p1 >> sh) & 1  # bit 11 of an 11-bit value is 0 (shift 11)
    osum = (p1 >> sh) + (guard & (stick | (least == 1)))
    den = (s << 15) | np.where(osum >> 10 == 1, 1 << 10, osum & 0x3FF)
    out = np.where(e <= 16, den, out)
    out = np.where(e < 6, s << 15, out)
    out = np.where(e >= 47, (s << 15) | 0x7BFF, out)
    out = np.where((e == 63) & (m != 0), (s << 15) | 0x7C00 | m, out)
    return out.astype(np.uint16)


_FP17_TO_FP16 = _fp17_to_fp16_rule(np.arange(1 << 17, dtype=_I64))
_FP17_TO_FP16.flags.writeable = False


def fp16_cmp_bits(a: np.ndarray, b: np.ndarray, *, take_max: bool) -> np.ndarray:
    """``FpMax<5,10>`` / ``FpMin<5,10>`` on FP16 patterns: sign, then exponent, then mantissa
    (so +0 > -0 and INF is the largest); ties give ``b``; a NaN ``a`` wins, else a NaN ``b``."""
    a, b = np.broadcast_arrays(np.asarray(a, _I64) & 0xFFFF, np.asarray(b, _I64) & 0xFFFF)
    sa, ea, ma = a >> 15, (a >> 10) & 0x1F, a & 0x3FF
    sb, eb, mb = b >> 15, (b >> 10) & 0x1F, b & 0x3FF
    abs_gt = (ea > eb) | ((ea == eb) & (ma > mb))
    a_gt = np.where(sa == 0, np.where(sb == 0, abs_gt, True), np.where(sb == 0, False, ~abs_gt))
    out = np.where(a_gt if take_max else ~a_gt, a, b)
    out = np.where((eb == 31) & (mb != 0), b, out)
    return np.where((ea == 31) & (ma != 0), a, out)
