"""Bytes on the wire of the serial target, against the minimum a test needs.

    python bench/bench_wire.py --traces DIR [--limit N] [--full] [--vectors]

Each NVDLA trace (and, with ``--vectors``, each bundled nv_small vector) runs through the
board emulator (nv_small model, TCP) on the serial target, ``--poison``, with the link in
``plain`` and in ``verify`` integrity. For each run it records the bytes the UARTBone link
moved both ways (``SerialTransport.stats``) and compares them with the *minimum*: the input
bytes the layers read (recorded on the reference model) plus the output bytes the checks
cover. ``lean`` is the set-up the serial target uses (``run_trace(setup="lean")``);
``--full`` also measures the old full set-up (it moves every ``mem_init`` region, slow).
Figures per test class (the trace name's first word) and in total, with the wire time at
3 Mbaud (10 bits a byte).
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.board_emu import serve_in_thread
from nvdla_hil.harness.targets import TargetSpec, open_target
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.traces import _footprint, find_traces, parse_trace, run_trace, trace_features

LAB = """\
lock_dir: {lock}
boards:
  emu:
    url: {url}
    baud: 3000000
    profile: nv_small
    dram_size: 0x40000000
    integrity: {integrity}
    reset_address: 0xf0000000
    response_timeout: 30
"""
BAUD = 3_000_000


def _minimum(trace) -> int:  # noqa: ANN001
    fp = _footprint(trace, "nv_small", masks=False)
    reads = sum(hi - lo for spans in (fp.reads.values() if fp else ()) for lo, hi in spans)
    return reads + sum(c.args[3] for c in trace.of_kind("check_crc"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--full", action="store_true", help="also measure the full set-up")
    args = ap.parse_args()
    paths = find_traces(args.traces)
    if args.limit:
        paths = paths[: args.limit]
    modes = ["lean"] + (["full"] if args.full else [])
    rows: dict[tuple[str, str, str], list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0])  # class, integrity, mode
    failed = []
    prof = load_profile("nv_small")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        with serve_in_thread(ModelTarget("nv_small"), BoardMap(dram_size=0x4000_0000), mode="tcp") as emu:
            for integrity in ("plain", "verify"):
                lab = Path(tmp) / f"lab-{integrity}.yaml"
                lab.write_text(LAB.format(lock=tmp, url=emu.url, integrity=integrity))
                spec = TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="emu")
                for p in paths:
                    tr = parse_trace(p)
                    lacks = sorted(f for f in trace_features(tr) if not prof.has(f))
                    if lacks:  # the emulated board is an nv_small
                        if integrity == "plain":
                            print(f"skipped {p.name}: needs {', '.join(lacks)}, which nv_small lacks")
                        continue
                    minimum = _minimum(tr)
                    for mode in modes:
                        with open_target(spec) as t:
                            r = run_trace(tr, t, poison=True, setup=mode)
                            tx, rx = t.stats.tx_bytes, t.stats.rx_bytes
                        if r.status != "passed":
                            failed.append(f"{p.name} {integrity} {mode}: {r.status} {r.message}")
                        cls = p.name.split("_")[0]
                        for key in ((cls, integrity, mode), ("ALL", integrity, mode)):
                            row = rows[key]
                            row[0] += tx
                            row[1] += rx
                            row[2] += minimum
                            row[3] += 1
    ran = rows[("ALL", "plain", "lean")][3]
    print(f"{ran} traces from {args.traces}, board emulator (nv_small) over TCP, wall {time.monotonic() - t0:.0f} s")
    print(f"{'class':8} {'integrity':9} {'set-up':6} {'tests':>5} {'to board':>12} {'from board':>12} {'minimum':>12} "
          f"{'ratio':>6} {'wire @3Mbaud':>12}")
    for (cls, integrity, mode), (tx, rx, mn, n) in sorted(rows.items(), key=lambda kv: (kv[0][0] == "ALL", kv[0])):
        print(f"{cls:8} {integrity:9} {mode:6} {n:5d} {tx:12,d} {rx:12,d} {mn:12,d} {(tx + rx) / max(mn, 1):6.2f} "
              f"{(tx + rx) * 10 / BAUD:11.1f}s")
    for f in failed:
        print("NOT PASSED:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
