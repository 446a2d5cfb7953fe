"""Sparse-compressed weights (WMB / WGS / compressed data) in front of the MAC (nv_full).

Seed 000 "Sparse Compression option": one WMB bit per weight element (1 = non-zero, little-endian
bit order) over the uncompressed mapping, the non-zero elements packed compactly, and per kernel
group the remaining byte count (WGS, 32-bit). The nvdlav1 C model reads them as two streams for the
whole layer (``cdma/NV_NVDLA_cdma.cpp`` ``ConvWMBRequestSequencerCommon`` /
``DirectConvWeightRequestSequencerCommon``: ``D_WMB_BYTES`` and ``D_WEIGHT_BYTES`` bytes from
``D_WMB_ADDR`` / ``D_WEIGHT_ADDR``; WGS at ``D_WGS_ADDR`` only marks the group boundaries of the
fetch) and the CSC expands them in the order of the uncompressed direct-convolution format
(``csc/NV_NVDLA_csc.cpp`` ``get_decompressed_weight``: a 0 bit gives a 0 weight, a 1 bit the next
element of the data stream; both stream positions carry across kernel groups). So the weights are
the uncompressed format with ``flat[mask] = data[:popcount(mask)]``, decoded by
:func:`..cdma.read_dc_weights` (same dtype rule as uncompressed weights).

Every size and address comes from registers: the WMB must cover the layer's bits inside
``D_WMB_BYTES``, the data inside ``D_WEIGHT_BYTES``, and the WGS must agree with the WMB bit
counts (a disagreeing WGS is a layer the hardware's fetch cannot run; refused as
:class:`InvalidLayer`).
"""

from __future__ import annotations

import numpy as np

from ..base import InvalidLayer, MemoryPort, ModelOptions, RegisterView, UnitNotModelled, engine_memory
from ._common import I64, PREC_INT8, PREC_NAMES, reg_addr
from .cdma import read_dc_weights

__all__ = ["decompress_stream", "decompressed_weight_bytes", "read_compressed_weights"]

_MAX_WEIGHTS = 1 << 24  # elements (16 Mi): every register-derived size is checked against this before reading


class _Bytes:
    """A MemoryPort over a byte array at address 0 (the decompressed weight surface)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def read(self, address: int, size: int) -> np.ndarray:
        return self.data[address : address + size]

    def write(self, address: int, data: np.ndarray) -> None:  # pragma: no cover - read only
        raise TypeError("read-only")


def decompress_stream(wmb: np.ndarray, data: np.ndarray, n: int, bpe: int) -> np.ndarray:
    """Uncompressed bytes (``n`` elements of ``bpe`` bytes) from WMB bytes and the packed data."""
    mask = np.unpackbits(np.asarray(wmb, dtype=np.uint8), count=n, bitorder="little").astype(bool)
    nnz = int(np.count_nonzero(mask))
    out = np.zeros(n * bpe, dtype=np.uint8)
    el = out.view(f"<u{bpe}")
    el[mask] = np.ascontiguousarray(np.asarray(data, dtype=np.uint8)[: nnz * bpe]).view(f"<u{bpe}")
    return out


def read_compressed_weights(view: RegisterView, mem: MemoryPort, options: ModelOptions, k: int, c: int, kh: int,
                            kw: int) -> np.ndarray:  # fmt: skip
    """Weights (K, C, KH, KW) of a compressed layer (module doc), int64 like :func:`read_dc_weights`."""
    if int(view.field("CDMA", "D_MISC_CFG", "CONV_MODE")):
        raise UnitNotModelled("compressed Winograd weights: winograd.py reads them (decompressed_weight_bytes)")
    raw, bpe, atomic_k = decompressed_weight_bytes(view, mem, options, k, c * kh * kw)
    return read_dc_weights(_Bytes(raw), 0, k, c, kh, kw, atomic_k, options.mac_atomic_c, bpe)


def decompressed_weight_bytes(view: RegisterView, mem: MemoryPort, options: ModelOptions, k: int,
                              per_kernel: int) -> tuple[np.ndarray, int, int]:  # fmt: skip
    """The uncompressed weight surface (bytes, in the mapping order of the layer's format: direct
    or Winograd) of ``k`` kernels of ``per_kernel`` elements, with the element size and the kernel
    group size. The C model expands the streams the same way in both modes (``csc/NV_NVDLA_csc.cpp``
    ``get_decompressed_weight``, called by ``SendWeightToMacSequencerWinoConvCommon`` too; CDMA
    fetches Winograd weights with ``DirectConvWeightResponseSequencerCommon``)."""
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    prec = f("CDMA", "D_MISC_CFG", "PROC_PRECISION")
    if prec not in PREC_NAMES:
        raise InvalidLayer(f"CDMA.D_MISC_CFG.PROC_PRECISION = {prec}: not INT8/INT16/FP16")
    bpe = 1 if prec == PREC_INT8 else 2
    atomic_k = options.mac_atomic_k if bpe == 1 else max(options.mac_atomic_k // 2, 1)
    c = per_kernel
    n = k * per_kernel
    if n <= 0 or n > _MAX_WEIGHTS:
        raise InvalidLayer(f"CSC weight size {k} kernels x {per_kernel} outside 1..{_MAX_WEIGHTS} elements")
    wmb_bytes = int(view.reg("CDMA", "D_WMB_BYTES"))
    if f("CSC", "D_WMB_BYTES", "WMB_BYTES") != f("CDMA", "D_WMB_BYTES", "WMB_BYTES"):
        raise InvalidLayer("CDMA.D_WMB_BYTES and CSC.D_WMB_BYTES differ")
    need = -(-n // 8)
    if wmb_bytes < need:
        raise InvalidLayer(f"CDMA.D_WMB_BYTES = {wmb_bytes} bytes but the {n} weights need {need} bytes of WMB bits")
    port = engine_memory(mem, view, "CDMA", "D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE")
    wmb = np.asarray(port.read(reg_addr(view, "CDMA", "D_WMB_ADDR_HIGH", "D_WMB_ADDR_LOW"), need), dtype=np.uint8)
    mask = np.unpackbits(wmb, count=n, bitorder="little").astype(I64)
    nnz = int(mask.sum())
    wbytes = int(view.reg("CDMA", "D_WEIGHT_BYTES"))
    if nnz * bpe > wbytes:
        raise InvalidLayer(f"CDMA.D_WEIGHT_BYTES = {wbytes} but the WMB marks {nnz} non-zero weights ({nnz * bpe} bytes)")
    # WGS: one 32-bit byte count per kernel group, in mapping order (groups of atomic_k kernels)
    groups = -(-k // atomic_k)
    wgs = np.asarray(port.read(reg_addr(view, "CDMA", "D_WGS_ADDR_HIGH", "D_WGS_ADDR_LOW"), 4 * groups), dtype=np.uint8)
    wgs = np.ascontiguousarray(wgs).view("<u4").astype(I64)
    starts = np.arange(groups, dtype=I64) * atomic_k * per_kernel
    counts = np.add.reduceat(mask, starts) * bpe if n else np.zeros(0, dtype=I64)
    if not np.array_equal(wgs, counts):
        bad = int(np.flatnonzero(wgs != counts)[0])
        raise InvalidLayer(f"WGS at CDMA.D_WGS_ADDR: group {bad} holds {int(wgs[bad])} bytes but its WMB bits mark "
                           f"{int(counts[bad])} (seed 000: WGS = remaining bytes of each kernel group)")
    data = np.asarray(port.read(reg_addr(view, "CDMA", "D_WEIGHT_ADDR_HIGH", "D_WEIGHT_ADDR_LOW"), nnz * bpe), dtype=np.uint8)
    del c
    return decompress_stream(wmb, data, n, bpe), bpe, atomic_k
