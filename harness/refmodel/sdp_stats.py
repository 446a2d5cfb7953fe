"""SDP statistics registers (docs/nvdla-precision-semantics.md sections 8.2/8.3): the output
saturation and LUT counters of a layer, with the RTL's live counters kept across layers when an
enable is off ([DIFF] 8.2), for the integer (:mod:`.sdp`) and FP16 (:mod:`.sdp_fp`) datapaths.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import RegisterView
from .fp16 import NanInfCounts
from .lut import LutStats
from ...semantics import Semantics

__all__ = ["LUT_COUNTERS", "SdpDatapathOut", "SdpLiveCounters", "sdp_statistics"]

U32_MAX = 0xFFFFFFFF

#: LUT counter register -> :class:`~.lut.LutStats` attribute
LUT_COUNTERS = (
    ("D_PERF_LUT_UFLOW", "uflow"),
    ("D_PERF_LUT_OFLOW", "oflow"),
    ("D_PERF_LUT_HYBRID", "hybrid"),
    ("D_PERF_LUT_LE_HIT", "le_hit"),
    ("D_PERF_LUT_LO_HIT", "lo_hit"),
)


@dataclass
class SdpDatapathOut:
    """What SDP's datapath (BS, BN, EW and its LUT; :mod:`.sdp`, :mod:`.sdp_fp`) hands the output
    stage (the C convertor, WDMA or PDP, and the statistics)."""

    #: the results, (Cpad, H, W): 32-bit values, fp32 patterns, or float32 values (:mod:`.sdp_fp`)
    x: np.ndarray
    #: EW's ALU compared for EQL: its 0/1 results pass C unsaturated and nothing is written (3.3)
    eql: bool = False
    #: the LUT's hit and range counts, and whether the LUT and EW ran (the counters' rules, 8.2)
    lut: LutStats = field(default_factory=LutStats)
    lut_on: bool = False
    ew_on: bool = False
    #: FP16 input: the NaN / INF patterns of the input atoms read (8.3)
    input_counts: NanInfCounts = field(default_factory=NanInfCounts)
    notes: list[str] = field(default_factory=list)


@dataclass
class SdpLiveCounters:
    """The RTL's live SDP perf counters, kept across layers by the caller ([DIFF] 8.2).

    With a ``PERF_*_EN`` bit off the RTL freezes the live counter (its clear at layer start
    is gated too) and still loads it into the group register at layer end, so the register
    receives the count of the last layer that ran with the enable on. Pass one instance per
    virtual NVDLA to ``run_sdp(..., live=...)`` to reproduce that.
    """

    values: dict[str, int] = field(default_factory=dict)


def sdp_statistics(view: RegisterView, sem: Semantics, sat_count: int, dp: SdpDatapathOut,
                   live: SdpLiveCounters | None) -> dict[tuple[str, str], int]:
    """SDP statistics registers (section 8.2/8.3) of a layer whose datapath gave ``dp`` and whose
    output saturated ``sat_count`` times; notes go to ``dp.notes``."""
    lstats, lut_on, ew_on, notes = dp.lut, dp.lut_on, dp.ew_on, dp.notes
    stats: dict[tuple[str, str], int] = {}
    counters: dict[str, tuple[bool, int]] = {
        "D_PERF_OUT_SATURATION": (bool(view.field("SDP", "D_PERF_ENABLE", "PERF_SAT_EN")), sat_count),
    }
    lut_en = bool(view.field("SDP", "D_PERF_ENABLE", "PERF_LUT_EN"))
    if sem == "cmod":
        if ew_on and lut_on:
            for reg, attr in LUT_COUNTERS:
                counters[reg] = (lut_en, getattr(lstats, attr))
    else:
        for reg, attr in LUT_COUNTERS:
            counters[reg] = (lut_en, getattr(lstats, attr) if lut_on else 0)
    stale: list[str] = []
    for reg, (enabled, value) in counters.items():
        value = min(value, U32_MAX)
        if enabled:
            stats[("SDP", reg)] = value
            if live is not None:
                live.values[reg] = value
        elif sem == "rtl":
            # frozen live counter is loaded at layer end ([DIFF] 8.2)
            if live is not None:
                stats[("SDP", reg)] = live.values.get(reg, 0)
            else:
                stale.append(reg)
        # cmod: register left untouched
    if stale:
        notes.append(f"SDP: enable off, RTL loads stale live counters (not tracked): {', '.join(stale)}")
    return stats
