"""A regression's run directory (``<results-dir>/<run-id>/``): a fresh one per run, the
``latest`` link to the newest, and the state of a run read from its ``run.json`` (written by
``nvdla-hil regress``: harness/cli/regress.py)."""

from __future__ import annotations

import os
import secrets
import socket
from datetime import UTC, datetime
from pathlib import Path

from ..analysis.junit import read_run_json

__all__ = ["new_run_dir", "point_latest", "run_state"]


def new_run_dir(results: str | os.PathLike[str]) -> Path:
    """A fresh ``<results>/<UTC timestamp>-<pid>-<random>`` folder; never an existing one."""
    root = Path(results)
    root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"{datetime.now(UTC).microsecond // 1000:03d}Z"
    for _ in range(100):
        run = root / f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            os.mkdir(run)
        except FileExistsError:
            continue
        return run
    raise OSError(f"{root}: could not create a new run directory")


def point_latest(run: Path) -> Path:
    """Point ``<results>/latest`` at ``run`` atomically (a temporary symlink moved over it)."""
    latest = run.parent / "latest"
    tmp = run.parent / f".latest-{os.getpid()}-{secrets.token_hex(4)}"
    os.symlink(run.name, tmp)
    try:
        os.replace(tmp, latest)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return latest


def run_state(run: str | os.PathLike[str]) -> str:
    """The state of a run directory from its ``run.json``: ``finished``, ``interrupted`` (Ctrl-C,
    SIGTERM, or a process that died while the status still said ``running`` - a SIGKILL, a crash,
    a lost machine), ``running`` (its process is alive on this host, or another host's), or
    ``unknown`` (no readable run.json)."""
    try:
        meta = read_run_json(Path(run))  # only a regular file of a sane size, a JSON object
    except (OSError, ValueError):  # InputError is a ValueError
        return "unknown"
    if not meta:
        return "unknown"
    status = str(meta.get("status") or ("finished" if "exit_code" in meta else "unknown"))
    if status != "running":
        return status
    if meta.get("host") != socket.gethostname():
        return "running"
    try:
        os.kill(int(meta.get("pid") or 0), 0)
    except ProcessLookupError:
        return "interrupted"
    except (PermissionError, ValueError, OverflowError):
        return "running"
    return "running" if int(meta.get("pid") or 0) > 0 else "interrupted"
