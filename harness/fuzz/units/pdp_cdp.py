"""Fuzz unit ``pdp``: random PDP pooling layers (model: :mod:`nvdla_hil.harness.refmodel.pdp`).

INT8 (every profile with PDP), INT16 and FP16 (profiles with those precisions); AVERAGE / MAX /
MIN; kernels 1..8, strides 1..kernel, padding 0..kernel-1 on every side with random padding
values (INT: the pre-multiplied ``P[n] = n * v`` or raw 19-bit patterns; FP16: fp17 patterns of
``n * v``), reciprocals exact (``1/k``) or random; split-width mode (2..4 slices, consistent
first/mid/last partial widths); both memory ports; FP16 data with NaN/INF/denormal/edge values
at ``special_pct`` % and NAN_TO_ZERO. Output widths follow the hardware rule
``(W + PL + PR - KW) / SW + 1`` so every window holds at least one real column and row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....drivers.profiles import HardwareProfile
from ...refmodel.pdp import line_buffer_columns, unread_tail
from ...vectors.format import DEFAULT_LAUNCH
from ...vectors.layer import (
    RAM_TYPE,
    Draft,
    Geo,
    Mem,
    bypass,
    cdp_lrn_registers,
    place_feature,
    rdma_off,
    reg,
    sdp_cube_registers,
)
from ..blocks import data, geometry, pick_cvt
from ..draw import Sampler, constraints_for
from ..legal import ONOFF, PORT, EnumF, IntF, UnitSpec
from .conv import CONV, gen_conv
from .sdp import SDP_BSBN_SCHEMA, gen_sdp_bsbn
from .sdp_fp16 import SDP_FP16_SCHEMA, fp16_data, gen_sdp_fp16

_PREC = {"int8": (0, "int8", 1), "int16": (1, "int16", 2), "fp16": (2, "float16", 2)}
_METHOD = {"average": 0, "max": 1, "min": 2}


def _fp17(v: float) -> int:
    """fp17 (1+6+10, bias 31) pattern of a float (round to nearest via float16 mantissa)."""
    if v == 0:
        return 0
    h = int(np.array([v], dtype=np.float32).view(np.uint32)[0])
    s, e, m = h >> 31, (h >> 23) & 0xFF, h & 0x7FFFFF
    m10 = (m + (1 << 12)) >> 13
    if m10 >> 10:
        e, m10 = e + 1, 0
    e17 = int(np.clip(e - 127 + 31, 1, 62))
    return (s << 16) | (e17 << 10) | m10


def _split(s: Sampler, kw: int, sw: int, pl: int, pr: int) -> tuple[int, list[int], list[int], int] | None:
    """``(W, [in_first, in_mid, in_last], [out_first, out_mid, out_last], PR)`` of a consistent
    split, or None (no split possible with these kernel parameters); ``PR`` is the right padding
    the last window really uses (:func:`_used_pad`)."""
    rng = s.rng
    n = int(s["split_num"])
    for _ in range(20):
        of, om, ol = (int(rng.integers(1, 5)) for _ in range(3))
        i_first = of * sw - pl + kw - sw
        i_mid = om * sw
        extra = int(rng.integers(0, sw))
        i_last = ol * sw - pr + extra
        if of * sw >= pl and i_first >= 1 and i_last >= 1:  # the second slice starts inside the cube
            w = i_first + (n - 2) * i_mid + i_last
            return w, [i_first, i_mid if n > 2 else 1, i_last], [of, om if n > 2 else 1, ol], max(0, pr - extra)
    return None


def _used_pad(n_out: int, stride: int, k: int, n_in: int, lead: int) -> int:
    """Trailing padding (right / bottom) the last window really covers. A configured PAD_RIGHT /
    PAD_BOTTOM above it and at least the stride is outside the RTL's working space (the model
    refuses it, ``refmodel/pdp.py`` ``_check_trailing_pad``): the generator programs this value
    instead; a larger pad below the stride is kept (the RTL runs those correctly)."""
    return max(0, (n_out - 1) * stride + k - n_in - lead)


@dataclass
class _Pool:
    """PDP kernel, padding, split and cube geometry of one generated layer."""

    kw: int
    kh: int
    sw: int
    sh: int
    pl: int
    pr: int
    pt: int
    pb: int
    w: int
    h: int
    ow: int
    oh: int
    split: tuple[int, list[int], list[int], int] | None


def _pool_geometry(s: Sampler, prec: str, method: int, *, flying: bool = False) -> _Pool:
    """Kernel, stride, padding and input/output widths (module docstring); ``flying`` splits only
    kernels with no overlap (``KW == SW``): the on-flying stream is not re-sent for the overlap
    columns a later slice re-reads (``refmodel/pdp.py`` ``_flying_parts``); without split and
    unless ``flying_tail`` is drawn, the input ends where the last window does (RTL limitation,
    ``refmodel/pdp.py`` ``_check_flying_tail``: input past it hangs SDP or corrupts PDP's next layer)."""
    kw, kh = int(s["kernel_w"]), int(s["kernel_h"])
    sw = min(int(s["stride_w"]), kw)
    sh = min(int(s["stride_h"]), kh)
    pl, pr = (min(int(s[k]), kw - 1) for k in ("pad_left", "pad_right"))
    pt, pb = (min(int(s[k]), kh - 1) for k in ("pad_top", "pad_bottom"))
    if prec == "fp16" and method == 0 and kw == 8:
        # the cmod multiplies top/bottom padding by kernel_width_map[8], past the end of its
        # table (undefined, pdp_hls_wrapper.cpp): no vertical padding with an 8-wide kernel
        pt = pb = 0
    split = None
    if int(s["split"]) and kw >= sw and (not flying or kw == sw):
        split = _split(s, kw, sw, pl, pr)
    if split is not None:
        w = split[0]
    else:
        w = max(int(s["width"]), kw - pl - pr, 1)
    h = max(int(s["height"]), kh - pt - pb, 1)
    ow, oh = (w + pl + pr - kw) // sw + 1, (h + pt + pb - kh) // sh + 1
    fits = line_buffer_columns(kh, sh)
    if split is None and fits is not None and ow > fits:
        # wider than PDP's line buffer holds for the kernel's rows: the RTL never ends such a layer
        # (refmodel/pdp.py _check_line_buffer); the widest that fits instead
        w, ow = (fits - 1) * sw + kw - pl - pr, fits
    if flying and split is None and not int(s["flying_tail"]):
        # fewer than a stride of columns / rows, so OW / OH stay; the pads are refitted below
        w -= int(unread_tail(w, ow, kw, sw, pl))
        h -= int(unread_tail(h, oh, kh, sh, pt))
    if pt >= sh:
        # top padding of a stride or more: the RTL counts the windows starting in it from PAD_TOP
        # (nv_small NV_NVDLA_PDP_CORE_cal2d.v:841-865 padding_stride_num); an unused input row
        # after the last window then shifts the next surface (fuzz pdp seed 9 case 46, pad_top 7,
        # stride 4): no trailing rows here (conservative; not refused by the model)
        h = min(h, (oh - 1) * sh + kh - pt)
    used_r = split[3] if split is not None else _used_pad(ow, sw, kw, w, pl)
    used_b = _used_pad(oh, sh, kh, h, pt)
    pr = used_r if pr > used_r and pr >= sw else pr
    pb = used_b if pb > used_b and pb >= sh else pb
    return _Pool(kw, kh, sw, sh, pl, pr, pt, pb, w, h, ow, oh, split)


def _pool_values(s: Sampler, prec: str, g: _Pool) -> tuple[list[int], int, int]:
    """The seven PAD_VALUE_nX fields and the two reciprocals."""
    rng = s.rng
    if prec == "fp16":
        v = float(np.array([fp16_data(rng, (1,), special_pct=0, exp_lo=10, exp_hi=20)[0]], dtype=np.uint16).view(np.float16)[0])
        pads = [_fp17(n * v) for n in range(1, 8)] if s["pad_value"] == "multiple" else \
            [int(rng.integers(0, 1 << 19)) for _ in range(7)]
        rw = _fp17(1.0 / g.kw) if s["recip"] == "exact" else _fp17(float(rng.uniform(-2, 2)))
        rh = _fp17(1.0 / g.kh) if s["recip"] == "exact" else _fp17(float(rng.uniform(-2, 2)))
    else:
        bits = 8 * _PREC[prec][2]
        v = int(rng.integers(-(1 << (bits - 1)), 1 << (bits - 1)))
        pads = [int(np.clip(n * v, -(1 << 18), (1 << 18) - 1)) & 0x7FFFF for n in range(1, 8)] \
            if s["pad_value"] == "multiple" else [int(rng.integers(0, 1 << 19)) for _ in range(7)]
        rw = round(65536 / g.kw) if s["recip"] == "exact" else int(rng.integers(0, 1 << 17))
        rh = round(65536 / g.kh) if s["recip"] == "exact" else int(rng.integers(0, 1 << 17))
    return pads, rw, rh


def _pool_regs(d: Draft, s: Sampler, g: _Pool, prec: str, method: int, c: int, dst: int, line_out: int, surf_out: int,
               src: tuple[int, int, int] | None) -> int:  # fmt: skip
    """PDP's registers (and PDP_RDMA's when ``src`` = (address, line, surface stride) is given;
    ``None``: on-flying input from SDP). Returns the number of split slices."""
    fmt = _PREC[prec][0]
    pads, rw, rh = _pool_values(s, prec, g)
    split = g.split
    n_split = int(s["split_num"]) if split is not None else 1
    ins, outs = (split[1], split[2]) if split is not None else ([g.w, 1, 1], [g.ow, 1, 1])
    win = {"PARTIAL_WIDTH_IN_FIRST": ins[0] - 1, "PARTIAL_WIDTH_IN_MID": ins[1] - 1, "PARTIAL_WIDTH_IN_LAST": ins[2] - 1}
    wout = {"PARTIAL_WIDTH_OUT_FIRST": outs[0] - 1, "PARTIAL_WIDTH_OUT_MID": outs[1] - 1, "PARTIAL_WIDTH_OUT_LAST": outs[2] - 1}
    if split is None:
        win.update(PARTIAL_WIDTH_IN_MID=0, PARTIAL_WIDTH_IN_LAST=0)
        wout.update(PARTIAL_WIDTH_OUT_MID=0, PARTIAL_WIDTH_OUT_LAST=0)
    for blk in ("PDP_RDMA", "PDP") if src is not None else ("PDP",):
        d.registers += [reg(f"{blk}.D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=g.w - 1),
                        reg(f"{blk}.D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=g.h - 1),
                        reg(f"{blk}.D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=c - 1),
                        reg(f"{blk}.D_DATA_FORMAT", INPUT_DATA=fmt)]
        if src is not None:
            d.registers += [reg(f"{blk}.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src[0]),
                            reg(f"{blk}.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
                            reg(f"{blk}.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=src[1]),
                            reg(f"{blk}.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=src[2])]
        d.registers.append(reg(f"{blk}.D_PARTIAL_WIDTH_IN", **win))
    if src is not None:
        d.registers += [
            reg("PDP_RDMA.D_FLYING_MODE", FLYING_MODE=1), reg("PDP_RDMA.D_SRC_RAM_CFG", SRC_RAM_TYPE=RAM_TYPE[s["src_port"]]),
            reg("PDP_RDMA.D_OPERATION_MODE_CFG", SPLIT_NUM=n_split - 1),
            reg("PDP_RDMA.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=g.kw - 1, KERNEL_STRIDE_WIDTH=g.sw - 1),
            reg("PDP_RDMA.D_POOLING_PADDING_CFG", PAD_WIDTH=g.pl),
        ]
    d.registers += [
        reg("PDP.D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=g.ow - 1), reg("PDP.D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=g.oh - 1),
        reg("PDP.D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=c - 1),
        reg("PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=int(src is not None), SPLIT_NUM=n_split - 1),
        reg("PDP.D_PARTIAL_WIDTH_OUT", **wout),
        reg("PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=g.kw - 1, KERNEL_HEIGHT=g.kh - 1, KERNEL_STRIDE_WIDTH=g.sw - 1,
             KERNEL_STRIDE_HEIGHT=g.sh - 1),
        reg("PDP.D_RECIP_KERNEL_WIDTH", RECIP_KERNEL_WIDTH=rw), reg("PDP.D_RECIP_KERNEL_HEIGHT", RECIP_KERNEL_HEIGHT=rh),
        reg("PDP.D_POOLING_PADDING_CFG", PAD_LEFT=g.pl, PAD_TOP=g.pt, PAD_RIGHT=g.pr, PAD_BOTTOM=g.pb),
        *[reg(f"PDP.D_POOLING_PADDING_VALUE_{n}_CFG", **{f"PAD_VALUE_{n}X": pads[n - 1]}) for n in range(1, 8)],
        reg("PDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), reg("PDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        reg("PDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=line_out), reg("PDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf_out),
        reg("PDP.D_DST_RAM_CFG", DST_RAM_TYPE=RAM_TYPE[s["dst_port"]]),
    ]
    return n_split


def _pool_desc(s: Sampler, g: _Pool, n_split: int) -> str:
    return (f"{s['method']} {g.kw}x{g.kh} stride {g.sw}x{g.sh} pad l/t/r/b {g.pl}/{g.pt}/{g.pr}/{g.pb} ({s['pad_value']}), "
            f"recip {s['recip']}, split {n_split}")


def gen_pdp(s: Sampler, prof: HardwareProfile, capture) -> Draft:
    prec = str(s["precision"])
    _, dtype, _bpe = _PREC[prec]
    atom = prof.atom_bytes
    d = Draft(unit="PDP", profile=prof.name, statistics=prec == "fp16", launch=("PDP", "PDP_RDMA"))
    rng = s.rng
    method = _METHOD[str(s["method"])]
    g = _pool_geometry(s, prec, method)
    w, h, ow, oh = g.w, g.h, g.ow, g.oh
    c = int(s["channels"])
    # counters only where no input row/column lies past the last window: the cmod snapshots
    # D_NAN/INF_INPUT_NUM when the last output is written, while PDP_RDMA may still be
    # delivering (and counting) such unused trailing lines - a timing artifact of the C model
    d.statistics = prec == "fp16" and (oh - 1) * g.sh - g.pt + g.kh >= h and (ow - 1) * g.sw - g.pl + g.kw >= w
    gap = int(s["gaps"])
    line_in = w * atom + (atom * int(rng.integers(1, 3)) if gap else 0)
    surf_in = h * line_in + (atom * int(rng.integers(1, 3)) if gap else 0)
    line_out = ow * atom + (atom * int(rng.integers(1, 3)) if gap else 0)
    surf_out = oh * line_out + (atom * int(rng.integers(1, 3)) if gap else 0)
    if prec == "fp16":
        x = fp16_data(rng, (c, h, w), special_pct=int(s["special_pct"]), exp_lo=int(s["exp_lo"]),
                      exp_hi=int(s["exp_hi"])).view(np.float16)
    elif s["data"] == "edges":
        info = np.iinfo(dtype)
        x = rng.choice(np.array([info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max]), size=(c, h, w)).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(int(info.min), int(info.max) + 1, size=(c, h, w), dtype=np.int64).astype(dtype)
    mem = Mem.for_case(s)
    src = place_feature(d, mem, "src", x, s["src_port"], atom, Geo(w, h, c, line_in, surf_in), dtype=dtype)
    dst = place_feature(d, mem, "dst", (c, oh, ow), s["dst_port"], atom, Geo(ow, oh, c, line_out, surf_out), output=True,
                   dtype=dtype)
    n_split = _pool_regs(d, s, g, prec, method, c, dst, line_out, surf_out, (src, line_in, surf_in))
    if prec == "fp16":
        d.registers.append(reg("PDP.D_NAN_FLUSH_TO_ZERO", NAN_TO_ZERO=int(s["nan_to_zero"])))
    d.description = (f"fuzz pdp {prec} {_pool_desc(s, g, n_split)}, cube {c}x{h}x{w} -> {ow}x{oh}, "
                     f"ports {s['src_port']}/{s['dst_port']}")
    return d


_PDP_SCHEMA = {
        "precision": EnumF(("int8", "int16", "fp16"), "int8", needs={"int8": "int8", "int16": "int16", "fp16": "fp16"}),
        "method": EnumF(("average", "max", "min")),
        "kernel_w": IntF(1, 8, 1), "kernel_h": IntF(1, 8, 1), "stride_w": IntF(1, 16, 1), "stride_h": IntF(1, 16, 1),
        "pad_left": IntF(0, 7, 0), "pad_right": IntF(0, 7, 0), "pad_top": IntF(0, 7, 0), "pad_bottom": IntF(0, 7, 0),
        "pad_value": EnumF(("multiple", "raw")), "recip": EnumF(("exact", "random")),
        "split": ONOFF, "split_num": IntF(2, 4, 2),
        "width": IntF(1, 8192, 1), "height": IntF(1, 8192, 1), "channels": IntF(1, 8192, 1), "gaps": ONOFF,
        "src_port": PORT, "dst_port": PORT, "data": EnumF(("uniform", "edges")),
        "special_pct": IntF(0, 100, 0), "exp_lo": IntF(0, 31, 0), "exp_hi": IntF(0, 31, 30), "nan_to_zero": ONOFF,
}
PDP = UnitSpec("pdp", _PDP_SCHEMA, ("pdp",), ("pdp.pool", "pdp.cube", "pdp.ports", "pdp.fp16"), gen_pdp)


# ---- sdp-pdp: SDP on the fly into PDP ---------------------------------------------------------------------

#: SDP precision path -> PDP input precision (seed 000 tables; PDP converts nothing)
_PATHS = {"conv": "", "fp16_to_fp16": "fp16", "int16_to_fp16": "fp16", "fp16_to_int16": "int16", "int16_to_int16": "int16",
          "int8_to_int8": "int8", "int8_to_int16": "int16"}


def _sdp_int16(s: Sampler, prof: HardwareProfile, capture) -> Draft:
    """An INT16 -> INT16 SDP layer to memory: BS with register operands (ALU max/min/sum with
    shift, MUL/PReLU with shift, ReLU), BN/EW bypassed, the output convertor fitted to the data."""
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem, atom = Mem.for_case(s), prof.atom_bytes
    geo = geometry(s, atom)
    x = data(s, (geo.c, geo.h, geo.w), np.int16)
    src = place_feature(d, mem, "src", x, s["src_port"], atom, geo, dtype="int16")
    dst = place_feature(d, mem, "dst", (geo.c, geo.h, geo.w), s["dst_port"], atom, geo, output=True, dtype="int16")
    sdp_cube_registers(d, geo.w, geo.h, geo.c, src=src, dst=dst, line=geo.line, surf=geo.surf, proc=1, out=1,
                       src_ram=RAM_TYPE[s["src_port"]], dst_ram=RAM_TYPE[s["dst_port"]])
    alu, mul, relu = s.draw("alu"), s.draw("mul"), int(s.draw("relu"))
    d.registers += [
        reg("SDP.D_PERF_ENABLE", PERF_DMA_EN=0, PERF_LUT_EN=0, PERF_SAT_EN=1, PERF_NAN_INF_COUNT_EN=0),
        reg("SDP.D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=int(alu == "off"), BS_ALU_ALGO={"max": 0, "min": 1, "sum": 2}.get(alu, 0),
             BS_MUL_BYPASS=int(mul == "off"), BS_MUL_PRELU=int(mul == "prelu"), BS_RELU_BYPASS=int(not relu)),
        reg("SDP.D_DP_BS_ALU_CFG", BS_ALU_SRC=0, BS_ALU_SHIFT_VALUE=int(s.draw("alu_shift"))),
        reg("SDP.D_DP_BS_ALU_SRC_VALUE", BS_ALU_OPERAND=int(s.draw("alu_operand")) & 0xFFFF),
        reg("SDP.D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=int(s.draw("mul_shift"))),
        reg("SDP.D_DP_BS_MUL_SRC_VALUE", BS_MUL_OPERAND=int(s.draw("mul_operand")) & 0xFFFF),
    ]
    bypass(d, "BN", "EW")
    rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
    d.convertors["sdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
    ev = capture(d)
    d.convertors["sdp_out"] = pick_cvt(s, ev["sdp_out"][0]["x"], mode=s["cvt"], shift=s["cvt_shift"], out_max=32767)
    d.description = f"fuzz sdp-pdp: INT16 -> INT16, BS alu {alu} mul {mul}{' relu' if relu else ''} (reg), cube {geo.c}x{geo.h}x{geo.w}"
    return d


def gen_sdp_pdp(s: Sampler, prof: HardwareProfile, capture) -> Draft:
    """SDP's output on the fly into PDP (``OUTPUT_DST = PDP``, PDP ``FLYING_MODE = ON_FLYING``),
    PDP writing memory. The source: an SDP layer reading memory from the sdp-fp16 generator
    (FP16 / INT16 -> FP16 paths: BS/BN/EW/LUT, specials, NAN_TO_ZERO), sdp-bsbn (INT8, also INT8 ->
    INT16) or :func:`_sdp_int16`, over the cube PDP's pooling geometry needs; or (``path`` conv) a
    direct convolution CDMA -> CACC -> SDP from the conv generator. PDP as in the pdp unit (split
    widths only without kernel overlap, and only where the constraints draw ``split``: the shipped
    sdp-pdp.yaml does not, as the model refuses split on the fly under rtl semantics,
    ``refmodel/pdp.py`` ``_check_flying_split``). The input ends where the last pooling window does
    (``flying_tail`` 0, the default: :func:`_pool_geometry`, :func:`fit_pool`; ``refmodel/pdp.py``
    ``_check_flying_tail``). EW EQL is not drawn (SDP then sends nothing to PDP). The
    case's done unit (whose statistics are compared) is PDP or, with ``done`` = sdp, the source's
    (SDP's NaN/INF/saturation counters); PDP's D_NAN_FLUSH_TO_ZERO is drawn at random (no effect
    on the fly)."""
    path = str(s["path"])
    method = _METHOD[str(s["method"])]
    if path == "conv":
        d, prec, g, c = _conv_source(s, prof, capture, method)
    else:
        d, prec, g, c = _sdp_source(s, prof, capture, method, path)
    for r in d.registers:
        if r["reg"] == "SDP.D_FEATURE_MODE_CFG":
            r["fields"]["OUTPUT_DST"] = 1
    d.outputs = [o for o in d.outputs if o["name"] != "dst"]
    src_desc = d.description.split(": ", 1)[-1] if path != "conv" else d.description.removeprefix("fuzz ")
    d.launch = ("PDP", *(d.launch or DEFAULT_LAUNCH[str(d.unit)]))
    if s["done"] == "pdp":  # else the source's unit (SDP / CONV): SDP's counters are the ones read back
        d.unit = "PDP"
    d.statistics = True
    atom, rng = prof.atom_bytes, s.rng
    gap = int(s["gaps"])
    line_out = g.ow * atom + (atom * int(rng.integers(1, 3)) if gap else 0)
    surf_out = g.oh * line_out + (atom * int(rng.integers(1, 3)) if gap else 0)
    mem = Mem.for_case(s)
    mem.next = {k: v + 0x1000000 for k, v in mem.next.items()}  # above everything the source generator placed
    dst = place_feature(d, mem, "pdp_dst", (c, g.oh, g.ow), s["dst_port"], atom, Geo(g.ow, g.oh, c, line_out, surf_out),
                   output=True, dtype=_PREC[prec][1])
    n_split = _pool_regs(d, s, g, prec, method, c, dst, line_out, surf_out, None)
    if prec == "fp16":
        d.registers.append(reg("PDP.D_NAN_FLUSH_TO_ZERO", NAN_TO_ZERO=int(s["pdp_nan_to_zero"])))
    d.description = (f"fuzz sdp-pdp {path}: {'' if path == 'conv' else 'SDP '}{src_desc}; PDP {prec} "
                     f"{_pool_desc(s, g, n_split)} -> {g.ow}x{g.oh}, dst {s['dst_port']}")
    return d


def _conv_source(s: Sampler, prof: HardwareProfile, capture, method: int) -> tuple[Draft, str, _Pool, int]:
    """A direct convolution layer from the conv unit's generator (its own constraints, this
    case's random stream), SDP flying; PDP's pooling fitted to its output cube (no split)."""
    cs = Sampler(constraints_for(CONV, profile=prof.name), s.rng, dut=s.dut)
    cs.v["mode"] = "direct"
    d = gen_conv(cs, prof, capture)
    f = {r["reg"]: r["fields"] for r in d.registers}
    ow, oh = int(f["SDP.D_DATA_CUBE_WIDTH"]["WIDTH"]) + 1, int(f["SDP.D_DATA_CUBE_HEIGHT"]["HEIGHT"]) + 1
    c = int(f["SDP.D_DATA_CUBE_CHANNEL"]["CHANNEL"]) + 1
    prec = {0: "int8", 1: "int16", 2: "fp16"}[int(f["SDP.D_DATA_FORMAT"]["OUT_PRECISION"])]
    return d, prec, fit_pool(s, prec, method, ow, oh), c


def fit_pool(s: Sampler, prec: str, method: int, w: int, h: int) -> _Pool:
    """PDP's pooling on the fly over a fixed ``w x h`` input (a convolution's output): the drawn
    geometry, else with the kernel clamped to the input, no top padding, stride 1 (with which the
    last window always ends the input), a one-row kernel; each with the pads raised to cover the input's end
    (:func:`_cover_tail`) unless ``flying_tail``. No split."""
    s.v.update(width=w, height=h, split=0)
    clamp = {"kernel_w": min(int(s["kernel_w"]), w), "kernel_h": min(int(s["kernel_h"]), h)}
    # the last fix, a one-row kernel, keeps no lines: an output wider than PDP's line buffer holds
    # for the kernel's rows (refmodel/pdp.py _check_line_buffer) fits then
    fixes: tuple[dict[str, int], ...] = ({}, clamp, {"pad_top": 0}, {"stride_w": 1, "stride_h": 1}, {"kernel_h": 1})
    for fix in fixes:
        s.v.update(fix)
        if not int(s["flying_tail"]):
            _cover_tail(s, w, h)
        g = _pool_geometry(s, prec, method, flying=True)
        if (g.w, g.h) == (w, h):
            return g
    raise AssertionError(f"sdp-pdp conv: pooling geometry {g} does not fit the {w}x{h} convolution output")


def _cover_tail(s: Sampler, w: int, h: int) -> None:
    """Raise the drawn PAD_RIGHT / PAD_BOTTOM so that the last window reaches the end of a fixed
    ``w x h`` input (the convolution's output), as :func:`_pool_geometry` clamps them: with
    ``B = W + PAD_LEFT - KW`` and ``B % SW = m > 0``, a pad of ``SW - m`` (< SW <= KW) adds the window
    that covers the last ``m`` columns (``refmodel/pdp.py`` ``_check_flying_tail``)."""
    for k, st, lead, trail, n in (("kernel_w", "stride_w", "pad_left", "pad_right", w),
                                  ("kernel_h", "stride_h", "pad_top", "pad_bottom", h)):
        kk = int(s[k])
        ss, ld, tr = min(int(s[st]), kk), min(int(s[lead]), kk - 1), min(int(s[trail]), kk - 1)
        m = (n + ld - kk) % ss if n + ld > kk else 0
        if m and m + tr < ss:
            s.v[trail] = ss - m


def _sdp_source(s: Sampler, prof: HardwareProfile, capture, method: int, path: str) -> tuple[Draft, str, _Pool, int]:
    """An SDP layer reading memory over the cube PDP's pooling geometry needs (docstring above)."""
    prec = _PATHS[path]
    g = _pool_geometry(s, prec, method, flying=True)
    c = int(s["channels"])
    if path == "int8_to_int16":
        # SDP streams every 32-channel INT8 atom as two 16-lane payloads; an INT16 PDP cube of the
        # same C reads them all only when ceil(C/16) is even (refmodel/pdp.py _flying_parts)
        c = -(-c // 32) * 32 - int(s.rng.integers(0, 16))
    s.v.update(shape="cube", width=g.w, height=g.h, channels=c)
    if g.w == 1 and g.h == 1:
        s.v["gaps"] = 0  # 1x1xC: packed (the cmod asserts SURFACE_STRIDE == atom)
    if path in ("fp16_to_fp16", "int16_to_fp16", "fp16_to_int16"):
        s.v["mode"] = path
        if s.v.get("ew_alu") == "eql":
            s.v["ew_alu"] = "sum"
        d = gen_sdp_fp16(s, prof, capture)
    elif path == "int16_to_int16":
        d = _sdp_int16(s, prof, capture)
    else:
        d = gen_sdp_bsbn(s, prof, capture)
        if path == "int8_to_int16":
            for r in d.registers:
                if r["reg"] in ("SDP.D_DATA_FORMAT", "SDP_RDMA.D_FEATURE_MODE_CFG"):
                    r["fields"]["OUT_PRECISION"] = 1
    return d, prec, g, c


# ---- cdp-fp16 ----------------------------------------------------------------------------------------------


def _f32_bits(v: float) -> int:
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def _fp16_signed(v: float) -> int:
    """An FP16 value as the signed 16-bit register/table word."""
    return int(np.array([v], dtype=np.float16).view(np.int16)[0])


def _fp16_tables(s: Sampler) -> dict[str, np.ndarray]:
    """FP16 LE (65) / LO (257) tables as int16 words: monotone, random or with edge values."""
    rng, kind = s.rng, s["table"]
    out = {}
    for t, n in (("le", 65), ("lo", 257)):
        v = (rng.standard_normal(n) * 2.0 ** rng.integers(-6, 8)).astype(np.float16)
        if kind == "monotone":
            v = np.sort(v) if rng.random() < 0.5 else np.sort(v)[::-1]
        elif kind == "extreme":
            v = np.where(rng.random(n) < 0.2, rng.choice(np.array([65504, -65504, 0.0, -0.0, 6e-8, np.inf, -np.inf],
                                                                  dtype=np.float16), n), v)
        out[t] = np.ascontiguousarray(v.astype(np.float16)).view(np.int16)
    return out


def gen_cdp_fp16(s: Sampler, prof: HardwareProfile, capture) -> Draft:
    """CDP LRN in FP16 (nv_full): FP16 data with specials, window 3..9, SQSUM/MUL bypass,
    NAN_TO_ZERO; LUT START/END as fp32 patterns aimed at the layer's square sums, LE exponent
    or linear, FP16 tables and slopes, every priority."""
    d = Draft(unit="CDP", profile=prof.name, statistics=True, launch=("CDP", "CDP_RDMA"))
    rng = s.rng
    atom = prof.atom_bytes
    shape = s["shape"]
    w = 1 if shape == "1x1xC" else int(s["width"])
    h = 1 if shape in ("1x1xC", "single_line") else int(s["height"])
    c = int(s["channels"])
    gap = int(s["gaps"]) and shape != "1x1xC"
    line = w * atom + (atom * int(rng.integers(1, 3)) if gap else 0)
    surf = h * line + (atom * int(rng.integers(1, 3)) if gap else 0)
    geo = Geo(w, h, c, line, surf)
    x = fp16_data(rng, (c, h, w), special_pct=int(s["special_pct"]), exp_lo=int(s["exp_lo"]),
                  exp_hi=int(s["exp_hi"])).view(np.float16)
    mem = Mem.for_case(s)
    src = place_feature(d, mem, "src", x, s["src_port"], atom, geo, dtype="float16")
    dst = place_feature(d, mem, "dst", (c, h, w), s["dst_port"], atom, geo, output=True, dtype="float16")
    nl = int(s["normalz_len"])
    cdp_lrn_registers(d, w, h, c, src=src, dst=dst, line=line, surf=surf, precision=2, normalz_len=nl,
                      sqsum_bypass=int(s["sqsum_bypass"]), mul_bypass=int(s["mul_bypass"]),
                      src_ram=RAM_TYPE[s["src_port"]], dst_ram=RAM_TYPE[s["dst_port"]])
    d.registers.append(reg("CDP.D_NAN_FLUSH_TO_ZERO", NAN_TO_ZERO=int(s["nan_to_zero"])))
    d.convertors["cdp_in"] = {"offset": 0, "scale": 1, "shift": 0}
    d.convertors["cdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
    d.lut = {"unit": "CDP", "config": {"le_function": "linear", "lo_index_select": 0, "le_index_select": 0}}
    d.lut_tables = {"le": np.zeros(65, np.int16), "lo": np.zeros(257, np.int16)}
    with np.errstate(invalid="ignore", over="ignore"):
        sums = np.asarray(capture(d)["cdp_fp16"][0]["s"], dtype=np.float64)
    fin = sums[np.isfinite(sums) & (sums > 0)]
    lo_v, hi_v = (float(v) for v in np.percentile(fin, [2, 98])) if fin.size else (1.0, 2.0)
    hi_v = max(hi_v, lo_v * 1.5, 1e-30)
    span = hi_v - lo_v
    sel = lambda t: int(np.clip(round(np.log2(max(span * s["span_pct"] / 100 / t, 1e-38))), -32, 31))
    lo_sel = sel(256)
    lo_start = lo_v + rng.uniform(-0.3, 0.6) * span
    cfg: dict = {"le_function": s["le_function"], "lo_index_select": lo_sel,
                 "lo_start": _f32_bits(lo_start), "lo_end": _f32_bits(lo_start + 256 * 2.0 ** lo_sel)}
    le_start = lo_v + rng.uniform(-0.3, 0.6) * span
    if s["le_function"] == "linear":
        le_sel = sel(64)
        cfg.update(le_index_select=le_sel, le_index_offset=0, le_start=_f32_bits(le_start),
                   le_end=_f32_bits(le_start + 64 * 2.0 ** le_sel))
    else:
        le_start = lo_v - rng.uniform(0, 0.5) * span
        eo = int(np.clip(np.floor(np.log2(max(lo_v - le_start, 1e-38))) - int(rng.integers(0, 4)), -128, 127))
        cfg.update(le_index_select=0, le_index_offset=eo, le_start=_f32_bits(le_start),
                   le_end=_f32_bits(le_start + 2.0 ** min(eo + 64, 120)))
    for t in ("le", "lo"):
        for k in ("uflow", "oflow"):
            cfg[f"{t}_slope_{k}_scale"] = _fp16_signed(float(rng.standard_normal() * 2.0 ** rng.integers(-12, 4)))
            cfg[f"{t}_slope_{k}_shift"] = 0
    for k in ("uflow_priority", "oflow_priority", "hybrid_priority"):
        cfg[k] = s[k]
    d.lut = {"unit": "CDP", "config": cfg}
    d.lut_tables = _fp16_tables(s)
    d.description = (f"fuzz cdp-fp16: window {2 * nl + 3}{' sqsum-bypass' if s['sqsum_bypass'] else ''}"
                     f"{' mul-bypass' if s['mul_bypass'] else ''}, LE {cfg['le_function']}, priorities "
                     f"{cfg['uflow_priority']}/{cfg['oflow_priority']}/{cfg['hybrid_priority']}, specials "
                     f"{s['special_pct']}%, nan_to_zero {s['nan_to_zero']}, cube {c}x{h}x{w}")
    return d


CDP_FP16 = UnitSpec(
    "cdp-fp16",
    {
        "shape": EnumF(("cube", "1x1xC", "single_line")), "width": IntF(1, 8192, 1), "height": IntF(1, 8192, 1),
        "channels": IntF(1, 8192, 1), "gaps": ONOFF, "src_port": PORT, "dst_port": PORT,
        "normalz_len": IntF(0, 3, 0), "sqsum_bypass": ONOFF, "mul_bypass": ONOFF,
        "special_pct": IntF(0, 100, 0), "exp_lo": IntF(0, 31, 0), "exp_hi": IntF(0, 31, 30), "nan_to_zero": ONOFF,
        "le_function": EnumF(("exponent", "linear")), "table": EnumF(("monotone", "random", "extreme")),
        "span_pct": IntF(1, 400, 50),
        "uflow_priority": EnumF(("LE", "LO")), "oflow_priority": EnumF(("LE", "LO")), "hybrid_priority": EnumF(("LE", "LO")),
    },
    ("cdp", "fp16"),
    ("cdp.cube", "cdp.ports", "cdp.fp16"),  # the INT-only cdp.lut/cdp.cvt handlers do not read the FP16 event
    gen_cdp_fp16,
)


_POOL_FIELDS = ("method", "kernel_w", "kernel_h", "stride_w", "stride_h", "pad_left", "pad_right", "pad_top", "pad_bottom",
                "pad_value", "recip", "split", "split_num")
SDP_PDP = UnitSpec(
    "sdp-pdp",
    {**SDP_BSBN_SCHEMA, **SDP_FP16_SCHEMA, **{k: _PDP_SCHEMA[k] for k in _POOL_FIELDS},
            "path": EnumF(tuple(_PATHS), "int8_to_int8", needs={p: _PATHS[p] for p in _PATHS if _PATHS[p]}), "pdp_nan_to_zero": ONOFF,
            "done": EnumF(("pdp", "sdp")),
            # 1: input may run past the last pooling window (the C model's semantics only; 0, the
            # default, ends it there: refmodel/pdp.py _check_flying_tail)
            "flying_tail": ONOFF,
            # the secondary port only where the profile has it (nv_small not)
            "src_port": PORT, "dst_port": PORT, "op_port": PORT},
    ("pdp",),
    ("sdp.prec", "sdp.fp16", "pdp.pool", "pdp.ports"),
    gen_sdp_pdp,
)
