"""Bit-exact integer primitives shared by every NVDLA precision block.

Every function is vectorised over numpy arrays and computes in exact integer arithmetic:
``int64`` where the intermediate provably fits 63 bits, Python-object arrays never.
Source of every rule: docs/nvdla-precision-semantics.md section 1 (cmod
``cmod/hls/include/nvdla_int.h``, RTL ``vmod/vlibs/NV_NVDLA_HLS_shift*.v``).

Notation: ``rnd(v, s)`` = v / 2^s rounded to nearest, ties away from zero.
"""

from __future__ import annotations

from typing import overload

import numpy as np

from ...semantics import Semantics

__all__ = ["sx", "clamp", "clamp_flag", "rsat", "rsat_flag", "lsat", "sshift", "ishift", "sat", "rnd"]

I64 = np.int64


@overload
def sx(value: int | np.integer, bits: int) -> int: ...
@overload
def sx(value: np.ndarray, bits: int) -> np.ndarray: ...
def sx(value: int | np.integer | np.ndarray, bits: int) -> int | np.ndarray:
    """Low ``bits`` of ``value`` read as two's complement (register-field sign extension)."""
    if isinstance(value, np.ndarray):
        v = value.astype(I64) & ((1 << bits) - 1)
        return np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
    iv = int(value) & ((1 << bits) - 1)
    return iv - (1 << bits) if iv >= 1 << (bits - 1) else iv


def clamp(v: np.ndarray, bits: int) -> np.ndarray:
    """Clamp to the signed ``bits``-bit range ``[-2^(bits-1), 2^(bits-1)-1]``."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(v, lo, hi)


sat = clamp


def clamp_flag(v: np.ndarray, bits: int) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return (v < lo) | (v > hi)


def rnd(v: np.ndarray, s: int) -> np.ndarray:
    """``v / 2^s`` rounded to nearest, ties away from zero (cmod AC_RND_INF, RTL guard/sticky).

    Requires |v| < 2^62. ``s == 0`` returns ``v`` unchanged.
    """
    v = np.asarray(v, dtype=I64)
    if s <= 0:
        return v
    if s >= 63:
        return np.zeros_like(v)
    q = v >> s  # floor
    r = v - (q << s)
    half = I64(1) << (s - 1)
    up = (r > half) | ((r == half) & (v >= 0))
    return q + up.astype(I64)


def rsat(v: np.ndarray, s: int, bits: int, *, in_bits: int | None = None) -> np.ndarray:
    """RSAT(v, s, n) = clamp(rnd(v, s), n). With ``in_bits`` given, the RTL rule
    "shift >= input width gives 0" applies."""
    v = np.asarray(v, dtype=I64)
    if in_bits is not None and s >= in_bits:
        return np.zeros_like(v)
    return clamp(rnd(v, s), bits)


def rsat_flag(v: np.ndarray, s: int, bits: int, *, semantics: Semantics = "rtl", in_bits: int | None = None) -> np.ndarray:
    """Saturation flag of RSAT (section 1.2). ``semantics`` 'rtl' or 'cmod' ([DIFF] at the boundary).

    The RTL flags every clamped result (plus a floor of min - 1 that rounds back to min).
    The cmod's ``|floor - result| > 1`` also misses real overflows whose floor is max,
    max + 1 or min - 1 (e.g. 2.5 -> 3 clamped to 1 at 2 bits): more than the two cases the
    semantics doc lists, found by ``tests/test_ops.py::test_rsat_flag_rules``."""
    v = np.asarray(v, dtype=I64)
    if in_bits is not None and s >= in_bits and semantics == "rtl":
        return np.zeros(v.shape, dtype=bool)
    floor = v >> s if s < 63 else np.where(v < 0, -1, 0).astype(I64)
    out = clamp(rnd(v, s), bits)
    if semantics == "cmod":
        return np.abs(floor - out) > 1
    hi = (1 << (bits - 1)) - 1
    r = rnd(v, s)
    inc = r - floor  # rounding increment, 0 or 1
    return clamp_flag(floor, bits) | ((v >= 0) & (floor == hi) & (inc == 1))


def lsat(v: np.ndarray, s: int, bits: int) -> np.ndarray:
    """LSAT(v, s, n) = clamp(v * 2^s, n), exact before clamping."""
    v = np.asarray(v, dtype=I64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if s >= 62:
        return np.where(v > 0, hi, np.where(v < 0, lo, 0)).astype(I64)
    # clamp before shifting to stay inside int64: values beyond the range saturate anyway
    lim = (1 << (62 - s))
    vv = np.clip(v, -lim, lim)
    return np.clip(vv << s, lo, hi)


def sshift(v: np.ndarray, s: int, bits: int) -> np.ndarray:
    """Signed-direction shift: s >= 0 -> RSAT(v, s, bits); s < 0 -> LSAT(v, -s, bits)."""
    return rsat(v, s, bits) if s >= 0 else lsat(v, -s, bits)


def ishift(d: np.ndarray, s: int, bits: int) -> np.ndarray:
    """Index shift (unsigned, truncating): s >= 0 -> min(floor(d/2^s), 2^n-1); s < 0 -> min(d*2^-s, 2^n-1)."""
    d = np.asarray(d, dtype=I64)
    top = (1 << bits) - 1
    if s >= 0:
        return np.minimum(d >> s if s < 63 else np.zeros_like(d), top)
    k = -s
    if k >= 62:
        return np.where(d > 0, top, 0).astype(I64)
    return np.minimum(np.minimum(d, 1 << (62 - k)) << k, top)
