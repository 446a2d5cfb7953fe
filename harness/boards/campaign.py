"""The fault campaign: random register and memory operations from the host driver through a
faulty emulated link, each checked against the board's own state, counting what came back
right, what the driver reported and what came back wrong without a report (must be none).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...drivers.transport import LinkIntegrityError, TransportTimeoutError
from ...drivers.uartbone import IntegrityPolicy, SerialTransport
from .faults import FaultConfig
from .regfile import RegisterFileTarget
from .server import serve_in_thread

CAMPAIGN_REGS = tuple(0x5000 + 4 * i for i in range(16))
CAMPAIGN_PORT = 0x900C  # SDP S_LUT_ACCESS_DATA on nv_small: a data port that does not read back
CAMPAIGN_MEM = 0x8000_0000
CAMPAIGN_OPS = ("write32+sync", "read32", "write_burst4+sync", "read_burst8", "port write (no readback)",
                "mem_write 24 B", "mem_read 24 B", "mem_read 24 B expecting")


def _value(rng: np.random.Generator) -> int:
    """A register value; a quarter are zeros (what NVDLA programming writes most)."""
    return 0 if rng.random() < 0.25 else int(rng.integers(0, 1 << 32))


def _truth(tgt: RegisterFileTarget, k: int) -> list[int]:
    """The first ``k`` campaign registers as the board holds them."""
    return [tgt.regs.get(CAMPAIGN_REGS[0] + 4 * i, 0) for i in range(k)]


def _mem_check_read(t: SerialTransport, tgt: RegisterFileTarget, rng: np.random.Generator) -> tuple[object, object]:
    """A check's read: its golden right, off by one byte (a DUT bug), or zeros."""
    off = int(rng.integers(0, 64))
    want_a = tgt.memory.read(CAMPAIGN_MEM + off, 24)
    exp = want_a.copy()
    kind = rng.random()
    if kind < 1 / 3:
        exp[int(rng.integers(0, 24))] ^= 0x40
    elif kind < 2 / 3:
        exp[:] = 0
    return t.mem_read(CAMPAIGN_MEM + off, 24, expect=exp).tolist(), want_a.tolist()


def _campaign_op(op: int, a: int, t: SerialTransport, tgt: RegisterFileTarget, rng: np.random.Generator,
                 counts: dict[str, int]) -> tuple[object, object]:
    """Run operation ``op`` (an index of :data:`CAMPAIGN_OPS`) at register ``a``; returns
    (got, want) as read back from the board right after the call. The port write has no
    read-back: a wrong payload is counted in ``counts["payload_wrong"]``."""
    got: object = None
    want: object = None
    if op == 0:
        want = _value(rng)
        t.write32(a, want)
        t.sync()
        got = tgt.regs.get(a, 0)
    elif op == 1:
        got = t.read32(a)
        want = tgt.regs.get(a, 0)
    elif op == 2:
        want = [0] * 4 if rng.random() < 0.25 else rng.integers(0, 1 << 32, 4).tolist()
        t.write_burst(CAMPAIGN_REGS[0], want)
        t.sync()
        got = _truth(tgt, 4)
    elif op == 3:
        got = t.read_burst(CAMPAIGN_REGS[0], 8)
        want = _truth(tgt, 8)
    elif op == 4:
        v = int(rng.integers(0, 1 << 32))
        t.write32(CAMPAIGN_PORT, v)
        counts["payload_wrong"] += tgt.regs.get(CAMPAIGN_PORT) != v
    elif op == 5:
        off = int(rng.integers(0, 64))  # unaligned ends: read-modify-write
        data = (np.zeros(24, np.uint8) if rng.random() < 0.25
                else rng.integers(0, 256, 24, dtype=np.uint8))
        t.mem_write(CAMPAIGN_MEM + off, data)
        t.sync()
        want, got = data.tolist(), tgt.memory.read(CAMPAIGN_MEM + off, 24).tolist()
    elif op == 6:
        off = int(rng.integers(0, 64))
        got = t.mem_read(CAMPAIGN_MEM + off, 24).tolist()
        want = tgt.memory.read(CAMPAIGN_MEM + off, 24).tolist()
    else:
        got, want = _mem_check_read(t, tgt, rng)
    return got, want


def _stray_writes(write_log: list[tuple[str, int, int]]) -> int:
    """Bus writes the campaign never asked for (a corrupted address that reached the bus)."""
    intended = {*CAMPAIGN_REGS, CAMPAIGN_PORT}
    return sum(1 for k, addr, _ in write_log
               if (k == "csr" and addr not in intended) or (k == "dram" and not 0 <= addr - CAMPAIGN_MEM < 96))


def fault_campaign(
    n_ops: int,
    faults: FaultConfig,
    *,
    mode: str = "pty",
    policy: str = "verify",
    retries: int = 5,
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Random register and memory operations from a :class:`SerialTransport` through a faulty
    emulated link to a :class:`RegisterFileTarget`; each result is checked against the
    target's own state (the truth) right after the call returns, when the board is idle.

    A quarter of the written values and buffers are zeros: NVDLA programming writes 0 far
    more than anything else, and 0 is also what a misaddressed read returns. Per operation
    kind: ``ok`` (returned and correct), ``reported`` (LinkIntegrityError or
    TransportTimeoutError), ``silent_wrong`` (returned, wrong: the figure that must be 0);
    for the port, ``payload_wrong`` (framing proven, payload unprovable without a checksum).
    ``silent`` lists the first wrong results for triage."""
    tgt = RegisterFileTarget()
    rng = np.random.default_rng(faults.seed + 100)
    per_op = {name: {"ok": 0, "reported": 0, "silent_wrong": 0} for name in CAMPAIGN_OPS}
    per_op[CAMPAIGN_OPS[4]]["payload_wrong"] = 0
    silent: list[str] = []
    worst = 0.0
    # The emulator shares the CPU with the host: its FSM timer (5 ms) is kept well below the
    # driver's quiet window (1.5 x 10 ms + 10 ms) so a starved emulator thread cannot answer late;
    # the bus timeout (a corrupted address reaching unmapped space) shrinks with it.
    with serve_in_thread(tgt, faults=faults, mode=mode, fsm_timeout=0.005, bus_timeout=0.0005, log_writes=True) as emu:
        # 0.5 % lost bytes each way silence ~6 % of requests: two silent resyncs in a row are
        # then a fault, not a dead board
        t = SerialTransport(emu.url, 3_000_000, policy=IntegrityPolicy(policy, retries, dead_after=retries + 1),
                            readback_ok=lambda a: a != CAMPAIGN_PORT, response_timeout=0.03, board_timeout=0.01)
        t.open()
        t0 = time.perf_counter()
        for i in range(n_ops):
            if progress is not None and i and i % 2000 == 0:
                progress(i, time.perf_counter() - t0)
            op = int(rng.integers(0, len(CAMPAIGN_OPS)))
            a = int(rng.choice(CAMPAIGN_REGS))
            r = per_op[CAMPAIGN_OPS[op]]
            s0 = time.perf_counter()
            try:
                got, want = _campaign_op(op, a, t, tgt, rng, r)
                r["ok"] += 1
                if got != want:
                    r["silent_wrong"] += 1
                    if len(silent) < 20:
                        silent.append(f"op {i} {CAMPAIGN_OPS[op]}: got {got!r:.120} want {want!r:.120}")
            except (LinkIntegrityError, TransportTimeoutError):
                r["reported"] += 1
            worst = max(worst, time.perf_counter() - s0)
        elapsed = time.perf_counter() - t0
        t.close()
        total = {k: sum(d[k] for d in per_op.values()) for k in ("ok", "reported", "silent_wrong")}
        return {"ops": n_ops, "per_op": per_op, "total": total, "silent": silent,
                "stray_bus_writes": _stray_writes(emu.stats.write_log), "link": t.stats.snapshot(),
                "dropped": emu.stats.dropped, "corrupted": emu.stats.corrupted,
                "bytes_in": emu.stats.bytes_in, "bytes_out": emu.stats.bytes_out,
                "elapsed_s": elapsed, "slowest_op_s": worst}
