"""The bins a fuzz campaign aims at are the bins its unit's generator reaches on the profile
(issue 39): ``fuzz --unit conv`` on nv_small no longer counts ``conv.image``, ``conv.mean`` or
``conv.batch`` (the conv unit draws direct convolutions of one cube there), so a long enough
``--until-covered`` campaign can reach "N of N" on every unit and profile.

:func:`~nvdla_hil.harness.fuzz.runner.aimed_bins` finds them from the unit's own draws (one rule
for every unit); here cases of *another* seed are drawn, on the reference model in this process,
until every aimed bin is hit again: an aimed bin that other draws do not reach within the bound
fails the test, unless it is listed in :data:`RARE` with why.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from nvdla_hil.harness.analysis import coverage as covmod
from nvdla_hil.harness.fuzz import UNIT_GROUPS, UNITS, load_constraints
from nvdla_hil.harness.fuzz.case import generate
from nvdla_hil.harness.fuzz.registry import unit_refusal
from nvdla_hil.harness.fuzz.runner import AIM_DRAWS, aimed_bins
from nvdla_hil.drivers.profiles import load_profile

PROFILES = ("nv_small", "nv_full")
#: draws of another seed in which every aimed bin must be hit again
BOUND = 4 * AIM_DRAWS
SEED = 2
#: (unit, profile) -> aimed bins drawable but rarer than one case in BOUND for SEED: a case that draws
#: each (seed, index; checked below) and how rare it is
RARE: dict[tuple[str, str], dict[str, tuple[int, int, str]]] = {
    ("cdp-int16", "nv_full"): {
        "cdp.lut.cfg.lo_select.zero": (1, 134, "LO index select 0 (the LO table's whole range in one step): "
                                              "case 59 of 64 of the aim's seed, case 134 of 200 of seed 1"),
    },
}


def _params() -> list:
    """Every unit on every profile that has its hardware (a unit a profile lacks is refused, tested
    below); nv_full's (eleven units, about a minute of CPU) are ``slow``."""
    out = []
    for prof in PROFILES:
        for unit in UNITS:
            if unit_refusal(unit, load_profile(prof)):
                continue
            marks = [pytest.mark.slow] if prof != "nv_small" else []
            out.append(pytest.param(unit, prof, marks=marks, id=f"{unit}-{prof}"))
    return out


def test_every_unit_runs_somewhere_and_a_profile_that_lacks_it_refuses_it_by_name() -> None:
    covered = {p.values[0] for p in _params()}
    assert covered == set(UNITS), set(UNITS) - covered  # each unit is aimed on one profile at least
    lacking = [(u, p) for p in PROFILES for u in UNITS if unit_refusal(u, load_profile(p))]
    assert lacking, "nv_small lacks no unit's hardware: the refusal below is untested"
    for unit, prof in lacking:
        why = unit_refusal(unit, load_profile(prof))
        assert unit in why and prof in why and "lacks" in why, why


_AIMS: dict[tuple[str, str], tuple[list[str], list[str]]] = {}


def _aimed(unit: str, profile: str) -> tuple[list[str], list[str]]:
    """:func:`aimed_bins` of the shipped constraints, once per unit and profile in this module."""
    if (unit, profile) not in _AIMS:
        _AIMS[unit, profile] = aimed_bins(load_constraints(unit, profile=profile))
    return _AIMS[unit, profile]


def _hit_within(c, aimed: list[str], bound: int) -> tuple[set[str], int]:  # noqa: ANN001
    """Draw cases 0.. of SEED until every aimed bin is hit or ``bound`` cases are drawn."""
    cov = covmod.Coverage()
    with tempfile.TemporaryDirectory(prefix="nvdla-aim-test-") as tmp:
        for i in range(bound):
            generate(c, SEED, i, Path(tmp), coverage=cov)
            if all(cov.counts[b] for b in aimed):
                return set(aimed), i + 1
    return {b for b in aimed if cov.counts[b]}, bound


@pytest.mark.parametrize(("unit", "profile"), _params())
def test_every_aimed_bin_is_drawn_again_by_another_seed(unit: str, profile: str) -> None:
    c = load_constraints(unit, profile=profile)
    aimed, undrawn = _aimed(unit, profile)
    reach = covmod.reachable([c.profile], UNIT_GROUPS[unit])
    assert sorted(aimed + undrawn) == sorted(reach) and not set(aimed) & set(undrawn)
    assert aimed, f"{unit} on {profile} aims at nothing"
    rare = RARE.get((unit, profile), {})
    hit, _ = _hit_within(c, [b for b in aimed if b not in rare], BOUND)
    missed = sorted(set(aimed) - hit - set(rare))
    assert not missed, f"{unit} on {profile}: aimed bins not drawn in {BOUND} cases of seed {SEED}: {missed}"
    for b, (seed, index, why) in rare.items():  # a rare bin: the case said to draw it does
        cov = covmod.Coverage()
        with tempfile.TemporaryDirectory(prefix="nvdla-aim-test-") as tmp:
            generate(c, seed, index, Path(tmp), coverage=cov)
        assert cov.counts[b], f"{unit} on {profile}: case {index} of seed {seed} no longer draws {b} ({why})"


def test_conv_on_nv_small_does_not_aim_at_image_mean_or_batch() -> None:
    """The issue's case: the conv unit's schema has no image input (the conv-image unit draws it)
    and its nv_small constraints draw one cube, so these bins are not aimed at; conv-image aims
    at image and mean input."""
    aimed, undrawn = _aimed("conv", "nv_small")
    assert {"conv.image", "conv.mean", "conv.batch"} <= set(undrawn)
    assert {"conv.direct", "conv.prec.int8", "conv.stride", "conv.pad"} <= set(aimed)
    image_aimed, _ = _aimed("conv-image", "nv_small")
    assert {"conv.image", "conv.mean"} <= set(image_aimed)


def test_the_aim_is_kept_in_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first campaign of a unit and profile draws the probe cases; the next reads the answer
    from the cache (no draw at all); other constraints are another entry, and draws that failed
    are never kept as an answer."""
    from nvdla_hil.harness.fuzz import runner

    monkeypatch.setenv("NVDLA_HIL_CACHE", str(tmp_path))
    c = load_constraints("sdp-cvt", profile="nv_small")
    first = aimed_bins(c, draws=8)
    assert len(list((tmp_path / "fuzz-aim").glob("sdp-cvt-nv_small-*.json"))) == 1

    def no_draw(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("drew a case although the answer is cached")

    monkeypatch.setattr(runner, "generate", no_draw)
    assert aimed_bins(c, draws=8) == first
    narrowed = load_constraints("sdp-cvt", profile="nv_small", sets=["shape=1x1xC"])
    assert aimed_bins(narrowed, draws=8) == ([], covmod.reachable([narrowed.profile], UNIT_GROUPS["sdp-cvt"]))
    assert len(list((tmp_path / "fuzz-aim").glob("sdp-cvt-nv_small-*.json"))) == 1  # the failed draws: not kept
