"""Sparse-compressed weights (WMB / WGS / data): harness/refmodel/conv/compressed.py and the
bundled testvectors/conv_compressed suite.

Goldens: hand-worked bit streams (seed 000 "Sparse Compression option": one little-endian bit per
element, non-zero elements packed compactly), weights packed by the layouts' independent
``nvdla.weight.compressed`` writer, and for the suite the C model's own outputs recorded with
``nvdla-hil fuzz --target cmod --keep``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.layouts import get_layout
from nvdla_hil.harness.layouts.nvdla import compressed_offsets
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import InvalidLayer, ModelOptions
from nvdla_hil.harness.refmodel.conv.compressed import decompress_stream, read_compressed_weights

from test_conv_image import _View, run_suite_case  # noqa: I001 - the sibling test module's helpers

ROOT = Path(__file__).resolve().parents[1] / "testvectors"
PROF = load_profile("nv_full")
OPTS = ModelOptions.for_profile(PROF, "cmod")


def test_decompress_stream_by_hand():
    # bits 0 and 2 of the first byte and bit 7 of the second: elements 0, 2 and 15 take the data bytes in order
    out = decompress_stream(np.array([0b00000101, 0b10000000], np.uint8), np.array([5, 0xF9, 9], np.uint8), 16, 1)
    assert out.view(np.int8).tolist() == [5, 0, -7] + [0] * 12 + [9]
    # 2-byte elements: one bit per element, little-endian halves
    out = decompress_stream(np.array([0b10], np.uint8), np.array([0x34, 0x12], np.uint8), 3, 2)
    assert out.view("<i2").tolist() == [0, 0x1234, 0]


def _layer(w: np.ndarray, *, prec: int, wgs_fix: int | None = None, wmb_bytes: int | None = None,
           weight_bytes: int | None = None) -> tuple[_View, SparseMemory]:  # fmt: skip
    spec = get_layout("nvdla.weight.compressed")
    blob = spec.pack_fn(w, spec.resolve({"profile": "nv_full", "base": "dc"}))
    K = w.shape[0]
    g = 32 if prec == 0 else 16
    wmb_off, data_off = compressed_offsets(-(-K // g), w.size)
    base = 0x10000
    mem = SparseMemory()
    mem.write(base, blob)
    if wgs_fix is not None:
        mem.write(base, np.array([wgs_fix], "<u4").view(np.uint8))
    wmb = wmb_bytes if wmb_bytes is not None else -(-w.size // 1024) * 128
    wb = weight_bytes if weight_bytes is not None else max(128, blob.size - data_off)
    v = _View(CDMA__D_MISC_CFG__PROC_PRECISION=prec, CDMA__D_WMB_BYTES__WMB_BYTES=wmb >> 7,
              CSC__D_WMB_BYTES__WMB_BYTES=wmb >> 7, CDMA__D_WEIGHT_BYTES__WEIGHT_BYTES=wb >> 7,
              CDMA__D_WGS_ADDR_LOW__WGS_ADDR_LOW=base >> 5, CDMA__D_WMB_ADDR_LOW__WMB_ADDR_LOW=(base + wmb_off) >> 5,
              CDMA__D_WEIGHT_ADDR_LOW__WEIGHT_ADDR_LOW=(base + data_off) >> 5)  # fmt: skip
    return v, mem


@pytest.mark.parametrize(("prec", "dtype"), [(0, np.int8), (1, np.int16), (2, np.float16)])
def test_round_trip_through_the_layout_writer(prec: int, dtype):
    rng = np.random.default_rng(prec)
    shape = (40, 70, 2, 3)  # 2 (int8) / 3 (int16) kernel groups, channel slices of 64 + 6
    if dtype == np.float16:
        w = rng.standard_normal(shape).astype(np.float16)
    else:
        w = rng.integers(-100, 100, shape).astype(dtype)
    w[rng.random(shape) < 0.6] = 0
    w[16:32] = 0  # a whole INT16/FP16 kernel group of zeros (half an INT8 one)
    if dtype == np.float16:
        w[0, 0, 0, 0] = np.float16(-0.0)  # a non-zero element for the WMB
    v, mem = _layer(w, prec=prec)
    got = read_compressed_weights(v, mem, OPTS, *shape)
    want = w.view(np.int8 if prec == 0 else np.int16).astype(np.int64)
    assert np.array_equal(got, want)


def test_all_zero_weights():
    w = np.zeros((5, 3, 1, 1), np.int8)
    v, mem = _layer(w, prec=0)
    assert not read_compressed_weights(v, mem, OPTS, 5, 3, 1, 1).any()


@pytest.mark.parametrize(
    ("kw", "what"),
    [({"wgs_fix": 7}, "WGS"), ({"wmb_bytes": 0}, "WMB_BYTES"), ({"weight_bytes": 0}, "WEIGHT_BYTES")],
)
def test_untrusted_sizes_are_refused(kw, what):
    w = np.arange(1, 301, dtype=np.int64).reshape(3, 100, 1, 1).astype(np.int8)
    v, mem = _layer(w, prec=0, **kw)
    with pytest.raises(InvalidLayer, match=what):
        read_compressed_weights(v, mem, OPTS, 3, 100, 1, 1)


def _cases(suite: str) -> list[Path]:
    from nvdla_hil.harness.vectors import find_cases

    return find_cases(ROOT / suite)


def test_conv_compressed_suite_is_compressed():
    cases = _cases("conv_compressed")
    assert len(cases) >= 10
    for p in cases:
        assert "nvdla.weight.compressed" in p.joinpath("case.yaml").read_text()


@pytest.mark.parametrize("path", _cases("conv_compressed"), ids=lambda p: p.name)
def test_conv_compressed_suite_on_the_model(path: Path, monkeypatch: pytest.MonkeyPatch):
    run_suite_case(path, monkeypatch)
