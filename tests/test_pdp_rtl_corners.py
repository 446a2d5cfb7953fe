"""PDP INT8 corners where the nv_small RTL (Verilator) and the reference model disagreed (fuzz pdp
seed 7), kept as packed vectors whose goldens are the RTL's outputs (``nvdla-hil fuzz --keep``):

* testvectors/pdp_rtl: AVERAGE results leaving int8 range (the positive reciprocal step keeps
  the low 7 bits before rounding: 130 -> 2, 127.5 -> -128), raw padding values (row sums wrap at
  11 bits, PAD_VALUE bits [10:0] across, ``(PAD_VALUE * KW)[13:0]`` down), off-by-one rounding
  of the 11-bit intermediate (refmodel/pdp.py ``_ave_int8_rtl`` / ``_rtl_round``, cal2d.v).
* tests/data/pdp_rtl_invalid: an unused PAD_BOTTOM / PAD_RIGHT of a stride or more (the RTL
  writes wrong outputs, or hangs); the model refuses them (``_check_trailing_pad``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from _suites import assert_passes_on_model

from nvdla_hil.harness.refmodel.pdp import _rtl_round
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import bundled_root, find_cases, load_case, run_case

CASES = sorted(find_cases(Path(bundled_root()) / "pdp_rtl"))
INVALID = sorted(find_cases(Path(__file__).parent / "data" / "pdp_rtl_invalid"))  # not a bundled suite: regress would run it


def test_suites_are_bundled_with_rtl_goldens():
    assert len(CASES) >= 10 and len(INVALID) >= 2
    for p in CASES + INVALID:
        assert "Verilator RTL sim nv_small" in load_case(p).provenance["note"], p


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_rtl_corner_passes_on_model(case):
    assert_passes_on_model(case, semantics="rtl")


@pytest.mark.parametrize("case", INVALID, ids=lambda p: p.name)
def test_unused_trailing_pad_of_a_stride_is_refused(case):
    c = load_case(case)
    with ModelTarget(c.profile) as t:
        res = run_case(c, t)
    assert res.status == "error", res.summary()
    assert re.search(r"PAD_(BOTTOM|RIGHT) = \d+: .*an unused (bottom|right) pad must be below the stride", res.message), \
        res.summary()


def test_rtl_round_hand_values():
    # (product, prod_bits, out_bits) -> RTL result: positive keeps out_bits-1 bits then adds the half bit
    p = np.array([130 << 16, (127 << 16) + 0x8000, -(130 << 16), -(2 << 16) - 0x8000, -(2 << 16) - 0x8001, 5 << 16],
                 dtype=np.int64)
    assert _rtl_round(p, 28, 8).tolist() == [2, -128, 126, -3, -3, 5]
