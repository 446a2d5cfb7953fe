"""INT16 datapaths of the reference model (nv_full) against exact Python-integer references.

Every reference below is written here from the rules (semantics doc sections 1-6, seed 000,
nvdla/hw nvdlav1 cmod/RTL as cited in the refmodel docstrings) with arbitrary-precision
Python ints, element by element - never by calling the code under test. Layer tests pack
their memory images here too (feature format and direct-convolution weight format of seed
000) and compare the bytes the model writes.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from _regview import RegView
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import ModelOptions, UnitNotModelled
from nvdla_hil.harness.refmodel.cdp import cdp_lrn, decode_cdp_lut
from nvdla_hil.harness.refmodel.cdp import CdpConfig
from nvdla_hil.harness.refmodel.conv import cacc_truncate, cdma_convert, conv_accumulate, ConvConfig, run_conv
from nvdla_hil.harness.refmodel.pdp import AVE, MAX, MIN, PdpConfig, pad_values, pool2d
from nvdla_hil.harness.refmodel.sdp import output_convert, run_sdp
from nvdla_hil.lut_registers import cdp_index_select

NV_FULL = ModelOptions.for_profile(load_profile("nv_full"))
I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1

# ---------------------------------------------------------------------------------------
# exact scalar primitives (Python ints)
# ---------------------------------------------------------------------------------------


def clamp(v: int, n: int) -> int:
    return max(-(1 << (n - 1)), min((1 << (n - 1)) - 1, v))


def rnd(v: int, s: int) -> int:
    """v / 2^s, ties away from zero (semantics doc 1.1), by exact rational comparison."""
    if s == 0:
        return v
    q, r = divmod(v, 1 << s)  # floor
    twice = 2 * r
    if twice > (1 << s) or (twice == (1 << s) and v >= 0):
        q += 1
    return q


def rsat(v: int, s: int, n: int) -> int:
    return clamp(rnd(v, s), n)


def flag_rtl(v: int, s: int, n: int) -> bool:
    """Rule 1.2, RTL: floor outside n bits, or a positive value whose floor is max rounding up."""
    f = v >> s
    hi, lo = (1 << (n - 1)) - 1, -(1 << (n - 1))
    return f < lo or f > hi or (v >= 0 and f == hi and rnd(v, s) == f + 1)


def flag_cmod(v: int, s: int, n: int) -> bool:
    return abs((v >> s) - rsat(v, s, n)) > 1


def sxi(v: int, n: int) -> int:
    v &= (1 << n) - 1
    return v - (1 << n) if v >> (n - 1) else v


# ---------------------------------------------------------------------------------------
# SDP output convertor, INT16 and INT8 stores (section 2; cmod sdp_c.cpp IntSaturation<17,16|8>)
# ---------------------------------------------------------------------------------------

i32 = st.integers(-(1 << 31), (1 << 31) - 1)


@settings(max_examples=300, deadline=None)
@given(x=st.lists(i32, min_size=1, max_size=20), offset=i32, scale=st.integers(I16_MIN, I16_MAX),
       shift=st.integers(0, 63), out_bits=st.sampled_from([8, 16]), sem=st.sampled_from(["rtl", "cmod"]))
@example(x=[65535, 65536, -65536, -65537, 32767, 32768, -32768, -32769], offset=0, scale=1, shift=0, out_bits=16,
         sem="rtl")
@example(x=[(1 << 31) - 1, -(1 << 31)], offset=-(1 << 31), scale=I16_MIN, shift=48, out_bits=16, sem="rtl")
@example(x=[131071, 131070, -131073, -131072], offset=0, scale=1, shift=1, out_bits=16, sem="rtl")
@example(x=[131071, -131073], offset=0, scale=1, shift=1, out_bits=16, sem="cmod")
def test_sdp_output_convertor_int16_edges(x, offset, scale, shift, out_bits, sem):
    y, flag = output_convert(np.array(x, dtype=np.int64), offset=offset, scale=scale, shift=shift,
                             out_bits=out_bits, semantics=sem)  # fmt: skip
    for i, xi in enumerate(x):
        p = (xi - offset) * scale  # exact 49-bit product
        if sem == "rtl" and shift >= 49:
            want, wflag = 0, False
        else:
            want = clamp(rsat(p, shift, 17), out_bits)  # 17-bit RSAT, then the silent store clamp
            wflag = (flag_rtl if sem == "rtl" else flag_cmod)(p, shift, 17) if shift else not -(1 << 16) <= p < (1 << 16)
        assert int(y[i]) == want, (xi, p)
        assert bool(flag[i]) == wflag, (xi, p)


# ---------------------------------------------------------------------------------------
# CDMA convertor at INT16 (cdma_cvt.cpp: 17-bit input, IntShiftRight<34,6,17>, IntSaturation<17,16>)
# ---------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(x=st.lists(st.integers(I16_MIN, I16_MAX), min_size=1, max_size=16), off=st.integers(I16_MIN, I16_MAX),
       scale=st.integers(I16_MIN, I16_MAX), t=st.integers(0, 63))
@example(x=[I16_MIN, I16_MAX, 0, -1], off=I16_MAX, scale=I16_MIN, t=0)
def test_cdma_convertor_int16(x, off, scale, t):
    got = cdma_convert(np.array(x), offset=off, scale=scale, truncate=t, out_bits=16)
    assert [int(g) for g in got] == [clamp(rsat((xi - off) * scale, t, 17), 16) for xi in x]


# ---------------------------------------------------------------------------------------
# CACC at INT16: 48-bit saturating partial sums, truncation to 32 bits
# ---------------------------------------------------------------------------------------

i48 = st.integers(-(1 << 47), (1 << 47) - 1)


@settings(max_examples=300, deadline=None)
@given(a=st.lists(i48, min_size=1, max_size=16), t=st.integers(0, 16), sem=st.sampled_from(["rtl", "cmod"]))
@example(a=[(1 << 47) - 1, -(1 << 47), (1 << 31) * 2 - 1, -(1 << 32) - 1, 0x7FFFFFFF, -(1 << 31) - 1], t=0, sem="rtl")
@example(a=[(0x7FFFFFFF << 16) + (1 << 15), (0x7FFFFFFF << 16) + (1 << 15) - 1, -(1 << 47)], t=16, sem="rtl")
@example(a=[(0x7FFFFFFF << 16) + (1 << 15)], t=16, sem="cmod")
def test_cacc_truncate_48bit(a, t, sem):
    out, nsat = cacc_truncate(np.array(a, dtype=np.int64), t, semantics=sem)
    want_sat = 0
    for i, ai in enumerate(a):
        r = rnd(ai, t)
        want = clamp(r, 32)
        if sem == "rtl":
            f = flag_rtl(ai, t, 32) if t else not -(1 << 31) <= ai < (1 << 31)
        else:
            f = not -(1 << 31) <= r < (1 << 31)
        want_sat += f
        assert int(out[i]) == want, ai
    assert nsat == want_sat


def _ref_conv_int16(d, w, pad_value, atomic_c, stride=1):
    """Python-int direct convolution with 48-bit saturation after every (channel slice,
    kernel position) step, slice outer (nvdlav1 NV_NVDLA_CACC_CALC_int16.v / cmod)."""
    C, H, W = len(d), len(d[0]), len(d[0][0])
    K, _, KH, KW = len(w), len(w[0]), len(w[0][0]), len(w[0][0][0])
    OH, OW = (H - KH) // stride + 1, (W - KW) // stride + 1
    lim = (1 << 47) - 1
    out = [[[0] * OW for _ in range(OH)] for _ in range(K)]
    for k in range(K):
        for oy in range(OH):
            for ox in range(OW):
                acc = 0
                for s in range(0, C, atomic_c):
                    for ky in range(KH):
                        for kx in range(KW):
                            step = sum(int(w[k][c][ky][kx]) * int(d[c][oy * stride + ky][ox * stride + kx])
                                       for c in range(s, min(C, s + atomic_c)))
                            acc = max(-lim - 1, min(lim, acc + step))
                out[k][oy][ox] = acc
    return out


def test_cacc_int16_partial_sums_saturate_at_48_bits():
    # a product of -32768 * -32768 is 2^30; 2^17 of them reach 2^47. 16 channel slices of 64
    # x 144 kernel positions: kernel 0 saturates and stays; kernel 1 saturates in slices
    # 0..14 and the negative slice 15 then starts from 2^47 - 1, not from the exact sum.
    C, K, KH, KW = 1024, 2, 12, 12
    d = np.full((C, KH, KW), -32768, dtype=np.int64)
    w = np.full((K, C, KH, KW), -32768, dtype=np.int64)
    w[1, 960:] = 32767
    cfg = ConvConfig(in_w=KW, in_h=KH, in_c=C, k_w=KW, k_h=KH, out_w=1, out_h=1, out_k=K)
    ref = _ref_conv_int16(d.tolist(), w.tolist(), 0, 64)
    lim = (1 << 47) - 1
    assert ref[0][0][0] == lim
    assert ref[1][0][0] == lim - 64 * 144 * 32767 * 32768  # saturation happened before slice 15
    for sem in ("rtl", "cmod"):
        got = conv_accumulate(d, w, cfg, atomic_c=64, semantics=sem, psum_bits=48, cmod_saturates=True)
        assert got[:, 0, 0].tolist() == [ref[k][0][0] for k in range(K)], sem


# ---------------------------------------------------------------------------------------
# End to end: INT16 direct convolution on a hand-packed nv_full layer (seed 000 formats)
# ---------------------------------------------------------------------------------------


def _pack_feature16(arr, base, line, surf, mem, lanes=16):
    C, H, W = arr.shape
    buf = {}
    for c in range(C):
        for y in range(H):
            for x in range(W):
                a = base + (c // lanes) * surf + y * line + (x * lanes + c % lanes) * 2
                buf[a] = int(arr[c, y, x]) & 0xFFFF
    for a, v in buf.items():
        mem.write(a, np.array([v & 0xFF, v >> 8], dtype=np.uint8))


def _pack_weights16(w, base, mem, kgroup=16, cslice=64):
    """Seed 000 direct-convolution weights at INT16: groups of 16 kernels, 1x1x64-element
    cubes (128 bytes; the last holding C mod 64), scanned C' -> K -> W -> H -> C."""
    K, C, KH, KW = w.shape
    out = []
    for g in range(0, K, kgroup):
        ks = range(g, min(K, g + kgroup))
        for s in range(0, C, cslice):
            cs = range(s, min(C, s + cslice))
            for ky in range(KH):
                for kx in range(KW):
                    for k in ks:
                        for c in cs:
                            out.append(int(w[k, c, ky, kx]) & 0xFFFF)
    raw = np.array(out, dtype=np.uint16).astype("<u2").view(np.uint8)
    mem.write(base, raw)
    return raw.size


def _conv16_layer(d, w, *, pad_value=0, truncate=0, cvt=(0, 1, 0), out_cvt=(0, 1, 0)):
    C, H, W = d.shape
    K, _, KH, KW = w.shape
    OH, OW = H - KH + 1, W - KW + 1
    mem = SparseMemory()
    v = RegView(profile="nv_full")
    S = v.set_field
    line, surf = W * 32, W * H * 32
    _pack_feature16(d, 0x1000, line, surf, mem)
    nbytes = _pack_weights16(w, 0x100000, mem)
    for b in ("CDMA", "CSC", "CACC", "CMAC_A", "CMAC_B"):
        S(b, "D_MISC_CFG", "PROC_PRECISION", 1)
    for b in ("CDMA", "CSC"):
        S(b, "D_MISC_CFG", "IN_PRECISION", 1)
    v.regs[("CDMA", "D_DAIN_ADDR_LOW_0")] = 0x1000
    v.regs[("CDMA", "D_LINE_STRIDE")] = line
    v.regs[("CDMA", "D_SURF_STRIDE")] = surf
    S("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH", W - 1)
    S("CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT", H - 1)
    S("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL", C - 1)
    S("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT", W - 1)
    S("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT", H - 1)
    S("CSC", "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT", C - 1)
    atoms = -(-C * 2 // 32)  # nvdlav1 cmod: 128-byte entries, 1/2/3 remaining atoms -> W/4, W/2, W
    ent = (atoms // 4) * W + {0: 0, 1: (W + 3) // 4, 2: (W + 1) // 2, 3: W}[atoms % 4]
    for b in ("CDMA", "CSC"):
        S(b, "D_ENTRY_PER_SLICE", "ENTRIES", ent - 1)
        S(b, "D_BANK", "DATA_BANK", 7)
        S(b, "D_BANK", "WEIGHT_BANK", 7)
    v.regs[("CDMA", "D_WEIGHT_ADDR_LOW")] = 0x100000
    S("CDMA", "D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL", KW * KH * C * 2 - 1)
    S("CDMA", "D_WEIGHT_SIZE_1", "WEIGHT_KERNEL", K - 1)
    v.regs[("CDMA", "D_WEIGHT_BYTES")] = nbytes
    S("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT", KW - 1)
    S("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT", KH - 1)
    S("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT", C - 1)
    S("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL", K - 1)
    S("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH", OW - 1)
    S("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT", OH - 1)
    S("CSC", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL", K - 1)
    S("CSC", "D_ZERO_PADDING_VALUE", "PAD_VALUE", pad_value & 0xFFFF)
    off, scale, trunc = cvt
    if cvt != (0, 1, 0):
        S("CDMA", "D_CVT_CFG", "CVT_EN", 1)
        S("CDMA", "D_CVT_CFG", "CVT_TRUNCATE", trunc)
        S("CDMA", "D_CVT_OFFSET", "CVT_OFFSET", off & 0xFFFF)
        S("CDMA", "D_CVT_SCALE", "CVT_SCALE", scale & 0xFFFF)
    S("CACC", "D_CLIP_CFG", "CLIP_TRUNCATE", truncate)
    S("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE", 1)
    S("SDP", "D_DATA_CUBE_WIDTH", "WIDTH", OW - 1)
    S("SDP", "D_DATA_CUBE_HEIGHT", "HEIGHT", OH - 1)
    S("SDP", "D_DATA_CUBE_CHANNEL", "CHANNEL", K - 1)
    S("SDP", "D_DATA_FORMAT", "PROC_PRECISION", 1)
    S("SDP", "D_DATA_FORMAT", "OUT_PRECISION", 1)
    for stage in ("BS", "BN", "EW"):
        S("SDP", f"D_DP_{stage}_CFG", f"{stage}_BYPASS", 1)
    v.regs[("SDP", "D_CVT_OFFSET")] = out_cvt[0] & 0xFFFFFFFF
    S("SDP", "D_CVT_SCALE", "CVT_SCALE", out_cvt[1] & 0xFFFF)
    S("SDP", "D_CVT_SHIFT", "CVT_SHIFT", out_cvt[2])
    S("SDP", "D_PERF_ENABLE", "PERF_SAT_EN", 1)
    oline, osurf = OW * 32, OW * OH * 32
    v.regs[("SDP", "D_DST_BASE_ADDR_LOW")] = 0x400000
    v.regs[("SDP", "D_DST_LINE_STRIDE")] = oline
    v.regs[("SDP", "D_DST_SURFACE_STRIDE")] = osurf
    return v, mem, (OH, OW, oline, osurf)


@pytest.mark.parametrize("C,K,KH,KW,H,W,truncate,pad_value", [
    (70, 18, 2, 3, 3, 4, 6, 0),     # two channel slices (64 + 6), two kernel groups (16 + 2)
    (16, 5, 1, 1, 2, 2, 0, 0),      # 1x1, K < 16, outputs clamp at int16
    (33, 20, 3, 2, 4, 3, 16, -3),   # CLIP_TRUNCATE 16 (the cmod's maximum)
])
def test_int16_direct_convolution_end_to_end(C, K, KH, KW, H, W, truncate, pad_value):
    rng = np.random.default_rng(C * 1000 + K)
    d = rng.integers(I16_MIN, I16_MAX + 1, size=(C, H, W))
    w = rng.integers(I16_MIN, I16_MAX + 1, size=(K, C, KH, KW))
    v, mem, (OH, OW, oline, osurf) = _conv16_layer(d, w, truncate=truncate, pad_value=pad_value,
                                                   out_cvt=(17, 3, 5))  # fmt: skip
    res = run_conv(v, mem, NV_FULL)
    acc = _ref_conv_int16(d.tolist(), w.tolist(), pad_value, 64)
    kp = -(-K // 16) * 16
    raw = mem.read(0x400000, osurf * (kp // 16)).view("<i2")
    want_sat = want_cacc_sat = 0
    for k in range(kp):
        for y in range(OH):
            for x in range(OW):
                if k < K:
                    a = acc[k][y][x]
                    c32 = clamp(rnd(a, truncate), 32)
                    want_cacc_sat += flag_rtl(a, truncate, 32) if truncate else not -(1 << 31) <= a < (1 << 31)
                else:
                    c32 = 0  # lanes past K carry 0 into SDP
                p = (c32 - 17) * 3
                want = clamp(rsat(p, 5, 17), 16)
                want_sat += flag_rtl(p, 5, 17)
                got = int(raw[(k // 16) * osurf // 2 + y * oline // 2 + x * 16 + k % 16])
                assert got == want, (k, y, x)
    assert res.stats[("CACC", "D_OUT_SATURATION")] == want_cacc_sat
    assert res.stats[("SDP", "D_PERF_OUT_SATURATION")] == want_sat


def test_int16_conv_cdma_convertor_and_pad_value():
    # 3x3 input, 2x2 kernel, no padding registers: the pad value must not leak; CVT on
    rng = np.random.default_rng(3)
    d = rng.integers(I16_MIN, I16_MAX + 1, size=(3, 3, 3))
    w = rng.integers(-100, 100, size=(2, 3, 2, 2))
    v, mem, (OH, OW, oline, osurf) = _conv16_layer(d, w, cvt=(-1234, -3, 2), truncate=4, pad_value=0x7FFF)
    run_conv(v, mem, NV_FULL)
    dc = [[[clamp(rsat((int(d[c, y, x]) + 1234) * -3, 2, 17), 16) for x in range(3)] for y in range(3)] for c in range(3)]
    acc = _ref_conv_int16(dc, w.tolist(), 0, 64)
    raw = mem.read(0x400000, osurf).view("<i2")
    for k in range(2):
        for y in range(OH):
            for x in range(OW):
                want = clamp(rsat(clamp(rnd(acc[k][y][x], 4), 32), 0, 17), 16)
                assert int(raw[y * oline // 2 + x * 16 + k]) == want


def test_int16_conv_refuses_mixed_precision():
    d = np.ones((4, 1, 1), dtype=np.int64)
    w = np.ones((1, 4, 1, 1), dtype=np.int64)
    v, mem, _ = _conv16_layer(d, w)
    v.set_field("CDMA", "D_MISC_CFG", "IN_PRECISION", 0)  # int8 features, int16 pipeline
    with pytest.raises(UnitNotModelled, match="converts no precision"):
        run_conv(v, mem, NV_FULL)


# ---------------------------------------------------------------------------------------
# SDP from memory: 16->16, 16->8 (PROC INT8), 8->16 lane geometry and arithmetic
# ---------------------------------------------------------------------------------------


def _sdp_layer(x, in16, proc16, out16, *, bs_alu=None, bs_mul=None, relu=False, cvt=(0, 1, 0)):
    C, H, W = x.shape
    mem = SparseMemory()
    v = RegView(profile="nv_full")
    S = v.set_field
    line, surf = W * 32, W * H * 32
    lanes = 16 if in16 else 32
    nsurf = -(-C // lanes) + (1 if in16 and not proc16 else 0)  # an extra surface for 16->8 pairs
    for c in range(C):
        for y in range(H):
            for xx in range(W):
                a = 0x1000 + (c // lanes) * surf + y * line + (xx * lanes + c % lanes) * (2 if in16 else 1)
                val = int(x[c, y, xx])
                mem.write(a, np.array([val & 0xFF, (val >> 8) & 0xFF][: 2 if in16 else 1], dtype=np.uint8))
    del nsurf
    for b in ("SDP_RDMA", "SDP"):
        S(b, "D_DATA_CUBE_WIDTH", "WIDTH", W - 1)
        S(b, "D_DATA_CUBE_HEIGHT", "HEIGHT", H - 1)
        S(b, "D_DATA_CUBE_CHANNEL", "CHANNEL", C - 1)
    v.regs[("SDP_RDMA", "D_SRC_BASE_ADDR_LOW")] = 0x1000
    v.regs[("SDP_RDMA", "D_SRC_LINE_STRIDE")] = line
    v.regs[("SDP_RDMA", "D_SRC_SURFACE_STRIDE")] = surf
    S("SDP_RDMA", "D_FEATURE_MODE_CFG", "FLYING_MODE", 0)
    S("SDP_RDMA", "D_FEATURE_MODE_CFG", "IN_PRECISION", int(in16))
    S("SDP_RDMA", "D_FEATURE_MODE_CFG", "PROC_PRECISION", int(proc16))
    S("SDP_RDMA", "D_FEATURE_MODE_CFG", "OUT_PRECISION", int(out16))
    S("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE", 0)
    S("SDP", "D_DATA_FORMAT", "PROC_PRECISION", int(proc16))
    S("SDP", "D_DATA_FORMAT", "OUT_PRECISION", int(out16))
    for dma in ("BRDMA", "NRDMA", "ERDMA"):
        S("SDP_RDMA", f"D_{dma}_CFG", f"{dma}_DISABLE", 1)
    S("SDP", "D_DP_BN_CFG", "BN_BYPASS", 1)
    S("SDP", "D_DP_EW_CFG", "EW_BYPASS", 1)
    if bs_alu is None and bs_mul is None and not relu:
        S("SDP", "D_DP_BS_CFG", "BS_BYPASS", 1)
    else:
        v.set("SDP", "D_DP_BS_CFG", 0)
        S("SDP", "D_DP_BS_CFG", "BS_ALU_BYPASS", int(bs_alu is None))
        S("SDP", "D_DP_BS_CFG", "BS_ALU_ALGO", 2)
        S("SDP", "D_DP_BS_CFG", "BS_MUL_BYPASS", int(bs_mul is None))
        S("SDP", "D_DP_BS_CFG", "BS_RELU_BYPASS", int(not relu))
        if bs_alu is not None:
            S("SDP", "D_DP_BS_ALU_CFG", "BS_ALU_SHIFT_VALUE", bs_alu[1])
            S("SDP", "D_DP_BS_ALU_SRC_VALUE", "BS_ALU_OPERAND", bs_alu[0] & 0xFFFF)
        if bs_mul is not None:
            S("SDP", "D_DP_BS_MUL_CFG", "BS_MUL_SHIFT_VALUE", bs_mul[1])
            S("SDP", "D_DP_BS_MUL_SRC_VALUE", "BS_MUL_OPERAND", bs_mul[0] & 0xFFFF)
    v.regs[("SDP", "D_CVT_OFFSET")] = cvt[0] & 0xFFFFFFFF
    S("SDP", "D_CVT_SCALE", "CVT_SCALE", cvt[1] & 0xFFFF)
    S("SDP", "D_CVT_SHIFT", "CVT_SHIFT", cvt[2])
    v.regs[("SDP", "D_DST_BASE_ADDR_LOW")] = 0x100000
    v.regs[("SDP", "D_DST_LINE_STRIDE")] = line
    v.regs[("SDP", "D_DST_SURFACE_STRIDE")] = surf
    return v, mem, line, surf


def _sdp_ref(xi, bs_alu, bs_mul, relu, cvt, out_bits):
    t = xi
    if bs_alu is not None or bs_mul is not None or relu:
        a = t if bs_alu is None else t + clamp(bs_alu[0] * (1 << bs_alu[1]), 32)
        p = a if bs_mul is None else a * bs_mul[0]
        s = (bs_mul[1] & 63) if bs_mul is not None else 0
        t = rsat(p, s, 32)
        if relu:
            t = max(t, 0)
    return clamp(rsat((t - cvt[0]) * cvt[1], cvt[2], 17), out_bits)


@pytest.mark.parametrize("mode,C", [("16to16", 21), ("16to8", 21), ("16to8", 40), ("8to16", 10), ("8to16", 45)])
def test_sdp_int16_modes_lanes_and_values(mode, C):
    in16, out16 = mode != "8to16", mode != "16to8"
    proc16 = mode == "16to16"
    H, W = 2, 3
    rng = np.random.default_rng(C)
    lo, hi = (I16_MIN, I16_MAX) if in16 else (-128, 127)
    x = rng.integers(lo, hi + 1, size=(C, H, W))
    bs_alu, bs_mul, cvt = (-20000, 1), (-1234, 7), (311, -5, 6)
    v, mem, line, surf = _sdp_layer(x, in16, proc16, out16, bs_alu=bs_alu, bs_mul=bs_mul, relu=False, cvt=cvt)
    res = run_sdp(v, mem, NV_FULL)
    out_bits = 16 if out16 else 8
    olanes = 16 if out16 else 32
    # lanes the hardware writes: 16->8: ceil(C/32) int8 atoms of 32 lanes (the int16 input read
    # in surface pairs); 8->16: two int16 surfaces per int8 atom; 16->16: ceil(C/16) surfaces
    nsurf = {"16to16": -(-C // 16), "16to8": -(-C // 32), "8to16": 2 * -(-C // 32)}[mode]
    raw = mem.read(0x100000, nsurf * surf)
    vals = raw.view("<i2") if out16 else raw.view(np.int8)
    bpe = out_bits // 8
    for c in range(nsurf * olanes):
        for y in range(H):
            for xx in range(W):
                xi = int(x[c, y, xx]) if c < C else 0  # padding lanes: memory is zero
                want = _sdp_ref(xi, bs_alu, bs_mul, False, cvt, out_bits)
                got = int(vals[((c // olanes) * surf + y * line + (xx * olanes + c % olanes) * bpe) // bpe])
                assert got == want, (c, y, xx)
    assert res.elements == nsurf * olanes * H * W
    # nothing beyond the written surfaces
    assert not mem.read(0x100000 + nsurf * surf, surf).any()


def test_sdp_int16_proc_with_int8_out_is_refused():
    x = np.zeros((4, 1, 1), dtype=np.int64)
    v, mem, _, _ = _sdp_layer(x, True, True, False)
    with pytest.raises(UnitNotModelled, match="PROC_PRECISION = INT8"):
        run_sdp(v, mem, NV_FULL)


@settings(max_examples=150, deadline=None)
@given(xs=st.lists(st.integers(I16_MIN, I16_MAX), min_size=1, max_size=8), alu=st.integers(I16_MIN, I16_MAX),
       alu_shift=st.integers(0, 63), mul=st.integers(I16_MIN, I16_MAX), mul_shift=st.integers(0, 255),
       relu=st.booleans(), prelu=st.booleans())
@example(xs=[I16_MIN, I16_MAX], alu=I16_MIN, alu_shift=63, mul=I16_MIN, mul_shift=0, relu=False, prelu=False)
@example(xs=[I16_MAX], alu=I16_MAX, alu_shift=16, mul=I16_MAX, mul_shift=1, relu=False, prelu=True)
def test_sdp_bs_stage_int16_operands(xs, alu, alu_shift, mul, mul_shift, relu, prelu):
    from nvdla_hil.harness.refmodel.sdp import bs_bn_stage

    got = bs_bn_stage(np.array(xs), alu_bypass=False, alu_algo=2, alu_op=alu, alu_shift=alu_shift, mul_bypass=False,
                      mul_prelu=prelu, mul_op=mul, mul_shift=mul_shift, relu_bypass=not relu, semantics="cmod")
    for i, xi in enumerate(xs):
        a = xi + clamp(alu * (1 << alu_shift), 32)  # LSAT into 32 bits, exact 33-bit sum
        if prelu and a >= 0:
            t = sxi(a, 32)
        else:
            t = rsat(a * mul, mul_shift & 63, 32)  # 6 used bits of the 8-bit MUL shift field
        if relu:
            t = max(t, 0)
        assert int(got[i]) == t


# ---------------------------------------------------------------------------------------
# PDP INT16
# ---------------------------------------------------------------------------------------


def _int_sign_extend(value: int, k: int, width: int = 32) -> int:
    """Transcription of the rule of nvdlav1 cmod int_sign_extend (replicate bit k above it,
    OR with the raw value), the result read as a ``width``-bit signed value."""
    sign = (value >> k) & 1
    ext = 0
    for _ in range(width - k - 1):
        ext = (ext << 1) | sign
    return sxi((ext << (k + 1)) | value, width)


@given(raw=st.lists(st.integers(0, (1 << 19) - 1), min_size=7, max_size=7))
@example(raw=[0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x1FFFF, 0x20000, 0x7FFFF])
@example(raw=[0x4FFFF] * 7)
def test_pdp_int16_padding_values(raw):
    got = pad_values(raw, bits=16)
    assert got[0] == 0
    assert list(got[1:]) == [_int_sign_extend(v, k) for v, k in zip(raw, (15, 16, 17, 17, 18, 18, 18))]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), method=st.sampled_from([AVE, MAX, MIN]))
def test_pdp_int16_pool2d(data, method):
    kw, kh = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    sw, sh = data.draw(st.integers(1, kw)), data.draw(st.integers(1, kh))
    pl, pr = data.draw(st.integers(0, kw - 1)), data.draw(st.integers(0, kw - 1))
    pt, pb = data.draw(st.integers(0, kh - 1)), data.draw(st.integers(0, kh - 1))
    w, h = data.draw(st.integers(kw, 6)), data.draw(st.integers(kh, 5))
    vals = data.draw(st.lists(st.integers(I16_MIN, I16_MAX), min_size=w * h * 2, max_size=w * h * 2))
    x = np.array(vals, dtype=np.int64).reshape(h, w, 2)
    pads_raw = data.draw(st.lists(st.integers(0, (1 << 19) - 1), min_size=7, max_size=7))
    rw, rh = data.draw(st.integers(0, (1 << 17) - 1)), data.draw(st.integers(0, (1 << 17) - 1))
    P = [0] + [_int_sign_extend(v, k) for v, k in zip(pads_raw, (15, 16, 17, 17, 18, 18, 18))]
    cfg = PdpConfig(method=method, kernel_w=kw, kernel_h=kh, stride_w=sw, stride_h=sh, pad_left=pl, pad_top=pt,
                    pad_right=pr, pad_bottom=pb, recip_w=rw, recip_h=rh, pad_value=pad_values(pads_raw, 16), bits=16)
    ow, oh = (w + pl + pr - kw) // sw + 1, (h + pt + pb - kh) // sh + 1
    got = pool2d(x, cfg, ow, oh)
    assert got.dtype == np.int16
    for oy in range(oh):
        for ox in range(ow):
            xs = [ox * sw - pl + i for i in range(kw)]
            ys = [oy * sh - pt + j for j in range(kh)]
            rx = [i for i in xs if 0 <= i < w]
            ry = [j for j in ys if 0 <= j < h]
            nw, nh = kw - len(rx), kh - len(ry)
            for lane in range(2):
                real = [int(x[j, i, lane]) for j in ry for i in rx]
                if method == AVE:
                    s = sum(real) + (kh - nh) * P[min(nw, 7)] + kw * P[min(nh, 7)]
                    want = sxi(rnd(rnd(s * rw, 16) * rh, 16), 16)  # low 16 bits, no clamp
                elif method == MAX:
                    want = max(real)
                else:
                    want = min(real)
                assert int(got[oy, ox, lane]) == want, (oy, ox, lane)


# ---------------------------------------------------------------------------------------
# CDP INT16 convertors and select decoding
# ---------------------------------------------------------------------------------------


@given(byte=st.integers(0, 255))
def test_cdp_int16_select_decoding(byte):
    assert cdp_index_select(byte, "rtl", 16) == sxi(byte & 0x7F, 7)
    want_cmod = sxi(byte & 0x7F, 7) if byte & 0x40 else byte
    assert cdp_index_select(byte, "cmod", 16) == want_cmod


@settings(max_examples=100, deadline=None)
@given(xs=st.lists(st.integers(I16_MIN, I16_MAX), min_size=1, max_size=12), din_off=st.integers(I16_MIN, I16_MAX),
       din_scale=st.integers(I16_MIN, I16_MAX), din_shift=st.integers(0, 31), dout_off=st.integers(-(1 << 31), (1 << 31) - 1),
       dout_scale=st.integers(I16_MIN, I16_MAX), dout_shift=st.integers(0, 63), sem=st.sampled_from(["rtl", "cmod"]))
@example(xs=[I16_MIN, I16_MAX], din_off=I16_MAX, din_scale=I16_MIN, din_shift=0, dout_off=-(1 << 31),
         dout_scale=I16_MIN, dout_shift=0, sem="rtl")
def test_cdp_int16_convertors_sqsum_bypass_mul_bypass(xs, din_off, din_scale, din_shift, dout_off, dout_scale,
                                                      dout_shift, sem):  # fmt: skip
    # SQSUM and MUL bypassed, both tables linear with a huge underflow start and slope 0:
    # every element underflows to LE[0] = LO[0] = r, so out = cvt_out(r) and the input
    # convertor only decides... nothing; then MUL on: out = cvt_out(r * x17).
    from nvdla_hil.harness.refmodel.lut import LutParams

    lut = LutParams(le_function="linear", le_start=(1 << 37) - 1, lo_start=(1 << 37) - 1, le_end=(1 << 37) - 1,
                    lo_end=(1 << 37) - 1)
    le = np.full(65, 1234, dtype=np.uint16)
    lo = np.full(257, 1234, dtype=np.uint16)
    for mul_bypass in (True, False):
        cfg = CdpConfig(sqsum_bypass=True, mul_bypass=mul_bypass, datin_offset=din_off, datin_scale=din_scale,
                        datin_shifter=din_shift, datout_offset=dout_off, datout_scale=dout_scale,
                        datout_shifter=dout_shift, bits=16)
        x = np.array(xs, dtype=np.int64)[None, :]
        out, stats, nsat = cdp_lrn(x, len(xs), cfg, le, lo, lut, sem)
        assert out.dtype == np.int16
        want_sat = 0
        for i, xi in enumerate(xs):
            x17 = rsat((xi - din_off) * din_scale, din_shift, 17)
            v = 1234 if mul_bypass else 1234 * x17
            t = (v - dout_off) * dout_scale  # 50-bit exact
            if sem == "rtl" and dout_shift >= 50:
                want, f = 0, False
            else:
                want = rsat(t, dout_shift, 16)
                f = (flag_rtl if sem == "rtl" else flag_cmod)(t, dout_shift, 16) if dout_shift else not I16_MIN <= t <= I16_MAX
            want_sat += f
            assert int(out[0, i]) == want
        assert nsat == want_sat
        assert stats.uflow == len(xs)


def test_cdp_int16_square_sum_window_is_exact():
    # 9 taps of x17 = -65536 (the 17-bit minimum): 9 * 2^32 > 2^35 must not wrap. LE linear with
    # START 2^30 + 5 below the sum and select 30 puts the sum at index 1 (LE[1] = 100); a sum that
    # wrapped (9 * 2^32 mod 2^35 = 2^32) would underflow to LE[0] = 0 instead.
    from nvdla_hil.harness.refmodel.lut import LutParams

    n = 9 * (1 << 32)
    lut = LutParams(le_function="linear", le_start=n - (1 << 30) - 5, le_end=n + (64 << 30), le_index_select=30,
                    lo_start=(1 << 37) - 1, lo_end=(1 << 37) - 1, hybrid_priority="LE")
    le = np.arange(65, dtype=np.uint16) * 100
    lo = np.zeros(257, dtype=np.uint16)
    cfg = CdpConfig(normalz_len=3, mul_bypass=True, datin_scale=2, bits=16)  # x17 = clamp(2x) = -65536
    x = np.full((1, 9), I16_MIN, dtype=np.int64)
    out, stats, _ = cdp_lrn(x, 9, cfg, le, lo, lut, "rtl")
    # by hand: lane i sums lanes max(0, i-4)..min(8, i+4), so only the centre lane sees all 9 taps:
    # d = 2^30 + 5 -> index 1, fraction 5/2^30 -> 0, LE[1] = 100; the other 8 lanes have at most
    # 8 * 2^32 < START: underflow, LE[0] = 0
    assert out[0].tolist() == [0, 0, 0, 0, 100, 0, 0, 0, 0]
    assert (stats.le_hit, stats.uflow) == (1, 8)


def test_cdp_int16_decode_lut_keeps_38_bit_start_in_rtl():
    v = RegView(profile="nv_full")
    v.set("CDP", "S_LUT_LE_START_LOW", 0)
    v.set("CDP", "S_LUT_LE_START_HIGH", 0x1)  # 2^32: beyond the INT8 RTL's 22 compared bits
    p = decode_cdp_lut(v, "rtl", 16)
    assert p.le_start == 1 << 32


# ---------------------------------------------------------------------------------------
# NVDLA's own nv_full traceplayer tests (INT16) on the model target
# ---------------------------------------------------------------------------------------

V1_ROOT = Path(os.environ.get("NVDLA_TXN_TESTS") or os.environ.get("NVDLA_TRACES_V1")
               or Path(__file__).resolve().parents[1] / "../shared/nvdla/traceplayer_v1")
V1_INT16 = ["sdp_relu_int16", "pdp_max_pooling_int16", "conv_8x8_fc_int16", "googlenet_conv2_3x3_int16",
            "sanity3", "sanity3_cvsram"]


@pytest.mark.parametrize("name", V1_INT16)
def test_v1_int16_traceplayer_tests_on_the_model(name):
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.traces.txn import run_txn

    folder = V1_ROOT / name
    if not (folder / "input.txn").is_file():
        pytest.skip(f"nv_full traceplayer test {name} not found under {V1_ROOT} (set NVDLA_TXN_TESTS)")
    with ModelTarget("nv_full") as t:
        res = run_txn(folder, t)
    dumps = [c for c in res.checks if c.kind == "dump_mem"]
    assert dumps and all(c.passed for c in dumps), res.summary()
    assert res.status == "passed", res.summary()
