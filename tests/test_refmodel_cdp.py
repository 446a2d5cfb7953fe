"""CDP (LRN + LUT) reference model: hand-worked cases, [DIFF]s, property tests, trace CRCs.

Golden values come from hand calculation (docs/nvdla-precision-semantics.md section 6),
an independent scalar re-implementation below (Python ints, written from the spec) and
NVDLA's own trace-test CRCs.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st


import numpy as np
import pytest
from _regview import RegView, run_on_model, trace_names
from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import ModelOptions, UnitNotModelled
from nvdla_hil.harness.refmodel.cdp import (
    HIT,
    OF,
    UF,
    CdpConfig,
    cdp_lrn,
    cdp_lut,
    decode_cdp_lut,
    run_cdp,
)
from nvdla_hil.harness.refmodel.lut import LutParams


LE_RAMP = np.arange(65, dtype=np.int64) * 100  # T[i] = 100 i
LO_RAMP = np.arange(257, dtype=np.int64) * -10  # T[i] = -10 i


def _lut(s, le=LE_RAMP, lo=LO_RAMP, semantics="rtl", **kw):
    p = LutParams(**kw)
    r, stats, les, los = cdp_lut(np.array(s, dtype=np.int64), le, lo, p, semantics)
    return r.tolist(), stats, les.tolist(), los.tolist()


# LO table parked far away so it underflows (LE decides the category)
LO_FAR = {"lo_start": 1 << 20, "lo_end": (1 << 20) + 256}


# ---------------------------------------------------------------------------------------
# Hand-worked LUT cases
# ---------------------------------------------------------------------------------------


def test_le_exponent_hit_interpolates_with_16bit_fraction():
    # s=5, start 0, eo 0: d=5, k=2 -> i=2, f16=(5-4)*2^14=16384
    # r = 200 + rnd(100*16384 / 65536) = 200 + 25
    r, stats, les, los = _lut([5], le_function="exponent", le_start=0, le_index_offset=0, **LO_FAR)
    assert r == [225] and les == [HIT] and los == [UF]
    assert (stats.le_hit, stats.lo_hit, stats.uflow, stats.oflow, stats.hybrid) == (1, 0, 0, 0, 0)


def test_le_exponent_large_k_truncates_fraction():
    # s = 2^18 + 2^17 + 3, start 0, eo 10: k=18 -> i=8, f16 = floor((2^17+3) / 4) = 32768
    le = LE_RAMP.copy()
    le[8], le[9] = 1000, 1003  # 3 * 0.5 = 1.5 -> 2 (tie away from zero)
    r, _, les, _ = _lut([(1 << 18) + (1 << 17) + 3], le=le, le_start=0, le_index_offset=10, **LO_FAR)
    assert les == [HIT] and r == [1002]


def test_le_exponent_underflow_below_offset_uses_biased_anchor():
    # s=3, start 0, eo 2: k=1 < 2 -> UF; anchor = 0 + 2^2 = 4
    # r = T[0] + RSAT((3-4)*3, 1) = 7 + rnd(-1.5) = 7 - 2
    le = LE_RAMP.copy()
    le[0] = 7
    r, stats, les, _ = _lut(
        [3], le=le, le_start=0, le_index_offset=2, le_slope_uflow_scale=3, le_slope_uflow_shift=1, **LO_FAR
    )
    assert les == [UF] and r == [5] and stats.uflow == 1


def test_le_exponent_offset_zero_anchor_is_start_plus_one():
    # eo = 0 -> anchor = start + 1 (cmod and RTL agree). s = start -> diff -1, scale 5, shift 0
    r, _, les, _ = _lut([10], le_start=10, le_index_offset=0, le_slope_uflow_scale=5, **LO_FAR)
    assert les == [UF] and r == [0 + -5]


def test_le_exponent_negative_offset_anchor_is_start_and_overflow():
    # eo = -60: i = k + 60 >= 64 from k = 4 (s=16) -> OF, r = T[64] + (s - END) * 2 >> 0
    r, stats, les, _ = _lut(
        [9, 10, 16],
        le_start=0, le_end=12, le_index_offset=-60,
        le_slope_uflow_scale=1, le_slope_oflow_scale=2, **LO_FAR,
    )  # fmt: skip
    # s=9, 10: k=3 -> i=63 hit: 9 -> f=(9-8)*2^13, r = 6300 + rnd(100 * 8192/65536) = 6300 + 13 (12.5 -> 13)
    assert les == [HIT, HIT, OF]
    assert r[0] == 6313 and r[1] == 6300 + 25
    assert r[2] == 6400 + (16 - 12) * 2
    # LE hit with LO UF is an LE hit; LE OF with LO UF is hybrid (one UF, one OF)
    assert (stats.le_hit, stats.hybrid) == (2, 1)


def test_le_linear_hit_and_negative_tie():
    # start 10, sel 2: s=17 -> d=7, i=1, f16 = 3 * 2^14; T[1]=-100, T[2]=100 -> -100 + 150
    le = LE_RAMP.copy()
    le[1], le[2] = -100, 100
    r, _, les, _ = _lut([17], le=le, le_function="linear", le_start=10, le_index_select=2, **LO_FAR)
    assert les == [HIT] and r == [50]
    # CDP rounds only the correction: s=13, sel 1 -> d=3, i=1, f=0.5;
    # T=5 -> 4 gives 5 + rnd(-0.5) = 4 (SDP, rounding the whole sum 4.5, would give 5)
    le[1], le[2] = 5, 4
    r, _, _, _ = _lut([13], le=le, le_function="linear", le_start=10, le_index_select=1, **LO_FAR)
    assert r == [4]
    le[1], le[2] = 4, 5  # positive tie: 4 + rnd(0.5) = 5
    r, _, _, _ = _lut([13], le=le, le_function="linear", le_start=10, le_index_select=1, **LO_FAR)
    assert r == [5]


def test_linear_negative_select_has_zero_fraction_and_overflows():
    # LO select -1: i = 2d; s=100 -> T[200]; s=128 -> i=256 -> OF -> T[256] + (s-END)*scale
    lo = LO_RAMP.copy()
    r, stats, _, los = _lut(
        [100, 127, 128], lo=lo, le_start=1 << 20, lo_start=0, lo_end=128, lo_index_select=-1,
        lo_slope_oflow_scale=-1,
    )  # fmt: skip
    assert los == [HIT, HIT, OF]
    assert r == [-2000, -2540, 0]  # s=128: hybrid -> LE's UF value T[0] + 0
    # LE UF + LO HIT -> LO hit; LE UF + LO OF -> hybrid, HYBRID_PRIORITY LE picks LE's UF value
    assert (stats.lo_hit, stats.hybrid) == (2, 1)


def test_lo_linear_select_above_16_truncates_fraction():
    # sel 18: d = 3 * 2^18 + 2^17 + 5 -> i = 3, f16 = floor((2^17 + 5) / 4) = 32769
    lo = np.zeros(257, np.int64)
    lo[3], lo[4] = 0, 2  # 2 * 32769 / 65536 = 1.00003 -> 1
    d = 3 * (1 << 18) + (1 << 17) + 5
    r, _, _, los = _lut([d], lo=lo, le_start=1 << 20, lo_start=0, lo_index_select=18)
    assert los == [HIT] and r == [1]


@pytest.mark.parametrize(
    "prio,expect", [({"uflow_priority": "LE"}, 11), ({"uflow_priority": "LO"}, 22)]
)
def test_both_underflow_priority(prio, expect):
    le, lo = LE_RAMP.copy(), LO_RAMP.copy()
    le[0], lo[0] = 11, 22
    r, stats, les, los = _lut([0], le=le, lo=lo, le_start=5, lo_start=5, **prio)
    assert (les, los) == ([UF], [UF]) and r == [expect]
    assert (stats.uflow, stats.le_hit, stats.lo_hit, stats.oflow, stats.hybrid) == (1, 0, 0, 0, 0)


@pytest.mark.parametrize("prio,expect", [("LE", 6400), ("LO", -2560)])
def test_both_overflow_priority(prio, expect):
    r, stats, les, los = _lut(
        [1000], le_function="linear", le_start=0, le_end=1000, lo_start=0, lo_end=1000,
        le_index_select=0, lo_index_select=0, oflow_priority=prio,
    )  # fmt: skip
    assert (les, los) == ([OF], [OF]) and r == [expect] and stats.oflow == 1


@pytest.mark.parametrize("prio,expect", [("LE", 300), ("LO", -30)])
def test_both_hit_is_hybrid(prio, expect):
    r, stats, les, los = _lut(
        [3], le_function="linear", le_start=0, lo_start=0, hybrid_priority=prio
    )
    assert (les, los) == ([HIT], [HIT]) and r == [expect]
    assert (stats.hybrid, stats.le_hit, stats.lo_hit) == (1, 0, 0)


@pytest.mark.parametrize("prio,expect", [("LE", 6400), ("LO", -5)])
def test_le_overflow_lo_underflow_is_hybrid(prio, expect):
    lo = LO_RAMP.copy()
    lo[0] = -5
    r, stats, les, los = _lut(
        [64], lo=lo, le_function="linear", le_start=0, le_end=64, lo_start=100, hybrid_priority=prio
    )
    assert (les, los) == ([OF], [UF]) and r == [expect] and stats.hybrid == 1


def test_lo_hit_le_overflow_counts_lo_hit():
    r, stats, les, los = _lut([70], le_function="linear", le_start=0, le_end=64, lo_start=0)
    assert (les, los) == ([OF], [HIT]) and r == [-700]
    assert (stats.lo_hit, stats.hybrid) == (1, 0)


def test_counters_are_exclusive_and_cover_every_element():
    s = np.arange(-300, 70000, 7)
    _, stats, _, _ = _lut(s, le_start=3, le_index_offset=4, lo_start=100, lo_index_select=6)
    assert stats.le_hit + stats.lo_hit + stats.uflow + stats.oflow + stats.hybrid == s.size


def test_extrapolation_saturates_to_16_bits():
    r, _, _, _ = _lut([0], le_start=1 << 36, lo_start=1 << 36, le_slope_uflow_scale=32767)
    assert r == [-32768]
    le = LE_RAMP.copy()
    le[0] = 32767
    # UF anchor -2^20 + 2^30: (0 - anchor) * -1 << 16 is huge and positive -> 32767
    r, _, _, _ = _lut([0], le=le, le_start=-(1 << 20), le_index_offset=30, le_slope_uflow_scale=-1,
                      le_slope_uflow_shift=-16, lo_start=1 << 20)  # fmt: skip
    assert r == [32767]


# ---------------------------------------------------------------------------------------
# [DIFF]s: both semantics
# ---------------------------------------------------------------------------------------


def _view(**regs: int) -> RegView:
    v = RegView()
    for name, value in regs.items():
        v.set("CDP", name, value)
    return v


def test_diff_index_select_sign_extension():
    # select byte 0x42: bit 5 clear, bit 6 set. RTL: bits 5:0 -> +2; cmod: whole byte -> 66
    v = _view(S_LUT_INFO=(0x42 << 16) | (0x42 << 8))
    assert decode_cdp_lut(v, "rtl").le_index_select == 2
    assert decode_cdp_lut(v, "cmod").le_index_select == 0x42
    assert decode_cdp_lut(v, "rtl").lo_index_select == 2
    assert decode_cdp_lut(v, "cmod").lo_index_select == 0x42
    # bit 5 set: both read bits 5:0 as 6-bit signed (0xE1 -> -31, 0x3F -> -1)
    v = _view(S_LUT_INFO=(0xE1 << 16) | (0x3F << 8))
    for sem in ("rtl", "cmod"):
        p = decode_cdp_lut(v, sem)
        assert (p.le_index_select, p.lo_index_select) == (-1, -31)
    # effect on a lookup: LE linear start 0, s=12 -> RTL i=3 (T[3]=300), cmod i=0 frac 0 (T[0]=0)
    v = _view(S_LUT_CFG=1, S_LUT_INFO=0x42 << 8, S_LUT_LO_START_LOW=1 << 20)
    for sem, expect in (("rtl", 300), ("cmod", 0)):
        r, *_ = cdp_lut(np.array([12]), LE_RAMP, LO_RAMP, decode_cdp_lut(v, sem), sem)
        assert r.tolist() == [expect]


def test_diff_start_low_22_bits_in_rtl_compare():
    # LE_START = 2^22 + 5: RTL compares with 5 (low 22 bits), cmod with the full value
    v = _view(S_LUT_CFG=1, S_LUT_LE_START_LOW=(1 << 22) + 5, S_LUT_LO_START_LOW=1 << 20,
              S_LUT_LE_SLOPE_SCALE=1)  # fmt: skip
    p_rtl, p_cmod = decode_cdp_lut(v, "rtl"), decode_cdp_lut(v, "cmod")
    assert p_rtl.le_start == p_cmod.le_start == (1 << 22) + 5
    _, _, les, _ = cdp_lut(np.array([10]), LE_RAMP, LO_RAMP, p_rtl, "rtl")
    assert les.tolist() == [HIT]  # d = 10 - 5 = 5 -> T[5]
    r, _, les, _ = cdp_lut(np.array([10]), LE_RAMP, LO_RAMP, p_cmod, "cmod")
    assert les.tolist() == [UF] and r.tolist() == [-32768]  # 10 - (2^22 + 5) clamps
    # sign of the 22-bit field: START = 2^21 reads as -2^21 in the RTL compare
    p = LutParams(le_function="linear", le_start=1 << 21, lo_start=1 << 20)
    _, _, les, _ = cdp_lut(np.array([0]), LE_RAMP, LO_RAMP, p, "rtl")
    assert les.tolist() == [OF]  # d = 2^21 -> i = 2^21 >= 64
    _, _, les, _ = cdp_lut(np.array([0]), LE_RAMP, LO_RAMP, p, "cmod")
    assert les.tolist() == [UF]


def test_diff_lo_select_minus_32():
    # RTL: 5-bit |sel| wraps to 0 -> i = d; cmod: i = d << 32 -> OF
    # (LE underflows; cmod's LE UF + LO OF is hybrid, HYBRID_PRIORITY = LO)
    v = _view(S_LUT_INFO=0x20 << 16, S_LUT_LE_START_LOW=1 << 20, S_LUT_CFG=0x40)
    for sem, state, value in (("rtl", HIT, -100), ("cmod", OF, -2560)):
        p = decode_cdp_lut(v, sem)
        assert p.lo_index_select == -32
        r, _, _, los = cdp_lut(np.array([10]), LE_RAMP, LO_RAMP, p, sem)
        assert los.tolist() == [state] and r.tolist() == [value]
    # the LE path has a 6-bit |sel|: -32 shifts left by 32 in both
    p = LutParams(le_function="linear", le_index_select=-32, lo_start=1 << 20)
    for sem in ("rtl", "cmod"):
        _, _, les, _ = cdp_lut(np.array([1]), LE_RAMP, LO_RAMP, p, sem)
        assert les.tolist() == [OF]


def test_diff_exponent_uflow_anchor_wraps_at_39_bits_in_rtl():
    # eo = 38: RTL anchor = sx(start + 2^38, 39) = start - 2^38; cmod: start + 2^38
    p = LutParams(le_start=0, le_index_offset=38, le_slope_uflow_scale=1, lo_start=1 << 20)
    r_rtl, *_ = cdp_lut(np.array([5]), np.zeros(65), LO_RAMP, p, "rtl")
    r_cmod, *_ = cdp_lut(np.array([5]), np.zeros(65), LO_RAMP, p, "cmod")
    assert r_rtl.tolist() == [32767] and r_cmod.tolist() == [-32768]


def test_diff_out_saturation_counter():
    # SQSUM and MUL bypassed, LUT constant 200 (both UF): v = 200 -> int8 saturates to 127
    le = np.full(65, 200)
    cfg = CdpConfig(sqsum_bypass=True, mul_bypass=True)
    p = LutParams(le_start=1 << 20, lo_start=1 << 20)
    x = np.zeros((1, 1, 8), np.int8)
    for sem, nsat in (("rtl", 0), ("cmod", 8)):
        out, stats, n = cdp_lrn(x, 8, cfg, le, LO_RAMP, p, sem)
        assert out.tolist() == [[[127] * 8]] and n == nsat and stats.uflow == 8


def test_diff_out_saturation_flag_boundary():
    # cmod flag: |floor - out| > 1 only. v = 255, shift 1 -> 127.5 rounds to 128 -> 127:
    # floor 127 == max: cmod does not flag (|127-127| = 0)
    le = np.full(65, 255)
    cfg = CdpConfig(sqsum_bypass=True, mul_bypass=True, datout_shifter=1)
    p = LutParams(le_start=1 << 20, lo_start=1 << 20)
    out, _, n = cdp_lrn(np.zeros((1, 8), np.int8), 8, cfg, le, LO_RAMP, p, "cmod")
    assert out.tolist() == [[127] * 8] and n == 0
    le = np.full(65, 259)  # 129.5 -> floor 129: |129 - 127| = 2 -> flagged
    out, _, n = cdp_lrn(np.zeros((1, 8), np.int8), 8, cfg, le, LO_RAMP, p, "cmod")
    assert n == 8


# ---------------------------------------------------------------------------------------
# Datapath: converters, window, padding lanes
# ---------------------------------------------------------------------------------------


def test_input_converter_and_square_sum_window():
    # DATIN: (b - 2) * 3 >> 1 ; channels 0..2 = 4, 6, -8 -> x9 = 3, 6, -15
    # window 3 at c=1: 9 + 36 + 225 = 270 ; LUT: LE linear start 0 sel 0 -> index 270 OF,
    # LO linear start 0 sel 1 -> i = 135, frac 0 -> -1350 ; MUL: -1350 * 6 = -8100
    # DATOUT: (-8100 - (-100)) * 1 >> 6 = -125
    cfg = CdpConfig(datin_offset=2, datin_scale=3, datin_shifter=1, datout_offset=-100, datout_shifter=6)
    p = LutParams(le_function="linear", le_start=0, lo_start=0, lo_index_select=1, lo_end=512)
    x = np.array([[4, 6, -8, 0, 0, 0, 0, 0]], np.int8)
    out, stats, _ = cdp_lrn(x, 3, cfg, LE_RAMP, LO_RAMP, p)
    assert out[0, 1] == -125
    # padding lanes 3..7: x9 = 0 -> product 0 -> (0 + 100) >> 6 = 2 (rounded 1.5625 -> 2)
    assert out[0, 3:].tolist() == [2] * 5
    # every lane is counted, padding included
    assert stats.le_hit + stats.lo_hit + stats.uflow + stats.oflow + stats.hybrid == 8


def test_run_cdp_layout_and_stats():
    # 2x3 cube, 10 channels (2 groups, 6 padding lanes); strides with gaps
    v = RegView()
    for reg, val in {"D_DATA_CUBE_WIDTH": 1, "D_DATA_CUBE_HEIGHT": 2, "D_DATA_CUBE_CHANNEL": 9,
                         "D_SRC_BASE_ADDR_LOW": 0x1000, "D_SRC_LINE_STRIDE": 0x20,
                         "D_SRC_SURFACE_STRIDE": 0x100}.items():  # fmt: skip
        v.set("CDP_RDMA", reg, val)
    for reg, val in {"D_DST_BASE_ADDR_LOW": 0x8000, "D_DST_LINE_STRIDE": 0x40, "D_DST_SURFACE_STRIDE": 0x200,
                         "D_FUNC_BYPASS": 3, "D_DATOUT_SCALE": 1, "D_DATIN_SCALE": 1,
                         "S_LUT_CFG": 1, "S_LUT_LO_START_LOW": 1 << 20,
                         "D_DATA_FORMAT": 0}.items():  # fmt: skip  (INT8; reset is INT16)
        v.set("CDP", reg, val)
    v.luts["LE"][:] = np.arange(65) * 2  # LE linear start 0 sel 0: s -> 2 s
    mem = SparseMemory()
    rng = np.random.default_rng(1)
    cube = rng.integers(-30, 30, size=(3, 2, 10))  # h, w, c
    for c in range(10):
        for y in range(3):
            for x in range(2):
                mem.write(0x1000 + (c // 8) * 0x100 + y * 0x20 + x * 8 + c % 8, np.array([cube[y, x, c]], np.int8).view(np.uint8))
    res = run_cdp(v, mem, ModelOptions())
    for g in range(2):
        for y in range(3):
            for x in range(2):
                got = mem.read(0x8000 + g * 0x200 + y * 0x40 + x * 8, 8).view(np.int8)
                for lane in range(8):
                    c = g * 8 + lane
                    xin = int(cube[y, x, c]) if c < 10 else 0
                    if xin > 0:
                        expect = min(2 * xin, 127)  # LE hit (index xin), value 2 * xin
                    else:
                        expect = 0  # LE and LO UF, T[0] = 0, slopes 0
                    assert got[lane] == expect, (g, y, x, lane)
    n = 2 * 3 * 16
    st_ = res.stats
    assert sum(st_[("CDP", k)] for k in ("D_PERF_LUT_LE_HIT", "D_PERF_LUT_LO_HIT", "D_PERF_LUT_UFLOW",
                                         "D_PERF_LUT_OFLOW", "D_PERF_LUT_HYBRID")) == n  # fmt: skip
    assert st_[("CDP", "D_PERF_LUT_LE_HIT")] == int((cube > 0).sum())
    assert st_[("CDP", "D_OUT_SATURATION")] == 0
    # nothing written between lines / outside the cube
    assert not mem.read(0x8000 + 16, 0x40 - 16).any()


@pytest.mark.parametrize("fmt", [3])  # INT16 and FP16 are modelled (test_int16_datapaths.py, test_cdp_fp16.py)
def test_run_cdp_rejects_an_undefined_data_format(fmt):
    v = RegView()
    v.set("CDP", "D_DATA_FORMAT", fmt)
    v.set("CDP_RDMA", "D_DATA_FORMAT", fmt)
    with pytest.raises(UnitNotModelled, match="CDP"):
        run_cdp(v, SparseMemory(), ModelOptions())


# ---------------------------------------------------------------------------------------
# Independent scalar reference (Python ints, written from the spec text) + properties
# ---------------------------------------------------------------------------------------


def _sxi(v: int, n: int) -> int:
    v &= (1 << n) - 1
    return v - (1 << n) if v >> (n - 1) else v


def _rnd(v: int, s: int) -> int:
    if s == 0:
        return v
    q, r = divmod(v, 1 << s)
    h = 1 << (s - 1)
    return q + (1 if r > h or (r == h and v >= 0) else 0)


def _clampi(v: int, n: int) -> int:
    return max(-(1 << (n - 1)), min((1 << (n - 1)) - 1, v))


def _sshift(v: int, s: int, n: int) -> int:
    return _clampi(_rnd(v, s), n) if s >= 0 else _clampi(v << -s, n)


def _ref_table(s, T, start, end, exp, eo, sel, us, ush, os_, osh, sem, is_lo):
    depth = len(T)
    cmpstart = _sxi(start, 22) if sem == "rtl" else start
    state = None
    if s <= cmpstart:
        state = "UF"
    else:
        d = s - cmpstart
        if exp:
            k = d.bit_length() - 1
            if k < eo:
                state = "UF"
            else:
                i, f = k - eo, ((d - (1 << k)) << 16) >> k
        elif sel < 0:
            a = -sel
            if sem == "rtl" and is_lo:
                a %= 32
            i, f = d << a, 0
        else:
            i, f = d >> sel, ((d % (1 << sel)) << 16) >> sel
        if state is None:
            state = "OF" if i >= depth - 1 else "HIT"
    if state == "HIT":
        return _clampi(T[i] + _rnd((T[i + 1] - T[i]) * f, 16), 16), state
    if state == "UF":
        anchor = start
        if exp and eo >= 0 and sem == "cmod":
            # NV_NVDLA_cdp.cpp: (square_sum - raw_start - ((int64_t)1 << eo)) * slope in int64,
            # wrapping as x86-64 does ([DIFF], refmodel/cdp.py)
            prod = _sxi(_sxi(s - start - (1 << (eo & 63)), 64) * us, 64)
            return _clampi(T[0] + _sshift(prod, ush, 56), 16), state
        if exp and eo >= 0:
            anchor = start + (1 << eo)
            if sem == "rtl":
                anchor = _sxi(anchor, 39)
        return _clampi(T[0] + _sshift((s - anchor) * us, ush, 56), 16), state
    return _clampi(T[-1] + _sshift((s - end) * os_, osh, 56), 16), state


def _ref_lut(s, le, lo, p: LutParams, sem):
    lv, ls = _ref_table(s, le, p.le_start, p.le_end, p.le_function == "exponent", p.le_index_offset,
                        p.le_index_select, p.le_slope_uflow_scale, p.le_slope_uflow_shift,
                        p.le_slope_oflow_scale, p.le_slope_oflow_shift, sem, False)  # fmt: skip
    ov, os_ = _ref_table(s, lo, p.lo_start, p.lo_end, False, 0, p.lo_index_select,
                         p.lo_slope_uflow_scale, p.lo_slope_uflow_shift,
                         p.lo_slope_oflow_scale, p.lo_slope_oflow_shift, sem, True)  # fmt: skip
    pick = lambda pr: ov if pr == "LO" else lv
    if ls == os_ == "UF":
        return pick(p.uflow_priority), "uflow"
    if ls == os_ == "OF":
        return pick(p.oflow_priority), "oflow"
    if (ls == "HIT") != (os_ == "HIT"):
        return (lv, "le_hit") if ls == "HIT" else (ov, "lo_hit")
    return pick(p.hybrid_priority), "hybrid"


def _ref_lrn(x, channels, cfg: CdpConfig, le, lo, p, sem):
    """x: list of per-position channel lists (Cp lanes)."""
    outs, counts, nsat = [], {}, 0
    for lanes in x:
        x9 = [
            _clampi(_rnd((b - cfg.datin_offset) * cfg.datin_scale, cfg.datin_shifter), 9) if c < channels else 0
            for c, b in enumerate(lanes)
        ]
        row = []
        for c in range(len(lanes)):
            if cfg.sqsum_bypass:
                s = x9[c]
            else:
                n = cfg.normalz_len + 1
                s = sum(x9[j] ** 2 for j in range(c - n, c + n + 1) if 0 <= j < len(lanes))
            r, cat = _ref_lut(s, le, lo, p, sem)
            counts[cat] = counts.get(cat, 0) + 1
            v = r if cfg.mul_bypass else r * x9[c]
            t = (v - cfg.datout_offset) * cfg.datout_scale
            sh = cfg.datout_shifter
            o = _clampi(_rnd(t, sh), 8)
            fl = t >> sh
            if sem == "cmod" and abs(fl - o) > 1:
                nsat += 1
            row.append(o)
        outs.append(row)
    return outs, counts, nsat


i16 = st.integers(-32768, 32767)


def _tables(seed: int) -> tuple[list[int], list[int]]:
    """Random LE/LO contents (drawing 322 entries through hypothesis is slow)."""
    rng = np.random.default_rng(seed)
    return rng.integers(-32768, 32768, 65).tolist(), rng.integers(-32768, 32768, 257).tolist()


@st.composite
def lut_params(draw, sem):
    eo_hi = 62 if sem == "cmod" else 127
    start = st.one_of(st.integers(-300, 3000), st.integers(-(1 << 24), 1 << 24), st.integers(-(1 << 37), (1 << 37) - 1))
    sel_byte = draw(st.integers(0, 255))
    lo_byte = draw(st.integers(0, 255))
    sel = lambda b: (b if sem == "cmod" and not b & 0x20 else _sxi(b & 0x3F, 6))
    return LutParams(
        le_function=draw(st.sampled_from(["exponent", "linear"])),
        le_index_offset=draw(st.integers(-128, eo_hi)),
        le_index_select=sel(sel_byte),
        lo_index_select=sel(lo_byte),
        le_start=draw(start), le_end=draw(start), lo_start=draw(start), lo_end=draw(start),
        le_slope_uflow_scale=draw(i16), le_slope_oflow_scale=draw(i16),
        lo_slope_uflow_scale=draw(i16), lo_slope_oflow_scale=draw(i16),
        le_slope_uflow_shift=draw(st.integers(-16, 15)), le_slope_oflow_shift=draw(st.integers(-16, 15)),
        lo_slope_uflow_shift=draw(st.integers(-16, 15)), lo_slope_oflow_shift=draw(st.integers(-16, 15)),
        uflow_priority=draw(st.sampled_from(["LE", "LO"])),
        oflow_priority=draw(st.sampled_from(["LE", "LO"])),
        hybrid_priority=draw(st.sampled_from(["LE", "LO"])),
    )  # fmt: skip


@pytest.mark.parametrize("sem", ["rtl", "cmod"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_property_lut_matches_scalar_reference(sem, data):
    p = data.draw(lut_params(sem))
    le, lo = _tables(data.draw(st.integers(0, 2**32 - 1)))
    s = data.draw(st.lists(st.one_of(st.integers(-256, 600000), st.integers(-5, 300)), min_size=1, max_size=40))
    r, stats, _, _ = cdp_lut(np.array(s, np.int64), np.array(le), np.array(lo), p, sem)
    counts: dict[str, int] = {}
    for k, sv in enumerate(s):
        v, cat = _ref_lut(sv, le, lo, p, sem)
        counts[cat] = counts.get(cat, 0) + 1
        assert r[k] == v, (sv, cat)
    for cat in ("le_hit", "lo_hit", "uflow", "oflow", "hybrid"):
        assert getattr(stats, cat) == counts.get(cat, 0)


@pytest.mark.parametrize("sem", ["rtl", "cmod"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_property_lrn_matches_scalar_reference(sem, data):
    p = data.draw(lut_params(sem))
    cfg = CdpConfig(
        normalz_len=data.draw(st.integers(0, 3)),
        sqsum_bypass=data.draw(st.booleans()),
        mul_bypass=data.draw(st.booleans()),
        datin_offset=data.draw(st.integers(-128, 127)),
        datin_scale=data.draw(i16),
        datin_shifter=data.draw(st.integers(0, 31)),
        datout_offset=data.draw(st.integers(-(1 << 24), (1 << 24) - 1)),
        datout_scale=data.draw(i16),
        datout_shifter=data.draw(st.integers(0, 63)),
    )
    le, lo = _tables(data.draw(st.integers(0, 2**32 - 1)))
    groups = data.draw(st.integers(1, 3))
    channels = data.draw(st.integers(1, 8 * groups))
    npos = data.draw(st.integers(1, 4))
    x = data.draw(st.lists(st.lists(st.integers(-128, 127), min_size=8 * groups, max_size=8 * groups),
                           min_size=npos, max_size=npos))  # fmt: skip
    out, stats, nsat = cdp_lrn(np.array(x, np.int8), channels, cfg, np.array(le), np.array(lo), p, sem)
    ref, counts, rsat_n = _ref_lrn(x, channels, cfg, le, lo, p, sem)
    assert out.tolist() == ref
    assert nsat == rsat_n
    for cat in ("le_hit", "lo_hit", "uflow", "oflow", "hybrid"):
        assert getattr(stats, cat) == counts.get(cat, 0)


# ---------------------------------------------------------------------------------------
# NVDLA trace tests
# ---------------------------------------------------------------------------------------

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cdp_trace" in metafunc.fixturenames:
        metafunc.parametrize("cdp_trace", trace_names(metafunc.config, "cdp_"))


@pytest.mark.parametrize("sem", ["rtl", "cmod"])
def test_trace_crc(trace_root, cdp_trace, sem):
    if cdp_trace is None:
        pytest.skip(f"no CDP traces in {trace_root}")
    with run_on_model(trace_root / cdp_trace, sem) as (res, t):
        assert res.checks and [u for u, _, _ in t.layers_run] == ["CDP"], res.summary()
        assert res.passed, res.summary()


def test_trace_counters_worked_example(trace_root):
    # docs section 6.8: 133 hybrid, 1915 LE-only hits; 2014 of 2048 outputs saturate (cmod count)
    path = trace_root / "cdp_8x8x32_lrn3_int8_2"
    with run_on_model(path, "cmod") as (res, t):
        assert res.passed, res.summary()
        _, group, layer = t.layers_run[-1]
        st_ = layer.stats
        assert st_[("CDP", "D_PERF_LUT_HYBRID")] == 133
        assert st_[("CDP", "D_PERF_LUT_LE_HIT")] == 1915
        assert st_[("CDP", "D_OUT_SATURATION")] == 2014
        # the same values reach the group's statistics registers
        regs = NvdlaDriver(t).precision.read_statistics("CDP", group)
        assert (regs.lut_hybrid, regs.lut_le_hit, regs.out_saturation) == (133, 1915, 2014)
    with run_on_model(path, "rtl") as (res, t):
        assert res.passed, res.summary()
        _, group, layer = t.layers_run[-1]
        assert layer.stats[("CDP", "D_OUT_SATURATION")] == 0
        assert NvdlaDriver(t).precision.read_statistics("CDP", group).out_saturation == 0


def test_region_crc_matches_the_traces_documented_crc():
    """0x800 zero bytes in memory, read back through the trace player's CRC check: the CRC NVDLA's
    trace cdp_8x8x32_lrn3_int8_0 checks for its 0x800 bytes at 0x80080000 (its cfg line 454:
    0xf1e8ba9e, all zero there); one byte changed changes it."""
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.traces.checks import region_crc

    with ModelTarget("nv_small") as t:
        t.mem_write(0x80000000, np.zeros(0x800, np.uint8))
        assert region_crc(t, "pri_mem", 0x80000000, 0x800) == 0xF1E8BA9E
        t.mem_write(0x80000400, np.ones(1, np.uint8))
        assert region_crc(t, "pri_mem", 0x80000000, 0x800) != 0xF1E8BA9E
