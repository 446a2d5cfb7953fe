"""Fuzz unit ``conv`` (harness/fuzzgen/conv.py, harness/constraints/conv.yaml): the generator draws
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
            assert (bank & 0x1F) + 1 + ((bank >> 16) & 0xF) + 1 <= 32
