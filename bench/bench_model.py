"""Per-layer time of the model target next to NVDLA's C model, on identical layers, in one run.

For each unit the script generates layers once with ``nvdla-hil fuzz --unit U --seed S --count N
--keep DIR --target cmod`` (packed vectors whose goldens are the C model's outputs; cached in
``--cases``, reused while seed and count are the same), then runs every layer with
:func:`~nvdla_hil.harness.vectors.execute_case` on the model target (C-model semantics) and on
the C model (``--target cmod``, nv_full, ``$NVDLA_HW_V1``), layer by layer in this run, and
prints per unit: the median layer time on each, the ratio of the medians (C model / model: how
many times faster the model is), and the worst layer (the lowest per-layer CPU-time ratio, named,
with its wall-time ratio). Each
layer runs ``--repeat`` times on each target and the fastest run counts: on a loaded machine the
scheduler takes a process off the CPU for 10-40 ms at random, longer than a small layer. Times are
given as wall time and as CPU time (this process; for the C model plus its own process, read from
``/proc/PID/task/*/schedstat``), which the machine's load does not inflate. The C model has no
reset line: its process is restarted before every run (``reset()``), and that start-up is timed
and reported apart, never inside a layer's time. Both targets run the first layer of each unit
once untimed (lazy imports, a cold process). Every layer's outputs on the two targets are
compared byte for byte (``agree``). The machine (``nproc``, ``uptime``) is printed before and after.

    NVDLA_HW_V1=$HOME/nvdla-hw-v1 .venv/bin/python bench/bench_model.py [--count 5] [--seed 1]
        [--units sdp,pdp-fp16,...] [--cases DIR] [--repeat 3] [--model-only] [--profile-out FILE]

``$NVDLA_HW`` (an nvdla/hw master checkout: the C model's AC types, part of its cached build's
key) defaults to ``../shared/nvdla_src/hw`` when unset, as ``$NVDLA_HW_V1`` to ``../shared/nvdla_src/hw-v1``.

``--model-only`` skips the C model (the model's figures only, for profiling); ``--profile-out``
writes a cProfile of the model's timed ``execute_case`` calls (``python -m pstats FILE``).
Exit status: 0 when every layer ran and the two targets agreed, 1 otherwise, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchenv.py beside this script
import benchenv  # noqa: E402
from nvdla_hil.drivers.transport import Transport
from nvdla_hil.harness.targets.cmod import CmodTarget
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import Case, execute_case, find_cases, load_case

#: bench unit -> (fuzz unit, extra fuzz arguments); every case runs on nv_full (the C model's)
UNITS: dict[str, tuple[str, list[str]]] = {
    "sdp": ("sdp-bsbn", ["--profile", "nv_full"]),
    "sdp-ew": ("sdp-ew", ["--profile", "nv_full"]),
    "sdp-fp16": ("sdp-fp16", []),
    "cdp": ("cdp-lrn", ["--profile", "nv_full"]),
    "cdp-fp16": ("cdp-fp16", []),
    "pdp": ("pdp", ["--set", "precision=int8"]),
    "pdp-fp16": ("pdp", ["--set", "precision=fp16"]),
    "conv": ("conv", ["--profile", "nv_full", "--set", "precision=int8"]),
    "conv-fp16": ("conv", ["--profile", "nv_full", "--set", "precision=fp16"]),
    "conv-winograd": ("conv-winograd", []),
    "conv-image": ("conv-image", []),
}
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class UnitResult:
    name: str
    layers: list[str] = field(default_factory=list)
    model: list[float] = field(default_factory=list)
    cmod: list[float] = field(default_factory=list)
    model_cpu: list[float] = field(default_factory=list)
    cmod_cpu: list[float] = field(default_factory=list)
    startup: list[float] = field(default_factory=list)
    agree: int = 0
    errors: list[str] = field(default_factory=list)


def machine() -> str:
    up = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    return f"machine: {len(os.sched_getaffinity(0))} CPUs (nproc), uptime: {up}"


def generate(unit: str, seed: int, count: int, cases: Path, nvdla_hw: str) -> Path:
    """The kept layers of ``unit`` (generated on the C model unless already there)."""
    fuzz_unit, extra = UNITS[unit]
    dest = cases / f"{unit}-s{seed}-n{count}"
    if dest.is_dir() and len(find_cases(dest)) >= 1:
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [*benchenv.cli(), "fuzz", "--unit", fuzz_unit, "--seed", str(seed),
           "--count", str(count), "--keep", str(dest), "--target", "cmod", "--nvdla-hw", nvdla_hw,
           "--model-semantics", "cmod", *extra]
    print(f"# generating {unit}: {' '.join(cmd)}", flush=True)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    print(f"#   exit {r.returncode} in {time.perf_counter() - t:.1f} s, {len(find_cases(dest))} layers kept", flush=True)
    if r.returncode not in (0, 1) or not find_cases(dest):
        print(r.stdout[-2000:] + r.stderr[-2000:], file=sys.stderr)
    return dest


def _server_cpu(target: object) -> float:
    """CPU seconds the target's simulator process has used (all its threads; 0 in-process):
    ``/proc/PID/task/*/schedstat``, nanoseconds."""
    proc = getattr(target, "_proc", None)  # SimProcessTarget's child (the C model's host program)
    if proc is None:
        return 0.0
    total = 0
    for f in Path(f"/proc/{proc.pid}/task").glob("*/schedstat"):
        try:
            total += int(f.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total * 1e-9


def _time_once(case: Case, target: Transport, before: Callable[[], None]) -> tuple[float, float, dict[str, np.ndarray]]:
    """One run of ``case`` after ``before()`` (untimed): wall time, CPU time (this process + the
    target's process) and the outputs."""
    before()
    c0, s0 = time.process_time(), _server_cpu(target)
    t = time.perf_counter()
    out, _ = execute_case(case, target)
    wall = time.perf_counter() - t
    return wall, time.process_time() - c0 + _server_cpu(target) - s0, out


def bench_unit(unit: str, folder: Path, args: argparse.Namespace, prof: cProfile.Profile | None) -> UnitResult:
    """Layer by layer: ``--repeat`` runs on the model, then ``--repeat`` on the C model, so that
    a change in the machine's speed (a shared VM's neighbours) falls on both sides of a layer's
    ratio; the fastest run of each counts. The model's runs follow each other as in a
    regression (one process, warm); the C model restarts before each (reset, timed apart)."""
    res = UnitResult(unit)
    cases = [load_case(p) for p in find_cases(folder)]
    if not cases:
        res.errors.append("no layers kept")
        return res
    profile = cases[0].profile or "nv_full"
    cm = None if args.model_only else CmodTarget(nvdla_hw=args.nvdla_hw, config=profile)
    with ModelTarget(profile, semantics="cmod") as m:
        execute_case(cases[0], m)  # warm-up, untimed
        if cm is not None:
            t0 = time.perf_counter()
            cm.open()
            res.startup.append(time.perf_counter() - t0)
            execute_case(cases[0], cm)  # warm-up, untimed

        def restart() -> None:  # the C model has no reset line: a new process, timed apart
            s = time.perf_counter()
            assert cm is not None
            cm.reset()
            res.startup.append(time.perf_counter() - s)

        try:
            for c in cases:
                best = {"model": (float("inf"), float("inf")), "cmod": (float("inf"), float("inf"))}
                outs: dict[str, dict[str, np.ndarray]] = {}
                stage = "model"
                try:
                    for _ in range(args.repeat):
                        if prof is not None:
                            prof.enable()
                        try:
                            wall, cpu, outs["model"] = _time_once(c, m, m.reset)
                        finally:
                            if prof is not None:
                                prof.disable()
                        best["model"] = (min(best["model"][0], wall), min(best["model"][1], cpu))
                    stage = "C model"
                    for _ in range(args.repeat if cm is not None else 0):
                        wall, cpu, outs["cmod"] = _time_once(c, cm, restart)
                        best["cmod"] = (min(best["cmod"][0], wall), min(best["cmod"][1], cpu))
                except Exception as e:  # noqa: BLE001 - report the layer, go on
                    res.errors.append(f"{c.name}: {stage}: {type(e).__name__}: {e}")
                    continue
                res.layers.append(c.name)
                res.model.append(best["model"][0])
                res.model_cpu.append(best["model"][1])
                if cm is not None:
                    res.cmod.append(best["cmod"][0])
                    res.cmod_cpu.append(best["cmod"][1])
                    mo = outs["model"]
                    res.agree += all(np.array_equal(np.asarray(mo[k]), np.asarray(v)) for k, v in outs["cmod"].items())
        finally:
            if cm is not None:
                cm.close()
    return res


def report(results: list[UnitResult], model_only: bool) -> None:
    if model_only:
        print(f"{'unit':<14} {'layers':>6} {'model median':>13} {'cpu median':>11} {'model max':>10}  slowest layer")
        for r in results:
            if not r.model:
                print(f"{r.name:<14} {0:>6}  (no layer ran: {'; '.join(r.errors)[:200]})")
                continue
            i = int(np.argmax(r.model))
            print(f"{r.name:<14} {len(r.model):>6} {statistics.median(r.model) * 1e3:10.2f} ms "
                  f"{statistics.median(r.model_cpu) * 1e3:8.2f} ms {max(r.model) * 1e3:7.1f} ms  {r.layers[i]}")
        return
    print("wall: median of the per-layer best wall times; cpu: the same in CPU time (this process, plus the C "
          "model's process for the C model); ratio = C model / model (how many times faster the model is); "
          "worst cpu = the layer with the lowest CPU ratio (its wall ratio after it); start-up: the C model's "
          "process start (not in any layer)")
    print(f"{'unit':<14} {'layers':>6} {'agree':>5} {'model wall':>10} {'C model wall':>12} {'ratio':>7} "
          f"{'model cpu':>10} {'C model cpu':>11} {'ratio':>7}   {'worst cpu: model vs C model cpu (ratio; wall ratio)':<66} "
          f"{'start-up':>8}")
    for r in results:
        if not r.model:
            print(f"{r.name:<14} {0:>6}  (no layer ran: {'; '.join(r.errors)[:200]})")
            continue
        med = statistics.median
        mm, cc, mc, ccpu = med(r.model), med(r.cmod), med(r.model_cpu), med(r.cmod_cpu)
        cpu_ratios = [c / m for m, c in zip(r.model_cpu, r.cmod_cpu, strict=True)]
        w = int(np.argmin(cpu_ratios))
        worst = (f"{r.layers[w]} {r.model_cpu[w] * 1e3:.1f} vs {r.cmod_cpu[w] * 1e3:.1f} ms ({cpu_ratios[w]:.1f}x; "
                 f"{r.cmod[w] / r.model[w]:.1f}x)")
        start = f"{med(r.startup) * 1e3:.0f} ms" if r.startup else "-"
        print(f"{r.name:<14} {len(r.model):>6} {r.agree:>5} {mm * 1e3:7.2f} ms {cc * 1e3:9.1f} ms {cc / mm:6.1f}x "
              f"{mc * 1e3:7.2f} ms {ccpu * 1e3:8.1f} ms {ccpu / mc:6.1f}x   {worst:<66} {start:>8}")
    for r in results:
        for e in r.errors:
            print(f"  error {r.name}: {e[:300]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--count", type=int, default=5, help="layers per unit (default 5)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--units", default=",".join(UNITS), help=f"comma-separated, of: {', '.join(UNITS)}")
    ap.add_argument("--cases", type=Path, default=None,
                    help="where the kept layers are cached (default: ~/.cache/nvdla-hil/bench/model, this user's)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per layer on each target, the fastest taken (default 3: a loaded machine "
                         "deschedules a process for 10-40 ms at random, longer than a small layer)")
    ap.add_argument("--nvdla-hw", default=benchenv.default("NVDLA_HW_V1"),
                    help="nvdla/hw nvdlav1 checkout ($NVDLA_HW_V1, else ../shared/nvdla_src/hw-v1)")
    ap.add_argument("--model-only", action="store_true", help="time the model only (layers must be cached)")
    ap.add_argument("--profile-out", type=Path, help="write a cProfile of the model's timed execute_case calls")
    args = ap.parse_args(argv)
    args.cases = args.cases or benchenv.private_folder("model")
    units = [u for u in args.units.split(",") if u]
    bad = [u for u in units if u not in UNITS]
    if bad or args.count < 1 or args.repeat < 1:
        print(f"bad --units {bad} / --count / --repeat", file=sys.stderr)
        return 2
    if not args.nvdla_hw or not Path(args.nvdla_hw).is_dir():
        print("set NVDLA_HW_V1 (or --nvdla-hw) to the nvdla/hw nvdlav1 checkout: the C model builds from it", file=sys.stderr)
        return 2
    master = benchenv.default("NVDLA_HW")  # the C model's AC types and its cached build's key come from it
    if master:
        os.environ["NVDLA_HW"] = master  # this process (CmodTarget) and the fuzz runs it starts
    else:
        print(f"bench_model.py: no nvdla/hw master checkout ({benchenv.CHECKOUTS['NVDLA_HW'][1]} missing, NVDLA_HW "
              "unset): the C model builds from the nvdlav1 checkout's own AC types", file=sys.stderr)
    print(machine())
    print(f"numpy {np.__version__}; {args.count} layers per unit, seed {args.seed}, best of {args.repeat} per layer; "
          f"layers in {args.cases}", flush=True)
    prof = cProfile.Profile() if args.profile_out else None
    results = []
    t0 = time.perf_counter()
    for u in units:
        folder = generate(u, args.seed, args.count, args.cases, args.nvdla_hw)
        results.append(bench_unit(u, folder, args, prof))
        print(f"# {u} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    print(machine())
    report(results, args.model_only)
    if prof is not None:
        prof.dump_stats(str(args.profile_out))
    ok = all(not r.errors and (args.model_only or r.agree == len(r.model)) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
