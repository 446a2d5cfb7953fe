"""SDP LUT (docs/nvdla-precision-semantics.md section 5): hand-worked cases for every
hit/miss combination and priority, tie rounding, extrapolation, extremes, the [DIFF]s of
5.2 and 5.5, and a hypothesis comparison against a slow scalar re-implementation written
here from the doc's rules (Python integers, no numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from _regview import RegView
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nvdla_hil.harness.refmodel.lut import (
    KIND_HIT,
    KIND_OF,
    KIND_UF,
    LutParams,
    decode_sdp_lut_params,
    lut_stats,
    sdp_lut,
)

LE_RAMP = (np.arange(65) * 100).astype(np.uint16)  # LE[i] = 100 i
LO_RAMP = (np.arange(257) * 10).astype(np.uint16)  # LO[i] = 10 i
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def run1(x: int, p: LutParams, le=LE_RAMP, lo=LO_RAMP, semantics="rtl"):
    y, hle, hlo, kind = sdp_lut(np.array([x], dtype=np.int64), p, le, lo, semantics)
    return int(y[0]), bool(hle[0]), bool(hlo[0]), int(kind[0])


# LO far away (always UF) so that the LE table decides, and the reverse
LO_OFF = {"lo_start": I32_MAX, "lo_index_select": 0}
LE_OFF = {"le_function": "linear", "le_start": I32_MAX, "le_index_select": 0}


# ---------------------------------------------------------------- hand-worked hits


def test_le_exponent_hit_interpolates_with_35bit_fraction():
    # start 0, eo 0: x=5 -> d=5, k=2, i=2, f=(5-4)/4 -> 200*3/4 + 300/4 = 225
    p = LutParams(le_function="exponent", le_start=0, le_index_offset=0, **LO_OFF)
    assert run1(5, p) == (225, True, False, KIND_HIT)
    # eo=-3 shifts the index: x=5 -> k=2, i=5, f=1/4 -> 500*3/4 + 600/4 = 525
    p = LutParams(le_function="exponent", le_start=0, le_index_offset=-3, **LO_OFF)
    assert run1(5, p) == (525, True, False, KIND_HIT)
    # exact power of two: f=0, value is LE[i]; x = start + 8 -> k=3 -> LE[3]
    p = LutParams(le_function="exponent", le_start=-10, le_index_offset=0, **LO_OFF)
    assert run1(-2, p)[0] == 300


def test_lo_linear_hit_and_tie_rounding_away_from_zero():
    lo = np.zeros(257, np.int64)
    lo[1] = 3
    lo[3] = -3
    lo = lo.astype(np.uint16)
    p = LutParams(lo_start=0, lo_index_select=1, **LE_OFF)
    # x=1: i=0, f=1/2 -> (0 + 3)/2 = 1.5 -> 2
    assert run1(1, p, lo=lo) == (2, False, True, KIND_HIT)
    # x=5: i=2, f=1/2 -> (0 - 3)/2 = -1.5 -> -2 (tie away from zero)
    assert run1(5, p, lo=lo)[0] == -2
    # x=3: i=1, f=1/2 -> (3 + 0)/2 -> 2 ; x=2: i=1, f=0 -> 3
    assert run1(3, p, lo=lo)[0] == 2
    assert run1(2, p, lo=lo)[0] == 3


def test_linear_negative_select_multiplies_index_and_has_no_fraction():
    p = LutParams(lo_start=0, lo_index_select=-2, **LE_OFF)
    # x=3: i = 3*4 = 12 -> LO[12] = 120
    assert run1(3, p) == (120, False, True, KIND_HIT)
    # x=64: i=256 -> LO OF; LE UF -> "one UF, one OF" -> hybrid priority decides
    assert run1(64, p)[3] == KIND_UF
    assert run1(64, LutParams(**{**p.__dict__, "hybrid_priority": "LO"}))[3] == KIND_OF


def test_le_linear_hit():
    p = LutParams(le_function="linear", le_start=100, le_index_select=2, **LO_OFF)
    # x=107: d=7, i=1, f=3/4 -> 100/4 + 200*3/4 = 175
    assert run1(107, p) == (175, True, False, KIND_HIT)


# ---------------------------------------------------------------- misses / extrapolation


def test_underflow_on_equality_and_below():
    p = LutParams(le_function="linear", le_start=10, le_index_select=0, lo_start=10,
                  le_slope_uflow_scale=1, uflow_priority="LE")
    # x == start counts as underflow (LE[0] = 0, anchor start, slope 1)
    assert run1(10, p) == (0, False, False, KIND_UF)
    assert run1(7, p) == (-3, False, False, KIND_UF)


def test_exponent_underflow_when_log_below_offset():
    p = LutParams(le_function="exponent", le_start=0, le_index_offset=3, le_slope_uflow_scale=2,
                  le_slope_uflow_shift=0, **LO_OFF)
    # x=5: k=2 < eo=3 -> LE UF; LO UF as well -> uflow priority LE
    # RTL anchor = start + 2^eo = 8: y = LE[0] + (5-8)*2 = -6
    assert run1(5, p) == (-6, False, False, KIND_UF)


def test_overflow_extrapolation_exponent_and_linear():
    p = LutParams(le_function="exponent", le_start=0, le_index_offset=-40, le_end=1000,
                  le_slope_oflow_scale=3, le_slope_oflow_shift=1, oflow_priority="LE",
                  lo_start=0, lo_index_select=-10)
    # x = 2^24: k=24, i=64 -> LE OF; LO: i = 2^34 -> OF: both OF, priority LE
    # y = LE[64] + rnd((2^24 - 1000) * 3, 1)
    x = 1 << 24
    assert run1(x, p) == (6400 + (x - 1000) * 3 // 2, False, False, KIND_OF)
    p2 = LutParams(**{**p.__dict__, "oflow_priority": "LO", "lo_end": 5, "lo_slope_oflow_scale": -1,
                      "lo_slope_oflow_shift": -2})
    # LO: y = LO[256] + ((x - 5) * -1) << 2
    assert run1(x, p2) == (2560 - (x - 5) * 4, False, False, KIND_OF)


def test_extrapolation_saturates_and_rounds():
    p = LutParams(le_function="linear", le_start=I32_MAX, le_index_select=0,
                  lo_start=I32_MAX, lo_slope_uflow_scale=-32768, lo_slope_uflow_shift=-16,
                  uflow_priority="LO")
    # (INT32_MIN - INT32_MAX) * -32768 << 16 saturates to INT32_MAX; + LO[0]=0 stays
    assert run1(I32_MIN, p)[0] == I32_MAX
    p = LutParams(**{**p.__dict__, "lo_slope_uflow_scale": 32767})
    assert run1(I32_MIN, p)[0] == I32_MIN
    # rounding of the slope shift: (x - start) * 1 >> 1 with x - start = -3 -> -1.5 -> -2
    lo = np.zeros(257, np.uint16)
    p = LutParams(le_function="linear", le_start=100, lo_start=100, lo_slope_uflow_scale=1,
                  lo_slope_uflow_shift=1, uflow_priority="LO")
    assert run1(97, p, lo=lo)[0] == -2
    # -1 * 1 >> 1 = -0.5 -> -1 (away from zero)
    assert run1(99, p, lo=lo)[0] == -1


def test_edge_value_plus_extrapolation_saturates_to_32_bits():
    le = LE_RAMP.copy()
    le[64] = 0x7FFF
    p = LutParams(le_function="linear", le_start=0, le_index_select=0, le_end=0,
                  le_slope_oflow_scale=32767, le_slope_oflow_shift=-16, **LO_OFF)
    # LE OF, LO UF -> miss both -> hybrid priority LE: y = sat32(32767 + big) = INT32_MAX
    assert run1(I32_MAX, p, le=le)[0] == I32_MAX


# ---------------------------------------------------------------- selection / priorities


@pytest.mark.parametrize("prio", ["LE", "LO"])
def test_selection_all_five_cases(prio):
    lo = np.full(257, 7, np.uint16)
    le = np.full(65, 5, np.uint16)
    # LE linear start 0 sel 0 (hit for 1..63), LO linear start 0 sel 0 (hit for 1..255)
    base = {"le_function": "linear", "le_start": 0, "le_index_select": 0, "lo_start": 0, "lo_index_select": 0,
                "le_end": 0, "lo_end": 0}
    pr = {"uflow_priority": prio, "oflow_priority": prio, "hybrid_priority": prio}
    p = LutParams(**base, **pr)
    want = 7 if prio == "LO" else 5
    # 1. both UF
    assert run1(0, p, le, lo) == (want, False, False, KIND_UF)
    # 2. both OF (x >= 256): slopes 0 -> edge values
    assert run1(1000, p, le, lo) == (want, False, False, KIND_OF)
    # 3. both HIT -> hybrid priority
    assert run1(10, p, le, lo) == (want, True, True, KIND_HIT)
    # 5. exactly one HIT (LE OF at 64, LO hit) -> LO regardless of priority
    assert run1(100, p, le, lo) == (7, False, True, KIND_HIT)
    # 4. one UF and the other OF: LE start high (UF), LO OF -> hybrid priority, kind of that table
    p4 = LutParams(**{**base, "le_start": 5000}, **pr)
    assert run1(1000, p4, le, lo) == (want, False, False, KIND_OF if prio == "LO" else KIND_UF)
    # 5'. LE hit, LO UF -> LE
    p5 = LutParams(**{**base, "lo_start": 50}, **pr)
    assert run1(10, p5, le, lo) == (5, True, False, KIND_HIT)


def test_counters_count_raw_hits_and_selected_kinds():
    p = LutParams(le_function="linear", le_start=0, le_index_select=0, lo_start=0, lo_index_select=0)
    x = np.array([0, -5, 10, 20, 100, 1000, 64])
    _, hle, hlo, kind = sdp_lut(x, p, LE_RAMP, LO_RAMP)
    s = lut_stats(hle, hlo, kind)
    # 0,-5: both UF; 10,20: both hit; 100, 64: LO hit only; 1000: both OF
    assert (s.uflow, s.oflow, s.hybrid, s.le_hit, s.lo_hit) == (2, 1, 4, 2, 4)
    assert s.uflow + s.oflow + s.hybrid == x.size


# ---------------------------------------------------------------- [DIFF]s


def test_diff_5_5_underflow_bias_for_zero_index_offset():
    p = LutParams(le_function="exponent", le_start=100, le_index_offset=0, le_slope_uflow_scale=1,
                  **LO_OFF)
    # x=90 <= start: LE UF. RTL anchor = start + 1, cmod anchor = start
    assert run1(90, p, semantics="rtl")[0] == -11
    assert run1(90, p, semantics="cmod")[0] == -10
    # eo > 0: both use start + 2^eo; eo < 0: both use start
    p = LutParams(**{**p.__dict__, "le_index_offset": 2})
    assert run1(90, p, semantics="rtl")[0] == run1(90, p, semantics="cmod")[0] == -14
    p = LutParams(**{**p.__dict__, "le_index_offset": -2})
    assert run1(90, p, semantics="rtl")[0] == run1(90, p, semantics="cmod")[0] == -10


def test_diff_5_2_le_linear_fraction_signed_temporary():
    le = np.zeros(65, np.uint16)
    le[1] = 400
    p = LutParams(le_function="linear", le_start=I32_MIN, le_index_select=33, **LO_OFF)
    # x=0: d=2^31, i=0. RTL f = 4d = 2^33 (1/4) -> 100. cmod: sign bits leak -> f = 3/4 -> 300
    assert run1(0, p, le=le, semantics="rtl")[0] == 100
    assert run1(0, p, le=le, semantics="cmod")[0] == 300
    # d < 2^31: identical. x=-1: d = 2^31-1, i = 0, f = 4d = 2^33-4: rnd(400 * (2^33-4) / 2^35) = 100
    assert run1(-1, p, le=le, semantics="rtl")[0] == run1(-1, p, le=le, semantics="cmod")[0] == 100


# ---------------------------------------------------------------- register decoding


def test_decode_sdp_lut_params_signedness():
    v = RegView()
    v.regs[("SDP", "S_LUT_CFG")] = 0x50  # LE exponent, UF prio LO, OF prio LE, hybrid LO
    v.regs[("SDP", "S_LUT_INFO")] = 0x100C1  # eo=-63, es=0, os=1 (doc 5.7)
    v.regs[("SDP", "S_LUT_LO_START")] = 0xFFFFFFFE
    v.regs[("SDP", "S_LUT_LE_SLOPE_SCALE")] = 0x8000_0001
    v.regs[("SDP", "S_LUT_LE_SLOPE_SHIFT")] = (0x10 << 5) | 0x0F
    p = decode_sdp_lut_params(v)
    assert (p.le_function, p.uflow_priority, p.oflow_priority, p.hybrid_priority) == ("exponent", "LO", "LE", "LO")
    assert (p.le_index_offset, p.le_index_select, p.lo_index_select) == (-63, 0, 1)
    assert p.lo_start == -2
    assert (p.le_slope_uflow_scale, p.le_slope_oflow_scale) == (1, -32768)
    assert (p.le_slope_uflow_shift, p.le_slope_oflow_shift) == (15, -16)


# ---------------------------------------------------------------- independent scalar model


def _rnd(v: int, s: int) -> int:
    if s == 0:
        return v
    q, r = v >> s, v & ((1 << s) - 1)
    half = 1 << (s - 1)
    return q + (1 if r > half or (r == half and v >= 0) else 0)


def _sat(v: int, n: int = 32) -> int:
    return max(-(1 << (n - 1)), min((1 << (n - 1)) - 1, v))


def _table(x, start, mode, sel, eo, depth, cmod_le):
    """(kind, index, fraction) for one table, from doc 5.2."""
    if x <= start:
        return "UF", 0, 0
    d = x - start
    if mode == "exp":
        k = d.bit_length() - 1
        if k < eo:
            return "UF", 0, 0
        i = k - eo
        if i >= depth - 1:
            return "OF", depth - 1, 0
        return "HIT", i, (d - 2**k) * 2 ** (35 - k)
    i = d // 2**sel if sel >= 0 else d * 2 ** (-sel)
    i = min(i, 511)
    if i >= depth - 1:
        return "OF", depth - 1, 0
    if sel < 0:
        f = 0
    else:
        part = d % 2**sel
        if cmod_le and sel >= 32 and part >= 2**31:
            part = (part - 2**32) % 2**35
        f = (part * 2 ** (35 - sel)) % 2**35 if sel <= 35 else part // 2 ** (sel - 35)
    return "HIT", i, f


def scalar_lut(x: int, p: LutParams, le: list[int], lo: list[int], sem: str):
    le_mode = "exp" if p.le_function == "exponent" else "lin"
    kle, ile, fle = _table(x, p.le_start, le_mode, p.le_index_select, p.le_index_offset, 65, sem == "cmod")
    klo, ilo, flo = _table(x, p.lo_start, "lin", p.lo_index_select, 0, 257, False)
    if kle == "UF" and klo == "UF":
        t = p.uflow_priority
    elif kle == "OF" and klo == "OF":
        t = p.oflow_priority
    elif (kle == "HIT") == (klo == "HIT"):
        t = p.hybrid_priority
    else:
        t = "LE" if kle == "HIT" else "LO"
    kind, i, f, tab = (kle, ile, fle, le) if t == "LE" else (klo, ilo, flo, lo)
    if kind == "HIT":
        y = _sat(_rnd(tab[i] * (2**35 - f) + tab[i + 1] * f, 35))
    else:
        eo = p.le_index_offset
        if t == "LE" and kind == "UF":
            bias = 0
            if le_mode == "exp" and sem == "rtl" and 0 <= eo < 32:
                bias = 2**eo
            elif le_mode == "exp" and sem == "cmod" and eo > 0:
                bias = 2 ** (eo % 32)  # C model on x86-64: its undefined 32-bit shift takes the count mod 32
            anchor, sc, sh, y0 = p.le_start + bias, p.le_slope_uflow_scale, p.le_slope_uflow_shift, tab[0]
        elif t == "LE":
            anchor, sc, sh, y0 = p.le_end, p.le_slope_oflow_scale, p.le_slope_oflow_shift, tab[64]
        elif kind == "UF":
            anchor, sc, sh, y0 = p.lo_start, p.lo_slope_uflow_scale, p.lo_slope_uflow_shift, tab[0]
        else:
            anchor, sc, sh, y0 = p.lo_end, p.lo_slope_oflow_scale, p.lo_slope_oflow_shift, tab[256]
        v = (x - anchor) * sc
        e = _sat(_rnd(v, sh)) if sh >= 0 else _sat(v * 2 ** (-sh))
        y = _sat(y0 + e)
    return y, kle == "HIT", klo == "HIT", {"HIT": KIND_HIT, "UF": KIND_UF, "OF": KIND_OF}[kind]


i32 = st.integers(I32_MIN, I32_MAX)
s16 = st.integers(-32768, 32767)
sh5 = st.integers(-16, 15)
prio = st.sampled_from(["LE", "LO"])


@st.composite
def lut_params(draw):
    return LutParams(
        le_function=draw(st.sampled_from(["exponent", "linear"])),
        le_index_offset=draw(st.integers(-128, 127) | st.integers(-40, 40)),
        le_index_select=draw(st.integers(-128, 127) | st.integers(-8, 40)),
        lo_index_select=draw(st.integers(-128, 127) | st.integers(-8, 40)),
        le_start=draw(i32 | st.integers(-300, 300)),
        le_end=draw(i32),
        lo_start=draw(i32 | st.integers(-300, 300)),
        lo_end=draw(i32),
        le_slope_uflow_scale=draw(s16),
        le_slope_uflow_shift=draw(sh5),
        le_slope_oflow_scale=draw(s16),
        le_slope_oflow_shift=draw(sh5),
        lo_slope_uflow_scale=draw(s16),
        lo_slope_uflow_shift=draw(sh5),
        lo_slope_oflow_scale=draw(s16),
        lo_slope_oflow_shift=draw(sh5),
        uflow_priority=draw(prio),
        oflow_priority=draw(prio),
        hybrid_priority=draw(prio),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p=lut_params(),
    xs=st.lists(i32 | st.integers(-2000, 2000), min_size=1, max_size=40),
    le=st.lists(s16, min_size=65, max_size=65),
    lo=st.lists(s16, min_size=257, max_size=257),
    sem=st.sampled_from(["rtl", "cmod"]),
)
def test_vectorised_lut_matches_scalar_model(p, xs, le, lo, sem):
    le_u = np.array(le, dtype=np.int64).astype(np.uint16)
    lo_u = np.array(lo, dtype=np.int64).astype(np.uint16)
    y, hle, hlo, kind = sdp_lut(np.array(xs, dtype=np.int64), p, le_u, lo_u, sem)
    for j, x in enumerate(xs):
        assert (int(y[j]), bool(hle[j]), bool(hlo[j]), int(kind[j])) == scalar_lut(x, p, le, lo, sem), x


def test_gather_path_for_int16_matches_direct_path():
    rng = np.random.default_rng(1)
    p = LutParams(le_function="exponent", le_start=-3000, le_index_offset=2, lo_start=-20000,
                  lo_index_select=7, lo_end=20000, lo_slope_oflow_scale=-77, lo_slope_oflow_shift=3,
                  le_slope_uflow_scale=123, le_slope_uflow_shift=-2, hybrid_priority="LO")
    le = rng.integers(0, 65536, 65).astype(np.uint16)
    lo = rng.integers(0, 65536, 257).astype(np.uint16)
    x = rng.integers(-32768, 32768, 300_000).astype(np.int16)
    fast = sdp_lut(x, p, le, lo)
    slow = sdp_lut(x.astype(np.int64), p, le, lo)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)
