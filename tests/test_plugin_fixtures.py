"""The ``nvdla_target`` / ``nvdla_driver`` fixtures hand a test the same open, typed object on
every target: one fixture-based test file runs unchanged on the model, on a serial board (the
board emulator over TCP) and, when NVDLA_HW names an nvdla/hw checkout, on the Verilator RTL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _checkouts import generated_rtl

from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.boards.emulator import serve_in_thread
from nvdla_hil.harness.targets.model import ModelTarget

PY = sys.executable
ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_TARGET", "NVDLA_HIL_LAB",
            "NVDLA_HIL_BOARD", "NVDLA_HIL_CONFIG", "NVDLA_HIL_SUMMARY", "NVDLA_TXN_TESTS")

TEST_FILE = '''
from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.drivers.transport import Transport


def test_target_is_an_open_transport(nvdla_target, nvdla_spec, nvdla_profile):
    assert isinstance(nvdla_target, Transport), type(nvdla_target)
    assert nvdla_target.is_open
    assert nvdla_target.profile_name == nvdla_profile.name
    reg = nvdla_profile.regmap.register("SDP", "D_CVT_OFFSET")
    nvdla_target.write32(reg.address, 0x1234, posted=False)
    assert nvdla_target.read32(reg.address) == 0x1234
    print("KIND", nvdla_spec.kind, type(nvdla_target).__name__)


def test_driver_on_the_open_target(nvdla_driver, nvdla_target):
    assert isinstance(nvdla_driver, NvdlaDriver)
    assert nvdla_driver.transport is nvdla_target
    nvdla_driver.write("SDP.D_CVT_SCALE", 0x77)
    assert nvdla_driver.read("SDP.D_CVT_SCALE") == 0x77
'''

LAB = """\
lock_dir: {lock}
boards:
  emu:
    url: {url}
    baud: 3000000
    profile: nv_small
    dram_size: 0x40000000
    integrity: verify
    reset_address: 0xf0000000
    response_timeout: 10
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    env.update(extra)
    return env


def _run(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    f = tmp_path / "test_fixture_file.py"
    f.write_text(TEST_FILE)
    return subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", str(f), *argv],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, env=_env(**env))


def test_fixtures_on_the_model_target(tmp_path):
    r = _run(tmp_path, "--nvdla-target", "model", "--nvdla-config", "nv_small")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "KIND model ModelTarget" in r.stdout and "2 passed" in r.stdout


def test_fixtures_on_the_serial_target(tmp_path):
    """The serial target used to hand the test its context manager, not the link."""
    with serve_in_thread(ModelTarget("nv_small"), BoardMap(dram_size=0x4000_0000), mode="tcp") as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(LAB.format(lock=tmp_path, url=emu.url))
        r = _run(tmp_path, "--nvdla-target", "serial", "--nvdla-lab", str(lab), "--nvdla-board", "emu")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "KIND serial SerialTarget" in r.stdout and "2 passed" in r.stdout
        assert emu.stats.resets == 2  # each test's target was opened (and reset) on the board


def test_fixtures_on_the_verilator_target(tmp_path):
    hw = os.environ.get("NVDLA_HW")
    if not hw:
        pytest.skip("NVDLA_HW (an nvdla/hw checkout) is not set: the fixtures on the Verilator target are not run")
    generated_rtl(hw, "nv_small")  # the shared read-only checkout: NVDLA's flow run once in its cache copy
    r = _run(tmp_path, "--nvdla-target", "verilator", "--nvdla-hw", hw, "--nvdla-config", "nv_small", NVDLA_HW=hw)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "KIND verilator VerilatorTarget" in r.stdout and "2 passed" in r.stdout
