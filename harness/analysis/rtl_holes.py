"""What the holes in a run's RTL coverage mean: every unhit point of NVDLA's design sorted by why
it was not reached, per unit, so that a verification lead reads "unreachable here" apart from
"our generators never draw it" apart from "missed".

The classes, first matching rule wins (:data:`RULES`; each rule reads a point's source file, its
instance path and, for a toggle, the signal and bit):

* ``held``: signals the testbench or NVDLA's top holds for the whole run: the RAM power-down bus
  (``pwrbus_ram_pd``), test and clock-override controls, and resets falling (a coverage run
  starts a fresh simulator per test, so a reset only rises).
* ``absent``: logic of a feature the configuration's profile does not have (``features`` in
  ``drivers/data/profiles.yaml``): FP16 (NaN/INF counters, ``fp`` paths) in an INT8-only build,
  Winograd, weight compression, the SDP LUT and EW, the secondary memory port, BDMA, Rubik.
  Reaching it needs another configuration.
* ``not drawn``: logic the configuration has but no suite or generator drives: address bits above
  those of the harness's surface placement (every surface near ``0x80000000``), register fields'
  high bits (``reg2dp_*``: sizes, strides and offsets beyond what the generators draw), performance
  counters' high bits (``dp2reg_*``: never counted that far), CFGROM (read only by CSB reads of its
  registers, which no suite makes). For ``reg2dp_*`` fields the report names each field and the
  lowest bit never set: that is what to widen in the fuzz constraints (:func:`field_gaps`).
* ``missed``: everything else: the holes to look at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .rtl_coverage import KINDS, NOT_DESIGN, RunCoverage

__all__ = ["CLASSES", "PLACEMENT", "RULES", "HoleRule", "classify", "field_gaps", "format_classes"]

CLASSES = ("held", "absent", "not drawn", "missed")

#: why address bits are unhit: the fuzz constraints' ``place_mib`` reaches them (harness/fuzz/steer.py)
PLACEMENT = "address bits above the harness's surface placement"

#: lowest address bit the harness's surface placement never toggles (surfaces sit in the first MiBs
#: above 0x80000000, harness/vectors: "keep their surfaces at 0x80000000 and above")
ADDRESS_BIT = 24


@dataclass(frozen=True)
class HoleRule:
    """One reason: ``klass`` (:data:`CLASSES`), the regular expression that selects points and what it
    reads (``signal``: a toggle's signal name, lower case, without its bit; ``file``: the source
    file's name, lower case; ``hier``: the instance path, lower case), the profile feature whose
    absence it means (``absent`` only: the rule applies when the profile lacks it), the lowest bit a
    toggle must have (``min_bit``), the units it is about (``units``), and the reason in a phrase."""

    klass: str
    where: str
    pattern: str
    why: str
    feature: str = ""
    min_bit: int = 0
    units: tuple[str, ...] = ()  # only points of these units (lower case; empty: any)

    def matches(self, signal: str, bit: int, file: str, hier: str, features: Mapping[str, bool], unit: str = "") -> bool:
        if self.feature and features.get(self.feature, True):
            return False  # the profile has the feature: not why this point is unhit
        if self.min_bit and bit < self.min_bit:
            return False
        if self.units and unit not in self.units:
            return False
        text = {"signal": signal, "file": file, "hier": hier}[self.where]
        return bool(text) and re.search(self.pattern, text) is not None


RULES: tuple[HoleRule, ...] = (
    HoleRule("held", "signal", r"pwrbus_ram_pd", "RAM power-down bus: tied by NVDLA's top"),
    HoleRule("held", "signal", r"(^|_)(test_mode|global_clk_ovr_on|tmc2slcg_disable_clock_gating|dla_clk_ovr_on"
             r"|direct_reset_|scan_)", "test and clock-override controls the testbench holds"),
    HoleRule("absent", "hier", r"bdma", "BDMA", "bdma"),
    HoleRule("absent", "hier", r"rubik", "Rubik", "rubik"),
    HoleRule("absent", "signal", r"(^|_)(nan|inf)(_|$)|fp16|fp17|fp32|(^|_)fp(_|$)", "the FP16 datapath", "fp16"),
    HoleRule("absent", "file", r"fp16|fp17|fp32|_fp_|hls_fp", "the FP16 datapath", "fp16"),
    HoleRule("absent", "signal", r"int16", "INT16", "int16"),
    HoleRule("absent", "signal", r"wino|(^|_)wg(_|$)", "Winograd convolution", "winograd"),
    HoleRule("absent", "file", r"_wg|wino", "Winograd convolution", "winograd"),
    HoleRule("absent", "signal", r"wmb|compress|(^|_)wt_(mask|density)|density", "weight compression",
             "weight_compression", units=("cdma", "csc", "cmac")),
    HoleRule("absent", "signal", r"(^|_)lut(_|$)", "the SDP LUT", "sdp_lut", units=("sdp",)),
    HoleRule("absent", "signal", r"(^|_)(ew|erdma)(_|$)", "SDP EW", "sdp_ew", units=("sdp",)),
    HoleRule("absent", "signal", r"cvif|(^|_)cv_|cvsram|sec_mem", "the secondary memory port (CVIF)", "sec_mem"),
    HoleRule("absent", "hier", r"cvif", "the secondary memory port (CVIF)", "sec_mem"),
    HoleRule("not drawn", "file", r"cfgrom", "CFGROM: read only by CSB reads of its registers, which no suite makes"),
    HoleRule("not drawn", "signal", r"addr|(^|_)base|_high", PLACEMENT, min_bit=ADDRESS_BIT),
    HoleRule("not drawn", "signal", r"^reg2dp_", "register field values the generators never draw (high bits)"),
    HoleRule("not drawn", "signal", r"^dp2reg_.*(perf|cnt|count|num)|perf", "performance counters' high bits"),
)

_BIT = re.compile(r"^(?P<name>[^\[:]+)(\[(?P<bit>\d+)\])?")


def _toggle_signal(comment: str) -> tuple[str, int]:
    """``name[bit]:0->1`` -> (name lower case, bit; -1 without one)."""
    m = _BIT.match(comment)
    if not m:
        return "", -1
    return m.group("name").lower(), int(m.group("bit")) if m.group("bit") is not None else -1


def classify(run: RunCoverage, features: Mapping[str, bool], rules: Sequence[HoleRule] = RULES
             ) -> dict[str, dict[str, dict[str, int]]]:  # fmt: skip
    """Per unit, per class (:data:`CLASSES`), per reason: how many of the unit's design points the
    run did not hit (line, branch and toggle together)."""
    p = run.points
    miss = np.nonzero(p.design_mask() & ~run.hit_mask())[0]
    toggle = KINDS.index("toggle")
    out: dict[str, dict[str, dict[str, int]]] = {}
    files = [Path(f).name.lower() for f in p.files]
    for i in miss.tolist():
        unit = p.units[p.unit[i]]
        if unit in NOT_DESIGN:
            continue
        signal, bit = _toggle_signal(p.comments[i]) if p.kind[i] == toggle else ("", -1)
        hier = p.hiers[i].lower()
        rule = next((r for r in rules if r.matches(signal, bit, files[p.file[i]], hier, features, unit)), None)
        klass, why = (rule.klass, rule.why) if rule else ("missed", "")
        reasons = out.setdefault(unit, {k: {} for k in CLASSES})[klass]
        reasons[why] = reasons.get(why, 0) + 1
    return dict(sorted(out.items()))


def field_gaps(run: RunCoverage, *, limit: int = 10) -> tuple[list[tuple[str, int, int]], list[str]]:
    """The register fields (``reg2dp_*`` signals) the run set, but never to their high values:
    ``(field, lowest bit never toggled, its width)``, the widest gaps first: the values the fuzz
    constraints would have to draw (bit ``b`` never toggled: never ``2**b`` or more); and the
    fields no bit of which ever toggled (never set at all: often a register group's copy the
    harness does not use, or a mode no suite selects)."""
    p = run.points
    hit = run.hit_mask()
    toggle = KINDS.index("toggle")
    seen: dict[str, set[int]] = {}
    unhit: dict[str, set[int]] = {}
    for i in np.nonzero(p.design_mask() & (p.kind == toggle))[0].tolist():
        signal, bit = _toggle_signal(p.comments[i])
        if not signal.startswith("reg2dp_") or bit < 0:
            continue
        seen.setdefault(signal, set()).add(bit)
        if not hit[i]:
            unhit.setdefault(signal, set()).add(bit)
    gaps, never = [], []
    for sig, bits in unhit.items():
        width = max(seen[sig]) + 1
        low = min(bits)
        if low == 0 and len(bits) == len(seen[sig]):
            never.append(sig.removeprefix("reg2dp_"))
        elif low > 0 and all(b in bits for b in range(low, width)):  # the top bits from ``low`` up
            gaps.append((sig.removeprefix("reg2dp_"), low, width))
    gaps.sort(key=lambda g: (-(g[2] - g[1]), g[0]))
    return gaps[:limit], sorted(never)


def format_classes(classes: Mapping[str, Mapping[str, Mapping[str, int]]], gaps: Iterable[tuple[str, int, int]] = (),
                   never: Sequence[str] = ()) -> str:  # fmt: skip
    """Lines: per unit, the unhit points per class with the largest reasons; then the field gaps."""
    lines = [f"{'unit':12s}" + "".join(f"{k:>11s}" for k in CLASSES) + "  largest reasons"]
    totals = dict.fromkeys(CLASSES, 0)
    for unit, per in classes.items():
        counts = {k: sum(per[k].values()) for k in CLASSES}
        for k, n in counts.items():
            totals[k] += n
        top = sorted(((n, k, why) for k in CLASSES if k != "missed" for why, n in per[k].items()), reverse=True)[:2]
        lines.append(f"{unit.upper():12s}" + "".join(f"{counts[k]:>11d}" for k in CLASSES)
                     + "  " + "; ".join(f"{k}: {why} ({n})" for n, k, why in top))
    lines.append(f"{'total':12s}" + "".join(f"{totals[k]:>11d}" for k in CLASSES))
    gaps = list(gaps)
    if gaps:
        lines.append("register fields never set to their high values (draw them: fuzz constraints / --set):")
        lines += [f"  {f}: bits {lo}..{w - 1} never set (values >= {1 << lo} never drawn)" for f, lo, w in gaps]
    if never:
        lines.append(f"register fields never set at all ({len(never)}): " + ", ".join(never[:12])
                     + (", ..." if len(never) > 12 else ""))
    return "\n".join(lines)
