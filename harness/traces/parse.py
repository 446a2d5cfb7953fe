"""NVDLA trace files: the ``.cfg`` grammar, parsed into :class:`Trace` commands.

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

``MEM`` is ``pri_mem`` / ``sec_mem`` (``1`` / ``2`` in older traces).

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

Numbers, region sizes and the file itself are bounded as :mod:`.limits` says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .limits import MAX_CFG_BYTES, MAX_TRACE_BYTES, NUMBER, TraceError, ascii_text, check_region, parse_number, regular_file

__all__ = ["MEM_PORTS", "TraceCommand", "Trace", "parse_trace"]

MEM_PORTS = {"pri_mem": "pri_mem", "1": "pri_mem", "sec_mem": "sec_mem", "2": "sec_mem"}


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


_NUM = NUMBER
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


def _port(path: Path, line: int, name: str) -> str:
    try:
        return MEM_PORTS[name]
    except KeyError:
        raise TraceError(path, line, f"unknown memory {name!r}; expected pri_mem or sec_mem") from None


def _read_cfg(path: Path) -> tuple[Path, str]:
    """The ``.cfg`` file (``path`` itself, or the one in the trace folder ``path``) and its text."""
    if path.is_dir():
        cfgs = sorted(path.glob("*.cfg"))
        if len(cfgs) != 1:
            raise TraceError(path, None, f"expected exactly one .cfg file in the trace folder, found {len(cfgs)}")
        path = cfgs[0]
    regular_file(path, path, "trace", MAX_CFG_BYTES)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceError(path, None, f"cannot read trace: {e.strerror}") from e
    return path, ascii_text(path, raw)


def _arguments(path: Path, lineno: int, head: str, g: tuple[str, ...]) -> tuple:
    """The checked arguments of one command (``g``: its regular expression's groups)."""
    if head == "mem_init":
        port = _port(path, lineno, g[0])
        addr = parse_number(path, lineno, g[1], "mem_init address")
        size = parse_number(path, lineno, g[2], "mem_init size")
        if g[3] not in ("ALL_ZERO", "ALL_ONE", "ALL_F"):
            raise TraceError(path, lineno, f"unsupported mem_init pattern {g[3][:40]!r}")
        check_region(path, lineno, "mem_init", addr, size)
        return (port, addr, size, g[3])
    if head == "mem_load":
        rel = g[2]
        if Path(rel).is_absolute() or ".." in Path(rel).parts or "\\" in rel or "\0" in rel:
            raise TraceError(path, lineno, f"data file {rel[:80]!r} must stay inside the trace folder")
        return (_port(path, lineno, g[0]), parse_number(path, lineno, g[1], "mem_load address"), rel)
    if head in ("reg_write", "poll_reg_equal"):
        return (g[0], parse_number(path, lineno, g[1], "value", 32))
    if head == "intr_notify":
        mi = _INTR.match(g[0])
        if mi is None:
            raise TraceError(path, lineno, f"interrupt name {g[0][:40]!r} is not UNIT_GROUP (e.g. SDP_0)")
        return (mi.group(1).upper(), int(mi.group(2)), g[1])
    if head == "check_crc":
        addr = parse_number(path, lineno, g[2], "check_crc address")
        size = parse_number(path, lineno, g[3], "check_crc size")
        crc = parse_number(path, lineno, g[4], "CRC", 32)
        if size == 0:
            raise TraceError(path, lineno, "check_crc of 0 bytes checks nothing (the CRC of no bytes always matches)")
        check_region(path, lineno, "check_crc", addr, size)
        return (g[0], _port(path, lineno, g[1]), addr, size, crc)
    if head in ("sync_notify", "sync_wait"):
        return (g[0], g[1])
    return (g[0],)


def _commands(path: Path, text: str) -> list[TraceCommand]:
    """Every command of the file, in order, each line checked against the grammar; the
    ``mem_init`` sizes bounded by :data:`MAX_TRACE_BYTES` as they add up."""
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
        args = _arguments(path, lineno, head, m.groups())
        if head == "mem_init":
            set_up += args[2]
            if set_up > MAX_TRACE_BYTES:
                raise TraceError(path, lineno, f"the trace sets up more than {MAX_TRACE_BYTES:#x} bytes "
                                               f"({MAX_TRACE_BYTES >> 30} GiB) of memory")
        commands.append(TraceCommand(head, lineno, args, line))
    return commands


def _check_structure(path: Path, commands: list[TraceCommand]) -> None:
    """What a trace must check (module docstring): never green by mistake."""
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


def parse_trace(path: str | Path) -> Trace:
    """Parse a trace ``.cfg`` file (or a trace folder). Raises :class:`TraceError` with file:line."""
    path, text = _read_cfg(Path(path))
    commands = _commands(path, text)
    _check_structure(path, commands)
    return Trace(name=path.parent.name if path.stem == path.parent.name else path.stem, path=path, commands=commands)
