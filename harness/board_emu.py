"""A software FPGA board: LiteX's UARTBone bridge in front of any :class:`Transport`.

``nvdla-hil board-emu`` serves a target (the in-process model by default) over a
pseudo-terminal or a TCP socket on 127.0.0.1, speaking the byte protocol that
:mod:`nvdla_hil.drivers.uartbone` documents. It models what matters for a host driver:

* the command FSM of ``Stream2Wishbone`` (LiteX ``litex/soc/cores/uart.py``): unknown
  commands consume ``len`` + address and do nothing; each write word reaches the bus as
  soon as its 4 bytes are in (a burst cut short has already written its first words);
* the 100 ms FSM timer: a command not complete 100 ms after its command byte is dropped,
  and a read reply still being sent when it fires is cut; a zero ``len`` never ends a
  command (read: words stream until the timer; write: words are taken until then);
* the PHY's missing receive FIFO: input that arrives while a read response is being sent, or
  while the bus waits, is lost (bytes already queued behind a read command are discarded);
* unmapped bus addresses follow the SoC's bus timeout (``bus_timeout``, 10 ms a word by
  default): writes are dropped, reads answer 0xFFFFFFFF;
* NVDLA computes a layer while the bridge keeps serving: the bus write that launches it
  returns at once, the done bits of GLB S_INTR_STATUS rise when it is finished, and register
  reads meanwhile see the unit busy (:class:`_Nvdla`).

The default board map holds NVDLA 0x80000000..0xbfffffff (where NVDLA's traces put their
surfaces: 0x80000000, 0x90000000, 0xa0000000).

Fault injection (``FaultConfig``), seeded and applied to every byte in both directions:
dropped bytes, corrupted bytes (XOR with a random non-zero value), a random delay before
each response (``--delay``: a slow board), a link that goes silent after a given number of
received bytes (``--silent-after``: a dead board that still takes bytes) and one that stops
reading altogether (``--wedge-after``: a hung bridge, so the host's writes block).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import select
import socket
import sys
import threading
import time
import tty
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..drivers.transport import Transport, TransportError
from ..drivers.uartbone import (
    CMD_READ_FIXED,
    CMD_READ_INCR,
    CMD_WRITE_FIXED,
    CMD_WRITE_INCR,
    FSM_TIMEOUT,
    GLB_HW_VERSION,
    BoardMap,
)
from .memory import SparseMemory

_DEFAULT_MAP = BoardMap()
#: LiteX SoCs put the SoC controller at the CSR base 0xf0000000; its first CSR, ctrl_reset,
#: resets the SoC when written with 1. The emulator resets its NVDLA on a write there.
DEFAULT_RESET_ADDRESS = 0xF000_0000
#: LiteX ``SoCBusHandler(timeout=1e6)`` cycles at a 100 MHz system clock
DEFAULT_BUS_TIMEOUT = 0.010
#: nominal line rate for the FSM timer's arithmetic (the emulator does not pace its output)
DEFAULT_BAUD = 3_000_000
__all__ = [
    "BoardEmulator",
    "BridgeCore",
    "EmuStats",
    "FaultConfig",
    "RegisterFileTarget",
    "add_subcommands",
    "fault_campaign",
    "serve_in_thread",
]


# ---- a minimal target --------------------------------------------------------------------------
class RegisterFileTarget(Transport):
    """Every register is plain RW storage (reset 0, GLB HW_VERSION 0x00303031); memory is sparse.

    Stands in for the model target in link tests: it has no side effects, so any value a
    test reads must be the value last written to that address.
    """

    def __init__(self, profile_name: str = "nv_small", reset_values: dict[int, int] | None = None) -> None:
        super().__init__()
        self.profile_name = profile_name
        self.reset_values = {GLB_HW_VERSION: 0x0030_3031} if reset_values is None else dict(reset_values)
        self.regs: dict[int, int] = dict(self.reset_values)
        self.memory = SparseMemory()

    def _read32(self, address: int) -> int:
        return self.regs.get(address, 0)

    def _write32(self, address: int, value: int, posted: bool) -> None:
        if address in self.reset_values and address == GLB_HW_VERSION:
            return  # read-only identification register
        self.regs[address] = value

    def _mem_write(self, address: int, data: np.ndarray, port: str) -> None:
        self.memory.write(address, data)

    def _mem_read(self, address: int, size: int, port: str) -> np.ndarray:
        return self.memory.read(address, size)

    def _reset(self) -> None:
        self.regs = dict(self.reset_values)


# ---- fault model ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Per-byte fault rates (both directions), response delay and a silent link."""

    drop: float = 0.0
    corrupt: float = 0.0
    delay: float = 0.0  # seconds: each response waits uniform(0, delay)
    silent_after: int | None = None  # received bytes after which the board stops answering
    #: received bytes after which the board stops reading its link at all (a hung bridge, a
    #: stopped ``litex_server``): the host's writes then fill the OS buffers and block
    wedge_after: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("drop", "corrupt"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise ValueError(f"fault rate {name}={v} outside [0, 1)")
        if self.delay < 0:
            raise ValueError(f"delay {self.delay} must be >= 0")

    @property
    def active(self) -> bool:
        return bool(self.drop or self.corrupt)


@dataclass(slots=True)
class EmuStats:
    bytes_in: int = 0
    bytes_out: int = 0
    dropped: int = 0
    corrupted: int = 0
    frames: int = 0
    bad_commands: int = 0
    bus_reads: int = 0
    bus_writes: int = 0
    unmapped: int = 0
    fsm_timeouts: int = 0
    lost_while_sending: int = 0
    resets: int = 0
    target_errors: int = 0
    async_writes: int = 0  # launch writes whose layer was computed off the serving thread
    reads_while_busy: int = 0  # register reads answered while a layer computed
    cut_replies: int = 0  # read replies cut by the FSM timer
    write_log: list[tuple[str, int, int]] = field(default_factory=list)


class _Faults:
    def __init__(self, cfg: FaultConfig, stats: EmuStats) -> None:
        self.cfg = cfg
        self.stats = stats
        self.rng = np.random.default_rng(cfg.seed)

    def apply(self, data: bytes) -> bytes:
        if not data or not self.cfg.active:
            return data
        arr = np.frombuffer(data, dtype=np.uint8).copy()
        n = arr.size
        if self.cfg.corrupt:
            hit = self.rng.random(n) < self.cfg.corrupt
            k = int(hit.sum())
            if k:
                arr[hit] ^= self.rng.integers(1, 256, size=k, dtype=np.uint8)
                self.stats.corrupted += k
        if self.cfg.drop:
            keep = self.rng.random(n) >= self.cfg.drop
            self.stats.dropped += int(n - keep.sum())
            arr = arr[keep]
        return arr.tobytes()


# ---- the NVDLA side: layers computed off the serving thread ------------------------------------
def _launch_addresses(target: Transport) -> frozenset[int]:
    """CSB addresses whose write may start a layer: every ``D_OP_ENABLE`` and BDMA's
    ``CFG_LAUNCH0/1`` (NVDLA's programming guide: a unit starts when its OP_EN is set)."""
    regmap = getattr(target, "regmap", None)
    if regmap is None:
        return frozenset()
    return frozenset(r.address for r in regmap.registers()
                     if r.name == "D_OP_ENABLE" or (r.block == "BDMA" and r.name.startswith("CFG_LAUNCH")))


#: registers whose read changes state (a pointer moves, a counter counts): never read aside
_READ_SIDE_EFFECTS = ("S_LUT_ACCESS_DATA", "S_LUT_ACCESS_CFG", "S_CBUF_FLUSH_STATUS")


def _peeker(target: Transport) -> Callable[[int], int | None] | None:
    """A side-effect-free register read for use while a layer computes, or None.

    NVDLA answers CSB reads while a layer runs (its configuration registers are flops, the
    status bits rise when a unit is done). For the model target that is its register file
    as it stands: a layer's done bits are set only when the layer completes."""
    if isinstance(target, RegisterFileTarget):
        return lambda a: target.regs.get(a, 0)
    by_addr, value, group = (getattr(target, n, None) for n in ("_by_addr", "_value", "_group_of"))
    if by_addr is None or value is None or group is None:
        return None

    def peek(address: int) -> int | None:
        r = by_addr.get(address)
        if r is None or r.name in _READ_SIDE_EFFECTS:
            return None
        try:
            return int(value(r, group(r)))
        except (KeyError, RuntimeError):  # a reset rebuilding the register file meanwhile
            return None

    return peek


class _Nvdla:
    """The bus slave behind the bridge: a worker thread computes layers so the bridge keeps
    serving. A write to a launch register (:func:`_launch_addresses`) is handed to the worker
    and the bus write returns at once; accesses behind it wait in order. While it computes,
    register reads are answered from the register file as it stands (:func:`_peeker`: done
    bits still clear, so a status poll sees the unit busy); memory accesses, reads of registers
    with read side effects or with a write queued behind the layer wait for the worker."""

    def __init__(self, target: Transport, stats: EmuStats, settle: Callable[[], None] | None, *,
                 threaded: bool) -> None:
        self.target, self.stats, self.settle = target, stats, settle
        self.launch = _launch_addresses(target) if threaded else frozenset()
        self.peek = _peeker(target) if threaded else None
        self._cv = threading.Condition()
        self._queue: deque[tuple[Callable[[], None], int | None]] = deque()
        self._running = False
        self._thread: threading.Thread | None = None
        self._stop = False

    # worker ---------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stop:
                    self._cv.wait()
                if self._stop and not self._queue:
                    return
                fn, _ = self._queue.popleft()
                self._running = True
            try:
                fn()
            finally:
                with self._cv:
                    self._running = False
                    self._cv.notify_all()

    @property
    def idle(self) -> bool:
        return not self._queue and not self._running

    def wait_idle(self) -> None:
        with self._cv:
            while self._queue or self._running:
                self._cv.wait(0.05)

    def _post(self, fn: Callable[[], None], address: int | None) -> None:
        with self._cv:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="board-emu-nvdla", daemon=True)
                self._thread.start()
            self._queue.append((fn, address))
            self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    # bus operations -----------------------------------------------------------------------------
    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except TransportError:
            self.stats.unmapped += 1
        except Exception as e:  # noqa: BLE001 - e.g. UnitNotModelled: the board must keep serving
            self.stats.target_errors += 1
            print(f"board-emu: {type(e).__name__}: {e}", file=sys.stderr)

    def csr_write(self, address: int, value: int) -> None:
        def do() -> None:
            self.target.write32(address, value)
            if self.settle is not None:
                self.settle()

        if address in self.launch or not self.idle:
            self.stats.async_writes += address in self.launch
            self._post(lambda: self._guard(do), address)
        else:
            self._guard(do)

    def reset(self) -> None:
        if self.idle:
            self.target.reset()
        else:
            self._post(self.target.reset, None)

    def csr_read(self, address: int) -> int:
        """Raises TransportError for a register the target does not have."""
        with self._cv:
            aside = not self.idle and self.peek is not None and not any(a == address for _, a in self._queue)
        if aside:
            v = self.peek(address) if self.peek is not None else None
            if v is not None:
                self.stats.reads_while_busy += 1
                return v
        self.wait_idle()
        return self.target.read32(address)

    def mem_write(self, address: int, data: bytes) -> None:
        self.wait_idle()
        self.target.mem_write(address, data)

    def mem_read(self, address: int, size: int) -> np.ndarray:
        self.wait_idle()
        return np.asarray(self.target.mem_read(address, size), dtype=np.uint8)


# ---- the bridge FSM --------------------------------------------------------------------------------
class BridgeCore:
    """``Stream2Wishbone`` as a byte-stream function: ``feed(bytes, now) -> response bytes``.

    Timing that a host can see, in the gateware's terms (litex/soc/cores/uart.py, LiteX 2024.12):

    * the FSM timer (``WaitTimer(100e-3*clk_freq)``, armed outside RECEIVE-CMD) resets the
      FSM ``fsm_timeout`` after a command byte: a read reply still being sent then is cut
      (the bytes the PHY had not started are never sent);
    * ``length`` 0: ``words_count == length - 1`` compares an 8-bit counter with a 9-bit
      511 (Migen widens the subtraction), so it never ends: a read streams words, a write
      takes words, until the FSM timer fires;
    * a bus access no slave answers completes after the SoC's bus timeout
      (``wishbone.Timeout``, ``bus_timeout`` 1e6 cycles: 10 ms at 100 MHz) with
      ``dat_r = 0xFFFFFFFF``; a write there is dropped. Meanwhile the bridge holds
      ``sink.ready`` low and the PHY, with no receive FIFO, loses what arrives.

    ``baud`` is the nominal line rate used for that arithmetic (the emulator does not pace its
    output); ``sleep`` is called with each bus timeout (real time by default).
    """

    def __init__(
        self,
        target: Transport,
        board_map: BoardMap,
        stats: EmuStats | None = None,
        *,
        fsm_timeout: float = FSM_TIMEOUT,
        log_writes: bool = False,
        reset_address: int | None = DEFAULT_RESET_ADDRESS,
        bus_timeout: float = DEFAULT_BUS_TIMEOUT,
        baud: int = DEFAULT_BAUD,
        threaded: bool = False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.target = target
        # a model behind the bridge completes each layer at once (its host polls the status
        # over a link with read-back rules; see ModelTarget.run_until_idle)
        self._settle = getattr(target, "run_until_idle", None)
        self.reset_address = reset_address
        self.map = board_map
        self.stats = stats or EmuStats()
        self.fsm_timeout = fsm_timeout
        self.bus_timeout = float(bus_timeout)
        if baud <= 0:
            raise ValueError(f"baud {baud} must be > 0")
        self.byte_time = 10.0 / baud
        self.sleep = sleep
        self.log_writes = log_writes
        self.nvdla = _Nvdla(target, self.stats, self._settle, threaded=threaded)
        self.buf = bytearray()
        self._frame: tuple[int, int, int] | None = None  # (cmd, length, word address) of a write in progress
        self._done = 0
        self._started: float | None = None
        self._stalled = 0.0  # bus-timeout time spent inside the current command

    def close(self) -> None:
        self.nvdla.close()

    # bus ----------------------------------------------------------------------------------------
    def _stall(self) -> None:
        """One bus access ran into the SoC's bus timeout: the bridge waits it out, and input
        arriving meanwhile is lost (no RX FIFO; ``sink.ready`` is low outside RECEIVE states)."""
        self.stats.unmapped += 1
        self._stalled += self.bus_timeout
        if self.bus_timeout > 0:
            self.sleep(self.bus_timeout)
            lost = min(len(self.buf), int(self.bus_timeout / self.byte_time))
            if lost:
                self.stats.lost_while_sending += lost
                del self.buf[:lost]

    def _dram_run(self, word: int, count: int) -> int | None:
        """NVDLA address of ``count`` incrementing words at ``word`` when all are DRAM, else None."""
        dec = self.map.decode(word * 4)
        if dec is not None and dec[0] == "dram" and self.map.decode(word * 4 + 4 * count - 4) == (
            "dram", dec[1] + 4 * count - 4
        ):
            return dec[1]
        return None

    def _bus_write(self, word: int, values: np.ndarray, incr: bool) -> None:
        self.stats.bus_writes += int(values.size)
        if incr:
            base = self._dram_run(word, int(values.size))
            if base is not None:
                self.nvdla.mem_write(base, values.astype("<u4").tobytes())
                if self.log_writes:
                    self.stats.write_log.append(("dram", base, len(values)))
                return
        for i, v in enumerate(values):
            addr = 4 * (word + (i if incr else 0)) & 0xFFFF_FFFF
            dec = self.map.decode(addr)
            if dec is None and addr == self.reset_address:
                if int(v) & 1:
                    self.nvdla.reset()
                    self.stats.resets += 1
                continue
            if dec is None:
                self._stall()
                continue
            if dec[0] == "csr":
                self.nvdla.csr_write(dec[1], int(v))
            else:
                self.nvdla.mem_write(dec[1], int(v).to_bytes(4, "little"))
            if self.log_writes:
                self.stats.write_log.append((dec[0], dec[1], int(v)))

    def _read_word(self, addr: int) -> int | None:
        """One bus read; None when no slave answers (the caller waits out the bus timeout)."""
        dec = self.map.decode(addr)
        if dec is None:
            return None
        try:
            if dec[0] == "csr":
                return self.nvdla.csr_read(dec[1])
            return int(self.nvdla.mem_read(dec[1], 4).view("<u4")[0])
        except TransportError:
            return 0  # NVDLA's CSB answers an address it does not decode with 0 (no bus timeout)

    def _bus_read(self, word: int, length: int, incr: bool) -> bytes:
        """The reply to a read command, cut where the FSM timer fires."""
        budget = self.fsm_timeout
        per_word = 4 * self.byte_time
        # words the line can carry before the timer: a zero length streams until then
        fit = int(budget / per_word) + 1 if per_word > 0 else 256
        count = length if length else fit
        self.stats.bus_reads += count
        if incr and length:
            base = self._dram_run(word, count)
            if base is not None:
                raw = self.nvdla.mem_read(base, 4 * count)
                return self._cut(raw.view("<u4").astype(">u4").tobytes(), 0.0)
        out = bytearray()
        t = 0.0
        for i in range(count):
            addr = 4 * (word + (i if incr else 0)) & 0xFFFF_FFFF
            v = self._read_word(addr)
            if v is None:
                t += self.bus_timeout
                if t >= budget:  # the timer fires while the bus waits: nothing more is sent
                    self.stats.unmapped += 1
                    self.sleep(max(0.0, budget - (t - self.bus_timeout)))
                    self.stats.fsm_timeouts += 1
                    return bytes(out)
                self.stats.unmapped += 1
                self.sleep(self.bus_timeout)
                v = 0xFFFF_FFFF
            out += int(v).to_bytes(4, "big")
            t += per_word
            if t >= budget and (not length or i + 1 < count):  # more to send: the timer ends it
                self.stats.fsm_timeouts += 1
                self.stats.cut_replies += 1
                return self._cut(bytes(out), t - per_word * (len(out) // 4))
        return self._cut(bytes(out), t - per_word * (len(out) // 4))

    def _cut(self, out: bytes, bus_time: float) -> bytes:
        """Bytes the PHY starts before the FSM timer fires (``bus_time`` spent on the bus first)."""
        if self.byte_time <= 0:
            return out
        room = math.ceil((self.fsm_timeout - bus_time) / self.byte_time - 1e-9)  # bytes started in time
        if len(out) > room:
            self.stats.fsm_timeouts += 1
            self.stats.cut_replies += 1
            return out[: max(0, room)]
        return out

    # FSM ------------------------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """The FSM timer: drop a command not finished ``fsm_timeout`` after its command byte."""
        if self._started is not None and now - self._started + self._stalled > self.fsm_timeout:
            self.stats.fsm_timeouts += 1
            self.buf.clear()  # bytes of the broken command still queued belong to it
            self._frame = None
            self._started = None
            self._stalled = 0.0

    def feed(self, data: bytes, now: float) -> bytes:
        self.tick(now)
        self.buf += data
        out = bytearray()
        buf = self.buf
        while buf:
            if self._started is None:
                self._started = now
                self._stalled = 0.0
            if self._frame is None:
                if len(buf) < 6:
                    break
                cmd, length = buf[0], buf[1]
                word = int.from_bytes(buf[2:6], "big")
                del buf[:6]
                self.stats.frames += 1
                if cmd in (CMD_READ_INCR, CMD_READ_FIXED):
                    timeouts = self.stats.fsm_timeouts
                    resp = self._bus_read(word, length, cmd == CMD_READ_INCR)
                    out += resp
                    # no RX FIFO while READ/SEND-DATA: what the host queued behind is lost, all
                    # of it when the reply took the FSM timer's whole 100 ms
                    cut = self.stats.fsm_timeouts != timeouts
                    lost = len(buf) if cut else min(len(buf), len(resp))
                    if lost:
                        self.stats.lost_while_sending += lost
                        del buf[:lost]
                    self._started = None
                    continue
                if cmd not in (CMD_WRITE_INCR, CMD_WRITE_FIXED):
                    self.stats.bad_commands += 1
                    self._started = None
                    continue
                self._frame = (cmd, length, word)
                self._done = 0
            cmd, length, word = self._frame
            incr = cmd == CMD_WRITE_INCR
            want = (length - self._done) if length else 1 << 30
            k = min(want, len(buf) // 4)
            if k == 0:
                break
            vals = np.frombuffer(bytes(buf[: 4 * k]), dtype=">u4").astype(np.uint32)
            del buf[: 4 * k]
            self._bus_write(word + (self._done if incr else 0), vals, incr)
            self._done += k
            if self._stalled and now - self._started + self._stalled > self.fsm_timeout:
                self.tick(now)  # bus timeouts used the timer up: the rest of the command is lost
                break
            if length and self._done == length:
                self._frame = None
                self._started = None
        if not buf and self._frame is None:
            self._started = None
        return bytes(out)


# ---- link endpoints ---------------------------------------------------------------------------------
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
        self._faults = _Faults(self.faults, self.stats)
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


# ---- fault campaign ----------------------------------------------------------------------------------
CAMPAIGN_REGS = tuple(0x5000 + 4 * i for i in range(16))
CAMPAIGN_PORT = 0x900C  # SDP S_LUT_ACCESS_DATA on nv_small: a data port that does not read back
CAMPAIGN_MEM = 0x8000_0000
CAMPAIGN_OPS = ("write32+sync", "read32", "write_burst4+sync", "read_burst8", "port write (no readback)",
                "mem_write 24 B", "mem_read 24 B", "mem_read 24 B expecting")


def fault_campaign(
    n_ops: int,
    faults: FaultConfig,
    *,
    mode: str = "pty",
    policy: str = "verify",
    retries: int = 5,
    progress: Callable[[int, float], None] | None = None,
) -> dict:
    """Random register and memory operations from a :class:`SerialTransport` through a faulty
    emulated link to a :class:`RegisterFileTarget`; each result is checked against the
    target's own state (the truth) right after the call returns, when the board is idle.

    A quarter of the written values and buffers are zeros: NVDLA programming writes 0 far
    more than anything else, and 0 is also what a misaddressed read returns. Per operation
    kind: ``ok`` (returned and correct), ``reported`` (LinkIntegrityError or
    TransportTimeoutError), ``silent_wrong`` (returned, wrong: the figure that must be 0);
    for the port, ``payload_wrong`` (framing proven, payload unprovable without a checksum).
    ``silent`` lists the first wrong results for triage."""
    from ..drivers.transport import LinkIntegrityError, TransportTimeoutError
    from ..drivers.uartbone import IntegrityPolicy, SerialTransport

    tgt = RegisterFileTarget()
    rng = np.random.default_rng(faults.seed + 100)
    per_op = {name: {"ok": 0, "reported": 0, "silent_wrong": 0} for name in CAMPAIGN_OPS}
    per_op[CAMPAIGN_OPS[4]]["payload_wrong"] = 0
    silent: list[str] = []
    regs = CAMPAIGN_REGS

    def value() -> int:
        return 0 if rng.random() < 0.25 else int(rng.integers(0, 1 << 32))

    def truth(k: int) -> list[int]:
        return [tgt.regs.get(regs[0] + 4 * i, 0) for i in range(k)]

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
            a = int(rng.choice(regs))
            r = per_op[CAMPAIGN_OPS[op]]
            got: object = None
            want: object = None
            s0 = time.perf_counter()
            try:
                if op == 0:
                    want = value()
                    t.write32(a, want)
                    t.sync()
                    got = tgt.regs.get(a, 0)
                elif op == 1:
                    got = t.read32(a)
                    want = tgt.regs.get(a, 0)
                elif op == 2:
                    want = [0] * 4 if rng.random() < 0.25 else rng.integers(0, 1 << 32, 4).tolist()
                    t.write_burst(regs[0], want)
                    t.sync()
                    got = truth(4)
                elif op == 3:
                    got = t.read_burst(regs[0], 8)
                    want = truth(8)
                elif op == 4:
                    v = int(rng.integers(0, 1 << 32))
                    t.write32(CAMPAIGN_PORT, v)
                    r["payload_wrong"] += tgt.regs.get(CAMPAIGN_PORT) != v
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
                else:  # a check's read: its golden right, off by one byte (a DUT bug), or zeros
                    off = int(rng.integers(0, 64))
                    want_a = tgt.memory.read(CAMPAIGN_MEM + off, 24)
                    exp = want_a.copy()
                    kind = rng.random()
                    if kind < 1 / 3:
                        exp[int(rng.integers(0, 24))] ^= 0x40
                    elif kind < 2 / 3:
                        exp[:] = 0
                    got = t.mem_read(CAMPAIGN_MEM + off, 24, expect=exp).tolist()
                    want = want_a.tolist()
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
        intended = {*regs, CAMPAIGN_PORT}
        stray = sum(1 for k, addr, _ in emu.stats.write_log
                    if (k == "csr" and addr not in intended) or (k == "dram" and not 0 <= addr - CAMPAIGN_MEM < 96))
        total = {k: sum(d[k] for d in per_op.values()) for k in ("ok", "reported", "silent_wrong")}
        return {"ops": n_ops, "per_op": per_op, "total": total, "silent": silent,
                "stray_bus_writes": stray, "link": t.stats.snapshot(),
                "dropped": emu.stats.dropped, "corrupted": emu.stats.corrupted,
                "bytes_in": emu.stats.bytes_in, "bytes_out": emu.stats.bytes_out,
                "elapsed_s": elapsed, "slowest_op_s": worst}


# ---- CLI --------------------------------------------------------------------------------------------
def _make_target(backend: str, profile: str) -> Transport:
    if backend == "regfile":
        return RegisterFileTarget(profile)
    try:
        from .targets.model import ModelTarget
    except ImportError as e:
        raise SystemExit(f"board-emu: the model target is not available ({e}); use --backend regfile") from None
    return ModelTarget(profile=profile)


def _int(s: str) -> int:
    return int(s, 0)


def _port(s: str) -> int:
    """A TCP port for ``--tcp``: 0 (any free port) to 65535."""
    try:
        v = int(s, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a port number (0..65535)") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"port {v} is out of range 0..65535 (0 = any free port)")
    return v


def _prob(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{v!r} is not a probability in 0..1")
    return v


def _seconds(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a number of seconds") from None
    if not (0.0 <= v <= 3600.0):
        raise argparse.ArgumentTypeError(f"{v!r} is not a number of seconds in 0..3600")
    return v


def _count(s: str) -> int:
    try:
        v = int(s, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "board-emu",
        help="serve a software NVDLA board over LiteX UARTBone (pty or TCP)",
        description=__doc__.split("\n\n")[0],
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--pty", action="store_true", help="serve on a pseudo-terminal (default)")
    where.add_argument("--tcp", type=_port, metavar="PORT", help="serve on 127.0.0.1:PORT (0 = any free port)")
    p.add_argument("--profile", default="nv_small", help="hardware profile of the model (default nv_small)")
    p.add_argument("--backend", choices=("model", "regfile"), default="model",
                   help="model = the NVDLA model target; regfile = plain RW registers (link tests)")
    p.add_argument("--csr-base", type=_int, default=_DEFAULT_MAP.csr_base, help="board address of the CSB window")
    p.add_argument("--dram-base", type=_int, default=_DEFAULT_MAP.dram_base, help="board address of the DRAM window")
    p.add_argument("--dram-nvdla-base", type=_int, default=_DEFAULT_MAP.dram_nvdla_base,
                   help="NVDLA address the DRAM window starts at")
    p.add_argument("--dram-size", type=_int, default=_DEFAULT_MAP.dram_size,
                   help=f"bytes of the DRAM window (default {_DEFAULT_MAP.dram_size:#x}: NVDLA "
                        f"{_DEFAULT_MAP.dram_nvdla_base:#x}..{_DEFAULT_MAP.dram_nvdla_base + _DEFAULT_MAP.dram_size - 1:#x}, "
                        f"where NVDLA's traces put their surfaces)")
    p.add_argument("--bus-timeout", type=_seconds, default=DEFAULT_BUS_TIMEOUT,
                   help="seconds an access to an unmapped bus address takes before it answers 0xFFFFFFFF "
                        "(LiteX's bus timeout, 1e6 cycles; default 0.01)")
    p.add_argument("--baud", type=_count, default=DEFAULT_BAUD,
                   help="nominal line rate for the 100 ms FSM timer's arithmetic (default 3000000)")
    p.add_argument("--inline-layers", action="store_true",
                   help="compute each layer inside the bus write that launches it (the link stalls meanwhile)")
    p.add_argument("--drop", type=_prob, default=0.0, help="probability a byte is dropped (each direction)")
    p.add_argument("--corrupt", type=_prob, default=0.0, help="probability a byte is corrupted")
    p.add_argument("--delay", type=_seconds, default=0.0, help="max random delay before each response (s)")
    p.add_argument("--silent-after", type=_count, default=None, help="stop answering after N received bytes")
    p.add_argument("--wedge-after", type=_count, default=None,
                   help="stop reading the link at all after N received bytes (a hung bridge: host writes block)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reset-address", type=_int, default=DEFAULT_RESET_ADDRESS,
                   help="board address whose write resets NVDLA (LiteX ctrl_reset CSR; default 0xf0000000)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        bmap = BoardMap(csr_base=args.csr_base, dram_base=args.dram_base,
                        dram_nvdla_base=args.dram_nvdla_base, dram_size=args.dram_size)
        faults = FaultConfig(drop=args.drop, corrupt=args.corrupt, delay=args.delay,
                             silent_after=args.silent_after, wedge_after=args.wedge_after, seed=args.seed)
    except ValueError as e:
        print(f"board-emu: {e}", file=sys.stderr)
        return 2
    target = _make_target(args.backend, args.profile)
    mode = "tcp" if args.tcp is not None else "pty"
    with target:
        emu = BoardEmulator(target, bmap, faults, mode=mode, tcp_port=args.tcp or 0, reset_address=args.reset_address,
                            bus_timeout=args.bus_timeout, baud=args.baud or DEFAULT_BAUD, threaded=not args.inline_layers)
        print(emu.url, flush=True)
        try:
            emu.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            emu.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="nvdla-hil")
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_subcommands(sub)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
