"""Fuzz unit ``cdp-int16`` (CDP LRN in INT16, harness/fuzz/constraints/cdp-int16.yaml) and the C-model
semantics it found in the CDP LUT: the LE exponent underflow term of NVDLA's C model
(nvdlav1 ``cmod/cdp/NV_NVDLA_cdp.cpp`` ``lookup_lut`` / ``lookup_lut_int8``:
``(square_sum - raw_start - ((int64_t)1 << le_index_offset)) * slope``) is int64 arithmetic that
wraps, and its shift by 64..127 is undefined in C (x86-64: the count's low 6 bits). Oracles: the
hand-worked single elements below (arithmetic written out), and NVDLA's C model itself when
``NVDLA_HW_V1`` names an nvdlav1 checkout (the differential runs; skipped without it)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from nvdla_hil.harness import fuzz
from nvdla_hil.harness.refmodel.cdp import cdp_lut
from nvdla_hil.harness.refmodel.lut import LutParams
from nvdla_hil.semantics import Semantics

ZERO_LE, ZERO_LO = np.zeros(65, np.int16), np.zeros(257, np.int16)


def _le_uflow(s: int, *, offset: int, start: int, scale: int, shift: int, semantics: Semantics) -> int:
    """One square sum below both tables (LE exponent, LO linear), underflow priority LE: the
    LE underflow extrapolation from table entry 0 (= 0 here)."""
    p = LutParams(le_function="exponent", le_index_offset=offset, le_start=start, le_end=start + (1 << 30),
                  lo_start=1 << 30, lo_end=(1 << 30) + 256, le_slope_uflow_scale=scale, le_slope_uflow_shift=shift,
                  uflow_priority="LE")  # fmt: skip
    r, stats, le_s, _ = cdp_lut(np.array([s], np.int64), ZERO_LE, ZERO_LO, p, semantics, bits=16)
    assert stats.uflow == 1
    return int(r[0])


def test_le_uflow_anchor_in_range_is_start_plus_2_to_the_offset() -> None:
    # offset 3: anchor 100 + 8; (50 - 108) * 3 = -174 (both semantics)
    for sem in ("rtl", "cmod"):
        assert _le_uflow(50, offset=3, start=100, scale=3, shift=0, semantics=sem) == -174


def test_le_uflow_shift_past_63_is_masked_in_the_c_model() -> None:
    # offset 66. cmod on x86-64: (int64_t)1 << 66 shifts by 66 & 63 = 2: (50 - 100 - 4) * 3 = -162.
    # RTL: START + 2^66 in a 39-bit sum is START: (50 - 100) * 3 = -150.
    assert _le_uflow(50, offset=66, start=100, scale=3, shift=0, semantics="cmod") == -162
    assert _le_uflow(50, offset=66, start=100, scale=3, shift=0, semantics="rtl") == -150


def test_le_uflow_product_wraps_in_the_c_model() -> None:
    # offset 55: diff = 0 - 0 - 2^55; times 1000 = -125 * 2^58, which wraps in int64 to
    # (-125 mod 64) * 2^58 = 3 * 2^58 > 0: the 56-bit convert saturates up, the 16-bit result is
    # 32767. Without the wrap (the RTL's 39-bit anchor: -2^55 mod 2^39 = 0, diff 0) it is 0.
    assert _le_uflow(0, offset=55, start=0, scale=1000, shift=0, semantics="cmod") == 32767
    assert _le_uflow(0, offset=55, start=0, scale=1000, shift=0, semantics="rtl") == 0


def _hw_v1() -> str:
    hw = os.environ.get("NVDLA_HW_V1")
    if not hw or not Path(hw).is_dir():
        pytest.skip("NVDLA_HW_V1 (an nvdla/hw nvdlav1 checkout) not set: no C model to run")
    return hw


@pytest.mark.parametrize("seed,first,count", [(1, 78, 4), (3, 62, 8)])  # cases 80 (offset 66) and 69 (offset 55)
def test_cdp_int16_agrees_with_the_c_model(seed: int, first: int, count: int) -> None:
    from nvdla_hil.harness.targets import TargetSpec

    spec = TargetSpec(kind="cmod", profile="nv_full", semantics="cmod", nvdla_hw=_hw_v1())
    rep = fuzz.run_fuzz("cdp-int16", spec, count=count, seed=seed, first=first, profile="nv_full", semantics="cmod")
    assert [c.status for c in rep.cases] == ["passed"] * count, [c.line for c in rep.failed]


@pytest.mark.parametrize("unit,seed,sets", [("sdp-bsbn", 3, ["dst_port=sec", "op_port=pri"]),
                                            ("cdp-lrn", 7, ["dst_port=sec", "width=3"])])
def test_secondary_port_writes_of_the_c_model_land_where_the_surface_says(unit: str, seed: int, sets: list[str]) -> None:
    """The C model's CVIF moves a write that starts 32 bytes into a 64-byte beat up by 32 bytes while
    its buffer starts at the beat; our host places it from the beat (sims/cmod/README.md). Before,
    these draws lost an atom per odd-atom line (sdp-bsbn seed 3: 18 of 60; cdp-lrn width 3: 14 of 20)."""
    from nvdla_hil.harness.targets import TargetSpec

    spec = TargetSpec(kind="cmod", profile="nv_full", semantics="cmod", nvdla_hw=_hw_v1())
    rep = fuzz.run_fuzz(unit, spec, count=20, seed=seed, profile="nv_full", semantics="cmod", sets=sets)
    # every draw ran and agreed (a draw the C model refuses as a known limit would be "skipped")
    assert [c.status for c in rep.cases] == ["passed"] * 20, [c.line for c in rep.cases if c.status != "passed"]
