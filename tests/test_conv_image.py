"""Image (pixel) input of the convolution: harness/refmodel/conv/image.py and the bundled
testvectors/conv_image suite.

Goldens: hand-worked values from the C model's rules (nvdlav1 cmod ``cdma/NV_NVDLA_cdma.cpp``
``ImageConvDataResponseSequencerCommon`` / ``hls_convertor``, ``hls/include/nvdla_float.h``
``FpIntToFloat``, ``csc/NV_NVDLA_csc.cpp`` ``SendImageDataToMacSequencerConvCommon``) and, for the
suite, the C model's own outputs recorded with ``nvdla-hil fuzz --target cmod --keep``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.layouts import get_layout
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import InvalidLayer, ModelOptions, UnitNotModelled
from nvdla_hil.harness.refmodel.conv.image import (
    PIXEL_CODES,
    fetch_image,
    image_geometry,
    int17_to_fp16_bits,
    pixel_convert,
    read_pixels,
)

ROOT = Path(__file__).resolve().parents[1] / "testvectors"
PROF = load_profile("nv_full")
OPTS = ModelOptions.for_profile(PROF, "cmod")


class _View:
    """Registers of the executing group, set by field name (everything else 0)."""

    def __init__(self, **fields: int) -> None:
        self.regs: dict[tuple[str, str], int] = {}
        for key, v in fields.items():
            blk, reg, fld = key.split("__")
            r = PROF.regmap.register(blk, reg)
            self.regs[(blk, reg)] = r.field(fld).insert(self.regs.get((blk, reg), 0), v)

    def reg(self, block: str, register: str) -> int:
        return self.regs.get((block, register), 0)

    def field(self, block: str, register: str, field: str) -> int:
        return PROF.regmap.register(block, register).field(field).extract(self.reg(block, register))


def _image_view(fmt: str, w: int, h: int, *, proc: int, in_prec: int, e: int, s: int = 1, ow: int | None = None,
                pad_left: int = 0, pad_right: int = 0, pad: int = 0, base: int = 0x1000, line: int = 64,
                **extra: int) -> _View:  # fmt: skip
    wp = pad_left + w + pad_right
    esize = 1 if proc == 0 else 2
    entries = -(-wp * e * esize // 128)
    ow = ow if ow is not None else wp - s + 1
    f = {"CDMA__D_DATAIN_FORMAT__DATAIN_FORMAT": 1, "CDMA__D_DATAIN_FORMAT__PIXEL_FORMAT": PIXEL_CODES.index(fmt),
         "CDMA__D_MISC_CFG__IN_PRECISION": in_prec, "CDMA__D_MISC_CFG__PROC_PRECISION": proc,
         "CDMA__D_DATAIN_SIZE_0__DATAIN_WIDTH": w - 1, "CDMA__D_DATAIN_SIZE_0__DATAIN_HEIGHT": h - 1,
         "CDMA__D_DATAIN_SIZE_1__DATAIN_CHANNEL": e - 1, "CDMA__D_DAIN_ADDR_LOW_0__DATAIN_ADDR_LOW_0": base >> 5,
         "CDMA__D_LINE_STRIDE__LINE_STRIDE": line >> 5, "CDMA__D_ZERO_PADDING__PAD_LEFT": pad_left,
         "CDMA__D_ZERO_PADDING__PAD_RIGHT": pad_right, "CDMA__D_ZERO_PADDING_VALUE__PAD_VALUE": pad & 0xFFFF,
         "CDMA__D_ENTRY_PER_SLICE__ENTRIES": entries - 1, "CSC__D_ENTRY_PER_SLICE__ENTRIES": entries - 1,
         "CSC__D_DATAIN_SIZE_EXT_0__DATAIN_HEIGHT_EXT": h - 1, "CSC__D_DATAIN_SIZE_EXT_1__DATAIN_CHANNEL_EXT": e - 1,
         "CSC__D_WEIGHT_SIZE_EXT_1__WEIGHT_CHANNEL_EXT": s * e - 1, "CSC__D_DATAOUT_SIZE_0__DATAOUT_WIDTH": ow - 1}
    for b in ("CSC", "CMAC_A", "CMAC_B", "CACC"):
        f[f"{b}__D_MISC_CFG__PROC_PRECISION"] = proc
    f.update(extra)
    return _View(**f)


# ---- convertor and FP16 conversion, by hand ------------------------------------------------


def test_pixel_convert_by_hand():
    # (200 - 128) * 3 = 216, >> 1 = 108; (255 - 0) * 2 = 510 saturates to 127 at INT8
    assert pixel_convert(np.array([200]), offset=128, scale=3, truncate=1, proc=0).tolist() == [108]
    assert pixel_convert(np.array([255]), offset=0, scale=2, truncate=0, proc=0).tolist() == [127]
    # round half away from zero: 2.5 -> 3, -2.5 -> -3
    assert pixel_convert(np.array([5, -5]), offset=0, scale=1, truncate=1, proc=1).tolist() == [3, -3]
    # per-channel mean (MEAN_FORMAT): offsets broadcast over the last (component) axis
    x = np.array([[10, 20, 30, 40]])
    assert pixel_convert(x, offset=np.array([1, 2, 3, 4]), scale=1, truncate=0, proc=1).tolist() == [[9, 18, 27, 36]]
    # INT16: a result past the 16-bit range saturates to 32767
    assert pixel_convert(np.array([65535]), offset=-32768, scale=2, truncate=0, proc=1).tolist() == [32767]


def test_int_to_fp16_rounds_to_nearest_even_and_clips_to_65504():
    v = np.array([0, 1, -1, 2049, 2051, 65504, 65519, 65520, 65535, -65536])
    want = [0x0000, 0x3C00, 0xBC00, 0x6800, 0x6802, 0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF, 0xFBFF]
    assert int17_to_fp16_bits(v).tolist() == want
    # FP16 output of the convertor: (100 - 0) * 3 = 300 -> 0x5CB0
    assert pixel_convert(np.array([100]), offset=0, scale=3, truncate=0, proc=2).tolist() == [0x5CB0]


# ---- memory -> components --------------------------------------------------------------------


def test_10bit_packed_components_are_left_aligned():
    spec = get_layout("nvdla.pixel.T_A2B10G10R10")
    comps = np.array([[[0x3FF, 1, 0x200, 3]]], dtype=np.uint16)
    mem = SparseMemory()
    mem.write(0x1000, spec.pack_fn(comps, spec.resolve({})))
    v = _image_view("T_A2B10G10R10", 1, 1, proc=1, in_prec=1, e=4)
    bits = read_pixels(mem, image_geometry(v))
    assert bits.reshape(-1).tolist() == [0xFFC0, 0x40, 0x8000, 0xC000]


def test_semi_planar_uv_plane_skips_a_whole_atom_of_x_offset():
    """Y8 UV8: x offset 20 puts the first UV pair at byte 40 of its line; the C model fetches the UV
    plane from its base address taking the first atom for pixel 16, so base1 = line start + 32."""
    mem = SparseMemory()
    y = np.arange(64, dtype=np.uint8)
    uv = (np.arange(128, dtype=np.uint8) + 100).astype(np.uint8)
    mem.write(0x1000, y)
    mem.write(0x2000, uv)
    v = _image_view("T_Y8___V8U8_N444", 2, 1, proc=0, in_prec=0, e=3,
                    CDMA__D_PIXEL_OFFSET__PIXEL_X_OFFSET=20, CDMA__D_DAIN_ADDR_LOW_1__DATAIN_ADDR_LOW_1=(0x2000 + 32) >> 5,
                    CDMA__D_LINE_UV_STRIDE__UV_LINE_STRIDE=128 >> 5)  # fmt: skip
    bits = read_pixels(mem, image_geometry(v))
    # pixel 0: Y byte 20; U, V = bytes 40, 41 of the UV line (V8U8: U first in memory)
    assert bits[0, 0].tolist() == [20, 140, 141]
    assert bits[0, 1].tolist() == [21, 142, 143]


def test_pre_extended_cube_with_cdma_left_right_padding():
    """T_R8, 3 pixels (200, 1, 2), no convertor: the byte is taken as int8 (200 -> -56); left and
    right padding of the raw pad value 7; a 2-wide kernel pre-extends to 2 channels, x stride 1."""
    mem = SparseMemory()
    mem.write(0x1000, np.array([200, 1, 2], dtype=np.uint8))
    v = _image_view("T_R8", 3, 1, proc=0, in_prec=0, e=1, s=2, pad_left=1, pad_right=1, pad=7)
    cube = fetch_image(v, mem, OPTS)
    line = [7, -56, 1, 2, 7]
    assert cube.shape == (2, 1, 4)
    assert cube[:, 0, :].T.tolist() == [line[i : i + 2] for i in range(4)]


def test_fp16_nan_flush():
    mem = SparseMemory()
    mem.write(0x1000, np.array([0x7E01, 0x3C00], dtype="<u2").view(np.uint8))
    v = _image_view("T_R16_F", 2, 1, proc=2, in_prec=2, e=1, CDMA__D_NAN_FLUSH_TO_ZERO__NAN_TO_ZERO=1)
    assert (fetch_image(v, mem, OPTS)[0, 0] & 0xFFFF).tolist() == [0, 0x3C00]


def test_post_extension_stacks_lines_into_one_mac_step():
    """Post-extension 2 (cmod): a T_R8 image of 3 lines, kernel 32 x 2 pre-extended to Ce = 32 channels;
    MAC step a of output row oy holds line oy + 2a - PAD_TOP in lanes 0..31 and the next line in lanes
    32..63, lines outside the image carrying the CSC pad value."""
    import dataclasses

    from nvdla_hil.harness.refmodel.conv.csc import ConvConfig
    from nvdla_hil.harness.refmodel.conv.image import image_conv_config

    mem = SparseMemory()
    pix = (np.arange(96) % 100).astype(np.uint8).reshape(3, 32)
    for y in range(3):
        mem.write(0x1000 + 64 * y, pix[y])
    extra = {"CSC__D_POST_Y_EXTENSION__Y_EXTENSION": 1, "CSC__D_WEIGHT_SIZE_EXT_0__WEIGHT_HEIGHT_EXT": 1,
             "CSC__D_DATAOUT_SIZE_0__DATAOUT_HEIGHT": 2, "CSC__D_ZERO_PADDING__PAD_TOP": 1,
             "CSC__D_ZERO_PADDING_VALUE__PAD_VALUE": 0xFB}  # -5 at INT8
    v = _image_view("T_R8", 32, 3, proc=0, in_prec=0, e=1, s=32, **extra)
    cube = fetch_image(v, mem, OPTS)
    assert cube.shape == (64, 3, 1)  # rows: lines -1, 0, 1 (OH 3, one step)
    lines = {-1: [-5] * 32, 0: pix[0].tolist(), 1: pix[1].tolist(), 2: pix[2].tolist()}
    for row in range(3):
        assert cube[:32, row, 0].tolist() == lines[row - 1]
        assert cube[32:, row, 0].tolist() == lines[row]
    cfg = image_conv_config(v, ConvConfig(in_w=32, in_h=3, in_c=1, k_w=1, k_h=2, out_w=1, out_h=3, out_k=1, pad_top=1))
    assert (cfg.in_c, cfg.in_h, cfg.k_h, cfg.stride_y, cfg.pad_top, cfg.pad_value) == (64, 3, 1, 1, 0, -5)
    # the RTL's rule is the same while an output position advances <= atomic C elements (tests/test_image_geometry.py)
    assert np.array_equal(fetch_image(v, mem, dataclasses.replace(OPTS, semantics="rtl")), cube)
    v = _image_view("T_R8", 32, 3, proc=0, in_prec=0, e=1, s=16, **extra)  # Ce 16 with 2 lines: 32 lanes a line
    cube = fetch_image(v, mem, OPTS)
    assert cube.shape[0] == 64 and not cube[16:32].any() and not cube[48:].any()  # unused lanes are 0


@pytest.mark.parametrize(
    ("extra", "error", "what"),
    [
        ({"CSC__D_POST_Y_EXTENSION__Y_EXTENSION": 3}, InvalidLayer, "Y_EXTENSION"),
        ({"CSC__D_DILATION_EXT__Y_DILATION_EXT": 1}, UnitNotModelled, "dilation"),
        ({"CDMA__D_MISC_CFG__IN_PRECISION": 1}, InvalidLayer, "IN_PRECISION"),
        ({"CDMA__D_PIXEL_OFFSET__PIXEL_X_OFFSET": 31, "CDMA__D_DATAIN_FORMAT__PIXEL_FORMAT": 12}, InvalidLayer, "X_OFFSET"),
        ({"CSC__D_ENTRY_PER_SLICE__ENTRIES": 3}, InvalidLayer, "ENTRIES"),
        ({"CDMA__D_MISC_CFG__PROC_PRECISION": 1}, InvalidLayer, "CVT_EN"),
        ({"CSC__D_DATAOUT_SIZE_0__DATAOUT_WIDTH": 200}, UnitNotModelled, "beyond"),
    ],
)
def test_refusals_name_the_register(extra, error, what):
    mem = SparseMemory()
    v = _image_view("T_R8", 4, 2, proc=0, in_prec=0, e=1, **extra)
    with pytest.raises(error, match=what):
        fetch_image(v, mem, OPTS)


# ---- bundled suite, goldens = NVDLA C model outputs -------------------------------------------


def _cases(suite: str) -> list[Path]:
    from nvdla_hil.harness.vectors import find_cases

    return find_cases(ROOT / suite)


def run_suite_case(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole layer (CDMA .. SDP) on the model target with the C model's semantics; outputs and
    the recorded statistics compared."""
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import load_case, run_case

    case = load_case(path)
    assert "C model" in case.provenance["note"], case.provenance
    with ModelTarget(case.profile, semantics="cmod") as t:
        res = run_case(case, t, target_kind="model")
    assert res.status == "passed", res.summary()


def test_conv_image_suite_covers_formats_and_precisions():
    cases = _cases("conv_image")
    assert len(cases) >= 10
    text = " ".join(p.joinpath("case.yaml").read_text() for p in cases)
    assert sum(f"conv-image {f} " in text for f in PIXEL_CODES) >= 8
    for prec in ("int8", "int16", "fp16"):
        assert f"-> {prec}:" in text
    assert "compressed weights" in text and "_N444" in text and "NAN_TO_ZERO: 1" in text and "post-extension" in text


@pytest.mark.parametrize("path", _cases("conv_image"), ids=lambda p: p.name)
def test_conv_image_suite_on_the_model(path: Path, monkeypatch: pytest.MonkeyPatch):
    run_suite_case(path, monkeypatch)
