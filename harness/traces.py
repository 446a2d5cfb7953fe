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
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..drivers.driver import NvdlaDriver
from ..drivers.regmap import RegisterMapError
from ..drivers.transport import Transport, TransportError
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
]

POISON_BYTE = 0xA5
MEM_PORTS = {"pri_mem": "pri_mem", "1": "pri_mem", "sec_mem": "sec_mem", "2": "sec_mem"}


class TraceError(ValueError):
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


_NUM = r"(?:0[xX][0-9a-fA-F]+|\d+)"
_RE = {
    "mem_init": re.compile(rf"^mem_init\s*\(\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*(\w+)\s*\)\s*;$"),
    "mem_load": re.compile(rf'^mem_load\s*\(\s*(\w+)\s*,\s*({_NUM})\s*,\s*"([^"]+)"\s*\)\s*;$'),
    "reg_write": re.compile(rf"^reg_write\s*\(\s*([\w.]+)\s*,\s*({_NUM})\s*\)\s*;$"),
    "poll_reg_equal": re.compile(rf"^poll_reg_equal\s*\(\s*([\w.]+)\s*,\s*({_NUM})\s*\)\s*;$"),
    "intr_notify": re.compile(r"^intr_notify\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*;$"),
    "check_crc": re.compile(rf"^check_crc\s*\(\s*(\w+)\s*,\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*(0[xX][0-9a-fA-F]+)\s*\)\s*;$"),
    "check_nothing": re.compile(r"^check_nothing\s*\(\s*(\w+)\s*\)\s*;$"),
    "sync_notify": re.compile(r"^sync_notify\s*\(\s*([\w.]+)\s*,\s*(\w+)\s*\)\s*;$"),
    "sync_wait": re.compile(r"^sync_wait\s*\(\s*([\w.]+)\s*,\s*(\w+)\s*\)\s*;$"),
}
_INTR = re.compile(r"^(\w+?)_(\d)$")
_DAT = re.compile(r"^\{\s*offset\s*:\s*(0[xX][0-9a-fA-F]+|\d+)\s*,\s*size\s*:\s*(0[xX][0-9a-fA-F]+|\d+)\s*,\s*payload\s*:\s*((?:0[xX][0-9a-fA-F]{1,2}\s*)*)\}\s*,?$")


def _port(path: Path, line: int, name: str) -> str:
    try:
        return MEM_PORTS[name]
    except KeyError:
        raise TraceError(path, line, f"unknown memory {name!r}; expected pri_mem or sec_mem") from None


def parse_trace(path: str | Path) -> Trace:
    """Parse a trace ``.cfg`` file (or a trace folder). Raises :class:`TraceError` with file:line."""
    path = Path(path)
    if path.is_dir():
        cfgs = sorted(path.glob("*.cfg"))
        if len(cfgs) != 1:
            raise TraceError(path, None, f"expected exactly one .cfg file in the trace folder, found {len(cfgs)}")
        path = cfgs[0]
    try:
        text = path.read_text(encoding="utf-8", errors="strict")
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(path, None, f"cannot read trace: {e}") from e
    commands: list[TraceCommand] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        head = line.split("(", 1)[0].strip()
        rx = _RE.get(head)
        if rx is None:
            raise TraceError(path, lineno, f"unknown command {head!r}; known: {', '.join(_RE)}")
        m = rx.match(line)
        if m is None:
            raise TraceError(path, lineno, f"malformed {head} command: {line!r}")
        g = m.groups()
        try:
            if head == "mem_init":
                args: tuple = (_port(path, lineno, g[0]), int(g[1], 0), int(g[2], 0), g[3])
                if g[3] not in ("ALL_ZERO", "ALL_ONE", "ALL_F"):
                    raise TraceError(path, lineno, f"unsupported mem_init pattern {g[3]!r}")
            elif head == "mem_load":
                rel = g[2]
                if Path(rel).is_absolute() or ".." in Path(rel).parts:
                    raise TraceError(path, lineno, f"data file {rel!r} must stay inside the trace folder")
                args = (_port(path, lineno, g[0]), int(g[1], 0), rel)
            elif head in ("reg_write", "poll_reg_equal"):
                value = int(g[1], 0)
                if not 0 <= value < 1 << 32:
                    raise TraceError(path, lineno, f"value {g[1]} does not fit 32 bits")
                args = (g[0], value)
            elif head == "intr_notify":
                mi = _INTR.match(g[0])
                if mi is None:
                    raise TraceError(path, lineno, f"interrupt name {g[0]!r} is not UNIT_GROUP (e.g. SDP_0)")
                args = (mi.group(1).upper(), int(mi.group(2)), g[1])
            elif head == "check_crc":
                args = (g[0], _port(path, lineno, g[1]), int(g[2], 0), int(g[3], 0), int(g[4], 16))
            elif head in ("sync_notify", "sync_wait"):
                args = (g[0], g[1])
            else:
                args = (g[0],)
        except ValueError as e:
            if isinstance(e, TraceError):
                raise
            raise TraceError(path, lineno, f"bad number: {e}") from e
        commands.append(TraceCommand(head, lineno, args, line))
    notified: dict[str, int] = {}
    for c in commands:
        if c.kind == "sync_notify":
            notified.setdefault(c.args[1], c.line)
        elif c.kind == "sync_wait" and c.args[1] not in notified:
            raise TraceError(path, c.line, f"sync_wait on event {c.args[1]!r} that no earlier sync_notify "
                             f"marks (the testbench would wait forever)")  # fmt: skip
    syncs = {c.args[2] for c in commands if c.kind == "intr_notify"}
    for c in commands:
        if c.kind in ("check_crc", "check_nothing") and c.args[0] not in syncs:
            raise TraceError(path, c.line, f"check on sync id {c.args[0]!r} that no intr_notify fires")
    return Trace(name=path.parent.name if path.stem == path.parent.name else path.stem, path=path, commands=commands)


def load_dat(path: Path, *, trace_path: Path | None = None) -> np.ndarray:
    """Read a ``.dat`` memory image: ``{offset:0x.., size:N, payload:0x.. 0x..},`` records
    (braces on their own lines are allowed). Returns the image as ``uint8``, gaps zero."""
    chunks: list[tuple[int, bytes]] = []
    end = 0
    try:
        fh = path.open("r", encoding="ascii")
    except OSError as e:
        raise TraceError(trace_path or path, None, f"missing data file {path.name}: {e.strerror}") from e
    with fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line in ("{", "}"):
                continue
            m = _DAT.match(line)
            if m is None:
                raise TraceError(path, lineno, f"malformed memory record: {line[:80]!r}")
            off, size = int(m.group(1), 0), int(m.group(2), 0)
            payload = bytes.fromhex(m.group(3).replace("0x", "").replace("0X", "").replace(" ", "").replace("\t", "")) \
                if all(len(t) == 4 for t in m.group(3).split()) else bytes(int(t, 16) for t in m.group(3).split())
            if len(payload) != size:
                raise TraceError(path, lineno, f"record says size {size} but carries {len(payload)} bytes")
            chunks.append((off, payload))
            end = max(end, off + size)
    image = np.zeros(end, dtype=np.uint8)
    for off, payload in chunks:
        image[off : off + len(payload)] = np.frombuffer(payload, dtype=np.uint8)
    return image


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

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def summary(self) -> str:
        lines = [f"{self.name}: {self.status.upper()} ({self.duration:.2f} s)" + (f" - {self.message}" if self.message else "")]
        lines += ["  " + c.describe() for c in self.checks]
        return "\n".join(lines)


def _merge_pieces(pieces: list[tuple[str, int, np.ndarray]]) -> list[tuple[str, int, np.ndarray]]:
    """Merge memory writes (applied in order) into one buffer per contiguous range and port."""
    out: list[tuple[str, int, np.ndarray]] = []
    for port in dict.fromkeys(p for p, _, _ in pieces):
        mine = [(a, d) for p, a, d in pieces if p == port]
        spans: list[list[int]] = []
        for a, d in sorted(mine, key=lambda x: x[0]):
            if spans and a <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], a + d.size)
            else:
                spans.append([a, a + d.size])
        for lo, hi in spans:
            buf = np.zeros(hi - lo, dtype=np.uint8)
            for a, d in mine:  # file order: later commands overwrite earlier ones
                if lo <= a < hi:
                    buf[a - lo : a - lo + d.size] = d
            out.append((port, lo, buf))
    return out


def _crc(transport: Transport, port: str, address: int, size: int) -> int:
    return zlib.crc32(transport.mem_read(address, size, port=port).tobytes()) & 0xFFFFFFFF


def _overlaps(a: int, n: int, b: int, m: int) -> bool:
    return a < b + m and b < a + n


def _written_masks(trace: Trace, profile: str, semantics: str = "rtl") -> dict[int, np.ndarray] | None:
    """Which bytes of each checked region the layers write and never read, found on the
    reference model. A first run records which bytes the layers' DMA engines read (an input
    sharing the region, an in-place layer: never poisoned, on the port the check names);
    two more runs pre-fill the other bytes with two different patterns: bytes that come out
    equal were written by a layer, bytes that differ were left alone (gaps between lines,
    padding). None when the model cannot run the trace."""
    from .targets.model import ModelTarget

    def one(fill: tuple[int, dict[int, np.ndarray]] | None):
        with ModelTarget(profile, semantics=semantics, record_reads=True) as model:
            res = run_trace(trace, model, poison=False, _fill=fill)
            if res.status not in ("passed", "failed"):
                return None
            crcs = [ck for ck in res.checks if ck.kind == "crc"]
            final = {ck.line: model.mem_read(ck.address, ck.size, port=ck.port) for ck in crcs}
            read = {ck.line: model.memories[ck.port].read_mask(ck.address, ck.size) for ck in crcs}
            return final, read

    first = one(None)
    if first is None:
        return None
    read = first[1]
    finals = []
    for value in (POISON_BYTE, POISON_BYTE ^ 0xFF):
        got = one((value, read))
        if got is None:
            return None
        finals.append(got[0])
    return {line: (finals[0][line] == finals[1][line]) & ~read[line] for line in read}


def run_trace(
    trace: Trace | str | Path,
    transport: Transport,
    *,
    driver: NvdlaDriver | None = None,
    poison: bool = False,
    timeout: float = 30.0,
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
    """
    t0 = time.monotonic()
    if not isinstance(trace, Trace):
        trace = parse_trace(trace)
    drv = driver or NvdlaDriver(transport)
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
        pieces: list[tuple[str, int, np.ndarray]] = []
        for c in trace.of_kind("mem_init", "mem_load"):
            if c.kind == "mem_init":
                port, addr, size, pattern = c.args
                fill = 0 if pattern == "ALL_ZERO" else 0xFF
                pieces.append((port, addr, np.full(size, fill, dtype=np.uint8)))
            else:
                port, addr, rel = c.args
                image = load_dat(trace.folder / rel, trace_path=f"{trace.path}:{c.line}")
                pieces.append((port, addr, image))
                if "output" not in rel.lower():
                    inputs.append((port, addr, image.size))
        for port, addr, data in _merge_pieces(pieces):
            transport.mem_write(addr, data, port=port)
        masks = _written_masks(trace, transport.profile_name) if poison else None
        for ck in result.checks:
            if ck.kind != "crc":
                continue
            ck.vacuous = _crc(transport, ck.port, ck.address, ck.size) == ck.expected
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
                transport.mem_write(ck.address, np.full(ck.size, POISON_BYTE, dtype=np.uint8), port=ck.port)
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
                    ck.actual = _crc(transport, ck.port, ck.address, ck.size)
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
    result.duration = time.monotonic() - t0
    return result


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
