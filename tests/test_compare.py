"""Comparison rules of seed 001 on small hand-made arrays; thresholds checked exactly at the
boundary (values chosen so that the error and the limit are exact binary fractions)."""

import numpy as np
import pytest

from nvdla_hil.harness.analysis import compare as cmp


def u16(*v):
    return np.array(v, dtype=np.uint16)


# ---------------------------------------------------------------- bit-exact (SDP)

def test_bitexact_pass():
    a = np.arange(-128, 128, dtype=np.int8)
    r = cmp.compare_bitexact(a, a.copy())
    assert r.passed and bool(r) and r.n_failed == 0 and r.n_elements == 256
    assert r.format() == "bit-exact: all 256 elements match"


def test_bitexact_message_with_nchw_index():
    exp = np.zeros(2048, dtype=np.int64)
    act = exp.copy()
    # flat index of (n,c,h,w) in shape (1,8,16,16) = c*256 + h*16 + w
    exp[5 * 256 + 1 * 16 + 2] = 17
    act[5 * 256 + 1 * 16 + 2] = 16
    exp[6 * 256] = 3
    act[6 * 256] = 1
    exp[7 * 256] = 100
    act[7 * 256] = 90
    r = cmp.compare_bitexact(exp, act, shape=(1, 8, 16, 16))
    assert not r.passed and r.n_failed == 3 and r.n_elements == 2048
    assert r.first[0].index == (0, 5, 1, 2)
    assert r.worst.index == (0, 7, 0, 0) and r.worst.error == 10
    assert r.format() == (
        "bit-exact: 3 of 2048 elements differ; first (0,5,1,2) expected 17 got 16 (error 1), "
        "(0,6,0,0) expected 3 got 1 (error 2), (0,7,0,0) expected 100 got 90 (error 10); "
        "worst (0,7,0,0) expected 100 got 90 (error 10)")


def test_bitexact_max_report_limits_first():
    r = cmp.compare_bitexact(np.zeros(10, np.int32), np.ones(10, np.int32), max_report=2)
    assert r.n_failed == 10 and len(r.first) == 2
    assert [m.index for m in r.first] == [(0,), (1,)]


def test_bitexact_uses_array_shape_when_no_shape():
    e = np.zeros((1, 2, 2, 2), np.int16)
    a = e.copy()
    a[0, 1, 0, 1] = 5
    r = cmp.compare_bitexact(e, a)
    assert r.first[0].index == (0, 1, 0, 1)


def test_bitexact_fp16_patterns():
    e = u16(0x3C00, 0x0000, 0x7E00)
    r = cmp.compare_bitexact(e, u16(0x3C00, 0x8000, 0x7E01))  # -0 differs from +0 bit-wise
    assert r.n_failed == 2
    assert "(0x8000)" in r.format()
    r = cmp.compare_bitexact(e, u16(0x3C00, 0x0000, 0x7E01), nan_equal=True)
    assert r.passed


def test_size_mismatch_is_an_error():
    with pytest.raises(ValueError, match="elements"):
        cmp.compare_bitexact(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="shape"):
        cmp.compare_bitexact(np.zeros(4), np.zeros(4), shape=(1, 3, 1, 1))


# ---------------------------------------------------------------- CC direct / Winograd

def test_fp16_exp():
    # 1.0: field 15 -> 0; 2^-10 = 0x1400: field 5 -> -10; zero/denormal: -15; 65504: 30 -> 15
    assert cmp.fp16_exp(u16(0x3C00, 0x1400, 0x0000, 0x0001, 0x7BFF, 0xBC00)).tolist() == [0, -10, -15, -15, 15, 0]


def test_cc_direct_boundary():
    # a = 1.0 -> 2^(0-10); max_exp 0, R*S*C = 512, scale 1 -> 2^-20*512*2 = 2^-10; limit = 2^-9
    exp = u16(0x3C00, 0x3C00, 0x3C00, 0x3C00)
    act = u16(0x3C02, 0x3BFC, 0x3C03, 0x3C00)  # +2^-9 (=limit), -2^-9 (=limit), +3*2^-10, exact
    r = cmp.compare_cc_direct(exp, act, max_exp=0, r=1, s=1, c=512)
    assert r.n_failed == 1 and r.first[0].index == (2,)
    assert r.first[0].limit == 2.0**-9 and r.first[0].error == 3 * 2.0**-10
    # same with R=S=C=1: limit 2^-10 + 2^-19 -> only the exact element passes
    r = cmp.compare_cc_direct(exp, act, max_exp=0, r=1, s=1, c=1)
    assert r.n_failed == 3


def test_cc_direct_scale_and_per_element_max_exp():
    exp = u16(0x3C00, 0x3C00)
    act = u16(0x3C02, 0x3C02)  # error 2^-9
    # max_exp 0 vs 1: scale 0.5 with C=512 gives 2^-11 resp. 2^-10 -> limits 2^-10+2^-11, 2^-9
    r = cmp.compare_cc_direct(exp, act, max_exp=np.array([0, 1]), r=1, s=1, c=512, scale=0.5)
    assert r.n_failed == 1 and r.first[0].index == (0,)


def test_cc_direct_requires_fp16():
    with pytest.raises(TypeError, match="FP16"):
        cmp.compare_cc_direct(np.zeros(2, np.float32), np.zeros(2, np.float32), max_exp=0, r=1, s=1, c=1)


def test_cc_winograd_boundary():
    # a = 2^-10 (0x1400): 2^(exp(a)-10) = 2^-20; max_exp 0, C 1: 2^-20*18*1*2 = 36*2^-20
    # limit = 37*2^-20; one ulp in this binade is 2^-20
    exp = u16(0x1400, 0x1400, 0x1400)
    act = u16(0x1400 + 37, 0x1400 + 38, 0x1400 - 37)
    r = cmp.compare_cc_winograd(exp, act, max_exp=0, c=1)
    assert r.n_failed == 1 and r.first[0].index == (1,)
    assert r.first[0].limit == 37 * 2.0**-20
    assert "cc_winograd: 1 of 3 elements exceed the threshold" in r.format()


def test_cc_nan_handling():
    r = cmp.compare_cc_direct(u16(0x7E00, 0x3C00), u16(0x7E01, 0x7E00), max_exp=0, r=1, s=1, c=1)
    assert r.n_failed == 1 and r.first[0].index == (1,)


# ---------------------------------------------------------------- CDP / PDP

def test_cdp_absolute_boundary():
    exp = np.array([0.0, 0.0, 0.0])
    act = np.array([0.0001, np.nextafter(0.0001, 1.0), -0.0001])
    r = cmp.compare_cdp(exp, act, max_value=1000.0)
    assert r.n_failed == 1 and r.first[0].index == (1,)


def test_cdp_relative_boundary():
    e = 2.0**-14  # 6.1e-5 < 0.0001, so only the relative condition binds
    exp = np.array([1.0, 1.0, 1.0])
    act = np.array([1.0 + e, 1.0 + e, 1.0])
    mv = np.array([1000 * e, 999 * e, 0.0])  # err/mv = 0.001 exactly; slightly above; err 0
    r = cmp.compare_cdp(exp, act, max_value=mv)
    assert r.n_failed == 1 and r.first[0].index == (1,)


def test_cdp_zero_max_value_and_negative_max():
    r = cmp.compare_cdp(np.array([0.0, 1.0]), np.array([2.0**-20, 1.0 + 2.0**-20]), max_value=np.array([0.0, -1.0]))
    # max_value 0 with non-zero error fails; |max_value| is used for the negative window max
    assert r.n_failed == 1 and r.first[0].index == (0,)


def test_pdp_fp16_inputs_and_message():
    exp = u16(0x3C00, 0x4000)           # 1.0, 2.0
    act = u16(0x3C00, 0x4001)           # 2.0 + 2^-9 -> error 0.00195 > 0.0001
    r = cmp.compare_pdp(exp, act, max_value=2.0, shape=(1, 2, 1, 1))
    assert r.n_failed == 1
    msg = r.format()
    assert msg.startswith("pdp: 1 of 2 elements exceed the threshold; first (0,1,0,0) expected 2 (0x4000) got 2.00195 (0x4001)")


def test_dispatch():
    assert cmp.compare("sdp", np.zeros(2, np.int8), np.zeros(2, np.int8)).passed
    with pytest.raises(ValueError, match="unknown comparison rule"):
        cmp.compare("bogus", np.zeros(1), np.zeros(1))


# ---------------------------------------------------------------- per-element parameters

def test_cc_max_exp_1x1_and_2x2():
    # data 1.0 (exp 0 -> 0), 4.0 (exp 2 -> 0), 16.0 (exp 4 -> 4), 0.5 (exp -1 -> -4)
    data = u16(0x3C00, 0x4400, 0x4C00, 0x3800).reshape(1, 1, 2, 2)
    w1 = u16(0x4000).reshape(1, 1, 1, 1)  # 2.0: exp 1 -> 0
    assert cmp.cc_max_exp(data, w1).tolist() == [[[[0, 0], [4, -4]]]]
    w2 = u16(0x4000, 0x4000, 0x4000, 0x4000).reshape(1, 1, 2, 2)
    assert cmp.cc_max_exp(data, w2).tolist() == [[[[4]]]]


def test_cc_max_exp_padding_and_two_kernels():
    data = u16(0x3800).reshape(1, 1, 1, 1)                 # 0.5 -> -4
    w = u16(0x3C00, 0x3C00, 0x7800, 0x7800).reshape(2, 1, 1, 2)  # k0: 1.0 (0); k1: 32768 (15 -> 12)
    # pad right 1: windows [0.5, pad] and [pad]; pad exponent (-15 & ~3) = -16
    out = cmp.cc_max_exp(data, w, padding=(0, 1, 0, 0))
    assert out.shape == (1, 2, 1, 1)
    assert out[0, 0, 0, 0] == -4 and out[0, 1, 0, 0] == 8


def test_cdp_max_value():
    v = np.array([1.0, -7.0, 3.0, 2.0, 5.0]).reshape(1, 5, 1, 1)
    assert cmp.cdp_max_value(v, 0).reshape(-1).tolist() == [7, 7, 7, 5, 5]
    assert cmp.cdp_max_value(v, 1).reshape(-1).tolist() == [7, 7, 7, 7, 5]  # c4 sees c2..c4


def test_pdp_max_value():
    v = np.array([[1.0, 2.0, 3.0], [4.0, -9.0, 0.0]]).reshape(1, 1, 2, 3)
    assert cmp.pdp_max_value(v, (2, 2)).tolist() == [[[[9.0, 9.0]]]]
    assert cmp.pdp_max_value(v, (1, 2), stride=(1, 2)).tolist() == [[[[2.0], [9.0]]]]
