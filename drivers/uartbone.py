"""LiteX UARTBone framing and a :class:`Transport` over a serial link.

Wire format (LiteX ``litex/soc/cores/uart.py`` ``Stream2Wishbone`` and the host side
``litex/tools/remote/comm_uart.py`` ``CommUART``; read at enjoy-digital/litex 37b75bd4):

* One command = ``cmd`` byte, ``length`` byte, address (``address_width//8`` = 4 bytes,
  most significant first), then for writes ``length`` data words.
  uart.py L320-323 / comm_uart.py L14-17: ``CMD_WRITE_BURST_INCR=0x01``,
  ``CMD_READ_BURST_INCR=0x02``, ``CMD_WRITE_BURST_FIXED=0x03``, ``CMD_READ_BURST_FIXED=0x04``
  (fixed bursts since LiteX b44ca6d6, 2020-08).
* The address is a **Wishbone word address**: the bridge's bus is
  ``wishbone.Interface(..., addressing="word")`` (uart.py L333) and the host sends
  ``(addr//4).to_bytes(4, "big")`` (comm_uart.py L88, L111-113). The FSM shifts each
  address byte in below the previous ones, ``address.eq(Cat(sink.data, address))``, so the
  first byte is the most significant.
* Data words are big-endian on the wire both ways: ``data.eq(Cat(sink.data, data))`` on
  receive, and ``source.data.eq(data[8*n:])`` with ``n`` counting down on send
  (uart.py, RECEIVE-DATA / SEND-DATA); the host packs ``value.to_bytes(4, "big")``.
* Incrementing bursts add 1 to the word address after each word, fixed bursts add 0
  (``NextValue(address, address + incr)``). ``length`` is one byte: at most 255 words
  (``UARTBONE_MAX_BURST_LENGTH = 255``). Length 0 never satisfies
  ``words_count == length - 1`` and only ends at the FSM timeout; this driver never sends it.
* A read returns exactly ``4*length`` bytes and nothing else; a write returns nothing.
  There is no checksum, no acknowledgement and no error response.
* An unknown command byte consumes length + address and returns to RECEIVE-CMD.
* The FSM is reset by a ``WaitTimer(100e-3*clk_freq)`` armed whenever it is *not* in
  RECEIVE-CMD (uart.py L351-353): a command must complete within 100 ms of its first
  byte, and a half-received command is dropped 100 ms later. CommUART therefore sizes
  write bursts from the baud rate, keeping half of that budget
  (``_get_max_write_burst_length``, comm_uart.py L38-48); :func:`max_burst_words` does the same.
* The RS232 PHY has no receive FIFO: ``RS232PHYRX`` raises ``source.valid`` for one cycle
  whatever ``ready`` says, and the bridge holds ``sink.ready=0`` outside the RECEIVE states.
  Bytes arriving while a read response is being sent are **lost**, so a read command must
  be the last command of a request; writes can be streamed back to back.

Board mapping: the NVDLA CSB byte space sits at ``BoardMap.csr_base`` on the board's bus,
and NVDLA's DRAM (DBBIF) addresses ``dram_nvdla_base..+dram_size`` at ``dram_base``. The default
window is NVDLA 0x80000000..0xbfffffff (1 GiB): NVDLA's nv_small traces place their surfaces at
0x80000000, 0x90000000 and 0xa0000000. :meth:`SerialTransport.probe_window` proves that the
board maps the whole window (an unmapped word of a LiteX SoC answers 0xFFFFFFFF after the bus
timeout and drops writes); a window the board does not map is a :class:`BoardConfigError`
naming both windows, not a link fault.

A board that does not answer at all (port closed, process killed, board hung) raises
:class:`BoardDeadError` naming the board and its URL: the failing request and two silent sync
reads, about ``3 * response_timeout + 2 * 1.5 * board_timeout`` (1.8 s with the defaults), not the
whole retry budget; a port error (closed pty, reset connection) raises it at once. Every later
operation raises it at once until the transport is reopened. Raw pyserial/socket exceptions
never escape.
Memory is byte addressed little-endian on the bus (LiteX SoCs are little-endian), so the
word carrying bytes ``b0 b1 b2 b3`` has value ``b0 | b1<<8 | ...`` and goes on the wire as
``b3 b2 b1 b0``.

Integrity (the link has no checksum; see ``docs`` in :class:`IntegrityPolicy`):

* ``plain``: a short or late response is detected (timeout), the link is resynchronised and
  idempotent operations are retried. A corrupted byte in a response is **not** detected.
* ``verify``: every read is done twice in separate round trips and the two must agree
  (four times when the result is uniform, see ``SerialTransport._uniform``);
  every write to a register that reads back (``readback_ok``) is read back and compared,
  and rewritten on mismatch (a uniform read-back, e.g. a written 0, is confirmed the same
  way). Memory writes are read back, and a memory read whose caller knows what it should
  hold (``mem_read(expect=...)``: a check's golden) is done once when it matches
  (``SerialTransport._read_proven``): a result equal to the expected one is not what link
  noise makes, unless a misaddressed burst lands on an identical copy, which is plausible
  only for a uniform burst; such a burst is read again one word longer, over a distinctive
  neighbour word, else by the ``uniform_reads`` rule (the trace player plants distinctive
  probe words in the never-written gaps of checked regions so that this is rare, see
  ``read_probe_spacing``). A read that does not match is read again until two reads agree
  (four when uniform), so it returns what the board holds. Writes to registers that do not read back (triggers,
  LUT data port, W1C) are non-idempotent: each is followed by a read of the sync register
  that proves the framing survived; if it did not, LinkIntegrityError. Reads of a data
  port that pops (``read_pops``, fixed bursts) are done once and never repeated.
* Indirect ports (``read_indirect``/``write_indirect``: the LUT's CFG/DATA pair) are
  idempotent as a unit: under ``verify`` a table is written, read back through the pair
  in the same request and rewritten whole on a mismatch; a table read is two agreeing
  CFG-then-read sequences. This proves the payload that a lone port write cannot.
  NVDLA's traces program the LUT register by register; the trace player sends each CFG +
  DATA run through ``write_indirect`` so those are proven too.
  What verify cannot catch: a corrupted *payload* byte of a raw non-readback write (a
  trigger such as OP_ENABLE, a write-1-to-clear), and a stray
  write that a corrupted address or command byte sends to another register. Both need a
  link with a checksum (Etherbone over UDP, or a CRC'd bridge).

Guarantees under ``verify`` (tested by fault injection through ``harness/board_emu.py``,
0.5 % dropped + 0.5 % corrupted bytes each way): every value returned by a read, and every
readback-able write reported as done, matched the board's register at that moment; any
other outcome raised LinkIntegrityError or TransportTimeoutError within the retry budget
(each wait bounded by ``response_timeout`` + wire time; a resync by ~1.5x the FSM timer).
Not guaranteed: the payload of raw non-readback writes, and registers hit by stray writes.
Residual risk for reads: independently corrupted reads agreeing on the same wrong value.
A corrupted request address (4 of the 6 header bytes) is the way there: at a per-byte
corruption rate p each read misses with q ~ 4p, and the wrong words are mostly uniform
(unmapped space reads all ones on a LiteX SoC, 0 elsewhere), so two agreeing reads would leave ~q^2 (4e-4 at p = 0.5 %, the
campaign's first silent failures); uniform results take four reads (q^4 ~ 2e-7), and a
distinctive result needs both corrupted addresses to be the same one (~q^2 / 1020).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .transport import (
    LinkIntegrityError,
    NotOpenError,
    Timeout,
    Transport,
    TransportError,
    TransportTimeoutError,
)

__all__ = [
    "BoardConfigError",
    "BoardDeadError",
    "CMD_READ_FIXED",
    "CMD_READ_INCR",
    "CMD_WRITE_FIXED",
    "CMD_WRITE_INCR",
    "FSM_TIMEOUT",
    "MAX_BURST",
    "BoardMap",
    "IntegrityPolicy",
    "LinkStats",
    "SerialTransport",
    "decode_words",
    "encode_read",
    "encode_write",
    "max_burst_words",
    "wire_bytes_read",
    "wire_bytes_write",
]

log = logging.getLogger(__name__)

CMD_WRITE_INCR = 0x01
CMD_READ_INCR = 0x02
CMD_WRITE_FIXED = 0x03
CMD_READ_FIXED = 0x04
MAX_BURST = 255
#: Stream2Wishbone resets its FSM this long after leaving RECEIVE-CMD (uart.py L351).
FSM_TIMEOUT = 0.100
ADDR_BYTES = 4
HEADER_BYTES = 2 + ADDR_BYTES

GLB_HW_VERSION = 0x1000
GLB_INTR_STATUS = 0x100C


class BoardDeadError(LinkIntegrityError):
    """The board does not answer at all, or its port failed (closed, unplugged, process killed,
    board hung). The message names the board and its URL; a regression can stop on it."""


class BoardConfigError(ValueError):
    """The board map does not fit: an address outside the configured DRAM window, or a window
    (from the lab file) that the board does not map. A configuration error, not a link fault."""


# ---- framing ------------------------------------------------------------------------------
def _header(cmd: int, length: int, word_address: int) -> bytes:
    if not 1 <= length <= MAX_BURST:
        raise ValueError(f"UARTBone burst length {length} outside 1..{MAX_BURST}")
    if not 0 <= word_address < 1 << 32:
        raise ValueError(f"word address {word_address:#x} does not fit 32 bits")
    return bytes((cmd, length)) + word_address.to_bytes(ADDR_BYTES, "big")


def encode_write(word_address: int, values: Sequence[int] | np.ndarray, *, incr: bool = True) -> bytes:
    """One write command: ``cmd len addr[31:24..7:0] (data[31:24..7:0])*len``."""
    words = np.asarray(values, dtype=np.uint32)
    head = _header(CMD_WRITE_INCR if incr else CMD_WRITE_FIXED, int(words.size), word_address)
    return head + words.astype(">u4").tobytes()


def encode_read(word_address: int, count: int, *, incr: bool = True) -> bytes:
    """One read command: ``cmd len addr[31:24..7:0]``; the board answers ``4*len`` bytes."""
    return _header(CMD_READ_INCR if incr else CMD_READ_FIXED, count, word_address)


def decode_words(data: bytes | bytearray) -> np.ndarray:
    """Big-endian response bytes to ``uint32`` words."""
    if len(data) % 4:
        raise ValueError(f"response of {len(data)} bytes is not whole words")
    return np.frombuffer(bytes(data), dtype=">u4").astype(np.uint32)


def max_burst_words(baudrate: float, *, write: bool) -> int:
    """Largest burst that finishes inside the bridge's 100 ms FSM timer.

    Writes keep half the budget for host/adapter jitter (CommUART's rule, comm_uart.py
    L38-48); a read response is sent by the board itself, so reads keep 90 %.
    """
    if baudrate <= 0:
        raise ValueError("baudrate must be greater than 0")
    budget = FSM_TIMEOUT * (0.5 if write else 0.9)
    max_bytes = int(budget / (10.0 / baudrate))
    words = (max_bytes - HEADER_BYTES) // 4
    return max(1, min(MAX_BURST, words))


def wire_bytes_write(words: int, max_burst: int = MAX_BURST) -> int:
    """Fewest bytes the framing allows for ``words`` written words."""
    cmds = -(-words // max_burst)
    return cmds * HEADER_BYTES + 4 * words


def wire_bytes_read(words: int, max_burst: int = MAX_BURST) -> tuple[int, int]:
    """Fewest (host->board, board->host) bytes the framing allows for ``words`` read words."""
    cmds = -(-words // max_burst)
    return cmds * HEADER_BYTES, 4 * words


# ---- configuration ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BoardMap:
    """Where NVDLA's two address spaces sit on the board's bus (byte addresses).

    register: board = ``csr_base + csb_address`` for ``csb_address < csr_size``.
    memory:   board = ``dram_base + (nvdla_address - dram_nvdla_base)`` for
              ``dram_nvdla_base <= nvdla_address < dram_nvdla_base + dram_size``.
    """

    csr_base: int = 0x4000_0000
    csr_size: int = 0x0004_0000
    dram_base: int = 0x8000_0000
    dram_nvdla_base: int = 0x8000_0000
    dram_size: int = 0x4000_0000

    def __post_init__(self) -> None:
        for name in ("csr_base", "dram_base", "dram_nvdla_base"):
            v = getattr(self, name)
            if v % 4 or not 0 <= v < 1 << 32:
                raise ValueError(f"BoardMap.{name}={v:#x} must be a 4-byte aligned 32-bit address")
        if self.csr_size <= 0 or self.csr_base + self.csr_size > 1 << 32:
            raise ValueError(f"BoardMap csr window {self.csr_base:#x}+{self.csr_size:#x} leaves the 32-bit bus")
        if self.dram_size <= 0 or self.dram_base + self.dram_size > 1 << 32:
            raise ValueError(f"BoardMap dram window {self.dram_base:#x}+{self.dram_size:#x} leaves the 32-bit bus")
        a0, a1 = self.csr_base, self.csr_base + self.csr_size
        b0, b1 = self.dram_base, self.dram_base + self.dram_size
        if a0 < b1 and b0 < a1:
            raise ValueError("BoardMap csr and dram windows overlap")

    def csr(self, csb_address: int) -> int:
        if not 0 <= csb_address < self.csr_size:
            raise ValueError(f"CSB address {csb_address:#x} outside the {self.csr_size:#x}-byte register window")
        return self.csr_base + csb_address

    def dram(self, nvdla_address: int, size: int) -> int:
        off = nvdla_address - self.dram_nvdla_base
        if off < 0 or off + size > self.dram_size:
            raise BoardConfigError(
                f"memory {nvdla_address:#x}+{size:#x} outside the DRAM window "
                f"{self.dram_nvdla_base:#x}+{self.dram_size:#x} (lab file: dram_nvdla_base, dram_size)"
            )
        return self.dram_base + off

    def decode(self, board_address: int) -> tuple[str, int] | None:
        """Board byte address -> ("csr", csb_address) / ("dram", nvdla_address) / None."""
        if self.csr_base <= board_address < self.csr_base + self.csr_size:
            return "csr", board_address - self.csr_base
        if self.dram_base <= board_address < self.dram_base + self.dram_size:
            return "dram", board_address - self.dram_base + self.dram_nvdla_base
        return None


@dataclass(frozen=True, slots=True)
class IntegrityPolicy:
    """``mode``: ``plain`` or ``verify`` (module docstring); ``retries`` per operation;
    ``uniform_reads``: in verify mode, how many reads must agree on a result that a
    corrupted request address would plausibly also produce (a uniform window, a register
    reading 0 or all ones); any other result needs two. ``dead_after``: resynchronisations
    in a row that get no answer at all (each after the bridge's FSM timer has surely reset
    it) before the board is declared dead (:class:`BoardDeadError`); a link that loses
    bytes often (a fault campaign) needs more than the default."""

    mode: str = "verify"
    retries: int = 3
    uniform_reads: int = 4
    dead_after: int = 2

    def __post_init__(self) -> None:
        if self.mode not in ("plain", "verify"):
            raise ValueError(f"integrity mode {self.mode!r} is not one of 'plain', 'verify'")
        if self.retries < 0:
            raise ValueError(f"integrity retries {self.retries} must be >= 0")
        if self.uniform_reads < 2:
            raise ValueError(f"integrity uniform_reads {self.uniform_reads} must be >= 2")
        if self.dead_after < 1:
            raise ValueError(f"integrity dead_after {self.dead_after} must be >= 1")

    @property
    def verify(self) -> bool:
        return self.mode == "verify"


@dataclass(slots=True)
class LinkStats:
    """Wire accounting. ``round_trips`` counts requests that waited for a response."""

    tx_bytes: int = 0
    rx_bytes: int = 0
    round_trips: int = 0
    commands: int = 0
    retries: int = 0
    resyncs: int = 0
    link_faults: int = 0
    discarded_bytes: int = 0
    verify_mismatches: int = 0

    def reset(self) -> None:
        for f in self.__dataclass_fields__:
            setattr(self, f, 0)

    def snapshot(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def _no_delay(port: object) -> None:
    """Turn Nagle off on a network port (pyserial's ``socket://`` and ``rfc2217://`` leave
    it on). Writes are flushed as soon as they are queued and the read that checks them
    follows in a second send, which Nagle holds until the board's delayed ACK: measured
    through the TCP emulator, 44 ms per verified register write with it, 0.25 ms without."""
    sock = getattr(port, "_socket", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _LinkFault(Exception):
    """Internal: the exchange went wrong in a way a resync may cure."""


class _Silence(_LinkFault):
    """Internal: not one byte came back."""


def _all_readback(address: int) -> bool:
    return False


# ---- transport ------------------------------------------------------------------------------------
def _fill_like(word: np.uint32) -> bool:
    """A lone word that a fill could have left anywhere: its four bytes equal (0, all ones,
    0xA5A5A5A5); another single word is as distinctive as a burst."""
    w = int(word)
    return w == (w & 0xFF) * 0x01010101


class SerialTransport(Transport):
    """NVDLA access over LiteX UARTBone on any pyserial URL.

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
        self.readback_ok = readback_ok or _all_readback
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
        _no_delay(port)
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
            raise _LinkFault(f"{stale} unexpected bytes on the line")
        self._tx += request
        nreq = len(self._tx)
        self._flush_tx()
        self.stats.round_trips += 1
        self.stats.commands += 1
        deadline = Timeout(self.response_timeout + 1.5 * self._wire_time(nreq + nresp))
        data = self._recv(nresp, deadline)
        if not data:
            raise _Silence(f"no response ({nresp} bytes expected within {deadline.duration:.3g} s)")
        if len(data) != nresp:
            raise _LinkFault(f"short response: {len(data)} of {nresp} bytes")
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
                    raise _LinkFault(f"sync register reads disagree: {a:#x} vs {b:#x}")
                if self.sync_value is None:
                    self.sync_value = a
                elif a != self.sync_value:
                    raise _LinkFault(f"sync register read {a:#x}, expected {self.sync_value:#x}")
                return
            except _Silence as e:
                # a board that answers nothing twice in a row, after the FSM timer has surely
                # reset the bridge, is dead or hung: retrying the whole budget only delays that
                last_err = e
                self.stats.link_faults += 1
                silent += 1
                if silent >= self.policy.dead_after:
                    raise self._declare_dead(f"no answer to {silent} sync reads of CSB {self.sync_address:#x} "
                                             f"({e})") from None
            except _LinkFault as e:
                last_err = e
                silent = 0
                self.stats.link_faults += 1
        raise TransportTimeoutError(f"{self.where}: cannot resynchronise the UARTBone link: {last_err}")

    def _attempt(self, what: str, fn: Callable[[], object], idempotent: bool = True):
        """Run ``fn``; on a link fault resync and retry if idempotent, else raise LinkIntegrityError."""
        for attempt in range(self.policy.retries + 1):
            try:
                return fn()
            except _LinkFault as e:
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

    # ---- word-level primitives (board word addresses) ----------------------------------------------
    def _read_words_once(self, word: int, count: int, incr: bool) -> np.ndarray:
        out = np.empty(count, dtype=np.uint32)
        done = 0
        while done < count:
            n = min(self.max_read_burst, count - done)
            req = encode_read(word + (done if incr else 0), n, incr=incr)
            out[done : done + n] = decode_words(self._exchange(req, 4 * n))
            done += n
        return out

    def _uniform(self, word: int, words: np.ndarray, incr: bool) -> bool:
        """Could a corrupted request address have produced ``words`` (one burst)? UARTBone
        carries no checksum, so a corrupted address byte reads another location, most often
        unmapped or untouched space (0, or all ones on a bus error) or a constant-filled
        buffer. Two such reads agree whenever both land in it: a uniform incrementing burst,
        or one register reading 0 or all ones, needs ``policy.uniform_reads`` agreeing reads.
        A DRAM word alone counts as uniform (memory may hold a fill pattern anywhere)."""
        if incr and words.size > 1:
            return bool((words == words[0]).all())
        region = self.board_map.decode(word * 4)
        return (region is not None and region[0] == "dram") or int(words[0]) in (0, 0xFFFFFFFF)

    def _agreeing(self, read: Callable[[], np.ndarray], reads: int, suspect: Callable[[np.ndarray], bool],
                  what: str) -> np.ndarray:
        """``read()`` done ``reads`` times, or ``policy.uniform_reads`` times when the first
        result is ``suspect`` (one a misaddressed request would also give); all must agree."""
        first = read()
        need = max(reads, self.policy.uniform_reads) if suspect(first) else reads
        for _ in range(need - 1):
            if not np.array_equal(first, read()):
                self.stats.verify_mismatches += 1
                raise _LinkFault(f"{what} differs between reads")
        return first

    def _read_agreed(self, word: int, count: int, incr: bool, reads: int, uniform: bool = True) -> np.ndarray:
        """Each burst read ``reads`` times in separate round trips, all agreeing; with
        ``uniform``, ``policy.uniform_reads`` times when the burst is :meth:`_uniform` (an
        address error hits one request, so the rule applies burst by burst)."""
        out = np.empty(count, dtype=np.uint32)
        for done in range(0, count, self.max_read_burst):
            n = min(self.max_read_burst, count - done)
            w = word + (done if incr else 0)
            def once(w: int = w, n: int = n) -> np.ndarray:
                return self._read_words_once(w, n, incr)

            def suspicious(words: np.ndarray, w: int = w) -> bool:
                return bool(uniform and self._uniform(w, words, incr))

            out[done : done + n] = self._agreeing(once, reads, suspicious, f"read of word {w:#x}+{n}")
        return out

    def _read_words(self, word: int, count: int, incr: bool, uniform: bool = True) -> np.ndarray:
        """Policy-checked read: in verify mode two separate reads must agree, or
        ``policy.uniform_reads`` when the result is one an address error would also give."""
        if not self.policy.verify:
            return self._read_words_once(word, count, incr)
        return self._read_agreed(word, count, incr, 2, uniform)

    def _read_proven(self, word: int, want: np.ndarray, mask: np.ndarray | None = None, *,
                     settle: bool = False) -> tuple[np.ndarray, bool]:
        """Verify policy for a read whose result the caller expects (``want``, compared on the
        bits of ``mask``): a write's read-back, a check's golden. Returns the words and whether
        every burst equalled ``want``.

        One read, in bursts one word short of the longest. A burst equal to what was expected
        is not what link noise makes, unless a misaddressed request lands on an identical copy:
        likely only for a uniform burst (zeros, a fill). So each uniform burst is read once
        more, extended over a distinctive neighbour word (not 0 or all ones, from a
        non-uniform burst): the pair proves the address at the cost of one word, not
        ``uniform_reads - 1`` whole reads; a uniform burst with no such neighbour takes the
        ``uniform_reads`` rule (callers plant distinctive words where they can,
        :attr:`read_probe_spacing`). A burst that differs from ``want`` is, with
        ``settle``, read again by the plain verify rule (the first read counts: two agreeing
        reads, ``uniform_reads`` when uniform), else returned as read (a write's read-back:
        the caller rewrites). A proof read that disagrees is a link fault (the caller retries)."""
        count = int(want.size)
        care = np.full(count, 0xFFFFFFFF, dtype=np.uint32) if mask is None else mask
        step = max(1, self.max_read_burst - 1)
        out = np.empty(count, dtype=np.uint32)
        bursts = [(d, min(step, count - d)) for d in range(0, count, step)]
        for d, n in bursts:
            out[d : d + n] = self._read_words_once(word + d, n, True)
        same = (out & care) == (want & care)
        ok = [bool(same[d : d + n].all()) for d, n in bursts]
        flat = [_fill_like(out[d]) if n == 1 else bool((out[d : d + n] == out[d]).all()) for d, n in bursts]

        def distinctive(j: int, u: int) -> bool:
            v = int(out[j])
            b = j // step
            return v != u and v not in (0, 0xFFFFFFFF) and ok[b] and not flat[b]

        def again(lo: int, hi: int, times: int) -> None:
            for _ in range(times):
                if not np.array_equal(self._read_words_once(word + lo, hi - lo, True), out[lo:hi]):
                    self.stats.verify_mismatches += 1
                    raise _LinkFault(f"read of word {word + lo:#x}+{hi - lo} differs between reads")

        for b, (d, n) in enumerate(bursts):
            if not ok[b]:
                if settle:  # the board holds something else: the plain verify rule
                    again(d, d + n, (self.policy.uniform_reads if flat[b] else 2) - 1)
                continue
            if not flat[b]:
                continue
            u = int(out[d])
            if d + n < count and distinctive(d + n, u):
                again(d, d + n + 1, 1)
            elif d > 0 and distinctive(d - 1, u):
                again(d - 1, d + n, 1)
            else:  # no neighbour: the uniform rule (a fault campaign found two agreeing reads too few)
                again(d, d + n, self.policy.uniform_reads - 1)
        return out, all(ok)

    def _read_back(self, word: int, count: int) -> np.ndarray:
        """Read back words just written (verify mode): one read proves a distinctive value;
        a uniform one (writing 0 is the common case) is what a write sent elsewhere plus a
        misaddressed read-back would also show, so it takes ``policy.uniform_reads``."""
        return self._read_agreed(word, count, True, 1)

    def _queue_write(self, word: int, values: np.ndarray, incr: bool) -> None:
        done = 0
        while done < values.size:
            n = min(self.max_write_burst, values.size - done)
            self._tx += encode_write(word + (done if incr else 0), values[done : done + n], incr=incr)
            self.stats.commands += 1
            done += n
            if len(self._tx) >= 4096:
                self._flush_tx()

    def _mask_of_word(self, word: int) -> int:
        """Read-back mask of the register at board word address ``word``."""
        a = word * 4
        bm = self.board_map
        if bm.csr_base <= a < bm.csr_base + bm.csr_size:
            return self.readback_mask(a - bm.csr_base) & 0xFFFFFFFF
        return 0xFFFFFFFF

    def _verify_pending(self) -> None:
        """Read back every pending readback-able write; on mismatch rewrite all of them (idempotent)."""
        if not self._pending:
            self._flush_tx()
            return
        pending = dict(self._pending)

        def check() -> None:
            items = sorted(pending.items())
            i = 0
            while i < len(items):
                j = i + 1
                while j < len(items) and items[j][0] == items[j - 1][0] + 1 and j - i < self.max_read_burst:
                    j += 1
                got = self._read_back(items[i][0], j - i)
                want = np.array([v for _, v in items[i:j]], dtype=np.uint32)
                mask = np.array([self._mask_of_word(w) for w, _ in items[i:j]], dtype=np.uint32)
                if not np.array_equal(got & mask, want & mask):
                    self.stats.verify_mismatches += 1
                    raise _LinkFault(f"write read-back mismatch at word {items[i][0]:#x}")
                i = j

        try:
            for attempt in range(self.policy.retries + 1):
                try:
                    check()
                    return
                except _LinkFault as e:
                    self.stats.link_faults += 1
                    self._resync()
                    if attempt == self.policy.retries:
                        raise LinkIntegrityError(
                            f"{self.where}: register writes could not be verified after "
                            f"{attempt + 1} attempts: {e}"
                        ) from None
                    self.stats.retries += 1
                    for w, v in sorted(pending.items()):
                        self._tx += encode_write(w, [v])
                        self.stats.commands += 1
        finally:
            self._pending.clear()

    def _fence(self) -> None:
        """Make every queued write happen (and, in verify mode, prove it)."""
        if self.policy.verify:
            self._verify_pending()
        else:
            self._flush_tx()

    # ---- registers ------------------------------------------------------------------------------
    def _read32(self, address: int) -> int:
        return self._read_burst(address, 1, True)[0]

    def _read_burst(self, address: int, count: int, incr: bool) -> list[int]:
        if count <= 0:
            return []
        self._fence()
        word = self.board_map.csr(address) >> 2
        if incr:
            self.board_map.csr(address + 4 * (count - 1))
        what = f"read of {count} word(s) at CSB {address:#x}"
        if not incr or self.read_pops(address):
            # a data port: each read moves its pointer, so a read is neither repeated nor
            # double-checked; read_indirect is the verified way to read such a port
            vals = self._attempt(what, lambda: self._read_words_once(word, count, incr), idempotent=False)
        else:
            vals = self._attempt(what, lambda: self._read_words(word, count, incr))
        return [int(v) for v in vals]

    def _write32(self, address: int, value: int, posted: bool) -> None:
        self._write_burst(address, [value], True)
        if not posted:
            self._fence()
            if not self.policy.verify:
                self._attempt("write completion", self._read_sync)

    def _write_burst(self, address: int, values: Iterable[int], incr: bool) -> None:
        vals = np.asarray(list(values), dtype=np.uint32)
        if vals.size == 0:
            return
        word = self.board_map.csr(address) >> 2
        addrs = [address + 4 * i for i in range(vals.size)] if incr else [address]
        self.board_map.csr(addrs[-1])
        idempotent = incr and all(self.readback_ok(a) for a in addrs)
        if not self.policy.verify:
            # posted: queued, sent with the next read, fence, sync or close (or at 4 KiB), so a
            # run of writes costs one system call, not one each
            self._queue_write(word, vals, incr)
            return
        if idempotent:
            self._queue_write(word, vals, incr)
            for i, v in enumerate(vals):
                self._pending[word + i] = int(v)
            if len(self._pending) >= self.verify_batch:
                self._verify_pending()
            else:
                self._flush_tx()
            return
        # Non-idempotent: verify everything before it, send it once, then prove the framing held.
        self._verify_pending()
        self._queue_write(word, vals, incr)
        what = f"write of {vals.size} word(s) to {'port' if not incr else 'CSB'} {address:#x}"

        def sync_after() -> None:
            v = self._read_sync()
            if v != self.sync_value:
                raise _LinkFault(f"sync read {v:#x} after write, expected {self.sync_value:#x}")

        self._attempt(what, sync_after, idempotent=False)

    # ---- indirect ports (LUT access) -----------------------------------------------------------------
    def _indirect_words(self, index_address: int, data_address: int) -> tuple[int, int]:
        self._check(index_address)
        self._check(data_address)
        return self.board_map.csr(index_address) >> 2, self.board_map.csr(data_address) >> 2

    def _indirect_read_once(self, iw: int, index_value: int, dw: int, count: int) -> np.ndarray:
        """Index write and port read in one request (the read is last, as the bridge needs).
        The read command's 6 bytes reach the bus at least 6 byte times after the write (20 µs
        at 3 Mbaud: thousands of NVDLA cycles), which covers the CFG-to-DATA latency that
        makes the RTL need a non-posted CFG write."""
        self._queue_write(iw, np.array([index_value], dtype=np.uint32), True)
        return self._read_words_once(dw, count, False)

    def _indirect_agreed(self, iw: int, index_value: int, dw: int, count: int, reads: int) -> np.ndarray:
        """``reads`` index-then-port sequences that agree; ``policy.uniform_reads`` when the
        port gave one value throughout, which is what a misaddressed fixed burst returns."""
        return self._agreeing(lambda: self._indirect_read_once(iw, index_value, dw, count), reads,
                              lambda words: bool((words == words[0]).all()), f"indirect read of port word {dw:#x}")

    def read_indirect(self, index_address: int, index_value: int, data_address: int, count: int) -> list[int]:
        """The index write and the port reads are repeated together: alone each is
        non-idempotent (the port pointer moves), as a unit they are not. Verify policy: two
        sequences must agree (more for a uniform result); plain: once, repeated on a fault."""
        iw, dw = self._indirect_words(index_address, data_address)
        if count <= 0:
            return []
        self._fence()
        reads = 2 if self.policy.verify else 1
        what = f"indirect read of {count} word(s) at CSB {data_address:#x} (index {index_address:#x} = {index_value:#x})"
        vals = [int(v) for v in self._attempt(what, lambda: self._indirect_agreed(iw, index_value, dw, count, reads))]
        self._notify("W", index_address, index_value)
        for v in vals:
            self._notify("R", data_address, v)
        return vals

    def write_indirect(
        self,
        index_address: int,
        index_value: int,
        data_address: int,
        values: Sequence[int],
        *,
        readback_index: int | None = None,
        mask: int = 0xFFFFFFFF,
    ) -> None:
        """Verify policy with ``readback_index``: index write, port writes, then the table
        read back through ``readback_index`` in the same request; on a mismatch the whole
        unit is written again (it is idempotent as a unit). This proves what a single
        port write cannot: the payload. Otherwise as the base class (port writes reported,
        never repeated, on a fault)."""
        if not self.policy.verify or readback_index is None:
            super().write_indirect(index_address, index_value, data_address, values)
            return
        iw, dw = self._indirect_words(index_address, data_address)
        vals = np.asarray([int(v) for v in values], dtype=np.uint32)
        if vals.size == 0:
            return
        self._fence()

        def unit() -> None:
            self._queue_write(iw, np.array([index_value], dtype=np.uint32), True)
            self._queue_write(dw, vals, False)
            got = self._indirect_agreed(iw, readback_index, dw, vals.size, 1)
            if not np.array_equal(got & np.uint32(mask), vals & np.uint32(mask)):
                self.stats.verify_mismatches += 1
                raise _LinkFault(f"indirect write to port {data_address:#x} read back different")

        self._attempt(f"indirect write of {vals.size} word(s) at CSB {data_address:#x} "
                      f"(index {index_address:#x} = {index_value:#x})", unit)
        self._notify("W", index_address, index_value)
        for v in vals:
            self._notify("W", data_address, int(v))

    # ---- memory ------------------------------------------------------------------------------
    def _mem_base(self, address: int, size: int, port: str) -> int:
        if port != "pri_mem":
            raise TransportError(f"{self.where}: only pri_mem is mapped on this board, not {port!r}")
        return self.board_map.dram(address, size)

    def _mem_write(self, address: int, data: np.ndarray, port: str) -> None:
        size = int(data.size)
        if size == 0:
            return
        base = self._mem_base(address, size, port)
        self._fence()
        start, end = base & ~3, (base + size + 3) & ~3
        buf: np.ndarray | None = None
        if start != base or end != base + size:
            # Unaligned head/tail: read-modify-write the edge words.
            buf = np.zeros(end - start, dtype=np.uint8)
            head = self._attempt("memory head read", lambda: self._read_words(start >> 2, 1, True))
            buf[:4] = np.frombuffer(head.astype("<u4").tobytes(), dtype=np.uint8)
            if end - 4 > start:
                tail = self._attempt("memory tail read", lambda: self._read_words((end - 4) >> 2, 1, True))
                buf[-4:] = np.frombuffer(tail.astype("<u4").tobytes(), dtype=np.uint8)
            buf[base - start : base - start + size] = data
        else:
            buf = np.ascontiguousarray(data, dtype=np.uint8)
        words = buf.view("<u4").astype(np.uint32)
        first = start >> 2
        step = self.max_write_burst * 16  # words per verified chunk

        for off in range(0, words.size, step):
            chunk = words[off : off + step]

            def put(off: int = off, chunk: np.ndarray = chunk) -> None:
                self._queue_write(first + off, chunk, True)
                if self.policy.verify:
                    if not self._read_proven(first + off, chunk)[1]:
                        self.stats.verify_mismatches += 1
                        raise _LinkFault(f"memory read-back mismatch near {address + 4 * off:#x}")

            self._attempt(f"memory write at {address:#x}", put)
        self._flush_tx()

    def _mem_read(self, address: int, size: int, port: str) -> np.ndarray:
        if size <= 0:
            return np.zeros(0, dtype=np.uint8)
        base = self._mem_base(address, size, port)
        self._fence()
        start, end = base & ~3, (base + size + 3) & ~3
        words = self._attempt(
            f"memory read at {address:#x}", lambda: self._read_words(start >> 2, (end - start) >> 2, True)
        )
        raw = np.frombuffer(words.astype("<u4").tobytes(), dtype=np.uint8)
        return raw[base - start : base - start + size].copy()

    @property
    def read_probe_spacing(self) -> int:
        """Under verify: a memory read that matches its expectation is proven in one read when
        every burst holds a distinctive word, so a caller that can plant such words (probes) in
        bytes nothing else touches should plant one every this many bytes; 0 under plain."""
        return 4 * max(1, self.max_read_burst - 1) if self.policy.verify else 0

    def _mem_read_expecting(self, address: int, size: int, port: str, expect: np.ndarray) -> np.ndarray:
        """Verify policy: bursts that equal ``expect`` are proven by :meth:`_read_proven` (one
        read, plus one word per uniform burst); bursts that differ are read again until two (or
        ``uniform_reads``) agree, so what comes back is what the board holds."""
        if not self.policy.verify or size <= 0:
            return self._mem_read(address, size, port)
        base = self._mem_base(address, size, port)
        self._fence()
        start, end = base & ~3, (base + size + 3) & ~3
        lo = base - start
        nwords = (end - start) >> 2
        raw_want = np.zeros(end - start, dtype=np.uint8)
        raw_want[lo : lo + size] = expect
        raw_care = np.zeros(end - start, dtype=np.uint8)
        raw_care[lo : lo + size] = 0xFF  # the edge words' other bytes are not the caller's
        want, care = raw_want.view("<u4").astype(np.uint32), raw_care.view("<u4").astype(np.uint32)
        words, _ = self._attempt(f"memory read at {address:#x}",
                                 lambda: self._read_proven(start >> 2, want[:nwords], care[:nwords], settle=True))
        raw = np.frombuffer(words.astype("<u4").tobytes(), dtype=np.uint8)
        return raw[lo : lo + size].copy()

    # ---- interrupt, reset -------------------------------------------------------------------------
    def _wait_irq(self, timeout: float | None) -> bool:
        """Poll GLB S_INTR_STATUS until a bit is set or ``timeout`` passes (no interrupt wire)."""
        self._fence()
        deadline = Timeout(timeout)
        word = self.board_map.csr(self.intr_status_address) >> 2
        while True:
            # 0 only means "poll again": no need to confirm it like a result
            v = self._attempt("interrupt status poll", lambda: self._read_words(word, 1, True, uniform=False))
            if int(v[0]):
                return True
            if deadline.expired():
                return False
            time.sleep(0.0005)

    def _reset(self) -> None:
        """Reset NVDLA: write 1 to the SoC's reset register (``reset_address``, a board bus
        address such as LiteX's ``ctrl_reset`` CSR) or run the lab's reset command."""
        if self.reset_hook is None and self.reset_address is None:
            raise TransportError(f"{self.where}: no reset_address or reset_command configured for this board")
        self._tx.clear()
        self._pending.clear()
        if self.reset_address is not None:
            self._queue_write(self.reset_address >> 2, np.array([1], dtype=np.uint32), True)
            self._flush_tx()
        else:
            assert self.reset_hook is not None  # checked above
            self.reset_hook()
        self._resync()

    def flush(self) -> None:
        """Put every queued posted write on the wire now (no round trip, nothing verified)."""
        if not self.is_open:
            raise NotOpenError()
        self._flush_tx()

    def sync(self) -> None:
        """Return once the board has processed every write sent so far (verified in verify mode)."""
        if not self.is_open:
            raise NotOpenError()
        self._fence()
        self._attempt("sync", self._read_sync)

    # ---- the board map, proven ------------------------------------------------------------------
    def _word_mapped(self, word: int) -> bool:
        """Write a distinctive value to one board word, read it back, put the old value back.
        A LiteX SoC drops a write to an address no slave decodes and answers its read with
        0xFFFFFFFF after the bus timeout (``wishbone.Timeout``, litex/soc/interconnect/wishbone.py)."""
        def once() -> bool:
            try:
                old = int(self._read_words_once(word, 1, True)[0])
                probe = (old ^ 0x5AA5_C33C) & 0xFFFF_FFFF
                self._queue_write(word, np.array([probe], dtype=np.uint32), True)
                got = int(self._read_words_once(word, 1, True)[0])
            except _Silence:
                # no reply at all: the bus timed out on the word (the bridge lost the read sent
                # behind a stalled write, or a bus timeout longer than its FSM timer cut the
                # reply); the resync proves the board itself is alive, or raises BoardDeadError
                self._resync()
                return False
            self._queue_write(word, np.array([old], dtype=np.uint32), True)
            self._flush_tx()
            return got == probe

        # a fault on a lossy link is told apart from an unmapped word by asking twice
        return bool(self._attempt(f"probe of board word {word:#x}", lambda: once() or once()))

    def probe_window(self, granule: int = 1 << 20) -> None:
        """Prove the board maps the whole DRAM window of :attr:`board_map` (its first and last
        word); otherwise raise :class:`BoardConfigError` naming the configured window and the part
        of it the board maps (found by bisection to ``granule`` bytes; ~20 probes)."""
        if not self.is_open:
            raise NotOpenError()
        self._fence()
        bm = self.board_map
        first, last = bm.dram_base >> 2, (bm.dram_base + bm.dram_size - 4) >> 2
        lab = (f"the configured DRAM window (NVDLA {bm.dram_nvdla_base:#x}..{bm.dram_nvdla_base + bm.dram_size - 1:#x} "
               f"at board {bm.dram_base:#x}..{bm.dram_base + bm.dram_size - 1:#x}; lab file fields dram_base, "
               f"dram_nvdla_base, dram_size)")
        if not self._word_mapped(first):
            raise BoardConfigError(f"{self.where}: the board maps nothing at board address {bm.dram_base:#x}, the start of "
                                   f"{lab}; the board's memory is elsewhere: set dram_base to where its DRAM sits")
        if self._word_mapped(last):
            return
        lo, hi = 0, bm.dram_size  # mapped at offset lo, unmapped at hi - 4
        while hi - lo > granule:
            mid = (lo + (hi - lo) // 2) & ~3
            if self._word_mapped((bm.dram_base + mid) >> 2):
                lo = mid
            else:
                hi = mid
        end = bm.dram_base + hi
        raise BoardConfigError(
            f"{self.where}: {lab} is larger than the board's: the board maps board {bm.dram_base:#x}..~{end - 1:#x} "
            f"(NVDLA {bm.dram_nvdla_base:#x}..~{bm.dram_nvdla_base + hi - 1:#x}, {hi >> 20} MiB, probed to "
            f"{granule >> 10} KiB) but not board {bm.dram_base + bm.dram_size - 4:#x}; make dram_size at most {hi:#x} "
            f"or serve the board with a larger window")
