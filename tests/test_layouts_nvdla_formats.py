"""NVDLA pixel, image/Winograd/deconvolution weights, sparse compression, SDP operands and the
alignment table (seed 000). Expected values are worked by hand from the seed's rules; pixel bit
positions follow the NVDLA C model's CDMA image fetch (reversed-name memory order)."""

from __future__ import annotations

import numpy as np
import pytest
from nvdla_hil.harness.layouts import AlignmentError, LayoutError, get_layout
from nvdla_hil.harness.layouts.nvdla import (
    PIXEL_FORMATS,
    bytes_per_atom,
    check_alignment,
    compress_weights,
    decompress_weights,
    winograd_phase1,
)

# -- pixel formats ---------------------------------------------------------------------------

def test_pixel_table_rows_from_seed():
    rows = {n: (f.planes, f.channels, f.precision, f.x_offset_max) for n, f in PIXEL_FORMATS.items()}
    assert len(rows) == 36
    assert rows["T_R8"] == (1, 1, "int8", 31)
    assert rows["T_R16_F"] == (1, 1, "int16", 15)
    assert rows["T_A16B16G16R16_F"] == (1, 4, "fp16", 3)
    assert rows["T_A8R8G8B8"] == (1, 4, "int8", 7)
    assert rows["T_A2B10G10R10"] == (1, 4, "int16", 7)
    assert rows["T_Y8___U8V8_N444"] == (2, 3, "int8", 31)
    assert rows["T_Y16___V16U16_N444"] == (2, 3, "int16", 15)


@pytest.mark.parametrize(("fmt", "memory"), [
    ("T_A8B8G8R8", [1, 2, 3, 4]),     # R G B A in memory
    ("T_A8R8G8B8", [3, 2, 1, 4]),     # B G R A
    ("T_B8G8R8A8", [4, 1, 2, 3]),     # A R G B
    ("T_R8G8B8A8", [4, 3, 2, 1]),     # A B G R
])
def test_pixel_8bit_component_order(fmt, memory):
    px = np.array([[[1, 2, 3, 4]]], np.uint8)        # channels R, G, B, A
    buf = get_layout(f"nvdla.pixel.{fmt}").pack(px)
    assert buf.size == 4 and buf.tolist() == memory


def test_pixel_10bit_packed_word():
    px = np.array([[[0x3FF, 0x155, 0x001, 0x2]]], np.uint16)   # R G B A
    word = int(get_layout("nvdla.pixel.T_A2B10G10R10").pack(px).view("<u4")[0])
    assert word == 0x3FF | (0x155 << 10) | (0x001 << 20) | (0x2 << 30)
    word = int(get_layout("nvdla.pixel.T_R10G10B10A2").pack(px).view("<u4")[0])
    assert word == 0x2 | (0x001 << 2) | (0x155 << 12) | (0x3FF << 22)
    with pytest.raises(LayoutError, match="exceeds its 2-bit field"):
        get_layout("nvdla.pixel.T_A2B10G10R10").pack(np.array([[[0, 0, 0, 4]]], np.uint16))


def test_pixel_pitch_linear_x_offset_and_32_byte_lines():
    img = np.arange(1, 11, dtype=np.uint8).reshape(2, 5)
    buf = get_layout("nvdla.pixel.T_R8").pack(img[..., None], x_offset=3)
    assert buf[3:8].tolist() == [1, 2, 3, 4, 5]          # 3 redundant pixels before the first
    assert buf[32 + 3:32 + 8].tolist() == [6, 7, 8, 9, 10]   # line stride rounded up to 32
    with pytest.raises(LayoutError, match="valid X offset range 0~31"):
        get_layout("nvdla.pixel.T_R8").pack(img[..., None], x_offset=32)
    with pytest.raises(LayoutError, match="0~7"):
        get_layout("nvdla.pixel.T_A8B8G8R8").pack(np.zeros((1, 1, 4), np.uint8), x_offset=8)
    with pytest.raises(AlignmentError, match="32 bytes"):
        get_layout("nvdla.pixel.T_R8").pack(img[..., None], line_stride=48)


# Semi-planar UV order, settled against nvdla/hw (layouts README "Settled against the RTL and C
# model"): the pair is named most significant first, like the packed formats, so a name with U
# first (U8V8) stores V at the lower address and a name with V first (V8U8) stores U first. The
# expected bytes below are written out by hand from that rule for a 1x2 image with
# Y = (0x11, 0x12), U = (0x21, 0x22), V = (0x31, 0x32); 16-bit formats use 0x0110 + k etc.
# Y plane at 0; UV plane at the next 32-byte boundary (Y line of 2 or 4 bytes -> 32).
_Y8 = [0x11, 0x12]
_SEMI_PLANAR_8 = {
    "T_Y8___U8V8_N444": [0x31, 0x21, 0x32, 0x22],          # V0 U0 V1 U1
    "T_Y8___V8U8_N444": [0x21, 0x31, 0x22, 0x32],          # U0 V0 U1 V1 (NV12 order)
}
_Y16 = [0x10, 0x01, 0x11, 0x01]                            # 0x0110, 0x0111 little-endian
_VU16 = [0x30, 0x03, 0x20, 0x02, 0x31, 0x03, 0x21, 0x02]   # V0 U0 V1 U1, each 16-bit LE
_UV16 = [0x20, 0x02, 0x30, 0x03, 0x21, 0x02, 0x31, 0x03]   # U0 V0 U1 V1
_SEMI_PLANAR_16 = {
    "T_Y10___U10V10_N444": _VU16, "T_Y12___U12V12_N444": _VU16, "T_Y16___U16V16_N444": _VU16,
    "T_Y10___V10U10_N444": _UV16, "T_Y12___V12U12_N444": _UV16, "T_Y16___V16U16_N444": _UV16,
}


@pytest.mark.parametrize("fmt", sorted(_SEMI_PLANAR_8))
def test_pixel_semi_planar_8bit_uv_order(fmt):
    px = np.array([[[0x11, 0x21, 0x31], [0x12, 0x22, 0x32]]], np.uint8)    # (H=1, W=2, Y U V)
    lay = get_layout(f"nvdla.pixel.{fmt}")
    buf = lay.pack(px)
    assert buf.size == 36
    assert buf[:2].tolist() == _Y8 and not buf[2:32].any()
    assert buf[32:36].tolist() == _SEMI_PLANAR_8[fmt]
    assert np.array_equal(lay.unpack(buf, (1, 2, 3)), px)


@pytest.mark.parametrize("fmt", sorted(_SEMI_PLANAR_16))
def test_pixel_semi_planar_16bit_uv_order(fmt):
    px = np.array([[[0x0110, 0x0220, 0x0330], [0x0111, 0x0221, 0x0331]]], np.uint16)
    lay = get_layout(f"nvdla.pixel.{fmt}")
    buf = lay.pack(px)
    assert buf.size == 40
    assert buf[:4].tolist() == _Y16 and not buf[4:32].any()
    assert buf[32:40].tolist() == _SEMI_PLANAR_16[fmt]
    assert np.array_equal(lay.unpack(buf, (1, 2, 3)), px)


def test_pixel_semi_planar_uv_offset_and_alignment():
    px = np.array([[[10, 20, 30]]], np.uint8)     # Y U V
    buf = get_layout("nvdla.pixel.T_Y8___V8U8_N444").pack(px, uv_offset=64)
    assert buf[0] == 10 and buf[64:66].tolist() == [20, 30]
    with pytest.raises(AlignmentError, match="uv_offset"):
        get_layout("nvdla.pixel.T_Y8___V8U8_N444").pack(px, uv_offset=40)


# -- image input weights ---------------------------------------------------------------------

def test_image_pre_extension_line_becomes_channel():
    w = np.arange(12, dtype=np.int8).reshape(1, 3, 2, 2)      # K=1, C=3, R=2, S=2
    buf = get_layout("nvdla.weight.image").pack(w)
    expected = [w[0, c, r, s] for r in range(2) for s in range(2) for c in range(3)]
    assert buf[:12].tolist() == expected and buf.size == 128


def test_image_post_extension_two_lines_no_zero_fill():
    w = np.arange(2 * 1 * 3 * 2, dtype=np.int8).reshape(2, 1, 3, 2) + 1    # K=2, C=1, R=3, S=2
    buf = get_layout("nvdla.weight.image").pack(w, post_extension=2)
    line = lambda k, r: [w[k, 0, r, 0], w[k, 0, r, 1]]
    expected = line(0, 0) + line(0, 1) + line(1, 0) + line(1, 1) + line(0, 2) + line(1, 2)
    assert buf[:12].tolist() == expected
    assert not buf[12:].any()
    with pytest.raises(LayoutError, match="C<=16"):
        get_layout("nvdla.weight.image").pack(np.zeros((1, 3, 3, 6), np.int8), post_extension=4)


# -- Winograd --------------------------------------------------------------------------------

def test_winograd_phase1_gwgt():
    w = np.zeros((1, 32, 3, 3), np.float16)
    w[0, 0, 1, 1] = 1
    t = winograd_phase1(w)
    assert t.shape == (1, 32, 4, 4)
    g1 = np.array([0, 0.5, -0.5, 0])
    assert np.array_equal(t[0, 0].astype(np.float64), np.outer(g1, g1))
    # channel padding to a 32-byte atom: int16 C=3 -> 16 channels
    assert winograd_phase1(np.zeros((2, 3, 3, 3), np.int16)).shape == (2, 16, 4, 4)
    # stride 2: 6x6 kernel -> 3x3 with 4x the channels
    assert winograd_phase1(np.zeros((1, 16, 5, 5), np.float16), stride=2).shape == (1, 64, 4, 4)


def test_winograd_phase2_k_then_c_scan():
    w = np.zeros((2, 8, 4, 4), np.int8)
    w[1, 0, 0, 0] = 1     # cube 0 of K1 follows cube 0 of K0 (64 bytes)
    w[0, 4, 0, 0] = 2     # cube 1 of K0 after cube 0 of every kernel in the group
    buf = get_layout("nvdla.weight.winograd").pack(w)
    assert buf[64] == 1 and buf[128] == 2 and buf.size == 256
    with pytest.raises(LayoutError, match="divisible by 4"):
        get_layout("nvdla.weight.winograd").pack(np.zeros((1, 6, 4, 4), np.int8))


def test_winograd_convert_flag():
    w = np.ones((1, 32, 3, 3), np.int16)
    spec = get_layout("nvdla.weight.winograd")
    assert spec.pack(w, convert=True).tobytes() == spec.pack(winograd_phase1(w)).tobytes()


# -- deconvolution ---------------------------------------------------------------------------

def test_deconv_set_split_each_256_aligned():
    w = np.arange(1, 5, dtype=np.int8).reshape(1, 1, 2, 2)
    buf = get_layout("nvdla.weight.deconv").pack(w, stride_x=2, stride_y=2)
    assert [buf[0], buf[256], buf[512], buf[768]] == [1, 2, 3, 4]
    assert buf.size == 768 + 128


# -- sparse compression ----------------------------------------------------------------------

def test_compression_worked_example():
    w = np.zeros((1, 16, 1, 1), np.int8)
    w[0, 1], w[0, 4], w[0, 15] = 5, 7, 9
    mapped = get_layout("nvdla.weight.dc").pack(w)
    cw = compress_weights(mapped, [16], 1)
    assert cw.wmb[:2].tolist() == [0x12, 0x80] and cw.wmb.size == 128   # little-endian bits
    assert cw.group_sizes[0] == 3 and cw.wgs.size == 128
    assert cw.data[:3].tolist() == [5, 7, 9] and cw.data.size == 128
    assert decompress_weights(cw, [16], 1).tobytes() == mapped.tobytes()
    blob = get_layout("nvdla.weight.compressed").pack(w)
    assert blob[:4].tolist() == [3, 0, 0, 0] and blob[256] == 0x12 and blob[512:515].tolist() == [5, 7, 9]


def test_compression_int16_counts_bytes_and_checks_wgs():
    w = np.zeros((17, 4, 1, 1), np.int16)
    w[0, 0] = 1
    w[16, 3] = -1
    cw = compress_weights(get_layout("nvdla.weight.dc").pack(w), [16 * 4 * 2, 4 * 2], 2)
    assert cw.group_sizes[:2].tolist() == [2, 2]
    bad = type(cw)(np.zeros_like(cw.wgs), cw.wmb, cw.data)
    with pytest.raises(LayoutError, match="WGS"):
        decompress_weights(bad, [128, 8], 2)


# -- SDP operands ----------------------------------------------------------------------------

def test_bytes_per_atom_rule():
    assert bytes_per_atom("int8", "bias", 1) == 32
    assert bytes_per_atom("int16", "prelu", 2) == 32
    assert bytes_per_atom("fp16", "bn", 2) == 64
    assert bytes_per_atom("int8", "ew_both", 2) == 128
    assert bytes_per_atom("int8", "bias", 1, atom_bytes=8) == 8


def test_bn_pairs_packed_together_and_per_element_bias():
    bn = np.array([[1, 2], [3, 4], [5, 6]], np.int16)
    buf = get_layout("nvdla.sdp.bn").pack(bn, proc_precision="int16")
    assert buf.view(np.int16)[:6].tolist() == [1, 2, 3, 4, 5, 6] and buf.size == 64
    b = np.zeros((33, 1, 2), np.int8)
    b[32, 0, 1] = 7
    buf = get_layout("nvdla.sdp.bias").pack(b, mode="per_element")
    assert buf[64 + 32] == 7     # surface 1 at 2 atoms, w=1 at +32
    with pytest.raises(LayoutError, match="data_size=2"):
        get_layout("nvdla.sdp.prelu").pack(np.zeros(4, np.float16), proc_precision="fp16", data_size=1)


# -- alignment table -------------------------------------------------------------------------

def test_alignment_table():
    check_alignment("weight", start_address=512, data_size=256)
    with pytest.raises(AlignmentError, match="weight start_address = 128 is not a multiple of 256"):
        check_alignment("weight", start_address=128)
    with pytest.raises(AlignmentError, match="32 bytes"):
        check_alignment("ew", data_size=16)
    check_alignment("prelu", line_stride=3)        # NA in the table
    # atom-derived rows follow the configuration's memory atom: 8 bytes on nv_small
    check_alignment("feature", profile="nv_small", start_address=8, line_stride=24, surface_stride=40)
    check_alignment("bias", atom_bytes=8, line_stride=8)
    with pytest.raises(AlignmentError, match="feature line_stride = 24 is not a multiple of 32"):
        check_alignment("feature", profile="nv_full", line_stride=24)
    with pytest.raises(AlignmentError, match="feature surface_stride = 12 .* 8 bytes .*nv_small"):
        check_alignment("feature", profile="nv_small", surface_stride=12)
    with pytest.raises(AlignmentError, match="32 bytes"):                 # pixels keep 32 bytes
        check_alignment("pixel", profile="nv_small", line_stride=8)
    with pytest.raises(AlignmentError, match="256 bytes"):                # weights keep 256 bytes
        check_alignment("weight", profile="nv_small", start_address=8)
    with pytest.raises(LayoutError, match="unknown format"):
        check_alignment("lut")
