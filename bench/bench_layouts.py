"""Pack/unpack throughput of NVDLA layouts on a 64 MB tensor, next to a plain numpy copy.

Run: python bench/bench_layouts.py [--mb 64] [--repeat 3]
Prints MB/s per operation and its ratio to the copy (target: within 10x of the copy).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from nvdla_hil.harness.layouts import get_layout


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=64, help="tensor size in MiB")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.mb << 20
    rng = np.random.default_rng(0)
    # feature: int8 (C, H, W) with C a multiple of 32 plus a partial last surface
    C, H = 1000, 256
    W = n // (C * H)
    feat = rng.integers(-128, 128, (C, H, W), dtype=np.int8)
    # DC weights: int16 (K, C, 3, 3) with a partial last group and C block
    K, Cw = 1000, 0
    Cw = n // (K * 9 * 2)
    wts = rng.integers(-(2**15), 2**15, (K, Cw, 3, 3), dtype=np.int16)
    cases = [("nvdla.feature", feat, {}), ("nvdla.weight.dc", wts, {})]
    copy_src = np.empty(n, np.uint8)
    copy_src[:] = 1
    t_copy = best(lambda: copy_src.copy(), args.repeat)
    mbps_copy = n / t_copy / 1e6
    print(f"numpy copy            {n / 1e6:8.1f} MB  {mbps_copy:9.1f} MB/s   ratio 1.00")
    for name, arr, params in cases:
        spec = get_layout(name)
        buf = spec.pack(arr, **params)
        t_pack = best(lambda: spec.pack(arr, **params), args.repeat)
        t_unpack = best(lambda: spec.unpack(buf, arr.shape, arr.dtype, **params), args.repeat)
        for op, t in (("pack", t_pack), ("unpack", t_unpack)):
            mbps = arr.nbytes / t / 1e6
            print(f"{name + ' ' + op:21s} {arr.nbytes / 1e6:8.1f} MB  {mbps:9.1f} MB/s   "
                  f"ratio {mbps_copy / mbps:5.2f}x slower than copy {arr.shape} {arr.dtype}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
