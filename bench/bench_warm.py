"""Warm vs fresh Verilator simulators: the whole trace suite of a configuration through pytest.

Runs ``pytest --pyargs nvdla_hil.harness.suites.test_traces --nvdla-target verilator`` once per
(xdist workers, mode), fresh and warm back to back for each worker count, and prints per run:
wall time, CPU time (this process's children: pytest, its xdist workers and every simulator),
the pass/fail/skip counts, the mean and median test time from the run's JUnit XML, and at the
end the speed-up, whether every test had the same outcome in both modes, and the per-test cost
that remains (warm wall time per test, and how much of it is the reset between tests).

    python bench/bench_warm.py --nvdla-hw ~/nvdla-hw --traces ~/nvdla-hw/verif/tests/trace_tests/nv_small \\
        [--workers 1,2] [--modes fresh,warm] [-k EXPR] [--repeat N]

``fresh`` is ``--nvdla-fresh-sims`` (a new simulator process per test: start-up and NVDLA's
8192-cycle reset each time); ``warm`` is the default (one simulator per build and worker, reset
and memory cleared between tests, :class:`~nvdla_hil.harness.targets.verilator.WarmSimulators`).
The traces default to ``$NVDLA_TRACES``. The simulator comes from the shared build cache (the
build of ``nvdla-hil sim build``); it is built or checked once before the timed runs. Figures
only: nothing here asserts a time (the machine may be shared; compare CPU time then).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchenv.py beside this script
import benchenv  # noqa: E402


@dataclass
class Run:
    mode: str
    workers: int
    wall: float
    cpu: float
    rc: int
    outcomes: dict[str, str] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    @property
    def ran(self) -> int:
        return self.count("passed") + self.count("failed") + self.count("error")


def _junit(path: Path) -> tuple[dict[str, str], dict[str, float]]:
    outcomes: dict[str, str] = {}
    times: dict[str, float] = {}
    if not path.is_file():
        return outcomes, times
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = tc.get("name", "")
        kids = {c.tag for c in tc}
        outcome = "failed" if "failure" in kids else "error" if "error" in kids else \
            "skipped" if "skipped" in kids else "passed"
        outcomes[name] = outcome
        times[name] = float(tc.get("time", 0.0))
    return outcomes, times


def _run(args: argparse.Namespace, mode: str, workers: int, work: Path) -> Run:
    xml = work / f"{mode}-{workers}.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "nvdla_hil.harness.plugin.warm",
           "--pyargs", "nvdla_hil.harness.suites.test_traces", "--nvdla-target", "verilator",
           "--nvdla-hw", args.nvdla_hw, "--nvdla-config", args.config, "--nvdla-traces", args.traces,
           "--nvdla-failure-waves", "off", "-q", f"--junitxml={xml}", "-o", "junit_family=xunit1"]
    if workers > 0:
        cmd += ["-n", str(workers)]
    if mode == "fresh":
        cmd.append("--nvdla-fresh-sims")
    if args.k:
        cmd += ["-k", args.k]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(work / f"{mode}-{workers}.log", "wb") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False, cwd=work).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    outcomes, times = _junit(xml)
    return Run(mode, workers, wall, cpu, rc, outcomes, times)


def _mean(r: Run) -> float:
    ts = [t for n, t in r.times.items() if r.outcomes.get(n) in ("passed", "failed")]
    return statistics.fmean(ts) if ts else 0.0


def _row(r: Run) -> str:
    ts = [t for n, t in r.times.items() if r.outcomes.get(n) in ("passed", "failed")]
    mean = statistics.fmean(ts) if ts else 0.0
    med = statistics.median(ts) if ts else 0.0
    return (f"{r.mode:6s} {r.workers:>7d} {r.wall:8.1f} {r.cpu:8.1f} {r.count('passed'):>6d} {r.count('failed'):>6d} "
            f"{r.count('error'):>5d} {r.count('skipped'):>7d} {mean:8.2f} {med:8.2f}   rc={r.rc}")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvdla-hw", default=benchenv.default("NVDLA_HW"), help="nvdla/hw checkout (NVDLA_HW, else ../shared/nvdla_src/hw)")
    ap.add_argument("--config", default="nv_small")
    ap.add_argument("--traces", default=benchenv.default("NVDLA_TRACES"),
                    help="the configuration's trace folder (NVDLA_TRACES, else ../shared/nvdla/trace_tests/nv_small)")
    ap.add_argument("--workers", default="1,2", help="xdist worker counts, comma-separated (0: no xdist)")
    ap.add_argument("--modes", default="fresh,warm", help="fresh, warm or both, in this order per worker count")
    ap.add_argument("-k", default=None, help="pytest -k expression (default: every trace)")
    ap.add_argument("--repeat", type=int, default=1, help="repeat the whole measurement")
    ap.add_argument("--keep", default=None, help="keep the logs and JUnit files here (default: a temp dir)")
    ap.add_argument("--native", default=None,
                    help="also run NVDLA's native player (a path, or 'auto': `nvdla-hil sim native`) on the traces "
                         "the last run passed, one process after the other, and compare the suite's time")
    return ap


def _native_suite(args: argparse.Namespace, passed: list[str], work: Path) -> tuple[float, float, int]:
    """NVDLA's player over ``passed`` traces, serially: (wall s, CPU s, traces it passed).
    Trace encoding and the player's run come from ``bench_sim.py`` beside this script."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_sim", Path(__file__).with_name("bench_sim.py"))
    assert spec is not None and spec.loader is not None
    bench_sim = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench_sim  # its dataclasses look their module up by name
    spec.loader.exec_module(bench_sim)
    exe = args.native
    if exe == "auto":
        from nvdla_hil.sims.native import build_native

        exe = str(build_native(args.nvdla_hw, args.config))
    bins = {n: bench_sim.encode_native_trace(Path(args.traces) / n, args.config, work / "native" / n) for n in passed}
    wall = cpu = 0.0
    ok = 0
    for n in passed:  # encoding is outside the timing, as the player's own flow converts beforehand
        r = bench_sim.run_native(Path(exe), bins[n])
        wall, cpu, ok = wall + r.wall, cpu + r.cpu, ok + (r.status == "passed")
    return wall, cpu, ok


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    args.nvdla_hw = benchenv.need(args.nvdla_hw, "NVDLA_HW", "--nvdla-hw")
    args.traces = benchenv.need(args.traces, "NVDLA_TRACES", "--traces")
    args.traces = str(Path(args.traces).resolve())
    args.nvdla_hw = str(Path(args.nvdla_hw).resolve())
    from nvdla_hil.harness.targets.verilator import WarmSimulators
    from nvdla_hil.sims.build import build_nvdla

    build = build_nvdla(args.nvdla_hw, args.config)  # built or checked once, outside the timed runs
    # one start and one reset of this build, measured alone
    from nvdla_hil.harness.targets import TargetSpec

    spec = TargetSpec(kind="verilator", profile=args.config, nvdla_hw=args.nvdla_hw)
    with WarmSimulators() as pool:
        with pool.open(spec):
            pass
        with pool.open(spec):
            pass
        start_s, reset_s = pool.stats.start_seconds, pool.stats.reset_seconds
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-warm-"))
    work.mkdir(parents=True, exist_ok=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# {time.strftime('%Y-%m-%d %H:%M %Z')}; {platform.node()}: {os.cpu_count()} cores, load {load}")
    print(f"# {build.verilator}; build {build.directory}; traces {args.traces}" + (f" -k {args.k!r}" if args.k else ""))
    print(f"# one simulator start (process, cocotb, reset): {start_s:.2f} s; one warm reset (memory clear + "
          f"{build.reset_wait_cycles}-cycle reset): {reset_s * 1e3:.0f} ms")
    print(f"# logs and JUnit: {work}")
    print(f"{'mode':6s} {'workers':>7s} {'wall s':>8s} {'cpu s':>8s} {'passed':>6s} {'failed':>6s} {'error':>5s} "
          f"{'skipped':>7s} {'mean s':>8s} {'median s':>8s}")
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    same = True
    for rep in range(args.repeat):
        for n in workers:
            runs = {m: _run(args, m, n, work) for m in modes}
            for r in runs.values():
                print(_row(r), flush=True)
            if "fresh" in runs and "warm" in runs:
                f, w = runs["fresh"], runs["warm"]
                diff = sorted(k for k in set(f.outcomes) | set(w.outcomes) if f.outcomes.get(k) != w.outcomes.get(k))
                same &= not diff and bool(f.outcomes)
                per = w.wall / max(1, w.ran) * max(1, n)
                print(f"  -> {n} worker(s), run {rep + 1}: warm {f.wall / w.wall:.2f}x faster in wall time, "
                      f"{f.cpu / w.cpu:.2f}x less CPU; outcomes "
                      + ("identical for all " + str(len(f.outcomes)) + " tests" if not diff else
                         f"DIFFER for {len(diff)}: {', '.join(diff[:8])}"))
                print(f"     per test that ran: mean {_mean(w):.2f} s warm vs {_mean(f):.2f} s fresh "
                      f"(saved {_mean(f) - _mean(w):.2f} s; a warm reset is ~{reset_s:.2f} s of it); "
                      f"worker time per test, session start-up included: {per:.2f} s warm, "
                      f"{f.wall / max(1, f.ran) * max(1, n):.2f} s fresh")
    if args.native:
        last = runs[modes[-1]]
        passed = sorted(k.rsplit("[", 1)[-1].rstrip("]") for k, v in last.outcomes.items() if v == "passed")
        nwall, ncpu, nok = _native_suite(args, passed, work)
        print(f"# NVDLA's native player, the {len(passed)} traces the {last.mode} run passed, one process after "
              f"the other: {nwall:.1f} s wall, {ncpu:.1f} s CPU, {nok} passed; against the {last.mode} run: "
              f"{nwall / last.wall:.2f}x the wall time, {ncpu / last.cpu:.2f}x the CPU")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
