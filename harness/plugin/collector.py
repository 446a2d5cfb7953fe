"""The plugin a session run for another process carries (a Dask worker's session of one test,
:mod:`~nvdla_hil.harness.plugin.cluster`): it keeps every report of the session, serialised
(``pytest_report_to_serializable``), for the controller that owns the run to replay. A session that
carries one records nothing itself (the results database is the controller's)."""

from __future__ import annotations

import pytest

__all__ = ["ReportCollector"]


class ReportCollector:
    """Worker-side plugin: every report of the session, serialised."""

    def __init__(self) -> None:
        self.reports: list[dict] = []
        self.config: pytest.Config | None = None
        self.collected = 0

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and self.config is not None:
            self.reports.append(self.config.hook.pytest_report_to_serializable(config=self.config, report=report))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.config is not None:
            self.reports.append(self.config.hook.pytest_report_to_serializable(config=self.config, report=report))
