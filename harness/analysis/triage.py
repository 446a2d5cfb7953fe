"""Triage a failing trace: the target's output against the reference model's, element by
element, and a ranked hint of which registers could explain the difference.

:func:`diagnose_trace` takes a trace whose checks failed on some target (Verilator, a board, the
model under the other semantics, a model with an injected bug) and the bytes that target left in
each failing check's region. It runs the same trace on the reference model and explains every
failing region with :mod:`harness.targets.outputs` (count, first and worst element by (c, h, w), per
channel and per line, bytes outside the cube apart).

The suspect-register hint is a search, not a guess: each register field the failing layer
programs (configuration, not addresses, strides or sizes) is perturbed slightly — one up, one
down, a low bit or the top bit flipped, every value of a one- or two-bit field — and the trace
rerun on the model; a perturbation that reproduces the target's bytes *explains* the failure,
one that brings the model closer ranks higher. It is labelled a hint: it names registers whose
*decoding* could be wrong, and a wrong datapath elsewhere can look like one.

The search is bounded by a number of model runs (``runs``, :data:`HINT_RUNS` by default), never by
wall time: its answer is the same on an idle and on a loaded machine. The candidates come in a
fixed order (output side first), so a search that stops early has tried the same ones every time
and says so (``stopped_early``), with the flag that lets it go further.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from ...drivers.profiles import HardwareProfile, load_profile
from ...drivers.regmap import RegisterMapError
from ..targets.outputs import RegionDiff, cube_for, diff_region, layer_snapshots
from ..traces.parse import Trace, TraceCommand, parse_trace
from ..traces.player import run_trace
from ...semantics import Semantics

__all__ = ["Suspect", "TraceDiagnosis", "diagnose_trace", "model_regions", "rank_suspects", "trace_writes"]

#: register-name fragments that are geometry or plumbing, not datapath configuration
_NOT_DATAPATH = ("MASK", "INTR", "ADDR", "STRIDE", "SIZE", "CUBE", "OP_ENABLE", "POINTER", "RAM_TYPE", "DMA_CFG",
                 "PERF", "STATUS", "BANK", "ENTRY", "ENTRIES", "BATCH", "FLUSH", "RELEASE", "ATOMICS",
                 "WMB", "WGS", "LUT_ACCESS", "REUSE", "RLS", "MEAN", "PIXEL", "GRAIN", "CYA")


@dataclass
class Suspect:
    register: str  # BLOCK.REGISTER.FIELD
    programmed: int
    tried: int
    remaining_bytes: int  # differing bytes left when the model runs with ``tried``
    total_bytes: int

    @property
    def explains(self) -> bool:
        return self.remaining_bytes == 0

    def describe(self) -> str:
        if self.explains:
            how = "reproduces the target's output exactly"
        else:
            how = f"leaves {self.remaining_bytes} of {self.total_bytes} differing bytes"
        return f"{self.register}: programmed {self.programmed:#x}, as {self.tried:#x} the model {how}"


@dataclass
class TraceDiagnosis:
    trace: str
    profile: str
    regions: list[tuple[int, RegionDiff]] = field(default_factory=list)  # (check line, diff)
    suspects: list[Suspect] = field(default_factory=list)
    searched: int = 0
    candidates: int = 0  # perturbations there were to try
    seconds: float = 0.0
    note: str = ""

    @property
    def stopped_early(self) -> bool:
        return self.searched < self.candidates

    def summary(self, top: int = 3) -> str:
        lines = [f"model vs target, {self.trace} on {self.profile}:"]
        for line, d in self.regions:
            lines.append(f"  check at line {line}: {d.summary()}")
        if self.suspects:
            lines.append(f"  suspect registers (a hint from {self.searched} perturbed model runs, "
                         f"{self.seconds:.1f} s; not a verdict):")
            lines += [f"    {i + 1}. {s.describe()}" for i, s in enumerate(self.suspects[:top])]
        elif self.note:
            lines.append(f"  {self.note}")
        if self.stopped_early:
            lines.append(f"  the search stopped after {self.searched} of {self.candidates} perturbations "
                         f"(--hint-runs {self.candidates} tries them all)")
        return "\n".join(lines)


def trace_writes(trace: Trace, profile: HardwareProfile) -> list[tuple[int, int, TraceCommand]]:
    """(address, value, command) of every reg_write of the trace, in order."""
    rm = profile.regmap
    out = []
    for c in trace.of_kind("reg_write"):
        name = c.args[0]
        blk, _, reg = name.partition(".")
        blk = blk.removeprefix("NVDLA_")
        reg = reg.rsplit("_", 1)[0] if reg.endswith("_0") else reg
        try:
            out.append((rm.register(blk, reg).address, c.args[1], c))
        except RegisterMapError:
            continue
    return out


def model_regions(trace: Trace, profile: HardwareProfile, semantics: Semantics, bugs: list[str] | None = None,
                  replace: dict[int, int] | None = None) -> dict[int, np.ndarray] | None:  # fmt: skip
    """Final bytes of every check_crc region after running ``trace`` on the model (with reg_write
    values replaced per command line where ``replace`` says)."""
    from ..targets.model import ModelTarget

    if replace:
        cmds = [dataclasses.replace(c, args=(c.args[0], replace[c.line])) if c.line in replace else c
                for c in trace.commands]
        trace = dataclasses.replace(trace, commands=cmds)
    try:
        with ModelTarget(profile, semantics=semantics, bugs=bugs) as m:
            res = run_trace(trace, m, timeout=0.5)  # the model either completes at once or never
            if res.status not in ("passed", "failed"):
                return None
            return {c.line: np.asarray(m.mem_read(c.args[2], c.args[3], port=c.args[1]), dtype=np.uint8)
                    for c in trace.of_kind("check_crc")}
    except Exception:  # noqa: BLE001 - a perturbation the model refuses explains nothing
        return None


def _candidates(trace: Trace, profile: HardwareProfile) -> list[tuple[str, TraceCommand, int, int]]:
    """(BLOCK.REG.FIELD, command, programmed field value, perturbed register value)."""
    rm = profile.regmap
    seen: dict[int, TraceCommand] = {}
    for addr, _, c in trace_writes(trace, profile):
        seen[addr] = c  # the last write of each register is the one the layer runs with
    out = []
    for addr, c in seen.items():
        r = rm.by_address(addr)
        if r.block in ("GLB", "MCIF", "CVIF", "CFGROM") or any(k in r.name for k in _NOT_DATAPATH):
            continue
        value = c.args[1]
        for f in r.fields.values():
            if not f.writable or any(k in f.name for k in _NOT_DATAPATH):
                continue
            v = f.extract(value)
            mask = (1 << f.width) - 1
            tries = set(range(1 << f.width)) if f.width <= 2 else \
                {(v + 1) & mask, (v - 1) & mask, v ^ 1, v ^ 2, v ^ (1 << (f.width - 1))}
            tries.discard(v)
            out += [(f"{r.full_name}.{f.name}", c, v, f.insert(value, t)) for t in sorted(tries)]
    # output side first: a wrong late stage is the commoner, cheaper explanation, and a bounded
    # search should reach it (SDP/CDP/PDP converters before CACC before CMAC/CSC/CDMA)
    order = {b: i for i, b in enumerate(("SDP", "CDP", "PDP", "SDP_RDMA", "CDP_RDMA", "PDP_RDMA", "CACC",
                                         "CMAC_A", "CMAC_B", "CSC", "CDMA"))}
    out.sort(key=lambda x: order.get(x[0].split(".", 1)[0], len(order)))
    return out


#: model runs the suspect search makes unless told otherwise (load-independent: module docstring)
HINT_RUNS = 200


def rank_suspects(trace: Trace, actual: dict[int, np.ndarray], profile: HardwareProfile, *,
                  semantics: Semantics = "rtl", runs: int = HINT_RUNS) -> tuple[list[Suspect], int, int]:  # fmt: skip
    """Perturbation search (module docstring); returns suspects best first, the runs made and
    the candidates there were."""
    base = model_regions(trace, profile, semantics)
    if base is None:
        return [], 0, 0
    lines = [ln for ln in actual if ln in base]
    total = sum(int(np.count_nonzero(base[ln] != actual[ln])) for ln in lines)
    if total == 0:
        return [], 0, 0
    best: dict[str, Suspect] = {}
    made = 0
    candidates = _candidates(trace, profile)
    for name, cmd, v, newval in candidates[:max(runs, 0)]:
        got = model_regions(trace, profile, semantics, replace={cmd.line: newval})
        made += 1
        if got is None:
            continue
        left = sum(int(np.count_nonzero(got[ln] != actual[ln])) for ln in lines)
        if left < total and (name not in best or left < best[name].remaining_bytes):
            f = profile.regmap.field(name)
            best[name] = Suspect(name, v, f.extract(newval), left, total)
    return sorted(best.values(), key=lambda s: (s.remaining_bytes, s.register)), made, len(candidates)


def diagnose_trace(trace: Trace | str, actual: dict[int, np.ndarray], profile: HardwareProfile | str, *,
                   semantics: Semantics = "rtl", suspects: bool = True, runs: int = HINT_RUNS) -> TraceDiagnosis:  # fmt: skip
    """Explain the failing checks of ``trace``: ``actual`` maps a check_crc command's line to
    the bytes the target left in its region."""
    t = trace if isinstance(trace, Trace) else parse_trace(trace)
    prof = load_profile(profile)
    diag = TraceDiagnosis(t.name, prof.name)
    ref = model_regions(t, prof, semantics)
    if ref is None:
        diag.note = "the reference model cannot run this trace: no element-wise diff"
        return diag
    snaps = layer_snapshots([(a, v) for a, v, _ in trace_writes(t, prof)], prof)
    for c in t.of_kind("check_crc"):
        if c.line not in actual:
            continue
        cube = cube_for(snaps, prof, c.args[2], c.args[1])
        d = diff_region(ref[c.line], actual[c.line], c.args[2], cube)
        if not d.matches:
            diag.regions.append((c.line, d))
    if not diag.regions:
        diag.note = "the target's regions equal the model's: the expected CRC and the model disagree"
        return diag
    if suspects:
        t0 = time.monotonic()
        diag.suspects, diag.searched, diag.candidates = rank_suspects(t, actual, prof, semantics=semantics, runs=runs)
        diag.seconds = time.monotonic() - t0
        if not diag.suspects:
            diag.note = (f"no single-register perturbation of the {diag.searched} tried brings the model closer"
                         if diag.stopped_early else
                         f"no single-register perturbation brings the model closer (all {diag.searched} tried)")
    return diag
