"""The verilator and cmod targets build from the user's nvdla/hw checkout: one rule
(``harness/targets.checkout_problem``) refuses a run without one, with the same words, whether the
CLI (exit 2) or the pytest plugin (a usage error, pytest's exit 4) was asked, before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nvdla_hil.harness.targets import NEEDS_CHECKOUT, TARGETS, checkout_problem

CLI = [sys.executable, "-m", "nvdla_hil.harness.cli"]
ENV_KEYS = ("NVDLA_HW", "NVDLA_HIL_TARGET", "NVDLA_TRACES", "NVDLA_HIL_VECTORS")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}


def test_which_targets_need_a_checkout_and_what_is_said(tmp_path: Path) -> None:
    assert set(NEEDS_CHECKOUT) == {"verilator", "cmod"} and set(NEEDS_CHECKOUT) <= set(TARGETS)
    for kind in ("model", "serial"):
        assert checkout_problem(kind, None) is None
    for kind in NEEDS_CHECKOUT:
        assert checkout_problem(kind, None) == f"--target {kind} needs an nvdla/hw checkout: --nvdla-hw PATH (or NVDLA_HW)"
        assert checkout_problem(kind, str(tmp_path / "gone"), target_option="--nvdla-target") == (
            f"--nvdla-hw {tmp_path / 'gone'}: no such folder (the nvdla/hw checkout for --nvdla-target {kind})")
        assert checkout_problem(kind, str(tmp_path)) is None


@pytest.mark.parametrize("kind", NEEDS_CHECKOUT)
def test_cli_and_plugin_refuse_a_run_without_a_checkout_alike(kind: str, tmp_path: Path) -> None:
    said = "needs an nvdla/hw checkout: --nvdla-hw PATH (or NVDLA_HW)"
    for args in (["regress", "--target", kind, "--results-dir", str(tmp_path / "results")],
                 ["fuzz", "--unit", "sdp-cvt", "--target", kind, "--count", "1"]):
        r = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=_env(), cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout[-800:], r.stderr[-800:])
        assert f"--target {kind} {said}" in r.stderr, r.stderr[-800:]
    assert not (tmp_path / "results").exists()  # refused before anything started: no run folder
    (tmp_path / "test_x.py").write_text("def test_x(nvdla_target):\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:labgrid",
                        "--nvdla-target", kind, "test_x.py"], capture_output=True, text=True, timeout=300, env=_env(),
                       cwd=tmp_path)
    assert r.returncode == 4, (r.stdout[-800:], r.stderr[-800:])
    assert f"--nvdla-target {kind} {said}" in r.stdout + r.stderr
