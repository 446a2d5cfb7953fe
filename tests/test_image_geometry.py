"""Image input geometry per configuration (harness/refmodel/conv/image.py): the CBUF entry of a pixel
line, the X offset range and the plane-1 start all follow the profile's memory atom and CBUF entry,
not nvdlav1's 32-byte atom and 128-byte entry.

Hand-worked examples of the RTL's rules (nvdla/hw master, generated for nv_small):
``NV_NVDLA_CDMA_IMG_ctrl.v`` (``pixel_planar0/1_mask`` = atom / bytes per pixel - 1,
``pixel_planar1_x_offset = PIXEL_X_OFFSET & pixel_planar1_mask``), ``NV_NVDLA_CSC_dl.v``
(``pixel_w_cur = pixel_w_cnt >> log2(entry)``: the CSC addresses a pixel line by CBUF entries of
``cbuf_entry_bytes``) and nvdla/sw ``ConvCoreNode::calculateEPS`` (image: ``ceil(width_ext * cpa * bpe /
bufEntryWidth)``). The nv_small RTL itself checks these through testvectors/conv_image_rtl.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.layouts.nvdla import PIXEL_FORMATS
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import InvalidLayer, ModelOptions, UnitNotModelled
from nvdla_hil.harness.refmodel.conv.image import PIXEL_CODES, fetch_image, image_geometry, read_pixels, x_offset_max


class _View:
    """Registers of the executing group of ``profile``: fields by ``BLOCK__REG__FIELD`` name, whole
    registers by ``BLOCK__REG`` (everything else 0)."""

    def __init__(self, profile: str, **values: int) -> None:
        self.rm = load_profile(profile).regmap
        self.regs: dict[tuple[str, str], int] = {}
        for key, v in values.items():
            parts = key.split("__")
            if len(parts) == 2:
                self.regs[(parts[0], parts[1])] = v
            else:
                blk, reg, fld = parts
                r = self.rm.register(blk, reg)
                self.regs[(blk, reg)] = r.field(fld).insert(self.regs.get((blk, reg), 0), v)

    def reg(self, block: str, register: str) -> int:
        return self.regs.get((block, register), 0)

    def field(self, block: str, register: str, field: str) -> int:
        return self.rm.register(block, register).field(field).extract(self.reg(block, register))


def _int8_view(profile: str, fmt: str, w: int, *, e: int, entries: int, xo: int = 0, pad_left: int = 0,
               pad_right: int = 0, **extra: int) -> _View:  # fmt: skip
    """An INT8 image layer, 1 line, 1x1 kernel (pre-extended to ``e`` channels), no convertor."""
    ow = pad_left + w + pad_right
    f = {"CDMA__D_DATAIN_FORMAT__DATAIN_FORMAT": 1, "CDMA__D_DATAIN_FORMAT__PIXEL_FORMAT": PIXEL_CODES.index(fmt),
         "CDMA__D_DATAIN_SIZE_0__DATAIN_WIDTH": w - 1, "CDMA__D_DATAIN_SIZE_1__DATAIN_CHANNEL": e - 1,
         "CDMA__D_DAIN_ADDR_LOW_0": 0x1000, "CDMA__D_LINE_STRIDE": 64, "CDMA__D_PIXEL_OFFSET__PIXEL_X_OFFSET": xo,
         "CDMA__D_ZERO_PADDING__PAD_LEFT": pad_left, "CDMA__D_ZERO_PADDING__PAD_RIGHT": pad_right,
         "CDMA__D_ENTRY_PER_SLICE__ENTRIES": entries - 1, "CSC__D_ENTRY_PER_SLICE__ENTRIES": entries - 1,
         "CSC__D_DATAIN_SIZE_EXT_1__DATAIN_CHANNEL_EXT": e - 1, "CSC__D_WEIGHT_SIZE_EXT_1__WEIGHT_CHANNEL_EXT": e - 1,
         "CSC__D_DATAOUT_SIZE_0__DATAOUT_WIDTH": ow - 1}
    f.update(extra)
    return _View(profile, **f)


def test_x_offset_range_is_the_first_atom_of_plane_0():
    # nv_small (8-byte atom): 8 one-byte pixels, 2 four-byte pixels, 8 Y bytes of a semi-planar line
    assert x_offset_max(PIXEL_FORMATS["T_R8"], 8) == 7
    assert x_offset_max(PIXEL_FORMATS["T_A8B8G8R8"], 8) == 1
    assert x_offset_max(PIXEL_FORMATS["T_Y8___U8V8_N444"], 8) == 7
    # nv_large / nv_full (32-byte atom): seed 000's ranges, for every format
    assert x_offset_max(PIXEL_FORMATS["T_R8"], 32) == 31
    for f in PIXEL_FORMATS.values():
        assert x_offset_max(f, 32) == f.x_offset_max, f.name


@pytest.mark.parametrize(("profile", "entries"), [("nv_small", 3), ("nv_small_256", 1), ("nv_large", 1)])
def test_a_pixel_line_fills_entries_of_the_profiles_cbuf_entry(profile, entries):
    """T_R8, 1 + 20 + 2 pixels = 23 bytes: 3 entries of 8 bytes on nv_small, 1 of 32 or 64 bytes on
    nv_small_256 / nv_large; any other count is refused naming the entry size."""
    opts = ModelOptions.for_profile(load_profile(profile))
    mem = SparseMemory()
    mem.write(0x1000, np.arange(100, 120, dtype=np.uint8))
    v = _int8_view(profile, "T_R8", 20, e=1, entries=entries, pad_left=1, pad_right=2,
                   CDMA__D_ZERO_PADDING_VALUE__PAD_VALUE=0xF9)  # fmt: skip
    cube = fetch_image(v, mem, opts)
    assert cube.shape == (1, 1, 23)
    assert cube[0, 0].tolist() == [-7, *range(100, 120), -7, -7]  # raw pad value, int8
    for wrong in {1, 3} - {entries}:
        bad = _int8_view(profile, "T_R8", 20, e=1, entries=wrong, pad_left=1, pad_right=2)
        with pytest.raises(InvalidLayer, match=f"{entries} CBUF entries of {opts.cbuf_entry_bytes} bytes"):
            fetch_image(bad, mem, opts)


def test_x_offset_beyond_the_first_atom_is_refused():
    opts = ModelOptions.for_profile(load_profile("nv_small"))
    v = _int8_view("nv_small", "T_A8B8G8R8", 2, e=4, entries=1, xo=2)
    with pytest.raises(InvalidLayer, match="outside 0~1 for T_A8B8G8R8 with 8-byte"):
        image_geometry(v, opts)
    assert image_geometry(_int8_view("nv_small", "T_A8B8G8R8", 2, e=4, entries=1, xo=1), opts).x_offset == 1


def test_semi_planar_uv_start_is_the_offset_within_an_8_byte_atom():
    """nv_small, T_Y8___U8V8_N444, PIXEL_X_OFFSET 5: the Y byte of pixel 0 is byte 5 of the line; its UV
    pair is bytes 10, 11 of the UV line, which starts in the line's second 8-byte atom: DAIN_ADDR_1 =
    UV line + 8 and the fetch skips (5 * 2) mod 8 = 2 bytes of it (a 32-byte atom would skip 10). U8V8
    names the 16-bit pair from its high byte: V is the lower byte, U the higher."""
    opts = ModelOptions.for_profile(load_profile("nv_small"))
    mem = SparseMemory()
    mem.write(0x1000, np.arange(64, dtype=np.uint8))
    mem.write(0x2000, np.arange(100, 164, dtype=np.uint8))
    v = _int8_view("nv_small", "T_Y8___U8V8_N444", 2, e=3, entries=1, xo=5,
                   CDMA__D_DAIN_ADDR_LOW_1=0x2008, CDMA__D_LINE_UV_STRIDE=64)  # fmt: skip
    bits = read_pixels(mem, image_geometry(v, opts))
    assert bits[0].tolist() == [[5, 111, 110], [6, 113, 112]]  # Y, U, V


def test_post_extension_under_rtl_semantics_stops_at_atomic_c_per_output_position():
    """nv_small (atomic C 8), T_R8, post-extension 2 lines x Ce 4 (kernel 4 x 2): an output position advances
    2 lines x 1 channel x SX elements; up to SX 4 (8 elements) the RTL agrees with the stacked-lines rule
    (measured on the nv_small RTL), SX 5 (10 elements) is refused under rtl semantics and runs under cmod."""
    opts = ModelOptions.for_profile(load_profile("nv_small"))
    mem = SparseMemory()
    for y in range(3):
        mem.write(0x1000 + 64 * y, (np.arange(12) + 10 * y).astype(np.uint8))
    post = {"CSC__D_POST_Y_EXTENSION__Y_EXTENSION": 1, "CSC__D_WEIGHT_SIZE_EXT_0__WEIGHT_HEIGHT_EXT": 1,
            "CDMA__D_DATAIN_SIZE_0__DATAIN_HEIGHT": 2, "CSC__D_DATAIN_SIZE_EXT_0__DATAIN_HEIGHT_EXT": 2,
            "CSC__D_DATAOUT_SIZE_0__DATAOUT_HEIGHT": 1}

    def view(sx: int) -> _View:
        ow = (12 - 4) // sx + 1
        return _int8_view("nv_small", "T_R8", 12, e=1, entries=2, CSC__D_WEIGHT_SIZE_EXT_1__WEIGHT_CHANNEL_EXT=3,
                          CSC__D_DATAOUT_SIZE_0__DATAOUT_WIDTH=ow - 1, CSC__D_CONV_STRIDE_EXT__CONV_X_STRIDE_EXT=sx - 1,
                          **post)  # fmt: skip

    cube = fetch_image(view(4), mem, opts)  # lanes 0..3 line y, 4..7 line y + 1; x windows at 0, 4, 8
    assert cube.shape == (8, 2, 3)
    assert cube[:, 0, 1].tolist() == [4, 5, 6, 7, 14, 15, 16, 17]
    with pytest.raises(UnitNotModelled, match="beyond atomic C"):
        fetch_image(view(5), mem, opts)
    assert fetch_image(view(5), mem, dataclasses.replace(opts, semantics="cmod")).shape == (8, 2, 2)
