"""PDP FP16 pooling (harness/refmodel/pdp_fp.py ``pool2d_fp16``: the AVERAGE fold on float32 values with
the NaN that wins put in after, MAX / MIN as one integer reduction when no NaN is among the inputs)
against the rule written out here output by output.

The rule (harness/refmodel/pdp.py docstring, FP16; nvdlav1 cmod/hls_wrapper/pdp_hls_wrapper.cpp
``HLS_PDP_PoolingStage0Calc_FP16_W/_H``, ``HLS_PDP_PoolingStage1Calc_FP16``): MAX / MIN fold
``FpMax/FpMin<5,10>`` over the real columns of the window's rows (``cmp(acc, x)``), then over its
real rows (``cmp(row, acc)``). AVERAGE folds in fp17: per real row ``o = x`` at the first real
column, else ``o = fp17_add(o, x)``, after each column ``o = fp17_add(fp17_add(o, PL), PR)`` with
``PL``/``PR`` +0 except at the last real column (``P[lead + trail]`` / +0 with leading padding,
else +0 / ``P[trail]``); the rows the same way (``acc = fp17_add(row, acc)``, then ``+ PT*KW``,
``+ PB*KW``); output ``Fp17ToFp16(fp17_mul(fp17_mul(acc, RW), RH))``. The scalar arithmetic is
``fp16.fp17_add_bits`` / ``fp17_mul_bits`` / ``fp16_extra.fp16_cmp_bits`` (checked against NVDLA's
C model by the bundled suites, testvectors/pdp_fp16).
"""

from __future__ import annotations

import numpy as np
import pytest
from nvdla_hil.harness.refmodel.fp16 import fp16_to_fp17_bits, fp17_add_bits, fp17_mul_bits
from nvdla_hil.harness.refmodel.fp16_extra import fp16_cmp_bits, fp17_to_fp16_bits
from nvdla_hil.harness.refmodel.pdp import AVE, MAX, MIN, PdpConfig, pool2d_fp16

KW_FP17 = (0x0000, 0x7C00, 0x8000, 0x8200, 0x8400, 0x8500, 0x8600, 0x8700, 0x8800)  # 1.0 .. 8.0 as fp17


def _add(a: int, b: int) -> int:
    return int(fp17_add_bits(np.int64(a), np.int64(b)))


def _edge(start: int, k: int, n_in: int, p: tuple[int, ...]) -> tuple[int, int]:
    lead, trail = max(0, -start), max(0, start + k - n_in)
    if lead and trail:
        return p[min(lead + trail, 7)], 0
    if lead:
        return p[min(lead, 7)], 0
    return 0, p[min(trail, 7)] if trail else 0


def _reference(x: np.ndarray, cfg: PdpConfig, out_w: int, out_h: int) -> np.ndarray:
    """One lane ``x`` (H, W) of FP16 patterns, output by output (the rule in the module docstring)."""
    h, w = x.shape
    out = np.zeros((out_h, out_w), dtype=np.int64)
    for oy in range(out_h):
        y0 = oy * cfg.stride_h - cfg.pad_top
        rows = [y for y in range(y0, y0 + cfg.kernel_h) if 0 <= y < h]
        for ox in range(out_w):
            x0 = ox * cfg.stride_w - cfg.pad_left
            cols = [c for c in range(x0, x0 + cfg.kernel_w) if 0 <= c < w]
            acc = None
            for y in rows:
                o = None
                for c in cols:
                    v = int(x[y, c])
                    if cfg.method == AVE:
                        v = int(fp16_to_fp17_bits(np.uint16(v)))
                        o = v if o is None else _add(o, v)
                        pl, pr = _edge(x0, cfg.kernel_w, w, cfg.pad_raw) if c == cols[-1] else (0, 0)
                        o = _add(_add(o, pl), pr)
                    else:
                        o = v if o is None else int(fp16_cmp_bits(o, v, take_max=cfg.method == MAX))
                assert o is not None
                if cfg.method == AVE:
                    acc = o if acc is None else _add(o, acc)
                    pt, pb = _edge(y0, cfg.kernel_h, h, cfg.pad_raw) if y == rows[-1] else (0, 0)
                    kw = np.int64(KW_FP17[min(cfg.kernel_w, 8)])
                    acc = _add(_add(acc, int(fp17_mul_bits(np.int64(pt), kw))), int(fp17_mul_bits(np.int64(pb), kw)))
                else:
                    acc = o if acc is None else int(fp16_cmp_bits(o, acc, take_max=cfg.method == MAX))
            assert acc is not None
            if cfg.method == AVE:
                t = fp17_mul_bits(fp17_mul_bits(np.int64(acc), np.int64(cfg.recip_w)), np.int64(cfg.recip_h))
                acc = int(fp17_to_fp16_bits(t))
            out[oy, ox] = acc
    return out


def _fp16(rng: np.random.Generator, shape: tuple[int, ...], nan: float, cancel: bool) -> np.ndarray:
    """FP16 patterns: small normals (sums that round), +-0, subnormals, INF, and NaN at rate ``nan``;
    ``cancel``: +-0, +-1 and +-2 only (sums that cancel to zeros whose sign is FpAdd's rule)."""
    sign = rng.integers(0, 2, shape) << 15
    if cancel:
        v = sign | rng.choice(np.array([0, 0x3C00, 0x4000]), shape)
        return np.where(rng.random(shape) < nan, sign | 0x7C00 | rng.integers(1, 1 << 10, shape), v)
    v = sign | (rng.integers(10, 20, shape) << 10) | rng.integers(0, 1 << 10, shape)
    kind = rng.random(shape)
    v = np.where(kind < 0.1, sign, v)
    v = np.where((kind >= 0.1) & (kind < 0.15), sign | rng.integers(1, 1 << 10, shape), v)
    v = np.where((kind >= 0.15) & (kind < 0.18), sign | 0x7C00, v)
    return np.where(rng.random(shape) < nan, sign | 0x7C00 | rng.integers(1, 1 << 10, shape), v)


@pytest.mark.parametrize("method", [AVE, MAX, MIN])
@pytest.mark.parametrize("nan", [0.0, 0.08])
@pytest.mark.parametrize("cancel", [False, True])
def test_fp16_pooling_follows_the_rule_output_by_output(method: int, nan: float, cancel: bool):
    rng = np.random.default_rng(41 + method + int(nan * 100) + 7 * cancel)
    done = 0
    while done < 12:
        kw, kh, sw, sh = (int(v) for v in rng.integers(1, 5, 4))
        pl, pt, pr, pb = int(rng.integers(0, kw)), int(rng.integers(0, kh)), int(rng.integers(0, kw)), int(rng.integers(0, kh))
        h, w = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        if w + pl + pr < kw or h + pt + pb < kh:
            continue
        out_w, out_h = (w + pl + pr - kw) // sw + 1, (h + pt + pb - kh) // sh + 1
        pads = tuple(int(v) for v in rng.integers(0, 1 << 17, 7) & ~(1 << 15))  # fp17, exponent below 63
        if cancel or rng.random() < 0.3:
            pads = (0,) * 7
        cfg = PdpConfig(method=method, kernel_w=kw, kernel_h=kh, stride_w=sw, stride_h=sh, pad_left=pl, pad_top=pt,
                        pad_right=pr, pad_bottom=pb, recip_w=int(rng.integers(0x6000, 0x8000)),
                        recip_h=int(rng.integers(0x6000, 0x8000)), bits=16, fp16=True, pad_raw=(0, *pads))
        x = _fp16(rng, (2, h, w, 3), nan, cancel)
        got = pool2d_fp16(x, cfg, out_w, out_h)
        assert got.shape == (2, out_h, out_w, 3)
        for g in range(2):
            for lane in range(3):
                ref = _reference(x[g, :, :, lane], cfg, out_w, out_h)
                assert got[g, :, :, lane].astype(np.int64).tolist() == ref.tolist(), (cfg, g, lane)
        done += 1
