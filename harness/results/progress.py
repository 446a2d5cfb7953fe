"""Live progress of a run, on every target: done/total, failures so far, elapsed and ETA, the
test running now.

On a terminal one status line is redrawn in place (pytest's own terminal writer, so the
captured output and the summary stay as pytest prints them; the per-test letters are left out
since the line says more). Elsewhere (CI logs, a file) it writes plain lines: each failure as
it happens, and a progress line every twentieth of the run or every 30 s, whichever comes first.
The ETA accounts for failures: a failing test costs far more than a passing one (its
diagnosis, the suspect-register search, its logs: 12 s against 0.15 s for a trace with an
injected SDP bug), and failures come in clusters, so the time per test so far says little about
the tests left. The time between results is kept apart for results that passed and results
that failed, and the ETA says what it assumes: ``ETA 0:12 if none fail`` before the first
failure (the mean of a run's first, passing tests promised 0:22 for a run that took 114 s),
then ``ETA 0:36 at 12% failing, up to 7:48`` - the tests left at the failure share seen so far,
and the time if every one of them failed. Before the first result it is ``?``. It counts
results as the controller receives them (local, xdist and Dask runs alike), so with workers the
times are the controller's gaps between results, not a test's own duration.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from .textsafe import term_safe

__all__ = ["LiveProgress", "fmt_seconds"]


def fmt_seconds(s: float) -> str:
    s = max(0, int(round(s)))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class LiveProgress:
    def __init__(self, config: pytest.Config, mode: str) -> None:
        self.config = config
        self.mode = mode
        self.total = 0
        self.done = 0
        self.failed = 0
        self.running: list[str] = []
        self._failed_ids: set[str] = set()
        self.t0 = time.monotonic()
        self.last_done = self.t0
        self.spent = {"pass": [0.0, 0], "fail": [0.0, 0]}  # seconds between results, count
        self.last_plain = self.t0
        self.last_plain_done = 0
        self.tty = False
        self.tr: Any = None
        self.width = 0

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.tr = self.config.pluginmanager.get_plugin("terminalreporter")
        isatty = bool(getattr(self.tr, "isatty", False))
        self.tty = self.tr is not None and (self.mode == "tty" or (self.mode == "auto" and isatty))
        self.t0 = self.last_done = time.monotonic()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._collected(len(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the controller collects nothing itself: the total is the workers' (each
        collects the same tests)."""
        self._collected(len(ids))

    def _collected(self, n: int) -> None:
        if n <= self.total:
            return
        self.total = n
        if self.tr is not None and not self.tty:
            self.tr.write_line(f"nvdla-hil: {self.total} tests to run")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_report_teststatus(self, report: Any, config: pytest.Config):  # noqa: ANN201
        outcome = yield
        res = outcome.get_result()
        if res and config.get_verbosity() <= 0 and isinstance(res, tuple) and len(res) == 3:
            cat, _letter, word = res
            outcome.force_result((cat, "", word or cat))  # the status line replaces the letters

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.running.append(nodeid)
        if self.tty:
            self._draw()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and report.when in ("setup", "call", "teardown"):
            if report.nodeid not in self._failed_ids:
                self.failed += 1
                self._failed_ids.add(report.nodeid)
            if not self.tty and self.tr is not None:
                self.tr.write_line(f"FAILED {term_safe(report.nodeid)} ({report.when}) after {fmt_seconds(self._elapsed())}")
        if report.when == "teardown":
            now = time.monotonic()
            kind = self.spent["fail" if report.nodeid in self._failed_ids else "pass"]
            kind[0] += now - self.last_done
            kind[1] += 1
            self.last_done = now
            self.done += 1
            if report.nodeid in self.running:
                self.running.remove(report.nodeid)
            if self.tty:
                self._draw()
            else:
                self._plain()

    def _elapsed(self) -> float:
        return time.monotonic() - self.t0

    def eta(self) -> str:
        """The time left, with what it assumes (see the module doc); ``?`` before the first result."""
        left = max(self.total - self.done, 0)
        if not self.done or not self.total:
            return "?"
        if not left:
            return "0:00"
        (tp, np_), (tf, nf) = self.spent["pass"], self.spent["fail"]
        if not nf:
            return f"{fmt_seconds(left * tp / np_)} if none fail"
        if not np_:
            return f"{fmt_seconds(left * tf / nf)} if all fail"
        share = nf / (nf + np_)
        mid = left * (share * tf / nf + (1 - share) * tp / np_)
        return f"{fmt_seconds(mid)} at {share:.0%} failing, up to {fmt_seconds(left * tf / nf)}"

    def line(self) -> str:
        el = self._elapsed()
        eta = self.eta()
        now = term_safe(self.running[-1].split("::")[-1]) if self.running else ""
        return (f"[{self.done}/{self.total}] {self.failed} failed | {fmt_seconds(el)} elapsed, ETA {eta}"
                + (f" | {now}" if now else ""))

    def _draw(self) -> None:
        tw = self.tr._tw  # noqa: SLF001 - pytest's terminal writer, so the line and pytest's output share one stream
        text = self.line()[: max(tw.fullwidth - 1, 20)]
        tw.write("\r" + text + " " * max(self.width - len(text), 0) + "\r")
        tw.flush()
        self.width = len(text)

    def _clear(self) -> None:
        if self.tty and self.tr is not None and self.width:
            self.tr._tw.write("\r" + " " * self.width + "\r")  # noqa: SLF001
            self.width = 0

    def _plain(self) -> None:
        step = max(1, self.total // 20)
        now = time.monotonic()
        if self.done - self.last_plain_done >= step or now - self.last_plain >= 30 or self.done == self.total:
            self.last_plain, self.last_plain_done = now, self.done
            if self.tr is not None:
                self.tr.write_line("progress " + self.line())

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._clear()
