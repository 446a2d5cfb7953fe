"""Children that a test signals start with SIGINT and SIGHUP as an interactive terminal gives them.

A process started in the background by a non-interactive shell, or under ``nohup``, inherits
SIGINT (and, under nohup, SIGHUP) *ignored*, and Python keeps an inherited SIGINT ignored; so does
nvdla-hil for SIGHUP (a nohup'd regression must survive a hang-up). A test that sends Ctrl-C or a
hang-up to a child and expects it to stop would then depend on how the test run itself was
started: ``make flaky`` from a background shell saw a SIGINT'd regression run to completion (exit
0), and a CI run saw a SIGHUP'd labgrid holder keep sleeping after releasing its place. Pass
:func:`default_signals` as ``preexec_fn`` to such a child.
"""

from __future__ import annotations

import signal


def default_signals() -> None:
    """``preexec_fn``: SIGINT and SIGHUP back to their defaults in the child, whatever was inherited."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
