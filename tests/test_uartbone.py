"""UARTBone framing (bytes worked by hand from LiteX's Stream2Wishbone / CommUART) and the
SerialTransport end to end through the board emulator (pty and TCP)."""

from __future__ import annotations

import numpy as np
import pytest
from nvdla_hil.drivers.transport import LinkIntegrityError, TransportTimeoutError
from nvdla_hil.drivers.uartbone import (
    BoardMap,
    IntegrityPolicy,
    SerialTransport,
    decode_words,
    encode_read,
    encode_write,
    max_burst_words,
)
from nvdla_hil.harness.board_emu import FaultConfig, RegisterFileTarget, serve_in_thread

LUT_PORT = 0x900C  # stands for a non-readback data port in these tests


# ---- framing: hand-worked byte strings ------------------------------------------------------------
def test_write_incr_single_word():
    # CommUART.write(0x40009008, 0x12345678): cmd 0x01, len 1, addr//4 = 0x10002402 big-endian,
    # then the word big-endian.
    assert encode_write(0x40009008 >> 2, [0x12345678]) == bytes.fromhex("01 01 10002402 12345678")


def test_write_fixed_burst():
    # Two words to one port: cmd 0x03 (CMD_WRITE_BURST_FIXED), len 2.
    assert encode_write(0x4000900C >> 2, [1, 0xA0B0C0D0], incr=False) == bytes.fromhex(
        "03 02 10002403 00000001 A0B0C0D0"
    )


def test_read_commands():
    assert encode_read(0x80000010 >> 2, 3) == bytes.fromhex("02 03 20000004")
    assert encode_read(0x80000010 >> 2, 255, incr=False) == bytes.fromhex("04 FF 20000004")


def test_decode_big_endian_words():
    assert decode_words(bytes.fromhex("00303031 DEADBEEF")).tolist() == [0x00303031, 0xDEADBEEF]
    with pytest.raises(ValueError):
        decode_words(b"\x00\x01\x02")


@pytest.mark.parametrize("n", [0, 256])
def test_burst_length_limits(n):
    with pytest.raises(ValueError):
        encode_read(0, n)


def test_burst_size_from_baud():
    # CommUART rule: 50 ms budget, 10 bits a byte, 6 header bytes: 115200 -> (576-6)//4 = 142.
    assert max_burst_words(115200, write=True) == 142
    assert max_burst_words(3_000_000, write=True) == 255
    assert max_burst_words(9600, write=True) == 10


def test_board_map():
    m = BoardMap(csr_base=0x4000_0000, dram_base=0x1000_0000, dram_nvdla_base=0x8000_0000, dram_size=0x100_0000)
    assert m.csr(0x1000) == 0x4000_1000
    assert m.dram(0x8000_0010, 4) == 0x1000_0010
    assert m.decode(0x1000_0010) == ("dram", 0x8000_0010)
    with pytest.raises(ValueError, match="DRAM window"):
        m.dram(0x8100_0000 - 2, 4)
    with pytest.raises(ValueError, match="overlap"):
        BoardMap(csr_base=0x1000_0000, dram_base=0x1000_0000)


# ---- end to end through the emulator ----------------------------------------------------------------
def _transport(url, policy="verify", **kw):
    kw.setdefault("response_timeout", 0.2)
    kw.setdefault("board_timeout", 0.005)
    return SerialTransport(url, 3_000_000, policy=IntegrityPolicy(policy), readback_ok=lambda a: a != LUT_PORT, **kw)


@pytest.fixture(params=[("pty", "plain"), ("pty", "verify"), ("tcp", "plain"), ("tcp", "verify")],
                ids=lambda p: "-".join(p))
def link(request):
    mode, policy = request.param
    tgt = RegisterFileTarget()
    with serve_in_thread(tgt, mode=mode, fsm_timeout=0.005) as emu:
        with _transport(emu.url, policy) as t:
            yield t, tgt, emu


def test_register_round_trip(link):
    t, tgt, _ = link
    assert t.sync_value == 0x00303031
    t.write32(0x9008, 0x1234ABCD)
    assert t.read32(0x9008) == 0x1234ABCD
    vals = [(i * 0x01010101) & 0xFFFFFFFF for i in range(300)]  # more than one burst
    t.write_burst(0x5000, vals)
    assert t.read_burst(0x5000, 300) == vals
    t.sync()
    assert [tgt.regs[0x5000 + 4 * i] for i in range(300)] == vals


def test_fixed_burst_to_port(link):
    t, tgt, emu = link
    t.write_burst(LUT_PORT, list(range(257)), incr=False)
    t.sync()
    assert tgt.regs[LUT_PORT] == 256
    assert emu.stats.bus_writes >= 257
    tgt.regs[0x9010] = 7
    assert t.read_burst(0x9010, 3, incr=False) == [7, 7, 7]


def test_memory_round_trip_unaligned(link):
    t, tgt, _ = link
    tgt.memory.write(0x8000_0000, np.full(16, 0xEE, dtype=np.uint8))
    data = np.random.default_rng(3).integers(0, 256, 5003, dtype=np.uint8)
    t.mem_write(0x8000_0003, data)
    assert np.array_equal(t.mem_read(0x8000_0003, data.size), data)
    t.sync()
    assert np.array_equal(tgt.memory.read(0x8000_0003, data.size), data)
    # bytes around the unaligned head/tail keep their old value (read-modify-write)
    assert tgt.memory.read(0x8000_0000, 3).tolist() == [0xEE] * 3
    assert tgt.memory.read(0x8000_0003 + 5003, 2).tolist() == [0, 0]
    # little-endian bus bytes: word at 0x80000000 holds bytes EE EE EE data[0]
    assert t.read32 is not None and t.mem_read(0x8000_0000, 4).tolist() == [0xEE, 0xEE, 0xEE, int(data[0])]


def test_writes_are_pipelined(link):
    t, _, _ = link
    t.sync()
    rt = t.stats.round_trips
    for i in range(20):
        t.write32(LUT_PORT if t.policy.mode == "plain" else 0x5000 + 4 * i, i)
    # plain: no round trip per write; verify: the readback writes wait for one verification pass
    assert t.stats.round_trips == rt
    t.sync()


def test_wait_irq_polls_intr_status(link):
    t, tgt, _ = link
    assert t.wait_irq(0.0) is False
    tgt.regs[0x100C] = 1 << 6
    assert t.wait_irq(1.0) is True


def test_silent_link_times_out():
    tgt = RegisterFileTarget()
    with serve_in_thread(tgt, faults=FaultConfig(silent_after=200), fsm_timeout=0.005) as emu:
        with _transport(emu.url, "verify", response_timeout=0.05) as t:
            with pytest.raises((TransportTimeoutError, LinkIntegrityError)):
                for i in range(100):
                    t.read32(0x5000)


def test_non_idempotent_write_is_not_repeated():
    # The link dies right after the port write's bytes: the sync read that should prove
    # the framing never comes back, so the write is reported, not retried.
    tgt = RegisterFileTarget()
    with serve_in_thread(tgt, fsm_timeout=0.005) as emu:
        with _transport(emu.url, "verify", response_timeout=0.05) as t:
            emu.faults = FaultConfig(silent_after=emu.stats.bytes_in + 10)
            with pytest.raises((LinkIntegrityError, TransportTimeoutError)):
                t.write32(LUT_PORT, 5)
            assert tgt.regs.get(LUT_PORT) == 5  # it did happen once, and only once
            assert emu.stats.bus_writes == 1


# ---- fault injection: every operation correct or reported -------------------------------------------------
REGS = [0x5000 + 4 * i for i in range(16)]


def run_campaign(n_ops: int, drop: float, corrupt: float, seed: int, mode: str = "pty") -> dict:
    """Random register ops on a faulty link; each result is checked against the target's own
    state (the truth), right after the call returns (the board is idle then)."""
    tgt = RegisterFileTarget()
    rng = np.random.default_rng(seed + 100)
    res = {"ops": 0, "ok": 0, "reported": 0, "silent_wrong": 0, "port_writes_ok": 0, "port_writes_wrong": 0}
    faults = FaultConfig(drop=drop, corrupt=corrupt, seed=seed)
    # The emulator shares the CPU with the test: its FSM timer (5 ms) is kept well below the
    # driver's quiet window (1.5 x 10 ms + 10 ms) so a starved emulator thread cannot answer late.
    with serve_in_thread(tgt, faults=faults, mode=mode, fsm_timeout=0.005, log_writes=True) as emu:
        t = _transport(emu.url, "verify", response_timeout=0.03, board_timeout=0.01)
        t.policy = IntegrityPolicy("verify", retries=5)
        t.open()
        for _ in range(n_ops):
            op = int(rng.integers(0, 5))
            a = int(rng.choice(REGS))
            res["ops"] += 1
            try:
                if op == 0:
                    v = int(rng.integers(0, 1 << 32))
                    t.write32(a, v)
                    t.sync()
                    res["silent_wrong"] += tgt.regs.get(a, 0) != v
                elif op == 1:
                    res["silent_wrong"] += t.read32(a) != tgt.regs.get(a, 0)
                elif op == 2:
                    vals = rng.integers(0, 1 << 32, 4).tolist()
                    t.write_burst(REGS[0], vals)
                    t.sync()
                    res["silent_wrong"] += [tgt.regs.get(REGS[0] + 4 * k, 0) for k in range(4)] != vals
                elif op == 3:
                    got = t.read_burst(REGS[0], 8)
                    res["silent_wrong"] += got != [tgt.regs.get(REGS[0] + 4 * k, 0) for k in range(8)]
                else:  # non-readback port: framing is proven, payload cannot be
                    v = int(rng.integers(0, 1 << 32))
                    t.write32(LUT_PORT, v)
                    key = "port_writes_ok" if tgt.regs.get(LUT_PORT) == v else "port_writes_wrong"
                    res[key] += 1
                res["ok"] += 1
            except (LinkIntegrityError, TransportTimeoutError):
                res["reported"] += 1
        t.close()
        intended = {*REGS, LUT_PORT}
        res["stray_bus_writes"] = sum(1 for k, a, _ in emu.stats.write_log if not (k == "csr" and a in intended))
        res["link"] = t.stats.snapshot()
        res["dropped"], res["corrupted"] = emu.stats.dropped, emu.stats.corrupted
    return res


def test_fault_injection_no_silent_wrong_values():
    res = run_campaign(400, drop=0.005, corrupt=0.005, seed=1)
    print(res)
    assert res["ops"] == 400
    assert res["dropped"] > 0 and res["corrupted"] > 0
    assert res["silent_wrong"] == 0
    assert res["ok"] + res["reported"] == 400
    assert res["link"]["resyncs"] > 0
