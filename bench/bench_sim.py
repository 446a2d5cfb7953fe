"""Simulated NVDLA cycles per wall-clock second on the Verilator target.

Runs NVDLA trace tests on ``VerilatorTarget`` (one fresh simulator per trace) and prints,
per trace, the result, simulated core cycles, wall time of the trace (start-up and reset
excluded) and cycles/s; then the same for an idle free-running clock (the model's ceiling
with no Python in the loop).

With ``--native PATH`` (NVDLA's own C++ Verilator trace player ``VNV_nvdla`` that the user
built from their nvdla/hw tree) the same traces also run on that player in the same
invocation, and the ratio is printed. The player reads ``trace.bin``; it is taken from
``--native-tests DIR/<trace>/trace.bin`` when present, else encoded here from the ``.cfg``
(NVDLA's own converter rejects the ``pri_mem`` memory names these traces use).

    python bench/bench_sim.py --nvdla-hw ~/nvdla-hw --traces ~/nvdla-hw/verif/tests/trace_tests/nv_small \\
        [-k sdp_ -k pdp_] [--native auto | --native PATH]

``--native auto`` builds (or reuses) the player with ``nvdla-hil sim native`` (NVDLA's
``verif/verilator/nvdla.cpp`` compiled from the same RTL, flags and compiler as our simulator).
``--fixture`` measures only the idle clock of the project's CSB fixture (no checkout needed).
The simulator comes from the shared build cache: the same build as ``nvdla-hil sim build``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchenv.py beside this script
import benchenv  # noqa: E402

DEFAULT_SET = (
    "sdp_8x8x32_bypass_int8_0",
    "sdp_3x3x33_bn_int8_reg_0",
    "cdp_8x8x64_lrn3_int8_0",
    "pdp_8x8x64_2x2_ave_int8_0",
    "dc_6x8x192_3x3x192x32_int8_0",
    "dc_24x44x14_5x3x14x41_int8_0",
)
#: the three public nv_small traces with the most simulated cycles (NVDLA's native player:
#: 1.20 M, 324 k and 305 k cycles), the set issue 29 measures per-cycle speed on
LONGEST_NV_SMALL = (
    "dc_35x22x54_6x8x54x29_int8_0",
    "dc_32x26x76_6x3x76x16_int8_0",
    "dc_8192x1x1_2x3x1x41_int8_0",
)


@dataclass
class Run:
    """One trace on one simulator: result, simulated cycles, wall and CPU seconds."""

    status: str
    cycles: int
    wall: float
    cpu: float
    message: str = ""


def _run_ours(trace: Path, build, timeout: float) -> Run:
    """The trace on a fresh ``VerilatorTarget``; wall and CPU from the first request of the
    trace to its last check (start-up and NVDLA's reset excluded). CPU = the simulator
    process's (``/proc``) plus this process's own (the player, the memory set-up, the checks)."""
    from nvdla_hil.drivers.driver import NvdlaDriver
    from nvdla_hil.harness.targets.verilator import VerilatorTarget
    from nvdla_hil.harness.traces import TraceError, parse_trace, run_trace

    try:
        parsed = parse_trace(trace)
        with VerilatorTarget(build) as t:
            drv = NvdlaDriver(t)  # register map loading is not simulation time
            c0, w0, p0, s0 = t.cycles, time.perf_counter(), time.process_time(), t.cpu_seconds() or 0.0
            r = run_trace(parsed, t, driver=drv, timeout=timeout)
            wall, own = time.perf_counter() - w0, time.process_time() - p0
            sim = (t.cpu_seconds() or 0.0) - s0
            return Run(r.status, t.cycles - c0, wall, own + sim, r.message)
    except TraceError as e:  # e.g. a data file the public repository lacks
        return Run("bad", 0, 0.0, 0.0, str(e))


def _idle_rate(build, cycles: int) -> float:
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(build) as t:
        w0 = time.perf_counter()
        t.run_cycles(cycles)
        return cycles / (time.perf_counter() - w0)


def encode_native_trace(trace_dir: Path, config: str, out: Path) -> Path:
    """Write the trace as the binary command stream NVDLA's native player reads.

    Format (facts from nvdla/hw verif/verilator): little-endian records
    ``5 addr len bytes`` load memory, ``6 id mask`` sync point = GLB status mask,
    ``8 id base size crc`` / ``9 id`` checks, ``2 word data`` register write,
    ``3 word mask data`` poll register, ``7 status_word mask_word`` GLB interrupt
    registers, ``0xFF`` end. Encoded here from our own trace parser and register map
    (NVDLA's converter script only accepts the older numeric memory names).
    """
    import struct

    import numpy as np
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.traces import load_dat, parse_trace

    tr = parse_trace(next(trace_dir.glob("*.cfg")))
    rm = load_profile(config).regmap
    status = rm.register("GLB", "S_INTR_STATUS")
    mask = rm.register("GLB", "S_INTR_MASK")
    buf = bytearray()
    for c in tr.of_kind("mem_init", "mem_load"):
        if c.kind == "mem_init":
            _port, addr, size, pattern = c.args
            data = np.full(size, 0 if pattern == "ALL_ZERO" else 0xFF, dtype=np.uint8).tobytes()
        else:
            _port, addr, rel = c.args
            data = load_dat(tr.folder / rel).tobytes()
        buf += struct.pack("<BII", 5, addr, len(data)) + data
    syncs: dict[str, int] = {}
    for c in tr.of_kind("intr_notify"):
        unit, group, sync = c.args
        syncs[sync] = len(syncs)
        buf += struct.pack("<BII", 6, syncs[sync], status.field(f"{unit}_DONE_STATUS{group}").mask)
    for c in tr.of_kind("check_crc", "check_nothing"):
        if c.kind == "check_crc":
            sync, _port, addr, size, crc = c.args
            buf += struct.pack("<BIIII", 8, syncs[sync], addr, size, crc)
        else:
            buf += struct.pack("<BI", 9, syncs[c.args[0]])
    for c in tr.of_kind("reg_write", "poll_reg_equal"):
        reg = rm.register(c.args[0])
        if c.kind == "reg_write":
            buf += struct.pack("<BII", 2, reg.address >> 2, c.args[1])
        else:
            buf += struct.pack("<BIII", 3, reg.address >> 2, 0xFFFFFFFF, c.args[1])
    if syncs:
        buf += struct.pack("<BII", 7, status.address >> 2, mask.address >> 2)
    buf += b"\xff"
    out.mkdir(parents=True, exist_ok=True)
    (out / "trace.bin").write_bytes(bytes(buf))
    return out / "trace.bin"


def _native_trace_bin(trace: Path, args: argparse.Namespace, work: Path) -> Path:
    if args.native_tests:
        p = Path(args.native_tests) / trace.name / "trace.bin"
        if p.is_file():
            return p
    return encode_native_trace(trace, args.config, work / trace.name)


def run_native(exe: Path, trace_bin: Path) -> Run:
    """NVDLA's player on ``trace.bin``: its own count of cycles (reset included), wall and CPU
    (``getrusage`` of the finished child) of the whole process."""
    w0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([str(exe), str(trace_bin)], cwd=trace_bin.parent, capture_output=True, text=True,
                       check=False)
    wall = time.perf_counter() - w0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    m = re.search(r"done at (\d+) ticks", p.stdout)
    status = "passed" if "*** PASS" in p.stdout else "failed"
    return Run(status, (int(m.group(1)) // 2 if m else 0), wall, cpu)


def _best(runs: list[Run]) -> Run:
    """The fastest of repeated runs (a loaded machine only ever adds time); wall and CPU each
    their own minimum; any run that did not pass makes the result that run's."""
    bad = [r for r in runs if r.status != "passed"]
    if bad:
        return bad[0]
    return Run("passed", runs[0].cycles, min(r.wall for r in runs), min(r.cpu for r in runs))


def _rate(cycles: int, seconds: float) -> float:
    return cycles / seconds if seconds > 0 else 0.0


def _ratio(native: Run, ours: Run, what: str) -> float:
    """How many times faster per simulated cycle the native player was (below 1: ours was)."""
    n, o = _rate(native.cycles, getattr(native, what)), _rate(ours.cycles, getattr(ours, what))
    return n / o if o else float("nan")


def _add(total: Run, r: Run) -> None:
    total.cycles += r.cycles
    total.wall += r.wall
    total.cpu += r.cpu


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvdla-hw", default=benchenv.default("NVDLA_HW"), help="nvdla/hw checkout ($NVDLA_HW, else ../shared/nvdla_src/hw)")
    ap.add_argument("--config", default="nv_small")
    ap.add_argument("--traces", default=benchenv.default("NVDLA_TRACES"),
                    help="folder of trace folders ($NVDLA_TRACES, else ../shared/nvdla/trace_tests/nv_small)")
    ap.add_argument("-k", action="append", default=[], help="run traces whose name contains this (repeatable)")
    ap.add_argument("--all", action="store_true", help="every trace in --traces")
    ap.add_argument("--longest", action="store_true",
                    help="the three public nv_small traces with the most cycles (LONGEST_NV_SMALL)")
    ap.add_argument("--native", help="NVDLA's native Verilator player (VNV_nvdla) to compare with, or "
                    "'auto' to build/reuse it with `nvdla-hil sim native`")
    ap.add_argument("--fixture", action="store_true",
                    help="only the idle clock rate of the project's CSB fixture (no checkout needed)")
    ap.add_argument("--native-tests", help="folder with <trace>/trace.bin for the native player")
    ap.add_argument("--idle-cycles", type=int, default=200_000)
    ap.add_argument("--timeout", type=float, default=600.0, help="per-layer wall timeout (s)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each trace this many times on each simulator, alternating, and keep the "
                         "fastest wall and CPU time of each (default 1)")
    ap.add_argument("--threads", type=int, default=1,
                    help="Verilator model threads for both simulators (as `sim build --threads`)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    from nvdla_hil.sims.build import build_fixture, build_nvdla

    if args.fixture:
        build = build_fixture()
        print(f"# {build.verilator}; build {build.directory}")
        print(f"# idle free-running clock (fixture): {_idle_rate(build, args.idle_cycles):.0f} cycles/s")
        return 0
    args.traces = benchenv.need(args.traces, "NVDLA_TRACES", "--traces")
    args.nvdla_hw = benchenv.need(args.nvdla_hw, "NVDLA_HW", "--nvdla-hw")

    build = build_nvdla(args.nvdla_hw, args.config, threads=args.threads)
    if args.native == "auto":
        from nvdla_hil.sims.native import build_native

        args.native = str(build_native(args.nvdla_hw, args.config, threads=args.threads))
    root = Path(args.traces)
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    if args.longest:
        names = [n for n in LONGEST_NV_SMALL if n in names]
    elif args.k:
        names = [n for n in names if any(k in n for k in args.k)]
    elif not args.all:
        names = [n for n in DEFAULT_SET if n in names]
    work = Path(tempfile.mkdtemp(prefix="bench-native-"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# {time.strftime('%Y-%m-%d %H:%M %Z')}; {platform.node()}: {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}, load {load}")
    print(f"# {build.verilator}; build {build.directory}; model threads {args.threads}")
    if args.native:
        print(f"# native player: {args.native}")
    hdr = f"{'trace':40s} {'result':8s} {'cycles':>9s} {'wall s':>7s} {'cyc/s':>8s} {'cyc/cpu-s':>9s}"
    if args.native:
        hdr += f" | {'native':8s} {'cycles':>9s} {'wall s':>7s} {'cyc/s':>8s} {'cyc/cpu-s':>9s} {'wall':>5s} {'cpu':>5s}"
    print(hdr + ("" if not args.native else "   (ratios: native speed / ours)"))
    ours_tot, nat_tot, both = Run("", 0, 0.0, 0.0), Run("", 0, 0.0, 0.0), Run("", 0, 0.0, 0.0)
    passed = 0
    for n in names:
        ours_runs, nat_runs = [], []
        for _ in range(max(1, args.repeat)):
            ours_runs.append(_run_ours(root / n, build, args.timeout))
            if args.native and ours_runs[-1].status == "passed":
                nat_runs.append(run_native(Path(args.native), _native_trace_bin(root / n, args, work)))
        o = _best(ours_runs)
        passed += o.status == "passed"
        _add(ours_tot, o)
        line = f"{n:40s} {o.status:8s} {o.cycles:9d} {o.wall:7.2f} {_rate(o.cycles, o.wall):8.0f} {_rate(o.cycles, o.cpu):9.0f}"
        if args.native and o.status != "passed":
            line += " | (not run natively: failed here)"
        elif args.native:
            nr = _best(nat_runs)
            _add(nat_tot, nr)
            _add(both, o)
            line += (f" | {nr.status:8s} {nr.cycles:9d} {nr.wall:7.2f} {_rate(nr.cycles, nr.wall):8.0f} "
                     f"{_rate(nr.cycles, nr.cpu):9.0f} {_ratio(nr, o, 'wall'):5.2f} {_ratio(nr, o, 'cpu'):5.2f}")
        print(line + (f"  {o.message}" if o.status != "passed" and o.message else ""), flush=True)
    print(f"# {passed}/{len(names)} passed; total {ours_tot.cycles} cycles in {ours_tot.wall:.2f} s = "
          f"{_rate(ours_tot.cycles, ours_tot.wall):.0f} cycles/s, {_rate(ours_tot.cycles, ours_tot.cpu):.0f} per CPU-second"
          + (f" (fastest of {args.repeat} runs each)" if args.repeat > 1 else ""))
    if args.native and nat_tot.wall:
        print(f"# native player: {nat_tot.cycles} cycles in {nat_tot.wall:.2f} s = {_rate(nat_tot.cycles, nat_tot.wall):.0f} "
              f"cycles/s, {_rate(nat_tot.cycles, nat_tot.cpu):.0f} per CPU-second (includes its 8192-cycle reset "
              f"and file load); native/ours = {_ratio(nat_tot, both, 'wall'):.2f}x wall, {_ratio(nat_tot, both, 'cpu'):.2f}x CPU")
    print(f"# load after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.idle_cycles:
        print(f"# idle free-running clock: {_idle_rate(build, args.idle_cycles):.0f} cycles/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
