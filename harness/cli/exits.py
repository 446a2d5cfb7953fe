"""The exit-code contract of every ``nvdla-hil`` command (the package docstring states it):
0 ran and passed, 1 a test failed, 2 bad input or configuration, 3 an internal error, 4 the
lab's infrastructure failed, 130 interrupted; and :func:`exit_code_for`, which maps the exception
that ended a command onto it."""

from __future__ import annotations

import errno
import sys

from ...drivers.errors import ConfigError, is_own_error

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_INTERNAL", "EXIT_INFRASTRUCTURE", "EXIT_PASSED",
           "BadInput", "bad_input", "exit_code_for", "describe"]

#: tests ran and none failed
EXIT_PASSED = 0
#: a test failed on its result (its output, statistics or status differs from the golden)
EXIT_FAILED = 1
#: bad input or configuration (a malformed vector, trace or loadable, an unknown option value, a
#: missing checkout): nothing ran, or what ran cannot be trusted
EXIT_BAD_INPUT = 2
#: Ctrl-C (or SIGTERM) stopped the command: 128 + SIGINT, as shells report it; never 2 (bad input)
EXIT_INTERRUPTED = 130
#: a programming error inside nvdla-hil (a traceback is printed): please report it
EXIT_INTERNAL = 3
#: tests could not run to a result because the board, its link or the simulator failed, and no
#: test failed on its result (harness/boards/health.py): the lab's problem, not the hardware's
EXIT_INFRASTRUCTURE = 4


class BadInput(ConfigError):
    """Bad input or configuration: exit 2 with this message."""


#: OSErrors about a path the user gave or the environment (a missing file, a full or read-only
#: disk): exit 2 with the path; any other OSError from our own code is internal
_ENV_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT,
                         errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENAMETOOLONG, errno.ELOOP,
                         errno.ENOTEMPTY, errno.EMFILE, errno.ENFILE, errno.EFBIG, errno.EXDEV, errno.EBUSY})


def exit_code_for(exc: BaseException) -> int:
    """The exit-code contract for an exception that ends a command: 130 for an interrupt; 2 for
    the tool's own error types (bad input or configuration, a board that cannot be reached, a
    results disk that is full: :func:`~nvdla_hil.drivers.errors.is_own_error`) and for an
    ``OSError`` naming a path (missing, unreadable, disk full); 3 (internal error) for anything
    else - a bare ``ValueError`` or ``KeyError`` is a bug of ours, not the user's input."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if is_own_error(exc):
        return EXIT_BAD_INPUT
    if isinstance(exc, OSError) and exc.filename is not None and exc.errno in _ENV_ERRNOS:
        return EXIT_BAD_INPUT
    return EXIT_INTERNAL


def describe(exc: BaseException) -> str:
    """The one line printed for an exception that is not internal (a path-naming ``OSError``:
    ``path: reason``)."""
    if isinstance(exc, OSError) and not is_own_error(exc) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc)


def bad_input(command: str, message: str) -> int:
    """Print ``nvdla-hil COMMAND: MESSAGE`` on stderr; returns :data:`EXIT_BAD_INPUT`."""
    print(f"nvdla-hil {command}: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
