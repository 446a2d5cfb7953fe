"""Fuzz units of SDP memory to memory (INT8): ``sdp-lut`` (the EW LUT behind BS MUL),
``sdp-bsbn`` (BS / BN ALU, MUL, PReLU, ReLU with register or memory operands), ``sdp-ew`` (EW ALU
/ MUL with the operand convertor, optionally the LUT) and ``sdp-cvt`` (the output convertor)."""

from __future__ import annotations

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
    rdma_off,
    reg,
    sdp_operand_dma,
)
from ...vectors.surface import packed_size
from ..blocks import Capture, cvt_placeholder, pick_cvt, place_lut, sdp_io, tables
from ..draw import Sampler
from ..legal import CUBE, CVT, LUT, OPS, EnumF, IntF, UnitSpec


def gen_sdp_lut(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = Mem.for_case(s)
    geo, _ = sdp_io(d, s, prof, mem)
    m = int(s["bs_mul"])
    d.registers += [reg("SDP.D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=1, BS_ALU_ALGO=0, BS_MUL_BYPASS=0,
                         BS_MUL_PRELU=0, BS_RELU_BYPASS=1),
                    reg("SDP.D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=0),
                    reg("SDP.D_DP_BS_MUL_SRC_VALUE", BS_MUL_OPERAND=m)]
    bypass(d, "BN")
    d.registers.append(reg("SDP.D_DP_EW_CFG", EW_BYPASS=0, EW_ALU_BYPASS=1, EW_ALU_ALGO=0, EW_MUL_BYPASS=1,
                            EW_MUL_PRELU=0, EW_LUT_BYPASS=0))
    rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
    cfg = place_lut(s, -128 * m, 127 * m, cdp=False)
    d.lut = {"unit": "SDP", "config": cfg}
    d.lut_tables = tables(s)
    cvt_placeholder(d, "sdp_out")
    ev = capture(d)
    d.convertors["sdp_out"] = pick_cvt(s, ev["sdp_out"][0]["x"], mode=s["cvt"], shift=s["cvt_shift"])
    d.description = (f"fuzz sdp-lut: LE {cfg['le_function']}, priorities {cfg['uflow_priority']}/{cfg['oflow_priority']}/"
                     f"{cfg['hybrid_priority']}, layout {s['layout']}, BS MUL x{m}, cube {geo.c}x{geo.h}x{geo.w}")
    return d


def _operand_input(d: Draft, s: Sampler, mem: Mem, prof: HardwareProfile, geo: Geo, name: str, lo: int, hi: int,
                   bpe: int) -> tuple[int, int, int, bool, int]:  # fmt: skip
    """A memory operand (per channel or per element) of ``bpe`` bytes; returns (addr, line, surf, per_element)."""
    atom = prof.atom_bytes
    per_element = s.draw("op_mode") == "element"
    dt = np.int16 if bpe == 2 else np.int8
    port = s.draw("op_port")
    if per_element:
        arr = s.rng.integers(lo, hi + 1, size=(geo.c, geo.h, geo.w)).astype(dt)
        params = {"atom_bytes": bpe * atom}
        size = packed_size("nvdla.feature", arr.shape, np.dtype(dt), params)
        meta = {"layout": "nvdla.feature", "params": params, "shape": [geo.c, geo.h, geo.w]}
        ls, ss = geo.w * bpe * atom, geo.w * geo.h * bpe * atom
    else:
        cpad = -(-geo.c // atom) * atom
        arr = s.rng.integers(lo, hi + 1, size=(cpad,)).astype(dt)
        size = arr.nbytes
        meta = {"layout": "raw", "params": {}, "shape": [cpad]}
        # a per-channel operand is a packed 1x1xC cube: the RTL ignores its strides (1x1 pack
        # mode), the C model asserts SURFACE_STRIDE == atom * bytes (cmod/sdp/NV_NVDLA_sdp.cpp:392)
        ls = ss = atom * bpe
    addr = mem.alloc(MEM_PORT[port], size)
    d.inputs.append(({"name": name, **meta, "dtype": np.dtype(dt).name, "address": Hex(addr), "port": MEM_PORT[port]}, arr))
    return addr, ls, ss, per_element, RAM_TYPE[port]


def gen_sdp_bsbn(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = Mem.for_case(s)
    geo, _ = sdp_io(d, s, prof, mem)
    desc = []
    for _k, (st, dma) in enumerate((("BS", "BRDMA"), ("BN", "NRDMA"))):
        if st == "BN" and not s["bn_on"]:
            bypass(d, "BN")
            rdma_off(d, "NRDMA")
            continue
        alu, mul, relu = s.draw("alu"), s.draw("mul"), int(s.draw("relu"))
        srcs = {"ALU": s.draw("alu_src") if alu != "off" else "reg", "MUL": s.draw("mul_src") if mul != "off" else "reg"}
        if srcs["ALU"] == "mem" and srcs["MUL"] == "mem":
            srcs["MUL"] = "reg"  # DATA_USE BOTH (interleaved operands) is not generated
        algo = {"max": 0, "min": 1, "sum": 2}.get(alu, 0)
        d.registers.append(reg(f"SDP.D_DP_{st}_CFG", **{
            f"{st}_BYPASS": 0, f"{st}_ALU_BYPASS": int(alu == "off"), f"{st}_ALU_ALGO": algo,
            f"{st}_MUL_BYPASS": int(mul == "off"), f"{st}_MUL_PRELU": int(mul == "prelu"), f"{st}_RELU_BYPASS": int(not relu)}))
        d.registers += [
            reg(f"SDP.D_DP_{st}_ALU_CFG", **{f"{st}_ALU_SRC": int(srcs["ALU"] == "mem"),
                                             f"{st}_ALU_SHIFT_VALUE": int(s.draw("alu_shift"))}),
            reg(f"SDP.D_DP_{st}_ALU_SRC_VALUE", **{f"{st}_ALU_OPERAND": int(s.draw("alu_operand")) & 0xFFFF}),
            reg(f"SDP.D_DP_{st}_MUL_CFG", **{f"{st}_MUL_SRC": int(srcs["MUL"] == "mem"),
                                             f"{st}_MUL_SHIFT_VALUE": int(s.draw("mul_shift"))}),
            reg(f"SDP.D_DP_{st}_MUL_SRC_VALUE", **{f"{st}_MUL_OPERAND": int(s.draw("mul_operand")) & 0xFFFF}),
        ]
        memk = [kk for kk in ("ALU", "MUL") if srcs[kk] == "mem"]
        desc.append(f"{st} alu {alu} mul {mul}{' relu' if relu else ''} ({'/'.join(memk) or 'reg'} operands)")
        if not memk:
            rdma_off(d, dma)
            continue
        kind = memk[0]
        spec = s.c.fields.get("alu_operand" if kind == "ALU" else "mul_operand")
        lo, hi = (spec.lo, spec.hi) if spec is not None and spec.kind == "range" else (-2000, 2000)
        addr, ls, ss, pe, rt = _operand_input(d, s, mem, prof, geo, f"{st.lower()}_{kind.lower()}", lo, hi, 2)
        sdp_operand_dma(d, dma, st, kind, addr, ls, ss, per_element=pe, ram=rt)
    bypass(d, "EW")
    rdma_off(d, "ERDMA")
    cvt_placeholder(d, "sdp_out")
    ev = capture(d)
    d.convertors["sdp_out"] = pick_cvt(s, ev["sdp_out"][0]["x"], mode=s["cvt"], shift=s["cvt_shift"])
    d.description = f"fuzz sdp-bsbn: {'; '.join(desc)}, cube {geo.c}x{geo.h}x{geo.w}"
    return d


def gen_sdp_ew(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = Mem.for_case(s)
    geo, _ = sdp_io(d, s, prof, mem)
    bypass(d, "BS", "BN")
    rdma_off(d, "BRDMA", "NRDMA")
    alu, mul = s["ew_alu"], s["ew_mul"]
    srcs = {"ALU": s["ew_alu_src"] if alu != "off" else "reg", "MUL": s["ew_mul_src"] if mul != "off" else "reg"}
    if srcs["ALU"] == "mem" and srcs["MUL"] == "mem":
        srcs["MUL"] = "reg"
    eql = alu == "eql"
    lut_on = bool(s["lut"]) and not eql
    cfg_fields = {"EW_BYPASS": 0, "EW_ALU_BYPASS": int(alu == "off"),
                  "EW_ALU_ALGO": {"max": 0, "min": 1, "sum": 2, "eql": 3}.get(alu, 0),
                  "EW_MUL_BYPASS": int(mul == "off"), "EW_MUL_PRELU": int(mul == "prelu"), "EW_LUT_BYPASS": 1}
    d.registers += [
        reg("SDP.D_DP_EW_ALU_CFG", EW_ALU_SRC=int(srcs["ALU"] == "mem"), EW_ALU_CVT_BYPASS=int(s["cvt_bypass"])),
        reg("SDP.D_DP_EW_ALU_SRC_VALUE", EW_ALU_OPERAND=int(s["alu_operand"]) & 0xFFFFFFFF),
        reg("SDP.D_DP_EW_MUL_CFG", EW_MUL_SRC=int(srcs["MUL"] == "mem"), EW_MUL_CVT_BYPASS=int(s["cvt_bypass"])),
        reg("SDP.D_DP_EW_MUL_SRC_VALUE", EW_MUL_OPERAND=int(s["mul_operand"]) & 0xFFFFFFFF),
        reg("SDP.D_DP_EW_TRUNCATE_VALUE", EW_TRUNCATE=int(s["ew_truncate"])),
    ]
    memk = [k for k in ("ALU", "MUL") if srcs[k] == "mem"]
    if memk:
        kind = memk[0]
        bpe = int(s["op_size"])
        lo, hi = (-128, 127) if bpe == 1 else (-32768, 32767)
        addr, ls, ss, pe, rt = _operand_input(d, s, mem, prof, geo, f"ew_{kind.lower()}", lo, hi, bpe)
        sdp_operand_dma(d, "ERDMA", "EW", kind, addr, ls, ss, per_element=pe, size16=bpe == 2, ram=rt)
        d.convertors[f"sdp_ew_{kind.lower()}"] = {"offset": int(s["op_cvt_offset"]), "scale": int(s["op_cvt_scale"]),
                                                   "shift": int(s["op_cvt_truncate"])}
    else:
        rdma_off(d, "ERDMA")
    d.registers.append(reg("SDP.D_DP_EW_CFG", **cfg_fields))
    if eql:  # EQL: the convertor must pass values through (cmod asserts offset 0, scale 1, shift 0)
        d.convertors["sdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
    else:
        cvt_placeholder(d, "sdp_out")
        ev = capture(d)
        x = ev["sdp_out"][0]["x"]
        if lut_on:
            lo_v, hi_v = (float(v) for v in np.percentile(x, [2, 98]))
            cfg = place_lut(s, lo_v, max(hi_v, lo_v + 64), cdp=False)
            d.lut = {"unit": "SDP", "config": cfg}
            d.lut_tables = tables(s)
            d.registers[-1]["fields"]["EW_LUT_BYPASS"] = 0
            x = capture(d)["sdp_out"][0]["x"]
        d.convertors["sdp_out"] = pick_cvt(s, x, mode=s["cvt"], shift=s["cvt_shift"])
    d.description = (f"fuzz sdp-ew: alu {alu} mul {mul} ({'/'.join(memk) or 'reg'} operands){' + LUT' if lut_on else ''}, "
                     f"cube {geo.c}x{geo.h}x{geo.w}")
    return d


def gen_sdp_cvt(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = Mem.for_case(s)
    geo, x = sdp_io(d, s, prof, mem)
    bypass(d, "BS", "BN", "EW")
    rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
    d.convertors["sdp_out"] = pick_cvt(s, x.astype(np.int64), mode=s["cvt"], shift=s["cvt_shift"])
    c = d.convertors["sdp_out"]
    d.description = f"fuzz sdp-cvt: offset/scale/shift {c['offset']}/{c['scale']}/{c['shift']}, cube {geo.c}x{geo.h}x{geo.w}"
    return d


SDP_LUT_SCHEMA = {**CUBE, "bs_mul": IntF(1, 32767, 1), **LUT, **CVT}
SDP_BSBN_SCHEMA = {**CUBE, **OPS, "bn_on": EnumF((0, 1), 1, needs={1: "sdp_bn"}), "alu": EnumF(("off", "max", "min", "sum")),
                   "mul": EnumF(("off", "mul", "prelu")), "relu": EnumF((0, 1), 0),
                   "alu_src": EnumF(("reg", "mem")), "mul_src": EnumF(("reg", "mem")),
                   "alu_operand": IntF(-32768, 32767, 0), "alu_shift": IntF(0, 63, 0),
                   "mul_operand": IntF(-32768, 32767, 1), "mul_shift": IntF(0, 63, 0), **CVT}
SDP_EW_SCHEMA = {**CUBE, **OPS, "ew_alu": EnumF(("off", "max", "min", "sum", "eql")),
                 "ew_mul": EnumF(("off", "mul", "prelu")), "ew_alu_src": EnumF(("reg", "mem")),
                 "ew_mul_src": EnumF(("reg", "mem")), "op_size": EnumF((1, 2), 2), "cvt_bypass": EnumF((0, 1), 1),
                 "op_cvt_offset": IntF(-(1 << 31), (1 << 31) - 1, 0), "op_cvt_scale": IntF(-32768, 32767, 1),
                 "op_cvt_truncate": IntF(0, 63, 0), "alu_operand": IntF(-(1 << 31), (1 << 31) - 1, 0),
                 "mul_operand": IntF(-(1 << 31), (1 << 31) - 1, 1), "ew_truncate": IntF(0, 1023, 0),
                 "lut": EnumF((0, 1), 0, needs={1: "sdp_lut"}), **LUT, **CVT}
SDP_CVT_SCHEMA = {**CUBE, **CVT}

SDP_LUT = UnitSpec("sdp-lut", SDP_LUT_SCHEMA, ("sdp_bs", "sdp_lut"), ("sdp.lut", "sdp.out", "sdp.cube", "sdp.ports"),
                   gen_sdp_lut)
SDP_BSBN = UnitSpec("sdp-bsbn", SDP_BSBN_SCHEMA, ("sdp_bs",), ("sdp.bs", "sdp.bn", "sdp.out", "sdp.cube", "sdp.ports"),
                    gen_sdp_bsbn)
SDP_EW = UnitSpec("sdp-ew", SDP_EW_SCHEMA, ("sdp_ew",), ("sdp.ew", "sdp.out", "sdp.cube", "sdp.ports"), gen_sdp_ew)
SDP_CVT = UnitSpec("sdp-cvt", SDP_CVT_SCHEMA, (), ("sdp.out", "sdp.cube", "sdp.ports"), gen_sdp_cvt)
