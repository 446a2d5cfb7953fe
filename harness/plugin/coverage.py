"""Functional coverage of a pytest session (``nvdla-hil regress``): the session's collector
(:class:`~nvdla_hil.harness.analysis.coverage.Coverage`, put in the session's ``TargetSpec`` so
every model target of the session feeds it, on every xdist worker), the workers' counts merged
into the controller's, the table printed at the end and ``coverage.json`` written::

    config.pluginmanager.register(coverage_for_session(config, path), "nvdla-hil-coverage")

A process that runs pytest sessions itself (a Dask worker, :mod:`~nvdla_hil.harness.plugin.cluster`)
hands the session a collector with ``pytest.main(..., plugins=[CoverageSink(cov)])``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from ..analysis.coverage import Coverage, format_table
from .keys import configured_profiles

__all__ = ["CoverageSink", "SessionCoverage", "coverage_for_session", "session_sink"]

#: where an xdist worker hands its counts to the controller (``workeroutput``)
_WORKER_KEY = "nvdla_hil_coverage"


class CoverageSink:
    """A pytest plugin object that only names the collector a session's model targets feed
    (passed by a caller that runs the session in-process and wants the counts back)."""

    def __init__(self, cov: Coverage) -> None:
        self.cov = cov


def session_sink(config: Any) -> Coverage | None:
    """The collector a :class:`CoverageSink` handed to this session, or None."""
    return next((p.cov for p in config.pluginmanager.get_plugins() if isinstance(p, CoverageSink)), None)


class SessionCoverage:
    """A pytest plugin object: collects the session's coverage on every process, merges xdist
    workers' counts into the controller, prints the table and writes ``path`` at the end."""

    def __init__(self, config: Any, path: str | Path | None = None, profiles: Iterable[str] | None = None,
                 cov: Coverage | None = None) -> None:
        self.config = config
        self.path = Path(path) if path is not None else None
        self.profiles = list(profiles) if profiles is not None else None
        self.cov = cov if cov is not None else Coverage()

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        if self.is_worker:
            self.config.workeroutput[_WORKER_KEY] = self.cov.to_json()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:  # xdist controller
        data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if data:
            self.cov.merge(data)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        profiles = self.profiles
        if profiles is None:
            try:
                profiles = configured_profiles(self.config)
            except Exception:  # noqa: BLE001 - no nvdla-hil options in this session
                profiles = sorted(self.cov.profiles)
        table = format_table(self.cov, profiles)
        total = (table.splitlines()[-1] if table else "").removeprefix("total: ")
        if self.path is not None:
            self.cov.write(self.path)
            Path(self.path).with_suffix(".txt").write_text(table + "\n", encoding="utf-8")
        # one line on the terminal (the table is in the run folder, or shown with --nvdla-coverage-table):
        # a regression's output leads with what failed and the summary
        if not self.cov.layers and not any(self.cov.counts.values()):
            terminalreporter.write_line("functional coverage: no reference-model layer ran in this session (traces and "
                                        "layers checked on other targets against their own goldens feed no bins)")
        elif _option(self.config, "--nvdla-coverage-table"):
            terminalreporter.write_sep("=", "nvdla-hil functional coverage")
            for line in table.splitlines():
                terminalreporter.write_line(line)
        else:
            # one terminal row: the table (and `nvdla-hil coverage show <coverage.json>`) is in the run folder
            where = (f"; table: {Path(self.path).with_suffix('.txt').name} in the run folder"
                     if self.path is not None else " (--nvdla-coverage-table prints the table)")
            terminalreporter.write_line(f"functional coverage: {total}; {self.cov.layers} model layers{where}")
            return
        if self.path is not None:
            terminalreporter.write_line(f"coverage written to {self.path}")


def _option(config: Any, name: str) -> Any:
    try:
        return config.getoption(name, default=False)
    except (AttributeError, ValueError):  # a session without nvdla-hil's options
        return False


def coverage_for_session(config: Any, path: str | Path | None = None,
                         profiles: Iterable[str] | None = None, cov: Coverage | None = None) -> SessionCoverage:
    """The plugin object the pytest plugin registers for a regression::

        config.pluginmanager.register(coverage_for_session(config, run_dir / "coverage.json"),
                                      "nvdla-hil-coverage")

    Register it in ``pytest_configure`` (of the controller and of every xdist worker); without
    ``path`` the table is printed only. ``profiles``: the profiles whose reachable bins count
    (default: the session's configured profiles); ``cov``: the collector (default a new one;
    model targets feed it when it is also in the session's ``TargetSpec``)."""
    return SessionCoverage(config, path, profiles, cov)
