"""Layout registry primitives: parameters, specs, errors and the strided-piece engine.

Every layout is described by a *plan*: a total byte size plus a list of pieces. A piece says
"this sub-array of the logical tensor, transposed like so, lives at this element offset of the
buffer with these element strides". ``pack`` writes every piece into a zeroed buffer and
``unpack`` reads every piece back, so both directions share one description and round-trip by
construction. All copies are numpy strided assignments (no per-element Python loops).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...errors import InputError

__all__ = [
    "REQUIRED",
    "AlignmentError",
    "LayoutError",
    "LayoutSpec",
    "Param",
    "Piece",
    "Plan",
    "align_up",
    "ceil_div",
    "check_aligned",
    "execute_pack",
    "execute_unpack",
]


class LayoutError(InputError):
    """A tensor, buffer or parameter does not fit a layout; the message names the rule."""


class AlignmentError(LayoutError):
    """An address, stride or size breaks an alignment rule of the layout's source document."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


def ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def align_up(value: int, alignment: int) -> int:
    return ceil_div(value, alignment) * alignment


def check_aligned(what: str, value: int, alignment: int, rule: str) -> None:
    """Raise :class:`AlignmentError` unless ``value`` is a multiple of ``alignment``."""
    if int(value) % int(alignment):
        raise AlignmentError(
            f"{what} = {value} is not a multiple of {alignment} bytes (rule: {rule})"
        )


def _parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected a boolean (true/false/1/0), got {text!r}")


def _parse_int_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p, 0) for p in text.replace("x", ",").split(",") if p.strip())


@dataclass(frozen=True)
class Param:
    """One layout parameter. ``type`` is int, bool, str, float or ``tuple`` (of ints)."""

    name: str
    type: type
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None

    def parse(self, text: str) -> Any:
        """Convert a CLI string (``--param name=text``) to this parameter's type."""
        if text.strip().lower() in ("none", "") and self.default is None:
            return None
        try:
            if self.type is bool:
                return _parse_bool(text)
            if self.type is int:
                return int(text, 0)
            if self.type is float:
                return float(text)
            if self.type is tuple:
                return _parse_int_tuple(text)
            return text
        except ValueError as exc:
            raise LayoutError(f"parameter {self.name}: {exc}") from None

    def check(self, value: Any) -> Any:
        if value is None and self.default is None:
            return None
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise LayoutError(f"parameter {self.name} must be an int, got {value!r}")
            value = int(value)
        elif self.type is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise LayoutError(f"parameter {self.name} must be a bool, got {value!r}")
            value = bool(value)
        elif self.type is tuple:
            if not isinstance(value, (tuple, list)):
                raise LayoutError(f"parameter {self.name} must be a tuple of ints, got {value!r}")
            value = tuple(int(v) for v in value)
        elif self.type is float:
            value = float(value)
        elif self.type is str and not isinstance(value, str):
            raise LayoutError(f"parameter {self.name} must be a str, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise LayoutError(
                f"parameter {self.name}={value!r} is not one of {list(self.choices)}"
            )
        return value


@dataclass(frozen=True)
class LayoutSpec:
    """A named memory layout with validated parameters and pack/unpack functions.

    ``pack_fn(array, params) -> uint8 ndarray`` and
    ``unpack_fn(buf_u8, shape, dtype, params) -> ndarray`` receive a fully resolved params dict.
    """

    name: str
    family: str
    description: str
    parameters: tuple[Param, ...]
    pack_fn: Callable[[np.ndarray, dict[str, Any]], np.ndarray] = field(repr=False)
    unpack_fn: Callable[[np.ndarray, tuple[int, ...], np.dtype, dict[str, Any]], np.ndarray] = field(
        repr=False
    )
    default_dtype: str = "int8"
    source: str = ""

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def resolve(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Check names and types, fill defaults; unknown names list the accepted ones."""
        known = {p.name: p for p in self.parameters}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise LayoutError(
                f"layout {self.name!r}: unknown parameter(s) {unknown}; "
                f"accepted: {sorted(known) or 'none'}"
            )
        out: dict[str, Any] = {}
        for p in self.parameters:
            if p.name in params:
                out[p.name] = p.check(params[p.name])
            elif p.default is REQUIRED:
                raise LayoutError(f"layout {self.name!r}: parameter {p.name!r} is required ({p.doc})")
            else:
                out[p.name] = p.default
        return out

    def parse_params(self, items: Sequence[str]) -> dict[str, Any]:
        """Parse CLI ``name=value`` strings into typed parameters."""
        known = {p.name: p for p in self.parameters}
        out: dict[str, Any] = {}
        for item in items:
            if "=" not in item:
                raise LayoutError(f"--param {item!r}: expected name=value")
            name, text = item.split("=", 1)
            name = name.strip()
            if name not in known:
                raise LayoutError(
                    f"layout {self.name!r}: unknown parameter {name!r}; accepted: {sorted(known)}"
                )
            out[name] = known[name].parse(text)
        return out

    def pack(self, array: Any, **params: Any) -> np.ndarray:
        """Pack a numpy array into this layout; returns a 1-D uint8 array."""
        resolved = self.resolve(params)
        arr = np.asarray(array)
        out = self.pack_fn(arr, resolved)
        return np.ascontiguousarray(out, dtype=np.uint8).reshape(-1)

    def unpack(
        self,
        buf: bytes | bytearray | memoryview | np.ndarray,
        shape: Sequence[int],
        dtype: Any = None,
        **params: Any,
    ) -> np.ndarray:
        """Unpack bytes of this layout into an array of logical ``shape`` and ``dtype``."""
        resolved = self.resolve(params)
        if isinstance(buf, np.ndarray):
            u8 = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
        else:
            u8 = np.frombuffer(bytes(buf), dtype=np.uint8)
        dt = np.dtype(dtype if dtype is not None else self.default_dtype)
        shp = tuple(int(s) for s in shape)
        if any(s < 0 for s in shp):
            raise LayoutError(f"layout {self.name!r}: negative dimension in shape {shp}")
        return self.unpack_fn(u8, shp, dt, resolved)


# --------------------------------------------------------------------------------------------
# Strided-piece engine
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """A sub-array ``src`` of the logical tensor, permuted by ``perm``, placed in the buffer.

    ``src`` is a tuple of slices over the logical tensor, ``split`` an optional reshape of that
    slice that only splits axes (so it stays a view); after ``.transpose(perm)`` the
    data has shape ``shape`` and element (i0, i1, ...) sits at buffer element
    ``offset + sum(i_k * strides[k])`` (units: elements of the plan's storage dtype).
    ``fill`` pieces (src None) are written with a constant by pack and ignored by unpack.
    """

    src: tuple[slice, ...] | None
    split: tuple[int, ...] | None
    perm: tuple[int, ...]
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    fill: Any = 0


@dataclass(frozen=True)
class Plan:
    """Byte size of the packed buffer plus the pieces that fill it (storage dtype ``dtype``)."""

    nbytes: int
    dtype: np.dtype
    pieces: tuple[Piece, ...]


def _view(typed: np.ndarray, piece: Piece) -> np.ndarray:
    isz = typed.itemsize
    if any(s == 0 for s in piece.shape):
        return np.empty(piece.shape, dtype=typed.dtype)
    last = piece.offset + sum((n - 1) * s for n, s in zip(piece.shape, piece.strides))
    if piece.offset < 0 or last >= typed.size:
        raise LayoutError(
            f"layout piece at element offset {piece.offset} (last {last}) overruns a buffer of "
            f"{typed.size} elements"
        )
    base = typed[piece.offset :]
    return as_strided(base, shape=piece.shape, strides=tuple(s * isz for s in piece.strides))


def execute_pack(arr: np.ndarray, plan: Plan, fill_byte: int = 0) -> np.ndarray:
    """Write ``arr`` into a fresh buffer according to ``plan``."""
    nbytes = align_up(plan.nbytes, plan.dtype.itemsize)
    buf = np.zeros(nbytes, dtype=np.uint8) if fill_byte == 0 else np.full(nbytes, fill_byte, np.uint8)
    typed = buf.view(plan.dtype)
    for piece in plan.pieces:
        dst = _view(typed, piece)
        if dst.size == 0:
            continue
        if piece.src is None:
            dst[...] = np.asarray(piece.fill).astype(plan.dtype)
        else:
            src = arr[piece.src]
            if piece.split is not None:
                src = src.reshape(piece.split)
            dst[...] = src.transpose(piece.perm)
    return buf[: plan.nbytes]


def execute_unpack(buf: np.ndarray, plan: Plan, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Read the tensor of ``shape`` described by ``plan`` out of ``buf`` (uint8)."""
    if buf.size < plan.nbytes:
        raise LayoutError(f"layout {name!r}: buffer has {buf.size} bytes, layout needs {plan.nbytes}")
    nb = align_up(plan.nbytes, plan.dtype.itemsize)
    raw = buf[:nb] if buf.size >= nb else np.concatenate([buf, np.zeros(nb - buf.size, np.uint8)])
    typed = np.ascontiguousarray(raw).view(plan.dtype)
    out = np.empty(shape, dtype=plan.dtype)
    for piece in plan.pieces:
        if piece.src is None:
            continue
        src = _view(typed, piece)
        if src.size == 0:
            continue
        target = out[piece.src]
        if piece.split is not None:
            target = np.reshape(target, piece.split, copy=False)  # raises rather than copy
        target[...] = src.transpose(np.argsort(piece.perm))
    return out


def storage_dtype(dtype: np.dtype) -> np.dtype:
    """Unsigned integer of the same width, used to move elements bit-exactly (fp16 NaN, -0)."""
    return np.dtype(f"<u{np.dtype(dtype).itemsize}")


def to_storage(arr: np.ndarray) -> np.ndarray:
    """Reinterpret an array's elements as little-endian unsigned integers of the same width."""
    a = np.asarray(arr)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.view(storage_dtype(a.dtype)) if a.ndim else a.reshape(1).view(storage_dtype(a.dtype)).reshape(())


def from_storage(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return arr.view(np.dtype(dtype).newbyteorder("<")).astype(np.dtype(dtype), copy=False)


def check_close_name(name: str, names: Sequence[str], what: str = "layout") -> LayoutError:
    close = difflib.get_close_matches(name, list(names), n=5, cutoff=0.4)
    hint = f"; did you mean {close}?" if close else ""
    return LayoutError(f"unknown {what} {name!r}{hint} (known: {len(names)}; list them with `nvdla-hil layouts`)")


def prod(values: Sequence[int]) -> int:
    return int(math.prod(int(v) for v in values))
