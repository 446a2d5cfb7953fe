"""NVDLA feature data and the SDP operand formats that share its C' -> W -> H -> C order
(seed 000 "Feature Data Format", "Bias/PReLU/BN/EW data").

A feature cube ``(C, H, W)`` is cut into 1x1xatom cubes of ``lanes`` channels, laid out
C' -> W -> H -> C with line and surface strides that are whole memory atoms, the last surface
channel-padded. Bias, PReLU, batch-norm and element-wise operands are the same cube with one or
two components per element and the processing precision's ElementPerAtom (``bytes_per_atom``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._base import (
    LayoutError,
    LayoutSpec,
    Param,
    Piece,
    Plan,
    align_up,
    ceil_div,
    check_aligned,
    execute_pack,
    execute_unpack,
    from_storage,
    storage_dtype,
    to_storage,
)
from .common import PRECISIONS, SEED, STRIDE_RULE, atom_origin, atom_size, element_dtype, pad_to, profile_params


@dataclass(frozen=True)
class CubeGeometry:
    """Resolved geometry of a cube in the feature-data order C' -> W -> H -> C.

    ``lanes`` channels per atom, ``comps`` components per channel element, all in storage
    elements; strides in bytes.
    """

    channels: int
    height: int
    width: int
    comps: int
    lanes: int
    atom_bytes: int
    line_stride: int
    surface_stride: int
    itemsize: int

    @property
    def surfaces(self) -> int:
        return ceil_div(self.channels, self.lanes)

    @property
    def nbytes(self) -> int:
        if self.channels == 0 or self.height == 0 or self.width == 0:
            return 0
        return (
            (self.surfaces - 1) * self.surface_stride
            + (self.height - 1) * self.line_stride
            + self.width * self.atom_bytes
        )


def cube_geometry(
    channels: int,
    height: int,
    width: int,
    itemsize: int,
    atom_bytes: int,
    *,
    comps: int = 1,
    line_stride: int | None = None,
    surface_stride: int | None = None,
    lanes: int | None = None,
    what: str = "feature data",
    atom_origin: str | None = None,
) -> CubeGeometry:
    """Compute and validate strides of a feature-format cube (seed 000 'Feature Data Format').

    Rules: a line holds W atoms mapped compactly; line and surface strides are multiples of the
    memory atom of the configuration -- 32 bytes on nv_full/nv_large (seed 000: "Line stride and
    surface stride of feature data shall always align to 32bytes"), 8 bytes on nv_small (the RTL
    drops stride bits below the atom, see :data:`STRIDE_RULE`); lines and surfaces must not overlap.
    ``atom_origin`` names the profile (or override) the atom came from in error messages.
    """
    if lanes is None:
        if atom_bytes % (itemsize * comps):
            raise LayoutError(f"{what}: atom of {atom_bytes} bytes does not hold whole elements of {itemsize * comps} bytes")
        lanes = atom_bytes // (itemsize * comps)
    bytes_per_atom = lanes * comps * itemsize
    line_min = width * bytes_per_atom
    ls = align_up(line_min, atom_bytes) if line_stride is None else int(line_stride)
    src = f" of {atom_origin}" if atom_origin else ""
    rule = f"{{}} must be a multiple of the {atom_bytes}-byte memory atom{src}; {STRIDE_RULE}"
    check_aligned(f"{what} line_stride", ls, atom_bytes, rule.format("line_stride"))
    if ls < line_min:
        raise LayoutError(
            f"{what}: line_stride={ls} is smaller than one line of {width} atoms ({line_min} bytes); "
            f"atom cubes of a line are mapped compactly ({SEED})"
        )
    surf_min = max(height - 1, 0) * ls + line_min
    ss = height * ls if surface_stride is None else int(surface_stride)
    check_aligned(f"{what} surface_stride", ss, atom_bytes, rule.format("surface_stride"))
    if ss < surf_min and ceil_div(channels, lanes) > 1:
        raise LayoutError(
            f"{what}: surface_stride={ss} is smaller than one surface ({surf_min} bytes = "
            f"(H-1)*line_stride + W*atom); surfaces would overlap"
        )
    return CubeGeometry(channels, height, width, comps, lanes, bytes_per_atom, ls, ss, itemsize)


def cube_plan(geo: CubeGeometry, sdt: np.dtype, pad_value: Any = 0) -> Plan:
    """Pieces for a ``(C, H, W, comps)`` array in C' -> W -> H -> C order."""
    C, H, W, k, L = geo.channels, geo.height, geo.width, geo.comps, geo.lanes
    isz = geo.itemsize
    ls, ss = geo.line_stride // isz, geo.surface_stride // isz
    sf = C // L
    rem = C - sf * L
    pieces = []
    if sf:
        # (sf*L, H, W, k) -> (sf, L, H, W, k) -> (sf, H, W, L, k)
        pieces.append(Piece((slice(0, sf * L),), (sf, L, H, W, k), (0, 2, 3, 1, 4), 0,
                            (sf, H, W, L, k), (ss, ls, L * k, k, 1)))
    if rem:
        off = sf * ss
        pieces.append(Piece((slice(sf * L, C),), None, (1, 2, 0, 3), off, (H, W, rem, k), (ls, L * k, k, 1)))
        # "Adding data into end of channel if the original data is not aligned": pad lanes
        pieces.append(Piece(None, None, (), off + rem * k, (H, W, (L - rem) * k), (ls, L * k, 1), pad_value))
    return Plan(geo.nbytes, sdt, tuple(pieces))


def _pad_bits(pad_value: float, dt: np.dtype) -> int:
    if dt.kind == "f":
        if np.isnan(pad_value):
            raise LayoutError("pad_value: the attached channel data can be any value except NaN when fp16 (seed 000)")
        return int(np.array(pad_value, dtype=dt).view(storage_dtype(dt)))
    info = np.iinfo(dt)
    if pad_value != int(pad_value) or not info.min <= pad_value <= info.max:
        raise LayoutError(f"pad_value={pad_value} does not fit {dt}")
    return int(np.array(int(pad_value), dtype=dt).view(storage_dtype(dt)))


_FEATURE_PARAMS = profile_params() + (
    Param("line_stride", int, None, "bytes between lines, a multiple of the atom (default packed: W * atom)"),
    Param("surface_stride", int, None, "bytes between surfaces, a multiple of the atom (default packed: H * line_stride)"),
    Param("pad_value", float, 0.0, "value of the channel-padding lanes of the last surface (not NaN)"),
)


def _feature_geo(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> CubeGeometry:
    if len(shape) != 3:
        raise LayoutError(f"feature data is a (C, H, W) cube, got shape {shape}")
    C, H, W = shape
    return cube_geometry(C, H, W, dt.itemsize, atom_size(p), line_stride=p["line_stride"],
                         surface_stride=p["surface_stride"], atom_origin=atom_origin(p))


def feature_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(arr.dtype, "feature data")
    geo = _feature_geo(arr.shape, dt, p)
    sdt = storage_dtype(dt)
    plan = cube_plan(geo, sdt, _pad_bits(p["pad_value"], dt))
    return execute_pack(to_storage(arr)[..., None], plan)


def feature_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(dt, "feature data")
    geo = _feature_geo(shape, dt, p)
    plan = cube_plan(geo, storage_dtype(dt))
    return from_storage(execute_unpack(buf, plan, shape + (1,), "nvdla.feature")[..., 0], dt)


def feature_offset(c: int, h: int, w: int, *, itemsize: int, atom_bytes: int, line_stride: int,
                   surface_stride: int) -> int:
    """Byte offset of element (c, h, w) of a feature cube (scalar helper for drivers/tests)."""
    lanes = atom_bytes // itemsize
    return (c // lanes) * surface_stride + h * line_stride + w * atom_bytes + (c % lanes) * itemsize


def feature_1x1_as_cube(channels: int, itemsize: int, atom_bytes: int = 32) -> tuple[int, int, int]:
    """Shape (C, H, W) under which a surface-packed 1x1xC cube can be fetched.

    Seed 000: "If a 1x1xC feature data cube maps as surface-packed, NVDLA can treat it like
    (C/32) x1x 32 cube" -- i.e. W = number of atoms, H = 1, C = one atom of channels. The bytes
    are identical when the 1x1xC cube uses surface_stride == atom_bytes.
    """
    lanes = atom_bytes // itemsize
    return (lanes, 1, ceil_div(channels, lanes))


# SDP operands: bias, PReLU, batch-norm, element-wise -----------------------------------------------

#: ComponentsPerElement by use case (seed 000)
COMPONENTS_PER_ELEMENT = {"bias": 1, "prelu": 1, "bn": 2, "ew_alu": 1, "ew_mul": 1, "ew_both": 2}


def bytes_per_atom(proc_precision: str, use: str, data_size: int, atom_bytes: int = 32) -> int:
    """BytesPerAtom = ElementPerAtom * ComponentsPerElement * BytesPerComponent (seed 000).

    ElementPerAtom is 32 for INT8 and 16 for INT16/FP16 processing precision with the 32-byte
    atom of nv_full (atom_bytes / bytes of the processing precision in general).
    """
    if proc_precision not in PRECISIONS:
        raise LayoutError(f"proc_precision={proc_precision!r} not one of {list(PRECISIONS)}")
    if data_size not in (1, 2):
        raise LayoutError(f"data_size={data_size}: BytesPerComponent is 1 (ONE_BYTE) or 2 (TWO_BYTE)")
    epa = atom_bytes // PRECISIONS[proc_precision].itemsize
    return epa * COMPONENTS_PER_ELEMENT[use] * data_size


def _sdp_geo(shape: tuple[int, ...], p: dict[str, Any], use: str, mode: str) -> tuple[CubeGeometry, tuple[int, ...], np.dtype]:
    prec = p["proc_precision"]
    ds = p["data_size"] or (1 if prec == "int8" else 2)
    if prec == "fp16" and ds != 2:
        raise LayoutError("fp16 operands need data_size=2 (each channel takes 2 bytes in FP16)")
    comps = COMPONENTS_PER_ELEMENT[use]
    atom = atom_size(p)
    lanes = atom // PRECISIONS[prec].itemsize
    n_lead = 1 if mode == "per_channel" else 3
    want = n_lead + (1 if comps == 2 else 0)
    if len(shape) != want or (comps == 2 and shape[-1] != 2):
        tail = ",)" if mode == "per_channel" and comps == 1 else ", H, W" * (mode != "per_channel") + (", 2)" if comps == 2 else ")")
        form = "(C" + tail
        raise LayoutError(f"{use} {mode} data has shape {form}, got {shape}")
    if mode == "per_channel":
        C, H, W = shape[0], 1, 1
        ss = lanes * comps * ds
        geo = CubeGeometry(C, 1, 1, comps, lanes, ss, ss, ss, ds)   # continuous 1x1xC space
    else:
        C, H, W = shape[:3]
        geo = cube_geometry(C, H, W, ds, atom, comps=comps, lanes=lanes, line_stride=p["line_stride"],
                            surface_stride=p["surface_stride"], what=use, atom_origin=atom_origin(p))
    pdt = np.dtype(np.float16) if prec == "fp16" else np.dtype(np.int8 if ds == 1 else np.int16)
    return geo, (C, H, W, comps), pdt


def make_sdp_layout(use: str, modes: tuple[str, ...]) -> LayoutSpec:
    params = profile_params() + (
        Param("proc_precision", str, "int8", "SDP PROC_PRECISION (sets ElementPerAtom)", tuple(PRECISIONS)),
        Param("data_size", int, None, "BytesPerComponent: 1 ONE_BYTE or 2 TWO_BYTE (default by precision)", (None, 1, 2)),
    )
    if len(modes) > 1:
        params += (Param("mode", str, modes[0], "per_channel (1x1xC) or per_element (WxHxC)", modes),)
    if "per_element" in modes:
        params += (
            Param("line_stride", int, None, "per-element: bytes between lines (multiple of the atom)"),
            Param("surface_stride", int, None, "per-element: bytes between surfaces (multiple of the atom)"),
        )
    uses = ("ew_alu", "ew_mul", "ew_both") if use == "ew" else (use,)
    if use == "ew":
        params += (Param("use", str, "ew_alu", "ALU or MUL only (1 component) or both (2)", uses),)

    def resolve(p: dict[str, Any]) -> tuple[str, str]:
        return (p.get("use", use), p.get("mode", modes[0]))

    def pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
        u, m = resolve(p)
        geo, shp4, pdt = _sdp_geo(arr.shape, p, u, m)
        if arr.dtype.itemsize != geo.itemsize or arr.dtype.kind not in "iuf":
            raise LayoutError(f"{u}: data_size={geo.itemsize} needs {geo.itemsize}-byte elements, got {arr.dtype}")
        plan = cube_plan(geo, storage_dtype(arr.dtype))
        out = execute_pack(to_storage(arr).reshape(shp4), plan)
        return pad_to(out, 32) if use == "ew" else out   # element-wise: data size aligned to 32 bytes

    def unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
        u, m = resolve(p)
        geo, shp4, pdt = _sdp_geo(shape, p, u, m)
        if dt.itemsize != geo.itemsize:
            dt = pdt
        data = execute_unpack(buf, cube_plan(geo, storage_dtype(dt)), shp4, f"nvdla.sdp.{use}")
        return from_storage(data.reshape(shape), dt)

    desc = {
        "bias": "bias data, per channel (1x1xC, continuous) or per element (WxHxC, feature order)",
        "prelu": "PReLU data, per channel, continuous 1x1xC",
        "bn": "batch-normalization data, per channel, (add, multiply) pair packed per channel",
        "ew": "element-wise data WxHxC in feature order; use=ew_both stores (ALU, MUL) pairs",
    }[use]
    return LayoutSpec(f"nvdla.sdp.{use}", "nvdla", desc + "; BytesPerAtom rule", params, pack, unpack, "int8", SEED)


def feature_layout() -> LayoutSpec:
    return LayoutSpec(
        "nvdla.feature", "nvdla",
        "feature data cube (C, H, W): 1x1xatom cubes in C' -> W -> H -> C order, packed or "
        "unpacked (line/surface strides aligned to the atom), last surface channel-padded",
        _FEATURE_PARAMS, feature_pack, feature_unpack, "int8", SEED)


def sdp_layouts() -> list[LayoutSpec]:
    return [
        make_sdp_layout("bias", ("per_channel", "per_element")),
        make_sdp_layout("prelu", ("per_channel",)),
        make_sdp_layout("bn", ("per_channel",)),
        make_sdp_layout("ew", ("per_element",)),
    ]
