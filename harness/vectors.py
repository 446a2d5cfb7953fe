"""Packed test vectors: format, loader and runner (format: ``testvectors/README.md``).

A *case* is a folder holding ``case.yaml`` (the manifest) and raw binary blobs. Two kinds:

* ``layer``: memory-to-memory layer of one unit (SDP, CDP, PDP, or CONV: a flying convolution
  CDMA -> CSC -> CMAC -> CACC -> SDP) on a target. The runner
  loads input surfaces into memory, programs registers (by name), the LUT and convertors
  (through the driver's precision API), launches, waits for the done interrupt, reads the
  output surfaces back, unpacks them and compares them with the golden using the case's
  rule (seed 001); expected statistics are compared with ``compare_statistics``.
* ``layout``: an array and its packed form for one memory layout; the "run" is a pack /
  unpack comparison (no target).

The loader trusts nothing: strict YAML (``drivers/yamlstrict``: safe tags, a duplicate key is an
error naming both lines), blobs are raw bytes (or ``.npy`` whose header is checked against the
file size and :data:`MAX_BLOB_BYTES` before anything is read, ``allow_pickle=False``) confined
to the case folder, every name is checked against the register map / layout registry, every
size against the declared shapes. A bad case raises :class:`VectorError` naming the file and
the field (or line); nothing is half-loaded. Output goldens are compared in full: the
channel-padding lanes of a packed golden are compared byte for byte too (NVDLA writes whole
atoms, and its own traces' CRCs cover those lanes).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import yaml
from numpy.lib import format as npy_format

from ..drivers.driver import NvdlaDriver
from ..drivers.precision import CONVERTORS, ConvertorSetting, LutConfig, PrecisionControl, Statistics, \
    StatisticsComparison, compare_statistics
from ..drivers.profiles import FEATURES, FeatureMissingError, HardwareProfile, ProfileError, load_profile
from ..drivers.regmap import RegisterMapError, UnitNotPresentError
from ..drivers.transport import Transport, TransportError
from ..drivers.yamlstrict import YamlError
from ..drivers.yamlstrict import load as yaml_load_strict
from .compare import RULES, CompareResult, compare
from .memory import KnownMemory, close_record, true_runs
from .refmodel.base import UnitNotModelled

__all__ = [
    "FORMAT",
    "MANIFEST",
    "VectorError",
    "RegisterSetting",
    "LutSetting",
    "Surface",
    "LayoutPair",
    "Case",
    "OutputCheck",
    "CaseResult",
    "load_case",
    "find_cases",
    "run_case",
    "case_features",
    "write_case",
    "bundled_root",
    "packed_size",
    "Hex",
    "pack_surface",
    "unpack_surface",
    "GOLDEN_KINDS",
    "ORACLE_KINDS",
    "golden_source_of",
    "model_golden_source",
]

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
_UNIT_BLOCK = {"SDP": "SDP", "CDP": "CDP", "PDP": "PDP", "CONV": "CDMA"}
#: registers the runner owns: the manifest may not write them
_RESERVED = ("S_POINTER", "D_OP_ENABLE", "S_LUT_ACCESS_CFG", "S_LUT_ACCESS_DATA")
RAW_LAYOUT = "raw"

_TOP_LAYER = {"format", "name", "kind", "description", "unit", "profile", "features", "launch", "registers",
              "lut", "convertors", "inputs", "outputs", "statistics", "golden_source", "provenance"}
_TOP_LAYOUT = {"format", "name", "kind", "description", "family", "profile", "layout", "golden_source", "provenance"}
_SURFACE_IN = {"name", "layout", "params", "dtype", "shape", "address", "port", "data"}
_SURFACE_OUT = {"name", "layout", "params", "dtype", "shape", "address", "port", "expected", "crc", "rule",
                "rule_params"}
_PROV = {"generator", "suite", "seed", "index", "model_version", "semantics", "note"}
#: ``golden_source.kind``: where a case's goldens came from. rtl: NVDLA's RTL (a simulator build or a
#: board); cmod: NVDLA's C model; seed: a fact of a seed document (worked example); hand: a
#: hand-worked example; model: this project's reference model itself (self-consistency, no oracle)
GOLDEN_KINDS = ("rtl", "cmod", "seed", "hand", "model")
ORACLE_KINDS = ("rtl", "cmod", "seed", "hand")
#: per kind: (required keys, optional keys); every value a non-empty string except model's ``oracle: false``
_GOLDEN_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rtl": (("config", "build_key"), ("simulator", "note")),
    "cmod": (("config", "flavor", "build_key"), ("checkout", "revision", "systemc", "note")),
    "seed": (("document", "section"), ("note",)),
    "hand": (("description",), ("note",)),
    "model": (("oracle", "reason"), ("note",)),
}
_GOLDEN_MAX_CHARS = 2000


class VectorError(ValueError):
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


# ---- layouts ----------------------------------------------------------------------------------


def _layout_spec(name: str):  # noqa: ANN202
    from .layouts import get_layout

    return get_layout(name)


def _resolve_params(layout: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if layout == RAW_LAYOUT:
        if params:
            raise ValueError(f"layout 'raw' takes no parameters, got {sorted(params)}")
        return {}
    spec = _layout_spec(layout)
    spec.resolve(params)
    return dict(params)


def pack_surface(layout: str, array: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """Memory image (uint8) of ``array`` in ``layout`` (``raw`` = C-order little-endian bytes)."""
    if layout == RAW_LAYOUT:
        a = np.ascontiguousarray(array)
        return a.astype(a.dtype.newbyteorder("<"), copy=False).reshape(-1).view(np.uint8).copy()
    return _layout_spec(layout).pack(array, **params)


def unpack_surface(layout: str, buf: np.ndarray, shape: tuple[int, ...], dtype: np.dtype,
                   params: Mapping[str, Any]) -> np.ndarray:
    if layout == RAW_LAYOUT:
        n = int(np.prod(shape)) * dtype.itemsize
        return np.frombuffer(np.ascontiguousarray(buf[:n]).tobytes(), dtype=dtype.newbyteorder("<")) \
            .astype(dtype).reshape(shape)
    return _layout_spec(layout).unpack(buf, shape, dtype, **params)


def packed_size(layout: str, shape: tuple[int, ...], dtype: np.dtype, params: Mapping[str, Any]) -> int:
    """Bytes of the memory image of a ``shape``/``dtype`` tensor in ``layout``."""
    return int(pack_surface(layout, np.zeros(shape, dtype=dtype), params).size)


# ---- loader helpers ---------------------------------------------------------------------------


class _Ctx:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.folder = path.parent

    def err(self, fieldname: str | None, msg: str) -> VectorError:
        return VectorError(self.path, fieldname, msg)

    def mapping(self, v: Any, where: str, *, allowed: set[str] | None = None,
                required: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(v, Mapping):
            raise self.err(where, f"expected a mapping, got {type(v).__name__}")
        for k in v:
            if not isinstance(k, str):
                raise self.err(where, f"keys must be strings, got {k!r}")
        if allowed is not None:
            unknown = sorted(set(v) - allowed)
            if unknown:
                raise self.err(f"{where}.{unknown[0]}" if where else unknown[0],
                               f"unknown key; allowed: {', '.join(sorted(allowed))}")
        for k in required:
            if k not in v:
                raise self.err(f"{where}.{k}" if where else k, "missing (required)")
        return dict(v)

    def integer(self, v: Any, where: str, lo: int | None = None, hi: int | None = None) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.err(where, f"expected an integer, got {v!r}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise self.err(where, f"{v} is outside [{lo}, {hi}]")
        return v

    def string(self, v: Any, where: str, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(v, str) or not v:
            raise self.err(where, f"expected a non-empty string, got {v!r}")
        if choices is not None and v not in choices:
            raise self.err(where, f"{v!r} is not one of {', '.join(choices)}")
        return v

    def blob_path(self, rel: Any, where: str) -> Path:
        """A blob file inside the case folder (no absolute path, no '..', no symlink escape)."""
        if not isinstance(rel, str) or not rel:
            raise self.err(where, f"expected a file name relative to the case folder, got {rel!r}")
        p = PurePosixPath(rel)
        if p.is_absolute() or "\\" in rel or rel.startswith("~") or ":" in rel or ".." in p.parts:
            raise self.err(where, f"blob path {rel!r} must be a relative path inside the case folder")
        full = self.folder.joinpath(*p.parts)
        try:
            resolved = full.resolve(strict=True)
        except (OSError, RuntimeError):
            raise self.err(where, f"blob file {rel!r} does not exist") from None
        if not resolved.is_relative_to(self.folder.resolve()):
            raise self.err(where, f"blob path {rel!r} escapes the case folder (symlink to {resolved})")
        if not resolved.is_file():
            raise self.err(where, f"blob {rel!r} is not a regular file")
        if resolved.stat().st_size > MAX_BLOB_BYTES:
            raise self.err(where, f"blob {rel!r} is larger than {MAX_BLOB_BYTES} bytes")
        return resolved

    def npy_header(self, path: Path, rel: str, where: str) -> None:
        """Check a ``.npy`` header before numpy allocates anything: a plain (non-object) dtype and
        a shape whose bytes are exactly what the file holds after the header, within
        :data:`MAX_BLOB_BYTES` (a header may declare 93 GiB in a 128-byte file)."""
        try:
            with path.open("rb") as fh:
                version = npy_format.read_magic(fh)
                if version == (1, 0):
                    shape, _fortran, dt = npy_format.read_array_header_1_0(fh)
                elif version in ((2, 0), (3, 0)):
                    # 3.0 is 2.0 with a utf-8 header (numpy 2 has no public 3.0 reader; its private
                    # format._read_array_header is gone); latin-1 decoding still parses it
                    shape, _fortran, dt = npy_format.read_array_header_2_0(fh)
                else:
                    raise ValueError(f"unsupported .npy version {version}")
                offset = fh.tell()
        except (ValueError, OSError, SyntaxError, TypeError, KeyError, EOFError, AttributeError) as e:
            raise self.err(where, f"cannot read {rel!r} as .npy: bad header ({e})") from None
        if dt.hasobject:
            raise self.err(where, f"{rel!r}: object arrays are not allowed")
        if not isinstance(shape, tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise self.err(where, f"{rel!r}: bad shape {shape!r} in the .npy header")
        n = dt.itemsize
        for d in shape:
            n *= d
        if n > MAX_BLOB_BYTES:
            raise self.err(where, f"{rel!r}: the .npy header declares {n} bytes (shape {list(shape)} of {dt}), "
                                  f"more than {MAX_BLOB_BYTES}; refused")
        size = path.stat().st_size
        if offset + n != size:
            raise self.err(where, f"{rel!r}: the .npy header declares {n} bytes of data but the file holds "
                                  f"{size - offset}")

    def blob(self, rel: Any, where: str, dtype: np.dtype, shape: tuple[int, ...] | None) -> np.ndarray:
        """Read a blob: ``.npy`` (no pickle; dtype/shape must match) or raw little-endian bytes."""
        path = self.blob_path(rel, where)
        if path.suffix == ".npy":
            self.npy_header(path, rel, where)
            try:
                arr = np.load(path, allow_pickle=False)
            except (ValueError, OSError, EOFError, MemoryError) as e:
                raise self.err(where, f"cannot read {rel!r} as .npy without pickle: {e}") from None
            if arr.dtype.kind == "O":
                raise self.err(where, f"{rel!r}: object arrays are not allowed")
            if arr.dtype.newbyteorder("=") != dtype.newbyteorder("="):
                raise self.err(where, f"{rel!r} has dtype {arr.dtype}, manifest says {dtype}")
            if shape is not None and tuple(arr.shape) != shape:
                raise self.err(where, f"{rel!r} has shape {tuple(arr.shape)}, manifest says {list(shape)}")
            return np.ascontiguousarray(arr.astype(dtype, copy=False))
        raw = path.read_bytes()
        if shape is not None:
            want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if len(raw) != want:
                raise self.err(where, f"blob {rel!r} has {len(raw)} bytes; shape {list(shape)} of {dtype} "
                                      f"needs {want}")
        elif len(raw) % dtype.itemsize:
            raise self.err(where, f"blob {rel!r} size {len(raw)} is not a multiple of {dtype.itemsize}")
        arr = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype)
        return arr.reshape(shape) if shape is not None else arr


def _dtype(ctx: _Ctx, v: Any, where: str) -> np.dtype:
    return np.dtype(ctx.string(v, where, DTYPES))


def _shape(ctx: _Ctx, v: Any, where: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not v:
        raise ctx.err(where, f"expected a non-empty list of positive integers, got {v!r}")
    dims = tuple(ctx.integer(d, f"{where}[{i}]", 1, 1 << 20) for i, d in enumerate(v))
    if int(np.prod(dims, dtype=np.int64)) > (16 << 20):
        raise ctx.err(where, f"shape {list(dims)} has more than {16 << 20} elements")
    return dims


def _params(ctx: _Ctx, v: Any, where: str) -> dict[str, Any]:
    if v is None:
        return {}
    m = ctx.mapping(v, where)
    for k, x in m.items():
        if not isinstance(x, (int, float, str, bool, list)) or (isinstance(x, list) and not all(
                isinstance(i, int) and not isinstance(i, bool) for i in x)):
            raise ctx.err(f"{where}.{k}", f"layout parameters are scalars or lists of ints, got {x!r}")
    return m


def _description(ctx: _Ctx, top: Mapping[str, Any]) -> str:
    v = top.get("description")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ctx.err("description", f"expected a string, got {type(v).__name__}")
    return v


def _layout_name(ctx: _Ctx, v: Any, where: str) -> str:
    name = ctx.string(v, where)
    if name == RAW_LAYOUT:
        return name
    try:
        _layout_spec(name)
    except ValueError as e:
        raise ctx.err(where, str(e)) from None
    return name


# ---- loader -----------------------------------------------------------------------------------


def load_case(path: str | Path) -> Case:
    """Load and validate one case (its folder or its ``case.yaml``). Raises :class:`VectorError`."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST
    ctx = _Ctx(path)
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ctx.err(None, f"manifest larger than {MAX_MANIFEST_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ctx.err(None, f"cannot read manifest: {e}") from None
    try:
        # strict safe loader: a duplicate key (a second `statistics:` silently dropping the
        # first one's checks) is an error naming both lines
        doc = yaml_load_strict(text, str(path))
    except YamlError as e:
        msg = str(e).removeprefix(str(path)).lstrip(":").strip()
        line: str | None
        line, _, rest = msg.partition(": ")
        if line.isdigit():
            line = f"line {line}"
        elif line.startswith("line "):
            pass
        else:
            line, rest = None, msg
        raise ctx.err(line, f"not valid YAML: {rest}") from None
    except RecursionError:
        raise ctx.err(None, "not valid YAML: nested too deeply") from None
    top = ctx.mapping(doc, "", required=("format", "name", "kind"))
    if top["format"] == FORMAT_V1:
        raise ctx.err("format", f"{FORMAT_V1!r} has no golden_source (where the goldens came from); add "
                                f"golden_source and set format: {FORMAT} (testvectors/README.md)")
    if top["format"] != FORMAT:
        raise ctx.err("format", f"expected {FORMAT!r}, got {top['format']!r}")
    name = ctx.string(top["name"], "name")
    kind = ctx.string(top["kind"], "kind", ("layer", "layout"))
    if kind == "layout":
        return _load_layout_case(ctx, top, name)
    return _load_layer_case(ctx, top, name)


def _profile(ctx: _Ctx, v: Any) -> HardwareProfile:
    try:
        return load_profile(ctx.string(v, "profile"))
    except ProfileError as e:
        raise ctx.err("profile", str(e)) from None


def _provenance(ctx: _Ctx, v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    p = ctx.mapping(v, "provenance", allowed=_PROV)
    for k in ("seed", "index"):
        if p.get(k) is not None:
            ctx.integer(p[k], f"provenance.{k}", 0, (1 << 63) - 1)
    for k in ("generator", "suite", "model_version", "note"):
        if p.get(k) is not None:
            ctx.string(p[k], f"provenance.{k}")
    if p.get("semantics") is not None:
        ctx.string(p["semantics"], "provenance.semantics", ("rtl", "cmod"))
    return p


def _golden_source(ctx: _Ctx, v: Any) -> dict[str, Any]:
    """``golden_source`` (required): its kind and the kind's keys (:data:`_GOLDEN_KEYS`)."""
    if v is None:
        raise ctx.err("golden_source", f"missing (required): where the goldens came from, kind one of "
                                       f"{', '.join(GOLDEN_KINDS)}")
    g = ctx.mapping(v, "golden_source", required=("kind",))
    kind = ctx.string(g["kind"], "golden_source.kind", GOLDEN_KINDS)
    req, opt = _GOLDEN_KEYS[kind]
    ctx.mapping(g, "golden_source", allowed={"kind", *req, *opt}, required=req)
    for k, x in g.items():
        if k == "oracle":
            if x is not False:
                raise ctx.err("golden_source.oracle", f"must be false (a golden from the model itself checks "
                                                      f"self-consistency only), got {x!r}")
            continue
        ctx.string(x, f"golden_source.{k}")
        if len(x) > _GOLDEN_MAX_CHARS:
            raise ctx.err(f"golden_source.{k}", f"longer than {_GOLDEN_MAX_CHARS} characters")
    return g


def model_golden_source(reason: str = "") -> dict[str, Any]:
    """The ``golden_source`` of goldens the reference model computed itself (not an oracle)."""
    return {"kind": "model", "oracle": False,
            "reason": reason or "outputs of this project's reference model: self-consistency, no oracle"}


def golden_source_of(dut: Any) -> dict[str, Any]:
    """``golden_source`` of goldens read back from the target ``dut``: NVDLA's C model (its build's
    configuration, flavor, key and checkout revision when the checkout is a git work tree), a
    Verilator RTL build (configuration, build key, simulator), a board (the RTL on an FPGA), or
    the reference model (self-consistency)."""
    build = getattr(dut, "build", None) or getattr(getattr(dut, "_sim", None), "build", None)
    if build is not None and getattr(build, "flavor", None):
        g: dict[str, Any] = {"kind": "cmod", "config": str(build.config), "flavor": str(build.flavor),
                             "build_key": str(build.key)}
        rev = _git_revision(Path(str(build.nvdla_hw)))
        if rev:
            g["revision"] = rev
        if getattr(build, "systemc", None):
            g["systemc"] = str(build.systemc)
        return g
    if build is not None and getattr(build, "toplevel", None):
        g = {"kind": "rtl", "config": str(build.config), "build_key": str(build.key)}
        if getattr(build, "verilator", None):
            sim = str(build.verilator)
            g["simulator"] = sim if sim.lower().startswith("verilator") else f"Verilator {sim}"
        return g
    board = getattr(dut, "board_name", None)
    if board:
        return {"kind": "rtl", "config": str(getattr(dut, "profile_name", "") or "unknown"),
                "build_key": f"board {board}", "note": str(getattr(dut, "describe", lambda: board)())}
    describe = getattr(dut, "describe", None)
    return model_golden_source(f"outputs of {describe() if describe else type(dut).__name__}: "
                               f"self-consistency, no oracle")


def _git_revision(checkout: Path) -> str | None:
    """HEAD commit of a git work tree (read from ``.git``, no subprocess), else None."""
    try:
        head = (checkout / ".git" / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref: "):
            ref = head[5:]
            p = checkout / ".git" / ref
            if p.is_file():
                return p.read_text(encoding="utf-8").strip()
            packed = (checkout / ".git" / "packed-refs").read_text(encoding="utf-8")
            return next((ln.split()[0] for ln in packed.splitlines() if ln.endswith(" " + ref)), None)
        return head or None
    except OSError:
        return None


def _load_layout_case(ctx: _Ctx, top: dict[str, Any], name: str) -> Case:
    ctx.mapping(top, "", allowed=_TOP_LAYOUT, required=("layout",))
    lay = ctx.mapping(top["layout"], "layout", allowed={"name", "params", "dtype", "shape", "data", "packed"},
                      required=("name", "dtype", "shape", "data", "packed"))
    lname = _layout_name(ctx, lay["name"], "layout.name")
    params = _params(ctx, lay.get("params"), "layout.params")
    dt = _dtype(ctx, lay["dtype"], "layout.dtype")
    shape = _shape(ctx, lay["shape"], "layout.shape")
    try:
        params = _resolve_params(lname, params)
        size = packed_size(lname, shape, dt, params)
    except ValueError as e:
        raise ctx.err("layout.params", str(e)) from None
    except MemoryError:
        raise ctx.err("layout.params", f"layout {lname} with these parameters packs to an image too large "
                                       f"to hold") from None
    if size > MAX_BLOB_BYTES:
        raise ctx.err("layout.params", f"layout {lname} packs to {size} bytes, more than a blob may hold "
                                       f"({MAX_BLOB_BYTES})")
    array = ctx.blob(lay["data"], "layout.data", dt, shape)
    packed = ctx.blob(lay["packed"], "layout.packed", np.dtype(np.uint8), None)
    if packed.size != size:
        raise ctx.err("layout.packed", f"blob {lay['packed']!r} has {packed.size} bytes; layout {lname} of shape "
                                       f"{list(shape)} {dt} packs to {size}")
    family = top.get("family")
    if family is not None:
        family = ctx.string(family, "family")
    prof = _profile(ctx, top["profile"]).name if top.get("profile") is not None else None
    return Case(path=ctx.path, name=name, kind="layout", profile=prof, features=frozenset(),
                description=_description(ctx, top), family=family,
                provenance=_provenance(ctx, top.get("provenance")),
                golden_source=_golden_source(ctx, top.get("golden_source")),
                layout=LayoutPair(lname, params, dt, shape, array, packed, lay["data"], lay["packed"]),
                manifest=top)


def _load_registers(ctx: _Ctx, v: Any, prof: HardwareProfile) -> tuple[RegisterSetting, ...]:
    if v is None:
        return ()
    if not isinstance(v, list):
        raise ctx.err("registers", "expected a list of {reg: BLOCK.REG, fields: {...}} or {reg:, value:}")
    out: list[RegisterSetting] = []
    rm = prof.regmap
    for i, item in enumerate(v):
        where = f"registers[{i}]"
        m = ctx.mapping(item, where, allowed={"reg", "value", "fields"}, required=("reg",))
        rname = ctx.string(m["reg"], f"{where}.reg")
        try:
            reg = rm.register(rname)
        except RegisterMapError as e:
            raise ctx.err(f"{where}.reg", f"{e} (profile {prof.name})") from None
        where = f"{where} ({reg.full_name})"
        if reg.name in _RESERVED:
            raise ctx.err(where, f"{reg.name} is written by the runner (launch / LUT); do not list it")
        if not reg.writable or reg.trigger:
            raise ctx.err(where, f"{reg.full_name} is {'read-only' if not reg.writable else 'a trigger register'}")
        if ("value" in m) == ("fields" in m):
            raise ctx.err(where, "give exactly one of value (32-bit integer) or fields (mapping)")
        if "value" in m:
            value = ctx.integer(m["value"], f"{where}.value", 0, 0xFFFFFFFF)
            extra = value & ~reg.defined_mask & 0xFFFFFFFF
            if extra:
                raise ctx.err(f"{where}.value", f"{value:#010x} sets bits {extra:#010x} outside every field")
            out.append(RegisterSetting(reg.full_name, value))
            continue
        flds = ctx.mapping(m["fields"], f"{where}.fields")
        value = reg.reset
        for fname, fval in flds.items():
            fw = f"{where}.fields.{fname}"
            if isinstance(fval, bool) or not isinstance(fval, (int, str)):
                raise ctx.err(fw, f"expected an integer or enum name, got {fval!r}")
            try:
                f = reg.field(fname)
                if f.access == "ro":
                    raise ctx.err(fw, "read-only field")
                value = f.insert(value, fval)
            except RegisterMapError as e:
                raise ctx.err(fw, str(e)) from None
        out.append(RegisterSetting(reg.full_name, value, dict(flds)))
    return tuple(out)


def _load_lut(ctx: _Ctx, v: Any, prof: HardwareProfile) -> LutSetting | None:
    if v is None:
        return None
    m = ctx.mapping(v, "lut", allowed={"unit", "config", "le", "lo"}, required=("unit", "config"))
    unit = ctx.string(m["unit"], "lut.unit", ("SDP", "CDP"))
    cfgm = ctx.mapping(m["config"], "lut.config", allowed={f.name for f in fields(LutConfig)})
    for k, x in cfgm.items():
        if k in ("le_function", "uflow_priority", "oflow_priority", "hybrid_priority"):
            ctx.string(x, f"lut.config.{k}", ("exponent", "linear") if k == "le_function" else ("LE", "LO"))
        else:
            ctx.integer(x, f"lut.config.{k}")
    try:
        cfg = LutConfig(**cfgm)
        regs = PrecisionControl(None).lut_registers(unit, cfg)  # type: ignore[arg-type]  # range checks only
        for reg, flds in regs.items():
            r = prof.regmap.register(unit, reg)
            for fname in flds:
                r.field(fname)
    except (ValueError, RegisterMapError) as e:
        raise ctx.err("lut.config", str(e)) from None
    tables: dict[str, np.ndarray | None] = {}
    for t, n in (("le", 65), ("lo", 257)):
        if m.get(t) is None:
            tables[t] = None
        else:
            tables[t] = ctx.blob(m[t], f"lut.{t}", np.dtype(np.int16), (n,))
    return LutSetting(unit, cfg, tables["le"], tables["lo"])


def _load_convertors(ctx: _Ctx, v: Any, prof: HardwareProfile) -> dict[str, ConvertorSetting]:
    if v is None:
        return {}
    m = ctx.mapping(v, "convertors", allowed=set(CONVERTORS))
    out: dict[str, ConvertorSetting] = {}
    for name, sv in m.items():
        where = f"convertors.{name}"
        c = CONVERTORS[name]
        if not prof.has_unit(c.block):
            raise ctx.err(where, f"{prof.name} has no {c.block} unit")
        s = ctx.mapping(sv, where, allowed={"offset", "scale", "shift"})
        off = ctx.integer(s.get("offset", 0), f"{where}.offset", -(1 << (c.offset_bits - 1)), (1 << (c.offset_bits - 1)) - 1)
        scl = ctx.integer(s.get("scale", 1), f"{where}.scale", -(1 << (c.scale_bits - 1)), (1 << (c.scale_bits - 1)) - 1)
        sh = ctx.integer(s.get("shift", 0), f"{where}.shift", 0, (1 << c.shift_bits) - 1)
        out[name] = ConvertorSetting(off, scl, sh)
    return out


def _load_surface(ctx: _Ctx, item: Any, where: str, prof: HardwareProfile, output: bool) -> Surface:
    allowed = _SURFACE_OUT if output else _SURFACE_IN
    req = ("name", "layout", "dtype", "shape", "address") + (() if output else ("data",))
    m = ctx.mapping(item, where, allowed=allowed, required=req)
    name = ctx.string(m["name"], f"{where}.name")
    where = f"{where} ({name})"
    lname = _layout_name(ctx, m["layout"], f"{where}.layout")
    params = _params(ctx, m.get("params"), f"{where}.params")
    dt = _dtype(ctx, m["dtype"], f"{where}.dtype")
    shape = _shape(ctx, m["shape"], f"{where}.shape")
    try:
        params = _resolve_params(lname, params)
        nbytes = packed_size(lname, shape, dt, params)
    except ValueError as e:
        raise ctx.err(f"{where}.params", str(e)) from None
    except MemoryError:
        raise ctx.err(f"{where}.params", f"layout {lname} with these parameters packs to an image too large "
                                         f"to hold") from None
    if nbytes > MAX_BLOB_BYTES:
        raise ctx.err(f"{where}.params", f"layout {lname} packs to {nbytes} bytes, more than a surface may "
                                         f"hold ({MAX_BLOB_BYTES})")
    port = ctx.string(m.get("port", "pri_mem"), f"{where}.port", PORTS)
    if port == "sec_mem" and not prof.has("sec_mem"):
        raise ctx.err(f"{where}.port", f"{prof.name} has no secondary memory port")
    addr = ctx.integer(m["address"], f"{where}.address", 0, (1 << prof.mem_address_width) - 1)
    if addr % prof.atom_bytes:
        raise ctx.err(f"{where}.address", f"{addr:#x} is not aligned to the {prof.atom_bytes}-byte memory atom")
    if addr + nbytes > 1 << prof.mem_address_width:
        raise ctx.err(f"{where}.address", f"{addr:#x} + {nbytes} bytes exceeds the {prof.mem_address_width}-bit "
                                          f"address space")
    if not output:
        data = ctx.blob(m["data"], f"{where}.data", dt, shape)
        try:
            packed = pack_surface(lname, data, params)
        except ValueError as e:
            raise ctx.err(f"{where}.layout", str(e)) from None
        return Surface(name, lname, params, dt, shape, addr, port, nbytes, data=data, packed=packed, blob=m["data"])
    if ("expected" in m) == ("crc" in m):
        raise ctx.err(where, "give exactly one of expected (blob of the packed golden) or crc")
    rule = ctx.string(m.get("rule", "bitexact"), f"{where}.rule", tuple(RULES))
    rparams = ctx.mapping(m.get("rule_params") or {}, f"{where}.rule_params")
    for k, x in rparams.items():
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ctx.err(f"{where}.rule_params.{k}", f"expected a number, got {x!r}")
    if rule not in ("bitexact", "sdp") and "max_value" not in rparams and rule in ("cdp", "pdp"):
        raise ctx.err(f"{where}.rule_params", f"rule {rule} needs max_value")
    if "crc" in m:
        crc = ctx.integer(m["crc"], f"{where}.crc", 0, 0xFFFFFFFF)
        return Surface(name, lname, params, dt, shape, addr, port, nbytes, crc=crc, rule="crc")
    exp = ctx.blob(m["expected"], f"{where}.expected", np.dtype(np.uint8), None)
    if exp.size != nbytes:
        raise ctx.err(f"{where}.expected", f"blob {m['expected']!r} has {exp.size} bytes; {lname} of shape "
                                           f"{list(shape)} {dt} needs {nbytes}")
    return Surface(name, lname, params, dt, shape, addr, port, nbytes, packed=exp, rule=rule,
                   rule_params=rparams, blob=m["expected"])


def _load_layer_case(ctx: _Ctx, top: dict[str, Any], name: str) -> Case:
    ctx.mapping(top, "", allowed=_TOP_LAYER, required=("unit", "profile", "outputs"))
    prof = _profile(ctx, top["profile"])
    unit = ctx.string(top["unit"], "unit", LAYER_UNITS)
    if not prof.has_unit(_UNIT_BLOCK[unit]):
        raise ctx.err("unit", f"{prof.name} has no {unit} unit")
    launch = DEFAULT_LAUNCH[unit]
    if top.get("launch") is not None:
        lv = top["launch"]
        if not isinstance(lv, list) or not lv:
            raise ctx.err("launch", "expected a non-empty list of block names")
        launch = tuple(ctx.string(b, f"launch[{i}]") for i, b in enumerate(lv))
        for i, blk in enumerate(launch):
            try:
                prof.regmap.register(blk, "D_OP_ENABLE")
            except RegisterMapError as e:
                raise ctx.err(f"launch[{i}]", str(e)) from None
    registers = _load_registers(ctx, top.get("registers"), prof)
    lut = _load_lut(ctx, top.get("lut"), prof)
    convs = _load_convertors(ctx, top.get("convertors"), prof)
    inputs: list[Surface] = []
    for key, output in (("inputs", False), ("outputs", True)):
        v = top.get(key) or []
        if not isinstance(v, list):
            raise ctx.err(key, "expected a list of surfaces")
        if output and not v:
            raise ctx.err(key, "a layer case needs at least one output")
        for i, item in enumerate(v):
            inputs.append(_load_surface(ctx, item, f"{key}[{i}]", prof, output))
    names = [s.name for s in inputs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ctx.err("inputs/outputs", f"surface name {dup[0]!r} is used twice")
    spans = sorted((s.port, s.address, s.address + s.nbytes, s.name) for s in inputs)
    for a, b in zip(spans, spans[1:], strict=False):
        if a[0] == b[0] and b[1] < a[2]:
            raise ctx.err("inputs/outputs", f"surfaces {a[3]!r} and {b[3]!r} overlap in {a[0]} "
                                            f"([{a[1]:#x}, {a[2]:#x}) and [{b[1]:#x}, {b[2]:#x}))")
    stats = None
    if top.get("statistics") is not None:
        counters = {f.name for f in fields(Statistics)} - {"block", "group"}
        sm = ctx.mapping(top["statistics"], "statistics", allowed=counters)
        stats = {k: ctx.integer(x, f"statistics.{k}", 0, 0xFFFFFFFF) for k, x in sm.items()}
    declared: set[str] = set()
    if top.get("features") is not None:
        fv = top["features"]
        if not isinstance(fv, list):
            raise ctx.err("features", "expected a list of feature names")
        for i, f in enumerate(fv):
            declared.add(ctx.string(f, f"features[{i}]", FEATURES))
    case = Case(path=ctx.path, name=name, kind="layer", profile=prof.name, features=frozenset(), unit=unit,
                description=_description(ctx, top), launch=launch, registers=registers, lut=lut,
                convertors=convs, inputs=tuple(s for s in inputs if s.data is not None),
                outputs=tuple(s for s in inputs if s.data is None), statistics=stats,
                provenance=_provenance(ctx, top.get("provenance")),
                golden_source=_golden_source(ctx, top.get("golden_source")), manifest=top)
    feats = frozenset(declared | case_features(case))
    missing = sorted(f for f in feats if not prof.has(f))
    if missing:
        raise ctx.err("profile", f"{prof.name} lacks feature(s) the case needs: {', '.join(missing)}")
    return Case(**{**{f.name: getattr(case, f.name) for f in fields(Case)}, "features": feats})


def case_features(case: Case) -> set[str]:
    """Features a layer case needs from what it programs (SDP EW / LUT stage, secondary port)."""
    feats: set[str] = set()
    if case.unit in ("CDP", "PDP"):
        feats.add(case.unit.lower())
    for r in case.registers:
        if r.name == "SDP.D_DP_EW_CFG":
            from ..drivers.regmap import load_regmap

            reg = load_regmap("v2").register("SDP", "D_DP_EW_CFG")
            if not reg.field("EW_BYPASS").extract(r.value):
                feats.add("sdp_ew")
                if not reg.field("EW_LUT_BYPASS").extract(r.value):
                    feats.add("sdp_lut")
    if case.lut is not None and case.lut.unit == "SDP":
        feats.add("sdp_lut")
    if case.unit == "CONV":
        feats.update(_conv_features(case))
    if any(s.port == "sec_mem" for s in case.inputs + case.outputs):
        feats.add("sec_mem")
    return feats


def _conv_features(case: Case) -> set[str]:
    """CONV case: Winograd (``CDMA.D_MISC_CFG.CONV_MODE``), compressed weights
    (``CDMA.D_WEIGHT_FORMAT``) and the INT16 / FP16 precision (``CDMA.D_MISC_CFG.PROC_PRECISION``)."""
    from ..drivers.regmap import load_regmap

    rm = load_regmap("v1")
    feats: set[str] = set()
    for r in case.registers:
        if r.name == "CDMA.D_MISC_CFG":
            reg = rm.register("CDMA", "D_MISC_CFG")
            if reg.field("CONV_MODE").extract(r.value):
                feats.add("winograd")
            feats.add({0: "int8", 1: "int16", 2: "fp16"}.get(reg.field("PROC_PRECISION").extract(r.value), "int8"))
        elif r.name == "CDMA.D_WEIGHT_FORMAT" and rm.register("CDMA", "D_WEIGHT_FORMAT").field("WEIGHT_FORMAT").extract(r.value):
            feats.add("weight_compression")
    return feats


def find_cases(root: str | Path) -> list[Path]:
    """Every case folder (holding ``case.yaml``) below ``root``, sorted by relative path."""
    root = Path(root)
    if (root / MANIFEST).is_file():
        return [root]
    return sorted((p.parent for p in root.rglob(MANIFEST)), key=lambda p: p.relative_to(root).as_posix())


def bundled_root() -> Path:
    """The folder of the suites shipped in the package (``nvdla_hil.testvectors``)."""
    from importlib import resources

    return Path(str(resources.files("nvdla_hil.testvectors")))


# ---- writer --------------------------------------------------------------------------------------


class Hex(int):
    """An integer written in hexadecimal in a manifest (addresses)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(Hex, lambda d, v: d.represent_scalar("tag:yaml.org,2002:int", f"{int(v):#x}"))


def write_case(folder: str | Path, manifest: Mapping[str, Any], blobs: Mapping[str, bytes | np.ndarray], *,
               dut: Any = None, golden_source: Mapping[str, Any] | None = None) -> Path:
    """Write ``case.yaml`` and the blobs (raw bytes) into ``folder``; returns the manifest path.
    Output is deterministic: same inputs, same bytes. ``golden_source`` is, in this order: the
    one derived from ``dut`` (the target whose outputs are the goldens, :func:`golden_source_of`),
    the one given, the manifest's own, else the reference model's (self-consistency: a writer
    that names no oracle never claims one). It is written just before ``provenance``."""
    gs = golden_source_of(dut) if dut is not None else golden_source or manifest.get("golden_source") \
        or model_golden_source()
    manifest = {k: v for k, v in manifest.items() if k not in ("golden_source", "provenance")} | \
        {"golden_source": dict(gs)} | ({"provenance": manifest["provenance"]} if "provenance" in manifest else {})
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in blobs.items():
        if "/" in name or name.startswith(".") or name == MANIFEST:
            raise ValueError(f"bad blob name {name!r}")
        raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        (folder / name).write_bytes(raw)
    text = yaml.dump(dict(manifest), Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100)
    path = folder / MANIFEST
    path.write_text(f"# nvdla-hil packed test vector; format: testvectors/README.md\n{text}", encoding="utf-8")
    return path


# ---- runner ------------------------------------------------------------------------------------


@dataclass
class OutputCheck:
    name: str
    rule: str
    passed: bool
    message: str
    result: CompareResult | None = None
    actual_crc: int | None = None


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

    @property
    def passed(self) -> bool:
        return self.status == "passed"

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
        return "\n".join(lines)


def _cmp_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """(C, H, W) feature cubes are reported as (n, c, h, w) with n = 0."""
    return (1,) + shape if len(shape) == 3 else shape


def _compare_surface(s: Surface, actual: np.ndarray) -> OutputCheck:
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
    from .targets.model import ModelTarget

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
    outputs, stats, _ = _execute_case(case, transport, driver, timeout=timeout, poison=poison)
    return outputs, stats


def _execute_case(case: Case, transport: Transport, driver: NvdlaDriver | None = None, *,
                  timeout: float = 30.0, poison: bool = True,
                  known: dict[str, KnownMemory] | None = None) -> tuple[dict[str, np.ndarray], Statistics | None, int]:
    """:func:`execute_case`, less what ``known`` (what the board is known to hold; see
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
    group = drv.consumer_group(unit)
    for b in case.launch:
        drv.select_group(b, group)
    for r in case.registers:
        drv.write(r.name, r.value)
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
    if case.unit == "CONV":
        _wait_cbuf_flushed(drv, timeout)
    drv.launch(*case.launch)
    drv.wait_done(unit, group, timeout=timeout)
    if unit != "PDP" and "PDP" in case.launch:  # SDP/CONV -> PDP on the fly: PDP still writes after SDP's done
        drv.wait_done("PDP", group, timeout=timeout)
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
    return outputs, stats, trusted


def _wait_cbuf_flushed(drv: NvdlaDriver, timeout: float) -> None:
    """A convolution may start only once CBUF is flushed after reset: the dc_* traces poll
    ``CDMA.S_CBUF_FLUSH_STATUS`` for 1 before the first ``D_OP_ENABLE``."""
    deadline = time.monotonic() + timeout
    while not drv.read_field(("CDMA", "S_CBUF_FLUSH_STATUS"), "FLUSH_DONE"):
        if time.monotonic() >= deadline:
            raise TransportError(f"CDMA.S_CBUF_FLUSH_STATUS.FLUSH_DONE still 0 after {timeout:g} s")
        time.sleep(0.001)


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
            result.message = "; ".join(m for m in (result.message, f"rerun without the board-memory record (the first "
                                                   f"run trusted {first.trusted_bytes} bytes already on the board and "
                                                   f"{first.message or 'failed'})") if m)
    close_record(transport, known, result.status == "passed")
    result.duration = time.monotonic() - t0
    return result


def _run_layer_case(case: Case, transport: Transport, driver: NvdlaDriver | None, target_kind: str | None,
                    timeout: float, poison: bool, known: dict[str, KnownMemory]) -> CaseResult:
    result = CaseResult(case.name, "passed")
    try:
        outputs, stats, result.trusted_bytes = _execute_case(case, transport, driver, timeout=timeout, poison=poison,
                                                             known=known)
        result.outputs = outputs
        for s in case.outputs:
            result.checks.append(_compare_surface(s, outputs[s.name]))
        if case.statistics is not None and stats is not None:
            result.actual_statistics = stats
            expected = Statistics(block=stats.block, group=stats.group, **case.statistics)
            result.statistics = compare_statistics(expected, stats, target_kind=target_kind or _target_kind(transport))
        failed = [c for c in result.checks if not c.passed]
        if failed or (result.statistics is not None and not result.statistics.passed):
            result.status = "failed"
            parts = []
            if failed:
                parts.append(f"{len(failed)} of {len(result.checks)} outputs differ")
            if result.statistics is not None and not result.statistics.passed:
                parts.append(f"{len(result.statistics.mismatched)} statistics counters differ")
            result.message = "; ".join(parts)
    except (UnitNotModelled, FeatureMissingError, UnitNotPresentError) as e:
        result.status, result.message = "skipped", f"{type(e).__name__}: {e}"
    except (TransportError, RegisterMapError, TimeoutError) as e:
        result.status, result.message = "error", f"{type(e).__name__}: {e}"
    return result
