"""Children that a test signals start with SIGINT and SIGHUP as an interactive terminal gives them.

A process started in the background by a non-interactive shell, or under ``nohup``, inherits
SIGINT (and, under nohup, SIGHUP) *ignored*, and Python keeps an inherited SIGINT ignored; so does
nvdla-hil for SIGHUP (a nohup'd regression must survive a hang-up). A test that sends Ctrl-C or a
hang-up to a child and expects it to stop would then depend on how the test run itself was
started: ``make flaky`` from a background shell saw a SIGINT'd regression run to completion (exit
0), and a CI run saw a SIGHUP'd labgrid holder keep sleeping after releasing its place.

:func:`with_default_signals` wraps a child's argv in a tiny launcher that sets the dispositions and
``exec``\\ s the command (same pid). Not ``preexec_fn``: that forces a plain ``fork`` of the test
process, whose gRPC threads (labgrid's client) then break in the child ("epoll_wait error: Bad file
descriptor", seen in CI).
"""

from __future__ import annotations

import signal
import sys

_LAUNCH = ("import os, signal, sys\n"
           "ignored = {int(s) for s in sys.argv[1].split(',') if s}\n"
           "for s in (signal.SIGINT, signal.SIGHUP):\n"
           "    signal.signal(s, signal.SIG_IGN if int(s) in ignored else signal.SIG_DFL)\n"
           "os.execvp(sys.argv[2], sys.argv[2:])\n")


def with_default_signals(argv: list[str], *, ignore: tuple[signal.Signals, ...] = ()) -> list[str]:
    """``argv`` run with SIGINT and SIGHUP at their defaults (those in ``ignore``: ignored, as ``nohup`` does)."""
    return [sys.executable, "-c", _LAUNCH, ",".join(str(int(s)) for s in ignore), *argv]
