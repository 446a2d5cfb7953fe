"""SDP -> PDP on the fly against the nv_small RTL (Verilator), ``refmodel/pdp.py`` ``_flying_parts`` /
``_check_flying_split``.

* testvectors/pdp_flying_rtl: fused SDP -> PDP layers whose goldens are the nv_small RTL's outputs
  (``nvdla-hil fuzz --target verilator --profile nv_small --unit sdp-pdp --set split=0
  --set done=pdp --seed 2 --count 8 --keep``): INT8 SDP (BS/BN) and direct convolution -> SDP sources,
  PDP average/max/min with padding, no split width. They run bit-exactly on the model target.
* Split width on the fly is a [DIFF] (sims/cmod/README.md): the C model consumes SDP's stream slice by
  slice, the RTL never leaves the first slice (its pre-processor raises ``split_end`` only at the end of
  the cube). Under the default (rtl) semantics the model refuses it; with the C model's semantics it
  runs. Checked on a bundled pdp_flying layer whose golden is NVDLA's C model's output, and on an
  nv_small layer whose golden is the RTL's output (tests/data/pdp_flying_rtl_split: not a bundled suite,
  regress would run it), which the C model's order does not reproduce.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _suites import assert_passes_on_model

from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import bundled_root, find_cases, load_case, run_case

CASES = sorted(find_cases(Path(bundled_root()) / "pdp_flying_rtl"))
SPLIT_CMOD = Path(bundled_root()) / "pdp_flying" / "fuzz-sdp-pdp-s1-00020"  # split 3 on the fly, C-model golden
SPLIT_RTL = sorted(find_cases(Path(__file__).parent / "data" / "pdp_flying_rtl_split"))


def _fields(case) -> dict[str, int]:
    return {f"{r.name}.{k}": int(v) for r in case.registers for k, v in r.fields.items()}


def test_suite_is_bundled_with_rtl_goldens():
    assert len(CASES) == 8
    descs = []
    for p in CASES:
        c = load_case(p)
        assert c.profile == "nv_small" and c.unit == "PDP" and c.launch[0] == "PDP", p
        assert "Verilator RTL sim nv_small" in c.provenance["note"], p
        f = _fields(c)
        assert f["SDP.D_FEATURE_MODE_CFG.OUTPUT_DST"] == 1 and f["PDP.D_OPERATION_MODE_CFG.FLYING_MODE"] == 0, p
        assert f["PDP.D_OPERATION_MODE_CFG.SPLIT_NUM"] == 0, p
        descs.append(c.description.replace("\n", " "))
    for what in ("sdp-pdp conv: conv int8 direct", "sdp-pdp int8_to_int8", "average", "max", "min", "(raw)", "(multiple)"):
        assert any(what in d for d in descs), what
    assert any("pad l/t/r/b 0/0/0/0" not in d for d in descs)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_rtl_golden_passes_on_model(case):
    assert_passes_on_model(case, semantics="rtl")


@pytest.mark.parametrize("case", [SPLIT_CMOD, *SPLIT_RTL], ids=lambda p: p.name)
def test_split_on_the_fly_is_refused_under_rtl_semantics(case):
    c = load_case(case)
    assert _fields(c)["PDP.D_OPERATION_MODE_CFG.SPLIT_NUM"] > 0 and _fields(c)["PDP.D_OPERATION_MODE_CFG.FLYING_MODE"] == 0
    with ModelTarget(c.profile, semantics="rtl") as t:
        res = run_case(c, t)
    assert res.status == "error" and "SPLIT_NUM" in res.message and "ON_FLYING" in res.message, res.summary()


def test_split_on_the_fly_follows_the_c_model_under_cmod_semantics():
    c = load_case(SPLIT_CMOD)
    assert "NVDLA C model" in c.provenance["note"]
    with ModelTarget(c.profile, semantics="cmod") as t:
        res = run_case(c, t)
    assert res.passed, res.summary()


@pytest.mark.parametrize("case", SPLIT_RTL, ids=lambda p: p.name)
def test_rtl_split_on_the_fly_differs_from_the_c_models_order(case):
    c = load_case(case)
    assert "Verilator RTL sim nv_small" in c.provenance["note"]
    with ModelTarget(c.profile, semantics="cmod") as t:
        res = run_case(c, t)
    assert res.status == "failed" and not res.passed, res.summary()  # runs; the RTL's output is not the C model's
