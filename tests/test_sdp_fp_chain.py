"""SDP's compiled FP16 chain (refmodel/sdp_fp_chain.py) gives what the field-by-field rules give
(refmodel/sdp_fp.py ``chain_on_patterns``: ``bs_bn_stage_fp``/``ew_stage_fp`` on fp32 patterns, fp16.py: the rules the
bundled suite testvectors/sdp_fp16 checks against NVDLA's C model), and runs whenever every
pattern is normal or zero; its FP16 narrowing gives ``fp16.fp32_to_fp16_bits``'s patterns."""

from __future__ import annotations

import numpy as np
import pytest

from nvdla_hil.harness.refmodel import fp16 as F
from nvdla_hil.harness.refmodel.sdp_fp import chain_on_patterns
from nvdla_hil.harness.refmodel.sdp_fp_chain import (
    ALGO_EQL,
    ALGO_MAX,
    ALGO_MIN,
    ALGO_SUM,
    FpOperand,
    FpStage,
    chain_values,
    fp16_of_values,
)

SHAPE = (16, 3, 5)
NAN16, INF16 = 0x7E01, 0x7C00


def _fp16(rng: np.random.Generator, shape: tuple[int, ...], special: bool) -> np.ndarray:
    """Random FP16 patterns, sign-extended as the DMA delivers them: normals of every exponent,
    zeros, denormals, and (``special``) INF and NaN."""
    p = rng.integers(0, 1 << 16, shape)
    p = np.where(rng.random(shape) < 0.1, p & 0x8000, p)  # +-0
    p = np.where(rng.random(shape) < 0.1, p & 0x83FF, p)  # denormals
    if special:
        p = np.where(rng.random(shape) < 0.05, INF16 | (p & 0x8000), p)
        p = np.where(rng.random(shape) < 0.05, NAN16 | (p & 0x8000), p)
    else:
        mag = p & 0x7FFF
        p = np.where(mag >= INF16, p & 0xBBFF, p)  # no INF, no NaN
    return np.where(p >= 1 << 15, p - (1 << 16), p).astype(np.int64)


def _operand(rng: np.random.Generator, special: bool) -> FpOperand:
    kind = rng.integers(0, 3)
    if kind == 0:
        return FpOperand(int(_fp16(rng, (1,), special)[0]))
    return FpOperand(_fp16(rng, (SHAPE[0], 1, 1) if kind == 1 else SHAPE, special))


def _ew_operand(rng: np.random.Generator, special: bool) -> FpOperand:
    if rng.random() < 0.5:
        return _operand(rng, special)
    s, e, m = int(rng.integers(0, 2)), int(rng.integers(100, 150)), int(rng.integers(0, 1 << 23))
    if special:
        e = int(rng.choice([0, 255, e]))
    return FpOperand((s << 31) | (e << 23) | m, fp16=False)


def _stages(rng: np.random.Generator, special: bool) -> list[FpStage]:
    out = []
    for name in ("BS", "BN", "EW"):
        if rng.random() < 0.3:
            continue
        alu_on, mul_on = rng.random() < 0.7, rng.random() < 0.7
        algo = int(rng.choice([ALGO_MAX, ALGO_MIN, ALGO_SUM]))
        operand = _ew_operand if name == "EW" else _operand
        out.append(FpStage(name, alu_algo=algo, alu=operand(rng, special) if alu_on else None,
                           mul=operand(rng, special) if mul_on else None, mul_prelu=bool(rng.random() < 0.5),
                           relu=name != "EW" and bool(rng.random() < 0.5)))
    return out


@pytest.mark.parametrize("special", [False, True], ids=["normal", "special"])
def test_chain_matches_the_field_by_field_rules(special: bool):
    rng = np.random.default_rng(7 + special)
    fast_runs = 0
    for _ in range(400):
        n2z, flying = bool(rng.random() < 0.5), bool(rng.random() < 0.2)
        stages = _stages(rng, special)
        raw = _fp16(rng, SHAPE, special)
        if flying:  # CACC's fp32 patterns: widened FP16 values, a few other exponents
            raw = F.fp16_to_fp32_bits(raw & 0xFFFF) ^ (rng.integers(0, 4, SHAPE) << 23)
        want, counts = chain_on_patterns(raw, stages, n2z=n2z, flying=flying)
        got = chain_values(raw, stages, n2z=n2z, flying=flying)
        if got is None:
            continue
        fast_runs += 1
        values, nan_in, inf_in = got
        assert (values.view(np.uint32).astype(np.int64) == want).all(), stages
        assert (nan_in, inf_in) == ((0, 0) if flying else (counts.nan, counts.inf))
    # without INF/NaN/denormal fp32 patterns every chain runs compiled; with them some do
    assert fast_runs == 400 if not special else 0 < fast_runs < 400


def test_chain_leaves_what_it_does_not_take_to_the_field_by_field_rules():
    x = np.full(SHAPE, 0x3C00, np.int64)  # 1.0
    assert chain_values(x, [FpStage("BS", alu_algo=ALGO_EQL, alu=FpOperand(0x3C00))], n2z=False, flying=False) is None
    nan = x.copy()
    nan[3, 1, 2] = NAN16
    assert chain_values(nan, [], n2z=False, flying=False) is None
    flushed = chain_values(nan, [], n2z=True, flying=False)  # NAN_TO_ZERO: +0, counted before the flush
    assert flushed is not None and flushed[0][3, 1, 2] == 0 and flushed[1:] == (1, 0)
    for pattern in (0x7F800000, 0x00000001, 0x7FC00000):  # the INF pattern, a denormal, a NaN: as is
        ew = FpStage("EW", alu_algo=ALGO_SUM, alu=FpOperand(pattern, fp16=False))
        assert chain_values(x, [ew], n2z=True, flying=False) is None


def test_chain_rejects_an_operand_of_the_wrong_shape():
    with pytest.raises(ValueError, match="does not broadcast"):
        chain_values(np.zeros(SHAPE, np.int64), [FpStage("BS", mul=FpOperand(np.zeros((8, 1, 1), np.int64)))],
                     n2z=False, flying=False)


def test_fp16_narrowing_matches_fp32_to_fp16_bits_on_every_exponent():
    rng = np.random.default_rng(3)
    e = np.repeat(np.arange(0, 255), 1 << 12)
    m = rng.integers(0, 1 << 23, e.size)
    for k, edge in enumerate((0, 0x1000, 0x7FFFFF, 0x3000, 0x2000, 0x1FFF, 0x2001)):  # ties, carries
        m[k::97] = edge
    p = (rng.integers(0, 2, e.size) << 31) | (e << 23) | np.where(e == 0, 0, m)
    got, saturated = fp16_of_values(p.astype(np.uint32).view(np.float32))
    want = F.fp32_to_fp16_bits(p.astype(np.int64))
    assert (got == want).all()
    assert saturated == F.count_saturated_outputs(want) > 0
