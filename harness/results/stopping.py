"""How a recorded run stops on a signal: :class:`RunStop`, a pytest plugin object registered with
the results recorder on the process that owns the run.

SIGINT (Ctrl-C), SIGTERM (a scheduler's kill, ``timeout``) and SIGHUP (a closed terminal or SSH
session) stop the run as Ctrl-C does, with pytest's ``KeyboardInterrupt``, at once while a test's
own code runs (a simulation must not hold a cancelled job for minutes) - but never inside the
bookkeeping of a result. A signal that arrives while a report is being made or written (pytest's
JUnit writer, the results database, the summary, the progress line) is held until that hook has
run to its end and raised there; one that arrives while the session is ending is recorded and
not raised, so the session still writes what it has.

Why: an interrupt in the middle of pytest's JUnit writer finalising a testcase leaves it half
cleared (``_NodeReporter.finalize`` clears its attributes before it stores the XML), and the
session then ended in an internal error, exit 3, instead of exit 130 (the project's CI,
2026-11-29); one in ``pytest_sessionfinish`` before the JUnit writer's lost junit.xml.

A second signal while one is held stops at once, as a second Ctrl-C does. A signal the run
was started with ignored (``nohup``: SIGHUP; a shell's background job: SIGINT) stays ignored.

Python 3.11 may put a traceback entry without a line number (``tb_lineno`` None) on an
interrupt that lands on an instruction that has none; pytest's terminal reporter cannot format
that entry (a TypeError in ``pytest_keyboard_interrupt``, as in pytest-xdist issue 1196) and the
session ends in an internal error: :meth:`RunStop.pytest_keyboard_interrupt` drops those entries
first.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Generator, Iterator
from types import TracebackType
from typing import Any

import pytest

__all__ = ["RunStop", "reason_of", "without_lineless_entries"]

#: the signals that stop a run, and how the run's record says so
REASONS = {"SIGINT": "interrupted (Ctrl-C)", "SIGTERM": "stopped by SIGTERM", "SIGHUP": "stopped by SIGHUP"}


def reason_of(exc: BaseException | None) -> str:
    """What stopped the session, from the interrupt it raised: a signal's name (the argument
    :class:`RunStop` gives its ``KeyboardInterrupt``), else a plain Ctrl-C; "" for anything else,
    pytest's own stop (``Session.Interrupted``: a collection error, ``-x``) included."""
    if not isinstance(exc, KeyboardInterrupt) or isinstance(exc, pytest.Session.Interrupted):
        return ""
    return REASONS.get(str(exc), REASONS["SIGINT"])


def without_lineless_entries(tb: TracebackType | None) -> TracebackType | None:
    """The traceback ``tb`` with every entry whose line number is None unlinked (in place: its
    ``tb_next`` chain is rewritten); the head is kept unless it is such an entry itself."""
    while tb is not None and tb.tb_lineno is None:
        tb = tb.tb_next
    node = tb
    while node is not None:
        while node.tb_next is not None and node.tb_next.tb_lineno is None:
            node.tb_next = node.tb_next.tb_next
        node = node.tb_next
    return tb


class RunStop:
    """The run's signal handling (module docstring). ``reason`` is what stopped the run ("" until a
    signal came); ``pending`` a held signal's name not raised (yet)."""

    NAMES = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.reason = ""
        self.pending = ""
        self._depth = 0  # hooks being run that an interrupt must not split
        self._saved: dict[int, Any] = {}

    # ---- handlers ------------------------------------------------------------------------------

    def install(self) -> None:
        """Take SIGINT, SIGTERM and SIGHUP (main thread only: Python runs handlers nowhere else),
        leaving any the process was started with ignored."""
        if threading.current_thread() is not threading.main_thread():
            return
        for name in self.NAMES:
            signum = getattr(signal, name, None)
            if signum is None or signal.getsignal(signum) == signal.SIG_IGN:
                continue
            self._saved[signum] = signal.signal(signum, self._on_signal)

    def uninstall(self) -> None:
        """Give the handlers back (to what they were before :meth:`install`)."""
        saved, self._saved = self._saved, {}
        for signum, old in saved.items():
            signal.signal(signum, old)

    def _on_signal(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        self.reason = self.reason or REASONS.get(name, f"stopped by {name}")
        if self._depth and not self.pending:
            self.pending = name  # raised when the hook being run has finished
            return
        self.pending = ""
        raise KeyboardInterrupt(name)

    @contextlib.contextmanager
    def held(self, *, raise_after: bool = True) -> Iterator[None]:
        """A block no signal interrupts (a second one does); a signal held in it is raised as the
        block ends, unless ``raise_after`` is False (the session is ending: it is only recorded)."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if raise_after and not self._depth and self.pending:
            name, self.pending = self.pending, ""
            raise KeyboardInterrupt(name)

    # ---- pytest: the hooks an interrupt must not split -------------------------------------------

    def _wrap(self, raise_after: bool = True) -> Generator[None, Any, Any]:
        with self.held(raise_after=raise_after):
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collectreport(self, report: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> Generator[None, Any, Any]:
        return (yield from self._wrap())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, Any, Any]:
        return (yield from self._wrap(raise_after=False))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap(raise_after=False))

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Before pytest's terminal reporter formats the interrupt: its line-less entries unlinked
        (the head is pytest's own session frame, which has a line)."""
        without_lineless_entries(excinfo.tb)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> Generator[None, Any, Any]:
        with self.held(raise_after=False):
            try:
                return (yield)
            finally:
                self.uninstall()
