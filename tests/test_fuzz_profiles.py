"""Every fuzz unit on every shipped profile draws only what the profile has (harness/fuzz/legal.py, "what a
profile has"): a unit whose essential feature the profile lacks is refused at once (one line naming
the unit, the profile and the feature; the CLI exits 2), every other pair generates its cases with no
generation error, each case needing only features of the profile (``load_case`` checks what the
case declares and programs, :func:`~nvdla_hil.harness.vectors.case_features` again here).

Cases per pair: ``NVDLA_HIL_FUZZ_CASES`` (default 5; the issue's bar is 100:
``NVDLA_HIL_FUZZ_CASES=100 pytest tests/test_fuzz_profiles.py -n 2``, about half an hour on two busy
cores). Generation runs the reference model for every case (the golden and the aiming runs), so
a case the model refuses fails here too."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from nvdla_hil.drivers.profiles import FEATURES, list_profiles, load_profile
from nvdla_hil.harness import fuzz
from nvdla_hil.harness.vectors import case_features, load_case

SHIPPED = ("nv_small", "nv_small_256", "nv_small_256_full", "nv_medium_512", "nv_medium_1024_full", "nv_large", "nv_full")
CASES = int(os.environ.get("NVDLA_HIL_FUZZ_CASES", "5"))
SEED = 23


def test_the_shipped_profiles_are_the_ones_checked() -> None:
    assert set(SHIPPED) <= set(list_profiles())


@pytest.mark.parametrize("profile", SHIPPED)
@pytest.mark.parametrize("unit", fuzz.UNITS)
def test_unit_draws_only_what_the_profile_has(unit: str, profile: str, tmp_path: Path) -> None:
    prof = load_profile(profile)
    missing = fuzz.lacks(prof, fuzz.UNIT_NEEDS[unit])
    if missing:
        with pytest.raises(fuzz.UnitUnavailable) as e:
            fuzz.load_constraints(unit, profile=profile)
        msg = str(e.value)
        assert f"fuzz unit {unit} " in msg and f"profile {profile} lacks" in msg and "\n" not in msg
        assert all(f"({f})" in msg for f in missing), msg
        return
    c = fuzz.load_constraints(unit, profile=profile)
    has = {f for f in FEATURES if prof.has(f)}
    for i in range(CASES):
        folder = fuzz.generate(c, SEED, i, tmp_path)  # raises on a generation error
        case = load_case(folder)
        assert case.profile == profile
        assert case.features | case_features(case) <= has, (unit, profile, i, case.features - has)


def test_every_unit_runs_somewhere_and_is_refused_only_for_a_missing_feature() -> None:
    for unit in fuzz.UNITS:
        ok = [p for p in SHIPPED if fuzz.unit_refusal(unit, load_profile(p)) is None]
        assert ok, f"{unit} runs on no shipped profile"
    # the essential features the issue names
    assert fuzz.lacks(load_profile("nv_small"), fuzz.UNIT_NEEDS["sdp-lut"]) == ["sdp_lut"]
    assert fuzz.lacks(load_profile("nv_small"), fuzz.UNIT_NEEDS["conv-winograd"]) == ["winograd"]
    for p in ("nv_small", "nv_small_256_full", "nv_large"):  # INT8-only profiles
        assert "fp16" in fuzz.lacks(load_profile(p), fuzz.UNIT_NEEDS["sdp-fp16"])
        assert "int16" in fuzz.lacks(load_profile(p), fuzz.UNIT_NEEDS["cdp-int16"])
        assert "weight_compression" in fuzz.lacks(load_profile(p), fuzz.UNIT_NEEDS["conv-compressed"])


def _cli(argv: list[str]) -> int:
    from nvdla_hil.harness.cli import fuzz as fuzz_cli

    p = argparse.ArgumentParser(prog="nvdla-hil")
    sub = p.add_subparsers(dest="command", required=True)
    fuzz_cli.add_subcommands(sub)
    args = p.parse_args(argv)
    return args.func(args)


@pytest.mark.parametrize("unit,profile,feature", [
    ("sdp-lut", "nv_small", "sdp_lut"),
    ("sdp-ew", "nv_medium_512", "sdp_ew"),
    ("conv-winograd", "nv_small", "winograd"),
    ("conv-compressed", "nv_large", "weight_compression"),
    ("sdp-fp16", "nv_small_256_full", "fp16"),
    ("cdp-fp16", "nv_medium_1024_full", "fp16"),
    ("cdp-int16", "nv_small", "int16"),
])
@pytest.mark.parametrize("target", [[], ["--target", "cmod", "--nvdla-hw", "/nonexistent"]])
def test_cli_refuses_a_unit_the_profile_cannot_run(unit: str, profile: str, feature: str, target: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Whatever the target, before anything runs: exit 2 and one line naming unit, profile, feature."""
    assert _cli(["fuzz", "--unit", unit, "--profile", profile, "--count", "3", *target]) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and not cap.out, cap
    assert f"fuzz unit {unit} needs" in lines[0] and f"({feature})" in lines[0] and f"profile {profile} lacks" in lines[0]


def test_optional_features_narrow_the_draw() -> None:
    small, full = load_profile("nv_small"), load_profile("nv_full")
    # nv_small: no secondary port, INT8 only; nv_full has both
    assert fuzz.load_constraints("cdp-lrn", profile="nv_small").fields["src_port"].values == ["pri"]
    assert set(fuzz.load_constraints("cdp-lrn", profile="nv_full").fields["src_port"].values) == {"pri", "sec"}
    assert fuzz.load_constraints("pdp", profile="nv_small").fields["precision"].values == ["int8"]
    assert set(fuzz.load_constraints("pdp", profile="nv_full").fields["precision"].values) == {"int8", "int16", "fp16"}
    port = fuzz.SCHEMAS["cdp-lrn"]["src_port"]
    assert fuzz.allowed(port, small) == ("pri",) and fuzz.allowed(port, full) == ("pri", "sec")
    assert fuzz.lacks(small, ("cdp", "int16", "fp16")) == ["int16", "fp16"] and fuzz.lacks(full, "fp16") == []
    assert fuzz.lacks(small, None) == [] and fuzz.lacks(small, ()) == []


def test_asking_for_what_the_profile_lacks_is_an_error_naming_it() -> None:
    with pytest.raises(fuzz.ConstraintError, match=r"fields\.precision\.choices: nothing left to choose: every choice "
                       r"needs the FP16 precision \(fp16\) or INT16 precision \(int16\), which nv_small lacks"):
        fuzz.load_constraints("pdp", profile="nv_small", sets=["precision=int16|fp16"])
    with pytest.raises(fuzz.ConstraintError, match=r"fields\.precision\.value: int16 needs the INT16 precision \(int16\)"):
        fuzz.load_constraints("cdp-lrn", profile="nv_large", sets=["precision=int16"])


def test_cdp_int16_cases_are_int16_and_declare_it(tmp_path: Path) -> None:
    c = fuzz.load_constraints("cdp-int16", profile="nv_full")
    case = load_case(fuzz.generate(c, 2, 0, tmp_path))
    regs = {r.name: r.value for r in case.registers}
    assert regs["CDP.D_DATA_FORMAT"] == 1 and regs["CDP_RDMA.D_DATA_FORMAT"] == 1  # INT16 both sides
    assert all(s.dtype.name == "int16" for s in case.inputs + case.outputs)
    assert "int16" in case.features
    # cdp-lrn keeps INT8 unless asked (its constraints do not draw precision)
    assert "precision" not in fuzz.load_constraints("cdp-lrn", profile="nv_full").fields


def test_a_default_needing_a_missing_feature_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("fields:\n  precision: {choices: [int8], default: int16}\n")
    with pytest.raises(fuzz.ConstraintError, match=r"fields\.precision\.default: int16 needs the INT16 precision \(int16\), "
                       "which nv_small lacks"):
        fuzz.load_constraints("cdp-lrn", profile="nv_small", files=[f])
    assert fuzz.load_constraints("cdp-lrn", profile="nv_full", files=[f]).fields["precision"].default == "int16"
