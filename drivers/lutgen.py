"""LUT programming helpers: table contents and LUT register values for a function.

Sources: seed 003 (LUT programming: exponent / linear modes, out-of-range slopes, priorities,
recommended configurations), seed 001 (the LUT input is ``x' = (x - O_in) * SF_in``; LUT entries
carry a scaling ``SF``), docs/nvdla-precision-semantics.md sections 5 (SDP) and 6 (CDP) for the
exact index arithmetic the registers feed.

Conventions. The LUT works on the integer ``X = (x - in_offset) * in_scale`` (x = real input);
entries and outputs are integers ``Y = f(x) * out_scale``. A table's registers follow seed 003:

* linear, N entries (LE 65 / LO 257), select ``s``: index = ``(X - START) >> s``, entry
  ``i`` = ``f`` at ``X = START + i*2^s``; ``END = START + (N-1)*2^s``. ``s`` is chosen as the
  smallest power of two step that covers the requested range (the table may reach past it).
* exponent (LE only), index offset ``eo``: entry ``i`` = ``f`` at ``X = START + 2^(eo+i)``;
  underflow anchor ``START + 2^eo`` (RTL bias, doc 5.5/6.4), ``END = START + 2^(eo+64)``
  (clamped to the register range).
* out-of-range slopes: ``k = f'(edge)`` (one-sided difference on the inner side) in output
  units per input unit, ``m = k * out_scale / in_scale`` encoded as ``scale * 2^-shift`` with a
  16-bit signed scale and a 5-bit signed shift (doc 5.5: positive shift = right shift).

Coverage cases (seed 003, "LUT coverage": X/Y reversible, 6 cases): the density table lies
inside the raw table ("overlap": both-hit possible), next to it ("adjacent"), or apart from it
with a gap ("gap": one table under-, the other overflows); each with LE or LO as the lower/raw
table. The seed's figure is not in the captured text; the three layouts are the ones its hit/miss
list names (cases 1, 2, 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from collections.abc import Callable
from typing import Any

import numpy as np

from .precision import LUT_SIZES, lut_config_from_fields, lut_register_fields
from .precision import LutConfig as LutParams
from .regmap import load_regmap
from ..semantics import Semantics

__all__ = [
    "TableSpec", "LutProgram",
    "sigmoid", "tanh", "lrn",
    "program_lut", "program_activation", "program_lrn", "program_case", "CASES",
    "encode_slope", "eval_function",
    "lut_params_to_registers", "registers_to_lut_params", "pack_registers", "lut_write_sequence",
]

Fn = Callable[[np.ndarray], np.ndarray]


# ----------------------------------------------------------------------------------------------
# functions


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(np.asarray(x, dtype=np.float64))


def lrn(alpha: float, beta: float, k: float, n: int) -> Fn:
    """The LRN multiplier ``(k + alpha/n * s)^-beta`` of the square sum ``s`` (CDP multiplies
    the LUT output by the centre element)."""
    def f(s: np.ndarray) -> np.ndarray:
        return np.power(k + alpha / n * np.asarray(s, dtype=np.float64), -beta)
    f.__name__ = f"lrn(alpha={alpha}, beta={beta}, k={k}, n={n})"
    return f


# ----------------------------------------------------------------------------------------------
# data classes


@dataclass(frozen=True)
class TableSpec:
    """What one table should cover, in real input units.

    ``mode`` ``"linear"`` covers ``[start, end]``; ``"exponent"`` (LE only) covers
    ``start + 2^(eo+i)/in_scale`` for i = 0..64, with ``eo`` = ``index_offset`` or, when None,
    the smallest offset whose top entry reaches ``end`` but not below 0 (integer inputs never
    hit entries below ``START + 1``)."""

    mode: str
    start: float
    end: float
    index_offset: int | None = None


@dataclass
class LutProgram:
    """Everything needed to program one LUT: decoded registers, the two tables (int16),
    a human-readable description, the coverage case, and the scaling the tables assume."""

    params: LutParams
    le: np.ndarray
    lo: np.ndarray
    description: str
    case: str
    unit: str = "sdp"
    in_scale: float = 1.0
    in_offset: float = 0.0
    out_scale: float = 1.0
    x_range: tuple[float, float] = (0.0, 1.0)
    notes: list[str] = field(default_factory=list)

    def registers(self) -> dict[str, int]:
        return lut_params_to_registers(self.params, self.unit)


# ----------------------------------------------------------------------------------------------
# helpers

_START_BITS = {"sdp": 32, "cdp": 38}
_SELECT_RANGE = {"sdp": (-128, 127), "cdp": (-32, 31)}


def _unit(unit: str) -> str:
    u = unit.lower()
    if u not in _START_BITS:
        raise ValueError(f"unit must be 'sdp' or 'cdp', not {unit!r}")
    return u


def eval_function(fn: Fn, x: np.ndarray, what: str) -> np.ndarray:
    """``fn`` on ``x`` as float64; a non-finite value is a ValueError naming ``what`` and the x."""
    with np.errstate(all="ignore"):
        y = np.asarray(fn(np.asarray(x, dtype=np.float64)), dtype=np.float64)
    bad = ~np.isfinite(y)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}: function is not finite at x = {float(np.ravel(x)[i])!r}")
    return y


def _entries(y: np.ndarray, out_scale: float) -> np.ndarray:
    """Real values -> int16 entries: round half away from zero, saturate to 16 bits."""
    v = y * out_scale
    r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return np.clip(r, -32768, 32767).astype(np.int16)


def encode_slope(m: float) -> tuple[int, int]:
    """Slope ``m`` (output integers per input integer) -> (scale, shift), ``m ~ scale*2^-shift``,
    scale 16-bit signed, shift 5-bit signed (-16..15); the largest shift that keeps the scale
    in range gives the most precision. Saturates when |m| > 32767*2^16."""
    if m == 0 or not math.isfinite(m):
        return (0, 0) if m == 0 else ((32767 if m > 0 else -32768), -16)
    for shift in range(15, -17, -1):
        scale = m * 2.0**shift
        r = int(math.copysign(math.floor(abs(scale) + 0.5), scale))
        if -32768 <= r <= 32767:
            return r, shift
    return (32767 if m > 0 else -32768), -16


def _slope(fn: Fn, x: float, inner: float, in_scale: float, out_scale: float) -> float:
    """One-sided derivative at ``x`` towards ``inner`` (the side the table covers), converted to
    integer units."""
    h = 1e-6 * max(1.0, abs(x)) * (1 if inner > x else -1)
    y0, y1 = eval_function(fn, np.array([x, x + h]), "slope")
    return (y1 - y0) / h * out_scale / in_scale


def _check_range(name: str, v: int, lo: int, hi: int) -> int:
    if not lo <= v <= hi:
        raise ValueError(f"{name} = {v} does not fit its register field ({lo}..{hi})")
    return int(v)


@dataclass
class _Table:
    entries: np.ndarray
    select: int
    offset: int
    start: int
    end: int
    uf_scale: int
    uf_shift: int
    of_scale: int
    of_shift: int
    lo_x: float  # real coverage
    hi_x: float
    text: str


def _build_table(fn: Fn, spec: TableSpec, n: int, name: str, *, in_scale: float, in_offset: float,
                 out_scale: float, unit: str, slopes: bool) -> _Table:
    sbits = _START_BITS[unit]
    smin, smax = -(1 << (sbits - 1)), (1 << (sbits - 1)) - 1
    x_start = int(round((spec.start - in_offset) * in_scale))
    _check_range(f"{name} start", x_start, smin, smax)
    real = lambda X: np.asarray(X, dtype=np.float64) / in_scale + in_offset  # noqa: E731
    if spec.mode == "linear":
        span = (spec.end - spec.start) * in_scale
        if span <= 0:
            raise ValueError(f"{name}: end {spec.end} must lie above start {spec.start}")
        sel = math.ceil(math.log2(span / (n - 1)))
        lo_sel, hi_sel = _SELECT_RANGE[unit]
        _check_range(f"{name} index select", sel, lo_sel, hi_sel)
        xs = x_start + np.arange(n, dtype=np.float64) * 2.0**sel
        x_end = int(round(xs[-1]))
        uf_anchor: float = x_start
        offset = 0
        text = f"{name} linear {n} entries, X = {x_start} + i*2^{sel}"
    elif spec.mode == "exponent":
        if n != LUT_SIZES["LE"]:
            raise ValueError("only the LE table supports exponent mode")
        if spec.index_offset is not None:
            eo = spec.index_offset
        else:
            top = max((spec.end - spec.start) * in_scale, 1.0)
            eo = max(0, math.ceil(math.log2(top)) - (n - 1))
        _check_range(f"{name} index offset", eo, -128, 127)
        xs = x_start + 2.0 ** (eo + np.arange(n, dtype=np.float64))
        x_end = int(min(x_start + 2.0 ** (eo + n - 1), smax))
        uf_anchor = x_start + 2.0**eo
        offset = eo
        sel = 0
        text = f"{name} exponent, X = {x_start} + 2^({eo}+i)"
    else:
        raise ValueError(f"{name}: mode must be 'linear' or 'exponent', not {spec.mode!r}")
    _check_range(f"{name} end", x_end, smin, smax)
    y = eval_function(fn, real(xs), name)
    entries = _entries(y, out_scale)
    uf = of = (0, 0)
    if slopes:
        uf = encode_slope(_slope(fn, float(real(uf_anchor)), float(real(xs[1])), in_scale, out_scale))
        of = encode_slope(_slope(fn, float(real(xs[-1])), float(real(xs[-2])), in_scale, out_scale))
    return _Table(entries, sel, offset, x_start, x_end, uf[0], uf[1], of[0], of[1],
                  float(real(uf_anchor if spec.mode == "exponent" else x_start)), float(real(xs[-1])), text)


# ----------------------------------------------------------------------------------------------
# programs


def program_lut(fn: Fn, le: TableSpec, lo: TableSpec, *, in_scale: float = 1.0, in_offset: float = 0.0,
                out_scale: float = 1.0, unit: str = "sdp", hybrid_priority: str = "LE",
                uflow_priority: str = "LE", oflow_priority: str = "LE", slopes: bool = True,
                case: str = "custom", description: str = "") -> LutProgram:
    """Build both tables and all LUT registers for ``fn`` (see the module docstring for the
    conventions). Priorities are ``"LE"``/``"LO"`` (0/1 in S_LUT_CFG)."""
    u = _unit(unit)
    for nm, p in (("hybrid", hybrid_priority), ("uflow", uflow_priority), ("oflow", oflow_priority)):
        if p not in ("LE", "LO"):
            raise ValueError(f"{nm}_priority must be 'LE' or 'LO', not {p!r}")
    if in_scale <= 0:
        raise ValueError("in_scale must be positive")
    kw: dict[str, Any] = dict(in_scale=in_scale, in_offset=in_offset, out_scale=out_scale, unit=u, slopes=slopes)
    t_le = _build_table(fn, le, LUT_SIZES["LE"], "LE", **kw)
    t_lo = _build_table(fn, lo, LUT_SIZES["LO"], "LO", **kw)
    params = LutParams(
        le_function="exponent" if le.mode == "exponent" else "linear",
        le_index_offset=t_le.offset if le.mode == "exponent" else 0,
        le_index_select=t_le.select if le.mode == "linear" else 0,
        lo_index_select=t_lo.select,
        le_start=t_le.start, le_end=t_le.end, lo_start=t_lo.start, lo_end=t_lo.end,
        le_slope_uflow_scale=t_le.uf_scale, le_slope_uflow_shift=t_le.uf_shift,
        le_slope_oflow_scale=t_le.of_scale, le_slope_oflow_shift=t_le.of_shift,
        lo_slope_uflow_scale=t_lo.uf_scale, lo_slope_uflow_shift=t_lo.uf_shift,
        lo_slope_oflow_scale=t_lo.of_scale, lo_slope_oflow_shift=t_lo.of_shift,
        uflow_priority=uflow_priority, oflow_priority=oflow_priority, hybrid_priority=hybrid_priority,
    )
    name = getattr(fn, "__name__", "f")
    desc = description or (
        f"{name} on {u.upper()}: {t_le.text} covers [{t_le.lo_x:.6g}, {t_le.hi_x:.6g}]; "
        f"{t_lo.text} covers [{t_lo.lo_x:.6g}, {t_lo.hi_x:.6g}]; priorities hybrid {hybrid_priority}, "
        f"uflow {uflow_priority}, oflow {oflow_priority}")
    lo_x = min(le.start, lo.start)
    hi_x = max(le.end, lo.end)
    return LutProgram(params=params, le=t_le.entries, lo=t_lo.entries, description=desc, case=case, unit=u,
                      in_scale=in_scale, in_offset=in_offset, out_scale=out_scale, x_range=(lo_x, hi_x))


def program_activation(fn: Fn, x_min: float, x_max: float, *, density: tuple[float, float] | None = None,
                       in_scale: float = 1.0, in_offset: float = 0.0, out_scale: float = 1.0,
                       unit: str = "sdp") -> LutProgram:
    """Seed 003 recommendation for sigmoid/tanh: LE linear as the density table (default the
    middle quarter of the range, where the slope varies most), LO linear as the raw table over
    ``[x_min, x_max]``. Both hit -> density (LE); both under/overflow -> raw (LO)."""
    if density is None:
        c, w = (x_min + x_max) / 2, (x_max - x_min) / 8
        density = (c - w, c + w)
    return program_lut(fn, TableSpec("linear", *density), TableSpec("linear", x_min, x_max),
                       in_scale=in_scale, in_offset=in_offset, out_scale=out_scale, unit=unit,
                       hybrid_priority="LE", uflow_priority="LO", oflow_priority="LO",
                       case="overlap/LO-raw", description="")


def program_lrn(alpha: float, beta: float, k: float, n: int, *, s_max: float, density_max: float | None = None,
                in_scale: float = 1.0, out_scale: float = 2.0**14, unit: str = "cdp",
                index_offset: int | None = None) -> LutProgram:
    """Seed 003 recommendation for LRN: LE exponent as the raw table over square sums
    ``[0, s_max]``, LO linear as the density table over ``[0, density_max]`` (default
    ``s_max/2^10``). Both hit -> density (LO); both underflow (s <= 0) -> LO (LO[0] = f(0)
    exactly at its anchor); both overflow -> raw (LE). ``out_scale`` is the entry scaling
    (cdp_lut_cvt), ``in_scale`` the 2^M of cdp_in_cvt."""
    fn = lrn(alpha, beta, k, n)
    if density_max is None:
        density_max = s_max / 1024
    return program_lut(fn, TableSpec("exponent", 0.0, s_max, index_offset), TableSpec("linear", 0.0, density_max),
                       in_scale=in_scale, out_scale=out_scale, unit=unit, hybrid_priority="LO",
                       uflow_priority="LO", oflow_priority="LE", case="overlap/LE-raw")


#: the six coverage cases: layout x which table is raw (overlap) / lower (adjacent, gap)
CASES = tuple(f"{layout}/{t}-{'raw' if layout == 'overlap' else 'low'}"
              for layout in ("overlap", "adjacent", "gap") for t in ("LO", "LE"))


def program_case(fn: Fn, case: str, x_min: float, x_max: float, *, in_scale: float = 1.0, in_offset: float = 0.0,
                 out_scale: float = 1.0, unit: str = "sdp") -> LutProgram:
    """Program one of the six coverage cases (``CASES``) with linear tables over ``[x_min, x_max]``.

    * ``overlap/T-raw``: table T covers the whole range, the other the middle quarter (density,
      chosen on both-hit);
    * ``adjacent/T-low``: T covers the lower half, the other the upper half;
    * ``gap/T-low``: T covers the lowest 40 %, the other the highest 40 %; in the gap one table
      overflows and the other underflows (hybrid miss), resolved by HYBRID_PRIORITY = T (its
      overflow slope extrapolates across the gap).
    Both-underflow picks the lower table, both-overflow the upper (raw for overlap)."""
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; expected one of {CASES}")
    layout, rest = case.split("/")
    t = rest.split("-")[0]
    other = "LE" if t == "LO" else "LO"
    w = x_max - x_min
    if layout == "overlap":
        c = (x_min + x_max) / 2
        spans = {t: (x_min, x_max), other: (c - w / 8, c + w / 8)}
        prio = dict(hybrid_priority=other, uflow_priority=t, oflow_priority=t)
    elif layout == "adjacent":
        spans = {t: (x_min, x_min + w / 2), other: (x_min + w / 2, x_max)}
        prio = dict(hybrid_priority=t, uflow_priority=t, oflow_priority=other)
    else:
        spans = {t: (x_min, x_min + 0.4 * w), other: (x_max - 0.4 * w, x_max)}
        prio = dict(hybrid_priority=t, uflow_priority=t, oflow_priority=other)
    return program_lut(fn, TableSpec("linear", *spans["LE"]), TableSpec("linear", *spans["LO"]),
                       in_scale=in_scale, in_offset=in_offset, out_scale=out_scale, unit=unit, case=case, **prio)  # type: ignore[arg-type]  # prio: the three *_priority str keywords


# ----------------------------------------------------------------------------------------------
# register encoding

#: unit -> field -> (register, lsb, width). Names as in NVDLA_SDP.rdl / NVDLA_CDP.rdl.
def lut_params_to_registers(params: LutParams, unit: str = "sdp") -> dict[str, int]:
    """Decoded ``LutParams`` -> raw (unsigned) register field values keyed by field name.

    The encoding (two's complement per field, CDP selects limited to -32..31, CDP 38-bit
    starts/ends split into ``_LOW``/``_HIGH``) is the driver's
    :func:`~nvdla_hil.drivers.precision.lut_register_fields`. Raises ValueError naming a field
    that does not fit."""
    u = _unit(unit)
    return {f: v for flds in lut_register_fields(u.upper(), params).values() for f, v in flds.items()}


def registers_to_lut_params(fields: dict[str, int], unit: str = "sdp", semantics: Semantics = "rtl") -> LutParams:
    """Inverse of ``lut_params_to_registers``. CDP selects are read as the RTL does (6-bit
    signed, bits 7:6 ignored); with ``semantics="cmod"`` a select byte with bit 5 clear is
    taken whole (doc 6.3 [DIFF], :func:`~nvdla_hil.lut_registers.cdp_index_select`). Missing
    fields read 0."""
    u = _unit(unit)
    return lut_config_from_fields(u.upper(), lambda reg, name: int(fields.get(name, 0)), semantics=semantics)


def pack_registers(fields: dict[str, int], unit: str = "sdp") -> dict[str, int]:
    """Field values -> 32-bit register values keyed by register name (S_LUT_CFG, ...), using
    the bit positions of the register map."""
    u = _unit(unit).upper()
    regmap = load_regmap("v2")
    regs: dict[str, int] = {}
    for reg in lut_register_fields(u, LutParams()):
        r = regmap.register(u, reg)
        regs[reg] = r.encode(0, **{f: int(fields.get(f, 0)) for f in r.fields})
    return regs


def lut_write_sequence(program: LutProgram) -> list[tuple[str, int]]:
    """Register writes that load both tables (doc 7 / seed 003): S_LUT_ACCESS_CFG =
    WRITE | table id | address 0, then one S_LUT_ACCESS_DATA write per entry, LE then LO."""
    seq: list[tuple[str, int]] = []
    for tid, table in ((0, program.le), (1, program.lo)):
        seq.append(("S_LUT_ACCESS_CFG", (1 << 17) | (tid << 16)))
        seq.extend(("S_LUT_ACCESS_DATA", int(v)) for v in np.asarray(table).astype(np.int16).view(np.uint16))
    return seq


def with_params(program: LutProgram, **changes: Any) -> LutProgram:
    """Copy of ``program`` with some LutParams fields changed (e.g. priorities)."""
    return replace(program, params=replace(program.params, **changes))
