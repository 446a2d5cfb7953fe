"""Image (pixel) input of the convolution against the nv_small RTL (Verilator): harness/refmodel/conv/image.py.

* testvectors/conv_image_rtl: image layers whose goldens are the nv_small RTL's outputs (``nvdla-hil fuzz
  --unit conv-image --target verilator --profile nv_small --seed 31 --count 30 --set width=1..12 --set
  height=1..4 --set kernels=1..10 --keep``, 12 of the 30 kept; and ``--seed 32 --count 10 --set
  'post_extension=2|4' --set 'format=T_R8|T_A8B8G8R8|T_X8R8G8B8' --set width=1..12 --set height=1..6 --set
  kernels=1..10 --keep``, cases 1, 6, 8: CSC channel post-extension of 2 and 4 lines): T_R8, 8-bit packed RGB/YUV (A/X first and
  last) and the 8-bit semi-planar formats, X offsets up to the 8-byte atom's last pixel (the UV plane's
  start inside an atom), CDMA left/right padding with zero and random pad values, CSC top/bottom padding,
  the convertor with offset or per-channel mean and sign override, x strides whose byte step exceeds the
  atom, pre-extended kernels wider than MAC atomic C (8), lines of several 8-byte CBUF entries. They run
  bit-exactly on the model target.
* What they pin: the pixel line fills ``cbuf_entry_bytes`` entries (8 on nv_small, not nvdlav1's 128), the
  X offset and the UV start follow the 8-byte atom, post-extension stacks ``atomic C / post`` elements of
  each line into one MAC step (tests/test_image_geometry.py works these by hand).
"""

from __future__ import annotations

import pytest
from _suites import assert_passes_on_model, bundled_cases

from nvdla_hil.harness.refmodel.conv.image import PIXEL_CODES
from nvdla_hil.harness.vectors import load_case

CASES = bundled_cases("conv_image_rtl")


def _fields(case) -> dict[str, int]:
    return {f"{r.name}.{k}": int(v) for r in case.registers for k, v in r.fields.items()}


def test_suite_is_bundled_with_rtl_goldens():
    assert len(CASES) == 15
    formats, seen = set(), {"x_offset": False, "pad_lr": False, "pad_tb": False, "pad_value": False, "mean": False,
                            "signed": False, "cvt_off": False, "multi_entry": False, "wide_kernel": False,
                            "post2": False, "post4": False}
    for p in CASES:
        c = load_case(p)
        assert c.profile == "nv_small" and c.unit == "CONV", p
        assert c.golden_source["kind"] == "rtl" and c.golden_source["config"] == "nv_small", p
        assert "Verilator RTL sim nv_small" in c.provenance["note"], p
        f = _fields(c)
        assert f["CDMA.D_DATAIN_FORMAT.DATAIN_FORMAT"] == 1 and f["CSC.D_DATAIN_FORMAT.DATAIN_FORMAT"] == 1, p
        formats.add(PIXEL_CODES[f["CDMA.D_DATAIN_FORMAT.PIXEL_FORMAT"]])
        seen["x_offset"] |= f["CDMA.D_PIXEL_OFFSET.PIXEL_X_OFFSET"] > 0
        seen["pad_lr"] |= f["CDMA.D_ZERO_PADDING.PAD_LEFT"] + f["CDMA.D_ZERO_PADDING.PAD_RIGHT"] > 0
        seen["pad_tb"] |= f["CSC.D_ZERO_PADDING.PAD_TOP"] > 0
        seen["pad_value"] |= f["CDMA.D_ZERO_PADDING_VALUE.PAD_VALUE"] != 0
        seen["mean"] |= f["CDMA.D_CVT_CFG.CVT_EN"] == 1 and f["CDMA.D_MEAN_FORMAT.MEAN_FORMAT"] == 1
        seen["signed"] |= f["CDMA.D_CVT_CFG.CVT_EN"] == 1 and f["CDMA.D_DATAIN_FORMAT.PIXEL_SIGN_OVERRIDE"] == 1
        seen["cvt_off"] |= f["CDMA.D_CVT_CFG.CVT_EN"] == 0
        seen["multi_entry"] |= f["CDMA.D_ENTRY_PER_SLICE.ENTRIES"] > 0  # a line of more than one 8-byte entry
        seen["wide_kernel"] |= f["CSC.D_WEIGHT_SIZE_EXT_1.WEIGHT_CHANNEL_EXT"] + 1 > 8  # > MAC atomic C
        seen["post2"] |= f["CSC.D_POST_Y_EXTENSION.Y_EXTENSION"] == 1
        seen["post4"] |= f["CSC.D_POST_Y_EXTENSION.Y_EXTENSION"] == 2
    assert {"T_R8", "T_Y8___U8V8_N444", "T_Y8___V8U8_N444"} <= formats, formats
    assert len(formats) == 9, formats
    assert all(seen.values()), seen


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_rtl_golden_passes_on_model(case):
    assert_passes_on_model(case, semantics="rtl")
