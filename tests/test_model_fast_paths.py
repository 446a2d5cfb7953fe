"""The model's fast paths against the slower rules they stand for (issue 29: per-layer speed).

* A LUT table load as one burst on the model target must leave the tables and the port's address
  exactly as the same words written one at a time (the port rules of semantics doc 7, both
  semantics, both units, every start address / length / access type class).
* ``fp32_to_fp16_bits`` (numpy's IEEE float32 -> binary16 cast, INF -> +/-0x7bff, NaN patched)
  against the C model's ``FpWidthDec<8,23,5,10>`` algorithm as transcribed in ``fp16._narrow``
  (nvdlav1 ``cmod/hls/include/nvdla_float.h``), on every exponent with the mantissas at the
  rounding boundaries.
* PDP FP16 pooling of split slices in one pass equals pooling each slice alone (each output
  from its own slice's taps and pads).
"""

from __future__ import annotations

import numpy as np
import pytest

from nvdla_hil.harness.refmodel import fp16 as F
from nvdla_hil.harness.refmodel.pdp import AVE, MAX, MIN, PdpConfig, pool2d_fp16
from nvdla_hil.harness.refmodel.pdp_fp import pool2d_fp16_slices
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.semantics import Semantics


@pytest.mark.parametrize("semantics", ["rtl", "cmod"])
def test_lut_burst_equals_word_by_word(semantics: Semantics) -> None:
    rng = np.random.default_rng(29)
    with ModelTarget("nv_full", semantics=semantics) as burst, ModelTarget("nv_full", semantics=semantics) as words:
        for unit in ("SDP", "CDP"):
            cfg = burst.regmap.register(unit, "S_LUT_ACCESS_CFG")
            data = burst.regmap.register(unit, "S_LUT_ACCESS_DATA")
            for table in (0, 1):
                for write in (0, 1):
                    for addr in (0, 5, 64, 65, 256, 257, 1023):
                        for n in (0, 1, 65, 257, 300, 1100):
                            values = rng.integers(0, 1 << 32, n).tolist()
                            value = cfg.encode(LUT_ADDR=addr, LUT_TABLE_ID=table, LUT_ACCESS_TYPE=write)
                            for t in (burst, words):
                                t.reset()
                                t.write32(cfg.address, value)
                            burst.write_burst(data.address, values, incr=False)
                            for v in values:
                                words.write32(data.address, v)
                            where = f"{semantics} {unit} table {table} write {write} addr {addr} n {n}"
                            assert burst._lut_ports[unit].addr == words._lut_ports[unit].addr, where
                            for name in ("LE", "LO"):
                                assert np.array_equal(burst._luts[unit][name], words._luts[unit][name]), where


def test_fp32_to_fp16_cast_matches_cmod_algorithm() -> None:
    rng = np.random.default_rng(16)
    # low 13 bits around the round-to-nearest-even boundary, the bit above it both ways, and random ones
    low = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x17FF, 0x1800, 0x0800], dtype=np.int64)
    mant = np.concatenate([(hi << 13) | low for hi in (0, 1, 2, 0x3FE, 0x3FF)] + [rng.integers(0, 1 << 23, 64)])
    exp = np.arange(256, dtype=np.int64)
    x = ((exp[:, None] << 23) | mant[None, :]).ravel()
    x = np.concatenate([x, x | (1 << 31), rng.integers(0, 1 << 32, 1 << 16)])
    expected = F._narrow(x, 5, denorm=True).astype(np.uint16)
    got = F.fp32_to_fp16_bits(x)
    bad = np.flatnonzero(got != expected)
    assert got.dtype == np.uint16 and not bad.size, [(hex(int(x[i])), hex(int(expected[i])), hex(int(got[i]))) for i in bad[:5]]


@pytest.mark.parametrize("method", [AVE, MAX, MIN])
def test_pdp_fp16_slices_pool_as_each_alone(method: int) -> None:
    rng = np.random.default_rng(method + 7)
    for _ in range(20):
        kw, kh = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        sw, sh = int(rng.integers(1, kw + 1)), int(rng.integers(1, kh + 1))
        raw = tuple(int(v) for v in rng.integers(0, 1 << 17, 7)) if rng.random() < 0.5 else (0,) * 7
        cfg = PdpConfig(method=method, kernel_w=kw, kernel_h=kh, stride_w=sw, stride_h=sh, pad_top=int(rng.integers(0, kh)),
                        recip_w=int(rng.integers(0, 1 << 17)), recip_h=int(rng.integers(0, 1 << 17)), bits=16, fp16=True,
                        pad_raw=(0, *raw))  # fmt: skip
        h = int(rng.integers(kh, 6))
        out_h = (h + cfg.pad_top - kh) // sh + 1
        slices, parts, off = [], [], 0
        for _ in range(int(rng.integers(1, 4))):
            n_in, pl = int(rng.integers(kw, 8)), int(rng.integers(0, kw))
            o_w = (n_in + pl - kw) // sw + 1
            part = rng.integers(0, 1 << 16, (2, h, n_in, 4)).astype(np.uint16)
            part[rng.random(part.shape) < 0.02] = 0x7E01  # some NaN
            slices.append((off, n_in, o_w, pl))
            parts.append(part)
            off += n_in
        together = pool2d_fp16_slices(np.concatenate(parts, axis=-2), cfg, slices, out_h)
        alone = np.concatenate([pool2d_fp16(p, cfg, o_w, out_h, pad_left=pl) for p, (_, _, o_w, pl) in zip(parts, slices)],
                               axis=-2)  # fmt: skip
        assert np.array_equal(together, alone), (cfg, slices)
