"""The RTL's coverage holes fed back into the fuzz constraints (``nvdla-hil coverage rtl RUN
--widen UNIT``): a register field the run set but never to its high values
(:func:`~..analysis.rtl_holes.field_gaps`: ``reg2dp_cube_in_width`` bits 5..12 never set) is
traced to the unit's constraint field that drives it (:func:`field_drivers`), and a constraints
file widens that field's range until the draws reach the missing bits (:func:`widen`).

Which constraint field drives which register field is found from the generator itself, not from a
table: every other field pinned at one draw's values, the field is set to its low end, its high
end and its middle, and the register fields whose value follows it in a straight line (the three
points agree) are the ones it drives, with that slope. So a new unit or a renamed register needs
nothing here. Names match as NVDLA's RTL names its register outputs: ``reg2dp_<field>`` (or a
group's ``reg2dp_d0_<field>``) for register field ``<FIELD>``.

Each round widens a field by :data:`BITS_PER_ROUND` register bits past the lowest one never set
(the cost of a layer grows with its size: a nightly that widens every night reaches the top bits
in a few nights, at a cost the team sees grow), never past the unit's legal range.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..vectors.layer import Draft, rng_for
from .case import EventCapture, case_name, provenance, run_reference, sampler_for
from .draw import Constraints, Sampler
from .legal import IntF
from .registry import GENERATORS

__all__ = ["BITS_PER_ROUND", "Driver", "Widening", "constraints_text", "field_drivers", "widen"]

#: register bits past the lowest never-set one that one round of widening reaches
BITS_PER_ROUND = 2


@dataclass(frozen=True)
class Driver:
    """Constraint field ``field`` sets register field ``register`` (``BLOCK.REGISTER.FIELD``) to
    ``at_lo + slope * (value - lo)``."""

    field: str
    register: str
    lo: int
    at_lo: int
    slope: float

    def value_for(self, register_value: int) -> int:
        """The smallest field value whose register value is at least ``register_value``."""
        import math

        return self.lo + max(0, math.ceil((register_value - self.at_lo) / self.slope))


@dataclass(frozen=True)
class Widening:
    """One field's new range and why: the register field and its bits never set."""

    field: str
    lo: int
    hi: int
    old_hi: int
    register: str
    bits: tuple[int, int]  # (lowest never set, width)
    capped: bool  # the legal range stopped it short of the bits


def _registers(d: Draft) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in d.registers:
        for f, v in r["fields"].items():
            if isinstance(v, (int,)) and not isinstance(v, bool):
                out[f"{r['reg']}.{f}"] = int(v)
    return out


def _draft(c: Constraints, pinned: dict[str, Any], seed: int, index: int, dut: str) -> dict[str, int]:
    import tempfile
    from pathlib import Path

    name = case_name(c.unit, seed, index)
    prov = provenance(c, seed, index, "rtl")
    with tempfile.TemporaryDirectory(prefix="nvdla-widen-") as tmp:
        def capture(d: Draft) -> dict[str, list[dict[str, Any]]]:
            cap = EventCapture()
            run_reference(d, name, prov, Path(tmp) / name, "rtl", cap)
            return cap.events

        s = Sampler(c, rng_for(seed, index), dut=dut, pinned=pinned)
        return _registers(GENERATORS[c.unit](s, c.profile, capture))


def _lines(c: Constraints, name: str, base: dict[str, Any], seed: int, index: int, dut: str) -> dict[str, Driver]:
    """The register fields that follow field ``name`` in a straight line (to within one, the
    generator's rounding) at four values, every other field pinned at ``base``."""
    spec = c.fields[name]
    at = sorted({spec.lo, spec.lo + 1, (spec.lo + spec.hi) // 2, spec.hi})
    regs = [_draft(c, {**base, name: v}, seed, index, dut) for v in at]
    out: dict[str, Driver] = {}
    for reg in sorted(set.intersection(*(set(r) for r in regs))):
        ys = [r[reg] for r in regs]
        if abs(ys[-1] - ys[0]) < 2:  # a flag the field happens to flip is no line
            continue
        slope = (ys[-1] - ys[0]) / (at[-1] - at[0])
        if all(abs(ys[0] + slope * (x - at[0]) - y) <= 1 for x, y in zip(at, ys, strict=True)):
            out[reg] = Driver(name, reg, spec.lo, ys[0], slope)
    return out


def field_drivers(c: Constraints, fields: Iterable[str] | None = None, *, seed: int = 0, dut: str = "verilator",
                  bases: int = 3) -> list[Driver]:  # fmt: skip
    """The register fields each range field of ``c`` (or of ``fields``) drives: :func:`_lines`
    from ``bases`` draws of ``seed`` (cases 0, 1, ...), kept where at least two draws trace it and
    all that do agree on the slope (a register field a draw's data decided, a random operand drawn
    after the data, follows a field by chance in one draw, not in two; a draw where the field
    changes nothing, a split layer whose width the split decides, says nothing). A draw whose
    generator refuses one of the pinned values is left out."""
    drawn = [{k: v for k, v in sampler_for(c, seed, i, 0, dut).v.items() if k in c.fields} for i in range(bases)]
    out: list[Driver] = []
    for name in fields if fields is not None else list(c.fields):
        spec = c.fields.get(name)
        if spec is None or spec.kind != "range" or spec.hi - spec.lo < 2:
            continue
        found = []
        for i, base in enumerate(drawn):
            try:
                found.append(_lines(c, name, base, seed, i, dut))
            except Exception:  # noqa: BLE001 - a pinned combination the generator refuses: not traced
                continue
        if len(found) < 2:
            continue
        for reg in sorted(set.union(*(set(f) for f in found))):
            have = [f[reg] for f in found if reg in f]
            if len(have) >= 2 and all(abs(d.slope - have[0].slope) < 1e-9 for d in have):
                out.append(have[0])
    return out


def _signal_field(signal: str) -> str:
    """``cube_in_width`` of ``reg2dp_cube_in_width`` or ``reg2dp_d0_cube_in_width``."""
    return re.sub(r"^(reg2dp_)?(d[01]_)?", "", signal).lower()


def widen(c: Constraints, gaps: Sequence[tuple[str, int, int]], drivers: Sequence[Driver],
          bits_per_round: int = BITS_PER_ROUND) -> list[Widening]:  # fmt: skip
    """Per constraint field that drives a register field of ``gaps`` (``(signal, lowest bit
    never set, width)``, :func:`~..analysis.rtl_holes.field_gaps`) upward, the range that
    reaches ``bits_per_round`` bits past the lowest never set (capped by the unit's legal range);
    the widest need per field wins."""
    by_field: dict[str, Widening] = {}
    for signal, low, width in gaps:
        want = _signal_field(signal)
        for d in drivers:
            if d.slope <= 0 or d.register.rsplit(".", 1)[-1].lower() != want:
                continue
            spec = c.fields[d.field]
            legal = c.schema.get(d.field)
            top = min(width, low + bits_per_round)
            need = d.value_for((1 << top) - 1)
            cap = legal.hi if isinstance(legal, IntF) else spec.hi
            hi = min(need, cap)
            if hi <= spec.hi:
                continue
            w = Widening(d.field, spec.lo, hi, spec.hi, d.register, (low, width), need > cap)
            if d.field not in by_field or w.hi > by_field[d.field].hi:
                by_field[d.field] = w
    return sorted(by_field.values(), key=lambda w: w.field)


def constraints_text(c: Constraints, widenings: Sequence[Widening], source: str) -> str:
    """A constraints file (``fuzz --constraints``) with the widened ranges; each field keeps its
    ``when``/``default``, and draws an end of its range (either, alike) at least 35 % of the
    time (``extremes``), so the new high end comes in about one draw of six."""
    lines = [f"# RTL coverage holes fed back into the constraints of {c.unit} on {c.profile.name}:",
             f"#   nvdla-hil coverage rtl {source} --widen {c.unit}",
             "# each field below drives a register field whose high bits the run never set; its range is",
             f"# widened {BITS_PER_ROUND} bits past the lowest never set (harness/fuzz/widen.py)",
             f"unit: {c.unit}", f"profile: {c.profile.name}", "fields:"]
    for w in widenings:
        spec = c.fields.get(w.field)
        extra = ""
        if spec is None:  # a field the constraints leave at its default (the placement): its range only
            lines.append(f"  {w.field}: {{range: [{w.lo}, {w.hi}], extremes: 0.35}}  # was {w.old_hi}; "
                         f"{w.register} bits {w.bits[0]}..{w.bits[1] - 1} never set")
            continue
        if spec.when:
            extra += ", when: {" + ", ".join(f"{k}: [{', '.join(map(str, vs))}]" for k, vs in spec.when.items()) + "}"
            extra += f", default: {spec.default}"
        lo, width = w.bits
        why = f"{w.register} bits {lo}..{width - 1} never set" + (" (capped by the legal range)" if w.capped else "")
        lines.append(f"  {w.field}: {{range: [{w.lo}, {w.hi}], extremes: {max(spec.extremes, 0.35):g}{extra}}}"
                     f"  # was [{w.lo}, {w.old_hi}]; {why}")
    return "\n".join(lines) + "\n"
