"""The simulator build a verilator run uses: plain, or profile-guided (``--rtl-build pgo``), trained
on NVDLA's own trace tests (harness/targets/rtl_build.py). The training set is chosen from real
folders on disk; the slow test builds, trains and runs the profile-guided simulator of the real
nv_small RTL and checks that the run used it and that a trace passes on it (oracle: the trace's
own CRCs, NVDLA's goldens)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _checkouts import generated_rtl

from nvdla_hil.harness.cli import build_parser, main
from nvdla_hil.harness.cli.regress import _pytest_argv
from nvdla_hil.harness.targets.rtl_build import PGO_TRAINING, pgo_training
from nvdla_hil.sims.build import BuildError


def _traces(root: Path, names: list[str]) -> Path:
    for n in names:
        (root / n).mkdir(parents=True)
        (root / n / f"{n}.cfg").write_text("")
    return root


def test_nv_small_trains_on_its_listed_traces_from_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("NVDLA_TRACE_SETS", "NVDLA_TRACES", "NVDLA_HW"):
        monkeypatch.delenv(k, raising=False)
    hw = tmp_path / "hw"
    _traces(hw / "verif" / "tests" / "trace_tests" / "nv_small", [*PGO_TRAINING["nv_small"], "dc_35x22x54_6x8x54x29_int8_0"])
    got = pgo_training(hw, "nv_small")
    assert [p.name for p in got] == list(PGO_TRAINING["nv_small"])  # the measured traces are not trained on
    assert all(p.parent == hw / "verif" / "tests" / "trace_tests" / "nv_small" for p in got)


def test_an_unlisted_configuration_trains_on_the_first_trace_of_each_unit(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVDLA_TRACES", raising=False)
    monkeypatch.setenv("NVDLA_TRACE_SETS", str(tmp_path / "sets"))
    _traces(tmp_path / "sets" / "nv_large", ["cdp_b_0", "cdp_a_0", "dc_x_0", "pdp_y_0", "sdp_z_0"])
    (tmp_path / "sets" / "nv_large" / "notes").mkdir()  # a folder without its .cfg is no trace
    assert [p.name for p in pgo_training(tmp_path / "no-checkout", "nv_large")] == ["cdp_a_0", "dc_x_0", "pdp_y_0", "sdp_z_0"]


def test_without_trace_tests_or_with_one_missing_the_build_is_refused_naming_where(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("NVDLA_TRACE_SETS", "NVDLA_TRACES"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(BuildError, match=r"trains on NVDLA's trace tests, and none was found \(looked in: .*verif/tests/trace_tests/nv_small"):
        pgo_training(tmp_path / "hw", "nv_small")
    _traces(tmp_path / "hw" / "verif" / "tests" / "trace_tests" / "nv_small", list(PGO_TRAINING["nv_small"][1:]))
    with pytest.raises(BuildError, match=f"training traces are missing: {PGO_TRAINING['nv_small'][0]}$"):
        pgo_training(tmp_path / "hw", "nv_small")


def test_regress_passes_the_build_to_the_plugin_and_refuses_an_unknown_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["regress", "--target", "verilator", "--rtl-build", "pgo"])
    argv = _pytest_argv(args, ["traces"], None, tmp_path, tmp_path / "logs", tmp_path / "j.xml")
    assert argv[argv.index("--nvdla-rtl-build") + 1] == "pgo"
    monkeypatch.setenv("NVDLA_HIL_RTL_BUILD", "fastest")
    assert main(["regs", "dump", "--target", "model", "GLB"]) == 2
    assert "NVDLA_HIL_RTL_BUILD 'fastest': expected one of plain, pgo" in capsys.readouterr().err


@pytest.mark.slow
def test_a_profile_guided_run_uses_the_trained_build_and_passes(tmp_path: Path) -> None:
    hw = os.environ.get("NVDLA_HW")
    traces = os.environ.get("NVDLA_TRACES")
    if not hw or not traces:
        pytest.skip("needs NVDLA_HW (an nvdla/hw checkout) and NVDLA_TRACES (its nv_small trace tests)")
    pytest.importorskip("cocotb")
    gen = str(generated_rtl(hw, "nv_small"))
    rc = main(["regress", "--suite", "traces", "--traces", traces, "--target", "verilator", "--nvdla-hw", gen,
               "--profile", "nv_small", "--rtl-build", "pgo", "-k", "cdp_8x8x32_lrn3_int8_0",
               "--results-dir", str(tmp_path / "results")])
    assert rc == 0
    run = tmp_path / "results" / "latest"
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    props = {p.get("name"): p.get("value") for p in ET.parse(run / "junit.xml").iter("property")}
    from nvdla_hil.harness.targets.rtl_build import nvdla_build
    from nvdla_hil.sims.build import cached_nvdla

    pgo = nvdla_build(gen, "nv_small", rtl_build="pgo")  # cached by the run: no second training
    plain = cached_nvdla(gen, "nv_small")
    assert props["rtl_build"] == pgo.key and (plain is None or plain.key != pgo.key)
