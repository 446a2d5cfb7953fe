"""A build cache that many processes, workers and hosts may share (``nvdla-hil sim build``).

Layout of the cache root (``~/.cache/nvdla-hil/sim`` or ``$NVDLA_HIL_CACHE``)::

    <key>/                  a published entry (never written after it appears)
        manifest.json       paths relative to the entry; key, format, executable size + SHA-256
        build.log
        obj/<executable>
    <key>.lock              held (POSIX record lock, works over NFS) while <key> is built
    .tmp-<key>-<host>-<pid>-<n>/   a build in progress (renamed to <key> when complete)
    .old-<key>-...          a replaced entry being deleted

Rules:
  * an entry is built in a temporary directory next to the others and published with one
    ``rename``; readers only ever see complete entries (the manifest is written last);
  * one builder per key: the others wait on ``<key>.lock`` (saying who holds it) and reuse the
    entry the first one published;
  * an entry is checked before use (manifest readable, same format and key, executable present
    with the recorded size and hash); a bad one is rebuilt with a message naming the problem;
  * manifests name files relative to their entry, so a copied cache runs its own executables.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from .lockwait import REMIND_S, holder_of, wait_for, write_holder

__all__ = ["FORMAT", "CacheEntryError", "check_entry", "file_sha256", "get_or_build", "read_manifest",
           "write_manifest"]

#: manifest format; entries of another format are rebuilt
FORMAT = 2
MANIFEST = "manifest.json"

Progress = Callable[[str], None]


def cache_base() -> Path:
    """The folder of every nvdla-hil cache (simulator builds, the C model, working copies):
    ``$NVDLA_HIL_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/nvdla-hil``."""
    env = os.environ.get("NVDLA_HIL_CACHE")
    return Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nvdla-hil"


class CacheEntryError(RuntimeError):
    """A cache entry is unusable (missing, half-written, corrupted or for another key)."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of ``directory`` with ``directory``/``executable`` made absolute.

    Accepts manifests written before format 2 (absolute paths) by re-rooting them at
    ``directory``; raises :class:`CacheEntryError` when the manifest is missing or unreadable.
    """
    directory = Path(directory).absolute()
    path = directory / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CacheEntryError(f"{path} is missing") from None
    except OSError as e:
        raise CacheEntryError(f"{path} is unreadable: {e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise CacheEntryError(f"{path} is not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("executable"), str):
        raise CacheEntryError(f"{path} does not describe a simulator build (no executable)")
    exe = data["executable"]
    if os.path.isabs(exe):  # format 1: absolute paths of the place it was built in
        old_dir = data.get("directory") or str(Path(exe).parent.parent)
        try:
            exe = os.path.relpath(exe, old_dir)
        except ValueError:
            raise CacheEntryError(f"{path}: executable {exe} is outside its entry") from None
    if exe.startswith(".."):
        raise CacheEntryError(f"{path}: executable {exe} is outside its entry")
    data["executable"] = str(directory / exe)
    data["directory"] = str(directory)
    return data


def write_manifest(directory: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as the manifest (paths relative to ``directory``), atomically."""
    directory = Path(directory)
    out = dict(data)
    out["format"] = FORMAT
    out["directory"] = "."
    exe = Path(out["executable"])
    if exe.is_absolute():
        exe = exe.relative_to(directory)
    out["executable"] = str(exe)
    full = directory / exe
    out["executable_size"] = full.stat().st_size
    out["executable_sha256"] = file_sha256(full)
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    os.replace(tmp, directory / MANIFEST)


def check_entry(directory: Path, key: str | None = None, *, verify_hash: bool = True) -> dict[str, Any]:
    """Return the manifest of a usable entry or raise :class:`CacheEntryError` saying why not."""
    data = read_manifest(directory)
    if data.get("format") != FORMAT:
        raise CacheEntryError(f"{directory} was written by another nvdla-hil version "
                              f"(manifest format {data.get('format', 1)}, expected {FORMAT})")
    if key is not None and data.get("key") != key:
        raise CacheEntryError(f"{directory} holds the build of key {data.get('key')!r}, not {key!r} "
                              f"(a foreign or misplaced entry)")
    exe = Path(data["executable"])
    try:
        size = exe.stat().st_size
    except OSError:
        raise CacheEntryError(f"its executable {exe} is missing") from None
    if size != data.get("executable_size"):
        raise CacheEntryError(f"its executable {exe} has {size} bytes, the manifest says "
                              f"{data.get('executable_size')} (truncated or replaced)")
    with open(exe, "rb") as f:
        magic = f.read(4)
    if magic != b"\x7fELF" and os.uname().sysname == "Linux":
        raise CacheEntryError(f"its executable {exe} is not an ELF file (corrupted)")
    if verify_hash and file_sha256(exe) != data.get("executable_sha256"):
        raise CacheEntryError(f"its executable {exe} does not match the SHA-256 in the manifest (corrupted)")
    if not os.access(exe, os.X_OK):
        raise CacheEntryError(f"its executable {exe} is not executable")
    return data


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


class _KeyLock:
    """An exclusive POSIX record lock on ``<root>/<key>.lock`` (NFS-safe). A waiter says who holds
    it (pid, command, host, since: the record the holder writes into the file) at once and every
    ``remind`` seconds; :attr:`waited` is the seconds it waited (also recorded for the test that
    waits, :func:`~.lockwait.recording`)."""

    def __init__(self, path: Path, progress: Progress, remind: float = REMIND_S, what: str = "sim build") -> None:
        self.path = path
        self.progress = progress
        self.remind = remind
        self.what = what
        self.waited = 0.0
        self._fd: int | None = None

    def __enter__(self) -> Self:
        # POSIX record locks are per process: threads of one process take a lock of their own
        with _THREAD_LOCKS_GUARD:
            self._thread_lock = _THREAD_LOCKS.setdefault(str(self.path), threading.Lock())

        def take_thread_lock() -> None:
            if not self._thread_lock.acquire(blocking=False):
                raise OSError(errno.EAGAIN, "held by another thread")

        self.waited = wait_for(self.path, take_thread_lock,
                               lambda: {"pid": os.getpid(), "cmd": "another thread of this process"},
                               say=self.progress, what=self.what, remind=self.remind,
                               why="another thread is building this entry")
        try:
            return self._lock_file()
        except BaseException:
            self._thread_lock.release()
            raise

    def _lock_file(self) -> Self:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            self.waited += wait_for(self.path, lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), holder_of(fd),
                                    say=self.progress, what=self.what, remind=self.remind,
                                    why="another process is building this entry")
            write_holder(fd, self.what)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None
                self._thread_lock.release()


def _unique(root: Path, prefix: str) -> Path:
    host = socket.gethostname().replace("/", "_")
    n = 0
    while True:
        p = root / f"{prefix}-{host}-{os.getpid()}-{n}"
        if not p.exists():
            return p
        n += 1


def _discard(root: Path, entry: Path, key: str) -> None:
    """Move a bad entry out of the way (one rename) and delete it."""
    if not entry.exists():
        return
    old = _unique(root, f".old-{key}")
    try:
        os.rename(entry, old)
    except FileNotFoundError:
        return
    shutil.rmtree(old, ignore_errors=True)


def get_or_build(root: Path, key: str, build: Callable[[Path], dict[str, Any]], *, force: bool = False,
                 progress: Progress, what: str = "sim build") -> dict[str, Any]:
    """Return the manifest of entry ``<root>/<key>``, building it if absent or unusable.

    ``build(tmpdir)`` builds into the empty ``tmpdir`` and returns the manifest fields (with
    ``executable`` relative to ``tmpdir``); it is called by one process per key at a time.
    """
    entry = root / key
    if not force:
        try:
            data = check_entry(entry, key)
            progress(f"{what}: cached {entry}")
            return data
        except CacheEntryError as e:
            if entry.exists() or (entry / MANIFEST).exists():
                progress(f"{what}: cache entry {entry} is unusable: {e}; rebuilding it")
    root.mkdir(parents=True, exist_ok=True)
    with _KeyLock(root / f"{key}.lock", progress, what=what):
        if not force:
            try:
                data = check_entry(entry, key)
                progress(f"{what}: cached {entry} (built by another process)")
                return data
            except CacheEntryError:
                pass
        for stale in [*root.glob(f".tmp-{key}-*"), *root.glob(f".old-{key}-*")]:  # a killed builder's
            progress(f"{what}: removing {stale} (an interrupted build)")
            shutil.rmtree(stale, ignore_errors=True)
        tmp = _unique(root, f".tmp-{key}")
        tmp.mkdir()
        try:
            fields = build(tmp)
            fields["key"] = key
            write_manifest(tmp, fields)
            check_entry(tmp, key)
            _discard(root, entry, key)
            os.rename(tmp, entry)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return check_entry(entry, key, verify_hash=False)
