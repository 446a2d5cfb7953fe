"""Lab file (which boards exist and how to reach them) and exclusive board locking.

A lab file is YAML::

    lock_dir: /tmp                  # optional, where board lock files live
    boards:
      arty-1:
        url: /dev/ttyUSB1           # any pyserial URL: socket://host:port, rfc2217://...
        baud: 3000000
        profile: nv_small           # nv_small | nv_small_256_full | nv_full
        csr_base: 0x40000000        # board address of NVDLA's CSB byte space
        csr_size: 0x40000
        dram_base: 0x80000000       # board address of the DRAM window ...
        dram_nvdla_base: 0x80000000 # ... which NVDLA sees at this address
        dram_size: 0x10000000
        integrity: verify           # plain | verify
        retries: 3
        uniform_reads: 4            # verify: agreeing reads for a result an address error could give
        response_timeout: 0.5       # seconds beyond the wire time
        board_timeout: 0.1          # the UARTBone FSM timer
        reset_command: [openFPGALoader, -b, arty, nvdla.bit]   # argv, run without a shell
        reset_timeout: 120
        reset_address: 0xf0000000   # optional: writing 1 here resets NVDLA (LiteX ctrl_reset CSR);
                                    # the serial target then resets the board before every test

Selection: ``--lab FILE --board NAME`` or the environment variables ``NVDLA_HIL_LAB`` and
``NVDLA_HIL_BOARD``. The file is read with ``yaml.safe_load``; unknown fields are errors.

Locking: one ``fcntl.flock`` on ``<lock_dir>/nvdla-hil-<sanitised port>.lock`` per board port.
The kernel drops it when the holder exits or crashes; the file holds the holder's PID, host
and start time for the "board busy" message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from ..drivers.profiles import list_profiles
from ..drivers.transport import TransportError
from ..drivers.uartbone import FSM_TIMEOUT, BoardMap, IntegrityPolicy

__all__ = [
    "ENV_BOARD",
    "ENV_LAB",
    "BoardBusyError",
    "BoardConfig",
    "BoardLock",
    "Lab",
    "LabError",
    "load_lab",
    "lock_path",
    "locked",
    "resolve_board",
    "run_reset",
]

_DEFAULT_MAP = BoardMap()
ENV_LAB = "NVDLA_HIL_LAB"
ENV_BOARD = "NVDLA_HIL_BOARD"
PROFILES = tuple(list_profiles())


class LabError(ValueError):
    """The lab file or board selection is wrong; the message names file, board and field."""


class BoardBusyError(RuntimeError):
    """Another process holds the board's lock."""


@dataclass(frozen=True, slots=True)
class BoardConfig:
    name: str
    url: str
    baud: int = 115200
    profile: str = "nv_small"
    csr_base: int = _DEFAULT_MAP.csr_base
    csr_size: int = _DEFAULT_MAP.csr_size
    dram_base: int = _DEFAULT_MAP.dram_base
    dram_nvdla_base: int = _DEFAULT_MAP.dram_nvdla_base
    dram_size: int = _DEFAULT_MAP.dram_size
    integrity: str = "verify"
    retries: int = 3
    uniform_reads: int = 4
    response_timeout: float = 0.5
    board_timeout: float = FSM_TIMEOUT
    reset_command: tuple[str, ...] | None = None
    reset_timeout: float = 120.0
    reset_address: int | None = None

    @property
    def board_map(self) -> BoardMap:
        return BoardMap(
            csr_base=self.csr_base,
            csr_size=self.csr_size,
            dram_base=self.dram_base,
            dram_nvdla_base=self.dram_nvdla_base,
            dram_size=self.dram_size,
        )

    @property
    def policy(self) -> IntegrityPolicy:
        return IntegrityPolicy(self.integrity, self.retries, self.uniform_reads)


@dataclass(frozen=True, slots=True)
class Lab:
    path: Path
    boards: dict[str, BoardConfig]
    lock_dir: Path

    def board(self, name: str) -> BoardConfig:
        try:
            return self.boards[name]
        except KeyError:
            known = ", ".join(sorted(self.boards)) or "(none)"
            raise LabError(f"{self.path}: no board {name!r}; known boards: {known}") from None


# ---- parsing ------------------------------------------------------------------------------------------
_INT_FIELDS = {"baud", "csr_base", "csr_size", "dram_base", "dram_nvdla_base", "dram_size", "retries", "uniform_reads",
               "reset_address"}
_FLOAT_FIELDS = {"response_timeout", "board_timeout", "reset_timeout"}


def _lines(text: str) -> dict[tuple[str, ...], int]:
    """(board,) and (board, field) -> 1-based line, for error messages."""
    out: dict[tuple[str, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return out
    if not isinstance(root, yaml.MappingNode):
        return out
    for k, v in root.value:
        if k.value == "boards" and isinstance(v, yaml.MappingNode):
            for bk, bv in v.value:
                out[(str(bk.value),)] = bk.start_mark.line + 1
                if isinstance(bv, yaml.MappingNode):
                    for fk, _ in bv.value:
                        out[(str(bk.value), str(fk.value))] = fk.start_mark.line + 1
    return out


def _board(path: Path, name: str, raw: object, lines: dict[tuple[str, ...], int]) -> BoardConfig:
    def err(field: str | None, msg: str) -> LabError:
        key = (name, field) if field else (name,)
        where = f"{path}:{lines[key]}" if key in lines else str(path)
        return LabError(f"{where}: board {name!r}" + (f", field {field!r}" if field else "") + f": {msg}")

    if not isinstance(raw, dict):
        raise err(None, f"expected a mapping of fields, got {type(raw).__name__}")
    known = {f.name for f in dataclasses.fields(BoardConfig)} - {"name"}
    kw: dict[str, object] = {"name": name}
    for field, value in raw.items():
        field = str(field)
        if field not in known:
            raise err(field, f"unknown field; known fields: {', '.join(sorted(known))}")
        if field in _INT_FIELDS:
            if isinstance(value, str):
                try:
                    value = int(value, 0)
                except ValueError:
                    raise err(field, f"expected an integer, got {value!r}") from None
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise err(field, f"expected a non-negative integer, got {value!r}")
        elif field in _FLOAT_FIELDS:
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise err(field, f"expected a positive number of seconds, got {value!r}")
            value = float(value)
        elif field == "reset_command":
            if value is not None:
                if not (isinstance(value, list) and value and all(isinstance(a, str | int) for a in value)):
                    raise err(field, "expected a non-empty list of arguments (argv, no shell)")
                value = tuple(str(a) for a in value)
        elif field in ("url", "profile", "integrity") and not isinstance(value, str):
            raise err(field, f"expected a string, got {value!r}")
        kw[field] = value
    if "url" not in kw:
        raise err(None, "missing field 'url'")
    if kw.get("baud", 1) == 0:
        raise err("baud", "must be > 0")
    if kw.get("profile", "nv_small") not in PROFILES:
        raise err("profile", f"{kw['profile']!r} is not one of {', '.join(PROFILES)}")
    cfg = BoardConfig(**kw)  # type: ignore[arg-type]
    try:
        _ = cfg.policy
    except ValueError as e:
        field = "integrity" if "mode" in str(e) else "uniform_reads" if "uniform_reads" in str(e) else "retries"
        raise err(field, str(e)) from None
    try:
        _ = cfg.board_map
    except ValueError as e:
        raise err(None, f"address map: {e}") from None
    return cfg


def load_lab(path: str | os.PathLike[str]) -> Lab:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise LabError(f"cannot read lab file {p}: {e.strerror or e}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise LabError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("boards"), dict):
        raise LabError(f"{p}: expected a top-level mapping with a 'boards:' mapping")
    extra = set(doc) - {"boards", "lock_dir"}
    if extra:
        raise LabError(f"{p}: unknown top-level field(s) {', '.join(sorted(map(str, extra)))}; known: boards, lock_dir")
    lines = _lines(text)
    boards = {str(n): _board(p, str(n), raw, lines) for n, raw in doc["boards"].items()}
    lock_dir = Path(doc.get("lock_dir") or tempfile.gettempdir())
    return Lab(p, boards, lock_dir)


def resolve_board(lab_path: str | os.PathLike[str] | None, board: str | None) -> tuple[Lab, BoardConfig]:
    """``--lab/--board`` or ``NVDLA_HIL_LAB``/``NVDLA_HIL_BOARD``."""
    lab_path = lab_path or os.environ.get(ENV_LAB)
    board = board or os.environ.get(ENV_BOARD)
    if not lab_path:
        raise LabError(f"no lab file: pass --lab FILE or set {ENV_LAB}")
    lab = load_lab(lab_path)
    if not board:
        if len(lab.boards) == 1:
            board = next(iter(lab.boards))
        else:
            known = ", ".join(sorted(lab.boards)) or "(none)"
            raise LabError(f"{lab.path}: no board chosen: pass --board NAME or set {ENV_BOARD}; known boards: {known}")
    return lab, lab.board(board)


# ---- locking ------------------------------------------------------------------------------------------
def lock_path(url: str, lock_dir: str | os.PathLike[str] | None = None) -> Path:
    """Lock file for a port; a device path is resolved so aliases (by-id links) share one lock."""
    key = url
    if "://" not in url and os.path.exists(url):
        key = os.path.realpath(url)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("_") or "port"
    return Path(lock_dir or tempfile.gettempdir()) / f"nvdla-hil-{safe}.lock"


class BoardLock:
    """Exclusive, crash-safe ownership of one board port (``fcntl.flock``)."""

    def __init__(self, url: str, lock_dir: str | os.PathLike[str] | None = None, *, board: str = "") -> None:
        self.url = url
        self.board = board or url
        self.path = lock_path(url, lock_dir)
        self._fd: int | None = None

    def holder(self) -> str:
        try:
            info = json.loads(self.path.read_text() or "{}")
            return f"PID {info['pid']} on {info['host']} since {info['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "an unknown process"

    def acquire(self, wait: float = 0.0) -> None:
        if self._fd is not None:
            raise RuntimeError(f"lock {self.path} already held by this object")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    waited = f" (waited {wait:g} s)" if wait > 0 else ""
                    raise BoardBusyError(
                        f"board {self.board!r} busy, held by {self.holder()}{waited}; lock file {self.path}"
                    ) from None
                time.sleep(0.05)
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "url": self.url,
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
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


# ---- reset ----------------------------------------------------------------------------------------------
def run_reset(cfg: BoardConfig) -> Callable[[], None] | None:
    """A reset hook running the board's ``reset_command`` (argv, no shell), or None."""
    if not cfg.reset_command:
        return None
    argv = list(cfg.reset_command)

    def reset() -> None:
        try:
            proc = subprocess.run(argv, shell=False, check=False, capture_output=True, text=True, timeout=cfg.reset_timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise TransportError(f"board {cfg.name!r}: reset command {argv!r} failed: {e}") from e
        if proc.returncode:
            tail = (proc.stderr or proc.stdout).strip()[-500:]
            raise TransportError(f"board {cfg.name!r}: reset command {argv!r} exited {proc.returncode}: {tail}")

    return reset


@contextlib.contextmanager
def locked(cfg: BoardConfig, lab: Lab, wait: float = 0.0) -> Iterator[BoardLock]:
    lock = BoardLock(cfg.url, lab.lock_dir, board=cfg.name)
    lock.acquire(wait)
    try:
        yield lock
    finally:
        lock.release()
