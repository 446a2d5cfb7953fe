"""Sparse external memory (the DRAM behind NVDLA's DBBIF port), numpy-backed.

Modelled on cocotbext-axi's ``SparseMemory``: memory is allocated in 64 KiB pages on
first write; bytes never written read as 0 (as NVDLA's testbench memory model does).
:meth:`SparseMemory.fill` sets a region without materialising it: whole pages filled with 0
are dropped (they read 0), whole pages filled with another byte share one read-only page that
is copied on the first write into it; only the partial pages at the ends are allocated.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SparseMemory", "RecordingMemory"]

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
    """A :class:`SparseMemory` that records which bytes are read while ``recording`` is on.

    The model target turns recording on only while a layer runs, so ``read_mask`` tells
    exactly which bytes the layer's DMA engines fetched (the DMA readers read line by line
    from a memory with ``exact_reads``, never whole spans with their gaps)."""

    exact_reads = True

    def __init__(self) -> None:
        super().__init__()
        self.recording = False
        self.reads: list[tuple[int, int]] = []

    def read(self, address: int, size: int) -> np.ndarray:
        if self.recording and size > 0:
            self.reads.append((address, size))
        return super().read(address, size)

    def read_mask(self, address: int, size: int) -> np.ndarray:
        """``bool[size]``: which bytes of ``[address, address + size)`` were read while recording."""
        mask = np.zeros(size, dtype=bool)
        for a, n in self.reads:
            lo, hi = max(a, address), min(a + n, address + size)
            if lo < hi:
                mask[lo - address : hi - address] = True
        return mask
