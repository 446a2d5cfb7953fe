"""Running a case: a layer on a target (inputs written, outputs poisoned, registers, LUT and
convertors programmed, launched, read back and compared by the output's rule, statistics and
the status registers the layer sets compared), or a layout case's pack / unpack round trip.

Every layer result says how much its comparison could tell (:class:`Informativeness`): per
output the distinct values and the share at the type's extremes of its golden, whether it is one
value or entirely the poison byte (the layer wrote nothing), the status / statistics registers
compared. A *weak pass* passed while every compared output was a single value or all poison and
no status or statistics register with a non-zero golden was compared, or while the layer set a
result status (``SDP.D_STATUS`` of EW EQL mode) its golden does not hold."""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ...drivers.driver import NvdlaDriver
from ...drivers.precision import (
    RESULT_STATUSES,
    Statistics,
    StatisticsComparison,
    compare_statistics,
    compare_statuses,
    statistics_register,
)
from ...drivers.profiles import FeatureMissingError
from ...drivers.regmap import RegisterMapError, UnitNotPresentError
from ...drivers.transport import Transport, TransportError
from ..analysis.compare import CompareResult, InformationContent, compare, information_content
from ..refmodel.base import UnitNotModelled
from ..targets import TargetSpec
from ..targets.memory import KnownMemory, close_record, true_runs
from .format import DONE_UNIT, POISON_BYTE, Case, Surface
from .load import golden_statuses, layer_statuses, load_case
from .surface import pack_surface, unpack_surface


@dataclass
class OutputCheck:
    name: str
    rule: str
    passed: bool
    message: str
    result: CompareResult | None = None
    actual_crc: int | None = None


@dataclass(frozen=True)
class Informativeness:
    """How much a layer case's comparison could tell: each compared output's information
    content (:class:`~..analysis.compare.InformationContent` of its golden), the status and
    statistics registers compared (``BLOCK.REGISTER`` -> golden value), the statuses the layer
    sets that its golden lacks (not compared), and whether a pass would be *weak*: every
    compared output a single value or all poison and no register with a non-zero golden
    compared, or a result status (:data:`~...drivers.precision.RESULT_STATUSES`) not compared.
    ``why`` says it in a line."""

    outputs: dict[str, InformationContent]
    registers: dict[str, int]
    uncompared: tuple[str, ...]
    weak: bool
    why: str


@dataclass
class CaseResult:
    name: str
    status: str  # passed / failed / skipped / error
    checks: list[OutputCheck] = field(default_factory=list)
    statistics: StatisticsComparison | None = None
    message: str = ""
    duration: float = 0.0
    outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # raw images read back
    actual_statistics: Statistics | None = None
    trusted_bytes: int = 0  # bytes not sent because the board was known to hold them
    statuses: StatisticsComparison | None = None  # the golden's status registers against those read back
    actual_statuses: dict[str, int] | None = None  # the status registers the layer sets, read back
    informativeness: Informativeness | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def weak_pass(self) -> bool:
        """Passed, but the comparison could not tell this layer from one that computed nothing
        (:class:`Informativeness`)."""
        return self.passed and self.informativeness is not None and self.informativeness.weak

    def summary(self) -> str:
        head = f"{self.name}: {self.status.upper()} ({self.duration:.3f} s)"
        if self.message:
            head += f" - {self.message}"
        lines = [head]
        for c in self.checks:
            lines.append(f"  {c.name}: {'ok' if c.passed else 'FAIL'} {c.message}")
        if self.statistics is not None:
            lines.append("  statistics:" + ("" if self.statistics.passed else " MISMATCH"))
            lines += ["  " + ln for ln in self.statistics.format().splitlines()]
        if self.statuses is not None:
            lines.append("  status registers:" + ("" if self.statuses.passed else " MISMATCH"))
            lines += ["  " + ln for ln in self.statuses.format().splitlines()]
        if self.informativeness is not None and self.informativeness.weak:
            lines.append(f"  weak: {self.informativeness.why}")
        return "\n".join(lines)


def _cmp_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """(C, H, W) feature cubes are reported as (n, c, h, w) with n = 0."""
    return (1,) + shape if len(shape) == 3 else shape


def compare_surface(s: Surface, actual: np.ndarray) -> OutputCheck:
    if s.crc is not None:
        crc = zlib.crc32(actual.tobytes()) & 0xFFFFFFFF
        ok = crc == s.crc
        msg = f"crc {s.port}[{s.address:#x}+{s.nbytes:#x}] expected {s.crc:#010x} got {crc:#010x}"
        return OutputCheck(s.name, "crc", ok, msg, actual_crc=crc)
    assert s.packed is not None
    exp = unpack_surface(s.layout, s.packed, s.shape, s.dtype, s.params)
    act = unpack_surface(s.layout, actual, s.shape, s.dtype, s.params)
    try:
        res = compare(s.rule, exp, act, shape=_cmp_shape(s.shape), **s.rule_params)
    except (TypeError, ValueError) as e:
        return OutputCheck(s.name, s.rule, False, f"rule {s.rule} cannot compare this output: {e}")
    pad = padding_mask(s)
    act_u8 = np.ascontiguousarray(actual, dtype=np.uint8).reshape(-1)[: s.nbytes]
    diff = np.flatnonzero(pad & (s.packed != act_u8)) if pad.any() else np.zeros(0, dtype=np.intp)
    if diff.size:
        i = int(diff[0])
        msg = (f"{res.format()}; {diff.size} of {int(pad.sum())} channel-padding bytes differ (first at byte "
               f"{i:#x}: expected {int(s.packed[i]):#04x} got {int(act_u8[i]):#04x})")
        return OutputCheck(s.name, s.rule, False, msg, result=res)
    return OutputCheck(s.name, s.rule, res.passed, res.format(), result=res)


def padding_mask(s: Surface) -> np.ndarray:
    """``bool[nbytes]``: bytes of the surface's memory image that hold no element (channel
    padding lanes of an atom, line/surface gaps): packing an array whose every byte is 0xff
    and one of zeros tells them apart. Those bytes of a golden are compared byte for byte."""
    n = int(np.prod(s.shape, dtype=np.int64))
    ones = np.frombuffer(b"\xff" * (n * s.dtype.itemsize), dtype=s.dtype).reshape(s.shape)
    with np.errstate(all="ignore"):
        full = pack_surface(s.layout, ones, s.params)
        zero = pack_surface(s.layout, np.zeros(s.shape, dtype=s.dtype), s.params)
    return full == zero


def _target_kind(transport: Transport) -> str:
    kind = getattr(transport, "kind", None)
    if isinstance(kind, str):
        return kind
    from ..targets.model import ModelTarget

    return "model" if isinstance(transport, ModelTarget) else "rtl"


def _overlaps(a: Surface, b: Surface) -> bool:
    return a.port == b.port and a.address < b.address + b.nbytes and b.address < a.address + a.nbytes


def _exact_golden(s: Surface) -> np.ndarray | None:
    """The output's golden bytes when the check is byte-exact (else None)."""
    return s.packed if s.rule == "bitexact" and s.packed is not None and s.packed.size == s.nbytes else None


def _put(transport: Transport, s: Surface, data: np.ndarray, need: np.ndarray | None, known: KnownMemory | None) -> int:
    """Write ``data`` at the surface, only the ``need`` runs; ``known`` learns it. Returns the bytes not sent."""
    runs = [(0, data.size)] if need is None else true_runs(need, slack=32)
    for a, b in runs:
        transport.mem_write(s.address + a, data[a:b], port=s.port)
        if known is not None:
            known.learn(s.address + a, data[a:b])
    return data.size - sum(b - a for a, b in runs)


def execute_case(case: Case, transport: Transport, driver: NvdlaDriver | None = None, *,
                 timeout: float = 30.0, poison: bool = True) -> tuple[dict[str, np.ndarray], Statistics | None]:
    """Run a layer case and return the raw output images and the statistics read back.
    Outputs are poisoned first (every byte :data:`POISON_BYTE`: the goldens of bytes a layer
    leaves alone hold it) except where they overlap an input. Raises on transport / register / feature errors (``run_case``
    turns them into a status)."""
    rb = _execute_case(case, transport, driver, timeout=timeout, poison=poison)
    return rb.outputs, rb.statistics


@dataclass
class LayerReadback:
    """What :func:`execute_layer` read back after a layer: the raw output images, the unit's
    statistics (when the case has a ``statistics`` golden), the status registers the layer sets
    (:func:`~.load.layer_statuses`, and any other the golden's ``statuses`` holds; ``BLOCK.REGISTER`` ->
    field value), and the input / output
    bytes not sent because the board was known to hold them."""

    outputs: dict[str, np.ndarray]
    statistics: Statistics | None
    statuses: dict[str, int]
    trusted: int = 0


def execute_layer(case: Case, transport: Transport, driver: NvdlaDriver | None = None, *,
                  timeout: float = 30.0, poison: bool = True) -> LayerReadback:
    """:func:`execute_case`, also reading back the status registers the layer sets (what a
    golden's ``statuses`` records: a generator or ``fuzz --keep`` writes them from here)."""
    return _execute_case(case, transport, driver, timeout=timeout, poison=poison)


def _execute_case(case: Case, transport: Transport, driver: NvdlaDriver | None = None, *,
                  timeout: float = 30.0, poison: bool = True,
                  known: dict[str, KnownMemory] | None = None) -> LayerReadback:
    """:func:`execute_layer`, less what ``known`` (what the board is known to hold; see
    :func:`~nvdla_hil.harness.traces.run_trace`) says the board already holds: input bytes
    already there and output bytes already unlike a byte-exact golden are not sent; also
    returns how many bytes that saved."""
    drv = driver or NvdlaDriver(transport)
    assert case.unit is not None
    unit = DONE_UNIT[case.unit]
    known = known or {}
    trusted = 0
    for s in case.inputs:
        if s.packed is None:
            raise ValueError(f"{case.name}: input {s.name!r} has no packed image")
        km = known.get(s.port)
        need = None
        if km is not None:
            kmask, kval = km.lookup(s.address, s.nbytes)
            need = ~(kmask & (kval == s.packed))
        trusted += _put(transport, s, s.packed, need, km)
    if poison:
        for s in case.outputs:
            if any(_overlaps(s, i) for i in case.inputs):
                continue
            km = known.get(s.port)
            data = np.full(s.nbytes, POISON_BYTE, dtype=np.uint8)
            need = None
            if km is not None:
                kmask, kval = km.lookup(s.address, s.nbytes)
                golden = _exact_golden(s)
                # a byte the board holds unlike its golden fails unless the layer writes it; a
                # golden byte equal to the poison may be one the layer leaves alone: poisoned
                unlike = (kmask & (kval != golden) & (golden != POISON_BYTE) if golden is not None
                          else np.zeros(s.nbytes, dtype=bool))
                need = ~(unlike | (kmask & (kval == data)))
            trusted += _put(transport, s, data, need, km)
    for s in case.outputs:  # the layer writes them: unknown until read back
        if s.port in known:
            known[s.port].forget(s.address, s.nbytes)
    # each engine is programmed in the group it runs next, its own consumer group: after a reset
    # all are 0, but a layer that leaves an engine out (a flying input leaves its RDMA idle) parts
    # them, and the hardware runs each engine's own group (NVDLA's firmware tracks them apart)
    groups = {b: drv.consumer_group(b) for b in case.launch}
    group = groups[unit] if unit in groups else drv.consumer_group(unit)
    for b in case.launch:
        drv.select_group(b, groups[b])
    drv.write_registers((r.name, r.value) for r in case.registers)
    pc = drv.precision
    if case.lut is not None:
        if case.lut.le is not None:
            pc.load_lut(case.lut.unit, "LE", case.lut.le)
        if case.lut.lo is not None:
            pc.load_lut(case.lut.unit, "LO", case.lut.lo)
        pc.configure_lut(case.lut.unit, case.lut.config)
    for name, setting in case.convertors.items():
        pc.set_convertor(name, setting)
    if case.statistics is not None:
        pc.enable_statistics(unit)
    if "CDMA" in case.launch:  # a convolution, whichever unit's done ends the layer (CONV -> PDP)
        _wait_cbuf_flushed(drv, timeout)
    drv.launch(*case.launch)
    drv.wait_done(unit, group, timeout=timeout)
    if unit != "PDP" and "PDP" in case.launch:  # SDP/CONV -> PDP on the fly: PDP still writes after SDP's done
        drv.wait_done("PDP", groups["PDP"], timeout=timeout)
    outputs = {}
    for s in case.outputs:
        golden = _exact_golden(s)
        if golden is None:
            outputs[s.name] = transport.mem_read(s.address, s.nbytes, port=s.port)
        else:
            outputs[s.name] = transport.mem_read(s.address, s.nbytes, port=s.port, expect=golden)
        if s.port in known:
            known[s.port].learn(s.address, outputs[s.name])
    stats = pc.read_statistics(unit, group) if case.statistics is not None else None
    sts = list(layer_statuses(case))
    sts += [n for n in golden_statuses(case) or {} if n not in sts]  # a golden's every status is read back
    statuses = pc.read_statuses(sts, {**groups, unit: group}) if sts else {}
    return LayerReadback(outputs, stats, statuses, trusted)


def _wait_cbuf_flushed(drv: NvdlaDriver, timeout: float) -> None:
    """A convolution may start only once CBUF is flushed after reset: CDMA writes every CBUF
    entry once after ``rstn`` (``NV_NVDLA_CDMA_cvt.v`` ``dat_cbuf_flush_idx``, thousands of
    cycles), and a layer launched before ``CDMA.S_CBUF_FLUSH_STATUS.FLUSH_DONE`` reads stale or
    overwritten CBUF data. NVDLA's dc_* traces and firmware (``conv.c`` ``dla_conv_enable``) poll
    it before the first ``D_OP_ENABLE``."""
    deadline = time.monotonic() + timeout
    polls = 0
    while not drv.read_field(("CDMA", "S_CBUF_FLUSH_STATUS"), "FLUSH_DONE"):
        if time.monotonic() >= deadline:
            raise TransportError(f"CDMA.S_CBUF_FLUSH_STATUS.FLUSH_DONE still 0 after {timeout:g} s")
        polls += 1
        if polls > 1:  # the model is done on its second read: poll once more before sleeping
            time.sleep(0.001)


def output_information(s: Surface, actual: np.ndarray | None = None) -> InformationContent | None:
    """Information content of output ``s``'s golden (a CRC-only golden: of ``actual``, the image
    read back, which is the golden when the CRC matched); None when there is nothing to read."""
    image = s.packed if s.packed is not None else actual
    if image is None:
        return None
    image = np.ascontiguousarray(image, dtype=np.uint8).reshape(-1)[: s.nbytes]
    try:
        values = unpack_surface(s.layout, image, s.shape, s.dtype, s.params)
    except ValueError:
        return None
    return information_content(values, image, poison=POISON_BYTE)


def informativeness(case: Case, result: CaseResult, set_statuses: set[str] | None = None) -> Informativeness:
    """:class:`Informativeness` of a layer case's comparison (``result``): ``set_statuses`` are
    the status registers the layer sets (default: :func:`~.load.layer_statuses`)."""
    if set_statuses is None:
        set_statuses = set(layer_statuses(case))
    outs: dict[str, InformationContent] = {}
    for s in case.outputs:
        info = output_information(s, result.outputs.get(s.name))
        if info is not None:
            outs[s.name] = info
    regs: dict[str, int] = {}
    if result.statistics is not None and result.actual_statistics is not None:
        blk = result.actual_statistics.block
        for k, v in {**result.statistics.matched, **{k: e for k, (e, _) in result.statistics.mismatched.items()}}.items():
            regs[statistics_register(blk, k)] = int(v)
    if result.statuses is not None:
        regs.update(result.statuses.matched)
        regs.update({k: e for k, (e, _) in result.statuses.mismatched.items()})
    golden = golden_statuses(case) or {}
    uncompared = tuple(sorted(n for n in set_statuses if n not in golden))
    result_missing = [n for n in uncompared if n in RESULT_STATUSES]
    weak_outputs = bool(outs) and all(i.single_value or i.all_poison for i in outs.values())
    nonzero = {k: v for k, v in regs.items() if v}
    weak = (weak_outputs and not nonzero) or bool(result_missing)
    parts = []
    one = len(outs) == 1
    for name, i in outs.items():
        parts.append(i.describe() if one else f"{name}: {i.describe()}")
    if nonzero:
        parts.append("compared " + ", ".join(f"{k} = {v}" for k, v in sorted(nonzero.items())))
    elif regs:
        parts.append(f"compared {len(regs)} status / statistics registers, all 0 in the golden")
    else:
        parts.append("no status or statistics register compared")
    if result_missing:
        parts.append(", ".join(result_missing) + " set by the layer but not in the golden: not compared")
    return Informativeness(outs, regs, uncompared, weak, "; ".join(parts))


def run_layout_case(case: Case) -> CaseResult:
    """Pack the array and compare with the packed blob; unpack the blob and compare with the array."""
    t0 = time.monotonic()
    lp = case.layout
    assert lp is not None
    result = CaseResult(case.name, "passed")
    try:
        got = pack_surface(lp.layout, lp.array, lp.params)
        res = compare("bitexact", lp.packed, got, shape=(lp.packed.size,))
        result.checks.append(OutputCheck("pack", "bitexact", res.passed, "packed bytes (byte offsets): " + res.format(), res))
        back = unpack_surface(lp.layout, lp.packed, lp.shape, lp.dtype, lp.params)
        res = compare("bitexact", lp.array, back, shape=_cmp_shape(lp.shape))
        result.checks.append(OutputCheck("unpack", "bitexact", res.passed, res.format(), res))
    except ValueError as e:
        result.status, result.message = "error", f"{type(e).__name__}: {e}"
    if result.status == "passed" and not all(c.passed for c in result.checks):
        result.status = "failed"
        result.message = f"{sum(not c.passed for c in result.checks)} of {len(result.checks)} checks failed"
    result.duration = time.monotonic() - t0
    return result


def spec_for_case(spec: TargetSpec, case: Case) -> TargetSpec:
    """The target a case runs on: a golden kept from NVDLA's C model (``provenance.semantics:
    cmod``, from ``fuzz --keep``) is what the model computes in that semantics, so the model target
    follows the case's semantics (never skipped: a run would otherwise test none of them)."""
    sem = case.provenance.get("semantics")
    if spec.kind == "model" and sem and sem != spec.semantics:
        return replace(spec, semantics=sem)
    return spec


def run_case(case: Case | str | Path, transport: Transport | None = None, driver: NvdlaDriver | None = None, *,
             target_kind: str | None = None, timeout: float = 30.0, poison: bool = True) -> CaseResult:
    """Run one case on an open transport (layout cases need none) and compare every output
    with the golden by the case's rule, and the statistics when the case has them."""
    if not isinstance(case, Case):
        case = load_case(case)
    if case.kind == "layout":
        return run_layout_case(case)
    if transport is None:
        raise ValueError(f"{case.name}: a layer case needs a transport")
    t0 = time.monotonic()
    known: dict[str, KnownMemory] = getattr(transport, "known_memory", None) or {}
    result = _run_layer_case(case, transport, driver, target_kind, timeout, poison, known)
    if known and result.status == "failed" and result.trusted_bytes:
        first = result
        for km in known.values():
            km.clear()
        try:
            transport.reset()
        except TransportError as e:
            first.message += f" (it trusted {first.trusted_bytes} bytes already on the board; no rerun without that: {e})"
            result = first
        else:
            result = _run_layer_case(case, transport, driver, target_kind, timeout, poison, known)
            rerun = (f"rerun without the board-memory record (the first run trusted {first.trusted_bytes} bytes "
                     f"already on the board and {first.message or 'failed'})")
            result.message = "; ".join(m for m in (result.message, rerun) if m)
    close_record(transport, known, result.status == "passed")
    result.duration = time.monotonic() - t0
    return result


def _run_layer_case(case: Case, transport: Transport, driver: NvdlaDriver | None, target_kind: str | None,
                    timeout: float, poison: bool, known: dict[str, KnownMemory]) -> CaseResult:
    result = CaseResult(case.name, "passed")
    try:
        rb = _execute_case(case, transport, driver, timeout=timeout, poison=poison, known=known)
        outputs, stats, result.trusted_bytes = rb.outputs, rb.statistics, rb.trusted
        result.outputs = outputs
        kind = target_kind or _target_kind(transport)
        for s in case.outputs:
            result.checks.append(compare_surface(s, outputs[s.name]))
        if case.statistics is not None and stats is not None:
            result.actual_statistics = stats
            expected = Statistics(block=stats.block, group=stats.group, **case.statistics)
            result.statistics = compare_statistics(expected, stats, target_kind=kind)
        result.actual_statuses = dict(rb.statuses) if rb.statuses else None
        golden_sts = golden_statuses(case)
        if golden_sts:
            result.statuses = compare_statuses(golden_sts, rb.statuses, target_kind=kind)
        failed = [c for c in result.checks if not c.passed]
        bad_stats = result.statistics.mismatched if result.statistics is not None else {}
        bad_sts = result.statuses.mismatched if result.statuses is not None else {}
        if failed or bad_stats or bad_sts:
            result.status = "failed"
            parts = []
            if failed:
                parts.append(f"{len(failed)} of {len(result.checks)} outputs differ")
            if bad_stats:
                parts.append(f"{len(bad_stats)} statistics counters differ")
            if bad_sts:  # named with both values: the outputs may be all poison (EQL) and say nothing
                parts.append("status registers differ: " + ", ".join(
                    f"{n} expected {e} got {a}" for n, (e, a) in bad_sts.items()))
            result.message = "; ".join(parts)
        result.informativeness = informativeness(case, result)
    except (UnitNotModelled, FeatureMissingError, UnitNotPresentError) as e:
        result.status, result.message = "skipped", f"{type(e).__name__}: {e}"
    except (TransportError, RegisterMapError, TimeoutError) as e:
        result.status, result.message = "error", f"{type(e).__name__}: {e}"
    return result
