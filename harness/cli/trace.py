"""``nvdla-hil trace``: one NVDLA trace test (a ``.cfg`` folder) or one of nv_full's traceplayer
tests (``input.txn``) on a target, each check reported; on a failure the model-vs-target diff
and the suspect-register search (harness/analysis/triage.py)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ...drivers.regmap import RegisterMapError
from ...drivers.transport import Transport
from ..targets import layer_timeout, open_target
from .options import add_target_options, target_spec
from .exits import EXIT_BAD_INPUT
from ..analysis.triage import HINT_RUNS

__all__ = ["add_subcommands"]


def _refuse_log(log: str, trace, force: bool) -> str | None:  # noqa: ANN001
    """Why ``--log`` must not be written (it is the trace or one of its files; it exists), or None."""
    dest = Path(log).resolve()
    own = {trace.path.resolve()}
    for c in trace.of_kind("mem_load"):
        own.add((trace.folder / c.args[2]).resolve())
    if dest in own:
        return "that is the trace's own file; choose another path"
    if dest.is_dir():
        return "is a folder; give a file path"
    if dest.parent.resolve() == trace.folder.resolve() and not force:
        return "would be written into the trace's folder; choose another path (or pass --force)"
    if dest.exists() and not force:
        return "the file exists; pass --force to replace it"
    return None



def _cmd_trace(args: argparse.Namespace) -> int:
    from ...drivers.driver import AccessLog, NvdlaDriver
    from ...drivers.profiles import load_profile
    from ...drivers.profiles import list_profiles
    from ..traces import parse_trace, run_trace, trace_features
    from ..targets.workload import explain_timeout, trace_budget

    p = Path(args.path)
    if (p / "input.txn").is_file() or p.name == "input.txn":
        return _cmd_txn(args)
    trace = parse_trace(args.path)
    if args.log:
        bad = _refuse_log(args.log, trace, args.force)
        if bad:
            print(f"nvdla-hil trace: --log {args.log}: {bad}", file=sys.stderr)
            return EXIT_BAD_INPUT
    feats = trace_features(trace)
    if args.profile:
        profiles = args.profile.split(",")
    else:  # a trace in a configuration's folder (trace_tests/<config>/<trace>) runs on that configuration
        own = trace.folder.parent.name
        profiles = ([own] if own in list_profiles() else []) + ["nv_small", "nv_small_256_full"]
    profs = [load_profile(p, nvdla_hw=args.nvdla_hw) for p in dict.fromkeys(profiles)]
    prof = next((p for p in profs if all(p.has(f) for f in feats)), None)
    if prof is None:
        missing = sorted(f for f in feats if not profs[0].has(f))
        lacking = " and ".join(p.name for p in profs)
        print(f"{trace.name} needs {', '.join(missing)}, which {lacking} lack{'s' if len(profs) == 1 else ''}; "
              f"give --nvdla-config a profile that has it (e.g. nv_small_256_full)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.model_bug and args.target != "model":
        print("nvdla-hil trace: --model-bug injects a bug into the model target only (--target model)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.model_bug:
        from ..targets.model import ModelTarget

        opened: Transport = ModelTarget(prof, semantics=args.model_semantics, bugs=args.model_bug)
    else:
        opened = open_target(target_spec(args, prof.name))
    actual: dict[int, object] = {}
    with opened as target:
        drv = NvdlaDriver(target, prof)
        log = drv.record(AccessLog(prof.regmap))
        budget = trace_budget(trace, drv, target)
        if args.timeout is not None:
            budget = dataclasses.replace(budget, seconds=args.timeout, source="--timeout")
        result = run_trace(trace, target, driver=drv, poison=args.poison, timeout=budget.seconds)
        if result.status == "failed":  # what the target left in each failing region, for the diff
            actual = {ck.line: target.mem_read(ck.address, ck.size, port=ck.port)
                      for ck in result.checks if ck.kind == "crc" and not ck.passed}
        if args.stats:
            for unit in trace.units():
                if unit in ("SDP", "CDP", "PDP", "CACC"):
                    try:
                        st = drv.precision.read_statistics(unit, 0)
                    except RegisterMapError as e:
                        print(f"  statistics {unit}: {e}")
                        continue
                    print(f"  statistics {unit} group 0: {st.counters()}")
    print(f"[{prof.name} on {args.target}]")
    print(result.summary())
    why = explain_timeout(result.message, budget)
    if why:
        print(why)
    if actual and not args.no_diagnose:
        from ..analysis.triage import diagnose_trace

        diag = diagnose_trace(trace, actual, prof, semantics=args.model_semantics, runs=args.hint_runs)  # type: ignore[arg-type]
        print(diag.summary())
    return _finish_trace(args, result, log)


def _finish_trace(args: argparse.Namespace, result, log) -> int:  # noqa: ANN001
    """The end of ``trace`` (both formats): the access log to ``--log`` or its tail on a
    failure, and the exit code (2 when nothing was checked)."""
    if args.log:
        with open(args.log, "w", encoding="utf-8") as fh:
            log.dump(fh)
        print(f"register access log: {args.log} ({len(log.records)} accesses)")
    elif result.status in ("failed", "error"):
        print("last register accesses:")
        print("\n".join("  " + line for line in log.tail(15)))
    if result.status == "skipped":
        print(f"nvdla-hil trace: nothing was checked: {result.message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0 if result.status == "passed" else 1


def _cmd_txn(args: argparse.Namespace) -> int:
    """``trace`` on one of nv_full's traceplayer tests (a folder with ``input.txn``)."""
    from ...drivers.driver import AccessLog
    from ...drivers.profiles import load_profile
    from ..traces.txn import parse_txn, run_txn

    test = parse_txn(args.path)
    prof = load_profile((args.profile or "nv_full").split(",")[0], nvdla_hw=args.nvdla_hw)
    if prof.generation != "v1":
        print(f"{test.name} is an nvdlav1 (nv_full) test; --nvdla-config {prof.name} is a {prof.generation} design",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.log and Path(args.log).exists() and not args.force:
        print(f"nvdla-hil trace: --log {args.log}: the file exists; pass --force to replace it", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.log and Path(args.log).resolve().parent == test.folder.resolve():
        print(f"nvdla-hil trace: --log {args.log}: refusing to write into the test's own folder", file=sys.stderr)
        return EXIT_BAD_INPUT
    with open_target(target_spec(args, prof.name)) as target:
        log = AccessLog(prof.regmap)
        target.add_observer(log)
        result = run_txn(test, target, profile=prof, timeout=args.timeout or layer_timeout(target))
    print(f"[{prof.name} on {args.target}]")
    print(result.summary())
    return _finish_trace(args, result, log)


# ---- the subcommand ------------------------------------------------------------------------


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="run one NVDLA trace test and report each check")
    add_target_options(p)
    p.add_argument("path", help="trace folder or .cfg file")
    p.add_argument("--poison", action="store_true", help="poison checked output regions first")
    p.add_argument("--log", help="write the full register access log here (refuses an existing file unless "
                                 "--force, and always refuses the trace's own files)")
    p.add_argument("--force", action="store_true", help="let --log replace an existing file")
    p.add_argument("--stats", action="store_true", help="print the units' statistics registers afterwards")
    p.add_argument("--model-bug", action="append", metavar="SPEC",
                   help="model target: inject a datapath bug into the target (never the reference), e.g. "
                        "SDP.D_CVT_OFFSET.CVT_OFFSET+1 or stuck:SDP:3:0 (harness/targets/faults.py); repeatable")
    p.add_argument("--no-diagnose", action="store_true",
                   help="on a failed check, skip the model-vs-target diff and the suspect-register search")
    p.add_argument("--hint-runs", type=int, default=HINT_RUNS, metavar="N",
                   help=f"model runs the suspect-register search may make (default {HINT_RUNS}; a number, "
                        f"not seconds, so the hint is the same on a busy machine)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for each interrupt (default: estimated from the layers' work on a "
                        "simulator - factor x expected cycles / simulated cycles per second, with a floor - "
                        "else the target's own, 30 s)")
    p.set_defaults(func=_cmd_trace)
