"""Fuzz unit ``conv`` (harness/fuzz/units/conv.py, harness/fuzz/constraints/conv.yaml): the generator draws
legal layers on every profile (the model as DUT agrees with the model as reference, so every case
must pass), precisions the profile lacks are dropped, and the CBUF limits hold."""

from __future__ import annotations

import pytest
from nvdla_hil.harness.fuzz import load_constraints, run_fuzz
from nvdla_hil.harness.targets import TargetSpec


@pytest.mark.parametrize("profile,sets", [
    ("nv_small", []),
    ("nv_small_256_full", []),
    ("nv_full", ["precision=int8|int16"]),
])
def test_conv_fuzz_cases_run_on_the_model(profile, sets):
    rep = run_fuzz("conv", TargetSpec(kind="model", profile=profile), count=6, seed=4, profile=profile, sets=sets)
    assert [c.status for c in rep.cases] == ["passed"] * 6, [c.line for c in rep.failed]


def test_nv_small_drops_int16_and_fp16():
    c = load_constraints("conv", profile="nv_small")
    assert c.fields["precision"].values == ["int8"]
    c = load_constraints("conv", profile="nv_full")
    assert set(c.fields["precision"].values) == {"int8", "int16", "fp16"}


def test_generated_layers_fit_the_cbuf():
    from pathlib import Path
    import tempfile

    from nvdla_hil.harness.fuzz import generate
    from nvdla_hil.harness.vectors import load_case

    c = load_constraints("conv", profile="nv_small", sets=["channels=64..80", "width=12", "height=10", "kernels=40"])
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(3):
            case = load_case(generate(c, 9, i, Path(tmp)))
            regs = {r.name: r.value for r in case.registers}
            bank = regs["CDMA.D_BANK"]
            assert (bank & 0x1F) + 1 + ((bank >> 16) & 0x1F) + 1 <= 32  # DATA_BANK [4:0], WEIGHT_BANK [20:16]


@pytest.mark.parametrize("profile", ["nv_small", "nv_medium_1024_full", "nv_full"])
def test_batch_asked_for_is_the_batch_run(profile, tmp_path):
    """``--set batch=4``: the geometry is shaped (even output width, the CBUF holding 4 cubes) so
    every case runs 4 batches: CDMA/CSC/CACC ``D_BATCH_NUMBER`` and SDP ``BATCH_NUMBER`` say 3, one
    input and one output cube per batch."""
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.fuzz import generate
    from nvdla_hil.harness.vectors import load_case

    rm = load_profile(profile).regmap
    c = load_constraints("conv", profile=profile, sets=["batch=4"])
    for i in range(6):
        case = load_case(generate(c, 5, i, tmp_path))
        regs = {r.name: r.value for r in case.registers}
        for blk in ("CDMA", "CSC", "CACC"):
            assert rm.register(blk, "D_BATCH_NUMBER").field("BATCHES").extract(regs[f"{blk}.D_BATCH_NUMBER"]) == 3, (i, blk)
        assert rm.register("SDP", "D_FEATURE_MODE_CFG").field("BATCH_NUMBER").extract(regs["SDP.D_FEATURE_MODE_CFG"]) == 3
        assert len(case.outputs) == 4 and len([s for s in case.inputs if s.name.startswith("src")]) == 4
        assert "4 batches" in case.description and "asked" not in case.description


def test_batch_that_cannot_run_says_why(tmp_path):
    """Width, kernel and padding fixed so the output is 1 wide (odd): one batch, and the case says so."""
    from nvdla_hil.harness.fuzz import generate
    from nvdla_hil.harness.vectors import load_case

    sets = ["batch=4", "width=1", "kernel_w=1", "pad_left=0", "pad_right=0", "stride_x=1", "dilation_x=1", "height=3",
            "kernel_h=1", "stride_y=1"]
    case = load_case(generate(load_constraints("conv", profile="nv_small", sets=sets), 5, 0, tmp_path))
    assert len(case.outputs) == 1
    assert "(batch 4 asked: odd output width)" in case.description
