"""pytest side of the results database (:mod:`nvdla_hil.harness.results.recorder`) and of the live
progress (:mod:`nvdla_hil.harness.results.progress`): their options, the structured failure computed
where the test ran, and the :class:`~nvdla_hil.harness.results.recorder.Recorder` registered on the
process that owns the run (not on an xdist worker, nor in a Dask worker's session of one test,
whose reports the controller records).

A pytest plugin, loaded by the ``nvdla_hil`` plugin's ``pytest_plugins``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from ..results.recorder import Recorder, structured_failure
from ..results.stopping import RunStop
from .junit import close_cut_off
from .keys import PROFILES_KEY, SPEC_KEY, is_dask_worker_session, is_worker
from .logs import log_dir
from .summary import RegressionSummary

__all__ = ["PROGRESS_NAME", "RECORDER_NAME", "STOP_NAME"]

RECORDER_NAME = "nvdla-hil-results"
STOP_NAME = "nvdla-hil-stop"
PROGRESS_NAME = "nvdla-hil-progress"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nvdla-hil results", "NVDLA hardware-in-the-loop: results database and progress")
    g.addoption("--nvdla-results-db", default=None, metavar="URL",
                help="record the run in this results database: an SQLite file or postgresql://... (or NVDLA_HIL_RESULTS_DB)")
    g.addoption("--nvdla-run-dir", default=None, metavar="DIR",
                help="the run directory (its name is the run id in the results database)")
    g.addoption("--nvdla-progress", choices=("auto", "tty", "plain", "off"), default="off",
                help="live progress: done/total, failures, elapsed and ETA, the running test (auto: a status line "
                     "on a terminal, plain lines otherwise)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any):  # noqa: ANN201
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        try:
            report.nvdla_failure = structured_failure(item.nodeid, log_dir(item.config), report, call)
        except Exception as e:  # noqa: BLE001 - a signature is never worth a lost result
            report.nvdla_failure = {"outcome": "failed" if report.when == "call" else "error", "when": report.when,
                                    "exception": "", "reason": f"(no structured failure: {type(e).__name__}: {e})"}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Before pytest writes junit.xml: the tests the session was stopped in get whole testcases."""
    try:
        close_cut_off(session)
    except Exception:  # noqa: BLE001 - pytest's own junit.xml (without them) beats no junit.xml at all
        pass


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if is_worker(config) or config.getoption("collectonly", default=False) or is_dask_worker_session(config):
        return
    url = config.getoption("--nvdla-results-db", default=None) or os.environ.get("NVDLA_HIL_RESULTS_DB")
    if url:
        profiles: list[str] = config.stash.get(PROFILES_KEY, [])
        stop = RunStop()  # SIGINT/SIGTERM/SIGHUP stop the run, never inside a result's bookkeeping
        recorder = Recorder(config, url, spec=config.stash.get(SPEC_KEY, None), profiles=profiles,
                            classify=RegressionSummary.outcome_class, stop=stop)
        config.pluginmanager.register(recorder, RECORDER_NAME)
        config.pluginmanager.register(stop, STOP_NAME)
        stop.install()
    mode = config.getoption("--nvdla-progress", default="off")
    if mode != "off":
        from ..results.progress import LiveProgress

        config.pluginmanager.register(LiveProgress(config, mode), PROGRESS_NAME)
