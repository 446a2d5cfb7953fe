"""Sparse external memory (the DRAM behind NVDLA's DBBIF port), numpy-backed.

Modelled on cocotbext-axi's ``SparseMemory``: memory is allocated in 64 KiB pages on
first write; bytes never written read as 0 (as NVDLA's testbench memory model does).
"""

from __future__ import annotations

import numpy as np

__all__ = ["SparseMemory", "RecordingMemory"]

PAGE_BITS = 16
PAGE = 1 << PAGE_BITS


class SparseMemory:
    """A 64-bit byte-addressed memory; reads of unwritten bytes return 0."""

    def __init__(self) -> None:
        self._pages: dict[int, np.ndarray] = {}

    def clear(self) -> None:
        self._pages.clear()

    def write(self, address: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        buf = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).ravel()
        if address < 0:
            raise ValueError(f"negative memory address {address:#x}")
        pos = 0
        n = buf.size
        while pos < n:
            a = address + pos
            page, off = a >> PAGE_BITS, a & (PAGE - 1)
            take = min(PAGE - off, n - pos)
            p = self._pages.get(page)
            if p is None:
                p = self._pages[page] = np.zeros(PAGE, dtype=np.uint8)
            p[off : off + take] = buf[pos : pos + take]
            pos += take

    def read(self, address: int, size: int) -> np.ndarray:
        if address < 0 or size < 0:
            raise ValueError(f"bad memory read at {address:#x} size {size}")
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
        self.write(address, np.full(size, value & 0xFF, dtype=np.uint8))

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
