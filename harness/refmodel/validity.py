"""Precision-conversion validity tables of seed 000 ("Precision Conversion").

Rules (seed 000):
* the convolution pipeline converts precision only in image input mode: integer images to any of
  int8/int16/fp16, floating-point images to fp16 only; direct and Winograd convolution of feature
  data do not convert;
* SDP (offline mode) converts freely int16 <-> fp16 and int8 <-> int16 (table below); in
  on-the-fly mode "the input precision and output precision should have the same bit-depth";
* LRN (CDP) and pooling (PDP) do not convert at all.

``check_precisions`` validates one (unit, input, output) triple against the tables and returns
the table row; ``check_config`` reads the precision fields of a programmed layer through a
``field(block, register, field)`` callable (``RegisterView.field``) and validates the units the
caller names (the layer's units; OP_EN is not inspected).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Iterable

__all__ = [
    "InvalidPrecisionConfig", "PrecisionRow", "TABLES", "PRECISION_CODES", "FLOAT_PIXEL_FORMATS",
    "check_precisions", "check_config",
]


class InvalidPrecisionConfig(ValueError):
    """A precision combination the seed 000 tables mark as invalid. The message names the table
    and the row, e.g. ``seed 000, SDP conversion table: input INT8 -> output FP16 is not
    supported``."""


@dataclass(frozen=True)
class PrecisionRow:
    """One row of a seed 000 conversion table. ``pipeline`` is the "real precision in
    pipeline" column (None = invalid case); ``weight`` is the weight precision (convolution)."""

    table: str
    input: str
    output: str
    pipeline: str | None
    weight: str | None = None

    @property
    def valid(self) -> bool:
        return self.pipeline is not None


_INVALID = None

#: (input format, configured output precision) -> (real precision in pipeline, weight precision)
_CONV = {
    ("image_int", "int8"): ("int8", "int8"),
    ("image_int", "int16"): ("int16", "int16"),
    ("image_int", "fp16"): ("fp16", "fp16"),
    ("image_fp16", "int8"): (_INVALID, _INVALID),
    ("image_fp16", "int16"): (_INVALID, _INVALID),
    ("image_fp16", "fp16"): ("fp16", "fp16"),
    ("int8", "int8"): ("int8", "int8"),
    ("int8", "int16"): (_INVALID, _INVALID),
    ("int8", "fp16"): (_INVALID, _INVALID),
    ("int16", "int8"): (_INVALID, _INVALID),
    ("int16", "int16"): ("int16", "int16"),
    ("int16", "fp16"): (_INVALID, _INVALID),
    ("fp16", "int8"): (_INVALID, _INVALID),
    ("fp16", "int16"): (_INVALID, _INVALID),
    ("fp16", "fp16"): ("fp16", "fp16"),
}

_SDP = {
    ("int8", "int8"): "int32",
    ("int8", "int16"): "int32",
    ("int8", "fp16"): _INVALID,
    ("int16", "int8"): "int32",
    ("int16", "int16"): "int32",
    ("int16", "fp16"): "int32",
    ("fp16", "int8"): _INVALID,
    ("fp16", "int16"): "fp32",
    ("fp16", "fp16"): "fp32",
}

# LRN and pooling: no conversion. The seed's pooling table prints the int8 -> fp16 row as a
# second "int16" row; the rule text ("does not support any precision conversion") settles it.
_SAME = {(i, o): (i if i == o else _INVALID) for i in ("int8", "int16", "fp16") for o in ("int8", "int16", "fp16")}

_TABLE_NAMES = {
    "conv": "convolution conversion table",
    "sdp": "SDP conversion table",
    "cdp": "LRN (CDP) conversion table",
    "pdp": "pooling (PDP) conversion table",
}


def _rows() -> dict[str, dict[tuple[str, str], PrecisionRow]]:
    t: dict[str, dict[tuple[str, str], PrecisionRow]] = {}
    t["conv"] = {k: PrecisionRow(_TABLE_NAMES["conv"], k[0], k[1], v[0], v[1]) for k, v in _CONV.items()}
    t["sdp"] = {k: PrecisionRow(_TABLE_NAMES["sdp"], k[0], k[1], v) for k, v in _SDP.items()}
    t["cdp"] = {k: PrecisionRow(_TABLE_NAMES["cdp"], k[0], k[1], v) for k, v in _SAME.items()}
    t["pdp"] = {k: PrecisionRow(_TABLE_NAMES["pdp"], k[0], k[1], v) for k, v in _SAME.items()}
    return t


#: unit -> {(input, output): PrecisionRow}
TABLES: dict[str, dict[tuple[str, str], PrecisionRow]] = _rows()

#: register encoding of every *_PRECISION / *_DATA_TYPE / INPUT_DATA field
PRECISION_CODES = {0: "int8", 1: "int16", 2: "fp16"}

#: CDMA D_DATAIN_FORMAT.PIXEL_FORMAT codes of floating-point pixel formats (NVDLA_CDMA.rdl)
FLOAT_PIXEL_FORMATS = {5: "T_R16_F", 8: "T_A16B16G16R16_F", 11: "T_A16Y16U16V16_F"}

_BITS = {"int8": 8, "int16": 16, "fp16": 16}
_IMAGE_INT_ALIASES = {"image_int", "image_uint8", "image_int8", "image_int16", "image_uint16"}


def _norm(p: str | int, what: str) -> str:
    if isinstance(p, int):
        try:
            return PRECISION_CODES[p]
        except KeyError:
            raise InvalidPrecisionConfig(f"{what} precision code {p} is not INT8(0)/INT16(1)/FP16(2)") from None
    s = str(p).lower()
    return s


def _fail(row: PrecisionRow, extra: str = "") -> InvalidPrecisionConfig:
    inp = row.input.replace("image_int", "integer image").replace("image_fp16", "FP16 image")
    inp = inp.upper() if not inp.endswith("image") else inp
    msg = f"seed 000, {row.table[0].upper() + row.table[1:]}: input {inp} -> output {row.output.upper()} is not supported"
    return InvalidPrecisionConfig(msg + extra)


def check_precisions(unit: str, in_precision: str | int, out_precision: str | int, *,
                     proc_precision: str | int | None = None, mode: str = "feature",
                     flying: bool = False, weight_precision: str | int | None = None) -> PrecisionRow:
    """Validate one conversion against the seed 000 table of ``unit`` and return its row.

    ``unit``: ``"conv"``, ``"sdp"``, ``"cdp"``/``"lrn"``, ``"pdp"``/``"pooling"``.
    Precisions are ``"int8"``/``"int16"``/``"fp16"`` or the register codes 0/1/2.
    Convolution: ``mode`` is ``"feature"`` (direct or Winograd) or ``"image"``; in image mode an
    integer ``in_precision`` (``int8``/``int16``, any integer pixel) selects the "image input
    (uint8/int16/uint16)" rows and ``fp16`` the "image input (fp16)" rows; ``out_precision`` is
    the configured (CDMA PROC_)precision; ``weight_precision`` when given must equal the row's.
    SDP: ``flying`` applies the on-the-fly rule (same bit depth); ``proc_precision`` when given
    must be FP16 for FP16 input and an integer type otherwise (the seed: for int8 <-> int16
    conversion the processing precision "is always INT8"; the input precision is accepted too).
    Raises ``InvalidPrecisionConfig`` naming the table and row.
    """
    u = {"lrn": "cdp", "pooling": "pdp", "convolution": "conv"}.get(unit.lower(), unit.lower())
    if u not in TABLES:
        raise ValueError(f"unknown unit {unit!r}; expected conv, sdp, cdp or pdp")
    i = _norm(in_precision, "input")
    o = _norm(out_precision, "output")
    if u == "conv":
        if mode not in ("feature", "image"):
            raise ValueError(f"conv mode must be 'feature' or 'image', not {mode!r}")
        if mode == "image":
            if i in ("fp16", "image_fp16"):
                i = "image_fp16"
            elif i in _IMAGE_INT_ALIASES or i in ("int8", "int16", "uint8", "uint16"):
                i = "image_int"
    row = TABLES[u].get((i, o))
    if row is None:
        raise InvalidPrecisionConfig(
            f"seed 000, {_TABLE_NAMES[u]}: no row for input {i!r} -> output {o!r}")
    if not row.valid:
        raise _fail(row)
    if u == "sdp" and flying and _BITS[i] != _BITS[o]:
        raise InvalidPrecisionConfig(
            f"seed 000, SDP on-the-fly rule: input {i.upper()} -> output {o.upper()} changes the bit depth "
            f"({_BITS[i]} -> {_BITS[o]}); on-the-fly conversion must keep it")
    if proc_precision is not None:
        p = _norm(proc_precision, "processing")
        if u == "sdp":
            allowed = {"fp16"} if i == "fp16" else ({i, "int8"} if {i, o} == {"int8", "int16"} else {i})
        else:
            allowed = {o if u == "conv" else i}
        if p not in allowed:
            raise InvalidPrecisionConfig(
                f"seed 000, {_TABLE_NAMES[u]}: input {i.upper()} -> output {o.upper()} needs processing "
                f"precision {'/'.join(sorted(x.upper() for x in allowed))}, got {p.upper()}")
    if weight_precision is not None and u == "conv":
        w = _norm(weight_precision, "weight")
        if w != row.weight:
            raise InvalidPrecisionConfig(
                f"seed 000, {_TABLE_NAMES[u]}: input {i} -> output {o.upper()} needs weight precision "
                f"{str(row.weight).upper()}, got {w.upper()}")
    return row


Field = Callable[[str, str, str], int]


def _code(field: Field, block: str, reg: str, name: str) -> str:
    v = int(field(block, reg, name))
    try:
        return PRECISION_CODES[v]
    except KeyError:
        raise InvalidPrecisionConfig(
            f"{block}.{reg}.{name} = {v} is not a precision code (INT8=0, INT16=1, FP16=2)") from None


def _same(field: Field, a: tuple[str, str, str], b: tuple[str, str, str]) -> None:
    va, vb = _code(field, *a), _code(field, *b)
    if va != vb:
        raise InvalidPrecisionConfig(
            f"{'.'.join(a)} = {va.upper()} but {'.'.join(b)} = {vb.upper()}; they must agree")


def check_config(field: Field, units: Iterable[str] = ("sdp",)) -> dict[str, PrecisionRow]:
    """Validate the precision fields of a programmed layer, read through
    ``field(block, register, field) -> int`` (e.g. ``RegisterView.field``).

    Per unit (register names as in NVDLA_*.rdl):
    * ``conv``: CDMA D_MISC_CFG.IN_PRECISION/PROC_PRECISION, D_DATAIN_FORMAT.DATAIN_FORMAT
      (PIXEL = image mode) and PIXEL_FORMAT (float formats -> FP16 image); every engine of
      the pipeline must agree with CDMA: CSC IN/PROC_PRECISION, CMAC_A/CMAC_B/CACC
      PROC_PRECISION, and CONV_MODE of CSC/CMAC_A/CMAC_B/CACC (each engine is programmed
      separately; a lone INT16 in CMAC would otherwise go unnoticed).
    * ``sdp``: SDP.D_DATA_FORMAT.PROC_PRECISION/OUT_PRECISION and D_FEATURE_MODE_CFG.FLYING_MODE;
      input = SDP_RDMA D_FEATURE_MODE_CFG.IN_PRECISION (offline) or CACC PROC_PRECISION
      (on the fly); SDP_RDMA PROC/OUT_PRECISION must agree with SDP's.
    * ``cdp``: CDP_RDMA.D_DATA_FORMAT.INPUT_DATA and CDP.D_DATA_FORMAT.INPUT_DATA_TYPE
      (input = output: LRN has no output precision field).
    * ``pdp``: PDP.D_DATA_FORMAT.INPUT_DATA must equal PDP_RDMA.D_DATA_FORMAT.INPUT_DATA (offline)
      or SDP.D_DATA_FORMAT.OUT_PRECISION (D_OPERATION_MODE_CFG.FLYING_MODE = ON_FLYING).
    Returns the matched row per unit; raises ``InvalidPrecisionConfig``.
    """
    out: dict[str, PrecisionRow] = {}
    for unit in units:
        u = unit.lower()
        if u == "conv":
            i = _code(field, "CDMA", "D_MISC_CFG", "IN_PRECISION")
            p = _code(field, "CDMA", "D_MISC_CFG", "PROC_PRECISION")
            image = int(field("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT")) == 1
            if image:
                fmt = int(field("CDMA", "D_DATAIN_FORMAT", "PIXEL_FORMAT"))
                i = "fp16" if fmt in FLOAT_PIXEL_FORMATS else "int8"
            for blk in ("CSC", "CMAC_A", "CMAC_B", "CACC"):
                _same(field, ("CDMA", "D_MISC_CFG", "PROC_PRECISION"), (blk, "D_MISC_CFG", "PROC_PRECISION"))
                ma, mb = int(field("CDMA", "D_MISC_CFG", "CONV_MODE")), int(field(blk, "D_MISC_CFG", "CONV_MODE"))
                if ma != mb:
                    modes = {0: "DIRECT", 1: "WINOGRAD"}
                    raise InvalidPrecisionConfig(f"CDMA.D_MISC_CFG.CONV_MODE = {modes.get(ma, ma)} but {blk}.D_MISC_CFG."
                                                 f"CONV_MODE = {modes.get(mb, mb)}; they must agree")
            _same(field, ("CDMA", "D_MISC_CFG", "IN_PRECISION"), ("CSC", "D_MISC_CFG", "IN_PRECISION"))
            out[u] = check_precisions("conv", i, p, mode="image" if image else "feature")
        elif u == "sdp":
            flying = int(field("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE")) == 1
            p = _code(field, "SDP", "D_DATA_FORMAT", "PROC_PRECISION")
            o = _code(field, "SDP", "D_DATA_FORMAT", "OUT_PRECISION")
            if flying:
                i = _code(field, "CACC", "D_MISC_CFG", "PROC_PRECISION")
            else:
                i = _code(field, "SDP_RDMA", "D_FEATURE_MODE_CFG", "IN_PRECISION")
                _same(field, ("SDP_RDMA", "D_FEATURE_MODE_CFG", "PROC_PRECISION"), ("SDP", "D_DATA_FORMAT", "PROC_PRECISION"))
                _same(field, ("SDP_RDMA", "D_FEATURE_MODE_CFG", "OUT_PRECISION"), ("SDP", "D_DATA_FORMAT", "OUT_PRECISION"))
            out[u] = check_precisions("sdp", i, o, proc_precision=p, flying=flying)
        elif u == "cdp":
            _same(field, ("CDP_RDMA", "D_DATA_FORMAT", "INPUT_DATA"), ("CDP", "D_DATA_FORMAT", "INPUT_DATA_TYPE"))
            i = _code(field, "CDP", "D_DATA_FORMAT", "INPUT_DATA_TYPE")
            out[u] = check_precisions("cdp", i, i)
        elif u == "pdp":
            i = _code(field, "PDP", "D_DATA_FORMAT", "INPUT_DATA")
            on_flying = int(field("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE")) == 0
            if on_flying:  # input comes from SDP's output
                _same(field, ("SDP", "D_DATA_FORMAT", "OUT_PRECISION"), ("PDP", "D_DATA_FORMAT", "INPUT_DATA"))
            else:
                _same(field, ("PDP_RDMA", "D_DATA_FORMAT", "INPUT_DATA"), ("PDP", "D_DATA_FORMAT", "INPUT_DATA"))
            out[u] = check_precisions("pdp", i, i)
        else:
            raise ValueError(f"unknown unit {unit!r}; expected conv, sdp, cdp or pdp")
    return out
