"""FP16 direct convolution (harness/refmodel/conv: cmac.fp16_mac_step, cacc.fp48_add / fp48_to_fp32) and the
bundled conv suites whose goldens are NVDLA's C model outputs (testvectors/conv_fp16, testvectors/conv_int).

Goldens: hand-worked values from the C model's number formats (FP44 = mant * 2^(exp - 50), FP48 =
mant * 2^(exp - 101), nvdlav1 cmod/cacc/NV_NVDLA_cacc.cpp), the C model's own tolerance of its
Booth multiplier (|result - exact| <= 1, cmod/cmac/NV_NVDLA_cmac.h DEBUG_ERROR_CHECK) and the
recorded C model outputs of the suites.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nvdla_hil.harness.refmodel.conv import (
    ConvConfig,
    booth_product,
    fp16_conv_accumulate,
    fp16_mac_step,
    fp48_add,
    fp48_to_fp32,
)

ROOT = Path(__file__).resolve().parents[1] / "testvectors"
ONE = 0x3C00  # FP16 1.0


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.int64).astype(np.uint32).view(np.float32)


def test_booth_product_is_within_one_unit_of_the_exact_shifted_product():
    rng = np.random.default_rng(3)
    n = 50_000
    wm, dm = rng.integers(0, 1 << 14, n), rng.integers(0, 1 << 14, n)
    neg, sft = rng.integers(0, 2, n), rng.integers(0, 8, n) * 4
    exact = np.where(neg == 1, -(wm * dm), wm * dm) >> sft
    assert np.abs(booth_product(neg, wm, dm, sft) - exact).max() <= 1
    assert (booth_product(neg, wm, dm, np.full(n, 32)) == 0).all()  # aligned out entirely
    # no shift: nothing is truncated, the product is exact
    z = np.zeros(n, dtype=np.int64)
    assert (booth_product(neg, wm, dm, z) == np.where(neg == 1, -(wm * dm), wm * dm)).all()


def test_one_times_one_by_hand():
    # 1.0 = exponent 15: coarse 3, fine 3 -> significand 0x400 << 3 = 8192; 8192^2 = 2^26,
    # FP44 exponent 4 * (3 + 3) = 24: 2^26 * 2^(24 - 50) = 1.0
    e, m = fp16_mac_step(np.array([[ONE]]), np.array([[ONE]]))
    assert (e[0, 0], m[0, 0]) == (24, 1 << 26)
    ae, am = fp48_add(np.zeros(1, np.int64), np.zeros(1, np.int64), e[0], m[0])
    assert _f32(fp48_to_fp32(ae, am))[0] == 1.0
    # 1.0 * -2.0 + 0.5 * 1.0 = -1.5
    w = np.array([[ONE, 0x3800]])  # 1.0, 0.5
    d = np.array([[0xC000], [ONE]])  # -2.0, 1.0
    e, m = fp16_mac_step(w, d)
    ae, am = fp48_add(np.zeros(1, np.int64), np.zeros(1, np.int64), e[0], m[0])
    assert _f32(fp48_to_fp32(ae, am))[0] == -1.5


def test_zeros_of_either_sign_take_no_part_and_inf_is_65536():
    # -0 data with a huge weight must not raise the block exponent (CSC masks +-0)
    w = np.array([[ONE, 0x7BFF]])  # 1.0, 65504
    d = np.array([[0x3E00], [0x8000]])  # 1.5, -0
    e, m = fp16_mac_step(w, d)
    ae, am = fp48_add(np.zeros(1, np.int64), np.zeros(1, np.int64), e[0], m[0])
    assert _f32(fp48_to_fp32(ae, am))[0] == 1.5
    e, m = fp16_mac_step(np.array([[0x7C00]]), np.array([[ONE]]))  # INF * 1 = 65536 in the MAC
    ae, am = fp48_add(np.zeros(1, np.int64), np.zeros(1, np.int64), e[0], m[0])
    assert _f32(fp48_to_fp32(ae, am))[0] == 65536.0


def test_nan_weight_wins_over_nan_data_and_keeps_its_payload():
    w = np.array([[ONE, 0xFD55]])  # second weight: -NaN payload 0x155
    d = np.array([[0x7E01], [ONE]])  # first datum: NaN payload 0x201
    e, m = fp16_mac_step(w, d)
    ae, am = fp48_add(np.zeros(1, np.int64), np.zeros(1, np.int64), e[0], m[0])
    bits = int(fp48_to_fp32(ae, am)[0]) & 0xFFFFFFFF
    assert bits == (1 << 31) | (0xFF << 23) | 0x155
    # a later finite step leaves the NaN alone
    e2, m2 = fp16_mac_step(np.array([[ONE]]), np.array([[ONE]]))
    ae, am = fp48_add(ae, am, e2[0], m2[0])
    assert int(fp48_to_fp32(ae, am)[0]) & 0xFFFFFFFF == bits


@pytest.mark.parametrize("data", ["mixed", "all negative", "few negatives", "all positive"])
def test_accumulation_over_slices_and_positions_matches_float_for_exact_values(data: str):
    # small integers: every product and sum is exact in FP48 and FP32. The data signs vary
    # because the multiplier folds the datum's sign into its recoded weights (cmac_fp16.py):
    # all-negative data once went wrong there while mixed data did not.
    rng = np.random.default_rng(5)
    d = rng.integers(-4, 5, size=(70, 3, 4)).astype(np.float16)
    if data == "all negative":
        d = -np.abs(d) - 1
    elif data == "all positive":
        d = np.abs(d) + 1
    elif data == "few negatives":
        d = np.abs(d)
        d[rng.random(d.shape) < 0.05] *= -1
    w = rng.integers(-3, 4, size=(5, 70, 2, 2)).astype(np.float16)
    cfg = ConvConfig(in_w=4, in_h=3, in_c=70, k_w=2, k_h=2, out_w=3, out_h=2, out_k=5)
    got = _f32(fp16_conv_accumulate(d.view(np.uint16), w.view(np.uint16), cfg))
    ref = np.zeros((5, 2, 3))
    for ky in range(2):
        for kx in range(2):
            ref += np.einsum("kc,chw->khw", w[:, :, ky, kx].astype(float), d[:, ky : ky + 2, kx : kx + 3].astype(float))
    assert np.array_equal(got, ref.astype(np.float32))



def test_more_kernels_than_output_pixels_matches_float_for_exact_values():
    """A 1x1 output with 40 kernels (MNIST's fully connected layers are this shape): the
    per-weight work dominates there, and the weights are recoded in one batch."""
    rng = np.random.default_rng(9)
    d = rng.integers(-4, 5, size=(70, 2, 2)).astype(np.float16)
    w = rng.integers(-3, 4, size=(40, 70, 2, 2)).astype(np.float16)
    cfg = ConvConfig(in_w=2, in_h=2, in_c=70, k_w=2, k_h=2, out_w=1, out_h=1, out_k=40)
    got = _f32(fp16_conv_accumulate(d.view(np.uint16), w.view(np.uint16), cfg))
    ref = np.einsum("kcyx,cyx->k", w.astype(float), d.astype(float)).reshape(40, 1, 1)
    assert np.array_equal(got, ref.astype(np.float32))

# ---------------------------------------------------------------------------------------
# bundled suites, goldens = NVDLA C model (nvdlav1, nv_full) outputs


def _cases(suite: str) -> list[Path]:
    from nvdla_hil.harness.vectors import find_cases

    return find_cases(ROOT / suite)


@pytest.mark.parametrize("path", _cases("conv_int"), ids=lambda p: p.name)
def test_conv_int_suite_on_the_model(path: Path):
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import load_case, run_case

    case = load_case(path)
    assert "C model" in case.provenance["note"]
    with ModelTarget(case.profile, semantics="cmod") as t:
        res = run_case(case, t, target_kind="model")
    assert res.status == "passed", res.summary()


@pytest.mark.parametrize("path", _cases("conv_fp16"), ids=lambda p: p.name)
def test_conv_fp16_suite_full_pipeline(path: Path):
    """The whole layer on the model target, SDP included, statistics compared."""
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import load_case, run_case

    case = load_case(path)
    assert "C model" in case.provenance["note"]
    with ModelTarget(case.profile, semantics="cmod") as t:
        res = run_case(case, t, target_kind="model")
    assert res.status == "passed", res.summary()
