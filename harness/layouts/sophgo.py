"""Sophgo TPU (OKKernel) local-memory layouts (seed 004).

Local memory is X NPUs of S bytes each; a tensor address A lives in NPU Q = A // S at offset
R = A % S. Channel c of an (N, C, H, W) tensor starting at NPU Q goes to NPU (Q + c) % X, slot
(Q + c) // X; element (n, c, h, w) is at byte
``R + (n*Ns + slot*Cs + h*Hs + w*Ws) * itemsize`` of that NPU (strides in elements).

The packed image of a local-memory layout is the whole local memory, NPU 0 first
(``npu_num * local_mem_size`` bytes); bytes not belonging to the tensor are 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._base import (
    REQUIRED,
    LayoutError,
    LayoutSpec,
    Param,
    Piece,
    Plan,
    ceil_div,
    check_aligned,
    execute_pack,
    execute_unpack,
)

SEED = "seed 004 (Sophgo TPU local memory)"


@dataclass(frozen=True)
class Strides:
    """N, C, H, W strides in elements (C stride in local memory = step to channel c + X)."""

    n: int
    c: int
    h: int
    w: int

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.n, self.c, self.h, self.w)


def npu_address(address: int, npu_num: int, local_mem_size: int) -> tuple[int, int]:
    """A = Q * S + R: (start NPU, offset in that NPU); valid A is in [0, X * S - 1]."""
    if not 0 <= address < npu_num * local_mem_size:
        raise LayoutError(
            f"local memory address {address} outside [0, {npu_num * local_mem_size - 1}] "
            f"(X = {npu_num} NPUs x S = {local_mem_size} bytes)"
        )
    return divmod(int(address), int(local_mem_size))


def channels_per_npu(channels: int, start_npu: int, npu_num: int) -> int:
    """ceil((Q + C) / X) -- okk_channle_num_per_npu()."""
    return ceil_div(start_npu + channels, npu_num)


def continuous_stride(shape: tuple[int, int, int, int]) -> Strides:
    """System-memory continuous layout: W 1, H W, C H*W, N C*H*W."""
    N, C, H, W = shape
    return Strides(C * H * W, H * W, W, 1)


def eu_elements(dtype_bits: int) -> int:
    """Elements per 128 bytes: 32 for 32-bit, 64 for 16-bit, 128 for 8-bit (seed 004)."""
    if dtype_bits not in (8, 16, 32, 64):
        raise LayoutError(f"128-byte aligned layout: unsupported element width {dtype_bits} bits")
    return 128 * 8 // dtype_bits


def aligned_stride(shape: tuple[int, int, int, int], dtype_bits: int, start_npu: int, npu_num: int) -> Strides:
    """128-byte aligned layout: C stride = ceil(H*W / e) * e, N stride = C stride * channels/NPU."""
    N, C, H, W = shape
    e = eu_elements(dtype_bits)
    cs = ceil_div(H * W, e) * e
    return Strides(cs * channels_per_npu(C, start_npu, npu_num), cs, W, 1)


def compact_stride(shape: tuple[int, int, int, int], start_npu: int, npu_num: int) -> Strides:
    """Compact layout: C stride = H*W, N stride = C stride * channels/NPU."""
    N, C, H, W = shape
    return Strides(H * W * channels_per_npu(C, start_npu, npu_num), H * W, W, 1)


# -- storage modes ---------------------------------------------------------------------------

MODES = ("none", "4N", "2N", "2IC")
_MODE_GROUP = {"4N": 4, "2N": 2, "2IC": 2}
_MODE_ITEM = {"4N": 1, "2N": 2, "2IC": 4}


def mode_pack(arr: np.ndarray, mode: str, dummy: int = 0) -> np.ndarray:
    """Group ``g`` consecutive elements along axis 0 into one wider element.

    4N: int8/uint8 -> 32-bit (M = ceil(N/4)); 2N: int16/uint16 -> 32-bit; 2IC: fp32 weights
    [I, O, H, W] -> 64-bit over I. Missing elements are dummies (value ``dummy``).
    """
    if mode == "none":
        return arr.view(f"<u{arr.dtype.itemsize}")
    g, isz = _MODE_GROUP[mode], _MODE_ITEM[mode]
    if arr.dtype.itemsize != isz:
        raise LayoutError(f"{mode}-mode stores {isz * 8}-bit elements, got {arr.dtype}")
    N = arr.shape[0]
    M = ceil_div(N, g)
    u = arr.view(f"<u{isz}")
    full = np.full((M * g,) + arr.shape[1:], dummy, dtype=u.dtype)
    full[:N] = u
    grouped = np.moveaxis(full.reshape((M, g) + arr.shape[1:]), 1, -1)
    return np.ascontiguousarray(grouped).view(f"<u{isz * g}")[..., 0]


def mode_unpack(data: np.ndarray, mode: str, n: int, dtype: np.dtype) -> np.ndarray:
    if mode == "none":
        return data.view(dtype)
    isz = _MODE_ITEM[mode]
    parts = np.ascontiguousarray(data)[..., None].view(f"<u{isz}")
    return np.moveaxis(parts, -1, 1).reshape((-1,) + data.shape[1:])[:n].view(dtype)


# -- local memory placement ------------------------------------------------------------------


def local_pieces(shape: tuple[int, int, int, int], strides: Strides, start_npu: int, offset_elems: int,
                 npu_num: int, npu_elems: int) -> list[Piece]:
    """Pieces placing channels on NPUs (Q + c) % X, slots (Q + c) // X."""
    N, C, H, W = shape
    X, Q = npu_num, start_npu
    ns, cs, hs, ws = strides.as_tuple()
    pieces = []
    head = min(C, X - Q)
    all_ = slice(None)
    if head > 0:
        pieces.append(Piece((all_, slice(0, head)), None, (0, 1, 2, 3), Q * npu_elems + offset_elems,
                            (N, head, H, W), (ns, npu_elems, hs, ws)))
    rest = C - head
    full, tail = rest // X, rest % X
    if full:
        pieces.append(Piece((all_, slice(head, head + full * X)), (N, full, X, H, W), (0, 1, 2, 3, 4),
                            offset_elems + cs, (N, full, X, H, W), (ns, cs, npu_elems, hs, ws)))
    if tail:
        pieces.append(Piece((all_, slice(head + full * X, C)), None, (0, 1, 2, 3),
                            offset_elems + (full + 1) * cs, (N, tail, H, W), (ns, npu_elems, hs, ws)))
    return pieces


def _extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides))


def _check_no_overlap(shape: tuple[int, ...], strides: tuple[int, ...], what: str) -> None:
    dims = sorted((s, n) for n, s in zip(shape, strides) if n > 1)
    span = 1
    for s, n in dims:
        if s < span:
            raise LayoutError(f"{what}: stride {s} is smaller than the {span} elements spanned by faster axes; elements overlap")
        span = s * (n - 1) + span
    if any(s < 0 for s in strides):
        raise LayoutError(f"{what}: negative stride in {strides}")


def _local_setup(shape: tuple[int, ...], itemsize: int, p: dict[str, Any], what: str):
    if len(shape) != 4:
        raise LayoutError(f"{what}: expected a 4-D (N, C, H, W) tensor, got shape {shape}")
    X, S = p["npu_num"], p["local_mem_size"]
    if X <= 0 or S <= 0:
        raise LayoutError(f"{what}: npu_num and local_mem_size must be positive")
    Q, R = npu_address(p["address"], X, S)
    layout = p["layout"]
    if p["strides"] is not None:
        if len(p["strides"]) != 4:
            raise LayoutError(f"{what}: strides are (N, C, H, W) in elements, got {p['strides']}")
        st = Strides(*p["strides"])
    elif layout == "aligned":
        check_aligned(f"{what} address", p["address"], 128,
                      "the address of a tensor in the 128-byte aligned layout is divisible by 128 (seed 004)")
        st = aligned_stride(shape, itemsize * 8, Q, X)
    else:
        check_aligned(f"{what} address", p["address"], 4, "the address of a tensor in the compact layout is divisible by 4 (seed 004)")
        st = compact_stride(shape, Q, X)
    N, C, H, W = shape
    cpn = channels_per_npu(C, Q, X) if C else 0
    _check_no_overlap((N, cpn, H, W), st.as_tuple(), what)
    if R % itemsize:
        raise LayoutError(f"{what}: offset {R} in NPU {Q} is not a multiple of the {itemsize}-byte element")
    need = R + _extent((N, cpn, H, W), st.as_tuple()) * itemsize
    if need > S:
        raise LayoutError(f"{what}: tensor needs bytes [{R}, {need}) of each NPU, local memory is {S} bytes")
    if (X * S) % itemsize or S % itemsize:
        raise LayoutError(f"{what}: local_mem_size {S} is not a multiple of the {itemsize}-byte element")
    pieces = local_pieces(shape, st, Q, R // itemsize, X, S // itemsize)
    return Plan(X * S, np.dtype(f"<u{itemsize}"), tuple(pieces)), st


_LOCAL_PARAMS = (
    Param("npu_num", int, REQUIRED, "number of NPUs X"),
    Param("local_mem_size", int, REQUIRED, "bytes of local memory per NPU S"),
    Param("address", int, 0, "tensor address A in [0, X*S-1]"),
)


def local_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    data = mode_pack(arr, p["mode"])
    plan, _ = _local_setup(data.shape, data.dtype.itemsize, p, "sophgo.local")
    return execute_pack(data, plan)


def local_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    mode = p["mode"]
    if mode == "none":
        stored, isz = shape, dt.itemsize
    else:
        g = _MODE_GROUP[mode]
        stored, isz = (ceil_div(shape[0], g),) + tuple(shape[1:]), _MODE_ITEM[mode] * g
        if dt.itemsize != _MODE_ITEM[mode]:
            raise LayoutError(f"{mode}-mode holds {_MODE_ITEM[mode] * 8}-bit elements, dtype {dt} given")
    plan, _ = _local_setup(stored, isz, p, "sophgo.local")
    data = execute_unpack(buf, plan, stored, "sophgo.local")
    return mode_unpack(data, mode, shape[0], dt)


def _matrix_shape(shape: tuple[int, ...], w: int) -> tuple[int, int, int, int]:
    if len(shape) != 2:
        raise LayoutError(f"sophgo.matrix: expected an N-by-M matrix, got shape {shape}")
    N, M = shape
    if not 1 <= w <= M:
        raise LayoutError(f"sophgo.matrix: W={w} must be in [1, M={M}] (seed 004)")
    return (N, ceil_div(M, w), 1, w)


def matrix_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    t = _matrix_shape(arr.shape, p["w"])
    N, M = arr.shape
    u = arr.view(f"<u{arr.dtype.itemsize}")
    full = np.zeros((N, t[1] * t[3]), u.dtype)
    full[:, :M] = u
    plan, _ = _local_setup(t, u.dtype.itemsize, {**p, "layout": "aligned", "strides": None}, "sophgo.matrix")
    return execute_pack(full.reshape(t), plan)


def matrix_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    t = _matrix_shape(shape, p["w"])
    plan, _ = _local_setup(t, dt.itemsize, {**p, "layout": "aligned", "strides": None}, "sophgo.matrix")
    data = execute_unpack(buf, plan, t, "sophgo.matrix").reshape(shape[0], -1)[:, : shape[1]]
    return np.ascontiguousarray(data).view(dt)


def _system_strides(shape: tuple[int, ...], p: dict[str, Any]) -> Strides:
    if len(shape) != 4:
        raise LayoutError(f"sophgo.system: expected (N, C, H, W), got shape {shape}")
    if p["strides"] is None:
        return continuous_stride(shape)
    if len(p["strides"]) != 4:
        raise LayoutError(f"sophgo.system: strides are (N, C, H, W) in elements, got {p['strides']}")
    st = Strides(*p["strides"])
    _check_no_overlap(shape, st.as_tuple(), "sophgo.system")
    return st


def system_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    st = _system_strides(arr.shape, p)
    u = arr.view(f"<u{arr.dtype.itemsize}")
    n = _extent(arr.shape, st.as_tuple())
    plan = Plan(n * u.itemsize, u.dtype, (Piece((), None, (0, 1, 2, 3), 0, arr.shape, st.as_tuple()),))
    return execute_pack(u, plan)


def system_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    st = _system_strides(shape, p)
    sdt = np.dtype(f"<u{dt.itemsize}")
    plan = Plan(_extent(shape, st.as_tuple()) * dt.itemsize, sdt,
                (Piece((), None, (0, 1, 2, 3), 0, shape, st.as_tuple()),))
    return execute_unpack(buf, plan, shape, "sophgo.system").view(dt)


def sophgo_layouts() -> list[LayoutSpec]:
    strides = Param("strides", tuple, None, "explicit (N, C, H, W) strides in elements")
    return [
        LayoutSpec("sophgo.system", "sophgo",
                   "system-memory tensor (N, C, H, W): continuous layout or explicit strides",
                   (strides,), system_pack, system_unpack, "float32", SEED),
        LayoutSpec("sophgo.local", "sophgo",
                   "local-memory tensor (N, C, H, W) scattered over NPUs: 128-byte aligned or "
                   "compact layout (or explicit strides), storage modes 4N / 2N / 2IC; packed "
                   "image = whole local memory, NPU 0 first",
                   _LOCAL_PARAMS + (
                       Param("layout", str, "aligned", "aligned (128-byte) or compact", ("aligned", "compact")),
                       strides,
                       Param("mode", str, "none", "storage mode: 4N (int8), 2N (int16), 2IC (fp32 weights)", MODES),
                   ),
                   local_pack, local_unpack, "float32", SEED),
        LayoutSpec("sophgo.matrix", "sophgo",
                   "N-by-M matrix as an (N, ceil(M/W), 1, W) tensor in the 128-byte aligned layout",
                   _LOCAL_PARAMS + (Param("w", int, REQUIRED, "W, columns per channel, in [1, M]"),),
                   matrix_pack, matrix_unpack, "float32", SEED),
    ]
