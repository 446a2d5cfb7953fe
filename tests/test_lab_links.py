"""Every blocking call on a board's link ends: a wedged, stopped, slow or killed board (the board
emulator's fault modes) or ``litex_server`` (a real one, stopped with SIGSTOP or killed) becomes
``BoardDeadError`` naming the board and its URL, never a silent wait.

A call that should end is run on a helper thread; the test waits for it with a generous guard
(it would otherwise hang the suite) and reports the time it took, so the bound is visible without
a timed assert."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest


from nvdla_hil.drivers.uartbone import BoardDeadError, IntegrityPolicy, SerialTransport
from nvdla_hil.harness.boards.emulator import FaultConfig, RegisterFileTarget, serve_in_thread

from _lab import LitexBench

pytestmark = pytest.mark.slow  # real serial links and litex_server: `make test-slow`, CI's second step

GUARD = 120.0  # s: a call still blocked after this is the hang this file exists to prevent


def _ends(fn: Callable[[], object]) -> tuple[BaseException | None, float]:
    """Run ``fn`` on a thread; return what it raised and how long it took (fails if it never ends)."""
    box: dict[str, BaseException] = {}

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["e"] = e

    t0 = time.monotonic()
    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(GUARD)
    assert not th.is_alive(), f"the call was still blocked after {GUARD:g} s"
    return box.get("e"), time.monotonic() - t0


@pytest.mark.parametrize("mode", ["tcp", "pty"])
def test_wedged_board_mid_write_is_board_dead(mode):
    """A board that stops reading its link (``--wedge-after``) while a large posted memory write
    is going out: the write blocks in the OS, times out, and the board is declared dead."""
    with serve_in_thread(RegisterFileTarget(), faults=FaultConfig(wedge_after=4096), mode=mode) as emu:
        t = SerialTransport(emu.url, 3_000_000, policy=IntegrityPolicy("plain"), board_name="arty-w",
                            response_timeout=0.3)
        with t:
            data = np.full(32 << 20, 0x5A, dtype=np.uint8)
            err, took = _ends(lambda: t.mem_write(0x8000_0000, data))
            assert isinstance(err, BoardDeadError), repr(err)
            assert f"board 'arty-w' ({emu.url})" in str(err), str(err)
            print(f"wedged {mode} board: BoardDeadError after {took:.2f} s: {err}")
            err, _ = _ends(lambda: t.read32(0x1000))  # every later access fails at once
            assert isinstance(err, BoardDeadError) and "declared dead earlier" in str(err)
            t._dead = "closing"  # noqa: SLF001 - close without the fence a dead board cannot answer


def test_slow_board_within_its_timeout_is_not_dead():
    """``--delay`` below ``response_timeout``: every access answers, nothing is declared dead."""
    with serve_in_thread(RegisterFileTarget(), faults=FaultConfig(delay=0.05, seed=3), mode="tcp") as emu:
        with SerialTransport(emu.url, 3_000_000, policy=IntegrityPolicy("verify"), board_name="slow",
                             response_timeout=0.3) as t:
            for i in range(20):
                t.write32(0x5000 + 4 * i, 0x1111 * i, posted=False)
            assert t.read_burst(0x5000, 20) == [0x1111 * i for i in range(20)]
            assert t.stats.link_faults == 0


def test_board_that_goes_silent_is_board_dead():
    """A board that stops answering mid-session (``--silent-after``): after two sync reads get no
    answer, BoardDeadError naming the board (not a wait of the whole retry budget)."""
    with serve_in_thread(RegisterFileTarget(), mode="tcp") as emu:
        t = SerialTransport(emu.url, 3_000_000, policy=IntegrityPolicy("verify"), board_name="slow",
                            response_timeout=0.2)
        with t:
            emu.faults = FaultConfig(delay=0.0, silent_after=emu.stats.bytes_in)  # goes silent now
            err, took = _ends(lambda: t.read32(0x1000))
            assert isinstance(err, BoardDeadError) and f"board 'slow' ({emu.url})" in str(err), repr(err)
            assert "no answer to 2 sync reads" in str(err)
            print(f"silent board: BoardDeadError after {took:.2f} s")
            t._dead = "closing"  # noqa: SLF001


# ---- a real litex_server -------------------------------------------------------------------------------------

@pytest.fixture
def litex(tmp_path):
    b = LitexBench(tmp_path / "litex_server.log")
    yield b
    b.close()


def test_stopped_litex_server_mid_write_is_board_dead(litex):
    """litex_server stopped (SIGSTOP, as a wedged ``CommUART.read`` leaves it): a large write fills
    the socket buffers and a read gets no reply; both end as BoardDeadError naming board and URL."""
    from nvdla_hil.drivers.etherbone import EtherboneTransport

    t = EtherboneTransport(litex.url, policy=IntegrityPolicy("plain"), board_name="shared-1", response_timeout=0.3)
    with t:
        assert t.read32(0x1000) == 0x0030_3031
        os.kill(litex.server.pid, signal.SIGSTOP)
        data = np.zeros(64 << 20, dtype=np.uint8)
        err, took = _ends(lambda: t.mem_write(0x8000_0000, data))
        assert isinstance(err, BoardDeadError), repr(err)
        assert f"board 'shared-1' ({litex.url})" in str(err) and "stopped or wedged" in str(err), str(err)
        print(f"stopped litex_server, 64 MB write: BoardDeadError after {took:.2f} s: {err}")
        t._dead = "closing"  # noqa: SLF001
    # a fresh connection to the stopped server: the connect is accepted by the kernel, nothing answers
    t2 = EtherboneTransport(litex.url, board_name="shared-1", response_timeout=0.3)
    err, took = _ends(t2.open)
    assert isinstance(err, BoardDeadError) and "no answer to 2 sync reads" in str(err), repr(err)
    print(f"stopped litex_server, open: BoardDeadError after {took:.2f} s")


def test_stopped_litex_server_mid_read_is_board_dead(litex):
    from nvdla_hil.drivers.etherbone import EtherboneTransport

    t = EtherboneTransport(litex.url, policy=IntegrityPolicy("verify"), board_name="shared-1", response_timeout=0.3)
    with t:
        t.write_burst(0x5000, list(range(200)))
        os.kill(litex.server.pid, signal.SIGSTOP)
        err, took = _ends(lambda: t.read_burst(0x5000, 200))
        assert isinstance(err, BoardDeadError) and f"board 'shared-1' ({litex.url})" in str(err), repr(err)
        print(f"stopped litex_server, read: BoardDeadError after {took:.2f} s")
        t._dead = "closing"  # noqa: SLF001


def test_killed_litex_server_mid_write_is_board_dead(litex):
    from nvdla_hil.drivers.etherbone import EtherboneTransport

    t = EtherboneTransport(litex.url, policy=IntegrityPolicy("verify"), board_name="shared-1", response_timeout=0.3)
    with t:
        data = np.random.default_rng(0).integers(0, 256, 4 << 20, dtype=np.uint8)
        killer = threading.Timer(0.5, litex.server.kill)
        killer.start()
        err, took = _ends(lambda: t.mem_write(0x8000_0000, data))
        killer.join()
        assert isinstance(err, BoardDeadError) and f"board 'shared-1' ({litex.url})" in str(err), repr(err)
        print(f"killed litex_server mid-write: BoardDeadError after {took:.2f} s: {err}")
