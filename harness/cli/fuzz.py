"""``nvdla-hil fuzz`` (constrained-random differential testing) and ``nvdla-hil coverage``
(functional-coverage files: show, merge).

    nvdla-hil fuzz --unit sdp-lut --target verilator|cmod|serial --count N --seed S
                   [--profile P] [--constraints FILE] [--set key=value ...] [--out DIR]
                   [--until-covered] [--budget N] [--first I] [-j N] [--coverage-out FILE] [--keep DIR]
                   [--allow-degenerate]
    nvdla-hil fuzz --unit sdp-lut --model-bug SPEC ...   (the model with an injected fault as the DUT)
    nvdla-hil fuzz --unit pdp --target verilator --steer rtl-coverage|uniform --cycles N
                   [--baseline RUN/rtl-coverage] [--steer-target UNIT|FILE.v[:LO-HI]] [--rtl-coverage-dir DIR]
    nvdla-hil coverage show FILE... [--profile P ...]
    nvdla-hil coverage merge FILE... --out FILE
    nvdla-hil coverage rtl RUN_DIR [--tests]       (a run's RTL coverage: per-unit table, ranking)

The reference model computes every case's golden, so ``--target model`` (the default) is
refused unless ``--model-bug`` injects a fault into it (testing the harness itself): the model
compared with itself proves nothing.

``fuzz`` prints one line per failing case (its seed and index, the first and worst differing
element of each output), saves each failing case as a packed vector under ``--out`` (replay:
``nvdla-hil vectors run DIR/<case>`` or ``fuzz --seed S --first I --count 1``), then the
coverage table of the unit's bins. Exit codes: 0 all matched, 1 a mismatch (or a case that
could not run), 2 bad input (constraints, options).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..targets import checkout_problem
from .exits import bad_input
from .options import add_target_options, target_spec

if TYPE_CHECKING:
    from ..analysis.rtl_coverage import RunCoverage

__all__ = ["add_subcommands"]



def _cmd_fuzz(args: argparse.Namespace) -> int:
    from ..analysis import coverage as covmod
    from ..fuzz import UNIT_GROUPS, ConstraintError, load_constraints, run_fuzz
    from ..fuzz.runner import AIM_DRAWS

    if args.count < 1 or args.budget < 1 or args.jobs < 1 or args.first < 0 or args.seed < 0:
        return bad_input("fuzz", "--count, --budget and --jobs must be >= 1; --seed and --first >= 0")
    try:  # first: a unit the profile cannot run is refused whatever the target
        c = load_constraints(args.unit, profile=args.profile, files=args.constraints or (), sets=args.set or ())
    except ConstraintError as e:
        return bad_input("fuzz", str(e))
    if problem := checkout_problem(args.target, args.nvdla_hw):
        return bad_input("fuzz", problem)
    if args.keep and Path(args.keep).exists() and not Path(args.keep).is_dir():
        return bad_input("fuzz", f"--keep {args.keep}: not a folder")
    if args.target == "serial" and not (args.lab and args.board):
        return bad_input("fuzz", "--target serial needs --lab FILE --board NAME (or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
    if args.model_bug and args.target != "model":
        return bad_input("fuzz", "--model-bug injects a fault into the model target only (--target model)")
    if args.target == "model" and not args.model_bug:
        # the golden of every case is the reference model's: the model as the DUT would agree by
        # construction and prove nothing (nor should --keep record the model's outputs as goldens)
        return bad_input("fuzz", "--target model (the default) would compare the reference model with itself, so every case "
                         "would pass and prove nothing: choose a device under test with --target verilator|cmod|serial, or "
                         "inject a fault with --model-bug SPEC to test the harness itself")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        return bad_input("fuzz", f"--out {args.out}: not a folder")
    spec = target_spec(args, c.profile.name, board_memory=False)
    if args.steer:
        return _steered(args, spec, c)
    what = f"up to {args.budget} cases until covered" if args.until_covered else f"{args.count} cases"
    print(f"fuzz {c.describe()}: {what}, seed {args.seed}, target {args.target}", flush=True)
    rep = run_fuzz(args.unit, spec, count=args.count, seed=args.seed, first=args.first, profile=args.profile,
                   constraint_files=args.constraints or (), sets=args.set or (), out=args.out,
                   until_covered=args.until_covered, budget=args.budget, jobs=args.jobs,
                   semantics=args.model_semantics, model_bugs=args.model_bug or None,
                   log=lambda s: print(s, flush=True), keep=args.keep, informative=not args.allow_degenerate)
    print(covmod.format_table(rep.coverage, [c.profile], UNIT_GROUPS[args.unit], aimed=rep.aimed))
    if args.coverage_out:
        rep.coverage.write(args.coverage_out)
        print(f"coverage written to {args.coverage_out}")
    counts: dict[str, int] = {}
    for fc in rep.cases:
        counts[fc.status] = counts.get(fc.status, 0) + 1
    empty = rep.empty_bins()
    print(f"summary: {len(rep.cases)} cases in {rep.seconds:.1f} s: "
          + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
          + f"; {len(rep.aimed) - len(empty)} of {len(rep.aimed)} aimed bins hit")
    print(rep.informativeness_line() + (" (--allow-degenerate: first draws kept)" if args.allow_degenerate else ""))
    if rep.undrawn:  # the profile has them, the unit's draws never reach them: another unit's to aim at
        how = "kept in the cache" if rep.aim_seconds < 0.1 else f"{rep.aim_seconds:.1f} s"
        print(f"not aimed: {len(rep.undrawn)} bins of {args.unit}'s groups that {c.profile.name} has but its draws "
              f"({AIM_DRAWS} probe cases, {how}) never reached: {', '.join(rep.undrawn)}")
    if args.until_covered:
        if empty:
            print(f"budget spent, {len(empty)} bins stayed empty: {', '.join(empty)}")
        else:
            print(f"every aimed bin of {args.unit} on {c.profile.name} hit after {len(rep.cases)} cases")
    if rep.cases and all(fc.status == "error" and "cannot open the target" in fc.line for fc in rep.cases):
        # nothing ran: the target itself is the problem (no simulator, no checkout, no board)
        return bad_input("fuzz", f"the {args.target} target could not be opened: "
                         f"{rep.cases[0].line.split('cannot open the target: ', 1)[-1]}")
    return 1 if rep.failed else 0


def _steered(args: argparse.Namespace, spec: object, c: object) -> int:
    """``fuzz --steer MODE``: cases on the instrumented simulator until ``--cycles`` simulated
    cycles are spent (harness/fuzz/steer.py)."""
    import tempfile

    from ...drivers.files import InputError
    from ..fuzz.steer import Target, run_steered
    from ..targets.rtl_coverage import RtlCoverageFolder

    if args.target != "verilator":
        return bad_input("fuzz", "--steer needs the RTL's coverage: --target verilator")
    if args.cycles < 1:
        return bad_input("fuzz", "--steer needs a budget of simulated cycles: --cycles N (N >= 1)")
    try:
        target = Target.parse(args.steer_target)
        where = Path(args.rtl_coverage_dir) if args.rtl_coverage_dir else Path(tempfile.mkdtemp(prefix="nvdla-steer-"))
        folder = RtlCoverageFolder(where / "tests", ["line", "toggle"])
        folder.current_test = "<after the last case>"
        rep = run_steered(args.unit, spec, folder, mode=args.steer, seed=args.seed, budget_cycles=args.cycles,
                          profile=args.profile, constraint_files=args.constraints or (), sets=args.set or (),
                          baseline=args.baseline, target=target, first=args.first,
                          out=Path(args.out) if args.out else None, log=lambda s: print(s, flush=True),
                          widen_holes=not args.keep_ranges)
    except (ValueError, InputError) as e:
        return bad_input("fuzz", str(e))
    print(f"summary: {rep.line()}")
    print(f"RTL coverage of every case: {where} (`nvdla-hil coverage rtl {where}`)")
    return 1 if rep.failed else 0


def _cmd_rtl_coverage(args: argparse.Namespace) -> int:
    """``coverage rtl RUN_DIR``: merge a run's per-test RTL coverage and print its tables."""
    from ...drivers.files import InputError
    from ..analysis import rtl_coverage as rc

    if len(args.run) > 1:
        if args.widen:
            return bad_input("coverage", "--widen reads one run's holes; give one run folder")
        return _rtl_coverage_of_runs(args)
    run = Path(args.run[0])
    tests, junit = _rtl_coverage_tests(run)
    seconds: dict[str, float] = {}
    if junit.is_file():  # each test's time, for the ranking's run time (JUnit names the test's last part)
        from ..analysis.junit import parse_junit

        try:
            by_name = {r.name: float(r.time) for r in parse_junit(junit)}
        except InputError:
            by_name = {}
    try:
        runs = rc.merge_folder(tests)
        if junit.is_file() and by_name:
            for r in runs.values():
                seconds = {t: by_name[t.split("::")[-1]] for t in r.tests if t.split("::")[-1] in by_name}
                r.seconds = seconds
    except InputError as e:
        return bad_input("coverage", str(e))
    for name, one in ((n, r.summary()) for n, r in runs.items()):
        print(f"{name}: {one['tests']} tests, {rc.total_line(one)}")
        print(rc.format_unit_table(one["units"]))
        rank = one["rank"]
        code = one["rank_code"]
        print(f"{len(rank['tests'])} of {one['tests']} tests keep every point the run hit "
              f"({rank['seconds']:.0f} s of {rank['seconds_all']:.0f} s where timed); {len(code['tests'])} keep every "
              f"line and branch ({code['seconds']:.0f} s)")
        if args.tests:
            for t, gained in zip(rank["tests"], rank["gained"], strict=True):
                print(f"  +{gained:7d}  {t}")
        if args.holes:
            print("where the unhit points are (per unit, the files with the most unhit lines+branches):")
            for unit, files in rc.holes(runs[name]).items():
                print(f"  {unit.upper()}: " + "; ".join(f"{f} {c['line']} lines, {c['branch']} branches, "
                                                        f"{c['toggle']} toggles" for f, c in files))
            _hole_classes(runs[name])
        if args.widen:
            rc_ = _widen(args, runs[name])
            if rc_:
                return rc_
    return 0


def _widen(args: argparse.Namespace, run: RunCoverage) -> int:
    """``coverage rtl RUN --widen UNIT``: the constraints file that widens the fuzz fields driving
    the register fields the run never set high (harness/fuzz/widen.py), printed or written to
    ``--widen-out`` (a new file: an existing one is not overwritten)."""
    from ..analysis import rtl_holes as rh
    from ..fuzz.legal import ConstraintError
    from ..fuzz.registry import load_constraints
    from ..fuzz.widen import constraints_text, field_drivers, widen

    try:
        c = load_constraints(args.widen, profile=run.config)
    except ConstraintError as e:
        return bad_input("coverage", f"--widen {args.widen}: {e}")
    gaps, _ = rh.field_gaps(run, limit=10_000)
    ws = widen(c, gaps, field_drivers(c))
    text = constraints_text(c, ws, " ".join(args.run))
    if not ws:
        print(f"--widen {args.widen}: no field of {args.widen} drives a register field this run never set high")
        return 0
    if args.widen_out:
        out = Path(args.widen_out)
        try:
            with out.open("x", encoding="utf-8") as f:
                f.write(text)
        except FileExistsError:
            return bad_input("coverage", f"--widen-out {out}: exists; not overwritten (give a new file)")
        except OSError as e:
            return bad_input("coverage", f"--widen-out {out}: {e.strerror or e}")
        load_constraints(args.widen, profile=run.config, files=[out])  # what we wrote must load
        print(f"widened constraints of {args.widen} ({', '.join(w.field for w in ws)}): {out}; "
              f"use: nvdla-hil fuzz --unit {args.widen} --profile {run.config} --constraints {out}")
    else:
        print(text, end="")
    return 0


def _hole_classes(run: RunCoverage) -> None:
    """What the holes mean (harness/analysis/rtl_holes.py): per unit, the unhit points held by the
    testbench, absent from the configuration, never drawn, or missed."""
    from ...drivers.profiles import ProfileError, load_profile
    from ..analysis import rtl_holes as rh

    config = run.config
    try:
        features = load_profile(config).features
    except (ProfileError, KeyError, ValueError):
        print(f"why the points are unhit: not sorted ({config!r} is no known profile, so its features are not known)")
        return
    gaps, never = rh.field_gaps(run)
    print(f"why the points are unhit ({config}'s features; rules in harness/analysis/rtl_holes.py):")
    for line in rh.format_classes(rh.classify(run, features), gaps, never).splitlines():
        print("  " + line)


def _rtl_coverage_tests(run: Path) -> tuple[Path, Path]:
    """(the per-test coverage folder, the run's junit.xml) of a run folder given as the user may."""
    base = run / "rtl-coverage" if (run / "rtl-coverage").is_dir() else run
    tests = base / "tests" if (base / "tests").is_dir() else base
    return tests, (run if run.name != "rtl-coverage" else run.parent) / "junit.xml"


def _rtl_coverage_of_runs(args: argparse.Namespace) -> int:
    """``coverage rtl RUN RUN ...``: the union of several runs' RTL coverage (nights), per build,
    and per run the design points it hit and those no other run hit."""
    from ...drivers.files import InputError
    from ..analysis import rtl_coverage as rc

    folders = []
    for r in map(Path, args.run):
        tests, junit = _rtl_coverage_tests(r)
        folders.append((tests, junit.parent.name))
    if len({lab for _, lab in folders}) < len(folders):
        return bad_input("coverage", "two of the runs have the same folder name: give each run once")
    try:
        runs = rc.merge_runs(folders)
    except InputError as e:
        return bad_input("coverage", str(e))
    for name, run in runs.items():
        one = run.summary()
        print(f"{name}: {len(folders)} runs, {one['tests']} tests, {rc.total_line(one)}")
        print(rc.format_unit_table(one["units"]))
        for lab, n in rc.per_label(run).items():
            print(f"  {lab}: {n['hit']} design points hit, {n['only']} hit by no other run")
        rank = one["rank"]
        print(f"{len(rank['tests'])} of {one['tests']} tests keep every point of the union")
        if args.tests:
            for t, gained in zip(rank["tests"], rank["gained"], strict=True):
                print(f"  +{gained:7d}  {t}")
    return 0


def _cmd_coverage(args: argparse.Namespace) -> int:
    from ..analysis import coverage as covmod

    try:
        covs = [covmod.load(p) for p in args.files]
    except (OSError, ValueError) as e:
        return bad_input("coverage", str(e))
    cov = covmod.merge(*covs)
    if args.coverage_cmd == "merge":
        if Path(args.out).exists() and not args.force:
            return bad_input("coverage", f"--out {args.out} exists; pass --force to replace it")
        cov.write(args.out)
        print(f"merged {len(covs)} file(s) into {args.out}")
        return 0
    try:
        print(covmod.format_table(cov, args.profile or None))
    except Exception as e:  # noqa: BLE001 - a bad profile name
        return bad_input("coverage", str(e))
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    from ..fuzz import UNITS

    p = subparsers.add_parser("fuzz", help="constrained-random differential testing against the reference model",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--unit", required=True, choices=UNITS)
    p.add_argument("--count", type=int, default=50, help="cases to run (default 50)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--first", type=int, default=0, help="index of the first case (replay one: --first I --count 1)")
    p.add_argument("--constraints", action="append", metavar="FILE", help="constraint file merged over the shipped one")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override one field: k=v, k=lo..hi, k=a|b")
    p.add_argument("--out", help="folder for the packed vectors of failing cases")
    p.add_argument("--keep", metavar="DIR", help="save every case that ran as a packed vector whose golden is the DUT's "
                   "outputs (provenance names the DUT): bundled suites with goldens from the C model or the RTL")
    p.add_argument("--until-covered", action="store_true",
                   help="run until every bin the unit's draws reach on the profile is hit (or --budget)")
    p.add_argument("--budget", type=int, default=1000, help="most cases with --until-covered (default 1000)")
    p.add_argument("--allow-degenerate", action="store_true",
                   help="keep every case's first draw, even one whose golden is one value, all poison or all "
                        "saturated with no status or statistic set (default: draw such a case again, up to "
                        "3 times, so that a pass can tell a right layer from one that computed nothing)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--coverage-out", metavar="FILE", help="write the reference model's coverage (JSON)")
    p.add_argument("--model-bug", action="append", metavar="SPEC", help="inject a fault into the model target (DUT) only")
    p.add_argument("--steer", choices=("uniform", "rtl-coverage"),
                   help="verilator: run on the coverage-instrumented simulator until --cycles are spent, drawing "
                        "uniformly or steered by the RTL's line+toggle coverage (mutants of cases that reached new points)")
    p.add_argument("--cycles", type=int, default=0, help="--steer: budget of simulated cycles")
    p.add_argument("--baseline", metavar="DIR", help="--steer: a run's rtl-coverage/ folder whose hits are not new "
                   "(e.g. the bundled suites' run)")
    p.add_argument("--keep-ranges", action="store_true",
                   help="--steer rtl-coverage: draw from the constraints as given (by default the --baseline's "
                        "holes widen the fields that drive register fields it never set high first)")
    p.add_argument("--steer-target", metavar="WHERE", help="--steer: count only this unit (pdp) or file (NV_NVDLA_PDP_core.v[:100-300])")
    p.add_argument("--rtl-coverage-dir", metavar="DIR", help="--steer: where the per-case coverage goes (default a new temp folder)")
    add_target_options(p, include=("semantics", "hw", "lab"), profile_default=None,
                       target_help="the device under test: verilator (RTL), cmod (NVDLA's C model), serial (board); "
                                   "model only with --model-bug (the reference model with an injected fault)",
                       profile_help="hardware profile (default: the unit's constraint file's)")
    p.set_defaults(func=_cmd_fuzz, command="fuzz")

    c = subparsers.add_parser("coverage", help="functional-coverage files: show, merge")
    sub = c.add_subparsers(dest="coverage_cmd", required=True)
    s = sub.add_parser("show", help="print the coverage table of one or more files (merged)")
    s.add_argument("files", nargs="+")
    s.add_argument("--profile", action="append", help="profiles whose reachable bins count (default: the files')")
    s.set_defaults(func=_cmd_coverage, command="coverage")
    m = sub.add_parser("merge", help="merge coverage files into one")
    m.add_argument("files", nargs="+")
    m.add_argument("--out", required=True)
    m.add_argument("--force", action="store_true")
    m.set_defaults(func=_cmd_coverage, command="coverage")
    r = sub.add_parser("rtl", help="a run's RTL code coverage (regress --rtl-coverage, fuzz --steer): per-unit "
                                   "table and the smallest set of tests that keeps it")
    r.add_argument("run", nargs="+", help="a run folder, its rtl-coverage/ folder, or a fuzz --rtl-coverage-dir; "
                                          "several (nights): their union, and what each run alone hit")
    r.add_argument("--tests", action="store_true", help="list the ranked tests and the points each adds")
    r.add_argument("--holes", action="store_true", help="per unit, the RTL files with the most unhit points")
    r.add_argument("--widen", metavar="UNIT", help="a fuzz constraints file widening UNIT's fields that drive the "
                                                   "register fields the run never set high (harness/fuzz/widen.py)")
    r.add_argument("--widen-out", metavar="FILE", help="--widen: write the constraints here (a new file), not to stdout")
    r.set_defaults(func=_cmd_rtl_coverage, command="coverage")
