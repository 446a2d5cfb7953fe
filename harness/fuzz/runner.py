"""Running a fuzz campaign: each case generated, run on the device under test, compared;
cases in chunks on one open target (or in worker processes), coverage merged, failing cases
saved, every case kept as a vector with the DUT's goldens on request; :class:`FuzzReport`.

Each case may take the time its layer's work warrants on the DUT (:func:`run_budgeted`: the
budget of ``targets/workload.py``, as the packed-vector suite gives it): a simulator or the C model
that hangs on one case costs that budget, never a flat 600-900 s, and the case's error says how
long it waited and why. Cases are drawn for the DUT (``generate(..., dut=spec.kind)``): a unit
steers clear of what the DUT is known not to finish (the C model's :data:`~..targets.cmod.KNOWN_LIMITS`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import coverage as covmod
from ..vectors.load import load_case
from ..vectors.run import run_case
from ..vectors.write import golden_source_of, write_case
from .case import case_name, generate
from .draw import Constraints
from .registry import UNIT_GROUPS, load_constraints
from ...semantics import Semantics


@dataclass
class FuzzCase:
    index: int
    name: str
    status: str  # passed / failed / error / skipped
    line: str
    seconds: float
    saved: str | None = None
    draw: int = 0  # the draw kept: > 0 when earlier draws' goldens said nothing (case.degenerate)
    weak: bool = False  # passed, but the comparison could not tell it from a layer that computed nothing


@dataclass
class FuzzReport:
    unit: str
    profile: str
    seed: int
    cases: list[FuzzCase] = field(default_factory=list)
    coverage: covmod.Coverage = field(default_factory=covmod.Coverage)
    seconds: float = 0.0
    aimed: list[str] = field(default_factory=list)  # bins the unit's draws reach on the profile (aimed_bins)
    #: bins of the unit's groups the profile has but the unit's draws never reach (another unit's mode)
    undrawn: list[str] = field(default_factory=list)
    aim_seconds: float = 0.0  # spent finding ``aimed`` (its probe draws)

    def informativeness_line(self) -> str:
        """How many cases were drawn again because a draw's golden said nothing, and how many
        passes are still weak (:attr:`FuzzCase.weak`)."""
        redrawn = sum(1 for fc in self.cases if fc.draw)
        weak = sum(1 for fc in self.cases if fc.weak)
        passed = sum(1 for fc in self.cases if fc.status == "passed")
        return (f"informative: {redrawn} of {len(self.cases)} cases drawn again (a draw whose golden is one value, "
                f"all poison or all saturated, no status or statistic set); {weak} of {passed} passes weak")

    @property
    def failed(self) -> list[FuzzCase]:
        return [c for c in self.cases if c.status in ("failed", "error")]

    def empty_bins(self) -> list[str]:
        return self.coverage.empty(self.aimed)


#: cases of a unit drawn on the reference model to find the bins its generator reaches (:func:`aimed_bins`)
AIM_DRAWS = 64
#: the seed of those draws: not a campaign's default seed (1), so a campaign's own cases never
#: decide what it aims at
AIM_SEED = 0xA1ED


def aimed_bins(c: Constraints, *, dut: str = "model", semantics: Semantics = "rtl",
               draws: int = AIM_DRAWS) -> tuple[list[str], list[str]]:  # fmt: skip
    """``(aimed, undrawn)``: of the bins of the unit's coverage groups that ``c``'s profile has
    (:func:`~..analysis.coverage.reachable`), those the unit's own generator reaches under ``c``,
    and the others.

    One rule for every unit, no list per unit: the generator draws ``draws`` cases of
    :data:`AIM_SEED` (for ``dut``, as a campaign does), and their reference-model coverage - what
    a campaign's coverage is made of - says which bins the unit reaches. A bin the unit never
    draws (another unit's mode, e.g. ``conv.image`` or ``conv.mean`` for ``conv``: the
    ``conv-image`` unit draws them; a combination its constraints exclude) is ``undrawn``, so a
    long enough ``--until-covered`` campaign can hit every aimed bin. A drawable bin rarer than
    about one case in ``draws`` may be among the undrawn (``tests/test_fuzz_aimed.py`` checks that
    every aimed bin is hit again by other seeds).

    The answer is kept in the cache (``~/.cache/nvdla-hil/fuzz-aim``, :func:`_aim_key`: the
    constraints, the profile, the DUT kind and the source of the generators and the model), so
    only the first campaign of a unit and profile pays for the draws."""
    reach = covmod.reachable([c.profile], UNIT_GROUPS[c.unit])
    path = _aim_cache() / f"{_aim_key(c, dut, semantics, draws)}.json"
    with contextlib.suppress(OSError, ValueError, TypeError):
        hit = set(json.loads(path.read_text(encoding="utf-8"))["hit"])
        return [b for b in reach if b in hit], [b for b in reach if b not in hit]
    cov = covmod.Coverage()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="nvdla-fuzz-aim-") as tmp:
        for i in range(draws):
            try:
                folder = generate(c, AIM_SEED, i, Path(tmp), semantics=semantics, coverage=cov, dut=dut)
            except Exception:  # noqa: BLE001 - a draw the generator fails on is the campaign's to report
                failed += 1
                continue
            shutil.rmtree(folder, ignore_errors=True)
    hit = {b for b, n in cov.counts.items() if n}
    if failed:  # a generator that fails is not an answer to keep
        return [b for b in reach if b in hit], [b for b in reach if b not in hit]
    with contextlib.suppress(OSError):  # a cache that cannot be written costs the draws next time, nothing else
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = path.with_name(f".{path.name}.{os.getpid()}")
        tmp_path.write_text(json.dumps({"unit": c.unit, "profile": c.profile.name, "hit": sorted(hit)}) + "\n")
        os.replace(tmp_path, path)
    return [b for b in reach if b in hit], [b for b in reach if b not in hit]


def _aim_cache() -> Path:
    from ...sims.build import cache_root

    return cache_root().parent / "fuzz-aim"


#: the source the answer of :func:`aimed_bins` depends on: the generators, the reference model and
#: its coverage events, the register maps and profiles
_AIM_SOURCES = ("drivers", "harness/fuzz", "harness/refmodel", "harness/vectors", "harness/analysis/coverage.py")


def _aim_key(c: Constraints, dut: str, semantics: Semantics, draws: int) -> str:
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256(f"aim-v1\0{c.unit}\0{dut}\0{semantics}\0{draws}\0{AIM_SEED}\0".encode())
    h.update(repr(c.fields).encode() + b"\0" + repr(c.profile).encode())
    for rel in _AIM_SOURCES:
        top = root / rel
        for f in sorted(top.rglob("*") if top.is_dir() else [top]):
            if f.suffix in (".py", ".yaml") and f.is_file():
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return f"{c.unit}-{c.profile.name}-{h.hexdigest()[:16]}"


def open_dut(spec: Any, model_bugs: list[str] | None = None) -> Any:
    """The device under test for ``spec`` (a TargetSpec). The model target as the DUT never
    feeds coverage (the reference run does); ``model_bugs`` injects faults into it only."""
    if spec.kind == "model":
        from ..targets.model import ModelTarget

        return ModelTarget(spec.profile, semantics=spec.semantics, bugs=model_bugs or None, coverage=False)
    from ..targets import open_target

    return open_target(spec)


def _fail_line(c: Constraints, seed: int, index: int, res: Any) -> str:
    parts = []
    for chk in res.checks:
        if not chk.passed:
            parts.append(f"{chk.name}: {chk.message}")
    if res.statistics is not None and not res.statistics.passed:
        parts.append("statistics: " + "; ".join(res.statistics.format().splitlines()[:3]))
    if not parts:
        parts.append(res.message)
    return f"seed={seed} case={index}: " + " | ".join(parts)


def keep_case(folder: Path, dest: Path, res: Any, dut: Any, agreed: bool) -> None:
    """Save ``folder`` as a packed vector under ``dest`` whose golden is what the DUT computed
    (its outputs and statistics counters), the provenance naming the DUT and whether the
    reference model agreed. This is how bundled suites get goldens from NVDLA's C model."""
    from ...drivers import yamlstrict

    man = yamlstrict.load((folder / "case.yaml").read_text(encoding="utf-8"), str(folder / "case.yaml"))
    blobs: dict[str, bytes] = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "case.yaml"}
    for o in man["outputs"]:
        blobs[o["expected"]] = np.ascontiguousarray(res.outputs[o["name"]]).tobytes()
    if man.get("statistics") is not None and res.actual_statistics is not None:
        from ...drivers.precision import golden_counters

        man["statistics"] = golden_counters(res.actual_statistics, golden_source_of(dut)["kind"])
    describe = getattr(dut, "describe", None)
    who = describe() if describe else type(dut).__name__
    prov = dict(man["provenance"])
    prov["generator"] = "nvdla-hil fuzz --keep"
    prov["note"] = (f"{prov.get('note', '')}; golden: the outputs of {who}; the reference model "
                    f"{'agreed bit for bit' if agreed else 'DISAGREED'} when it was kept").lstrip("; ")
    man["provenance"] = prov
    if dest.exists():
        shutil.rmtree(dest)
    # golden_source: derived from the DUT (vectors.golden_source_of); statuses: what the DUT read back
    write_case(dest, man, blobs, dut=dut, statuses=getattr(res, "actual_statuses", None))
    load_case(dest)  # what we wrote must load


def case_time(case: Any, drv: Any, target: Any) -> Any:
    """The :class:`~..targets.workload.LayerBudget` of a case on ``target``: a target that runs the
    datapath in software (the C model: ``work_cycles_per_second``) may take floor + factor x the
    work's cycles (less the fixed per-layer latency, which costs it nothing) / its speed; any other
    target :func:`~..targets.workload.case_budget`'s."""
    from ...drivers.regmap import RegisterMapError
    from ..targets.workload import LAYER_LATENCY_CYCLES, LayerBudget, case_budget, estimate_work, timeout_terms

    rate = target.work_cycles_per_second
    if not rate:
        return case_budget(case, drv, target)
    writes = []
    for r in case.registers:
        with contextlib.suppress(RegisterMapError):
            writes.append((drv.register(r.name), r.value))
    work = estimate_work(writes, drv.profile)
    busy = max(work.cycles - LAYER_LATENCY_CYCLES * work.layers, 0)
    f, floor = timeout_terms(target)
    return LayerBudget(floor + f * busy / rate, work.cycles, work.detail(), f, floor, None,
                       source=f"the target's cost of the layer: floor {floor:g} s + factor {f:g} x {busy} work cycles "
                              f"/ {rate:g} per s")


def run_budgeted(case: Any, target: Any, kind: str) -> Any:
    """:func:`run_case` on an open ``target`` within the budget of the case's work
    (:func:`case_time`): the wait for its interrupt and, on a target that
    computes a layer while it serves a request (the C model's ``layer_time``), every request. A
    case that runs out of time says how long it waited and why."""
    from ...drivers.driver import NvdlaDriver
    from ..targets.workload import explain_timeout

    drv = NvdlaDriver(target)
    budget = case_time(case, drv, target)
    bound = getattr(target, "layer_time", None)
    with bound(budget.seconds) if bound is not None else contextlib.nullcontext():
        res = run_case(case, target, drv, target_kind=kind, timeout=budget.seconds)
    why = explain_timeout(res.message, budget) if res.status == "error" else None
    if why:
        known = getattr(target, "known_limit", None)  # the C model: is it one of its known hangs?
        limit = known() if known is not None else None
        res.message = (f"{limit} (a known limit of NVDLA's C model): " if limit and limit not in res.message
                       else "") + f"{res.message}; {why}"
    return res


def run_one(c: Constraints, spec: Any, seed: int, index: int, out: Path | None, *, semantics: Semantics = "rtl",
            model_bugs: list[str] | None = None, dut: Any = None, keep: Path | None = None, informative: bool = True,
            ) -> tuple[FuzzCase, dict[str, Any]]:  # fmt: skip
    """Generate, run on the DUT, compare; returns the case record and the reference coverage (JSON).
    ``dut`` is an open target kept across cases (else one is opened for this case); ``keep``
    saves the case with the DUT's outputs as its golden (:func:`keep_case`); ``informative``:
    redraw a case whose golden says nothing (:func:`.case.generate`)."""
    t0 = time.monotonic()
    cov = covmod.Coverage()
    name = case_name(c.unit, seed, index)
    with tempfile.TemporaryDirectory(prefix="nvdla-fuzz-") as tmp:
        try:
            folder = generate(c, seed, index, Path(tmp), semantics=semantics, coverage=cov, dut=spec.kind,
                              informative=informative)
        except Exception as e:  # noqa: BLE001 - a generator bug must not stop the campaign
            return FuzzCase(index, name, "error", f"seed={seed} case={index}: generation failed: "
                            f"{type(e).__name__}: {e}", time.monotonic() - t0), cov.to_json()
        case = load_case(folder)
        draw = int(case.provenance.get("draw") or 0)
        dspec = spec.with_profile(c.profile.name)
        kind = "model" if dspec.kind == "model" else "rtl"
        try:
            if dut is not None:
                res = run_budgeted(case, dut, kind)
            else:
                with open_dut(dspec, model_bugs) as t:
                    res = run_budgeted(case, t, kind)
        except Exception as e:  # noqa: BLE001 - a target that cannot open is an error of this case
            res = None
            status, line = "error", f"seed={seed} case={index}: {type(e).__name__}: {e}"
        else:
            assert res is not None
            status = res.status
            line = f"seed={seed} case={index}: {res.status}" if res.passed else (
                _fail_line(c, seed, index, res) if res.status == "failed" else f"seed={seed} case={index}: {res.message}")
        saved = None
        if status in ("failed", "error") and out is not None:
            dest = Path(out) / name
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(folder, dest)
            saved = str(dest)
        if keep is not None and res is not None and status in ("passed", "failed") and res.outputs:
            keep_case(folder, Path(keep) / name, res, dut, status == "passed")
    weak = res is not None and res.weak_pass
    return FuzzCase(index, name, status, line, time.monotonic() - t0, saved, draw, weak), cov.to_json()


def _run_chunk(c: Constraints, spec: Any, seed: int, idx: list[int], out: Path | None, *, semantics: Semantics,
               model_bugs: list[str] | None, keep: Path | None, informative: bool = True,
               ) -> list[tuple[FuzzCase, dict[str, Any]]]:  # fmt: skip
    """Run cases ``idx`` on one DUT opened for the chunk (a simulator or C model starts once, not
    per case). Every case programs the registers it uses and the runner poisons its outputs, so
    what an earlier case left behind can make a case fail, never pass; the DUT is reset
    between cases all the same, and a DUT that dies is reopened for the next case."""
    dspec = spec.with_profile(c.profile.name)
    results: list[tuple[FuzzCase, dict[str, Any]]] = []
    dut = None
    fresh = True
    try:
        for k in idx:
            if dut is None:
                try:
                    dut = open_dut(dspec, model_bugs)
                    dut.__enter__()
                    fresh = True
                except Exception as e:  # noqa: BLE001 - report it against the case, try again for the next
                    dut = None
                    results.append((FuzzCase(k, case_name(c.unit, seed, k), "error",
                                             f"seed={seed} case={k}: cannot open the target: {type(e).__name__}: {e}", 0.0), {}))
                    continue
            if not fresh:
                # a fresh start for every case: what a layer leaves in the status registers (the
                # C model's counters that a later layer does not update) must not leak into the next
                dut.reset()
            fresh = False
            fc, cj = run_one(c, spec, seed, k, out, semantics=semantics, model_bugs=model_bugs, dut=dut, keep=keep,
                             informative=informative)
            results.append((fc, cj))
            if fc.status == "error":  # the DUT may be gone: start a fresh one
                with contextlib.suppress(Exception):
                    dut.__exit__(None, None, None)
                dut = None
    finally:
        if dut is not None:
            dut.__exit__(None, None, None)
    return results


def _worker(args: tuple) -> list[tuple[FuzzCase, dict[str, Any]]]:
    unit, profile, files, sets, spec, seed, idx, out, semantics, bugs, keep, informative = args
    c = load_constraints(unit, profile=profile, files=files, sets=sets)
    return _run_chunk(c, spec, seed, idx, Path(out) if out else None, semantics=semantics, model_bugs=bugs,
                      keep=Path(keep) if keep else None, informative=informative)


def run_fuzz(unit: str, spec: Any, *, count: int = 50, seed: int = 1, first: int = 0, profile: str | None = None,
             constraint_files: Iterable[str] = (), sets: Iterable[str] = (), out: str | Path | None = None,
             until_covered: bool = False, budget: int = 1000, jobs: int = 1, semantics: Semantics = "rtl",
             model_bugs: list[str] | None = None, log: Callable[[str], None] | None = None,
             keep: str | Path | None = None, informative: bool = True) -> FuzzReport:  # fmt: skip
    """Run ``count`` cases (``first`` .. ``first+count-1``), or with ``until_covered`` up to
    ``budget`` cases until every bin the unit aims at is hit. ``jobs`` > 1 runs cases in worker
    processes (results and coverage merged in case order); each worker (or this process) keeps
    its DUT open across a chunk of cases. ``keep`` saves every case that ran, golden = the DUT's
    outputs. ``informative`` False keeps every case's first draw, even one whose golden says
    nothing (:func:`.case.generate`)."""
    files, sets = list(constraint_files), list(sets)
    c = load_constraints(unit, profile=profile, files=files, sets=sets)
    rep = FuzzReport(unit, c.profile.name, seed)
    t0 = time.monotonic()
    rep.aimed, rep.undrawn = aimed_bins(c, dut=spec.kind, semantics=semantics)
    rep.aim_seconds = time.monotonic() - t0
    t0 = time.monotonic()
    limit = budget if until_covered else count
    batch = 10 * max(jobs, 1)  # cases per round: each worker opens its DUT once per round
    pool = None
    if jobs > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))
    try:
        i = 0
        while i < limit:
            idx = list(range(first + i, first + min(i + batch, limit)))
            if pool is None:
                results = _run_chunk(c, spec, seed, idx, Path(out) if out else None, semantics=semantics,
                                     model_bugs=model_bugs, keep=Path(keep) if keep else None, informative=informative)
            else:
                per = -(-len(idx) // jobs)
                args = [(unit, profile, files, sets, spec, seed, idx[j:j + per], str(out) if out else None, semantics,
                         model_bugs, str(keep) if keep else None, informative) for j in range(0, len(idx), per)]
                results = [r for chunk in pool.map(_worker, args) for r in chunk]
            for fc, cj in results:
                rep.cases.append(fc)
                if cj:  # a case whose target could not open has no coverage (and says why)
                    rep.coverage.merge(cj)
                if log is not None and fc.status != "passed":
                    log(f"{fc.status.upper()} {unit} {fc.line}" + (f" -> saved {fc.saved}" if fc.saved else ""))
            i += len(idx)
            if until_covered and not rep.empty_bins():
                break
    finally:
        if pool is not None:
            pool.shutdown()
    # a bin the probe missed but this campaign drew is drawable after all (a rare one): aimed too
    drawn = [b for b in rep.undrawn if rep.coverage.counts.get(b)]
    rep.aimed += drawn
    rep.undrawn = [b for b in rep.undrawn if b not in drawn]
    rep.seconds = time.monotonic() - t0
    return rep

