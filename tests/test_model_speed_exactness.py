"""The model's fast paths against slower ones that state the same rule:

* the compiled PDP FP16 fold's scalar arithmetic (harness/refmodel/pdp_fp_fold.py ``_fp17_add_1``,
  ``_fp17_mul_1``, ``_fp16_cmp_1``) against the numpy field-by-field formulations
  (``fp16._fp_add`` / ``_fp_mul`` with 6/10 bits, ``fp16_extra.fp16_cmp_bits``) and the float32 ones
  (``fp16.fp17_add_bits`` / ``fp17_mul_bits``), on random and edge patterns (NaN, the INF pattern,
  the maximum, +-0, exponent 0 with a mantissa);
* the fold with NaN / INF-pattern pads and reciprocals and kernels up to 8 against the output-by-output
  rule of tests/test_pdp_fp16_fold.py;
* ModelTarget.read32's remembered plain reads against its register file (dual registers follow
  S_POINTER.PRODUCER).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from nvdla_hil.harness.refmodel.fp16 import _fp_add, _fp_mul, fp17_add_bits, fp17_mul_bits
from nvdla_hil.harness.refmodel.fp16_extra import fp16_cmp_bits
from nvdla_hil.harness.refmodel.pdp import AVE, MAX, MIN, PdpConfig, pool2d_fp16
from nvdla_hil.harness.refmodel.pdp_fp_fold import _fp16_cmp_1, _fp17_add_1, _fp17_mul_1
from nvdla_hil.harness.targets.model import ModelTarget
from test_pdp_fp16_fold import _fp16, _reference  # noqa: I001 - the sibling test module's rule, output by output


@njit(cache=False)
def _each(op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(a.size, np.int64)
    for i in range(a.size):
        if op == 0:
            out[i] = _fp17_add_1(a[i], b[i])
        elif op == 1:
            out[i] = _fp17_mul_1(a[i], b[i])
        else:
            out[i] = _fp16_cmp_1(a[i], b[i], op == 2)
    return out


def _patterns(rng: np.random.Generator, n: int, bits: int) -> np.ndarray:
    """Random ``bits``-bit patterns, a third of them edge cases (exponent all ones, its neighbours, zeros)."""
    e_bits = bits - 11
    emax = (1 << e_bits) - 1
    sign = rng.integers(0, 2, n) << (bits - 1)
    e = rng.choice(np.array([0, 1, 2, emax - 2, emax - 1, emax, emax // 2]), n)
    m = rng.choice(np.array([0, 1, 0x200, 0x3FF, 0x3FE]), n)
    edge = sign | (e << 10) | m
    return np.where(rng.random(n) < 0.35, edge, rng.integers(0, 1 << bits, n)).astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
def test_fold_arithmetic_matches_the_field_rules(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = _patterns(rng, 200_000, 17), _patterns(rng, 200_000, 17)
    b[: 20_000] = a[: 20_000] ^ (1 << 16)  # x + (-x): the zero's sign
    add, mul = _each(0, a, b), _each(1, a, b)
    assert np.array_equal(add, _fp_add(a, b, 6, 10))
    assert np.array_equal(mul, _fp_mul(a, b, 6, 10))
    assert np.array_equal(add, fp17_add_bits(a, b))  # float32 when no INF pattern, else the fields
    assert np.array_equal(mul, fp17_mul_bits(a, b))
    h, g = _patterns(rng, 200_000, 16), _patterns(rng, 200_000, 16)
    assert np.array_equal(_each(2, h, g), fp16_cmp_bits(h, g, take_max=True))
    assert np.array_equal(_each(3, h, g), fp16_cmp_bits(h, g, take_max=False))


@pytest.mark.parametrize("method", [AVE, MAX, MIN])
def test_fold_with_special_pads_and_reciprocals(method: int) -> None:
    rng = np.random.default_rng(100 + method)
    special = np.array([0, 0x10000, 63 << 10, (63 << 10) | 7, 0x10000 | (63 << 10), 5, (62 << 10) | 0x3FF, 0x7C00])
    done = 0
    while done < 25:
        kw, kh, sw, sh = (int(v) for v in rng.integers(1, 9, 4))
        pl, pt, pr, pb = (int(rng.integers(0, k)) for k in (kw, kh, kw, kh))
        h, w = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        if w + pl + pr < kw or h + pt + pb < kh:
            continue
        out_w, out_h = (w + pl + pr - kw) // sw + 1, (h + pt + pb - kh) // sh + 1
        pads = tuple(int(v) for v in rng.choice(special, 7))
        rw, rh = (int(rng.choice(special)) if rng.random() < 0.3 else int(rng.integers(0x6000, 0x8000)) for _ in range(2))
        cfg = PdpConfig(method=method, kernel_w=kw, kernel_h=kh, stride_w=sw, stride_h=sh, pad_left=pl, pad_top=pt,
                        pad_right=pr, pad_bottom=pb, recip_w=rw, recip_h=rh, bits=16, fp16=True, pad_raw=(0, *pads))
        x = _fp16(rng, (1, h, w, 2), 0.05, bool(rng.random() < 0.3))
        got = pool2d_fp16(x, cfg, out_w, out_h)
        for lane in range(2):
            assert got[0, :, :, lane].astype(np.int64).tolist() == _reference(x[0, :, :, lane], cfg, out_w, out_h).tolist()
        done += 1


def test_model_plain_reads_follow_the_register_file() -> None:
    rng = np.random.default_rng(5)
    with ModelTarget("nv_full", semantics="cmod") as m:
        regs = [r for r in m.regmap.registers() if r.writable and r.readable and not r.trigger
                and r.name not in ("S_POINTER",) and r.block in ("PDP", "SDP", "CDP", "PDP_RDMA")]
        ptrs = {b: m.regmap.register(b, "S_POINTER").address for b in ("PDP", "SDP", "CDP", "PDP_RDMA")}
        # a shadow kept here: a dual register's group is the one S_POINTER.PRODUCER names at the
        # time (NVDLA's ping-pong register files), a single register has one copy
        producer, shadow = dict.fromkeys(ptrs, 0), {}
        compared = 0
        for _ in range(3000):
            r = regs[int(rng.integers(len(regs)))]
            if rng.random() < 0.2:
                producer[r.block] = int(rng.integers(0, 2))
                m.write32(ptrs[r.block], producer[r.block])
            g = producer[r.block] if r.dual else 0
            if rng.random() < 0.5:
                v = int(rng.integers(0, 1 << 32))
                m.write32(r.address, v)
                shadow[(r.address, g)] = v & r.writable_mask
            if (r.address, g) in shadow:
                assert m.read32(r.address) == shadow[(r.address, g)], (r.full_name, g)
                compared += 1
        assert compared > 2000 and any(r.dual for r in regs)
        assert m._plain_reads  # the remembered path was taken
