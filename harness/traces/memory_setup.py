"""A trace's memory set-up: its ``mem_init``/``mem_load`` commands merged so that every byte
crosses the link once, and written to the target.

Execution follows NVDLA's native Verilator player (``verif/verilator/nvdla.cpp``): all memory
commands first (later ones win where they overlap; traces often ``mem_init`` a region and then
``mem_load`` an image over it), then the register sequence. ``mem_init`` of zeros is never
materialised: the set-up fills it on the target (:meth:`SparseMemory.fill` on the model, bounded
chunks of zeros through ``Transport.mem_write`` elsewhere). The set-up writes at most
:data:`SETUP_CHUNK` bytes per transport call and holds no more than that at once per buffer.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...drivers.profiles import HardwareProfile
from ...drivers.transport import Transport, TransportError
from ..targets.memory import KnownMemory, SparseMemory
from .dat import DatImage, read_dat
from .limits import ADDRESS_LIMIT, MAX_TRACE_BYTES, TraceError
from .parse import Trace

__all__ = ["SETUP_CHUNK", "SMALL_FILL", "Fill", "SetupPlan", "SetupWriter", "plan_setup", "merge_pieces", "mem_fill",
           "setup_image", "span", "overlaps"]

#: the memory set-up writes at most this many bytes per transport call
SETUP_CHUNK = 16 << 20
#: zero (or 0xff) fills up to this size are merged into the surrounding data writes
SMALL_FILL = 64 << 10


@dataclass(frozen=True)
class Fill:
    """``size`` bytes of ``value`` (a ``mem_init``, a gap of a ``.dat`` image), never materialised."""

    size: int
    value: int = 0


def span(data: np.ndarray | Fill | DatImage) -> int:
    """Bytes one set-up piece covers."""
    return data.size if isinstance(data, (np.ndarray, Fill)) else data.extent


def overlaps(a: int, n: int, b: int, m: int) -> bool:
    """``[a, a+n)`` and ``[b, b+m)`` share a byte."""
    return a < b + m and b < a + n


def _slices(data: np.ndarray | Fill | DatImage, lo: int, hi: int) -> Iterable[tuple[int, np.ndarray | Fill]]:
    """``(offset, piece)`` covering ``[lo, hi)`` of one set-up command's bytes. A ``.dat`` image
    comes as dense buffers of its records with the gaps between them read as 0 (a run ends at a
    gap longer than :data:`SMALL_FILL` or at :data:`SETUP_CHUNK` bytes), and :class:`Fill` for
    the longer gaps: one piece per run, not one per record (images of 8k one-line records)."""
    if isinstance(data, Fill):
        yield lo, Fill(hi - lo, data.value)
        return
    if isinstance(data, np.ndarray):
        yield lo, data[lo:hi]
        return
    segs = data.segments
    i = max(bisect_right(segs, lo, key=lambda sg: sg[0]) - 1, 0)  # last segment starting at or before lo
    pos = lo  # everything before pos has been yielded
    run: list[tuple[int, bytes, int, int]] = []  # (offset, payload, first byte, end) in this run

    def flush() -> Iterable[tuple[int, np.ndarray]]:
        start, end = run[0][0] + run[0][2], run[-1][3]
        buf = np.zeros(end - start, dtype=np.uint8)
        for off, payload, b0, e in run:
            buf[off + b0 - start : e - start] = np.frombuffer(payload, dtype=np.uint8, count=e - off - b0, offset=b0)
        run.clear()
        yield start, buf

    for off, payload in segs[i:]:
        if off >= hi:
            break
        b, e = max(off, pos), min(hi, off + len(payload))
        if b >= e:
            continue
        if run and (b - run[-1][3] > SMALL_FILL or e - (run[0][0] + run[0][2]) > SETUP_CHUNK):
            yield from flush()
        if not run and b > pos:
            yield pos, Fill(b - pos, 0)
        run.append((off, payload, b - off, e))
        pos = e
    if run:
        yield from flush()
    if pos < hi:
        yield pos, Fill(hi - pos, 0)


def merge_pieces(pieces: list[tuple[str, int, np.ndarray | Fill | DatImage]]) -> list[tuple[str, int, np.ndarray | Fill]]:
    """Merge memory writes (applied in order: later ones win) into as few transport writes as
    possible, per port in address order. A piece is a buffer, a :class:`Fill` or a ``.dat``
    image; the result has buffers (contiguous data merged, at most :data:`SETUP_CHUNK` bytes
    each; fills up to :data:`SMALL_FILL` merged into them) and large :class:`Fill` regions,
    which are never materialised. Never allocates more than :data:`SETUP_CHUNK` at once per
    buffer; the final memory contents are those of applying the pieces in order."""
    out: list[tuple[str, int, np.ndarray | Fill]] = []
    for port in dict.fromkeys(p for p, _, _ in pieces):
        mine = [(a, a + span(d), i, d) for i, (p, a, d) in enumerate(pieces) if p == port and span(d) > 0]
        # which piece owns each byte: the latest one covering it (sweep, max-heap of active pieces)
        starts: dict[int, list[int]] = {}
        for k, (a, _e, _i, _d) in enumerate(mine):
            starts.setdefault(a, []).append(k)
        points = sorted({a for a, _, _, _ in mine} | {e for _, e, _, _ in mine})
        heap: list[tuple[int, int]] = []
        owned: list[list[int]] = []  # [lo, hi, k]
        for j, x in enumerate(points[:-1]):
            for k in starts.get(x, ()):
                heapq.heappush(heap, (-mine[k][2], k))
            while heap and mine[heap[0][1]][1] <= x:
                heapq.heappop(heap)
            if not heap:
                continue
            k = heap[0][1]
            if owned and owned[-1][2] == k and owned[-1][1] == x:
                owned[-1][1] = points[j + 1]
            else:
                owned.append([x, points[j + 1], k])
        ops: list[tuple[int, np.ndarray | Fill]] = []
        for lo, hi, k in owned:
            a, _e, _i, d = mine[k]
            for off, piece in _slices(d, lo - a, hi - a):
                addr = a + off
                if ops and isinstance(piece, Fill) and isinstance(ops[-1][1], Fill) \
                        and ops[-1][1].value == piece.value and ops[-1][0] + ops[-1][1].size == addr:
                    ops[-1] = (ops[-1][0], Fill(ops[-1][1].size + piece.size, piece.value))
                else:
                    ops.append((addr, piece))
        out += _coalesce(port, ops)
    return out


def _coalesce(port: str, ops: list[tuple[int, np.ndarray | Fill]]) -> list[tuple[str, int, np.ndarray | Fill]]:
    """One port's address-ordered pieces as transport writes: contiguous data (and fills up to
    :data:`SMALL_FILL`) joined into buffers of at most :data:`SETUP_CHUNK` bytes; larger fills
    kept as :class:`Fill`."""
    out: list[tuple[str, int, np.ndarray | Fill]] = []
    buf: list[np.ndarray] = []
    start = length = 0

    def flush() -> None:
        nonlocal buf, length
        if buf:
            out.append((port, start, np.concatenate(buf) if len(buf) > 1 else np.array(buf[0], dtype=np.uint8)))
        buf, length = [], 0

    for addr, piece in ops:
        if isinstance(piece, Fill) and piece.size > SMALL_FILL:
            flush()
            out.append((port, addr, piece))
            continue
        data = np.full(piece.size, piece.value, dtype=np.uint8) if isinstance(piece, Fill) else piece
        pos = 0
        while pos < data.size:
            if buf and (start + length != addr + pos or length >= SETUP_CHUNK):
                flush()
            if not buf:
                start = addr + pos
            take = min(data.size - pos, SETUP_CHUNK - length)
            buf.append(data[pos : pos + take])
            length += take
            pos += take
    flush()
    return out


def mem_fill(transport: Transport, port: str, address: int, size: int, value: int) -> None:
    """Set ``size`` bytes to ``value`` on the target without materialising them: the target's
    own ``mem_fill`` when it has one, the model's sparse memory directly, else chunked writes of
    one bounded buffer through ``Transport.mem_write``."""
    fill = getattr(transport, "mem_fill", None)
    if callable(fill):
        fill(address, size, value, port=port)
        return
    mems = getattr(transport, "memories", None)
    if transport.is_open and isinstance(mems, dict) and isinstance(mems.get(port), SparseMemory):
        mems[port].fill(address, size, value)
        return
    chunk = np.full(min(size, SETUP_CHUNK), value, dtype=np.uint8)
    for off in range(0, size, SETUP_CHUNK):
        transport.mem_write(address + off, chunk[: min(SETUP_CHUNK, size - off)], port=port)


def setup_image(merged: list[tuple[str, int, np.ndarray | Fill]], port: str, lo: int, hi: int) -> np.ndarray:
    """The bytes ``[lo, hi)`` of ``port`` after the memory set-up (0 where nothing is set up),
    built locally from the merged set-up pieces."""
    out = np.zeros(hi - lo, dtype=np.uint8)
    for p, a, d in merged:
        n = span(d)
        if p != port or a >= hi or a + n <= lo:
            continue
        s_lo, s_hi = max(a, lo), min(a + n, hi)
        out[s_lo - lo : s_hi - lo] = d.value if isinstance(d, Fill) else d[s_lo - a : s_hi - a]
    return out


@dataclass
class SetupPlan:
    """A trace's memory set-up: ``pieces`` in file order (with each one's ``.cfg`` ``lines``),
    ``merged`` into transport writes."""

    pieces: list[tuple[str, int, np.ndarray | Fill | DatImage]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    merged: list[tuple[str, int, np.ndarray | Fill]] = field(default_factory=list)

    def line_of(self, port: str, addr: int, n: int) -> int | None:
        """The ``.cfg`` line of the first set-up command that covers any of ``port[addr, addr+n)``."""
        return next((ln for (p, a, d), ln in zip(self.pieces, self.lines, strict=True)
                     if p == port and overlaps(a, span(d), addr, n)), None)


def plan_setup(trace: Trace, profile: HardwareProfile) -> SetupPlan:
    """Read the trace's memory commands (each ``.dat`` file once) into a :class:`SetupPlan`; an
    image past the 64-bit address space or ``profile``'s ``mem_address_width``, or a set-up past
    :data:`MAX_TRACE_BYTES`, is a :class:`TraceError` naming the line."""
    limit = 1 << int(profile.mem_address_width)
    plan = SetupPlan()
    images: dict[Path, DatImage] = {}  # a file loaded twice is read once
    set_up = 0
    for c in trace.of_kind("mem_init", "mem_load"):
        if c.kind == "mem_init":
            port, addr, size, pattern = c.args
            plan.pieces.append((port, addr, Fill(size, 0 if pattern == "ALL_ZERO" else 0xFF)))
            set_up += size
        else:
            port, addr, rel = c.args
            dat = trace.folder / rel
            image = images.get(dat)
            if image is None:
                image = images[dat] = read_dat(dat, where=f"{trace.path}:{c.line}", folder=trace.folder)
            if addr + image.extent > ADDRESS_LIMIT:
                raise TraceError(trace.path, c.line, f"{rel} ({image.extent:#x} bytes) at {addr:#x} runs "
                                                     f"past the 64-bit address space")
            if addr + image.extent > limit:
                raise TraceError(trace.path, c.line, f"{rel} ({image.extent:#x} bytes) at {addr:#x} runs past "
                                                     f"{profile.name}'s {profile.mem_address_width}-bit "
                                                     f"addresses (ends at {addr + image.extent:#x})")
            plan.pieces.append((port, addr, image))
            set_up += image.extent
        plan.lines.append(c.line)
        if set_up > MAX_TRACE_BYTES:
            raise TraceError(trace.path, c.line, f"the trace sets up more than {MAX_TRACE_BYTES:#x} bytes "
                                                 f"({MAX_TRACE_BYTES >> 30} GiB) of memory")
    plan.merged = merge_pieces(plan.pieces)
    return plan


@dataclass
class SetupWriter:
    """Writes set-up pieces to the target (:meth:`__call__`), in chunks of at most
    :data:`SETUP_CHUNK`; ``known`` (per port) learns the bytes sent. An address the target
    refuses (outside its memory window) is a :class:`TraceError` naming the set-up line."""

    transport: Transport
    plan: SetupPlan
    trace_path: Path
    known: dict[str, KnownMemory] = field(default_factory=dict)

    def __call__(self, port: str, addr: int, data: np.ndarray | Fill) -> None:
        km = self.known.get(port)
        try:
            if isinstance(data, Fill):
                mem_fill(self.transport, port, addr, data.size, data.value)
            else:
                for off in range(0, data.size, SETUP_CHUNK):
                    self.transport.mem_write(addr + off, data[off : off + SETUP_CHUNK], port=port)
                    if km is not None:
                        km.learn(addr + off, data[off : off + SETUP_CHUNK])
        except (TransportError, TraceError):
            raise
        except ValueError as e:  # the target refuses the address (outside its memory window)
            n = span(data)
            raise TraceError(self.trace_path, self.plan.line_of(port, addr, n),
                             f"memory set-up {port}[{addr:#x}+{n:#x}]: {e}") from None
