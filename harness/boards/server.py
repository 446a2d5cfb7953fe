"""The emulated board's link endpoints: :class:`BoardEmulator` serves a :class:`BridgeCore` over a
pseudo-terminal or TCP on 127.0.0.1, with the faults of a :class:`FaultConfig` on the wire;
:func:`serve_in_thread` runs one for the length of a ``with`` block.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
import tty
from collections.abc import Iterator

import numpy as np

from ...drivers.transport import Transport
from ...drivers.uartbone import FSM_TIMEOUT, BoardMap
from .bridge import DEFAULT_BAUD, DEFAULT_BUS_TIMEOUT, DEFAULT_RESET_ADDRESS, BridgeCore, EmuStats
from .faults import ByteFaults, FaultConfig


class BoardEmulator:
    """Serve a :class:`BridgeCore` over a pty (``mode="pty"``) or TCP on 127.0.0.1."""

    def __init__(
        self,
        target: Transport,
        board_map: BoardMap | None = None,
        faults: FaultConfig | None = None,
        *,
        mode: str = "pty",
        tcp_port: int = 0,
        fsm_timeout: float = FSM_TIMEOUT,
        log_writes: bool = False,
        reset_address: int | None = None,
        bus_timeout: float = DEFAULT_BUS_TIMEOUT,
        baud: int = DEFAULT_BAUD,
        threaded: bool = True,
    ) -> None:
        if mode not in ("pty", "tcp"):
            raise ValueError(f"board-emu mode {mode!r} is not 'pty' or 'tcp'")
        self.target = target
        self.board_map = board_map or BoardMap()
        self.faults = faults or FaultConfig()
        self.stats = EmuStats()
        self.core = BridgeCore(target, self.board_map, self.stats, fsm_timeout=fsm_timeout, log_writes=log_writes,
                               reset_address=DEFAULT_RESET_ADDRESS if reset_address is None else reset_address,
                               bus_timeout=bus_timeout, baud=baud, threaded=threaded)
        self._faults = ByteFaults(self.faults, self.stats)
        self._delay_rng = np.random.default_rng(self.faults.seed + 1)
        self._vclock = self._vlast = time.monotonic()
        self.mode = mode
        self._stop = threading.Event()
        self._master: int | None = None
        self._slave: int | None = None
        self._lsock: socket.socket | None = None
        if mode == "pty":
            self._master, self._slave = os.openpty()
            tty.setraw(self._slave)
            os.set_blocking(self._master, False)
            self.url = os.ttyname(self._slave)
        else:
            self._lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._lsock.bind(("127.0.0.1", tcp_port))
            self._lsock.listen(1)
            self.url = f"socket://127.0.0.1:{self._lsock.getsockname()[1]}"

    @property
    def silent(self) -> bool:
        n = self.faults.silent_after
        return n is not None and self.stats.bytes_in >= n

    #: longest step of the FSM timer's clock per serving step (see :meth:`_now`)
    CLOCK_STEP = 0.02

    def _now(self) -> float:
        """The FSM timer's clock: real time, but at most :attr:`CLOCK_STEP` per serving step. A
        host that stalls mid-command still has it dropped (the idle serving loop steps every
        10 ms), while the emulator itself being descheduled (a loaded machine, the GIL held by a
        layer's computation) does not cut a command: gateware is never descheduled."""
        real = time.monotonic()
        self._vclock += min(max(0.0, real - self._vlast), self.CLOCK_STEP)
        self._vlast = real
        return self._vclock

    @property
    def wedged(self) -> bool:
        n = self.faults.wedge_after
        return n is not None and self.stats.bytes_in >= n

    def _process(self, data: bytes) -> bytes:
        if self.silent or self.wedged:
            return b""
        for n in (self.faults.silent_after, self.faults.wedge_after):
            if n is not None and self.stats.bytes_in + len(data) > n:
                data = data[: n - self.stats.bytes_in]
        self.stats.bytes_in += len(data)
        resp = self.core.feed(self._faults.apply(data), self._now())
        if resp and self.faults.delay:
            time.sleep(float(self._delay_rng.uniform(0.0, self.faults.delay)))
        resp = self._faults.apply(resp)
        self.stats.bytes_out += len(resp)
        return resp

    def _serve_fd(self, rfd: int, send) -> bool:
        """Pump one link until it closes (False) or stop is requested (True)."""
        while not self._stop.is_set():
            if self.wedged:  # reads nothing more: what the host sends piles up in the OS buffers
                self._stop.wait(0.05)
                continue
            r, _, _ = select.select([rfd], [], [], 0.01)
            if not r:
                self.core.tick(self._now())
                continue
            try:
                data = os.read(rfd, 65536) if self.mode == "pty" else self._conn.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return False
            if not data:
                return False
            resp = self._process(data)
            if resp:
                send(resp)
        return True

    def _send_pty(self, data: bytes) -> None:
        """A UART transmitter never waits for the host: output nobody reads within 1 s is lost."""
        view = memoryview(data)
        give_up = time.monotonic() + 1.0  # (a pty buffer, not a slow host, is what fills under load)
        while view and not self._stop.is_set():
            if time.monotonic() > give_up:
                self.stats.dropped += len(view)
                return
            master = self._master
            assert master is not None
            _, w, _ = select.select([], [master], [], 0.05)
            if w:
                try:
                    view = view[os.write(master, view) :]
                except BlockingIOError:
                    pass

    def serve_forever(self) -> None:
        if self.mode == "pty":
            assert self._master is not None  # open until close()
            self._serve_fd(self._master, self._send_pty)
            return
        lsock = self._lsock
        assert lsock is not None  # open until close()
        while not self._stop.is_set():
            r, _, _ = select.select([lsock], [], [], 0.05)
            if not r:
                continue
            self._conn, _ = lsock.accept()
            self._conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.core.buf.clear()
            try:
                self._serve_fd(self._conn.fileno(), self._conn.sendall)
            finally:
                self._conn.close()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        self.core.close()
        for fd in (self._master, self._slave):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._master = self._slave = None
        if self._lsock is not None:
            self._lsock.close()
            self._lsock = None


@contextlib.contextmanager
def serve_in_thread(
    target: Transport,
    board_map: BoardMap | None = None,
    faults: FaultConfig | None = None,
    *,
    mode: str = "pty",
    **kwargs,
) -> Iterator[BoardEmulator]:
    """Run a :class:`BoardEmulator` in a daemon thread; ``emu.url`` is what a client opens."""
    own = not target.is_open
    if own:
        target.open()
    emu = BoardEmulator(target, board_map, faults, mode=mode, **kwargs)
    th = threading.Thread(target=emu.serve_forever, name="board-emu", daemon=True)
    th.start()
    try:
        yield emu
    finally:
        emu.stop()
        th.join(timeout=5)
        emu.close()
        if own:
            target.close()
