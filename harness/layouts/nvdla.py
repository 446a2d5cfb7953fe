"""NVDLA in-memory data formats (seed 000, "In-memory data formats").

Shapes used for the logical (numpy) side:

* feature data: ``(C, H, W)``; SDP operand data: ``(C,)``/``(C, H, W)`` with a trailing ``2`` axis
  when two components per element are stored (batch-norm, element-wise ALU+MUL);
* weights: ``(K, C, H, W)`` = kernels, channels, kernel height, kernel width;
* pixels: ``(H, W, channels)`` with channels in CBUF order (R, G, B, A) / (Y, U, V, A).

Elements are moved bit-exactly (fp16 NaN payloads and -0.0 survive a round trip).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...drivers.profiles import HardwareProfile, ProfileError, list_profiles, load_profile

from ._base import (
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

SEED = "seed 000 (NVDLA in-memory data formats)"

# --------------------------------------------------------------------------------------------
# Profiles and precision
# --------------------------------------------------------------------------------------------


def _hw(name: str) -> HardwareProfile:
    """The hardware profile whose sizes parametrise the layouts (``drivers/data/profiles.yaml``):
    memory atom, MAC atomic C (elements per 1x1xC' weight cube) and K (kernels per group).
    nv_full: 32-byte atom, 64 / 32 (seed 000); nv_small: 8-byte atom, 8 / 8 (nv_small.spec)."""
    try:
        return load_profile(name)
    except ProfileError as e:
        raise LayoutError(str(e)) from None


#: precision name -> numpy dtype of one element (seed 000 "Precision Type")
PRECISIONS: dict[str, np.dtype] = {
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "fp16": np.dtype(np.float16),
}

_ELEMENT_DTYPES = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.float16)}

WEIGHT_DATA_ALIGN = 128  # "Append 0s at end of all mapped weight for 128-byte alignment"
WEIGHT_START_ALIGN = 256  # alignment table: uncompressed/compressed weight, WMB, WGS start address


def _element_dtype(dtype: Any, what: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.newbyteorder("<") not in {d.newbyteorder("<") for d in _ELEMENT_DTYPES}:
        raise LayoutError(
            f"{what}: dtype {dt} is not an NVDLA element type (int8/uint8 for int8 precision, "
            f"int16/uint16/float16 for int16/fp16; seed 000 'Precision Type')"
        )
    return dt


def _atom(params: dict[str, Any]) -> int:
    atom = params.get("atom_bytes")
    if atom is None:
        atom = _hw(params["profile"]).atom_bytes
    if atom <= 0 or atom & (atom - 1):
        raise LayoutError(f"atom_bytes={atom} must be a power of two (8 on nv_small, 32 on nv_full)")
    return int(atom)


def _atom_origin(params: dict[str, Any]) -> str:
    """Where the atom size came from, for error messages: the profile name or the override."""
    if params.get("atom_bytes") is not None:
        return f"atom_bytes={params['atom_bytes']}"
    return f"profile {params['profile']}"


#: Why strides are multiples of the memory atom (see layouts README, "Settled against the RTL
#: and C model"): nvdla/hw master (v2) passes only stride[31:log2(atom)] to CDMA and SDP and
#: zeroes the low log2(atom) address bits on the MCIF read path; nvdlav1 registers hold [31:5].
STRIDE_RULE = ("strides are whole memory atoms: NVDLA ignores stride bits below the atom "
               "(v2 CDMA/SDP take stride[31:log2(atom)], v1 registers hold [31:5])")


def _profile_params() -> tuple[Param, ...]:
    return (
        Param("profile", str, "nv_full", "hardware profile giving the atom size", tuple(list_profiles())),
        Param("atom_bytes", int, None, "memory atom in bytes; overrides the profile (8 nv_small, 32 nv_full)"),
    )


# --------------------------------------------------------------------------------------------
# Feature data format (and the SDP operand formats that share its C' -> W -> H -> C order)
# --------------------------------------------------------------------------------------------


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


_FEATURE_PARAMS = _profile_params() + (
    Param("line_stride", int, None, "bytes between lines, a multiple of the atom (default packed: W * atom)"),
    Param("surface_stride", int, None, "bytes between surfaces, a multiple of the atom (default packed: H * line_stride)"),
    Param("pad_value", float, 0.0, "value of the channel-padding lanes of the last surface (not NaN)"),
)


def _feature_geo(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> CubeGeometry:
    if len(shape) != 3:
        raise LayoutError(f"feature data is a (C, H, W) cube, got shape {shape}")
    C, H, W = shape
    return cube_geometry(C, H, W, dt.itemsize, _atom(p), line_stride=p["line_stride"],
                         surface_stride=p["surface_stride"], atom_origin=_atom_origin(p))


def feature_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(arr.dtype, "feature data")
    geo = _feature_geo(arr.shape, dt, p)
    sdt = storage_dtype(dt)
    plan = cube_plan(geo, sdt, _pad_bits(p["pad_value"], dt))
    return execute_pack(to_storage(arr)[..., None], plan)


def feature_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(dt, "feature data")
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


# --------------------------------------------------------------------------------------------
# Pixel (ROI) formats
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PixelFormat:
    """One row of seed 000's "Pixel formats and valid setting" table plus its bit layout.

    Component names list the fields from the most to the least significant bits of the
    little-endian pixel word, so memory order is the reverse of the name (e.g. T_A8B8G8R8 is
    bytes R, G, B, A); this matches the NVDLA C model's CDMA image fetch. Array channels are in
    CBUF order: R/Y = 0, G/U = 1, B/V = 2, A/X = 3.

    Semi-planar ``T_Y*___<p><q>_N444``: the second (UV) plane holds one <p><q> pair per pixel
    named the same way, most significant first, so T_Y8___U8V8 stores V then U (V at the lower
    address) and T_Y8___V8U8 stores U then V (the NV12 byte order); 10/12/16-bit formats do the
    same with little-endian 16-bit halves. Settled against nvdla/hw (layouts README): the RTL
    byte-swaps the UV plane only for the U-first names (NV_NVDLA_CDMA_IMG_ctrl.v pixel_order
    11'h200 / 11'h400 -> NV_NVDLA_CDMA_IMG_sg.v rsp_img_data_sw_o9 / _o10) and the C model reads
    U from the second element of the pair for them (NV_NVDLA_cdma.cpp
    ImageConvDataResponseSequencerCommon, rgba_idx 0, 2, 1).
    """

    name: str
    planes: int
    channels: int
    precision: str
    x_offset_max: int

    @property
    def fields(self) -> list[tuple[str, int]]:
        body = self.name[2:].replace("_N444", "").replace("___", "")
        body = body.removesuffix("_F").removesuffix("_I")
        return [(m.group(1), int(m.group(2))) for m in re.finditer(r"([ABGRXYUV])(\d+)", body)]

    @property
    def float(self) -> bool:
        return self.name.endswith("_F")

    @property
    def signed(self) -> bool:
        return self.name.endswith("_I")


_CH = {"R": 0, "Y": 0, "G": 1, "U": 1, "B": 2, "V": 2, "A": 3, "X": 3}

#: Seed 000 table "Pixel formats and valid setting" (format, # of planar, channels, precision,
#: max X offset).
PIXEL_FORMATS: dict[str, PixelFormat] = {
    f.name: f
    for f in (
        PixelFormat("T_R8", 1, 1, "int8", 31),
        PixelFormat("T_R10", 1, 1, "int16", 15),
        PixelFormat("T_R12", 1, 1, "int16", 15),
        PixelFormat("T_R16", 1, 1, "int16", 15),
        PixelFormat("T_R16_I", 1, 1, "int16", 15),
        PixelFormat("T_R16_F", 1, 1, "int16", 15),
        PixelFormat("T_A16B16G16R16", 1, 4, "int16", 3),
        PixelFormat("T_X16B16G16R16", 1, 4, "int16", 3),
        PixelFormat("T_A16B16G16R16_F", 1, 4, "fp16", 3),
        PixelFormat("T_A16Y16U16V16", 1, 4, "int16", 3),
        PixelFormat("T_V16U16Y16A16", 1, 4, "int16", 3),
        PixelFormat("T_A16Y16U16V16_F", 1, 4, "fp16", 3),
        PixelFormat("T_A8B8G8R8", 1, 4, "int8", 7),
        PixelFormat("T_A8R8G8B8", 1, 4, "int8", 7),
        PixelFormat("T_B8G8R8A8", 1, 4, "int8", 7),
        PixelFormat("T_R8G8B8A8", 1, 4, "int8", 7),
        PixelFormat("T_X8B8G8R8", 1, 4, "int8", 7),
        PixelFormat("T_X8R8G8B8", 1, 4, "int8", 7),
        PixelFormat("T_B8G8R8X8", 1, 4, "int8", 7),
        PixelFormat("T_R8G8B8X8", 1, 4, "int8", 7),
        PixelFormat("T_A2B10G10R10", 1, 4, "int16", 7),
        PixelFormat("T_A2R10G10B10", 1, 4, "int16", 7),
        PixelFormat("T_B10G10R10A2", 1, 4, "int16", 7),
        PixelFormat("T_R10G10B10A2", 1, 4, "int16", 7),
        PixelFormat("T_A2Y10U10V10", 1, 4, "int16", 7),
        PixelFormat("T_V10U10Y10A2", 1, 4, "int16", 7),
        PixelFormat("T_A8Y8U8V8", 1, 4, "int8", 7),
        PixelFormat("T_V8U8Y8A8", 1, 4, "int8", 7),
        PixelFormat("T_Y8___U8V8_N444", 2, 3, "int8", 31),
        PixelFormat("T_Y8___V8U8_N444", 2, 3, "int8", 31),
        PixelFormat("T_Y10___U10V10_N444", 2, 3, "int16", 15),
        PixelFormat("T_Y10___V10U10_N444", 2, 3, "int16", 15),
        PixelFormat("T_Y12___U12V12_N444", 2, 3, "int16", 15),
        PixelFormat("T_Y12___V12U12_N444", 2, 3, "int16", 15),
        PixelFormat("T_Y16___U16V16_N444", 2, 3, "int16", 15),
        PixelFormat("T_Y16___V16U16_N444", 2, 3, "int16", 15),
    )
}

PIXEL_ALIGN = 32  # "Both start address and line stride of pitch linear shall aligned to 32 bytes"


def _pixel_container(fmt: PixelFormat) -> tuple[np.dtype, list[list[list[tuple[int, int, int]]]]]:
    """Per plane: list of containers, each a list of (channel, lsb, width) fields.

    Components of 8 or 16 bits each get their own container (byte/half-word); 10-bit packed
    formats (A2B10G10R10 ...) use one 32-bit container per pixel.
    """
    fields = fmt.fields
    if fmt.planes == 2:
        y, rest = fields[0], fields[1:]
        planes = [[y], rest]
    else:
        planes = [fields]
    out: list[list[list[tuple[int, int, int]]]] = []
    widths = {w for _, w in fields}
    if 2 in widths:
        # 10-bit packed formats: one 32-bit word per pixel, fields from the LSB in reversed name order
        cdt: np.dtype = np.dtype("<u4")
        lsb, fl = 0, []
        for n, w in reversed(fields):
            fl.append((_CH[n], lsb, w))
            lsb += w
        return cdt, [[fl]]
    # 8-bit components in bytes; 10/12/16-bit components each in a 16-bit container. Containers
    # go to memory in reversed name order, for the UV plane too: U8V8 -> V, U; V8U8 -> U, V.
    cdt = np.dtype("<u1") if widths <= {8} else np.dtype("<u2")
    bits = cdt.itemsize * 8
    for pl in planes:
        out.append([[(_CH[n], 0, bits)] for n, _ in reversed(pl)])
    return cdt, out


def _pixel_dtype(fmt: PixelFormat) -> np.dtype:
    cdt, _ = _pixel_container(fmt)
    if fmt.float:
        return np.dtype(np.float16)
    if fmt.signed:
        return np.dtype(np.int16)
    return np.dtype(np.uint8) if cdt.itemsize == 1 else np.dtype(np.uint16)


def _pixel_channel_index(fmt: PixelFormat, ch: int) -> int:
    # 3-channel semi-planar formats have channels Y, U, V only
    return ch


def _pixel_geometry(fmt: PixelFormat, H: int, W: int, p: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(plane offset, line stride, bytes per pixel) per plane, validated."""
    cdt, planes = _pixel_container(fmt)
    x = p["x_offset"]
    if not 0 <= x <= fmt.x_offset_max:
        raise LayoutError(
            f"{fmt.name}: x_offset={x} outside the valid X offset range 0~{fmt.x_offset_max} "
            f"(seed 000 pixel format table)"
        )
    out: list[tuple[int, int, int]] = []
    offset = 0
    for i, pl in enumerate(planes):
        bpp = len(pl) * cdt.itemsize
        key = "line_stride" if i == 0 else "uv_line_stride"
        ls = p[key]
        if ls is None:
            ls = align_up((x + W) * bpp, PIXEL_ALIGN)
        check_aligned(f"{fmt.name} {key}", ls, PIXEL_ALIGN, "pitch-linear line stride aligns to 32 bytes (seed 000)")
        if ls < (x + W) * bpp:
            raise LayoutError(f"{fmt.name}: {key}={ls} is smaller than (x_offset + W) * {bpp} = {(x + W) * bpp} bytes")
        if i == 1:
            uo = p["uv_offset"]
            offset = align_up(out[0][0] + H * out[0][1], PIXEL_ALIGN) if uo is None else uo
            check_aligned(f"{fmt.name} uv_offset", offset, PIXEL_ALIGN, "pitch-linear plane start address aligns to 32 bytes (seed 000)")
            if offset < out[0][0] + H * out[0][1] and H:
                raise LayoutError(f"{fmt.name}: uv_offset={offset} overlaps the Y plane ({H * out[0][1]} bytes)")
        out.append((offset, ls, bpp))
    return out


def _pixel_to_containers(fmt: PixelFormat, arr: np.ndarray) -> list[np.ndarray]:
    cdt, planes = _pixel_container(fmt)
    want = _pixel_dtype(fmt)
    a = arr
    if a.ndim == 2 and fmt.channels == 1:
        a = a[..., None]
    if a.ndim != 3 or a.shape[2] != fmt.channels:
        raise LayoutError(f"{fmt.name}: pixel data must have shape (H, W, {fmt.channels}), got {arr.shape}")
    if a.dtype.itemsize != want.itemsize or a.dtype.kind not in "uif":
        raise LayoutError(f"{fmt.name}: expected {want} pixel components, got {a.dtype}")
    bits = a.view(np.dtype(f"<u{a.dtype.itemsize}")) if a.dtype.kind != "u" else a
    res = []
    for pl in planes:
        conts = []
        for fields in pl:
            if len(fields) == 1 and fields[0][2] == cdt.itemsize * 8:
                conts.append(bits[..., fields[0][0]].astype(cdt))
                continue
            word = np.zeros(a.shape[:2], dtype=cdt)
            for ch, lsb, w in fields:
                v = bits[..., ch].astype(np.uint64)
                if np.any(v >> w):
                    raise LayoutError(f"{fmt.name}: channel {ch} value exceeds its {w}-bit field")
                word |= (v << lsb).astype(cdt)
            conts.append(word)
        res.append(np.stack(conts, axis=-1))
    return res


def _pixel_from_containers(fmt: PixelFormat, planes_data: list[np.ndarray]) -> np.ndarray:
    cdt, planes = _pixel_container(fmt)
    want = _pixel_dtype(fmt)
    H, W = planes_data[0].shape[:2]
    out = np.zeros((H, W, fmt.channels), dtype=np.dtype(f"<u{want.itemsize}"))
    for pl, data in zip(planes, planes_data):
        for j, fields in enumerate(pl):
            for ch, lsb, w in fields:
                v = (data[..., j].astype(np.uint64) >> lsb) & ((1 << w) - 1)
                out[..., ch] = v
    return out.view(want) if want.kind != "u" else out


def _pixel_plans(fmt: PixelFormat, H: int, W: int, p: dict[str, Any]) -> tuple[int, list[Plan]]:
    cdt, planes = _pixel_container(fmt)
    geo = _pixel_geometry(fmt, H, W, p)
    plans, total = [], 0
    for (off, ls, bpp), pl in zip(geo, planes):
        n = len(pl)
        size = off + (H - 1) * ls + (p["x_offset"] + W) * bpp if H and W else off
        total = max(total, size)
        isz = cdt.itemsize
        plans.append(Plan(size, cdt, (Piece((), None, (0, 1, 2), (off + p["x_offset"] * bpp) // isz,
                                            (H, W, n), (ls // isz, n, 1)),)))
    return total, plans


def make_pixel_layout(fmt: PixelFormat) -> LayoutSpec:
    params: tuple[Param, ...] = (
        Param("x_offset", int, 0, f"redundant pixels before the first element of each line (0~{fmt.x_offset_max})"),
        Param("line_stride", int, None, "bytes per line of the (Y) plane, multiple of 32 (default: minimum)"),
    )
    if fmt.planes == 2:
        params += (
            Param("uv_line_stride", int, None, "bytes per line of the UV plane, multiple of 32"),
            Param("uv_offset", int, None, "byte offset of the UV plane in the buffer, multiple of 32"),
        )

    def pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
        conts = _pixel_to_containers(fmt, arr)
        H, W = conts[0].shape[:2]
        if fmt.planes == 1:
            p = {**p, "uv_line_stride": None, "uv_offset": None}
        total, plans = _pixel_plans(fmt, H, W, p)
        buf = np.zeros(total, np.uint8)
        for plan, c in zip(plans, conts):
            part = execute_pack(c, plan)
            buf[: part.size] |= part
        return buf

    def unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
        if len(shape) == 2 and fmt.channels == 1:
            shape = shape + (1,)
        if len(shape) != 3 or shape[2] != fmt.channels:
            raise LayoutError(f"{fmt.name}: shape must be (H, W, {fmt.channels}), got {shape}")
        H, W = shape[:2]
        if fmt.planes == 1:
            p = {**p, "uv_line_stride": None, "uv_offset": None}
        _, plans = _pixel_plans(fmt, H, W, p)
        _, planes = _pixel_container(fmt)
        data = [execute_unpack(buf, plan, (H, W, len(pl)), fmt.name) for plan, pl in zip(plans, planes)]
        return _pixel_from_containers(fmt, data)

    desc = (f"pixel format {fmt.name}: {fmt.planes} plane(s), {fmt.channels} channel(s), "
            f"{fmt.precision}, X offset 0~{fmt.x_offset_max}; pitch linear, 32-byte aligned lines")
    return LayoutSpec(f"nvdla.pixel.{fmt.name}", "nvdla", desc, params, pack, unpack,
                      str(_pixel_dtype(fmt)), SEED)


# --------------------------------------------------------------------------------------------
# Weights: direct convolution, image input, Winograd, deconvolution
# --------------------------------------------------------------------------------------------


def _weight_precision(dt: np.dtype) -> str:
    return "int8" if dt.itemsize == 1 else "int16/fp16"


def weight_group_size(params: dict[str, Any], dt: np.dtype) -> int:
    """Kernels per group: 32 for int8, 16 for int16/fp16 on nv_full (seed 000)."""
    g = params.get("kernels_per_group")
    if g is None:
        k = _hw(params["profile"]).mac_atomic_k
        g = k if dt.itemsize == 1 else max(k // 2, 1)
    if g <= 0:
        raise LayoutError(f"kernels_per_group={g} must be positive")
    return int(g)


def weight_cube_elements(params: dict[str, Any]) -> int:
    """Elements per 1x1xC' small cube: 64 on nv_full (seed 000), MAC atomic C otherwise."""
    e = params.get("cube_elements")
    if e is None:
        e = _hw(params["profile"]).mac_atomic_c
    if e <= 0:
        raise LayoutError(f"cube_elements={e} must be positive")
    return int(e)


def _k_groups(K: int, G: int) -> list[tuple[int, int, int]]:
    """(first kernel, number of groups, kernels per group) for the full groups and the tail."""
    out = []
    if K // G:
        out.append((0, K // G, G))
    if K % G:
        out.append(((K // G) * G, 1, K % G))
    return out


def dc_pieces(K: int, C: int, H: int, W: int, G: int, E: int, base: int = 0) -> list[Piece]:
    """Direct-convolution mapping of a (K, C, H, W) tensor: C' -> K -> W -> H -> C per group.

    Seed 000: groups of G kernels (last may be smaller); 1x1xC' cubes with C' <= E elements,
    the last channel block not padded; groups mapped compactly.
    """
    pieces = []
    chw = C * H * W
    cn, cr = C // E, C % E
    for k0, ng, kg in _k_groups(K, G):
        off = base + k0 * chw
        gstride = kg * chw
        ks = slice(k0, k0 + ng * kg)
        if cn:
            pieces.append(Piece((ks, slice(0, cn * E)), (ng, kg, cn, E, H, W), (0, 2, 4, 5, 1, 3), off,
                                (ng, cn, H, W, kg, E), (gstride, E * H * W * kg, W * kg * E, kg * E, E, 1)))
        if cr:
            pieces.append(Piece((ks, slice(cn * E, C)), (ng, kg, cr, H, W), (0, 3, 4, 1, 2), off + cn * E * H * W * kg,
                                (ng, H, W, kg, cr), (gstride, W * kg * cr, kg * cr, cr, 1)))
    return pieces


_WEIGHT_PARAMS = _profile_params() + (
    Param("kernels_per_group", int, None, "kernels per group (default 32 int8 / 16 int16,fp16 on nv_full)"),
    Param("cube_elements", int, None, "elements per 1x1xC' small cube (default 64 on nv_full)"),
)


def _weight_shape(shape: tuple[int, ...], what: str) -> tuple[int, int, int, int]:
    if len(shape) != 4:
        raise LayoutError(f"{what}: weights are (K, C, H, W) kernels, got shape {shape}")
    return tuple(int(s) for s in shape)  # type: ignore[return-value]  # len checked above


def dc_plan(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> Plan:
    K, C, H, W = _weight_shape(shape, "direct-convolution weight")
    G, E = weight_group_size(p, dt), weight_cube_elements(p)
    n = K * C * H * W * dt.itemsize
    return Plan(align_up(n, WEIGHT_DATA_ALIGN), storage_dtype(dt), tuple(dc_pieces(K, C, H, W, G, E)))


def dc_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(arr.dtype, "weight")
    return execute_pack(to_storage(arr), dc_plan(arr.shape, dt, p))


def dc_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(dt, "weight")
    return from_storage(execute_unpack(buf, dc_plan(shape, dt, p), shape, "nvdla.weight.dc"), dt)


def weight_group_bytes(shape: tuple[int, ...], dt: np.dtype, params: dict[str, Any]) -> list[int]:
    """Uncompressed bytes of each kernel group (the groups WGS counts) for DC-like mappings."""
    K, C, H, W = shape
    G = weight_group_size(params, dt)
    return [min(G, K - k) * C * H * W * np.dtype(dt).itemsize for k in range(0, K, G)]


# image input: channel pre-extension and optional post-extension ----------------------------


def image_pre_extend(weight: np.ndarray) -> np.ndarray:
    """Channel pre-extension: all weights of one kernel line become one channel.

    (K, C, R, S) -> (K, S*C, R, 1) with new channel s*C + c, the order in which a line of S
    pixels of C components lies in memory (seed 000 'Basic Weight for image input').
    """
    K, C, R, S = weight.shape
    return weight.transpose(0, 3, 1, 2).reshape(K, S * C, R, 1)


def image_pre_extend_inverse(ext: np.ndarray, channels: int) -> np.ndarray:
    K, SC, R, _ = ext.shape
    S = SC // channels
    return ext.reshape(K, S, channels, R).transpose(0, 2, 3, 1)


def _image_pieces(K: int, Ce: int, R: int, G: int, E: int, post: int) -> list[Piece]:
    """Post-extension by ``post`` lines on a pre-extended (K, Ce, R) tensor.

    Lines r = g*post + j of a kernel are combined into one row with channel j*Ce + c; the last
    row keeps only the remaining lines ("do NOT append 0s"). Each combined row fits one C' cube.
    """
    rf, rr = R // post, R % post
    pieces = []
    for k0, ng, kg in _k_groups(K, G):
        off = k0 * Ce * R
        gs = kg * Ce * R
        ks = slice(k0, k0 + ng * kg)
        if rf:
            pieces.append(Piece((ks, slice(None), slice(0, rf * post)), (ng, kg, Ce, rf, post), (0, 3, 1, 4, 2), off,
                                (ng, rf, kg, post, Ce), (gs, kg * post * Ce, post * Ce, Ce, 1)))
        if rr:
            pieces.append(Piece((ks, slice(None), slice(rf * post, R)), (ng, kg, Ce, rr), (0, 1, 3, 2),
                                off + rf * kg * post * Ce, (ng, kg, rr, Ce), (gs, rr * Ce, Ce, 1)))
    return pieces


def image_plan(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> tuple[Plan, tuple[int, ...]]:
    K, C, R, S = _weight_shape(shape, "image-input weight")
    G, E = weight_group_size(p, dt), weight_cube_elements(p)
    post = p["post_extension"]
    Ce = S * C
    if post == 1:
        pieces = dc_pieces(K, Ce, R, 1, G, E)
    else:
        limit = {2: 32, 4: 16}[post]
        if Ce > limit:
            raise LayoutError(
                f"image weight post-extension {post}-line needs pre-extended channels <= {limit} "
                f"(got S*C = {Ce}); seed 000: two-line (C<=32) or four-line (C<=16)"
            )
        if post * Ce > E:
            raise LayoutError(f"post-extension: {post} lines x {Ce} channels exceed one {E}-element cube")
        pieces = _image_pieces(K, Ce, R, G, E, post)
    n = K * C * R * S * dt.itemsize
    return Plan(align_up(n, WEIGHT_DATA_ALIGN), storage_dtype(dt), tuple(pieces)), (K, Ce, R, 1)


def image_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(arr.dtype, "weight")
    plan, _ = image_plan(arr.shape, dt, p)
    ext = image_pre_extend(to_storage(arr))
    return execute_pack(ext if p["post_extension"] == 1 else ext[..., 0], plan)


def image_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(dt, "weight")
    plan, eshape = image_plan(shape, dt, p)
    ushape = eshape if p["post_extension"] == 1 else eshape[:3]
    ext = execute_unpack(buf, plan, ushape, "nvdla.weight.image").reshape(eshape)
    return from_storage(np.ascontiguousarray(image_pre_extend_inverse(ext, shape[1])), dt)


# Winograd -----------------------------------------------------------------------------------

#: Seed 000 'Matrix for weight transfer for Winograd'
WINOGRAD_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def winograd_channel_extend(weight: np.ndarray, stride: int) -> np.ndarray:
    """Channel extension for stride != 1: (K, C, 3s, 3s) -> (K, s*s*C, 3, 3).

    Kernels smaller than 3s are zero-padded to 3s. New channel (dy*s + dx)*C + c holds
    w[k, c, y*s + dy, x*s + dx]. The seed only states that the extended kernel is 3x3; the
    channel order here follows the stride phase (dy, dx) then the original channel.
    """
    K, C, R, S = weight.shape
    s = int(stride)
    if s < 1 or R > 3 * s or S > 3 * s:
        raise LayoutError(f"Winograd channel extension: kernel {R}x{S} with stride {s} cannot become 3x3")
    full = np.zeros((K, C, 3 * s, 3 * s), dtype=weight.dtype)
    full[:, :, :R, :S] = weight
    # (K, C, 3, s(dy), 3, s(dx)) -> (K, dy, dx, C, 3, 3)
    return full.reshape(K, C, 3, s, 3, s).transpose(0, 3, 5, 1, 2, 4).reshape(K, s * s * C, 3, 3)


def winograd_phase1(weight: np.ndarray, *, stride: int = 1, atom_bytes: int = 32, scale: float = 1.0,
                    dtype: Any = None) -> np.ndarray:
    """Phase 1: pad C to a 32-byte atom, extend channels for stride != 1, compute G W G^T.

    Returns (K, C', 4, 4) in ``dtype`` (default: the input dtype). Integer results are
    ``round(scale * GWG^T)`` (half away from zero) saturated to the type; the scaling factor is
    the "scaling factor may involve" of seed 000.
    """
    w = np.asarray(weight)
    dt = np.dtype(dtype or w.dtype)
    K, C, R, S = w.shape
    lanes = atom_bytes // dt.itemsize
    cp = align_up(C, lanes)
    if cp != C:
        w = np.concatenate([w, np.zeros((K, cp - C, R, S), w.dtype)], axis=1)
    if stride != 1:
        w = winograd_channel_extend(w, stride)
    elif (R, S) != (3, 3):
        raise LayoutError(f"Winograd weights are 3x3 kernels (got {R}x{S}) for stride 1")
    t = np.einsum("ij,kcjl,ml->kcim", WINOGRAD_G, w.astype(np.float64), WINOGRAD_G) * scale
    if dt.kind == "f":
        return t.astype(dt)
    info = np.iinfo(dt)
    r = np.sign(t) * np.floor(np.abs(t) + 0.5)
    return np.clip(r, info.min, info.max).astype(dt)


def winograd_pieces(K: int, C: int, G: int) -> list[Piece]:
    """Phase 2: 4x4x4-element cubes scanned K -> C inside each group of G kernels.

    Inside a cube the elements go channel (4) fastest, then x, then y -- the feature-data
    order; the seed names the cube size but not its internal order.
    """
    c4 = C // 4
    pieces = []
    for k0, ng, kg in _k_groups(K, G):
        gs = kg * C * 16
        pieces.append(Piece((slice(k0, k0 + ng * kg),), (ng, kg, c4, 4, 4, 4), (0, 2, 1, 4, 5, 3), k0 * C * 16,
                            (ng, c4, kg, 4, 4, 4), (gs, kg * 64, 64, 16, 4, 1)))
    return pieces


def winograd_plan(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> Plan:
    K, C, H, W = _weight_shape(shape, "Winograd weight")
    if (H, W) != (4, 4):
        raise LayoutError(f"Winograd phase-2 weights are 4x4 after G W G^T, got {H}x{W}")
    if C % 4:
        raise LayoutError(f"Winograd: the channel size should always divisible by 4 (got C={C}; seed 000)")
    G = weight_group_size(p, dt)
    return Plan(align_up(K * C * 16 * dt.itemsize, WEIGHT_DATA_ALIGN), storage_dtype(dt), tuple(winograd_pieces(K, C, G)))


def winograd_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(arr.dtype, "weight")
    if p["convert"]:
        arr = winograd_phase1(arr, stride=p["stride"], atom_bytes=_atom(p), scale=p["scale"])
    return execute_pack(to_storage(arr), winograd_plan(arr.shape, dt, p))


def winograd_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(dt, "weight")
    return from_storage(execute_unpack(buf, winograd_plan(shape, dt, p), shape, "nvdla.weight.winograd"), dt)


# Deconvolution ------------------------------------------------------------------------------


def deconv_split(weight: np.ndarray, stride_x: int, stride_y: int) -> list[np.ndarray]:
    """Set split for deconvolution: one sub-kernel per stride phase (dy, dx), y-phase major.

    Sub-kernel (dy, dx) = w[:, :, dy::sy, dx::sx], zero-padded to ceil(R/sy) x ceil(S/sx).
    """
    K, C, R, S = weight.shape
    rh, sw = ceil_div(R, stride_y), ceil_div(S, stride_x)
    full = np.zeros((K, C, rh * stride_y, sw * stride_x), dtype=weight.dtype)
    full[:, :, :R, :S] = weight
    parts = full.reshape(K, C, rh, stride_y, sw, stride_x)
    return [np.ascontiguousarray(parts[:, :, :, dy, :, dx]) for dy in range(stride_y) for dx in range(stride_x)]


def _deconv_layout(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> tuple[list[int], tuple[int, ...], int]:
    K, C, R, S = _weight_shape(shape, "deconvolution weight")
    sx, sy = p["stride_x"], p["stride_y"]
    if sx < 1 or sy < 1:
        raise LayoutError("deconvolution strides must be >= 1")
    sub = (K, C, ceil_div(R, sy), ceil_div(S, sx))
    size = dc_plan(sub, dt, p).nbytes
    step = align_up(size, WEIGHT_START_ALIGN)
    return [i * step for i in range(sx * sy)], sub, size


def deconv_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(arr.dtype, "weight")
    offs, sub, size = _deconv_layout(arr.shape, dt, p)
    buf = np.zeros(offs[-1] + size, np.uint8)
    for off, part in zip(offs, deconv_split(to_storage(arr), p["stride_x"], p["stride_y"])):
        buf[off:off + size] = execute_pack(part, dc_plan(sub, dt, p))
    return buf


def deconv_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(dt, "weight")
    offs, sub, size = _deconv_layout(shape, dt, p)
    K, C, R, S = shape
    sx, sy = p["stride_x"], p["stride_y"]
    full = np.zeros((K, C, sub[2], sy, sub[3], sx), dtype=storage_dtype(dt))
    for i, off in enumerate(offs):
        full[:, :, :, i // sx, :, i % sx] = execute_unpack(buf[off:], dc_plan(sub, dt, p), sub, "nvdla.weight.deconv")
    out = full.reshape(K, C, sub[2] * sy, sub[3] * sx)[:, :, :R, :S]
    return from_storage(np.ascontiguousarray(out), dt)


# --------------------------------------------------------------------------------------------
# Sparse weight compression (WMB / WGS / compressed data)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompressedWeights:
    """The three memory surfaces of seed 000 'Sparse Compression option'.

    ``wmb``: one bit per element (1 = non-zero), little-endian bit order, zero-padded to 128
    bytes. ``data``: non-zero elements packed compactly, zero-padded to 128 bytes. ``wgs``: per
    kernel group the remaining byte count, 32-bit little-endian, padded to 128 bytes.
    """

    wgs: np.ndarray
    wmb: np.ndarray
    data: np.ndarray

    @property
    def group_sizes(self) -> np.ndarray:
        return self.wgs.view("<u4")


def _pad_to(buf: np.ndarray, align: int) -> np.ndarray:
    out = np.zeros(align_up(buf.size, align), np.uint8)
    out[: buf.size] = buf
    return out


def compress_weights(mapped: np.ndarray, group_bytes: list[int], itemsize: int) -> CompressedWeights:
    """Compress an uncompressed weight surface group by group (seed 000).

    ``mapped`` holds the mapped weights (tail padding allowed); ``group_bytes`` the uncompressed
    bytes of each kernel group in mapping order. An element is "zero" when all its bits are 0
    (so fp16 -0.0 is kept and round-trips bit-exactly).
    """
    raw = np.asarray(mapped, dtype=np.uint8).reshape(-1)
    total = int(sum(group_bytes))
    if total > raw.size or total % itemsize or any(g % itemsize for g in group_bytes):
        raise LayoutError(f"compression: groups of {total} bytes do not fit {raw.size} mapped bytes of {itemsize}-byte elements")
    el = raw[:total].view(f"<u{itemsize}")
    mask = el != 0
    wmb = np.packbits(mask, bitorder="little")
    starts = np.cumsum([0] + [g // itemsize for g in group_bytes[:-1]])
    counts = np.add.reduceat(mask.astype(np.int64), starts) if el.size else np.zeros(0, np.int64)
    counts = np.where(np.asarray([g for g in group_bytes]) == 0, 0, counts) if len(group_bytes) else counts
    wgs = (counts * itemsize).astype("<u4")
    return CompressedWeights(_pad_to(wgs.view(np.uint8), WEIGHT_DATA_ALIGN),
                             _pad_to(wmb, WEIGHT_DATA_ALIGN),
                             _pad_to(el[mask].view(np.uint8), WEIGHT_DATA_ALIGN))


def decompress_weights(cw: CompressedWeights, group_bytes: list[int], itemsize: int) -> np.ndarray:
    """Rebuild the uncompressed surface (128-byte tail-aligned) from WMB, WGS and data."""
    total = int(sum(group_bytes))
    n = total // itemsize
    if cw.wmb.size * 8 < n:
        raise LayoutError(f"WMB surface has {cw.wmb.size * 8} bits, {n} elements need one bit each")
    mask = np.unpackbits(np.asarray(cw.wmb, np.uint8), count=n, bitorder="little").astype(bool)
    starts = np.cumsum([0] + [g // itemsize for g in group_bytes[:-1]])
    counts = np.add.reduceat(mask.astype(np.int64), starts) * itemsize if n else np.zeros(0, np.int64)
    wgs = np.asarray(cw.wgs, np.uint8)[: 4 * len(group_bytes)].view("<u4")
    if wgs.size != len(group_bytes) or not np.array_equal(wgs.astype(np.int64), counts):
        raise LayoutError(f"WGS {wgs.tolist()} disagrees with the WMB bit counts {counts.tolist()} (bytes per group)")
    nnz = int(mask.sum())
    if cw.data.size < nnz * itemsize:
        raise LayoutError(f"compressed data has {cw.data.size} bytes, WMB marks {nnz * itemsize}")
    out = np.zeros(align_up(total, WEIGHT_DATA_ALIGN), np.uint8)
    el = out[:total].view(f"<u{itemsize}")
    el[mask] = np.asarray(cw.data, np.uint8)[: nnz * itemsize].view(f"<u{itemsize}")
    return out


_BASES = ("dc", "image", "winograd")


def _compressed_parts(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> tuple[list[int], Plan]:
    base = p["base"]
    if base == "dc":
        plan = dc_plan(shape, dt, p)
    elif base == "image":
        plan, _ = image_plan(shape, dt, p)
    else:
        plan = winograd_plan(shape, dt, p)
    K = shape[0]
    per_kernel = int(np.prod(shape[1:])) * dt.itemsize
    G = weight_group_size(p, dt)
    return [min(G, K - k) * per_kernel for k in range(0, K, G)], plan


def compressed_offsets(n_groups: int, n_elements: int) -> tuple[int, int]:
    """Byte offsets of the WMB and data surfaces in the packed blob [WGS | WMB | data]."""
    wgs_size = align_up(4 * n_groups, WEIGHT_DATA_ALIGN)
    wmb_off = align_up(wgs_size, WEIGHT_START_ALIGN)
    wmb_size = align_up(ceil_div(n_elements, 8), WEIGHT_DATA_ALIGN)
    return wmb_off, align_up(wmb_off + wmb_size, WEIGHT_START_ALIGN)


def compressed_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(arr.dtype, "weight")
    groups, plan = _compressed_parts(arr.shape, dt, p)
    if p["base"] == "image":
        ext = image_pre_extend(to_storage(arr))
        mapped = execute_pack(ext if p["post_extension"] == 1 else ext[..., 0], plan)
    else:
        mapped = execute_pack(to_storage(arr), plan)
    cw = compress_weights(mapped, groups, dt.itemsize)
    wmb_off, data_off = compressed_offsets(len(groups), arr.size)
    out = np.zeros(data_off + cw.data.size, np.uint8)
    out[: cw.wgs.size] = cw.wgs
    out[wmb_off: wmb_off + cw.wmb.size] = cw.wmb
    out[data_off:] = cw.data
    return out


def compressed_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = _element_dtype(dt, "weight")
    groups, plan = _compressed_parts(shape, dt, p)
    n = int(np.prod(shape))
    wmb_off, data_off = compressed_offsets(len(groups), n)
    if buf.size < data_off:
        raise LayoutError(f"compressed weight blob has {buf.size} bytes, headers need {data_off}")
    cw = CompressedWeights(buf[: 4 * len(groups)], buf[wmb_off:data_off], buf[data_off:])
    mapped = decompress_weights(cw, groups, dt.itemsize)
    unpack = {"dc": dc_unpack, "image": image_unpack, "winograd": winograd_unpack}[p["base"]]
    return unpack(mapped, shape, dt, p)


# --------------------------------------------------------------------------------------------
# Bias / PReLU / batch-norm / element-wise operand formats (SDP)
# --------------------------------------------------------------------------------------------

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
    atom = _atom(p)
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
                            surface_stride=p["surface_stride"], what=use, atom_origin=_atom_origin(p))
    pdt = np.dtype(np.float16) if prec == "fp16" else np.dtype(np.int8 if ds == 1 else np.int16)
    return geo, (C, H, W, comps), pdt


def make_sdp_layout(use: str, modes: tuple[str, ...]) -> LayoutSpec:
    params = _profile_params() + (
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
        return _pad_to(out, 32) if use == "ew" else out   # element-wise: data size aligned to 32 bytes

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


# --------------------------------------------------------------------------------------------
# Alignment table
# --------------------------------------------------------------------------------------------

#: Seed 000 'Requirements of alignment': format -> (start address, line stride, surface stride,
#: planar/cube stride, data size); None = NA.
ALIGNMENT: dict[str, tuple[int | None, int | None, int | None, int | None, int | None]] = {
    "feature": (32, 32, 32, 32, None),
    "weight": (256, None, None, None, 128),
    "wmb": (256, None, None, None, 128),
    "wgs": (256, None, None, None, 128),
    "pixel": (32, 32, None, None, None),
    "bias": (32, 32, 32, None, None),
    "prelu": (32, None, None, None, None),
    "bn": (32, None, None, None, None),
    "ew": (32, 32, None, None, 32),
}
_ALIGN_FIELDS = ("start_address", "line_stride", "surface_stride", "planar_stride", "data_size")

#: Rows whose 32-byte address/stride alignment is the nv_full memory atom: CDMA (feature) and SDP
#: RDMA/WDMA (bias, PReLU, BN, EW) take base address and strides as [31:log2(atom)] in nvdla/hw
#: master, so on a smaller atom (nv_small: 8) the rule is the atom. Weights, WMB/WGS, pixels and
#: the EW data size keep the seed's fixed values.
_ATOM_ROWS = frozenset({"feature", "bias", "prelu", "bn", "ew"})
_ATOM_FIELDS = ("start_address", "line_stride", "surface_stride", "planar_stride")


def check_alignment(fmt: str, *, atom_bytes: int | None = None, profile: str | None = None,
                    **values: int) -> None:
    """Validate addresses/strides/sizes of ``fmt`` against the alignment table.

    ``values`` keys: start_address, line_stride, surface_stride, planar_stride, data_size.
    The table is seed 000's (32-byte atom, nv_full). Give ``profile`` (or ``atom_bytes``) to
    check the atom-derived rows (feature, bias, prelu, bn, ew addresses and strides) against
    that configuration's memory atom instead, e.g. 8 bytes on nv_small.
    """
    if fmt not in ALIGNMENT:
        raise LayoutError(f"unknown format {fmt!r} for the alignment table; known: {sorted(ALIGNMENT)}")
    row = dict(zip(_ALIGN_FIELDS, ALIGNMENT[fmt]))
    source = "seed 000 alignment table"
    if atom_bytes is None and profile is not None:
        atom_bytes = _hw(profile).atom_bytes
    if atom_bytes is not None and fmt in _ATOM_ROWS:
        atom = _atom({"atom_bytes": atom_bytes})
        row.update({k: atom for k in _ATOM_FIELDS if row[k] is not None})
        source = f"the {atom}-byte memory atom of {profile or f'atom_bytes={atom}'}; {STRIDE_RULE}"
    for key, val in values.items():
        if key not in row:
            raise LayoutError(f"check_alignment: unknown field {key!r}; accepted: {list(_ALIGN_FIELDS)}")
        if val is None or (align := row[key]) is None:
            continue
        check_aligned(f"{fmt} {key}", val, align, f"alignment of {key.replace('_', ' ')} for {fmt} is {align} bytes ({source})")


# --------------------------------------------------------------------------------------------
# Registry entries
# --------------------------------------------------------------------------------------------


def nvdla_layouts() -> list[LayoutSpec]:
    specs = [
        LayoutSpec(
            "nvdla.feature", "nvdla",
            "feature data cube (C, H, W): 1x1xatom cubes in C' -> W -> H -> C order, packed or "
            "unpacked (line/surface strides aligned to the atom), last surface channel-padded",
            _FEATURE_PARAMS, feature_pack, feature_unpack, "int8", SEED),
        LayoutSpec(
            "nvdla.weight.dc", "nvdla",
            "direct-convolution weights (K, C, H, W): kernel groups, 1x1xC' cubes scanned "
            "C' -> K -> W -> H -> C, groups compact, 128-byte tail alignment",
            _WEIGHT_PARAMS, dc_pack, dc_unpack, "int8", SEED),
        LayoutSpec(
            "nvdla.weight.image", "nvdla",
            "image-input weights (K, C, H, W): channel pre-extension (line -> channel), optional "
            "2/4-line post-extension, then the direct-convolution mapping",
            _WEIGHT_PARAMS + (Param("post_extension", int, 1, "lines combined by channel post-extension", (1, 2, 4)),),
            image_pack, image_unpack, "int8", SEED),
        LayoutSpec(
            "nvdla.weight.winograd", "nvdla",
            "Winograd weights (K, C, 4, 4) after G W G^T: 4x4x4-element cubes scanned K -> C per "
            "group; convert=true runs phase 1 (pad C, channel extension, G W G^T) on raw kernels",
            _WEIGHT_PARAMS[:3] + (
                Param("convert", bool, False, "input is raw 3x3 (3s x 3s) kernels: run phase 1 first"),
                Param("stride", int, 1, "convolution stride for phase-1 channel extension"),
                Param("scale", float, 1.0, "phase-1 scaling factor applied to G W G^T"),
            ),
            winograd_pack, winograd_unpack, "int8", SEED),
        LayoutSpec(
            "nvdla.weight.deconv", "nvdla",
            "deconvolution weights (K, C, H, W): set split into stride_x*stride_y sub-kernels, each "
            "in the direct-convolution mapping, each starting 256-byte aligned",
            _WEIGHT_PARAMS + (
                Param("stride_x", int, 1, "deconvolution stride in x"),
                Param("stride_y", int, 1, "deconvolution stride in y"),
            ),
            deconv_pack, deconv_unpack, "int8", SEED),
    ]
    specs.append(LayoutSpec(
        "nvdla.weight.compressed", "nvdla",
        "sparse-compressed weights (K, C, H, W): blob [WGS | WMB | data], each surface 128-byte "
        "sized and 256-byte aligned; WMB bits little-endian, WGS 32-bit bytes per group",
        _WEIGHT_PARAMS + (
            Param("base", str, "dc", "uncompressed mapping to compress", _BASES),
            Param("post_extension", int, 1, "image base only: post-extension lines", (1, 2, 4)),
        ),
        compressed_pack, compressed_unpack, "int8", SEED))
    specs += [
        make_sdp_layout("bias", ("per_channel", "per_element")),
        make_sdp_layout("prelu", ("per_channel",)),
        make_sdp_layout("bn", ("per_channel",)),
        make_sdp_layout("ew", ("per_element",)),
    ]
    specs += [make_pixel_layout(f) for f in PIXEL_FORMATS.values()]
    return specs
