"""Exclusive board locking: one ``fcntl.flock`` per board endpoint (aliases of one endpoint share
it, :func:`board_endpoint`) plus one per lab name, held for a use (:class:`BoardLock`,
:func:`locked`) or a whole regression (:class:`SessionBoardLock`). The rules are in :mod:`.lab`'s
docstring ("Locking").
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from ...sims.lockwait import LockTimeout, holder_of, wait_for, write_holder
from .config import BoardConfig, Lab, LabError


class BoardBusyError(RuntimeError):
    """Another process holds the board's lock; the message names the holder (PID, host, since)."""


def _canonical_host(host: str) -> str:
    """A host as one address: loopback names and addresses are 127.0.0.1; a name resolves to
    its lowest address (so ``localhost``, ``127.0.0.1`` and ``::1`` are one endpoint)."""
    h = host.strip("[]").lower()
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        try:
            infos = socket.getaddrinfo(h, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return h
        ips = sorted({ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos}, key=lambda a: (a.version, a))
        if not ips:
            return h
        if any(a.is_loopback for a in ips):
            return "127.0.0.1"
        return str(ips[0])
    return "127.0.0.1" if ip.is_loopback else str(ip)


def board_endpoint(url: str) -> str:
    """The board a pyserial URL reaches, as one canonical string.

    ``socket://localhost:7777`` and ``socket://127.0.0.1:7777`` give ``socket://127.0.0.1:7777``;
    a device path (a ``/dev/serial/by-id`` link, ``spy://`` around it) gives its real path."""
    u = url.strip()
    scheme, sep, rest = u.partition("://")
    if not sep:
        return os.path.realpath(u) if os.path.exists(u) else os.path.normpath(u)
    scheme = scheme.lower()
    rest = rest.split("?", 1)[0]
    if scheme in ("socket", "rfc2217", "tcp"):
        host, _, port = rest.rstrip("/").rpartition(":")
        if host and port.isdigit():
            return f"{scheme}://{_canonical_host(host)}:{int(port)}"
        return f"{scheme}://{rest}"
    if scheme in ("spy", "alt", "hwgrep"):
        inner = rest if rest.startswith("/") else "/" + rest
        return board_endpoint(inner if os.path.exists(inner) else rest)
    return f"{scheme}://{rest}"


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("_") or "port"


def lock_path(url: str, lock_dir: str | os.PathLike[str] | None = None) -> Path:
    """Lock file for a board's endpoint; aliases (by-id links, ``localhost``) share one lock."""
    return Path(lock_dir or tempfile.gettempdir()) / f"nvdla-hil-{_safe(board_endpoint(url))}.lock"


def name_lock_path(name: str, lock_dir: str | os.PathLike[str] | None = None) -> Path:
    """Lock file for a board's lab name."""
    return Path(lock_dir or tempfile.gettempdir()) / f"nvdla-hil-board-{_safe(name)}.lock"


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class BoardLock:
    """Exclusive, crash-safe ownership of one board port (``fcntl.flock``)."""

    def __init__(self, url: str, lock_dir: str | os.PathLike[str] | None = None, *, board: str = "",
                 path: str | os.PathLike[str] | None = None, info: Mapping[str, object] | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.url = url
        #: where a wait for another process's hold is said (default: stderr)
        self.say = say or _stderr
        self.board = board or url
        self.path = Path(path) if path is not None else lock_path(url, lock_dir)
        self.info = dict(info or {})
        self._fd: int | None = None

    def holder_info(self) -> dict[str, object]:
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def holder(self) -> str:
        info = self.holder_info()
        try:
            text = f"PID {info['pid']} on {info['host']} since {info['since']}"
        except KeyError:
            return "an unknown process"
        extra = []
        if info.get("board") and info.get("board") != self.board:
            extra.append(f"as board {info['board']!r}")
        if info.get("lab"):
            extra.append(f"lab {info['lab']}")
        if info.get("what"):
            extra.append(str(info["what"]))
        if info.get("cmd"):
            extra.append(f"command: {info['cmd']}")
        return text + (f" ({', '.join(extra)})" if extra else "")

    def acquire(self, wait: float | None = 0.0) -> None:
        """Take the lock; ``wait`` seconds to wait for it (0: fail at once; None: wait forever)."""
        if self._fd is not None:
            raise RuntimeError(f"lock {self.path} already held by this object")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise LabError(f"board {self.board!r}: cannot create lock file {self.path}: {e.strerror or e}") from None
        try:
            if wait is not None and wait <= 0:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:  # say who holds it, at once and every 30 s; the wait is recorded apart (lockwait)
                wait_for(self.path, lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), holder_of(fd), say=self.say,
                         what=f"board {self.board!r}", timeout=wait)
        except (BlockingIOError, LockTimeout):
            os.close(fd)
            waited = f" (waited {wait:g} s)" if wait else ""
            raise BoardBusyError(f"board {self.board!r} busy, held by {self.holder()}{waited}; lock file {self.path}") from None
        except BaseException:
            os.close(fd)
            raise
        write_holder(fd, extra={"url": self.url, "board": self.board, **self.info})
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> BoardLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def is_held_by(self, pid: int) -> bool:
        """True when some process holds the lock now and its file names ``pid`` as holder."""
        if self.holder_info().get("pid") != pid:
            return False
        try:
            fd = os.open(self.path, os.O_RDWR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True  # held by someone, and the file says by ``pid``
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)


class SessionBoardLock:
    """A board held for a whole regression: the endpoint lock and the lab-name lock.

    Taken once by the pytest controller (before collection), released when the session ends
    or the process dies. Tests of the session use :meth:`use_path` to serialise their link
    among xdist workers; a second regression gets :class:`BoardBusyError` naming the holder."""

    def __init__(self, lab: Lab, cfg: BoardConfig) -> None:
        self.lab, self.cfg = lab, cfg
        info = {"lab": str(lab.path), "what": "regression session", "endpoint": board_endpoint(cfg.url)}
        self.locks = [
            BoardLock(cfg.url, lab.lock_dir, board=cfg.name, info=info),
            BoardLock(cfg.url, board=cfg.name, path=name_lock_path(cfg.name, lab.lock_dir), info=info),
        ]

    @property
    def path(self) -> Path:
        return self.locks[0].path

    @property
    def use_path(self) -> Path:
        return self.path.with_name(self.path.name + ".use")

    def acquire(self, wait: float = 0.0) -> None:
        taken: list[BoardLock] = []
        try:
            for lk in self.locks:
                lk.acquire(wait)
                taken.append(lk)
        except BaseException:
            for lk in reversed(taken):
                lk.release()
            raise

    def release(self) -> None:
        for lk in reversed(self.locks):
            lk.release()

    def __enter__(self) -> SessionBoardLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def locked(cfg: BoardConfig, lab: Lab, wait: float = 0.0) -> Iterator[BoardLock]:
    """Hold ``cfg``'s endpoint lock for a ``with`` block (``wait`` seconds for it, 0: fail at once)."""
    lock = BoardLock(cfg.url, lab.lock_dir, board=cfg.name)
    lock.acquire(wait)
    try:
        yield lock
    finally:
        lock.release()
