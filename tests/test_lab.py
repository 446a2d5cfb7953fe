"""Lab file parsing, board locking (two processes) and the serial target factory."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from nvdla_hil.drivers.transport import TransportError
from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.boards.emulator import RegisterFileTarget, serve_in_thread
from nvdla_hil.harness.boards.lab import (
    BoardBusyError,
    BoardLock,
    LabError,
    load_lab,
    lock_path,
    resolve_board,
)
from nvdla_hil.harness.targets.serial import open_serial_target


def _lab(tmp_path, body: str, name="lab.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


GOOD = """\
lock_dir: {lock}
boards:
  arty:
    url: {url}
    baud: 3000000
    profile: nv_small
    csr_base: 0x40000000
    dram_base: "0x10000000"
    dram_nvdla_base: 0x80000000
    dram_size: 0x1000000
    integrity: verify
    retries: 2
    response_timeout: 0.2
    board_timeout: 0.005
    reset_command: [{py}, -c, "print('reset')"]
  other:
    url: /dev/ttyUSB7
"""


def test_load_good(tmp_path):
    p = _lab(tmp_path, GOOD.format(lock=tmp_path, url="socket://127.0.0.1:1", py=sys.executable))
    lab = load_lab(p)
    cfg = lab.board("arty")
    assert cfg.baud == 3_000_000 and cfg.dram_base == 0x1000_0000 and cfg.dram_nvdla_base == 0x8000_0000
    assert cfg.board_map.dram(0x8000_0010, 4) == 0x1000_0010
    assert cfg.policy.mode == "verify" and cfg.policy.retries == 2 and cfg.policy.uniform_reads == 4
    assert cfg.reset_command == (sys.executable, "-c", "print('reset')")
    assert lab.board("other").baud == 115200  # default


def test_missing_board_lists_known(tmp_path):
    p = _lab(tmp_path, GOOD.format(lock=tmp_path, url="loop://", py="x"))
    with pytest.raises(LabError, match=r"no board 'nope'; known boards: arty, other"):
        load_lab(p).board("nope")


@pytest.mark.parametrize(
    "field,value,msg",
    [
        ("baud", "fast", "expected an integer"),
        ("profile", "nv_huge", "not one of"),
        ("integrity", "maybe", "'maybe' is not one of plain, verify"),
        ("reset_command", "'reboot now'", "list of arguments"),
        ("colour", "red", "unknown field"),
        ("response_timeout", "-1", "positive number"),
        ("uniform_reads", "1", "must be >= 2"),
    ],
)
def test_bad_field_names_file_board_field(tmp_path, field, value, msg):
    p = _lab(tmp_path, f"boards:\n  b1:\n    url: loop://\n    {field}: {value}\n")
    with pytest.raises(LabError, match=msg) as ei:
        load_lab(p)
    text = str(ei.value)
    assert f"{p}:4" in text and "'b1'" in text and repr(field) in text


def test_missing_url_and_bad_yaml(tmp_path):
    with pytest.raises(LabError, match="missing field 'url'"):
        load_lab(_lab(tmp_path, "boards:\n  b1:\n    baud: 9600\n"))
    with pytest.raises(LabError, match="not valid YAML"):
        load_lab(_lab(tmp_path, "boards: [\n", "bad.yaml"))
    with pytest.raises(LabError, match="cannot read lab file"):
        load_lab(tmp_path / "absent.yaml")


def test_env_selection(tmp_path, monkeypatch):
    p = _lab(tmp_path, GOOD.format(lock=tmp_path, url="loop://", py="x"))
    monkeypatch.setenv("NVDLA_HIL_LAB", str(p))
    monkeypatch.setenv("NVDLA_HIL_BOARD", "other")
    _, cfg = resolve_board(None, None)
    assert cfg.name == "other"
    monkeypatch.delenv("NVDLA_HIL_BOARD")
    with pytest.raises(LabError, match="no board chosen"):
        resolve_board(None, None)


def test_lock_path_sanitised(tmp_path):
    assert lock_path("socket://127.0.0.1:5000", tmp_path).name == "nvdla-hil-socket_127.0.0.1_5000.lock"
    link = tmp_path / "by-id"
    link.symlink_to(tmp_path / "lab.yaml")
    (tmp_path / "lab.yaml").write_text("")
    assert lock_path(str(link), tmp_path) == lock_path(str(tmp_path / "lab.yaml"), tmp_path)


_HOLDER = """
import sys, time
from nvdla_hil.harness.boards.lab import BoardLock
lock = BoardLock(sys.argv[1], sys.argv[2], board="arty")
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


def test_lock_contention_between_processes(tmp_path):
    url = "socket://127.0.0.1:9"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, url, str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BoardBusyError, match=rf"board 'arty' busy, held by PID {holder.pid} on .+ since "):
            BoardLock(url, tmp_path, board="arty").acquire()
        with pytest.raises(BoardBusyError, match="waited 0.2 s"):
            BoardLock(url, tmp_path, board="arty").acquire(wait=0.2)
    finally:
        holder.kill()  # a crash: the kernel drops the flock
        holder.wait()
    lock = BoardLock(url, tmp_path, board="arty")
    lock.acquire(wait=5)
    assert lock.held
    lock.release()


def test_open_serial_target_end_to_end(tmp_path):
    tgt = RegisterFileTarget()
    bmap = BoardMap(csr_base=0x4000_0000, dram_base=0x1000_0000, dram_nvdla_base=0x8000_0000, dram_size=0x100_0000)
    with serve_in_thread(tgt, bmap, mode="tcp", fsm_timeout=0.005) as emu:
        p = _lab(tmp_path, GOOD.format(lock=tmp_path, url=emu.url, py=sys.executable))
        with open_serial_target(p, "arty") as t:
            assert t.profile_name == "nv_small"
            assert t.board_map.dram_base == 0x1000_0000
            t.write32(0x5000, 0xCAFE)
            t.mem_write(0x8000_0000, b"\x01\x02\x03\x04")
            t.sync()
            assert tgt.regs[0x5000] == 0xCAFE
            assert tgt.memory.read(0x8000_0000, 4).tolist() == [1, 2, 3, 4]
            t.reset()  # runs the reset command, then resynchronises
            with pytest.raises(BoardBusyError, match="busy"):
                with open_serial_target(p, "arty"):
                    pass
        assert not lock_path(emu.url, tmp_path).read_text()  # released, holder info cleared
        with open_serial_target(p, "arty") as t:
            assert t.read32(0x1000) == 0x00303031


def test_unreachable_port_names_board(tmp_path):
    p = _lab(tmp_path, GOOD.format(lock=tmp_path, url=str(tmp_path / "ttyNOPE"), py="x"))
    with pytest.raises(TransportError, match=r"board 'arty' .*cannot open serial port"):
        with open_serial_target(p, "arty"):
            pass
    BoardLock(str(tmp_path / "ttyNOPE"), tmp_path).acquire()  # lock was released after the failure


# ---- the DRAM window: defaults that hold NVDLA's traces, a mismatch is a configuration error -----------
def test_default_window_holds_the_trace_addresses():
    """NVDLA's nv_small traces put surfaces at 0x80000000, 0x90000000 and 0xa0000000."""
    import argparse

    from nvdla_hil.harness.boards.emulator import add_subcommands

    m = BoardMap()
    for a in (0x8000_0000, 0x9000_0000, 0xA000_0000, 0xBFFF_FFFC):
        assert m.decode(m.dram(a, 4)) == ("dram", a)
    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers())
    args = ap.parse_args(["board-emu"])
    assert (args.dram_base, args.dram_nvdla_base, args.dram_size) == (0x8000_0000, 0x8000_0000, 0x4000_0000)
    cfg = load_lab_text_default()
    assert cfg.board_map == m


def load_lab_text_default():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "lab.yaml"
        p.write_text("boards:\n  b:\n    url: loop://\n")
        return load_lab(p).board("b")


@pytest.mark.slow  # a board probed until its window times out: `make test-slow`
def test_window_the_board_does_not_map_is_a_configuration_error(tmp_path):
    """A board serving 256 MiB while the lab says 1 GiB: opening the board (and the regression's
    pre-flight, probe_board) raises LabError naming both windows, never a link integrity error."""
    from nvdla_hil.harness.targets.serial import probe_board

    tgt = RegisterFileTarget()
    small = BoardMap(dram_size=0x1000_0000)
    with serve_in_thread(tgt, small, mode="tcp") as emu:
        p = _lab(tmp_path, f"lock_dir: {tmp_path}\nboards:\n  arty:\n    url: {emu.url}\n    baud: 3000000\n")
        for attempt in (lambda: open_serial_target(p, "arty").open(), lambda: probe_board(p, "arty")):
            with pytest.raises(LabError) as ei:
                attempt()
            msg = str(ei.value)
            assert "0x80000000..0xbfffffff" in msg  # the lab's window
            assert "0x80000000..~0x8fffffff" in msg  # what the board maps, found by probing
            assert "'arty'" in msg and str(p) in msg
        assert not tgt.memory.read(0x8000_0000, 4).any()  # probes put back what they changed
        # a lab window the board does map passes, and the probe leaves memory as it was
        tgt.memory.write(0x8FFF_FFFC, b"\x01\x02\x03\x04")
        p2 = _lab(tmp_path, f"lock_dir: {tmp_path}\nboards:\n  arty:\n    url: {emu.url}\n    dram_size: 0x10000000\n", "ok.yaml")
        probe_board(p2, "arty")
        assert tgt.memory.read(0x8FFF_FFFC, 4).tolist() == [1, 2, 3, 4]


def test_address_outside_the_window_is_a_board_config_error():
    from nvdla_hil.drivers.uartbone import BoardConfigError

    with pytest.raises(BoardConfigError, match=r"outside the DRAM window 0x80000000\+0x10000000 .*dram_size"):
        BoardMap(dram_size=0x1000_0000).dram(0xA000_0000, 16)


def test_labgrid_and_litex_server_entries(tmp_path):
    p = _lab(tmp_path, """\
        boards:
          farm:
            labgrid: {place: nvdla-arty-3, coordinator: "127.0.0.1:20408"}
          shared:
            transport: litex_server
            url: tcp://labhost:1234
        """)
    lab = load_lab(p)
    farm, shared = lab.board("farm"), lab.board("shared")
    assert (farm.labgrid_place, farm.labgrid_coordinator, farm.url) == ("nvdla-arty-3", "127.0.0.1:20408", "labgrid://nvdla-arty-3")
    assert shared.transport == "litex_server" and shared.url == "tcp://labhost:1234"
    for body, msg in [
        ("    labgrid: {place: x}\n    url: /dev/ttyUSB0\n", "leave 'url' out"),
        ("    labgrid: {place: 'a b'}\n", "labgrid place name"),
        ("    labgrid: {room: 5}\n", "mapping with 'place'"),
        ("    transport: litex_server\n    url: /dev/ttyUSB0\n", "tcp://HOST:PORT"),
        ("    transport: pcie\n    url: loop://\n", "not one of uartbone, litex_server"),
        ("    url: loop://\n    probe_window: maybe\n", "true or false"),
    ]:
        with pytest.raises(LabError, match=msg):
            load_lab(_lab(tmp_path, "boards:\n  b1:\n" + body, "bad.yaml"))
