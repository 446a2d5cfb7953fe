"""UARTBone transport figures: wire bytes, round trips, wire-limited time vs the framing's
ideal, transport CPU per operation, and a fault-injection campaign.

    python bench/bench_serial.py [--faults N] [--skip-faults]

The board runs as a separate process (``board-emu --pty --backend regfile``) so the CPU time
measured here (``time.process_time``) is the transport's own.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np
from nvdla_hil.drivers.transport import LinkIntegrityError, TransportTimeoutError
from nvdla_hil.drivers.uartbone import (
    HEADER_BYTES,
    MAX_BURST,
    IntegrityPolicy,
    SerialTransport,
)
from nvdla_hil.harness.board_emu import FaultConfig, RegisterFileTarget, serve_in_thread

LUT_CFG, LUT_DATA = 0x9008, 0x900C  # SDP S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA (nv_small)
BAUDS = (115200, 3_000_000)
MB = 1 << 20


def _ideal() -> dict[str, tuple[int, int, int]]:
    """(tx bytes, rx bytes, round trips): the fewest the framing allows (255-word bursts, posted writes)."""
    def w(n: int) -> int:
        return -(-n // MAX_BURST) * HEADER_BYTES + 4 * n
    return {
        "reg write": (w(1), 0, 0),
        "reg read": (HEADER_BYTES, 4, 1),
        "LUT load": (w(1) + w(65) + w(1) + w(257), 0, 0),
        "1 MB mem load": (w(MB // 4), 0, 0),
    }


def _ops(t: SerialTransport):
    data = np.random.default_rng(0).integers(0, 256, MB, dtype=np.uint8)

    def lut() -> None:
        t.write32(LUT_CFG, 0x0002_0000)  # LUT_ACCESS_TYPE=WRITE, LUT_TABLE_ID=LE, address 0
        t.write_burst(LUT_DATA, list(range(65)), incr=False)
        t.write32(LUT_CFG, 0x0003_0000)  # LUT_ACCESS_TYPE=WRITE, LUT_TABLE_ID=LO, address 0
        t.write_burst(LUT_DATA, list(range(257)), incr=False)
        t.sync_if_needed()

    return {
        "reg write": lambda: (t.write32(0xB000, 0x1234), t.sync_if_needed()),
        "reg read": lambda: t.read32(0xB000),
        "LUT load": lut,
        "1 MB mem load": lambda: t.mem_write(0x8000_0000, data),
    }


def measure(url: str, policy: str, baud: int, reps: dict[str, int]) -> dict[str, dict]:
    t = SerialTransport(url, baud, policy=IntegrityPolicy(policy), readback_ok=lambda a: a != LUT_DATA,
                        response_timeout=1.0, board_timeout=0.005)
    # verification of posted readback writes happens at the next fence; count it with the op
    t.sync_if_needed = (lambda: t._fence()) if policy == "verify" else (lambda: None)  # type: ignore[attr-defined]
    out = {}
    with t:
        for name, fn in _ops(t).items():
            n = reps[name]
            fn()  # warm-up
            t.sync()
            t.stats.reset()
            c0 = time.process_time()
            for _ in range(n):
                fn()
            t.flush()  # posted writes still queued count with the operations that queued them
            cpu = (time.process_time() - c0) / n
            s = t.stats
            out[name] = {"tx": s.tx_bytes / n, "rx": s.rx_bytes / n, "rt": s.round_trips / n, "cpu": cpu}
            t.sync()
    return out


def bench_wire() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.board_emu", "board-emu", "--pty",
                             "--backend", "regfile"], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        ideal = _ideal()
        reps = {"reg write": 2000, "reg read": 2000, "LUT load": 50, "1 MB mem load": 2}
        print(f"board-emu (separate process) on {url}; wire time = (tx+rx) bytes x 10 bits / baud")
        hdr = (f"{'operation':14} {'policy':6} {'baud':>8} {'tx B':>10} {'rx B':>10} {'RTs':>7} "
               f"{'wire ms':>10} {'ideal ms':>10} {'ratio':>6} {'ideal RTs':>9} {'CPU us/op':>10}")
        print(hdr)
        print("-" * len(hdr))
        for policy in ("plain", "verify"):
            for baud in BAUDS:
                res = measure(url, policy, baud, reps)
                for name, r in res.items():
                    itx, irx, irt = ideal[name]
                    wire = (r["tx"] + r["rx"]) * 10 / baud * 1e3
                    iw = (itx + irx) * 10 / baud * 1e3
                    print(f"{name:14} {policy:6} {baud:>8} {r['tx']:>10.0f} {r['rx']:>10.0f} {r['rt']:>7.1f} "
                          f"{wire:>10.3f} {iw:>10.3f} {wire / iw:>6.2f} {irt:>9} {r['cpu'] * 1e6:>10.1f}")
    finally:
        proc.terminate()
        proc.wait(10)


# ---- fault injection -------------------------------------------------------------------------------
REGS = [0x5000 + 4 * i for i in range(16)]


def campaign(n_ops: int, drop: float, corrupt: float, seed: int) -> dict:
    """Same operation mix and truth check as tests/test_uartbone.py, with a per-op breakdown."""
    tgt = RegisterFileTarget()
    rng = np.random.default_rng(seed + 100)
    names = ("write32+sync", "read32", "write_burst4+sync", "read_burst8", "port write (no readback)")
    res = {n: {"ok": 0, "reported": 0, "silent_wrong": 0} for n in names}
    res["port write (no readback)"]["payload_wrong"] = 0
    worst = 0.0
    with serve_in_thread(tgt, faults=FaultConfig(drop=drop, corrupt=corrupt, seed=seed),
                         fsm_timeout=0.005, log_writes=True) as emu:
        t = SerialTransport(emu.url, 3_000_000, policy=IntegrityPolicy("verify", retries=5),
                            readback_ok=lambda a: a != LUT_DATA, response_timeout=0.03, board_timeout=0.01)
        t.open()
        t0 = time.perf_counter()
        for i in range(n_ops):
            if i and i % 2000 == 0:
                print(f"  ... {i} ops, {time.perf_counter() - t0:.0f} s", flush=True)
            op = int(rng.integers(0, 5))
            a = int(rng.choice(REGS))
            r = res[names[op]]
            s0 = time.perf_counter()
            try:
                if op == 0:
                    v = int(rng.integers(0, 1 << 32))
                    t.write32(a, v)
                    t.sync()
                    bad = tgt.regs.get(a, 0) != v
                elif op == 1:
                    bad = t.read32(a) != tgt.regs.get(a, 0)
                elif op == 2:
                    vals = rng.integers(0, 1 << 32, 4).tolist()
                    t.write_burst(REGS[0], vals)
                    t.sync()
                    bad = [tgt.regs.get(REGS[0] + 4 * k, 0) for k in range(4)] != vals
                elif op == 3:
                    bad = t.read_burst(REGS[0], 8) != [tgt.regs.get(REGS[0] + 4 * k, 0) for k in range(8)]
                else:
                    v = int(rng.integers(0, 1 << 32))
                    t.write32(LUT_DATA, v)
                    r["payload_wrong"] += tgt.regs.get(LUT_DATA) != v
                    bad = False
                r["ok"] += 1
                r["silent_wrong"] += bool(bad)
            except (LinkIntegrityError, TransportTimeoutError):
                r["reported"] += 1
            worst = max(worst, time.perf_counter() - s0)
        elapsed = time.perf_counter() - t0
        t.close()
        intended = {*REGS, LUT_DATA}
        stray = sum(1 for k, a, _ in emu.stats.write_log if not (k == "csr" and a in intended))
        return {"per_op": res, "stray_bus_writes": stray, "link": t.stats.snapshot(),
                "dropped": emu.stats.dropped, "corrupted": emu.stats.corrupted,
                "bytes_in": emu.stats.bytes_in, "bytes_out": emu.stats.bytes_out,
                "elapsed_s": elapsed, "slowest_op_s": worst}


def bench_faults(n: int) -> None:
    print(f"\nfault injection: {n} operations, 0.5 % dropped + 0.5 % corrupted bytes each way, seed 1, verify policy")
    r = campaign(n, 0.005, 0.005, 1)
    tot = {"ok": 0, "reported": 0, "silent_wrong": 0}
    for name, d in r["per_op"].items():
        print(f"  {name:26} " + "  ".join(f"{k}={v}" for k, v in d.items()))
        for k in tot:
            tot[k] += d[k]
    print(f"  total: {tot}  stray bus writes inside the windows: {r['stray_bus_writes']}")
    print(f"  bytes in/out at the board {r['bytes_in']}/{r['bytes_out']}, dropped {r['dropped']}, "
          f"corrupted {r['corrupted']}")
    print(f"  link: {r['link']}")
    print(f"  elapsed {r['elapsed_s']:.1f} s, slowest single operation {r['slowest_op_s'] * 1e3:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--faults", type=int, default=20000, help="operations in the fault campaign")
    ap.add_argument("--skip-faults", action="store_true")
    ap.add_argument("--skip-wire", action="store_true")
    a = ap.parse_args()
    if not a.skip_wire:
        bench_wire()
    if not a.skip_faults:
        bench_faults(a.faults)


if __name__ == "__main__":
    main()
