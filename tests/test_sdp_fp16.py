"""SDP FP16 (refmodel/sdp_fp.py, fp16.py): the bundled suite testvectors/sdp_fp16, whose goldens are
the outputs and counters of NVDLA's C model (nv_full, ``nvdla-hil fuzz --unit sdp-fp16 --target cmod
--keep``), runs bit-exactly on the model target; plus hand-worked values of the cmod's fp32 rules
(nvdla_float.h) that differ from IEEE 754."""

from __future__ import annotations

import numpy as np
import pytest
from _suites import assert_cmod_provenance, assert_passes_on_model, bundled_cases

from nvdla_hil.harness.refmodel import fp16 as F

CASES = bundled_cases("sdp_fp16")


def test_suite_is_bundled_with_cmod_goldens():
    assert_cmod_provenance(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_bundled_case_passes_on_model(case):
    assert_passes_on_model(case)


def _f(v: float) -> int:
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def test_fp16_widening_maps_inf_to_fp32_max_and_keeps_nan_payload():
    got = F.fp16_to_fp32_bits(np.array([0x7C00, 0xFC00, 0x7C01, 0xFE00, 0x0001], dtype=np.uint16))
    assert [int(v) for v in got] == [0x7F7FFFFF, 0xFF7FFFFF, 0x7F800001, 0xFF800200, _f(2.0 ** -24)]


def test_fp32_narrowing_clips_rounds_even_and_keeps_low_payload_bits():
    x = np.array([_f(70000.0), _f(65519.0), _f(1 + 2 ** -11), _f(2.0 ** -25), _f(3 * 2.0 ** -26), 0x7F800001,
                  0x7FC00000], dtype=np.int64)
    assert [int(v) for v in F.fp32_to_fp16_bits(x)] == [0x7BFF, 0x7BFF, 0x3C00, 0x0000, 0x0001, 0x7C01, 0x7C00]


def test_fp32_add_keeps_the_larger_operands_sign_on_exact_cancellation():
    one, mone = _f(1.0), _f(-1.0)
    assert int(F.fp32_add_bits(mone, one)) == 0x80000000  # -1 + 1 = -0 (IEEE: +0)
    assert int(F.fp32_add_bits(one, mone)) == 0x00000000
    assert int(F.fp32_add_bits(_f(3e38), _f(3e38))) == 0x7F7FFFFF  # no INF: the maximal value


def test_fp32_mul_overflow_saturates_and_underflow_flushes():
    big = _f(3e38)
    assert int(F.fp32_mul_bits(big, _f(2.0))) == 0x7F7FFFFF
    assert int(F.fp32_mul_bits(_f(-1e-30), _f(1e-30))) == 0x80000000
    assert int(F.fp32_mul_bits(0x7F800123, _f(0.0))) == 0x7F800123  # NaN operand returned as is


def test_lut_fraction_and_index_helpers():
    # 1/2 and 2^-5 as fp17 (bias 31); (2^35 - 1) / 2^35 rounds up to 1.0; 3 / 2^35 is below fp17's range
    assert [int(v) for v in F.fraction_to_fp17_bits(np.array([1 << 34, 1 << 30, (1 << 35) - 1, 3]))] == [
        30 << 10, 26 << 10, 31 << 10, 0]
    i, f = F.float_to_int_frac(np.array([_f(5.75)], dtype=np.int64), 2)  # 5.75 / 4 = 1 + 0.4375
    assert (int(i[0]), int(f[0])) == (1, int(0.4375 * 2 ** 35))
    i, f = F.float_to_int_frac(np.array([_f(1e30)], dtype=np.int64), 0)
    assert int(i[0]) == 511  # saturated integer part
    # the fp32 INF pattern: its unbiased exponent 128 wraps to -128 in 8 bits -> index 0
    i, f = F.float_to_int_frac(np.array([0x7F800000], dtype=np.int64), -8)
    assert (int(i[0]), int(f[0])) == (0, 0)


def test_fp17_conversions():
    assert int(F.fp16_to_fp17_bits(0x3C00)) == 31 << 10  # 1.0
    assert int(F.fp16_to_fp17_bits(0x0001)) == 7 << 10  # 2^-24, normal in fp17
    assert int(F.fp16_to_fp17_bits(0x7C00)) == (62 << 10) | 0x3FF  # INF -> fp17 maximum
    assert int(F.fp17_to_fp32_bits(31 << 10)) == _f(1.0)
    assert int(F.fp32_to_fp17_bits(np.int64(_f(2.0 ** -40)))) == 0  # no fp17 denormals
