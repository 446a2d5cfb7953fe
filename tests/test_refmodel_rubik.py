"""Rubik reference model (harness/refmodel/rubik.py): every mode on small hand-worked cubes.

Rules under test (cmod NV_NVDLA_rbk.cpp, RTL NV_NVDLA_RUBIK_seq_gen.v / rf_ctrl.v); atoms are
32 bytes, k = 32 (INT8) or 16 (INT16/FP16) channels per surface; all strides in bytes:

* contract: in atom (so, h, ys, xs, w) at src + so*SURF + h*LINE + (ys*sx+xs)*CS0 + w*32 goes
  to dst + so*OSURF + (h*sy+ys)*OLINE + (w*sx+xs)*32 (RTL); the C model reads sub-cube
  ys*sx+xs at ((ys*sx+xs)*So + so)*SURF and writes output line (h, ys) at h*CS1 + ys*OLINE.
* split: element (c, h, w) of the feature cube -> plane c line h at dst + c*OPLANAR + h*OLINE,
  W*e bytes then zeros to the next 32-byte boundary.
* merge: plane c line h at src + c*PLANAR + h*LINE -> lane c%k of atom (c//k, h, w) at
  dst + s*OSURF + h*OLINE + w*32; lanes past the last channel are 0.
Expected bytes are written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from _regview import RegView
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import DmaPorts, InvalidLayer, ModelOptions
from nvdla_hil.harness.refmodel.rubik import run_rubik

RTL = ModelOptions(semantics="rtl", atom_bytes=32)
CMOD = ModelOptions(semantics="cmod", atom_bytes=32)
INT8, INT16, FP16 = 0, 1, 2
CONTRACT, SPLIT, MERGE = 0, 1, 2
GAP = 0xEE  # destination pre-fill: bytes the layer must not touch
JUNK = 0xCC  # source bytes the layer must not copy


def _rbk(mode, prec, *, w, h, cin, cout, src, dst, line=0, surf=0, planar=0, oline=0, osurf=0, oplanar=0,
         cs0=0, cs1=0, sx=1, sy=1, in_ram=1, out_ram=1) -> RegView:  # fmt: skip
    """RBK registers with natural values (sizes, strides in bytes, strides 1-based)."""
    v = RegView(profile="nv_full")
    v.set_field("RBK", "D_MISC_CFG", "RUBIK_MODE", mode).set_field("RBK", "D_MISC_CFG", "IN_PRECISION", prec)
    v.set_field("RBK", "D_DATAIN_SIZE_0", "DATAIN_WIDTH", w - 1)
    v.set_field("RBK", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT", h - 1)
    v.set("RBK", "D_DATAIN_SIZE_1", cin - 1).set("RBK", "D_DATAOUT_SIZE_1", cout - 1)
    v.set("RBK", "D_DAIN_ADDR_LOW", src & 0xFFFFFFFF).set("RBK", "D_DAIN_ADDR_HIGH", src >> 32)
    v.set("RBK", "D_DAOUT_ADDR_LOW", dst & 0xFFFFFFFF).set("RBK", "D_DAOUT_ADDR_HIGH", dst >> 32)
    for reg, val in (("D_DAIN_LINE_STRIDE", line), ("D_DAIN_SURF_STRIDE", surf), ("D_DAIN_PLANAR_STRIDE", planar),
                     ("D_DAOUT_LINE_STRIDE", oline), ("D_DAOUT_SURF_STRIDE", osurf),
                     ("D_DAOUT_PLANAR_STRIDE", oplanar), ("D_CONTRACT_STRIDE_0", cs0),
                     ("D_CONTRACT_STRIDE_1", cs1)):  # fmt: skip
        v.set("RBK", reg, val)
    v.set_field("RBK", "D_DECONV_STRIDE", "DECONV_X_STRIDE", sx - 1)
    v.set_field("RBK", "D_DECONV_STRIDE", "DECONV_Y_STRIDE", sy - 1)
    v.set("RBK", "D_DAIN_RAM_TYPE", in_ram).set("RBK", "D_DAOUT_RAM_TYPE", out_ram)
    return v


def _atom(fill_lanes: list[int], e: int = 1, rest: int = JUNK) -> np.ndarray:
    """One 32-byte atom: the given lane values (e bytes each, little-endian), then ``rest``."""
    b = np.full(32, rest, np.uint8)
    for j, x in enumerate(fill_lanes):
        b[j * e : (j + 1) * e] = list(int(x).to_bytes(e, "little"))
    return b


# ---- split ----------------------------------------------------------------------------------


def test_split_int8_one_surface():
    # W=3, H=2, C=3: element (c, h, w) = 1 + 40c + 12h + 3w, lanes 3..31 of each atom junk.
    # input line stride 0x80 (3 atoms + a gap), output line stride 32, planar stride 0x80.
    src, dst = 0x1000, 0x8000
    m = SparseMemory()
    for h in range(2):
        for w in range(3):
            m.write(src + h * 0x80 + w * 32, _atom([1 + 40 * c + 12 * h + 3 * w for c in range(3)]))
    m.write(dst, np.full(0x200, GAP, np.uint8))
    res = run_rubik(_rbk(SPLIT, INT8, w=3, h=2, cin=3, cout=3, src=src, dst=dst, line=0x80, surf=0x100,
                         oline=0x20, oplanar=0x80), m, RTL)  # fmt: skip
    z29 = [0] * 29
    assert m.read(dst + 0x00, 32).tolist() == [1, 4, 7] + z29  # plane 0, line 0
    assert m.read(dst + 0x20, 32).tolist() == [13, 16, 19] + z29  # plane 0, line 1
    assert m.read(dst + 0x80, 32).tolist() == [41, 44, 47] + z29  # plane 1, line 0
    assert m.read(dst + 0xA0, 32).tolist() == [53, 56, 59] + z29  # plane 1, line 1
    assert m.read(dst + 0x100, 32).tolist() == [81, 84, 87] + z29  # plane 2, line 0
    assert m.read(dst + 0x120, 32).tolist() == [93, 96, 99] + z29  # plane 2, line 1
    for gap in (0x40, 0xC0, 0x140):  # between planes: untouched
        assert m.read(dst + gap, 0x40).tolist() == [GAP] * 0x40
    assert res.stats == {("RBK", "D_PERF_READ_STALL"): 0, ("RBK", "D_PERF_WRITE_STALL"): 0}


def test_split_int16_two_surfaces():
    # k = 16: C = 18 -> surface 0 holds channels 0..15, surface 1 channels 16, 17 (lanes 0, 1).
    # W=2, H=1; element (c, 0, w) = 0x100*c + w + 0x1000; surface stride 0x100.
    src, dst = 0x0, 0x4000
    m = SparseMemory()
    for s in range(2):
        for w in range(2):
            chans = range(16 * s, min(16 * s + 16, 18))
            m.write(src + s * 0x100 + w * 32, _atom([0x1000 + 0x100 * c + w for c in chans], e=2))
    m.write(dst, np.full(18 * 0x40, GAP, np.uint8))
    run_rubik(_rbk(SPLIT, INT16, w=2, h=1, cin=18, cout=18, src=src, dst=dst, line=0x40, surf=0x100,
                   oline=0x20, oplanar=0x40), m, RTL)  # fmt: skip
    # plane c: [c0 lo, hi, c1 lo, hi] then 28 zeros; plane 17 = 0x2100, 0x2101 little-endian
    assert m.read(dst + 17 * 0x40, 32).tolist() == [0x00, 0x21, 0x01, 0x21] + [0] * 28
    assert m.read(dst + 3 * 0x40, 32).tolist() == [0x00, 0x13, 0x01, 0x13] + [0] * 28
    assert m.read(dst + 3 * 0x40 + 32, 32).tolist() == [GAP] * 32


def test_split_planes_longer_than_one_atom():
    # W = 40 int8: a plane line is 40 bytes -> written as 64 (24 zero bytes after the data)
    src, dst = 0x0, 0x2000
    m = SparseMemory()
    for w in range(40):
        m.write(src + w * 32, _atom([w + 1]))
    m.write(dst, np.full(128, GAP, np.uint8))
    run_rubik(_rbk(SPLIT, INT8, w=40, h=1, cin=1, cout=1, src=src, dst=dst, line=40 * 32, surf=40 * 32,
                   oline=64, oplanar=128), m, RTL)  # fmt: skip
    assert m.read(dst, 64).tolist() == list(range(1, 41)) + [0] * 24
    assert m.read(dst + 64, 64).tolist() == [GAP] * 64


# ---- merge ----------------------------------------------------------------------------------


def test_merge_int8_padding_lanes_zero():
    # C=3, W=2, H=2: plane c line h at src + c*0x100 + h*0x40 holds [v(c,h,0), v(c,h,1), junk...]
    # with v = 1 + 40c + 12h + 3w. Output atoms at dst + h*0x60 + w*32 (32-byte gap per line).
    src, dst = 0x1000, 0x9000
    m = SparseMemory()
    for c in range(3):
        for h in range(2):
            m.write(src + c * 0x100 + h * 0x40, _atom([1 + 40 * c + 12 * h, 4 + 40 * c + 12 * h]))
    m.write(dst, np.full(0xC0, GAP, np.uint8))
    run_rubik(_rbk(MERGE, INT8, w=2, h=2, cin=3, cout=3, src=src, dst=dst, line=0x40, planar=0x100,
                   oline=0x60, osurf=0x200), m, RTL)  # fmt: skip
    z29 = [0] * 29
    assert m.read(dst + 0x00, 32).tolist() == [1, 41, 81] + z29  # (h0, w0)
    assert m.read(dst + 0x20, 32).tolist() == [4, 44, 84] + z29  # (h0, w1)
    assert m.read(dst + 0x40, 32).tolist() == [GAP] * 32  # line gap untouched
    assert m.read(dst + 0x60, 32).tolist() == [13, 53, 93] + z29  # (h1, w0)
    assert m.read(dst + 0x80, 32).tolist() == [16, 56, 96] + z29  # (h1, w1)


def test_merge_fp16_two_surfaces():
    # k = 16, C = 17: channel 16 is lane 0 of surface 1 (at dst + OSURF). W=1, H=1.
    src, dst = 0x0, 0x5000
    m = SparseMemory()
    for c in range(17):
        m.write(src + c * 0x20, _atom([0x3C00 + c], e=2))  # fp16 bit patterns move unchanged
    run_rubik(_rbk(MERGE, FP16, w=1, h=1, cin=17, cout=17, src=src, dst=dst, line=0x20, planar=0x20,
                   oline=0x20, osurf=0x40), m, RTL)  # fmt: skip
    s0 = m.read(dst, 32).view("<u2").tolist()
    assert s0 == [0x3C00 + c for c in range(16)]
    assert m.read(dst + 0x40, 32).tolist() == [0x10, 0x3C] + [0] * 30


def test_merge_then_split_roundtrip_int16_wide():
    # W = 70 (> 64: two chunks), C = 5, H = 2: merge then split returns the planes
    rng = np.random.default_rng(3)
    planes = rng.integers(0, 256, size=(5, 2, 140), dtype=np.uint8)
    m = SparseMemory()
    for c in range(5):
        for h in range(2):
            m.write(0x10000 + c * 0x400 + h * 0x200, planes[c, h])
    run_rubik(_rbk(MERGE, INT16, w=70, h=2, cin=5, cout=5, src=0x10000, dst=0x40000, line=0x200,
                   planar=0x400, oline=70 * 32, osurf=2 * 70 * 32), m, RTL)  # fmt: skip
    run_rubik(_rbk(SPLIT, INT16, w=70, h=2, cin=5, cout=5, src=0x40000, dst=0x80000, line=70 * 32,
                   surf=2 * 70 * 32, oline=0x200, oplanar=0x400), m, RTL)  # fmt: skip
    for c in range(5):
        for h in range(2):
            assert np.array_equal(m.read(0x80000 + c * 0x400 + h * 0x200, 140), planes[c, h])
            assert m.read(0x80000 + c * 0x400 + h * 0x200 + 140, 20).tolist() == [0] * 20  # to 160 = 5 atoms


# ---- contract -------------------------------------------------------------------------------


def _contract_input(m, src, cube_stride, sx, sy, w, surf_stride=0, n_surf=1, line_stride=0, h=1, e=1):
    """Sub-cube k = ys*sx + xs, surface so, line y, width x: an atom whose every byte is
    16*k + x + 64*so + 128*y (mod 256) -- an atom label."""
    for so in range(n_surf):
        for y in range(h):
            for k in range(sx * sy):
                for x in range(w):
                    lab = (16 * k + x + 64 * so + 128 * y) & 0xFF
                    at = src + so * surf_stride + y * line_stride + k * cube_stride + x * 32
                    m.write(at, np.full(32, lab, np.uint8))


def _labels(m, addr, n):
    b = m.read(addr, 32 * n).reshape(n, 32)
    assert np.all(b == b[:, :1]), "atoms must move whole"
    return b[:, 0].tolist()


def test_contract_int8_2x2():
    # sx = sy = 2, W = 2, H = 1, Cout = 32 (one surface). Sub-cube k at src + k*0x100.
    # output line ys: atoms (w*2 + xs) <- sub-cube ys*2 + xs, width w:
    #   ys=0: [k0w0, k1w0, k0w1, k1w1] = [0x00, 0x10, 0x01, 0x11]
    #   ys=1: [k2w0, k3w0, k2w1, k3w1] = [0x20, 0x30, 0x21, 0x31]
    src, dst = 0x0, 0x8000
    m = SparseMemory()
    _contract_input(m, src, 0x100, 2, 2, 2, surf_stride=0x100)
    m.write(dst, np.full(0x200, GAP, np.uint8))
    v = _rbk(CONTRACT, INT8, w=2, h=1, cin=128, cout=32, src=src, dst=dst, line=0x40, surf=0x100,
             oline=0x100, osurf=0x400, cs0=0x100, cs1=0x200, sx=2, sy=2)  # fmt: skip
    for opts in (RTL, CMOD):  # consistent strides: CS0 = So*SURF, CS1 = sy*OLINE -> same result
        m.write(dst, np.full(0x200, GAP, np.uint8))
        run_rubik(v, m, opts)
        assert _labels(m, dst, 4) == [0x00, 0x10, 0x01, 0x11]
        assert _labels(m, dst + 0x100, 4) == [0x20, 0x30, 0x21, 0x31]
        assert m.read(dst + 0x80, 0x80).tolist() == [GAP] * 0x80


def test_contract_strides_rtl_vs_cmod():
    # sx = 2, sy = 1, W = 1, H = 2, Cout = 32. Registers deliberately inconsistent:
    # CS0 = 0x300 (RTL sub-cube stride), So*SURF = 0x100 (C model's), CS1 = 0x1000, OLINE = 0x40.
    src, dst = 0x0, 0x10000
    v = _rbk(CONTRACT, INT8, w=1, h=2, cin=64, cout=32, src=src, dst=dst, line=0x20, surf=0x100,
             oline=0x40, osurf=0x4000, cs0=0x300, cs1=0x1000, sx=2, sy=1)  # fmt: skip
    m = SparseMemory()
    # RTL reads sub-cube 1 at 0x300; the C model at 0x100. Label them differently.
    for y in range(2):
        m.write(src + y * 0x20, np.full(32, 0xA0 + y, np.uint8))  # sub-cube 0
        m.write(src + 0x300 + y * 0x20, np.full(32, 0xB0 + y, np.uint8))  # RTL sub-cube 1
        m.write(src + 0x100 + y * 0x20, np.full(32, 0xC0 + y, np.uint8))  # cmod sub-cube 1
    run_rubik(v, m, RTL)  # out line h at h*OLINE (sy = 1)
    assert _labels(m, dst, 2) == [0xA0, 0xB0]
    assert _labels(m, dst + 0x40, 2) == [0xA1, 0xB1]
    run_rubik(v, m, CMOD)  # out line h at h*CS1
    assert _labels(m, dst, 2) == [0xA0, 0xC0]
    assert _labels(m, dst + 0x1000, 2) == [0xA1, 0xC1]


def test_contract_int16_two_surfaces_two_lines():
    # sx = 3, sy = 1, W = 1, H = 2, Cout = 20 (k = 16 -> So = 2). SURF = 0x40, LINE = 0x20,
    # CS0 = 0x80 (= So*SURF). Output: surface so at dst + so*0x100, line h at h*0x60, 3 atoms.
    src, dst = 0x0, 0x20000
    m = SparseMemory()
    _contract_input(m, src, 0x80, 3, 1, 1, surf_stride=0x40, n_surf=2, line_stride=0x20, h=2)
    run_rubik(_rbk(CONTRACT, INT16, w=1, h=2, cin=60, cout=20, src=src, dst=dst, line=0x20, surf=0x40,
                   oline=0x60, osurf=0x100, cs0=0x80, cs1=0x60, sx=3, sy=1), m, RTL)  # fmt: skip
    # label = 16k + 64so + 128y
    assert _labels(m, dst, 3) == [0x00, 0x10, 0x20]
    assert _labels(m, dst + 0x60, 3) == [0x80, 0x90, 0xA0]
    assert _labels(m, dst + 0x100, 3) == [0x40, 0x50, 0x60]
    assert _labels(m, dst + 0x160, 3) == [0xC0, 0xD0, 0xE0]


def test_contract_x_stride_over_8():
    # sx = 9 (the RTL's 8-atom-piece path), W = 2: output atom w*9 + xs <- sub-cube xs, width w
    src, dst = 0x0, 0x40000
    m = SparseMemory()
    _contract_input(m, src, 0x40, 9, 1, 2)
    run_rubik(_rbk(CONTRACT, INT8, w=2, h=1, cin=288, cout=32, src=src, dst=dst, line=0x40, surf=0x40,
                   oline=0x400, osurf=0x800, cs0=0x40, cs1=0x400, sx=9), m, RTL)  # fmt: skip
    assert _labels(m, dst, 18) == [16 * k for k in range(9)] + [16 * k + 1 for k in range(9)]


def test_contract_ports():
    # input over CVIF (sec_mem), output over MCIF (pri_mem)
    pri, sec = SparseMemory(), SparseMemory()
    sec.write(0x0, np.full(32, 0x5A, np.uint8))
    v = _rbk(CONTRACT, INT8, w=1, h=1, cin=32, cout=32, src=0, dst=0x100, surf=0x20, cs0=0x20, oline=0x20,
             in_ram=0, out_ram=1)  # fmt: skip
    run_rubik(v, DmaPorts({"pri_mem": pri, "sec_mem": sec}), RTL)
    assert pri.read(0x100, 32).tolist() == [0x5A] * 32
    assert sec.read(0x100, 32).tolist() == [0] * 32


# ---- refusals -------------------------------------------------------------------------------


def test_refusals():
    m = SparseMemory()
    with pytest.raises(InvalidLayer, match="RUBIK_MODE"):
        run_rubik(_rbk(3, INT8, w=1, h=1, cin=1, cout=1, src=0, dst=0x100), m, RTL)
    with pytest.raises(InvalidLayer, match="IN_PRECISION"):
        run_rubik(_rbk(SPLIT, 3, w=1, h=1, cin=1, cout=1, src=0, dst=0x100), m, RTL)
    for mode in (SPLIT, MERGE):
        with pytest.raises(InvalidLayer, match="DATAOUT_CHANNEL"):
            run_rubik(_rbk(mode, INT8, w=1, h=1, cin=4, cout=3, src=0, dst=0x100), m, RTL)
