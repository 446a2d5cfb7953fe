"""NVDLA sparse weight compression (seed 000 "Sparse Compression option"): a weight surface in
any uncompressed mapping becomes three surfaces, WGS (bytes per kernel group), WMB (one bit per
element) and the non-zero elements packed compactly, each 128-byte sized and 256-byte aligned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._base import LayoutError, LayoutSpec, Param, Plan, align_up, ceil_div, execute_pack, to_storage
from .common import SEED, element_dtype, pad_to
from .weight import (
    WEIGHT_DATA_ALIGN,
    WEIGHT_PARAMS,
    WEIGHT_START_ALIGN,
    dc_plan,
    dc_unpack,
    image_plan,
    image_pre_extend,
    image_unpack,
    weight_group_size,
    winograd_plan,
    winograd_unpack,
)


@dataclass(frozen=True)
class CompressedWeights:
    """The three memory surfaces of seed 000 'Sparse Compression option'.

    ``wmb``: one bit per element (1 = non-zero), little-endian bit order, zero-padded to 128
    bytes. ``data``: non-zero elements packed compactly, zero-padded to 128 bytes. ``wgs``: per
    kernel group the remaining byte count, 32-bit little-endian, padded to 128 bytes.
    """

    wgs: np.ndarray
    wmb: np.ndarray
    data: np.ndarray

    @property
    def group_sizes(self) -> np.ndarray:
        return self.wgs.view("<u4")


def compress_weights(mapped: np.ndarray, group_bytes: list[int], itemsize: int) -> CompressedWeights:
    """Compress an uncompressed weight surface group by group (seed 000).

    ``mapped`` holds the mapped weights (tail padding allowed); ``group_bytes`` the uncompressed
    bytes of each kernel group in mapping order. An element is "zero" when all its bits are 0
    (so fp16 -0.0 is kept and round-trips bit-exactly).
    """
    raw = np.asarray(mapped, dtype=np.uint8).reshape(-1)
    total = int(sum(group_bytes))
    if total > raw.size or total % itemsize or any(g % itemsize for g in group_bytes):
        raise LayoutError(f"compression: groups of {total} bytes do not fit {raw.size} mapped bytes of {itemsize}-byte elements")
    el = raw[:total].view(f"<u{itemsize}")
    mask = el != 0
    wmb = np.packbits(mask, bitorder="little")
    starts = np.cumsum([0] + [g // itemsize for g in group_bytes[:-1]])
    counts = np.add.reduceat(mask.astype(np.int64), starts) if el.size else np.zeros(0, np.int64)
    counts = np.where(np.asarray([g for g in group_bytes]) == 0, 0, counts) if len(group_bytes) else counts
    wgs = (counts * itemsize).astype("<u4")
    return CompressedWeights(pad_to(wgs.view(np.uint8), WEIGHT_DATA_ALIGN),
                             pad_to(wmb, WEIGHT_DATA_ALIGN),
                             pad_to(el[mask].view(np.uint8), WEIGHT_DATA_ALIGN))


def decompress_weights(cw: CompressedWeights, group_bytes: list[int], itemsize: int) -> np.ndarray:
    """Rebuild the uncompressed surface (128-byte tail-aligned) from WMB, WGS and data."""
    total = int(sum(group_bytes))
    n = total // itemsize
    if cw.wmb.size * 8 < n:
        raise LayoutError(f"WMB surface has {cw.wmb.size * 8} bits, {n} elements need one bit each")
    mask = np.unpackbits(np.asarray(cw.wmb, np.uint8), count=n, bitorder="little").astype(bool)
    starts = np.cumsum([0] + [g // itemsize for g in group_bytes[:-1]])
    counts = np.add.reduceat(mask.astype(np.int64), starts) * itemsize if n else np.zeros(0, np.int64)
    wgs = np.asarray(cw.wgs, np.uint8)[: 4 * len(group_bytes)].view("<u4")
    if wgs.size != len(group_bytes) or not np.array_equal(wgs.astype(np.int64), counts):
        raise LayoutError(f"WGS {wgs.tolist()} disagrees with the WMB bit counts {counts.tolist()} (bytes per group)")
    nnz = int(mask.sum())
    if cw.data.size < nnz * itemsize:
        raise LayoutError(f"compressed data has {cw.data.size} bytes, WMB marks {nnz * itemsize}")
    out = np.zeros(align_up(total, WEIGHT_DATA_ALIGN), np.uint8)
    el = out[:total].view(f"<u{itemsize}")
    el[mask] = np.asarray(cw.data, np.uint8)[: nnz * itemsize].view(f"<u{itemsize}")
    return out


_BASES = ("dc", "image", "winograd")


def _compressed_parts(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> tuple[list[int], Plan]:
    base = p["base"]
    if base == "dc":
        plan = dc_plan(shape, dt, p)
    elif base == "image":
        plan, _ = image_plan(shape, dt, p)
    else:
        plan = winograd_plan(shape, dt, p)
    K = shape[0]
    per_kernel = int(np.prod(shape[1:])) * dt.itemsize
    G = weight_group_size(p, dt)
    return [min(G, K - k) * per_kernel for k in range(0, K, G)], plan


def compressed_offsets(n_groups: int, n_elements: int) -> tuple[int, int]:
    """Byte offsets of the WMB and data surfaces in the packed blob [WGS | WMB | data]."""
    wgs_size = align_up(4 * n_groups, WEIGHT_DATA_ALIGN)
    wmb_off = align_up(wgs_size, WEIGHT_START_ALIGN)
    wmb_size = align_up(ceil_div(n_elements, 8), WEIGHT_DATA_ALIGN)
    return wmb_off, align_up(wmb_off + wmb_size, WEIGHT_START_ALIGN)


def compressed_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(arr.dtype, "weight")
    groups, plan = _compressed_parts(arr.shape, dt, p)
    if p["base"] == "image":
        ext = image_pre_extend(to_storage(arr))
        mapped = execute_pack(ext if p["post_extension"] == 1 else ext[..., 0], plan)
    else:
        mapped = execute_pack(to_storage(arr), plan)
    cw = compress_weights(mapped, groups, dt.itemsize)
    wmb_off, data_off = compressed_offsets(len(groups), arr.size)
    out = np.zeros(data_off + cw.data.size, np.uint8)
    out[: cw.wgs.size] = cw.wgs
    out[wmb_off: wmb_off + cw.wmb.size] = cw.wmb
    out[data_off:] = cw.data
    return out


def compressed_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(dt, "weight")
    groups, plan = _compressed_parts(shape, dt, p)
    n = int(np.prod(shape))
    wmb_off, data_off = compressed_offsets(len(groups), n)
    if buf.size < data_off:
        raise LayoutError(f"compressed weight blob has {buf.size} bytes, headers need {data_off}")
    cw = CompressedWeights(buf[: 4 * len(groups)], buf[wmb_off:data_off], buf[data_off:])
    mapped = decompress_weights(cw, groups, dt.itemsize)
    unpack = {"dc": dc_unpack, "image": image_unpack, "winograd": winograd_unpack}[p["base"]]
    return unpack(mapped, shape, dt, p)


def compressed_layout() -> LayoutSpec:
    return LayoutSpec(
        "nvdla.weight.compressed", "nvdla",
        "sparse-compressed weights (K, C, H, W): blob [WGS | WMB | data], each surface 128-byte "
        "sized and 256-byte aligned; WMB bits little-endian, WGS 32-bit bytes per group",
        WEIGHT_PARAMS + (
            Param("base", str, "dc", "uncompressed mapping to compress", _BASES),
            Param("post_extension", int, 1, "image base only: post-extension lines", (1, 2, 4)),
        ),
        compressed_pack, compressed_unpack, "int8", SEED)
