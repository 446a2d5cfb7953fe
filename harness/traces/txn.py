"""nv_full's own trace tests (nvdla/hw branch ``nvdlav1``, ``verif/traces/traceplayer/<test>/``):
``input.txn`` plus memory images, parsed and played on any target.

Commands, with the semantics of NVDLA's v1 Verilator player (``verif/verilator/
input_txn_to_verilator.pl`` turns the text into a command stream, ``verif/verilator/nvdla.cpp``
plays it):

=======================================  ===========================================================
``load_mem ADDR LEN FILE``               the first LEN bytes of FILE's data lines into memory at ADDR
``write_reg ADDR DATA``                  CSB write; ADDR's low 16 bits are the *word* address
                                         (byte address = word * 4), the high 16 bits are misc bits
                                         (``0xffff`` in every public test)
``read_reg ADDR MASK DATA``              read until ``(value & MASK) == (DATA & MASK)``, at most
                                         ``tries`` reads (nvdla.cpp ``CSBMaster::read``: 10); a
                                         read that never matches fails the test
``wait``                                 wait for the interrupt line (the test then reads and
                                         clears GLB ``S_INTR_STATUS`` itself)
``dump_mem ADDR LEN FILE``               LEN bytes of memory at ADDR must equal FILE's data bytes
=======================================  ===========================================================

``#`` starts a comment (the public tests name the register there). Memory files: every line
that starts with ``0x`` (after one optional space) holds data bytes ``0x.. 0x..``; other lines
(``Data_size = ...``, ``dumped memory, start_address=...``) are headers. An address whose top
nibble is 5 is the CVSRAM port (``sec_mem``), 8 the DBB port (``pri_mem``), as nvdla.cpp's
``axievent``; anything else is an error there and here. ``plusargs.txt`` options of the UVM
testbench are read: ``+read_reg_poll_retries=N`` (the read tries), ``+continue_on_fail``
(a failing read_reg is recorded and the test goes on; otherwise it stops there).

A ``dump_mem`` region is explained element by element when a layer of the trace wrote it: the
player keeps the last value written to every register, finds the unit whose destination base
address equals the region (SDP, PDP, CDP), decodes its output cube (size, strides, element
size, memory atom) and reports mismatches by (c, h, w); bytes outside the cube (line and
surface gaps, padding lanes) are counted apart.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...drivers.profiles import HardwareProfile, load_profile
from ...drivers.regmap import RegisterMapError
from ...drivers.transport import Transport, TransportError
from ..targets.outputs import cube_for, diff_region
from ..refmodel.base import UnitNotModelled
from .limits import TraceError

__all__ = ["TxnCommand", "Txn", "TxnCheck", "TxnResult", "parse_txn", "load_txn_data", "run_txn", "find_txns"]

#: bounds on untrusted sizes (the largest public nv_full image is ~1 MB)
MAX_REGION = 1 << 30
MAX_FILE_BYTES = 1 << 30
DEFAULT_READ_TRIES = 10  # nvdla.cpp CSBMaster::read: op.tries = 10
PORT_OF_NIBBLE = {0x5: "sec_mem", 0x8: "pri_mem"}

_HEX = r"0[xX][0-9a-fA-F]+"
_SYNTAX = {
    "load_mem": (re.compile(rf"^load_mem\s+({_HEX})\s+({_HEX})\s+(\S+)$"), "load_mem ADDR LEN FILE"),
    "dump_mem": (re.compile(rf"^dump_mem\s+({_HEX})\s+({_HEX})\s+(\S+)$"), "dump_mem ADDR LEN FILE"),
    "write_reg": (re.compile(rf"^write_reg\s+({_HEX})\s+({_HEX})$"), "write_reg ADDR DATA"),
    "read_reg": (re.compile(rf"^read_reg\s+({_HEX})\s+({_HEX})\s+({_HEX})$"), "read_reg ADDR MASK DATA"),
    "wait": (re.compile(r"^wait$"), "wait"),
}


@dataclass(frozen=True)
class TxnCommand:
    kind: str
    line: int
    args: tuple
    comment: str = ""


@dataclass
class Txn:
    name: str
    path: Path  # input.txn
    commands: list[TxnCommand]
    read_tries: int = DEFAULT_READ_TRIES
    continue_on_fail: bool = False

    @property
    def folder(self) -> Path:
        return self.path.parent


def _port(path: Path, line: int, addr: int, size: int) -> str:
    port = PORT_OF_NIBBLE.get(addr >> 28) if addr < (1 << 32) else None
    if port is None:
        raise TraceError(path, line, f"address {addr:#x} is on neither memory port (0x5xxxxxxx = CVSRAM, "
                                     f"0x8xxxxxxx = DBB)")  # fmt: skip
    if size <= 0 or size > MAX_REGION or ((addr + size - 1) >> 28) != (addr >> 28):
        raise TraceError(path, line, f"region {addr:#x}+{size:#x} leaves its 256 MiB window or is not 1..{MAX_REGION:#x} bytes")
    return port


def _data_file(path: Path, line: int, rel: str) -> Path:
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts:
        raise TraceError(path, line, f"memory file {rel!r} must stay inside the test folder")
    full = path.parent / p
    try:
        resolved = full.resolve(strict=True)
    except OSError:
        raise TraceError(path, line, f"missing memory file {rel}") from None
    if path.parent.resolve() not in resolved.parents:
        raise TraceError(path, line, f"memory file {rel!r} resolves outside the test folder; refused")
    return full


def parse_txn(folder: str | Path) -> Txn:
    """Parse a test folder (or its ``input.txn``); errors name the file and line."""
    p = Path(folder)
    path = p if p.is_file() else p / "input.txn"
    try:
        if path.stat().st_size > 64 << 20:
            raise TraceError(path, None, "input.txn is larger than 64 MiB; refused")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(path, None, f"cannot read: {e}") from None
    cmds: list[TxnCommand] = []
    for no, raw in enumerate(text.splitlines(), 1):
        body, _, comment = raw.partition("#")
        line = " ".join(body.split())
        if not line:
            continue
        head = line.split()[0]
        if head not in _SYNTAX:
            raise TraceError(path, no, f"unknown command {head!r}; known: {', '.join(_SYNTAX)}")
        rx, form = _SYNTAX[head]
        m = rx.match(line)
        if m is None:
            raise TraceError(path, no, f"malformed {head}: expected {form!r}, got {line!r}")
        g = m.groups()
        if head in ("load_mem", "dump_mem"):
            addr, size = int(g[0], 16), int(g[1], 16)
            port = _port(path, no, addr, size)
            args: tuple = (addr, size, g[2], port)
            _data_file(path, no, g[2])
        elif head == "write_reg":
            addr, data = int(g[0], 16), int(g[1], 16)
            if addr >> 32 or data >> 32:
                raise TraceError(path, no, "write_reg address and data are 32-bit")
            args = ((addr & 0xFFFF) * 4, data)
        elif head == "read_reg":
            addr, mask, data = (int(x, 16) for x in g)
            if addr >> 32 or mask >> 32 or data >> 32:
                raise TraceError(path, no, "read_reg address, mask and data are 32-bit")
            args = ((addr & 0xFFFF) * 4, mask, data)
        else:
            args = ()
        cmds.append(TxnCommand(head, no, args, comment.strip()))
    if not cmds:
        raise TraceError(path, None, "no commands: a test that does nothing checks nothing")
    if not any(c.kind in ("read_reg", "dump_mem") for c in cmds):
        raise TraceError(path, None, "no read_reg or dump_mem: the test checks nothing")
    txn = Txn(name=path.parent.name, path=path, commands=cmds)
    plus = path.parent / "plusargs.txt"
    if plus.is_file():
        for tok in plus.read_text(encoding="utf-8", errors="replace").split():
            if tok.startswith("+read_reg_poll_retries="):
                try:
                    txn.read_tries = max(1, min(int(tok.split("=", 1)[1]), 10_000_000))
                except ValueError:
                    raise TraceError(plus, 1, f"bad {tok!r}") from None
            elif tok == "+continue_on_fail":
                txn.continue_on_fail = True
    return txn


def load_txn_data(path: Path, size: int, *, where: str = "") -> np.ndarray:
    """The first ``size`` data bytes of a v1 memory file (lines starting with ``0x``)."""
    out = np.zeros(size, dtype=np.uint8)
    n = 0
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise TraceError(path, None, "memory file larger than 1 GiB; refused")
        fh = path.open("r", encoding="ascii")
    except OSError as e:
        raise TraceError(where or path, None, f"cannot read memory file {path.name}: {e.strerror}") from None
    with fh:
        try:
            for no, raw in enumerate(fh, 1):
                s = raw[1:] if raw.startswith(" ") else raw
                if not s.startswith(("0x", "0X")):
                    continue
                toks = s.split()
                try:
                    vals = [int(t, 16) for t in toks]
                except ValueError:
                    raise TraceError(path, no, f"malformed data line: {raw.strip()[:60]!r}") from None
                if any(not t.lower().startswith("0x") or v > 0xFF for t, v in zip(toks, vals)):
                    raise TraceError(path, no, "data bytes must be 0x00..0xff")
                take = min(len(vals), size - n)
                out[n : n + take] = vals[:take]
                n += take
                if n == size:
                    break
        except UnicodeDecodeError:
            raise TraceError(path, None, "memory file is not ASCII text") from None
    if n != size:
        raise TraceError(where or path, None, f"{path.name} holds {n} data bytes, the command needs {size}")
    return out


def find_txns(root: str | Path) -> list[Path]:
    """Every test folder (holding ``input.txn``) below ``root``."""
    return sorted(p.parent for p in Path(root).rglob("input.txn"))


# ---- results ---------------------------------------------------------------------------------


@dataclass
class TxnCheck:
    kind: str  # read_reg / dump_mem
    line: int
    passed: bool
    message: str

    def describe(self) -> str:
        return f"line {self.line}: {self.kind} {'ok' if self.passed else 'FAILED'}: {self.message}"


@dataclass
class TxnResult:
    name: str
    status: str  # passed / failed / skipped / error
    checks: list[TxnCheck] = field(default_factory=list)
    message: str = ""
    duration: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def summary(self) -> str:
        reads = [c for c in self.checks if c.kind == "read_reg"]
        dumps = [c for c in self.checks if c.kind == "dump_mem"]
        lines = [f"{self.name}: {self.status.upper()} ({self.duration:.2f} s)" + (f" - {self.message}" if self.message else "")]
        lines.append(f"  read_reg: {sum(c.passed for c in reads)} of {len(reads)} matched")
        lines += ["  " + c.describe() for c in reads if not c.passed][:10]
        lines += ["  " + c.describe() for c in dumps]
        return "\n".join(lines)


# ---- player ------------------------------------------------------------------------------------


def run_txn(test: Txn | str | Path, transport: Transport, *, profile: HardwareProfile | str | None = None,
            timeout: float = 30.0) -> TxnResult:  # fmt: skip
    """Play one v1 test on an open transport; every read_reg and dump_mem is a check."""
    t0 = time.monotonic()
    txn = test if isinstance(test, Txn) else parse_txn(test)
    prof = load_profile(profile or transport.profile_name)
    res = TxnResult(txn.name, "passed")
    regs: dict[int, int] = {}
    stop = False
    try:
        for c in txn.commands:
            if stop:
                break
            if c.kind == "load_mem":
                addr, size, rel, port = c.args
                data = load_txn_data(_data_file(txn.path, c.line, rel), size, where=f"{txn.path}:{c.line}")
                transport.mem_write(addr, data, port=port)
            elif c.kind == "write_reg":
                addr, data = c.args
                _check_reg(prof, txn, c)
                transport.write32(addr, data)
                regs[addr] = data
            elif c.kind == "read_reg":
                addr, mask, want = c.args
                _check_reg(prof, txn, c)
                got = 0
                for _ in range(txn.read_tries):
                    got = transport.read32(addr)
                    if (got & mask) == (want & mask):
                        break
                ok = (got & mask) == (want & mask)
                name = prof.regmap.by_address(addr).full_name
                res.checks.append(TxnCheck("read_reg", c.line, ok, f"{name} & {mask:#010x}: expected {want & mask:#010x} "
                                           f"got {got & mask:#010x} (read {got:#010x}, {txn.read_tries} tries)"))  # fmt: skip
                if not ok and not txn.continue_on_fail:
                    stop = True
            elif c.kind == "wait":
                deadline = time.monotonic() + timeout
                while not transport.wait_irq(max(0.0, min(1.0, deadline - time.monotonic()))):
                    if time.monotonic() >= deadline:
                        raise TransportError(f"line {c.line}: wait: no interrupt within {timeout:g} s")
            elif c.kind == "dump_mem":
                addr, size, rel, port = c.args
                want = load_txn_data(_data_file(txn.path, c.line, rel), size, where=f"{txn.path}:{c.line}")
                mem = np.asarray(transport.mem_read(addr, size, port=port), dtype=np.uint8)
                cube = cube_for([regs], prof, addr, port)
                ok = bool(np.array_equal(want, mem))
                res.checks.append(TxnCheck("dump_mem", c.line, ok, f"{port}[{addr:#x}+{size:#x}] vs {rel}: "
                                           + diff_region(want, mem, addr, cube).summary()))  # fmt: skip
    except UnitNotModelled as e:
        res.status, res.message = "skipped", f"unit not modelled: {e}"
    except (TransportError, TimeoutError) as e:
        res.status, res.message = "error", f"{type(e).__name__}: {e}"
    if res.status == "passed":
        failed = [c for c in res.checks if not c.passed]
        if failed:
            res.status = "failed"
            res.message = f"{len(failed)} of {len(res.checks)} checks failed" + (" (stopped at the first)" if stop else "")
    res.duration = time.monotonic() - t0
    return res


def _check_reg(prof: HardwareProfile, txn: Txn, c: TxnCommand) -> None:
    try:
        prof.regmap.by_address(c.args[0])
    except RegisterMapError as e:
        raise TraceError(txn.path, c.line, f"{e} (CSB byte address {c.args[0]:#x})") from None
