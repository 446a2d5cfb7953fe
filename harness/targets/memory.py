"""Sparse external memory (the DRAM behind NVDLA's DBBIF port), numpy-backed.

Modelled on cocotbext-axi's ``SparseMemory``: memory is allocated in 64 KiB pages on
first write; bytes never written read as 0 (as NVDLA's testbench memory model does).
:meth:`SparseMemory.fill` sets a region without materialising it: whole pages filled with 0
are dropped (they read 0), whole pages filled with another byte share one read-only page that
is copied on the first write into it; only the partial pages at the ends are allocated.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KnownMemory", "RecordingMemory", "SparseMemory", "close_record", "poison_pattern", "true_runs"]

PAGE_BITS = 16
PAGE = 1 << PAGE_BITS
#: highest address + 1 of the 64-bit address space
ADDRESS_LIMIT = 1 << 64


class SparseMemory:
    """A 64-bit byte-addressed memory; reads of unwritten bytes return 0."""

    def __init__(self) -> None:
        self._pages: dict[int, np.ndarray] = {}
        self._const: dict[int, np.ndarray] = {}  # value -> shared read-only page

    def clear(self) -> None:
        self._pages.clear()

    @staticmethod
    def _check_range(address: int, size: int, what: str) -> None:
        if address < 0 or size < 0 or address + size > ADDRESS_LIMIT:
            raise ValueError(f"bad memory {what} at {address:#x} size {size:#x}: outside the 64-bit address space")

    def _page_for_write(self, page: int) -> np.ndarray:
        p = self._pages.get(page)
        if p is None:
            p = self._pages[page] = np.zeros(PAGE, dtype=np.uint8)
        elif not p.flags.writeable:  # a shared constant page: copy on write
            p = self._pages[page] = p.copy()
        return p

    def write(self, address: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        buf = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).ravel()
        if address < 0:
            raise ValueError(f"negative memory address {address:#x}")
        self._check_range(address, buf.size, "write")
        pos = 0
        n = buf.size
        while pos < n:
            a = address + pos
            page, off = a >> PAGE_BITS, a & (PAGE - 1)
            take = min(PAGE - off, n - pos)
            p = self._page_for_write(page)
            p[off : off + take] = buf[pos : pos + take]
            pos += take

    def read(self, address: int, size: int) -> np.ndarray:
        if address < 0 or size < 0:
            raise ValueError(f"bad memory read at {address:#x} size {size}")
        self._check_range(address, size, "read")
        out = np.zeros(size, dtype=np.uint8)
        pos = 0
        while pos < size:
            a = address + pos
            page, off = a >> PAGE_BITS, a & (PAGE - 1)
            take = min(PAGE - off, size - pos)
            p = self._pages.get(page)
            if p is not None:
                out[pos : pos + take] = p[off : off + take]
            pos += take
        return out

    def fill(self, address: int, size: int, value: int = 0) -> None:
        """Set ``size`` bytes from ``address`` to ``value`` without materialising whole pages:
        a fully covered page is dropped (value 0: it reads 0) or points at one shared
        read-only page of ``value`` (copied on its first write); only partial pages at the
        ends are written. Same contents as ``write(address, [value] * size)``."""
        value &= 0xFF
        self._check_range(address, size, "fill")
        end = address + size
        pos = address
        while pos < end:
            page, off = pos >> PAGE_BITS, pos & (PAGE - 1)
            take = min(PAGE - off, end - pos)
            if take == PAGE:
                if value == 0:
                    self._pages.pop(page, None)
                else:
                    const = self._const.get(value)
                    if const is None:
                        const = np.full(PAGE, value, dtype=np.uint8)
                        const.flags.writeable = False
                        self._const[value] = const
                    self._pages[page] = const
            elif value != 0 or page in self._pages:
                self._page_for_write(page)[off : off + take] = value
            pos += take

    def regions(self) -> list[tuple[int, int]]:
        """(address, size) of every allocated page, merged; for dumps and triage."""
        out: list[tuple[int, int]] = []
        for page in sorted(self._pages):
            a = page << PAGE_BITS
            if out and out[-1][0] + out[-1][1] == a:
                out[-1] = (out[-1][0], out[-1][1] + PAGE)
            else:
                out.append((a, PAGE))
        return out


class RecordingMemory(SparseMemory):
    """A :class:`SparseMemory` that records which bytes are read and written while
    ``recording`` is on.

    The model target turns recording on only while a layer runs, so ``read_mask`` tells
    exactly which bytes the layer's DMA engines fetched (the DMA readers read line by line
    from a memory with ``exact_reads``, never whole spans with their gaps), and ``writes``
    which spans its DMA engines wrote."""

    exact_reads = True

    def __init__(self) -> None:
        super().__init__()
        self.recording = False
        self.reads: list[tuple[int, int]] = []
        self.writes: list[tuple[int, int]] = []

    def read(self, address: int, size: int) -> np.ndarray:
        if self.recording and size > 0:
            self.reads.append((address, size))
        return super().read(address, size)

    def write(self, address: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        if self.recording:
            n = data.nbytes if isinstance(data, np.ndarray) else len(data)
            if n:
                self.writes.append((address, n))
        super().write(address, data)

    def read_mask(self, address: int, size: int) -> np.ndarray:
        """``bool[size]``: which bytes of ``[address, address + size)`` were read while recording."""
        mask = np.zeros(size, dtype=bool)
        for a, n in self.reads:
            lo, hi = max(a, address), min(a + n, address + size)
            if lo < hi:
                mask[lo - address : hi - address] = True
        return mask


class KnownMemory:
    """What the host knows a board's memory holds, byte by byte: the bytes it last wrote
    there or read back, until something may have changed them.

    A slow link need not send a byte the board already holds, nor poison a byte that already
    differs from the layer's expected output. Whoever launches a layer forgets (:meth:`forget`) the
    bytes the layer writes first; anything the host cannot account for (a failed test, another
    user of the board) must :meth:`clear` it. ``limit`` bounds the bytes remembered: past it
    everything is forgotten (knowing less only costs bytes on the wire, never correctness)."""

    def __init__(self, limit: int = 256 << 20) -> None:
        self.limit = int(limit)
        self._values = SparseMemory()
        self._known = SparseMemory()  # 1 where the value is known

    def clear(self) -> None:
        self._values.clear()
        self._known.clear()

    @property
    def nbytes(self) -> int:
        """Bytes of pages holding knowledge (an upper bound of the bytes known)."""
        return len(self._known._pages) * PAGE

    def learn(self, address: int, data: np.ndarray) -> None:
        """The board now holds ``data`` at ``address`` (the host wrote it or read it back)."""
        buf = np.ascontiguousarray(data, dtype=np.uint8).ravel()
        if buf.size == 0:
            return
        self._values.write(address, buf)
        self._known.fill(address, buf.size, 1)
        if self.nbytes > self.limit:
            self.clear()

    def forget(self, address: int, size: int) -> None:
        """The board may hold anything at ``[address, address + size)`` now."""
        if size > 0:
            self._known.fill(address, size, 0)
            self._values.fill(address, size, 0)

    def learn_from(self, other: KnownMemory) -> None:
        """Learn everything ``other`` knows."""
        for page in list(other._known._pages):
            known, values = other.lookup(page << PAGE_BITS, PAGE)
            for a, b in true_runs(known):
                self.learn((page << PAGE_BITS) + a, values[a:b])

    def only(self, spans: list[tuple[int, int]]) -> KnownMemory:
        """A copy that knows only what this one knows inside the ``[lo, hi)`` spans."""
        out = KnownMemory(self.limit)
        for lo, hi in spans:
            known, values = self.lookup(lo, hi - lo)
            for a, b in true_runs(known):
                out.learn(lo + a, values[a:b])
        return out

    def lookup(self, address: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        """``(known, values)`` for ``[address, address + size)``: ``bool[size]`` and the known
        bytes (0 where unknown)."""
        return self._known.read(address, size).astype(bool), self._values.read(address, size)


def poison_pattern(address: int, size: int, base: int = 0xA5) -> np.ndarray:
    """The bytes that poison ``[address, address + size)`` before a run: ``base`` XOR a hash of
    each byte's address. A layer that does not write a byte leaves it poisoned, so its check
    fails; unlike one repeated byte, no two neighbouring words are equal, so a verifying link
    proves a poisoned burst with one read-back (a uniform burst is what a misaddressed read
    also returns) and a read-back that lands elsewhere cannot look poisoned."""
    a = np.arange(address, address + size, dtype=np.uint64)
    h = (a * np.uint64(0x9E3779B1)) >> np.uint64(13)
    return (h.astype(np.uint8) ^ np.uint8(base)).astype(np.uint8)


def true_runs(mask: np.ndarray, slack: int = 0) -> list[tuple[int, int]]:
    """``[lo, hi)`` runs of the True entries of ``mask``, joining runs less than ``slack``
    entries apart (on a link, a new write command costs more than a few bytes resent)."""
    idx = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    out: list[tuple[int, int]] = []
    for lo, hi in zip(idx[0::2].tolist(), idx[1::2].tolist(), strict=True):
        if out and lo - out[-1][1] < slack:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def close_record(transport: object, known: dict[str, KnownMemory], passed: bool) -> None:
    """After a trace or vector run that used the board-memory record ``known``: a passing run
    accounted for every change and vouches for it (``vouch_known_memory``, the serial
    target); any other outcome leaves the board's memory unaccounted for, so it is cleared."""
    if not known:
        return
    vouch = getattr(transport, "vouch_known_memory", None)
    if passed and callable(vouch):
        vouch()
    else:
        for km in known.values():
            km.clear()
