"""``nvdla-hil report``, ``nvdla-hil triage`` and ``nvdla-hil minimize``: the 2 a.m. tools.

    nvdla-hil report RUN_DIR [--out FILE]
    nvdla-hil triage TEST --run RUN_DIR [--model-bug SPEC] [--out DIR]
    nvdla-hil minimize TRACE_OR_VECTOR [--target model --model-bug SPEC] --out DIR

``report`` writes ``RUN_DIR/report.html``: one page, opens from disk (harness/analysis/report.py).

``triage`` reruns one test of a regression run (its name as in junit.xml, e.g.
``test_trace[sdp_3x3x33_bs_int8_reg_0]``, or just the part in brackets) on the target and
profile it ran on, with everything on: the register-access log, the statistics registers, the
element-wise diff against the reference model with the suspect-register hint, and waves on the
Verilator target. It writes one self-contained folder (default ``RUN_DIR/bundles/<test>/``:
``index.html`` plus the data files) to attach to a bug. Exit 1 when the failure reproduces,
0 when the rerun passes, 2 for bad input.

``minimize`` shrinks a failing SDP/CDP/PDP trace or packed vector to the smallest packed vector
that still fails the same way on the same target (harness/analysis/minimize.py). Exit 0 when a smaller
case was saved, 1 when the case does not fail (nothing to minimise), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .options import add_target_options, target_spec
from ..targets import checkout_problem
from .exits import bad_input
from ..analysis.triage import HINT_RUNS
from ...semantics import Semantics, check_semantics

__all__ = ["add_subcommands", "find_test", "run_options", "triage_test"]



# ---- report ---------------------------------------------------------------------------------------


def _cmd_report(args: argparse.Namespace) -> int:
    from ..analysis.report import write_report

    run = Path(args.run_dir)
    if not run.is_dir():
        return bad_input("report", f"{run}: no such run directory")
    if not (run / "junit.xml").is_file():
        return bad_input("report", f"{run}: no junit.xml (not a regression run directory?)")
    path = write_report(run, args.out, db=args.results_db)
    print(f"report: {path}")
    return 0


# ---- triage ---------------------------------------------------------------------------------------


def run_options(run: Path) -> dict[str, Any]:
    """The plugin options a regression ran with (from run.json's pytest argv)."""
    from ..analysis.junit import read_run_json

    meta = read_run_json(run)  # only a regular, bounded file; a malformed one is named (exit 2)
    argv = [str(a) for a in meta.get("pytest_argv") or []]
    opts: dict[str, Any] = {"poison": "--nvdla-poison" in argv, "waves": "--nvdla-waves" in argv,
                            "model-bugs": [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--nvdla-model-bug"]}
    for i, a in enumerate(argv[:-1]):
        if a.startswith("--nvdla-") and not argv[i + 1].startswith("-"):
            opts.setdefault(a.removeprefix("--nvdla-"), argv[i + 1])
    return opts


def find_test(run: Path, name: str):  # noqa: ANN201
    """The junit row of ``name`` (full name, or the id in brackets), or a ValueError naming
    some of the run's failing tests."""
    from ..analysis.junit import parse_junit

    rows = parse_junit(run / "junit.xml")
    for r in rows:
        if name in (r.name, r.test_id, f"{r.classname}::{r.name}"):
            return r
    bad = [r.name for r in rows if r.outcome in ("failed", "error")][:8]
    raise ValueError(f"no test {name!r} in {run / 'junit.xml'}"
                     + (f"; failing tests: {', '.join(bad)}" if bad else "; no test of that run failed"))


def _source(row, opts: dict[str, Any]) -> tuple[str, Path]:  # noqa: ANN001
    from ..traces import find_trace_sets
    from ..vectors import bundled_root

    if row.name.startswith("test_trace["):
        root = opts.get("traces") or (str(Path(opts["hw"]) / "verif/tests/trace_tests") if opts.get("hw") else None)
        if not root:
            raise ValueError("the run names no trace folder (run.json has no --nvdla-traces)")
        for cfg, p in find_trace_sets(root):
            if row.test_id in (p.name, f"{cfg}/{p.name}"):
                return "trace", p
        raise ValueError(f"trace {row.test_id} is not under {root} any more")
    if row.name.startswith("test_vector["):
        root = Path(opts.get("vectors") or bundled_root())
        p = root / row.test_id
        if not (p / "case.yaml").is_file():
            raise ValueError(f"vector {row.test_id} is not under {root} any more")
        return "vector", p
    if row.name.startswith("test_loadable["):
        from ..loadables.check import find_loadables

        root = opts.get("loadables") or os.environ.get("NVDLA_LOADABLES")
        if not root:
            raise ValueError("the run names no loadables folder (run.json has no --nvdla-loadables)")
        for name, path, _golden in find_loadables(root):
            if row.test_id == name:
                return "loadable", path
        raise ValueError(f"loadable {row.test_id} is not under {root} any more")
    raise ValueError(f"{row.name}: triage reruns trace, vector and loadable tests (test_trace[...], test_vector[...], "
                     "test_loadable[...])")


def _triage_loadable(src: Path, opts: dict[str, Any], target: str, profile: str, bugs: list[str] | None,
                     semantics: Semantics, folder: Path) -> tuple[str, str, dict[str, Any], list[str]]:
    """Rerun one loadable through NVDLA's firmware with the register accesses logged, name the
    first wrong layer against the model (harness/loadables/check.py) and keep its output dump;
    returns (status, result text, diagnosis, files written)."""
    from ...drivers.driver import AccessLog
    from ...drivers.profiles import load_profile
    from ..loadables.check import check_loadable, find_loadables, with_bugs
    from ..targets import TargetSpec, open_target

    sw = opts.get("sw") or os.environ.get("NVDLA_SW")
    if not sw:
        raise ValueError("triage of a loadable needs the nvdla/sw checkout its firmware comes from: set NVDLA_SW")
    root = Path(opts.get("loadables") or os.environ.get("NVDLA_LOADABLES") or "")
    golden = next((g for _n, p, g in find_loadables(root) if p == src), None)
    spec = with_bugs(TargetSpec(kind=target, profile=profile, semantics=semantics, nvdla_hw=opts.get("hw"),
                                lab=opts.get("lab"), board=opts.get("board")), bugs)
    log = AccessLog(load_profile(profile).regmap)

    def logged(sp):  # noqa: ANN001, ANN202 - every register access of the firmware goes to the access log
        t = open_target(sp)
        t.add_observer(log)
        return t

    v = check_loadable(src, spec=spec, nvdla_sw=sw, golden=golden, open_target=logged)
    files = []
    if v.result is not None:
        (folder / "regions" / "output.actual.dimg").write_bytes(v.result.dump)
        files.append("regions/output.actual.dimg")
    if golden is not None:
        (folder / "regions" / "output.expected.dimg").write_bytes(Path(golden).read_bytes())
    with open(folder / "access.log", "w", encoding="utf-8") as fh:
        log.dump(fh)
    text = f"{v.name} on {v.target} ({v.profile}): {v.status}" + (f"\n{v.message}" if v.message else "") + \
        (f"\noutput MD5 {v.md5}" + (f", golden {v.expected_md5}" if v.expected_md5 else "") if v.md5 else "")
    doc: dict[str, Any] = {"first_wrong_layer": v.layer.summary() if v.layer is not None else None,
                           "comparison": v.comparison}
    return v.status, text, doc, files


def _open(target: str, profile: str, opts: dict[str, Any], bugs: list[str] | None, semantics: Semantics, waves_dir: Path):
    from ..targets import TargetSpec, open_target
    from ..targets.model import ModelTarget

    if bugs:
        if target != "model":
            raise ValueError("--model-bug injects a bug into the model target only")
        return ModelTarget(profile, semantics=semantics, bugs=bugs)
    if target == "model":
        return ModelTarget(profile, semantics=semantics)
    if target == "serial":
        return open_target(TargetSpec(kind="serial", profile=profile, lab=opts.get("lab"), board=opts.get("board")))
    if target == "verilator":
        hw = opts.get("hw") or os.environ.get("NVDLA_HW")
        if problem := checkout_problem(target, hw):
            raise ValueError(problem)
        return open_target(TargetSpec(kind="verilator", profile=profile, nvdla_hw=hw, waves=True,
                                      extra={"run_dir": str(waves_dir)}))
    raise ValueError(f"unknown target {target!r}")


def _lut_from_model(kind: str, src: Path, profile: str, semantics: Semantics) -> dict[str, Any] | None:
    from ..analysis.report import trace_lut_info, vector_lut_info

    try:
        return trace_lut_info(src, profile, semantics) if kind == "trace" else vector_lut_info(src, semantics)
    except Exception:  # noqa: BLE001 - the picture is a bonus
        return None


def triage_test(run: Path, name: str, *, out: Path | None = None, bugs: list[str] | None = None,
                target: str | None = None, profile: str | None = None, hint_runs: int = HINT_RUNS,
                log=print) -> tuple[int, Path]:  # noqa: ANN001
    """Rerun one test of ``run`` with everything on and write its bundle; (exit code, folder)."""
    from ..analysis.junit import safe_name
    from ..analysis.report import render_bundle

    row = find_test(run, name)
    opts = run_options(run)
    if opts["model-bugs"] and not bugs:  # the run's failure came from bugs it injected into the model
        shown = "".join(f" --model-bug '{b}'" for b in opts["model-bugs"])
        log(f"note: run {run.name} injected model bugs ({', '.join(opts['model-bugs'])}); this rerun has none, so it "
            f"may pass where the run failed. To reproduce the run: nvdla-hil triage '{row.name}' --run {run}{shown}")
    kind, src = _source(row, opts)
    target = target or row.target or opts.get("target") or "model"
    profile = profile or row.profile or "nv_small"
    try:
        semantics = check_semantics(row.properties.get("model_semantics") or opts.get("model-semantics") or "rtl")
    except ValueError as e:
        raise ValueError(f"run {run}: its recorded model {e}") from None
    folder = out or run / "bundles" / safe_name(row.name)
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "regions").mkdir(parents=True)
    t0 = time.monotonic()
    diag = None
    stats: dict[str, Any] = {}
    if kind == "loadable":
        status, result_text, ldoc, _files = _triage_loadable(src, opts, target, profile, bugs, semantics, folder)
        doc = {"test": row.name, "status": status, "result": result_text, **ldoc}
        (folder / "diag.json").write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
        (folder / "result.txt").write_text(result_text + "\n", encoding="utf-8")
        shutil.copy2(src, folder / src.name)
    else:
        rerun = _rerun(kind, src, target, profile, opts, bugs, semantics, folder)
        status, result_text, stats = rerun.status, rerun.text, rerun.stats
        diag = _diagnose(rerun, kind, profile, semantics, hint_runs, folder)
        doc = _write_rerun_files(rerun, kind, src, row.name, diag, profile, semantics, folder)
    how = {"run": str(run), "test": row.name, "kind": kind, "source": str(src), "target": target, "profile": profile,
           "semantics": semantics, "model_bugs": bugs or [], "seconds": round(time.monotonic() - t0, 2),
           "command": f"nvdla-hil triage '{row.name}' --run {run}" + "".join(f" --model-bug '{b}'" for b in bugs or [])}
    (folder / "rerun.json").write_text(json.dumps(how, indent=1) + "\n", encoding="utf-8")
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    (folder / "index.html").write_text(render_bundle(how, status, result_text, doc, stats, files), encoding="utf-8")
    log(result_text)
    if diag is not None:
        log(diag.summary())
    log(f"bundle: {folder}")
    return (1 if status in ("failed", "error") else 0), folder


@dataclass
class _Rerun:
    """What one rerun of a trace or vector left: its result, the statistics registers, the
    failing regions as the target wrote them, the access log and link record, the waves."""

    status: str = "error"
    text: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    actual: dict[int, np.ndarray] = field(default_factory=dict)
    trace: Any = None
    case: Any = None
    result: Any = None
    log: Any = None
    link: str = ""
    wave: Any = None


def _rerun(kind: str, src: Path, target: str, profile: str, opts: dict[str, Any], bugs: list[str] | None,
           semantics: Semantics, folder: Path) -> _Rerun:
    """Run the trace or vector once more on ``target`` with the access log on (waves on Verilator)."""
    from ...drivers.driver import AccessLog, NvdlaDriver
    from ..traces import parse_trace, run_trace

    r = _Rerun()
    with _open(target, profile, opts, bugs, semantics, folder / "sim") as t:
        drv = NvdlaDriver(t, profile)
        r.log = drv.record(AccessLog(drv.regmap))
        if kind == "trace":
            trace = r.trace = parse_trace(src)
            res = run_trace(trace, t, driver=drv, poison=True, timeout=60.0)
            r.status = res.status
            r.text = res.summary()
            if res.status == "failed":
                r.actual = {ck.line: np.asarray(t.mem_read(ck.address, ck.size, port=ck.port), dtype=np.uint8)
                            for ck in res.checks if ck.kind == "crc" and not ck.passed}
            for unit in trace.units():
                if unit in ("SDP", "CDP", "PDP"):
                    try:
                        r.stats[unit] = drv.precision.read_statistics(unit, 0).counters()
                    except Exception as e:  # noqa: BLE001
                        r.stats[unit] = {"error": str(e)}
        else:
            from ..vectors import load_case, run_case

            case = r.case = load_case(src)
            cres = r.result = run_case(case, t, drv)
            r.status = cres.status
            r.text = cres.summary()
            if cres.actual_statistics is not None:
                r.stats[case.unit or "?"] = cres.actual_statistics.counters()
        r.link = t.link_report() if hasattr(t, "link_report") else ""
        r.wave = getattr(t, "wave_path", None)
    return r


def _diagnose(r: _Rerun, kind: str, profile: str, semantics: Semantics, hint_runs: int, folder: Path):  # noqa: ANN202
    """The element-wise diff against the reference model (and the suspect-register hint of a
    trace); the failing regions, as the target wrote them and as the model expects them."""
    diag = None
    if kind == "trace" and r.actual:
        from ..analysis.triage import diagnose_trace

        diag = diagnose_trace(r.trace, r.actual, profile, semantics=semantics, runs=hint_runs)
        ref = _reference_regions(r.trace, profile, semantics)
        for line, data in r.actual.items():
            (folder / "regions" / f"line{line}.actual.bin").write_bytes(data.tobytes())
            if ref is not None and line in ref:
                (folder / "regions" / f"line{line}.expected.bin").write_bytes(ref[line].tobytes())
    elif kind == "vector" and r.status == "failed":
        diag = _vector_diag(r.case, r.result, profile)
        for s in r.case.outputs:
            if s.name in r.result.outputs:
                (folder / "regions" / f"{s.name}.actual.bin").write_bytes(np.asarray(r.result.outputs[s.name]).tobytes())
                if s.packed is not None:
                    (folder / "regions" / f"{s.name}.expected.bin").write_bytes(s.packed.tobytes())
    return diag


def _write_rerun_files(r: _Rerun, kind: str, src: Path, test: str, diag: Any, profile: str, semantics: Semantics,
                       folder: Path) -> dict[str, Any]:
    """The bundle's data files: waves, access log (with the link record), diag.json, stats.json,
    result.txt and a copy of the trace or case; the diagnosis document."""
    from ..analysis.report import diagnosis_dict

    if r.wave and Path(r.wave).is_file():
        shutil.copy2(r.wave, folder / Path(r.wave).name)
    with open(folder / "access.log", "w", encoding="utf-8") as fh:
        r.log.dump(fh)
        if r.link:
            fh.write(f"# link record\n{r.link}\n")
    lut = _lut_from_model(kind, src, profile, semantics)
    doc = diagnosis_dict(diag, test=test, lut=lut)
    doc["status"] = r.status
    doc["result"] = r.text
    (folder / "diag.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    (folder / "stats.json").write_text(json.dumps(r.stats, indent=1) + "\n", encoding="utf-8")
    (folder / "result.txt").write_text(r.text + ("\n\n" + diag.summary() if diag else "") + "\n", encoding="utf-8")
    if kind == "trace":
        shutil.copy2(r.trace.path, folder / r.trace.path.name)
    else:
        shutil.copytree(src, folder / "case", dirs_exist_ok=True)
    return doc


def _reference_regions(trace, profile: str, semantics: Semantics) -> dict[int, np.ndarray] | None:  # noqa: ANN001
    from ..analysis.triage import model_regions as _regions

    return _regions(trace, load_profile_cached(profile), semantics)


def load_profile_cached(name: str):  # noqa: ANN201
    from ...drivers.profiles import load_profile

    return load_profile(name)


def _vector_diag(case, res, profile: str):  # noqa: ANN001, ANN202
    """A TraceDiagnosis-shaped diff of a failing vector's feature outputs."""
    from ..targets.outputs import OutputCube, diff_region
    from ..analysis.triage import TraceDiagnosis

    diag = TraceDiagnosis(case.name, profile)
    for i, s in enumerate(case.outputs):
        if s.packed is None or s.name not in res.outputs or s.layout != "nvdla.feature" or len(s.shape) != 3:
            continue
        c, h, w = s.shape
        atom = int(s.params.get("atom_bytes") or load_profile_cached(profile).atom_bytes)
        bpe = s.dtype.itemsize
        ls = int(s.params.get("line_stride") or w * atom)
        ss = int(s.params.get("surface_stride") or h * ls)
        cube = OutputCube(case.unit or "?", s.address, w, h, c, ls, ss, bpe, atom, s.port)
        d = diff_region(s.packed, np.asarray(res.outputs[s.name], dtype=np.uint8)[: s.nbytes], s.address, cube)
        if not d.matches:
            diag.regions.append((i, d))
    return diag


# ---- minimize -------------------------------------------------------------------------------------


def _cmd_minimize(args: argparse.Namespace) -> int:
    from ..analysis.minimize import MinimizeError, minimize_path
    from ..targets import open_target
    from ..targets.model import ModelTarget

    p = Path(args.path)
    if not p.exists():
        return bad_input("minimize", f"{p}: no such trace or vector")
    if args.model_bug and args.target != "model":
        return bad_input("minimize", "--model-bug injects a bug into the model target only (--target model)")
    out = Path(args.out)
    if out.exists() and not args.force:
        return bad_input("minimize", f"--out {out}: exists; pass --force to replace it")
    if out.resolve() == (p if p.is_dir() else p.parent).resolve():
        return bad_input("minimize", f"--out {out}: that is the input; choose another folder")

    def factory():  # noqa: ANN202
        prof = args.profile or state_profile[0]
        if args.target == "model":
            return ModelTarget(prof, semantics=args.model_semantics, bugs=args.model_bug)
        return open_target(target_spec(args, prof, board_memory=False))

    state_profile = [args.profile or "nv_small"]
    try:
        if not args.profile:
            from ..analysis.minimize import trace_profile as _trace_profile
            from ..traces import parse_trace
            from ..vectors import load_case

            if (p / "case.yaml").is_file() or p.name == "case.yaml":
                state_profile[0] = load_case(p).profile or "nv_small"
            else:
                state_profile[0] = _trace_profile(parse_trace(p))
        res = minimize_path(p, factory, profile=state_profile[0], semantics=args.model_semantics, out=out,
                            budget=args.budget, log=print if args.verbose else None)
    except MinimizeError as e:
        print(f"nvdla-hil minimize: {e}", file=sys.stderr)
        return 1
    print(res.summary())
    return 0


# ---- registration ---------------------------------------------------------------------------------


def _cmd_triage(args: argparse.Namespace) -> int:
    run = Path(args.run)
    if not (run / "junit.xml").is_file():
        return bad_input("triage", f"--run {run}: no junit.xml (give a regression run directory, e.g. results/latest)")
    try:
        code, _ = triage_test(run, args.test, out=Path(args.out) if args.out else None, bugs=args.model_bug,
                              target=args.target, profile=args.profile, hint_runs=args.hint_runs)
    except ValueError as e:
        return bad_input("triage", str(e))
    return code


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="one HTML page for a regression run directory (opens from disk)")
    p.add_argument("run_dir", help="a regression run directory (results/<run-id>, results/latest)")
    p.add_argument("--out", help="write the page here (default RUN_DIR/report.html)")
    p.add_argument("--results-db", default=os.environ.get("NVDLA_HIL_RESULTS_DB"), metavar="URL",
                   help="results database for clusters, labels and history (default: NVDLA_HIL_RESULTS_DB, "
                        "else RUN_DIR/../results.sqlite)")
    p.set_defaults(func=_cmd_report)

    p = subparsers.add_parser("triage", help="rerun one failing test of a run with everything on; write a bug bundle",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("test", help="test name as in junit.xml (test_trace[...], test_vector[...], test_loadable[...]) or the id in brackets")
    p.add_argument("--run", required=True, help="the regression run directory the test failed in")
    p.add_argument("--out", help="bundle folder (default RUN_DIR/bundles/<test>)")
    add_target_options(p, kinds=("model", "verilator", "serial"), default=None, profile_default=None, include=(),
                       target_help="override the run's target", profile_help="override the test's profile")
    p.add_argument("--model-bug", action="append", metavar="SPEC",
                   help="model target: inject a datapath bug (harness/targets/faults.py); repeatable")
    p.add_argument("--hint-runs", type=int, default=HINT_RUNS, metavar="N",
                   help=f"model runs the suspect-register search may make (default {HINT_RUNS}; not seconds: "
                        f"the same hint on an idle and a busy machine)")
    p.set_defaults(func=_cmd_triage)

    p = subparsers.add_parser("minimize", help="shrink a failing trace or vector to the smallest packed vector "
                                               "that fails the same way")
    p.add_argument("path", help="trace folder / .cfg, or packed vector folder / case.yaml")
    p.add_argument("--out", required=True, help="folder of the minimised packed vector")
    p.add_argument("--force", action="store_true", help="replace --out")
    add_target_options(p, kinds=("model", "verilator", "serial"), profile_default=None, include=("semantics", "hw", "lab"),
                       profile_help="hardware profile (default: the trace's/case's)")
    p.add_argument("--model-bug", action="append", metavar="SPEC", help="model target: inject a datapath bug")
    p.add_argument("--budget", type=float, default=60.0, help="seconds the search may take (default 60)")
    p.add_argument("-v", "--verbose", action="store_true", help="print each step")
    p.set_defaults(func=_cmd_minimize)
