"""Simulated NVDLA cycles per wall-clock second on the Verilator target.

Runs NVDLA trace tests on ``VerilatorTarget`` (one fresh simulator per trace) and prints,
per trace, the result, simulated core cycles, wall time of the trace (start-up and reset
excluded) and cycles/s; then the same for an idle free-running clock (the model's ceiling
with no Python in the loop).

With ``--native PATH`` (NVDLA's own C++ Verilator trace player ``VNV_nvdla`` that the user
built from their nvdla/hw tree) the same traces also run on that player in the same
invocation, and the ratio is printed. The player reads ``trace.bin``; it is taken from
``--native-tests DIR/<trace>/trace.bin`` when present, else produced from the ``.cfg`` with
the user's own nvdla/hw conversion scripts (``verif/tools/nvdla_trace_parser.py`` and
``verif/verilator/new_trace_to_verilator.py``, run from ``--nvdla-hw``).

    python bench/bench_sim.py --nvdla-hw ~/nvdla-hw --traces ~/traces/nv_small \\
        [-k sdp_ -k pdp_] [--native ~/nvdla-hw/outdir/nv_small/verilator/VNV_nvdla]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_SET = (
    "sdp_8x8x32_bypass_int8_0",
    "sdp_3x3x33_bn_int8_reg_0",
    "cdp_8x8x64_lrn3_int8_0",
    "pdp_8x8x64_2x2_ave_int8_0",
    "dc_6x8x192_3x3x192x32_int8_0",
    "dc_24x44x14_5x3x14x41_int8_0",
)


def _run_ours(trace: Path, build, timeout: float) -> tuple[str, int, float, str]:
    from nvdla_hil.harness.targets.verilator import VerilatorTarget
    from nvdla_hil.harness.traces import run_trace

    with VerilatorTarget(build) as t:
        c0, w0 = t.cycles, time.perf_counter()
        r = run_trace(trace, t, timeout=timeout)
        return r.status, t.cycles - c0, time.perf_counter() - w0, r.message


def _idle_rate(build, cycles: int) -> float:
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(build) as t:
        w0 = time.perf_counter()
        t.run_cycles(cycles)
        return cycles / (time.perf_counter() - w0)


def _native_trace_bin(trace: Path, args: argparse.Namespace, work: Path) -> Path:
    if args.native_tests:
        p = Path(args.native_tests) / trace.name / "trace.bin"
        if p.is_file():
            return p
    if not args.nvdla_hw:
        raise SystemExit(f"no trace.bin for {trace.name}: pass --native-tests DIR or --nvdla-hw PATH")
    hw = Path(args.nvdla_hw).resolve()
    out = work / trace.name
    out.mkdir(parents=True, exist_ok=True)
    cfg = next(trace.glob("*.cfg"))
    subprocess.run([sys.executable, str(hw / "verif/tools/nvdla_trace_parser.py"), "--file_path", str(cfg)],
                   cwd=out, check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(hw / "outdir" / args.config / "spec" / "manual"))
    subprocess.run([sys.executable, str(hw / "verif/verilator/new_trace_to_verilator.py"), str(out), str(out / "trace.bin")],
                   cwd=out, check=True, capture_output=True, env=env)
    return out / "trace.bin"


def _run_native(exe: Path, trace_bin: Path) -> tuple[str, int, float]:
    w0 = time.perf_counter()
    p = subprocess.run([str(exe), str(trace_bin)], cwd=trace_bin.parent, capture_output=True, text=True)
    wall = time.perf_counter() - w0
    m = re.search(r"done at (\d+) ticks", p.stdout)
    status = "passed" if "*** PASS" in p.stdout else "failed"
    return status, (int(m.group(1)) // 2 if m else 0), wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"))
    ap.add_argument("--config", default="nv_small")
    ap.add_argument("--traces", default=os.environ.get("NVDLA_TRACES"), help="folder of trace folders")
    ap.add_argument("-k", action="append", default=[], help="run traces whose name contains this (repeatable)")
    ap.add_argument("--all", action="store_true", help="every trace in --traces")
    ap.add_argument("--native", help="NVDLA's native Verilator player (VNV_nvdla) to compare with")
    ap.add_argument("--native-tests", help="folder with <trace>/trace.bin for the native player")
    ap.add_argument("--idle-cycles", type=int, default=200_000)
    ap.add_argument("--timeout", type=float, default=600.0, help="per-layer wall timeout (s)")
    args = ap.parse_args(argv)
    if not args.traces:
        ap.error("--traces (or NVDLA_TRACES) is required")

    from nvdla_hil.sims.build import build_nvdla

    build = build_nvdla(args.nvdla_hw, args.config)
    root = Path(args.traces)
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    if args.k:
        names = [n for n in names if any(k in n for k in args.k)]
    elif not args.all:
        names = [n for n in DEFAULT_SET if n in names]
    work = Path(tempfile.mkdtemp(prefix="bench-native-"))
    print(f"# {build.verilator}; build {build.directory}")
    hdr = f"{'trace':40s} {'result':8s} {'cycles':>9s} {'wall s':>7s} {'cyc/s':>8s}"
    if args.native:
        hdr += f" | {'native':8s} {'cycles':>9s} {'wall s':>7s} {'cyc/s':>8s} {'ratio':>6s}"
    print(hdr)
    tot = [0, 0.0, 0, 0.0]
    passed = 0
    for n in names:
        status, cyc, wall, msg = _run_ours(root / n, build, args.timeout)
        passed += status == "passed"
        tot[0] += cyc
        tot[1] += wall
        line = f"{n:40s} {status:8s} {cyc:9d} {wall:7.2f} {cyc / max(wall, 1e-9):8.0f}"
        if args.native:
            ns, ncyc, nwall = _run_native(Path(args.native), _native_trace_bin(root / n, args, work))
            tot[2] += ncyc
            tot[3] += nwall
            ratio = (ncyc / nwall) / (cyc / wall) if cyc and wall and nwall else float("nan")
            line += f" | {ns:8s} {ncyc:9d} {nwall:7.2f} {ncyc / max(nwall, 1e-9):8.0f} {ratio:6.2f}"
        print(line + (f"  {msg}" if status != "passed" and msg else ""), flush=True)
    rate = tot[0] / tot[1] if tot[1] else 0.0
    print(f"# {passed}/{len(names)} passed; total {tot[0]} cycles in {tot[1]:.2f} s = {rate:.0f} cycles/s")
    if args.native and tot[3]:
        nrate = tot[2] / tot[3]
        print(f"# native player: {tot[2]} cycles in {tot[3]:.2f} s = {nrate:.0f} cycles/s "
              f"(includes its 8192-cycle reset and file load); native/ours = {nrate / rate:.2f}x")
    if args.idle_cycles:
        print(f"# idle free-running clock: {_idle_rate(build, args.idle_cycles):.0f} cycles/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
