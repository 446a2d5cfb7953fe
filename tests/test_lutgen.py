"""LUT programming helpers (seed 003). Table contents for simple functions are worked out by
hand; register encodings are checked against the trace-test values quoted in the semantics doc
(section 5.7: S_LUT_CFG = 0x50, S_LUT_INFO = 0x100c1)."""

import numpy as np
import pytest

from nvdla_hil.drivers import lutgen as L
from nvdla_hil.harness.analysis.lut_accuracy import program_error
from nvdla_hil.harness.refmodel.lut import LutParams


def ident(x):
    return np.asarray(x, dtype=np.float64)


def test_identity_gives_linear_tables():
    p = L.program_lut(ident, L.TableSpec("linear", 0, 64), L.TableSpec("linear", 0, 1024))
    assert p.le.dtype == np.int16 and p.le.shape == (65,) and p.lo.shape == (257,)
    assert p.le.tolist() == list(range(65))                    # select 0: X = i
    assert p.lo.tolist() == [4 * i for i in range(257)]         # 1024/256 = 4 = 2^2
    q = p.params
    assert (q.le_function, q.le_index_select, q.lo_index_select) == ("linear", 0, 2)
    assert (q.le_start, q.le_end, q.lo_start, q.lo_end) == (0, 64, 0, 1024)
    # slope 1 = 16384 * 2^-14 (2^15 would not fit a signed 16-bit scale)
    assert (q.le_slope_uflow_scale, q.le_slope_uflow_shift) == (16384, 14)
    assert (q.lo_slope_oflow_scale, q.lo_slope_oflow_shift) == (16384, 14)


def test_affine_function_with_input_and_output_scaling():
    # f(x) = 2x + 1 on [-1, 1]; X = 128 x; entries = 100 f
    f = lambda x: 2 * np.asarray(x) + 1  # noqa: E731
    p = L.program_lut(f, L.TableSpec("linear", -1, 1), L.TableSpec("linear", -1, 1), in_scale=128, out_scale=100)
    assert p.params.lo_index_select == 0 and p.params.le_index_select == 2  # 256/256 = 1, 256/64 = 4
    assert p.params.lo_start == -128 and p.params.lo_end == 128
    # LO[i] = round(-100 + 1.5625 i); LE[i] = round(-100 + 6.25 i), halves away from zero
    assert p.lo[:3].tolist() == [-100, -98, -97] and p.lo[128] == 100 and p.lo[256] == 300
    assert p.le[:3].tolist() == [-100, -94, -88] and p.le[64] == 300
    # slope 2 * 100/128 = 1.5625 = 25600 * 2^-14
    assert (p.params.lo_slope_uflow_scale, p.params.lo_slope_uflow_shift) == (25600, 14)


def test_exponent_table_contents():
    p = L.program_lut(ident, L.TableSpec("exponent", 0, 2**20, index_offset=0), L.TableSpec("linear", 0, 256))
    assert p.le[:15].tolist() == [2**i for i in range(15)]
    assert (p.le[15:] == 32767).all()  # saturated entries
    assert p.params.le_function == "exponent" and p.params.le_index_offset == 0
    q = L.program_lut(ident, L.TableSpec("exponent", 0, 1, index_offset=-2), L.TableSpec("linear", 0, 256))
    assert q.le[:4].tolist() == [0, 1, 1, 2]  # 0.25, 0.5 (half away), 1, 2


def test_encode_slope():
    assert L.encode_slope(0.0) == (0, 0)
    assert L.encode_slope(-1.0) == (-32768, 15)
    assert L.encode_slope(1e6) == (31250, -5)      # 31250 * 2^5 = 1e6
    assert L.encode_slope(3e9) == (32767, -16)     # beyond 32767 * 2^16: saturate
    assert L.encode_slope(0.75) == (24576, 15)


def test_activation_recommended_configuration():
    p = L.program_activation(L.sigmoid, -8, 8, in_scale=2**10, out_scale=2**14)
    q = p.params
    assert q.le_function == "linear"
    assert (q.hybrid_priority, q.uflow_priority, q.oflow_priority) == ("LE", "LO", "LO")
    assert (q.lo_start, q.lo_end, q.lo_index_select) == (-8192, 8192, 6)   # 16*1024/256 = 64
    assert (q.le_start, q.le_end, q.le_index_select) == (-2048, 2048, 6)   # density: middle quarter
    assert p.lo[128] == 8192  # sigmoid(0) * 2^14
    assert p.case == "overlap/LO-raw" and "sigmoid" in p.description


def test_lrn_recommended_configuration():
    p = L.program_lrn(1e-4, 0.75, 1.0, 5, s_max=2**20, out_scale=2**14)
    q = p.params
    assert q.le_function == "exponent" and q.le_start == 0 and q.lo_start == 0
    assert (q.hybrid_priority, q.uflow_priority, q.oflow_priority) == ("LO", "LO", "LE")
    assert p.lo[0] == 2**14                              # (1 + 0)^-0.75 = 1
    assert p.unit == "cdp" and q.le_end == 2**37 - 1     # 2^64 clamped to the 38-bit register
    err = program_error(p, L.lrn(1e-4, 0.75, 1.0, 5))
    assert err.max_abs < 0.05 and err.mean_abs < 0.01


def test_sigmoid_error_decreases_with_resolution():
    fn = L.sigmoid
    errs_q = [program_error(L.program_activation(fn, -8, 8, in_scale=2**10, out_scale=s), fn,
                               x_range=(-4, 4)).max_abs for s in (2**6, 2**10, 2**14)]
    assert errs_q[0] > errs_q[1] > errs_q[2]
    errs_r = [program_error(L.program_activation(fn, -w, w, in_scale=2**10, out_scale=2**14), fn,
                               x_range=(-4, 4)).max_abs for w in (64, 16, 4)]
    assert errs_r[0] > errs_r[1] > errs_r[2]
    assert errs_q[2] < 1e-3


def test_identity_error_is_quantisation_only():
    for unit in ("sdp", "cdp"):
        p = L.program_lut(ident, L.TableSpec("linear", 0, 64), L.TableSpec("linear", 0, 1024), unit=unit,
                          hybrid_priority="LO")
        e = program_error(p, ident, x_range=(0, 1500))  # includes LO overflow extrapolation
        assert e.max_abs <= 0.5, unit


@pytest.mark.parametrize("case", L.CASES)
def test_six_coverage_cases(case):
    p = L.program_case(L.tanh, case, -4, 4, in_scale=2**8, out_scale=2**14)
    q = p.params
    layout, rest = case.split("/")
    t = rest.split("-")[0]
    lo_t = (q.le_start, q.le_end) if t == "LE" else (q.lo_start, q.lo_end)
    other = (q.lo_start, q.lo_end) if t == "LE" else (q.le_start, q.le_end)
    if layout == "overlap":
        assert lo_t[0] < other[0] and other[1] < lo_t[1]
    elif layout == "adjacent":
        assert lo_t[1] == other[0]
    else:
        assert lo_t[1] < other[0]
    e = program_error(p, L.tanh)
    limit = 0.2 if layout == "gap" else 2e-3  # the gap is bridged by an edge slope only
    assert e.max_abs < limit


def test_register_round_trip_sdp_and_cdp():
    for unit in ("sdp", "cdp"):
        p = L.program_lrn(1e-4, 0.75, 2.0, 5, s_max=2**20, unit=unit, index_offset=-3) if unit == "cdp" else \
            L.program_activation(L.tanh, -4, 4, in_scale=2**6, out_scale=2**12)
        regs = L.lut_params_to_registers(p.params, unit)
        assert L.registers_to_lut_params(regs, unit) == p.params


def test_round_trip_extreme_values():
    p = LutParams(le_function="linear", le_index_offset=-128, le_index_select=-32, lo_index_select=31,
                  le_start=-(2**37), le_end=2**37 - 1, lo_start=-5, lo_end=2**33 + 7,
                  le_slope_uflow_scale=-32768, le_slope_uflow_shift=-16, le_slope_oflow_scale=32767,
                  le_slope_oflow_shift=15, lo_slope_uflow_shift=-1, uflow_priority="LO", oflow_priority="LE",
                  hybrid_priority="LO")
    regs = L.lut_params_to_registers(p, "cdp")
    assert regs["LUT_LO_START_LOW"] == 0xFFFFFFFB and regs["LUT_LO_START_HIGH"] == 0x3F
    assert regs["LUT_LO_END_LOW"] == 7 and regs["LUT_LO_END_HIGH"] == 2
    assert regs["LUT_LE_START_LOW"] == 0 and regs["LUT_LE_START_HIGH"] == 0x20
    assert regs["LUT_LE_SLOPE_UFLOW_SHIFT"] == 0x10 and regs["LUT_LO_SLOPE_UFLOW_SHIFT"] == 0x1F
    assert regs["LUT_LE_SLOPE_UFLOW_SCALE"] == 0x8000
    assert L.registers_to_lut_params(regs, "cdp") == p


def test_negative_select_encoding():
    p = LutParams(le_index_select=-1, lo_index_select=-3)
    sdp = L.lut_params_to_registers(p, "sdp")
    assert sdp["LUT_LE_INDEX_SELECT"] == 0xFF and sdp["LUT_LO_INDEX_SELECT"] == 0xFD
    cdp = L.lut_params_to_registers(p, "cdp")
    assert cdp["LUT_LO_INDEX_SELECT"] == 0xFD  # bits 7:6 equal bit 5
    # SDP reads 8 bits signed; CDP RTL 6 bits signed, cmod the whole byte when bit 5 is clear
    assert L.registers_to_lut_params({"LUT_LO_INDEX_SELECT": 0x3D}, "cdp").lo_index_select == -3
    assert L.registers_to_lut_params({"LUT_LO_INDEX_SELECT": 0xDD}, "cdp").lo_index_select == 29
    assert L.registers_to_lut_params({"LUT_LO_INDEX_SELECT": 0xDD}, "cdp", semantics="cmod").lo_index_select == 221
    assert L.registers_to_lut_params({"LUT_LO_INDEX_SELECT": 0xDD}, "sdp").lo_index_select == -35
    with pytest.raises(ValueError, match="LUT_LO_INDEX_SELECT = -33"):
        L.lut_params_to_registers(LutParams(lo_index_select=-33), "cdp")
    L.lut_params_to_registers(LutParams(lo_index_select=-33), "sdp")


def test_field_range_errors():
    with pytest.raises(ValueError, match="LUT_LE_START = 2147483648"):
        L.lut_params_to_registers(LutParams(le_start=2**31), "sdp")
    with pytest.raises(ValueError, match="LUT_LO_SLOPE_OFLOW_SHIFT"):
        L.lut_params_to_registers(LutParams(lo_slope_oflow_shift=16), "sdp")
    with pytest.raises(ValueError, match="unit"):
        L.lut_params_to_registers(LutParams(), "pdp")


def test_pack_registers_matches_trace_values():
    # sdp_3x3x33_ew_le_exp_int8 (doc 5.7): LE exponent, uflow LO, oflow LE, hybrid LO; eo=-63, es=0, os=1
    p = LutParams(le_function="exponent", le_index_offset=-63, lo_index_select=1,
                  uflow_priority="LO", oflow_priority="LE", hybrid_priority="LO", lo_slope_uflow_scale=0x249C,
                  lo_slope_uflow_shift=5)
    regs = L.pack_registers(L.lut_params_to_registers(p, "sdp"), "sdp")
    assert regs["S_LUT_CFG"] == 0x50 and regs["S_LUT_INFO"] == 0x100C1
    assert regs["S_LUT_LO_SLOPE_SCALE"] == 0x249C and regs["S_LUT_LO_SLOPE_SHIFT"] == 5
    cdp = L.pack_registers(L.lut_params_to_registers(LutParams(le_end=0x80001, hybrid_priority="LO"), "cdp"), "cdp")
    assert cdp["S_LUT_CFG"] == 0x40 and cdp["S_LUT_LE_END_LOW"] == 0x80001 and cdp["S_LUT_LE_END_HIGH"] == 0


def test_write_sequence():
    p = L.program_lut(lambda x: -np.asarray(x), L.TableSpec("linear", 0, 64), L.TableSpec("linear", 0, 256))
    seq = L.lut_write_sequence(p)
    assert len(seq) == 2 + 65 + 257
    assert seq[0] == ("S_LUT_ACCESS_CFG", 0x20000) and seq[66] == ("S_LUT_ACCESS_CFG", 0x30000)
    assert seq[1] == ("S_LUT_ACCESS_DATA", 0) and seq[2] == ("S_LUT_ACCESS_DATA", 0xFFFF)  # -1


def test_bad_specs():
    with pytest.raises(ValueError, match="above start"):
        L.program_lut(ident, L.TableSpec("linear", 1, 1), L.TableSpec("linear", 0, 1))
    with pytest.raises(ValueError, match="only the LE table"):
        L.program_lut(ident, L.TableSpec("linear", 0, 1), L.TableSpec("exponent", 0, 1))
    with pytest.raises(ValueError, match="not finite"):
        L.program_lut(lambda x: 1 / np.asarray(x), L.TableSpec("linear", 0, 64), L.TableSpec("linear", 0, 64))
    with pytest.raises(ValueError, match="unknown case"):
        L.program_case(ident, "nope", 0, 1)
