"""Reading a manifest without trusting it: typed, bounded accessors that raise a
:class:`~.format.VectorError` naming the file and the field, blobs confined to the case folder
(``.npy`` headers checked before numpy allocates), and the parts every case kind shares
(profile, provenance, ``golden_source``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from numpy.lib import format as npy_format

from ...drivers.profiles import HardwareProfile, ProfileError, load_profile
from .format import (
    DTYPES,
    GOLDEN_KEYS,
    GOLDEN_KINDS,
    GOLDEN_MAX_CHARS,
    MAX_BLOB_BYTES,
    PROVENANCE_KEYS,
    RAW_LAYOUT,
    VectorError,
)
from .surface import layout_spec
from ...semantics import SEMANTICS


class CaseReader:
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


def read_dtype(ctx: CaseReader, v: Any, where: str) -> np.dtype:
    return np.dtype(ctx.string(v, where, DTYPES))


def read_shape(ctx: CaseReader, v: Any, where: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not v:
        raise ctx.err(where, f"expected a non-empty list of positive integers, got {v!r}")
    dims = tuple(ctx.integer(d, f"{where}[{i}]", 1, 1 << 20) for i, d in enumerate(v))
    if int(np.prod(dims, dtype=np.int64)) > (16 << 20):
        raise ctx.err(where, f"shape {list(dims)} has more than {16 << 20} elements")
    return dims


def read_params(ctx: CaseReader, v: Any, where: str) -> dict[str, Any]:
    if v is None:
        return {}
    m = ctx.mapping(v, where)
    for k, x in m.items():
        if not isinstance(x, (int, float, str, bool, list)) or (isinstance(x, list) and not all(
                isinstance(i, int) and not isinstance(i, bool) for i in x)):
            raise ctx.err(f"{where}.{k}", f"layout parameters are scalars or lists of ints, got {x!r}")
    return m


def read_description(ctx: CaseReader, top: Mapping[str, Any]) -> str:
    v = top.get("description")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ctx.err("description", f"expected a string, got {type(v).__name__}")
    return v


def read_layout_name(ctx: CaseReader, v: Any, where: str) -> str:
    name = ctx.string(v, where)
    if name == RAW_LAYOUT:
        return name
    try:
        layout_spec(name)
    except ValueError as e:
        raise ctx.err(where, str(e)) from None
    return name



def read_profile(ctx: CaseReader, v: Any) -> HardwareProfile:
    try:
        return load_profile(ctx.string(v, "profile"))
    except ProfileError as e:
        raise ctx.err("profile", str(e)) from None


def read_provenance(ctx: CaseReader, v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    p = ctx.mapping(v, "provenance", allowed=PROVENANCE_KEYS)
    for k in ("seed", "index"):
        if p.get(k) is not None:
            ctx.integer(p[k], f"provenance.{k}", 0, (1 << 63) - 1)
    if p.get("draw") is not None:
        ctx.integer(p["draw"], "provenance.draw", 0, 1 << 16)
    for k in ("generator", "suite", "model_version", "note", "redrawn"):
        if p.get(k) is not None:
            ctx.string(p[k], f"provenance.{k}")
    if p.get("semantics") is not None:
        ctx.string(p["semantics"], "provenance.semantics", SEMANTICS)
    return p


def read_golden_source(ctx: CaseReader, v: Any) -> dict[str, Any]:
    """``golden_source`` (required): its kind and the kind's keys (:data:`GOLDEN_KEYS`)."""
    if v is None:
        raise ctx.err("golden_source", f"missing (required): where the goldens came from, kind one of "
                                       f"{', '.join(GOLDEN_KINDS)}")
    g = ctx.mapping(v, "golden_source", required=("kind",))
    kind = ctx.string(g["kind"], "golden_source.kind", GOLDEN_KINDS)
    req, opt = GOLDEN_KEYS[kind]
    ctx.mapping(g, "golden_source", allowed={"kind", *req, *opt}, required=req)
    for k, x in g.items():
        if k == "oracle":
            if x is not False:
                raise ctx.err("golden_source.oracle", f"must be false (a golden from the model itself checks "
                                                      f"self-consistency only), got {x!r}")
            continue
        ctx.string(x, f"golden_source.{k}")
        if len(x) > GOLDEN_MAX_CHARS:
            raise ctx.err(f"golden_source.{k}", f"longer than {GOLDEN_MAX_CHARS} characters")
    return g


