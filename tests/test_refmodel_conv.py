"""Direct-convolution pipeline model (harness/refmodel/conv.py) and SDP->PDP on the fly.

Golden values: hand-worked examples, a naive scalar loop written here independently of the
model, and NVDLA's own trace CRCs (dc_*, sdp_pdp_*).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.harness.refmodel import conv
from nvdla_hil.harness.refmodel.base import ModelOptions
from nvdla_hil.harness.refmodel.conv import (
    ConvConfig,
    cacc_truncate,
    cdma_convert,
    conv_accumulate,
    run_conv,
    run_sdp_pdp,
    weight_offsets,
)

DEFAULT_TRACES = Path("/work/shared/nvdla/trace_tests/nv_small")


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
                                acc = max(-(1 << (sat_bits - 1)), min((1 << (sat_bits - 1)) - 1, acc))
                out[k, oy, ox] = acc
    return out.astype(np.int64)


def _cfg(d, w, *, stride=(1, 1), dil=(1, 1), pad=(0, 0, 0, 0), pad_value=0):
    """pad = (left, right, top, bottom); output size as the hardware programs it."""
    C, H, W = d.shape
    K, _, KH, KW = w.shape
    l, r, t, b = pad
    ow = (W + l + r - ((KW - 1) * dil[0] + 1)) // stride[0] + 1
    oh = (H + t + b - ((KH - 1) * dil[1] + 1)) // stride[1] + 1
    return ConvConfig(in_w=W, in_h=H, in_c=C, k_w=KW, k_h=KH, out_w=ow, out_h=oh, out_k=K,
                      stride_x=stride[0], stride_y=stride[1], dil_x=dil[0], dil_y=dil[1],
                      pad_left=l, pad_top=t, pad_value=pad_value)  # fmt: skip


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
    assert out.tolist() == [3, -3, 3, -3, 4, (1 << 31) - 1, -(1 << 31)]  # ties away from zero (doc 1.1)
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
# NVDLA trace tests on the real player, with the convolution pipeline wired in a test target


@pytest.fixture(scope="module")
def traces_dir() -> Path:
    root = Path(os.environ.get("NVDLA_TRACES", DEFAULT_TRACES))
    if not root.is_dir():
        pytest.skip("NVDLA trace tests not found (set NVDLA_TRACES)")
    return root


@pytest.fixture
def conv_target():
    """The model target; it dispatches flying SDP layers to conv.run_conv and SDP->PDP layers
    to conv.run_sdp_pdp."""
    from nvdla_hil.harness.targets.model import ModelTarget

    return ModelTarget


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
def test_trace_crc(traces_dir, conv_target, name):
    from nvdla_hil.harness.traces import run_trace

    path = traces_dir / name
    if not path.is_dir():
        pytest.skip(f"{name} not in {traces_dir}")
    # No poisoning: the checked regions of the dc_* traces include line/surface-stride gaps
    # that the hardware never writes (they keep mem_init's zeros). A non-vacuous check (the
    # CRC did not match before the run) shows the model wrote the output.
    with conv_target("nv_small") as t:
        res = run_trace(path, t)
    assert res.passed, res.summary()
    assert res.checks and not any(ck.vacuous for ck in res.checks)
