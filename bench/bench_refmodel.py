"""Throughput of the SDP reference model next to a plain numpy copy of the same data.

Prints elements/s for (1) the SDP output convertor and (2) the SDP LUT on 16M-element int16
inputs, and (3) the SDP layer of an NVDLA trace (memory in -> memory out) replayed on the
model target, each beside ``np.copy`` of the same data measured in the same run, and the
ratio model/copy; plus the wall time of the whole trace on the model target.

    /work/venv/bin/python bench/bench_refmodel.py [--n 16777216] [--repeat 3]

The trace is taken from NVDLA_TRACES (default /work/shared/nvdla/trace_tests/nv_small) and
skipped when absent.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from nvdla_hil.harness.refmodel.lut import LutParams, lut_stats, sdp_lut
from nvdla_hil.harness.refmodel.sdp import output_convert, run_sdp
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import run_trace

TRACE = "sdp_1x8192x1_pass_through_int8_0"


def best(fn, repeat: int) -> float:
    t = float("inf")
    for _ in range(repeat):
        s = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - s)
    return t


def row(name: str, n: int, t_model: float, t_copy: float) -> None:
    print(f"{name:<34} {n / t_model / 1e6:10.1f} Melem/s   copy {n / t_copy / 1e6:10.1f} Melem/s"
          f"   ratio {t_model / t_copy:7.1f}x")


def bench_trace(repeat: int) -> None:
    root = Path(os.environ.get("NVDLA_TRACES", Path(__file__).resolve().parents[1] / "../shared/nvdla/trace_tests/nv_small"))
    folder = root / TRACE
    if not folder.is_dir():
        print(f"(trace {TRACE} not found under {root}; skipped)")
        return
    # replay the trace on the model target (real player), then time its SDP layer again on
    # the same registers and memory
    with ModelTarget("nv_small") as target:
        res = run_trace(folder, target)
        if not res.passed:
            print(f"(trace {TRACE} did not pass on the model: {res.message}; skipped)")
            return
        _, group, layer = target.layers_run[-1]
        view = target.register_view({}, group)
        mem = target.memories["pri_mem"]
        opts = target.options
        n = layer.elements
        data = np.zeros(n, dtype=np.int8)
        t_layer = best(lambda: run_sdp(view, mem, opts), repeat)
        t_copy = best(lambda: np.copy(data), repeat)
        t_trace = best(lambda: _replay(folder), repeat)
    row(f"SDP trace layer {TRACE}", n, t_layer, t_copy)
    print(f"{'whole trace on ModelTarget':<34} {t_trace * 1e3:10.1f} ms (parse, load, registers, layer, CRC)")


def _replay(folder: Path) -> None:
    with ModelTarget("nv_small") as target:
        run_trace(folder, target)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16 * 1024 * 1024)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.integers(-32768, 32768, args.n).astype(np.int16)
    t_copy = best(lambda: np.copy(x), args.repeat)
    print(f"numpy {np.__version__}, {args.n} int16 elements, best of {args.repeat}")

    t_cvt = best(lambda: output_convert(x, offset=-17, scale=1234, shift=7, out_bits=8), args.repeat)
    row("SDP output convertor (int8 out)", args.n, t_cvt, t_copy)

    le = rng.integers(0, 65536, 65).astype(np.uint16)
    lo = rng.integers(0, 65536, 257).astype(np.uint16)
    p = LutParams(le_function="exponent", le_start=-3000, le_index_offset=2, lo_start=-20000,
                  lo_index_select=7, lo_end=20000, lo_slope_oflow_scale=-77, lo_slope_oflow_shift=3,
                  hybrid_priority="LO")
    t_lut = best(lambda: sdp_lut(x, p, le, lo), args.repeat)
    row("SDP LUT", args.n, t_lut, t_copy)
    r = sdp_lut(x, p, le, lo)
    t_st = best(lambda: lut_stats(*r[1:]), args.repeat)
    row("SDP LUT + counters", args.n, t_lut + t_st, t_copy)
    bench_trace(args.repeat)


if __name__ == "__main__":
    main()
