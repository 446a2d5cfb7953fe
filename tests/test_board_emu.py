"""The UARTBone bridge model, byte by byte (frames worked by hand from LiteX's Stream2Wishbone),
fault injection determinism and the board-emu CLI."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import pytest
import serial
from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.board_emu import (
    BridgeCore,
    EmuStats,
    FaultConfig,
    RegisterFileTarget,
    _Faults,
    add_subcommands,
    serve_in_thread,
)

MAP = BoardMap(csr_base=0x4000_0000, dram_base=0x8000_0000, dram_nvdla_base=0x8000_0000, dram_size=0x100_0000)


@pytest.fixture
def core():
    tgt = RegisterFileTarget()
    tgt.open()
    c = BridgeCore(tgt, MAP, fsm_timeout=0.1, log_writes=True)
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


def test_unmapped_reads_zero_writes_ignored(core):
    c, _ = core
    assert c.feed(bytes.fromhex("01 01 00000000 FFFFFFFF 02 01 00000000"), 0.0) == bytes(4)
    assert c.stats.unmapped == 2


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
    fa = _Faults(FaultConfig(drop=0.01, corrupt=0.01, seed=5), a).apply(data)
    fb = _Faults(FaultConfig(drop=0.01, corrupt=0.01, seed=5), b).apply(data)
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
        [sys.executable, "-m", "nvdla_hil.harness.board_emu", "board-emu", "--pty", "--backend", "regfile"],
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
