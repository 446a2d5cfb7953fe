"""The run-wide state of a pytest session of nvdla-hil: the keys of ``config.stash`` (and of a test's
``item.stash``) the plugin's modules share, and the questions every one of them asks of it.

A leaf of the plugin: nothing above the targets is imported here, so every module of the plugin
(and :mod:`.cluster`, :mod:`.warm`) can import it without a circle. The state itself lives on the
session's ``config`` (or the test's ``item``), never in a module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..targets import TargetSpec

__all__ = ["BOARD_DEAD_KEY", "BOARD_NOTE_KEY", "COUNTS_KEY", "CURRENT_ITEMS_KEY", "GOLDEN_KEY", "HEALTH_KEY", "LOCK_KEY",
           "LOGS_KEY", "OPENED_KEY", "OPTS_KEY", "PROFILES_KEY", "RERUN_WAVES_KEY", "SPEC_KEY", "UNWRITTEN_KEY",
           "WAVES_SEEN_KEY", "configured_profiles", "is_worker"]

#: the session's target: how every test opens it (kind, profile, paths, coverage collector, observer)
SPEC_KEY = pytest.StashKey[TargetSpec]()
#: the hardware profiles the run may use, in the order given
PROFILES_KEY = pytest.StashKey[list[str]]()
#: the session board locks the controller holds (serial target)
LOCK_KEY = pytest.StashKey[object]()
#: nodeid -> (access log, link report) still to write when the test ends
LOGS_KEY = pytest.StashKey[dict]()
#: what ran: {"ran", "suite", "reports", "self_consistency"}
COUNTS_KEY = pytest.StashKey[dict]()
#: the options that have a deprecated unprefixed alias, resolved once
OPTS_KEY = pytest.StashKey[dict]()
#: one line on how the session's workers share its boards, printed at session start
BOARD_NOTE_KEY = pytest.StashKey[str]()
#: the test running now (innermost last)
CURRENT_ITEMS_KEY = pytest.StashKey[list[pytest.Item]]()
#: while a failed test is re-run with waves: the wave file to write
RERUN_WAVES_KEY = pytest.StashKey[Path]()
#: (nodeid, wave file) of every failed test re-run with waves
WAVES_SEEN_KEY = pytest.StashKey[list]()
#: consecutive tests failed on a dead board, and the session to stop
BOARD_DEAD_KEY = pytest.StashKey[dict]()
#: results that could not be written: 'path: why'
UNWRITTEN_KEY = pytest.StashKey[list[str]]()
#: board health-check notes, printed at session start (``--nvdla-health-check``)
HEALTH_KEY = pytest.StashKey[list]()
#: per test (item stash): the targets it opened, with their specs
OPENED_KEY = pytest.StashKey[list]()
#: per test (item stash): golden_source kind of its packed-vector case ("" for none)
GOLDEN_KEY = pytest.StashKey[str]()


def configured_profiles(config: pytest.Config) -> list[str]:
    """The profiles this run may use, in the order given."""
    profiles: list[str] = config.stash[PROFILES_KEY]
    return list(profiles)


def is_worker(config: pytest.Config) -> bool:
    """This process is a pytest-xdist worker (not the controller, nor a run without xdist)."""
    return hasattr(config, "workerinput")


def is_dask_worker_session(config: pytest.Config) -> bool:
    """A session harness/plugin/cluster.py runs inside a Dask worker for one test: its reports go back
    to the controller, which owns the run (its records, merges and summaries)."""
    from .collector import ReportCollector

    return any(isinstance(p, ReportCollector) for p in config.pluginmanager.get_plugins())
