"""LiteX's UARTBone bridge (``Stream2Wishbone``, litex/soc/cores/uart.py) as a byte-stream
function, with NVDLA behind it as the bus slave.

:class:`BridgeCore` models the command FSM, its 100 ms timer, the PHY's missing receive FIFO
and the SoC's bus timeout; :class:`_Nvdla` computes a layer off the serving thread so the
bridge keeps serving, register reads meanwhile seeing the unit busy. :class:`EmuStats` counts
what happened on the link and the bus. The link endpoints are in :mod:`.server`.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...drivers.transport import Transport, TransportError
from ...drivers.uartbone import (
    CMD_READ_FIXED,
    CMD_READ_INCR,
    CMD_WRITE_FIXED,
    CMD_WRITE_INCR,
    FSM_TIMEOUT,
    BoardMap,
)
from .regfile import RegisterFileTarget

#: LiteX SoCs put the SoC controller at the CSR base 0xf0000000; its first CSR, ctrl_reset,
#: resets the SoC when written with 1. The emulator resets its NVDLA on a write there.
DEFAULT_RESET_ADDRESS = 0xF000_0000
#: LiteX ``SoCBusHandler(timeout=1e6)`` cycles at a 100 MHz system clock
DEFAULT_BUS_TIMEOUT = 0.010
#: nominal line rate for the FSM timer's arithmetic (the emulator does not pace its output)
DEFAULT_BAUD = 3_000_000


@dataclass(slots=True)
class EmuStats:
    """What the emulated board saw: bytes on the link, faults applied, frames, bus accesses."""

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
