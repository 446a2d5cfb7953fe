"""UARTBone transport figures: wire bytes, round trips, wire-limited time vs the framing's
ideal, transport CPU per operation, and a fault-injection campaign.

    python bench/bench_serial.py [--faults N] [--skip-faults]

The board runs as a separate process (``board-emu --pty``, nv_small model) so the CPU time
measured here (``time.process_time``) is the transport's own.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np
from nvdla_hil.drivers.uartbone import (
    HEADER_BYTES,
    MAX_BURST,
    IntegrityPolicy,
    SerialTransport,
)
from nvdla_hil.harness.board_emu import FaultConfig, fault_campaign
from nvdla_hil.harness.targets.serial import readback_rules

LUT_CFG, LUT_DATA = 0xD008, 0xD00C  # CDP S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA (nv_small)
REG = 0xD050  # CDP D_DST_BASE_ADDR_LOW: a plain read-write register
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
        # CFG: LUT_ACCESS_TYPE (bit 17) WRITE/READ, LUT_TABLE_ID (bit 16) LE/LO, address 0;
        # under verify each table is read back through the same pair (write_indirect)
        t.write_indirect(LUT_CFG, 0x0002_0000, LUT_DATA, list(range(65)), readback_index=0x0000_0000, mask=0xFFFF)
        t.write_indirect(LUT_CFG, 0x0003_0000, LUT_DATA, list(range(257)), readback_index=0x0001_0000, mask=0xFFFF)

    return {
        "reg write": lambda: (t.write32(REG, 0x1234), t.sync_if_needed()),
        "reg read": lambda: t.read32(REG),
        "LUT load": lut,
        "1 MB mem load": lambda: t.mem_write(0x8000_0000, data),
    }


def measure(url: str, policy: str, baud: int, reps: dict[str, int]) -> dict[str, dict]:
    ok, mask, pops = readback_rules("nv_small")
    t = SerialTransport(url, baud, policy=IntegrityPolicy(policy), readback_ok=ok, readback_mask=mask, read_pops=pops,
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
                             "--backend", "model", "--profile", "nv_small"], stdout=subprocess.PIPE, text=True)
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
def bench_faults(n: int, seed: int = 1) -> None:
    print(f"\nfault injection: {n} operations, 0.5 % dropped + 0.5 % corrupted bytes each way, seed {seed}, "
          "verify policy, pty")
    r = fault_campaign(n, FaultConfig(drop=0.005, corrupt=0.005, seed=seed),
                       progress=lambda i, s: print(f"  ... {i} ops, {s:.0f} s", flush=True))
    for name, d in r["per_op"].items():
        print(f"  {name:26} " + "  ".join(f"{k}={v}" for k, v in d.items()))
    print(f"  total: {r['total']}  stray bus writes: {r['stray_bus_writes']}")
    for line in r["silent"]:
        print(f"  SILENT: {line}")
    print(f"  bytes in/out at the board {r['bytes_in']}/{r['bytes_out']}, dropped {r['dropped']}, "
          f"corrupted {r['corrupted']}")
    print(f"  link: {r['link']}")
    print(f"  elapsed {r['elapsed_s']:.1f} s, slowest single operation {r['slowest_op_s'] * 1e3:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--faults", type=int, default=20000, help="operations in the fault campaign")
    ap.add_argument("--skip-faults", action="store_true")
    ap.add_argument("--skip-wire", action="store_true")
    ap.add_argument("--seed", type=int, default=1, help="fault campaign seed")
    a = ap.parse_args()
    if not a.skip_wire:
        bench_wire()
    if not a.skip_faults:
        bench_faults(a.faults, a.seed)


if __name__ == "__main__":
    main()
