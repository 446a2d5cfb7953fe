"""The lean memory set-up, for slow links (see :func:`~.player.run_trace`): only the bytes that
matter cross the link.

Of the memory set-up it sends the bytes the layers read (their :class:`Footprint`, found on the
reference model) and the checked regions, written once with the poison already applied; bytes a
board is known to hold already (:class:`~nvdla_hil.harness.targets.memory.KnownMemory`) are not
sent again. Vacuity is decided on the local image, so nothing is read before the run. A
verifying link gets probe words (:class:`~.checks.Probes`) planted in the checked bytes no layer
touches.
"""

from __future__ import annotations

import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from ..targets.memory import KnownMemory, poison_pattern, true_runs
from .checks import CheckResult, Probes, TraceResult
from .limits import ADDRESS_LIMIT
from .memory_setup import Fill, setup_image, span

__all__ = ["Footprint", "union_spans", "minus_spans", "spans_within", "plant_probes", "lean_setup"]


@dataclass
class Footprint:
    """What the trace's layers touch, found on the reference model: every byte range their DMA
    engines read and write, per port (merged, sorted); each checked region's bytes at the end
    of the run (``finals``, by check line; only where the model's CRC equals the check's, so
    they are the expected bytes); and (``masks``) which bytes of each checked region the layers
    write and never read."""

    reads: dict[str, list[tuple[int, int]]]
    writes: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    finals: dict[int, np.ndarray] = field(default_factory=dict)
    masks: dict[int, np.ndarray] | None = None


def union_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint, non-adjacent ``[lo, hi)`` spans covering the same bytes."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(sp for sp in spans if sp[1] > sp[0]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def minus_spans(spans: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` without the bytes of ``cut`` (both as from :func:`union_spans`)."""
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


def spans_within(spans: list[tuple[int, int]], lo: int, hi: int) -> Iterable[tuple[int, int]]:
    """The parts of ``spans`` (from :func:`union_spans`) inside ``[lo, hi)``."""
    i = max(bisect_right(spans, (lo, ADDRESS_LIMIT)) - 1, 0)
    while i < len(spans) and spans[i][0] < hi:
        a, b = max(spans[i][0], lo), min(spans[i][1], hi)
        if a < b:
            yield a, b
        i += 1


def plant_probes(here: list[CheckResult], lo: int, free: np.ndarray, target: np.ndarray, need: np.ndarray,
                 fp: Footprint, spacing: int, probes: dict[int, Probes], kmask: np.ndarray, kval: np.ndarray) -> None:
    """Plant probe words (see :class:`Probes`) in the ``free`` bytes of the checked span at
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
        probes[ck.line] = Probes(mask, values[off : off + ck.size].copy(), exp.copy())
    target[word] = values[word]
    need[word] = ~(kmask[word] & (kval[word] == values[word]))  # (still there from an earlier run)


Put = Callable[[str, int, "np.ndarray | Fill"], None]


def _send_reads(merged: list[tuple[str, int, np.ndarray | Fill]], wanted: dict[str, list[tuple[int, int]]],
                known: dict[str, KnownMemory], put: Put) -> int:
    """Send the set-up's bytes the layers read outside the checked regions (``wanted``), less
    what ``known`` says the board holds; returns the bytes not sent."""
    trusted = 0
    for port, addr, data in merged:
        km = known.get(port)
        for lo, hi in spans_within(wanted.get(port, []), addr, addr + span(data)):
            if km is None:
                put(port, lo, Fill(hi - lo, data.value) if isinstance(data, Fill) else data[lo - addr : hi - addr])
                continue
            buf = np.full(hi - lo, data.value, dtype=np.uint8) if isinstance(data, Fill) else data[lo - addr : hi - addr]
            kmask, kval = km.lookup(lo, hi - lo)
            runs = true_runs(~(kmask & (kval == buf)), slack=32)
            trusted += buf.size - sum(b - a for a, b in runs)
            for a, b in runs:
                put(port, lo + a, buf[a:b])
    return trusted


def _poisoned_need(here: list[CheckResult], lo: int, hi: int, port: str, target: np.ndarray, kmask: np.ndarray,
                   kval: np.ndarray, fp: Footprint, assume: bool, probe_spacing: int,
                   probes: dict[int, Probes] | None) -> np.ndarray:
    """Poison the bytes the layers write in ``target`` (one checked span at ``lo``) and return
    which bytes to send (module docstring of :func:`lean_setup`)."""
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
    for a, b in spans_within(fp.reads.get(port, []), lo, hi):
        read[a - lo : b - lo] = True
    if assume:
        need &= ~(~written & ~read & ~kmask)
    if probe_spacing and probes is not None:
        plant_probes(here, lo, ~written & ~read, target, need, fp, probe_spacing, probes, kmask, kval)
    return need


def lean_setup(merged: list[tuple[str, int, np.ndarray | Fill]], result: TraceResult, fp: Footprint,
               known: dict[str, KnownMemory], put: Put, poison: bool, assume: bool = True,
               probe_spacing: int = 0, probes: dict[int, Probes] | None = None) -> int:
    """The lean memory set-up (see :func:`~.player.run_trace`): send the bytes the layers read
    and the checked regions (poisoned where the layers write), less what ``known`` says the board
    already holds and (``assume``) the bytes of a checked region no layer reads or writes;
    decide vacuity on the resulting image. With ``probe_spacing``, plant a probe word that
    often in those bytes of each check with expected bytes (``probes`` gets them, by check
    line). Returns the bytes not sent."""
    crcs = [ck for ck in result.checks if ck.kind == "crc"]
    checked = {p: union_spans((ck.address, ck.address + ck.size) for ck in crcs if ck.port == p)
               for p in {ck.port for ck in crcs}}
    # the bytes the layers read, outside the checked regions (those go below)
    wanted = {p: minus_spans(sp, checked.get(p, [])) for p, sp in fp.reads.items()}
    trusted = _send_reads(merged, wanted, known, put)
    for port, spans in checked.items():
        km = known.get(port)
        for lo, hi in spans:
            here = [ck for ck in crcs if ck.port == port and lo <= ck.address < hi]
            target = setup_image(merged, port, lo, hi)  # the set-up's bytes, poisoned where the layers write
            if km is not None:
                kmask, kval = km.lookup(lo, hi - lo)
            else:
                kmask, kval = np.zeros(hi - lo, dtype=bool), np.zeros(hi - lo, dtype=np.uint8)
            need = ~(kmask & (kval == target))
            if poison:
                need = _poisoned_need(here, lo, hi, port, target, kmask, kval, fp, assume, probe_spacing, probes)
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
