"""The fp32 add and multiply on float32 values (refmodel/fp16_native.py ``fp32_add_values``,
``fp32_mul_values``: a chain of operations converts its patterns once each way) give the C model's results: checked against the field-by-field formulation of
``nvdla_float.h`` (``fp16._fp_add`` / ``_fp_mul``, which the bundled suites check against the C
model's outputs) on random operands of the classes they take (normal and zero), on operands chosen where they could part (cancellation to zero, exponent sums at the bias,
products and sums at the flush and overflow edges), and on hand-worked signs of zero."""

from __future__ import annotations

import numpy as np
import pytest
from nvdla_hil.harness.refmodel.fp16 import _fp_add, _fp_mul
from nvdla_hil.harness.refmodel.fp16_native import (
    fp32_add_values,
    fp32_mul_values,
    fp32_values,
)

N = 1 << 16


def _operands32(rng: np.random.Generator, kind: str) -> tuple[np.ndarray, np.ndarray]:
    s = rng.integers(0, 2, (2, N)).astype(np.int64) << 31
    m = rng.integers(0, 1 << 23, (2, N))
    e = {"any": rng.integers(1, 255, (2, N)), "low": rng.integers(1, 40, (2, N)),
         "high": rng.integers(215, 255, (2, N)), "near": rng.integers(120, 135, (2, N))}[kind]
    p = s | (e << 23) | m
    if kind == "near":  # b close to -a: cancellation
        p[1] = np.where(rng.random(N) < 0.5, p[0] ^ (1 << 31) ^ rng.integers(0, 4, N), p[1])
    p = np.where(rng.random((2, N)) < 0.05, s, p)  # +-0
    return p[0], p[1]


def _patterns32(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.float32).view(np.uint32).astype(np.int64)


@pytest.mark.parametrize("kind", ["any", "low", "high", "near"])
def test_fp32_values_match_the_field_by_field_rule(kind: str):
    rng = np.random.default_rng(41)
    a, b = _operands32(rng, kind)
    fa, fb = fp32_values(a), fp32_values(b)
    assert fa is not None and fb is not None
    assert (_patterns32(fp32_add_values(fa, fb)) == _fp_add(a, b, 8, 23)).all()
    assert (_patterns32(fp32_mul_values(fa, fb)) == _fp_mul(a, b, 8, 23)).all()


def test_fp32_values_refuse_what_they_do_not_take():
    assert fp32_values(np.array([0x3F800000, 0x7F800000])) is None  # the INF pattern
    assert fp32_values(np.array([0x3F800000, 0x00000005])) is None  # exponent 0 with a mantissa
    assert fp32_values(np.array([0x7FC00001])) is None  # NaN
    assert fp32_values(np.array([0x3F800000, 0x80000000])) is not None


def test_fp32_signs_of_zero_by_hand():
    one, minus_zero = np.float32([1.0]), np.float32([-0.0])
    # x + (-x): the C model keeps the first operand's sign on a tie (IEEE would give +0)
    assert _patterns32(fp32_add_values(-one, one)).tolist() == [1 << 31]
    assert _patterns32(fp32_add_values(minus_zero, np.float32([0.0]))).tolist() == [1 << 31]
    assert _patterns32(fp32_mul_values(minus_zero, one)).tolist() == [1 << 31]


