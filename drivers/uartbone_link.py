"""The UARTBone link to one board: its port, bytes on the wire, resynchronisation, retries
and the board's death.

A board that does not answer at all (port closed, process killed, board hung) raises
:class:`BoardDeadError` naming the board and its URL: the failing request and two silent sync
reads, about ``3 * response_timeout + 2 * 1.5 * board_timeout`` (1.8 s with the defaults), not the
whole retry budget; a port error (closed pty, reset connection) raises it at once. Every later
operation raises it at once until the transport is reopened. Raw pyserial/socket exceptions
never escape.

:class:`UartboneLink` owns the port and the request/response exchange (the bridge's rules:
:mod:`.uartbone_wire`); the integrity rules built on it are :class:`~.uartbone_verify.VerifiedLink`,
the register and memory API :class:`~.uartbone.SerialTransport`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .boardmap import BoardMap
from .transport import LinkIntegrityError, Timeout, Transport, TransportError, TransportTimeoutError
from .uartbone_policy import IntegrityPolicy, LinkStats
from .uartbone_wire import FSM_TIMEOUT, MAX_BURST, decode_words, encode_read, encode_write, max_burst_words

__all__ = ["BoardDeadError", "GLB_HW_VERSION", "GLB_INTR_STATUS", "LinkFault", "NoAnswer", "UartboneLink",
           "no_delay", "nothing_reads_back"]

log = logging.getLogger("nvdla_hil.drivers.uartbone")

#: NVDLA GLB S_NVDLA_HW_VERSION, the default sync register, and S_INTR_STATUS (CSB byte addresses)
GLB_HW_VERSION = 0x1000
GLB_INTR_STATUS = 0x100C


class BoardDeadError(LinkIntegrityError):
    """The board does not answer at all, or its port failed (closed, unplugged, process killed,
    board hung). The message names the board and its URL; a regression can stop on it."""


def no_delay(port: object) -> None:
    """Turn Nagle off on a network port (pyserial's ``socket://`` and ``rfc2217://`` leave
    it on). Writes are flushed as soon as they are queued and the read that checks them
    follows in a second send, which Nagle holds until the board's delayed ACK: measured
    through the TCP emulator, 44 ms per verified register write with it, 0.25 ms without."""
    sock = getattr(port, "_socket", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class LinkFault(Exception):
    """The exchange went wrong in a way a resync may cure. Internal to the UARTBone transport:
    it never escapes (a retry, or :class:`LinkIntegrityError` / :class:`BoardDeadError`)."""


class NoAnswer(LinkFault):
    """Not one byte came back (internal, as :class:`LinkFault`)."""


def nothing_reads_back(address: int) -> bool:
    """The default ``readback_ok``: no register is taken to read back (safe, unverified)."""
    return False


class UartboneLink(Transport):
    """The UARTBone link on any pyserial URL (the constructor of :class:`~.uartbone.SerialTransport`).

    Args:
        url: pyserial URL (``/dev/ttyUSB1``, ``socket://host:port``, ``rfc2217://``, ``loop://``,
            ``spy://...``).
        baudrate: line rate; also sizes bursts to the bridge's 100 ms timer.
        board_map: where the CSB and DRAM windows sit on the board.
        policy: integrity policy.
        readback_ok: ``readback_ok(csb_address) -> bool``; True for plain RW registers (reading
            returns what was written, rewriting is harmless). Everything else is treated as
            non-idempotent. Default: nothing reads back (safe, unverified).
        readback_mask: ``readback_mask(csb_address) -> int``, the bits of a readback-able register
            that read back as written (its RW fields; undefined bits read 0). Default: all 32.
        read_pops: ``read_pops(csb_address) -> bool``; True for a data port whose read advances
            a pointer (NVDLA's S_LUT_ACCESS_DATA): read once, never repeated. Fixed-address
            bursts are always treated so. Default: none.
        response_timeout: seconds to wait for a response beyond its wire time.
        sync_address: register used to resynchronise (GLB S_NVDLA_HW_VERSION).
        board_timeout: the bridge's FSM timeout; a resync keeps the line silent this long.
        board_name: the lab's name of the board, for messages (:class:`BoardDeadError`).
    """

    def __init__(
        self,
        url: str,
        baudrate: int = 115200,
        *,
        board_map: BoardMap | None = None,
        policy: IntegrityPolicy | None = None,
        readback_ok: Callable[[int], bool] | None = None,
        readback_mask: Callable[[int], int] | None = None,
        read_pops: Callable[[int], bool] | None = None,
        response_timeout: float = 0.5,
        sync_address: int = GLB_HW_VERSION,
        intr_status_address: int = GLB_INTR_STATUS,
        board_timeout: float = FSM_TIMEOUT,
        max_write_burst: int | None = None,
        max_read_burst: int | None = None,
        verify_batch: int = 64,
        profile_name: str = "nv_small",
        reset_hook: Callable[[], None] | None = None,
        reset_address: int | None = None,
        serial_kwargs: dict | None = None,
        board_name: str | None = None,
    ) -> None:
        super().__init__()
        self.url = url
        self._board = board_name  # (SerialTarget's board_name follows the board it got)
        self._dead: str | None = None  # why the board was declared dead (until reopened)
        self.baudrate = int(baudrate)
        self.board_map = board_map or BoardMap()
        self.policy = policy or IntegrityPolicy()
        self.readback_ok = readback_ok or nothing_reads_back
        self.readback_mask = readback_mask or (lambda address: 0xFFFFFFFF)
        self.read_pops = read_pops or (lambda address: False)
        self.response_timeout = float(response_timeout)
        self.sync_address = sync_address
        self.intr_status_address = intr_status_address
        self.board_timeout = float(board_timeout)
        self.max_write_burst = max_write_burst or max_burst_words(self.baudrate, write=True)
        self.max_read_burst = max_read_burst or max_burst_words(self.baudrate, write=False)
        for n in (self.max_write_burst, self.max_read_burst):
            if not 1 <= n <= MAX_BURST:
                raise ValueError(f"burst size {n} outside 1..{MAX_BURST}")
        self.verify_batch = int(verify_batch)
        self.profile_name = profile_name
        self.reset_hook = reset_hook
        self.reset_address = reset_address
        self.serial_kwargs = dict(serial_kwargs or {})
        self.stats = LinkStats()
        self.sync_value: int | None = None
        self._port: Any = None  # a pyserial port, or any object with its read/write/in_waiting/timeout API
        self._tx = bytearray()  # pipelined writes not yet handed to the port
        self._pending: dict[int, int] = {}  # verify mode: board word address -> value written

    @property
    def where(self) -> str:
        """``board 'NAME' (URL)`` or the URL alone, for messages."""
        return f"board {self._board!r} ({self.url})" if self._board else self.url

    @property
    def dead_reason(self) -> str | None:
        """Why the board was declared dead in this session (None while it answers)."""
        return self._dead

    def _declare_dead(self, why: str) -> BoardDeadError:
        """Mark the board dead (every later operation fails at once) and build the error."""
        self._dead = why
        self.stats.link_faults += 1
        return BoardDeadError(f"{self.where}: {why}; the board is dead or hung (check power, cable, "
                              f"bitstream, or the process serving it), not a test failure")

    def _check_alive(self) -> None:
        if self._dead is not None:
            raise BoardDeadError(f"{self.where}: declared dead earlier in this session: {self._dead}")

    def _port_error(self, what: str, e: BaseException) -> BoardDeadError:
        return self._declare_dead(f"{what} failed: {type(e).__name__}: {e}")

    def __repr__(self) -> str:
        return f"SerialTransport({self.url!r}, baudrate={self.baudrate}, policy={self.policy.mode})"

    def link_report(self) -> str:
        s = self.stats
        if not s.link_faults:
            return ""
        proof = ("every value the test used was verified" if self.policy.verify
                 else "plain policy: a corrupted value would have gone unnoticed")
        return (f"link {self.url}: {s.link_faults} faults, {s.resyncs} resyncs, {s.retries} retries, "
                f"{s.verify_mismatches} read mismatches while this target was open; {proof}, and a "
                f"write that a corrupted address sent elsewhere cannot be ruled out")

    def describe(self) -> str:
        return f"UARTBone {self.url} @ {self.baudrate} baud ({self.policy.mode}, {self.profile_name})"

    # ---- life cycle ---------------------------------------------------------------------------
    def _make_port(self):  # noqa: ANN202 - a pyserial-like port
        import serial  # pyserial

        port = serial.serial_for_url(self.url, baudrate=self.baudrate, timeout=0.0, **self.serial_kwargs)
        # a stalled link must not block a write forever
        port.write_timeout = self.response_timeout + 2.0
        no_delay(port)
        return port

    def _open(self) -> None:
        import serial  # pyserial

        self._dead = None
        try:
            self._port = self._make_port()
        except ValueError as e:
            raise TransportError(f"cannot open serial port {self.url!r}: {e}") from e
        except (serial.SerialException, OSError) as e:
            if isinstance(e, TransportError):
                raise
            raise self._port_error(f"cannot open serial port {self.url!r}: opening it", e) from None
        try:
            self._resync(first=True)
        except BaseException:
            self._port.close()
            self._port = None
            raise

    def _close(self) -> None:
        if self._port is None:
            return
        try:
            if self._dead is None:
                self._fence()
        finally:
            port, self._port = self._port, None
            with contextlib.suppress(Exception):  # a dead port may fail to close; it is gone either way
                port.close()

    # ---- byte level -----------------------------------------------------------------------------
    def _send(self, data: bytes | bytearray) -> None:
        import serial

        self._check_alive()
        try:
            self._port.write(data)
        except serial.SerialTimeoutException as e:
            why = str(e) if str(e) and str(e) != "Write timeout" else "the board stopped reading"
            raise self._declare_dead(f"write of {len(data)} bytes timed out ({why})") from None
        except (serial.SerialException, OSError) as e:
            if isinstance(e, TransportError):
                raise
            raise self._port_error(f"write of {len(data)} bytes", e) from None
        self.stats.tx_bytes += len(data)

    def _flush_tx(self) -> None:
        if self._tx:
            data, self._tx = bytes(self._tx), bytearray()
            self._send(data)

    def _drain(self) -> int:
        import serial

        n = 0
        try:
            while True:
                w = self._port.in_waiting
                if not w:
                    return n
                n += len(self._port.read(w))
        except (serial.SerialException, OSError) as e:
            if isinstance(e, TransportError):
                raise
            raise self._port_error("read", e) from None

    def _recv(self, size: int, deadline: Timeout) -> bytes:
        import serial

        port = self._port
        buf = bytearray()
        while len(buf) < size:
            left = deadline.time_left()
            if left is not None and left <= 0:
                break
            try:
                port.timeout = min(left, 0.05) if left is not None else 0.05
                chunk = port.read(size - len(buf))
            except (serial.SerialException, OSError) as e:
                if isinstance(e, TransportError):
                    raise
                raise self._port_error("read", e) from None
            if chunk:
                buf += chunk
        self.stats.rx_bytes += len(buf)
        return bytes(buf)

    def _wire_time(self, nbytes: int) -> float:
        return nbytes * 10.0 / self.baudrate

    def _exchange(self, request: bytes, nresp: int) -> bytes:
        """Send queued writes + ``request`` (ending with one read command); return the response."""
        self._check_alive()
        stale = self._drain()
        if stale:
            self.stats.discarded_bytes += stale
            raise LinkFault(f"{stale} unexpected bytes on the line")
        self._tx += request
        nreq = len(self._tx)
        self._flush_tx()
        self.stats.round_trips += 1
        self.stats.commands += 1
        deadline = Timeout(self.response_timeout + 1.5 * self._wire_time(nreq + nresp))
        data = self._recv(nresp, deadline)
        if not data:
            raise NoAnswer(f"no response ({nresp} bytes expected within {deadline.duration:.3g} s)")
        if len(data) != nresp:
            raise LinkFault(f"short response: {len(data)} of {nresp} bytes")
        return data

    # ---- resynchronisation ----------------------------------------------------------------------
    def _quiet(self) -> None:
        """Keep the line silent until the bridge's FSM timer has surely reset it, draining input."""
        import serial

        self._check_alive()
        port = self._port
        self._tx.clear()
        quiet_for = self.board_timeout * 1.5 + min(0.02, self.board_timeout)
        limit = Timeout(max(2.0, 10 * quiet_for))
        try:
            port.flush()  # bytes still in the OS/adapter TX buffer would reach the board later
            last = time.monotonic()
            while time.monotonic() - last < quiet_for:
                if limit.expired():
                    raise TransportTimeoutError(f"{self.where}: the line never went quiet while resynchronising")
                port.timeout = 0.01
                chunk = port.read(max(1, port.in_waiting))
                if chunk:
                    self.stats.discarded_bytes += len(chunk)
                    last = time.monotonic()
        except (serial.SerialException, OSError) as e:
            if isinstance(e, TransportError):
                raise
            raise self._port_error("resynchronising", e) from None

    def _read_sync(self) -> int:
        req = encode_read(self.board_map.csr(self.sync_address) >> 2, 1)
        return int(decode_words(self._exchange(req, 4))[0])

    def _resync(self, first: bool = False) -> None:
        """Flush the link, wait out the bridge's timer, then prove it with sync-register reads."""
        if not first:
            self.stats.resyncs += 1
        last_err: Exception | None = None
        silent = 0
        for _ in range(self.policy.retries + 1):
            try:
                self._quiet()
                a, b = self._read_sync(), self._read_sync()
                if a != b:
                    raise LinkFault(f"sync register reads disagree: {a:#x} vs {b:#x}")
                if self.sync_value is None:
                    self.sync_value = a
                elif a != self.sync_value:
                    raise LinkFault(f"sync register read {a:#x}, expected {self.sync_value:#x}")
                return
            except NoAnswer as e:
                # a board that answers nothing twice in a row, after the FSM timer has surely
                # reset the bridge, is dead or hung: retrying the whole budget only delays that
                last_err = e
                self.stats.link_faults += 1
                silent += 1
                if silent >= self.policy.dead_after:
                    raise self._declare_dead(f"no answer to {silent} sync reads of CSB {self.sync_address:#x} "
                                             f"({e})") from None
            except LinkFault as e:
                last_err = e
                silent = 0
                self.stats.link_faults += 1
        raise TransportTimeoutError(f"{self.where}: cannot resynchronise the UARTBone link: {last_err}")

    def _attempt(self, what: str, fn: Callable[[], object], idempotent: bool = True):
        """Run ``fn``; on a link fault resync and retry if idempotent, else raise LinkIntegrityError."""
        for attempt in range(self.policy.retries + 1):
            try:
                return fn()
            except LinkFault as e:
                self.stats.link_faults += 1
                log.debug("%s: link fault on %s: %s", self.url, what, e)
                self._resync()
                if not idempotent:
                    raise LinkIntegrityError(
                        f"{self.where}: {what} may or may not have happened ({e}); not repeated"
                    ) from None
                if attempt == self.policy.retries:
                    raise LinkIntegrityError(
                        f"{self.where}: {what} failed after {self.policy.retries + 1} attempts: {e}"
                    ) from None
                self.stats.retries += 1
        raise AssertionError("unreachable")

    # ---- word-level framing on the link (board word addresses) ---------------------------------
    def _read_words_once(self, word: int, count: int, incr: bool) -> np.ndarray:
        out = np.empty(count, dtype=np.uint32)
        done = 0
        while done < count:
            n = min(self.max_read_burst, count - done)
            req = encode_read(word + (done if incr else 0), n, incr=incr)
            out[done : done + n] = decode_words(self._exchange(req, 4 * n))
            done += n
        return out

    def _queue_write(self, word: int, values: np.ndarray, incr: bool) -> None:
        done = 0
        while done < values.size:
            n = min(self.max_write_burst, values.size - done)
            self._tx += encode_write(word + (done if incr else 0), values[done : done + n], incr=incr)
            self.stats.commands += 1
            done += n
            if len(self._tx) >= 4096:
                self._flush_tx()

    def _fence(self) -> None:
        """Make every queued write happen (:class:`~.uartbone_verify.VerifiedLink` also proves them)."""
        self._flush_tx()
