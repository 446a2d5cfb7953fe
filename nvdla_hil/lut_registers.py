"""The LUT register description shared by the driver and the reference model.

SDP and CDP carry the same two-level LUT (LE: 65 entries, LO: 257) configured by the same
``S_LUT_*`` registers; this leaf holds the decoded configuration (:class:`LutConfig`) and the
one decoding of those fields (:func:`lut_config_from_fields`). The driver
(``drivers/precision.py``) encodes and programs a configuration; the model
(``harness/refmodel/lut.py``, ``cdp.py``) decodes the registers of a layer with it. It imports
nothing of the project. Field widths: docs/nvdla-precision-semantics.md sections 5.1 and 6.3,
register names per NVDLA_SDP.rdl / NVDLA_CDP.rdl; seed 003 (LUT programming).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from .semantics import Semantics

__all__ = ["LUT_SIZES", "LUT_UNITS", "LutConfig", "cdp_index_select", "lut_config_from_fields", "sign_extend"]

LUT_SIZES = {"LE": 65, "LO": 257}
LUT_UNITS = ("SDP", "CDP")


@dataclass(frozen=True)
class LutConfig:
    """Decoded LUT register values (signed, mathematical), the same for SDP and CDP.

    ``le_function``: ``"exponent"`` or ``"linear"``. Priorities: ``"LE"`` or ``"LO"``.
    Index offset/selects are signed 8-bit fields (CDP uses only 6 bits of each select,
    semantics doc 6.3). Starts/ends: SDP 32-bit signed, CDP 38-bit signed
    ({*_HIGH[5:0], *_LOW[31:0]}). Slope scales signed 16-bit, slope shifts signed 5-bit.
    """

    le_function: str = "exponent"
    le_index_offset: int = 0
    le_index_select: int = 0
    lo_index_select: int = 0
    le_start: int = 0
    le_end: int = 0
    lo_start: int = 0
    lo_end: int = 0
    le_slope_uflow_scale: int = 0
    le_slope_uflow_shift: int = 0
    le_slope_oflow_scale: int = 0
    le_slope_oflow_shift: int = 0
    lo_slope_uflow_scale: int = 0
    lo_slope_uflow_shift: int = 0
    lo_slope_oflow_scale: int = 0
    lo_slope_oflow_shift: int = 0
    uflow_priority: str = "LE"
    oflow_priority: str = "LE"
    hybrid_priority: str = "LE"

    def __post_init__(self) -> None:
        if self.le_function not in ("exponent", "linear"):
            raise ValueError(f"le_function must be 'exponent' or 'linear', not {self.le_function!r}")
        for p in ("uflow_priority", "oflow_priority", "hybrid_priority"):
            if getattr(self, p) not in ("LE", "LO"):
                raise ValueError(f"{p} must be 'LE' or 'LO', not {getattr(self, p)!r}")


def sign_extend(v: int, bits: int) -> int:
    """The low ``bits`` of ``v`` read as a two's complement number."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def cdp_index_select(byte: int, semantics: Semantics = "rtl", bits: int = 8) -> int:
    """CDP LE/LO index select byte -> signed shift (semantics doc 6.3 [DIFF]).

    INT8 — RTL: bits 5:0 as a 6-bit signed value, bits 7:6 ignored. cmod: sign-extends from
    bit 5 only when bit 5 is set; otherwise the whole (unsigned) byte is the shift.
    INT16 (``bits`` 16) — the same with bit 6: RTL bits 6:0 as a 7-bit signed value
    (``NV_NVDLA_CDP_DP_LUT_CTRL_unit.v`` ``shift_bits_int16_abs``); cmod ``lookup_lut``:
    ``sel & (1 << 6) ? sel | 0xFFFFFF80 : sel``.
    """
    byte &= 0xFF
    sign = 0x20 if bits == 8 else 0x40
    if semantics == "cmod" and not byte & sign:
        return byte
    return sign_extend(byte & (2 * sign - 1), 6 if bits == 8 else 7)


def lut_config_from_fields(unit: str, get: Callable[[str, str], int], *, semantics: Semantics = "rtl",
                           bits: int = 8) -> LutConfig:
    """Decode a unit's LUT fields (read with ``get(register, field)``) as the register-level
    signed values: index offset 8 bits, selects 8 bits (CDP: :func:`cdp_index_select` for
    ``semantics`` and the element width ``bits``; by default bits 5:0, as the RTL reads them on
    INT8), starts/ends 32 bits (SDP) or 38 bits from ``*_HIGH``/``*_LOW`` (CDP), slope scales
    16 bits, slope shifts 5 bits. The inverse is the driver's ``lut_register_fields``."""
    unit = unit.upper()
    kw: dict[str, object] = {
        "le_function": "exponent" if get("S_LUT_CFG", "LUT_LE_FUNCTION") == 0 else "linear",
        "uflow_priority": "LO" if get("S_LUT_CFG", "LUT_UFLOW_PRIORITY") else "LE",
        "oflow_priority": "LO" if get("S_LUT_CFG", "LUT_OFLOW_PRIORITY") else "LE",
        "hybrid_priority": "LO" if get("S_LUT_CFG", "LUT_HYBRID_PRIORITY") else "LE",
        "le_index_offset": sign_extend(get("S_LUT_INFO", "LUT_LE_INDEX_OFFSET"), 8),
    }
    for tbl in ("le", "lo"):
        sel = get("S_LUT_INFO", f"LUT_{tbl.upper()}_INDEX_SELECT")
        kw[f"{tbl}_index_select"] = sign_extend(sel, 8) if unit == "SDP" else cdp_index_select(sel, semantics, bits)
    for tbl in ("le", "lo"):
        T = tbl.upper()
        for kind in ("uflow", "oflow"):
            K = kind.upper()
            kw[f"{tbl}_slope_{kind}_scale"] = sign_extend(get(f"S_LUT_{T}_SLOPE_SCALE", f"LUT_{T}_SLOPE_{K}_SCALE"), 16)
            kw[f"{tbl}_slope_{kind}_shift"] = sign_extend(get(f"S_LUT_{T}_SLOPE_SHIFT", f"LUT_{T}_SLOPE_{K}_SHIFT"), 5)
        for edge in ("start", "end"):
            E = edge.upper()
            if unit == "SDP":
                kw[f"{tbl}_{edge}"] = sign_extend(get(f"S_LUT_{T}_{E}", f"LUT_{T}_{E}"), 32)
            else:
                lo = get(f"S_LUT_{T}_{E}_LOW", f"LUT_{T}_{E}_LOW")
                hi = get(f"S_LUT_{T}_{E}_HIGH", f"LUT_{T}_{E}_HIGH")
                kw[f"{tbl}_{edge}"] = sign_extend((hi << 32) | lo, 38)
    return LutConfig(**kw)  # type: ignore[arg-type]  # field values by name
