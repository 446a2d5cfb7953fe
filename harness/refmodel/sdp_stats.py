"""SDP statistics registers (docs/nvdla-precision-semantics.md sections 8.2/8.3): the output
saturation and LUT counters of a layer, with the RTL's live counters kept across layers when an
enable is off ([DIFF] 8.2), for the integer (:mod:`.sdp`) and FP16 (:mod:`.sdp_fp`) datapaths.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import RegisterView
from .lut import LutStats

__all__ = ["LUT_COUNTERS", "SdpLiveCounters", "sdp_statistics"]

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
class SdpLiveCounters:
    """The RTL's live SDP perf counters, kept across layers by the caller ([DIFF] 8.2).

    With a ``PERF_*_EN`` bit off the RTL freezes the live counter (its clear at layer start
    is gated too) and still loads it into the group register at layer end, so the register
    receives the count of the last layer that ran with the enable on. Pass one instance per
    virtual NVDLA to ``run_sdp(..., live=...)`` to reproduce that.
    """

    values: dict[str, int] = field(default_factory=dict)


def sdp_statistics(view: RegisterView, sem: str, sat_count: int, lstats: LutStats, lut_on: bool, ew_on: bool,
                   notes: list[str], live: SdpLiveCounters | None) -> dict[tuple[str, str], int]:
    """SDP statistics registers (section 8.2/8.3)."""
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
