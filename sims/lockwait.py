"""Waiting for a lock another process holds: who holds it is said at once and then every
``remind`` seconds, and how long the wait lasted is measured and recorded apart from the work
that follows, so a run's timings never count a queue for a shared build or board as work.

Every file lock of the tool (the build caches' ``<key>.lock``, :mod:`~nvdla_hil.sims.cache`; the
C model's build lock; the board locks, :mod:`~nvdla_hil.harness.boards.locks`) goes through this
module:

* the holder writes who it is into the lock file once it holds it (:func:`write_holder`): one
  JSON line ``{"pid", "host", "cmd", "since", "what", ...}``; it clears it before releasing;
* a waiter polls the lock (:func:`wait_for`) and says at once
  ``waiting for <lock>: held by pid N (<cmd>) on <host> since <time>``, then again every
  ``remind`` seconds with the time waited so far. A holder that is gone (its pid no longer runs
  on this host; a lock is only kept then by a process that inherited its descriptor) is said too;
* the seconds waited are returned, and appended as a :class:`LockWait` to every list opened by
  :func:`recording` around the wait in this thread (the pytest plugin opens one per test and
  reports the waits as the JUnit property ``lock_wait_s``, apart from the test's own time).

The recording lists are carried by a :class:`contextvars.ContextVar` (per thread and per asyncio
task, never shared between tests), so the code that waits (a simulator build deep inside a
target's ``open``) needs no parameter to report its wait.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["REMIND_S", "LockTimeout", "LockWait", "describe_holder", "holder_alive", "holder_of", "holder_record",
           "read_holder", "recording", "wait_for", "write_holder"]

#: seconds between two "still waiting" messages
REMIND_S = 30.0
#: the holder record's size bound: a lock file is read at most this many bytes
_MAX_RECORD = 4096

Say = Callable[[str], None]


class LockTimeout(TimeoutError):
    """A bounded wait for a lock ran out; the message names the lock and its holder."""


@dataclass(frozen=True)
class LockWait:
    """One wait for a lock: which, for whom, how long (seconds), and why it was taken."""

    path: str
    seconds: float
    holder: str
    what: str = ""

    def line(self) -> str:
        return f"{self.seconds:.1f} s for {self.path} (held by {self.holder})"


_RECORDERS: contextvars.ContextVar[tuple[list[LockWait], ...]] = contextvars.ContextVar("nvdla_hil_lock_waits", default=())


@contextlib.contextmanager
def recording() -> Iterator[list[LockWait]]:
    """A list that receives every :class:`LockWait` of this thread (or task) while the block runs
    (nested blocks each receive it)."""
    waits: list[LockWait] = []
    token = _RECORDERS.set((*_RECORDERS.get(), waits))
    try:
        yield waits
    finally:
        _RECORDERS.reset(token)


def _command() -> str:
    argv = list(getattr(sys, "orig_argv", None) or sys.argv)
    text = " ".join(shlex.join(argv).split()) if argv else f"python (pid {os.getpid()})"  # one line
    return text if len(text) <= 200 else text[:197] + "..."


def holder_record(what: str = "", extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """Who this process is, for a lock file: pid, host, command line, since (UTC), what for."""
    rec: dict[str, object] = {"pid": os.getpid(), "host": socket.gethostname(), "cmd": _command(),
                              "since": datetime.now(UTC).isoformat(timespec="seconds")}
    if what:
        rec["what"] = what
    rec.update(extra or {})
    return rec


def write_holder(fd: int, what: str = "", extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """Write this process's :func:`holder_record` into the lock file ``fd`` (held by us)."""
    rec = holder_record(what, extra)
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(rec) + "\n").encode(), 0)
    return rec


def read_holder(fd: int) -> dict[str, object]:
    """The holder record in the lock file ``fd`` ({} when empty or unreadable). A record of an
    older version (``host pid N since HH:MM:SS``) is read as far as it goes."""
    try:
        raw = os.pread(fd, _MAX_RECORD, 0).decode(errors="replace").strip()
    except OSError:
        return {}
    if not raw:
        return {}
    try:
        rec = json.loads(raw.splitlines()[0])
    except ValueError:
        parts = raw.split()
        if len(parts) >= 5 and parts[1] == "pid" and parts[2].isdigit() and parts[3] == "since":
            return {"host": parts[0], "pid": int(parts[2]), "since": parts[4]}
        return {"text": raw[:200]}
    return rec if isinstance(rec, dict) else {}


#: the largest pid Linux hands out (``/proc/sys/kernel/pid_max`` is at most 2**22)
_PID_MAX = 1 << 22


def _printable(value: object) -> str:
    """A record's field as one terminal-safe line, at most 200 characters (control characters as ``?``)."""
    return "".join(c if c.isprintable() else "?" for c in str(value)[:200])


def holder_alive(rec: Mapping[str, object]) -> bool | None:
    """Whether the record's pid still runs: None when it cannot be told (another host, no pid)."""
    pid = rec.get("pid")
    # the record is a file anyone sharing the cache can write: a pid Linux can have, or none
    if (not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= _PID_MAX
            or rec.get("host") not in (None, socket.gethostname())):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError as e:  # EPERM: it runs, as another user
        return e.errno == errno.EPERM
    return True


def describe_holder(rec: Mapping[str, object]) -> str:
    """``pid N (<cmd>) on <host> since <time>`` (and ``- gone`` for a dead pid on this host)."""
    if not rec:
        return "a process that has not written its name yet (an older nvdla-hil, or it is just starting)"
    if "pid" not in rec:
        return f"an unknown process ({_printable(rec.get('text', ''))})"
    text = f"pid {_printable(rec['pid'])}"
    if rec.get("cmd"):
        text += f" ({_printable(rec['cmd'])})"
    if rec.get("host") and rec.get("host") != socket.gethostname():
        text += f" on {_printable(rec['host'])}"
    if rec.get("since"):
        text += f" since {_printable(rec['since'])}"
    if holder_alive(rec) is False:
        text += (" - that process is gone; the lock is kept by a process that inherited it (or the "
                 "record is stale and the lock is about to be free)")
    return text


def _try_lock(lock: Callable[[], None]) -> bool:
    try:
        lock()
        return True
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise


def wait_for(path: str | os.PathLike[str], try_lock: Callable[[], None], holder: Callable[[], Mapping[str, object]], *,
             say: Say, what: str = "", remind: float = REMIND_S, timeout: float | None = None,
             why: str = "") -> float:  # fmt: skip
    """Take a lock: ``try_lock()`` (non-blocking; raises ``OSError`` EAGAIN/EACCES while another
    holds it) until it succeeds. While it fails, ``say`` who holds it (``holder()``, a record)
    at once and every ``remind`` seconds. Returns the seconds waited (0.0: free at once), which
    are also recorded (:func:`recording`). ``timeout`` (seconds, None: no bound): past it,
    :class:`LockTimeout` naming the holder. ``why``: a clause after the holder (what it does)."""
    if _try_lock(try_lock):
        return 0.0
    start = time.monotonic()
    told = start
    first = describe_holder(holder())
    prefix = f"{what}: " if what else ""
    say(f"{prefix}waiting for {os.fspath(path)}: held by {first}" + (f"; {why}" if why else ""))
    pause = 0.01
    while True:
        now = time.monotonic()
        if timeout is not None and now - start >= timeout:
            raise LockTimeout(f"{prefix}{os.fspath(path)} still held by {describe_holder(holder())} "
                              f"after {now - start:.1f} s")
        if now - told >= remind:
            rec = holder()
            if rec:  # the one to report: the holder as last named (it may not have written its name at first)
                first = describe_holder(rec)
            say(f"{prefix}still waiting for {os.fspath(path)} ({now - start:.0f} s so far): held by "
                f"{describe_holder(rec)}")
            told = now
        time.sleep(pause)
        pause = min(pause * 2, 0.25)
        if _try_lock(try_lock):
            break
    waited = time.monotonic() - start
    wait = LockWait(os.fspath(path), waited, first, what)
    for waits in _RECORDERS.get():
        waits.append(wait)
    if waited >= 1.0:
        say(f"{prefix}got {os.fspath(path)} after waiting {waited:.1f} s")
    return waited


def holder_of(fd: int) -> Callable[[], Mapping[str, object]]:
    """``holder`` for :func:`wait_for`: the record in the lock file ``fd``."""
    return lambda: read_holder(fd)
