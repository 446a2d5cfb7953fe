"""The driver's name lookups resolved once per register map (``RegisterMap.write_address`` /
``field_slot``, ``NvdlaDriver.write_registers``): the same accesses, values and errors as the
lookups they replace, a bad name refused every time."""

from __future__ import annotations

import pytest

from nvdla_hil.drivers.driver import AccessLog, NvdlaDriver, ReadOnlyFieldError
from nvdla_hil.drivers.regmap import FieldRangeError, UnitNotPresentError, UnknownFieldError, UnknownRegisterError
from nvdla_hil.harness.targets.model import ModelTarget


@pytest.fixture
def drv():
    with ModelTarget("nv_small") as t:
        yield NvdlaDriver(t)


def test_write_address_and_field_slot_match_the_register_map(drv):
    rm = drv.regmap
    for spec in ("SDP.D_DP_BS_CFG", ("SDP", "D_DP_BS_CFG"), "NVDLA_SDP.D_DP_BS_CFG_0"):
        r = rm.register(*spec) if isinstance(spec, tuple) else rm.register(spec)
        assert rm.write_address(spec) == rm.write_address(spec) == r.address
        f = r.field("BS_BYPASS")
        assert rm.field_slot(spec, "BS_BYPASS") == (r.address, f.lsb, f.max_value)
    assert rm.write_address("SDP", "D_DP_BS_CFG") == rm.register("SDP", "D_DP_BS_CFG").address
    assert rm.write_address("GLB.S_NVDLA_HW_VERSION") == -1  # read-only


def test_bad_names_raise_the_same_errors_every_time(drv):
    rm = drv.regmap
    for _ in range(2):  # the second time the good names are cached (in this process): still refused
        with pytest.raises(UnknownRegisterError, match=r"did you mean SDP\.S_LUT_ACCESS_CFG"):
            rm.write_address("SDP.S_LUT_ACESS_CFG")
        with pytest.raises(UnknownRegisterError, match=r"did you mean SDP\.S_LUT_ACCESS_CFG"):
            drv.write("SDP.S_LUT_ACESS_CFG", 0)
        with pytest.raises(UnknownFieldError, match="BS_BYPASS"):
            drv.read_field("SDP.D_DP_BS_CFG", "BS_BYPAS")
        with pytest.raises(UnknownRegisterError):
            drv.read_field("SDP.D_DP_BS_CF", "BS_BYPASS")
        with pytest.raises(UnitNotPresentError):  # nv_small has no RUBIK
            drv.write("RBK.D_MISC_CFG", 0)
        with pytest.raises(ReadOnlyFieldError, match="read-only"):
            drv.write("GLB.S_NVDLA_HW_VERSION", 0)
        with pytest.raises(FieldRangeError, match="does not fit 32 bits"):
            drv.write("SDP.D_DP_BS_CFG", 1 << 32)
        with pytest.raises(FieldRangeError, match="does not fit 32 bits"):
            drv.write("SDP.D_DP_BS_CFG", -1)
        assert drv.intr_bit("SDP", 1) == drv.regmap.register("GLB", "S_INTR_STATUS").field("SDP_DONE_STATUS1").mask
        with pytest.raises(UnknownFieldError):
            drv.intr_bit("NOPE", 0)


def test_write_registers_is_write_in_order(drv):
    settings = [("SDP.D_DP_BS_CFG", 0x12), (("SDP", "D_DP_BN_CFG"), 0x3), ("NVDLA_SDP.D_DATA_CUBE_WIDTH_0", 7)]
    log = drv.record(AccessLog(drv.regmap))
    drv.write_registers(settings)
    batched = [(r.direction, r.address, r.value) for r in log.records]
    log.records.clear()
    for name, value in settings:
        drv.write(name, value)
    assert [(r.direction, r.address, r.value) for r in log.records] == batched
    assert [a for _, a, _ in batched] == [drv.register(n).address for n, _ in settings]
    assert drv.read_field("SDP.D_DP_BS_CFG", "BS_BYPASS") == 0x12 & 1
    assert drv.read("SDP.D_DATA_CUBE_WIDTH") == 7


@pytest.mark.parametrize("bad, error", [(("SDP.D_DP_BS_CFX", 1), UnknownRegisterError),
                                        (("GLB.S_NVDLA_HW_VERSION", 0), ReadOnlyFieldError),
                                        (("SDP.D_DP_BS_CFG", 1 << 32), FieldRangeError)])
def test_write_registers_writes_up_to_a_bad_register_then_raises_as_write_does(drv, bad, error):
    log = drv.record(AccessLog(drv.regmap))
    with pytest.raises(error) as got:
        drv.write_registers([("SDP.D_DATA_CUBE_WIDTH", 5), bad, ("SDP.D_DATA_CUBE_HEIGHT", 6)])
    with pytest.raises(error) as alone:
        drv.write(*bad)
    assert str(got.value) == str(alone.value)
    assert [(r.direction, r.address, r.value) for r in log.records] == [
        ("W", drv.register("SDP.D_DATA_CUBE_WIDTH").address, 5)]
    assert drv.read("SDP.D_DATA_CUBE_HEIGHT") == 0


class _OwnWrite32(ModelTarget):
    """A subclass with its own ``_write32``: every write goes through it (no inline path)."""

    def _write32(self, address: int, value: int, posted: bool) -> None:
        super()._write32(address, value, posted)


@pytest.mark.parametrize("suite", ["sdp_lut", "pdp_fp16", "conv_fp16"])
def test_model_write32_inline_path_is_write32(suite):
    from nvdla_hil.harness.vectors import bundled_root, execute_case, find_cases, load_case

    paths = find_cases(bundled_root() / suite)[:2]
    assert paths
    for p in paths:
        case = load_case(p)
        runs = []
        for cls in (ModelTarget, _OwnWrite32):
            with cls(case.profile or "nv_small", semantics="cmod") as t:
                assert t._inline_writes is (cls is ModelTarget)
                log = NvdlaDriver(t).record()
                for _ in range(2):  # the second run takes the inline path for every register seen
                    outs, stats = execute_case(case, t)
                runs.append(({k: bytes(v) for k, v in outs.items()}, stats, dict(t._regs),
                             [(r.direction, r.address, r.value) for r in log.records]))
        assert runs[0] == runs[1], p
    with ModelTarget("nv_small") as t:
        d = NvdlaDriver(t)
        d.write("SDP.D_DATA_CUBE_WIDTH", 3)
        with pytest.raises(ValueError, match="does not fit 32 bits"):  # the inline path keeps write32's checks
            t.write32(d.register("SDP.D_DATA_CUBE_WIDTH").address, 1 << 32)
    from nvdla_hil.drivers.transport import NotOpenError

    with pytest.raises(NotOpenError):
        t.write32(d.register("SDP.D_DATA_CUBE_WIDTH").address, 1)
