"""Property tests of the bit-exact primitives and the SDP output convertor against an
independent exact-rational reference (semantics doc section 1, seed 001).

The reference rounds ``v / 2^s`` with Python's Fraction: nearest, ties away from zero.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nvdla_hil.harness.refmodel import ops
from nvdla_hil.harness.refmodel.sdp import output_convert


def ref_rnd(v: int, s: int) -> int:
    q = Fraction(v, 1 << s)
    mag = abs(q)
    r = int(mag) + (1 if mag - int(mag) >= Fraction(1, 2) else 0)
    return r if q >= 0 else -r


def ref_clamp(v: int, n: int) -> int:
    return max(-(1 << (n - 1)), min((1 << (n - 1)) - 1, v))


def test_doc_rounding_examples():
    # semantics doc 1.1, "verified by compiling the cmod header"
    cases = [(5, 1, 3), (-5, 1, -3), (-3, 1, -2), (-1, 1, -1), (2, 2, 1), (-2, 2, -1), (6, 2, 2),
             (-6, 2, -2), (3, 2, 1), (-3, 2, -1)]
    for v, s, want in cases:
        assert int(ops.rnd(np.array([v]), s)[0]) == want


values49 = st.integers(-(1 << 48), (1 << 48) - 1)


@settings(max_examples=400, deadline=None)
@given(v=values49, s=st.integers(0, 62), n=st.integers(2, 40))
@example(v=(1 << 20) + (1 << 9), s=10, n=12)  # exact half
@example(v=-((1 << 20) + (1 << 9)), s=10, n=12)  # negative exact half stays toward... away from zero
def test_rsat_matches_exact_reference(v, s, n):
    got = int(ops.rsat(np.array([v]), s, n)[0])
    assert got == ref_clamp(ref_rnd(v, s), n)


@settings(max_examples=300, deadline=None)
@given(v=values49, s=st.integers(0, 62), n=st.integers(2, 40))
@example(v=5120, s=11, n=2)  # 2.5: floor max + 1, rounds to 3, clamps to 1 -> cmod misses it
@example(v=-5530, s=11, n=2)  # -2.70: floor min - 1, clamps to min -> cmod misses it
@example(v=-4506, s=11, n=2)  # -2.20: floor min - 1 rounds back to min -> RTL-only flag
@example(v=28, s=3, n=3)  # 3.5: floor max rounds to 4, clamps to 3 -> cmod misses it
def test_rsat_flag_rules(v, s, n):
    """RTL: floor outside the range, or a positive round-up from the maximum. cmod
    (``IntShiftRightSat``): |floor - result| > 1. The RTL flags every real overflow; the
    cmod misses those whose floor lies within one step of the range (floor == max, max + 1
    or min - 1), e.g. 2.5 -> 3 clamped to 1 at n = 2 (floor 2, result 1)."""
    floor = v >> s
    result = ref_clamp(ref_rnd(v, s), n)
    hi = (1 << (n - 1)) - 1
    rtl = (floor != ref_clamp(floor, n)) or (v >= 0 and floor == hi and ref_rnd(v, s) - floor == 1)
    cmod = abs(floor - result) > 1
    assert bool(ops.rsat_flag(np.array([v]), s, n, semantics="rtl")[0]) == rtl
    assert bool(ops.rsat_flag(np.array([v]), s, n, semantics="cmod")[0]) == cmod
    overflow = ref_rnd(v, s) != result
    rounds_back_to_min = floor == -(1 << (n - 1)) - 1 and ref_rnd(v, s) == -(1 << (n - 1))
    assert rtl == (overflow or rounds_back_to_min)
    if overflow and not cmod:  # the overflows the cmod counter misses sit at the range edge
        assert floor in (hi, hi + 1, -(1 << (n - 1)) - 1)


def test_rsat_flag_boundary_diff():
    # [DIFF] 1.2: floor == max and the value rounds up -> RTL flags, cmod does not
    v, s, n = (127 << 4) + 8, 4, 8  # 127.5 rounds to 128, clamps to 127
    assert bool(ops.rsat_flag(np.array([v]), s, n, semantics="rtl")[0])
    assert not bool(ops.rsat_flag(np.array([v]), s, n, semantics="cmod")[0])


def test_rsat_shift_at_input_width_is_zero_on_rtl():
    # [DIFF] 1.1: RTL gives 0 for shift >= input width; the only cmod difference is -2^(W-1) >> W = -1
    assert int(ops.rsat(np.array([-(1 << 31)]), 32, 32, in_bits=32)[0]) == 0
    assert int(ops.rsat(np.array([-(1 << 31)]), 32, 32)[0]) == -1


@settings(max_examples=300, deadline=None)
@given(v=st.integers(-(1 << 40), 1 << 40), s=st.integers(0, 70), n=st.integers(2, 48))
def test_lsat_matches_exact_reference(v, s, n):
    assert int(ops.lsat(np.array([v]), s, n)[0]) == ref_clamp(v * (1 << s), n)


@settings(max_examples=300, deadline=None)
@given(v=st.integers(-(1 << 40), 1 << 40), s=st.integers(-16, 15), n=st.integers(8, 48))
def test_sshift_direction(v, s, n):
    want = ref_clamp(ref_rnd(v, s), n) if s >= 0 else ref_clamp(v * (1 << -s), n)
    assert int(ops.sshift(np.array([v]), s, n)[0]) == want


@settings(max_examples=300, deadline=None)
@given(d=st.integers(0, (1 << 34) - 1), s=st.integers(-40, 70), n=st.integers(1, 12))
def test_ishift_truncates_and_saturates(d, s, n):
    want = min(d >> s if s >= 0 else d << -s, (1 << n) - 1)
    assert int(ops.ishift(np.array([d]), s, n)[0]) == want


@settings(max_examples=300, deadline=None)
@given(
    x=st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=1, max_size=16),
    offset=st.integers(-(1 << 31), (1 << 31) - 1),
    scale=st.integers(-(1 << 15), (1 << 15) - 1),
    shift=st.integers(0, 63),
    out_bits=st.sampled_from([8, 16]),
)
@example(x=[200], offset=0, scale=1, shift=0, out_bits=8)  # clamp to int8 is silent (doc 2)
@example(x=[(1 << 31) - 1], offset=-(1 << 31), scale=-(1 << 15), shift=0, out_bits=16)  # extreme
@example(x=[3], offset=0, scale=1, shift=1, out_bits=8)  # 1.5 -> 2
@example(x=[-3], offset=0, scale=1, shift=1, out_bits=8)  # -1.5 -> -2
def test_sdp_output_convertor(x, offset, scale, shift, out_bits):
    """saturate(round((x - offset) * scale >> shift)): RSAT to 17 bits (flagged), then a
    silent clamp to the output width; RTL gives 0 for shift >= 49 (the 49-bit product)."""
    y, flag = output_convert(np.array(x, dtype=np.int64), offset=offset, scale=scale, shift=shift, out_bits=out_bits)
    for xi, yi, fi in zip(x, y.tolist(), flag.tolist(), strict=True):
        p = (xi - offset) * scale
        if shift >= 49:
            v17, f = 0, False
        else:
            r = ref_rnd(p, shift)
            v17 = ref_clamp(r, 17)
            floor = p >> shift
            f = floor != ref_clamp(floor, 17) or (p >= 0 and floor == (1 << 16) - 1 and r - floor == 1)
        assert yi == ref_clamp(v17, out_bits)
        assert fi == f
    if x == [200] and (offset, scale, shift) == (0, 1, 0):  # the hand-worked example above
        assert y.tolist() == [127] and flag.tolist() == [False]
