"""What NVDLA's RTL still does after a warm reset, and what a layer must wait for (nv_small, a real
Verilator build; skips without an nvdla/hw checkout).

Found by ``fuzz --steer``, which waited 256 cycles between cases: fused CONV -> SDP -> PDP layers
whose done unit is PDP then differed from the reference model, and agreed after the 8192 cycles
NVDLA's own testbench waits. The cause is CDMA's CBUF flush: after ``rstn`` CDMA writes every
CBUF entry once (``NV_NVDLA_CDMA_cvt.v`` ``dat_cbuf_flush_idx``) and raises
``CDMA.S_CBUF_FLUSH_STATUS.FLUSH_DONE`` when it is through; NVDLA's firmware polls it before a
convolution (``conv.c`` ``dla_conv_enable``). The runner polled it only for a layer whose unit was
CONV, so a convolution ending at PDP's done started into the flush. The oracle is the RTL itself
(its flush status, and its outputs against the bit-exact model)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _checkouts import generated_rtl

pytestmark = pytest.mark.slow

#: the fuzz draws that showed it: sdp-pdp seed 1, cases 1, 3 and 4 are CONV -> SDP -> PDP with PDP's done
CASES = range(5)


def _nvdla_hw() -> str:
    hw = os.environ.get("NVDLA_HW")
    if not hw:
        pytest.skip("needs NVDLA_HW: an nvdla/hw checkout")
    pytest.importorskip("cocotb")
    return str(generated_rtl(hw, "nv_small"))


def test_cbuf_flush_runs_thousands_of_cycles_after_a_warm_reset_and_fused_layers_wait_for_it(tmp_path: Path) -> None:
    from nvdla_hil.drivers.driver import NvdlaDriver
    from nvdla_hil.harness.fuzz.registry import load_constraints
    from nvdla_hil.harness.fuzz.runner import run_one
    from nvdla_hil.harness.targets import TargetSpec, open_target

    c = load_constraints("sdp-pdp", profile="nv_small")
    spec = TargetSpec(kind="verilator", profile="nv_small", nvdla_hw=_nvdla_hw())
    with open_target(spec) as dut:
        sim = getattr(dut, "sim", dut)  # the VerilatorTarget under a wrapper
        sim.reset_wait_cycles = 256
        dut.reset()
        drv = NvdlaDriver(dut, "nv_small")
        flushed_after = 256
        while not drv.read_field(("CDMA", "S_CBUF_FLUSH_STATUS"), "FLUSH_DONE"):
            assert flushed_after < 65536, "CBUF flush never ended"
            dut.run_cycles(256)
            flushed_after += 256
        # the draws failed after waits of 256..6144 cycles and passed after 8192
        assert 6144 < flushed_after <= 8192 + 256, flushed_after
        statuses = []
        for index in CASES:
            dut.reset()  # 256 cycles: the runner's flush poll is what keeps the convolutions right
            fc, _ = run_one(c, spec, 1, index, None, dut=dut)
            statuses.append((fc.status, fc.line))
    assert [s for s, _ in statuses] == ["passed"] * len(CASES), statuses
    assert [_launches_cdma(c, index, tmp_path) for index in CASES] == [False, True, False, True, True]  # fused convs


def _launches_cdma(c: Any, index: int, tmp_path: Path) -> bool:
    from nvdla_hil.harness.fuzz.case import generate
    from nvdla_hil.harness.vectors import load_case

    folder = generate(c, 1, index, tmp_path, semantics="rtl", dut="verilator")
    return "CDMA" in load_case(folder).launch
