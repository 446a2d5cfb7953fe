"""The tool's own error types, at the root of which the command line decides its exit code.

The tree itself (a root and one base per layer) lives in the leaf :mod:`nvdla_hil.errors`, which
the reference model can import without the driver package; it is re-exported here with
:func:`is_own_error` and :func:`write_atomic`. The exit-code contract (``harness/cli``): an
:class:`NvdlaHilError` — or another exception class defined in ``nvdla_hil`` — is the user's
input or configuration, exit 2 with its message; anything else (a bare ``ValueError``,
``KeyError``, ``TypeError`` from the tool's own code) is a programming error, exit 3 with a
traceback.
"""

from __future__ import annotations

import contextlib
import os

from ..errors import (
    ConfigError,
    InputError,
    ModelError,
    NvdlaHilError,
    RegisterMapError,
    ResultsError,
    TransportError,
)

__all__ = ["NvdlaHilError", "TransportError", "RegisterMapError", "InputError", "ModelError", "ConfigError",
           "ResultsError", "is_own_error", "write_atomic"]


def is_own_error(exc: BaseException) -> bool:
    """True for an exception the tool raised on purpose: an :class:`NvdlaHilError`, or any class
    defined in the ``nvdla_hil`` package (``VectorError``, ``RegisterMapError``, ...)."""
    if isinstance(exc, NvdlaHilError):
        return True
    return any(c.__module__.startswith("nvdla_hil.") for c in type(exc).__mro__[:-1]
               if c.__module__ not in ("builtins",))


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``path`` whole or not at all: a temporary file beside it, flushed and synced, then
    renamed over it. A full or read-only disk raises :class:`ResultsError` naming ``path``; the
    temporary file is removed, and an existing ``path`` is left as it was."""
    import tempfile

    dest = os.fspath(path)
    folder = os.path.dirname(dest) or "."
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(dest)}.", suffix=".part", dir=folder)
        mask = os.umask(0o022)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # as open() would create it, not mkstemp's 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        tmp = None
    except OSError as e:
        raise ResultsError(e.errno, f"cannot write it: {e.strerror or e}", dest) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
