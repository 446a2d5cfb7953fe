"""NVDLA pixel (ROI) formats: seed 000's "Pixel formats and valid setting" table, the bit
layout of each format's pixel word and the pitch-linear planes (32-byte aligned lines, an X
offset, a second UV plane for the semi-planar formats).
"""

from __future__ import annotations

import re
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
    check_aligned,
    execute_pack,
    execute_unpack,
)
from .common import SEED


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


def pixel_layouts() -> list[LayoutSpec]:
    return [make_pixel_layout(f) for f in PIXEL_FORMATS.values()]
