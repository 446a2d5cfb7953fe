"""Precision-control features through the driver on the real RTL (Verilator), compared with
the model target: LUT tables loaded and read back, LUT registers, statistics counters.

Skips unless an nvdla/hw checkout with generated RTL is given (NVDLA_HW / --nvdla-hw) and the
[sim] extras are installed. nv_small_256_full is used only if its RTL is generated there too.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from _checkouts import generated_rtl

from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.drivers.precision import LutConfig, compare_statistics
from nvdla_hil.harness.targets.model import ModelTarget


def _build(pytestconfig, config: str):
    hw = pytestconfig.getoption("--nvdla-hw", default=None) or os.environ.get("NVDLA_HW")
    if not hw:
        pytest.skip("no nvdla/hw checkout: set NVDLA_HW or pass --nvdla-hw PATH")
    try:
        import cocotb  # noqa: F401

        from nvdla_hil.sims import build as simbuild

        simbuild.verilator_root()
    except ImportError as e:
        pytest.skip(f"simulation extras missing: {e}")
    generated_rtl(hw, config)  # the shared read-only checkout: NVDLA's flow run once in its cache copy
    return simbuild.build_nvdla(hw, config)  # a build that fails fails the test


@pytest.fixture(scope="module")
def small(pytestconfig):
    return _build(pytestconfig, "nv_small")


@pytest.fixture(scope="module")
def full(pytestconfig):
    return _build(pytestconfig, "nv_small_256_full")


def _tables(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(-32768, 32768, 65), rng.integers(-32768, 32768, 257)


CFG = LutConfig(le_function="linear", le_index_offset=-7, le_index_select=3, lo_index_select=-2,
                le_start=-1000, le_end=70000, lo_start=-5, lo_end=123456, le_slope_uflow_scale=-7,
                le_slope_uflow_shift=-16, le_slope_oflow_scale=9, le_slope_oflow_shift=15,
                lo_slope_uflow_scale=32767, lo_slope_uflow_shift=3, lo_slope_oflow_scale=-32768,
                lo_slope_oflow_shift=-1, uflow_priority="LO", oflow_priority="LE", hybrid_priority="LO")


def test_cdp_lut_tables_and_registers_on_nv_small_rtl(small, sim_pool):  # noqa: ANN001
    le, lo = _tables(5)
    with sim_pool.open_build(small) as t:
        drv = NvdlaDriver(t, "nv_small")
        drv.precision.load_lut("CDP", "LE", le)
        drv.precision.load_lut("CDP", "LO", lo)
        assert np.array_equal(drv.precision.read_lut("CDP", "LE"), le.astype(np.int16))
        assert np.array_equal(drv.precision.read_lut("CDP", "LO"), lo.astype(np.int16))
        drv.precision.configure_lut("CDP", CFG)
        assert drv.precision.read_lut_config("CDP") == CFG
        # nv_small has no SDP LUT: the RTL's SDP LUT port reads 0 whatever was written
        drv.precision.load_lut("SDP", "LE", le, force=True)
        assert not drv.precision.read_lut("SDP", "LE", force=True).any()


def test_sdp_lut_tables_and_registers_on_nv_small_256_full_rtl(full, sim_pool):  # noqa: ANN001
    le, lo = _tables(6)
    with sim_pool.open_build(full) as t:
        drv = NvdlaDriver(t, "nv_small_256_full")
        drv.precision.load_lut("SDP", "LE", le)
        drv.precision.load_lut("SDP", "LO", lo)
        assert np.array_equal(drv.precision.read_lut("SDP", "LE"), le.astype(np.int16))
        assert np.array_equal(drv.precision.read_lut("SDP", "LO"), lo.astype(np.int16))
        sdp_cfg = LutConfig(**{**CFG.__dict__, "lo_start": -(1 << 31), "le_end": (1 << 31) - 1})
        drv.precision.configure_lut("SDP", sdp_cfg)
        assert drv.precision.read_lut_config("SDP") == sdp_cfg


@pytest.mark.parametrize("trace", ["cdp_8x8x32_lrn3_int8_2", "cdp_8x8x64_lrn3_int8_5"])
def test_cdp_statistics_rtl_equal_model(small, trace_root, trace, sim_pool):  # noqa: ANN001
    """The CDP LUT counters are exact per-element counts on the RTL (semantics doc 13)."""
    from nvdla_hil.harness.traces import run_trace

    stats = {}
    for name, target in (("rtl", sim_pool.open_build(small)), ("model", ModelTarget("nv_small"))):
        with target as t:
            drv = NvdlaDriver(t, "nv_small")
            assert run_trace(trace_root / trace, t, driver=drv, timeout=600).passed
            stats[name] = drv.precision.read_statistics("CDP", group=0)
    cmp = compare_statistics(stats["model"], stats["rtl"], target_kind="verilator")
    assert cmp.passed, cmp.format()
    assert {"lut_le_hit", "lut_lo_hit", "lut_hybrid", "lut_uflow", "lut_oflow"} <= set(cmp.matched)
    assert sum(cmp.matched[k] for k in ("lut_le_hit", "lut_lo_hit", "lut_hybrid", "lut_uflow", "lut_oflow")) > 0


def test_sdp_lut_statistics_rtl_vs_model(full, sim_pool):  # noqa: ANN001
    """The hand-worked SDP EW-LUT layer of test_statistics on the RTL: outputs and the output
    saturation counter equal the model's (exact); the RTL's SDP LUT counters count clock
    cycles, so the comparison reports them as not comparable rather than failing."""
    from test_statistics import _sdp_lut_layer

    x = np.array([-5, 0, 3, 10, 64, 70, 100, 51])
    out, stats = {}, {}
    for name, target in (("rtl", sim_pool.open_build(full)), ("model", ModelTarget("nv_small_256_full"))):
        with target as t:
            drv = NvdlaDriver(t, "nv_small_256_full")
            out[name] = _sdp_lut_layer(drv, x).tolist()
            stats[name] = drv.precision.read_statistics("SDP", group=0)
    assert out["rtl"] == out["model"] == [40, 40, 40, 40, 127, 127, 127, 40]
    cmp = compare_statistics(stats["model"], stats["rtl"], target_kind="verilator")
    assert cmp.passed, cmp.format()
    assert cmp.matched["out_saturation"] == 3
    assert "lut_hybrid" in cmp.not_comparable
    print(cmp.format())
