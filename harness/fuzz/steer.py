"""Random layers steered by the RTL's own coverage (``nvdla-hil fuzz --target verilator --steer
rtl-coverage``), against uniform draws under the same budget of simulated cycles.

Uniform fuzzing draws every case afresh from the constraints. Steered fuzzing does what RTL
fuzzers with coverage feedback do (RFUZZ, DifuzzRTL, DirectFuzz): a case whose run on the
instrumented simulator (``sim build --coverage``) hit RTL points nothing before it hit (not the
baseline, e.g. the bundled suites, nor an earlier case) joins a corpus, and later cases are
mostly *mutants* of corpus entries: the parent's field values (register fields, shapes, modes:
what :class:`~.draw.Sampler` drew) pinned with ``--set`` except a third to two thirds of them
redrawn, on a fresh random stream (so the data patterns are new too); half the cases stay
uniform draws. A parent is picked with a weight of
the points it gained per million cycles it cost (AFL's energy, in cycles): cheap cases that
found something are mutated most, so more cases fit in the budget. ``target`` narrows what
counts as new to a unit or a file's line range (DirectFuzz's target sites).

Every case is still a full differential case: the reference model's golden, every output
element compared (:func:`~.runner.run_one`); a disagreement is reported like any fuzz failure.
Each case's mutant is replayable: its line names the seed, index and the ``--set`` items.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import rtl_coverage as rc
from .case import case_name, sampler_for
from .draw import Constraints
from .registry import load_constraints
from .runner import FuzzCase, run_one

__all__ = ["MODES", "SteerCase", "SteerReport", "Target", "baseline_hits", "run_steered"]

MODES = ("uniform", "rtl-coverage")
#: what a new point is, for the comparison of modes: NVDLA's design lines and toggles
COUNTED_KINDS = ("line", "toggle")


@dataclass(frozen=True)
class Target:
    """What counts as new coverage: a unit (``sdp``), a file's name with an optional line
    range (``NV_NVDLA_SDP_core.v:100-300``), or everything (``None``)."""

    unit: str | None = None
    file: str | None = None
    lines: tuple[int, int] | None = None

    @classmethod
    def parse(cls, text: str | None) -> Target:
        if not text:
            return cls()
        m = re.fullmatch(r"([^:]+\.s?v):(\d+)-(\d+)", text)
        if m:
            return cls(file=m.group(1), lines=(int(m.group(2)), int(m.group(3))))
        if text.endswith((".v", ".sv")):
            return cls(file=text)
        return cls(unit=text.lower())

    def mask(self, points: rc.Points) -> np.ndarray:
        kinds = np.isin(points.kind, [rc.KINDS.index(k) for k in COUNTED_KINDS])
        m = points.design_mask() & kinds
        if self.unit is not None:
            if self.unit not in points.units:
                raise ValueError(f"--steer-target {self.unit}: no such unit; units: {', '.join(points.units)}")
            m &= points.unit == points.units.index(self.unit)
        if self.file is not None:
            idx = [i for i, f in enumerate(points.files) if Path(f).name == self.file or f.endswith(self.file)]
            if not idx:
                raise ValueError(f"--steer-target {self.file}: no RTL file of that name in the build")
            m &= np.isin(points.file, idx)
            if self.lines is not None:
                m &= (points.line >= self.lines[0]) & (points.line <= self.lines[1])
        return m


@dataclass
class SteerCase:
    case: FuzzCase
    cycles: int
    new: int  # counted points no earlier case (nor the baseline) hit
    parent: str | None = None  # the corpus entry it mutates (None: a uniform draw)
    sets: list[str] = field(default_factory=list)


@dataclass
class SteerReport:
    unit: str
    profile: str
    mode: str
    seed: int
    budget_cycles: int
    cases: list[SteerCase] = field(default_factory=list)
    baseline_points: int = 0  # counted points the baseline already hit
    counted_points: int = 0  # counted points of the design (the target's)
    seconds: float = 0.0

    @property
    def cycles(self) -> int:
        return sum(c.cycles for c in self.cases)

    @property
    def new_points(self) -> int:
        return sum(c.new for c in self.cases)

    @property
    def failed(self) -> list[SteerCase]:
        return [c for c in self.cases if c.case.status in ("failed", "error")]

    def line(self) -> str:
        mut = sum(c.parent is not None for c in self.cases)
        return (f"{self.unit} on {self.profile}, {self.mode}, seed {self.seed}: {len(self.cases)} cases "
                f"({mut} mutants), {self.cycles} cycles of {self.budget_cycles}; {self.new_points} new line+toggle "
                f"points beyond the baseline's {self.baseline_points} (of {self.counted_points}); "
                f"{len(self.failed)} failed; {self.seconds:.0f} s")


def baseline_hits(folder: str | Path | None, build: str) -> tuple[rc.RunCoverage | None, np.ndarray | None]:
    """The merged coverage of a previous run's ``rtl-coverage/tests/`` folder for ``build``
    (the simulator's cache key: the catalogue must be the same), and its hit mask."""
    if folder is None:
        return None, None
    folder = Path(folder)
    tests = folder / "tests" if (folder / "tests").is_dir() else folder
    where = tests / re.sub(r"[^A-Za-z0-9_.-]+", "_", build)
    if not (where / rc.CATALOGUE).is_file():
        have = sorted(d.name for d in tests.glob("*") if (d / rc.CATALOGUE).is_file())
        raise ValueError(f"--baseline {folder}: no coverage of build {build} (it has: {', '.join(have) or 'none'})")
    run = rc.merge_build(where)
    return run, run.counts > 0


def _field_values(c: Constraints, seed: int, index: int, dut: str, draw: int = 0) -> dict[str, Any]:
    """The values the kept draw ``draw`` of case ``index`` of ``seed`` took for the constraint fields."""
    s = sampler_for(c, seed, index, draw, dut)
    return {k: s.v[k] for k in c.fields}


def _mutable(c: Constraints) -> list[str]:
    """Fields with more than one value to draw."""
    out = []
    for name, f in c.fields.items():
        if f.kind == "range" and f.hi > f.lo or f.kind == "choices" and len(f.values) > 1:
            out.append(name)
    return out


def _pin(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class _Entry:
    name: str
    values: dict[str, Any]
    gained: int
    cycles: int
    children: int = 0

    def energy(self) -> float:
        return self.gained / (max(self.cycles, 1) / 1e6) / (1 + 0.1 * self.children)


def _mutant(corpus: list[_Entry], mutable: list[str], pick: np.random.Generator) -> tuple[_Entry, list[str]]:
    """A parent picked by energy, and the ``--set`` items pinning its fields but a third to two
    thirds of the mutable ones (redrawn)."""
    w = np.array([e.energy() for e in corpus])
    parent = corpus[int(pick.choice(len(corpus), p=w / w.sum()))]
    parent.children += 1
    n = len(mutable)
    size = int(pick.integers(max(1, n // 3), max(1, (2 * n) // 3) + 1))
    redraw = set(pick.choice(mutable, size=min(n, size), replace=False).tolist())
    return parent, [f"{k}={_pin(v)}" for k, v in parent.values.items() if k not in redraw]


def run_steered(unit: str, spec: Any, folder: Any, *, mode: str, seed: int, budget_cycles: int,
                profile: str | None = None, constraint_files: Sequence[str] = (), sets: Sequence[str] = (),
                baseline: str | Path | None = None, target: Target | None = None, first: int = 0,
                mutate_share: float = 0.5, out: Path | None = None, max_cases: int = 10_000,
                log: Callable[[str], None] | None = None) -> SteerReport:  # fmt: skip
    """Run ``unit`` cases on the verilator target of ``spec`` (instrumented; ``folder`` its
    :class:`~..targets.verilator.RtlCoverageFolder`) until ``budget_cycles`` simulated cycles
    are spent: uniform draws (``mode="uniform"``) or steered by RTL coverage
    (``"rtl-coverage"``). Cases ``first``, ``first+1``, ... of ``seed``: a uniform run and the
    uniform draws of a steered one are the same cases; mutants take indices of their own
    (``first + 1_000_000 + n``)."""
    if mode not in MODES:
        raise ValueError(f"--steer {mode}: expected one of {', '.join(MODES)}")
    from ..targets import open_target

    files, sets = list(constraint_files), list(sets)
    c0 = load_constraints(unit, profile=profile, files=files, sets=sets)
    dspec = replace(spec.with_profile(c0.profile.name), rtl_coverage=folder)
    rep = SteerReport(unit, c0.profile.name, mode, seed, budget_cycles)
    pick = np.random.Generator(np.random.PCG64([seed, 0x57EE4]))
    corpus: list[_Entry] = []
    mutable = _mutable(c0)
    t0 = time.monotonic()
    with open_target(dspec) as dut:
        sim: Any = getattr(dut, "sim", dut)  # the VerilatorTarget (cycles, its coverage)
        points: rc.Points | None = None
        covered: np.ndarray | None = None
        counted: np.ndarray | None = None
        uniform_i = first
        mutant_i = first + 1_000_000
        while rep.cycles < budget_cycles and len(rep.cases) < max_cases:
            parent: _Entry | None = None
            case_sets: list[str] = []
            c = c0
            if mode == "rtl-coverage" and corpus and mutable and pick.random() < mutate_share:
                parent, case_sets = _mutant(corpus, mutable, pick)
                try:
                    c = load_constraints(unit, profile=profile, files=files, sets=[*sets, *case_sets])
                except Exception:  # noqa: BLE001 - a pinned value the narrowed space refuses: draw afresh
                    parent, case_sets, c = None, [], c0
            if parent is None:
                index = uniform_i
                uniform_i += 1
            else:
                index = mutant_i
                mutant_i += 1
            c_before = sim.cycles  # the budget counts every simulated cycle, NVDLA's reset included
            dut.reset()
            folder.reset_done(sim)
            fc, _ = run_one(c, dspec, seed, index, out, dut=dut)
            cycles = max(int(sim.cycles) - int(c_before), 0)
            npz = folder.collect(sim, test=case_name(unit, seed, index))
            if points is None:
                run = rc.merge_build(npz.parent)
                points = run.points
                counted = (target or Target()).mask(points)
                base_run, base = baseline_hits(baseline, npz.parent.name)
                covered = (base.copy() if base is not None else np.zeros(len(points), dtype=bool))
                rep.baseline_points = int(np.count_nonzero(covered & counted))
                rep.counted_points = int(np.count_nonzero(counted))
            assert covered is not None and counted is not None
            with np.load(npz, allow_pickle=False) as z:
                hit = np.zeros(len(covered), dtype=bool)
                hit[z["index"].astype(np.int64)] = True
            new = int(np.count_nonzero(hit & ~covered & counted))
            covered |= hit
            rep.cases.append(SteerCase(fc, cycles, new, parent.name if parent else None, case_sets))
            if new and fc.status == "passed":
                values = _field_values(c, seed, index, dspec.kind, fc.draw)
                corpus.append(_Entry(fc.name, values, new, cycles))
            if log is not None and (new or fc.status != "passed"):
                how = f" (mutant of {parent.name})" if parent else ""
                log(f"{fc.status.upper()} {fc.name}{how}: {cycles} cycles, {new} new points"
                    + ("" if fc.status == "passed" else f": {fc.line}"))
    folder.close()
    rep.seconds = time.monotonic() - t0
    return rep
