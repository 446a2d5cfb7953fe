"""UARTBone transport figures: wire bytes, round trips, wire-limited time vs the framing's
ideal, transport CPU per operation, and a fault-injection campaign.

    python bench/bench_serial.py [--faults N] [--skip-faults]
    python bench/bench_serial.py --regress 20 [--via litex_server] [--traces DIR] [--out DIR]

``--regress N`` runs the serial regression (NVDLA's nv_small traces + the bundled vectors,
verify policy, every timeout at its default) N times in a row through a fresh ``board-emu``
process each time (TCP and pty alternately; ``--via litex_server``: a real ``litex_server --uart``
on the emulator's pty, ``pip install litex``) and prints each run's result and wall time.

The board runs as a separate process (``board-emu --pty``, nv_small model) so the CPU time
measured here (``time.process_time``) is the transport's own.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from nvdla_hil.drivers.uartbone import (
    HEADER_BYTES,
    MAX_BURST,
    IntegrityPolicy,
    SerialTransport,
)
from nvdla_hil.harness.boards.emulator import FaultConfig, fault_campaign
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
    proc = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.boards.emulator", "board-emu", "--pty",
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


# ---- the serial regression, N times in a row ----------------------------------------------------------
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def regress_once(out: Path, traces: str, mode: str, via: str, fault: str | None = None,
                 fault_after: float = 60.0) -> tuple[int, float, str]:
    """One ``nvdla-hil regress --target serial`` through a fresh emulator: (exit code, s, summary).
    ``fault`` (``stop``: SIGSTOP, ``kill``: SIGKILL) hits the board's server (litex_server, else
    the emulator) ``fault_after`` seconds into the run; the time from it to the run's end is printed."""
    import shutil
    import signal
    import socket
    import threading

    out.mkdir(parents=True, exist_ok=True)
    procs = [subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.boards.emulator", "board-emu",
                               "--pty" if mode == "pty" else "--tcp=0"], stdout=subprocess.PIPE, text=True,
                              stderr=(out / "board-emu.log").open("w"))]
    try:
        url = procs[0].stdout.readline().strip()
        extra = ""
        if via == "litex_server":
            port = _free_port()
            server = shutil.which("litex_server") or str(Path(sys.executable).with_name("litex_server"))
            procs.append(subprocess.Popen([server, "--uart", "--uart-port", url, "--uart-baudrate", "3000000",
                                           "--bind-ip", "127.0.0.1", "--bind-port", str(port)],
                                          stdout=(out / "litex_server.log").open("w"), stderr=subprocess.STDOUT))
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        return 2, 0.0, "litex_server did not come up"
                    time.sleep(0.1)
            url, extra = f"tcp://127.0.0.1:{port}", "    transport: litex_server\n"
        lab = out / "lab.yaml"
        lab.write_text(f"lock_dir: {out}\nboards:\n  emu:\n    url: {url}\n    baud: 3000000\n    profile: nv_small\n"
                       f"    reset_address: 0xf0000000\n{extra}")
        cli = str(Path(sys.executable).with_name("nvdla-hil"))
        t0 = time.monotonic()
        hit: list[float] = []

        def strike() -> None:
            victim = procs[-1]  # litex_server when there is one, else the emulator
            hit.append(time.monotonic())
            os.kill(victim.pid, signal.SIGSTOP if fault == "stop" else signal.SIGKILL)

        timer = threading.Timer(fault_after, strike) if fault else None
        if timer is not None:
            timer.start()
        try:
            r = subprocess.run([cli, "regress", "--target", "serial", "--lab", str(lab), "--board", "emu", "--suite",
                                "all", "--traces", traces, "--results-dir", str(out / "results")],
                               stdout=(out / "regress.log").open("w"), stderr=subprocess.STDOUT, timeout=3 * 3600)
        finally:
            if timer is not None:
                timer.cancel()
        took = time.monotonic() - t0
        lines = (out / "regress.log").read_text().splitlines()
        summary = next((x for x in reversed(lines) if x.startswith("summary:")), "(no summary line)")
        if hit:
            summary += f"  [{fault} at {hit[0] - t0:.1f} s; run ended {time.monotonic() - hit[0]:.1f} s later]"
        return r.returncode, took, summary
    finally:
        for p in reversed(procs):
            with contextlib.suppress(OSError):
                os.kill(p.pid, signal.SIGCONT)
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def bench_regress(n: int, traces: str, out: Path, via: str) -> int:
    print(f"serial regression x{n} via {via}: nv_small traces ({traces}) + bundled vectors, verify, default timeouts")
    passed = 0
    walls = []
    for i in range(1, n + 1):
        mode = "pty" if via == "litex_server" or i % 2 == 0 else "tcp"
        rc, took, summary = regress_once(out / f"run{i:02d}", traces, mode, via)
        walls.append(took)
        passed += rc == 0
        print(f"  run {i:2d} ({mode}): exit {rc}, {took:6.1f} s  {summary}", flush=True)
        if rc:
            print(f"  run {i} failed: see {out / f'run{i:02d}' / 'regress.log'}")
            break
    print(f"  {passed}/{n} in a row; wall time min {min(walls):.1f} s, median {sorted(walls)[len(walls) // 2]:.1f} s, "
          f"max {max(walls):.1f} s")
    return 0 if passed == n else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--regress", type=int, default=0, metavar="N", help="run the serial regression N times in a row")
    ap.add_argument("--via", choices=("uartbone", "litex_server"), default="uartbone")
    ap.add_argument("--traces", default=os.environ.get("NVDLA_TRACES", "../shared/nvdla/trace_tests/nv_small"))
    ap.add_argument("--out", default=None, help="folder for the runs (default: a new temporary folder)")
    ap.add_argument("--faults", type=int, default=20000, help="operations in the fault campaign")
    ap.add_argument("--skip-faults", action="store_true")
    ap.add_argument("--skip-wire", action="store_true")
    ap.add_argument("--seed", type=int, default=1, help="fault campaign seed")
    ap.add_argument("--fault", choices=("stop", "kill"), default=None,
                    help="with --regress 1: SIGSTOP or SIGKILL the board's server (litex_server, else the "
                         "emulator) --fault-after seconds into the run; prints its exit code and how long it "
                         "took to end after the fault")
    ap.add_argument("--fault-after", type=float, default=60.0)
    a = ap.parse_args()
    if a.fault:
        out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="bench-serial-"))
        mode = "pty" if a.via == "litex_server" else "tcp"
        rc, took, summary = regress_once(out / "fault", a.traces, mode, a.via, a.fault, a.fault_after)
        print(f"serial regression via {a.via}, {a.fault} after {a.fault_after:g} s: exit {rc}, {took:.1f} s  {summary}")
        raise SystemExit(0)
    if a.regress:
        out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="bench-serial-"))
        raise SystemExit(bench_regress(a.regress, a.traces, out, a.via))
    if not a.skip_wire:
        bench_wire()
    if not a.skip_faults:
        bench_faults(a.faults, a.seed)


if __name__ == "__main__":
    main()
