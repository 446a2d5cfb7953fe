"""Shrink a failing trace or packed vector to the smallest case that still fails the same way.

A failure is reproduced on a *target* (the model with an injected bug, a board, the RTL) and
compared with the reference model's golden. The minimiser works on one memory-to-memory layer
of SDP, CDP or PDP (the units a packed vector can hold):

1. **convert** — a trace's layer becomes a :class:`LayerState`: the final value of every
   register of the layer's blocks, the LUT tables and configuration as the trace programmed
   them, the main input cube read back as a (C, H, W) array, and every other byte a DMA engine
   read (BS/BN/EW operands) as raw memory; a packed vector converts the same way.
2. **shrink** — each of channels, lines (height) and width is cut by bisection to the smallest
   value that still fails; sizes are rewritten in every block that holds them (PDP: output
   size from the kernel, stride and padding), line and surface strides recomputed packed, the
   input cube cropped and re-packed. Then each datapath register is reset to its reset value
   where the failure survives, and LUT entries are zeroed in blocks where it survives
   (fewer entries in use).
3. **save** — the smallest failing state is written as a packed vector (``testvectors/README.md``)
   whose golden comes from the reference model, operand memory trimmed to the bytes the layer
   reads; the saved case is re-run on the target to prove it fails the same way.

*The same way* (:class:`Signature`): the same checks fail, and the first differing element
belongs to the same unit's output.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers.driver import NvdlaDriver
from ...drivers.precision import LutConfig
from ...drivers.profiles import HardwareProfile, load_profile
from ...drivers.regmap import RegisterMapError
from ...drivers.transport import Transport
from ..targets.memory import RecordingMemory
from ..traces.dat import read_dat
from ..traces.needs import trace_features
from ..traces.parse import Trace, parse_trace
from ..traces.player import run_trace
from ..vectors.format import FORMAT, Case, Hex
from ..vectors.load import load_case
from ..vectors.run import execute_case, run_case
from ..vectors.surface import packed_size, unpack_surface
from ..vectors.write import write_case
from ...semantics import Semantics

__all__ = ["LayerState", "Signature", "MinimizeResult", "MinimizeError", "trace_to_state", "case_to_state",
           "state_to_case", "minimize", "minimize_path", "trace_data_bytes", "case_data_bytes", "trace_profile"]

RESERVED = ("S_POINTER", "D_OP_ENABLE", "S_LUT_ACCESS_CFG", "S_LUT_ACCESS_DATA")
#: registers the shrinking owns (sizes, addresses, strides, ports, precision): never reset
_GEOMETRY = ("CUBE", "ADDR", "STRIDE", "RAM_TYPE", "RAM_CFG", "DMA_CFG", "FORMAT", "FEATURE_MODE", "PARTIAL_WIDTH",
             "OPERATION_MODE", "S_LUT_", "PERF", "STATUS", "INTR", "MASK", "BATCH", "FLYING")


class MinimizeError(ValueError):
    """The case cannot be minimised (not a single SDP/CDP/PDP layer, or it does not fail)."""


@dataclass(frozen=True)
class Signature:
    """How a case fails: the failing checks and the unit of the first differing element."""

    checks: tuple[str, ...]
    unit: str

    def describe(self) -> str:
        return f"{', '.join(self.checks)} differ ({self.unit} output)"


# ---- per-unit geometry ------------------------------------------------------------------------

_UNITS: dict[str, dict[str, Any]] = {
    "SDP": {"rdma": "SDP_RDMA", "dims": [("SDP_RDMA", "D_DATA_CUBE_{}", "{}"), ("SDP", "D_DATA_CUBE_{}", "{}")],
            "src": ("SDP_RDMA", "D_SRC_", ("D_SRC_DMA_CFG", "SRC_RAM_TYPE")),
            "dst": ("SDP", "D_DST_", ("D_DST_DMA_CFG", "DST_RAM_TYPE")),
            "in16": ("SDP_RDMA", "D_FEATURE_MODE_CFG", "IN_PRECISION"), "out16": ("SDP", "D_DATA_FORMAT", "OUT_PRECISION")},
    "CDP": {"rdma": "CDP_RDMA", "dims": [("CDP_RDMA", "D_DATA_CUBE_{}", "{}")],
            "src": ("CDP_RDMA", "D_SRC_", ("D_SRC_DMA_CFG", "SRC_RAM_TYPE")),
            "dst": ("CDP", "D_DST_", ("D_DST_DMA_CFG", "DST_RAM_TYPE")),
            "in16": ("CDP_RDMA", "D_DATA_FORMAT", "INPUT_DATA"), "out16": ("CDP_RDMA", "D_DATA_FORMAT", "INPUT_DATA")},
    "PDP": {"rdma": "PDP_RDMA", "dims": [("PDP_RDMA", "D_DATA_CUBE_IN_{}", "CUBE_IN_{}"), ("PDP", "D_DATA_CUBE_IN_{}", "CUBE_IN_{}")],
            "src": ("PDP_RDMA", "D_SRC_", ("D_SRC_RAM_CFG", "SRC_RAM_TYPE")),
            "dst": ("PDP", "D_DST_", ("D_DST_RAM_CFG", "DST_RAM_TYPE")),
            "in16": ("PDP_RDMA", "D_DATA_FORMAT", "INPUT_DATA"), "out16": ("PDP", "D_DATA_FORMAT", "INPUT_DATA")},
}


@dataclass
class LayerState:
    """One layer as the minimiser edits it."""

    profile: str
    unit: str
    launch: tuple[str, ...]
    regs: dict[str, int]  # BLOCK.REG -> value (final, in first-write order)
    x: np.ndarray  # main input (C, H, W)
    in_addr: int
    in_port: str
    extra: list[tuple[str, int, np.ndarray]] = field(default_factory=list)  # other bytes the layer reads
    lut: tuple[str, LutConfig, np.ndarray, np.ndarray] | None = None  # (unit, config, le, lo)
    name: str = "case"

    def copy(self, **kw: Any) -> LayerState:
        new = dataclasses.replace(self, regs=dict(self.regs), extra=list(self.extra), **kw)
        return new

    # field access
    def _reg(self, name: str):  # noqa: ANN202
        return load_profile(self.profile).regmap.register(name)

    def get(self, block: str, reg: str, fld: str) -> int:
        r = self._reg(f"{block}.{reg}")
        return r.field(fld).extract(self.regs.get(r.full_name, r.reset))

    def put(self, block: str, reg: str, fld: str, value: int) -> None:
        r = self._reg(f"{block}.{reg}")
        self.regs[r.full_name] = r.field(fld).insert(self.regs.get(r.full_name, r.reset), int(value))

    def has(self, block: str, reg: str) -> bool:
        try:
            self._reg(f"{block}.{reg}")
            return True
        except RegisterMapError:
            return False

    @property
    def dims(self) -> tuple[int, int, int]:
        return tuple(int(v) for v in self.x.shape)  # type: ignore[return-value]  # x is (C, H, W)


def _bpe(st: LayerState, which: str) -> int:
    blk, reg, fld = _UNITS[st.unit][which]
    try:
        return 2 if st.get(blk, reg, fld) else 1
    except RegisterMapError:
        return 1


def _port_of(st: LayerState, blk: str, reg: str, fld: str) -> str:
    try:
        return "pri_mem" if st.get(blk, reg, fld) == 1 else "sec_mem"
    except RegisterMapError:
        return "pri_mem"


def _addr(st: LayerState, blk: str, prefix: str) -> int:
    lo = st.regs.get(f"{blk}.{prefix}BASE_ADDR_LOW", 0)
    hi = st.regs.get(f"{blk}.{prefix}BASE_ADDR_HIGH", 0)
    return (hi << 32) | lo


def _out_dims(st: LayerState, c: int, h: int, w: int) -> tuple[int, int, int] | None:
    """Output (C, H, W) for input (c, h, w); PDP from kernel, stride and padding."""
    if st.unit != "PDP":
        return c, h, w
    kw, kh = st.get("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_WIDTH") + 1, st.get("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_HEIGHT") + 1
    sw = st.get("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH") + 1
    sh = st.get("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_HEIGHT") + 1
    pl, pr = st.get("PDP", "D_POOLING_PADDING_CFG", "PAD_LEFT"), st.get("PDP", "D_POOLING_PADDING_CFG", "PAD_RIGHT")
    pt, pb = st.get("PDP", "D_POOLING_PADDING_CFG", "PAD_TOP"), st.get("PDP", "D_POOLING_PADDING_CFG", "PAD_BOTTOM")
    ow, oh = (w + pl + pr - kw) // sw + 1, (h + pt + pb - kh) // sh + 1
    if ow < 1 or oh < 1 or w + pl + pr < kw or h + pt + pb < kh:
        return None
    return c, oh, ow


def _out_shape_now(st: LayerState) -> tuple[int, int, int]:
    if st.unit != "PDP":
        return st.dims
    return (st.get("PDP", "D_DATA_CUBE_OUT_CHANNEL", "CUBE_OUT_CHANNEL") + 1,
            st.get("PDP", "D_DATA_CUBE_OUT_HEIGHT", "CUBE_OUT_HEIGHT") + 1,
            st.get("PDP", "D_DATA_CUBE_OUT_WIDTH", "CUBE_OUT_WIDTH") + 1)


def reshape(st: LayerState, c: int, h: int, w: int) -> LayerState | None:
    """``st`` cropped to (c, h, w) with sizes rewritten and strides recomputed packed; None when
    the layer cannot take that size (a PDP window larger than the padded input)."""
    out = _out_dims(st, c, h, w)
    if out is None:
        return None
    new = st.copy(x=np.ascontiguousarray(st.x[:c, :h, :w]))
    u = _UNITS[st.unit]
    names = {"WIDTH": w, "HEIGHT": h, "CHANNEL": c}
    for blk, reg, fld in u["dims"]:
        for k, v in names.items():
            if new.has(blk, reg.format(k)):
                new.put(blk, reg.format(k), fld.format(k), v - 1)
    if st.unit == "PDP":
        for k, v in zip(("CHANNEL", "HEIGHT", "WIDTH"), out, strict=True):
            new.put("PDP", f"D_DATA_CUBE_OUT_{k}", f"CUBE_OUT_{k}", v - 1)
    atom = load_profile(st.profile).atom_bytes
    for (blk, prefix, _), (_, hh, ww) in ((u["src"], (c, h, w)), (u["dst"], out)):
        line = ww * atom
        new.regs[f"{blk}.{prefix}LINE_STRIDE"] = line
        new.regs[f"{blk}.{prefix}SURFACE_STRIDE"] = line * hh
        if blk == "PDP_RDMA" and new.has("PDP", "D_SRC_LINE_STRIDE"):  # PDP keeps a copy of the source geometry
            new.regs["PDP.D_SRC_LINE_STRIDE"] = line
            new.regs["PDP.D_SRC_SURFACE_STRIDE"] = line * hh
    return new


# ---- conversion ---------------------------------------------------------------------------------


def _layer_blocks(unit: str) -> tuple[str, ...]:
    return (unit, _UNITS[unit]["rdma"])


def _feature_params(st: LayerState, which: str) -> dict[str, int]:
    blk, prefix, _ = _UNITS[st.unit][which]
    return {"atom_bytes": load_profile(st.profile).atom_bytes, "line_stride": st.regs[f"{blk}.{prefix}LINE_STRIDE"],
            "surface_stride": st.regs[f"{blk}.{prefix}SURFACE_STRIDE"]}


def _segments(mask: np.ndarray, base: int, atom: int, gap: int = 256) -> list[tuple[int, int]]:
    """Atom-aligned (address, size) runs covering the True bytes of ``mask`` (runs closer than
    ``gap`` merged)."""
    idx = np.flatnonzero(mask)
    if not idx.size:
        return []
    runs: list[list[int]] = []
    starts = idx[np.r_[True, np.diff(idx) > 1]]
    ends = idx[np.r_[np.diff(idx) > 1, True]] + 1
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        a = (base + s) // atom * atom
        b = -(-(base + e) // atom) * atom
        if runs and a - runs[-1][1] <= gap:
            runs[-1][1] = max(runs[-1][1], b)
        else:
            runs.append([a, b])
    return [(a, b - a) for a, b in runs]


def _read_extra(model, st: LayerState, out_span: tuple[str, int, int]) -> list[tuple[str, int, np.ndarray]]:  # noqa: ANN001
    """Every byte the layer's DMA engines read, outside the main input cube and the output."""
    atom = load_profile(st.profile).atom_bytes
    in_n = packed_size("nvdla.feature", st.dims, st.x.dtype, _feature_params(st, "src"))
    out: list[tuple[str, int, np.ndarray]] = []
    for port, mem in model.memories.items():
        reads = getattr(mem, "reads", [])
        if not reads:
            continue
        lo = min(a for a, _ in reads)
        hi = max(a + n for a, n in reads)
        mask = mem.read_mask(lo, hi - lo)
        if port == st.in_port:
            a, b = max(st.in_addr, lo), min(st.in_addr + in_n, hi)
            if a < b:
                mask[a - lo : b - lo] = False
        if port == out_span[0]:
            a, b = max(out_span[1], lo), min(out_span[1] + out_span[2], hi)
            if a < b:
                mask[a - lo : b - lo] = False
        for addr, size in _segments(mask, lo, atom):
            out.append((port, addr, np.asarray(mem.read(addr, size), dtype=np.uint8).copy()))
    return out


def _finish_state(st: LayerState, model, drv: NvdlaDriver) -> LayerState:  # noqa: ANN001
    """Read the main input and the LUT back from a model that ran the layer."""
    u = _UNITS[st.unit]
    blk, prefix, (preg, pfld) = u["src"]
    st.in_addr = _addr(st, blk, prefix)
    st.in_port = _port_of(st, blk, preg, pfld)
    dt = np.dtype(np.int16 if _bpe(st, "in16") == 2 else np.int8)
    shape = st.dims
    params = _feature_params(st, "src")
    n = packed_size("nvdla.feature", shape, dt, params)
    buf = np.asarray(model.mem_read(st.in_addr, n, port=st.in_port), dtype=np.uint8)
    st.x = unpack_surface("nvdla.feature", buf, shape, dt, params)
    uses_lut = st.unit == "CDP" or (st.unit == "SDP" and _sdp_lut_on(st))
    if uses_lut:
        pc = drv.precision
        st.lut = (st.unit, pc.read_lut_config(st.unit, force=True), pc.read_lut(st.unit, "LE", force=True),
                  pc.read_lut(st.unit, "LO", force=True))
    dblk, dprefix, (dreg, dfld) = u["dst"]
    oshape = _out_shape_now(st)
    odt = np.dtype(np.int16 if _bpe(st, "out16") == 2 else np.int8)
    out_n = packed_size("nvdla.feature", oshape, odt, _feature_params(st, "dst"))
    st.extra = _read_extra(model, st, (_port_of(st, dblk, dreg, dfld), _addr(st, dblk, dprefix), out_n))
    return st


def _sdp_lut_on(st: LayerState) -> bool:
    try:
        return not st.get("SDP", "D_DP_EW_CFG", "EW_BYPASS") and not st.get("SDP", "D_DP_EW_CFG", "EW_LUT_BYPASS")
    except RegisterMapError:
        return False


def trace_to_state(trace: Trace | str | Path, profile: HardwareProfile | str, *, semantics: Semantics = "rtl") -> LayerState:
    """The layer of a single-layer SDP/CDP/PDP trace as a :class:`LayerState` (from a run on
    the reference model with read recording)."""
    from ..targets.model import ModelTarget
    from .triage import trace_writes

    t = trace if isinstance(trace, Trace) else parse_trace(trace)
    prof = load_profile(profile)
    units = [u for u in t.units()]
    if len(units) != 1 or units[0] not in _UNITS:
        raise MinimizeError(f"{t.name}: the minimiser takes one memory-to-memory SDP, CDP or PDP layer; this trace "
                            f"waits for {', '.join(units) or 'no unit'} (convolution layers are not packed-vector units)")
    unit = units[0]
    rm = prof.regmap
    regs: dict[str, int] = {}
    launch: list[str] = []
    for addr, value, _ in trace_writes(t, prof):
        r = rm.by_address(addr)
        if r.name == "D_OP_ENABLE":
            if value & 1 and r.block not in launch:
                launch.append(r.block)
            continue
        if r.block not in _layer_blocks(unit) or r.name in RESERVED:
            continue
        regs[r.full_name] = value
    if len([c for c in t.of_kind("reg_write") if c.args[0].split(".")[-1].startswith("D_OP_ENABLE")]) > len(launch):
        raise MinimizeError(f"{t.name}: more than one layer is launched; the minimiser takes one layer")
    if any(b not in _layer_blocks(unit) for b in launch):
        raise MinimizeError(f"{t.name}: launches {', '.join(launch)}; a fused layer is not a packed vector")
    st = LayerState(prof.name, unit, tuple(launch), regs, np.zeros((1, 1, 1), np.int8), 0, "pri_mem", name=t.name)
    if unit == "SDP" and st.get("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE"):
        raise MinimizeError(f"{t.name}: SDP takes its input on the fly from the convolution pipeline")
    st.x = _zero_input(st)
    with ModelTarget(prof, semantics=semantics, record_reads=True) as m:
        drv = NvdlaDriver(m, prof)
        res = run_trace(t, m, driver=drv, timeout=1.0)
        if res.status not in ("passed", "failed"):
            raise MinimizeError(f"{t.name}: the reference model cannot run it: {res.message}")
        return _finish_state(st, m, drv)


def _zero_input(st: LayerState) -> np.ndarray:
    """A zero input cube of the layer's programmed size (C, H, W): its registers hold each minus one."""
    c, h, w = (st.get(*_dim_field(st, k)) + 1 for k in ("CHANNEL", "HEIGHT", "WIDTH"))
    return np.zeros((c, h, w), np.int8)


def _dim_field(st: LayerState, k: str) -> tuple[str, str, str]:
    blk, reg, fld = _UNITS[st.unit]["dims"][0]
    return blk, reg.format(k), fld.format(k)


def case_to_state(case: Case | str | Path, *, semantics: Semantics = "rtl") -> LayerState:
    """A packed layer vector as a :class:`LayerState` (run once on the reference model)."""
    from ..targets.model import ModelTarget

    case = case if isinstance(case, Case) else load_case(case)
    if case.kind != "layer" or case.unit not in _UNITS:
        raise MinimizeError(f"{case.name}: only SDP/CDP/PDP layer cases can be minimised")
    prof = load_profile(case.profile or "nv_small")
    st = LayerState(prof.name, case.unit, tuple(case.launch), {r.name: r.value for r in case.registers},
                    np.zeros((1, 1, 1), np.int8), 0, "pri_mem", name=case.name)
    st.x = _zero_input(st)
    with ModelTarget(prof, semantics=semantics, record_reads=True) as m:
        drv = NvdlaDriver(m, prof)
        execute_case(case, m, drv, timeout=1.0)
        st = _finish_state(st, m, drv)
    return st


# ---- state -> packed vector -----------------------------------------------------------------------


def _manifest(st: LayerState, golden: dict[str, np.ndarray] | None, note: str) -> tuple[dict, dict]:
    prof = load_profile(st.profile)
    rm = prof.regmap
    regs = []
    for name, value in st.regs.items():
        r = rm.register(name)
        if r.name in RESERVED or not r.writable or r.trigger or (st.lut is not None and r.name.startswith("S_LUT_")):
            continue
        if r.block not in _layer_blocks(st.unit):
            continue
        regs.append({"reg": r.full_name, "value": Hex(value & r.defined_mask)})
    blobs: dict[str, bytes] = {}
    man: dict[str, Any] = {"format": FORMAT, "name": st.name, "kind": "layer",
                           "description": f"minimised {st.unit} layer ({note})", "unit": st.unit,
                           "profile": st.profile, "launch": list(st.launch), "registers": regs}
    if st.lut is not None:
        unit, cfg, le, lo = st.lut
        man["lut"] = {"unit": unit, "config": dataclasses.asdict(cfg), "le": "lut_le.bin", "lo": "lut_lo.bin"}
        blobs["lut_le.bin"] = np.asarray(le).astype("<i2").tobytes()
        blobs["lut_lo.bin"] = np.asarray(lo).astype("<i2").tobytes()
    dt = "int16" if st.x.dtype == np.int16 else "int8"
    man["inputs"] = [{"name": "src", "layout": "nvdla.feature", "params": _feature_params(st, "src"), "dtype": dt,
                      "shape": list(st.dims), "address": Hex(st.in_addr), "port": st.in_port, "data": "src.bin"}]
    blobs["src.bin"] = np.ascontiguousarray(st.x).astype(st.x.dtype.newbyteorder("<")).tobytes()
    for i, (port, addr, data) in enumerate(st.extra):
        man["inputs"].append({"name": f"mem{i}", "layout": "raw", "dtype": "uint8", "shape": [int(data.size)],
                              "address": Hex(addr), "port": port, "data": f"mem{i}.bin"})
        blobs[f"mem{i}.bin"] = data.tobytes()
    u = _UNITS[st.unit]
    dblk, dprefix, (dreg, dfld) = u["dst"]
    odt = "int16" if _bpe(st, "out16") == 2 else "int8"
    out = {"name": "dst", "layout": "nvdla.feature", "params": _feature_params(st, "dst"), "dtype": odt,
           "shape": list(_out_shape_now(st)), "address": Hex(_addr(st, dblk, dprefix)),
           "port": _port_of(st, dblk, dreg, dfld), "rule": "bitexact"}
    if golden is None:
        out["crc"] = 0
    else:
        out["expected"] = "dst.expected.bin"
        blobs["dst.expected.bin"] = golden["dst"].tobytes()
    man["outputs"] = [out]
    man["provenance"] = {"generator": "nvdla-hil minimize", "note": note or "minimised by nvdla-hil minimize"}
    return man, blobs


def state_to_case(st: LayerState, folder: str | Path, *, semantics: Semantics = "rtl", note: str = "") -> Case:
    """Write ``st`` as a packed vector into ``folder`` with its golden from the reference model."""
    from ..targets.model import ModelTarget

    folder = Path(folder)
    man, blobs = _manifest(st, None, note)
    if folder.exists():
        shutil.rmtree(folder)
    write_case(folder, man, blobs)
    draft = load_case(folder)
    with ModelTarget(st.profile, semantics=semantics) as m:
        outputs, _ = execute_case(draft, m, timeout=1.0)
    man, blobs = _manifest(st, outputs, note)
    shutil.rmtree(folder)
    write_case(folder, man, blobs)
    return load_case(folder)


# ---- evaluation -------------------------------------------------------------------------------------


def case_signature(case: Case, target: Transport) -> Signature | None:
    """How ``case`` fails on ``target`` (None: it passes, or does not run)."""
    res = run_case(case, target, timeout=2.0)
    if res.status != "failed":
        return None
    failing = tuple(sorted(c.name for c in res.checks if not c.passed))
    return Signature(failing, case.unit or "?") if failing else None


def case_data_bytes(case: Case) -> int:
    """Bytes of inputs + outputs of a packed vector (LUT tables included)."""
    n = sum(s.nbytes for s in case.inputs) + sum(s.nbytes for s in case.outputs)
    if case.lut is not None:
        n += sum(t.size * 2 for t in (case.lut.le, case.lut.lo) if t is not None)
    return int(n)


def trace_data_bytes(trace: Trace | str | Path) -> int:
    """Bytes of inputs + outputs of a trace: its loaded memory images and checked regions, and
    the LUT entries it programs (2 bytes each)."""
    t = trace if isinstance(trace, Trace) else parse_trace(trace)
    n = sum(read_dat(t.folder / c.args[2]).extent for c in t.of_kind("mem_load"))
    n += sum(c.args[3] for c in t.of_kind("check_crc"))
    n += 2 * sum(1 for c in t.of_kind("reg_write") if "S_LUT_ACCESS_DATA" in c.args[0])
    return int(n)


@dataclass
class MinimizeResult:
    name: str
    signature: Signature
    original_bytes: int
    final_bytes: int
    original_dims: tuple[int, int, int]
    final_dims: tuple[int, int, int]
    registers_reset: list[str]
    lut_entries: tuple[int, int]  # non-zero LUT entries before, after
    runs: int
    seconds: float
    case: Path | None = None

    @property
    def ratio(self) -> float:
        return self.final_bytes / max(self.original_bytes, 1)

    def summary(self) -> str:
        c0, c1 = self.original_dims, self.final_dims
        lines = [f"{self.name}: fails the same way ({self.signature.describe()})",
                 f"  data {self.original_bytes} -> {self.final_bytes} bytes ({100 * self.ratio:.1f}%), "
                 f"cube CxHxW {c0[0]}x{c0[1]}x{c0[2]} -> {c1[0]}x{c1[1]}x{c1[2]}",
                 f"  registers reset to defaults: {', '.join(self.registers_reset) or 'none'}",
                 f"  LUT entries in use: {self.lut_entries[0]} -> {self.lut_entries[1]}",
                 f"  {self.runs} candidate runs, {self.seconds:.1f} s"]
        if self.case is not None:
            lines.append(f"  saved: {self.case}")
        return "\n".join(lines)


def _trim_extra(st: LayerState, semantics: Semantics) -> LayerState:
    """Operand memory cut to the bytes the (shrunk) layer really reads."""
    from ..targets.model import ModelTarget

    with tempfile.TemporaryDirectory(prefix="nvdla-min-") as tmp:
        case = state_to_case(st, Path(tmp) / "c", semantics=semantics)
        with ModelTarget(st.profile, semantics=semantics, record_reads=True) as m:
            execute_case(case, m, timeout=1.0)
            trimmed: list[tuple[str, int, np.ndarray]] = []
            atom = load_profile(st.profile).atom_bytes
            for port, addr, data in st.extra:
                mem = m.memories[port]
                assert isinstance(mem, RecordingMemory)  # record_reads=True
                for a, n in _segments(mem.read_mask(addr, data.size), addr, atom):
                    lo, hi = max(a, addr), min(a + n, addr + data.size)
                    trimmed.append((port, lo, data[lo - addr : hi - addr].copy()))
    return st.copy(extra=trimmed)


@dataclass
class _Search:
    """The minimiser's oracle: converts a candidate into a packed vector, runs it on a fresh
    target and says whether it fails the way the original failed (``first``), until ``deadline``."""

    target_factory: Callable[[], Transport]
    semantics: Semantics
    tmp: Path
    deadline: float
    runs: int = 0
    first: Signature | None = None

    def signature(self, s: LayerState) -> Signature | None:
        self.runs += 1
        try:
            case = state_to_case(s, self.tmp / f"c{self.runs}", semantics=self.semantics)
        except (ValueError, RegisterMapError, TimeoutError, AssertionError, KeyError):
            return None  # the reference model refuses this candidate: it explains nothing
        try:
            with self.target_factory() as t:
                return case_signature(case, t)
        finally:
            shutil.rmtree(self.tmp / f"c{self.runs}", ignore_errors=True)

    def in_time(self) -> bool:
        return time.monotonic() < self.deadline

    def same(self, s: LayerState | None) -> bool:
        return s is not None and self.in_time() and self.signature(s) == self.first


def _shrink_sizes(st: LayerState, search: _Search, say: Callable[[str], None]) -> LayerState:
    """Step 1: channels, lines and width cut by bisection; strides repacked when no size shrank."""
    dims0 = st.dims
    for axis in (0, 1, 2):
        lo, hi = 1, st.dims[axis]
        if st.unit == "PDP" and axis == 2 and st.get("PDP", "D_OPERATION_MODE_CFG", "SPLIT_NUM"):
            continue  # split-width pooling: the partial widths would need rewriting
        while lo < hi and search.in_time():
            mid = (lo + hi) // 2
            dims = list(st.dims)
            dims[axis] = mid
            cand = reshape(st, *dims)
            if search.same(cand):
                hi = mid
                st = cand  # type: ignore[assignment]  # same() checked not None
            else:
                lo = mid + 1
        say(f"  axis {'CHW'[axis]}: {st.dims}")
    if st.dims == dims0:  # strides still as programmed: recompute them packed
        cand = reshape(st, *st.dims)
        if search.same(cand):
            st = cand  # type: ignore[assignment]  # same() checked not None
    return st


def _reset_registers(st: LayerState, search: _Search) -> tuple[LayerState, list[str]]:
    """Step 2: each datapath register back to its reset value where the failure survives."""
    rm = load_profile(st.profile).regmap
    reset: list[str] = []
    for name in list(st.regs):
        r = rm.register(name)
        if any(k in r.name for k in _GEOMETRY) or st.regs[name] == r.reset:
            continue
        cand = st.copy()
        cand.regs[name] = r.reset
        if search.same(cand):
            st = cand
            reset.append(name)
    return st, reset


def _zero_lut(st: LayerState, search: _Search) -> tuple[LayerState, int, int]:
    """Step 3: LUT entries zeroed, in halving blocks, where the failure survives; returns the
    state and the non-zero entries before and after."""
    if st.lut is None:
        return st, 0, 0
    unit, cfg, le, lo_t = st.lut
    lut_before = int(np.count_nonzero(le) + np.count_nonzero(lo_t))
    tables = {"le": np.array(le, dtype=np.int16), "lo": np.array(lo_t, dtype=np.int16)}
    for key in ("lo", "le"):
        n = tables[key].size
        size = n
        while size >= 4 and search.in_time():
            for a in range(0, n, size):
                blk = tables[key][a : a + size]
                if not blk.any():
                    continue
                trial = {k: v.copy() for k, v in tables.items()}
                trial[key][a : a + size] = 0
                cand = st.copy(lut=(unit, cfg, trial["le"], trial["lo"]))
                if search.same(cand):
                    tables = trial
                    st = cand
            size //= 2
    return st, lut_before, int(np.count_nonzero(tables["le"]) + np.count_nonzero(tables["lo"]))


def minimize(st: LayerState, target_factory: Callable[[], Transport], *, semantics: Semantics = "rtl",
             out: str | Path | None = None, budget: float = 60.0, original_bytes: int | None = None,
             log: Callable[[str], None] | None = None) -> MinimizeResult:
    """Shrink ``st`` while it fails on ``target_factory()`` the way it fails first."""
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="nvdla-min-"))
    search = _Search(target_factory, semantics, tmp, t0 + budget)
    say = log or (lambda s: None)
    try:
        first = search.first = search.signature(st)
        if first is None:
            raise MinimizeError(f"{st.name}: the converted layer does not fail on the target; nothing to minimise")
        dims0 = st.dims
        if original_bytes is None:
            with tempfile.TemporaryDirectory() as d:
                original_bytes = case_data_bytes(state_to_case(st, Path(d) / "c", semantics=semantics))
        say(f"{st.name}: fails: {first.describe()}; {original_bytes} bytes")
        st = _shrink_sizes(st, search, say)
        st, reset = _reset_registers(st, search)
        st, lut_before, lut_after = _zero_lut(st, search)
        # 4. operand memory cut to what the layer reads
        if st.extra:
            cand = _trim_extra(st, semantics)
            if search.signature(cand) == first:
                st = cand
        dest = Path(out) if out is not None else tmp / "final"
        case = state_to_case(st, dest, semantics=semantics,
                             note=f"from {st.name}: fails as {first.describe()}")
        with target_factory() as t:
            final_sig = case_signature(case, t)
        if final_sig != first:
            raise MinimizeError(f"{st.name}: the saved case fails differently ({final_sig}); please report")
        res = MinimizeResult(st.name, first, int(original_bytes), case_data_bytes(case), dims0, st.dims, reset,
                             (lut_before, lut_after), search.runs, time.monotonic() - t0, case.folder if out else None)
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def minimize_path(path: str | Path, target_factory: Callable[[], Transport], *, profile: str | None = None,
                  semantics: Semantics = "rtl", out: str | Path | None = None, budget: float = 60.0,
                  log: Callable[[str], None] | None = None) -> MinimizeResult:
    """Minimise a trace folder/.cfg or a packed vector (folder or case.yaml)."""
    p = Path(path)
    if (p / "case.yaml").is_file() or p.name == "case.yaml":
        case = load_case(p)
        st = case_to_state(case, semantics=semantics)
        return minimize(st, target_factory, semantics=semantics, out=out, budget=budget,
                        original_bytes=case_data_bytes(case), log=log)
    trace = parse_trace(p)
    prof = profile or trace_profile(trace)
    st = trace_to_state(trace, prof, semantics=semantics)
    return minimize(st, target_factory, semantics=semantics, out=out, budget=budget,
                    original_bytes=trace_data_bytes(trace), log=log)


def trace_profile(trace: Trace) -> str:
    """The profile a trace runs on: the first of its folder's configuration (when that names a
    profile), nv_small and nv_small_256_full that has every feature the trace needs (else the
    first of them)."""
    from ...drivers.profiles import list_profiles

    own = trace.folder.parent.name
    cands = ([own] if own in list_profiles() else []) + ["nv_small", "nv_small_256_full"]
    feats = trace_features(trace)
    for c in cands:
        if all(load_profile(c).has(f) for f in feats):
            return c
    return cands[0]
