"""Bundled suites of SDP layers (``sdp_lut``, ``sdp_cvt``, ``sdp_bsbn``, ``sdp_int16``) and what the
suites of every LUT unit and every INT16 suite share (:func:`lut_config`, :func:`as_int16_case`).
Each generator draws one case from its stream: ``gen(rng, index) -> Draft``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...drivers.profiles import load_profile
from .format import Hex
from .layer import (
    PRI_BASE,
    Draft,
    bypass,
    feature_io,
    lut_tables,
    rdma_off,
    reg,
    sdp_cube_registers,
    sdp_operand_dma,
    to_field_units,
)

PRIORITIES = [(u, o, h) for u in ("LE", "LO") for o in ("LE", "LO") for h in ("LE", "LO")]
NV_FULL_ATOM = 32
I16_EDGES = np.array([-32768, -32767, -16384, -1, 0, 1, 16383, 32766, 32767], dtype=np.int16)


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
    sdp_cube_registers(d, w, h, c, src=src, dst=dst, line=line, surf=surf, out=1 if out_int16 else 0)



def lut_config(rng: np.random.Generator, lo_v: int, hi_v: int, le_function: str, prio: tuple[str, str, str], *,
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
    d.registers.append(reg("SDP.D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=1, BS_ALU_ALGO=0, BS_MUL_BYPASS=0,
                            BS_MUL_PRELU=0, BS_RELU_BYPASS=1))
    d.registers += [reg("SDP.D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=0),
                    reg("SDP.D_DP_BS_MUL_SRC_VALUE", BS_MUL_OPERAND=m)]
    bypass(d, "BN")
    d.registers += [reg("SDP.D_DP_EW_CFG", EW_BYPASS=0, EW_ALU_BYPASS=1, EW_ALU_ALGO=0, EW_MUL_BYPASS=1, EW_MUL_PRELU=0,
                         EW_LUT_BYPASS=0)]
    rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
    prio = PRIORITIES[index % 8]
    le_fn = ("exponent", "linear")[(index // 8) % 2] if index < 16 else ("exponent", "linear")[int(rng.integers(0, 2))]
    d.lut = {"unit": "SDP", "config": lut_config(rng, -128 * m, 127 * m, le_fn, prio)}
    d.lut_tables = lut_tables(rng)
    d.convertors["sdp_out"] = {"offset": int(rng.integers(-64, 65)), "scale": int(rng.integers(1, 64)),
                               "shift": int(rng.integers(6, 14))}
    d.tune = ("sdp_out", range(24))
    d.description = (f"SDP LUT: LE {le_fn}, priorities uflow/oflow/hybrid = {'/'.join(prio)}, BS MUL x{m}, "
                     f"cube {c}x{h}x{w} (CxHxW)")
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
    bypass(d, "BS", "BN", "EW")
    rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
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
            bypass(d, st)
            rdma_off(d, dma)
            continue
        alu_on, mul_on = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
        if not (alu_on or mul_on):
            alu_on = True
        src_mem = {"ALU": alu_on and bool(rng.integers(0, 2)), "MUL": mul_on and bool(rng.integers(0, 2))}
        prelu = int(mul_on and rng.integers(0, 4) == 0)
        d.registers.append(reg(f"SDP.D_DP_{st}_CFG", **{
            f"{st}_BYPASS": 0, f"{st}_ALU_BYPASS": int(not alu_on), f"{st}_ALU_ALGO": int(rng.integers(0, 3)),
            f"{st}_MUL_BYPASS": int(not mul_on), f"{st}_MUL_PRELU": prelu,
            f"{st}_RELU_BYPASS": int(rng.integers(0, 2))}))
        d.registers += [
            reg(f"SDP.D_DP_{st}_ALU_CFG", **{f"{st}_ALU_SRC": int(src_mem["ALU"]),
                                             f"{st}_ALU_SHIFT_VALUE": int(rng.integers(0, 8))}),
            reg(f"SDP.D_DP_{st}_ALU_SRC_VALUE", **{f"{st}_ALU_OPERAND": int(rng.integers(-2000, 2001)) & 0xFFFF}),
            reg(f"SDP.D_DP_{st}_MUL_CFG", **{f"{st}_MUL_SRC": int(src_mem["MUL"]),
                                             f"{st}_MUL_SHIFT_VALUE": int(rng.integers(0, 10))}),
            reg(f"SDP.D_DP_{st}_MUL_SRC_VALUE", **{f"{st}_MUL_OPERAND": int(rng.integers(-3000, 3001)) & 0xFFFF}),
        ]
        mem_kinds = [kk for kk in ("ALU", "MUL") if src_mem[kk]]
        if len(mem_kinds) != 1:  # register operands only (BOTH-from-memory interleaving not generated)
            if len(mem_kinds) == 2:
                d.registers[-4]["fields"][f"{st}_ALU_SRC"] = 0
                mem_kinds = ["MUL"]
            else:
                rdma_off(d, dma)
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
        sdp_operand_dma(d, dma, st, kind, addr, ls, ss, per_element=per_element)
    if not any(r["reg"] == "SDP.D_DP_BN_CFG" for r in d.registers):
        bypass(d, "BN")
    bypass(d, "EW")
    rdma_off(d, "ERDMA")
    d.convertors["sdp_out"] = {"offset": int(rng.integers(-50, 51)), "scale": int(rng.integers(1, 40)),
                               "shift": int(rng.integers(4, 16))}
    mem = [m["name"] for m, _ in d.inputs[1:]]
    d.description = f"SDP BS/BN with {'memory operands ' + ', '.join(mem) if mem else 'register operands'}, cube {c}x{h}x{w}"
    return d


def as_int16_case(d: Draft) -> Draft:
    """An nv_full draft ready to write: its byte addresses and strides in the v1 map's field units
    (bits [31:5], :func:`~.layer.to_field_units`), and the ``int16`` feature declared, so an INT16
    case never runs on an INT8-only profile."""
    d.features = tuple(sorted(set(d.features) | {"int16"}))
    return to_field_units(d)


def _int16_cube(rng: np.random.Generator, index: int, mode: str) -> tuple[int, int, int, np.ndarray]:
    """The cube (W, H, C) and input data of an ``sdp_int16`` case: channel counts that avoid the
    lanes the hardware reads or writes beyond the declared cube (16->8 reads int16 surfaces in
    pairs, 8->16 writes two int16 surfaces per int8 atom); every fourth case at the edges."""
    in16 = mode != "8to16"
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
        x = rng.choice(I16_EDGES if in16 else np.array([-128, -127, -1, 0, 1, 126, 127]), size=(c, h, w)).astype(in_dt)
    else:
        x = rng.integers(int(info.min), int(info.max) + 1, size=(c, h, w)).astype(in_dt)
    return w, h, c, x


def _int16_bs(d: Draft, rng: np.random.Generator, index: int, x: np.ndarray, proc_lanes: int) -> tuple[bool, int]:
    """BS of an ``sdp_int16`` case: ALU + MUL (+ PReLU / ReLU) with 16-bit operands, the ALU's
    from memory on every other case (per channel or per element, lanes following PROC: 2 bytes
    x ``proc_lanes`` an "atom"); returns (ALU operand from memory, PReLU)."""
    c, h, w = x.shape
    cpad = -(-c // proc_lanes) * proc_lanes
    alu_mem = index % 2 == 1
    prelu = int(rng.integers(0, 3) == 0)
    d.registers += [
        reg("SDP.D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=int(rng.integers(0, 3)), BS_MUL_BYPASS=0,
            BS_MUL_PRELU=prelu, BS_RELU_BYPASS=int(rng.integers(0, 2))),
        reg("SDP.D_DP_BS_ALU_CFG", BS_ALU_SRC=int(alu_mem), BS_ALU_SHIFT_VALUE=int(rng.integers(0, 5))),
        reg("SDP.D_DP_BS_ALU_SRC_VALUE", BS_ALU_OPERAND=int(rng.integers(-32768, 32768)) & 0xFFFF),
        reg("SDP.D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=int(rng.integers(0, 25))),
        reg("SDP.D_DP_BS_MUL_SRC_VALUE", BS_MUL_OPERAND=int(rng.integers(-32768, 32768)) & 0xFFFF),
    ]
    if not alu_mem:
        rdma_off(d, "BRDMA")
        return alu_mem, prelu
    per_element = bool(rng.integers(0, 2))
    addr = PRI_BASE + 0x20000
    if per_element:
        arr = rng.integers(-32768, 32768, size=(c, h, w)).astype(np.int16)
        meta = {"layout": "nvdla.feature", "params": {"atom_bytes": 2 * proc_lanes}, "shape": [c, h, w]}
        ls, ss = w * 2 * proc_lanes, w * h * 2 * proc_lanes
    else:
        arr = rng.integers(-32768, 32768, size=(cpad,)).astype(np.int16)
        meta = {"layout": "raw", "params": {}, "shape": [cpad]}
        ls = ss = 0
    d.inputs.append(({"name": "bs_alu", **meta, "dtype": "int16", "address": Hex(addr), "port": "pri_mem"}, arr))
    sdp_operand_dma(d, "BRDMA", "BS", "ALU", addr, ls, ss, per_element=per_element)
    return alu_mem, prelu


def gen_sdp_int16(rng: np.random.Generator, index: int) -> Draft:
    """SDP with INT16 on nv_full. Modes by ``index % 3``: 16->16 (IN = PROC = OUT = INT16),
    16->8 (IN INT16, PROC = OUT INT8, seed 000 "processing precision ... always INT8"),
    8->16 (IN = PROC INT8, OUT INT16); BS as :func:`_int16_bs`, BN and EW bypassed."""
    d = Draft(unit="SDP", profile="nv_full", statistics=True)
    atom = NV_FULL_ATOM
    mode = ("16to16", "16to8", "8to16")[index % 3]
    in16, out16 = mode != "8to16", mode != "16to8"
    proc16 = mode == "16to16"
    w, h, c, x = _int16_cube(rng, index, mode)
    in_lanes, out_lanes = atom // (2 if in16 else 1), atom // (2 if out16 else 1)
    line, surf = w * atom, w * h * atom
    src, dst = PRI_BASE, PRI_BASE + 0x10000
    assert -(-c // min(in_lanes, out_lanes)) * surf <= 0x10000
    feature_io(d, "src", x, src, atom=atom)
    feature_io(d, "dst", np.zeros((c, h, w), dtype=np.int16 if out16 else np.int8), dst, atom=atom, output=True)
    prec = {"IN_PRECISION": int(in16), "PROC_PRECISION": int(proc16), "OUT_PRECISION": int(out16)}
    sdp_cube_registers(d, w, h, c, src=src, dst=dst, line=line, surf=surf, proc=int(proc16), out=int(out16),
                       rdma_mode={"FLYING_MODE": 0, "WINOGRAD": 0, "BATCH_NUMBER": 0, **prec}, nan_to_zero=None)
    alu_mem, prelu = _int16_bs(d, rng, index, x, atom // (2 if proc16 else 1))
    bypass(d, "BN", "EW")
    rdma_off(d, "NRDMA", "ERDMA")
    d.convertors["sdp_out"] = {"offset": int(rng.integers(-4096, 4097)),
                               "scale": int(rng.integers(1, 1025)) * (1 if rng.integers(0, 2) else -1), "shift": 0}
    d.tune = ("sdp_out", range(48))  # the output shift giving the most distinct values
    d.description = (f"SDP INT16 mode {mode} (IN/PROC/OUT = {'/'.join('INT16' if prec[k] else 'INT8' for k in prec)}), "
                     f"BS ALU operand from {'memory' if alu_mem else 'register'}, "
                     f"{'PReLU' if prelu else 'MUL'}, cube {c}x{h}x{w}")
    return as_int16_case(d)
