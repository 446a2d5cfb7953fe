"""Precision-control API: LUT tables and registers, convertors, truncations, statistics.

Everything here is register-level and goes through the driver (so every access is logged
and range-checked). Hardware rules: docs/nvdla-precision-semantics.md sections 2, 5-8,
seeds 001 (precision preservation) and 003 (LUT programming).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..lut_registers import LUT_SIZES, LUT_UNITS, LutConfig, lut_config_from_fields
from .regmap import FieldRangeError, RegisterMapError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from contextlib import AbstractContextManager

    from .profiles import HardwareProfile
    from .regmap import Register
    from .transport import Transport

__all__ = [
    "LutConfig",
    "ConvertorSetting",
    "Statistics",
    "StatisticsComparison",
    "PrecisionControl",
    "RegisterDriver",
    "CONVERTORS",
    "TRUNCATIONS",
    "LUT_SIZES",
    "compare_statistics",
    "STATUS_REGS",
    "RESULT_STATUSES",
    "status_names",
    "status_field",
    "statistics_register",
    "statistics_registers",
    "compare_statuses",
    "golden_status_values",
    "lut_register_fields",
    "lut_config_from_fields",
]

@dataclass(frozen=True)
class ConvertorSetting:
    """``y = saturate(round((x - offset) * scale >> shift))`` (seed 001; semantics doc 2)."""

    offset: int = 0
    scale: int = 1
    shift: int = 0


@dataclass(frozen=True)
class _CvtRegs:
    block: str
    offset: tuple[str, str]
    scale: tuple[str, str]
    shift: tuple[str, str]
    offset_bits: int  # signed width the hardware uses
    scale_bits: int
    shift_bits: int  # unsigned


#: Every convertor instance: register fields and the widths the datapath uses (semantics doc 2).
CONVERTORS: dict[str, _CvtRegs] = {
    "sdp_out": _CvtRegs("SDP", ("D_CVT_OFFSET", "CVT_OFFSET"), ("D_CVT_SCALE", "CVT_SCALE"),
                        ("D_CVT_SHIFT", "CVT_SHIFT"), 32, 16, 6),
    "sdp_ew_alu": _CvtRegs("SDP", ("D_DP_EW_ALU_CVT_OFFSET_VALUE", "EW_ALU_CVT_OFFSET"),
                           ("D_DP_EW_ALU_CVT_SCALE_VALUE", "EW_ALU_CVT_SCALE"),
                           ("D_DP_EW_ALU_CVT_TRUNCATE_VALUE", "EW_ALU_CVT_TRUNCATE"), 32, 16, 6),
    "sdp_ew_mul": _CvtRegs("SDP", ("D_DP_EW_MUL_CVT_OFFSET_VALUE", "EW_MUL_CVT_OFFSET"),
                           ("D_DP_EW_MUL_CVT_SCALE_VALUE", "EW_MUL_CVT_SCALE"),
                           ("D_DP_EW_MUL_CVT_TRUNCATE_VALUE", "EW_MUL_CVT_TRUNCATE"), 32, 16, 6),
    "cdp_in": _CvtRegs("CDP", ("D_DATIN_OFFSET", "DATIN_OFFSET"), ("D_DATIN_SCALE", "DATIN_SCALE"),
                       ("D_DATIN_SHIFTER", "DATIN_SHIFTER"), 16, 16, 5),
    "cdp_out": _CvtRegs("CDP", ("D_DATOUT_OFFSET", "DATOUT_OFFSET"), ("D_DATOUT_SCALE", "DATOUT_SCALE"),
                        ("D_DATOUT_SHIFTER", "DATOUT_SHIFTER"), 32, 16, 6),
    "cdma": _CvtRegs("CDMA", ("D_CVT_OFFSET", "CVT_OFFSET"), ("D_CVT_SCALE", "CVT_SCALE"),
                     ("D_CVT_CFG", "CVT_TRUNCATE"), 16, 16, 6),
}

#: Truncation / shifter fields (unsigned shift amounts; semantics doc 3.1, 3.2, 4).
TRUNCATIONS: dict[str, tuple[str, str, str]] = {
    "sdp_bs_alu_shift": ("SDP", "D_DP_BS_ALU_CFG", "BS_ALU_SHIFT_VALUE"),
    "sdp_bs_mul_truncate": ("SDP", "D_DP_BS_MUL_CFG", "BS_MUL_SHIFT_VALUE"),
    "sdp_bn_alu_shift": ("SDP", "D_DP_BN_ALU_CFG", "BN_ALU_SHIFT_VALUE"),
    "sdp_bn_mul_truncate": ("SDP", "D_DP_BN_MUL_CFG", "BN_MUL_SHIFT_VALUE"),
    "sdp_ew_truncate": ("SDP", "D_DP_EW_TRUNCATE_VALUE", "EW_TRUNCATE"),
    "cacc_clip_truncate": ("CACC", "D_CLIP_CFG", "CLIP_TRUNCATE"),
}


@dataclass(frozen=True)
class Statistics:
    """Per-layer statistics of one unit and register group; ``None`` = the unit has no such counter."""

    block: str
    group: int
    lut_le_hit: int | None = None
    lut_lo_hit: int | None = None
    lut_uflow: int | None = None
    lut_oflow: int | None = None
    lut_hybrid: int | None = None
    out_saturation: int | None = None
    nan_input: int | None = None
    inf_input: int | None = None
    nan_output: int | None = None

    def counters(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if k not in ("block", "group") and v is not None}


#: counter name -> (register, field) per unit (semantics doc 8; register names per the .rdl).
_STAT_REGS: dict[str, dict[str, tuple[str, str]]] = {
    "SDP": {
        "lut_le_hit": ("D_PERF_LUT_LE_HIT", "LUT_LE_HIT"),
        "lut_lo_hit": ("D_PERF_LUT_LO_HIT", "LUT_LO_HIT"),
        "lut_uflow": ("D_PERF_LUT_UFLOW", "LUT_UFLOW"),
        "lut_oflow": ("D_PERF_LUT_OFLOW", "LUT_OFLOW"),
        "lut_hybrid": ("D_PERF_LUT_HYBRID", "LUT_HYBRID"),
        "out_saturation": ("D_PERF_OUT_SATURATION", "OUT_SATURATION"),
        "nan_input": ("D_STATUS_NAN_INPUT_NUM", "STATUS_NAN_INPUT_NUM"),
        "inf_input": ("D_STATUS_INF_INPUT_NUM", "STATUS_INF_INPUT_NUM"),
        "nan_output": ("D_STATUS_NAN_OUTPUT_NUM", "STATUS_NAN_OUTPUT_NUM"),
    },
    "CDP": {
        "lut_le_hit": ("D_PERF_LUT_LE_HIT", "PERF_LUT_LE_HIT"),
        "lut_lo_hit": ("D_PERF_LUT_LO_HIT", "PERF_LUT_LO_HIT"),
        "lut_uflow": ("D_PERF_LUT_UFLOW", "PERF_LUT_UFLOW"),
        "lut_oflow": ("D_PERF_LUT_OFLOW", "PERF_LUT_OFLOW"),
        "lut_hybrid": ("D_PERF_LUT_HYBRID", "PERF_LUT_HYBRID"),
        "out_saturation": ("D_OUT_SATURATION", "OUT_SATURATION"),
        "nan_input": ("D_NAN_INPUT_NUM", "NAN_INPUT_NUM"),
        "inf_input": ("D_INF_INPUT_NUM", "INF_INPUT_NUM"),
        "nan_output": ("D_NAN_OUTPUT_NUM", "NAN_OUTPUT_NUM"),
    },
    "PDP": {
        "nan_input": ("D_NAN_INPUT_NUM", "NAN_INPUT_NUM"),
        "inf_input": ("D_INF_INPUT_NUM", "INF_INPUT_NUM"),
        "nan_output": ("D_NAN_OUTPUT_NUM", "NAN_OUTPUT_NUM"),
    },
    "CACC": {"out_saturation": ("D_OUT_SATURATION", "SAT_COUNT")},
}

#: Counters whose RTL value is NOT a per-element count (measured on nv_small_256_full RTL,
#: semantics doc 13): the SDP LUT counters sum flags every clock with no valid qualifier.
RTL_INEXACT: dict[str, frozenset[str]] = {
    "SDP": frozenset({"lut_le_hit", "lut_lo_hit", "lut_uflow", "lut_oflow", "lut_hybrid"}),
}


def golden_counters(stats: Statistics, oracle_kind: str, names: Iterable[str] | None = None) -> dict[str, int]:
    """The counters of ``stats`` (all, or those in ``names``) a golden may record when they were read
    from an oracle of ``oracle_kind`` (``rtl``, ``cmod``, ...): on the RTL, never the
    :data:`RTL_INEXACT` ones, which count clock cycles rather than elements."""
    skip = RTL_INEXACT.get(stats.block, frozenset()) if oracle_kind == "rtl" else frozenset()
    got = stats.counters()
    keys = got if names is None else [k for k in names if k in got]
    return {k: int(got[k]) for k in keys if k not in skip}


@dataclass(frozen=True)
class StatisticsComparison:
    """Counter-by-counter comparison; ``not_comparable`` lists counters the target does not count per element."""

    matched: dict[str, int]
    mismatched: dict[str, tuple[int, int]]  # name -> (expected, actual)
    not_comparable: dict[str, str]  # name -> reason

    @property
    def passed(self) -> bool:
        return not self.mismatched

    def format(self) -> str:
        lines = [f"  {k}: {v} (exact)" for k, v in self.matched.items()]
        lines += [f"  {k}: expected {e}, got {a}  MISMATCH" for k, (e, a) in self.mismatched.items()]
        lines += [f"  {k}: not compared - {why}" for k, why in self.not_comparable.items()]
        return "\n".join(lines)


def _compare_counts(expected: Mapping[str, int], actual: Mapping[str, int | None], inexact: Callable[[str], bool],
                    missing: str) -> StatisticsComparison:
    """Counters or statuses compared one by one: equal, different, or not comparable (``missing``
    when the target did not report it; a counter ``inexact`` says the RTL counts in clock cycles)."""
    matched: dict[str, int] = {}
    mismatched: dict[str, tuple[int, int]] = {}
    skipped: dict[str, str] = {}
    for name, e in expected.items():
        a = actual.get(name)
        if a is None:
            skipped[name] = missing
        elif inexact(name):
            skipped[name] = f"RTL counts clock cycles, not elements (semantics doc 13): expected {e}, target {a}"
        elif a == e:
            matched[name] = e
        else:
            mismatched[name] = (e, a)
    return StatisticsComparison(matched, mismatched, skipped)


def compare_statistics(expected: Statistics, actual: Statistics, *, target_kind: str = "model") -> StatisticsComparison:
    """Compare model statistics with a target's. On RTL targets (``verilator``, ``serial``)
    the counters in :data:`RTL_INEXACT` are reported as not comparable, with the reason."""
    inexact = RTL_INEXACT.get(expected.block, frozenset()) if target_kind in ("verilator", "serial", "rtl") else frozenset()
    return _compare_counts(expected.counters(), actual.counters(), lambda n: n in inexact, "target does not report it")


#: Status registers a layer sets that no unit's :class:`Statistics` holds (semantics doc 3.3, 8.3):
#: ``BLOCK.REGISTER`` -> the field compared. ``SDP.D_STATUS``: EW ALU EQL mode clears
#: STATUS_UNEQUAL of the executing group at layer start and sets it to 1 if any output is non-zero
#: (nothing is written to memory); the SDP_RDMA copies of the FP16 NaN / Inf input counts (the cmod
#: writes these, not the SDP ones; ``SDP_RDMA.D_PERF_ENABLE.PERF_NAN_INF_COUNT_EN``).
STATUS_REGS: dict[str, str] = {
    "SDP.D_STATUS": "STATUS_UNEQUAL",
    "SDP_RDMA.D_STATUS_NAN_INPUT_NUM": "STATUS_NAN_INPUT_NUM",
    "SDP_RDMA.D_STATUS_INF_INPUT_NUM": "STATUS_INF_INPUT_NUM",
}
#: statuses that are the layer's result itself (EQL mode writes no output: the flag is all it computes)
RESULT_STATUSES = frozenset({"SDP.D_STATUS"})


def statistics_register(block: str, counter: str) -> str:
    """``BLOCK.REGISTER`` of one statistics counter of ``block`` (``out_saturation`` ...)."""
    return f"{block}.{_STAT_REGS[block][counter][0]}"


def statistics_registers(block: str) -> list[str]:
    """``BLOCK.REGISTER`` of every statistics counter of ``block`` (none for a block without any)."""
    return [f"{block}.{reg}" for reg, _ in _STAT_REGS.get(block, {}).values()]


def status_names() -> list[str]:
    """Every name a golden's ``statuses`` may hold: :data:`STATUS_REGS` and each unit's
    statistics registers (those of an engine of a fused layer other than the one whose
    ``statistics`` the golden holds: the CACC saturation count of a convolution, ...)."""
    return list(STATUS_REGS) + [f"{b}.{reg}" for b, regs in _STAT_REGS.items() for reg, _ in regs.values()]


def status_field(name: str) -> str:
    """The field compared of status register ``name`` (``BLOCK.REGISTER``); KeyError if it is none."""
    if name in STATUS_REGS:
        return STATUS_REGS[name]
    block, _, reg = name.partition(".")
    for r, f in _STAT_REGS.get(block, {}).values():
        if r == reg:
            return f
    raise KeyError(name)


def _status_inexact(name: str) -> bool:
    """A status register the RTL does not count per element (the SDP LUT counters, :data:`RTL_INEXACT`)."""
    block, _, reg = name.partition(".")
    return any(_STAT_REGS[block][c][0] == reg for c in RTL_INEXACT.get(block, ()) if c in _STAT_REGS.get(block, {}))


def compare_statuses(expected: Mapping[str, int], actual: Mapping[str, int], *,
                     target_kind: str = "model") -> StatisticsComparison:
    """Compare a golden's status registers (``BLOCK.REGISTER`` -> field value) with those read
    back; on RTL targets a counter the RTL does not count per element is not comparable."""
    rtl = target_kind in ("verilator", "serial", "rtl")
    return _compare_counts(expected, actual, lambda n: rtl and _status_inexact(n),
                           "not read back (the layer does not set it on this target)")


def golden_status_values(values: Mapping[str, int], oracle_kind: str) -> dict[str, int]:
    """The status registers of ``values`` a golden may record when read from an oracle of
    ``oracle_kind``: on the RTL never a counter that counts clock cycles rather than elements."""
    return {k: int(v) for k, v in values.items() if not (oracle_kind == "rtl" and _status_inexact(k))}


def _check_signed(what: str, value: int, bits: int) -> int:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        raise FieldRangeError(f"{what} = {value} is outside the signed {bits}-bit range [{lo}, {hi}]")
    return value & ((1 << bits) - 1)


def _check_unsigned(what: str, value: int, bits: int) -> int:
    if not 0 <= value < 1 << bits:
        raise FieldRangeError(f"{what} = {value} is outside the unsigned {bits}-bit range [0, {(1 << bits) - 1}]")
    return value


def _sx(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


#: CDP index selects: the RTL reads only bits 5:0 as signed (semantics doc 6.3), so a
#: portable value lies in -32..31 and bits 7:6 repeat bit 5 (what the C model needs too).
_SELECT_RANGE = {"SDP": (-128, 127), "CDP": (-32, 31)}


def _check_select(what: str, value: int, unit: str) -> int:
    lo, hi = _SELECT_RANGE[unit]
    if not lo <= value <= hi:
        raise FieldRangeError(f"{what} = {value} is outside [{lo}, {hi}] on {unit} (the bits the hardware reads)")
    return value & 0xFF


def lut_register_fields(unit: str, cfg: LutConfig) -> dict[str, dict[str, int]]:
    """LUT registers of ``unit`` (``SDP``/``CDP``) -> {field: raw unsigned value} for ``cfg``.

    Signed values become two's complement in the field: index offset 8 bits, selects 8 bits
    (CDP: -32..31), starts/ends 32 bits (SDP) or 38 bits split into ``*_LOW``/``*_HIGH`` (CDP),
    slope scales 16 bits, slope shifts 5 bits. Raises FieldRangeError naming the field."""
    unit = unit.upper()
    if unit not in LUT_UNITS:
        raise RegisterMapError(f"no LUT in unit {unit!r}; LUT units: {', '.join(LUT_UNITS)}")
    regs: dict[str, dict[str, int]] = {
        "S_LUT_CFG": {
            "LUT_LE_FUNCTION": 0 if cfg.le_function == "exponent" else 1,
            "LUT_UFLOW_PRIORITY": 0 if cfg.uflow_priority == "LE" else 1,
            "LUT_OFLOW_PRIORITY": 0 if cfg.oflow_priority == "LE" else 1,
            "LUT_HYBRID_PRIORITY": 0 if cfg.hybrid_priority == "LE" else 1,
        },
        "S_LUT_INFO": {
            "LUT_LE_INDEX_OFFSET": _check_signed("LUT_LE_INDEX_OFFSET", cfg.le_index_offset, 8),
            "LUT_LE_INDEX_SELECT": _check_select("LUT_LE_INDEX_SELECT", cfg.le_index_select, unit),
            "LUT_LO_INDEX_SELECT": _check_select("LUT_LO_INDEX_SELECT", cfg.lo_index_select, unit),
        },
    }
    for tbl in ("le", "lo"):
        T = tbl.upper()
        regs[f"S_LUT_{T}_SLOPE_SCALE"] = {
            f"LUT_{T}_SLOPE_{K}_SCALE": _check_signed(f"LUT_{T}_SLOPE_{K}_SCALE", getattr(cfg, f"{tbl}_slope_{k}_scale"), 16)
            for k, K in (("uflow", "UFLOW"), ("oflow", "OFLOW"))
        }
        regs[f"S_LUT_{T}_SLOPE_SHIFT"] = {
            f"LUT_{T}_SLOPE_{K}_SHIFT": _check_signed(f"LUT_{T}_SLOPE_{K}_SHIFT", getattr(cfg, f"{tbl}_slope_{k}_shift"), 5)
            for k, K in (("uflow", "UFLOW"), ("oflow", "OFLOW"))
        }
        for edge in ("start", "end"):
            v = getattr(cfg, f"{tbl}_{edge}")
            E = edge.upper()
            if unit == "SDP":
                regs[f"S_LUT_{T}_{E}"] = {f"LUT_{T}_{E}": _check_signed(f"LUT_{T}_{E}", v, 32)}
            else:
                raw = _check_signed(f"LUT_{T}_{E}", v, 38)
                regs[f"S_LUT_{T}_{E}_LOW"] = {f"LUT_{T}_{E}_LOW": raw & 0xFFFFFFFF}
                regs[f"S_LUT_{T}_{E}_HIGH"] = {f"LUT_{T}_{E}_HIGH": raw >> 32}
    return regs


class RegisterDriver(Protocol):
    """What the precision API needs of a driver. :class:`~nvdla_hil.drivers.driver.NvdlaDriver`
    provides it and builds a :class:`PrecisionControl` for its ``precision`` attribute, so this
    module names the interface instead of importing the driver (which imports this module)."""

    @property
    def profile(self) -> HardwareProfile: ...

    @property
    def transport(self) -> Transport: ...

    def register(self, name: str | tuple[str, str], reg: str | None = None) -> Register: ...

    def write(self, name: str | tuple[str, str], value: int, reg: str | None = None, *,
              verify: bool = False, posted: bool = True) -> None: ...

    def read_field(self, name: str | tuple[str, str], field: str, reg: str | None = None) -> int: ...

    def encode(self, name: str | tuple[str, str], fields: Mapping[str, int | str], *,
               base: int | None = None, reg: str | None = None) -> int: ...

    def write_fields(self, name: str | tuple[str, str], reg: str | None = None, *,
                     verify: bool = False, **fields: int | str) -> int: ...

    def set_fields(self, name: str | tuple[str, str], fields: Mapping[str, int | str], reg: str | None = None, *,
                   verify: bool = False) -> int: ...

    def producer_group(self, block: str) -> int: ...

    def group(self, block: str, group: int) -> AbstractContextManager[None]: ...


class PrecisionControl:
    """LUT, convertor, truncation and statistics access through a driver."""

    def __init__(self, driver: RegisterDriver) -> None:
        self.drv = driver

    # ---- LUT tables ---------------------------------------------------------------
    def _lut_unit(self, unit: str, force: bool) -> str:
        unit = unit.upper()
        if unit not in LUT_UNITS:
            raise RegisterMapError(f"no LUT in unit {unit!r}; LUT units: {', '.join(LUT_UNITS)}")
        if unit == "SDP" and not force:
            self.drv.profile.require("sdp_lut")
        return unit

    def load_lut(self, unit: str, table: str, values: np.ndarray | list[int], *, force: bool = False) -> None:
        """Write a whole LE (65) or LO (257) table through S_LUT_ACCESS_CFG/DATA.

        One CFG write (address 0, table id, WRITE) then one DATA write per entry
        as a fixed-address burst; the hardware auto-increments the address (semantics doc 7).
        Values are 16-bit (signed -32768..32767 or raw 0..65535). A transport that verifies
        (the serial link's ``verify`` policy) reads the table back and reloads it on a mismatch."""
        unit = self._lut_unit(unit, force)
        table = table.upper()
        n = LUT_SIZES.get(table)
        if n is None:
            raise RegisterMapError(f"unknown LUT table {table!r}; tables: LE (65 entries), LO (257 entries)")
        arr = np.asarray(values, dtype=np.int64).ravel()
        if arr.size != n:
            raise FieldRangeError(f"{unit} {table} table needs {n} entries, got {arr.size}")
        bad = np.flatnonzero((arr < -32768) | (arr > 65535))
        if bad.size:
            raise FieldRangeError(f"{unit} {table}[{bad[0]}] = {arr[bad[0]]} does not fit 16 bits")
        self._write_lut_unit(unit, self._lut_cfg(unit, table, "WRITE"), (arr & 0xFFFF).tolist())

    def write_lut_run(self, unit: str, cfg_value: int, values: Sequence[int]) -> bool:
        """Replay a raw LUT programming run (one S_LUT_ACCESS_CFG write, then DATA writes, as
        NVDLA's traces program it) as one indirect-port unit, read back through the same CFG
        with LUT_ACCESS_TYPE=READ, so a verifying transport proves the payload that raw port
        writes cannot. Returns False, having written nothing, when the run is not a table
        write that fits from its LUT_ADDR (or the profile has no such LUT): the caller then
        replays it register by register."""
        unit = unit.upper()
        if unit not in LUT_UNITS or (unit == "SDP" and not self.drv.profile.has("sdp_lut")):
            return False
        cfg = self.drv.register(unit, "S_LUT_ACCESS_CFG")
        f = cfg.decode(cfg_value)
        if f["LUT_ACCESS_TYPE"] != cfg.field("LUT_ACCESS_TYPE").encode("WRITE"):
            return False
        table = "LO" if f["LUT_TABLE_ID"] == cfg.field("LUT_TABLE_ID").encode("LO") else "LE"
        if not values or f["LUT_ADDR"] + len(values) > LUT_SIZES[table]:
            return False
        self._write_lut_unit(unit, cfg_value, list(values))
        return True

    def _write_lut_unit(self, unit: str, cfg_value: int, values: list[int]) -> None:
        """CFG (a WRITE access) then DATA writes as one indirect-port unit, read back through
        the same CFG with LUT_ACCESS_TYPE=READ on a transport that verifies."""
        cfg = self.drv.register(unit, "S_LUT_ACCESS_CFG")
        data = self.drv.register(unit, "S_LUT_ACCESS_DATA")
        self.drv.transport.write_indirect(
            cfg.address, cfg_value, data.address, values,
            readback_index=cfg.encode(base=cfg_value, LUT_ACCESS_TYPE="READ"), mask=data.field("LUT_DATA").mask,
        )

    def _lut_cfg(self, unit: str, table: str, access: str) -> int:
        return self.drv.encode((unit, "S_LUT_ACCESS_CFG"), {"LUT_ADDR": 0, "LUT_TABLE_ID": table, "LUT_ACCESS_TYPE": access})

    def read_lut(self, unit: str, table: str, *, force: bool = False) -> np.ndarray:
        """Read a whole table back (CFG READ at address 0, then one DATA read
        per entry, auto-increment). Returns int16."""
        unit = self._lut_unit(unit, force)
        table = table.upper()
        n = LUT_SIZES.get(table)
        if n is None:
            raise RegisterMapError(f"unknown LUT table {table!r}; tables: LE (65 entries), LO (257 entries)")
        cfg = self.drv.register(unit, "S_LUT_ACCESS_CFG")
        data = self.drv.register(unit, "S_LUT_ACCESS_DATA")
        words = self.drv.transport.read_indirect(cfg.address, self._lut_cfg(unit, table, "READ"), data.address, n)
        return (np.asarray(words, dtype=np.uint32) & 0xFFFF).astype(np.uint16).view(np.int16)

    def verify_lut(self, unit: str, table: str, expected: np.ndarray | list[int], *, force: bool = False) -> list[int]:
        """Read a table back and return the indices that differ from ``expected`` (empty = OK)."""
        got = self.read_lut(unit, table, force=force).astype(np.int64) & 0xFFFF
        exp = np.asarray(expected, dtype=np.int64) & 0xFFFF
        return [int(i) for i in np.flatnonzero(got != exp)]

    # ---- LUT registers ---------------------------------------------------------------
    def lut_registers(self, unit: str, cfg: LutConfig) -> dict[str, dict[str, int]]:
        """Register -> {field: raw value} for ``cfg`` on ``unit`` (range-checked)."""
        return lut_register_fields(unit, cfg)

    def configure_lut(self, unit: str, cfg: LutConfig, *, force: bool = False) -> None:
        """Program every LUT configuration register of ``unit`` from ``cfg``."""
        unit = self._lut_unit(unit, force)
        for reg, flds in lut_register_fields(unit, cfg).items():
            self.drv.write((unit, reg), self.drv.encode((unit, reg), flds, base=0))

    def read_lut_config(self, unit: str, *, force: bool = False) -> LutConfig:
        """Decode the LUT configuration registers of ``unit`` into a :class:`LutConfig`."""
        unit = self._lut_unit(unit, force)
        return lut_config_from_fields(unit, lambda reg, fld: self.drv.read_field((unit, reg), fld))

    # ---- convertors and truncation ------------------------------------------------------
    def set_convertor(self, name: str, setting: ConvertorSetting, *, enable: bool = True) -> None:
        """Program one convertor instance (see :data:`CONVERTORS`) with range checks on
        the widths the datapath really uses."""
        c = self._cvt(name)
        self.drv.set_fields((c.block, c.offset[0]), {c.offset[1]: _check_signed(f"{name} offset", setting.offset, c.offset_bits)})
        self.drv.set_fields((c.block, c.scale[0]), {c.scale[1]: _check_signed(f"{name} scale", setting.scale, c.scale_bits)})
        extra = {"CVT_EN": int(enable)} if name == "cdma" else {}
        self.drv.set_fields((c.block, c.shift[0]), {c.shift[1]: _check_unsigned(f"{name} shift", setting.shift, c.shift_bits), **extra})

    def get_convertor(self, name: str) -> ConvertorSetting:
        c = self._cvt(name)
        return ConvertorSetting(
            offset=_sx(self.drv.read_field((c.block, c.offset[0]), c.offset[1]), c.offset_bits),
            scale=_sx(self.drv.read_field((c.block, c.scale[0]), c.scale[1]), c.scale_bits),
            shift=self.drv.read_field((c.block, c.shift[0]), c.shift[1]) & ((1 << c.shift_bits) - 1),
        )

    def _cvt(self, name: str) -> _CvtRegs:
        try:
            return CONVERTORS[name]
        except KeyError:
            raise RegisterMapError(f"unknown convertor {name!r}; convertors: {', '.join(CONVERTORS)}") from None

    def set_truncation(self, name: str, shift: int) -> None:
        try:
            block, reg, fld = TRUNCATIONS[name]
        except KeyError:
            raise RegisterMapError(f"unknown truncation {name!r}; truncations: {', '.join(TRUNCATIONS)}") from None
        self.drv.set_fields((block, reg), {fld: shift})

    def get_truncation(self, name: str) -> int:
        block, reg, fld = TRUNCATIONS[name]
        return self.drv.read_field((block, reg), fld)

    # ---- statistics ------------------------------------------------------------------------
    def enable_statistics(self, unit: str) -> None:
        """Turn on every precision counter enable of ``unit`` in the producer group."""
        unit = unit.upper()
        if unit == "SDP":
            self.drv.write_fields(("SDP", "D_PERF_ENABLE"), PERF_LUT_EN=1, PERF_SAT_EN=1, PERF_NAN_INF_COUNT_EN=1)
        elif unit == "CDP":
            self.drv.write_fields(("CDP", "D_PERF_ENABLE"), LUT_EN=1)

    def read_statistics(self, unit: str, group: int | None = None) -> Statistics:
        """Read one unit's statistics registers of ``group`` (default: the group that ran last,
        S_POINTER.CONSUMER's previous value is not visible, so pass the group you launched)."""
        unit = unit.upper()
        regs = _STAT_REGS.get(unit)
        if regs is None:
            raise RegisterMapError(f"unit {unit!r} has no statistics; units: {', '.join(_STAT_REGS)}")
        producer = self.drv.producer_group(unit)
        if group is None:
            group = producer
        values: dict[str, int] = {}
        # the registers of ``group`` (CSB accesses reach the producer group: switched for the reads)
        with self.drv.group(unit, group) if group != producer else nullcontext():
            for name, (reg, fld) in regs.items():
                try:
                    values[name] = self.drv.read_field((unit, reg), fld)
                except RegisterMapError:
                    continue
        return Statistics(block=unit, group=group, **values)

    def read_statuses(self, names: Iterable[str], groups: Mapping[str, int]) -> dict[str, int]:
        """Read status registers (``BLOCK.REGISTER``, :func:`status_names`) of the group each
        block ran (``groups``: block -> group); a block without a group, or a register the
        profile lacks, is left out."""
        out: dict[str, int] = {}
        by_block: dict[str, list[str]] = {}
        for n in names:
            by_block.setdefault(n.partition(".")[0], []).append(n)
        for block, regs in by_block.items():
            if block not in groups:
                continue
            try:
                producer = self.drv.producer_group(block)
            except RegisterMapError:
                continue
            group = groups[block]
            with self.drv.group(block, group) if group != producer else nullcontext():
                for n in regs:
                    try:
                        out[n] = self.drv.read_field(n, status_field(n))
                    except (RegisterMapError, KeyError):
                        continue
        return out
