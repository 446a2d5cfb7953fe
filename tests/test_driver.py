"""Driver behaviour on the model target: names, range checks, groups, launch, LUT port, log."""

from __future__ import annotations

import io

import numpy as np
import pytest

from nvdla_hil.drivers.driver import AccessLog, LayerTimeoutError, NvdlaDriver, ReadOnlyFieldError, RegisterVerifyError
from nvdla_hil.drivers.precision import ConvertorSetting, LutConfig
from nvdla_hil.drivers.profiles import FeatureMissingError
from nvdla_hil.drivers.regmap import FieldRangeError, UnknownFieldError, UnknownRegisterError
from nvdla_hil.harness.targets.model import ModelTarget


@pytest.fixture
def drv():
    with ModelTarget("nv_small") as t:
        yield NvdlaDriver(t)


@pytest.fixture
def drv_full():
    with ModelTarget("nv_small_256_full") as t:
        yield NvdlaDriver(t)


def test_reset_values_and_name_forms(drv):
    # GLB S_NVDLA_HW_VERSION reset MAJOR=0x31 ('1'), MINOR=0x3030 ("00") per NVDLA_GLB.rdl
    assert drv.read("GLB.S_NVDLA_HW_VERSION") == 0x00303031
    assert drv.read("NVDLA_GLB.S_NVDLA_HW_VERSION_0") == 0x00303031
    assert drv.read(("GLB", "S_NVDLA_HW_VERSION")) == 0x00303031
    assert drv.read_field("SDP.D_DP_BS_CFG", "BS_BYPASS") == 1  # reset: bypassed


def test_unknown_names_suggest_close_matches(drv):
    with pytest.raises(UnknownRegisterError, match=r"did you mean SDP\.S_LUT_ACCESS_CFG"):
        drv.read("SDP.S_LUT_ACESS_CFG")
    with pytest.raises(UnknownFieldError, match="BS_BYPASS"):
        drv.write_fields("SDP.D_DP_BS_CFG", BS_BYPAS=1)


def test_field_range_and_enum_checks(drv):
    with pytest.raises(FieldRangeError, match=r"SDP\.D_CVT_SHIFT\.CVT_SHIFT = 0x40 does not fit \[5:0\]"):
        drv.write_fields("SDP.D_CVT_SHIFT", CVT_SHIFT=64)
    with pytest.raises(FieldRangeError, match="no enum value 'MAYBE'"):
        drv.write_fields("SDP.D_DP_BS_CFG", BS_BYPASS="MAYBE")
    drv.write_fields("SDP.D_DP_BS_CFG", BS_BYPASS="NO", BS_ALU_ALGO="SUM")
    f = drv.read_fields("SDP.D_DP_BS_CFG")
    assert f["BS_BYPASS"] == 0 and f["BS_ALU_ALGO"] == 2
    assert f["BS_MUL_BYPASS"] == 1  # untouched field kept its value (read-modify-write)


def test_read_only_register_refused(drv):
    with pytest.raises(ReadOnlyFieldError, match="GLB.S_NVDLA_HW_VERSION is read-only"):
        drv.write("GLB.S_NVDLA_HW_VERSION", 0)
    with pytest.raises(ReadOnlyFieldError):
        drv.write_fields("SDP.S_POINTER", CONSUMER=1)


class _StuckBitTarget(ModelTarget):
    """A model whose SDP D_CVT_SCALE bit 0 is stuck at 0 (a broken board)."""

    def _write32(self, address, value, posted):
        if address == 0x90C4:
            value &= ~1
        super()._write32(address, value, posted)


def test_write_verify_reports_readback():
    with _StuckBitTarget("nv_small") as t:
        drv = NvdlaDriver(t)
        drv.write("SDP.D_CVT_SCALE", 4, verify=True)
        with pytest.raises(RegisterVerifyError, match=r"SDP.D_CVT_SCALE: read back 0x00000004 after writing 0x00000005"):
            drv.write("SDP.D_CVT_SCALE", 5, verify=True)


def test_register_groups_are_separate(drv):
    drv.select_group("SDP", 0)
    drv.write("SDP.D_CVT_SCALE", 11)
    drv.select_group("SDP", 1)
    assert drv.read("SDP.D_CVT_SCALE") == drv.register("SDP.D_CVT_SCALE").reset  # group 1 untouched
    drv.write("SDP.D_CVT_SCALE", 22)
    with drv.group("SDP", 0):
        assert drv.read("SDP.D_CVT_SCALE") == 11
    assert drv.producer_group("SDP") == 1
    # single (S_*) registers are shared by both groups
    drv.write("CDP.S_LUT_LE_START_LOW", 7)
    with drv.group("CDP", 1):
        assert drv.read("CDP.S_LUT_LE_START_LOW") == 7


def test_convertor_setting_round_trip_and_width(drv):
    pc = drv.precision
    pc.set_convertor("cdp_out", ConvertorSetting(offset=-5, scale=-3, shift=7))
    assert pc.get_convertor("cdp_out") == ConvertorSetting(-5, -3, 7)
    assert drv.read("CDP.D_DATOUT_OFFSET") == 0xFFFFFFFB
    with pytest.raises(FieldRangeError, match="cdp_in shift = 32 is outside the unsigned 5-bit range"):
        pc.set_convertor("cdp_in", ConvertorSetting(shift=32))
    with pytest.raises(FieldRangeError, match="scale"):
        pc.set_convertor("sdp_out", ConvertorSetting(scale=40000))


def test_lut_load_and_read_back_cdp(drv):
    rng = np.random.default_rng(1)
    le = rng.integers(-32768, 32768, 65)
    lo = rng.integers(-32768, 32768, 257)
    drv.precision.load_lut("CDP", "LE", le)
    drv.precision.load_lut("CDP", "LO", lo)
    assert np.array_equal(drv.precision.read_lut("CDP", "LE"), le.astype(np.int16))
    assert np.array_equal(drv.precision.read_lut("CDP", "LO"), lo.astype(np.int16))
    assert drv.precision.verify_lut("CDP", "LO", lo) == []
    with pytest.raises(FieldRangeError, match="LE table needs 65 entries, got 64"):
        drv.precision.load_lut("CDP", "LE", le[:64])


def test_sdp_lut_needs_the_feature(drv, drv_full):
    with pytest.raises(FeatureMissingError, match="nv_small"):
        drv.precision.load_lut("SDP", "LE", np.zeros(65))
    # forced on nv_small: the RTL has no SDP LUT, reads return 0
    drv.precision.load_lut("SDP", "LE", np.arange(65), force=True)
    assert not drv.precision.read_lut("SDP", "LE", force=True).any()
    drv_full.precision.load_lut("SDP", "LE", np.arange(65) - 30)
    assert np.array_equal(drv_full.precision.read_lut("SDP", "LE"), np.arange(65) - 30)


def test_lut_config_round_trip(drv_full, drv):
    cfg = LutConfig(le_function="linear", le_index_offset=-3, le_index_select=5, lo_index_select=-2,
                    le_start=-1000, le_end=70000, lo_start=-(1 << 31), lo_end=(1 << 31) - 1,
                    le_slope_uflow_scale=-7, le_slope_uflow_shift=-16, le_slope_oflow_scale=9,
                    le_slope_oflow_shift=15, lo_slope_uflow_scale=32767, lo_slope_uflow_shift=3,
                    lo_slope_oflow_scale=-32768, lo_slope_oflow_shift=-1,
                    uflow_priority="LO", oflow_priority="LE", hybrid_priority="LO")
    drv_full.precision.configure_lut("SDP", cfg)
    assert drv_full.precision.read_lut_config("SDP") == cfg
    assert drv_full.read("SDP.S_LUT_CFG") == 0x51  # LINEAR | UFLOW=LO | HYBRID=LO
    cdp = LutConfig(le_start=-(1 << 37), le_end=(1 << 37) - 1, lo_start=5)
    drv.precision.configure_lut("CDP", cdp)
    assert drv.precision.read_lut_config("CDP") == cdp
    assert drv.read("CDP.S_LUT_LE_START_HIGH") == 0x20
    with pytest.raises(FieldRangeError, match="LUT_LE_START"):
        drv.precision.configure_lut("CDP", LutConfig(le_start=1 << 37))


class _RunsOnItsOwn(ModelTarget):
    """The model as a device that could still raise the interrupt later (a simulator, a board)."""

    def settled(self) -> bool:
        return False


def test_launch_timeout_names_unit_and_status():
    with _RunsOnItsOwn("nv_small") as t, \
            pytest.raises(LayerTimeoutError, match=r"SDP group 0: no done interrupt within 0\.05 s \(GLB S_INTR_STATUS="):
        NvdlaDriver(t).wait_done("SDP", 0, timeout=0.05)


def test_a_model_with_nothing_in_flight_fails_a_wait_at_once(drv):
    # the in-process model finishes layers on the host's accesses: with nothing queued the
    # interrupt never comes, so the wait ends now, not after spinning to its timeout (a trace
    # or a triage replay with a layer the model never starts)
    with pytest.raises(LayerTimeoutError, match=r"SDP group 0: no done interrupt, and the nv_small model has no layer in flight"):
        drv.wait_done("SDP", 0, timeout=120)


def test_access_log_records_names(drv):
    buf = io.StringIO()
    log = drv.record(AccessLog(drv.regmap, buf))
    drv.write("SDP.D_CVT_SHIFT", 3)
    drv.read("SDP.D_CVT_SHIFT")
    assert [(r.direction, r.address, r.value) for r in log.records] == [("W", 0x90C8, 3), ("R", 0x90C8, 3)]
    assert "SDP.D_CVT_SHIFT" in buf.getvalue()
