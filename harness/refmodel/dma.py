"""Feature-cube DMA in NVDLA's memory format (read and write through a ``MemoryPort``).

NVDLA stores a W x H x C cube as *surfaces* of ``group`` channels (``group`` = elements per
memory atom: 8 for int8 on nv_small's 8-byte atom). Inside a surface each line holds ``W``
element groups back to back, ``bpe`` bytes per element (seed 000, "feature data format"):

    addr(c, h, w) = base + (c // group) * surface_stride + h * line_stride
                    + (w * group + c % group) * bpe

The last surface is fetched whole: channel-padding lanes ``C .. group*ceil(C/group)-1``
are read (and later processed and written) like real channels (doc section 3.0).

SDP operand cubes (BRDMA/NRDMA/ERDMA) use the same geometry with ``bpe`` = component count
x component size; with ``DATA_USE = BOTH`` the two components of an element are
interleaved ALU first, MUL second (cmod ``NvdlaPacker``, "A0B0A1B1"). A per-kernel operand
is one packed vector of ``group*ceil(C/group)`` elements at ``base`` (cmod
``SdpRdmaCore``, PER_KERNEL branch: one contiguous request of ``surf_num*group*bpe`` bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import MemoryPort

__all__ = ["CubeGeometry", "gather_rows", "read_cube", "read_surfaces", "read_vector", "scatter_rows", "surfaces", "write_cube",
           "write_surfaces"]

# access the whole span in one request when it is at most this many times the bytes needed
# (plus slack): far fewer MemoryPort calls for cubes with padded line/surface strides
_SPAN_FACTOR = 16
_SPAN_SLACK = 4 << 20


def _span_ok(starts: np.ndarray, line_bytes: int) -> tuple[bool, int, int]:
    lo = int(starts.min())
    hi = int(starts.max()) + line_bytes
    return hi - lo <= _SPAN_FACTOR * starts.size * line_bytes + _SPAN_SLACK, lo, hi


def surfaces(channels: int, group: int) -> int:
    """Number of surfaces (channel groups) holding ``channels`` channels."""
    return -(-channels // group)


@dataclass(frozen=True)
class CubeGeometry:
    """Where a cube lives. Addresses and strides in bytes."""

    base: int
    line_stride: int
    surface_stride: int
    width: int
    height: int
    channels: int
    group: int  # elements per surface (channels per atom)
    bpe: int = 1  # bytes per element (all components)

    @property
    def n_surfaces(self) -> int:
        return surfaces(self.channels, self.group)

    @property
    def line_bytes(self) -> int:
        return self.width * self.group * self.bpe

    def line_addresses(self) -> np.ndarray:
        """Start address of every (surface, line), shape (S, H), int64."""
        s = np.arange(self.n_surfaces, dtype=np.int64)[:, None]
        h = np.arange(self.height, dtype=np.int64)[None, :]
        return self.base + s * self.surface_stride + h * self.line_stride


def gather_rows(mem: MemoryPort, starts: np.ndarray, nbytes: int) -> np.ndarray:
    """Bytes of ``nbytes``-long rows at ``starts`` (any shape): ``uint8 starts.shape + (nbytes,)``.
    One span read when the rows are dense enough and the memory allows it (``exact_reads``
    memories, which record what a layer reads, get one read per row)."""
    starts = np.asarray(starts, dtype=np.int64)
    if starts.size == 0 or nbytes == 0:
        return np.zeros(starts.shape + (nbytes,), dtype=np.uint8)
    exact = getattr(mem, "exact_reads", False)
    lo = int(starts.flat[0])
    if not exact and (starts.size == 1 or np.array_equal(starts.ravel(), lo + nbytes * np.arange(starts.size))):
        return np.asarray(mem.read(lo, starts.size * nbytes), dtype=np.uint8).reshape(starts.shape + (nbytes,))  # rows tile one block
    ok, lo, hi = _span_ok(starts, nbytes)
    if ok and not exact:
        blob = np.asarray(mem.read(lo, hi - lo), dtype=np.uint8)
        return blob[(starts - lo)[..., None] + np.arange(nbytes, dtype=np.int64)]
    flat = starts.ravel()
    out = np.empty((flat.size, nbytes), dtype=np.uint8)
    for i, a in enumerate(flat.tolist()):
        out[i] = mem.read(a, nbytes)
    return out.reshape(starts.shape + (nbytes,))


def scatter_rows(mem: MemoryPort, starts: np.ndarray, data: np.ndarray) -> None:
    """Write ``data`` (``starts.shape + (nbytes,)``) row by row in C order of ``starts``; bytes
    between rows keep their value; where rows overlap the later row wins (in-order writes)."""
    starts = np.asarray(starts, dtype=np.int64).ravel()
    if starts.size == 0:
        return
    data = np.ascontiguousarray(data, dtype=np.uint8).reshape(starts.size, -1)
    nbytes = data.shape[1]
    if nbytes == 0:
        return
    if starts.size == 1 or np.array_equal(starts, starts[0] + nbytes * np.arange(starts.size, dtype=np.int64)):
        mem.write(int(starts[0]), data.reshape(-1))  # rows tile one block in order
        return
    ok, lo, hi = _span_ok(starts, nbytes)
    order = np.sort(starts)
    disjoint = bool(np.all(np.diff(order) >= nbytes))
    if ok and disjoint and not getattr(mem, "exact_reads", False):
        blob = np.array(mem.read(lo, hi - lo), dtype=np.uint8)  # read-modify-write keeps the gaps
        blob[(starts - lo)[:, None] + np.arange(nbytes, dtype=np.int64)] = data
        mem.write(lo, blob)
        return
    for a, row in zip(starts.tolist(), data):
        mem.write(a, row)


def _dense(geo: CubeGeometry) -> bool:
    """The cube's lines follow each other in memory, surface after surface: one block of bytes
    (what :func:`gather_rows`/:func:`scatter_rows` find from the line addresses, known from the strides)."""
    lb = geo.line_bytes
    return (geo.height == 1 or geo.line_stride == lb) and (geo.n_surfaces == 1 or geo.surface_stride == geo.height * lb)


def _read_lines(mem: MemoryPort, geo: CubeGeometry) -> np.ndarray:
    """Raw bytes of every line, shape (S, H, line_bytes), uint8."""
    if _dense(geo) and not getattr(mem, "exact_reads", False):
        shape = (geo.n_surfaces, geo.height, geo.line_bytes)
        return np.asarray(mem.read(geo.base, shape[0] * shape[1] * shape[2]), dtype=np.uint8).reshape(shape)
    return gather_rows(mem, geo.line_addresses(), geo.line_bytes)


def read_surfaces(mem: MemoryPort, geo: CubeGeometry) -> np.ndarray:
    """The cube's raw bytes as stored: ``uint8 (S, H, W, group * bpe)`` (surface, line,
    element group); padding lanes included, gaps between lines and surfaces left out."""
    return _read_lines(mem, geo).reshape(geo.n_surfaces, geo.height, geo.width, geo.group * geo.bpe)


def read_cube(mem: MemoryPort, geo: CubeGeometry, *, comps: int = 1, signed: bool = True) -> np.ndarray:
    """Read a cube; returns int64 array of shape (comps, Cpad, H, W) with ``Cpad`` =
    ``group * n_surfaces`` (padding lanes included). Elements are little-endian
    ``bpe // comps``-byte integers, sign-extended when ``signed``."""
    bpc = geo.bpe // comps
    if bpc * comps != geo.bpe or bpc not in (1, 2):
        raise ValueError(f"bad element size: bpe={geo.bpe} comps={comps}")
    raw = _read_lines(mem, geo)  # (S, H, W*group*bpe)
    dt = {(1, True): "<i1", (1, False): "<u1", (2, True): "<i2", (2, False): "<u2"}[(bpc, signed)]
    vals = np.ascontiguousarray(raw).view(dt).astype(np.int64)
    S, H, W, G = geo.n_surfaces, geo.height, geo.width, geo.group
    vals = vals.reshape(S, H, W, G, comps)
    # -> (comps, S, G, H, W) -> (comps, S*G, H, W)
    return vals.transpose(4, 0, 3, 1, 2).reshape(comps, S * G, H, W)


def read_vector(mem: MemoryPort, base: int, n: int, *, bpc: int, comps: int = 1) -> np.ndarray:
    """Per-kernel operand: ``n`` packed elements at ``base``; int64 (comps, n), signed."""
    raw = np.asarray(mem.read(base, n * bpc * comps), dtype=np.uint8)
    vals = raw.view("<i1" if bpc == 1 else "<i2").astype(np.int64)
    return vals.reshape(n, comps).T.copy()


def write_cube(mem: MemoryPort, geo: CubeGeometry, data: np.ndarray) -> None:
    """Write a (Cpad, H, W) cube of integers as ``geo.bpe``-byte little-endian elements
    (values are wrapped to that width; callers saturate first)."""
    S, H, W, G = geo.n_surfaces, geo.height, geo.width, geo.group
    if data.shape != (S * G, H, W):
        raise ValueError(f"cube shape {data.shape} != {(S * G, H, W)}")
    dt = "<i1" if geo.bpe == 1 else "<i2"
    lines = data.reshape(S, G, H, W).transpose(0, 2, 3, 1).astype(dt)  # (S, H, W, G)
    write_surfaces(mem, geo, np.ascontiguousarray(lines).view(np.uint8))


def write_surfaces(mem: MemoryPort, geo: CubeGeometry, raw: np.ndarray) -> None:
    """Store ``uint8 (S, H, W, group * bpe)`` raw bytes (the inverse of :func:`read_surfaces`);
    bytes between lines and surfaces keep their value."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(geo.n_surfaces, geo.height, geo.line_bytes)
    if _dense(geo) and raw.size:
        mem.write(geo.base, raw.reshape(-1))  # the lines tile one block, in order
        return
    scatter_rows(mem, geo.line_addresses(), raw)
