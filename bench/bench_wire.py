"""Bytes on the wire of the serial target, against the minimum a test needs.

    python bench/bench_wire.py --traces DIR [--limit N] [--full] [--vectors [DIR]] [--no-record]

Each NVDLA trace (and, with ``--vectors``, each bundled nv_small vector) runs through the
board emulator (nv_small model, TCP) on the serial target, ``--poison``, with the link in
``plain`` and in ``verify`` integrity. For each run it records the bytes the UARTBone link
moved both ways (``SerialTransport.stats``) and compares them with the *minimum*: the input
bytes the layers read (recorded on the reference model) plus the output bytes the checks
cover. ``lean`` is the set-up the serial target uses (``run_trace(setup="lean")``);
``--full`` also measures the old full set-up (it moves every ``mem_init`` region, slow).
Each integrity pass is a regression session on a freshly started emulated board (its memory
reads 0; ``--shared-board``: one board, so the verify pass starts on the plain pass's
leftovers, as a lab board does) with one :class:`BoardMemoryBook`: what the board is known to hold after one test is not sent
again by the next (``--no-record``: every test starts unknowing). Each test's figures are
printed as it finishes; then per test class (the trace name's first word, ``v:<suite>`` for
vectors) and in total, with the wire time at 3 Mbaud (10 bits a byte).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import tempfile
import time
from pathlib import Path

from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.boards.emulator import serve_in_thread
from nvdla_hil.harness.targets import TargetSpec, open_target
from nvdla_hil.harness.targets.serial import BoardMemoryBook
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.traces import find_traces, parse_trace, run_trace, trace_features
from nvdla_hil.harness.traces.player import footprint as _footprint
from nvdla_hil.harness.vectors import bundled_root, case_features, find_cases, load_case, run_case

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


def _case_minimum(case) -> int:  # noqa: ANN001
    """A vector's inputs are the exact surfaces the layer reads; its outputs are compared whole."""
    return sum(s.nbytes for s in case.inputs) + sum(s.nbytes for s in case.outputs)


def _add(row: list[int], tx: int, rx: int, minimum: int) -> None:
    row[0] += tx
    row[1] += rx
    row[2] += minimum
    row[3] += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--full", action="store_true", help="also measure the full set-up")
    ap.add_argument("--no-record", action="store_true", help="no board-memory record: every test starts unknowing")
    ap.add_argument("--shared-board", action="store_true",
                    help="one board for both passes: the verify pass starts on the plain pass's leftovers")
    ap.add_argument("--vectors", nargs="?", const=str(bundled_root()), default=None, metavar="DIR",
                    help="also run every nv_small layer vector under DIR (default: the bundled vectors)")
    args = ap.parse_args()
    paths = find_traces(args.traces)
    if args.limit:
        paths = paths[: args.limit]
    prof = load_profile("nv_small")
    cases = []
    other = collections.Counter()
    for c in find_cases(args.vectors) if args.vectors else ():
        case = load_case(c)
        if case.kind != "layer":
            continue
        lacks = sorted(f for f in case_features(case) if not prof.has(f))
        if case.profile not in (None, "nv_small") or lacks:
            other[case.profile or "?"] += 1
            continue
        cases.append(case)
    if other:
        print("skipped vectors made for another configuration (the emulated board is an nv_small): "
              + ", ".join(f"{n} {p}" for p, n in sorted(other.items())))
    modes = ["lean"] + (["full"] if args.full else [])
    rows: dict[tuple[str, str, str], list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0])  # class, integrity, mode
    failed = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as boards:
        def new_board():  # noqa: ANN202
            return boards.enter_context(serve_in_thread(ModelTarget("nv_small"), BoardMap(dram_size=0x4000_0000),
                                                        mode="tcp"))

        emu = new_board()
        for n_pass, integrity in enumerate(("plain", "verify")):
            if n_pass and not args.shared_board:
                emu = new_board()  # each pass a freshly started board (its memory reads 0)
            lab = Path(tmp) / f"lab-{integrity}.yaml"
            lab.write_text(LAB.format(lock=tmp, url=emu.url, integrity=integrity))
            book = None if args.no_record else BoardMemoryBook()
            spec = TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="emu", memory_book=book)
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
                    print(f"  {integrity:6} {mode:4} {p.name:48} {r.status:7} {tx:11,d} {rx:11,d} min {minimum:11,d} "
                          f"{(tx + rx) / max(minimum, 1):5.2f}x  {r.setup}, {r.trusted_bytes} B not sent", flush=True)
                    cls = p.name.split("_")[0]
                    for key in ((cls, integrity, mode), ("traces", integrity, mode), ("ALL", integrity, mode)):
                        _add(rows[key], tx, rx, minimum)
            for case in cases:  # a vector's set-up is already minimal: its inputs, its outputs poisoned
                with open_target(spec) as t:
                    r = run_case(case, t, target_kind="serial")
                    tx, rx = t.stats.tx_bytes, t.stats.rx_bytes
                if r.status != "passed":
                    failed.append(f"vector {case.name} {integrity}: {r.status} {r.message}")
                mn = _case_minimum(case)
                print(f"  {integrity:6} lean v:{case.name:46} {r.status:7} {tx:11,d} {rx:11,d} min {mn:11,d} "
                      f"{(tx + rx) / max(mn, 1):5.2f}x  {r.message}", flush=True)
                cls = "v:" + case.folder.parent.name
                for key in ((cls, integrity, "lean"), ("vectors", integrity, "lean"), ("ALL", integrity, "lean")):
                    _add(rows[key], tx, rx, _case_minimum(case))
    ran = rows[("traces", "plain", "lean")][3]
    nv = rows[("vectors", "plain", "lean")][3]
    print(f"{ran} traces from {args.traces}, {nv} vectors from {args.vectors}, "
          f"board emulator (nv_small) over TCP, wall {time.monotonic() - t0:.0f} s")
    print(f"{'class':8} {'integrity':9} {'set-up':6} {'tests':>5} {'to board':>12} {'from board':>12} {'minimum':>12} "
          f"{'ratio':>6} {'wire @3Mbaud':>12}")
    order = {"traces": 1, "vectors": 2, "ALL": 3}
    for (cls, integrity, mode), (tx, rx, mn, n) in sorted(rows.items(), key=lambda kv: (order.get(kv[0][0], 0), kv[0])):
        print(f"{cls:8} {integrity:9} {mode:6} {n:5d} {tx:12,d} {rx:12,d} {mn:12,d} {(tx + rx) / max(mn, 1):6.2f} "
              f"{(tx + rx) * 10 / BAUD:11.1f}s")
    for f in failed:
        print("NOT PASSED:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
