"""Surfaces in memory: an array packed into (and unpacked from) the memory image of a layout of
``harness/layouts``, or ``raw`` (C-order little-endian bytes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .format import RAW_LAYOUT


def layout_spec(name: str):
    from ..layouts import get_layout

    return get_layout(name)


def resolve_params(layout: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if layout == RAW_LAYOUT:
        if params:
            raise ValueError(f"layout 'raw' takes no parameters, got {sorted(params)}")
        return {}
    spec = layout_spec(layout)
    spec.resolve(params)
    return dict(params)


def pack_surface(layout: str, array: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """Memory image (uint8) of ``array`` in ``layout`` (``raw`` = C-order little-endian bytes)."""
    if layout == RAW_LAYOUT:
        a = np.ascontiguousarray(array)
        return a.astype(a.dtype.newbyteorder("<"), copy=False).reshape(-1).view(np.uint8).copy()
    return layout_spec(layout).pack(array, **params)


def unpack_surface(layout: str, buf: np.ndarray, shape: tuple[int, ...], dtype: np.dtype,
                   params: Mapping[str, Any]) -> np.ndarray:
    if layout == RAW_LAYOUT:
        n = int(np.prod(shape)) * dtype.itemsize
        return np.frombuffer(np.ascontiguousarray(buf[:n]).tobytes(), dtype=dtype.newbyteorder("<")) \
            .astype(dtype).reshape(shape)
    return layout_spec(layout).unpack(buf, shape, dtype, **params)


def packed_size(layout: str, shape: tuple[int, ...], dtype: np.dtype, params: Mapping[str, Any]) -> int:
    """Bytes of the memory image of a ``shape``/``dtype`` tensor in ``layout``."""
    return int(pack_surface(layout, np.zeros(shape, dtype=dtype), params).size)
