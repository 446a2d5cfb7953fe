"""Winograd convolution (nv_full): harness/refmodel/conv/winograd.py and the bundled
testvectors/conv_winograd suite.

Goldens: hand-worked PRA values from the C model's arithmetic (``hls/csc_libs/csc_cvt.cpp``
``NV_NVDLA_CSC_pra_cell``: ``C^T d C``, ``IntShiftRight`` with ``AC_RND_INF``/``AC_SAT``), the
F(2x2, 3x3) identity against a plain 3x3 correlation written out here, and, for the suite, the
C model's own outputs recorded with ``nvdla-hil fuzz --target cmod --keep``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nvdla_hil.harness.refmodel.conv.winograd import pra, winograd_output, winograd_weight_offsets
from nvdla_hil.semantics import Semantics

ROOT = Path(__file__).resolve().parents[1] / "testvectors"


def test_pra_by_hand():
    d = np.arange(1, 17).reshape(4, 4)
    # rows: r0 - r2, r1 + r2, r2 - r1, r1 - r3; then the same on the columns
    want = [[0, -16, 0, 0], [-4, 34, 2, -4], [0, 8, 0, 0], [0, -16, 0, 0]]
    assert pra(d, 0, 8).tolist() == want
    # truncate 2: round half away from zero (34/4 = 8.5 -> 9, 2/4 = 0.5 -> 1, -4/4 = -1)
    assert pra(d, 2, 8).tolist() == [[0, -4, 0, 0], [-1, 9, 1, -1], [0, 2, 0, 0], [0, -4, 0, 0]]
    assert pra(-d, 2, 8).tolist() == [[0, 4, 0, 0], [1, -9, -1, 1], [0, -2, 0, 0], [0, 4, 0, 0]]


def test_pra_saturates_to_the_precision():
    d = np.array([[127] * 4, [0] * 4, [-128] * 4, [0] * 4])
    # r0 - r2 = 255 on every column; column 0 - column 2 = 0, column 1 + column 2 = 510 -> 127 (INT8)
    assert pra(d, 0, 8)[0].tolist() == [0, 127, 0, 0]
    assert pra(d, 0, 16)[0].tolist() == [0, 510, 0, 0]
    assert pra(d, 3, 8)[0].tolist() == [0, 64, 0, 0]  # 510 / 8 = 63.75 -> 64


def test_output_transform_by_hand():
    m = np.arange(16).reshape(4, 4)
    # A^T M, A^T = [[1,1,1,0],[0,1,-1,-1]]: r0+r1+r2 = [12,15,18,21], r1-r2-r3 = [-16,-17,-18,-19];
    # then the same on the columns: [12+15+18, 15-18-21], [-16-17-18, -17+18+19]
    assert winograd_output(m).tolist() == [[45, -24], [-51, 20]]


def test_f2x2_3x3_equals_a_plain_correlation():
    """G g G^T with every g a multiple of 4 is an exact integer kernel; with PRA truncate 0 and no
    saturation the Winograd pipeline is the plain 3x3 correlation of a 4x4 tile."""
    rng = np.random.default_rng(5)
    g_mat = np.array([[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]])  # 2 * G (seed 000)
    for _ in range(20):
        d = rng.integers(-20, 21, size=(4, 4))
        g = 4 * rng.integers(-3, 4, size=(3, 3))
        u = g_mat @ g @ g_mat.T // 4
        y = winograd_output(u * pra(d, 0, 8))
        plain = [[int((d[i:i + 3, j:j + 3] * g).sum()) for j in range(2)] for i in range(2)]
        assert y.tolist() == plain


def test_weight_offsets_follow_seed_000_phase_2():
    # INT8 groups of 32 kernels; 4x4x4 cubes scanned K -> C inside a group; position outer, channel inner
    off = winograd_weight_offsets(k=34, c=8, atomic_k=32)
    assert off[0, 0, 0, 0] == 0 and off[0, 1, 0, 0] == 1 and off[0, 0, 0, 1] == 4 and off[0, 0, 1, 0] == 16
    assert off[1, 0, 0, 0] == 64  # next kernel's cube 0
    assert off[0, 4, 0, 0] == 32 * 64  # cube 1 of kernel 0 after cube 0 of all 32 kernels
    assert off[32, 0, 0, 0] == 32 * 8 * 16 and off[33, 4, 0, 0] == 32 * 8 * 16 + (2 + 1) * 64


# ---- bundled suite, goldens = NVDLA C model outputs -------------------------------------------


def _cases(suite: str) -> list[Path]:
    from nvdla_hil.harness.vectors import find_cases

    return find_cases(ROOT / suite)


def _run(path: Path, semantics: Semantics = "cmod"):
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import load_case, run_case

    case = load_case(path)
    with ModelTarget(case.profile, semantics=semantics) as t:
        return case, run_case(case, t, target_kind="model")


def test_conv_winograd_suite_covers_the_space():
    cases = _cases("conv_winograd")
    assert len(cases) == 13
    text = " ".join(p.joinpath("case.yaml").read_text() for p in cases)
    for what in ("int8 winograd", "int16 winograd", "stride 2", "compressed weights", "PRA truncate 1",
                 "(transformed)", "(random)", "CONV_MODE: 1", "WINOGRAD: 1"):
        assert what in text, what


@pytest.mark.parametrize("path", _cases("conv_winograd"), ids=lambda p: p.name)
def test_conv_winograd_suite_on_the_model(path: Path):
    """The whole layer (CDMA .. SDP) on the model target with the C model's semantics: every output
    element and the recorded statistics equal the C model's."""
    case, res = _run(path)
    assert "C model" in case.provenance["note"], case.provenance
    assert res.status == "passed", res.summary()


def test_winograd_refusals_are_gone():
    import inspect

    from nvdla_hil.harness.refmodel import conv, sdp

    assert "Winograd convolution not modelled\")" not in inspect.getsource(conv._check_modelled)
    assert "Winograd output mode not modelled" not in inspect.getsource(sdp._check_modelled)
    case, res = _run(_cases("conv_winograd")[0])
    assert any(r.name == "CDMA.D_MISC_CFG" and (r.fields or {}).get("CONV_MODE") == 1 for r in case.registers)
    assert res.status == "passed", res.summary()


def test_fp16_pra_by_hand():
    from nvdla_hil.harness.refmodel.conv.winograd import pra_fp16

    h = lambda v: int(np.float16(v).view(np.uint16))  # noqa: E731
    d = np.array([[h(v) for v in row] for row in np.arange(1, 17, dtype=np.float64).reshape(4, 4)])
    out = pra_fp16(d).astype(np.uint16).view(np.float16).astype(np.float64)
    assert out.tolist() == [[0, -16, 0, 0], [-4, 34, 2, -4], [0, 8, 0, 0], [0, -16, 0, 0]]
    # overflow saturates to +-65504 (seed 000: convolution pipeline INF -> 65504 in Winograd)
    big = np.array([[h(60000)] * 4, [0] * 4, [h(-60000)] * 4, [0] * 4])
    assert pra_fp16(big)[0].tolist()[1] == 0x7BFF
