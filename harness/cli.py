"""``nvdla-hil`` command line: regression, registers, traces, vectors, layouts, sims, boards.

Every subcommand has ``--help``. Exit codes: 0 success, 1 test/check failure, 2 usage or
input error (the message names the file/line, register or test).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..drivers.regmap import RegisterMapError
from .targets import TARGETS, TargetSpec, layer_timeout, open_target

__all__ = ["main", "build_parser"]

SUITES = {
    "traces": "nvdla_hil.harness.suites.test_traces",
    "vectors": "nvdla_hil.harness.suites.test_vectors",
}


def _default_traces() -> str | None:
    """NVDLA_TRACES, else ../shared/nvdla/trace_tests/nv_small next to a source checkout."""
    env = os.environ.get("NVDLA_TRACES")
    if env:
        return env
    here = Path(__file__).resolve().parents[1]
    for cand in (Path.cwd() / "../shared/nvdla/trace_tests/nv_small", here / "../shared/nvdla/trace_tests/nv_small"):
        if cand.is_dir():
            return str(cand.resolve())
    return None


def _add_target_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument("--target", choices=TARGETS, default=os.environ.get("NVDLA_HIL_TARGET", "model"),
                   help="where to run (default: model, the in-process virtual NVDLA)")
    g.add_argument("--profile", "--nvdla-config", dest="profile", default=os.environ.get("NVDLA_HIL_CONFIG"),
                   help="hardware profile (nv_small, nv_small_256_full, nv_full, ...)")
    g.add_argument("--model-semantics", choices=("rtl", "cmod"), default="rtl",
                   help="model target: follow the RTL (default) or NVDLA's C model where they differ")
    g.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"), help="nvdla/hw checkout (verilator target)")
    g.add_argument("--waves", action="store_true", help="verilator target: dump FST waves")
    g.add_argument("--lab", default=os.environ.get("NVDLA_HIL_LAB"), help="lab file (serial target)")
    g.add_argument("--board", default=os.environ.get("NVDLA_HIL_BOARD"), help="board name (serial target)")


def _spec(args: argparse.Namespace, profile: str | None = None) -> TargetSpec:
    prof = profile or (args.profile.split(",")[0] if args.profile else "nv_small")
    return TargetSpec(kind=args.target, profile=prof, semantics=args.model_semantics, nvdla_hw=args.nvdla_hw,
                      waves=args.waves, lab=args.lab, board=args.board)


# ---- regress ------------------------------------------------------------------------------


def _cmd_regress(args: argparse.Namespace) -> int:
    import pytest

    suites = list(SUITES) if args.suite == "all" else [args.suite]
    argv = ["-p", "no:cacheprovider", "-q", "--nvdla-summary", "--target", args.target,
            "--model-semantics", args.model_semantics, "-o", "console_output_style=classic"]
    argv += ["--pyargs"] + [SUITES[s] for s in suites]
    if args.profile:
        argv += ["--nvdla-config", args.profile]
    traces = args.traces or os.environ.get("NVDLA_TRACES")
    if not traces and not (args.nvdla_hw and (Path(args.nvdla_hw) / "verif/tests/trace_tests").is_dir()):
        traces = _default_traces()  # else the plugin takes the checkout's verif/tests/trace_tests
    if traces:
        argv += ["--nvdla-traces", traces]
    if args.vectors:
        argv += ["--nvdla-vectors", args.vectors]
    for flag, val in (("--nvdla-hw", args.nvdla_hw), ("--lab", args.lab), ("--board", args.board),
                      ("--nvdla-log", args.log_dir)):
        if val:
            argv += [flag, val]
    if args.waves:
        argv.append("--waves")
    if args.poison:
        argv.append("--poison")
    if args.junit:
        argv += ["--junitxml", args.junit]
    if args.keyword:
        argv += ["-k", args.keyword]
    if args.jobs and args.jobs != 1:
        argv += ["-n", str(args.jobs)]
    argv += args.pytest_args
    code = pytest.main(argv)
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("nvdla-hil regress: no tests collected", file=sys.stderr)
        return 1
    return 0 if code == pytest.ExitCode.OK else 1


# ---- regs ---------------------------------------------------------------------------------


def _parse_value(text: str) -> int | str:
    try:
        return int(text, 0)
    except ValueError:
        return text  # an enum name


def _cmd_regs(args: argparse.Namespace) -> int:
    from ..drivers.driver import NvdlaDriver
    from ..drivers.profiles import load_profile

    if args.regs_cmd == "check":
        from ..drivers.regmap import check_against_checkout

        hw = args.nvdla_hw
        if not hw:
            print("nvdla-hil regs check: give --nvdla-hw PATH (or NVDLA_HW)", file=sys.stderr)
            return 2
        diffs = check_against_checkout(hw, args.profile or "nv_small")
        for d in diffs:
            print(d)
        print(f"{len(diffs)} difference(s) between the bundled register map and {hw}")
        return 1 if diffs else 0
    profile = load_profile((args.profile or "nv_small").split(",")[0])
    if args.regs_cmd == "list":
        rm = profile.regmap
        for block in args.blocks or list(rm.blocks):
            b = rm.block(block)
            for r in b.registers.values():
                fields = ", ".join(f"{f.name}[{f.msb}:{f.lsb}]" for f in r.fields.values())
                flags = ("dual " if r.dual else "") + ("trigger " if r.trigger else "")
                print(f"{r.address:#07x} {r.full_name:45s} {r.access:2s} rst={r.reset:#010x} {flags}{fields}")
        return 0
    if args.regs_cmd == "info":
        r = profile.regmap.register(args.name)
        print(f"{r.full_name} @ {r.address:#x} (offset {r.offset:#x}), access {r.access}, reset {r.reset:#010x}"
              + (", per register group" if r.dual else "") + (", write has side effects" if r.trigger else ""))
        for f in r.fields.values():
            enums = (" {" + ", ".join(f"{k}={v}" for k, v in f.enums.items()) + "}") if f.enums else ""
            print(f"  [{f.msb}:{f.lsb}] {f.name} {f.access} reset={f.reset:#x}{enums}")
        return 0
    with open_target(_spec(args, profile.name)) as target:
        drv = NvdlaDriver(target, profile)
        if args.regs_cmd == "read":
            for name in args.names:
                r = drv.register(name)
                v = drv.read(name)
                decoded = ", ".join(f"{k}={f.decode(fv) or hex(fv)}" for k, f in r.fields.items()
                                    for fv in [f.extract(v)])
                print(f"{r.full_name} = {v:#010x}  ({decoded})")
        elif args.regs_cmd == "write":
            if any("=" in a for a in args.values):
                fields = {}
                for a in args.values:
                    k, _, v = a.partition("=")
                    fields[k] = _parse_value(v)
                value = drv.write_fields(args.name, **fields)
            else:
                if len(args.values) != 1:
                    print("regs write: give one value or FIELD=VALUE pairs", file=sys.stderr)
                    return 2
                value = int(args.values[0], 0)
                drv.write(args.name, value)
            print(f"{drv.register(args.name).full_name} <= {value:#010x}")
        elif args.regs_cmd == "dump":
            for name, v in drv.dump(args.blocks or None).items():
                print(f"{name:45s} {v:#010x}")
    return 0


# ---- trace --------------------------------------------------------------------------------


def _cmd_trace(args: argparse.Namespace) -> int:
    from ..drivers.driver import AccessLog, NvdlaDriver
    from ..drivers.profiles import load_profile
    from .traces import parse_trace, run_trace, trace_features

    from ..drivers.profiles import list_profiles

    trace = parse_trace(args.path)
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
        return 2
    with open_target(_spec(args, prof.name)) as target:
        drv = NvdlaDriver(target, prof)
        log = drv.record(AccessLog(prof.regmap))
        timeout = args.timeout if args.timeout is not None else layer_timeout(target)
        result = run_trace(trace, target, driver=drv, poison=args.poison, timeout=timeout)
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
    if args.log:
        with open(args.log, "w", encoding="utf-8") as fh:
            log.dump(fh)
        print(f"register access log: {args.log} ({len(log.records)} accesses)")
    elif result.status in ("failed", "error"):
        print("last register accesses:")
        print("\n".join("  " + line for line in log.tail(15)))
    if result.status == "skipped":
        print(f"nvdla-hil trace: nothing was checked: {result.message}", file=sys.stderr)
        return 2
    return 0 if result.status == "passed" else 1


# ---- profile ------------------------------------------------------------------------------


def _cmd_profile(args: argparse.Namespace) -> int:
    import yaml

    from ..drivers.profiles import list_profiles, load_profile
    from ..drivers.specdefs import SpecError, profile_from_spec, spec_path

    if args.profile_cmd == "list":
        for name in list_profiles():
            p = load_profile(name)
            feats = ", ".join(f for f, on in p.features.items() if on)
            print(f"{name:20s} {p.generation} atom {p.atom_bytes:2d}  MAC C/K {p.mac_atomic_c}/{p.mac_atomic_k}  "
                  f"CBUF {p.cbuf_banks}x{p.cbuf_bank_width}x{p.cbuf_bank_depth}  {feats}")
        return 0
    if args.profile_cmd == "show":
        p = load_profile(args.name, nvdla_hw=args.nvdla_hw)
        print(yaml.safe_dump({p.name: {k: v for k, v in vars(p).items() if k != "name"}}, sort_keys=False,
                             default_flow_style=None, width=100), end="")
        return 0
    # derive: one profile per configuration of a checkout (or given .spec files)
    out: dict[str, dict] = {}
    try:
        sources = [Path(s) for s in args.specs]
        if args.nvdla_hw:
            configs = args.config or sorted(q.stem for q in (Path(args.nvdla_hw) / "spec" / "defs").glob("*.spec")
                                            if q.stem != "projects")
            sources += [spec_path(args.nvdla_hw, c) for c in configs]
        if not sources:
            print("nvdla-hil profile derive: give --nvdla-hw PATH [--config NAME ...] or .spec files", file=sys.stderr)
            return 2
        for src in sources:
            out[src.stem] = profile_from_spec(src)
    except SpecError as e:
        print(f"nvdla-hil profile derive: {e}", file=sys.stderr)
        return 2
    text = yaml.safe_dump({"format": "nvdla-hil-profiles/1", "profiles": out}, sort_keys=False,
                          default_flow_style=None, width=100)
    if args.out:
        dest = Path(args.out)
        if dest.exists() and not args.force:
            print(f"nvdla-hil profile derive: {dest} exists; pass --force to replace it", file=sys.stderr)
            return 2
        dest.write_text(text, encoding="utf-8")
        print(f"wrote {len(out)} profile(s) to {dest}")
    else:
        print(text, end="")
    if args.compare:
        bad = 0
        for name, d in out.items():
            try:
                shipped = load_profile(name)
            except ValueError:
                print(f"{name}: not shipped (use the .spec path as --nvdla-config)")
                continue
            for k, v in d.items():
                have = getattr(shipped, k) if k != "units" else list(shipped.units)
                if k in ("features", "throughput"):
                    have = dict(have)
                if have != v:
                    bad += 1
                    print(f"{name}.{k}: shipped {have!r}, spec says {v!r}")
        print(f"{bad} difference(s) between the shipped profiles and the spec files")
        return 1 if bad else 0
    return 0


# ---- parser -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nvdla-hil",
        description="Hardware-in-the-loop test harness and register driver for NVDLA accelerators.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("regress", help="run a regression suite on a target and print a summary table",
                       description="Run a named suite (NVDLA traces, packed vectors, or all) through pytest "
                                   "on a target; prints a per-test table with outcome and time, writes JUnit XML.")
    _add_target_options(p)
    p.add_argument("--suite", choices=[*SUITES, "all"], default="all", help="suite to run (default: all)")
    p.add_argument("--traces", help="NVDLA trace folder: one configuration's, or a folder of configuration folders "
                                    "(default: NVDLA_TRACES, else the --nvdla-hw checkout's verif/tests/trace_tests, "
                                    "else ../shared/nvdla/trace_tests/nv_small)")
    p.add_argument("--vectors", help="packed-vector folder (default: the bundled suites)")
    p.add_argument("--junit", default="results/junit.xml", help="JUnit XML output (default results/junit.xml)")
    p.add_argument("--log-dir", help="write each test's register access log here")
    p.add_argument("--poison", action="store_true", help="poison checked output regions before each trace")
    p.add_argument("-k", dest="keyword", help="only tests matching this pytest -k expression")
    p.add_argument("-j", "--jobs", type=int, default=1, help="parallel workers (pytest-xdist)")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    p.set_defaults(func=_cmd_regress)

    p = sub.add_parser("regs", help="read, write, dump, list or check registers by name")
    rs = p.add_subparsers(dest="regs_cmd", metavar="ACTION", required=True)
    for name, hlp in (("read", "read registers (decoded fields)"), ("write", "write a register or fields"),
                      ("dump", "read every register of some blocks"), ("list", "list the register map"),
                      ("info", "show one register's fields"), ("check", "compare the map with an nvdla/hw checkout")):
        q = rs.add_parser(name, help=hlp)
        _add_target_options(q)
        if name == "read":
            q.add_argument("names", nargs="+", help="register names, e.g. SDP.D_CVT_SCALE")
        elif name == "write":
            q.add_argument("name", help="register name")
            q.add_argument("values", nargs="+", help="VALUE, or FIELD=VALUE ... (enum names allowed)")
        elif name in ("dump", "list"):
            q.add_argument("blocks", nargs="*", help="blocks (default: all)")
        elif name == "info":
            q.add_argument("name", help="register name")
    p.set_defaults(func=_cmd_regs)

    p = sub.add_parser("trace", help="run one NVDLA trace test and report each check")
    _add_target_options(p)
    p.add_argument("path", help="trace folder or .cfg file")
    p.add_argument("--poison", action="store_true", help="poison checked output regions first")
    p.add_argument("--log", help="write the full register access log here")
    p.add_argument("--stats", action="store_true", help="print the units' statistics registers afterwards")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for each interrupt (default: 30, or the target's own, e.g. 600 on verilator)")
    p.set_defaults(func=_cmd_trace)

    p = sub.add_parser("profile", help="list, show or derive hardware profiles (from spec/defs/<config>.spec)")
    ps = p.add_subparsers(dest="profile_cmd", metavar="ACTION", required=True)
    ps.add_parser("list", help="the shipped profiles, one line each")
    q = ps.add_parser("show", help="every field of one profile")
    q.add_argument("name", help="profile name or a path to a .spec file")
    q.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"), help="checkout for unshipped configurations")
    q = ps.add_parser("derive", help="derive profiles from an nvdla/hw checkout's spec/defs/*.spec",
                      description="Read spec/defs/<config>.spec of a checkout (every configuration, or those "
                                  "named with --config) or the .spec files given, and print profiles YAML.")
    q.add_argument("specs", nargs="*", help=".spec files")
    q.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"), help="nvdla/hw checkout")
    q.add_argument("--config", action="append", help="configuration name (repeatable; default: all)")
    q.add_argument("--out", help="write the YAML here instead of printing it")
    q.add_argument("--force", action="store_true", help="replace --out if it exists")
    q.add_argument("--compare", action="store_true", help="compare with the shipped profiles; exit 1 on a difference")
    p.set_defaults(func=_cmd_profile)

    _add_optional(sub)
    return parser


def _add_optional(sub: argparse._SubParsersAction) -> None:
    """Subcommands contributed by other parts of the package (vectors, layouts, sims, boards)."""
    import importlib

    for mod in ("nvdla_hil.harness.vectors_cli", "nvdla_hil.harness.layouts.cli", "nvdla_hil.sims.cli",
                "nvdla_hil.harness.board_emu"):
        try:
            m = importlib.import_module(mod)
        except ImportError as e:
            if e.name and mod.startswith(e.name):
                continue  # that part is not installed
            raise
        m.add_subcommands(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (RegisterMapError, ValueError, OSError) as e:
        print(f"nvdla-hil {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
