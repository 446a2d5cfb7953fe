"""DMP dv-sdk FPGA network I/O layouts (seed 002, "Network input output layout").

Logical arrays are images ``(H, W, C)`` or volumes ``(D, H, W, C)``; x = w, y = h, n = c.
Convolution-block buffers are FP16 in DWHC order (DHWC with ``transpose_weight``), split into
chunks of at most 8 channels:

    offset = (d*W*H*C + chunk*W*H*8 + x*H*C_ + y*C_ + n_) * 2          (DWHC)
    offset = (d*W*H*C + chunk*W*H*8 + y*W*C_ + x*C_ + n_) * 2          (DHWC)

with chunk = n // 8, n_ = n % 8 and C_ = 8 for full chunks, C % 8 for the last one. The seed
gives the per-image formula; ``d*W*H*C`` for depth comes from its <= 8-channel formula.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import LayoutError, LayoutSpec, Param, Piece, Plan, execute_pack, execute_unpack

SEED = "seed 002 (DMP dv-sdk network I/O layout)"


def _dhwc(shape: tuple[int, ...], what: str) -> tuple[int, int, int, int]:
    if len(shape) == 3:
        return (1,) + tuple(int(s) for s in shape)  # type: ignore[return-value]  # len checked
    if len(shape) == 4:
        return tuple(int(s) for s in shape)  # type: ignore[return-value]  # len checked
    raise LayoutError(f"{what}: expected (H, W, C) or (D, H, W, C), got shape {shape}")


def chunked_pieces(D: int, H: int, W: int, C: int, chunk: int, transpose: bool) -> list[Piece]:
    """Pieces for a (D, H, W, C) array in the chunked DWHC / DHWC order."""
    if chunk <= 0:
        raise LayoutError(f"chunk_channels={chunk} must be positive (8 on the dv-sdk FPGA)")
    vol = W * H * C
    cn, cr = C // chunk, C % chunk
    pieces = []
    if cn:
        if transpose:   # (D, cn, H, W, 8)
            pieces.append(Piece((slice(None),) * 3 + (slice(0, cn * chunk),), (D, H, W, cn, chunk), (0, 3, 1, 2, 4), 0,
                                (D, cn, H, W, chunk), (vol, W * H * chunk, W * chunk, chunk, 1)))
        else:           # (D, cn, W, H, 8)
            pieces.append(Piece((slice(None),) * 3 + (slice(0, cn * chunk),), (D, H, W, cn, chunk), (0, 3, 2, 1, 4), 0,
                                (D, cn, W, H, chunk), (vol, W * H * chunk, H * chunk, chunk, 1)))
    if cr:
        off = cn * W * H * chunk
        src = (slice(None),) * 3 + (slice(cn * chunk, C),)
        if transpose:
            pieces.append(Piece(src, None, (0, 1, 2, 3), off, (D, H, W, cr), (vol, W * cr, cr, 1)))
        else:
            pieces.append(Piece(src, None, (0, 2, 1, 3), off, (D, W, H, cr), (vol, H * cr, cr, 1)))
    return pieces


def conv_io_offset(d: int, h: int, w: int, c: int, *, D: int, H: int, W: int, C: int,
                   transpose_weight: bool = False, chunk: int = 8) -> int:
    """Byte offset of pixel (d, h, w, c) in a convolution-block buffer (seed 002 formula)."""
    chunk_id, n_ = divmod(c, chunk)
    c_ = chunk if chunk_id < C // chunk else C % chunk
    if transpose_weight:
        e = chunk_id * (W * H * chunk) + h * (W * c_) + w * c_ + n_
    else:
        e = chunk_id * (W * H * chunk) + w * (H * c_) + h * c_ + n_
    return (d * W * H * C + e) * 2


def _plan(shape: tuple[int, ...], dt: np.dtype, chunk: int, transpose: bool, what: str) -> tuple[Plan, tuple[int, ...]]:
    D, H, W, C = _dhwc(shape, what)
    return Plan(D * H * W * C * dt.itemsize, dt, tuple(chunked_pieces(D, H, W, C, chunk, transpose))), (D, H, W, C)


def _as_float(arr: np.ndarray, dt: np.dtype, what: str) -> np.ndarray:
    if arr.dtype.kind not in "fiu":
        raise LayoutError(f"{what}: numeric data expected, got {arr.dtype}")
    return arr.astype(dt)


def conv_io_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    plan, shp = _plan(arr.shape, np.dtype("<f2"), p["chunk_channels"], p["transpose_weight"], "dmp.conv_io")
    return execute_pack(_as_float(arr, np.dtype("<f2"), "dmp.conv_io").reshape(shp), plan)


def conv_io_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    plan, shp = _plan(shape, np.dtype("<f2"), p["chunk_channels"], p["transpose_weight"], "dmp.conv_io")
    return execute_unpack(buf, plan, shp, "dmp.conv_io").reshape(shape).astype(dt)


def output_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    D, H, W, C = _dhwc(arr.shape, "dmp.output")
    plan, shp = _plan(arr.shape, np.dtype("<f4"), max(C, 1), p["transpose_weight"], "dmp.output")
    return execute_pack(_as_float(arr, np.dtype("<f4"), "dmp.output").reshape(shp), plan)


def output_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    D, H, W, C = _dhwc(shape, "dmp.output")
    plan, shp = _plan(shape, np.dtype("<f4"), max(C, 1), p["transpose_weight"], "dmp.output")
    return execute_unpack(buf, plan, shp, "dmp.output").reshape(shape).astype(dt)


def fc_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = np.dtype("<f4") if p["float32"] else np.dtype("<f2")
    return _as_float(arr, dt, "dmp.fc").reshape(-1).view(np.uint8)


def fc_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    sdt = np.dtype("<f4") if p["float32"] else np.dtype("<f2")
    n = int(np.prod(shape))
    if buf.size < n * sdt.itemsize:
        raise LayoutError(f"dmp.fc: buffer has {buf.size} bytes, {n} elements need {n * sdt.itemsize}")
    return np.ascontiguousarray(buf[: n * sdt.itemsize]).view(sdt).reshape(shape).astype(dt)


def conv_buffer_order(shape: tuple[int, ...], *, transpose_weight: bool = False, chunk: int = 8) -> np.ndarray:
    """For each element of a conv-block buffer, the flat (D, H, W, C) index it holds."""
    plan, shp = _plan(shape, np.dtype("<u4"), chunk, transpose_weight, "conv_buffer_order")
    idx = np.arange(int(np.prod(shp)), dtype=np.uint32).reshape(shp)
    return execute_pack(idx, plan).view("<u4").astype(np.int64)


def fc_weight_for_conv_input(weight: np.ndarray, in_shape: tuple[int, ...], *, transpose_weight: bool = False,
                             chunk: int = 8) -> np.ndarray:
    """Re-arrange FC weights (outputs, H*W*C in (H, W, C) order) so they read a conv buffer.

    Seed 002: "When directly take the output buffer of convolution block as the input buffer,
    the convertor re-arrange the weight when the dimension W > 1 or H > 1."
    """
    w = np.asarray(weight)
    order = conv_buffer_order(in_shape, transpose_weight=transpose_weight, chunk=chunk)
    if w.shape[-1] != order.size:
        raise LayoutError(f"FC weight has {w.shape[-1]} inputs, conv buffer {in_shape} has {order.size}")
    return w[..., order]


def dmp_layouts() -> list[LayoutSpec]:
    tw = Param("transpose_weight", bool, False, "convertor flag: DHWC instead of DWHC")
    return [
        LayoutSpec("dmp.conv_io", "dmp",
                   "convolution-block I/O (H, W, C) or (D, H, W, C): FP16, DWHC (DHWC with "
                   "transpose_weight) in chunks of 8 channels",
                   (tw, Param("chunk_channels", int, 8, "channels per chunk")),
                   conv_io_pack, conv_io_unpack, "float16", SEED),
        LayoutSpec("dmp.output", "dmp",
                   "converted network output: float32 DWHC (DHWC with transpose_weight)",
                   (tw,), output_pack, output_unpack, "float32", SEED),
        LayoutSpec("dmp.fc", "dmp",
                   "fully connected block I/O: a plain 1-D buffer (FP16; float32 for outputs)",
                   (Param("float32", bool, False, "store float32 instead of FP16"),),
                   fc_pack, fc_unpack, "float16", SEED),
    ]
