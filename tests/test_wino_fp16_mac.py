"""The FP16 Winograd CMAC step, vectorised (harness/refmodel/conv/winograd.py ``fp16_wino_mac_steps`` over
cmac_fp16 ``fp16_mac_groups``), against the rule written out one output at a time here.

The rule (nvdlav1 cmod/cmac/NV_NVDLA_cmac.h ``calculation_fp16`` with ``winograd_op_``, cal_fp16_nan /
cal_fp16_exp / cal_fp16_mul / cal_fp16_booth): per kernel and input tile, each of the 64 elements
(position * 4 + channel) whose weight and datum are both non-zero takes part; an FP16 exponent ``e``
splits into a coarse part ``e >> 2`` and a fine part ``e & 3`` (1 for a subnormal) that pre-shifts
the 11-bit significand; every product is aligned to the largest coarse exponent sum of the 64 by
the Booth multiplier (:func:`booth_product`, itself checked against the exact product in
tests/test_conv_fp16.py), the 4 channels of each position are summed (phase 1), then ``A^T M A``
(phases 2/3); the exponent is 4 x that largest sum. The first NaN weight, else the first NaN datum,
makes all four outputs NaN (exponent 63, mantissa sign << 37 | payload << 27).
"""

from __future__ import annotations

import numpy as np
from nvdla_hil.harness.refmodel.conv.cmac_fp16 import booth_product
from nvdla_hil.harness.refmodel.conv.winograd import fp16_wino_mac_steps

A_T = [[1, 1, 1, 0], [0, 1, -1, -1]]


def _one_output(w: list[int], d: list[int]) -> tuple[int, list[list[int]]]:
    """One kernel x one tile, element by element (the rule in the module docstring)."""
    # the first NaN weight, else the first NaN datum (cal_fp16_nan)
    nan = next((v for v in w if (v >> 10) & 31 == 31 and v & 0x3FF), None)
    if nan is None:
        nan = next((v for v in d if (v >> 10) & 31 == 31 and v & 0x3FF), None)
    if nan is not None:
        m = (((nan >> 15) & 1) << 37) | ((nan & 0x3FF) << 27)
        return 63, [[m, m], [m, m]]
    coarse, sig, neg = [], [], []
    for a, b in zip(w, d, strict=True):
        on = (a & 0x7FFF) != 0 and (b & 0x7FFF) != 0
        ea, eb = (a >> 10) & 31, (b >> 10) & 31
        coarse.append((ea >> 2) + (eb >> 2) if on else None)
        ma = ((a & 0x3FF) | ((ea != 0) << 10)) << (1 if ea == 0 else ea & 3)
        mb = ((b & 0x3FF) | ((eb != 0) << 10)) << (1 if eb == 0 else eb & 3)
        sig.append((ma, mb))
        neg.append(((a ^ b) >> 15) & 1)
    top = max([c for c in coarse if c is not None], default=0)
    m4 = [[0] * 4 for _ in range(4)]
    for i, c in enumerate(coarse):
        if c is None:
            continue
        p = int(booth_product(np.array([neg[i]]), np.array([sig[i][0]]), np.array([sig[i][1]]),
                              np.array([(top - c) * 4]))[0])
        pos = i // 4
        m4[pos // 4][pos % 4] += p
    am = [[sum(A_T[r][j] * m4[j][k] for j in range(4)) for k in range(4)] for r in range(2)]
    y = [[sum(am[r][k] * A_T[c][k] for k in range(4)) for c in range(2)] for r in range(2)]
    return 4 * top, y


def _patterns(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """FP16 patterns: normals over the whole exponent range, zeros of both signs, subnormals, a few NaN / INF."""
    p = rng.integers(0, 1 << 16, shape)
    kind = rng.random(shape)
    p = np.where(kind < 0.15, p & 0x8000, p)  # +-0
    p = np.where((kind >= 0.15) & (kind < 0.25), p & 0x83FF, p)  # subnormals
    exp31 = (p & 0x7C00) == 0x7C00
    return np.where(exp31 & (rng.random(shape) < 0.9), p & 0xBBFF, p)  # mostly not INF / NaN


def test_winograd_fp16_steps_follow_the_rule_output_by_output():
    rng = np.random.default_rng(41)
    for k, n, steps, nan in ((3, 5, 2, False), (7, 2, 1, False), (2, 9, 3, True), (1, 1, 1, False)):
        w = _patterns(rng, (steps, k, 64))
        d = _patterns(rng, (steps, 64, n))
        if not nan:
            w = np.where(((w & 0x7C00) == 0x7C00) & ((w & 0x3FF) != 0), 0x3C00, w)
            d = np.where(((d & 0x7C00) == 0x7C00) & ((d & 0x3FF) != 0), 0x3C00, d)
        else:
            w[0, 1, 17] = 0x7E05  # a NaN weight of kernel 1, step 0
            d[1, 40, 2] = 0xFC31  # a NaN datum of pixel 2, step 1
        exp, mant = fp16_wino_mac_steps(w, d)
        assert exp.shape == (steps, k, n) and mant.shape == (steps, k, n, 2, 2)
        for s in range(steps):
            for i in range(k):
                for j in range(n):
                    e, y = _one_output([int(v) for v in w[s, i]], [int(v) for v in d[s, :, j]])
                    assert (int(exp[s, i, j]), mant[s, i, j].tolist()) == (e, y), (k, n, s, i, j)


def test_one_position_times_one_by_hand():
    # 1.0 (exponent 15: coarse 3, fine 3 -> 0x400 << 3 = 8192) times 1.0 at position (0, 0), channel 0:
    # M has 2^26 at (0, 0) alone; A^T M A puts it in output (0, 0) only; exponent 4 * (3 + 3) = 24
    w = np.zeros((1, 1, 64), dtype=np.int64)
    d = np.zeros((1, 64, 1), dtype=np.int64)
    w[0, 0, 0] = d[0, 0, 0] = 0x3C00
    exp, mant = fp16_wino_mac_steps(w, d)
    assert int(exp[0, 0, 0]) == 24
    assert mant[0, 0, 0].tolist() == [[1 << 26, 0], [0, 0]]
