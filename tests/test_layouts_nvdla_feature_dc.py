"""NVDLA feature data format and direct-convolution weight format (seed 000).

Golden values are hand-worked from the seed's rules; the property tests compare against slow
scalar re-implementations written here, independent of the vectorised code.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nvdla_hil.harness.layouts import AlignmentError, LayoutError, get_layout

FEATURE = get_layout("nvdla.feature")
DC = get_layout("nvdla.weight.dc")

DTYPES = [np.int8, np.int16, np.float16]


def ref_feature(arr: np.ndarray, atom: int, ls: int, ss: int) -> np.ndarray:
    """Scalar reference: element (c, h, w) at (c//L)*ss + h*ls + w*atom + (c%L)*es."""
    C, H, W = arr.shape
    es = arr.dtype.itemsize
    lanes = atom // es
    surfaces = -(-C // lanes)
    size = (surfaces - 1) * ss + (H - 1) * ls + W * atom
    out = np.zeros(size, np.uint8)
    raw = arr.view(np.uint8).reshape(C, H, W, es)
    for c in range(C):
        for h in range(H):
            for w in range(W):
                o = (c // lanes) * ss + h * ls + w * atom + (c % lanes) * es
                out[o:o + es] = raw[c, h, w]
    return out


def ref_dc(arr: np.ndarray, group: int, cube: int) -> np.ndarray:
    """Scalar reference of seed 000 'Basic Weight for Direct Convolution'."""
    K, C, H, W = arr.shape
    es = arr.dtype.itemsize
    raw = arr.view(np.uint8).reshape(K, C, H, W, es)
    out = bytearray()
    for g0 in range(0, K, group):
        ks = range(g0, min(K, g0 + group))
        for c0 in range(0, C, cube):           # C (slowest)
            for h in range(H):                 # H
                for w in range(W):             # W
                    for k in ks:               # K
                        for c in range(c0, min(C, c0 + cube)):   # C' (fastest)
                            out += raw[k, c, h, w].tobytes()
    out += bytes(-len(out) % 128)
    return np.frombuffer(bytes(out), np.uint8)


def _rand(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=tuple(shape) + (np.dtype(dtype).itemsize,), dtype=np.uint8).view(dtype)[..., 0]


# -- feature data: worked examples -----------------------------------------------------------


def test_feature_packed_offsets_int8_nv_full():
    # C=40 int8 on a 32-byte atom: 2 surfaces; W=3 -> line 96 B; H=2 -> surface 192 B.
    a = np.zeros((40, 2, 3), np.int8)
    a[33, 1, 2] = 7
    a[0, 0, 1] = 5
    buf = FEATURE.pack(a)
    assert buf.size == 2 * 192
    assert buf[192 + 96 + 64 + 1] == 7        # surface 1, line 1, atom 2, lane 1
    assert buf[32] == 5                       # atom (w=1) of line 0 follows atom 0 compactly
    assert np.count_nonzero(buf) == 2         # padding lanes 40..63 of the last surface are 0


def test_feature_int16_nv_small_atom8():
    # nv_small: 8-byte atom = 4 int16 channels per atom cube.
    a = np.arange(6, dtype=np.int16).reshape(6, 1, 1)
    buf = FEATURE.pack(a, profile="nv_small")
    assert buf.size == 16
    assert buf.view(np.int16).tolist() == [0, 1, 2, 3, 4, 5, 0, 0]
    assert FEATURE.pack(a, atom_bytes=8).tobytes() == buf.tobytes()


def test_feature_unpacked_strides_leave_gaps():
    a = np.ones((32, 2, 2), np.int8)
    buf = FEATURE.pack(a, line_stride=128, surface_stride=512)
    assert buf.size == 128 + 64                 # (H-1)*line_stride + W*atom for one surface
    assert buf[:64].all() and not buf[64:128].any() and buf[128:192].all()


def test_feature_pad_value_and_fp16_nan_rule():
    a = np.zeros((3, 1, 1), np.float16)
    buf = FEATURE.pack(a, pad_value=1.0)
    assert buf.view(np.float16).tolist() == [0, 0, 0] + [1.0] * 13
    with pytest.raises(LayoutError, match="except NaN"):
        FEATURE.pack(a, pad_value=float("nan"))


def test_feature_1x1xC_surface_packed_is_a_C_over_32_cube():
    # Seed: a surface-packed 1x1xC cube can be treated like a (C/32) x 1 x 32 cube.
    x = _rand((96,), np.int8, 3)
    as_1x1 = FEATURE.pack(x.reshape(96, 1, 1), surface_stride=32)
    as_cube = FEATURE.pack(x.reshape(3, 32).T.reshape(32, 1, 3))     # C=32, H=1, W=3
    assert as_1x1.tobytes() == as_cube.tobytes() == x.tobytes()


@pytest.mark.parametrize(
    ("params", "rule"),
    [
        ({"line_stride": 48}, "line_stride = 48 is not a multiple of 32"),
        ({"surface_stride": 200}, "surface_stride = 200 is not a multiple of 32"),
        ({"line_stride": 32}, "smaller than one line"),
        ({"surface_stride": 64}, "surfaces would overlap"),
        ({"atom_bytes": 24}, "power of two"),
        ({"bogus": 1}, "accepted:"),
    ],
)
def test_feature_alignment_rules(params, rule):
    with pytest.raises(LayoutError, match=rule):
        FEATURE.pack(np.zeros((64, 2, 2), np.int8), **params)


# Stride alignment follows the configuration's memory atom (layouts README "Settled against the
# RTL and C model"): nvdla/hw master hands CDMA/SDP only stride[31:log2(atom)] and the MCIF read
# path zeroes the low log2(atom) address bits, so strides must be whole atoms: 8 bytes on
# nv_small, 32 on nv_full/nv_large (nvdlav1 registers hold [31:5]).


def test_feature_nv_small_strides_need_only_8_byte_alignment():
    # C=16 int8 on nv_small: 8 channels per 8-byte atom, 2 surfaces; H=2, W=1.
    # line_stride=16 and surface_stride=40 are multiples of 8 but not of 32. Element (c, h, 0)
    # sits at (c // 8) * 40 + h * 16 + c % 8; value = 1 + c + 16 * h.
    a = np.array([[[1 + c + 16 * h] for h in range(2)] for c in range(16)], np.int8)
    buf = FEATURE.pack(a, profile="nv_small", line_stride=16, surface_stride=40)
    expected = ([1, 2, 3, 4, 5, 6, 7, 8] + [0] * 8            # surface 0, line 0 (+ 8-byte gap)
                + [17, 18, 19, 20, 21, 22, 23, 24] + [0] * 16   # surface 0, line 1 (+ gap to 40)
                + [9, 10, 11, 12, 13, 14, 15, 16] + [0] * 8     # surface 1 at 40, line 0
                + [25, 26, 27, 28, 29, 30, 31, 32])             # surface 1, line 1 at 56
    assert buf.tolist() == expected
    assert np.array_equal(FEATURE.unpack(buf, a.shape, profile="nv_small", line_stride=16, surface_stride=40), a)
    # the same strides are not whole 32-byte atoms on nv_full
    with pytest.raises(AlignmentError, match=r"line_stride = 16 is not a multiple of 32 bytes .*profile nv_full"):
        FEATURE.pack(a, profile="nv_full", line_stride=16, surface_stride=40)
    with pytest.raises(AlignmentError, match=r"surface_stride = 40 is not a multiple of 32 bytes .*profile nv_full"):
        FEATURE.pack(a, profile="nv_full", line_stride=32, surface_stride=40)


def test_feature_nv_small_packed_default_strides_are_whole_atoms():
    # W=3 int8 on nv_small: packed line = 3 atoms = 24 bytes (not 32-aligned), surface = H * 24.
    a = np.arange(8 * 2 * 3, dtype=np.int8).reshape(8, 2, 3)     # a[c, h, w] = 6c + 3h + w
    buf = FEATURE.pack(a, profile="nv_small")
    assert buf.size == 2 * 24                                     # (H-1)*24 + W*8
    assert buf[:8].tolist() == [0, 6, 12, 18, 24, 30, 36, 42]     # line 0, atom w=0: c = 0..7
    assert buf[24:32].tolist() == [3, 9, 15, 21, 27, 33, 39, 45]  # line 1 starts at 24, not 32


@pytest.mark.parametrize(
    ("profile", "params", "message"),
    [
        ("nv_small", {"line_stride": 12}, r"feature data line_stride = 12 is not a multiple of 8 bytes \(rule: line_stride must be a multiple of the 8-byte memory atom of profile nv_small"),
        ("nv_small", {"line_stride": 16, "surface_stride": 36}, r"feature data surface_stride = 36 is not a multiple of 8 bytes .*surface_stride must be a multiple of the 8-byte memory atom of profile nv_small"),
        ("nv_full", {"line_stride": 40}, r"feature data line_stride = 40 is not a multiple of 32 bytes .*32-byte memory atom of profile nv_full"),
        ("nv_large", {"line_stride": 64, "surface_stride": 136}, r"surface_stride = 136 is not a multiple of 32 bytes .*profile nv_large"),
        ("nv_medium_512", {"line_stride": 24}, r"line_stride = 24 is not a multiple of 16 bytes .*profile nv_medium_512"),
    ],
)
def test_feature_stride_alignment_follows_profile_atom(profile, params, message):
    with pytest.raises(AlignmentError, match=message):
        FEATURE.pack(np.zeros((16, 2, 1), np.int8), profile=profile, **params)


def test_feature_stride_alignment_names_atom_override_and_sdp_operands():
    with pytest.raises(AlignmentError, match=r"line_stride = 12 .*atom of atom_bytes=8"):
        FEATURE.pack(np.zeros((8, 2, 1), np.int8), atom_bytes=8, line_stride=12)
    bias = get_layout("nvdla.sdp.bias")
    bias.pack(np.zeros((8, 2, 1), np.int8), profile="nv_small", mode="per_element", line_stride=8)
    with pytest.raises(AlignmentError, match=r"bias line_stride = 12 .*profile nv_small"):
        bias.pack(np.zeros((8, 2, 1), np.int8), profile="nv_small", mode="per_element", line_stride=12)


def test_alignment_error_type():
    with pytest.raises(AlignmentError):
        FEATURE.pack(np.zeros((8, 1, 1), np.int8), line_stride=40)


def test_feature_rejects_bad_dtype_and_short_buffer():
    with pytest.raises(LayoutError, match="not an NVDLA element type"):
        FEATURE.pack(np.zeros((2, 2, 2), np.float32))
    with pytest.raises(LayoutError, match="buffer has 10 bytes"):
        FEATURE.unpack(b"\0" * 10, (32, 1, 1))


@settings(max_examples=60, deadline=None)
@given(
    C=st.integers(1, 70), H=st.integers(1, 4), W=st.integers(1, 5),
    dt=st.sampled_from(DTYPES), atom=st.sampled_from([8, 32]),
    extra_line=st.integers(0, 2), extra_surf=st.integers(0, 2), seed=st.integers(0, 2**16),
)
def test_feature_matches_reference_and_round_trips(C, H, W, dt, atom, extra_line, extra_surf, seed):
    a = _rand((C, H, W), dt, seed)
    ls = W * atom + extra_line * atom
    ss = H * ls + extra_surf * atom
    buf = FEATURE.pack(a, atom_bytes=atom, line_stride=ls, surface_stride=ss)
    assert buf.tobytes() == ref_feature(a, atom, ls, ss).tobytes()
    back = FEATURE.unpack(buf, a.shape, dt, atom_bytes=atom, line_stride=ls, surface_stride=ss)
    assert back.dtype == np.dtype(dt)
    assert back.tobytes() == a.tobytes()      # bit-exact, NaN payloads included


# -- direct-convolution weights: worked examples ---------------------------------------------


def test_dc_seed_example_3x3x192byte_int8_group():
    # Seed figure: a group of 3x3x192-byte kernels. int8: 32 kernels, 64-byte cubes, 3 C blocks.
    w = np.zeros((32, 192, 3, 3), np.int8)
    w[1, 0, 0, 0] = 1     # cube 0 of kernel 1 follows cube 0 of kernel 0 (K after C')
    w[0, 0, 0, 1] = 2     # next W position after all 32 kernels: 32 * 64
    w[0, 0, 1, 0] = 3     # next H: 3 W positions * 32 kernels * 64
    w[0, 64, 0, 0] = 4    # next C block after the whole 3x3 plane: 9 * 32 * 64
    w[0, 5, 0, 0] = 5
    buf = DC.pack(w)
    assert buf.size == 32 * 192 * 9
    assert buf[64] == 1 and buf[2048] == 2 and buf[6144] == 3 and buf[18432] == 4 and buf[5] == 5


def test_dc_int16_last_cblock_not_padded():
    # int16: 16 kernels/group, 64-element (128-byte) cubes. C=96 -> blocks of 64 and 32 elements.
    w = np.zeros((16, 96, 3, 3), np.int16)
    w[0, 64, 0, 0] = 1
    w[1, 64, 0, 0] = 2
    buf = DC.pack(w).view(np.int16)
    base = 64 * 9 * 16
    assert buf[base] == 1
    assert buf[base + 32] == 2      # next kernel after 32 elements: "Do not append 0"


def test_dc_last_group_and_128_byte_tail():
    w = np.zeros((33, 8, 1, 1), np.int8)
    w[32, 0, 0, 0] = 9
    buf = DC.pack(w)
    assert buf[32 * 8] == 9                      # groups mapped compactly, no gap
    assert buf.size == 384                       # 264 bytes rounded up to 128-byte alignment
    assert DC.pack(np.ones((1, 8, 1, 1), np.int8)).size == 128


def test_dc_nv_small_groups_of_8():
    w = np.zeros((9, 16, 1, 1), np.int8)
    w[1, 0, 0, 0] = 1
    w[0, 8, 0, 0] = 2
    buf = DC.pack(w, profile="nv_small")
    assert buf[8] == 1            # 8-element cubes
    assert buf[8 * 8] == 2        # second C block after 8 kernels x 8 elements


@settings(max_examples=60, deadline=None)
@given(
    K=st.integers(1, 40), C=st.integers(1, 80), H=st.integers(1, 3), W=st.integers(1, 3),
    dt=st.sampled_from(DTYPES), profile=st.sampled_from(["nv_full", "nv_small"]),
    seed=st.integers(0, 2**16),
)
def test_dc_matches_reference_and_round_trips(K, C, H, W, dt, profile, seed):
    w = _rand((K, C, H, W), dt, seed)
    es = np.dtype(dt).itemsize
    group = (32 if es == 1 else 16) if profile == "nv_full" else (8 if es == 1 else 4)
    cube = 64 if profile == "nv_full" else 8
    buf = DC.pack(w, profile=profile)
    assert buf.tobytes() == ref_dc(w, group, cube).tobytes()
    assert DC.unpack(buf, w.shape, dt, profile=profile).tobytes() == w.tobytes()


@settings(max_examples=30, deadline=None)
@given(K=st.integers(1, 20), C=st.integers(1, 40), g=st.integers(1, 12), e=st.integers(1, 20),
       seed=st.integers(0, 2**16))
def test_dc_explicit_group_and_cube(K, C, g, e, seed):
    w = _rand((K, C, 2, 2), np.int8, seed)
    buf = DC.pack(w, kernels_per_group=g, cube_elements=e)
    assert buf.tobytes() == ref_dc(w, g, e).tobytes()
    assert DC.unpack(buf, w.shape, kernels_per_group=g, cube_elements=e).tobytes() == w.tobytes()
