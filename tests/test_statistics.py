"""Statistics through the driver, hand-worked: an SDP EW-LUT layer and a CDP LRN layer on
the model target, programmed register by register, counters read back as one object."""

from __future__ import annotations

import numpy as np
import pytest

from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.drivers.precision import ConvertorSetting, LutConfig, Statistics, compare_statistics, golden_counters
from nvdla_hil.harness.targets.model import ModelTarget

SRC, DST = 0x80000000, 0x80001000


def _sdp_lut_layer(drv: NvdlaDriver, x: np.ndarray, *, force: bool = False) -> np.ndarray:
    """1x1x8 int8 cube through SDP with only the EW LUT active; output CVT scale 4."""
    drv.transport.mem_write(SRC, x.astype(np.int8).view(np.uint8))
    pc = drv.precision
    pc.load_lut("SDP", "LE", np.full(65, 10), force=force)
    pc.load_lut("SDP", "LO", np.full(257, 30000), force=force)
    pc.configure_lut("SDP", LutConfig(le_function="linear", le_start=0, le_index_select=0,
                                      lo_start=50, lo_index_select=0, le_end=64, lo_end=306), force=force)
    w = drv.write_fields
    for blk in ("SDP_RDMA", "SDP"):
        w(f"{blk}.D_DATA_CUBE_WIDTH", WIDTH=0)
        w(f"{blk}.D_DATA_CUBE_HEIGHT", HEIGHT=0)
        w(f"{blk}.D_DATA_CUBE_CHANNEL", CHANNEL=7)
    drv.write("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC)
    drv.write("SDP_RDMA.D_SRC_LINE_STRIDE", 8)
    drv.write("SDP_RDMA.D_SRC_SURFACE_STRIDE", 8)
    w("SDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE="MC")
    w("SDP_RDMA.D_FEATURE_MODE_CFG", IN_PRECISION="INT8", PROC_PRECISION="INT8", OUT_PRECISION="INT8")
    for eng in ("BRDMA", "NRDMA", "ERDMA"):
        w(f"SDP_RDMA.D_{eng}_CFG", **{f"{eng}_DISABLE": "YES"})
    drv.write("SDP.D_DST_BASE_ADDR_LOW", DST)
    drv.write("SDP.D_DST_LINE_STRIDE", 8)
    drv.write("SDP.D_DST_SURFACE_STRIDE", 8)
    w("SDP.D_DST_DMA_CFG", DST_RAM_TYPE="MC")
    w("SDP.D_DATA_FORMAT", PROC_PRECISION="INT8", OUT_PRECISION="INT8")
    w("SDP.D_DP_BS_CFG", BS_BYPASS="YES")
    w("SDP.D_DP_BN_CFG", BN_BYPASS="YES")
    w("SDP.D_DP_EW_CFG", EW_BYPASS="NO", EW_ALU_BYPASS="YES", EW_MUL_BYPASS="YES", EW_LUT_BYPASS="NO")
    pc.set_convertor("sdp_out", ConvertorSetting(offset=0, scale=4, shift=0))
    pc.enable_statistics("SDP")
    drv.launch("SDP_RDMA", "SDP")
    drv.wait_done("SDP", 0, timeout=1)
    return drv.transport.mem_read(DST, 8).view(np.int8)


def test_sdp_lut_statistics_hand_worked():
    # LE: linear, start 0, select 0 -> index = x; x <= 0 underflows, x >= 64 overflows.
    # LO: linear, start 50, select 0 -> x <= 50 underflows, index = x - 50.
    #   x=-5, 0: both UF            -> UFLOW, LE (uflow priority LE) edge value 10
    #   x=3, 10: LE hit only         -> HYBRID (SDP counts a selected hit), LE_HIT; 10
    #   x=64,70,100: LE OF, LO hit   -> HYBRID, LO_HIT; 30000
    #   x=51: both hit               -> HYBRID, LE_HIT and LO_HIT; hybrid priority LE -> 10
    # Output CVT x4: 40 (no saturation) or 120000, which saturates the 17-bit stage: 3 elements.
    with ModelTarget("nv_small_256_full") as t:
        drv = NvdlaDriver(t)
        out = _sdp_lut_layer(drv, np.array([-5, 0, 3, 10, 64, 70, 100, 51]))
        assert out.tolist() == [40, 40, 40, 40, 127, 127, 127, 40]
        st = drv.precision.read_statistics("SDP", group=0)
    assert st == Statistics(block="SDP", group=0, lut_le_hit=3, lut_lo_hit=4, lut_uflow=2, lut_oflow=0,
                            lut_hybrid=6, out_saturation=3, nan_input=0, inf_input=0, nan_output=0)


def test_statistics_comparison_knows_rtl_lut_counters_count_cycles():
    model = Statistics("SDP", 0, lut_le_hit=3, lut_lo_hit=4, lut_uflow=2, lut_oflow=0, lut_hybrid=6, out_saturation=3)
    rtl = Statistics("SDP", 0, lut_le_hit=9, lut_lo_hit=4, lut_uflow=2, lut_oflow=0, lut_hybrid=70, out_saturation=3)
    on_model = compare_statistics(model, rtl, target_kind="model")
    assert not on_model.passed and set(on_model.mismatched) == {"lut_le_hit", "lut_hybrid"}
    on_rtl = compare_statistics(model, rtl, target_kind="verilator")
    assert on_rtl.passed and on_rtl.matched == {"out_saturation": 3}
    assert "clock cycles" in on_rtl.not_comparable["lut_hybrid"]
    cdp = compare_statistics(Statistics("CDP", 0, lut_hybrid=5), Statistics("CDP", 0, lut_hybrid=6), target_kind="verilator")
    assert cdp.mismatched == {"lut_hybrid": (5, 6)}  # CDP counters are exact on the RTL


def test_statistics_cleared_at_launch_on_rtl_semantics():
    with ModelTarget("nv_small_256_full") as t:
        drv = NvdlaDriver(t)
        _sdp_lut_layer(drv, np.array([-5, 0, 3, 10, 64, 70, 100, 51]))
        assert drv.precision.read_statistics("SDP", 0).lut_hybrid == 6
        drv.select_group("SDP", 0)
        drv.launch("SDP")  # group 0 relaunched, SDP_RDMA not yet: the layer waits
        assert drv.precision.read_statistics("SDP", 0).lut_hybrid == 0


@pytest.mark.parametrize("profile", ["nv_small"])
def test_sdp_lut_absent_on_nv_small_rtl(profile):
    # nv_small has no SDP EW/LUT: with RTL semantics the EW stage is bypassed, output = 4*x saturated
    with ModelTarget(profile) as t:
        drv = NvdlaDriver(t)
        out = _sdp_lut_layer(drv, np.array([-5, 0, 3, 10, 64, 70, 100, 51]), force=True)
        assert out.tolist() == [-20, 0, 12, 40, 127, 127, 127, 127]


@pytest.mark.parametrize(("semantics", "saturated"), [("rtl", 0), ("cmod", 2014)])
def test_cdp_statistics_of_an_nvdla_trace(trace_root, semantics, saturated):
    """Counters of cdp_8x8x32_lrn3_int8_2 as worked out in the semantics doc (6.8): 133 hybrid,
    1915 LE-only hits, 2014 of 2048 outputs saturate (counted by the C model only: the nv_small
    RTL ties CDP D_OUT_SATURATION to 0)."""
    from nvdla_hil.harness.traces import run_trace

    with ModelTarget("nv_small", semantics=semantics) as t:
        drv = NvdlaDriver(t)
        assert run_trace(trace_root / "cdp_8x8x32_lrn3_int8_2", t, driver=drv).passed
        st = drv.precision.read_statistics("CDP", group=0)
    assert (st.lut_hybrid, st.lut_le_hit, st.out_saturation) == (133, 1915, saturated)
    assert st.lut_hybrid + st.lut_le_hit + st.lut_lo_hit + st.lut_uflow + st.lut_oflow == 2048


def test_golden_counters_from_the_rtl_leave_out_the_cycle_counted_lut_flags() -> None:
    """A golden read from the RTL (fuzz --keep, vectors regolden) never records the SDP LUT counters,
    which the RTL sums every clock; the C model's and CDP's are per element and kept."""
    st = Statistics("SDP", 0, lut_le_hit=9, lut_lo_hit=4, lut_uflow=2, lut_oflow=0, lut_hybrid=70, out_saturation=3)
    rtl = golden_counters(st, "rtl")
    assert "out_saturation" in rtl and not any(k.startswith("lut_") for k in rtl)
    assert golden_counters(st, "cmod")["lut_hybrid"] == 70
    assert golden_counters(st, "rtl", ["out_saturation", "lut_uflow"]) == {"out_saturation": 3}
    assert golden_counters(Statistics("CDP", 0, lut_hybrid=5), "rtl")["lut_hybrid"] == 5
