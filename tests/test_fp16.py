"""FP16 rules of seed 000 / semantics doc 3.4. Expected values are worked out by hand from the
IEEE 754 binary16 layout (1 sign, 5 exponent bits with bias 15, 10 mantissa bits)."""

import numpy as np
import pytest

from nvdla_hil.harness.refmodel import fp16


def u16(*v):
    return np.array(v, dtype=np.uint16)


def test_special_patterns_decode():
    f = fp16.to_float(u16(0x7C00, 0xFC00, 0x7BFF, 0xFBFF, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x8000), np.float64)
    assert f[0] == np.inf and f[1] == -np.inf
    assert f[2] == 65504.0 and f[3] == -65504.0
    assert f[4] == 2.0**-24                       # smallest denormal
    assert f[5] == 1023 * 2.0**-24                # largest denormal
    assert f[6] == 2.0**-14                       # smallest normal
    assert f[7] == 1.0
    assert f[8] == 0.0 and np.signbit(f[8])
    assert np.isnan(fp16.to_float(u16(0x7E00))[0])


def test_classification():
    b = u16(0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x0001, 0x03FF, 0x8001, 0x0400, 0x0000, 0x7BFF)
    assert fp16.is_inf(b).tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert fp16.is_nan(b).tolist() == [0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    assert fp16.is_denormal(b).tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0]


def test_as_bits_rejects_out_of_range_and_floats():
    with pytest.raises(ValueError):
        fp16.as_bits(np.array([0x10000]))
    with pytest.raises(TypeError):
        fp16.as_bits(np.array([1.5]))


@pytest.mark.parametrize(
    "unit, expected",
    [
        ("conv_dc", 65536.0), ("conv_image", 65536.0), ("conv_winograd", 65504.0),
        ("sdp", 3.4028234663852886e38), ("cdp", 4292870144.0), ("pdp_ave", 4292870144.0),
    ],
)
def test_inf_mapping_per_unit(unit, expected):
    got = fp16.prepare_inputs(u16(0x7C00, 0xFC00, 0x3C00), unit)
    assert got.tolist() == [expected, -expected, 1.0]


@pytest.mark.parametrize("unit", ["pdp_max", "pdp_min"])
def test_pdp_max_min_keep_inf(unit):
    got = fp16.prepare_inputs(u16(0x7C00, 0xFC00), unit)
    assert got[0] == np.inf and got[1] == -np.inf


def test_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit"):
        fp16.map_inf(np.zeros(1), "rubik")


def test_nan_to_zero_flush():
    b = u16(0x7E00, 0xFE01, 0x7C01, 0x7C00, 0x3C00)
    assert fp16.nan_to_zero(b).tolist() == [0, 0, 0, 0x7C00, 0x3C00]
    f = fp16.prepare_inputs(b, "sdp", nan_to_zero=True)
    assert not np.isnan(f).any()
    assert f[0] == 0.0 and f[4] == 1.0


def test_nan_propagates_without_flush():
    f = fp16.prepare_inputs(u16(0x7E00, 0x3C00), "cdp")
    assert np.isnan(f[0]) and f[1] == 1.0
    r = fp16.propagate_nan(np.array([1.0, 2.0, 3.0]), np.array([0.0, np.nan, 0.0]), np.array([np.nan, 0.0, 0.0]))
    assert np.isnan(r[0]) and np.isnan(r[1]) and r[2] == 3.0
    # NaN result written as a (quiet) NaN pattern unless flushed
    out = fp16.finish_outputs(np.array([np.nan, 1.0]))
    assert fp16.is_nan(out).tolist() == [True, False]
    assert fp16.finish_outputs(np.array([np.nan]), nan_to_zero=True).tolist() == [0]


def test_counters():
    b = u16(0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7BFF, 0x0001, 0xFBFF, 0x7BFE)
    c = fp16.count_nan_inf_inputs(b)
    assert (c.nan, c.inf) == (2, 2)
    assert fp16.count_nan_outputs(b) == 2
    assert fp16.count_saturated_outputs(b) == 2  # 0x7bff and 0xfbff


@pytest.mark.parametrize(
    "value, bits",
    [
        (1.0, 0x3C00),
        (1.0 + 2.0**-11, 0x3C00),                # tie between 0x3c00 and 0x3c01 -> even
        (1.0 + 3 * 2.0**-11, 0x3C02),            # tie between 0x3c01 and 0x3c02 -> even
        (1.0 + 2.0**-11 + 2.0**-20, 0x3C01),     # just above the tie -> up
        (-(1.0 + 2.0**-11), 0xBC00),
        (2.0**-24, 0x0001),                      # smallest denormal, exact
        (1023 * 2.0**-24, 0x03FF),               # largest denormal, exact
        (2.0**-25, 0x0000),                      # tie between 0 and 0x0001 -> even (0)
        (3 * 2.0**-25, 0x0002),                  # tie between 0x0001 and 0x0002 -> even
        (1.5 * 2.0**-25 + 2.0**-40, 0x0001),     # above the tie at 2^-25 -> 0x0001
        (65504.0, 0x7BFF),
        (65519.0, 0x7BFF),
        (65520.0, 0x7BFF),                       # IEEE would give INF; hardware clips
        (1e6, 0x7BFF),
        (-1e6, 0xFBFF),
        (np.inf, 0x7BFF),
        (-np.inf, 0xFBFF),
        (2049.0, 0x6800),                        # 2048 and 2050 representable, tie -> 2048
        (2051.0, 0x6802),                        # tie between 2050 and 2052 -> 2052
    ],
)
def test_round_to_nearest_even_with_clip(value, bits):
    assert int(fp16.from_float(np.array([value]))[0]) == bits


def test_ieee_overflow_without_clip():
    got = fp16.from_float(np.array([65520.0, 65519.0, -np.inf]), clip=False)
    assert got.tolist() == [0x7C00, 0x7BFF, 0xFC00]


def test_int_to_fp16():
    assert fp16.int_to_fp16(np.array([0, 1, -1, 2049, 2051, 65519, 100000, -100000])).tolist() == [
        0x0000, 0x3C00, 0xBC00, 0x6800, 0x6802, 0x7BFF, 0x7BFF, 0xFBFF]


@pytest.mark.parametrize(
    "bits, expected",
    [
        (0x4100, 3),      # 2.5 -> 3 (tie away from zero)
        (0xC100, -3),     # -2.5 -> -3
        (0x3800, 1),      # 0.5 -> 1
        (0xB800, -1),     # -0.5 -> -1
        (0x3E00, 2),      # 1.5 -> 2
        (0x3D00, 1),      # 1.25 -> 1
        (0x78E2, 32767),  # 40000 saturates
        (0xF8E2, -32768),
        (0x7C00, 32767),  # +INF saturates
        (0xFC00, -32768),
        (0x7E00, -32768), # NaN -> -32768
        (0x0001, 0),      # denormal
    ],
)
def test_fp16_to_int16(bits, expected):
    assert int(fp16.fp16_to_int(u16(bits))[0]) == expected


def test_fp16_to_int8():
    # 200.0 = 1.5625 * 2^7 -> exponent 22 -> 0x5a40
    assert fp16.fp16_to_int(u16(0x5A40, 0x7E00), out_bits=8).tolist() == [127, -128]


def test_internal_path_has_no_denormals():
    got = fp16.flush_denormals_fp32(np.array([1e-40, -1e-40, 2.0**-126, 1.0], dtype=np.float32))
    assert got[0] == 0 and got[1] == 0 and np.signbit(got[1])
    assert got[2] == 2.0**-126 and got[3] == 1.0


def test_overflow_flag_threshold():
    assert fp16.overflow_flag(np.array([65504.0, -65504.0, 65503.9, 0.0])).tolist() == [True, True, False, False]


def test_float16_dtype_accepted():
    assert fp16.as_bits(np.array([1.0], dtype=np.float16)).tolist() == [0x3C00]
