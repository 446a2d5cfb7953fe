"""CSC channel post-extension of image input (``CSC.D_POST_Y_EXTENSION``): harness/refmodel/conv/image.py.

* testvectors/conv_postext: image layers with 2- and 4-line post-extension whose goldens are NVDLA's C model's
  outputs (nv_full, ``nvdla-hil fuzz --unit conv-image --target cmod --model-semantics cmod --profile nv_full
  --set 'post_extension=2|4' --seed 12 --count 80 --keep``, cases 3, 25, 26, 41 and 79 of the 80 that all
  agreed): pre-extended kernels narrower than ``atomic C / post`` (20 channels on 2 lines: LeNet's 5x5 on
  A16B16G16R16_F), kernel heights that are no multiple of the post factor (a short last MAC step), INT8,
  INT16 and FP16, top/bottom padding with random pad values, compressed weights; and one whose golden is
  the nv_small RTL's (Verilator, ``fuzz --unit conv-image --target verilator --profile nv_small --set
  'post_extension=2|4' --set 'format=T_R8|T_A8B8G8R8|T_X8R8G8B8' --set width=1..12 --set height=1..6 --set
  kernels=1..10 --seed 41 --count 12 --keep``, case 5: 4 lines of a 1-channel kernel on 2 of 8 lanes each,
  kernel height 3). They run bit-exactly on the model target (the RTL one under RTL semantics).
* The model's reading of the post-extended weight format (cmod ``SendWeightToMacSequencerDirectConvCommon``)
  agrees with the layouts' packer ``nvdla.weight.image`` (seed 000 "Basic Weight for image input"),
  written apart from it.
"""

from __future__ import annotations

import numpy as np
import pytest
from _suites import assert_passes_on_model, bundled_cases
from test_conv_image import _image_view  # noqa: I001 - the sibling test module's register helper

from nvdla_hil.harness.layouts import get_layout
from nvdla_hil.harness.layouts.nvdla.weight import image_pre_extend
from nvdla_hil.harness.refmodel.base import InvalidLayer, ModelOptions
from nvdla_hil.harness.refmodel.conv.image import fetch_image, post_weight_offsets
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.vectors import load_case
from nvdla_hil.drivers.profiles import load_profile

CASES = bundled_cases("conv_postext")
PROF = load_profile("nv_full")


def _fields(case) -> dict[str, int]:  # noqa: ANN001
    return {f"{r.name}.{k}": int(v) for r in case.registers for k, v in r.fields.items()}


def test_suite_is_bundled_with_oracle_goldens_covering_the_rule():
    assert [p.name for p in CASES] == ["fuzz-conv-image-s12-00003", "fuzz-conv-image-s12-00025", "fuzz-conv-image-s12-00026",
                                       "fuzz-conv-image-s12-00041", "fuzz-conv-image-s12-00079", "fuzz-conv-image-s41-00005"]
    seen = {"post2": False, "post4": False, "short_step": False, "narrow": False, "compressed": False,
            "int8": False, "int16": False, "fp16": False, "pad_value": False, "rtl": False}
    for p in CASES:
        c = load_case(p)
        assert c.unit == "CONV", p
        if c.golden_source["kind"] == "rtl":
            assert c.profile == c.golden_source["config"] == "nv_small" and "Verilator" in c.provenance["note"], p
            seen["rtl"] = True
        else:
            assert c.profile == "nv_full", p
            assert c.golden_source["kind"] == "cmod" and "NVDLA C model" in c.provenance["note"], p
        lanes = load_profile(c.profile).mac_atomic_c
        f = _fields(c)
        post = 1 << f["CSC.D_POST_Y_EXTENSION.Y_EXTENSION"]
        ce = f["CSC.D_WEIGHT_SIZE_EXT_1.WEIGHT_CHANNEL_EXT"] + 1
        r = f["CSC.D_WEIGHT_SIZE_EXT_0.WEIGHT_HEIGHT_EXT"] + 1
        assert post > 1 and ce * post <= lanes, p
        seen[f"post{post}"] = True
        seen["short_step"] |= r % post != 0
        seen["narrow"] |= ce * post < lanes  # lanes of each line left 0
        seen["compressed"] |= f["CDMA.D_WEIGHT_FORMAT.WEIGHT_FORMAT"] == 1
        seen[("int8", "int16", "fp16")[f["CDMA.D_MISC_CFG.PROC_PRECISION"]]] = True
        seen["pad_value"] |= f["CSC.D_ZERO_PADDING_VALUE.PAD_VALUE"] != 0 and f["CSC.D_ZERO_PADDING.PAD_TOP"] > 0
    assert all(seen.values()), seen


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_oracle_golden_passes_on_model(case):
    assert_passes_on_model(case, semantics="rtl" if load_case(case).golden_source["kind"] == "rtl" else "cmod")


@pytest.mark.parametrize(("shape", "dtype", "post"), [
    ((5, 4, 5, 5), np.float16, 2),   # LeNet's first layer on A16B16G16R16_F: Ce 20, R 5 (short last step)
    ((37, 1, 7, 7), np.int8, 4),     # two kernel groups (32 + 5), R 7 = 4 + 3
    ((20, 3, 4, 2), np.int16, 2),    # 16 + 4 kernels, R a multiple of 2
    ((3, 4, 3, 1), np.int8, 4),      # R 3 < 4: one short step only
])
def test_weight_offsets_read_what_the_image_weight_layout_packs(shape, dtype, post):
    rng = np.random.default_rng(sum(shape) + post)
    w = rng.integers(-100, 100, size=shape).astype(dtype)
    buf = get_layout("nvdla.weight.image").pack(w, profile="nv_full", post_extension=post)
    k, c, r, s = shape
    bpe = np.dtype(dtype).itemsize
    group = PROF.mac_atomic_k if bpe == 1 else PROF.mac_atomic_k // 2
    raw = np.asarray(buf, dtype=np.uint8).view(np.int8 if bpe == 1 else "<i2")
    got = raw[post_weight_offsets(k, c * s, r, post, group)]
    want = image_pre_extend(w)[..., 0]
    bits = want.view("<i2") if dtype == np.float16 else want
    assert np.array_equal(got, bits.astype(got.dtype))


def test_more_channels_than_a_lines_lanes_is_refused():
    """Post-extension 2 on nv_full gives each line 64 / 2 = 32 MAC lanes: a 40-channel pre-extended kernel
    (T_R8, kernel width 40) cannot be post-extended (seed 000: two-line needs C <= 32)."""
    mem = SparseMemory()
    mem.write(0x1000, np.zeros(64 * 4, np.uint8))
    v = _image_view("T_R8", 40, 4, proc=0, in_prec=0, e=1, s=40,
                    CSC__D_POST_Y_EXTENSION__Y_EXTENSION=1, CSC__D_WEIGHT_SIZE_EXT_0__WEIGHT_HEIGHT_EXT=1,
                    CSC__D_DATAOUT_SIZE_0__DATAOUT_HEIGHT=2)
    with pytest.raises(InvalidLayer, match="exceed the 32 MAC lanes"):
        fetch_image(v, mem, ModelOptions.for_profile(PROF, "cmod"))


def test_short_last_step_lines_are_zero_and_lines_land_at_lanes_of_their_own():
    """T_R8, kernel 3 x 3 pre-extended to Ce 3, post 2 (cmod csc ``SendImageDataToMacSequencerConvCommon``):
    step 0 holds lines oy, oy+1 in lanes 0..2 and 32..34, step 1 line oy+2 in lanes 0..2 and nothing else
    (the kernel's 4th line does not exist: its lanes are 0, not the next image line)."""
    mem = SparseMemory()
    pix = (np.arange(5 * 3) + 1).astype(np.uint8).reshape(5, 3)
    for y in range(5):
        mem.write(0x1000 + 64 * y, pix[y])
    v = _image_view("T_R8", 3, 5, proc=0, in_prec=0, e=1, s=3,
                    CSC__D_POST_Y_EXTENSION__Y_EXTENSION=1, CSC__D_WEIGHT_SIZE_EXT_0__WEIGHT_HEIGHT_EXT=2,
                    CSC__D_DATAOUT_SIZE_0__DATAOUT_HEIGHT=2)
    cube = fetch_image(v, mem, ModelOptions.for_profile(PROF, "cmod"))
    assert cube.shape == (64, 3 * 2, 1)  # (lanes, OH x steps, OW)
    for oy in range(3):
        s0, s1 = cube[:, 2 * oy, 0], cube[:, 2 * oy + 1, 0]
        assert s0[:3].tolist() == pix[oy].tolist() and s0[32:35].tolist() == pix[oy + 1].tolist()
        assert s1[:3].tolist() == pix[oy + 2].tolist()
        assert not s0[3:32].any() and not s0[35:].any() and not s1[3:].any()
