"""Register-level semantics of the virtual NVDLA (semantics doc sections 7 and 8)."""

from __future__ import annotations

import numpy as np
import pytest

from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.drivers.transport import NotOpenError, TransportError
from nvdla_hil.harness.refmodel.base import UnitNotModelled
from nvdla_hil.harness.targets.model import ModelTarget

CDP_CFG, CDP_DATA = 0xD008, 0xD00C
SDP_CFG, SDP_DATA = 0x9008, 0x900C
WRITE_LE, WRITE_LO, READ_LE, READ_LO = 0x20000, 0x30000, 0x00000, 0x10000


def _target(profile="nv_small", semantics="rtl"):
    t = ModelTarget(profile, semantics=semantics)
    t.open()
    return t


def test_closed_target_refuses_access():
    t = ModelTarget("nv_small")
    with pytest.raises(NotOpenError):
        t.read32(0x1000)


def test_unmapped_address_is_an_error():
    with _target() as t, pytest.raises(TransportError, match=r"unmapped address 0x10000 on nv_small"):
        t.read32(0x10000)  # BDMA: absent in nv_small


def test_lut_write_auto_increments_from_cfg_address():
    with _target() as t:
        t.write32(CDP_CFG, WRITE_LO | 5)
        for v in (11, 12, 13):
            t.write32(CDP_DATA, v)
        t.write32(CDP_CFG, READ_LO | 4)
        assert [t.read32(CDP_DATA) for _ in range(5)] == [0, 11, 12, 13, 0]


def test_cdp_lut_address_sticks_at_last_entry():
    with _target() as t:
        t.write32(CDP_CFG, WRITE_LE | 63)
        for v in (1, 2, 3):  # entry 63, 64, then 64 again (sticks)
            t.write32(CDP_DATA, v)
        t.write32(CDP_CFG, READ_LE | 63)
        assert [t.read32(CDP_DATA) for _ in range(3)] == [1, 3, 3]
        # CDP RTL: CFG read-back shows the current (incremented, stuck) address and id/type as written
        assert t.read32(CDP_CFG) == READ_LE | 64


def test_sdp_lut_rtl_counter_runs_past_the_table():
    with _target("nv_small_256_full") as t:
        t.write32(SDP_CFG, WRITE_LE | 64)
        t.write32(SDP_DATA, 7)  # entry 64
        t.write32(SDP_DATA, 8)  # address 65: past the LE table, dropped
        t.write32(SDP_CFG, READ_LE | 64)
        assert [t.read32(SDP_DATA) for _ in range(2)] == [7, 0]
        assert t.read32(SDP_CFG) == READ_LE | 64  # SDP RTL: CFG reads back as written


def test_sdp_lut_cmod_sticks_and_masks_cfg():
    with _target("nv_small_256_full", "cmod") as t:
        t.write32(SDP_CFG, WRITE_LE | 64)
        t.write32(SDP_DATA, 7)
        t.write32(SDP_DATA, 8)  # cmod: address sticks at 64, overwrites
        t.write32(SDP_CFG, READ_LE | 64)
        assert t.read32(SDP_DATA) == 8
        assert t.read32(SDP_CFG) == 64  # cmod reads TABLE_ID/ACCESS_TYPE as 0


def test_data_read_in_write_mode_differs_between_models():
    for semantics, unit_cfg, unit_data, expect in (
        ("rtl", CDP_CFG, CDP_DATA, [5, 5]),  # CDP RTL: returns T[addr], no increment
        ("cmod", CDP_CFG, CDP_DATA, [0, 0]),  # cmod: returns 0
    ):
        with _target(semantics=semantics) as t:
            t.write32(unit_cfg, WRITE_LE | 0)
            t.write32(unit_data, 5)
            t.write32(unit_cfg, WRITE_LE | 0)
            assert [t.read32(unit_data) for _ in range(2)] == expect


def test_sdp_data_write_in_read_mode_still_increments_on_rtl():
    with _target("nv_small_256_full") as t:
        t.write32(SDP_CFG, WRITE_LO | 0)
        t.write32(SDP_DATA, 1)
        t.write32(SDP_DATA, 2)
        t.write32(SDP_CFG, READ_LO | 0)
        t.write32(SDP_DATA, 99)  # READ type: table not written, address advances
        assert t.read32(SDP_DATA) == 2


def test_nv_small_has_no_sdp_lut_storage():
    with _target() as t:
        t.write32(SDP_CFG, WRITE_LE | 0)
        t.write32(SDP_DATA, 0x1234)
        t.write32(SDP_CFG, READ_LE | 0)
        assert t.read32(SDP_DATA) == 0


def test_interrupt_status_is_write_one_to_clear():
    with _target() as t:
        t.write32(0x1008, 0b101)  # GLB S_INTR_SET: SDP_DONE_SET0 | CDP_DONE_SET0
        assert t.read32(0x100C) == 0b101 and t.irq_pending()
        t.write32(0x1004, 0b101)  # masked: line low, status kept
        assert not t.irq_pending() and t.read32(0x100C) == 0b101
        t.write32(0x100C, 0b001)
        assert t.read32(0x100C) == 0b100


def test_read_only_fields_ignore_writes():
    with _target() as t:
        before = t.read32(0x1000)
        t.write32(0x1000, 0xFFFFFFFF)
        assert t.read32(0x1000) == before


def test_layer_completion_updates_pointer_opens_and_interrupt(trace_root):
    from nvdla_hil.harness.traces import parse_trace, run_trace

    with _target() as t:
        drv = NvdlaDriver(t)
        res = run_trace(parse_trace(trace_root / "sdp_8x8x32_bypass_int8_0"), t, driver=drv)
        assert res.passed
        assert drv.read_field("SDP.S_POINTER", "CONSUMER") == 1  # toggled after the group-0 layer
        assert drv.read_field("SDP.D_OP_ENABLE", "OP_EN") == 0
        assert drv.read("GLB.S_INTR_STATUS") == 0  # the player cleared SDP_DONE_STATUS0
        assert t.layers_run and t.layers_run[0][:2] == ("SDP", 0)


def test_unmodelled_unit_is_reported_by_name():
    with _target("nv_full") as t:  # batched Winograd: nv_full has it, the model does not
        drv = NvdlaDriver(t)
        for b in ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC"):
            drv.write_fields(f"{b}.D_MISC_CFG", CONV_MODE="WINOGRAD", PROC_PRECISION="INT8")
        for b in ("CDMA", "CSC", "CACC"):
            drv.write_fields(f"{b}.D_BATCH_NUMBER", BATCHES=1)
        drv.write_fields("CDMA.D_MISC_CFG", IN_PRECISION="INT8")
        drv.write_fields("CSC.D_MISC_CFG", IN_PRECISION="INT8")
        drv.write_fields("SDP.D_FEATURE_MODE_CFG", FLYING_MODE="ON", BATCH_NUMBER=1)
        drv.write_fields("SDP.D_DATA_FORMAT", PROC_PRECISION="INT8", OUT_PRECISION="INT8")
        with pytest.raises(UnitNotModelled, match="Winograd"):
            drv.launch("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")


def test_layer_waits_for_every_engine():
    with _target() as t:
        drv = NvdlaDriver(t)
        drv.launch("SDP")  # memory-to-memory SDP also needs SDP_RDMA
        assert not t.layers_run and drv.read_field("SDP.D_OP_ENABLE", "OP_EN") == 1


def test_invalid_precision_combination_is_refused_naming_the_table():
    from nvdla_hil.harness.targets.model import LayerConfigError

    with _target() as t:
        drv = NvdlaDriver(t)
        drv.write_fields("SDP_RDMA.D_FEATURE_MODE_CFG", IN_PRECISION="INT8", PROC_PRECISION="INT8", OUT_PRECISION="FP16")
        drv.write_fields("SDP.D_DATA_FORMAT", PROC_PRECISION="INT8", OUT_PRECISION="FP16")
        with pytest.raises(LayerConfigError, match=r"SDP layer refused: seed 000, SDP conversion table: .*INT8.*FP16"):
            drv.launch("SDP_RDMA", "SDP")


def test_secondary_memory_port_on_a_profile_without_one_is_refused():
    from nvdla_hil.harness.targets.model import LayerConfigError

    with _target() as t:  # nv_small: no CVIF; RAM_TYPE resets to CV
        drv = NvdlaDriver(t)
        drv.write_fields("CDP_RDMA.D_DATA_FORMAT", INPUT_DATA="INT8")
        drv.write_fields("CDP.D_DATA_FORMAT", INPUT_DATA_TYPE="INT8")
        with pytest.raises(LayerConfigError, match=r"CDP_RDMA\.D_SRC_DMA_CFG\.SRC_RAM_TYPE selects the secondary"):
            drv.launch("CDP_RDMA", "CDP")


def test_precision_the_profile_lacks_is_refused():
    from nvdla_hil.harness.targets.model import LayerConfigError

    with _target() as t:  # nv_small is INT8-only: its RTL has no INT16 output path
        drv = NvdlaDriver(t)
        drv.write_fields("SDP_RDMA.D_FEATURE_MODE_CFG", IN_PRECISION="INT8", PROC_PRECISION="INT8", OUT_PRECISION="INT16")
        drv.write_fields("SDP.D_DATA_FORMAT", PROC_PRECISION="INT8", OUT_PRECISION="INT16")
        with pytest.raises(LayerConfigError, match=r"SDP uses INT16, which nv_small does not support"):
            drv.launch("SDP_RDMA", "SDP")


@pytest.mark.parametrize("profile,semantics,cfg_reg,data_reg,cfg", [
    ("nv_small", "rtl", CDP_CFG, CDP_DATA, WRITE_LE | 60),  # CDP: sticks at entry 64
    ("nv_small", "cmod", CDP_CFG, CDP_DATA, WRITE_LO | 250),
    ("nv_small_256_full", "rtl", SDP_CFG, SDP_DATA, WRITE_LE | 60),  # SDP RTL: runs past the table
    ("nv_small_256_full", "rtl", SDP_CFG, SDP_DATA, READ_LO | 3),  # READ type: only the address moves
    ("nv_small_256_full", "cmod", SDP_CFG, SDP_DATA, WRITE_LO | 1020),  # beyond the table: sticks at 256
    ("nv_small", "rtl", SDP_CFG, SDP_DATA, WRITE_LE | 0),  # nv_small: no SDP LUT storage
])
def test_lut_burst_equals_word_by_word_writes(profile, semantics, cfg_reg, data_reg, cfg):
    """The model's LUT-data burst (how the driver loads a table) leaves the tables and the port
    exactly as the same words written one at a time (the per-word rules tested above)."""
    words = list(range(0x100, 0x100 + 12))
    state = []
    for burst in (False, True):
        with _target(profile, semantics) as t:
            t.write32(cfg_reg, cfg)
            if burst:
                t.write_burst(data_reg, words, incr=False)
            else:
                for w in words:
                    t.write32(data_reg, w)
            unit = "CDP" if cfg_reg == CDP_CFG else "SDP"
            state.append(([tbl.tolist() for tbl in t._luts[unit].values()], t._lut_ports[unit].addr, t.read32(cfg_reg)))
    assert state[0] == state[1]


def test_every_layer_model_loads_its_entry_point():
    """Each hardware layer kind names a reference model that exists (a rename in refmodel fails
    here, not when that kind of layer first runs); one that is not there is UnitNotModelled."""
    from types import SimpleNamespace

    from nvdla_hil.harness.targets.model_layers import LayerModel

    for kind in LayerModel:
        entry = kind.load()
        assert callable(entry) and entry.__name__ == kind.value[1], kind
    for gone in (("sdp", "run_nothing"), ("nothing", "run_sdp")):
        with pytest.raises(UnitNotModelled, match=f"{gone[1]}: this layer's reference model is not available"):
            LayerModel.load(SimpleNamespace(value=gone))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["RTL", "c_model", "", None])
def test_semantics_other_than_rtl_or_cmod_is_refused(bad):
    """Where the RTL and the C model differ the model takes one of two branches, chosen by a string:
    a near miss ("RTL") must be refused, not quietly take the C model's branch."""
    from nvdla_hil.harness.refmodel.base import ModelOptions
    from nvdla_hil.harness.refmodel.lut import sdp_lut

    with pytest.raises(ValueError, match=rf"semantics must be 'rtl' or 'cmod', not {bad!r}"):
        ModelTarget("nv_small", semantics=bad)
    with pytest.raises(ValueError, match="semantics must be 'rtl' or 'cmod'"):
        ModelOptions(semantics=bad)
    with pytest.raises(ValueError, match="semantics must be 'rtl' or 'cmod'"):
        sdp_lut(np.zeros(1, dtype=np.int64), None, np.zeros(65), np.zeros(257), semantics=bad)


def test_an_option_for_another_target_is_refused_by_name():
    """``TargetSpec.extra`` carries a kind's own constructor options; one meant for another target
    (or misspelt) is a ConfigError naming it (exit 2), not ignored by the model target nor a
    TypeError from inside the simulator's constructor."""
    from nvdla_hil.drivers.errors import ConfigError
    from nvdla_hil.harness.targets import TargetSpec, open_target

    with open_target(TargetSpec(kind="model", extra={"model_bugs": ["SDP.D_CVT_OFFSET.CVT_OFFSET+1"]})) as t:
        assert [b.spec for b in t.bugs] == ["SDP.D_CVT_OFFSET.CVT_OFFSET+1"]  # its own option is taken
        assert t.read32(0x0) == 0x0001_0001  # and it runs: CFGROM_HW_VERSION (NVDLA's NV_NVDLA_CFGROM_rom.v)
    with pytest.raises(ConfigError, match=r"^the model target has no option 'clock_gating' \(its options: model_bugs\)$"):
        open_target(TargetSpec(kind="model", extra={"clock_gating": False}))
    with pytest.raises(ConfigError, match=r"the verilator target has no option 'model_bugs', 'wave_fle' \(its options: .*wave_file"):
        open_target(TargetSpec(kind="verilator", nvdla_hw="/nonexistent", extra={"wave_fle": "w.vcd", "model_bugs": []}))
    with pytest.raises(ConfigError, match=r"the serial target has no option 'layer_timeout' \(its options: readback_ok, session_lock\)"):
        open_target(TargetSpec(kind="serial", lab="lab.yaml", board="b0", extra={"layer_timeout": 5.0}))
