"""A trace's checks and result: :class:`CheckResult` per ``check_crc``/``check_nothing``,
:class:`TraceResult` per run, and the CRC of a checked memory region read from the target.

CRC: reflected CRC-32, poly 0xEDB88320, init/final-xor 0xFFFFFFFF (= ``zlib.crc32``) over the
bytes (NVDLA's ``verif/verilator/nvdla.cpp``); never-written memory reads 0.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...drivers.transport import Transport, TransportError
from ..targets.memory import KnownMemory
from .limits import TraceError
from .memory_setup import SETUP_CHUNK

__all__ = ["CheckResult", "TraceResult", "Probes", "region_crc"]


@dataclass
class CheckResult:
    sync_id: str
    kind: str  # crc / nothing
    port: str = "pri_mem"
    address: int = 0
    size: int = 0
    expected: int | None = None
    actual: int | None = None
    vacuous: bool = False  # the region's CRC already matched before anything ran
    poisoned: bool = False
    line: int = 0

    @property
    def passed(self) -> bool:
        return self.kind == "nothing" or self.actual == self.expected

    def describe(self) -> str:
        if self.kind == "nothing":
            return f"{self.sync_id}: no data check"
        verdict = "ok" if self.passed else "MISMATCH"
        extra = " (vacuous: matched before the layer ran)" if self.vacuous else ""
        extra += " (region poisoned before the run)" if self.poisoned else ""
        act = "-" if self.actual is None else f"{self.actual:#010x}"
        return (f"{self.sync_id}: crc {self.port}[{self.address:#x}+{self.size:#x}] "
                f"expected {self.expected:#010x} got {act} {verdict}{extra}")


@dataclass
class TraceResult:
    name: str
    status: str  # passed / failed / skipped / error
    checks: list[CheckResult] = field(default_factory=list)
    message: str = ""
    duration: float = 0.0
    register_writes: int = 0
    setup: str = ""  # "full" or "lean" (run_trace's memory set-up), with the reason for a fallback
    trusted_bytes: int = 0  # lean set-up: bytes not sent because the board was known to hold them

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def setup_note(self) -> str:
        """The memory set-up when it is worth saying (a fallback, a rerun, nothing poisoned): "" for
        a plain "full" or "lean"."""
        return self.setup if "(" in self.setup else ""

    def summary(self) -> str:
        lines = [f"{self.name}: {self.status.upper()} ({self.duration:.2f} s)" + (f" - {self.message}" if self.message else "")]
        lines += ["  " + c.describe() for c in self.checks]
        if self.setup_note:
            lines.append(f"  memory set-up: {self.setup_note}")
        return "\n".join(lines)


@dataclass
class Probes:
    """Distinctive words planted, for a verifying link, in the bytes of a checked region that
    no layer reads or writes (``mask``): ``planted`` is what was written there, ``restore`` the
    set-up's bytes the check's CRC counts. A uniform stretch (a zero gap) is what a misaddressed
    read also returns, so proving it takes four reads; with a probe in every burst one read
    that equals the expected bytes is proof (``SerialTransport.read_probe_spacing``). A probe
    found intact after the run proves its bytes untouched."""

    mask: np.ndarray
    planted: np.ndarray
    restore: np.ndarray


def region_crc(transport: Transport, port: str, address: int, size: int, *, where: tuple[Path, int] | None = None,
               expect: np.ndarray | None = None, known: KnownMemory | None = None,
               probes: Probes | None = None) -> int:
    """zlib CRC-32 of a memory region, read in chunks of at most :data:`SETUP_CHUNK` bytes.
    ``expect``: the bytes the region should hold (a target that double-checks its reads may
    trust one that equals them at once); ``known`` learns what was read. ``probes``: words
    planted in bytes nothing writes (:class:`Probes`); a chunk whose probes are all intact
    counts the set-up's bytes there, as if never planted. A region the target refuses
    (``ValueError``) is a :class:`TraceError` at ``where``."""
    crc = 0
    try:
        for off in range(0, size, SETUP_CHUNK):
            n = min(SETUP_CHUNK, size - off)
            if expect is None:
                part = transport.mem_read(address + off, n, port=port)
            else:
                part = transport.mem_read(address + off, n, port=port, expect=expect[off : off + n])
            if known is not None:
                known.learn(address + off, part)
            if probes is not None:
                m = probes.mask[off : off + n]
                if np.array_equal(part[m], probes.planted[off : off + n][m]):
                    part = part.copy()
                    part[m] = probes.restore[off : off + n][m]
            crc = zlib.crc32(np.ascontiguousarray(part, dtype=np.uint8).tobytes(), crc)
    except (TransportError, TraceError):
        raise
    except ValueError as e:
        if where is None:
            raise
        raise TraceError(where[0], where[1], f"check_crc {port}[{address:#x}+{size:#x}]: {e}") from None
    return crc & 0xFFFFFFFF
