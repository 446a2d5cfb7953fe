"""How long a layer may take: its work, estimated from the registers that program it.

A layer that never raises its interrupt must cost bounded time. On a simulator a flat limit
(600 s) is wrong both ways: far too long for an 8x8x32 SDP layer, maybe too short for a big
convolution. :func:`estimate_work` reads the registers a trace or vector writes and, for each
launched layer, counts the elements each engine processes and divides by the profile's
throughput (``profile.throughput``: SDP/CDP/PDP elements per cycle; the MAC array's atomic C x
K for convolution), adds the DMA traffic (bytes / memory atom) and a fixed per-layer latency.
:func:`layer_budget` turns the expected cycles into seconds on a target: ``factor`` x cycles /
the target's simulated cycles per second, never below ``floor``. Targets that run layers in
(close to) no time - the model, a board - keep their own layer timeout; the estimate is still
reported. A timeout message built with :func:`explain_timeout` says how long the test waited
and why (expected cycles, factor, rate, floor).

Targets may override the defaults with attributes: ``cycles_per_second`` (a simulator's
measured speed), ``layer_timeout_factor``, ``layer_timeout_floor``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...drivers.profiles import HardwareProfile
from ...drivers.regmap import RegisterMapError
from ...drivers.transport import Transport

__all__ = [
    "DEFAULT_FACTOR",
    "DEFAULT_FLOOR",
    "LAYER_LATENCY_CYCLES",
    "SIM_CYCLES_PER_SECOND",
    "LayerBudget",
    "Workload",
    "case_budget",
    "estimate_work",
    "explain_timeout",
    "layer_budget",
    "layer_timeout",
    "timeout_terms",
    "trace_budget",
]

#: the speed a Verilator target declares (``cycles_per_second``; it does not measure its own):
#: nv_small simulates 150-200k cycles per CPU-second (README); far less leaves room for load
SIM_CYCLES_PER_SECOND = 10_000.0
#: how many times the estimate a layer may take before it counts as hung
DEFAULT_FACTOR = 10.0
#: never wait less than this on a simulator (start-up, reset, Python/cocotb overhead)
DEFAULT_FLOOR = 60.0
#: fixed cycles per layer (pipeline fill, DMA latency, interrupt)
LAYER_LATENCY_CYCLES = 20_000


@dataclass
class Workload:
    """Expected cycles of the layers a register sequence launches, per engine."""

    cycles: int = 0
    parts: list[str] = field(default_factory=list)
    layers: int = 0

    def add(self, engine: str, cycles: float, detail: str) -> None:
        c = int(cycles) + LAYER_LATENCY_CYCLES
        self.cycles += c
        self.layers += 1
        self.parts.append(f"{engine}: {detail} -> ~{c} cycles")

    def detail(self) -> str:
        return "; ".join(self.parts) if self.parts else "no layer recognised"


def _field(reg: Any, value: int, name: str) -> int:
    f = reg.fields.get(name) if reg is not None else None
    return int(f.extract(value)) if f is not None else 0


class _Regs:
    """Last value written to each register, with the register objects (for field extraction)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], tuple[Any, int]] = {}

    def set(self, reg: Any, value: int) -> None:
        self.values[(reg.block, reg.name)] = (reg, int(value))

    def get(self, block: str, name: str, fieldname: str, plus_one: bool = True) -> int:
        reg, v = self.values.get((block, name), (None, 0))
        return _field(reg, v, fieldname) + (1 if plus_one else 0)

    def has(self, block: str, name: str) -> bool:
        return (block, name) in self.values


def _engine(w: Workload, block: str, regs: _Regs, profile: HardwareProfile) -> None:
    thr = profile.throughput
    atom = max(1, profile.atom_bytes)

    def per_cycle(key: str) -> int:
        return max(1, int(thr.get(key, 1) or 1))

    if block == "SDP":
        w_, h, c = (regs.get("SDP", f"D_DATA_CUBE_{d}", d) for d in ("WIDTH", "HEIGHT", "CHANNEL"))
        n = w_ * h * c
        t = per_cycle("sdp_bs")
        w.add("SDP", n / t + 2 * n / atom, f"{w_}x{h}x{c} = {n} elements at {t}/cycle (sdp_bs) + DMA {2 * n}/{atom} B")
    elif block == "CDP":
        w_, h, c = (regs.get("CDP_RDMA", f"D_DATA_CUBE_{d}", d) for d in ("WIDTH", "HEIGHT", "CHANNEL"))
        n = w_ * h * c
        t = per_cycle("cdp")
        w.add("CDP", n / t + 2 * n / atom, f"{w_}x{h}x{c} = {n} elements at {t}/cycle (cdp) + DMA {2 * n}/{atom} B")
    elif block == "PDP":
        w_, h, c = (regs.get("PDP", f"D_DATA_CUBE_IN_{d}", f"CUBE_IN_{d}") for d in ("WIDTH", "HEIGHT", "CHANNEL"))
        n = w_ * h * c
        t = per_cycle("pdp")
        w.add("PDP", n / t + 2 * n / atom, f"{w_}x{h}x{c} = {n} input elements at {t}/cycle (pdp) + DMA {2 * n}/{atom} B")
    elif block == "CACC":
        ow = regs.get("CACC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH")
        oh = regs.get("CACC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT")
        ok = regs.get("CACC", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL")
        kw = regs.get("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT")
        kh = regs.get("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT")
        kc = regs.get("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT")
        macs = ow * oh * ok * kw * kh * kc
        mac_c = max(1, profile.mac_atomic_c)
        mac_k = max(1, profile.mac_atomic_k)
        iw = regs.get("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH")
        ih = regs.get("CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT")
        ic = regs.get("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL")
        wbytes = regs.get("CDMA", "D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL") * regs.get("CDMA", "D_WEIGHT_SIZE_1", "WEIGHT_KERNEL")
        dma = iw * ih * ic + wbytes + ow * oh * ok
        w.add("CONV", macs / (mac_c * mac_k) + dma / atom,
              f"{ow}x{oh}x{ok} outputs x {kw}x{kh}x{kc} kernel = {macs} MACs at {mac_c}x{mac_k}/cycle + DMA {dma}/{atom} B")


_ENGINES = ("SDP", "CDP", "PDP", "CACC")
_DIMS = {"SDP": ("SDP", "D_DATA_CUBE_WIDTH"), "CDP": ("CDP_RDMA", "D_DATA_CUBE_WIDTH"),
         "PDP": ("PDP", "D_DATA_CUBE_IN_WIDTH"), "CACC": ("CACC", "D_DATAOUT_SIZE_0")}


def estimate_work(writes: Iterable[tuple[Any, int]], profile: HardwareProfile) -> Workload:
    """Expected cycles of the layers launched by ``writes`` (``(Register, value)`` in order).

    A layer is counted when its engine's ``D_OP_ENABLE`` is written with 1 (SDP, CDP, PDP, and
    CACC for a convolution), with the register values written before it. A sequence that
    launches nothing (a vector's settings; the runner launches) counts every engine it sizes."""
    regs = _Regs()
    w = Workload()
    launched = False
    for reg, value in writes:
        regs.set(reg, value)
        if reg.name == "D_OP_ENABLE" and int(value) & 1 and reg.block in _ENGINES:
            launched = True
            _engine(w, reg.block, regs, profile)
    if not launched:
        for eng in _ENGINES:
            if regs.has(*_DIMS[eng]):
                _engine(w, eng, regs, profile)
    return w


@dataclass(frozen=True)
class LayerBudget:
    """How long to wait for each interrupt, and why."""

    seconds: float
    cycles: int
    detail: str
    factor: float
    floor: float
    rate: float | None  # simulated cycles per second; None: the target's own timeout applies
    source: str = ""  # set when the seconds were given, e.g. "--timeout"

    def describe(self) -> str:
        if self.source:
            return f"{self.seconds:g} s, given by {self.source} (expected work ~{self.cycles} cycles)"
        if self.rate:
            return (f"{self.seconds:.1f} s = max(floor {self.floor:g} s, factor {self.factor:g} x "
                    f"{self.cycles} expected cycles / {self.rate:g} cycles/s)")
        return f"{self.seconds:g} s, the target's layer timeout (expected work ~{self.cycles} cycles)"


def layer_budget(work: Workload, target: Transport, *, factor: float | None = None, floor: float | None = None) -> LayerBudget:
    """Seconds to wait for one interrupt of ``work`` on ``target``."""
    own_factor, own_floor = timeout_terms(target)
    factor = float(factor if factor is not None else own_factor)
    floor = float(floor if floor is not None else own_floor)
    rate = target.cycles_per_second
    if not rate:
        return LayerBudget(layer_timeout(target), work.cycles, work.detail(), factor, floor, None)
    rate = float(rate)
    seconds = max(floor, factor * work.cycles / rate)
    return LayerBudget(seconds, work.cycles, work.detail(), factor, floor, rate)


def trace_budget(trace: Any, driver: Any, target: Any, **kw: float) -> LayerBudget:
    """:func:`layer_budget` for an NVDLA trace (its ``reg_write`` lines, through the driver's map)."""
    writes = []
    for c in trace.of_kind("reg_write"):
        try:
            writes.append((driver.register(c.args[0]), c.args[1]))
        except RegisterMapError:
            continue  # the player reports it with file and line
    return layer_budget(estimate_work(writes, driver.profile), target, **kw)


def case_budget(case: Any, driver: Any, target: Any, **kw: float) -> LayerBudget:
    """:func:`layer_budget` for a packed-vector case (its register settings)."""
    writes = []
    for r in case.registers:
        try:
            writes.append((driver.register(r.name), r.value))
        except RegisterMapError:
            continue
    return layer_budget(estimate_work(writes, driver.profile), target, **kw)


_TIMEOUT_MARKERS = ("no done interrupt", "LayerTimeoutError", "TransportTimeoutError", "waited")


def explain_timeout(message: str | None, budget: LayerBudget) -> str | None:
    """For a result that failed by timeout: how long the test waited and why; else None."""
    if not message or not any(m in message for m in _TIMEOUT_MARKERS):
        return None
    return (f"hung layer: waited {budget.seconds:.1f} s for the done interrupt; the bound is {budget.describe()}; "
            f"estimate: {budget.detail}")


def timeout_terms(target: Transport) -> tuple[float, float]:
    """The factor and floor of ``target``'s layer budgets: its own, else :data:`DEFAULT_FACTOR`
    and :data:`DEFAULT_FLOOR`."""
    factor, floor = target.layer_timeout_factor, target.layer_timeout_floor
    return (DEFAULT_FACTOR if factor is None else factor), (DEFAULT_FLOOR if floor is None else floor)


def layer_timeout(target: Transport) -> float:
    """Seconds one layer may take on ``target``: 30 s unless the target says otherwise (a
    Verilator simulation of a large layer needs minutes)."""
    return float(target.suggested_layer_timeout)
