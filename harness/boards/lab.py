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
        dram_size: 0x40000000       # default: NVDLA 0x80000000..0xbfffffff (NVDLA's traces use
                                    # 0x80000000, 0x90000000, 0xa0000000)
        probe_window: true          # on open, prove the board maps the whole window (else a
                                    # configuration error naming both windows)
        integrity: verify           # plain | verify
        retries: 3
        uniform_reads: 4            # verify: agreeing reads for a result an address error could give
        response_timeout: 0.5       # seconds beyond the wire time
        board_timeout: 0.1          # the UARTBone FSM timer
        reset_command: [openFPGALoader, -b, arty, nvdla.bit]   # argv, run without a shell
        reset_timeout: 120
        reset_address: 0xf0000000   # writing 1 here resets NVDLA (LiteX ctrl_reset CSR) before every
                                    # test; else reset_command runs before every test; with neither
                                    # a regression refuses the board at start, unless the entry says
        # reset: registers          # (accept NVDLA brought to a known state by its registers)
      shared-1:                     # a board behind LiteX's litex_server (UART, Ethernet, PCIe or
        transport: litex_server     # JTAG bridge): Etherbone over TCP, as LiteX's RemoteClient
        url: tcp://labhost:1234
      farm-3:                       # a labgrid place: the serial target acquires it (or uses it if
        labgrid:                    # the user already did), takes the endpoint of its
          place: nvdla-arty-3       # NetworkSerialPort / RawSerialPort / USBSerialPort resource and
          coordinator: labhost:20408  # releases it on close (optional; default LG_COORDINATOR)

    pools:                          # optional: boards that are one hardware build
      arty: [arty-1, arty-2]        # every board of a pool has the same profile

Selection: ``--nvdla-lab FILE --nvdla-board NAME`` (``nvdla-hil``: ``--lab``/``--board``) or the
environment variables ``NVDLA_HIL_LAB`` and ``NVDLA_HIL_BOARD``. The board may be a pool
(``pool:arty``, or the pool's name) or a comma list of boards: a regression with ``-n N`` then
gives each xdist worker a board of its own (:meth:`Lab.select`, :func:`resolve_boards`).
The file is read strictly (:mod:`nvdla_hil.drivers.yamlstrict`: a
duplicate key is an error naming both lines); unknown fields are errors, and every field's type
and range is checked, the error naming the file, line, board and field (``lock_dir: 5``,
``response_timeout: .inf``, ``baud: 0`` are refused).

Locking: one ``fcntl.flock`` on ``<lock_dir>/nvdla-hil-<endpoint>.lock`` per board, where the
endpoint is resolved (``socket://localhost:7777`` and ``socket://127.0.0.1:7777`` are one board,
a ``/dev/serial/by-id`` link and its target are one board; see :func:`board_endpoint`), plus one
on ``nvdla-hil-board-<name>.lock`` for the board's lab name, so the same board reached under two
names or two URLs is one lock. The kernel drops them when the holder exits or crashes; the file
holds the holder's PID, host, start time, board and lab for the "board busy" message.

A regression holds the board for its whole pytest session (:class:`SessionBoardLock`, taken by
the pytest controller before the first test); its tests, in the controller or in xdist workers,
serialise their use of the link on a second, per-session file (``<lock>.use``) and never touch
the session lock, so a second regression on the board fails at once and the first is unaffected.

Where it lives: :mod:`.config` (BoardConfig, Lab, LabError), :mod:`.locks` (endpoints and locks);
this module reads the file, resolves a selection and runs a board's reset command, and
re-exports those names for ``from nvdla_hil.harness.boards.lab import ...``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from ...drivers import yamlstrict
from ...drivers.errors import InputError
from ...drivers.files import read_regular
from ...drivers.transport import TransportError
from .config import ENV_BOARD, ENV_LAB, PROFILES, TRANSPORTS, BoardConfig, Lab, LabError
from .locks import BoardBusyError, BoardLock, SessionBoardLock, board_endpoint, lock_path, locked

__all__ = [
    "ENV_BOARD",
    "ENV_LAB",
    "BoardBusyError",
    "BoardConfig",
    "BoardLock",
    "SessionBoardLock",
    "Lab",
    "LabError",
    "board_endpoint",
    "load_lab",
    "lock_path",
    "locked",
    "resolve_board",
    "resolve_boards",
    "run_reset",
]


# ---- parsing ------------------------------------------------------------------------------------------
_U32 = 2**32
_U64 = 2**64
#: field -> (minimum, maximum) inclusive; every integer field of a board entry
_INT_RANGES: dict[str, tuple[int, int]] = {
    "baud": (1, 100_000_000),
    "csr_base": (0, _U64 - 1),
    "csr_size": (1, _U64),
    "dram_base": (0, _U64 - 1),
    "dram_nvdla_base": (0, _U64 - 1),
    "dram_size": (1, _U64),
    "retries": (0, 100),
    "uniform_reads": (0, 64),
    "reset_address": (0, _U64 - 1),
}
#: field -> (exclusive minimum, inclusive maximum) in seconds; finite
_FLOAT_RANGES: dict[str, tuple[float, float]] = {
    "response_timeout": (0.0, 3600.0),
    "board_timeout": (0.0, 60.0),
    "reset_timeout": (0.0, 86400.0),
}
_INT_FIELDS = set(_INT_RANGES)
_FLOAT_FIELDS = set(_FLOAT_RANGES)


def _lines(text: str) -> dict[tuple[str, ...], int]:
    """(board,), (board, field) and ("", top-level field) -> 1-based line, for error messages."""
    out: dict[tuple[str, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return out
    if not isinstance(root, yaml.MappingNode):
        return out
    for k, v in root.value:
        out[("", str(k.value))] = k.start_mark.line + 1
        if k.value == "boards" and isinstance(v, yaml.MappingNode):
            for bk, bv in v.value:
                out[(str(bk.value),)] = bk.start_mark.line + 1
                if isinstance(bv, yaml.MappingNode):
                    for fk, _ in bv.value:
                        out[(str(bk.value), str(fk.value))] = fk.start_mark.line + 1
    return out


def _hexrange(lo: int, hi: int) -> str:
    return f"{lo}..{hi:#x}" if hi > 1_000_000_000 else f"{lo}..{hi}"


#: ``err(field, message)``: a LabError naming the lab file, its line, the board and the field
_FieldError = Callable[[str | None, str], LabError]


def _int_field(field: str, value: object, err: _FieldError) -> int | None:
    """An integer field: an int or a string in any base, non-negative, within its range."""
    lo, hi = _INT_RANGES[field]
    if field == "reset_address" and value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise err(field, f"expected an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise err(field, f"expected an integer, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise err(field, f"expected a non-negative integer, got {value!r}")
    if not lo <= value <= hi:
        raise err(field, f"{value} is out of range {_hexrange(lo, hi)}")
    return value


def _field_value(field: str, value: object, err: _FieldError) -> object:
    """One board field checked on its own (type, range, form); returns the value to keep."""
    if field in _INT_FIELDS:
        return _int_field(field, value, err)
    if field in _FLOAT_FIELDS:
        lo_f, hi_f = _FLOAT_RANGES[field]
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise err(field, f"expected a positive number of seconds, got {value!r}")
        if not math.isfinite(value) or value > hi_f:
            raise err(field, f"{value!r} s is out of range: a finite number of seconds > {lo_f:g} and <= {hi_f:g}")
        return float(value)
    if field == "reset_command":
        if value is not None:
            if not (isinstance(value, list) and value and all(isinstance(a, str | int) and not isinstance(a, bool)
                                                              for a in value)):
                raise err(field, "expected a non-empty list of arguments (argv, no shell)")
            value = tuple(str(a) for a in value)
    elif field == "reset":
        if value != "registers":
            raise err(field, f"expected 'registers' (run without a reset line, NVDLA brought to a known state "
                             f"by its registers), got {value!r}; a reset is reset_address or reset_command")
    elif field in ("url", "profile", "integrity", "transport"):
        if not isinstance(value, str) or not value.strip():
            raise err(field, f"expected a non-empty string, got {value!r}")
    elif field == "probe_window":
        if not isinstance(value, bool):
            raise err(field, f"expected true or false, got {value!r}")
    return value


def _labgrid_field(value: object, err: _FieldError) -> tuple[str, str | None]:
    """``labgrid: {place: NAME, coordinator: HOST:PORT}`` -> (place, coordinator or None)."""
    field = "labgrid"
    if not isinstance(value, dict) or set(map(str, value)) - {"place", "coordinator"}:
        raise err(field, f"expected a mapping with 'place' (and optionally 'coordinator'), got {value!r}")
    place, coord = value.get("place"), value.get("coordinator")
    if not isinstance(place, str) or not re.fullmatch(r"[A-Za-z0-9_.+-]{1,128}", place):
        raise err(field, f"'place' must be a labgrid place name (letters, digits, _ . + -), got {place!r}")
    if coord is not None and (not isinstance(coord, str) or not re.fullmatch(r"[A-Za-z0-9_.:\[\]-]{1,256}", coord)):
        raise err(field, f"'coordinator' must be HOST:PORT, got {coord!r}")
    return place, coord


def _board_config(kw: dict[str, object], err: _FieldError) -> BoardConfig:
    """The fields that depend on each other (url or labgrid, transport, profile, integrity,
    the retry policy and the address map), then the :class:`BoardConfig`."""
    if kw.get("labgrid_place"):
        if "url" in kw:
            raise err("url", "a labgrid board takes its endpoint from the place's serial resource; leave 'url' out")
        kw["url"] = f"labgrid://{kw['labgrid_place']}"
    if "url" not in kw:
        raise err(None, "missing field 'url' (or 'labgrid: {place: NAME}')")
    if kw.get("transport", "uartbone") not in TRANSPORTS:
        raise err("transport", f"{kw['transport']!r} is not one of {', '.join(TRANSPORTS)}")
    if kw.get("transport") == "litex_server":
        if kw.get("labgrid_place"):
            raise err("transport", "litex_server and labgrid are not combined: point 'url' at the litex_server")
        if not re.fullmatch(r"tcp://[^\s/:]+:\d{1,5}", str(kw["url"])):
            raise err("url", f"a litex_server board needs url: tcp://HOST:PORT, got {kw['url']!r}")
    if kw.get("profile", "nv_small") not in PROFILES:
        raise err("profile", f"{kw['profile']!r} is not one of {', '.join(PROFILES)}")
    if kw.get("integrity", "verify") not in ("plain", "verify"):
        raise err("integrity", f"{kw['integrity']!r} is not one of plain, verify (integrity mode)")
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


def _board(path: Path, name: str, raw: object, lines: dict[tuple[str, ...], int]) -> BoardConfig:
    def err(field: str | None, msg: str) -> LabError:
        key = (name, field) if field else (name,)
        where = f"{path}:{lines[key]}" if key in lines else str(path)
        return LabError(f"{where}: board {name!r}" + (f", field {field!r}" if field else "") + f": {msg}")

    if not isinstance(raw, dict):
        raise err(None, f"expected a mapping of fields, got {type(raw).__name__}")
    known = {f.name for f in dataclasses.fields(BoardConfig)} - {"name", "labgrid_place", "labgrid_coordinator"}
    known.add("labgrid")
    kw: dict[str, object] = {"name": name}
    for field, value in raw.items():
        field = str(field)
        if field not in known:
            raise err(field, f"unknown field; known fields: {', '.join(sorted(known))}")
        if field == "labgrid":
            kw["labgrid_place"], kw["labgrid_coordinator"] = _labgrid_field(value, err)
        else:
            kw[field] = _field_value(field, value, err)
    return _board_config(kw, err)


def _pools(path: Path, raw: object, boards: dict[str, BoardConfig],
           lines: dict[tuple[str, ...], int]) -> dict[str, tuple[str, ...]]:  # fmt: skip
    """``pools: {name: [board, ...]}``: each a non-empty list of distinct boards of the file."""
    where = f"{path}:{lines[('', 'pools')]}" if ("", "pools") in lines else str(path)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise LabError(f"{where}: field 'pools': expected a mapping of pool name to a list of boards, "
                       f"got {type(raw).__name__}")
    out: dict[str, tuple[str, ...]] = {}
    for name, members in raw.items():
        name = str(name)
        if name in boards:
            raise LabError(f"{where}: pool {name!r}: a board has this name too; give the pool another name")
        if not (isinstance(members, list) and members and all(isinstance(m, str) for m in members)):
            raise LabError(f"{where}: pool {name!r}: expected a non-empty list of board names, got {members!r}")
        if len(set(members)) != len(members):
            raise LabError(f"{where}: pool {name!r}: names a board twice")
        unknown = [m for m in members if m not in boards]
        if unknown:
            raise LabError(f"{where}: pool {name!r}: no board {unknown[0]!r}; known boards: "
                           f"{', '.join(sorted(boards)) or '(none)'}")
        profiles = {boards[m].profile for m in members}
        if len(profiles) > 1:
            which = ", ".join(f"{m} ({boards[m].profile})" for m in members)
            raise LabError(f"{where}: pool {name!r}: boards {which} have different profiles; "
                           f"a pool is one hardware build")
        out[name] = tuple(members)
    return out


#: the largest lab file read (a lab of hundreds of boards is a few hundred KB)
MAX_LAB_BYTES = 4 << 20


def load_lab(path: str | os.PathLike[str]) -> Lab:
    p = Path(path)
    try:
        text = read_regular(p, MAX_LAB_BYTES).decode("utf-8")  # a FIFO or device never hangs the session
    except InputError as e:
        raise LabError(f"cannot read lab file {e}") from None
    except OSError as e:
        raise LabError(f"cannot read lab file {p}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise LabError(f"{p}: not a text file: {e}") from None
    try:
        doc = yamlstrict.load(text, str(p))
    except yamlstrict.YamlError as e:
        msg = re.sub(r"^(.*?): line (\d+): ", r"\1:\2: ", str(e))  # file:line, as every other lab error
        raise LabError(msg if "duplicate key" in msg else f"{msg} (not valid YAML)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("boards"), dict):
        raise LabError(f"{p}: expected a top-level mapping with a 'boards:' mapping")
    extra = set(doc) - {"boards", "lock_dir", "pools"}
    lines = _lines(text)
    if extra:
        first = min(extra, key=lambda k: lines.get(("", str(k)), 0))
        where = f"{p}:{lines[('', str(first))]}" if ("", str(first)) in lines else str(p)
        raise LabError(f"{where}: unknown top-level field(s) {', '.join(sorted(map(str, extra)))}; "
                       f"known: boards, lock_dir, pools")
    boards = {str(n): _board(p, str(n), raw, lines) for n, raw in doc["boards"].items()}
    pools = _pools(p, doc.get("pools"), boards, lines)
    raw_dir = doc.get("lock_dir")
    if raw_dir is None:
        lock_dir = Path(tempfile.gettempdir())
    else:
        where = f"{p}:{lines[('', 'lock_dir')]}" if ("", "lock_dir") in lines else str(p)
        if not isinstance(raw_dir, str) or not raw_dir.strip():
            raise LabError(f"{where}: field 'lock_dir': expected a folder path (a string), got {raw_dir!r}")
        lock_dir = Path(raw_dir).expanduser()
        if not lock_dir.is_dir():
            raise LabError(f"{where}: field 'lock_dir': {raw_dir!r} is not an existing folder")
    return Lab(p, boards, lock_dir, pools)


def resolve_boards(lab_path: str | os.PathLike[str] | None,
                   board: str | None) -> tuple[Lab, list[BoardConfig], str | None]:  # fmt: skip
    """``--nvdla-lab/--nvdla-board`` (or ``NVDLA_HIL_LAB``/``NVDLA_HIL_BOARD``): the lab, the boards
    selected (one board, a pool, ``pool:NAME`` or a comma list; see :meth:`Lab.select`) and the
    pool's name."""
    lab_path = lab_path or os.environ.get(ENV_LAB)
    board = board or os.environ.get(ENV_BOARD)
    if not lab_path:
        raise LabError(f"no lab file: pass --nvdla-lab FILE (nvdla-hil: --lab FILE) or set {ENV_LAB}")
    lab = load_lab(lab_path)
    if not board:
        if len(lab.boards) == 1:
            board = next(iter(lab.boards))
        else:
            known = ", ".join(sorted(lab.boards)) or "(none)"
            pools = f"; pools: {', '.join(sorted(lab.pools))}" if lab.pools else ""
            raise LabError(f"{lab.path}: no board chosen: pass --nvdla-board NAME (nvdla-hil: --board NAME) or set "
                           f"{ENV_BOARD}; known boards: {known}{pools}")
    cfgs, pool = lab.select(board)
    return lab, cfgs, pool


def resolve_board(lab_path: str | os.PathLike[str] | None, board: str | None) -> tuple[Lab, BoardConfig]:
    """``--nvdla-lab/--nvdla-board`` or ``NVDLA_HIL_LAB``/``NVDLA_HIL_BOARD``: one board. A pool
    or a list is checked whole and gives its first board (where one board is needed)."""
    lab, cfgs, _ = resolve_boards(lab_path, board)
    return lab, cfgs[0]


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
