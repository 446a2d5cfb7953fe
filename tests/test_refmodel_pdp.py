"""PDP (pooling) reference model: hand-worked cases, scalar property test, trace CRCs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import numpy as np
import pytest
from _regview import RegView, run_on_model, trace_names
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import ModelOptions, UnitNotModelled
from nvdla_hil.harness.refmodel.pdp import AVE, MAX, MIN, PdpConfig, pad_values, pool2d, run_pdp


Q16 = 1 << 16


def _pool(x2d, cfg, ow, oh):
    x = np.asarray(x2d, dtype=np.int64)[:, :, None]  # [h, w, 1 lane]
    return pool2d(x, cfg, ow, oh)[:, :, 0].tolist()


def test_pad_values_sign_extension():
    # n=1 sign bit 7, n=2 bit 8, n=3/4 bit 9, n=5..7 bit 10
    assert pad_values([0x80, 0x100, 0x200, 0x1FF, 0x400, 0x3FF, 0x7FF]) == (0, -128, -256, -512, 511, -1024, 1023, -1)
    # bits above the sign bit are not masked when the sign bit is clear (cmod OR), kept as int16
    assert pad_values([0x17F, 0, 0, 0, 0, 0, 0])[1] == 0x17F


def test_average_without_padding_two_stage_rounding():
    # 2x2 window sum 1+2+3+5 = 11; RW = RH = 0.5: t = rnd(5.5) = 6, out = rnd(3) = 3
    cfg = PdpConfig(method=AVE, kernel_w=2, kernel_h=2, stride_w=2, stride_h=2, recip_w=Q16 // 2, recip_h=Q16 // 2)
    assert _pool([[1, 2], [3, 5]], cfg, 1, 1) == [[3]]
    # negative tie: sum -11 -> t = rnd(-5.5) = -6 -> out = -3
    assert _pool([[-1, -2], [-3, -5]], cfg, 1, 1) == [[-3]]
    # -9 -> t = rnd(-4.5) = -5 -> rnd(-2.5) = -3 (away from zero twice; exact -2.25 would give -2)
    assert _pool([[-1, -2], [-3, -3]], cfg, 1, 1) == [[-3]]


def test_average_padding_accounting():
    # 3x3 kernel, stride 1, pad 1 all round, 2x2 input; P[n] = 10 n (pre-multiplied pad 10)
    # out(0,0): window rows -1..1, cols -1..1: real = 1+2+3+4 = 10, nw = nh = 1
    #   S = 10 + (3-1) * P1 + 3 * P1 = 10 + 20 + 30 = 60  (= real + 5 pads of 10)
    p = tuple(10 * n for n in range(8))
    cfg = PdpConfig(method=AVE, kernel_w=3, kernel_h=3, pad_left=1, pad_top=1, pad_right=1, pad_bottom=1,
                    recip_w=Q16, recip_h=Q16, pad_value=p)  # fmt: skip
    assert _pool([[1, 2], [3, 4]], cfg, 2, 2) == [[60, 60], [60, 60]]
    # with inconsistent P (not n * pad) the split between row and column terms shows:
    # S = real + (KH - nh) * P[nw] + KW * P[nh]; P1 = 7, P2 = 100 -> 10 + 2*7 + 3*7 = 45
    p = (0, 7, 100, 0, 0, 0, 0, 0)
    cfg2 = PdpConfig(**{**cfg.__dict__, "pad_value": p})
    assert _pool([[1, 2], [3, 4]], cfg2, 1, 1) == [[45]]
    # window covering the full width (KW=4, W=2, pads 1+1): nw = 2 -> P2 per real row
    cfg3 = PdpConfig(method=AVE, kernel_w=4, kernel_h=1, pad_left=1, pad_right=1,
                     recip_w=Q16, recip_h=Q16, pad_value=p)  # fmt: skip
    assert _pool([[1, 2]], cfg3, 1, 1) == [[3 + 100]]


def test_average_result_wraps_to_int8():
    cfg = PdpConfig(method=AVE, kernel_w=2, kernel_h=1, recip_w=Q16, recip_h=Q16)
    assert _pool([[100, 100]], cfg, 1, 1) == [[200 - 256]]


@pytest.mark.parametrize("method,pad,expect", [(MAX, 50, [[-1, 4]]), (MIN, -100, [[-1, -1]])])
def test_max_min_ignore_padding(method, pad, expect):
    # first output row: window rows -1..0 -> only input row 0 = [-1, 4] is real;
    # the pad value would win the max / min if it were used
    cfg = PdpConfig(method=method, kernel_w=2, kernel_h=2, stride_w=1, stride_h=1, pad_left=1, pad_top=1,
                    pad_value=(0,) + (pad,) * 7)  # fmt: skip
    assert _pool([[-1, 4], [-7, -3]], cfg, 2, 1) == expect


def _ref_pool(x, cfg: PdpConfig, ow, oh):
    """Independent scalar pooling of one lane (lists of ints)."""
    h, w = len(x), len(x[0])
    out = []
    for oy in range(oh):
        row = []
        for ox in range(ow):
            real, pad_cols, pad_rows = [], set(), set()
            for ky in range(cfg.kernel_h):
                for kx in range(cfg.kernel_w):
                    yy = oy * cfg.stride_h - cfg.pad_top + ky
                    xx = ox * cfg.stride_w - cfg.pad_left + kx
                    if not 0 <= xx < w:
                        pad_cols.add(kx)
                    if not 0 <= yy < h:
                        pad_rows.add(ky)
                    if 0 <= xx < w and 0 <= yy < h:
                        real.append(x[yy][xx])
            if cfg.method == MAX:
                row.append(max(real))
            elif cfg.method == MIN:
                row.append(min(real))
            else:
                nw, nh = len(pad_cols), len(pad_rows)
                s = sum(real) + (cfg.kernel_h - nh) * cfg.pad_value[nw] + cfg.kernel_w * cfg.pad_value[nh]

                def rnd16(v):
                    q, r = divmod(v, Q16)
                    return q + (1 if r > Q16 // 2 or (r == Q16 // 2 and v >= 0) else 0)

                v = rnd16(rnd16(s * cfg.recip_w) * cfg.recip_h)
                row.append((v + 128) % 256 - 128)
        out.append(row)
    return out


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_property_pool_matches_scalar_reference(data):
    kw, kh = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))
    sw, sh = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))
    pl, pt = data.draw(st.integers(0, min(7, kw - 1))), data.draw(st.integers(0, min(7, kh - 1)))
    pr, pb = data.draw(st.integers(0, min(7, kw - 1))), data.draw(st.integers(0, min(7, kh - 1)))
    w = data.draw(st.integers(max(1, kw - pl - pr), 12))
    h = data.draw(st.integers(max(1, kh - pt - pb), 12))
    ow, oh = (w + pl + pr - kw) // sw + 1, (h + pt + pb - kh) // sh + 1
    pv = data.draw(st.integers(-128, 127))
    cfg = PdpConfig(
        method=data.draw(st.sampled_from([AVE, MAX, MIN])), kernel_w=kw, kernel_h=kh, stride_w=sw, stride_h=sh,
        pad_left=pl, pad_top=pt, pad_right=pr, pad_bottom=pb,
        recip_w=data.draw(st.integers(0, Q16)), recip_h=data.draw(st.integers(0, Q16)),
        pad_value=tuple(pv * n for n in range(8)),
    )  # fmt: skip
    x = data.draw(st.lists(st.lists(st.integers(-128, 127), min_size=w, max_size=w), min_size=h, max_size=h))
    # skip windows that contain no real element (never produced by the hardware)
    if any(ox * sw - pl >= w or ox * sw - pl + kw <= 0 for ox in range(ow)) or any(
        oy * sh - pt >= h or oy * sh - pt + kh <= 0 for oy in range(oh)
    ):
        return
    assert _pool(x, cfg, ow, oh) == _ref_pool(x, cfg, ow, oh)


def test_run_pdp_rejects_flying_and_undefined_format():
    v = RegView()
    v.set("PDP", "D_OPERATION_MODE_CFG", 0x00)  # FLYING_MODE = ON_FLYING
    with pytest.raises(UnitNotModelled, match="flying"):
        run_pdp(v, SparseMemory(), ModelOptions())
    v.set("PDP", "D_DATA_FORMAT", 3)  # FP16 (2) is modelled; 3 is not a defined INPUT_DATA
    with pytest.raises(UnitNotModelled, match="input data type 3"):
        run_pdp(v, SparseMemory(), ModelOptions())


def test_run_pdp_split_equals_unsplit_for_max():
    # 10-wide input, 3x1 kernel stride 1 (overlap 2): split into 4 + 3 + 3 input columns
    rng = np.random.default_rng(3)
    mem = SparseMemory()
    x = rng.integers(-128, 128, size=(2, 10, 8)).astype(np.int8)  # h, w, lane
    for y in range(2):
        mem.write(0x1000 + y * 0x100, x[y].reshape(-1).view(np.uint8))

    def view(split: bool) -> RegView:
        v = RegView()
        regs = {
            ("PDP", "D_DATA_CUBE_IN_WIDTH"): 9, ("PDP", "D_DATA_CUBE_IN_HEIGHT"): 1,
            ("PDP", "D_DATA_CUBE_IN_CHANNEL"): 7, ("PDP", "D_DATA_CUBE_OUT_WIDTH"): 7,
            ("PDP", "D_DATA_CUBE_OUT_HEIGHT"): 1, ("PDP", "D_POOLING_KERNEL_CFG"): 0x2,
            ("PDP", "D_OPERATION_MODE_CFG"): 0x11 | ((2 << 8) if split else 0),
            ("PDP", "D_PARTIAL_WIDTH_IN"): (4 - 1) | (3 - 1) << 10 | (3 - 1) << 20,
            ("PDP", "D_PARTIAL_WIDTH_OUT"): (2 - 1) | (3 - 1) << 10 | (3 - 1) << 20,
            ("PDP_RDMA", "D_SRC_BASE_ADDR_LOW"): 0x1000, ("PDP_RDMA", "D_SRC_LINE_STRIDE"): 0x100,
            ("PDP_RDMA", "D_SRC_SURFACE_STRIDE"): 0x1000, ("PDP", "D_DST_BASE_ADDR_LOW"): 0x8000,
            ("PDP", "D_DST_LINE_STRIDE"): 0x100, ("PDP", "D_DST_SURFACE_STRIDE"): 0x1000,
        }  # fmt: skip
        for (blk, reg), val in regs.items():
            v.set(blk, reg, val)
        return v

    run_pdp(view(False), mem, ModelOptions())
    whole = mem.read(0x8000, 0x200).copy()
    mem.write(0x8000, np.zeros(0x200, np.uint8))
    run_pdp(view(True), mem, ModelOptions())
    assert (mem.read(0x8000, 0x200) == whole).all()
    expect = np.stack([x[:, i : i + 3].max(axis=1) for i in range(8)], axis=1)  # [h, 8, lane]
    got = np.stack([whole[y * 0x100 : y * 0x100 + 64].view(np.int8).reshape(8, 8) for y in range(2)])
    assert (got == expect).all()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "pdp_trace" in metafunc.fixturenames:
        metafunc.parametrize("pdp_trace", trace_names(metafunc.config, "pdp_"))


def test_trace_crc(trace_root, pdp_trace):
    if pdp_trace is None:
        pytest.skip(f"no PDP traces in {trace_root}")
    with run_on_model(trace_root / pdp_trace) as (res, t):
        assert res.checks and [u for u, _, _ in t.layers_run] == ["PDP"], res.summary()
        assert res.passed, res.summary()
