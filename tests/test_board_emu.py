"""The UARTBone bridge model, byte by byte (frames worked by hand from LiteX's Stream2Wishbone),
fault injection determinism and the board-emu CLI."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import serial
from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.boards.emulator import (
    BridgeCore,
    EmuStats,
    FaultConfig,
    RegisterFileTarget,
    add_subcommands,
    serve_in_thread,
)
from nvdla_hil.harness.boards.faults import ByteFaults

MAP = BoardMap(csr_base=0x4000_0000, dram_base=0x8000_0000, dram_nvdla_base=0x8000_0000, dram_size=0x100_0000)


@pytest.fixture
def core():
    tgt = RegisterFileTarget()
    tgt.open()
    c = BridgeCore(tgt, MAP, fsm_timeout=0.1, log_writes=True, sleep=lambda s: None)
    yield c, tgt
    tgt.close()


def test_write_then_read_frames(core):
    c, tgt = core
    # write 0xA1B2C3D4 to CSB 0x9008: board 0x40009008, word 0x10002402
    assert c.feed(bytes.fromhex("01 01 10002402 A1B2C3D4"), 0.0) == b""
    assert tgt.regs[0x9008] == 0xA1B2C3D4
    # read it back plus the next register (never written, reads 0)
    assert c.feed(bytes.fromhex("02 02 10002402"), 0.0) == bytes.fromhex("A1B2C3D4 00000000")
    # HW_VERSION (CSB 0x1000 -> word 0x10000400)
    assert c.feed(bytes.fromhex("02 01 10000400"), 0.0) == bytes.fromhex("00303031")


def test_fixed_burst_and_split_delivery(core):
    c, tgt = core
    frame = bytes.fromhex("03 03 10002403 00000001 00000002 00000003")
    for i in range(len(frame)):  # one byte at a time, as a UART delivers it
        assert c.feed(frame[i : i + 1], 0.0) == b""
    assert tgt.regs[0x900C] == 3
    assert [v for k, a, v in c.stats.write_log] == [1, 2, 3]
    tgt.regs[0x900C] = 9
    assert c.feed(bytes.fromhex("04 02 10002403"), 0.0) == bytes.fromhex("00000009 00000009")


def test_memory_is_little_endian_on_the_bus(core):
    c, tgt = core
    c.feed(bytes.fromhex("01 01 20000001 11223344"), 0.0)  # word 0x20000001 = byte 0x80000004
    assert tgt.memory.read(0x8000_0004, 4).tolist() == [0x44, 0x33, 0x22, 0x11]


def test_unknown_command_consumes_length_and_address(core):
    c, tgt = core
    out = c.feed(bytes.fromhex("07 05 10002402") + bytes.fromhex("01 01 10002402 00000005"), 0.0)
    assert out == b"" and tgt.regs[0x9008] == 5 and c.stats.bad_commands == 1


def test_unmapped_bus_times_out_reads_all_ones(core):
    """LiteX's wishbone.Timeout: no slave answers, so after the bus timeout the access is acked
    with dat_r = 0xFFFFFFFF (a write is dropped); bytes arriving meanwhile are lost."""
    c, tgt = core
    slept = []
    c.sleep = slept.append
    assert c.feed(bytes.fromhex("01 01 00000000 FFFFFFFF"), 0.0) == b""
    assert c.feed(bytes.fromhex("02 02 00000000"), 0.0) == bytes.fromhex("FFFFFFFF FFFFFFFF")
    assert c.stats.unmapped == 3 and slept == [0.010] * 3
    # the read command sent right behind a stalled write arrives while the bridge waits: lost
    assert c.feed(bytes.fromhex("01 01 00000000 00000001 02 01 10000400"), 0.0) == b""
    assert c.feed(bytes.fromhex("02 01 10000400"), 0.0) == bytes.fromhex("00303031")


def test_unmapped_burst_is_cut_by_the_fsm_timer(core):
    """255 unmapped words would take 2.55 s of bus timeouts; the 100 ms FSM timer resets the
    bridge first: 9 words (90 ms) go out, the tenth bus wait is cut."""
    c, _ = core
    slept = []
    c.sleep = slept.append
    out = c.feed(bytes.fromhex("02 FF 00000000"), 0.0)
    assert out == bytes.fromhex("FFFFFFFF") * 9 and c.stats.fsm_timeouts == 1
    assert 0.0998 < sum(slept) <= 0.100  # bus waits + 36 bytes on the wire = the 100 ms


def test_zero_length_read_streams_until_the_timer(core):
    """``words_count == length - 1`` never holds for length 0 (an 8-bit counter against
    Migen's 9-bit 511): the bridge sends words until the 100 ms timer, 30,000 bytes at 3 Mbaud."""
    c, tgt = core
    tgt.regs[0x9008] = 0x11223344
    out = c.feed(bytes.fromhex("04 00 10002402"), 0.0)
    assert len(out) == 30_000 and out[:8] == bytes.fromhex("11223344 11223344")
    assert c.stats.cut_replies == 1


def test_zero_length_write_takes_words_until_the_timer(core):
    c, tgt = core
    c.feed(bytes.fromhex("01 00 10001400") + np.arange(1, 301, dtype=">u4").tobytes(), 0.0)  # CSB 0x5000...
    assert [tgt.regs[0x5000 + 4 * i] for i in (0, 299)] == [1, 300]
    c.feed(bytes.fromhex("00000099"), 0.05)  # still inside the command: word 301
    assert tgt.regs[0x5000 + 4 * 300] == 0x99
    c.tick(0.2)  # the timer ends it; the next bytes are a new command
    assert c.feed(bytes.fromhex("02 01 10001400"), 0.21) == bytes.fromhex("00000001")


def test_long_read_reply_is_cut_by_the_timer():
    """At 115200 baud a 255-word reply takes 88.6 ms: it fits. At 9600 baud only the bytes the
    PHY starts within 100 ms go out (96)."""
    tgt = RegisterFileTarget()
    tgt.open()
    c = BridgeCore(tgt, MAP, baud=115200)
    assert len(c.feed(bytes.fromhex("02 FF 20000000"), 0.0)) == 1020
    c = BridgeCore(tgt, MAP, baud=9600)
    assert len(c.feed(bytes.fromhex("02 FF 20000000"), 0.0)) == 96 and c.stats.cut_replies == 1


def test_fsm_timer_drops_partial_command(core):
    c, tgt = core
    # two words announced, one and a half sent: the first word is already on the bus
    c.feed(bytes.fromhex("01 02 10002402 00000001 0000"), 0.0)
    assert tgt.regs[0x9008] == 1
    c.tick(0.2)  # 100 ms timer fires
    assert c.stats.fsm_timeouts == 1
    c.feed(bytes.fromhex("01 01 10002404 00000007"), 0.21)  # parsed as a new command
    assert c.stats.write_log == [("csr", 0x9008, 1), ("csr", 0x9010, 7)]


def test_input_during_read_response_is_lost(core):
    c, tgt = core
    tgt.regs[0x9008] = 0x55
    # a write sent right behind a read command arrives while SEND-DATA holds ready low
    out = c.feed(bytes.fromhex("02 01 10002402 01 01 10002403 00000001"), 0.0)
    assert out == bytes.fromhex("00000055")
    assert c.stats.lost_while_sending == 4 and 0x900C not in tgt.regs


def test_faults_are_seeded_and_counted():
    data = bytes(range(256)) * 40
    a, b = EmuStats(), EmuStats()
    fa = ByteFaults(FaultConfig(drop=0.01, corrupt=0.01, seed=5), a).apply(data)
    fb = ByteFaults(FaultConfig(drop=0.01, corrupt=0.01, seed=5), b).apply(data)
    assert fa == fb and len(fa) == len(data) - a.dropped
    assert 40 < a.dropped < 180 and 40 < a.corrupted < 180
    with pytest.raises(ValueError):
        FaultConfig(drop=1.5)


@pytest.mark.parametrize("mode", ["pty", "tcp"])
def test_raw_pyserial_client(mode):
    tgt = RegisterFileTarget()
    with serve_in_thread(tgt, mode=mode) as emu:
        port = serial.serial_for_url(emu.url, baudrate=115200, timeout=2)
        try:
            port.write(bytes.fromhex("01 01 10002402 DEADBEEF 02 01 10002402"))  # CSB 0x9008
            assert port.read(4) == bytes.fromhex("DEADBEEF")
            port.write(bytes.fromhex("02 01 10000400"))
            assert port.read(4) == bytes.fromhex("00303031")
        finally:
            port.close()


def test_cli_registers_board_emu():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd")
    add_subcommands(sub)
    args = ap.parse_args(["board-emu", "--tcp", "0", "--drop", "0.01", "--seed", "3", "--backend", "regfile"])
    assert args.tcp == 0 and args.drop == 0.01 and args.seed == 3 and callable(args.func)


def test_cli_serves_pty_in_subprocess():
    proc = subprocess.Popen(
        [sys.executable, "-m", "nvdla_hil.harness.boards.emulator", "board-emu", "--pty", "--backend", "regfile"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        path = proc.stdout.readline().strip()
        assert os.path.exists(path)
        port = serial.serial_for_url(path, baudrate=115200, timeout=5)
        port.write(bytes.fromhex("02 01 10000400"))
        assert port.read(4) == bytes.fromhex("00303031")
        port.close()
    finally:
        proc.terminate()
        proc.wait(10)


def test_memory_burst_bulk_path(core):
    c, tgt = core
    words = np.arange(255, dtype=np.uint32) * 0x01010101
    c.feed(bytes.fromhex("01 FF 20000000") + words.astype(">u4").tobytes(), 0.0)
    assert np.array_equal(tgt.memory.read(0x8000_0000, 1020).view("<u4"), words)
    assert c.feed(bytes.fromhex("02 FF 20000000"), 0.0) == words.astype(">u4").tobytes()


# ---- NVDLA computes while the bridge serves ---------------------------------------------------------
class _GatedUnit(RegisterFileTarget):
    """A register file with one launch register (named D_OP_ENABLE, as NVDLA's) whose write
    computes until the test opens ``gate`` (an event, not a duration: the layer cannot finish
    before the test says so, however slow the machine) and then raises a status bit."""

    LAUNCH, STATUS = 0x5008, 0x100C

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

        class _Reg:
            def __init__(self, address: int, name: str) -> None:
                self.address, self.name, self.block = address, name, "PDP"

        class _Map:
            def registers(self):
                return [_Reg(_GatedUnit.LAUNCH, "D_OP_ENABLE")]

        self.regmap = _Map()

    def _write32(self, address: int, value: int, posted: bool) -> None:
        super()._write32(address, value, posted)
        if address == self.LAUNCH and value & 1:
            self.gate.wait()
            self.regs[self.STATUS] = self.regs.get(self.STATUS, 0) | 1


def _open_when(ready, gate: threading.Event) -> None:  # noqa: ANN001
    while not ready():
        time.sleep(0.001)
    gate.set()


@pytest.mark.parametrize("mode", ["pty", "tcp"])
def test_layer_computes_off_the_serving_thread(mode):
    """The launch write returns while the layer cannot have finished; status polls are answered
    (each within the link's response_timeout, no retry) and see the unit busy (0) while it
    computes; the bit rises when it is done; a read of a register written behind the launch
    waits for the layer, so it sees the value in order.

    Orderings, not durations: the layer finishes only when the test opens its gate, so "while it
    computes" holds by construction, and the link's response_timeout is made long (5 s) because
    only an answer that never comes (a bridge computing on its serving thread) must fail, not one
    that a loaded machine delays. Such a bridge fails the launch write (no answer to its sync
    read: the link declares the board dead) or a poll."""
    from nvdla_hil.drivers.uartbone import IntegrityPolicy, SerialTransport

    tgt = _GatedUnit()
    polls = 20
    with serve_in_thread(tgt, mode=mode) as emu:
        try:
            with SerialTransport(emu.url, 3_000_000, policy=IntegrityPolicy("plain"), response_timeout=5.0) as t:
                t.write32(_GatedUnit.LAUNCH, 1, posted=False)  # the write, then a sync read answered meanwhile
                for _ in range(polls):
                    assert t.read32(_GatedUnit.STATUS) == 0  # answered, and busy: the gate is still shut
                assert not tgt.gate.is_set() and t.stats.link_faults == 0
                assert emu.stats.async_writes == 1 and emu.stats.reads_while_busy >= polls
                tgt.gate.set()
                while not t.read32(_GatedUnit.STATUS):  # the bit rises once the layer is done
                    pass
                # a register written while the unit computes reads back in order: the read reaches
                # the bridge while the layer still computes (the gate opens only once it has) and
                # is answered after the layer and the write queued behind it
                tgt.gate.clear()
                reads = emu.stats.bus_reads
                opener = threading.Thread(target=_open_when, args=(lambda: emu.stats.bus_reads > reads, tgt.gate))
                opener.start()
                t.write32(_GatedUnit.LAUNCH, 3)
                t.write32(0x5010, 0xABC)
                assert t.read32(0x5010) == 0xABC
                assert tgt.gate.is_set()  # not answered before the layer was let finish
                opener.join()
                assert emu.stats.async_writes == 2 and t.stats.link_faults == 0
        finally:
            tgt.gate.set()  # never leave the emulator's worker waiting


def test_model_layer_does_not_stall_the_link(trace_root):
    """A heavy convolution trace over the link with the default 0.5 s response timeout: the
    layer (about a second of model time) is computed while the bridge answers status polls."""
    from nvdla_hil.drivers.uartbone import SerialTransport
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.targets.serial import readback_rules
    from nvdla_hil.harness.traces import run_trace

    ok, mask, pops = readback_rules("nv_small")
    with serve_in_thread(ModelTarget("nv_small"), mode="tcp") as emu:
        with SerialTransport(emu.url, 3_000_000, readback_ok=ok, readback_mask=mask, read_pops=pops,
                             reset_address=0xF000_0000) as t:
            res = run_trace(trace_root / "dc_24x44x14_5x3x14x41_int8_0", t)
            assert res.status == "passed", res.summary()
            # no response came late (a stall shows as a short response or a timeout, a link fault
            # that is not a read mismatch). Mismatches are status registers that changed between
            # the two agreeing reads (CDMA S_CBUF_FLUSH_STATUS after reset, a unit finishing
            # between them): how many depends on the machine's load, so only their kind is asserted.
            assert t.stats.link_faults == t.stats.verify_mismatches <= 8
            assert emu.stats.async_writes >= 1 and emu.stats.reads_while_busy > 0
