"""Direct-convolution pipeline model (harness/refmodel/conv/, a package by hardware block) and SDP->PDP on the fly.

Golden values: hand-worked examples, a naive scalar loop written here independently of the
model, and NVDLA's own trace CRCs (dc_*, sdp_pdp_*).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _regview import RegView, run_on_model
from nvdla_hil.harness.refmodel.base import ModelOptions
from nvdla_hil.harness.refmodel.conv import (
    ConvConfig,
    cacc_truncate,
    cdma_convert,
    conv_accumulate,
    run_conv,
    weight_offsets,
)

# ---------------------------------------------------------------------------------------
# independent slow reference


def naive_conv(d, w, cfg: ConvConfig, *, sat_bits: int | None = None, atomic_c: int = 8):
    """Scalar loop: output[k, oy, ox]; padded positions read cfg.pad_value. With ``sat_bits``
    the running sum is clamped after each (channel slice, ky, kx) step."""
    K, C, KH, KW = w.shape
    H, W = d.shape[1], d.shape[2]
    out = np.zeros((K, cfg.out_h, cfg.out_w), dtype=object)
    for k in range(K):
        for oy in range(cfg.out_h):
            for ox in range(cfg.out_w):
                acc = 0
                for s in range(0, C, atomic_c):
                    for ky in range(KH):
                        for kx in range(KW):
                            y = oy * cfg.stride_y + ky * cfg.dil_y - cfg.pad_top
                            x = ox * cfg.stride_x + kx * cfg.dil_x - cfg.pad_left
                            step = 0
                            for c in range(s, min(s + atomic_c, C)):
                                v = int(d[c, y, x]) if 0 <= y < H and 0 <= x < W else cfg.pad_value
                                step += int(w[k, c, ky, kx]) * v
                            acc += step
                            if sat_bits:
                                acc = max(
                                    -(1 << (sat_bits - 1)), min((1 << (sat_bits - 1)) - 1, acc)
                                )
                out[k, oy, ox] = acc
    return out.astype(np.int64)


def _cfg(d, w, *, stride=(1, 1), dil=(1, 1), pad=(0, 0, 0, 0), pad_value=0):
    """pad = (left, right, top, bottom); output size as the hardware programs it."""
    C, H, W = d.shape
    K, _, KH, KW = w.shape
    left, r, t, b = pad
    ow = (W + left + r - ((KW - 1) * dil[0] + 1)) // stride[0] + 1
    oh = (H + t + b - ((KH - 1) * dil[1] + 1)) // stride[1] + 1
    return ConvConfig(in_w=W, in_h=H, in_c=C, k_w=KW, k_h=KH, out_w=ow, out_h=oh, out_k=K,
                      stride_x=stride[0], stride_y=stride[1], dil_x=dil[0], dil_y=dil[1],
                      pad_left=left, pad_top=t, pad_value=pad_value)  # fmt: skip


# ---------------------------------------------------------------------------------------
# hand-worked convolutions


def test_1x1_kernel_is_a_channel_dot_product():
    d = np.arange(1, 9, dtype=np.int64).reshape(8, 1, 1)  # 1..8
    w = np.array([1, -1, 2, -2, 3, -3, 4, -4], dtype=np.int64).reshape(1, 8, 1, 1)
    a = conv_accumulate(d, w, _cfg(d, w))
    # 1-2+6-8+15-18+28-32 = -10
    assert a.tolist() == [[[-10]]]


def test_3x3_with_padding_by_hand():
    # 1 channel, 3x3 input 1..9, all-ones 3x3 kernel, pad 1 with pad value 0 -> box sums
    d = np.arange(1, 10, dtype=np.int64).reshape(1, 3, 3)
    w = np.ones((1, 1, 3, 3), dtype=np.int64)
    a = conv_accumulate(d, w, _cfg(d, w, pad=(1, 1, 1, 1)))
    assert a[0].tolist() == [[12, 21, 16], [27, 45, 33], [24, 39, 28]]
    # pad value 1: corner sees 5 padded taps, edge 3, centre none
    a = conv_accumulate(d, w, _cfg(d, w, pad=(1, 1, 1, 1), pad_value=1))
    assert a[0].tolist() == [[17, 24, 21], [30, 45, 36], [29, 42, 33]]


def test_3x3_stride_2_by_hand():
    d = np.arange(1, 26, dtype=np.int64).reshape(1, 5, 5)
    w = np.zeros((1, 1, 3, 3), dtype=np.int64)
    w[0, 0, 1, 1] = 1  # picks the centre
    w[0, 0, 0, 0] = -1  # minus the top-left
    a = conv_accumulate(d, w, _cfg(d, w, stride=(2, 2)))
    # outputs at (0,0),(0,2),(2,0),(2,2): centre - topleft = 6 always (row step 5, col 1)
    assert a[0].tolist() == [[6, 6], [6, 6]]


def test_dilation_by_hand():
    d = np.arange(1, 26, dtype=np.int64).reshape(1, 5, 5)
    w = np.ones((1, 1, 2, 2), dtype=np.int64)
    a = conv_accumulate(d, w, _cfg(d, w, dil=(4, 4)))  # taps at (0,0),(0,4),(4,0),(4,4)
    assert a[0].tolist() == [[1 + 5 + 21 + 25]]


@pytest.mark.parametrize(
    "shape,kshape,stride,dil,pad,pv",
    [
        ((13, 5, 7), (3, 13, 3, 2), (1, 1), (1, 1), (1, 2, 0, 1), -3),
        ((9, 6, 4), (10, 9, 2, 3), (2, 1), (2, 1), (2, 1, 1, 0), 7),
        ((16, 4, 4), (8, 16, 1, 1), (1, 2), (1, 1), (0, 0, 0, 0), 0),
    ],
)
def test_matches_naive_loop(shape, kshape, stride, dil, pad, pv):
    rng = np.random.default_rng(1)
    d = rng.integers(-128, 128, size=shape)
    w = rng.integers(-128, 128, size=kshape)
    cfg = _cfg(d, w, stride=stride, dil=dil, pad=pad, pad_value=pv)
    np.testing.assert_array_equal(conv_accumulate(d, w, cfg), naive_conv(d, w, cfg))


# ---------------------------------------------------------------------------------------
# weight format


def test_weight_offsets_seed_example():
    # 9 kernels (group 0: 8 kernels, group 1: 1), C = 10 (slices of 8 and 2), 1x2 kernel.
    off = weight_offsets(9, 10, 1, 2, 8, 8)
    # group 0 slice 0: x0 k0 c0..7 at 0..7, x0 k1 at 8.., x1 k0 at 64
    assert off[0, 0, 0, 0] == 0 and off[1, 0, 0, 0] == 8 and off[0, 0, 0, 1] == 64
    # group 0 slice 1 (2 channels) starts after 8 ch * 2 taps * 8 kernels = 128
    assert off[0, 8, 0, 0] == 128 and off[0, 9, 0, 0] == 129 and off[1, 8, 0, 0] == 130
    assert off[0, 8, 0, 1] == 128 + 16
    # group 1 starts after 8 kernels * 20 bytes; one kernel: slice 0 at 160..175, slice 1 176..179
    assert off[8, 0, 0, 0] == 160 and off[8, 0, 0, 1] == 168 and off[8, 8, 0, 0] == 176
    assert np.unique(off).size == off.size and off.max() == 9 * 10 * 2 - 1  # compact, no holes


# ---------------------------------------------------------------------------------------
# convertor, CACC truncation and saturation


def test_cdma_convert_by_hand():
    x = np.array([10, -10, 127, -128])
    # (x - 2) * 3 >> 1, rounded: 12, -18, 187.5->188 -> sat 127, -195 -> -128
    assert cdma_convert(x, offset=2, scale=3, truncate=1).tolist() == [12, -18, 127, -128]


def test_cacc_truncate_rounding_and_saturation():
    a = np.array([5, -5, 6, -6, 7, 1 << 40, -(1 << 40)])
    out, n = cacc_truncate(a, 1)
    assert out.tolist() == [
        3,
        -3,
        3,
        -3,
        4,
        (1 << 31) - 1,
        -(1 << 31),
    ]  # ties away from zero (doc 1.1)
    assert n == 2
    out, n = cacc_truncate(np.array([(1 << 31) - 1, 1 << 31, -(1 << 31), -(1 << 31) - 1]), 0)
    assert out.tolist() == [(1 << 31) - 1, (1 << 31) - 1, -(1 << 31), -(1 << 31)] and n == 2


def test_cacc_flag_rule_diff_at_the_boundary():
    # [DIFF] 4c / rule 1.2, shift 2. `up`: floor == INT32_MAX and a positive tie rounds up to
    # 2^31: both flag it. `back`: floor == INT32_MIN - 1, remainder 3 > 2 rounds up to INT32_MIN:
    # the RTL flags the out-of-range floor, the cmod (rounded value in range) does not.
    up = ((1 << 31) - 1) * 4 + 2
    back = (-(1 << 31) - 1) * 4 + 3
    a = np.array([up, back, 12345])
    out_rtl, n_rtl = cacc_truncate(a, 2, semantics="rtl")
    out_cmod, n_cmod = cacc_truncate(a, 2, semantics="cmod")
    assert out_rtl.tolist() == out_cmod.tolist() == [(1 << 31) - 1, -(1 << 31), 3086]
    assert n_rtl == 2 and n_cmod == 1


def test_partial_sum_saturation_rtl_vs_cmod():
    # [DIFF] 4a: 34-bit saturating partial sums (RTL) vs exact (cmod). Two channel slices:
    # slice 0 adds 8 * 2^30 = 2^33 (saturates at 2^33 - 1), slice 1 subtracts 8 * 2^29 = 2^32.
    C = 16
    d = np.zeros((C, 1, 1), dtype=np.int64)
    d[:8] = 1
    d[8:] = -1
    w = np.zeros((1, C, 1, 1), dtype=np.int64)
    w[0, :8] = 1 << 30
    w[0, 8:] = 1 << 29
    cfg = _cfg(d, w)
    exact = conv_accumulate(d, w, cfg, semantics="cmod")
    rtl = conv_accumulate(d, w, cfg, semantics="rtl")
    assert exact.item() == 1 << 32
    assert rtl.item() == ((1 << 33) - 1) - (1 << 32)
    assert rtl.item() == naive_conv(d, w, cfg, sat_bits=34).item()


def test_partial_sum_saturation_order_slice_outer_tap_inner():
    # 1 channel, 1x2 kernel: tap order (0,0) then (0,1). +2^33 then -1 -> RTL 2^33 - 2
    d = np.array([[[1, -1]]], dtype=np.int64)
    w = np.array([[[[1 << 33, 1]]]], dtype=np.int64)
    cfg = _cfg(d, w)
    assert conv_accumulate(d, w, cfg, semantics="rtl").item() == (1 << 33) - 2
    assert conv_accumulate(d, w, cfg, semantics="cmod").item() == (1 << 33) - 1


# ---------------------------------------------------------------------------------------
# NVDLA trace tests on the real player and the model target (flying SDP layers run
# conv.run_conv, SDP->PDP layers conv.run_sdp_pdp)


TRACES = [
    "dc_1x1x8_1x1x8x1_int8_0",
    "dc_4x1x8192_1x1x8192x1_int8_0",
    "dc_13x15x64_5x3x64x16_int8_0",
    "dc_14x7x49_3x4x49x32_int8_0",
    "dc_24x44x14_5x3x14x41_int8_0",
    "dc_32x26x76_6x3x76x16_int8_0",
    "dc_35x22x54_6x8x54x29_int8_0",
    "dc_6x8x192_3x3x192x32_int8_0",
    "dc_8192x1x1_2x3x1x41_int8_0",
    "dc_8x16x128_3x3x128x32_int8",
    "sdp_pdp_32x16x32_pass_through_int8_0",
]


@pytest.mark.parametrize("name", TRACES)
def test_trace_crc(trace_root, name):
    # No poisoning: the checked regions of the dc_* traces include line/surface-stride gaps
    # that the hardware never writes (they keep mem_init's zeros). A non-vacuous check (the
    # CRC did not match before the run) shows the model wrote the output.
    with run_on_model(trace_root / name, profile="nv_small") as (res, _):
        assert res.passed, res.summary()
        assert res.checks and not any(ck.vacuous for ck in res.checks)


# ---------------------------------------------------------------------------------------
# run_conv end to end on a register file built here (independent of the traces)


def _pack_feature(d, base, line_stride, surf_stride, mem):
    C, H, W = d.shape
    for c in range(C):
        for y in range(H):
            for x in range(W):
                mem.write(
                    base + (c // 8) * surf_stride + y * line_stride + (x * 8 + c % 8),
                    np.array([d[c, y, x] & 0xFF], np.uint8),
                )


def _pack_weights(w, base, mem):
    """Seed 000 direct-conv format written with plain loops (groups of 8 kernels,
    1x1x8 channel cubes, C'->K->W->H->C)."""
    K, C, KH, KW = w.shape
    out = []
    for g in range(0, K, 8):
        for s in range(0, C, 8):
            for y in range(KH):
                for x in range(KW):
                    for k in range(g, min(g + 8, K)):
                        for c in range(s, min(s + 8, C)):
                            out.append(int(w[k, c, y, x]) & 0xFF)
    mem.write(base, np.array(out, dtype=np.uint8))


def _layer(d, w, *, stride=(1, 1), dil=(1, 1), pad=(0, 0, 0, 0), pad_value=0, cvt=None, truncate=0):
    from nvdla_hil.harness.targets.memory import SparseMemory

    C, H, W = d.shape
    K, _, KH, KW = w.shape
    cfg = _cfg(d, w, stride=stride, dil=dil, pad=pad, pad_value=pad_value)
    mem = SparseMemory()
    v = RegView(profile="nv_small")  # registers not set read their reset value
    S = v.set_field
    line, surf = W * 8 + 32, (W * 8 + 32) * H + 64  # padded strides
    _pack_feature(d, 0x1000, line, surf, mem)
    _pack_weights(w, 0x80000, mem)
    for b in ("CDMA", "CSC", "CACC"):
        S(b, "D_MISC_CFG", "PROC_PRECISION", 0)
    S("CDMA", "D_MISC_CFG", "IN_PRECISION", 0)
    S("CSC", "D_MISC_CFG", "IN_PRECISION", 0)
    v.regs[("CDMA", "D_DAIN_ADDR_LOW_0")] = 0x1000
    v.regs[("CDMA", "D_LINE_STRIDE")] = line
    v.regs[("CDMA", "D_SURF_STRIDE")] = surf
    S("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH", W - 1)
    S("CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT", H - 1)
    S("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL", C - 1)
    S("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT", W - 1)
    S("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT", H - 1)
    S("CSC", "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT", C - 1)
    # CBUF: nv_small's entry is one 8-byte atom, so a line needs W * ceil(C / 8) entries
    for b in ("CDMA", "CSC"):
        S(b, "D_ENTRY_PER_SLICE", "ENTRIES", W * -(-C // 8) - 1)
        S(b, "D_BANK", "DATA_BANK", 15)
        S(b, "D_BANK", "WEIGHT_BANK", 15)
    v.regs[("CDMA", "D_WEIGHT_ADDR_LOW")] = 0x80000
    S("CDMA", "D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL", KW * KH * C - 1)
    S("CDMA", "D_WEIGHT_SIZE_1", "WEIGHT_KERNEL", K - 1)
    S("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT", KW - 1)
    S("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT", KH - 1)
    S("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT", C - 1)
    S("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL", K - 1)
    S("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH", cfg.out_w - 1)
    S("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT", cfg.out_h - 1)
    S("CSC", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL", K - 1)
    S("CSC", "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT", stride[0] - 1)
    S("CSC", "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT", stride[1] - 1)
    S("CSC", "D_DILATION_EXT", "X_DILATION_EXT", dil[0] - 1)
    S("CSC", "D_DILATION_EXT", "Y_DILATION_EXT", dil[1] - 1)
    S("CSC", "D_ZERO_PADDING", "PAD_LEFT", pad[0])
    S("CSC", "D_ZERO_PADDING", "PAD_TOP", pad[2])
    S(
        "CSC", "D_ZERO_PADDING_VALUE", "PAD_VALUE", 0xAB00 | (pad_value & 0xFF)
    )  # high byte unused for int8
    if cvt is not None:
        off, scale, trunc = cvt
        S("CDMA", "D_CVT_CFG", "CVT_EN", 1)
        S("CDMA", "D_CVT_CFG", "CVT_TRUNCATE", trunc)
        S("CDMA", "D_CVT_OFFSET", "CVT_OFFSET", off & 0xFFFF)
        S("CDMA", "D_CVT_SCALE", "CVT_SCALE", scale & 0xFFFF)
    S("CACC", "D_CLIP_CFG", "CLIP_TRUNCATE", truncate)
    # SDP: flying, everything bypassed, output CVT identity (scale 1, shift 0) -> int8 clamp
    S("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE", 1)
    S("SDP", "D_DATA_CUBE_WIDTH", "WIDTH", cfg.out_w - 1)
    S("SDP", "D_DATA_CUBE_HEIGHT", "HEIGHT", cfg.out_h - 1)
    S("SDP", "D_DATA_CUBE_CHANNEL", "CHANNEL", K - 1)
    for stage in ("BS", "BN", "EW"):
        S("SDP", f"D_DP_{stage}_CFG", f"{stage}_BYPASS", 1)
    S("SDP", "D_CVT_SCALE", "CVT_SCALE", 1)
    S("SDP", "D_PERF_ENABLE", "PERF_SAT_EN", 1)
    oline, osurf = cfg.out_w * 8, cfg.out_w * 8 * cfg.out_h
    v.regs[("SDP", "D_DST_BASE_ADDR_LOW")] = 0x200000
    v.regs[("SDP", "D_DST_LINE_STRIDE")] = oline
    v.regs[("SDP", "D_DST_SURFACE_STRIDE")] = osurf
    return v, mem, cfg, (oline, osurf)


def _read_out(mem, cfg, K, oline, osurf):
    kp = -(-K // 8) * 8
    out = np.zeros((kp, cfg.out_h, cfg.out_w), dtype=np.int64)
    raw = mem.read(0x200000, osurf * (kp // 8)).view(np.int8)
    for k in range(kp):
        for y in range(cfg.out_h):
            for x in range(cfg.out_w):
                out[k, y, x] = raw[(k // 8) * osurf + y * oline + x * 8 + k % 8]
    return out


@pytest.mark.parametrize(
    "dshape,kshape,stride,dil,pad,pv,truncate",
    [
        ((10, 5, 6), (9, 10, 3, 2), (2, 1), (1, 2), (1, 2, 2, 1), -7, 9),
        ((3, 4, 4), (2, 3, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 5, 6),
    ],
)
def test_run_conv_end_to_end(dshape, kshape, stride, dil, pad, pv, truncate):
    rng = np.random.default_rng(7)
    d = rng.integers(-128, 128, size=dshape)
    w = rng.integers(-128, 128, size=kshape)
    v, mem, cfg, (oline, osurf) = _layer(
        d, w, stride=stride, dil=dil, pad=pad, pad_value=pv, truncate=truncate
    )
    mem.write(0x200000, np.full(osurf * -(-w.shape[0] // 8), 0x5A, np.uint8))  # poison: every byte must be written
    res = run_conv(v, mem, ModelOptions())
    # expected: naive conv, rounding shift (ties away from zero), int8 clamp by the SDP
    a = naive_conv(d, w, cfg)
    q = a >> truncate
    r = a - (q << truncate)
    half = 1 << (truncate - 1)
    q = q + ((r > half) | ((r == half) & (a >= 0)))
    exp = np.clip(q, -128, 127)
    got = _read_out(mem, cfg, w.shape[0], oline, osurf)
    np.testing.assert_array_equal(got[: w.shape[0]], exp)
    assert not got[w.shape[0] :].any()  # kernel padding lanes carry 0 through an identity SDP
    assert res.stats[("CACC", "D_OUT_SATURATION")] == 0
    assert res.stats[("SDP", "D_PERF_OUT_SATURATION")] == 0  # int8 clamp is silent (doc 2)


def test_run_conv_cdma_cvt_and_cacc_saturation():
    d = np.array([[[100, -100]]], dtype=np.int64).repeat(8, axis=0)  # 8 channels, 1x2
    w = np.full((1, 8, 1, 1), 127, dtype=np.int64)
    # CVT: (x - 4) * 3 >> 2 -> 72, -78 (-312/4 = -78 exactly)
    v, mem, cfg, (oline, osurf) = _layer(d, w, cvt=(4, 3, 2), truncate=0)
    res = run_conv(v, mem, ModelOptions())
    got = _read_out(mem, cfg, 1, oline, osurf)
    assert got[0, 0].tolist() == [127, -128]  # 8*127*72 and 8*127*-78 clamp in the int8 store
    assert res.stats[("CACC", "D_OUT_SATURATION")] == 0
    assert res.stats[("SDP", "D_PERF_OUT_SATURATION")] == 2  # 17-bit RSAT of SDP C saturates
    # the partial sums: check the CVT'd values through an unclamped readout (CACC truncate 12)
    v, mem, cfg, (oline, osurf) = _layer(d, w, cvt=(4, 3, 2), truncate=12)
    run_conv(v, mem, ModelOptions())
    got = _read_out(mem, cfg, 1, oline, osurf)
    # 73152 / 4096 = 17.86 -> 18; -79248 / 4096 = -19.35 -> -19
    assert got[0, 0].tolist() == [18, -19]


@pytest.mark.parametrize(
    "block,reg,field,value,needle",
    [
        ("CDMA", "D_MISC_CFG", "CONV_MODE", 1, "CSC.D_MISC_CFG.CONV_MODE is DIRECT while CDMA's is Winograd"),
        ("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT", 1, "CDMA and CSC D_DATAIN_FORMAT.DATAIN_FORMAT differ (feature vs pixel)"),
        ("CDMA", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT", 1,
         "CDMA and CSC D_WEIGHT_FORMAT.WEIGHT_FORMAT differ (uncompressed vs compressed)"),
        ("CACC", "D_MISC_CFG", "PROC_PRECISION", 1, "CACC.D_MISC_CFG.PROC_PRECISION = INT16 differs from CDMA's INT8"),
        ("CDMA", "D_BATCH_NUMBER", "BATCHES", 1, "batch counts differ between CDMA/CSC/CACC/SDP"),
    ],
)
def test_a_mode_one_unit_alone_is_programmed_for_is_refused_naming_both(block, reg, field, value, needle):
    """Every mode here is modelled; one unit programmed for it while the next is not is refused,
    naming the units and fields that disagree."""
    from nvdla_hil.harness.refmodel.base import UnitNotModelled

    d = np.ones((8, 1, 1), dtype=np.int64)
    w = np.ones((1, 8, 1, 1), dtype=np.int64)
    v, mem, _, _ = _layer(d, w)
    v.set_field(block, reg, field, value)
    with pytest.raises(UnitNotModelled, match=re.escape(needle)):
        run_conv(v, mem, ModelOptions())


def test_cacc_sticky_field_rtl_vs_cmod_beyond_16():
    # [DIFF] 4b: t = 20. A = -2^20 + 2^19 + 4: floor -1, remainder 2^19 + 4 > half -> exact 0.
    # The RTL sticky field holds bits 18..4 only (all zero here): a negative "tie" stays at -1.
    a = np.array([-(1 << 20) + (1 << 19) + 4, -(1 << 20) + (1 << 19) + 16, (1 << 19)])
    rtl, _ = cacc_truncate(a, 20, semantics="rtl")
    cmod, _ = cacc_truncate(a, 20, semantics="cmod")
    assert cmod.tolist() == [0, 0, 1]
    assert rtl.tolist() == [-1, 0, 1]  # bit 4 is inside the sticky field
    # t <= 16: identical
    a = np.arange(-70000, 70000, 7)
    for t in (1, 5, 16):
        assert (
            cacc_truncate(a, t, semantics="rtl")[0].tolist()
            == cacc_truncate(a, t, semantics="cmod")[0].tolist()
        )


# ---------------------------------------------------------------------------------------
# CBUF geometry: entries per slice on every configuration (values from NVDLA's own dc traces:
# CDMA.D_ENTRY_PER_SLICE + 1 of nvdla/hw master verif/tests/trace_tests/<config>/dc_*)


@pytest.mark.parametrize(
    "profile, width, channels, entries",
    [
        ("nv_small", 13, 64, 104),          # dc_13x15x64_5x3x64x16_int8_0
        ("nv_small", 24, 14, 48),           # dc_24x44x14_5x3x14x41_int8_0
        ("nv_small_256", 14, 49, 28),       # dc_14x7x49_3x4x49x32_int8_0: tail of 17 ch = 3 atoms -> 4
        ("nv_small_256", 24, 14, 12),       # dc_24x44x14: tail of 2 atoms -> two pixels per entry
        ("nv_small_256", 32, 76, 80),       # dc_32x26x76_6x3x76x16_int8_0
        ("nv_small_256", 8192, 1, 2048),    # dc_8192x1x1_2x3x1x41_int8_0: four pixels per entry
        ("nv_small_256", 8, 36, 10),        # dc_8x8x36_4x4x36x16_dilation_int8_0
        ("nv_medium_512", 8, 128, 32),      # dc_8x16x128_3x3x128x32_int8
        ("nv_large", 8, 32, 4),             # dc_8x8x32_1x1x32x32_int8_0: half an entry per pixel
        ("nv_large", 8, 128, 16),           # dc_8x16x128_3x3x128x32_int8
    ],
)
def test_entries_per_slice_rule(profile, width, channels, entries):
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.refmodel.conv import feature_entries_per_slice

    assert feature_entries_per_slice(width, channels, ModelOptions.for_profile(load_profile(profile))) == entries


@pytest.mark.parametrize(
    "edit, message",
    [
        ({("CDMA", "D_BANK", "DATA_BANK"): 20, ("CSC", "D_BANK", "DATA_BANK"): 20}, "21 data + 16 weight banks exceed the configuration's 32 CBUF banks"),
        ({("CSC", "D_BANK", "WEIGHT_BANK"): 3}, "CDMA.D_BANK.WEIGHT_BANK = 15 but CSC.D_BANK.WEIGHT_BANK = 3"),
        ({("CDMA", "D_ENTRY_PER_SLICE", "ENTRIES"): 10, ("CSC", "D_ENTRY_PER_SLICE", "ENTRIES"): 10},
         "needs 12 CBUF entries"),
    ],
)
def test_cbuf_programming_the_hardware_cannot_hold_is_refused(edit, message):
    from nvdla_hil.harness.refmodel.base import InvalidLayer

    rng = np.random.default_rng(3)
    v, mem, _, _ = _layer(rng.integers(-9, 9, size=(10, 5, 6)), rng.integers(-9, 9, size=(9, 10, 3, 2)))
    for (b, r, f), val in edit.items():
        v.set_field(b, r, f, val)
    with pytest.raises(InvalidLayer, match=re.escape(message)):
        run_conv(v, mem, ModelOptions())


# ---------------------------------------------------------------------------------------
# optional CDMA stages: image input and compressed weights are imported only when a layer needs them


@pytest.mark.parametrize("reg,field,module,needle", [
    ("D_DATAIN_FORMAT", "DATAIN_FORMAT", "image", "image"),
    ("D_WEIGHT_FORMAT", "WEIGHT_FORMAT", "compressed", "compressed"),
])
def test_optional_stage_missing_is_not_modelled(monkeypatch, reg, field, module, needle):
    import sys

    from nvdla_hil.harness.refmodel.base import UnitNotModelled

    monkeypatch.setitem(sys.modules, f"nvdla_hil.harness.refmodel.conv.{module}", None)  # import fails
    d = np.ones((8, 1, 1), dtype=np.int64)
    w = np.ones((1, 8, 1, 1), dtype=np.int64)
    v, mem, _, _ = _layer(d, w)
    for b in ("CDMA", "CSC"):
        v.set_field(b, reg, field, 1)
    with pytest.raises(UnitNotModelled, match=needle):
        run_conv(v, mem, ModelOptions())


def test_optional_stages_are_dispatched(monkeypatch):
    """Pixel input calls image.fetch_image, compressed weights compressed.read_compressed_weights;
    what they return is what the MAC multiplies (here: 2 * 3 summed over 8 channels = 48)."""
    import sys
    import types

    calls = []
    img = types.ModuleType("nvdla_hil.harness.refmodel.conv.image")
    img.fetch_image = lambda view, mem, options: (calls.append("image"), np.full((8, 1, 1), 2, np.int64))[1]
    img.image_conv_config = lambda view, cfg, lanes=64: (calls.append("image cfg"), cfg)[1]
    cmp_ = types.ModuleType("nvdla_hil.harness.refmodel.conv.compressed")
    cmp_.read_compressed_weights = lambda view, mem, options, k, c, kh, kw: (
        calls.append(("weights", k, c, kh, kw)), np.full((k, c, kh, kw), 3, np.int64))[1]
    monkeypatch.setitem(sys.modules, img.__name__, img)
    monkeypatch.setitem(sys.modules, cmp_.__name__, cmp_)
    d = np.ones((8, 1, 1), dtype=np.int64)
    w = np.ones((1, 8, 1, 1), dtype=np.int64)
    v, mem, _, _ = _layer(d, w)
    for b in ("CDMA", "CSC"):
        v.set_field(b, "D_DATAIN_FORMAT", "DATAIN_FORMAT", 1)
        v.set_field(b, "D_WEIGHT_FORMAT", "WEIGHT_FORMAT", 1)
    run_conv(v, mem, ModelOptions())
    assert calls == ["image", "image cfg", ("weights", 1, 8, 1, 1)]
    assert int(np.asarray(mem.read(0x200000, 1), dtype=np.uint8).view(np.int8)[0]) == 48
