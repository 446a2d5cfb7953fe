"""Building blocks of the fuzz units, drawn from a :class:`~.draw.Sampler`: a cube's geometry
and data, an SDP memory-to-memory skeleton, convertor settings fitted to a layer's values, LUT
tables and their placement over a layer's range. The register writers and memory placement
they build on are :mod:`nvdla_hil.harness.vectors.layer`'s (shared with the bundled suites)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...drivers.profiles import HardwareProfile
from ..vectors.layer import (
    RAM_TYPE,
    Draft,
    Geo,
    Mem,
    lut_tables,
    place_feature,
    sdp_cube_registers,
)
from .draw import Sampler

#: a generator's reference run: the draft in, the model's events (per unit: its datapath values) out
Capture = Callable[[Draft], dict[str, list[dict[str, Any]]]]


def geometry(s: Sampler, atom: int) -> Geo:
    shape = s["shape"]
    w = 1 if shape == "1x1xC" else int(s["width"])
    h = 1 if shape in ("1x1xC", "single_line") else int(s["height"])
    if shape == "single_line" and w == 1:
        w = 2
    c = int(s["channels"])
    gap_l = atom * int(s.rng.integers(1, 3)) if s["gaps"] else 0
    gap_s = atom * int(s.rng.integers(1, 4)) if s["gaps"] else 0
    if w == 1 and h == 1:  # any 1x1xC cube (drawn as such or as a 1x1 "cube") is packed: SURFACE_STRIDE ==
        gap_l = gap_s = 0  # atom (the C model asserts it, cmod/sdp/NV_NVDLA_sdp.cpp:392; the RTL ignores the
        # strides, tests/test_sdp_1x1_pack.py)
    line = w * atom + gap_l
    return Geo(w, h, c, line, h * line + gap_s)


def data(s: Sampler, shape: tuple[int, ...], dtype: Any = np.int8) -> np.ndarray:
    info = np.iinfo(dtype)
    if s["data"] == "edges":
        edges = np.array([info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max], dtype=np.int64)
        return s.rng.choice(edges, size=shape).astype(dtype)
    return s.rng.integers(int(info.min), int(info.max) + 1, size=shape, dtype=np.int64).astype(dtype)



def sdp_io(d: Draft, s: Sampler, prof: HardwareProfile, mem: Mem) -> tuple[Geo, np.ndarray]:
    """An INT8 SDP memory-to-memory layer's cube, data and surfaces as the constraints draw them."""
    atom = prof.atom_bytes
    geo = geometry(s, atom)
    x = data(s, (geo.c, geo.h, geo.w))
    src = place_feature(d, mem, "src", x, s["src_port"], atom, geo)
    dst = place_feature(d, mem, "dst", (geo.c, geo.h, geo.w), s["dst_port"], atom, geo, output=True)
    sdp_cube_registers(d, geo.w, geo.h, geo.c, src=src, dst=dst, line=geo.line, surf=geo.surf,
                       src_ram=RAM_TYPE[s["src_port"]], dst_ram=RAM_TYPE[s["dst_port"]])
    return geo, x


def log_uniform_int(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(np.clip(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))), lo, hi))


def pick_cvt(s: Sampler, values: np.ndarray, *, mode: str, shift: int, out_max: int = 127, shift_top: int = 63,
              offset_bits: int = 32, scale_lo: int = 1) -> dict[str, int]:  # fmt: skip
    """Convertor settings for pre-convertor ``values``: ``fit`` maps their 1..99 % range onto
    the output range, ``saturate`` overshoots it 3-60x, ``random`` is anything legal."""
    rng = s.rng
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    omax = (1 << (offset_bits - 1)) - 1
    if v.size == 0:
        v = np.zeros(1, dtype=np.int64)
    if mode == "random":
        lo, hi = int(v.min()), int(v.max())
        off = int(np.clip(rng.integers(lo - 64, hi + 65), -omax - 1, omax))
        scale = int(rng.integers(-32768, 32768)) if rng.random() < 0.5 else int(rng.integers(-64, 65))
        return {"offset": off, "scale": scale, "shift": int(shift)}
    p_lo, p_hi = (float(x) for x in np.percentile(v, [1, 99]))
    off = int(np.clip(round((p_lo + p_hi) / 2), -omax - 1, omax))
    half = max((p_hi - p_lo) / 2, 1.0)
    scale = log_uniform_int(rng, scale_lo, 32767)
    target = out_max * (rng.uniform(0.5, 1.0) if mode == "fit" else rng.uniform(3.0, 60.0))
    sh = int(np.clip(math.ceil(math.log2(max(half * scale / target, 1e-9))), 0, shift_top))
    return {"offset": off, "scale": scale, "shift": sh}


def tables(s: Sampler) -> dict[str, np.ndarray]:
    rng, kind = s.rng, s["table"]
    if kind == "random_walk":
        return lut_tables(rng)
    out = {}
    for t, n in (("le", 65), ("lo", 257)):
        if kind == "monotone":
            a = np.sort(rng.integers(-32768, 32768, n))
            a = a if rng.random() < 0.5 else a[::-1]
        elif kind == "random":
            a = rng.integers(-32768, 32768, n)
        else:
            a = rng.choice(np.array([-32768, -32767, -1, 0, 1, 32766, 32767]), n)
        out[t] = np.asarray(a).astype(np.int16)
    return out


def place_lut(s: Sampler, lo_v: float, hi_v: float, *, cdp: bool, bits: int = 8) -> dict[str, Any]:
    """LUT registers whose tables cover parts of [lo_v, hi_v] as the constraints ask: overlap
    (inputs in both tables, one, and both out-of-range sides), disjoint (inputs between the
    tables: one table under-, the other overflows) or anywhere. ``bits`` 16: CDP INT16, whose
    RTL compares all 38 bits of START (``refmodel/cdp.py`` INT16 step 3)."""
    rng = s.rng
    span = max(hi_v - lo_v, 1.0)
    sel_lo, sel_hi = (-32, 31) if cdp else (-128, 127)
    # CDP INT8 RTL compares START on 22 bits (doc 6.7); CDP INT16 on 38 bits; SDP on 32
    bound = ((1 << 37) - 1 if bits == 16 else (1 << 21) - 1) if cdp else (1 << 31) - 1
    lo_sel = int(np.clip(round(math.log2(max(span * s["lo_span_pct"] / 100 / 256, 1e-9))), max(sel_lo, -31), min(sel_hi, 31)))
    t_lo = 256 * 2.0 ** lo_sel
    cfg: dict[str, Any] = {"le_function": s["le_function"], "lo_index_select": lo_sel}
    if s["le_function"] == "linear":
        le_sel = int(np.clip(round(math.log2(max(span * s["le_span_pct"] / 100 / 64, 1e-9))), max(sel_lo, -31), min(sel_hi, 31)))
        cfg.update(le_index_select=le_sel, le_index_offset=0)
        t_le = 64 * 2.0 ** le_sel
    else:
        mode = s["le_exp_offset"]
        if mode == "top_in_range":
            k = max(round(math.log2(max(span * s["le_span_pct"] / 100, 1))), 0)
            eo = k - 64
        elif mode == "low":
            eo = int(rng.integers(0, 4))
        else:
            eo = int(s["le_index_offset"])
        cfg.update(le_index_offset=eo, le_index_select=0)
        t_le = 2.0 ** min(eo + 64, 62)
    layout = s["layout"]
    if layout == "overlap":
        lo_start = lo_v + rng.uniform(0, 1) * (span - t_lo) if t_lo < span else lo_v - rng.uniform(0, 1) * (t_lo - span)
        le_start = lo_start + rng.uniform(-min(t_le, span), min(t_lo, span))
    elif layout == "disjoint":
        gap = span * rng.uniform(0.05, 0.3)
        first = lo_v + span * rng.uniform(0.0, 0.25)
        if rng.random() < 0.5:  # LO below LE: between them LO overflows and LE underflows
            lo_start = first
            le_start = lo_start + t_lo + gap
        else:  # LE below LO (LE must end: exponent tables never do unless top_in_range/random)
            le_start = first
            lo_start = le_start + min(t_le, 4 * span) + gap
    else:
        lo_start = rng.uniform(lo_v - t_lo, hi_v)
        le_start = rng.uniform(lo_v - min(t_le, span), hi_v)
    lo_start, le_start = (int(np.clip(round(x), -bound - 1, bound)) for x in (lo_start, le_start))
    cfg["lo_start"], cfg["le_start"] = lo_start, le_start
    cfg["lo_end"] = int(np.clip(lo_start + t_lo, -bound - 1, bound))
    cfg["le_end"] = int(np.clip(le_start + t_le, -bound - 1, bound))
    for t in ("le", "lo"):
        for side in ("uflow", "oflow"):
            cfg[f"{t}_slope_{side}_scale"] = int(s.draw("slope_scale"))
            cfg[f"{t}_slope_{side}_shift"] = int(s.draw("slope_shift"))
    for prio in ("uflow_priority", "oflow_priority", "hybrid_priority"):
        cfg[prio] = s[prio]
    return cfg


# ---- units -------------------------------------------------------------------------------------------------


def cvt_placeholder(d: Draft, name: str) -> None:
    d.convertors[name] = {"offset": 0, "scale": 1, "shift": 0}


