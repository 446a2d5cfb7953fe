"""DMP dv-sdk (seed 002) and Sophgo TPU local memory (seed 004): worked examples from the seeds."""

from __future__ import annotations

import numpy as np
import pytest
from nvdla_hil.harness.layouts import AlignmentError, LayoutError, dmp, get_layout, sophgo

CONV = get_layout("dmp.conv_io")


def _offset_of(value, buf):
    return int(np.flatnonzero(buf.view(np.float16) == value)[0]) * 2


def test_dmp_20_channels_three_chunks():
    # Seed 002: C=20 -> chunks 0-7, 8-15, 16-19; W=4, H=3, pixel (x=1, y=2, n=17).
    img = np.zeros((3, 4, 20), np.float16)       # (H, W, C)
    img[2, 1, 17] = 1.0
    assert _offset_of(1.0, CONV.pack(img)) == (2 * (4 * 3 * 8) + 1 * (3 * 4) + 2 * 4 + 1) * 2 == 426
    assert _offset_of(1.0, CONV.pack(img, transpose_weight=True)) == (192 + 2 * (4 * 4) + 1 * 4 + 1) * 2 == 458
    assert dmp.conv_io_offset(0, 2, 1, 17, D=1, H=3, W=4, C=20) == 426


def test_dmp_up_to_8_channels_dwhc():
    vol = np.zeros((2, 3, 4, 5), np.float16)      # (D, H, W, C)
    vol[1, 2, 3, 4] = 1.0
    # offset = (d*W*H*C + w*H*C + h*C + c) * 2
    assert _offset_of(1.0, CONV.pack(vol)) == (1 * 60 + 3 * 15 + 2 * 5 + 4) * 2
    assert _offset_of(1.0, CONV.pack(vol, transpose_weight=True)) == (60 + 2 * 20 + 3 * 5 + 4) * 2


def test_dmp_output_float_and_fc():
    out = np.arange(24, dtype=np.float32).reshape(2, 3, 4)   # (H, W, C)
    buf = get_layout("dmp.output").pack(out).view(np.float32)
    assert buf.tolist() == out.transpose(1, 0, 2).reshape(-1).tolist()        # DWHC
    assert get_layout("dmp.fc").pack(np.arange(5.0)).view(np.float16).tolist() == [0, 1, 2, 3, 4]


def test_dmp_fc_weight_rearranged_for_conv_input():
    x = np.random.default_rng(1).random((3, 2, 10)).astype(np.float16)
    w = np.random.default_rng(2).random((4, x.size))
    buf = CONV.pack(x).view(np.float16).astype(np.float64)
    w2 = dmp.fc_weight_for_conv_input(w, x.shape)
    assert np.allclose(w2 @ buf, w @ x.astype(np.float64).reshape(-1))


# -- Sophgo ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("addr", "q", "r"), [(340, 0, 340), (1472, 1, 448), (2300, 2, 252), (3088, 3, 16)])
def test_npu_address_decomposition(addr, q, r):
    assert sophgo.npu_address(addr, 4, 1024) == (q, r)


def test_npu_address_range():
    with pytest.raises(LayoutError, match=r"\[0, 4095\]"):
        sophgo.npu_address(4096, 4, 1024)


X = 64


@pytest.mark.parametrize(("C", "Q", "expected"), [(X - 1, 0, 1), (X - 1, 1, 1), (X + 2, 0, 2), (X + 2, X - 1, 3)])
def test_channels_per_npu_seed_cases(C, Q, expected):
    # Seed 004: ceil((Q + C) / X) for the four scattering figures.
    assert sophgo.channels_per_npu(C, Q, X) == expected
    assert sophgo.channels_per_npu(3, 1, 4) == 1       # (N=2, C=3, H=1, W=10) at NPU 1


def test_aligned_and_compact_strides():
    assert sophgo.aligned_stride((2, 3, 4, 5), 32, 0, 4).as_tuple() == (32, 32, 5, 1)
    assert sophgo.aligned_stride((2, 3, 4, 5), 32, 2, 4).as_tuple() == (64, 32, 5, 1)
    assert sophgo.aligned_stride((1, 1, 1, 70), 16, 0, 4).c == 128
    assert sophgo.aligned_stride((1, 1, 1, 70), 8, 0, 4).c == 128
    assert sophgo.compact_stride((2, 3, 4, 5), 2, 4).as_tuple() == (40, 20, 5, 1)
    assert sophgo.continuous_stride((2, 3, 4, 5)).as_tuple() == (60, 20, 5, 1)


def test_local_explicit_strides_seed_example():
    # (N=2, C=5, H=3, W=4) fp32 at NPU 0, X=4: W stride 2, H 16, C 56, N 120.
    t = np.zeros((2, 5, 3, 4), np.float32)
    t[1, 4, 2, 3] = 1.0
    t[0, 1, 0, 0] = 2.0
    img = get_layout("sophgo.local").pack(t, npu_num=4, local_mem_size=1024, strides=(120, 56, 16, 2)).view(np.float32)
    assert img[0 * 256 + 120 + 56 + 32 + 6] == 1.0      # channel 4 -> NPU 0, slot 1
    assert img[1 * 256] == 2.0                            # channel 1 -> NPU 1, slot 0


def test_local_aligned_start_npu_2_and_address_rule():
    t = np.zeros((2, 3, 4, 5), np.float32)
    t[1, 2, 0, 0] = 1.0            # NPU (2+2)%4 = 0, slot 1 -> 32 + N stride 64
    img = get_layout("sophgo.local").pack(t, npu_num=4, local_mem_size=1024, address=2048).view(np.float32)
    assert img[64 + 32] == 1.0
    with pytest.raises(AlignmentError, match="divisible by 128"):
        get_layout("sophgo.local").pack(t, npu_num=4, local_mem_size=1024, address=2052)
    with pytest.raises(LayoutError, match="local memory is 1024 bytes"):
        get_layout("sophgo.local").pack(np.zeros((40, 3, 4, 5), np.float32), npu_num=4, local_mem_size=1024)


@pytest.mark.parametrize(("w", "channels", "row_blocks"), [(40, 1, 64), (20, 2, 32), (10, 4, 32), (8, 5, 64), (15, 3, 32)])
def test_matrix_layout_seed_cases(w, channels, row_blocks):
    m = np.arange(1, 81, dtype=np.float32).reshape(2, 40)
    img = get_layout("sophgo.matrix").pack(m, npu_num=4, local_mem_size=1024, w=w).view(np.float32).reshape(4, 256)
    assert sophgo.aligned_stride((2, channels, 1, w), 32, 0, 4).n == row_blocks
    # column j of row 1 sits in NPU (j // w) % 4 at N stride + slot * C stride + j % w
    j = 39
    c = j // w
    assert img[c % 4, row_blocks + (c // 4) * 32 + j % w] == m[1, j]


def test_4n_and_2n_modes():
    t = np.arange(6 * 5 * 4 * 5, dtype=np.int8).reshape(6, 5, 4, 5)
    spec = get_layout("sophgo.local")
    img = spec.pack(t, npu_num=4, local_mem_size=4096, mode="4N")
    # int8x4 element (1, 0, 0, 0) holds (4,0,0,0), (5,0,0,0) and two dummies; M = 2.
    st = sophgo.aligned_stride((2, 5, 4, 5), 32, 0, 4)
    assert img.view(np.int8)[st.n * 4: st.n * 4 + 4].tolist() == [t[4, 0, 0, 0], t[5, 0, 0, 0], 0, 0]
    t16 = np.arange(3 * 5 * 4 * 5, dtype=np.int16).reshape(3, 5, 4, 5)
    img = spec.pack(t16, npu_num=4, local_mem_size=4096, mode="2N").view(np.int16)
    st = sophgo.aligned_stride((2, 5, 4, 5), 32, 0, 4)
    assert img[st.n * 2: st.n * 2 + 2].tolist() == [t16[2, 0, 0, 0], 0]
    with pytest.raises(LayoutError, match="4N-mode stores 8-bit"):
        spec.pack(t16, npu_num=4, local_mem_size=4096, mode="4N")


def test_2ic_mode_pairs_input_channels():
    w = np.arange(3 * 2 * 1 * 1, dtype=np.float32).reshape(3, 2, 1, 1)     # [I, O, H, W]
    img = get_layout("sophgo.local").pack(w, npu_num=4, local_mem_size=1024, mode="2IC", layout="compact").view(np.float32)
    # J = 2: fp32x2 element (0, o) = (w[0,o], w[1,o]); (1, o) = (w[2,o], dummy); o -> NPU o
    assert img[0:2].tolist() == [w[0, 0, 0, 0], w[1, 0, 0, 0]]
    assert img[2:4].tolist() == [w[2, 0, 0, 0], 0.0]
    assert img[256:258].tolist() == [w[0, 1, 0, 0], w[1, 1, 0, 0]]
