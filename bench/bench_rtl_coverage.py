"""RTL code coverage: what instrumenting costs, and what steering random layers by it gains.

    python bench/bench_rtl_coverage.py overhead [--traces DIR] [--nvdla-hw HW] [--names a,b,c]
        NVDLA traces on the plain and on the coverage-instrumented (line+toggle) simulator of
        nv_small: simulated cycles per CPU-second of the simulator process on each, and the
        ratio (CPU time: the simulator process's own, so the machine's load does not change it;
        wall beside it, with the load average).

    python bench/bench_rtl_coverage.py fuzz --baseline RUN/rtl-coverage --units pdp,sdp-bsbn,cdp-lrn
                                            [--cycles N] [--seeds 1,2]
        per unit and seed, ``fuzz --steer uniform`` and ``--steer rtl-coverage`` with the same
        budget of simulated cycles from the same seed: the new line+toggle points each adds
        beyond the baseline (e.g. the bundled suites' and NVDLA's traces' run) by the cases that
        ended within the budget (a last case that runs past it does not count), and the ratio;
        every case of both is a full differential case (the model's golden, every element
        compared): disagreements are printed.

    python bench/bench_rtl_coverage.py rank RUN
        the smallest set of a run's tests that keeps its RTL coverage (greedy, as
        ``verilator_coverage --rank``), and its run time beside the whole run's.

Figures, not asserts. The instrumented build is built (or taken from the cache) on first use.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchenv import default, need  # noqa: E402

SHORT = ("cdp_8x8x32_lrn3_int8_0", "dc_6x8x192_3x3x192x32_int8_0", "pdp_8x8x64_2x2_ave_int8_0",
         "sdp_3x3x33_bn_int8_mem_0", "sdp_pdp_32x16x32_pass_through_int8_0")


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _trace_run(trace: Path, build: object) -> tuple[str, int, float, float]:
    """(status, cycles, wall, simulator CPU seconds) of one trace on a fresh simulator (start-up
    excluded; for an instrumented build its coverage is not written: the counting is the cost)."""
    from nvdla_hil.drivers.driver import NvdlaDriver
    from nvdla_hil.harness.targets.verilator import VerilatorTarget
    from nvdla_hil.harness.traces import parse_trace, run_trace

    parsed = parse_trace(trace)
    with VerilatorTarget(build) as t:
        drv = NvdlaDriver(t)
        c0, w0, s0 = t.cycles, time.perf_counter(), t.cpu_seconds() or 0.0
        r = run_trace(parsed, t, driver=drv, timeout=600)
        return r.status, t.cycles - c0, time.perf_counter() - w0, (t.cpu_seconds() or 0.0) - s0


def overhead(args: argparse.Namespace) -> int:
    from nvdla_hil.sims.build import build_nvdla

    hw = need(args.nvdla_hw, "NVDLA_HW", "--nvdla-hw")
    traces = Path(need(args.traces, "NVDLA_TRACES", "--traces"))
    plain = build_nvdla(hw, "nv_small")
    inst = build_nvdla(hw, "nv_small", coverage="line,toggle")
    names = args.names.split(",") if args.names else list(SHORT)
    print(f"nv_small, load {_load()} (1/5/15 min); simulator CPU per simulated cycle, plain vs line+toggle")
    tot = {"plain": [0, 0.0, 0.0], "cov": [0, 0.0, 0.0]}
    for name in names:
        row = []
        for label, b in (("plain", plain), ("cov", inst)):
            status, cycles, wall, cpu = _trace_run(traces / name, b)
            if status != "passed":
                print(f"{name}: {label} {status}")
            tot[label][0] += cycles
            tot[label][1] += cpu
            tot[label][2] += wall
            row.append((cycles, cpu, wall))
        (cp, sp, wp), (cc, sc, wc) = row
        assert cp == cc, f"{name}: the instrumented build ran {cc} cycles, the plain one {cp}"
        print(f"{name:42s} {cp:9d} cycles  plain {cp / sp / 1e3:7.1f}k/CPU-s  coverage {cc / sc / 1e3:7.1f}k/CPU-s  "
              f"x{sc / sp:.2f} CPU, x{wc / wp:.2f} wall")
    (cp, sp, wp), (cc, sc, wc) = tot["plain"], tot["cov"]
    print(f"{'all':42s} {cp:9d} cycles  plain {cp / sp / 1e3:7.1f}k/CPU-s  coverage {cc / sc / 1e3:7.1f}k/CPU-s  "
          f"x{sc / sp:.2f} CPU, x{wc / wp:.2f} wall (load after: {_load()})")
    return 0


def fuzz(args: argparse.Namespace) -> int:
    from nvdla_hil.harness.fuzz.steer import run_steered
    from nvdla_hil.harness.targets import TargetSpec
    from nvdla_hil.harness.targets.rtl_coverage import RtlCoverageFolder

    hw = need(args.nvdla_hw, "NVDLA_HW", "--nvdla-hw")
    spec = TargetSpec(kind="verilator", profile="nv_small", nvdla_hw=hw)
    print(f"budget {args.cycles} simulated cycles per run, baseline {args.baseline}, load {_load()}")
    failed = 0
    for unit in args.units.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            got = {}
            for mode in args.modes.split(","):
                where = Path(tempfile.mkdtemp(prefix=f"nvdla-steer-{unit}-{mode}-"))
                folder = RtlCoverageFolder(where / "tests", ["line", "toggle"])
                folder.current_test = "<after the last case>"
                c0 = time.process_time()
                rep = run_steered(unit, spec, folder, mode=mode, seed=seed, budget_cycles=args.cycles,
                                  profile=args.profile, baseline=args.baseline)
                got[mode] = rep
                failed += len(rep.failed)
                print(f"  {rep.line()} [harness CPU {time.process_time() - c0:.0f} s]", flush=True)
                for c in rep.failed:
                    print(f"    {c.case.status}: {c.case.line} {' '.join('--set ' + s for s in c.sets)}")
            if len(got) < 2:
                continue
            u, d = got["uniform"].new_within_budget, got["rtl-coverage"].new_within_budget
            ratio = f"x{d / u:.2f}" if u else ("x inf" if d else "x -")
            print(f"{unit} seed {seed}: uniform {u} new points within the budget, steered {d}: {ratio}", flush=True)
    return 1 if failed else 0


def rank(args: argparse.Namespace) -> int:
    from nvdla_hil.harness.analysis import rtl_coverage as rc

    run = Path(args.run)
    summary = rc.load_summary((run / "rtl-coverage" if (run / "rtl-coverage").is_dir() else run) / "summary.json")
    for name, one in summary["configs"].items():
        r = one["rank"]
        print(f"{name}: {len(r['tests'])} of {one['tests']} tests keep every point ({rc.total_line(one)}); "
              f"they took {r['seconds']:.0f} s of the run's {r['seconds_all']:.0f} s of test time")
        c = one.get("rank_code")
        if c:
            print(f"  lines and branches only: {len(c['tests'])} tests keep them, {c['seconds']:.0f} s")
        for t, g in zip(r["tests"], r["gained"], strict=True):
            print(f"  +{g:7d}  {t}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--nvdla-hw", default=default("NVDLA_HW"))
    o.add_argument("--traces", default=default("NVDLA_TRACES"))
    o.add_argument("--names", help="comma-separated trace names (default: five short ones, one per unit)")
    o.set_defaults(func=overhead)
    f = sub.add_parser("fuzz")
    f.add_argument("--nvdla-hw", default=default("NVDLA_HW"))
    f.add_argument("--baseline", help="a run's rtl-coverage/ folder (the bundled suites' run) whose hits are not new")
    f.add_argument("--units", default="pdp,sdp-bsbn,cdp-lrn")
    f.add_argument("--profile", default="nv_small")
    f.add_argument("--cycles", type=int, default=2_000_000)
    f.add_argument("--seeds", default="1")
    f.add_argument("--modes", default="uniform,rtl-coverage", help="which runs (default both)")
    f.set_defaults(func=fuzz)
    r = sub.add_parser("rank")
    r.add_argument("run", help="a run folder with rtl-coverage/summary.json")
    r.set_defaults(func=rank)
    args = ap.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
