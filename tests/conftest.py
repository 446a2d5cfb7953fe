"""Shared fixtures of the project's own tests.

NVDLA's trace tests are outside truth: they are found through ``--nvdla-traces`` (the
plugin's option) or ``NVDLA_TRACES``; tests that need them skip cleanly when absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from _checkouts import SHARED_SRC, set_default_checkouts

# Property tests: `make test` runs the "ci" profile, derandomised so a run is reproducible
# and a red CI names a failure anyone can replay; `make fuzz` runs "explore" with fresh
# random seeds, ten rounds. A failure found there becomes an @example.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)

# NVDLA_HW and NVDLA_HW_V1 default to the public checkouts in ../shared/nvdla_src (tests/_checkouts.py),
# set here, before any test module reads them, and inherited by every command a test starts
set_default_checkouts()


@pytest.fixture(scope="session")
def trace_root(pytestconfig: pytest.Config) -> Path:
    root = pytestconfig.getoption("--nvdla-traces", default=None) or os.environ.get("NVDLA_TRACES")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA trace tests not found: pass --nvdla-traces PATH or set NVDLA_TRACES")
    return Path(root)


#: NVDLA's public nvdla/sw checkout beside the repository (../shared/nvdla_src/sw), the default when
#: NVDLA_SW is not set: tests and CI use it, so nothing skips for want of a checkout
SHARED_SW = SHARED_SRC / "sw"


@pytest.fixture(scope="session")
def nvdla_sw() -> str:
    """An nvdla/sw checkout whose kmd/firmware runs loadables: ``NVDLA_SW``, else the shared copy."""
    for sw in (os.environ.get("NVDLA_SW"), str(SHARED_SW)):
        if sw and (Path(sw) / "kmd" / "firmware" / "scheduler.c").is_file():
            return sw
    pytest.skip("no nvdla/sw checkout (NVDLA_SW, or ../shared/nvdla_src/sw) whose kmd/firmware runs the loadables")


@pytest.fixture(scope="session")
def sim_pool():  # noqa: ANN201 - a WarmSimulators
    """Warm simulators shared by this worker's RTL tests (``sim_pool.open_build(build)``: an open
    target reset to the state of a fresh start, about 40 ms, where a fresh simulator takes about
    3 s to start), as ``regress`` runs its RTL suites; a test of the simulator's own life cycle
    (crash, start-up, waves) opens a fresh ``VerilatorTarget`` instead."""
    from nvdla_hil.harness.targets.verilator import WarmSimulators

    with WarmSimulators() as pool:
        yield pool
