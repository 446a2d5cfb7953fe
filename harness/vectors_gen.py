"""Test-vector generator: random cases, goldens from the reference model or from an oracle.

Every case is drawn from its own stream ``numpy.random.Generator(PCG64(seed).jumped(index))``
so case ``index`` of ``(suite, seed)`` can be regenerated alone, byte for byte, from the
``provenance`` of its manifest (``nvdla-hil vectors gen --from-manifest``). Goldens (output
images and statistics) are first what the virtual NVDLA (:class:`ModelTarget`, reference model)
produces for the case (``golden_source`` kind ``model``: self-consistency only); layout cases pack
with the layout registry. :func:`regolden` then re-makes a layer case's goldens on an oracle
(NVDLA's RTL under Verilator or its C model): the oracle's images and counters, the oracle named
in ``golden_source``, every difference from the old goldens reported.

Suites (``SUITES``):

=================  =============================================================================
``sdp_lut``        SDP EW-stage LUT (nv_small_256_full): LE exponent/linear + LO linear, inputs
                   spread over both tables and both out-of-range sides, all 8 priority combos
``cdp_lut``        CDP (LRN) LUT on nv_small: random LUT over the square-sum range, convertors
``sdp_cvt``        SDP output convertor / saturation (int8 and int16 outputs), nv_small
``sdp_bsbn``       SDP BS/BN ALU/MUL/PReLU/ReLU with register and memory operands, nv_small
``sdp_int16``      SDP on nv_full with INT16: 16->16, 16->8 (PROC INT8) and 8->16; BS/BN with
                   16-bit register/memory operands, PReLU/ReLU, output convertor at the edges
``pdp_int16``      PDP INT16 (nv_full): max/min/average, padding values, reciprocals
``cdp_int16``      CDP LRN INT16 (nv_full): 17-bit input convertor, 37-bit square sums, LUT,
                   INT16 output convertor and saturation
``layout_nvdla``   NVDLA feature / weight / pixel layouts: array + packed image
``layout_dmp``     DMP dv-sdk layouts
``layout_sophgo``  Sophgo TPU local-memory layouts
=================  =============================================================================
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..drivers.profiles import load_profile

from .vectors import FORMAT, Case, Hex, VectorError, execute_case, load_case, pack_surface, unpack_surface, write_case

__all__ = ["SUITES", "Draft", "Regolden", "generate_case", "generate_suite", "regenerate", "regolden", "model_version",
           "case_name"]

PRI_BASE = 0x8000_0000  # primary port: bit 31 set (the model routes bit-31-clear addresses to sec_mem)
PRIORITIES = [(u, o, h) for u in ("LE", "LO") for o in ("LE", "LO") for h in ("LE", "LO")]


def model_version() -> str:
    try:
        from importlib.metadata import version

        return f"nvdla-hil {version('nvdla-hil')}"
    except Exception:  # noqa: BLE001 - not installed: source tree
        return "nvdla-hil (source)"


def case_name(suite: str, seed: int, index: int) -> str:
    return f"{suite}-s{seed}-{index:03d}"


def rng_for(seed: int, index: int) -> np.random.Generator:
    """The case's own random stream: PCG64(seed) jumped ``index`` times."""
    return np.random.Generator(np.random.PCG64(seed).jumped(index))


@dataclass
class Draft:
    """A case before its goldens exist."""

    unit: str | None = None
    profile: str | None = None
    description: str = ""
    registers: list[dict[str, Any]] = field(default_factory=list)
    lut: dict[str, Any] | None = None  # {unit, config}
    lut_tables: dict[str, np.ndarray] = field(default_factory=dict)  # le/lo int16
    convertors: dict[str, dict[str, int]] = field(default_factory=dict)
    inputs: list[tuple[dict[str, Any], np.ndarray]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    statistics: bool = False
    launch: tuple[str, ...] | None = None  # blocks to enable (None: the loader's default for the unit)
    features: tuple[str, ...] = ()  # declared profile features (the loader derives the others)
    # layout cases
    layout: dict[str, Any] | None = None  # {name, params, dtype, shape}
    array: np.ndarray | None = None
    family: str | None = None
    # pick this convertor's shift from the range so the golden output has the most distinct values
    tune: tuple[str, range] | None = None


def _reg(name: str, **flds: int | str) -> dict[str, Any]:
    return {"reg": name, "fields": {k: Hex(v) if k.endswith("_ADDR_LOW") and isinstance(v, int) else v
                                    for k, v in flds.items()}}


def _i(v: Any) -> int:
    return int(v)


# ---- SDP helpers ----------------------------------------------------------------------------


def _sdp_cube(d: Draft, rng: np.random.Generator, w: int, h: int, c: int, *, atom: int = 8,
              out_int16: bool = False, data: np.ndarray | None = None) -> None:
    """Int8 memory-to-memory SDP layer skeleton: input/output surfaces and their registers
    (BS/BN/EW bypassed, EW/LUT registers left to the caller)."""
    x = data if data is not None else rng.integers(-128, 128, size=(c, h, w), dtype=np.int64).astype(np.int8)
    lanes = atom
    line, surf = w * atom, w * h * atom
    src = PRI_BASE
    out_dt = "int16" if out_int16 else "int8"
    out_lanes = atom // (2 if out_int16 else 1)
    osurf_n = -(-c // out_lanes)
    dst = PRI_BASE + 0x10000
    d.inputs.append(({"name": "src", "layout": "nvdla.feature", "params": {"atom_bytes": atom}, "dtype": "int8",
                      "shape": [c, h, w], "address": Hex(src), "port": "pri_mem"}, x))
    d.outputs.append({"name": "dst", "layout": "nvdla.feature", "params": {"atom_bytes": atom}, "dtype": out_dt,
                      "shape": [c, h, w], "address": Hex(dst), "port": "pri_mem", "rule": "bitexact"})
    assert -(-c // lanes) * surf < 0x10000 and osurf_n * surf < 0x10000
    for blk in ("SDP_RDMA", "SDP"):
        d.registers += [_reg(f"{blk}.D_DATA_CUBE_WIDTH", WIDTH=w - 1), _reg(f"{blk}.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1),
                        _reg(f"{blk}.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)]
    d.registers += [
        _reg("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src), _reg("SDP_RDMA.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
        _reg("SDP_RDMA.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line), _reg("SDP_RDMA.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
        _reg("SDP_RDMA.D_FEATURE_MODE_CFG", FLYING_MODE=0, WINOGRAD=0, IN_PRECISION=0, PROC_PRECISION=0,
             OUT_PRECISION=1 if out_int16 else 0, BATCH_NUMBER=0),
        _reg("SDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), _reg("SDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        _reg("SDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=line), _reg("SDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf),
        _reg("SDP.D_FEATURE_MODE_CFG", FLYING_MODE=0, OUTPUT_DST=0, WINOGRAD=0, NAN_TO_ZERO=0, BATCH_NUMBER=0),
        _reg("SDP.D_DATA_FORMAT", PROC_PRECISION=0, OUT_PRECISION=1 if out_int16 else 0),
        # both DMA engines on the primary (MC) port: the reset value CV is the secondary port
        _reg("SDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=1), _reg("SDP.D_DST_DMA_CFG", DST_RAM_TYPE=1),
    ]


def _bypass(d: Draft, *stages: str) -> None:
    for st in stages:
        if st == "EW":
            d.registers.append(_reg("SDP.D_DP_EW_CFG", EW_BYPASS=1, EW_ALU_BYPASS=1, EW_MUL_BYPASS=1, EW_LUT_BYPASS=1))
        else:
            d.registers.append(_reg(f"SDP.D_DP_{st}_CFG", **{f"{st}_BYPASS": 1, f"{st}_ALU_BYPASS": 1,
                                                            f"{st}_MUL_BYPASS": 1, f"{st}_RELU_BYPASS": 1}))


def _rdma_off(d: Draft, *dmas: str) -> None:
    for dma in dmas:
        d.registers.append(_reg(f"SDP_RDMA.D_{dma}_CFG", **{f"{dma}_DISABLE": 1}))


# ---- suite: sdp_lut ---------------------------------------------------------------------------


def _lut_tables(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Smooth-ish random tables (random walk) so interpolation is exercised with real slopes."""
    le = np.cumsum(rng.integers(-600, 601, 65)) + int(rng.integers(-8000, 8001))
    lo = np.cumsum(rng.integers(-200, 201, 257)) + int(rng.integers(-8000, 8001))
    return {"le": np.clip(le, -32768, 32767).astype(np.int16), "lo": np.clip(lo, -32768, 32767).astype(np.int16)}


def _lut_config(rng: np.random.Generator, lo_v: int, hi_v: int, le_function: str, prio: tuple[str, str, str], *,
                max_select: int = 20, cdp: bool = False) -> dict[str, Any]:
    """LUT registers whose tables cover parts of [lo_v, hi_v] so that inputs fall into both
    tables, their overlap, and both under- and overflow."""
    span = max(hi_v - lo_v, 64)
    lo_sel = int(np.clip(int(np.log2(span / 256 * rng.uniform(0.3, 0.7))) if span > 512 else 0, 0, max_select))
    lo_start = int(lo_v + span * rng.uniform(0.05, 0.35))
    cfg: dict[str, Any] = {"le_function": le_function, "lo_index_select": lo_sel, "lo_start": lo_start,
                           "lo_end": lo_start + (256 << lo_sel)}
    if le_function == "linear":
        le_sel = int(np.clip(int(np.log2(span / 64 * rng.uniform(0.3, 0.7))) if span > 128 else 0, 0, max_select))
        le_start = int(lo_v + span * rng.uniform(0.25, 0.6))
        cfg.update(le_index_select=le_sel, le_start=le_start, le_end=le_start + (64 << le_sel), le_index_offset=0)
    else:
        eo = int(rng.integers(0, 4))
        le_start = int(lo_v + span * rng.uniform(0.1, 0.5))
        top = int(np.log2(max(hi_v - le_start, 2)))
        cfg.update(le_index_offset=eo, le_index_select=0, le_start=le_start,
                   le_end=le_start + (1 << min(max(top - 1, eo + 1), 30)))
    for t in ("le", "lo"):
        for k in ("uflow", "oflow"):
            cfg[f"{t}_slope_{k}_scale"] = int(rng.integers(-300, 301))
            cfg[f"{t}_slope_{k}_shift"] = int(rng.integers(-2, 8))
    cfg["uflow_priority"], cfg["oflow_priority"], cfg["hybrid_priority"] = prio
    bound = (1 << 37) - 1 if cdp else (1 << 31) - 1
    for k in ("le_start", "le_end", "lo_start", "lo_end"):
        cfg[k] = int(np.clip(cfg[k], -bound - 1, bound))
    return cfg


def gen_sdp_lut(rng: np.random.Generator, index: int) -> Draft:
    d = Draft(unit="SDP", profile="nv_small_256_full", statistics=True)
    w, h, c = int(rng.integers(1, 7)), int(rng.integers(1, 4)), int(rng.integers(1, 25))
    _sdp_cube(d, rng, w, h, c)
    m = int(rng.integers(1, 200))  # BS MUL widens the int8 range to [-128m, 127m]
    d.registers.append(_reg("SDP.D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=1, BS_ALU_ALGO=0, BS_MUL_BYPASS=0,
                            BS_MUL_PRELU=0, BS_RELU_BYPASS=1))
    d.registers += [_reg("SDP.D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=0),
                    _reg("SDP.D_DP_BS_MUL_SRC_VALUE", BS_MUL_OPERAND=m)]
    _bypass(d, "BN")
    d.registers += [_reg("SDP.D_DP_EW_CFG", EW_BYPASS=0, EW_ALU_BYPASS=1, EW_ALU_ALGO=0, EW_MUL_BYPASS=1, EW_MUL_PRELU=0,
                         EW_LUT_BYPASS=0)]
    _rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
    prio = PRIORITIES[index % 8]
    le_fn = ("exponent", "linear")[(index // 8) % 2] if index < 16 else ("exponent", "linear")[int(rng.integers(0, 2))]
    d.lut = {"unit": "SDP", "config": _lut_config(rng, -128 * m, 127 * m, le_fn, prio)}
    d.lut_tables = _lut_tables(rng)
    d.convertors["sdp_out"] = {"offset": int(rng.integers(-64, 65)), "scale": int(rng.integers(1, 64)),
                               "shift": int(rng.integers(6, 14))}
    d.tune = ("sdp_out", range(0, 24))
    d.description = (f"SDP LUT: LE {le_fn}, priorities uflow/oflow/hybrid = {'/'.join(prio)}, BS MUL x{m}, "
                     f"cube {c}x{h}x{w} (CxHxW)")
    return d


# ---- suite: cdp_lut ---------------------------------------------------------------------------


def gen_cdp_lut(rng: np.random.Generator, index: int) -> Draft:
    d = Draft(unit="CDP", profile="nv_small", statistics=True)
    atom = 8
    w, h, c = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(1, 25))
    x = rng.integers(-128, 128, size=(c, h, w), dtype=np.int64).astype(np.int8)
    line, surf = w * atom, w * h * atom
    src, dst = PRI_BASE, PRI_BASE + 0x10000
    d.inputs.append(({"name": "src", "layout": "nvdla.feature", "params": {"atom_bytes": atom}, "dtype": "int8",
                      "shape": [c, h, w], "address": Hex(src), "port": "pri_mem"}, x))
    d.outputs.append({"name": "dst", "layout": "nvdla.feature", "params": {"atom_bytes": atom}, "dtype": "int8",
                      "shape": [c, h, w], "address": Hex(dst), "port": "pri_mem", "rule": "bitexact"})
    nl = int(rng.integers(0, 4))
    sqsum_bypass = int(index % 5 == 4)
    mul_bypass = int(rng.integers(0, 2))
    d.registers += [
        _reg("CDP_RDMA.D_DATA_CUBE_WIDTH", WIDTH=w - 1), _reg("CDP_RDMA.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1),
        _reg("CDP_RDMA.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1),
        _reg("CDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src), _reg("CDP_RDMA.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
        _reg("CDP_RDMA.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line), _reg("CDP_RDMA.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
        _reg("CDP_RDMA.D_DATA_FORMAT", INPUT_DATA=0),
        _reg("CDP.D_DATA_FORMAT", INPUT_DATA_TYPE=0),
        _reg("CDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), _reg("CDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        _reg("CDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=line), _reg("CDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf),
        _reg("CDP.D_LRN_CFG", NORMALZ_LEN=nl),
        _reg("CDP.D_FUNC_BYPASS", SQSUM_BYPASS=sqsum_bypass, MUL_BYPASS=mul_bypass),
        _reg("CDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=1), _reg("CDP.D_DST_DMA_CFG", DST_RAM_TYPE=1),
    ]
    din_scale, din_shift = int(rng.integers(1, 4)), int(rng.integers(0, 3))
    d.convertors["cdp_in"] = {"offset": int(rng.integers(-8, 9)), "scale": din_scale, "shift": din_shift}
    d.convertors["cdp_out"] = {"offset": int(rng.integers(-256, 257)), "scale": int(rng.integers(1, 32)),
                               "shift": int(rng.integers(8, 22))}
    taps = 2 * (nl + 1) + 1
    # aim the tables at where this layer's square sums really fall (5th..95th percentile)
    cin = d.convertors["cdp_in"]
    x9 = np.clip(((x.astype(np.int64) - cin["offset"]) * din_scale) >> din_shift, -256, 255)
    if sqsum_bypass:
        ss = x9
    else:
        sq = np.pad(x9 * x9, ((nl + 1, nl + 1), (0, 0), (0, 0)))
        ss = sum(sq[k : k + c] for k in range(taps))
    lo_v, top = (int(v) for v in np.percentile(ss, [5, 95]))
    top = max(top, lo_v + 64)
    prio = PRIORITIES[index % 8]
    le_fn = ("exponent", "linear")[(index // 8) % 2]
    d.lut = {"unit": "CDP", "config": _lut_config(rng, lo_v, top, le_fn, prio, max_select=20, cdp=True)}
    d.lut_tables = _lut_tables(rng)
    d.tune = ("cdp_out", range(0, 32))
    d.description = (f"CDP LRN window {taps}{' (sqsum bypass)' if sqsum_bypass else ''}, LE {le_fn}, priorities "
                     f"{'/'.join(prio)}, cube {c}x{h}x{w}")
    return d


# ---- suite: sdp_cvt ------------------------------------------------------------------------------


def gen_sdp_cvt(rng: np.random.Generator, index: int) -> Draft:
    d = Draft(unit="SDP", profile="nv_small", statistics=True)
    out16 = index % 3 == 2 and load_profile("nv_small").has("int16")  # nv_small is INT8-only
    w, h, c = int(rng.integers(1, 7)), int(rng.integers(1, 4)), int(rng.integers(1, 25))
    data = None
    if index % 4 == 0:  # the extremes, repeated
        data = rng.choice(np.array([-128, -127, -1, 0, 1, 126, 127], dtype=np.int8), size=(c, h, w))
    _sdp_cube(d, rng, w, h, c, out_int16=out16, data=data)
    _bypass(d, "BS", "BN", "EW")
    _rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
    scale = int(rng.integers(-32768, 32768)) if index % 2 else int(rng.integers(-600, 601))
    shift = int(rng.integers(0, 64)) if index % 5 == 3 else int(rng.integers(0, 12))
    d.convertors["sdp_out"] = {"offset": int(rng.integers(-200, 201)), "scale": scale, "shift": shift}
    d.description = (f"SDP output convertor offset/scale/shift = {d.convertors['sdp_out']['offset']}/{scale}/{shift}, "
                     f"{'int16' if out16 else 'int8'} output, saturation counted")
    return d


# ---- suite: sdp_bsbn -----------------------------------------------------------------------------


def gen_sdp_bsbn(rng: np.random.Generator, index: int) -> Draft:
    d = Draft(unit="SDP", profile="nv_small", statistics=True)
    atom = 8
    w, h, c = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(1, 20))
    _sdp_cube(d, rng, w, h, c)
    cpad = -(-c // atom) * atom
    op_base = PRI_BASE + 0x20000
    for k, (st, dma) in enumerate((("BS", "BRDMA"), ("BN", "NRDMA"))):
        on = bool(rng.integers(0, 4)) or st == "BS"
        if not on:
            _bypass(d, st)
            _rdma_off(d, dma)
            continue
        alu_on, mul_on = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
        if not (alu_on or mul_on):
            alu_on = True
        src_mem = {"ALU": alu_on and bool(rng.integers(0, 2)), "MUL": mul_on and bool(rng.integers(0, 2))}
        prelu = int(mul_on and rng.integers(0, 4) == 0)
        d.registers.append(_reg(f"SDP.D_DP_{st}_CFG", **{
            f"{st}_BYPASS": 0, f"{st}_ALU_BYPASS": int(not alu_on), f"{st}_ALU_ALGO": int(rng.integers(0, 3)),
            f"{st}_MUL_BYPASS": int(not mul_on), f"{st}_MUL_PRELU": prelu,
            f"{st}_RELU_BYPASS": int(rng.integers(0, 2))}))
        d.registers += [
            _reg(f"SDP.D_DP_{st}_ALU_CFG", **{f"{st}_ALU_SRC": int(src_mem["ALU"]),
                                             f"{st}_ALU_SHIFT_VALUE": int(rng.integers(0, 8))}),
            _reg(f"SDP.D_DP_{st}_ALU_SRC_VALUE", **{f"{st}_ALU_OPERAND": int(rng.integers(-2000, 2001)) & 0xFFFF}),
            _reg(f"SDP.D_DP_{st}_MUL_CFG", **{f"{st}_MUL_SRC": int(src_mem["MUL"]),
                                             f"{st}_MUL_SHIFT_VALUE": int(rng.integers(0, 10))}),
            _reg(f"SDP.D_DP_{st}_MUL_SRC_VALUE", **{f"{st}_MUL_OPERAND": int(rng.integers(-3000, 3001)) & 0xFFFF}),
        ]
        mem_kinds = [kk for kk in ("ALU", "MUL") if src_mem[kk]]
        if len(mem_kinds) != 1:  # register operands only (BOTH-from-memory interleaving not generated)
            if len(mem_kinds) == 2:
                d.registers[-4]["fields"][f"{st}_ALU_SRC"] = 0
                mem_kinds = ["MUL"]
            else:
                _rdma_off(d, dma)
                continue
        kind = mem_kinds[0]
        per_element = bool(rng.integers(0, 2))
        addr = op_base + k * 0x8000
        lo, hi = (-2000, 2001) if kind == "ALU" else (-3000, 3001)
        if per_element:
            arr = rng.integers(lo, hi, size=(c, h, w)).astype(np.int16)
            # a 16-bit operand cube has `atom` lanes of 2 bytes: the feature layout with a 2-atom "atom"
            meta = {"layout": "nvdla.feature", "params": {"atom_bytes": 2 * atom}, "shape": [c, h, w]}
            ls, ss = w * 2 * atom, w * h * 2 * atom
        else:
            arr = rng.integers(lo, hi, size=(cpad,)).astype(np.int16)
            meta = {"layout": "raw", "params": {}, "shape": [cpad]}
            ls = ss = 0
        d.inputs.append(({"name": f"{st.lower()}_{kind.lower()}", **meta, "dtype": "int16", "address": Hex(addr),
                          "port": "pri_mem"}, arr))
        d.registers += [
            _reg(f"SDP_RDMA.D_{dma}_CFG", **{f"{dma}_DISABLE": 0, f"{dma}_DATA_USE": 1 if kind == "ALU" else 0,
                                            f"{dma}_DATA_SIZE": 1, f"{dma}_DATA_MODE": int(per_element),
                                            f"{dma}_RAM_TYPE": 1}),
            _reg(f"SDP_RDMA.D_{st}_BASE_ADDR_LOW", **{f"{st}_BASE_ADDR_LOW": addr}),
            _reg(f"SDP_RDMA.D_{st}_BASE_ADDR_HIGH", **{f"{st}_BASE_ADDR_HIGH": 0}),
            _reg(f"SDP_RDMA.D_{st}_LINE_STRIDE", **{f"{st}_LINE_STRIDE": ls}),
            _reg(f"SDP_RDMA.D_{st}_SURFACE_STRIDE", **{f"{st}_SURFACE_STRIDE": ss}),
        ]
    if not any(r["reg"] == "SDP.D_DP_BN_CFG" for r in d.registers):
        _bypass(d, "BN")
    _bypass(d, "EW")
    _rdma_off(d, "ERDMA")
    d.convertors["sdp_out"] = {"offset": int(rng.integers(-50, 51)), "scale": int(rng.integers(1, 40)),
                               "shift": int(rng.integers(4, 16))}
    mem = [m["name"] for m, _ in d.inputs[1:]]
    d.description = f"SDP BS/BN with {'memory operands ' + ', '.join(mem) if mem else 'register operands'}, cube {c}x{h}x{w}"
    return d


# ---- INT16 suites (nv_full) ------------------------------------------------------------------------

_I16_EDGES = np.array([-32768, -32767, -16384, -1, 0, 1, 16383, 32766, 32767], dtype=np.int16)
NV_FULL_ATOM = 32


def _byte_fields(d: Draft) -> Draft:
    """Address and stride fields given in bytes -> field values: the v1 (nv_full) map declares
    them as bits [31:5] (32-byte units), so a byte value is shifted by the field's lsb. Also
    declares the ``int16`` feature, so an INT16 case never runs on an INT8-only profile."""
    d.features = tuple(sorted(set(d.features) | {"int16"}))
    assert d.profile is not None, "_byte_fields needs the draft's profile"
    rm = load_profile(d.profile).regmap
    for r in d.registers:
        blk, reg = r["reg"].split(".", 1)
        for name, v in list(r["fields"].items()):
            if "ADDR_LOW" in name or name.endswith(("LINE_STRIDE", "SURFACE_STRIDE")):
                lsb = rm.register(blk, reg).field(name).lsb
                assert int(v) % (1 << lsb) == 0, f"{r['reg']}.{name} = {int(v):#x} is not {1 << lsb}-byte aligned"
                r["fields"][name] = Hex(int(v) >> lsb) if "ADDR_LOW" in name else int(v) >> lsb
    return d


def _feature_io(d: Draft, name: str, arr: np.ndarray, addr: int, *, output: bool = False,
                atom: int = NV_FULL_ATOM) -> None:
    meta = {"name": name, "layout": "nvdla.feature", "params": {"atom_bytes": atom}, "dtype": str(arr.dtype),
            "shape": list(arr.shape), "address": Hex(addr), "port": "pri_mem"}
    if output:
        d.outputs.append({**meta, "rule": "bitexact"})
    else:
        d.inputs.append((meta, arr))


def gen_sdp_int16(rng: np.random.Generator, index: int) -> Draft:
    """SDP with INT16 on nv_full. Modes by ``index % 3``: 16->16 (IN = PROC = OUT = INT16),
    16->8 (IN INT16, PROC = OUT INT8, seed 000 "processing precision ... always INT8"),
    8->16 (IN = PROC INT8, OUT INT16). Channel counts avoid the lanes the hardware reads or
    writes beyond the declared cubes (16->8 reads int16 surfaces in pairs, 8->16 writes two
    int16 surfaces per int8 atom)."""
    d = Draft(unit="SDP", profile="nv_full", statistics=True)
    atom = NV_FULL_ATOM
    mode = ("16to16", "16to8", "8to16")[index % 3]
    in16, out16 = mode != "8to16", mode != "16to8"
    proc16 = mode == "16to16"
    w, h = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    k = int(rng.integers(1, 3))
    if mode == "16to8":
        c = 32 * k - int(rng.integers(0, 16))  # an even number of int16 surfaces
    elif mode == "8to16":
        c = 32 * (k - 1) + int(rng.integers(17, 33))  # 2*ceil(C/32) int16 surfaces = ceil(C/16)
    else:
        c = int(rng.integers(1, 50))
    in_dt = np.int16 if in16 else np.int8
    info = np.iinfo(in_dt)
    if index % 4 == 0:
        x = rng.choice(_I16_EDGES if in16 else np.array([-128, -127, -1, 0, 1, 126, 127]), size=(c, h, w)).astype(in_dt)
    else:
        x = rng.integers(int(info.min), int(info.max) + 1, size=(c, h, w)).astype(in_dt)
    in_lanes, out_lanes = atom // (2 if in16 else 1), atom // (2 if out16 else 1)
    line, surf = w * atom, w * h * atom
    src, dst = PRI_BASE, PRI_BASE + 0x10000
    assert -(-c // min(in_lanes, out_lanes)) * surf <= 0x10000
    _feature_io(d, "src", x, src)
    _feature_io(d, "dst", np.zeros((c, h, w), dtype=np.int16 if out16 else np.int8), dst, output=True)
    prec = {"IN_PRECISION": int(in16), "PROC_PRECISION": int(proc16), "OUT_PRECISION": int(out16)}
    for blk in ("SDP_RDMA", "SDP"):
        d.registers += [_reg(f"{blk}.D_DATA_CUBE_WIDTH", WIDTH=w - 1), _reg(f"{blk}.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1),
                        _reg(f"{blk}.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)]
    d.registers += [
        _reg("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src), _reg("SDP_RDMA.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
        _reg("SDP_RDMA.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line), _reg("SDP_RDMA.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
        _reg("SDP_RDMA.D_FEATURE_MODE_CFG", FLYING_MODE=0, WINOGRAD=0, BATCH_NUMBER=0, **prec),
        _reg("SDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), _reg("SDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        _reg("SDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=line), _reg("SDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf),
        _reg("SDP.D_FEATURE_MODE_CFG", FLYING_MODE=0, OUTPUT_DST=0, WINOGRAD=0, BATCH_NUMBER=0),
        _reg("SDP.D_DATA_FORMAT", PROC_PRECISION=prec["PROC_PRECISION"], OUT_PRECISION=prec["OUT_PRECISION"]),
        _reg("SDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=1), _reg("SDP.D_DST_DMA_CFG", DST_RAM_TYPE=1),
    ]
    # BS: ALU + MUL (+ PReLU / ReLU); the ALU operand from memory on every other case
    proc_lanes = atom // (2 if proc16 else 1)
    cpad = -(-c // proc_lanes) * proc_lanes
    alu_mem = index % 2 == 1
    prelu = int(rng.integers(0, 3) == 0)
    d.registers += [
        _reg("SDP.D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=int(rng.integers(0, 3)), BS_MUL_BYPASS=0,
             BS_MUL_PRELU=prelu, BS_RELU_BYPASS=int(rng.integers(0, 2))),
        _reg("SDP.D_DP_BS_ALU_CFG", BS_ALU_SRC=int(alu_mem), BS_ALU_SHIFT_VALUE=int(rng.integers(0, 5))),
        _reg("SDP.D_DP_BS_ALU_SRC_VALUE", BS_ALU_OPERAND=int(rng.integers(-32768, 32768)) & 0xFFFF),
        _reg("SDP.D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=int(rng.integers(0, 25))),
        _reg("SDP.D_DP_BS_MUL_SRC_VALUE", BS_MUL_OPERAND=int(rng.integers(-32768, 32768)) & 0xFFFF),
    ]
    if alu_mem:
        per_element = bool(rng.integers(0, 2))
        addr = PRI_BASE + 0x20000
        if per_element:
            arr = rng.integers(-32768, 32768, size=(c, h, w)).astype(np.int16)
            # operand lanes follow PROC: 2 bytes x proc_lanes per "atom"
            meta = {"layout": "nvdla.feature", "params": {"atom_bytes": 2 * proc_lanes}, "shape": [c, h, w]}
            ls, ss = w * 2 * proc_lanes, w * h * 2 * proc_lanes
        else:
            arr = rng.integers(-32768, 32768, size=(cpad,)).astype(np.int16)
            meta = {"layout": "raw", "params": {}, "shape": [cpad]}
            ls = ss = 0
        d.inputs.append(({"name": "bs_alu", **meta, "dtype": "int16", "address": Hex(addr), "port": "pri_mem"}, arr))
        d.registers += [
            _reg("SDP_RDMA.D_BRDMA_CFG", BRDMA_DISABLE=0, BRDMA_DATA_USE=1, BRDMA_DATA_SIZE=1,
                 BRDMA_DATA_MODE=int(per_element), BRDMA_RAM_TYPE=1),
            _reg("SDP_RDMA.D_BS_BASE_ADDR_LOW", BS_BASE_ADDR_LOW=addr), _reg("SDP_RDMA.D_BS_BASE_ADDR_HIGH", BS_BASE_ADDR_HIGH=0),
            _reg("SDP_RDMA.D_BS_LINE_STRIDE", BS_LINE_STRIDE=ls), _reg("SDP_RDMA.D_BS_SURFACE_STRIDE", BS_SURFACE_STRIDE=ss),
        ]
    else:
        _rdma_off(d, "BRDMA")
    _bypass(d, "BN", "EW")
    _rdma_off(d, "NRDMA", "ERDMA")
    d.convertors["sdp_out"] = {"offset": int(rng.integers(-4096, 4097)),
                               "scale": int(rng.integers(1, 1025)) * (1 if rng.integers(0, 2) else -1), "shift": 0}
    d.tune = ("sdp_out", range(0, 48))  # the output shift giving the most distinct values
    d.description = (f"SDP INT16 mode {mode} (IN/PROC/OUT = {'/'.join('INT16' if prec[k] else 'INT8' for k in prec)}), "
                     f"BS ALU operand from {'memory' if alu_mem else 'register'}, "
                     f"{'PReLU' if prelu else 'MUL'}, cube {c}x{h}x{w}")
    return _byte_fields(d)


def gen_pdp_int16(rng: np.random.Generator, index: int) -> Draft:
    """PDP INT16 pooling (nv_full): AVERAGE / MAX / MIN, padding on every side with the
    pre-multiplied padding values P1..P7 (19-bit fields), reciprocals RW/RH."""
    d = Draft(unit="PDP", profile="nv_full", statistics=False, launch=("PDP_RDMA", "PDP"))
    atom = NV_FULL_ATOM
    method = (0, 1, 2)[index % 3]
    kw, kh = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    sw, sh = int(rng.integers(1, kw + 1)), int(rng.integers(1, kh + 1))
    pl, pr = int(rng.integers(0, min(kw, 3))), int(rng.integers(0, min(kw, 3)))
    pt, pb = int(rng.integers(0, min(kh, 3))), int(rng.integers(0, min(kh, 3)))
    w, h, c = int(rng.integers(kw, 9)), int(rng.integers(kh, 7)), int(rng.integers(1, 40))
    ow, oh = (w + pl + pr - kw) // sw + 1, (h + pt + pb - kh) // sh + 1
    if index % 4 == 0:
        x = rng.choice(_I16_EDGES, size=(c, h, w)).astype(np.int16)
    else:
        x = rng.integers(-32768, 32768, size=(c, h, w)).astype(np.int16)
    src, dst = PRI_BASE, PRI_BASE + 0x10000
    _feature_io(d, "src", x, src)
    _feature_io(d, "dst", np.zeros((c, oh, ow), dtype=np.int16), dst, output=True)
    pv = int(rng.integers(-32768, 32768))
    pads = [int(np.clip(n * pv, -(1 << 18), (1 << 18) - 1)) & 0x7FFFF for n in range(1, 8)]
    rw = int(round(65536 / kw)) if rng.integers(0, 4) else int(rng.integers(0, 1 << 17))
    rh = int(round(65536 / kh)) if rng.integers(0, 4) else int(rng.integers(0, 1 << 17))
    for blk in ("PDP_RDMA", "PDP"):
        d.registers += [_reg(f"{blk}.D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=w - 1),
                        _reg(f"{blk}.D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=h - 1),
                        _reg(f"{blk}.D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=c - 1),
                        _reg(f"{blk}.D_DATA_FORMAT", INPUT_DATA=1),
                        _reg(f"{blk}.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src),
                        _reg(f"{blk}.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
                        _reg(f"{blk}.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=w * atom),
                        _reg(f"{blk}.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=w * h * atom)]
    d.registers += [
        _reg("PDP_RDMA.D_FLYING_MODE", FLYING_MODE=1), _reg("PDP_RDMA.D_SRC_RAM_CFG", SRC_RAM_TYPE=1),
        _reg("PDP_RDMA.D_OPERATION_MODE_CFG", SPLIT_NUM=0),
        _reg("PDP_RDMA.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_WIDTH=sw - 1),
        _reg("PDP_RDMA.D_POOLING_PADDING_CFG", PAD_WIDTH=pl),
        _reg("PDP_RDMA.D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=w - 1, PARTIAL_WIDTH_IN_LAST=0, PARTIAL_WIDTH_IN_MID=0),
        _reg("PDP.D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow - 1), _reg("PDP.D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=oh - 1),
        _reg("PDP.D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=c - 1),
        _reg("PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1, SPLIT_NUM=0),
        _reg("PDP.D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=w - 1, PARTIAL_WIDTH_IN_LAST=0, PARTIAL_WIDTH_IN_MID=0),
        _reg("PDP.D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=ow - 1, PARTIAL_WIDTH_OUT_LAST=0, PARTIAL_WIDTH_OUT_MID=0),
        _reg("PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1, KERNEL_STRIDE_WIDTH=sw - 1,
             KERNEL_STRIDE_HEIGHT=sh - 1),
        _reg("PDP.D_RECIP_KERNEL_WIDTH", RECIP_KERNEL_WIDTH=rw), _reg("PDP.D_RECIP_KERNEL_HEIGHT", RECIP_KERNEL_HEIGHT=rh),
        _reg("PDP.D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_TOP=pt, PAD_RIGHT=pr, PAD_BOTTOM=pb),
        *[_reg(f"PDP.D_POOLING_PADDING_VALUE_{n}_CFG", **{f"PAD_VALUE_{n}X": pads[n - 1]}) for n in range(1, 8)],
        _reg("PDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), _reg("PDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        _reg("PDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=ow * atom), _reg("PDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=ow * oh * atom),
        _reg("PDP.D_DST_RAM_CFG", DST_RAM_TYPE=1),
    ]
    d.description = (f"PDP INT16 {('average', 'max', 'min')[method]} {kw}x{kh} stride {sw}x{sh}, padding "
                     f"l/t/r/b {pl}/{pt}/{pr}/{pb} value {pv}, recip {rw}/{rh}, cube {c}x{h}x{w}")
    return _byte_fields(d)


def gen_cdp_int16(rng: np.random.Generator, index: int) -> Draft:
    """CDP LRN INT16 (nv_full): tables aimed at the layer's square sums (up to ~2^36)."""
    d = Draft(unit="CDP", profile="nv_full", statistics=True)
    atom = NV_FULL_ATOM
    w, h, c = int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 40))
    if index % 4 == 0:
        x = rng.choice(_I16_EDGES, size=(c, h, w)).astype(np.int16)
    else:
        x = rng.integers(-32768, 32768, size=(c, h, w)).astype(np.int16)
    src, dst = PRI_BASE, PRI_BASE + 0x10000
    line, surf = w * atom, w * h * atom
    _feature_io(d, "src", x, src)
    _feature_io(d, "dst", np.zeros((c, h, w), dtype=np.int16), dst, output=True)
    nl = int(rng.integers(0, 4))
    sqsum_bypass = int(index % 5 == 4)
    mul_bypass = int(rng.integers(0, 2))
    d.registers += [
        _reg("CDP_RDMA.D_DATA_CUBE_WIDTH", WIDTH=w - 1), _reg("CDP_RDMA.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1),
        _reg("CDP_RDMA.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1),
        _reg("CDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src), _reg("CDP_RDMA.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
        _reg("CDP_RDMA.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line), _reg("CDP_RDMA.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
        _reg("CDP_RDMA.D_DATA_FORMAT", INPUT_DATA=1),
        _reg("CDP.D_DATA_FORMAT", INPUT_DATA_TYPE=1),
        _reg("CDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), _reg("CDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        _reg("CDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=line), _reg("CDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf),
        _reg("CDP.D_LRN_CFG", NORMALZ_LEN=nl),
        _reg("CDP.D_FUNC_BYPASS", SQSUM_BYPASS=sqsum_bypass, MUL_BYPASS=mul_bypass),
        _reg("CDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=1), _reg("CDP.D_DST_DMA_CFG", DST_RAM_TYPE=1),
    ]
    din_scale, din_shift = int(rng.integers(1, 5)), int(rng.integers(0, 4))
    d.convertors["cdp_in"] = {"offset": int(rng.integers(-512, 513)), "scale": din_scale, "shift": din_shift}
    d.convertors["cdp_out"] = {"offset": int(rng.integers(-(1 << 24), (1 << 24) + 1)),
                               "scale": int(rng.integers(1, 256)), "shift": int(rng.integers(8, 30))}
    taps = 2 * (nl + 1) + 1
    cin = d.convertors["cdp_in"]
    x17 = (x.astype(np.int64) - cin["offset"]) * din_scale
    x17 = np.clip(np.where(din_shift > 0, (x17 + (1 << max(din_shift - 1, 0))) >> din_shift, x17), -(1 << 16), (1 << 16) - 1)
    if sqsum_bypass:
        ss = x17
    else:
        sq = np.pad(x17 * x17, ((nl + 1, nl + 1), (0, 0), (0, 0)))
        ss = sum((sq[k : k + c] for k in range(taps)), np.zeros_like(x17))
    lo_v, top = (int(v) for v in np.percentile(ss, [5, 95]))
    top = max(top, lo_v + 64)
    prio = PRIORITIES[index % 8]
    le_fn = ("exponent", "linear")[(index // 8) % 2]
    cfg = _lut_config(rng, lo_v, top, le_fn, prio, max_select=40, cdp=True)
    for k in ("le_index_select", "lo_index_select"):  # INT16: 7-bit signed selects
        cfg[k] = int(np.clip(cfg[k], -64, 63))
    if le_fn == "exponent":  # the LE table spans up to 2^36 at INT16
        cfg["le_end"] = int(min(cfg["le_start"] + (1 << min(max(int(np.log2(max(top - cfg["le_start"], 2))) - 1,
                                                                cfg["le_index_offset"] + 1), 36)), (1 << 37) - 1))
    d.lut = {"unit": "CDP", "config": cfg}
    d.lut_tables = _lut_tables(rng)
    d.tune = ("cdp_out", range(0, 40))
    d.description = (f"CDP LRN INT16 window {taps}{' (sqsum bypass)' if sqsum_bypass else ''}, LE {le_fn}, priorities "
                     f"{'/'.join(prio)}, cube {c}x{h}x{w}")
    return _byte_fields(d)


# ---- layout suites -------------------------------------------------------------------------------


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
        spec = _layout(f"nvdla.pixel.{fmt}")
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
        _layout(d.layout["name"]).pack(d.array, **d.layout["params"])
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
        _layout(d.layout["name"]).pack(d.array, **d.layout["params"])
    except ValueError:
        d.layout["params"]["layout"] = "compact"
        d.layout["params"]["address"] = 0
    d.description = f"{d.layout['name']} round trip, shape {d.layout['shape']} {dtype}"
    return d


def _layout(name: str):  # noqa: ANN202
    from .layouts import get_layout

    return get_layout(name)


SUITES: dict[str, Callable[[np.random.Generator, int], Draft]] = {
    "sdp_lut": gen_sdp_lut,
    "cdp_lut": gen_cdp_lut,
    "sdp_cvt": gen_sdp_cvt,
    "sdp_bsbn": gen_sdp_bsbn,
    "sdp_int16": gen_sdp_int16,
    "pdp_int16": gen_pdp_int16,
    "cdp_int16": gen_cdp_int16,
    "layout_nvdla": gen_layout_nvdla,
    "layout_dmp": gen_layout_dmp,
    "layout_sophgo": gen_layout_sophgo,
}


# ---- building and writing -------------------------------------------------------------------------


def _provenance(suite: str, seed: int, index: int, semantics: str) -> dict[str, Any]:
    return {"generator": "nvdla-hil vectors gen", "suite": suite, "seed": seed, "index": index,
            "model_version": model_version(), "semantics": semantics}


def _manifest_layer(name: str, d: Draft, prov: dict[str, Any], golden: dict[str, Any] | None) -> tuple[dict, dict]:
    blobs: dict[str, bytes] = {}
    man: dict[str, Any] = {"format": FORMAT, "name": name, "kind": "layer", "description": d.description,
                           "unit": d.unit, "profile": d.profile}
    if d.features:
        man["features"] = list(d.features)
    if d.launch is not None:
        man["launch"] = list(d.launch)
    man["registers"] = [dict(r) for r in d.registers]
    if d.lut is not None:
        lut = {"unit": d.lut["unit"], "config": dict(d.lut["config"])}
        for t, arr in d.lut_tables.items():
            blobs[f"lut_{t}.bin"] = arr.astype("<i2").tobytes()
            lut[t] = f"lut_{t}.bin"
        man["lut"] = lut
    if d.convertors:
        man["convertors"] = {k: dict(v) for k, v in d.convertors.items()}
    man["inputs"] = []
    for meta, arr in d.inputs:
        fname = f"{meta['name']}.bin"
        blobs[fname] = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        man["inputs"].append({**meta, "data": fname})
    man["outputs"] = []
    for meta in d.outputs:
        o = dict(meta)
        if golden is None:
            o["crc"] = 0  # placeholder while the golden is computed
        else:
            fname = f"{meta['name']}.expected.bin"
            blobs[fname] = golden["outputs"][meta["name"]].tobytes()
            o["expected"] = fname
        man["outputs"].append(o)
    if golden is None and d.statistics:
        man["statistics"] = {}  # placeholder: read the counters back while computing the golden
    elif golden is not None and golden.get("statistics") is not None:
        man["statistics"] = golden["statistics"]
    man["provenance"] = prov
    return man, blobs


def _manifest_layout(name: str, d: Draft, prov: dict[str, Any]) -> tuple[dict, dict]:
    assert d.layout is not None and d.array is not None
    packed = pack_surface(d.layout["name"], d.array, d.layout["params"])
    lay = {"name": d.layout["name"], "params": dict(d.layout["params"]), "dtype": d.layout["dtype"],
           "shape": list(d.layout["shape"]), "data": "array.bin", "packed": "packed.bin"}
    man = {"format": FORMAT, "name": name, "kind": "layout", "description": d.description, "family": d.family,
           "layout": lay, "provenance": prov}
    arr = np.ascontiguousarray(d.array)
    return man, {"array.bin": arr.astype(arr.dtype.newbyteorder("<")).tobytes(), "packed.bin": packed.tobytes()}


def generate_case(suite: str, seed: int, index: int, out: str | Path, *, semantics: str = "rtl") -> Path:
    """Generate case ``index`` of ``suite`` with ``seed`` into ``out/<case name>/``; returns the folder."""
    try:
        gen = SUITES[suite]
    except KeyError:
        raise ValueError(f"unknown suite {suite!r}; suites: {', '.join(SUITES)}") from None
    d = gen(rng_for(seed, index), index)
    name = case_name(suite, seed, index)
    prov = _provenance(suite, seed, index, semantics)
    final = Path(out) / name
    with tempfile.TemporaryDirectory(prefix="nvdla-vec-") as tmp:
        work = Path(tmp) / name
        if d.layout is not None:
            man, blobs = _manifest_layout(name, d, prov)
        else:
            man, blobs = _manifest_layer(name, d, prov, None)
            golden = _golden_for(d, name, prov, work, semantics)
            man, blobs = _manifest_layer(name, d, prov, golden)
        write_case(work, man, blobs)
        load_case(work)  # the final case must pass the loader
        if final.exists():
            shutil.rmtree(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(work, final)
    return final


def _golden_for(d: Draft, name: str, prov: dict[str, Any], work: Path, semantics: str) -> dict[str, Any]:
    """Run the draft on the model; with ``d.tune`` try every shift and keep the most informative."""
    shifts = list(d.tune[1]) if d.tune else [None]
    best: tuple[int, int, dict[str, Any]] | None = None
    for sh in shifts:
        if sh is not None:
            d.convertors[d.tune[0]]["shift"] = sh  # type: ignore[index]  # tune names a convertor dict
        man, blobs = _manifest_layer(name, d, prov, None)
        write_case(work, man, blobs)
        case = load_case(work)
        golden = _golden(case, semantics)
        shutil.rmtree(work)
        s0 = case.outputs[0]
        vals = unpack_surface(s0.layout, golden["outputs"][s0.name], s0.shape, s0.dtype, s0.params)
        score = len(np.unique(vals))
        if best is None or score > best[0]:
            best = (score, -1 if sh is None else sh, golden)
    assert best is not None
    if d.tune:
        d.convertors[d.tune[0]]["shift"] = best[1]
    return best[2]


def _golden(case: Case, semantics: str) -> dict[str, Any]:
    from .targets.model import ModelTarget

    with ModelTarget(case.profile or "nv_small", semantics=semantics) as t:
        outputs, stats = execute_case(case, t)
    st = None
    if stats is not None:
        st = {k: int(v) for k, v in stats.counters().items()}
    return {"outputs": outputs, "statistics": st}


def generate_suite(suite: str, seed: int, count: int, out: str | Path, *, semantics: str = "rtl") -> list[Path]:
    return [generate_case(suite, seed, i, out, semantics=semantics) for i in range(count)]


def regenerate(manifest: str | Path, out: str | Path) -> Path:
    """Regenerate one case from its manifest's provenance (suite, seed, index, semantics)."""
    case = load_case(manifest)
    p = case.provenance
    missing = [k for k in ("suite", "seed", "index") if p.get(k) is None]
    if missing:
        raise VectorError(case.path, "provenance", f"cannot regenerate: missing {', '.join(missing)}")
    return generate_case(p["suite"], int(p["seed"]), int(p["index"]), out, semantics=p.get("semantics") or "rtl")



# ---- goldens from an oracle -----------------------------------------------------------------------


@dataclass
class Regolden:
    """What :func:`regolden` did to one case: the oracle's ``golden_source``, where the old golden
    (e.g. the reference model's) disagreed with the oracle, and the seconds the oracle took."""

    name: str
    path: Path
    golden_source: dict[str, Any] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""


def _oracle_statistics(case: Case, stats: Any, kind: str) -> dict[str, int] | None:
    """The oracle's counters for the counters the case checks; on the RTL, not the counters it
    counts in clock cycles rather than elements (``precision.RTL_INEXACT``, semantics doc 13)."""
    from ..drivers.precision import golden_counters

    if case.statistics is None or stats is None:
        return None
    return golden_counters(stats, kind, case.statistics)


class _HexLoader(yaml.SafeLoader):
    """A safe loader that keeps integers written in hexadecimal as :class:`Hex`, so a manifest
    read and written back keeps its bytes (addresses stay ``0x80000000``)."""


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    v = yaml.SafeLoader.construct_yaml_int(loader, node)
    return Hex(v) if str(node.value).lower().lstrip("+-").startswith("0x") else v


_HexLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def regolden(folder: str | Path, target: Any, out: str | Path | None = None) -> Regolden:
    """Run the layer case in ``folder`` on the open ``target`` (an oracle: NVDLA's RTL or C model)
    and rewrite its goldens (output images, statistics counters) with what the oracle computed,
    its ``golden_source`` derived from the target; registers, inputs and the rest of the case are
    kept byte for byte. A target's error leaves the case as it was (``error`` says why). The old
    goldens are compared with the oracle's first: every difference is listed (a model bug when the
    old goldens were the model's). Written in place unless ``out`` names another folder."""
    import time

    from ..drivers import yamlstrict
    from ..drivers.precision import Statistics, compare_statistics
    from .targets import layer_timeout
    from .vectors import _compare_surface, golden_source_of

    case = load_case(folder)
    res = Regolden(case.name, case.folder)
    if case.kind != "layer":
        res.error = "a layout case has no target run (its golden is the packed image)"
        return res
    gs = golden_source_of(target)
    res.golden_source = gs
    if gs["kind"] == "model":
        res.error = "the target is the reference model itself: not an oracle"
        return res
    t0 = time.monotonic()
    try:
        outputs, stats = execute_case(case, target, timeout=layer_timeout(target))
    except Exception as e:  # noqa: BLE001 - any target failure leaves the case alone, named
        res.error = f"{type(e).__name__}: {e}"
        res.seconds = time.monotonic() - t0
        return res
    res.seconds = time.monotonic() - t0
    from dataclasses import replace

    for s in case.outputs:  # bit for bit, whatever the case's own rule tolerates
        chk = _compare_surface(replace(s, rule="bitexact", rule_params={}), outputs[s.name])
        if not chk.passed:
            res.disagreements.append(f"{s.name}: {chk.message}")
    new_stats = _oracle_statistics(case, stats, gs["kind"])
    if new_stats is not None and case.statistics is not None and stats is not None:
        old = Statistics(block=stats.block, group=stats.group, **{k: case.statistics[k] for k in new_stats})
        cmp = compare_statistics(old, Statistics(block=stats.block, group=stats.group, **new_stats))
        for k, (was, got) in cmp.mismatched.items():
            res.disagreements.append(f"statistics.{k}: old golden {was}, oracle {got}")
    yamlstrict.load(case.path.read_text(encoding="utf-8"), str(case.path))  # strict (load_case passed it)
    man = yaml.load(case.path.read_text(encoding="utf-8"), Loader=_HexLoader)  # noqa: S506 - safe loader subclass
    blobs = {p.name: p.read_bytes() for p in case.folder.iterdir() if p.is_file() and p.name != "case.yaml"}
    for o in man["outputs"]:
        raw = np.ascontiguousarray(outputs[o["name"]]).tobytes()
        if "expected" in o:
            blobs[o["expected"]] = raw
        else:
            import zlib

            o["crc"] = Hex(zlib.crc32(raw) & 0xFFFFFFFF)
    if new_stats is not None:
        man["statistics"] = new_stats
    prov = dict(man.get("provenance") or {})
    if gs["kind"] == "cmod":
        prov["semantics"] = "cmod"  # the golden follows the C model's side of every [DIFF]
    elif gs["kind"] == "rtl":
        prov["semantics"] = "rtl"
    describe = getattr(target, "describe", None)
    who = describe() if describe else type(target).__name__
    note = f"golden: the outputs of {who} (nvdla-hil vectors regolden)"
    prov["note"] = "; ".join(x for x in (str(prov.get("note", "")).split("; golden:")[0], note) if x)
    man["provenance"] = prov
    dest = Path(out) / case.folder.name if out is not None else case.folder
    with tempfile.TemporaryDirectory(prefix="nvdla-regolden-") as tmp:
        work = Path(tmp) / case.folder.name
        write_case(work, man, blobs, dut=target)
        load_case(work)  # what we write must load
        dest.mkdir(parents=True, exist_ok=True)
        for p in work.iterdir():
            shutil.copyfile(p, dest / p.name)
    res.path = dest
    return res
