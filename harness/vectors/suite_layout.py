"""Bundled suites of layout cases (an array and its packed image): ``layout_nvdla``,
``layout_dmp``, ``layout_sophgo``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .layer import Draft
from .surface import layout_spec


def _rand_array(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        vals = rng.standard_normal(shape) * 100
        return vals.astype(dt)
    info = np.iinfo(dt)
    return rng.integers(int(info.min), int(info.max) + 1, size=shape, dtype=np.int64).astype(dt)


def gen_layout_nvdla(rng: np.random.Generator, index: int) -> Draft:
    d = Draft(family="nvdla")
    pick = index % 4
    if pick == 0:
        c, h, w = int(rng.integers(1, 40)), int(rng.integers(1, 5)), int(rng.integers(1, 6))
        atom = (8, 32)[int(rng.integers(0, 2))]
        dtype = ("int8", "int16", "float16")[int(rng.integers(0, 3))]
        params: dict[str, Any] = {"atom_bytes": atom}
        if rng.integers(0, 2):
            params["line_stride"] = w * atom + atom * int(rng.integers(1, 3))
            params["surface_stride"] = params["line_stride"] * h + atom * int(rng.integers(0, 3))
        d.layout = {"name": "nvdla.feature", "params": params, "dtype": dtype, "shape": [c, h, w]}
    elif pick == 1:
        k, c = int(rng.integers(1, 20)), int(rng.integers(1, 40))
        r, s = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        prof = ("nv_small", "nv_full")[int(rng.integers(0, 2))]
        d.layout = {"name": "nvdla.weight.dc", "params": {"profile": prof}, "dtype": "int8", "shape": [k, c, r, s]}
    elif pick == 2:
        fmt = ("T_R8", "T_A8B8G8R8", "T_R16", "T_A2B10G10R10")[int(rng.integers(0, 4))]
        h, w = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        spec = layout_spec(f"nvdla.pixel.{fmt}")
        probe = None
        for dt, ch in (("uint8", 1), ("uint8", 4), ("uint16", 1), ("uint16", 4)):
            try:
                spec.pack(np.zeros((h, w, ch), dtype=dt))
                probe = (dt, ch)
                break
            except ValueError:
                continue
        if probe is None:
            return gen_layout_nvdla(rng, index + 1)
        d.layout = {"name": f"nvdla.pixel.{fmt}", "params": {}, "dtype": probe[0], "shape": [h, w, probe[1]]}
    else:
        k, c = int(rng.integers(1, 12)), int(rng.integers(1, 20))
        d.layout = {"name": "nvdla.weight.image", "params": {"profile": "nv_small"}, "dtype": "int8",
                    "shape": [k, c, int(rng.integers(1, 4)), int(rng.integers(1, 4))]}
    d.array = _rand_array(rng, d.layout["dtype"], tuple(d.layout["shape"]))
    if d.layout["name"].startswith("nvdla.pixel"):
        bits = {"T_A2B10G10R10": 10}.get(d.layout["name"].split(".")[-1])
        if bits:
            d.array = (d.array.astype(np.int64) & ((1 << bits) - 1)).astype(d.array.dtype)
            d.array[..., 3] &= 0x3
    d.description = f"{d.layout['name']} round trip, shape {d.layout['shape']} {d.layout['dtype']}"
    return d


def gen_layout_dmp(rng: np.random.Generator, index: int) -> Draft:
    d = Draft(family="dmp")
    pick = index % 3
    h, w, c = int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 20))
    if pick == 0:
        shape = [h, w, c] if rng.integers(0, 2) else [int(rng.integers(1, 3)), h, w, c]
        d.layout = {"name": "dmp.conv_io", "params": {"transpose_weight": bool(rng.integers(0, 2))},
                    "dtype": "float16", "shape": shape}
    elif pick == 1:
        d.layout = {"name": "dmp.output", "params": {"transpose_weight": bool(rng.integers(0, 2))},
                    "dtype": "float32", "shape": [h, w, c]}
    else:
        f32 = bool(rng.integers(0, 2))
        d.layout = {"name": "dmp.fc", "params": {"float32": f32}, "dtype": "float32" if f32 else "float16",
                    "shape": [int(rng.integers(1, 64))]}
    d.array = _rand_array(rng, d.layout["dtype"], tuple(d.layout["shape"]))
    try:
        layout_spec(d.layout["name"]).pack(d.array, **d.layout["params"])
    except ValueError:
        return gen_layout_dmp(rng, index + 3)
    d.description = f"{d.layout['name']} round trip, shape {d.layout['shape']} {d.layout['dtype']}"
    return d


def gen_layout_sophgo(rng: np.random.Generator, index: int) -> Draft:
    d = Draft(family="sophgo")
    n, c, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 12)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
    dtype = ("float32", "int8", "float16")[index % 3]
    if index % 2 == 0:
        d.layout = {"name": "sophgo.local", "dtype": dtype, "shape": [n, c, h, w],
                    "params": {"npu_num": 4, "local_mem_size": 1024, "layout": ("aligned", "compact")[int(rng.integers(0, 2))],
                               "address": 64 * int(rng.integers(0, 4))}}
    else:
        d.layout = {"name": "sophgo.system", "dtype": dtype, "shape": [n, c, h, w], "params": {}}
    d.array = _rand_array(rng, dtype, tuple(d.layout["shape"]))
    try:
        layout_spec(d.layout["name"]).pack(d.array, **d.layout["params"])
    except ValueError:
        d.layout["params"]["layout"] = "compact"
        d.layout["params"]["address"] = 0
    d.description = f"{d.layout['name']} round trip, shape {d.layout['shape']} {dtype}"
    return d


