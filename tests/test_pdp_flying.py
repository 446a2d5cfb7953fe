"""SDP -> PDP on the fly (refmodel/sdp_fp.py ``fp_finish``, refmodel/pdp.py ``_flying_parts``).

* The bundled suite testvectors/pdp_flying, whose goldens are the outputs and PDP counters of
  NVDLA's C model (nv_full; ``nvdla-hil fuzz --unit sdp-pdp --seed 1 --target cmod --keep``:
  FP16 -> FP16 / INT16, INT16 -> FP16 / INT16, INT8 -> INT8 / INT16 and convolution -> SDP -> PDP),
  runs bit-exactly on the model target.
* Hand-worked FP16 layers (SDP all stages bypassed, PDP 2x1 on the fly) following seed 000 "FP16
  Supporting" (SDP maps INF to its largest value; no INF leaves a unit: FP16 saturates to
  65504 = 0x7bff; NaN propagates unless flushed) and the cmod's rules: PDP's D_NAN_FLUSH_TO_ZERO
  and its input counters belong to the off-flying PDP_RDMA path (``PoolingStage0SequenceCommon``,
  ``ExtractDmaPayload``); the stream is consumed in PDP's loop order (split slice, line, column).
"""

from __future__ import annotations


import numpy as np
import pytest
from _regview import RegView
from _suites import assert_cmod_provenance, assert_passes_on_model, bundled_cases

from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import InvalidLayer, ModelOptions
from nvdla_hil.harness.refmodel.sdp import run_sdp
from nvdla_hil.harness.vectors import load_case

CASES = bundled_cases("pdp_flying")
OPTS = ModelOptions(semantics="cmod", atom_bytes=32)
SRC, DST = 0x1000, 0x8000
FP17_HALF, FP17_ONE = 30 << 10, 31 << 10  # fp17 (bias 31) 0.5 and 1.0
MAX, AVE = 1, 0


def test_suite_is_bundled_with_cmod_goldens_of_every_path():
    assert_cmod_provenance(CASES)
    descs = []
    for p in CASES:
        c = load_case(p)
        assert c.launch[0] == "PDP" and c.statistics is not None, p
        descs.append(c.description)
    for path in ("fp16_to_fp16", "int16_to_fp16", "fp16_to_int16", "int16_to_int16", "int8_to_int8", "int8_to_int16",
                 "conv: conv fp16", "conv: conv int8", "conv: conv int16"):
        assert any(f"sdp-pdp {path}" in d for d in descs), path
    assert any("split 1 " not in d.replace("\n", " ") for d in descs)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_bundled_case_passes_on_model(case):
    assert_passes_on_model(case)


def _layer(x: np.ndarray, *, method: int, out_w: int, out_h: int, kw: int, split: tuple[int, int] | None = None) -> RegView:
    """SDP FP16 -> FP16 (bypassed) reading ``x`` (FP16 patterns ``[C, H, W]``, C <= 16), on the fly
    into PDP ``kw`` x 1 (stride ``kw``), recip 1/2 x 1, PDP NaN flush ON, optional split."""
    c, h, w = x.shape
    v = RegView(profile="nv_full")
    for blk in ("SDP_RDMA", "SDP"):
        v.set_field(blk, "D_DATA_CUBE_WIDTH", "WIDTH", w - 1).set_field(blk, "D_DATA_CUBE_HEIGHT", "HEIGHT", h - 1)
        v.set_field(blk, "D_DATA_CUBE_CHANNEL", "CHANNEL", c - 1)
    v.set("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC).set("SDP_RDMA", "D_SRC_LINE_STRIDE", 32 * w)
    v.set("SDP_RDMA", "D_SRC_SURFACE_STRIDE", 32 * w * h)
    for fld, val in (("IN_PRECISION", 2), ("PROC_PRECISION", 2), ("OUT_PRECISION", 2), ("FLYING_MODE", 0)):
        v.set_field("SDP_RDMA", "D_FEATURE_MODE_CFG", fld, val)
    v.set_field("SDP_RDMA", "D_SRC_DMA_CFG", "SRC_RAM_TYPE", 1)
    for dma in ("BRDMA", "NRDMA", "ERDMA"):
        v.set_field("SDP_RDMA", f"D_{dma}_CFG", f"{dma}_DISABLE", 1)
    v.set_field("SDP_RDMA", "D_PERF_ENABLE", "PERF_NAN_INF_COUNT_EN", 1)
    v.set_field("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE", 0).set_field("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST", 1)
    v.set_field("SDP", "D_DATA_FORMAT", "PROC_PRECISION", 2).set_field("SDP", "D_DATA_FORMAT", "OUT_PRECISION", 2)
    for st in ("BS", "BN", "EW"):
        v.set_field("SDP", f"D_DP_{st}_CFG", f"{st}_BYPASS", 1)
    v.set_field("SDP", "D_PERF_ENABLE", "PERF_NAN_INF_COUNT_EN", 1).set_field("SDP", "D_PERF_ENABLE", "PERF_SAT_EN", 1)
    v.set_field("PDP", "D_DATA_FORMAT", "INPUT_DATA", 2)
    v.set_field("PDP", "D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH", w - 1)
    v.set_field("PDP", "D_DATA_CUBE_IN_HEIGHT", "CUBE_IN_HEIGHT", h - 1)
    v.set_field("PDP", "D_DATA_CUBE_IN_CHANNEL", "CUBE_IN_CHANNEL", c - 1)
    v.set_field("PDP", "D_DATA_CUBE_OUT_WIDTH", "CUBE_OUT_WIDTH", out_w - 1)
    v.set_field("PDP", "D_DATA_CUBE_OUT_HEIGHT", "CUBE_OUT_HEIGHT", out_h - 1)
    v.set_field("PDP", "D_DATA_CUBE_OUT_CHANNEL", "CUBE_OUT_CHANNEL", c - 1)
    v.set_field("PDP", "D_OPERATION_MODE_CFG", "POOLING_METHOD", method)
    v.set_field("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE", 0)  # ON_FLYING
    if split is not None:
        v.set_field("PDP", "D_OPERATION_MODE_CFG", "SPLIT_NUM", 1)
        v.set_field("PDP", "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN_FIRST", split[0] - 1)
        v.set_field("PDP", "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN_LAST", split[1] - 1)
        v.set_field("PDP", "D_PARTIAL_WIDTH_OUT", "PARTIAL_WIDTH_OUT_FIRST", split[0] // kw - 1)
        v.set_field("PDP", "D_PARTIAL_WIDTH_OUT", "PARTIAL_WIDTH_OUT_LAST", split[1] // kw - 1)
    v.set_field("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_WIDTH", kw - 1)
    v.set_field("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH", kw - 1)
    v.set_field("PDP", "D_RECIP_KERNEL_WIDTH", "RECIP_KERNEL_WIDTH", FP17_HALF)
    v.set_field("PDP", "D_RECIP_KERNEL_HEIGHT", "RECIP_KERNEL_HEIGHT", FP17_ONE)
    v.set("PDP", "D_DST_BASE_ADDR_LOW", DST).set("PDP", "D_DST_LINE_STRIDE", 32 * out_w)
    v.set("PDP", "D_DST_SURFACE_STRIDE", 32 * out_w * out_h)
    v.set_field("PDP", "D_DST_RAM_CFG", "DST_RAM_TYPE", 1)
    v.set_field("PDP", "D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO", 1)
    return v


def _run(x: np.ndarray, out_w: int, out_h: int, **kw) -> tuple[np.ndarray, dict]:
    """Place ``x`` (one 16-lane surface), run the fused layer; PDP's output ``[lane, H, W]``."""
    c, h, w = x.shape
    mem = SparseMemory()
    atoms = np.zeros((h, w, 16), np.uint16)
    atoms[:, :, :c] = x.transpose(1, 2, 0)
    mem.write(SRC, atoms.reshape(-1).view(np.uint8))
    res = run_sdp(_layer(x, out_w=out_w, out_h=out_h, **kw), mem, OPTS)
    out = np.asarray(mem.read(DST, out_h * out_w * 32)).view(np.uint16).reshape(out_h, out_w, 16)
    return out.transpose(2, 0, 1), res.stats


# channel 0: 1.0, 2.0; channel 1: +INF, 1.0; channel 2: a NaN, 1.0 (one line of two columns)
X = np.array([[[0x3C00, 0x4000]], [[0x7C00, 0x3C00]], [[0x7E01, 0x3C00]]], dtype=np.uint16)


@pytest.mark.parametrize(("method", "ch0", "ch1"), [
    (MAX, 0x4000, 0x7BFF),  # max(1, 2) = 2; SDP turned +INF into fp32 max -> FP16 65504, the larger
    (AVE, 0x3E00, 0x77FF),  # (1 + 2) * 0.5 = 1.5; (65504 + 1) rounds to 65504 in fp17 (10-bit mantissa), * 0.5 = 32752
])
def test_fp16_sdp_to_pdp_hand_worked(method, ch0, ch1):
    out, stats = _run(X, 1, 1, method=method, kw=2)
    assert out[0, 0, 0] == ch0 and out[1, 0, 0] == ch1
    nan = out[2, 0, 0]
    assert (nan & 0x7C00) == 0x7C00 and (nan & 0x3FF) != 0  # PDP's NaN flush (ON) is not applied on the fly
    assert np.all(out[3:] == 0)  # padding lanes (zero in memory) pooled like the others
    assert stats[("PDP", "D_NAN_OUTPUT_NUM")] == 1
    assert stats[("PDP", "D_NAN_INPUT_NUM")] == 0 and stats[("PDP", "D_INF_INPUT_NUM")] == 0  # PDP_RDMA counts, idle
    assert stats[("SDP_RDMA", "D_STATUS_NAN_INPUT_NUM")] == 1 and stats[("SDP_RDMA", "D_STATUS_INF_INPUT_NUM")] == 1
    assert stats[("SDP", "D_STATUS_NAN_OUTPUT_NUM")] == 1 and stats[("SDP", "D_PERF_OUT_SATURATION")] == 1


def test_split_consumes_the_stream_in_pdp_order():
    # 4x2 input, 1x1 MAX (identity), split 2 + 2 columns: slice 0 takes the first 2 lines x 2 columns of
    # the stream = SDP's line 0 (columns 0..3); slice 1 the rest = line 1
    x = (0x3C00 + np.arange(8, dtype=np.uint16)).reshape(1, 2, 4)  # distinct FP16 values, 1.0 + k ulp
    out, _ = _run(x, 4, 2, method=MAX, kw=1, split=(2, 2))
    stream = x[0].reshape(-1)
    assert out[0].tolist() == [[stream[0], stream[1], stream[4], stream[5]], [stream[2], stream[3], stream[6], stream[7]]]


def test_refusals():
    # EW EQL: SDP sends nothing to PDP (cmod SdpDataOperationDC), PDP would wait forever
    v = _layer(X, method=MAX, out_w=1, out_h=1, kw=2)
    v.set_field("SDP", "D_DP_EW_CFG", "EW_BYPASS", 0).set_field("SDP", "D_DP_EW_CFG", "EW_ALU_ALGO", 3)
    v.set_field("SDP", "D_DP_EW_CFG", "EW_MUL_BYPASS", 1).set_field("SDP", "D_DP_EW_CFG", "EW_LUT_BYPASS", 1)
    with pytest.raises(InvalidLayer, match="EQL"):
        run_sdp(v, SparseMemory(), OPTS)
    # split with kernel overlap: PDP re-reads columns SDP never re-sends
    v = _layer(X, method=MAX, out_w=1, out_h=1, kw=2)
    v.set_field("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH", 0)
    v.set_field("PDP", "D_OPERATION_MODE_CFG", "SPLIT_NUM", 1)
    v.set_field("PDP", "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN_FIRST", 1)
    v.set_field("PDP", "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN_LAST", 0)
    with pytest.raises(InvalidLayer, match="waits forever"):
        run_sdp(v, SparseMemory(), OPTS)
