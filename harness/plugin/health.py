"""pytest side of the two verdicts (:mod:`nvdla_hil.harness.boards.health`): a test failure (the
hardware computed something wrong) apart from an infrastructure failure (the board died or hung,
the link failed, the simulator crashed or hung, no board could be had).

A pytest plugin (loaded by the ``nvdla_hil`` plugin's ``pytest_plugins``): a test whose exception
is an infrastructure error gets one line as its failure text (``infrastructure failure:
<message>``), the report attribute ``nvdla_infra`` (it survives xdist's and Dask's
serialisation) and the JUnit property ``verdict=infrastructure``; the session ends with a line
counting infrastructure and test failures apart. ``--nvdla-health-check``: each board of the
session runs a known-good layer first (:func:`~nvdla_hil.harness.plugin.boards.health_check_boards`)
and the notes it leaves are printed when the session starts.
"""

from __future__ import annotations

import pytest

from ..boards.health import INFRA_PROPERTY, check_health, infrastructure_reason, result_error, take_spare
from ..boards.quarantine import quarantine, quarantine_path, quarantined, release_hint
from .keys import HEALTH_KEY, LOCK_KEY, OPENED_KEY, SPEC_KEY, is_worker

__all__ = ["HealthRecheck", "InfraCount"]


def _dead_target(item: pytest.Item) -> str | None:
    """The reason a target the test opened was declared dead (a serial board), if one was."""
    for target, _ in item.stash.get(OPENED_KEY, []):
        dead = getattr(target, "dead_reason", None)
        if dead:
            return f"BoardDeadError: {getattr(target, 'where', '')}: {dead}"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):  # noqa: ANN001, ANN201
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed:
        return
    why = infrastructure_reason(call.excinfo.value)
    if why is None and call.excinfo.type.__name__ == "Failed":  # pytest.fail(result.summary())
        why = result_error(str(call.excinfo.value)) or _dead_target(item)
    if why is None:
        return
    report.nvdla_infra = why
    report.longrepr = f"infrastructure failure: {why}"
    if INFRA_PROPERTY not in item.user_properties:
        item.user_properties.append(INFRA_PROPERTY)
        if call.when == "teardown":
            report.user_properties = list(item.user_properties)


class InfraCount:
    """Counts infrastructure failures apart from test failures; one line at the end."""

    def __init__(self) -> None:
        self.infra: list[str] = []
        self.failed = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        if getattr(report, "nvdla_infra", None):
            self.infra.append(report.nodeid)
        elif not getattr(report, "nvdla_bad_input", None):
            self.failed += 1

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        if not self.infra:
            return
        n = len(dict.fromkeys(self.infra))
        terminalreporter.write_line(
            f"nvdla-hil: {n} infrastructure failure{'s' if n != 1 else ''} (board dead or hung, link fault, "
            f"simulator crashed or hung, no board: not the hardware's result) and {self.failed} test "
            f"failure{'s' if self.failed != 1 else ''}", red=True)


class HealthRecheck:
    """``--nvdla-health-recheck N`` (with ``--nvdla-health-check``), where the tests run: after N
    consecutive test failures on one board (failures on their result: not infrastructure, not bad
    input), the board runs its known-good layer again between tests, holding its per-use lock.
    A board that fails it is quarantined (the lab's record, the labgrid place's comment) and the
    session's later tests go to the other boards of the session (the serial target skips a
    quarantined board; a single-process session takes a spare board of its pool); one that passes
    it vouches for the failures: they are the layers' own, and counting starts again."""

    def __init__(self, config: pytest.Config, after: int) -> None:
        self.config = config
        self.after = after
        self.failures: dict[str, int] = {}
        self.verdict: dict[str, bool] = {}  # per test: failed on its result (from its call report)
        self.notes: list[str] = []

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        for note in self.notes:
            terminalreporter.write_line(f"nvdla-hil: {note}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.failed):
            self.verdict[report.nodeid] = (report.failed and not getattr(report, "nvdla_infra", None)
                                           and not getattr(report, "nvdla_bad_input", None))
            return
        if report.when != "teardown" or report.nodeid not in self.verdict:
            return
        failed = self.verdict.pop(report.nodeid)
        board = str(dict(report.user_properties).get("board") or "")  # the board the test ran on (at teardown)
        if not board or "," in board:
            return
        self.failures[board] = self.failures.get(board, 0) + 1 if failed else 0
        if self.failures[board] >= self.after:
            self.failures[board] = 0
            self._recheck(board)

    def _recheck(self, name: str) -> None:
        from ..boards.lab import BoardLock, resolve_board

        spec = self.config.stash[SPEC_KEY]
        info = spec.extra.get("session_lock") or {}
        lab, cfg = resolve_board(spec.lab, name)
        path = next((b["path"] for b in info.get("boards", []) if b["name"] == name), None)
        use = BoardLock(cfg.url, board=name, path=path + ".use") if path else None
        if use is not None:
            use.acquire(float(info.get("wait", 300.0)))
        try:
            why = check_health(lab, cfg)
        finally:
            if use is not None:
                use.release()
        notes = self.notes
        if why is None:
            notes.append(f"board {name}: health re-check after {self.after} consecutive failures passed: "
                         f"those failures are the layers' own")
            return
        quarantine(lab, cfg, f"health re-check after {self.after} consecutive failures: {why}")
        notes.append(f"board {name} QUARANTINED mid-run after {self.after} consecutive failures "
                     f"(recorded in {quarantine_path(lab)}): {why}")
        if not is_worker(self.config) and info.get("pool"):
            self._take_spare(lab, info)

    def _take_spare(self, lab, info: dict) -> None:  # noqa: ANN001
        """A single-process session: the next free, healthy board of its pool joins the session."""
        from ..boards.lab import resolve_boards

        _, cfgs, _ = resolve_boards(str(lab.path), f"pool:{info['pool']}")
        held = {b["name"] for b in info.get("boards", [])}
        sick = quarantined(lab)
        failed: list[str] = []
        lock = take_spare(lab, [c for c in cfgs if c.name not in held and c.name not in sick], failed)
        if lock is None:
            return
        locks = self.config.stash.get(LOCK_KEY, None)
        if not isinstance(locks, list):  # no session locks to join: give the spare back
            lock.release()
            return
        locks.append(lock)  # released with the session's other locks
        info.setdefault("boards", []).append({"name": lock.cfg.name, "path": str(lock.path)})


class QuarantineReport:
    """The controller's closing lines: the boards quarantined while this session ran, and how to
    bring one back (the record outlives the session: later sessions skip the board)."""

    def __init__(self, lab_path: str) -> None:
        from ..boards.lab import load_lab

        self.lab = load_lab(lab_path)
        self.before = set(quarantined(self.lab))
        self.failed_on: dict[str, list[str]] = {}  # board -> tests that failed on their result there
        self._failed: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and report.when in ("setup", "call") and not getattr(report, "nvdla_infra", None) \
                and not getattr(report, "nvdla_bad_input", None):
            self._failed.add(report.nodeid)
        if report.when == "teardown" and report.nodeid in self._failed:
            board = str(dict(report.user_properties).get("board") or "")
            if board:
                self.failed_on.setdefault(board, []).append(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        now = quarantined(self.lab)
        for name in sorted(set(now) - self.before):
            terminalreporter.write_line(f"nvdla-hil: board {name} was quarantined during this run: "
                                        f"{now[name].get('reason', '?')}; {release_hint(self.lab, name)}", red=True)
            failed = self.failed_on.get(name, [])
            if failed:
                terminalreporter.write_line(
                    f"nvdla-hil: {len(failed)} test failure{'s' if len(failed) != 1 else ''} ran on board {name} before "
                    f"its quarantine and may be the board's, not the design's: rerun on a healthy board: "
                    + " ".join(n.rsplit("::", 1)[-1] for n in failed[:8]) + (" ..." if len(failed) > 8 else ""), red=True)


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("nvdla-hil-infra-count"):
        config.pluginmanager.register(InfraCount(), "nvdla-hil-infra-count")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    spec = config.stash.get(SPEC_KEY, None)
    if spec is not None and spec.kind == "serial" and spec.lab and config.getoption("nvdla_health_check", default=False):
        after = int(config.getoption("nvdla_health_recheck", default=3) or 0)
        runs_tests = is_worker(config) or getattr(config.option, "dist", "no") == "no"
        if after > 0 and runs_tests and not config.pluginmanager.has_plugin("nvdla-hil-health-recheck"):
            config.pluginmanager.register(HealthRecheck(config, after), "nvdla-hil-health-recheck")
        if not is_worker(config) and not config.pluginmanager.has_plugin("nvdla-hil-quarantine-report"):
            config.pluginmanager.register(QuarantineReport(spec.lab), "nvdla-hil-quarantine-report")
    tr = config.pluginmanager.get_plugin("terminalreporter")
    for note in config.stash.get(HEALTH_KEY, []):
        if tr is not None:
            tr.write_line(f"nvdla-hil: {note}")


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nvdla-hil")
    g.addoption("--nvdla-health-check", action="store_true", default=False, dest="nvdla_health_check",
                help="serial target: before any test, each board runs a short known-good layer (a bundled "
                     "vector whose golden is an RTL run) and must match it; a board that fails is quarantined "
                     "(the lab's quarantine file, and a comment on its labgrid place) and the session goes on "
                     "with the rest of its pool")
    g.addoption("--nvdla-health-recheck", type=int, default=3, metavar="N", dest="nvdla_health_recheck",
                help="with --nvdla-health-check: after N consecutive test failures on one board, the board runs its "
                     "known-good layer again; failing it, it is quarantined and later tests go to the rest of the "
                     "session's boards (default 3; 0: never re-check)")


