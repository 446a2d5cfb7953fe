"""A regression through a local Dask cluster (scheduler + N worker processes) vs the same run locally.

Runs ``nvdla-hil regress`` twice, as a user would: once in one process, once with ``--cluster``
pointing at a ``distributed.LocalCluster(n_workers=N, threads_per_worker=1)`` on 127.0.0.1; prints
per run the wall time, the pass/fail/skip counts and the per-test cost (wall time / tests), whether
both runs had the same test set and outcomes (from their JUnit), the time the tests themselves took
(JUnit ``time``, summed) and what the cluster adds per test (worker-seconds not spent in a test), and,
on paper, what a farm of ``--farm`` cores would take for the suite and for ``--farm-tests`` tests at
the measured per-test cost: ``max(longest test, tests * (mean test + cluster overhead) / cores)``
plus the session's fixed cost (collection, start-up, report: the local wall time minus its tests).

    python bench/bench_cluster.py --target model --suite vectors [-k EXPR]
    python bench/bench_cluster.py --target verilator --nvdla-hw /work/nvdla-hw --profile nv_small \\
        --traces /work/shared/nvdla/trace_tests/nv_small --suite traces

Figures only: nothing here asserts a time (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]


def junit_outcomes(path: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return out


def junit_times(path: Path) -> list[float]:
    """Seconds of every test that ran (not skipped), from the JUnit ``time`` attributes."""
    return [float(c.get("time") or 0) for c in ET.parse(path).getroot().iter("testcase")
            if not any(k.tag == "skipped" for k in c)]


def regress(args: argparse.Namespace, results: Path, extra: list[str]) -> tuple[float, dict[str, str]]:
    cmd = [*CLI, "regress", "--target", args.target, "--suite", args.suite, "--results-dir", str(results), *extra]
    for flag, val in (("--nvdla-hw", args.nvdla_hw), ("--profile", args.profile), ("--traces", args.traces), ("-k", args.k)):
        if val:
            cmd += [flag, val]
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0, results / "latest" / "junit.xml"


def line(name: str, wall: float, res: dict[str, str]) -> str:
    counts = {k: sum(1 for v in res.values() if v == k) for k in ("passed", "failure", "error", "skipped")}
    ran = max(1, counts["passed"] + counts["failure"] + counts["error"])
    return (f"{name:<22} wall {wall:8.2f} s  tests {len(res):4d}  " + "  ".join(f"{k} {v}" for k, v in counts.items())
            + f"  per test {wall / ran:6.3f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="model")
    ap.add_argument("--suite", default="vectors")
    ap.add_argument("--nvdla-hw")
    ap.add_argument("--profile")
    ap.add_argument("--traces")
    ap.add_argument("-k")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--farm", type=int, default=200, help="cores of the farm on paper")
    ap.add_argument("--farm-tests", type=int, default=10000, help="suite size on paper")
    args = ap.parse_args()
    from distributed import LocalCluster

    load0 = os.getloadavg()[0]  # the machine may be shared: the figures are read with the load
    with tempfile.TemporaryDirectory(prefix="bench_cluster_") as tmp:
        if args.target == "verilator":  # build (or check the cached build) before timing
            regress(args, Path(tmp) / "warmup", ["-k", "nothing_matches_this", "--allow-empty"])
        local_wall, local_junit = regress(args, Path(tmp) / "local", [])
        t0 = time.perf_counter()
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=":0") as cluster:
            start = time.perf_counter() - t0
            cl_wall, cl_junit = regress(args, Path(tmp) / "cluster", ["--cluster", cluster.scheduler_address])
        local, remote = junit_outcomes(local_junit), junit_outcomes(cl_junit)
        local_t, cl_t = junit_times(local_junit), junit_times(cl_junit)
    print(f"{args.target} / {args.suite}{' -k ' + args.k if args.k else ''}; cluster: LocalCluster "
          f"{args.workers} worker processes x 1 thread (start-up {start:.2f} s, not counted); "
          f"{os.cpu_count()} cores, load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(line("local (1 process)", local_wall, local))
    print(line(f"dask ({args.workers} workers)", cl_wall, remote))
    print(f"same tests and outcomes: {local == remote}  (speed-up {local_wall / cl_wall:.2f}x)")
    ran = max(1, len(cl_t))
    fixed = max(0.0, local_wall - sum(local_t))  # collection, start-up, report: paid once per session
    overhead = max(0.0, (cl_wall - fixed) * args.workers - sum(cl_t)) / ran  # worker-seconds per test outside the test
    mean, longest = sum(cl_t) / ran, max(cl_t, default=0.0)
    print(f"tests' own time: local {sum(local_t):.2f} s, cluster {sum(cl_t):.2f} s (mean {mean:.3f} s, longest "
          f"{longest:.2f} s); session fixed cost {fixed:.2f} s; cluster overhead {overhead:.3f} s per test")
    for n in (ran, args.farm_tests):
        tests = n * (mean + overhead) / args.farm
        print(f"{args.farm}-core farm, {n} tests at {mean + overhead:.3f} s/test/core: "
              f"~{fixed + max(longest, tests):.1f} s (tests {tests:.1f} s, longest test {longest:.1f} s, fixed {fixed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
