"""NVDLA two-level hybrid LUT (LE: 65 entries, exponential or linear; LO: 257 entries, linear).

Shared decoded configuration for the SDP (EW stage) and CDP (LRN) LUTs. The per-unit
index/fraction/interpolation arithmetic differs (SDP: 35-bit fraction, whole weighted sum
rounded once; CDP: 16-bit fraction, correction term rounded) and is implemented in
``sdp_lut`` (this module) and ``cdp.py``. Rules: docs/nvdla-precision-semantics.md
sections 5 and 6, seed 003.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LutParams", "LutStats", "LE_ENTRIES", "LO_ENTRIES"]

LE_ENTRIES = 65
LO_ENTRIES = 257


@dataclass(frozen=True)
class LutParams:
    """Decoded (signed, mathematical) LUT register values.

    Priorities are ``"LE"`` or ``"LO"``; ``le_function`` is ``"exponent"`` or ``"linear"``.
    Starts/ends are the full signed register values (32-bit on SDP, 38-bit on CDP).
    Slope scales are signed 16-bit, slope shifts signed 5-bit (negative = left shift).
    """

    le_function: str = "exponent"
    le_index_offset: int = 0
    le_index_select: int = 0
    lo_index_select: int = 0
    le_start: int = 0
    le_end: int = 0
    lo_start: int = 0
    lo_end: int = 0
    le_slope_uflow_scale: int = 0
    le_slope_uflow_shift: int = 0
    le_slope_oflow_scale: int = 0
    le_slope_oflow_shift: int = 0
    lo_slope_uflow_scale: int = 0
    lo_slope_uflow_shift: int = 0
    lo_slope_oflow_scale: int = 0
    lo_slope_oflow_shift: int = 0
    uflow_priority: str = "LE"
    oflow_priority: str = "LE"
    hybrid_priority: str = "LE"


@dataclass
class LutStats:
    """Per-layer LUT counters, as the unit's D_PERF_LUT_* registers count them."""

    le_hit: int = 0
    lo_hit: int = 0
    uflow: int = 0
    oflow: int = 0
    hybrid: int = 0
