"""Random layers steered by the RTL's own coverage (``nvdla-hil fuzz --target verilator --steer
rtl-coverage``), against uniform draws under the same budget of simulated cycles.

Uniform fuzzing draws every case afresh from the constraints. Steered fuzzing does what RTL
fuzzers with coverage feedback do (RFUZZ, DifuzzRTL, DirectFuzz), with one thing those lack: the
layer generator can draw and size a candidate before the simulator spends a cycle on it.

- A case whose run on the instrumented simulator (``sim build --coverage``) hit RTL points
  nothing before it hit (not the baseline, e.g. the bundled suites, nor an earlier case) joins a
  corpus. A *mutant* of a corpus entry pins the parent's field values (register fields, shapes,
  modes: what :class:`~.draw.Sampler` drew) with ``--set`` except one to three of them, redrawn
  on a fresh random stream (so the data patterns are new too). A parent is picked with a weight of
  the points it gained per million cycles it cost (AFL's energy, in cycles).
- Each case is the best of :data:`SCREEN` candidates (fresh draws and mutants), scored by
  expected new points per simulated cycle: the *novelty* of its field values (each field's value
  class, :func:`value_class`, counts less the more earlier cases had it, and more the more new
  RTL points earlier cases with it reached) over its *cost* (the simulator's reset plus the
  layer's elements times the cycles per element the run has measured so far).

- With a baseline, the baseline's *holes* are fed back first (:func:`hole_constraints`,
  harness/fuzz/widen.py): each constraint field driving a register field whose high bits the
  baseline never set is widened, so the draws reach values no shipped range allows.

``target`` narrows what counts as new to a unit or a file's line range (DirectFuzz's target sites).
Every case is still a full differential case: the reference model's golden, every output
element compared (:func:`~.runner.run_one`); a disagreement is reported like any fuzz failure.
Each case is replayable: its line names the seed, index and the ``--set`` items.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import rtl_coverage as rc
from .case import case_name, sampler_for
from .draw import Constraints, FieldSpec
from .registry import load_constraints
from .runner import FuzzCase, run_one
from .widen import Widening

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
    widened: list[str] = field(default_factory=list)  # fields widened from the baseline's holes (field [lo, hi])

    @property
    def cycles(self) -> int:
        return sum(c.cycles for c in self.cases)

    @property
    def new_points(self) -> int:
        return sum(c.new for c in self.cases)

    @property
    def new_within_budget(self) -> int:
        """New points of the cases that ended within the budget (the last case may run past it:
        what it found there is not counted, so two runs compare at the same cycles)."""
        spent = got = 0
        for c in self.cases:
            spent += c.cycles
            if spent > self.budget_cycles:
                break
            got += c.new
        return got

    @property
    def failed(self) -> list[SteerCase]:
        return [c for c in self.cases if c.case.status in ("failed", "error")]

    def line(self) -> str:
        mut = sum(c.parent is not None for c in self.cases)
        return (f"{self.unit} on {self.profile}, {self.mode}, seed {self.seed}: {len(self.cases)} cases "
                f"({mut} mutants), {self.cycles} cycles of {self.budget_cycles}; {self.new_points} new line+toggle "
                f"points beyond the baseline's {self.baseline_points} (of {self.counted_points}), "
                f"{self.new_within_budget} by cases that ended within the budget; "
                f"{len(self.failed)} failed; {self.seconds:.0f} s"
                + (f"; widened from the baseline's holes: {', '.join(self.widened)}" if self.widened else ""))


def _portable(ident: str, hier: str) -> str:
    """A point's identity without where the generated RTL was: its file from ``vmod/`` on (one
    checkout's ``.../outdir/nv_small/vmod/fifos/X.v`` and another's are the same file)."""
    f = re.search("\x01f\x02([^\x01]*)", ident)
    path = f.group(1) if f else ""
    cut = path.rfind("/vmod/")
    rel = path[cut:] if cut >= 0 else path
    return (ident.replace(path, rel, 1) if f else ident) + "\x00" + hier


#: of this run's design points, the share a baseline of another build must name to be used
BASELINE_MATCH = 0.99


def baseline_hits(folder: str | Path | None, build: str | Path,
                  points: rc.Points | None = None) -> tuple[rc.RunCoverage | None, np.ndarray | None]:  # fmt: skip
    """The merged coverage of a previous run's ``rtl-coverage/tests/`` folder for ``build`` (the
    simulator's cache key, or the folder of this run's coverage of it), and its hit mask over
    ``points`` (this run's catalogue; default the baseline's own). A baseline of another build
    (another checkout's path, other C++ options) is used when it names the same points
    (:func:`_portable`: the RTL file from ``vmod/`` on, line, kind, signal, instance) for at
    least :data:`BASELINE_MATCH` of this run's design points; its hits are mapped point by point."""
    if folder is None:
        return None, None
    folder = Path(folder)
    tests = folder / "tests" if (folder / "tests").is_dir() else folder
    name = Path(build).name
    where = tests / re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    have = sorted(d for d in tests.glob("*") if (d / rc.CATALOGUE).is_file())
    if (where / rc.CATALOGUE).is_file() or points is None:
        if not (where / rc.CATALOGUE).is_file():
            raise ValueError(f"--baseline {folder}: no coverage of build {name} "
                             f"(it has: {', '.join(d.name for d in have) or 'none'})")
        run = rc.merge_build(where)
        return run, run.counts > 0
    mine = {_portable(i, h): k for k, (i, h) in enumerate(zip(points.idents, points.hiers, strict=True))}
    design = points.design_mask()
    for other in have:
        run = rc.merge_build(other)
        theirs = np.array([mine.get(_portable(i, h), -1) for i, h in zip(run.points.idents, run.points.hiers,
                                                                          strict=True)], dtype=np.int64)
        named = np.zeros(len(points), dtype=bool)
        named[theirs[theirs >= 0]] = True
        if np.count_nonzero(named & design) >= BASELINE_MATCH * np.count_nonzero(design):
            hit = np.zeros(len(points), dtype=bool)
            got = (run.counts > 0) & (theirs >= 0)
            hit[theirs[got]] = True
            return run, hit
    raise ValueError(f"--baseline {folder}: no coverage of build {name} nor of one naming its points "
                     f"(it has: {', '.join(d.name for d in have) or 'none'})")


def hole_constraints(c: Constraints, baseline: str | Path, out: Path) -> tuple[Path | None, list[str]]:
    """The baseline's RTL holes fed back into ``c`` (:func:`.widen.widen` of the register fields
    its coverage of ``c``'s configuration never set high, as ``coverage rtl RUN --widen UNIT``):
    a constraints file written into the folder ``out`` (None when nothing widens), and the
    widened fields as ``field [lo, hi]``. Which build of the baseline does not matter: the
    register fields are named by the RTL's signals."""
    from ..analysis import rtl_holes as rh
    from .widen import constraints_text, field_drivers, widen

    folder = Path(baseline)
    tests = folder / "tests" if (folder / "tests").is_dir() else folder
    for build in sorted(d for d in tests.glob("*") if (d / rc.CATALOGUE).is_file()):
        run = rc.merge_build(build)
        if run.config != c.profile.name:
            continue
        gaps, _ = rh.field_gaps(run, limit=10_000)
        ws = widen(c, gaps, field_drivers(c)) + _placement(c, run)
        if not ws:
            return None, []
        f = out / f"widened-{c.unit}.yaml"
        f.write_text(constraints_text(c, ws, str(baseline)))
        return f, [f"{w.field} [{w.lo}, {w.hi}]" for w in ws]
    return None, []


def _placement(c: Constraints, run: Any) -> list[Widening]:
    """The surfaces' placement widened to its legal range (``place_mib``, harness/fuzz/legal.py)
    when the baseline left address bits above the first MiBs unhit (:data:`.rtl_holes.PLACEMENT`)
    and ``c`` does not draw it already: where a case sits costs no cycles, so no step by step."""
    from ..analysis import rtl_holes as rh

    legal = c.schema.get("place_mib")
    if legal is None or "place_mib" in c.fields:
        return []
    unhit = sum(reasons.get(rh.PLACEMENT, 0) for unit in rh.classify(run, c.profile.features).values()
                for reasons in unit.values())
    if not unhit:
        return []
    return [Widening("place_mib", legal.lo, legal.hi, legal.default, f"{unhit} address toggle points (DMA addresses)",
                     (rh.ADDRESS_BIT, 31), False)]


def _widen_holes(c: Constraints, baseline: str | Path, folder: Path, files: list[str], sets: list[str],
                 rep: SteerReport, log: Callable[[str], None] | None) -> Constraints:  # fmt: skip
    """:func:`hole_constraints` applied: its file joins ``files`` (it lives as long as ``folder``,
    mutants load it again), ``rep`` names the widened fields, and ``c`` is loaded again with it."""
    wfile, rep.widened = hole_constraints(c, baseline, folder)
    if wfile is None:
        return c
    files.append(str(wfile))
    if log is not None:
        log(f"widened from the baseline's holes: {', '.join(rep.widened)}")
    return load_constraints(c.unit, profile=c.profile.name, files=files, sets=sets)


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


def value_class(spec: FieldSpec, value: Any) -> str:
    """The class of a field's value that novelty counts: a choice is its own class; an integer
    of a range is ``lo``, ``hi`` or the bit length of its distance from ``lo`` (so 3 and 5 of
    0..100 differ, 40 and 50 do not: hardware counters and bank selects change at powers of two)."""
    if spec.kind != "range":
        return _pin(value)
    v = int(value)
    if v == spec.lo:
        return "lo"
    if v == spec.hi:
        return "hi"
    return f"b{(v - spec.lo).bit_length()}"


#: cycles a reset between two cases waits (None: the build's own, the 8192 NVDLA's testbench
#: waits). 256 is safe because the runner waits for what the RTL still does after a reset: CDMA's
#: CBUF flush (``CDMA.S_CBUF_FLUSH_STATUS``, polled before any layer that launches CDMA, CONV ->
#: PDP included: ``harness/vectors/run.py`` ``_wait_cbuf_flushed``), so only a
#: convolution pays the flush's cycles. ``tests/test_rtl_reset_wait.py`` pins both on nv_small.
RESET_WAIT: int | None = 256

#: cycles per layer element (input or output) assumed before the run has measured any
PRIOR_CYCLES_PER_ELEMENT = 4.0

#: candidates drawn and sized for each case run; the best by expected new points per cycle runs
SCREEN = 8


@dataclass
class _Entry:
    name: str
    values: dict[str, Any]
    gained: int
    cycles: int
    children: int = 0

    def energy(self) -> float:
        return self.gained / (max(self.cycles, 1) / 1e6) / (1 + 0.1 * self.children)


@dataclass
class _Candidate:
    index: int
    c: Constraints
    values: dict[str, Any]
    elements: int
    parent: _Entry | None = None
    sets: list[str] = field(default_factory=list)


@dataclass
class _Novelty:
    """What the run has drawn and what it bought: per (field, value class), how many cases had
    it and the new RTL points those cases reached."""

    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    gained: dict[tuple[str, str], int] = field(default_factory=dict)
    cases: int = 0
    points: int = 0

    def score(self, c: Constraints, values: dict[str, Any]) -> float:
        mean = self.points / self.cases if self.cases else 1.0
        total = 0.0
        for k, spec in c.fields.items():
            key = (k, value_class(spec, values[k]))
            n = self.seen.get(key, 0)
            # an unseen class is worth the run's mean; a seen one what its cases reached, halved
            # for every case that had it
            yield_ = self.gained.get(key, 0) / n if n else mean
            total += (1.0 + yield_ / max(mean, 1.0)) / (1 + n)
        return total

    def add(self, c: Constraints, values: dict[str, Any], new: int) -> None:
        self.cases += 1
        self.points += new
        for k, spec in c.fields.items():
            key = (k, value_class(spec, values[k]))
            self.seen[key] = self.seen.get(key, 0) + 1
            self.gained[key] = self.gained.get(key, 0) + new


@dataclass
class _Cost:
    """Simulated cycles a case will take: the reset (measured) plus its layer's elements (inputs
    and outputs) times the cycles per element the run's cases took, all of their cycles after the
    reset (their median; a small case's fixed cost makes its rate high, so a large candidate is
    estimated high, never free: a rate of 0 would let a layer of millions of cycles look cheap)."""

    reset: int = 0
    per_element: list[float] = field(default_factory=list)

    def estimate(self, elements: int) -> float:
        rate = float(np.median(self.per_element)) if self.per_element else PRIOR_CYCLES_PER_ELEMENT
        return self.reset + rate * max(elements, 1)

    def add(self, elements: int, cycles: int) -> None:
        if elements > 0:
            self.per_element.append(max(cycles - self.reset, 1) / elements)


@dataclass
class _Learned:
    """What a steered run has learned from the cases it ran: the corpus (cases that reached new
    points and passed), the novelty of value classes, the cost per element."""

    corpus: list[_Entry] = field(default_factory=list)
    novelty: _Novelty = field(default_factory=_Novelty)
    cost: _Cost = field(default_factory=_Cost)

    def add(self, ran: _Candidate, values: dict[str, Any], fc: FuzzCase, new: int, cycles: int) -> None:
        self.novelty.add(ran.c, values, new)
        self.cost.add(ran.elements, cycles)
        if new and fc.status == "passed":
            self.corpus.append(_Entry(fc.name, values, new, cycles))


def _mutant(corpus: list[_Entry], mutable: list[str], pick: np.random.Generator) -> tuple[_Entry, list[str]]:
    """A parent picked by energy, and the ``--set`` items pinning its fields but one to three of
    the mutable ones (redrawn)."""
    w = np.array([e.energy() for e in corpus])
    parent = corpus[int(pick.choice(len(corpus), p=w / w.sum()))]
    parent.children += 1
    n = len(mutable)
    size = int(pick.integers(1, min(3, n) + 1))
    redraw = set(pick.choice(mutable, size=size, replace=False).tolist())
    return parent, [f"{k}={_pin(v)}" for k, v in parent.values.items() if k not in redraw]


def _elements(c: Constraints, seed: int, index: int, dut: str, tmp: Path) -> int:
    """The elements a candidate's layer reads and writes (its first draw): the generator's draft,
    sized before anything is simulated."""
    from .case import EventCapture, provenance, run_reference
    from .registry import GENERATORS
    from ..vectors.layer import Draft

    name = case_name(c.unit, seed, index)
    prov = provenance(c, seed, index, "rtl")

    def capture(d: Draft) -> dict[str, list[dict[str, Any]]]:
        cap = EventCapture()
        run_reference(d, name, prov, tmp / name, "rtl", cap)
        return cap.events

    d = GENERATORS[c.unit](sampler_for(c, seed, index, 0, dut), c.profile, capture)
    n = sum(int(np.asarray(a).size) for _, a in d.inputs)
    n += sum(int(np.prod(o["shape"])) for o in d.outputs if isinstance(o.get("shape"), (list, tuple)))
    return n


@dataclass
class _NewPoints:
    """What counts as new: the counted points (``target``'s lines and toggles) neither the baseline
    nor an earlier case hit."""

    covered: np.ndarray
    counted: np.ndarray
    baseline_points: int

    @classmethod
    def start(cls, build: Path, baseline: str | Path | None, target: Target) -> _NewPoints:
        """From this run's first coverage file in ``build`` (its catalogue) and the baseline's hits."""
        points = rc.merge_build(build).points
        counted = target.mask(points)
        _, base = baseline_hits(baseline, build, points)
        covered = base.copy() if base is not None else np.zeros(len(points), dtype=bool)
        return cls(covered, counted, int(np.count_nonzero(covered & counted)))

    def add(self, npz: Path) -> int:
        """The counted points a case's file hit that nothing before it did (now covered)."""
        with np.load(npz, allow_pickle=False) as z:
            hit = np.zeros(len(self.covered), dtype=bool)
            hit[z["index"].astype(np.int64)] = True
        new = int(np.count_nonzero(hit & ~self.covered & self.counted))
        self.covered |= hit
        return new


def _best(cands: list[_Candidate], novelty: _Novelty, cost: _Cost, left: float) -> _Candidate:
    """The candidate with the most expected new points per cycle among those expected to end
    within the ``left`` cycles of the budget (the cheapest, when none is); the others' parents get
    their child back."""
    fits = [k for k in cands if cost.estimate(k.elements) <= left]
    best = (max(fits, key=lambda k: novelty.score(k.c, k.values) / cost.estimate(k.elements)) if fits
            else min(cands, key=lambda k: cost.estimate(k.elements)))
    for k in cands:
        if k is not best and k.parent is not None:
            k.parent.children -= 1
    return best


def run_steered(unit: str, spec: Any, folder: Any, *, mode: str, seed: int, budget_cycles: int,
                profile: str | None = None, constraint_files: Sequence[str] = (), sets: Sequence[str] = (),
                baseline: str | Path | None = None, target: Target | None = None, first: int = 0,
                mutate_share: float = 0.5, screen: int = SCREEN, reset_wait: int | None = RESET_WAIT,
                out: Path | None = None, max_cases: int = 10_000, log: Callable[[str], None] | None = None,
                widen_holes: bool = True) -> SteerReport:  # fmt: skip
    """Run ``unit`` cases on the verilator target of ``spec`` (instrumented; ``folder`` its
    :class:`~..targets.verilator.RtlCoverageFolder`) until ``budget_cycles`` simulated cycles
    are spent: uniform draws (``mode="uniform"``: cases ``first``, ``first+1``, ... of ``seed``)
    or steered by RTL coverage (``"rtl-coverage"``: each case the best of ``screen`` candidates,
    a share ``mutate_share`` of them mutants once the corpus has entries; fresh candidates take
    the uniform indices in turn, mutants indices of their own, ``first + 1_000_000 + n``; with a
    ``baseline`` and ``widen_holes``, its holes widen the constraints first: :func:`hole_constraints`)."""
    if mode not in MODES:
        raise ValueError(f"--steer {mode}: expected one of {', '.join(MODES)}")
    from ..targets import open_target

    files, sets = list(constraint_files), list(sets)
    c0 = load_constraints(unit, profile=profile, files=files, sets=sets)
    dspec = replace(spec.with_profile(c0.profile.name), rtl_coverage=folder)
    rep = SteerReport(unit, c0.profile.name, mode, seed, budget_cycles)
    pick = np.random.Generator(np.random.PCG64([seed, 0x57EE4]))
    learned = _Learned()
    mutable = _mutable(c0)
    counter = {"uniform": first, "mutant": first + 1_000_000}

    def candidate(tmp: Path) -> _Candidate:
        parent: _Entry | None = None
        case_sets: list[str] = []
        c = c0
        if mode == "rtl-coverage" and learned.corpus and mutable and pick.random() < mutate_share:
            parent, case_sets = _mutant(learned.corpus, mutable, pick)
            try:
                c = load_constraints(unit, profile=profile, files=files, sets=[*sets, *case_sets])
            except Exception:  # noqa: BLE001 - a pinned value the narrowed space refuses: draw afresh
                parent, case_sets, c = None, [], c0
        kind = "uniform" if parent is None else "mutant"
        index = counter[kind]
        counter[kind] += 1
        try:
            elements = _elements(c, seed, index, dspec.kind, tmp) if mode == "rtl-coverage" else 0
        except Exception:  # noqa: BLE001 - a draft that cannot be sized: run_one reports the generator's error
            elements = 0
        return _Candidate(index, c, _field_values(c, seed, index, dspec.kind), elements, parent, case_sets)

    t0 = time.monotonic()
    with open_target(dspec) as dut, tempfile.TemporaryDirectory(prefix="nvdla-steer-") as tmp:
        sim: Any = getattr(dut, "sim", dut)  # the VerilatorTarget (cycles, its coverage)
        if mode == "rtl-coverage" and baseline is not None and widen_holes:
            c0 = _widen_holes(c0, baseline, Path(tmp), files, sets, rep, log)
            mutable = _mutable(c0)
        if reset_wait is not None:
            sim.reset_wait_cycles = reset_wait
        seen: _NewPoints | None = None
        while rep.cycles < budget_cycles and len(rep.cases) < max_cases:
            best = (_best([candidate(Path(tmp)) for _ in range(max(screen, 1))], learned.novelty, learned.cost,
                          budget_cycles - rep.cycles)
                    if mode == "rtl-coverage" else candidate(Path(tmp)))
            c, index, parent = best.c, best.index, best.parent
            c_before = sim.cycles  # the budget counts every simulated cycle, NVDLA's reset included
            dut.reset()
            folder.reset_done(sim)
            learned.cost.reset = max(int(sim.cycles) - int(c_before), 0)
            fc, _ = run_one(c, dspec, seed, index, out, dut=dut)
            cycles = max(int(sim.cycles) - int(c_before), 0)
            npz = folder.collect(sim, test=case_name(unit, seed, index))
            if seen is None:
                seen = _NewPoints.start(npz.parent, baseline, target or Target())
                rep.baseline_points, rep.counted_points = seen.baseline_points, int(np.count_nonzero(seen.counted))
            new = seen.add(npz)
            rep.cases.append(SteerCase(fc, cycles, new, parent.name if parent else None, best.sets))
            learned.add(best, _field_values(c, seed, index, dspec.kind, fc.draw), fc, new, cycles)
            if log is not None and (new or fc.status != "passed"):
                how = f" (mutant of {parent.name})" if parent else ""
                log(f"{fc.status.upper()} {fc.name}{how}: {cycles} cycles, {new} new points"
                    + ("" if fc.status == "passed" else f": {fc.line}"))
    folder.close()
    rep.seconds = time.monotonic() - t0
    return rep
