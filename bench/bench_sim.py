"""Simulated NVDLA cycles per wall-clock second and per CPU-second on the Verilator target.

Runs NVDLA trace tests on ``VerilatorTarget`` (one fresh simulator per trace) and prints,
per trace, the result, simulated core cycles, wall time of the trace (start-up and reset
excluded), cycles/s and cycles per CPU-second (the simulator's process and this one's); then
the same for an idle free-running clock (the model's ceiling with no Python in the loop).

With ``--native PATH`` (NVDLA's own C++ Verilator trace player ``VNV_nvdla``) the same traces
also run on that player, alternating, and ours/native is printed per simulated cycle, by wall
and by CPU time (the CPU ratio is the one a loaded machine disturbs least). The player reads
``trace.bin``; it is taken from ``--native-tests DIR/<trace>/trace.bin`` when present, else
encoded here from the ``.cfg`` into a private temporary folder removed afterwards (NVDLA's own
converter rejects the ``pri_mem`` memory names these traces use).

    python bench/bench_sim.py [--nvdla-hw ~/nvdla-hw] [--traces DIR] [--longest] [--repeat 5] \
        [-k sdp_ -k pdp_] [--native auto | --native PATH] [--native-style nvdla|ours]

``--native auto`` builds (or reuses) the player with ``nvdla-hil sim native``: NVDLA's
``verif/verilator/nvdla.cpp`` from the same RTL, built as NVDLA's Makefile builds it
(``--native-style nvdla``, the default) or with our simulator's flags (``ours``). Both sides
print the flags they were built with. ``--repeat N`` reports the median of N runs and checks
that every run of a trace gave the same result and cycle count (and the pinned counts,
:data:`PINNED_CYCLES`); the exit status is 1 otherwise. The speed options of our build
(``--opt-fast``, ``--noassert``, ``--pgo``, ...) each select another cached build, to measure
one option at a time. ``--fixture`` measures only the idle clock of the project's CSB fixture
(no checkout needed). The simulator comes from the shared build cache: the same build as
``nvdla-hil sim build`` unless an option says otherwise.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchenv.py beside this script
import benchenv  # noqa: E402
from nvdla_hil.harness.targets.rtl_build import PGO_TRAINING  # noqa: E402

NATIVE_STYLES = ("nvdla", "ours")  # nvdla_hil.sims.native.NATIVE_STYLES (imported late: a bench starts fast)

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
#: the simulated cycles of those traces on our simulator (the first as issue 29 counted it, the
#: others as the build before issue 41 did; every speed option must keep them: the bench says
#: CHANGED and exits 1 otherwise)
PINNED_CYCLES = {
    "dc_35x22x54_6x8x54x29_int8_0": 1_176_331,
    "dc_32x26x76_6x3x76x16_int8_0": 305_198,
    "dc_8192x1x1_2x3x1x41_int8_0": 288_310,
}
#: what a profile-guided build is trained on (the harness's: ``regress --rtl-build pgo`` makes the
#: same build): one to three traces of each unit, none of LONGEST_NV_SMALL
PGO_TRAINING_NV_SMALL = PGO_TRAINING["nv_small"]


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


def _median(runs: list[Run]) -> Run:
    """The median of repeated runs (wall and CPU each their own median; a loaded machine adds
    time to some runs, and the median is robust to both tails). Every run must have passed with
    the same cycle count: a status or count that differs between runs is the result."""
    bad = [r for r in runs if r.status != "passed"]
    if bad:
        return bad[0]
    counts = sorted({r.cycles for r in runs})
    if len(counts) > 1:
        return Run("MISMATCH", runs[0].cycles, 0.0, 0.0, f"cycle counts differ between runs: {counts}")
    return Run("passed", runs[0].cycles, statistics.median(r.wall for r in runs),
               statistics.median(r.cpu for r in runs))


def _rate(cycles: int, seconds: float) -> float:
    return cycles / seconds if seconds > 0 else 0.0


def _ratio(ours: Run, native: Run, what: str) -> float:
    """How many times faster per simulated cycle ours was than the native player (below 1:
    the player was faster)."""
    o, n = _rate(ours.cycles, getattr(ours, what)), _rate(native.cycles, getattr(native, what))
    return o / n if n else float("nan")


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
    ap.add_argument("--native-style", choices=NATIVE_STYLES, default="nvdla",
                    help="how --native auto builds the player: 'nvdla' as NVDLA's Makefile does (default), "
                         "'ours' with our simulator's flags (the apples-to-apples check)")
    ap.add_argument("--fixture", action="store_true",
                    help="only the idle clock rate of the project's CSB fixture (no checkout needed)")
    ap.add_argument("--native-tests", help="folder with <trace>/trace.bin for the native player")
    ap.add_argument("--idle-cycles", type=int, default=200_000)
    ap.add_argument("--timeout", type=float, default=600.0, help="per-layer wall timeout (s)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each trace this many times on each simulator, alternating, and report the "
                         "median wall and CPU time of each (default 1)")
    ap.add_argument("--threads", type=int, default=1,
                    help="Verilator model threads of our simulator (as `sim build --threads`), and of the "
                         "native player of --native-style ours (NVDLA's own is single-threaded)")
    v = ap.add_argument_group("our simulator's speed options (each its own cached build; default: the "
                              "build `nvdla-hil sim build` makes)")
    v.add_argument("--verilator-opt", choices=("-O3", "default"), default=None,
                   help="Verilator's own optimisation: -O3, or Verilator's default")
    v.add_argument("--x-fast", choices=("on", "off"), default=None,
                   help="--x-assign fast --x-initial fast (on) or Verilator's defaults (off)")
    v.add_argument("--noassert", choices=("on", "off"), default=None, help="Verilator's --noassert")
    v.add_argument("--opt-fast", default=None, metavar="FLAGS",
                   help="OPT_FAST, the C++ optimisation of the model's hot code ('-O2', '-O3', "
                        "'-O3 -march=native')")
    v.add_argument("--output-split", type=int, default=None, metavar="N", help="Verilator's --output-split")
    v.add_argument("--lto", choices=("on", "off"), default=None, help="gcc's link-time optimisation")
    v.add_argument("--verilator-extra", default="", metavar="FLAGS",
                   help="more Verilator flags for our build, e.g. '--inline-cfuncs 200' (its own cached build)")
    v.add_argument("--compiler", choices=("default", "clang"), default=None,
                   help="the C++ compiler of our model: the default ($CXX, else g++) or clang++")
    v.add_argument("--pgo", action="store_true",
                   help="profile-guided: an instrumented build trained on PGO_TRAINING_NV_SMALL (none of "
                        "the measured --longest traces), then the build that uses its profile")
    return ap


def target_options(args: argparse.Namespace):
    """The speed options of our simulator the arguments ask for (the default build's otherwise)."""
    from nvdla_hil.sims.build import BuildOptions

    d = BuildOptions()
    pick = {"on": True, "off": False, None: None}
    return BuildOptions(
        verilator_o3=d.verilator_o3 if args.verilator_opt is None else args.verilator_opt == "-O3",
        x_fast=d.x_fast if pick[args.x_fast] is None else bool(pick[args.x_fast]),
        noassert=d.noassert if pick[args.noassert] is None else bool(pick[args.noassert]),
        opt_fast=d.opt_fast if args.opt_fast is None else args.opt_fast,
        output_split=d.output_split if args.output_split is None else args.output_split,
        pgo=d.pgo, lto=d.lto if pick[args.lto] is None else bool(pick[args.lto]),
        compiler=d.compiler if args.compiler is None else args.compiler.replace("default", ""),
        extra=tuple(args.verilator_extra.split()))


def train(build, traces: Path, names: tuple[str, ...], timeout: float) -> None:
    """Run the training traces on ``build`` (an instrumented one: its profile is written when
    each simulator quits)."""
    for n in names:
        if (traces / n).is_dir():
            r = _run_ours(traces / n, build, timeout)
            print(f"#   trained on {n}: {r.status}, {r.cycles} cycles, {r.wall:.1f} s", file=sys.stderr, flush=True)


def _our_build(args: argparse.Namespace):
    from nvdla_hil.sims.build import build_nvdla, build_pgo

    opts = target_options(args)
    if not args.pgo:
        return build_nvdla(args.nvdla_hw, args.config, threads=args.threads, options=opts)
    if args.threads != 1:
        raise SystemExit("bench_sim.py: --pgo builds the single-threaded model (no --threads)")
    names = PGO_TRAINING_NV_SMALL
    root = Path(args.traces)
    return build_pgo(args.nvdla_hw, args.config, options=opts,
                     train=lambda b: train(b, root, names, args.timeout),
                     training=f"{args.config} traces {' '.join(names)}")


def _native_flags(exe: Path) -> str:
    """How the player was built, from its cache entry's manifest."""
    import json

    try:
        m = json.loads((exe.parent.parent / "manifest.json").read_text())
    except (OSError, ValueError):
        return "(no manifest: a player built outside nvdla-hil)"
    if "style" not in m:
        return "(built before issue 41: our flags)"
    return (f"style {m['style']}; {m['compiler']}; verilator {' '.join(m['verilator_flags'])}; "
            f"make {' '.join(f for f in m['make_flags'] if not f.startswith('CFG_'))} "
            f"{'' if any(f.startswith('OPT_FAST=') for f in m['make_flags']) else '(OPT_FAST: Verilator default -Os)'}")


def _pick_traces(args: argparse.Namespace, root: Path) -> list[str]:
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    if args.longest:
        return [n for n in LONGEST_NV_SMALL if n in names]
    if args.k:
        return [n for n in names if any(k in n for k in args.k)]
    if args.all:
        return names
    return [n for n in DEFAULT_SET if n in names]


def main(argv: list[str] | None = None) -> int:  # long: the measurement loop and its report
    ap = build_parser()
    args = ap.parse_args(argv)
    from nvdla_hil.sims.build import build_fixture

    if args.fixture:
        build = build_fixture()
        print(f"# {build.verilator}; build {build.directory}")
        print(f"# idle free-running clock (fixture): {_idle_rate(build, args.idle_cycles):.0f} cycles/s")
        return 0
    args.traces = benchenv.need(args.traces, "NVDLA_TRACES", "--traces")
    args.nvdla_hw = benchenv.need(args.nvdla_hw, "NVDLA_HW", "--nvdla-hw")

    build = _our_build(args)
    if args.native == "auto":
        from nvdla_hil.sims.native import build_native

        # NVDLA builds its player single-threaded; with our flags it gets our thread count too
        nthreads = args.threads if args.native_style == "ours" else 1
        args.native = str(build_native(args.nvdla_hw, args.config, threads=nthreads, style=args.native_style))
    root = Path(args.traces)
    names = _pick_traces(args, root)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# {time.strftime('%Y-%m-%d %H:%M %Z')}; {platform.node()}: {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}, load {load}")
    print(f"# {build.verilator}; build {build.directory}; model threads {args.threads}")
    opts = target_options(args)
    print(f"# ours built with: {build.options or opts.describe()}{'; PGO-trained' if args.pgo else ''}; "
          f"build took {build.build_seconds:.0f} s")
    if args.native:
        print(f"# native player: {args.native}")
        print(f"# native built with: {_native_flags(Path(args.native))}")
    hdr = f"{'trace':40s} {'result':8s} {'cycles':>9s} {'wall s':>7s} {'cyc/s':>8s} {'cyc/cpu-s':>9s}"
    if args.native:
        hdr += f" | {'native':8s} {'cycles':>9s} {'wall s':>7s} {'cyc/s':>8s} {'cyc/cpu-s':>9s} {'wall':>5s} {'cpu':>5s}"
    print(hdr + ("" if not args.native else "   (ratios: our speed / native speed per cycle)"))
    ours_tot, nat_tot, both = Run("", 0, 0.0, 0.0), Run("", 0, 0.0, 0.0), Run("", 0, 0.0, 0.0)
    passed, changed = 0, []
    with tempfile.TemporaryDirectory(prefix="nvdla-hil-bench-sim-") as tmp:  # private (0700), removed after
        work = Path(tmp)
        for n in names:
            ours_runs, nat_runs = [], []
            for _ in range(max(1, args.repeat)):
                ours_runs.append(_run_ours(root / n, build, args.timeout))
                if args.native and ours_runs[-1].status == "passed":
                    nat_runs.append(run_native(Path(args.native), _native_trace_bin(root / n, args, work)))
            o = _median(ours_runs)
            if o.status == "passed" and args.config == "nv_small" and n in PINNED_CYCLES and o.cycles != PINNED_CYCLES[n]:
                changed.append(f"{n}: {o.cycles} cycles, pinned {PINNED_CYCLES[n]}")
            passed += o.status == "passed"
            _add(ours_tot, o)
            line = f"{n:40s} {o.status:8s} {o.cycles:9d} {o.wall:7.2f} {_rate(o.cycles, o.wall):8.0f} {_rate(o.cycles, o.cpu):9.0f}"
            if args.native and o.status != "passed":
                line += " | (not run natively: failed here)"
            elif args.native:
                nr = _median(nat_runs)
                _add(nat_tot, nr)
                _add(both, o)
                line += (f" | {nr.status:8s} {nr.cycles:9d} {nr.wall:7.2f} {_rate(nr.cycles, nr.wall):8.0f} "
                         f"{_rate(nr.cycles, nr.cpu):9.0f} {_ratio(o, nr, 'wall'):5.2f} {_ratio(o, nr, 'cpu'):5.2f}")
            print(line + (f"  {o.message}" if o.status != "passed" and o.message else ""), flush=True)
    how = f" (median of {args.repeat} runs each)" if args.repeat > 1 else ""
    print(f"# {passed}/{len(names)} passed; total {ours_tot.cycles} cycles in {ours_tot.wall:.2f} s = "
          f"{_rate(ours_tot.cycles, ours_tot.wall):.0f} cycles/s, {_rate(ours_tot.cycles, ours_tot.cpu):.0f} per CPU-second{how}")
    if args.native and nat_tot.wall:
        print(f"# native player: {nat_tot.cycles} cycles in {nat_tot.wall:.2f} s = {_rate(nat_tot.cycles, nat_tot.wall):.0f} "
              f"cycles/s, {_rate(nat_tot.cycles, nat_tot.cpu):.0f} per CPU-second (includes its 8192-cycle reset "
              f"and file load); ours/native = {_ratio(both, nat_tot, 'wall'):.2f}x wall, "
              f"{_ratio(both, nat_tot, 'cpu'):.2f}x CPU per simulated cycle")
    print("# cycle counts: " + ("; ".join(changed) + " - CHANGED" if changed else
                                f"as pinned ({sum(n in PINNED_CYCLES for n in names)} traces checked)"))
    print(f"# load after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.idle_cycles:
        print(f"# idle free-running clock: {_idle_rate(build, args.idle_cycles):.0f} cycles/s")
    return 1 if changed or passed < len(names) else 0


if __name__ == "__main__":
    sys.exit(main())
