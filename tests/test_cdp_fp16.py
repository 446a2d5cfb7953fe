"""CDP LRN in FP16 (refmodel/cdp.py ``cdp_lrn_fp16``): the bundled suite testvectors/cdp_fp16, whose
goldens are the outputs and counters of NVDLA's C model (nv_full, ``nvdla-hil fuzz --unit cdp-fp16
--target cmod --keep``), runs bit-exactly on the model target; plus hand-worked single elements of
the cmod's FP16 LRN (hls_wrapper/cdp_hls_wrapper.cpp)."""

from __future__ import annotations

import numpy as np
import pytest
from _suites import assert_cmod_provenance, assert_passes_on_model, bundled_cases

from nvdla_hil.harness.refmodel.cdp import CdpConfig, cdp_lrn_fp16
from nvdla_hil.harness.refmodel.lut import LutParams

CASES = bundled_cases("cdp_fp16")


def test_suite_is_bundled_with_cmod_goldens():
    assert_cmod_provenance(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_bundled_case_passes_on_model(case):
    assert_passes_on_model(case)


def _f32(v: float) -> int:
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def _h(v: float) -> int:
    return int(np.array([v], dtype=np.float16).view(np.uint16)[0])


def test_linear_lo_hit_interpolates_and_multiplies_by_the_input():
    # one channel x = 2.0, window 3: s = 0 + 4 + 0 = 4.0; LO linear from START 0.0 with index select
    # 0: index 4, fraction 0 -> r = LO[4] = 0.5; LE starts above (underflows, LE table 0 + slope 0):
    # LO hit alone -> r; out = fp17_mul(2.0, 0.5) = 1.0
    lo = np.zeros(257, np.int16)
    lo[4] = np.int16(np.array([0.5], np.float16).view(np.int16)[0])
    p = LutParams(le_function="linear", le_start=_f32(100.0), le_end=_f32(164.0), lo_start=_f32(0.0), lo_end=_f32(256.0))
    x = np.array([[_h(2.0), 0, 0, 0]], dtype=np.uint16)
    out, stats, _ = cdp_lrn_fp16(x, 1, CdpConfig(), np.zeros(65, np.int16), lo, p, le_select=0, lo_select=0)
    assert int(out[0, 0]) == _h(1.0)
    # lane 0 sums 2.0^2 = 4.0 and so does lane 1 (a padding lane whose 3-wide window holds lane 0);
    # both below LE's start 100, inside LO: two LO hits (NVDLA's C model counts all 4 lanes)
    assert (stats.le_hit, stats.lo_hit) == (0, 2)


def test_nan_to_zero_flushes_inputs_and_mul_bypass_keeps_a_nan_input():
    p = LutParams(le_function="linear", le_start=_f32(1.0), le_end=_f32(65.0), lo_start=_f32(1.0), lo_end=_f32(257.0))
    x = np.array([[0x7E01, 0, 0, 0]], dtype=np.uint16)
    z = np.zeros(65, np.int16), np.zeros(257, np.int16)
    out, *_ = cdp_lrn_fp16(x, 1, CdpConfig(mul_bypass=True), *z, p, le_select=0, lo_select=0)
    assert int(out[0, 0]) == 0x7E01  # NaN input passed through (its fp17 payload)
    out, *_ = cdp_lrn_fp16(x, 1, CdpConfig(mul_bypass=True), *z, p, le_select=0, lo_select=0, nan_to_zero=True)
    v = int(out[0, 0])
    assert v & 0x7FFF == 0  # flushed: the LUT's result, a zero (zero tables and slopes), no NaN
