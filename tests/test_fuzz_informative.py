"""Fuzz draws steered away from goldens that say nothing (harness/fuzz/case.py ``degenerate``, issue 40).

Measured on the reference model (seed 1, nv_full, 30 cases of ``sdp-cvt``): drawn uniformly, 12
cases' goldens are one value in every element (a random convertor whose shift throws every bit
away), so their passes could not tell a right layer from one that wrote zeros. Steered, none is:
each such case is drawn again with its corners kept, and says so in its provenance. The corners
drawn on purpose (a field's ``extremes`` rate) survive the redraw, so the coverage bins they reach
are still reached (``test_fuzz_aimed.py`` checks every aimed bin of every unit with steering on)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nvdla_hil.harness.fuzz.case import MAX_DRAWS, degenerate, generate
from nvdla_hil.harness.fuzz.draw import Sampler
from nvdla_hil.harness.fuzz.registry import load_constraints
from nvdla_hil.harness.vectors.layer import rng_for
from nvdla_hil.harness.vectors.load import load_case

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]
UNIT, PROFILE, SEED, COUNT = "sdp-cvt", "nv_full", 1, 30


def _cases(tmp: Path, informative: bool) -> list:
    c = load_constraints(UNIT, profile=PROFILE)
    return [load_case(generate(c, SEED, i, tmp / str(informative), informative=informative)) for i in range(COUNT)]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, list]:
    tmp = tmp_path_factory.mktemp("draws")
    return _cases(tmp, False), _cases(tmp, True)


def test_uniform_draws_give_goldens_that_say_nothing_and_steered_ones_do_not(drawn) -> None:
    uniform, steered = drawn
    bad = [i for i, case in enumerate(uniform) if degenerate(case)]
    assert len(bad) == 12, bad  # the measured figure: a single value in every element of their output
    assert all("golden is one value" in degenerate(uniform[i]) for i in bad)
    assert not [i for i, case in enumerate(steered) if degenerate(case)]
    redrawn = [i for i, case in enumerate(steered) if case.provenance.get("draw")]
    assert redrawn == bad  # exactly the degenerate ones were drawn again; the others are the uniform draws
    strip = lambda case: {k: v for k, v in case.manifest.items() if k != "provenance"}  # noqa: E731 (its replay note differs)
    assert all(strip(uniform[i]) == strip(steered[i]) for i in set(range(COUNT)) - set(bad))


def test_a_redrawn_case_names_what_was_rejected_keeps_its_corners_and_replays(drawn, tmp_path: Path) -> None:
    uniform, steered = drawn
    c = load_constraints(UNIT, profile=PROFILE)
    i = 16  # seed 1's one redrawn case whose first draw has corners (channels 40, cvt_shift 63)
    prov = steered[i].provenance
    assert 1 <= prov["draw"] < MAX_DRAWS
    assert prov["redrawn"].startswith("draw 0: dst: golden is one value")
    first = Sampler(c, rng_for(SEED, i))
    assert first.corners == ["channels", "cvt_shift"]
    # the corners of the first draw are kept in the case drawn again: its channels are the uniform draw's
    regs = {k: {r.name: dict(r.fields) for r in case.registers} for k, case in (("s", steered[i]), ("u", uniform[i]))}
    assert regs["s"]["SDP.D_DATA_CUBE_CHANNEL"] == regs["u"]["SDP.D_DATA_CUBE_CHANNEL"] == {"CHANNEL": 39}
    again = load_case(generate(c, SEED, i, tmp_path))  # the replay line of the provenance gives the same case
    assert again.manifest == steered[i].manifest


def test_a_configuration_that_computes_one_value_by_nature_keeps_its_first_draw(tmp_path: Path) -> None:
    """A random convertor shifting by 63 throws every bit away whatever the data: every redraw is
    degenerate too, so the case is the first draw as drawn (no ``draw`` in its provenance, the
    replay line without ``--allow-degenerate``), the same case uniform drawing gives."""
    c = load_constraints(UNIT, profile=PROFILE, sets=["cvt=random", "cvt_shift=63"])
    steered = load_case(generate(c, SEED, 0, tmp_path / "steered"))
    uniform = load_case(generate(c, SEED, 0, tmp_path / "uniform", informative=False))
    assert degenerate(steered) and "draw" not in steered.provenance
    assert "--allow-degenerate" not in steered.provenance["note"] and "--allow-degenerate" in uniform.provenance["note"]
    strip = lambda case: {k: v for k, v in case.manifest.items() if k != "provenance"}  # noqa: E731
    assert strip(steered) == strip(uniform)
    assert [p.name for p in (tmp_path / "steered").iterdir()] == ["fuzz-sdp-cvt-s1-00000"]  # no draw left behind


def test_fuzz_summary_counts_redrawn_cases_and_allow_degenerate_keeps_first_draws(tmp_path: Path) -> None:
    """On the model with an injected fault (the fuzz CLI's own DUT for testing the harness): the
    summary says how many cases were drawn again and how many passes are weak."""
    base = [*CLI, "fuzz", "--unit", UNIT, "--profile", PROFILE, "--seed", str(SEED), "--count", "10",
            "--model-bug", "stuck:SDP:0:0"]
    env = dict(os.environ)
    steered = subprocess.run(base, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    uniform = subprocess.run([*base, "--allow-degenerate"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                             env=env)
    line = next(ln for ln in steered.stdout.splitlines() if ln.startswith("informative:"))
    # seed 1's first ten draws: 1, 3, 4, 7 and 9 compute one value (the summary counts them), and of
    # the two that then pass on the faulty model neither is weak
    assert line.startswith("informative: 5 of 10 cases drawn again") and line.endswith("; 0 of 2 passes weak"), \
        steered.stdout
    line = next(ln for ln in uniform.stdout.splitlines() if ln.startswith("informative:"))
    assert line.startswith("informative: 0 of 10 cases drawn again") and "--allow-degenerate" in line, uniform.stdout
