"""``nvdla-hil fuzz``: reproducibility from the seed, constraint errors, an injected model bug
found within the default budget, the CLI's exit codes."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from nvdla_hil.harness import fuzz
from nvdla_hil.harness.vectors.layer import rng_for
from nvdla_hil.harness.targets import TargetSpec


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("unit", fuzz.UNITS)
def test_case_i_of_seed_s_is_reproducible(unit: str, tmp_path: Path) -> None:
    c = fuzz.load_constraints(unit)
    a = fuzz.generate(c, 11, 3, tmp_path / "a")
    b = fuzz.generate(fuzz.load_constraints(unit), 11, 3, tmp_path / "b")
    assert _files(a) == _files(b)  # case.yaml, inputs, goldens: byte for byte
    other = fuzz.generate(c, 11, 4, tmp_path / "a")
    assert _files(other) != _files(a)


def test_replaying_one_case_gives_the_campaigns_case(tmp_path: Path) -> None:
    fuzz.run_fuzz("sdp-cvt", TargetSpec("model"), count=3, seed=5, model_bugs=["SDP.D_CVT_OFFSET.CVT_OFFSET+1"],
                        out=tmp_path / "all")
    one = fuzz.run_fuzz("sdp-cvt", TargetSpec("model"), count=1, seed=5, first=2,
                        model_bugs=["SDP.D_CVT_OFFSET.CVT_OFFSET+1"], out=tmp_path / "one")
    name = fuzz.case_name("sdp-cvt", 5, 2)
    assert [c.name for c in one.cases] == [name]
    # a campaign saves the cases that fail: with the bug, case 2 does, in both runs
    assert (tmp_path / "all" / name).is_dir() and one.cases[0].saved
    assert _files(tmp_path / "all" / name) == _files(tmp_path / "one" / name)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, match", [
    ("fields:\n  bogus: {value: 1}\n", r"fields\.bogus: unknown field of sdp-lut"),
    ("fields:\n  channels: {range: [1, 9000]}\n", r"fields\.channels\.range: 9000 is outside the legal range 1\.\.8192"),
    ("fields:\n  channels: {rnage: [1, 4]}\n", r"fields\.channels: unknown key 'rnage'"),
    ("fields:\n  le_function: {choices: [cubic]}\n", r"fields\.le_function\.choices: 'cubic' is not one of exponent, linear"),
    ("fields:\n  channels: {range: [1, 4]}\n  channels: {range: [2, 3]}\n", r"c\.yaml: line 3: duplicate key 'channels' \(first at line 2\)"),
    ("unit: cdp-lrn\n", r"unit 'cdp-lrn' does not match --unit sdp-lut"),
    ("fields:\n  width: {range: [1, 2], when: {nope: 1}}\n", r"fields\.width\.when: 'nope' is not an earlier field"),
    ("whatever: 1\n", r"unknown key 'whatever'"),
    ("fields:\n  slope_shift: {range: [-4, 4], extremes: 2}\n", r"fields\.slope_shift\.extremes: a probability"),
])
def test_constraint_file_errors_name_the_key(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(fuzz.ConstraintError, match=match):
        fuzz.load_constraints("sdp-lut", files=[_write(tmp_path, text)])


def test_set_overrides_and_errors() -> None:
    c = fuzz.load_constraints("sdp-lut", sets=["channels=8", "bs_mul=2..4", "le_function=linear|exponent"])
    assert c.fields["channels"].values == [8]
    assert (c.fields["bs_mul"].lo, c.fields["bs_mul"].hi) == (2, 4)
    assert c.fields["le_function"].values == ["linear", "exponent"]
    with pytest.raises(fuzz.ConstraintError, match=r"--set: fields\.slope_shift\.value: 99 is outside the legal range -16\.\.15"):
        fuzz.load_constraints("sdp-lut", sets=["slope_shift=99"])
    with pytest.raises(fuzz.ConstraintError, match="expected key=value"):
        fuzz.load_constraints("sdp-lut", sets=["channels"])
    # the secondary port is not in nv_small's legal space
    with pytest.raises(fuzz.ConstraintError, match=r"src_port.value: sec needs the secondary memory port .*\(sec_mem\), "
                       "which nv_small lacks"):
        fuzz.load_constraints("cdp-lrn", profile="nv_small", sets=["src_port=sec"])
    with pytest.raises(fuzz.UnitUnavailable, match=r"fuzz unit sdp-lut needs the SDP LUT \(sdp_lut\), which profile "
                       "nv_small lacks"):
        fuzz.load_constraints("sdp-lut", profile="nv_small")


def test_set_keeps_the_fields_dependency() -> None:
    c = fuzz.load_constraints("sdp-lut", sets=["width=5", "shape=1x1xC"])
    s = fuzz.Sampler(c, rng_for(1, 0))
    assert s["shape"] == "1x1xC" and s["width"] == 1  # width is drawn only for cube / single_line


def test_injected_lut_priority_bug_is_found_within_the_default_budget(tmp_path: Path) -> None:
    """The device under test is a model target whose SDP LUT underflow priority is flipped
    (``model_bugs``: :func:`fuzz.open_dut` injects it into the DUT only); the reference stays
    correct. fuzz finds it, saves a vector that fails on the buggy target and passes on a
    correct one."""
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import run_case

    bug = "SDP.S_LUT_CFG.LUT_UFLOW_PRIORITY^1"
    lines: list[str] = []
    rep = fuzz.run_fuzz("sdp-lut", TargetSpec("model"), seed=3, out=tmp_path, log=lines.append,
                        model_bugs=[bug])  # default count
    assert rep.failed, "the flipped priority was not found in 50 cases"
    first = rep.failed[0]
    assert first.saved and f"seed=3 case={first.index}" in lines[0] and "expected" in lines[0]
    with ModelTarget("nv_small_256_full", bugs=[bug], coverage=False) as t:
        assert run_case(Path(first.saved), t).status == "failed"
    with ModelTarget("nv_small_256_full", coverage=False) as t:
        assert run_case(Path(first.saved), t).passed


def _cli(argv: list[str]) -> int:
    from nvdla_hil.harness.cli import fuzz as fuzz_cli

    p = argparse.ArgumentParser(prog="nvdla-hil")
    sub = p.add_subparsers(dest="command", required=True)
    fuzz_cli.add_subcommands(sub)
    args = p.parse_args(argv)
    return args.func(args)


def test_cli_exit_codes(tmp_path: Path, capsys) -> None:
    # the model as the DUT without an injected fault would compare the model with itself: refused
    assert _cli(["fuzz", "--unit", "cdp-lrn", "--count", "4", "--seed", "2"]) == 2
    err = capsys.readouterr().err
    assert "compare the reference model with itself" in err and "--target verilator|cmod|serial" in err
    assert "--model-bug" in err
    # a fault in SDP leaves CDP alone: every cdp-lrn case agrees (exit 0) and the summary is printed
    assert _cli(["fuzz", "--unit", "cdp-lrn", "--count", "4", "--seed", "2", "--model-bug", "SDP.D_CVT_SCALE.CVT_SCALE+1",
                 "--coverage-out", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "summary: 4 cases" in out and "4 passed" in out and "cdp.lut" in out
    assert _cli(["fuzz", "--unit", "sdp-cvt", "--count", "6", "--model-bug", "SDP.D_CVT_SCALE.CVT_SCALE+1",
                 "--out", str(tmp_path / "fail")]) == 1
    out = capsys.readouterr().out
    assert "FAILED sdp-cvt seed=1 case=" in out and "first (" in out and "worst (" in out
    assert any((tmp_path / "fail").iterdir())
    assert _cli(["fuzz", "--unit", "sdp-lut", "--set", "channels=0", "--model-bug", "SDP.D_CVT_SCALE.CVT_SCALE+1"]) == 2
    assert "fields.channels.value: 0 is outside the legal range" in capsys.readouterr().err
    assert _cli(["coverage", "show", str(tmp_path / "c.json")]) == 0
    assert "cdp.lut" in capsys.readouterr().out
