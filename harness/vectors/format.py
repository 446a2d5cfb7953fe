"""The packed test-vector format (``testvectors/README.md``): its constants, the error every
malformed case raises, and the loaded case's data model (:class:`Case` and its surfaces)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError
from ...drivers.precision import ConvertorSetting, LutConfig

#: what output surfaces hold before a run (``execute_case``); a byte a layer leaves alone keeps it,
#: and the goldens record it so
POISON_BYTE = 0xA5
#: format 2 added the required ``golden_source`` (where the goldens came from); format 1 had none and
#: is refused with the way to migrate (a case cannot say whether it was checked against an oracle)
FORMAT = "nvdla-hil-vector/2"
FORMAT_V1 = "nvdla-hil-vector/1"
MANIFEST = "case.yaml"
MAX_BLOB_BYTES = 64 << 20
MAX_MANIFEST_BYTES = 4 << 20
DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float16", "float32")
PORTS = ("pri_mem", "sec_mem")
LAYER_UNITS = ("SDP", "CDP", "PDP", "CONV")
#: D_OP_ENABLE writes per unit, RDMA engine first (as NVDLA's own traces do). CONV is a flying
#: convolution layer (CDMA -> CSC -> CMAC -> CACC -> SDP): the dc_* traces enable SDP, CACC,
#: CMAC_A, CMAC_B, CSC and CDMA last; a case whose SDP reads operands lists SDP_RDMA first in ``launch``
DEFAULT_LAUNCH = {"SDP": ("SDP_RDMA", "SDP"), "CDP": ("CDP_RDMA", "CDP"), "PDP": ("PDP",),
                  "CONV": ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")}
#: the block whose S_POINTER / done interrupt / statistics stand for the unit (CONV: SDP writes the output)
DONE_UNIT = {"SDP": "SDP", "CDP": "CDP", "PDP": "PDP", "CONV": "SDP"}
#: CSB block whose presence in the profile gives the unit
UNIT_BLOCK = {"SDP": "SDP", "CDP": "CDP", "PDP": "PDP", "CONV": "CDMA"}
#: registers the runner owns: the manifest may not write them
RESERVED = ("S_POINTER", "D_OP_ENABLE", "S_LUT_ACCESS_CFG", "S_LUT_ACCESS_DATA")
RAW_LAYOUT = "raw"

TOP_LAYER = {"format", "name", "kind", "description", "unit", "profile", "features", "launch", "registers",
              "lut", "convertors", "inputs", "outputs", "statistics", "golden_source", "provenance"}
TOP_LAYOUT = {"format", "name", "kind", "description", "family", "profile", "layout", "golden_source", "provenance"}
SURFACE_IN = {"name", "layout", "params", "dtype", "shape", "address", "port", "data"}
SURFACE_OUT = {"name", "layout", "params", "dtype", "shape", "address", "port", "expected", "crc", "rule",
                "rule_params"}
PROVENANCE_KEYS = {"generator", "suite", "seed", "index", "draw", "redrawn", "model_version", "semantics", "note"}
#: ``golden_source.kind``: where a case's goldens came from. rtl: NVDLA's RTL (a simulator build or a
#: board); cmod: NVDLA's C model; seed: a fact of a seed document (worked example); hand: a
#: hand-worked example; model: this project's reference model itself (self-consistency, no oracle)
GOLDEN_KINDS = ("rtl", "cmod", "seed", "hand", "model")
ORACLE_KINDS = ("rtl", "cmod", "seed", "hand")
#: per kind: (required keys, optional keys); every value a non-empty string except model's ``oracle: false``
GOLDEN_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rtl": (("config", "build_key"), ("simulator", "note")),
    "cmod": (("config", "flavor", "build_key"), ("checkout", "revision", "systemc", "note")),
    "seed": (("document", "section"), ("note",)),
    "hand": (("description",), ("note",)),
    "model": (("oracle", "reason"), ("note",)),
}
GOLDEN_MAX_CHARS = 2000


class VectorError(InputError):
    """A malformed test-vector case; the message names the file and the field."""

    def __init__(self, path: Path | str, fieldname: str | None, message: str) -> None:
        where = f"{path}: {fieldname}" if fieldname else str(path)
        super().__init__(f"{where}: {message}")
        self.path, self.field = str(path), fieldname


# ---- case model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RegisterSetting:
    """One register write of the case: full name, the 32-bit value, and the fields as written."""

    name: str
    value: int
    fields: dict[str, int | str] | None = None


@dataclass(frozen=True)
class LutSetting:
    unit: str
    config: LutConfig
    le: np.ndarray | None  # int16 (65,)
    lo: np.ndarray | None  # int16 (257,)


@dataclass(frozen=True)
class Surface:
    """An input or output tensor in memory. ``data`` = logical input array; ``packed`` = its
    memory image (inputs) or the golden image (outputs with a blob); ``crc`` = zlib CRC-32 of
    the golden image when only a CRC is stored."""

    name: str
    layout: str
    params: dict[str, Any]
    dtype: np.dtype
    shape: tuple[int, ...]
    address: int
    port: str
    nbytes: int
    data: np.ndarray | None = None
    packed: np.ndarray | None = None
    crc: int | None = None
    rule: str = "bitexact"
    rule_params: dict[str, Any] = field(default_factory=dict)
    blob: str | None = None  # file name of the blob (for show/diff)


@dataclass(frozen=True)
class LayoutPair:
    """Layout round-trip case: ``array`` packs to ``packed`` and ``packed`` unpacks to ``array``."""

    layout: str
    params: dict[str, Any]
    dtype: np.dtype
    shape: tuple[int, ...]
    array: np.ndarray
    packed: np.ndarray
    array_blob: str
    packed_blob: str


@dataclass(frozen=True)
class Case:
    path: Path  # the manifest
    name: str
    kind: str  # layer | layout
    profile: str | None
    features: frozenset[str]
    description: str = ""
    unit: str | None = None
    launch: tuple[str, ...] = ()
    registers: tuple[RegisterSetting, ...] = ()
    lut: LutSetting | None = None
    convertors: dict[str, ConvertorSetting] = field(default_factory=dict)
    inputs: tuple[Surface, ...] = ()
    outputs: tuple[Surface, ...] = ()
    statistics: dict[str, int] | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    golden_source: dict[str, Any] = field(default_factory=dict)
    layout: LayoutPair | None = None
    family: str | None = None
    manifest: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def golden_kind(self) -> str:
        """``golden_source.kind`` (rtl, cmod, seed, hand, model)."""
        return str(self.golden_source.get("kind", "model"))

    @property
    def oracle_checked(self) -> bool:
        """True when the goldens come from an oracle (not from the reference model itself)."""
        return self.golden_kind in ORACLE_KINDS



class Hex(int):
    """An integer written in hexadecimal in a manifest (addresses)."""

