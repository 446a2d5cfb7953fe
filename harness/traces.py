"""NVDLA trace tests: parser and player.

A trace (``<name>/<name>.cfg`` plus ``*.dat`` memory images) is NVDLA's own sanity test
format (nvdla/hw ``verif/tests/trace_tests``). Commands (``verif/tools/nvdla_trace_parser.py``):

==============================================  =================================================
``mem_init(MEM, ADDR, SIZE, ALL_ZERO);``        fill memory with a pattern
``mem_load(MEM, ADDR, "file.dat");``            load a ``.dat`` image (records relative to ADDR)
``reg_write(NVDLA_BLOCK.REG_0, VALUE);``        CSB register write
``poll_reg_equal(NVDLA_BLOCK.REG_0, VALUE);``   read until equal
``intr_notify(UNIT_GROUP, SYNC_ID);``           sync point fired by UNIT's done interrupt of GROUP
``check_crc(SYNC_ID, MEM, ADDR, SIZE, CRC);``   CRC-32 (zlib) of memory after SYNC_ID
``check_nothing(SYNC_ID);``                     wait for SYNC_ID only
``sync_notify(NVDLA_BLOCK, EVENT);``            the block's register thread marks EVENT
``sync_wait(NVDLA_BLOCK, EVENT);``              the block's register thread waits for EVENT
==============================================  =================================================

``sync_notify``/``sync_wait`` order the per-block register threads of NVDLA's UVM testbench
(``verif/tools/nvdla_trace_parser.py`` logs them as NOTIFY/WAIT sequence commands; e.g. nv_large's
``dc_8x8x32_1x1x32x32_int8_0`` enables CACC before CMAC and CSC). A player that issues the
register sequence in file order is one valid interleaving when every EVENT is notified on an
earlier line than it is waited for; the parser checks that (a wait on an event never notified
before it would deadlock the testbench) and the player issues no bus access for them.

``MEM`` is ``pri_mem`` / ``sec_mem`` (``1`` / ``2`` in older traces). Execution follows NVDLA's
native Verilator player (``verif/verilator/nvdla.cpp``): all memory commands first, then the
register sequence in order, then the sync points in order: wait for the unit's done bit in
GLB S_INTR_STATUS (not masked by S_INTR_MASK), clear it by writing the bit back, run the checks
of that sync point. CRC: reflected CRC-32, poly 0xEDB88320, init/final-xor 0xFFFFFFFF
(= ``zlib.crc32``) over the bytes; never-written memory reads 0.

Never green by mistake: what a trace must check
-----------------------------------------------
Every public NVDLA trace (195 in ``trace_tests`` of nvdla/hw's 6 configurations as shipped here,
275 in nvdla/hw's tree) has at least one ``check_crc``, gives every ``intr_notify`` sync id at
least one check, and ends with its checks. ``check_nothing`` appears in 5 of them, always
next to a ``check_crc`` of the same trace (it waits for a unit whose output another unit
consumes). The parser therefore refuses, as :class:`TraceError` naming the file (and the line
where there is one):

* a file with no command (empty, or comments only);
* a trace with no ``check_crc``: ``check_nothing`` is a legitimate "wait only" check, but
  only in a trace that also checks memory somewhere — a trace of waits alone checks nothing;
* an ``intr_notify`` whose sync id no ``check_crc``/``check_nothing`` names (a trace
  truncated inside or before its checks), and a check whose sync id no ``intr_notify``
  fires;
* a ``check_crc`` of 0 bytes (the CRC of nothing always matches) or whose CRC does not fit
  32 bits.

Untrusted numbers are bounded before anything is allocated (constants below, with their
measurements): every address and ``address + size`` fits the 64-bit address space; one
``mem_init``/``check_crc`` region and one ``.dat`` image extent are at most
:data:`MAX_REGION_BYTES`; all ``mem_init`` sizes plus ``.dat`` image extents of one trace at
most :data:`MAX_TRACE_BYTES`. ``.cfg`` and ``.dat`` files must be ASCII (the error names the
line of the first other byte), ``.dat`` files regular files inside the trace folder (a
symlink that resolves elsewhere is refused without reading it), hold at least one record,
and records that overlap must agree byte for byte. ``mem_init`` of zeros is never
materialised: the set-up fills it on the target (:meth:`SparseMemory.fill` on the model,
bounded chunks of zeros through ``Transport.mem_write`` elsewhere).
"""

from __future__ import annotations

import heapq
import os
import re
import stat
import time
import zlib
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..drivers.driver import NvdlaDriver
from ..drivers.errors import InputError
from ..drivers.regmap import RegisterMapError
from ..drivers.transport import Transport, TransportError
from .memory import KnownMemory, RecordingMemory, SparseMemory, close_record, poison_pattern, true_runs
from .refmodel.base import UnitNotModelled

__all__ = [
    "TraceError",
    "TraceCommand",
    "Trace",
    "CheckResult",
    "TraceResult",
    "parse_trace",
    "load_dat",
    "find_traces",
    "find_trace_sets",
    "run_trace",
    "POISON_BYTE",
    "MAX_REGION_BYTES",
    "check_against_profile",
    "MAX_TRACE_BYTES",
]

POISON_BYTE = 0xA5
MEM_PORTS = {"pri_mem": "pri_mem", "1": "pri_mem", "sec_mem": "sec_mem", "2": "sec_mem"}

# Bounds on untrusted numbers and files, checked before anything is allocated. Measured over
# every trace of /work/shared/nvdla/trace_tests and nvdla/hw verif/tests/trace_tests (470
# traces, 608 .dat files): largest mem_init 0x7b64b00 bytes (~124 MiB, nv_small_256_full
# sdp_13x4x29_ew_lut_int8), largest .dat image extent 0x5c8c088 (~93 MiB, same trace), largest
# check_crc 0x867900 (~8.4 MiB), largest total set-up of one trace 0x7b682a0 (~124 MiB),
# highest end address 0xa00c0e40, largest .dat file 1 MiB (0xfca49 bytes), largest .cfg
# 22 KiB, longest .dat record 32 bytes (~170 characters).
ADDRESS_LIMIT = 1 << 64  # addresses and address + size fit the 64-bit address space
#: one mem_init / check_crc region or one .dat image extent: ~8x the largest public region
MAX_REGION_BYTES = 1 << 30
#: all mem_init sizes plus .dat image extents of one trace: ~32x the largest public trace
MAX_TRACE_BYTES = 4 << 30
#: a .cfg file: ~700x the largest public one
MAX_CFG_BYTES = 16 << 20
#: a .dat file: ~500x the largest public one (a dense 93 MiB image would be ~500 MiB of text)
MAX_DAT_BYTES = 512 << 20
#: one .dat line: a record of ~200 KiB payload (public records are 32 bytes)
MAX_DAT_LINE = 1 << 20
#: the memory set-up writes at most this many bytes per transport call
SETUP_CHUNK = 16 << 20
#: zero (or 0xff) fills up to this size are merged into the surrounding data writes
SMALL_FILL = 64 << 10


class TraceError(InputError):
    """A malformed trace or data file; the message names file and line."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")
        self.path, self.line = str(path), line


@dataclass(frozen=True)
class TraceCommand:
    kind: str  # mem_init, mem_load, reg_write, poll_reg_equal, intr_notify, check_crc, check_nothing
    line: int
    args: tuple
    text: str


@dataclass
class Trace:
    name: str
    path: Path  # the .cfg file
    commands: list[TraceCommand]

    @property
    def folder(self) -> Path:
        return self.path.parent

    def of_kind(self, *kinds: str) -> list[TraceCommand]:
        return [c for c in self.commands if c.kind in kinds]

    def units(self) -> list[str]:
        """Units whose done interrupt the trace waits for (``SDP``, ``CDP``, ``PDP``, ``CACC`` ...)."""
        return sorted({c.args[0] for c in self.of_kind("intr_notify")})


_NUM = r"(?:0[xX][0-9a-fA-F]+|[0-9]+)"
_A = re.ASCII
_RE = {
    "mem_init": re.compile(rf"^mem_init\s*\(\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*(\w+)\s*\)\s*;$", _A),
    "mem_load": re.compile(rf'^mem_load\s*\(\s*(\w+)\s*,\s*({_NUM})\s*,\s*"([^"]+)"\s*\)\s*;$', _A),
    "reg_write": re.compile(rf"^reg_write\s*\(\s*([\w.]+)\s*,\s*({_NUM})\s*\)\s*;$", _A),
    "poll_reg_equal": re.compile(rf"^poll_reg_equal\s*\(\s*([\w.]+)\s*,\s*({_NUM})\s*\)\s*;$", _A),
    "intr_notify": re.compile(r"^intr_notify\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*;$", _A),
    "check_crc": re.compile(rf"^check_crc\s*\(\s*(\w+)\s*,\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*(0[xX][0-9a-fA-F]+)\s*\)\s*;$", _A),
    "check_nothing": re.compile(r"^check_nothing\s*\(\s*(\w+)\s*\)\s*;$", _A),
    "sync_notify": re.compile(r"^sync_notify\s*\(\s*([\w.]+)\s*,\s*(\w+)\s*\)\s*;$", _A),
    "sync_wait": re.compile(r"^sync_wait\s*\(\s*([\w.]+)\s*,\s*(\w+)\s*\)\s*;$", _A),
}
_INTR = re.compile(r"^(\w+?)_([0-9])$", _A)
_DAT_HEAD = re.compile(rf"^\{{\s*offset\s*:\s*({_NUM})\s*,\s*size\s*:\s*({_NUM})\s*,\s*payload\s*:", _A)
# payload tokens 0xH or 0xHH, each followed by white space or the end (no backtracking)
_PAYLOAD = re.compile(r"(?:\s*0[xX][0-9a-fA-F]{1,2}(?![0-9a-zA-Z]))*\s*", _A)


def _port(path: Path, line: int, name: str) -> str:
    try:
        return MEM_PORTS[name]
    except KeyError:
        raise TraceError(path, line, f"unknown memory {name!r}; expected pri_mem or sec_mem") from None


def _number(path: Path | str, line: int | None, token: str, what: str, bits: int = 64) -> int:
    """An unsigned decimal or 0x-hex number of at most ``bits`` bits; never converts a
    thousand-digit string (the length is checked first)."""
    if token[:2] in ("0x", "0X"):
        digits, base, most = token[2:], 16, (bits + 3) // 4
    else:
        digits, base, most = token, 10, len(str(1 << bits))
        if len(token) > 1 and token[0] == "0":
            raise TraceError(path, line, f"{what} {token[:24]!r}: decimal with a leading zero (octal?)")
    if not digits or len(digits.lstrip("0")) > most:
        raise TraceError(path, line, f"{what} {token[:24]}{'...' if len(token) > 24 else ''} does not fit {bits} bits")
    value = int(digits, base)
    if value >= 1 << bits:
        raise TraceError(path, line, f"{what} {token[:24]} does not fit {bits} bits")
    return value


def _region(path: Path, line: int, what: str, addr: int, size: int) -> None:
    if not 1 <= size <= MAX_REGION_BYTES:
        raise TraceError(path, line, f"{what} size {size:#x} is not 1..{MAX_REGION_BYTES:#x} bytes "
                                     f"(the bound of one region, {MAX_REGION_BYTES >> 30} GiB)")
    if addr + size > ADDRESS_LIMIT:
        raise TraceError(path, line, f"{what} {addr:#x}+{size:#x} runs past the 64-bit address space")


def _ascii_text(path: Path, raw: bytes) -> str:
    """``raw`` as text; a byte outside ASCII is an error naming its line and column."""
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise TraceError(path, line, f"byte {raw[e.start]:#04x} at column {col} is not ASCII text") from None


def _regular_file(path: Path, where: Path | str, what: str, limit: int) -> os.stat_result:
    try:
        st = path.stat()
    except OSError as e:
        raise TraceError(where, None, f"cannot read {what} {path.name}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TraceError(where, None, f"{what} {path.name} is not a regular file")
    if st.st_size > limit:
        raise TraceError(where, None, f"{what} {path.name} is {st.st_size} bytes, more than {limit} "
                                      f"({limit >> 20} MiB); refused")
    return st


def parse_trace(path: str | Path) -> Trace:
    """Parse a trace ``.cfg`` file (or a trace folder). Raises :class:`TraceError` with file:line."""
    path = Path(path)
    if path.is_dir():
        cfgs = sorted(path.glob("*.cfg"))
        if len(cfgs) != 1:
            raise TraceError(path, None, f"expected exactly one .cfg file in the trace folder, found {len(cfgs)}")
        path = cfgs[0]
    _regular_file(path, path, "trace", MAX_CFG_BYTES)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceError(path, None, f"cannot read trace: {e.strerror}") from e
    text = _ascii_text(path, raw)
    commands: list[TraceCommand] = []
    set_up = 0
    for lineno, rawline in enumerate(text.splitlines(), 1):
        line = rawline.split("//", 1)[0].strip()
        if not line:
            continue
        head = line.split("(", 1)[0].strip()
        rx = _RE.get(head)
        if rx is None:
            raise TraceError(path, lineno, f"unknown command {head[:40]!r}; known: {', '.join(_RE)}")
        m = rx.match(line)
        if m is None:
            raise TraceError(path, lineno, f"malformed {head} command: {line[:120]!r}")
        g = m.groups()
        if head == "mem_init":
            port = _port(path, lineno, g[0])
            addr = _number(path, lineno, g[1], "mem_init address")
            size = _number(path, lineno, g[2], "mem_init size")
            if g[3] not in ("ALL_ZERO", "ALL_ONE", "ALL_F"):
                raise TraceError(path, lineno, f"unsupported mem_init pattern {g[3][:40]!r}")
            _region(path, lineno, "mem_init", addr, size)
            set_up += size
            if set_up > MAX_TRACE_BYTES:
                raise TraceError(path, lineno, f"the trace sets up more than {MAX_TRACE_BYTES:#x} bytes "
                                               f"({MAX_TRACE_BYTES >> 30} GiB) of memory")
            args: tuple = (port, addr, size, g[3])
        elif head == "mem_load":
            rel = g[2]
            if Path(rel).is_absolute() or ".." in Path(rel).parts or "\\" in rel or "\0" in rel:
                raise TraceError(path, lineno, f"data file {rel[:80]!r} must stay inside the trace folder")
            args = (_port(path, lineno, g[0]), _number(path, lineno, g[1], "mem_load address"), rel)
        elif head in ("reg_write", "poll_reg_equal"):
            args = (g[0], _number(path, lineno, g[1], "value", 32))
        elif head == "intr_notify":
            mi = _INTR.match(g[0])
            if mi is None:
                raise TraceError(path, lineno, f"interrupt name {g[0][:40]!r} is not UNIT_GROUP (e.g. SDP_0)")
            args = (mi.group(1).upper(), int(mi.group(2)), g[1])
        elif head == "check_crc":
            addr = _number(path, lineno, g[2], "check_crc address")
            size = _number(path, lineno, g[3], "check_crc size")
            crc = _number(path, lineno, g[4], "CRC", 32)
            if size == 0:
                raise TraceError(path, lineno, "check_crc of 0 bytes checks nothing (the CRC of no bytes always matches)")
            _region(path, lineno, "check_crc", addr, size)
            args = (g[0], _port(path, lineno, g[1]), addr, size, crc)
        elif head in ("sync_notify", "sync_wait"):
            args = (g[0], g[1])
        else:
            args = (g[0],)
        commands.append(TraceCommand(head, lineno, args, line))
    if not commands:
        raise TraceError(path, None, "no commands (empty or comments only): a trace that runs nothing checks nothing")
    notified: dict[str, int] = {}
    for c in commands:
        if c.kind == "sync_notify":
            notified.setdefault(c.args[1], c.line)
        elif c.kind == "sync_wait" and c.args[1] not in notified:
            raise TraceError(path, c.line, f"sync_wait on event {c.args[1]!r} that no earlier sync_notify "
                             f"marks (the testbench would wait forever)")  # fmt: skip
    syncs = {c.args[2] for c in commands if c.kind == "intr_notify"}
    checked: set[str] = set()
    for c in commands:
        if c.kind in ("check_crc", "check_nothing"):
            if c.args[0] not in syncs:
                raise TraceError(path, c.line, f"check on sync id {c.args[0]!r} that no intr_notify fires")
            checked.add(c.args[0])
    if not any(c.kind == "check_crc" for c in commands):
        last = commands[-1].line
        has = "only check_nothing" if checked else "no check_crc or check_nothing"
        raise TraceError(path, None, f"{has}: the trace checks no memory, so it could never fail (NVDLA's "
                                     f"traces end with their check_crc lines; truncated after line {last}?)")
    for c in commands:
        if c.kind == "intr_notify" and c.args[2] not in checked:
            raise TraceError(path, c.line, f"sync id {c.args[2]!r} has no check_crc or check_nothing "
                                           f"(a trace truncated inside its checks?)")
    return Trace(name=path.parent.name if path.stem == path.parent.name else path.stem, path=path, commands=commands)


@dataclass(frozen=True)
class _DatImage:
    """A ``.dat`` image: ``extent`` bytes from its base (gaps read 0), ``segments`` sorted,
    disjoint ``(offset, bytes)`` runs of record payload."""

    extent: int
    segments: tuple[tuple[int, bytes], ...]

    def dense(self) -> np.ndarray:
        image = np.zeros(self.extent, dtype=np.uint8)
        for off, payload in self.segments:
            image[off : off + len(payload)] = np.frombuffer(payload, dtype=np.uint8)
        return image


def _read_dat(path: Path, *, where: Path | str | None = None, folder: Path | None = None) -> _DatImage:
    """Read and check a ``.dat`` file (see :func:`load_dat`). ``where`` (the ``.cfg`` line that
    loads it) is named when the file is missing or refused; ``folder``, when given, is the
    trace folder the file must resolve inside (its content is never read or echoed then)."""
    where = where or path
    if folder is not None:
        try:
            resolved = path.resolve(strict=True)
        except FileNotFoundError:
            raise TraceError(where, None, f"missing data file {path.name}: No such file or directory") from None
        except (OSError, RuntimeError) as e:
            raise TraceError(where, None, f"cannot resolve data file {path.name}: {e}") from None
        if not resolved.is_relative_to(folder.resolve()):
            raise TraceError(where, None, f"data file {path.name} resolves outside the trace folder "
                                          f"(a symlink?); refused")
    try:
        st = path.stat()
    except OSError as e:
        raise TraceError(where, None, f"missing data file {path.name}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TraceError(where, None, f"data file {path.name} is not a regular file")
    if st.st_size > MAX_DAT_BYTES:
        raise TraceError(where, None, f"data file {path.name} is {st.st_size} bytes, more than {MAX_DAT_BYTES} "
                                      f"({MAX_DAT_BYTES >> 20} MiB); refused")
    records: list[tuple[int, bytes, int]] = []
    try:
        fh = path.open("rb")
    except OSError as e:
        raise TraceError(where, None, f"missing data file {path.name}: {e.strerror}") from e
    with fh:
        lineno = 0
        while True:
            rawline = fh.readline(MAX_DAT_LINE + 1)
            if not rawline:
                break
            lineno += 1
            if len(rawline) > MAX_DAT_LINE and not rawline.endswith(b"\n"):
                raise TraceError(path, lineno, f"line longer than {MAX_DAT_LINE} characters")
            try:
                line = rawline.decode("ascii").strip()
            except UnicodeDecodeError as e:
                raise TraceError(path, lineno, f"byte {rawline[e.start]:#04x} at column {e.start + 1} is not "
                                               f"ASCII text") from None
            if not line or line in ("{", "}"):
                continue
            m = _DAT_HEAD.match(line)
            body = line[m.end():].rstrip() if m else ""
            if body.endswith(","):
                body = body[:-1].rstrip()
            if m is None or not body.endswith("}") or _PAYLOAD.fullmatch(body, 0, len(body) - 1) is None:
                raise TraceError(path, lineno, f"malformed memory record: {line[:80]!r}")
            off = _number(path, lineno, m.group(1), "record offset")
            size = _number(path, lineno, m.group(2), "record size")
            tokens = body[:-1].split()
            if len(tokens) != size:
                raise TraceError(path, lineno, f"record says size {size} but carries {len(tokens)} bytes")
            if off + size > MAX_REGION_BYTES:
                raise TraceError(path, lineno, f"record {off:#x}+{size:#x} runs past the bound of one image "
                                               f"({MAX_REGION_BYTES:#x} bytes)")
            if all(len(t) == 4 for t in tokens):
                payload = bytes.fromhex("".join(t[2:] for t in tokens))
            else:
                payload = bytes(int(t[2:], 16) for t in tokens)
            records.append((off, payload, lineno))
    if not records:
        raise TraceError(path, None, "no memory records (an empty data file)")
    records.sort(key=lambda r: r[0])
    extent = max(off + len(p) for off, p, _ in records)
    segments: list[tuple[int, bytearray, int]] = []  # (offset, bytes, line of the last record)
    for off, payload, lineno in records:
        if segments and off <= segments[-1][0] + len(segments[-1][1]):
            start, buf, prev = segments[-1]
            common = min(start + len(buf), off + len(payload)) - off
            if common > 0 and buf[off - start : off - start + common] != payload[:common]:
                i = next(k for k in range(common) if buf[off - start + k] != payload[k])
                raise TraceError(path, lineno, f"record overlaps the record of line {prev} with different "
                                               f"bytes (offset {off + i:#x})")
            buf += payload[common:]
            segments[-1] = (start, buf, lineno)
        else:
            segments.append((off, bytearray(payload), lineno))
    return _DatImage(extent, tuple((off, bytes(buf)) for off, buf, _ in segments))


def load_dat(path: Path, *, trace_path: Path | None = None) -> np.ndarray:
    """Read a ``.dat`` memory image: ``{offset:0x.., size:N, payload:0x.. 0x..},`` records
    (braces on their own lines are allowed). Returns the image as ``uint8``, gaps zero.

    The file must be ASCII, hold at least one record, records must fit
    :data:`MAX_REGION_BYTES` and records that overlap must agree; errors are
    :class:`TraceError` naming the ``.dat`` file and line (``trace_path`` when it is missing)."""
    return _read_dat(Path(path), where=trace_path).dense()


def find_traces(root: str | Path) -> list[Path]:
    """Every trace folder below ``root`` (a folder holding one ``.cfg``), sorted by name."""
    root = Path(root)
    return sorted(p.parent for p in root.rglob("*.cfg"))


def find_trace_sets(root: str | Path) -> list[tuple[str | None, Path]]:
    """``(configuration, trace folder)`` for every trace below ``root``.

    ``root`` is either one configuration's folder (``.../trace_tests/nv_small``: configuration
    None, the run's profiles decide) or a folder of per-configuration folders, as nvdla/hw's
    ``verif/tests/trace_tests`` (each trace then belongs to the configuration its folder names).
    """
    root = Path(root)
    direct = sorted(p.parent for p in root.glob("*/*.cfg"))
    if direct or any(root.glob("*.cfg")):
        return [(None, p) for p in find_traces(root)]
    out: list[tuple[str | None, Path]] = []
    for sub in sorted(q for q in root.iterdir() if q.is_dir()):
        out += [(sub.name, p) for p in sorted(c.parent for c in sub.glob("*/*.cfg"))]
    return out


# ---- results ------------------------------------------------------------------------------


@dataclass
class CheckResult:
    sync_id: str
    kind: str  # crc / nothing
    port: str = "pri_mem"
    address: int = 0
    size: int = 0
    expected: int | None = None
    actual: int | None = None
    vacuous: bool = False  # the region's CRC already matched before anything ran
    poisoned: bool = False
    line: int = 0

    @property
    def passed(self) -> bool:
        return self.kind == "nothing" or self.actual == self.expected

    def describe(self) -> str:
        if self.kind == "nothing":
            return f"{self.sync_id}: no data check"
        verdict = "ok" if self.passed else "MISMATCH"
        extra = " (vacuous: matched before the layer ran)" if self.vacuous else ""
        extra += " (region poisoned before the run)" if self.poisoned else ""
        act = "-" if self.actual is None else f"{self.actual:#010x}"
        return (f"{self.sync_id}: crc {self.port}[{self.address:#x}+{self.size:#x}] "
                f"expected {self.expected:#010x} got {act} {verdict}{extra}")


@dataclass
class TraceResult:
    name: str
    status: str  # passed / failed / skipped / error
    checks: list[CheckResult] = field(default_factory=list)
    message: str = ""
    duration: float = 0.0
    register_writes: int = 0
    setup: str = ""  # "full" or "lean" (run_trace's memory set-up), with the reason for a fallback
    trusted_bytes: int = 0  # lean set-up: bytes not sent because the board was known to hold them

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def summary(self) -> str:
        lines = [f"{self.name}: {self.status.upper()} ({self.duration:.2f} s)" + (f" - {self.message}" if self.message else "")]
        lines += ["  " + c.describe() for c in self.checks]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Fill:
    """``size`` bytes of ``value`` (a ``mem_init``, a gap of a ``.dat`` image), never materialised."""

    size: int
    value: int = 0


def _span(data: np.ndarray | _Fill | _DatImage) -> int:
    return data.size if isinstance(data, (np.ndarray, _Fill)) else data.extent


def _slices(data: np.ndarray | _Fill | _DatImage, lo: int, hi: int) -> Iterable[tuple[int, np.ndarray | _Fill]]:
    """``(offset, piece)`` covering ``[lo, hi)`` of one set-up command's bytes."""
    if isinstance(data, _Fill):
        yield lo, _Fill(hi - lo, data.value)
    elif isinstance(data, np.ndarray):
        yield lo, data[lo:hi]
    else:
        segs = data.segments
        pos = lo
        i = max(bisect_right(segs, lo, key=lambda sg: sg[0]) - 1, 0)  # last segment starting at or before lo
        while pos < hi:
            if i < len(segs) and segs[i][0] + len(segs[i][1]) <= pos:
                i += 1
                continue
            if i < len(segs) and segs[i][0] <= pos:
                off, buf = segs[i]
                end = min(hi, off + len(buf))
                yield pos, np.frombuffer(buf, dtype=np.uint8, count=end - pos, offset=pos - off)
                pos = end
                i += 1
            else:
                end = min(hi, segs[i][0]) if i < len(segs) else hi
                yield pos, _Fill(end - pos, 0)
                pos = end


def _merge_pieces(pieces: list[tuple[str, int, np.ndarray | _Fill | _DatImage]]) -> list[tuple[str, int, np.ndarray | _Fill]]:
    """Merge memory writes (applied in order: later ones win) into as few transport writes as
    possible, per port in address order. A piece is a buffer, a :class:`_Fill` or a ``.dat``
    image; the result has buffers (contiguous data merged, at most :data:`SETUP_CHUNK` bytes
    each; fills up to :data:`SMALL_FILL` merged into them) and large :class:`_Fill` regions,
    which are never materialised. Never allocates more than :data:`SETUP_CHUNK` at once per
    buffer; the final memory contents are those of applying the pieces in order."""
    out: list[tuple[str, int, np.ndarray | _Fill]] = []
    for port in dict.fromkeys(p for p, _, _ in pieces):
        mine = [(a, a + _span(d), i, d) for i, (p, a, d) in enumerate(pieces) if p == port and _span(d) > 0]
        # which piece owns each byte: the latest one covering it (sweep, max-heap of active pieces)
        starts: dict[int, list[int]] = {}
        for k, (a, _e, _i, _d) in enumerate(mine):
            starts.setdefault(a, []).append(k)
        points = sorted({a for a, _, _, _ in mine} | {e for _, e, _, _ in mine})
        heap: list[tuple[int, int]] = []
        owned: list[list[int]] = []  # [lo, hi, k]
        for j, x in enumerate(points[:-1]):
            for k in starts.get(x, ()):
                heapq.heappush(heap, (-mine[k][2], k))
            while heap and mine[heap[0][1]][1] <= x:
                heapq.heappop(heap)
            if not heap:
                continue
            k = heap[0][1]
            if owned and owned[-1][2] == k and owned[-1][1] == x:
                owned[-1][1] = points[j + 1]
            else:
                owned.append([x, points[j + 1], k])
        ops: list[tuple[int, np.ndarray | _Fill]] = []
        for lo, hi, k in owned:
            a, _e, _i, d = mine[k]
            for off, piece in _slices(d, lo - a, hi - a):
                addr = a + off
                if ops and isinstance(piece, _Fill) and isinstance(ops[-1][1], _Fill) \
                        and ops[-1][1].value == piece.value and ops[-1][0] + ops[-1][1].size == addr:
                    ops[-1] = (ops[-1][0], _Fill(ops[-1][1].size + piece.size, piece.value))
                else:
                    ops.append((addr, piece))
        buf: list[np.ndarray] = []
        start = length = 0

        def flush() -> None:
            nonlocal buf, length
            if buf:
                # called only inside this port's iteration: port and start are that iteration's
                out.append((port, start, np.concatenate(buf) if len(buf) > 1 else np.array(buf[0], dtype=np.uint8)))  # noqa: B023
            buf, length = [], 0

        for addr, piece in ops:
            if isinstance(piece, _Fill) and piece.size > SMALL_FILL:
                flush()
                out.append((port, addr, piece))
                continue
            data = np.full(piece.size, piece.value, dtype=np.uint8) if isinstance(piece, _Fill) else piece
            pos = 0
            while pos < data.size:
                if buf and (start + length != addr + pos or length >= SETUP_CHUNK):
                    flush()
                if not buf:
                    start = addr + pos
                take = min(data.size - pos, SETUP_CHUNK - length)
                buf.append(data[pos : pos + take])
                length += take
                pos += take
        flush()
    return out


def _mem_fill(transport: Transport, port: str, address: int, size: int, value: int) -> None:
    """Set ``size`` bytes to ``value`` on the target without materialising them: the target's
    own ``mem_fill`` when it has one, the model's sparse memory directly, else chunked writes of
    one bounded buffer through ``Transport.mem_write``."""
    fill = getattr(transport, "mem_fill", None)
    if callable(fill):
        fill(address, size, value, port=port)
        return
    mems = getattr(transport, "memories", None)
    if transport.is_open and isinstance(mems, dict) and isinstance(mems.get(port), SparseMemory):
        mems[port].fill(address, size, value)
        return
    chunk = np.full(min(size, SETUP_CHUNK), value, dtype=np.uint8)
    for off in range(0, size, SETUP_CHUNK):
        transport.mem_write(address + off, chunk[: min(SETUP_CHUNK, size - off)], port=port)


def _crc(transport: Transport, port: str, address: int, size: int, *, where: tuple[Path, int] | None = None,
         expect: np.ndarray | None = None, known: KnownMemory | None = None, probes: _Probes | None = None) -> int:
    """zlib CRC-32 of a memory region, read in chunks of at most :data:`SETUP_CHUNK` bytes.
    ``expect``: the bytes the region should hold (a target that double-checks its reads may
    trust one that equals them at once); ``known`` learns what was read. ``probes``: words
    planted in bytes nothing writes (:class:`_Probes`); a chunk whose probes are all intact
    counts the set-up's bytes there, as if never planted. A region the target refuses
    (``ValueError``) is a :class:`TraceError` at ``where``."""
    crc = 0
    try:
        for off in range(0, size, SETUP_CHUNK):
            n = min(SETUP_CHUNK, size - off)
            if expect is None:
                part = transport.mem_read(address + off, n, port=port)
            else:
                part = transport.mem_read(address + off, n, port=port, expect=expect[off : off + n])
            if known is not None:
                known.learn(address + off, part)
            if probes is not None:
                m = probes.mask[off : off + n]
                if np.array_equal(part[m], probes.planted[off : off + n][m]):
                    part = part.copy()
                    part[m] = probes.restore[off : off + n][m]
            crc = zlib.crc32(np.ascontiguousarray(part, dtype=np.uint8).tobytes(), crc)
    except (TransportError, TraceError):
        raise
    except ValueError as e:
        if where is None:
            raise
        raise TraceError(where[0], where[1], f"check_crc {port}[{address:#x}+{size:#x}]: {e}") from None
    return crc & 0xFFFFFFFF


def _overlaps(a: int, n: int, b: int, m: int) -> bool:
    return a < b + m and b < a + n


def _written_masks(trace: Trace, profile: str, semantics: str = "rtl") -> dict[int, np.ndarray] | None:
    """Which bytes of each checked region the layers write and never read, found on the
    reference model. A first run records which bytes the layers' DMA engines read (an input
    sharing the region, an in-place layer: never poisoned, on the port the check names);
    two more runs pre-fill the other bytes with two different patterns: bytes that come out
    equal were written by a layer, bytes that differ were left alone (gaps between lines,
    padding). None when the model cannot run the trace."""
    fp = _footprint(trace, profile, semantics, masks=True)
    return None if fp is None else fp.masks


@dataclass
class _Probes:
    """Distinctive words planted, for a verifying link, in the bytes of a checked region that
    no layer reads or writes (``mask``): ``planted`` is what was written there, ``restore`` the
    set-up's bytes the check's CRC counts. A uniform stretch (a zero gap) is what a misaddressed
    read also returns, so proving it takes four reads; with a probe in every burst one read
    that equals the expected bytes is proof (``SerialTransport.read_probe_spacing``). A probe
    found intact after the run proves its bytes untouched."""

    mask: np.ndarray
    planted: np.ndarray
    restore: np.ndarray


@dataclass
class _Footprint:
    """What the trace's layers touch, found on the reference model: every byte range their DMA
    engines read and write, per port (merged, sorted); each checked region's bytes at the end
    of the run (``finals``, by check line; only where the model's CRC equals the check's, so
    they are the expected bytes); and (``masks``) which bytes of each checked region the layers
    write and never read."""

    reads: dict[str, list[tuple[int, int]]]
    writes: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    finals: dict[int, np.ndarray] = field(default_factory=dict)
    masks: dict[int, np.ndarray] | None = None


def _footprint(trace: Trace, profile: str, semantics: str = "rtl", *, masks: bool = True) -> _Footprint | None:
    from .targets.model import ModelTarget

    def one(fill: tuple[int, dict[int, np.ndarray]] | None):
        with ModelTarget(profile, semantics=semantics, record_reads=True) as model:
            res = run_trace(trace, model, poison=False, _fill=fill, setup="full")
            if res.status not in ("passed", "failed"):
                return None
            crcs = [ck for ck in res.checks if ck.kind == "crc"]
            final = {ck.line: model.mem_read(ck.address, ck.size, port=ck.port) for ck in crcs}
            expected = {ck.line for ck in crcs if ck.actual == ck.expected}
            read = {ck.line: _read_mask(model.memories[ck.port], ck.address, ck.size) for ck in crcs}
            spans = {p: _union((a, a + n) for a, n in getattr(m, "reads", ())) for p, m in model.memories.items()}
            writes = {p: _union((a, a + n) for a, n in getattr(m, "writes", ())) for p, m in model.memories.items()}
            return final, read, spans, writes, expected

    first = one(None)
    if first is None:
        return None
    final, read, reads, writes, expected = first
    fp = _Footprint(reads=reads, writes=writes,
                    finals={ln: b for ln, b in final.items()
                            if ln in expected and zlib.crc32(b.tobytes()) & 0xFFFFFFFF == _check_crc(trace, ln)})
    if not masks:
        return fp
    finals = []
    for value in (POISON_BYTE, POISON_BYTE ^ 0xFF):
        got = one((value, read))
        if got is None:
            return None
        finals.append(got[0])
    fp.masks = {line: (finals[0][line] == finals[1][line]) & ~read[line] for line in read}
    return fp


def _check_crc(trace: Trace, line: int) -> int:
    return next(int(c.args[4]) for c in trace.of_kind("check_crc") if c.line == line)


def _read_mask(mem: SparseMemory, address: int, size: int) -> np.ndarray:
    assert isinstance(mem, RecordingMemory), "the footprint runs record reads"
    return mem.read_mask(address, size)


def _union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint, non-adjacent ``[lo, hi)`` spans covering the same bytes."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(sp for sp in spans if sp[1] > sp[0]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _minus(spans: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` without the bytes of ``cut`` (both as from :func:`_union`)."""
    out: list[tuple[int, int]] = []
    for lo, hi in spans:
        i = max(bisect_right(cut, (lo, ADDRESS_LIMIT)) - 1, 0)
        pos = lo
        while i < len(cut) and cut[i][0] < hi:
            c_lo, c_hi = cut[i]
            if c_hi > pos:
                if c_lo > pos:
                    out.append((pos, c_lo))
                pos = max(pos, c_hi)
            i += 1
        if pos < hi:
            out.append((pos, hi))
    return out


def _within(spans: list[tuple[int, int]], lo: int, hi: int) -> Iterable[tuple[int, int]]:
    """The parts of ``spans`` (from :func:`_union`) inside ``[lo, hi)``."""
    i = max(bisect_right(spans, (lo, ADDRESS_LIMIT)) - 1, 0)
    while i < len(spans) and spans[i][0] < hi:
        a, b = max(spans[i][0], lo), min(spans[i][1], hi)
        if a < b:
            yield a, b
        i += 1


def _image(merged: list[tuple[str, int, np.ndarray | _Fill]], port: str, lo: int, hi: int) -> np.ndarray:
    """The bytes ``[lo, hi)`` of ``port`` after the memory set-up (0 where nothing is set up),
    built locally from the merged set-up pieces."""
    out = np.zeros(hi - lo, dtype=np.uint8)
    for p, a, d in merged:
        n = _span(d)
        if p != port or a >= hi or a + n <= lo:
            continue
        s_lo, s_hi = max(a, lo), min(a + n, hi)
        out[s_lo - lo : s_hi - lo] = d.value if isinstance(d, _Fill) else d[s_lo - a : s_hi - a]
    return out


def _plant(here: list[CheckResult], lo: int, free: np.ndarray, target: np.ndarray, need: np.ndarray,
           fp: _Footprint, spacing: int, probes: dict[int, _Probes], kmask: np.ndarray, kval: np.ndarray) -> None:
    """Plant probe words (see :class:`_Probes`) in the ``free`` bytes of the checked span at
    ``lo``: aligned words wholly free, one every ``spacing`` bytes of each free run."""
    starts: list[np.ndarray] = []
    for a, b in true_runs(free):
        first = a + (-(lo + a)) % 4
        if first + 4 <= b:
            starts.append(np.arange(first, b - 3, spacing))
    if not starts:
        return
    at = np.concatenate(starts)
    word = (at[:, None] + np.arange(4)).ravel()
    # only where every check covering the word has expected bytes (else nothing restores it)
    ok = np.zeros(target.size, dtype=bool)
    for ck in here:
        if ck.line in fp.finals:
            ok[ck.address - lo : ck.address - lo + ck.size] = True
    for ck in here:
        if ck.line not in fp.finals:
            ok[ck.address - lo : ck.address - lo + ck.size] = False
    whole = ok[word].reshape(-1, 4).all(axis=1)
    word = (at[whole][:, None] + np.arange(4)).ravel()
    if word.size == 0:
        return
    values = poison_pattern(lo, target.size, base=0x3C)
    for ck in here:
        exp = fp.finals.get(ck.line)
        if exp is None:
            continue
        off = ck.address - lo
        inside = word[(word >= off) & (word < off + ck.size)]
        if inside.size == 0:
            continue
        mask = np.zeros(ck.size, dtype=bool)
        mask[inside - off] = True
        probes[ck.line] = _Probes(mask, values[off : off + ck.size].copy(), exp.copy())
    target[word] = values[word]
    need[word] = ~(kmask[word] & (kval[word] == values[word]))  # (still there from an earlier run)


def _lean_setup(merged: list[tuple[str, int, np.ndarray | _Fill]], result: TraceResult, fp: _Footprint,
                known: dict[str, KnownMemory], put, poison: bool, assume: bool = True,
                probe_spacing: int = 0, probes: dict[int, _Probes] | None = None) -> int:  # noqa: ANN001
    """The lean memory set-up (see :func:`run_trace`): send the bytes the layers read and the
    checked regions (poisoned where the layers write), less what ``known`` says the board
    already holds and (``assume``) the bytes of a checked region no layer reads or writes;
    decide vacuity on the resulting image. With ``probe_spacing``, plant a probe word that
    often in those bytes of each check with expected bytes (``probes`` gets them, by check
    line). Returns the bytes not sent."""
    trusted = 0
    crcs = [ck for ck in result.checks if ck.kind == "crc"]
    checked = {p: _union((ck.address, ck.address + ck.size) for ck in crcs if ck.port == p)
               for p in {ck.port for ck in crcs}}
    # the bytes the layers read, outside the checked regions (those go below)
    wanted = {p: _minus(sp, checked.get(p, [])) for p, sp in fp.reads.items()}
    for port, addr, data in merged:
        km = known.get(port)
        for lo, hi in _within(wanted.get(port, []), addr, addr + _span(data)):
            if km is None:
                put(port, lo, _Fill(hi - lo, data.value) if isinstance(data, _Fill) else data[lo - addr : hi - addr])
                continue
            buf = np.full(hi - lo, data.value, dtype=np.uint8) if isinstance(data, _Fill) else data[lo - addr : hi - addr]
            kmask, kval = km.lookup(lo, hi - lo)
            runs = true_runs(~(kmask & (kval == buf)), slack=32)
            trusted += buf.size - sum(b - a for a, b in runs)
            for a, b in runs:
                put(port, lo + a, buf[a:b])
    for port, spans in checked.items():
        km = known.get(port)
        for lo, hi in spans:
            here = [ck for ck in crcs if ck.port == port and lo <= ck.address < hi]
            target = _image(merged, port, lo, hi)  # the set-up's bytes, poisoned where the layers write
            if km is not None:
                kmask, kval = km.lookup(lo, hi - lo)
            else:
                kmask, kval = np.zeros(hi - lo, dtype=bool), np.zeros(hi - lo, dtype=np.uint8)
            need = ~(kmask & (kval == target))
            if poison:
                assert fp.masks is not None
                written = np.zeros(hi - lo, dtype=bool)
                skip = np.zeros(hi - lo, dtype=bool)  # written bytes the board holds unlike the expected ones
                keep = np.zeros(hi - lo, dtype=bool)
                for ck in here:
                    sl = slice(ck.address - lo, ck.address - lo + ck.size)
                    m, exp = fp.masks[ck.line], fp.finals.get(ck.line)
                    target[sl][m] = poison_pattern(ck.address, ck.size)[m]
                    ck.poisoned = bool(m.any())
                    unlike = kmask[sl] & (kval[sl] != exp) if exp is not None else np.zeros(ck.size, dtype=bool)
                    written[sl] |= m
                    skip[sl] |= m & unlike
                    keep[sl] |= m & ~unlike
                need = ~(kmask & (kval == target)) & ~(skip & ~keep)
                # bytes no layer reads or writes (line and surface gaps): unknown ones are not
                # sent; the check's CRC proves they hold the set-up's value (else run_trace reruns)
                read = np.zeros(hi - lo, dtype=bool)
                for a, b in _within(fp.reads.get(port, []), lo, hi):
                    read[a - lo : b - lo] = True
                if assume:
                    need &= ~(~written & ~read & ~kmask)
                if probe_spacing and probes is not None:
                    _plant(here, lo, ~written & ~read, target, need, fp, probe_spacing, probes, kmask, kval)
            runs = true_runs(need, slack=32)
            sent = np.zeros(hi - lo, dtype=bool)
            for a, b in runs:
                sent[a:b] = True
            pre = np.where(sent | ~kmask, target, kval)  # the board before the run (unknown, unsent: assumed)
            trusted += int(sent.size - np.count_nonzero(sent))
            for ck in here:
                off = ck.address - lo
                seen = pre[off : off + ck.size]
                pr = probes.get(ck.line) if probes else None
                if pr is not None:  # the check counts the set-up's bytes where probes sit
                    seen = seen.copy()
                    seen[pr.mask] = pr.restore[pr.mask]
                ck.vacuous = (zlib.crc32(seen.tobytes()) & 0xFFFFFFFF) == ck.expected
            for a, b in runs:
                put(port, lo + a, target[a:b])
    return trusted


def run_trace(
    trace: Trace | str | Path,
    transport: Transport,
    *,
    driver: NvdlaDriver | None = None,
    poison: bool = False,
    timeout: float = 30.0,
    setup: str = "auto",
    _fill: tuple[int, dict[int, np.ndarray]] | None = None,
) -> TraceResult:
    """Run one trace on an open transport and report every check.

    ``poison=True`` overwrites, after the memory set-up, every byte of each checked region
    that the layer writes with ``0xA5``, so only data the target really wrote can pass. The
    bytes the layer writes are found on the reference model (see :func:`_written_masks`);
    when the model cannot run the trace the whole region is poisoned, except where it
    overlaps a loaded *input* image (a ``mem_load`` whose file name lacks "output").
    Checks whose CRC already matches before the run are reported as ``vacuous``.
    A unit the target cannot run gives status ``skipped`` naming the unit.

    ``setup="lean"`` (``"auto"``: when the target says its link is slow, ``lean_setup``)
    moves only the bytes that matter: of the memory set-up, the bytes the layers read (found
    on the reference model) and the checked regions, written once with the poison already
    applied; vacuity is decided on the local image, so nothing is read before the run. When
    the model cannot run the trace, the full set-up is used and the result says so.

    A target that knows what its board's memory already holds (``known_memory``: the serial
    target, :class:`~nvdla_hil.harness.targets.serial.BoardMemoryBook`) gets a leaner set-up
    still: bytes the board already holds are not sent, and a byte the layers write is not
    poisoned when the board is known to hold a value other than the expected one there (the
    model's, when its CRC equals the check's). The checked regions read back and the bytes
    sent are learned, the bytes the layers write forgotten before the launch. A passing run
    vouches for the record (``vouch_known_memory``); any other outcome clears it, and a failed
    run that trusted the record is run once more without it (after a reset) and says so.
    """
    t0 = time.monotonic()
    if not isinstance(trace, Trace):
        trace = parse_trace(trace)
    known: dict[str, KnownMemory] = getattr(transport, "known_memory", None) or {}
    result = _run_trace(trace, transport, driver, poison, timeout, setup, _fill, known, True)
    if result.status == "failed" and result.trusted_bytes:
        first = result
        for port, km in known.items():  # keep only what the first run read back
            kept = km.only(_union((ck.address, ck.address + ck.size) for ck in result.checks
                                  if ck.kind == "crc" and ck.port == port and ck.actual is not None))
            km.clear()
            km.learn_from(kept)
        try:
            transport.reset()
        except TransportError as e:
            first.message += f" (it trusted {first.trusted_bytes} bytes already on the board; no rerun without that: {e})"
            return first
        result = _run_trace(trace, transport, driver, poison, timeout, setup, _fill, known, False)
        result.setup += (f"; rerun: the first run did not send {first.trusted_bytes} bytes it took the board to hold "
                         f"and {first.message or 'failed'}; this run sent every byte it had not just read back")
    close_record(transport, known, result.status == "passed" and result.setup.startswith("lean"))
    result.duration = time.monotonic() - t0
    return result


def _run_trace(trace: Trace, transport: Transport, driver: NvdlaDriver | None, poison: bool, timeout: float,
               setup: str, _fill: tuple[int, dict[int, np.ndarray]] | None,
               known: dict[str, KnownMemory], assume: bool) -> TraceResult:
    t0 = time.monotonic()
    drv = driver or NvdlaDriver(transport)
    check_against_profile(trace, drv.profile)
    limit = 1 << int(drv.profile.mem_address_width)
    result = TraceResult(name=trace.name, status="passed")
    checks: dict[str, list[CheckResult]] = {}
    for c in trace.of_kind("check_crc", "check_nothing"):
        if c.kind == "check_crc":
            sync, port, addr, size, crc = c.args
            checks.setdefault(sync, []).append(CheckResult(sync, "crc", port, addr, size, crc, line=c.line))
        else:
            checks.setdefault(c.args[0], []).append(CheckResult(c.args[0], "nothing", line=c.line))
    result.checks = [ck for lst in checks.values() for ck in lst]
    try:
        # 1. memory set-up, merged so that every byte crosses the link once (traces often
        #    mem_init a region and then mem_load an image over it)
        inputs: list[tuple[str, int, int]] = []
        pieces: list[tuple[str, int, np.ndarray | _Fill | _DatImage]] = []
        lines: list[int] = []
        images: dict[Path, _DatImage] = {}  # a file loaded twice is read once
        set_up = 0
        for c in trace.of_kind("mem_init", "mem_load"):
            if c.kind == "mem_init":
                port, addr, size, pattern = c.args
                pieces.append((port, addr, _Fill(size, 0 if pattern == "ALL_ZERO" else 0xFF)))
                set_up += size
            else:
                port, addr, rel = c.args
                dat = trace.folder / rel
                image = images.get(dat)
                if image is None:
                    image = images[dat] = _read_dat(dat, where=f"{trace.path}:{c.line}", folder=trace.folder)
                if addr + image.extent > ADDRESS_LIMIT:
                    raise TraceError(trace.path, c.line, f"{rel} ({image.extent:#x} bytes) at {addr:#x} runs "
                                                         f"past the 64-bit address space")
                if addr + image.extent > limit:
                    raise TraceError(trace.path, c.line, f"{rel} ({image.extent:#x} bytes) at {addr:#x} runs past "
                                                         f"{drv.profile.name}'s {drv.profile.mem_address_width}-bit "
                                                         f"addresses (ends at {addr + image.extent:#x})")
                pieces.append((port, addr, image))
                set_up += image.extent
                if "output" not in rel.lower():
                    inputs.append((port, addr, image.extent))
            lines.append(c.line)
            if set_up > MAX_TRACE_BYTES:
                raise TraceError(trace.path, c.line, f"the trace sets up more than {MAX_TRACE_BYTES:#x} bytes "
                                                     f"({MAX_TRACE_BYTES >> 30} GiB) of memory")
        merged = _merge_pieces(pieces)

        def put(port: str, addr: int, data: np.ndarray | _Fill) -> None:
            km = known.get(port)
            try:
                if isinstance(data, _Fill):
                    _mem_fill(transport, port, addr, data.size, data.value)
                else:
                    for off in range(0, data.size, SETUP_CHUNK):
                        transport.mem_write(addr + off, data[off : off + SETUP_CHUNK], port=port)
                        if km is not None:
                            km.learn(addr + off, data[off : off + SETUP_CHUNK])
            except (TransportError, TraceError):
                raise
            except ValueError as e:  # the target refuses the address (outside its memory window)
                n = _span(data)
                line = next((ln for (p, a, d), ln in zip(pieces, lines, strict=True)
                             if p == port and _overlaps(a, _span(d), addr, n)), None)
                raise TraceError(trace.path, line, f"memory set-up {port}[{addr:#x}+{n:#x}]: {e}") from None

        probes: dict[int, _Probes] = {}  # verify links: planted in checked regions (lean set-up)
        lean = _fill is None and (setup == "lean" or (setup == "auto" and bool(getattr(transport, "lean_setup", False))))
        fp = _footprint(trace, transport.profile_name, masks=poison) if lean else None
        if lean and fp is None:
            result.setup = "full (the model cannot run this trace, so it cannot say which bytes matter)"
            lean = False
        if not lean:
            for km in known.values():
                km.clear()  # a full set-up is not accounted for byte by byte
            known = {}
        if lean:
            assert fp is not None
            result.setup = "lean"
            trusted = _lean_setup(merged, result, fp, known, put, poison, assume,
                                  int(getattr(transport, "read_probe_spacing", 0) or 0), probes)
            result.trusted_bytes = trusted
            # the layers are about to write these bytes: nothing is known of them until read back
            for port, spans in fp.writes.items():
                if port in known:
                    for lo, hi in spans:
                        known[port].forget(lo, hi - lo)
        else:
            if result.setup == "":
                result.setup = "full"
            for port, addr, data in merged:
                put(port, addr, data)
        masks = (fp.masks if fp is not None else _written_masks(trace, transport.profile_name)) if poison and not lean else None
        for ck in result.checks:
            if lean:
                break
            if ck.kind != "crc":
                continue
            ck.vacuous = _crc(transport, ck.port, ck.address, ck.size, where=(trace.path, ck.line)) == ck.expected
            if not (poison or _fill is not None):
                continue
            is_input = any(p == ck.port and _overlaps(ck.address, ck.size, a, n) for p, a, n in inputs)
            if is_input and masks is None and _fill is None:
                continue  # never poison data a layer may read (the masks know exactly)
            if _fill is not None:  # (value, bytes read per check line): fill all but those
                region = transport.mem_read(ck.address, ck.size, port=ck.port)
                region[~_fill[1][ck.line]] = _fill[0]
                transport.mem_write(ck.address, region, port=ck.port)
            elif masks is not None:
                region = transport.mem_read(ck.address, ck.size, port=ck.port)
                region[masks[ck.line]] = POISON_BYTE
                transport.mem_write(ck.address, region, port=ck.port)
                ck.poisoned = bool(masks[ck.line].any())
            else:
                _mem_fill(transport, ck.port, ck.address, ck.size, POISON_BYTE)
                ck.poisoned = True
        # 2. register sequence; a LUT programming run (CFG, then DATA writes) goes as one
        #    indirect-port unit, which a verifying link proves by reading the table back
        seq = trace.of_kind("reg_write", "poll_reg_equal")
        regs = []
        for c in seq:
            try:
                regs.append(drv.register(c.args[0]))
            except RegisterMapError as e:
                raise TraceError(trace.path, c.line, str(e)) from e
        i = 0
        while i < len(seq):
            c, reg = seq[i], regs[i]
            if c.kind == "poll_reg_equal":
                drv.poll_equal(reg.full_name, c.args[1], timeout=timeout)
                i += 1
                continue
            j = i + 1
            if reg.name == "S_LUT_ACCESS_CFG":
                while j < len(seq) and seq[j].kind == "reg_write" and regs[j].full_name == f"{reg.block}.S_LUT_ACCESS_DATA":
                    j += 1
            if j > i + 1 and drv.precision.write_lut_run(reg.block, c.args[1], [seq[k].args[1] for k in range(i + 1, j)]):
                result.register_writes += j - i
                i = j
                continue
            transport.write32(reg.address, c.args[1])
            result.register_writes += 1
            i += 1
        # 3. sync points in order, then their checks
        for c in trace.of_kind("intr_notify"):
            unit, group, sync = c.args
            try:
                drv.wait_done(unit, group, timeout=timeout)
            except RegisterMapError as e:
                raise TraceError(trace.path, c.line, f"unknown interrupt {unit}_{group}: {e}") from e
            for ck in checks.get(sync, []):
                if ck.kind == "crc":
                    expect = fp.finals.get(ck.line) if lean and fp is not None else None
                    pr = probes.get(ck.line)
                    if pr is not None and expect is not None:
                        expect = np.where(pr.mask, pr.planted, expect)
                    ck.actual = _crc(transport, ck.port, ck.address, ck.size, where=(trace.path, ck.line),
                                     expect=expect, known=known.get(ck.port), probes=pr)
        failed = [ck for ck in result.checks if not ck.passed]
        if failed:
            result.status = "failed"
            result.message = f"{len(failed)} of {len(result.checks)} checks failed"
        elif any(ck.vacuous and not ck.poisoned for ck in result.checks):
            result.message = "passed, but some checks were vacuous (rerun with poison to be sure)"
    except UnitNotModelled as e:
        result.status = "skipped"
        result.message = f"unit not modelled: {e}"
    except TraceError:
        raise
    except (TransportError, RegisterMapError, TimeoutError) as e:
        result.status = "error"
        result.message = f"{type(e).__name__}: {e}"
    except ValueError as e:  # the target refuses what the registers program (e.g. the model's shape checks)
        result.status = "error"
        result.message = f"the target refused the programmed layer: {type(e).__name__}: {e}"
    result.duration = time.monotonic() - t0
    return result


def check_against_profile(trace: Trace, profile) -> None:  # noqa: ANN001 - a HardwareProfile
    """What a trace asks of the hardware, checked against ``profile`` before anything is sent
    (a :class:`TraceError` naming file and line):

    * every ``mem_init``, ``mem_load`` base and ``check_crc`` region lies inside the profile's
      ``mem_address_width``-bit address space (nv_small: 32 bits, ``NVDLA_MEM_ADDRESS_WIDTH`` of
      its .spec), on a memory port it has (``sec_mem`` needs the feature);
    * every ``reg_write`` names a register of a unit the profile has, and a read-only register
      is written only with a value it can hold (bits inside its fields). ``regs write`` refuses
      every read-only write; a trace may not, because NVDLA's own trace generator writes every
      register of a layer, status and performance counters included, with the value it expects
      them to hold (7,194 such writes in nvdla/hw's trace_tests, all of them inside the
      fields): a read-only write of any other value cannot be that and is refused. Bits set
      outside the fields of a writable register are accepted as NVDLA's traces set them (the
      register file drops them)."""
    limit = 1 << int(profile.mem_address_width)
    width = int(profile.mem_address_width)
    for c in trace.commands:
        if c.kind in ("mem_init", "mem_load", "check_crc"):
            if c.kind == "mem_init":
                port, addr, size = c.args[0], c.args[1], c.args[2]
            elif c.kind == "mem_load":
                port, addr, size = c.args[0], c.args[1], 1
            else:
                port, addr, size = c.args[1], c.args[2], c.args[3]
            if port == "sec_mem" and not profile.has("sec_mem"):
                raise TraceError(trace.path, c.line, f"{c.kind} on sec_mem, but {profile.name} has no secondary "
                                                     "memory port (sec_mem)")
            if addr + size > limit:
                raise TraceError(trace.path, c.line, f"{c.kind} {port}[{addr:#x}+{size:#x}] lies outside "
                                                     f"{profile.name}'s {width}-bit address space "
                                                     f"(0..{limit - 1:#x})")
        elif c.kind == "reg_write":
            try:
                reg = profile.regmap.register(c.args[0])
            except RegisterMapError as e:
                raise TraceError(trace.path, c.line, str(e)) from None
            if not reg.writable:
                held = 0
                for f in reg.fields.values():
                    held |= ((1 << (f.msb - f.lsb + 1)) - 1) << f.lsb
                if c.args[1] & ~held:
                    raise TraceError(trace.path, c.line, f"{reg.full_name} is read-only and cannot hold "
                                                         f"{c.args[1]:#x} (its fields: {held:#x}); "
                                                         "regs write refuses it too")


def run_traces(paths: Iterable[Path], transport_factory, **kw) -> list[TraceResult]:  # noqa: ANN001
    """Run several traces, each on a fresh transport from ``transport_factory()``."""
    out = []
    for p in paths:
        with transport_factory() as t:
            out.append(run_trace(p, t, **kw))
    return out


def trace_features(trace: Trace) -> set[str]:
    """Hardware features a trace needs, from what it programs: ``sdp_ew`` when it enables
    the SDP element-wise stage, ``sdp_lut`` when that stage's LUT is on, ``sec_mem`` when it
    uses the secondary memory port. (nv_small has neither SDP EW nor its LUT.)"""
    from ..drivers.regmap import load_regmap

    feats: set[str] = set()
    cfg = load_regmap("v2").register("SDP", "D_DP_EW_CFG")
    for c in trace.of_kind("reg_write"):
        name = c.args[0].upper()
        if name.startswith("NVDLA_SDP.D_DP_EW_CFG"):
            v = c.args[1]
            if not cfg.field("EW_BYPASS").extract(v):
                feats.add("sdp_ew")
                if not cfg.field("EW_LUT_BYPASS").extract(v):
                    feats.add("sdp_lut")
    if any(c.kind in ("mem_init", "mem_load", "check_crc") and "sec_mem" in c.args for c in trace.commands):
        feats.add("sec_mem")
    return feats
