"""Bundled suites of CDP and PDP layers: ``cdp_lut`` (LRN LUT, nv_small), ``cdp_int16`` and
``pdp_int16`` (nv_full)."""

from __future__ import annotations

import numpy as np

from .format import Hex
from .layer import PRI_BASE, Draft, cdp_lrn_registers, feature_io, lut_tables, reg
from .suite_sdp import I16_EDGES, NV_FULL_ATOM, PRIORITIES, as_int16_case, lut_config


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
    cdp_lrn_registers(d, w, h, c, src=src, dst=dst, line=line, surf=surf, precision=0, normalz_len=nl,
                      sqsum_bypass=sqsum_bypass, mul_bypass=mul_bypass)
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
    d.lut = {"unit": "CDP", "config": lut_config(rng, lo_v, top, le_fn, prio, max_select=20, cdp=True)}
    d.lut_tables = lut_tables(rng)
    d.tune = ("cdp_out", range(32))
    d.description = (f"CDP LRN window {taps}{' (sqsum bypass)' if sqsum_bypass else ''}, LE {le_fn}, priorities "
                     f"{'/'.join(prio)}, cube {c}x{h}x{w}")
    return d



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
        x = rng.choice(I16_EDGES, size=(c, h, w)).astype(np.int16)
    else:
        x = rng.integers(-32768, 32768, size=(c, h, w)).astype(np.int16)
    src, dst = PRI_BASE, PRI_BASE + 0x10000
    feature_io(d, "src", x, src, atom=atom)
    feature_io(d, "dst", np.zeros((c, oh, ow), dtype=np.int16), dst, atom=atom, output=True)
    pv = int(rng.integers(-32768, 32768))
    pads = [int(np.clip(n * pv, -(1 << 18), (1 << 18) - 1)) & 0x7FFFF for n in range(1, 8)]
    rw = round(65536 / kw) if rng.integers(0, 4) else int(rng.integers(0, 1 << 17))
    rh = round(65536 / kh) if rng.integers(0, 4) else int(rng.integers(0, 1 << 17))
    for blk in ("PDP_RDMA", "PDP"):
        d.registers += [reg(f"{blk}.D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=w - 1),
                        reg(f"{blk}.D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=h - 1),
                        reg(f"{blk}.D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=c - 1),
                        reg(f"{blk}.D_DATA_FORMAT", INPUT_DATA=1),
                        reg(f"{blk}.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src),
                        reg(f"{blk}.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
                        reg(f"{blk}.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=w * atom),
                        reg(f"{blk}.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=w * h * atom)]
    d.registers += [
        reg("PDP_RDMA.D_FLYING_MODE", FLYING_MODE=1), reg("PDP_RDMA.D_SRC_RAM_CFG", SRC_RAM_TYPE=1),
        reg("PDP_RDMA.D_OPERATION_MODE_CFG", SPLIT_NUM=0),
        reg("PDP_RDMA.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_WIDTH=sw - 1),
        reg("PDP_RDMA.D_POOLING_PADDING_CFG", PAD_WIDTH=pl),
        reg("PDP_RDMA.D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=w - 1, PARTIAL_WIDTH_IN_LAST=0, PARTIAL_WIDTH_IN_MID=0),
        reg("PDP.D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow - 1), reg("PDP.D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=oh - 1),
        reg("PDP.D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=c - 1),
        reg("PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1, SPLIT_NUM=0),
        reg("PDP.D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=w - 1, PARTIAL_WIDTH_IN_LAST=0, PARTIAL_WIDTH_IN_MID=0),
        reg("PDP.D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=ow - 1, PARTIAL_WIDTH_OUT_LAST=0, PARTIAL_WIDTH_OUT_MID=0),
        reg("PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1, KERNEL_STRIDE_WIDTH=sw - 1,
             KERNEL_STRIDE_HEIGHT=sh - 1),
        reg("PDP.D_RECIP_KERNEL_WIDTH", RECIP_KERNEL_WIDTH=rw), reg("PDP.D_RECIP_KERNEL_HEIGHT", RECIP_KERNEL_HEIGHT=rh),
        reg("PDP.D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_TOP=pt, PAD_RIGHT=pr, PAD_BOTTOM=pb),
        *[reg(f"PDP.D_POOLING_PADDING_VALUE_{n}_CFG", **{f"PAD_VALUE_{n}X": pads[n - 1]}) for n in range(1, 8)],
        reg("PDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), reg("PDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        reg("PDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=ow * atom), reg("PDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=ow * oh * atom),
        reg("PDP.D_DST_RAM_CFG", DST_RAM_TYPE=1),
    ]
    d.description = (f"PDP INT16 {('average', 'max', 'min')[method]} {kw}x{kh} stride {sw}x{sh}, padding "
                     f"l/t/r/b {pl}/{pt}/{pr}/{pb} value {pv}, recip {rw}/{rh}, cube {c}x{h}x{w}")
    return as_int16_case(d)


def gen_cdp_int16(rng: np.random.Generator, index: int) -> Draft:
    """CDP LRN INT16 (nv_full): tables aimed at the layer's square sums (up to ~2^36)."""
    d = Draft(unit="CDP", profile="nv_full", statistics=True)
    atom = NV_FULL_ATOM
    w, h, c = int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 40))
    if index % 4 == 0:
        x = rng.choice(I16_EDGES, size=(c, h, w)).astype(np.int16)
    else:
        x = rng.integers(-32768, 32768, size=(c, h, w)).astype(np.int16)
    src, dst = PRI_BASE, PRI_BASE + 0x10000
    line, surf = w * atom, w * h * atom
    feature_io(d, "src", x, src, atom=atom)
    feature_io(d, "dst", np.zeros((c, h, w), dtype=np.int16), dst, atom=atom, output=True)
    nl = int(rng.integers(0, 4))
    sqsum_bypass = int(index % 5 == 4)
    mul_bypass = int(rng.integers(0, 2))
    cdp_lrn_registers(d, w, h, c, src=src, dst=dst, line=line, surf=surf, precision=1, normalz_len=nl,
                      sqsum_bypass=sqsum_bypass, mul_bypass=mul_bypass)
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
    cfg = lut_config(rng, lo_v, top, le_fn, prio, max_select=40, cdp=True)
    for k in ("le_index_select", "lo_index_select"):  # INT16: 7-bit signed selects
        cfg[k] = int(np.clip(cfg[k], -64, 63))
    if le_fn == "exponent":  # the LE table spans up to 2^36 at INT16
        cfg["le_end"] = int(min(cfg["le_start"] + (1 << min(max(int(np.log2(max(top - cfg["le_start"], 2))) - 1,
                                                                cfg["le_index_offset"] + 1), 36)), (1 << 37) - 1))
    d.lut = {"unit": "CDP", "config": cfg}
    d.lut_tables = lut_tables(rng)
    d.tune = ("cdp_out", range(40))
    d.description = (f"CDP LRN INT16 window {taps}{' (sqsum bypass)' if sqsum_bypass else ''}, LE {le_fn}, priorities "
                     f"{'/'.join(prio)}, cube {c}x{h}x{w}")
    return as_int16_case(d)


