"""CDMA: feature fetch from memory, the CDMA input convertor, weight reading (uncompressed
direct-convolution format of seed 000)."""

from __future__ import annotations

import numpy as np

from ..base import MemoryPort, RegisterView, engine_memory
from ..dma import CubeGeometry, read_cube
from ..ops import rnd, sx
from ._common import I64, PREC_FP16, reg_addr

__all__ = ["cdma_convert", "fetch_feature", "read_dc_weights", "weight_offsets"]


def cdma_convert(
    x: np.ndarray, *, offset: int, scale: int, truncate: int, out_bits: int = 8
) -> np.ndarray:
    """CDMA input convertor (doc section 2): ``SAT_out(RSAT((x - offset) * scale, truncate, 17))``."""
    v = (np.asarray(x, dtype=I64) - I64(offset)) * I64(scale)
    v = np.clip(rnd(v, truncate), -(1 << 16), (1 << 16) - 1)
    return np.clip(v, -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1)


def weight_offsets(k: int, c: int, kh: int, kw: int, atomic_k: int, atomic_c: int) -> np.ndarray:
    """Byte offset of weight ``[k, c, y, x]`` in the uncompressed direct-convolution format
    (seed 000): group ``k // atomic_k`` of ``kg`` kernels, channel slice ``c // atomic_c`` of
    ``cs`` channels, then ``((y*KW + x)*kg + k%atomic_k)*cs + c%atomic_c``. Shape (K, C, KH, KW)."""
    kk = np.arange(k, dtype=I64)[:, None, None, None]
    cc = np.arange(c, dtype=I64)[None, :, None, None]
    yy = np.arange(kh, dtype=I64)[None, None, :, None]
    xx = np.arange(kw, dtype=I64)[None, None, None, :]
    g, ki = kk // atomic_k, kk % atomic_k
    kg = np.minimum(atomic_k, k - g * atomic_k)  # kernels in this group
    s, ci = cc // atomic_c, cc % atomic_c
    cs = np.minimum(atomic_c, c - s * atomic_c)  # channels in this slice
    per_kernel = kh * kw * c
    group_base = g * atomic_k * per_kernel
    slice_base = s * atomic_c * kh * kw * kg
    return group_base + slice_base + ((yy * kw + xx) * kg + ki) * cs + ci


def read_dc_weights(
    mem: MemoryPort, base: int, k: int, c: int, kh: int, kw: int, atomic_k: int, atomic_c: int, bpe: int = 1
) -> np.ndarray:
    """Weights as int64 array (K, C, KH, KW) from the direct-convolution format at ``base``;
    ``bpe`` 2 reads little-endian int16 weights (offsets in elements, :func:`weight_offsets`)."""
    off = weight_offsets(k, c, kh, kw, atomic_k, atomic_c)
    raw = np.asarray(mem.read(base, k * c * kh * kw * bpe), dtype=np.uint8)
    return np.ascontiguousarray(raw).view(np.int8 if bpe == 1 else "<i2").astype(I64)[off]


def fetch_feature(view: RegisterView, mem: MemoryPort, atom: int, bpe: int = 1, batch: int = 0) -> np.ndarray:
    """CDMA feature fetch + CVT: (C, H, W) int64 (real channels only); ``bpe`` 2 = INT16. Batch
    ``batch`` starts ``batch * D_BATCH_STRIDE`` bytes after ``D_DAIN_ADDR`` (cmod
    ``NV_NVDLA_cdma.cpp`` ``DirectConvDataRequestSequencerCommon``: ``base_addr + batch_iter * batch_stride``)."""
    w = int(view.field("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH")) + 1
    h = int(view.field("CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT")) + 1
    c = int(view.field("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL")) + 1
    geo = CubeGeometry(
        base=reg_addr(view, "CDMA", "D_DAIN_ADDR_HIGH_0", "D_DAIN_ADDR_LOW_0") + batch * int(view.reg("CDMA", "D_BATCH_STRIDE")),
        line_stride=int(view.reg("CDMA", "D_LINE_STRIDE")),
        surface_stride=int(view.reg("CDMA", "D_SURF_STRIDE")),
        width=w,
        height=h,
        channels=c,
        group=atom // bpe,
        bpe=bpe,
    )
    d = read_cube(engine_memory(mem, view, "CDMA", "D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"), geo)[0][:c]
    if bpe == 2 and int(view.field("CDMA", "D_MISC_CFG", "IN_PRECISION")) == PREC_FP16 and view.field(
        "CDMA", "D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO"
    ):  # FP16 NaN inputs flushed to +0 before CBUF (cmod/cdma/NV_NVDLA_cdma.cpp "Flush NaN to zero")
        bits = d & 0xFFFF
        d = np.where(((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0), 0, d)
    if view.field("CDMA", "D_CVT_CFG", "CVT_EN"):
        d = cdma_convert(
            d,
            offset=int(sx(view.field("CDMA", "D_CVT_OFFSET", "CVT_OFFSET"), 16)),
            scale=int(sx(view.field("CDMA", "D_CVT_SCALE", "CVT_SCALE"), 16)),
            truncate=int(view.field("CDMA", "D_CVT_CFG", "CVT_TRUNCATE")),
            out_bits=8 * bpe,
        )
    return d
