"""The trace player: one NVDLA trace run on a target, every check reported.

Execution follows NVDLA's native Verilator player (``verif/verilator/nvdla.cpp``): all memory
commands first (:mod:`.memory_setup`, or :mod:`.lean` on a slow link), then the register
sequence in order, then the sync points in order: wait for the unit's done bit in GLB
S_INTR_STATUS (not masked by S_INTR_MASK), clear it by writing the bit back, run the checks of
that sync point (:mod:`.checks`).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...drivers.driver import NvdlaDriver
from ...drivers.regmap import RegisterMapError
from ...drivers.transport import Transport, TransportError
from ..refmodel.base import UnitNotModelled
from ..targets.memory import KnownMemory, RecordingMemory, SparseMemory, close_record
from .checks import CheckResult, Probes, TraceResult, region_crc
from .lean import Footprint, lean_setup, union_spans
from .limits import TraceError
from .memory_setup import SetupPlan, SetupWriter, plan_setup
from .needs import check_against_profile
from .parse import Trace, parse_trace
from ...semantics import Semantics

__all__ = ["POISON_BYTE", "run_trace", "run_traces", "footprint"]

POISON_BYTE = 0xA5


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
    when the model cannot run the trace nothing is poisoned (gaps the layer leaves unwritten
    would fail a correct run) and ``TraceResult.setup`` says so.
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
            kept = km.only(union_spans((ck.address, ck.address + ck.size) for ck in result.checks
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


def run_traces(paths: Iterable[Path], transport_factory, **kw) -> list[TraceResult]:  # noqa: ANN001
    """Run several traces, each on a fresh transport from ``transport_factory()``."""
    out = []
    for p in paths:
        with transport_factory() as t:
            out.append(run_trace(p, t, **kw))
    return out


def _run_trace(trace: Trace, transport: Transport, driver: NvdlaDriver | None, poison: bool, timeout: float,
               setup: str, fill: tuple[int, dict[int, np.ndarray]] | None,
               known: dict[str, KnownMemory], assume: bool) -> TraceResult:
    """One run: set up memory, program the registers, wait for each sync point and run its
    checks; a target's refusal or a link failure is the result's status, a bad trace raises."""
    t0 = time.monotonic()
    drv = driver or NvdlaDriver(transport)
    check_against_profile(trace, drv.profile)
    result, checks = _new_result(trace)
    try:
        plan = plan_setup(trace, drv.profile)
        done = _set_up_memory(trace, transport, result, plan, poison, setup, fill, known, assume)
        _program(trace, drv, transport, result, timeout)
        _wait_and_check(trace, drv, transport, checks, done, timeout)
        _verdict(result)
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


def _new_result(trace: Trace) -> tuple[TraceResult, dict[str, list[CheckResult]]]:
    """A passing result with one :class:`CheckResult` per check, and the checks by sync id."""
    result = TraceResult(name=trace.name, status="passed")
    checks: dict[str, list[CheckResult]] = {}
    for c in trace.of_kind("check_crc", "check_nothing"):
        if c.kind == "check_crc":
            sync, port, addr, size, crc = c.args
            checks.setdefault(sync, []).append(CheckResult(sync, "crc", port, addr, size, crc, line=c.line))
        else:
            checks.setdefault(c.args[0], []).append(CheckResult(c.args[0], "nothing", line=c.line))
    result.checks = [ck for lst in checks.values() for ck in lst]
    return result, checks


@dataclass
class _SetUp:
    """What the memory set-up leaves for the checks: the model's footprint (lean set-up only),
    the probe words planted (by check line) and the board memory record still in use."""

    footprint: Footprint | None
    probes: dict[int, Probes]
    known: dict[str, KnownMemory]


def _set_up_memory(trace: Trace, transport: Transport, result: TraceResult, plan: SetupPlan, poison: bool,
                   setup: str, fill: tuple[int, dict[int, np.ndarray]] | None,
                   known: dict[str, KnownMemory], assume: bool) -> _SetUp:
    """Step 1: the memory set-up, lean or full (see :func:`run_trace`), with vacuity decided
    and the checked regions poisoned."""
    probes: dict[int, Probes] = {}  # verify links: planted in checked regions (lean set-up)
    lean = fill is None and (setup == "lean" or (setup == "auto" and bool(getattr(transport, "lean_setup", False))))
    fp = footprint(trace, transport.profile_name, masks=poison) if lean else None
    if fp is None:
        if lean:
            result.setup = "full (the model cannot run this trace, so it cannot say which bytes matter)"
        for km in known.values():
            km.clear()  # a full set-up is not accounted for byte by byte
        if result.setup == "":
            result.setup = "full"
        write = SetupWriter(transport, plan, trace.path)
        for port, addr, data in plan.merged:
            write(port, addr, data)
        _prepare_checks(trace, transport, result, poison, fill)
        return _SetUp(None, probes, {})
    result.setup = "lean"
    write = SetupWriter(transport, plan, trace.path, known)
    result.trusted_bytes = lean_setup(plan.merged, result, fp, known, write, poison, assume,
                                      int(getattr(transport, "read_probe_spacing", 0) or 0), probes)
    # the layers are about to write these bytes: nothing is known of them until read back
    for port, spans in fp.writes.items():
        if port in known:
            for lo, hi in spans:
                known[port].forget(lo, hi - lo)
    return _SetUp(fp, probes, known)


def _prepare_checks(trace: Trace, transport: Transport, result: TraceResult, poison: bool,
                    fill: tuple[int, dict[int, np.ndarray]] | None) -> None:
    """After a full set-up: read each checked region once (vacuity), then poison it where the
    layers write (``fill``: the footprint's own pre-fill of every byte the layers do not read).
    Only the reference model can say which bytes those are: where it cannot run the trace, nothing
    is poisoned (a layer leaves gaps between lines unwritten, and the check's CRC counts them, so
    poisoning them would fail a correct run) and the set-up says so."""
    masks = _written_masks(trace, transport.profile_name) if poison else None
    if poison and masks is None and fill is None:
        result.setup += "; no region poisoned (only the model can say which bytes the layers write)"
    for ck in result.checks:
        if ck.kind != "crc":
            continue
        ck.vacuous = region_crc(transport, ck.port, ck.address, ck.size, where=(trace.path, ck.line)) == ck.expected
        if fill is not None:  # (value, bytes read per check line): fill all but those
            region = transport.mem_read(ck.address, ck.size, port=ck.port)
            region[~fill[1][ck.line]] = fill[0]
            transport.mem_write(ck.address, region, port=ck.port)
        elif masks is not None:
            region = transport.mem_read(ck.address, ck.size, port=ck.port)
            region[masks[ck.line]] = POISON_BYTE
            transport.mem_write(ck.address, region, port=ck.port)
            ck.poisoned = bool(masks[ck.line].any())


def _program(trace: Trace, drv: NvdlaDriver, transport: Transport, result: TraceResult, timeout: float) -> None:
    """Step 2: the register sequence; a LUT programming run (CFG, then DATA writes) goes as one
    indirect-port unit, which a verifying link proves by reading the table back."""
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
        while j < len(seq) and seq[j].kind == "reg_write" and regs[j].name != "S_LUT_ACCESS_CFG":
            j += 1  # plain writes up to the next poll or LUT run go as one sequence
        transport.write_sequence([(regs[k].address, seq[k].args[1]) for k in range(i, j)])
        result.register_writes += j - i
        i = j


def _wait_and_check(trace: Trace, drv: NvdlaDriver, transport: Transport, checks: dict[str, list[CheckResult]],
                    done: _SetUp, timeout: float) -> None:
    """Step 3: the sync points in order, each followed by its checks."""
    fp = done.footprint
    for c in trace.of_kind("intr_notify"):
        unit, group, sync = c.args
        try:
            drv.wait_done(unit, group, timeout=timeout)
        except RegisterMapError as e:
            raise TraceError(trace.path, c.line, f"unknown interrupt {unit}_{group}: {e}") from e
        for ck in checks.get(sync, []):
            if ck.kind == "crc":
                expect = fp.finals.get(ck.line) if fp is not None else None
                pr = done.probes.get(ck.line)
                if pr is not None and expect is not None:
                    expect = np.where(pr.mask, pr.planted, expect)
                ck.actual = region_crc(transport, ck.port, ck.address, ck.size, where=(trace.path, ck.line),
                                       expect=expect, known=done.known.get(ck.port), probes=pr)


def _verdict(result: TraceResult) -> None:
    failed = [ck for ck in result.checks if not ck.passed]
    if failed:
        result.status = "failed"
        result.message = f"{len(failed)} of {len(result.checks)} checks failed"
    elif any(ck.vacuous and not ck.poisoned for ck in result.checks):
        result.message = "passed, but some checks were vacuous (rerun with poison to be sure)"


# ---- what the layers touch, found on the reference model ----------------------------------


def _written_masks(trace: Trace, profile: str, semantics: Semantics = "rtl") -> dict[int, np.ndarray] | None:
    """Which bytes of each checked region the layers write and never read, found on the
    reference model. A first run records which bytes the layers' DMA engines read (an input
    sharing the region, an in-place layer: never poisoned, on the port the check names);
    two more runs pre-fill the other bytes with two different patterns: bytes that come out
    equal were written by a layer, bytes that differ were left alone (gaps between lines,
    padding). None when the model cannot run the trace."""
    fp = footprint(trace, profile, semantics, masks=True)
    return None if fp is None else fp.masks


def footprint(trace: Trace, profile: str, semantics: Semantics = "rtl", *, masks: bool = True) -> Footprint | None:
    """What the trace's layers touch (:class:`~.lean.Footprint`), from runs of the trace on the
    reference model; ``masks`` adds the two pre-filled runs of :func:`_written_masks`. None when
    the model cannot run the trace."""
    from ..targets.model import ModelTarget

    def one(fill: tuple[int, dict[int, np.ndarray]] | None):
        with ModelTarget(profile, semantics=semantics, record_reads=True) as model:
            res = run_trace(trace, model, poison=False, _fill=fill, setup="full")
            if res.status not in ("passed", "failed"):
                return None
            crcs = [ck for ck in res.checks if ck.kind == "crc"]
            final = {ck.line: model.mem_read(ck.address, ck.size, port=ck.port) for ck in crcs}
            expected = {ck.line for ck in crcs if ck.actual == ck.expected}
            read = {ck.line: _read_mask(model.memories[ck.port], ck.address, ck.size) for ck in crcs}
            spans = {p: union_spans((a, a + n) for a, n in getattr(m, "reads", ())) for p, m in model.memories.items()}
            writes = {p: union_spans((a, a + n) for a, n in getattr(m, "writes", ())) for p, m in model.memories.items()}
            return final, read, spans, writes, expected

    first = one(None)
    if first is None:
        return None
    final, read, reads, writes, expected = first
    fp = Footprint(reads=reads, writes=writes,
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
