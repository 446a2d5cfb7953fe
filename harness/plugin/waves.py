"""Waves of a failed test (verilator target, ``--nvdla-failure-waves rerun``): the test is run
once more with waves; the failing run's reports stand and the wave file is linked from the
report, the JUnit properties and the summary.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from .keys import RERUN_WAVES_KEY, WAVES_SEEN_KEY, is_worker
from .logs import log_dir, safe_nodeid

def rerun_waves(config: pytest.Config) -> Path | None:
    """While the plugin re-runs a failed test to record its waves, the wave file to write (the
    target specs of :func:`suite_spec` and the ``nvdla_target`` fixture ask for it); else None."""
    return config.stash.get(RERUN_WAVES_KEY, None)


def _waves_dir(config: pytest.Config) -> Path:
    d = config.getoption("--nvdla-waves-dir", default=None)
    if d:
        return Path(d)
    logs = log_dir(config)
    if logs is not None:
        return logs.parent / "waves"
    return Path(tempfile.gettempdir()) / f"nvdla-hil-waves-{os.getppid() if is_worker(config) else os.getpid()}"


class WavesOnFailure:
    """Verilator target: a test that fails is run once more with waves; the failing run's
    reports stand (the re-run's outcome is noted), and the wave file is linked from the
    report, the JUnit properties and the summary."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):  # noqa: ANN001, ANN201
        from _pytest.runner import runtestprotocol

        config = item.config
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        if any(r.failed for r in reports):
            wave = _waves_dir(config) / f"{safe_nodeid(item.nodeid)}.fst"
            wave.parent.mkdir(parents=True, exist_ok=True)
            wave.unlink(missing_ok=True)
            config.stash[RERUN_WAVES_KEY] = wave
            try:
                again = runtestprotocol(item, nextitem=nextitem, log=False)
            finally:
                del config.stash[RERUN_WAVES_KEY]
            rerun = "failed" if any(r.failed for r in again) else "skipped" if any(r.skipped for r in again) \
                else "passed"
            if wave.is_file():
                note = f"waves of a re-run of this test with waves (re-run {rerun}): {wave}"
            else:
                why = next((r.longreprtext.strip().splitlines()[-1] for r in again if r.failed and r.longreprtext),
                           "the test opened no verilator target through nvdla-hil")
                note = f"re-run with waves ({rerun}) wrote no wave file {wave}: {why}"
                wave = None  # type: ignore[assignment]
            for r in reports:
                if r.failed:
                    r.sections.append(("nvdla-hil waves", note))
                    if wave is not None:
                        vars(r)["nvdla_waves"] = str(wave)  # an extra report attribute (xdist carries it); read by getattr below
                if r.when == "teardown" and wave is not None:
                    r.user_properties.append(("waves", str(wave)))
        for r in reports:
            ihook.pytest_runtest_logreport(report=r)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


def waves_lines(config: pytest.Config) -> list[str]:
    seen = config.stash.get(WAVES_SEEN_KEY, [])
    if not seen:
        return []
    return ["waves of failed tests (each re-run once with waves):"] + [f"  {n}: {w}" for n, w in seen]


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # noqa: ANN001
    if config.pluginmanager.has_plugin("nvdla-hil-summary"):
        return  # the summary table prints them
    lines = waves_lines(config)
    if lines:
        terminalreporter.write_sep("=", "nvdla-hil waves")
        for line in lines:
            terminalreporter.write_line(line)
