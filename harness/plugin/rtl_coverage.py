"""RTL code coverage of a pytest session on the Verilator target (``--nvdla-rtl-coverage
line,toggle``; ``nvdla-hil regress --rtl-coverage line,toggle``).

The session's :class:`~nvdla_hil.harness.targets.verilator.RtlCoverageFolder` goes into its
``TargetSpec``: every simulator the session opens is the instrumented build, and each test's
counts are written to ``<folder>/tests/`` when the test releases its target. This plugin object
tells the folder which test is running (on every process: the single one or each xdist worker,
which write into the same folder), keeps each test's duration, and at the end of the session
(the controller only) merges the files (:mod:`~nvdla_hil.harness.analysis.rtl_coverage`), writes
``merged.dat``, ``coverage.info``, ``html/`` and ``summary.json`` beside them, and prints one
line (``--nvdla-coverage-table``: the per-unit table). The folder is ``rtl-coverage/`` of the
run folder (beside ``--nvdla-log``), else ``--nvdla-rtl-coverage-dir``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ...drivers.files import InputError
from ..analysis import rtl_coverage as rc
from ..targets.rtl_coverage import RtlCoverageFolder
from .keys import is_dask_worker_session, is_worker

__all__ = ["RtlCoverageSession", "rtl_coverage_folder"]

_WORKER_KEY = "nvdla_hil_rtl_coverage_seconds"


def _for_another(config: pytest.Config) -> bool:
    """This session's tests belong to a controller's run: an xdist worker, or a Dask worker's
    session of one test (harness/plugin/cluster.py), which writes its per-test file into the
    run's folder (shared with the controller) and leaves the merge to the controller."""
    return is_worker(config) or is_dask_worker_session(config)


def rtl_coverage_folder(config: pytest.Config, kind: str) -> RtlCoverageFolder | None:
    """The session's folder for ``--nvdla-rtl-coverage KINDS`` (None without it); a usage error
    on a target that is not verilator or an unknown kind."""
    kinds = config.getoption("--nvdla-rtl-coverage", default=None)
    if not kinds:
        return None
    if kind != "verilator":
        raise pytest.UsageError(f"--nvdla-rtl-coverage measures the RTL: it needs --nvdla-target verilator, not {kind}")
    where = config.getoption("--nvdla-rtl-coverage-dir", default=None)
    logs = config.getoption("--nvdla-log", default=None)
    folder = Path(where) if where else (Path(logs).parent / "rtl-coverage" if logs else Path("nvdla-rtl-coverage"))
    from nvdla_hil.sims.build import BuildError

    tests = folder / "tests"
    # a folder that already holds per-test files would be merged with them: refuse it (the controller
    # checks before any worker writes, xdist's or Dask's; nothing recorded is overwritten or mixed in)
    if not _for_another(config) and tests.is_dir() and any(tests.iterdir()):
        raise pytest.UsageError(f"--nvdla-rtl-coverage: {tests} already holds the coverage of an earlier run; "
                                f"choose another --nvdla-rtl-coverage-dir (nvdla-hil regress uses a new run folder)")
    try:
        return RtlCoverageFolder(tests, kinds.split(","))
    except (BuildError, ValueError) as e:
        raise pytest.UsageError(f"--nvdla-rtl-coverage {kinds}: {e}") from None


class RtlCoverageSession:
    """The plugin object: names the running test for the folder, merges at the end."""

    def __init__(self, config: Any, folder: RtlCoverageFolder) -> None:
        self.config = config
        self.folder = folder
        self.seconds: dict[str, float] = {}
        self.summary: dict[str, Any] | None = None

    @property
    def is_worker(self) -> bool:
        """Tests run here for a controller that merges (an xdist worker, a Dask worker's session)."""
        return _for_another(self.config)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.folder.current_test = nodeid

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when in ("setup", "call", "teardown"):
            self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + float(report.duration)

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        self.folder.close()
        if hasattr(self.config, "workerinput"):  # xdist: the controller gets the seconds with the node
            self.config.workeroutput[_WORKER_KEY] = json.dumps(self.seconds)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:  # xdist controller
        data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if data:
            for k, v in json.loads(data).items():
                self.seconds.setdefault(k, v)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        out = self.folder.folder.parent
        try:
            runs = rc.merge_folder(self.folder.folder, seconds=self.seconds)
        except InputError as e:
            terminalreporter.write_line(f"RTL coverage: none merged: {e}")
            return
        self.summary = rc.write_outputs(out, runs)
        if self.folder.lost:
            terminalreporter.write_line(f"RTL coverage lost with its simulator (crashed or killed): "
                                        f"{', '.join(self.folder.lost)}")
        table = self.config.getoption("--nvdla-coverage-table", default=False)
        for name, one in self.summary["configs"].items():
            terminalreporter.write_line(f"RTL coverage of {name} ({','.join(self.folder.kinds)}, {one['tests']} tests): "
                                        f"{rc.total_line(one)}; {out / one['folder']}")
            if table:
                for line in rc.format_unit_table(one["units"]).splitlines():
                    terminalreporter.write_line("  " + line)
            if one.get("html_note"):
                terminalreporter.write_line(f"  HTML view: {one['html_note']}")
