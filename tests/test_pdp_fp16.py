"""PDP FP16 (refmodel/pdp.py, fp16_extra.py): the bundled suite testvectors/pdp_fp16, whose goldens are
the outputs and counters of NVDLA's C model (nv_full, ``nvdla-hil fuzz --unit pdp --set precision=fp16
--target cmod --keep``), runs bit-exactly on the model target; plus hand-worked values of the cmod's
FP16 rules (nvdla_float.h ``FpExpoWidthDec<6,5,10>``, ``FpCmp<5,10>``)."""

from __future__ import annotations

import numpy as np
import pytest
from _suites import assert_cmod_provenance, assert_passes_on_model, bundled_cases

from nvdla_hil.harness.refmodel.fp16_extra import fp16_cmp_bits, fp17_to_fp16_bits

CASES = bundled_cases("pdp_fp16")


def test_suite_is_bundled_with_cmod_goldens():
    assert_cmod_provenance(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_bundled_case_passes_on_model(case):
    assert_passes_on_model(case)


def test_fp17_to_fp16_rebias_denormal_rounding_and_saturation():
    # fp17 bias 31: 1.0 = 0x7c00 -> FP16 0x3c00; exponent 47 (2^16) saturates to 65504, the INF/NaN
    # exponent 63 too unless the mantissa is a NaN payload; exponent 16 (2^-15) -> denormal 0x0200
    # (1.0 >> 1); in units of the FP16 denormal step 2^-24: 2^-25 = 0.5 -> tie to even 0, 0.75 -> 1,
    # 1.5 -> tie to even 2; exponent < 6 -> zero
    x = np.array([0x7C00, 47 << 10, 63 << 10, (63 << 10) | 5, 16 << 10, 6 << 10, (6 << 10) | 0x200,
                  (7 << 10) | 0x200, (1 << 16) | 0x7C00, 5 << 10], dtype=np.int64)
    assert [int(v) for v in fp17_to_fp16_bits(x)] == [0x3C00, 0x7BFF, 0x7BFF, 0x7C05, 0x0200, 0x0000, 0x0001,
                                                      0x0002, 0xBC00, 0x0000]


def test_fp16_max_min_order_signed_zero_and_nan_priority():
    # +0 > -0; INF is the largest; a NaN first operand wins over a NaN second one
    assert int(fp16_cmp_bits(0x0000, 0x8000, take_max=True)) == 0x0000
    assert int(fp16_cmp_bits(0x0000, 0x8000, take_max=False)) == 0x8000
    assert int(fp16_cmp_bits(0x7C00, 0x7BFF, take_max=True)) == 0x7C00
    assert int(fp16_cmp_bits(0x7C01, 0x7E00, take_max=False)) == 0x7C01
    assert int(fp16_cmp_bits(0x3C00, 0xFE00, take_max=True)) == 0xFE00
