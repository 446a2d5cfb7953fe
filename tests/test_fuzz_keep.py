"""``fuzz --keep``: every case that ran is saved with the DUT's outputs as its golden, and one
DUT serves a chunk of cases. The DUT here is a model target with an injected datapath bug, so a
kept golden can be told apart from what the reference model computes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nvdla_hil.drivers import yamlstrict
from nvdla_hil.harness import fuzz
from nvdla_hil.harness.targets import TargetSpec
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import find_cases, load_case, run_case

BUG = "SDP.D_CVT_OFFSET.CVT_OFFSET+1"


def test_keep_records_the_duts_outputs_not_the_models(tmp_path: Path) -> None:
    rep = fuzz.run_fuzz("sdp-cvt", TargetSpec("model"), count=4, seed=11, model_bugs=[BUG], keep=tmp_path / "kept")
    kept = sorted(p.parent for p in (tmp_path / "kept").glob("*/case.yaml"))
    assert [p.name for p in kept] == [c.name for c in rep.cases]
    assert len(kept) == 4
    differs = 0
    for folder in kept:
        case = load_case(folder)
        prov = yamlstrict.load((folder / "case.yaml").read_text(), "case.yaml")["provenance"]
        assert prov["generator"] == "nvdla-hil fuzz --keep"
        assert "golden: the outputs of" in prov["note"]
        status = next(c.status for c in rep.cases if c.name == folder.name)
        assert ("agreed bit for bit" in prov["note"]) == (status == "passed")
        # the kept golden is what the buggy DUT computed: the buggy model passes it ...
        with ModelTarget(case.profile, bugs=[BUG]) as bad:
            assert run_case(case, bad).passed
        # ... and the correct model passes it exactly when the DUT agreed with the reference
        with ModelTarget(case.profile) as good:
            assert run_case(case, good).passed == (status == "passed")
        differs += status != "passed"
    assert differs >= 1  # the bug showed on at least one case, so the check above bit


def test_kept_suite_is_found_and_its_goldens_are_the_dut_bytes(tmp_path: Path) -> None:
    rep = fuzz.run_fuzz("sdp-cvt", TargetSpec("model"), count=2, seed=3, keep=tmp_path)
    assert all(c.status == "passed" for c in rep.cases)
    cases = find_cases(tmp_path)
    assert len(cases) == 2
    for c in cases:
        case = load_case(c)
        with ModelTarget(case.profile) as t:
            res = run_case(case, t)
        assert res.passed
        for s in case.outputs:
            raw = (Path(c) / f"{s.name}.expected.bin").read_bytes()
            assert np.array_equal(np.frombuffer(raw, np.uint8), np.asarray(res.outputs[s.name]).view(np.uint8).reshape(-1))
