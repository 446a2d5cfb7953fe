"""Fuzz unit ``sdp-fp16``: random SDP layers with FP16 processing on nv_full (seed 000 "FP16
Supporting", SDP conversion table): BS/BN (ALU max/min/sum, MUL/PReLU, ReLU), EW (MUL/PReLU
then ALU max/min/sum/EQL) with register or memory operands, FP16 -> FP16 / INT16 output,
NAN_TO_ZERO and the NaN/INF/saturation counters; also INT16 -> FP16 (integer pipeline, FP16
output). FP16 data mixes normal values over the whole exponent range with NaN (random
payloads), +/-INF, denormals, signed zeros and +/-65504 at a drawn rate. The model's semantics
are in :mod:`nvdla_hil.harness.refmodel.sdp_fp`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....drivers.profiles import HardwareProfile
from ...vectors.format import Hex
from ...vectors.layer import (
    MEM_PORT,
    RAM_TYPE,
    Draft,
    Geo,
    Mem,
    bypass,
    place_feature,
    rdma_off,
    reg,
    sdp_cube_registers,
    sdp_operand_dma,
)
from ...vectors.surface import packed_size
from ..blocks import geometry, pick_cvt
from ..draw import Sampler
from ..legal import ONOFF, PORT, EnumF, IntF, UnitSpec

_SPECIAL = np.array([0x7C00, 0xFC00, 0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00],
                    dtype=np.uint16)


def fp16_data(rng: np.random.Generator, shape: tuple[int, ...], *, special_pct: int, exp_lo: int, exp_hi: int) -> np.ndarray:
    """FP16 bit patterns (uint16): sign random, biased exponent uniform in [exp_lo, exp_hi]
    (0 = denormal), random mantissa; ``special_pct`` % replaced by NaN (random payload) or one
    of the edge patterns (+/-INF, +/-0, +/-65504, denormals, +/-1)."""
    n = int(np.prod(shape))
    s = rng.integers(0, 2, n, dtype=np.int64) << 15
    e = rng.integers(exp_lo, exp_hi + 1, n, dtype=np.int64) << 10
    m = rng.integers(0, 1024, n, dtype=np.int64)
    v = (s | e | m).astype(np.uint16)
    sp = rng.random(n) < special_pct / 100.0
    nan = (rng.integers(0, 2, n, dtype=np.int64) << 15) | 0x7C00 | rng.integers(1, 1024, n, dtype=np.int64)
    edge = rng.choice(_SPECIAL, n)
    v = np.where(sp, np.where(rng.random(n) < 0.4, nan.astype(np.uint16), edge), v)
    return v.astype(np.uint16).reshape(shape)


def _fp_op(s: Sampler) -> int:
    """One 16-bit FP16 register operand (sometimes special)."""
    return int(fp16_data(s.rng, (1,), special_pct=int(s["special_pct"]), exp_lo=int(s["op_exp_lo"]),
                         exp_hi=int(s["op_exp_hi"]))[0])


def _fp32_reg(s: Sampler) -> int:
    """A 32-bit EW register operand: an FP16 value widened to fp32 (exact), or at times a raw
    fp32 pattern (INF, NaN, denormal, any) - the cmod takes the register as an fp32 pattern."""
    kind = s.rng.integers(0, 10)
    if kind == 0:
        return int(s.rng.choice([0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x00000001, 0x80400000, 0x7F7FFFFF]))
    if kind == 1:
        return int(s.rng.integers(0, 1 << 32))
    h = np.array([_fp_op(s)], dtype=np.uint16).view(np.float16)
    return int(h.astype(np.float32).view(np.uint32)[0]) if not np.isnan(h[0]) else 0x7FC00000 | int(s.rng.integers(1, 1024))


def _operand_mem(d: Draft, s: Sampler, mem: Mem, atom: int, geo, name: str, arr_fn) -> tuple[int, int, int, bool, int]:
    """A 2-byte FP16 memory operand per channel (raw vector of Cpad) or per element (feature cube)."""
    per_element = s.draw("op_mode") == "element"
    port = s.draw("op_port")
    lanes = atom // 2
    if per_element:
        arr = arr_fn((geo.c, geo.h, geo.w))
        params = {"atom_bytes": atom}
        size = packed_size("nvdla.feature", arr.shape, np.dtype(np.float16), params)
        meta = {"layout": "nvdla.feature", "params": params, "shape": [geo.c, geo.h, geo.w]}
        ls, ss = geo.w * atom, geo.w * geo.h * atom
    else:
        cpad = -(-geo.c // lanes) * lanes
        arr = arr_fn((cpad,))
        size = arr.nbytes
        meta = {"layout": "raw", "params": {}, "shape": [cpad]}
        ls = ss = atom  # packed 1x1xC cube (cmod asserts SURFACE_STRIDE == atom)
    addr = mem.alloc(MEM_PORT[port], size)
    d.inputs.append(({"name": name, **meta, "dtype": "float16", "address": Hex(addr), "port": MEM_PORT[port]},
                     arr.view(np.float16)))
    return addr, ls, ss, per_element, RAM_TYPE[port]


def _s32(bits: int) -> int:
    bits &= 0xFFFFFFFF
    return bits - (1 << 32) if bits >> 31 else bits


def _s16(bits: int) -> int:
    bits &= 0xFFFF
    return bits - (1 << 16) if bits >> 15 else bits


def _f32_bits(v: float) -> int:
    return int(np.array([np.clip(v, -3.0e38, 3.0e38)], dtype=np.float32).view(np.uint32)[0])


def _f16_bits(v: float) -> int:
    return int(np.array([np.clip(v, -65504, 65504)], dtype=np.float16).view(np.uint16)[0])


def _fp_lut(s: Sampler, x: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """LUT registers (START/END as fp32 patterns, slope scales as FP16) and FP16 tables placed
    over the finite range of ``x`` (FP16 patterns): LO linear, LE exponent or linear; the
    tables smooth, random or with NaN/INF/denormal entries."""
    rng = s.rng
    v = x.view(np.uint16).view(np.float16).astype(np.float64).ravel()
    v = v[np.isfinite(v)]
    lo_v, hi_v = (float(q) for q in np.percentile(v, [2, 98])) if v.size else (-1.0, 1.0)
    span = max(hi_v - lo_v, 1e-3)
    sel = lambda entries: int(np.clip(round(math.log2(span * rng.uniform(0.05, 1.2) / entries)), -128, 127))
    lo_sel = sel(256)
    lo_start = lo_v + rng.uniform(-0.3, 0.8) * span
    cfg: dict[str, Any] = {"le_function": s["le_function"], "lo_index_select": lo_sel}
    le_start = lo_v + rng.uniform(-0.3, 0.8) * span
    if s["le_function"] == "linear":
        le_sel = sel(64)
        cfg.update(le_index_select=le_sel, le_index_offset=0)
        le_end = le_start + 64 * 2.0 ** le_sel
    else:
        eo = int(np.clip(round(math.log2(span)) - int(rng.integers(2, 40)), -128, 127))
        cfg.update(le_index_offset=eo, le_index_select=0)
        le_end = le_start + 2.0 ** min(eo + 64, 127)
    lo_end = lo_start + 256 * 2.0 ** lo_sel
    for k, val in (("lo_start", lo_start), ("le_start", le_start), ("lo_end", lo_end), ("le_end", le_end)):
        cfg[k] = _s32(_f32_bits(val))
    for t in ("le", "lo"):
        for k in ("uflow", "oflow"):
            cfg[f"{t}_slope_{k}_scale"] = _s16(_f16_bits(float(rng.standard_normal() * 2.0 ** rng.integers(-8, 6))))
            cfg[f"{t}_slope_{k}_shift"] = int(rng.integers(-16, 16))
    for k in ("uflow_priority", "oflow_priority", "hybrid_priority"):
        cfg[k] = ("LE", "LO")[int(rng.integers(0, 2))]
    tables = {}
    for t, n in (("le", 65), ("lo", 257)):
        kind = s["lut_table"]
        if kind == "smooth":
            a = np.cumsum(rng.standard_normal(n)) * 2.0 ** rng.integers(-6, 8)
            bits = np.clip(a, -65504, 65504).astype(np.float16).view(np.uint16)
        elif kind == "random":
            bits = fp16_data(rng, (n,), special_pct=0, exp_lo=0, exp_hi=30)
        else:
            bits = fp16_data(rng, (n,), special_pct=30, exp_lo=0, exp_hi=30)
        tables[t] = bits.astype(np.uint16).view(np.int16)
    return cfg, tables


def _bs_bn_stages(d: Draft, s: Sampler, mem: Mem, atom: int, geo: Geo, opdata: Callable[[tuple[int, ...]], np.ndarray],
                  desc: list[str]) -> None:  # fmt: skip
    """BS and BN of an FP16 layer: each on or bypassed, ALU / MUL / ReLU with FP16 register
    operands or one from memory (``opdata``: its values)."""
    for st, dma in (("BS", "BRDMA"), ("BN", "NRDMA")):
        if not s[f"{st.lower()}_on"]:
            bypass(d, st)
            rdma_off(d, dma)
            continue
        alu, mul, relu = s.draw("alu"), s.draw("mul"), int(s.draw("relu"))
        srcs = {"ALU": s.draw("alu_src") if alu != "off" else "reg", "MUL": s.draw("mul_src") if mul != "off" else "reg"}
        if srcs["ALU"] == "mem" and srcs["MUL"] == "mem":
            srcs["MUL"] = "reg"
        d.registers += [
            reg(f"SDP.D_DP_{st}_CFG", **{f"{st}_BYPASS": 0, f"{st}_ALU_BYPASS": int(alu == "off"),
                                         f"{st}_ALU_ALGO": {"max": 0, "min": 1, "sum": 2}.get(alu, 0),
                                         f"{st}_MUL_BYPASS": int(mul == "off"), f"{st}_MUL_PRELU": int(mul == "prelu"),
                                         f"{st}_RELU_BYPASS": int(not relu)}),
            reg(f"SDP.D_DP_{st}_ALU_CFG", **{f"{st}_ALU_SRC": int(srcs["ALU"] == "mem"),
                                             f"{st}_ALU_SHIFT_VALUE": int(s.rng.integers(0, 64))}),
            reg(f"SDP.D_DP_{st}_ALU_SRC_VALUE", **{f"{st}_ALU_OPERAND": _fp_op(s)}),
            reg(f"SDP.D_DP_{st}_MUL_CFG", **{f"{st}_MUL_SRC": int(srcs["MUL"] == "mem"),
                                             f"{st}_MUL_SHIFT_VALUE": int(s.rng.integers(0, 64))}),
            reg(f"SDP.D_DP_{st}_MUL_SRC_VALUE", **{f"{st}_MUL_OPERAND": _fp_op(s)}),
        ]
        memk = [k for k in ("ALU", "MUL") if srcs[k] == "mem"]
        desc.append(f"{st} alu {alu} mul {mul}{' relu' if relu else ''} ({'/'.join(memk) or 'reg'})")
        if memk:
            addr, ls, ss, pe, rt = _operand_mem(d, s, mem, atom, geo, f"{st.lower()}_{memk[0].lower()}", opdata)
            sdp_operand_dma(d, dma, st, memk[0], addr, ls, ss, per_element=pe, ram=rt)
        else:
            rdma_off(d, dma)


def _ew_stage(d: Draft, s: Sampler, mem: Mem, atom: int, geo: Geo, x: np.ndarray,
              opdata: Callable[[tuple[int, ...]], np.ndarray], desc: list[str]) -> None:  # fmt: skip
    """EW of an FP16 layer: ALU / MUL with FP32 register operands or one from memory (its
    operand convertor random), and the LUT aimed at the input ``x``; else bypassed."""
    if s["ew_on"]:
        alu, mul = s["ew_alu"], s["ew_mul"]
        srcs = {"ALU": s["ew_alu_src"] if alu != "off" else "reg", "MUL": s["ew_mul_src"] if mul != "off" else "reg"}
        if srcs["ALU"] == "mem" and srcs["MUL"] == "mem":
            srcs["MUL"] = "reg"
        ew_cfg = reg("SDP.D_DP_EW_CFG", EW_BYPASS=0, EW_ALU_BYPASS=int(alu == "off"),
                      EW_ALU_ALGO={"max": 0, "min": 1, "sum": 2, "eql": 3}.get(alu, 0),
                      EW_MUL_BYPASS=int(mul == "off"), EW_MUL_PRELU=int(mul == "prelu"), EW_LUT_BYPASS=1)
        d.registers += [
            ew_cfg,
            reg("SDP.D_DP_EW_ALU_CFG", EW_ALU_SRC=int(srcs["ALU"] == "mem"), EW_ALU_CVT_BYPASS=int(s.rng.integers(0, 2))),
            reg("SDP.D_DP_EW_ALU_SRC_VALUE", EW_ALU_OPERAND=_fp32_reg(s)),
            reg("SDP.D_DP_EW_MUL_CFG", EW_MUL_SRC=int(srcs["MUL"] == "mem"), EW_MUL_CVT_BYPASS=int(s.rng.integers(0, 2))),
            reg("SDP.D_DP_EW_MUL_SRC_VALUE", EW_MUL_OPERAND=_fp32_reg(s)),
            reg("SDP.D_DP_EW_TRUNCATE_VALUE", EW_TRUNCATE=int(s.rng.integers(0, 64))),
        ]
        memk = [k for k in ("ALU", "MUL") if srcs[k] == "mem"]
        if memk:
            addr, ls, ss, pe, rt = _operand_mem(d, s, mem, atom, geo, f"ew_{memk[0].lower()}", opdata)
            sdp_operand_dma(d, "ERDMA", "EW", memk[0], addr, ls, ss, per_element=pe, ram=rt)
            d.convertors[f"sdp_ew_{memk[0].lower()}"] = {"offset": int(s.rng.integers(-100, 101)),
                                                         "scale": int(s.rng.integers(-300, 301)),
                                                         "shift": int(s.rng.integers(0, 13))}
        else:
            rdma_off(d, "ERDMA")
        desc.append(f"EW mul {mul} alu {alu} ({'/'.join(memk) or 'reg'})")
        if s["lut"] and alu != "eql":
            cfg, tables = _fp_lut(s, x)
            d.lut = {"unit": "SDP", "config": cfg}
            d.lut_tables = tables
            ew_cfg["fields"]["EW_LUT_BYPASS"] = 0
            desc.append(f"LUT {cfg['le_function']} ({s['lut_table']} tables)")
    else:
        bypass(d, "EW")
        rdma_off(d, "ERDMA")


def gen_sdp_fp16(s: Sampler, prof: HardwareProfile, capture: Any) -> Draft:
    """SDP with FP16 processing (FP16 -> FP16 / INT16, or INT16 -> FP16 through the output
    convertor): FP16 data with specials, BS / BN (:func:`_bs_bn_stages`), EW and the LUT
    (:func:`_ew_stage`), NAN_TO_ZERO and the NaN / Inf counters."""
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = Mem.for_case(s)
    atom = prof.atom_bytes
    geo = geometry(s, atom)
    if geo.w == 1 and geo.h == 1:  # 1x1xC: packed surfaces (the cmod asserts SURFACE_STRIDE == atom)
        geo.line = geo.surf = atom
    mode = s["mode"]
    in_fp = mode != "int16_to_fp16"
    out_code = {"fp16_to_fp16": 2, "fp16_to_int16": 1, "int16_to_fp16": 2}[mode]
    data = lambda shape: fp16_data(s.rng, shape, special_pct=int(s["special_pct"]), exp_lo=int(s["exp_lo"]),
                                   exp_hi=int(s["exp_hi"]))
    if in_fp:
        x = data((geo.c, geo.h, geo.w)).view(np.float16)
    else:
        x = s.rng.integers(-32768, 32768, size=(geo.c, geo.h, geo.w)).astype(np.int16)
    src = place_feature(d, mem, "src", x, s["src_port"], atom, geo, dtype=str(x.dtype))
    dst = place_feature(d, mem, "dst", (geo.c, geo.h, geo.w), s["dst_port"], atom, geo, output=True,
                        dtype="float16" if out_code == 2 else "int16")
    prec = 2 if in_fp else 1
    n2z = int(s["nan_to_zero"])
    sdp_cube_registers(d, geo.w, geo.h, geo.c, src=src, dst=dst, line=geo.line, surf=geo.surf, proc=prec, out=out_code,
                       nan_to_zero=n2z, src_ram=RAM_TYPE[s["src_port"]], dst_ram=RAM_TYPE[s["dst_port"]])
    d.registers += [
        reg("SDP.D_PERF_ENABLE", PERF_DMA_EN=0, PERF_LUT_EN=1, PERF_SAT_EN=1, PERF_NAN_INF_COUNT_EN=int(s["nan_count_en"])),
        reg("SDP_RDMA.D_PERF_ENABLE", PERF_DMA_EN=0, PERF_NAN_INF_COUNT_EN=int(s["nan_count_en"])),
    ]
    desc: list[str] = []
    if not in_fp:
        bypass(d, "BS", "BN", "EW")
        rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
        d.convertors["sdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
        ev = capture(d)
        d.convertors["sdp_out"] = pick_cvt(s, ev["sdp_out"][0]["x"], mode=s["cvt"], shift=s["cvt_shift"], out_max=1 << 16)
        c = d.convertors["sdp_out"]
        d.description = (f"fuzz sdp-fp16: INT16 -> FP16, offset/scale/shift {c['offset']}/{c['scale']}/{c['shift']}, "
                         f"cube {geo.c}x{geo.h}x{geo.w}")
        return d
    opdata = lambda shape: fp16_data(s.rng, shape, special_pct=int(s["special_pct"]), exp_lo=int(s["op_exp_lo"]),
                                     exp_hi=int(s["op_exp_hi"]))
    _bs_bn_stages(d, s, mem, atom, geo, opdata, desc)
    _ew_stage(d, s, mem, atom, geo, x, opdata, desc)
    # the output convertor is not used with FP16 processing: random values prove it
    if s["ew_on"] and s["ew_alu"] == "eql":  # EQL: the cmod asserts offset 0, scale 1, shift 0
        d.convertors["sdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
    else:
        d.convertors["sdp_out"] = {"offset": int(s.rng.integers(-1000, 1001)), "scale": int(s.rng.integers(-500, 501)),
                                   "shift": int(s.rng.integers(0, 20))}
    d.description = (f"fuzz sdp-fp16: {mode}{' nan_to_zero' if n2z else ''}, {'; '.join(desc) or 'all bypassed'}, "
                     f"cube {geo.c}x{geo.h}x{geo.w}")
    return d


SDP_FP16_SCHEMA: dict[str, Any] = {
    "shape": EnumF(("cube", "1x1xC", "single_line")), "width": IntF(1, 8192, 1), "height": IntF(1, 8192, 1),
    "channels": IntF(1, 8192, 1), "gaps": ONOFF, "src_port": PORT, "dst_port": PORT, "op_port": PORT,
    "mode": EnumF(("fp16_to_fp16", "fp16_to_int16", "int16_to_fp16"),
                  needs={"fp16_to_int16": "int16", "int16_to_fp16": "int16"}),
    "special_pct": IntF(0, 100, 0), "exp_lo": IntF(0, 31, 0), "exp_hi": IntF(0, 31, 30),
    "op_exp_lo": IntF(0, 31, 0), "op_exp_hi": IntF(0, 31, 30), "nan_to_zero": ONOFF, "nan_count_en": EnumF((0, 1), 1),
    "bs_on": EnumF((0, 1), 0, needs={1: "sdp_bs"}), "bn_on": EnumF((0, 1), 0, needs={1: "sdp_bn"}),
    "ew_on": EnumF((0, 1), 0, needs={1: "sdp_ew"}),
    "alu": EnumF(("off", "max", "min", "sum")), "mul": EnumF(("off", "mul", "prelu")), "relu": ONOFF,
    "alu_src": EnumF(("reg", "mem")), "mul_src": EnumF(("reg", "mem")), "op_mode": EnumF(("channel", "element")),
    "ew_alu": EnumF(("off", "max", "min", "sum", "eql")), "ew_mul": EnumF(("off", "mul", "prelu")),
    "ew_alu_src": EnumF(("reg", "mem")), "ew_mul_src": EnumF(("reg", "mem")),
    "cvt": EnumF(("fit", "saturate", "random")), "cvt_shift": IntF(0, 63, 0),
    "lut": EnumF((0, 1), 0, needs={1: "sdp_lut"}), "le_function": EnumF(("exponent", "linear")),
    "lut_table": EnumF(("smooth", "random", "special")),
}
SDP_FP16 = UnitSpec("sdp-fp16", SDP_FP16_SCHEMA, ("fp16",),
                    ("sdp.bs", "sdp.bn", "sdp.ew", "sdp.lut", "sdp.out", "sdp.cube", "sdp.ports", "sdp.prec", "sdp.fp16"),
                    gen_sdp_fp16)
