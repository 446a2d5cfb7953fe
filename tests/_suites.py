"""Shared helpers of the tests of bundled suites whose goldens come from NVDLA's C model (test-only,
imported as ``_suites``): the suite's cases, the provenance check every such suite makes (each case
was recorded from the C model: ``nvdla-hil fuzz --target cmod --keep``, testvectors/README.md) and
the run of one case on the model target in C-model semantics, every output element compared."""

from __future__ import annotations

from pathlib import Path

from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import bundled_root, find_cases, load_case, run_case
from nvdla_hil.semantics import Semantics


def bundled_cases(suite: str) -> list[Path]:
    """The case folders of ``testvectors/<suite>``, sorted."""
    return sorted(find_cases(Path(bundled_root()) / suite))


def assert_cmod_provenance(cases: list[Path], *, minimum: int = 12) -> None:
    """At least ``minimum`` cases, each one's provenance naming NVDLA's C model as its golden's source."""
    assert len(cases) >= minimum, f"{len(cases)} cases, expected >= {minimum}"
    for p in cases:
        prov = load_case(p).provenance
        assert "NVDLA C model" in prov["note"], p


def assert_passes_on_model(case: Path, semantics: Semantics = "cmod") -> None:
    """Run one bundled case on the model target (C-model semantics unless told: an RTL-golden
    suite runs in ``"rtl"``); every output must match."""
    c = load_case(case)
    with ModelTarget(c.profile, semantics=semantics) as t:
        res = run_case(c, t)
    assert res.passed, res.summary()
