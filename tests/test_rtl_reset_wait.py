"""How long NVDLA's RTL needs after a warm reset before the next layer (nv_small, a real
Verilator build; skips without an nvdla/hw checkout). Found by ``fuzz --steer``, which waited 256
cycles between cases: fused SDP -> PDP layers then differ from the reference model, and agree
after the 8192 cycles NVDLA's own testbench waits (the build's ``reset_wait_cycles``, which every
warm simulator and now the steered fuzzer keep). The oracle is the RTL itself against the
bit-exact model: the same draws pass after the full wait."""

from __future__ import annotations

import os

import pytest
from _checkouts import generated_rtl

pytestmark = pytest.mark.slow


def _statuses(nvdla_hw: str, wait: int) -> list[str]:
    """sdp-pdp cases 0-4 of seed 1 on one simulator, a warm reset waiting ``wait`` cycles before each."""
    from nvdla_hil.harness.fuzz.registry import load_constraints
    from nvdla_hil.harness.fuzz.runner import run_one
    from nvdla_hil.harness.targets import TargetSpec, open_target

    c = load_constraints("sdp-pdp", profile="nv_small")
    spec = TargetSpec(kind="verilator", profile="nv_small", nvdla_hw=nvdla_hw)
    out = []
    with open_target(spec) as dut:
        getattr(dut, "sim", dut).reset_wait_cycles = wait  # the VerilatorTarget under a wrapper
        for index in range(5):
            dut.reset()
            fc, _ = run_one(c, spec, 1, index, None, dut=dut)
            out.append(fc.status)
    return out


def test_fused_sdp_pdp_layers_need_the_full_wait_after_a_warm_reset() -> None:
    hw = os.environ.get("NVDLA_HW")
    if not hw:
        pytest.skip("needs NVDLA_HW: an nvdla/hw checkout")
    pytest.importorskip("cocotb")
    hw = str(generated_rtl(hw, "nv_small"))
    assert _statuses(hw, 8192) == ["passed"] * 5
    short = _statuses(hw, 256)
    assert short[:3] == ["passed"] * 3 and short[3:] == ["failed", "failed"], short
