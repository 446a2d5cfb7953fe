"""The fp32/fp17 add and multiply through the CPU's float arithmetic (refmodel/fp16_native.py) give
the C model's results: checked against the field-by-field formulation of ``nvdla_float.h``
(``fp16._fp_add`` / ``_fp_mul``, which the bundled suites check against the C model's outputs) on
random patterns of every class, on patterns chosen where the two could part (exponents 24-27 apart,
cancellation, products and sums at the flush and overflow edges), and on hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest

from nvdla_hil.harness.refmodel import fp16 as F

N = 1 << 15
RNG_SEED = 29


def _fp32(e: np.ndarray, m: np.ndarray, s: np.ndarray) -> np.ndarray:
    return (s.astype(np.int64) << 31) | (e.astype(np.int64) << 23) | m.astype(np.int64)


def _fp17(e: np.ndarray, m: np.ndarray, s: np.ndarray) -> np.ndarray:
    return (s.astype(np.int64) << 16) | (e.astype(np.int64) << 10) | m.astype(np.int64)


def _classes32(rng: np.random.Generator) -> dict[str, np.ndarray]:
    s, m = rng.integers(0, 2, N), rng.integers(0, 1 << 23, N)
    normal = _fp32(rng.integers(1, 255, N), m, s)
    nan = _fp32(np.full(N, 255), np.maximum(m, 1), s)
    return {
        "normal": normal,
        "low": _fp32(rng.integers(1, 30, N), m, s),
        "high": _fp32(rng.integers(225, 255, N), m, s),
        "mid": _fp32(rng.integers(110, 145, N), m & rng.choice([0, 1, 0x7FFFFF, 0x400000, 0x7FF000, -1], N), s),
        "zero": rng.choice([0, 1 << 31], N).astype(np.int64),
        "nan": np.where(rng.random(N) < 0.05, nan, normal),
        "any": rng.integers(0, 1 << 32, N, dtype=np.int64),  # denormal and INF patterns: the field-by-field path
    }


@pytest.mark.parametrize("op", ["fp32_add_bits", "fp32_sub_bits", "fp32_mul_bits"])
def test_fp32_native_matches_the_field_by_field_formulation(op: str) -> None:
    rng = np.random.default_rng(RNG_SEED)
    native, fields = getattr(F, op), {"fp32_add_bits": lambda a, b: F._fp_add(a, b, 8, 23),
                                      "fp32_sub_bits": lambda a, b: F._fp_add(a, b ^ (1 << 31), 8, 23),
                                      "fp32_mul_bits": lambda a, b: F._fp_mul(a, b, 8, 23)}[op]
    cls = _classes32(rng)
    pairs = [(cls[x], cls[y]) for x in cls for y in cls]
    a = cls["normal"]
    pairs.append((a, a ^ (1 << 31)))  # x + (-x): the sign of a
    e = rng.integers(1, 255, N)  # exponents 0..40 apart: the truncated smaller operand of FpAdd
    pairs.append((_fp32(e, rng.integers(0, 1 << 23, N), rng.integers(0, 2, N)),
                  _fp32(np.clip(e - rng.integers(0, 40, N), 1, 254), rng.integers(0, 1 << 23, N), rng.integers(0, 2, N))))
    ea = rng.integers(1, 127, N)  # products around 2^-126: the flush edge (exponent sum 125..129)
    pairs.append((_fp32(ea, rng.integers(0, 1 << 23, N), rng.integers(0, 2, N)),
                  _fp32(127 - ea + rng.integers(-2, 3, N), rng.integers(0, 1 << 23, N), rng.integers(0, 2, N))))
    # mantissa products within 2^-24 of 2 at exponent sum 127: just below 2^-126, some round up to it
    pairs.append((_fp32(ea, 0x7FFFFF - rng.integers(0, 64, N), rng.integers(0, 2, N)),
                  _fp32(127 - ea, rng.integers(0, 64, N), rng.integers(0, 2, N))))
    for a, b in pairs:
        np.testing.assert_array_equal(native(a, b), fields(a, b))
        np.testing.assert_array_equal(native(b, a), fields(b, a))
    for bv in (0, 1 << 31, 1, 0x7FFFFF, 0x800000, 0x7F800000, 0xFF800000, 0x7FC00001, 0x7F7FFFFF, 0x3F800000):
        np.testing.assert_array_equal(native(a, np.int64(bv)), fields(a, np.int64(bv)))  # register operands
        assert int(native(np.int64(bv), np.int64(0x3F800000))) == int(fields(np.int64(bv), np.int64(0x3F800000)))


@pytest.mark.parametrize("op", ["fp17_add_bits", "fp17_mul_bits"])
def test_fp17_native_matches_the_field_by_field_formulation(op: str) -> None:
    rng = np.random.default_rng(RNG_SEED)
    native = getattr(F, op)
    fields = (lambda a, b: F._fp_add(a, b, 6, 10)) if op == "fp17_add_bits" else (lambda a, b: F._fp_mul(a, b, 6, 10))
    s, m = rng.integers(0, 2, N), rng.integers(0, 1024, N)
    normal = _fp17(rng.integers(0, 63, N), m, s)
    cls = {
        "normal": normal,
        "low": _fp17(rng.integers(0, 14, N), m, s),
        "high": _fp17(rng.integers(50, 63, N), m, s),
        "nan": np.where(rng.random(N) < 0.05, _fp17(np.full(N, 63), np.maximum(m, 1), s), normal),
        "wide": rng.integers(0, 1 << 20, N, dtype=np.int64),  # bits above 17 ignored, INF patterns
    }
    for x in cls.values():
        for y in cls.values():
            np.testing.assert_array_equal(native(x, y), fields(x, y))
    every = np.arange(1 << 17, dtype=np.int64)  # every pattern against operands at the edges
    for bv in (0, 1 << 16, 1, 1024, 31 << 10, (31 << 10) | 1, 0xFBFF, 0x1FBFF, 0xFC00, 0xFC01, 12 << 10, 19 << 10):
        np.testing.assert_array_equal(native(every, np.int64(bv)), fields(every, np.int64(bv)))
        np.testing.assert_array_equal(native(np.int64(bv), every), fields(np.int64(bv), every))


def test_fp32_narrowing_patches_only_the_ranges_present() -> None:
    rng = np.random.default_rng(RNG_SEED)
    cls = _classes32(rng)
    cls["denormal_range"] = _fp32(rng.integers(80, 120, N), rng.integers(0, 1 << 23, N), rng.integers(0, 2, N))
    for x in cls.values():
        for part in (x, x[:5], x[:1].reshape(()), x.reshape(8, -1)):
            np.testing.assert_array_equal(F.fp32_to_fp17_bits(part), _narrow_reference(part, 6, False))
            np.testing.assert_array_equal(F._narrow(part, 5, denorm=True), _narrow_reference(part, 5, True))


def _narrow_reference(x: np.ndarray, e_out: int, denorm: bool) -> np.ndarray:
    """``FpWidthDec<8,23,e_out,10>`` element by element (hand-written from nvdla_float.h), for
    the narrowing's range patches."""
    out = []
    for v in np.asarray(x, np.int64).ravel().tolist():
        s, e, m = (v >> 31) & 1, (v >> 23) & 0xFF, v & 0x7FFFFF
        emax, delta = (1 << e_out) - 1, 127 - ((1 << (e_out - 1)) - 1)
        sh_out, p1 = e_out + 10, m | (1 << 23)
        mx = (s << sh_out) | ((emax - 1) << 10) | 0x3FF
        if e == 0xFF and m:
            r = (s << sh_out) | (emax << 10) | (m & 0x3FF)
        elif e >= emax + delta:
            r = mx
        elif e < delta - 10:
            r = s << sh_out
        elif e <= delta:
            sh = min(max(delta + 1 - e, 1), 11)
            g, st, lsb = (p1 >> (12 + sh)) & 1, (p1 & ((1 << (12 + sh)) - 1)) != 0, (p1 >> (13 + sh)) & 1
            o = ((p1 >> (13 + sh)) & 0x7FF) + (g & (st | lsb))
            r = (s << sh_out) | (1 << 10 if o >> 10 else (o & 0x3FF if denorm else 0))
        else:
            top = (p1 >> 13) + (((p1 >> 12) & 1) & (((p1 & 0xFFF) != 0) | ((p1 >> 13) & 1)))
            ne = e - delta + (top >> 11)
            r = mx if ne >= emax else (s << sh_out) | (ne << 10) | (0 if top >> 11 else top & 0x3FF)
        out.append(r)
    return np.array(out, dtype=np.int64).reshape(np.shape(x))


def test_hand_worked_cases() -> None:
    one, mone, two = 0x3F800000, 0xBF800000, 0x40000000
    assert int(F.fp32_add_bits(np.int64(mone), np.int64(one))) == 0x80000000  # -1 + 1 = -0: a's sign (IEEE: +0)
    assert int(F.fp32_add_bits(np.array([one]), np.array([mone]))[0]) == 0
    assert int(F.fp32_add_bits(np.array([0x7F7FFFFF]), np.array([0x7F7FFFFF]))[0]) == 0x7F7FFFFF  # no INF
    assert int(F.fp32_mul_bits(np.array([0x7F7FFFFF]), np.array([two]))[0]) == 0x7F7FFFFF
    # 2^-63 * 2^-63 = 2^-126 exactly (the smallest normal); 2^-63 * 2^-64 = 2^-127 flushes to zero
    assert int(F.fp32_mul_bits(np.array([0x20000000]), np.array([0x20000000]))[0]) == 0x00800000
    assert int(F.fp32_mul_bits(np.array([0x20000000]), np.array([0x9F800000]))[0]) == 0x80000000
    # (2 - 2^-22) * 2^-27 times (1 + 2^-23) * 2^-100 = (2 - 2^-45) * 2^-127: rounds to 2^-126 (IEEE too)
    assert int(F.fp32_mul_bits(np.array([(100 << 23) | 0x7FFFFE]), np.array([(27 << 23) | 1]))[0]) == 0x00800000
    # (2 - 2^-23) * 2^-127 is exact below 2^-126: flushed (IEEE keeps the subnormal)
    assert int(F.fp32_mul_bits(np.array([(100 << 23) | 0x7FFFFF]), np.array([27 << 23]))[0]) == 0
    # 1.5 + 1.5 = 3 in fp17 (bias 31: 1.5 = 0x7E00, 3 = 0x8200); 2^32 or more saturates to 0xFBFF
    assert int(F.fp17_add_bits(np.array([0x7E00]), np.array([0x7E00]))[0]) == 0x8200
    assert int(F.fp17_mul_bits(np.array([(61 << 10)]), np.array([(61 << 10)]))[0]) == 0xFBFF
