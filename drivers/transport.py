"""The transport interface every target implements (pyserial's one-base-class idea).

A transport moves 32-bit CSB register accesses and external-memory bytes between the
driver and an accelerator. The driver never knows whether it talks to the in-process
model, a Verilator simulation or an FPGA over a UART; it only calls these methods.

Addresses:
  * register addresses are CSB *byte* addresses (e.g. SDP S_LUT_ACCESS_CFG = 0x9008 on the
    configurable nv_small design). A transport that speaks the CSB word protocol divides by 4.
  * memory addresses are DBBIF (AXI) byte addresses as NVDLA sees them (e.g. 0x80000000).

Subclasses implement the underscore methods; this base class owns validation, the
optional access log and the context-manager life cycle.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Self

import numpy as np

from ..errors import TransportError

__all__ = [
    "Transport",
    "TransportError",
    "TransportTimeoutError",
    "NotOpenError",
    "LinkIntegrityError",
    "Timeout",
    "AccessRecord",
]


class TransportTimeoutError(TransportError, TimeoutError):
    """A wait (interrupt, response, poll) ran past its deadline."""


class NotOpenError(TransportError):
    def __init__(self) -> None:
        super().__init__("Attempting to use a transport that is not open")


class LinkIntegrityError(TransportError):
    """The link returned data that failed an integrity check, or a non-idempotent
    operation may or may not have happened. Never retried silently."""


class Timeout:
    """A monotonic deadline (pyserial's ``serial.serialutil.Timeout``): ``None`` is infinite."""

    def __init__(self, duration: float | None) -> None:
        self.duration = duration
        self._deadline = None if duration is None else time.monotonic() + duration

    def expired(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def time_left(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())


@dataclass(frozen=True, slots=True)
class AccessRecord:
    """One register access as seen on the transport, for triage logs."""

    time: float
    direction: str  # "R" or "W"
    address: int
    value: int


class Transport(ABC):
    """Register + memory access to one accelerator. Use as a context manager."""

    #: profile name the target implements (``nv_small``, ``nv_small_256_full``, ``nv_full``)
    profile_name: str = "nv_small"
    #: The pace of the device, which bounds how long a layer may take before it is called hung
    #: (``harness/targets/workload.py``). Seconds one layer may take when nothing better is known:
    suggested_layer_timeout: float = 30.0
    #: NVDLA core cycles simulated per wall-clock second (a simulator; None: hardware, in-process);
    cycles_per_second: float | None = None
    #: cycles of layer work per second of a device that computes the datapath in software;
    work_cycles_per_second: float | None = None
    #: a layer may take max(floor, factor x its expected cycles / speed) seconds (None: the
    #: harness's defaults).
    layer_timeout_factor: float | None = None
    layer_timeout_floor: float | None = None

    def __init__(self) -> None:
        self._is_open = False
        self._observers: list[Callable[[AccessRecord], None]] = []

    # ---- life cycle -------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._is_open

    def open(self) -> None:
        if self._is_open:
            raise TransportError(f"{self!r} is already open")
        self._open()
        self._is_open = True

    def close(self) -> None:
        if self._is_open:
            self._is_open = False
            self._close()

    def __enter__(self) -> Self:
        if not self._is_open:
            self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> None:  # pragma: no cover - trivial default
        """Acquire the board, process or file. Default: nothing to acquire."""

    def _close(self) -> None:  # pragma: no cover - trivial default
        """Release everything ``_open`` acquired, even after an error."""

    # ---- observers (access log) ---------------------------------------------------
    def add_observer(self, fn: Callable[[AccessRecord], None]) -> None:
        """Call ``fn`` with an :class:`AccessRecord` for every register access."""
        self._observers.append(fn)

    def remove_observer(self, fn: Callable[[AccessRecord], None]) -> None:
        self._observers.remove(fn)

    def _notify(self, direction: str, address: int, value: int) -> None:
        if self._observers:
            rec = AccessRecord(time.time(), direction, address, value)
            for fn in self._observers:
                fn(rec)

    def _check(self, address: int) -> None:
        if not self._is_open:
            raise NotOpenError()
        if address % 4 or not 0 <= address < 1 << 32:
            raise ValueError(f"register address {address:#x} is not a 32-bit aligned CSB byte address")

    # ---- registers ----------------------------------------------------------------
    def read32(self, address: int) -> int:
        """Read one 32-bit register at CSB byte ``address``."""
        self._check(address)
        value = self._read32(address)
        self._notify("R", address, value)
        return value

    def write32(self, address: int, value: int, *, posted: bool = True) -> None:
        """Write one 32-bit register. ``posted=False`` waits for the write completion."""
        self._check(address)
        if not 0 <= value < 1 << 32:
            raise ValueError(f"register value {value!r} does not fit 32 bits")
        self._write32(address, value, posted)
        self._notify("W", address, value)

    def read_burst(self, address: int, count: int, *, incr: bool = True) -> list[int]:
        """Read ``count`` words; ``incr=False`` reads the same address repeatedly (FIFO/LUT port)."""
        self._check(address)
        values = self._read_burst(address, count, incr)
        if self._observers:
            for i, v in enumerate(values):
                self._notify("R", address + 4 * i if incr else address, v)
        return values

    def write_burst(self, address: int, values: Sequence[int], *, incr: bool = True) -> None:
        """Write several words; ``incr=False`` writes them all to one address (LUT data port)."""
        self._check(address)
        values = list(map(int, values))
        if values and (min(values) < 0 or max(values) >= 1 << 32):  # one pass each in C, the culprit named
            v = next(v for v in values if not 0 <= v < 1 << 32)
            raise ValueError(f"register value {v!r} does not fit 32 bits")
        self._write_burst(address, values, incr)
        if self._observers:
            for i, v in enumerate(values):
                self._notify("W", address + 4 * i if incr else address, v)

    def write_sequence(self, writes: Sequence[tuple[int, int]]) -> None:
        """Write ``(address, value)`` pairs in order, each posted: a register programming
        sequence, which a link that carries many accesses per request sends as one."""
        writes = [(int(a), int(v)) for a, v in writes]
        for a, v in writes:
            self._check(a)
            if not 0 <= v < 1 << 32:
                raise ValueError(f"register value {v!r} for {a:#x} does not fit 32 bits")
        self._write_sequence(writes)
        if self._observers:
            for a, v in writes:
                self._notify("W", a, v)

    # ---- indirect ports: an index register selects, a data register streams -------------------
    def read_indirect(self, index_address: int, index_value: int, data_address: int, count: int) -> list[int]:
        """Write ``index_value`` to the index register, then read ``count`` words from the
        data port, which advances its own pointer on every access (NVDLA's LUT access pair
        S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA, semantics doc 7). The index write is non-posted:
        on the nv_small RTL a DATA read right behind a posted CFG write still returns the old
        pointer's entry. The pair is idempotent as a unit though neither access is alone, so a
        lossy transport may repeat the whole of it; this default does it once."""
        self.write32(index_address, index_value, posted=False)
        return self.read_burst(data_address, count, incr=False)

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
        """Write ``index_value`` to the index register (non-posted), then ``values`` to the data
        port. ``readback_index`` (the index value that reads the same entries back) lets a lossy
        transport prove the payload (``mask``: the bits the port keeps) and repeat the whole
        unit on a mismatch; this default writes once."""
        self.write32(index_address, index_value, posted=False)
        self.write_burst(data_address, values, incr=False)

    def _read_burst(self, address: int, count: int, incr: bool) -> list[int]:
        return [self._read32(address + 4 * i if incr else address) for i in range(count)]

    def _write_burst(self, address: int, values: Iterable[int], incr: bool) -> None:
        for i, v in enumerate(values):
            self._write32(address + 4 * i if incr else address, v, True)

    def _write_sequence(self, writes: list[tuple[int, int]]) -> None:
        for a, v in writes:
            self._write32(a, v, True)

    @abstractmethod
    def _read32(self, address: int) -> int: ...

    @abstractmethod
    def _write32(self, address: int, value: int, posted: bool) -> None: ...

    # ---- external memory --------------------------------------------------------------
    def mem_write(self, address: int, data: bytes | bytearray | np.ndarray, *, port: str = "pri_mem") -> None:
        """Write bytes into the accelerator's external memory (``pri_mem`` or ``sec_mem``)."""
        if not self._is_open:
            raise NotOpenError()
        buf = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).ravel()
        self._mem_write(address, buf, port)

    def mem_read(self, address: int, size: int, *, port: str = "pri_mem", expect: np.ndarray | None = None) -> np.ndarray:
        """Read ``size`` bytes of external memory as a ``uint8`` array (never-written bytes read 0).

        ``expect``: the bytes the caller expects there (a check's golden). The result is always
        what the memory holds; a target that double-checks its reads over an unreliable link may
        trust a read that equals ``expect`` at once (``_mem_read_expecting``)."""
        if not self._is_open:
            raise NotOpenError()
        if expect is not None:
            exp = np.ascontiguousarray(expect, dtype=np.uint8).ravel()
            if exp.size != size:
                raise ValueError(f"expect has {exp.size} bytes for a read of {size}")
            return self._mem_read_expecting(address, size, port, exp)
        return self._mem_read(address, size, port)

    def _mem_read_expecting(self, address: int, size: int, port: str, expect: np.ndarray) -> np.ndarray:
        """Default: an ordinary read (the expected bytes change nothing)."""
        return self._mem_read(address, size, port)

    @abstractmethod
    def _mem_write(self, address: int, data: np.ndarray, port: str) -> None: ...

    @abstractmethod
    def _mem_read(self, address: int, size: int, port: str) -> np.ndarray: ...

    # ---- interrupt, reset ---------------------------------------------------------------
    def wait_irq(self, timeout: float | None) -> bool:
        """Block until the interrupt line is high or ``timeout`` seconds pass.

        Returns True when the line is asserted (or, for a UART board without a line, when GLB
        S_INTR_STATUS has a bit set); the driver always reads S_INTR_STATUS afterwards.
        """
        if not self._is_open:
            raise NotOpenError()
        return self._wait_irq(timeout)

    def _wait_irq(self, timeout: float | None) -> bool:
        return True

    def settled(self) -> bool:
        """True when nothing the device does can change a register or raise the interrupt
        until the host writes again: an in-process model with no layer in flight. A wait that is
        not satisfied then fails at once, not after spinning to its timeout. Devices that run on
        their own (a simulator, a board, a C model) are never settled: the default."""
        return False

    def reset(self) -> None:
        """Reset the accelerator (registers to reset values; memory is kept)."""
        if not self._is_open:
            raise NotOpenError()
        self._reset()

    def _reset(self) -> None:  # pragma: no cover - default: no reset line
        raise TransportError(f"{type(self).__name__} has no reset")

    def link_report(self) -> str:
        """What went wrong on the way to the accelerator since the transport was opened, for a
        failing test's message ("" when nothing did or the transport cannot lose anything)."""
        return ""

    def not_in_reset_state(self) -> str | None:
        """Why NVDLA's own traces and firmware, which assume every unit as a reset leaves it,
        cannot run on this target now (None: they can, the default)."""
        return None

    def describe(self) -> str:
        """One line naming the target, for reports."""
        return type(self).__name__
