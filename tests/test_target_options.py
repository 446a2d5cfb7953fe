"""The shared target options that shape a simulator target: ``--rtl-clock-gating`` (nvdla/hw#183)
and ``--layer-timeout``, from the command line to the keyword arguments a target is made with."""

from __future__ import annotations

import argparse

import pytest

from nvdla_hil.harness.cli.exits import BadInput
from nvdla_hil.harness.cli.options import add_target_options, target_spec
from nvdla_hil.harness.targets import TargetSpec, clock_gating_spec, firmware_spec


def _spec(*argv: str) -> TargetSpec:
    p = argparse.ArgumentParser()
    add_target_options(p)
    return target_spec(p.parse_args(list(argv)))


def test_clock_gating_is_on_for_single_layers_and_off_for_firmware_runs_by_default() -> None:
    spec = _spec("--target", "verilator")
    assert spec.rtl_clock_gating == "auto" and "clock_gating" not in spec.extra  # traces, vectors, fuzz: as shipped
    assert firmware_spec(spec).extra["clock_gating"] is False  # loadables, networks: nvdla/hw#183


def test_clock_gating_on_and_off_are_kept_for_every_run() -> None:
    on, off = _spec("--target", "verilator", "--rtl-clock-gating", "on"), _spec("--target", "verilator", "--rtl-clock-gating", "off")
    assert "clock_gating" not in on.extra and "clock_gating" not in firmware_spec(on).extra
    assert off.extra["clock_gating"] is False and firmware_spec(off).extra["clock_gating"] is False


def test_clock_gating_means_nothing_off_the_simulator() -> None:
    for target in ("model", "cmod"):
        spec = _spec("--target", target, "--rtl-clock-gating", "off")
        assert "clock_gating" not in spec.extra and firmware_spec(spec) == spec


def test_a_bad_clock_gating_value_from_the_environment_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVDLA_HIL_RTL_CLOCK_GATING", "sometimes")
    with pytest.raises(BadInput, match="sometimes"):
        _spec("--target", "verilator")
    with pytest.raises(ValueError, match="on, off or auto"):
        clock_gating_spec(TargetSpec(kind="verilator"), "maybe")


def test_layer_timeout_reaches_the_simulator_targets_only() -> None:
    assert _spec("--target", "cmod", "--layer-timeout", "3600").extra == {"layer_timeout": 3600.0}
    assert _spec("--target", "verilator", "--layer-timeout", "30").extra == {"layer_timeout": 30.0}
    assert _spec("--target", "model", "--layer-timeout", "30").extra == {}
    with pytest.raises(BadInput, match="--layer-timeout -1"):
        _spec("--target", "cmod", "--layer-timeout", "-1")


def test_the_targets_take_the_layer_timeout() -> None:
    from nvdla_hil.harness.targets.cmod import CmodTarget
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    c = CmodTarget(nvdla_hw="/nonexistent", config="nv_full", layer_timeout=3600.0)
    assert c.suggested_layer_timeout == 3600.0 and c.request_timeout == 3600.0
    assert CmodTarget(nvdla_hw="/nonexistent", config="nv_full").suggested_layer_timeout == 900.0
    v = VerilatorTarget(nvdla_hw="/nonexistent", layer_timeout=30.0, clock_gating=False)
    assert v.suggested_layer_timeout == 30.0 and not v.clock_gating
    assert v.hang_hint({"CONV"}) == ""  # clock gating off: nothing known to hang a convolution
    on = VerilatorTarget(nvdla_hw="/nonexistent")
    assert "nvdla/hw#183" in on.hang_hint({"CONV", "SDP"}) and on.hang_hint({"SDP", "PDP"}) == ""


def test_a_warm_lease_has_its_simulators_layer_timeout_and_hang_hint() -> None:
    from nvdla_hil.harness.targets.verilator import WarmSimulators, WarmTarget

    with WarmSimulators() as pool:
        lease = WarmTarget(pool, lambda: None, {"layer_timeout": 45.0, "clock_gating": False}, config="nv_small")
        assert lease.suggested_layer_timeout == 45.0
        assert lease.hang_hint({"CONV"}) == ""  # not open: nothing to say
        assert WarmTarget(pool, lambda: None, {}, config="nv_small").suggested_layer_timeout == 600.0
