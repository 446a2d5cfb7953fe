"""The ``DIMG`` dump NVDLA's runtime test app writes (``umd/apps/runtime``: ``DlaImage.cpp``
``NvDlaImage::serialize``/``packData``, ``TestUtils.cpp`` ``Tensor2DIMG``), and its comparison.

File: ``"DIMG"``, the version (u32, 0), the metadata (u32 each: surface format, width, height,
channel, line stride, surface stride, size), then every element in (c, h, w) order, ``bpe``
bytes each, read from the output buffer at the format's offset:

* ``D_F8_CxHWx_x32_I``, ``D_F8_CxHWx_x8_I``, ``D_F16_CxHWx_x16_I``/``_F``:
  ``(c // x) * surface_stride + h * line_stride + w * x * bpe + (c % x) * bpe`` with x = 32, 8, 16.

The format comes from the output tensor's descriptor as ``Tensor2DIMG`` maps it (pixel format
and data type): FEATURE → INT8 x32, INT16 x16, HALF x16; FEATURE_X8 → INT8 x8, INT16 x16, HALF
x16; any other pixel format HALF x16. The element offsets follow from the format alone (its
atom: ``x * bpe`` bytes), never from a constant: an INT8 FEATURE_X8 output (nv_small's 8-byte
atoms) is read with 8-byte atoms whatever app numbering is asked for. Its number depends on the
test app's version: the regression goldens were written by the 2018 app (nvdla/sw 8a57643,
``umd/tests/runtime/DlaImage.h``: x32_I 40, x16_I 41, x16_F 42, no x8); the 2019 app (537e0e8
on) numbers x32_I 40, x8_I 41, x16_I 42, x16_F 43. ``numbering="2018"`` is the default; an x8
dump is numbered as the 2019 app does (the first that writes x8), and its metadata says so.

The configuration's atom (the profile's ``atom_bytes``) is compared with the format's: where
they differ the dump is still what NVDLA's app writes, but its elements are not the output cube
in order, and :attr:`DimgMeta.note` says so. NVDLA's own ``_small`` regression goldens are such
dumps: their output tensors are labelled FEATURE (x32) over 8-byte-atom surfaces, so the app read
x32 offsets over them (the MD5 regression compares exactly those bytes).

The regression dumps with ``stableHash``; its FP16 rules go through half_float's conversions to
float, so they are not what their comments say: ``tmp == 0x8000`` compares the value with the
number 32768, so 0x7800 (32768.0) is written as 0x0000 and -0 stays; a NaN is assigned the
number 0x7C00 = 31744.0 and written as 0x77C0. A test passes when the MD5 of the dump equals
``lead.md5``.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, replace

import numpy as np

from .fbs import PIXEL_FEATURE, PIXEL_FEATURE_X8, LoadableError, TensorDesc

__all__ = ["DimgMeta", "meta_for_tensor", "pack_dimg", "read_dimg", "compare_dimg", "md5"]

#: (bytes per element, elements per atom group, is float) of each feature format
LAYOUTS = {"F8_x32_I": (1, 32, False), "F8_x8_I": (1, 8, False), "F16_x16_I": (2, 16, False), "F16_x16_F": (2, 16, True)}
NUMBERINGS = {
    "2018": {"F8_x32_I": 40, "F16_x16_I": 41, "F16_x16_F": 42},
    "2019": {"F8_x32_I": 40, "F8_x8_I": 41, "F16_x16_I": 42, "F16_x16_F": 43},
}
HEADER = struct.Struct("<4sI7I")
MAX_DIMG_BYTES = 256 << 20
U32_MAX = 0xFFFF_FFFF


@dataclass(frozen=True)
class DimgMeta:
    format: int  # the number in the file
    layout: str  # key of LAYOUTS
    width: int
    height: int
    channel: int
    line_stride: int
    surface_stride: int
    size: int
    numbering: str = "2018"  # the test app whose format numbers the file uses
    note: str = ""  # the configuration's atom differs from the format's (module docstring)

    @property
    def atom(self) -> int:
        """Bytes of one atom group of the format (``x * bpe``): 32 for x32 and x16, 8 for x8."""
        bpe, x, _ = LAYOUTS[self.layout]
        return x * bpe

    def check_header(self, what: str) -> None:
        """Every header field fits its u32 (:class:`LoadableError` naming the field otherwise)."""
        for f in ("format", "width", "height", "channel", "line_stride", "surface_stride", "size"):
            v = getattr(self, f)
            if not 0 <= v <= U32_MAX:
                raise LoadableError(f"{what}: {f} {v} does not fit the DIMG header's 32-bit field")

    def offsets(self) -> np.ndarray:
        """Byte offset of every element, in (c, h, w) order."""
        bpe, x, _ = LAYOUTS[self.layout]
        c = np.arange(self.channel, dtype=np.int64)[:, None, None]
        h = np.arange(self.height, dtype=np.int64)[None, :, None]
        w = np.arange(self.width, dtype=np.int64)[None, None, :]
        return ((c // x) * self.surface_stride + h * self.line_stride + w * (x * bpe) + (c % x) * bpe).ravel()


def meta_for_tensor(t: TensorDesc, numbering: str = "2018", atom: int | None = None) -> DimgMeta:
    """The metadata ``Tensor2DIMG`` derives from the output tensor's descriptor; ``atom``: the
    configuration's atom size in bytes (the profile's), compared with the format's (``note``)."""
    if t.pixel_format not in (PIXEL_FEATURE, PIXEL_FEATURE_X8):
        layout = "F16_x16_F"  # Tensor2DIMG's default for other pixel formats
    elif t.data_type == 2:
        layout = "F16_x16_F"
    elif t.data_type == 3:
        layout = "F16_x16_I"
    elif t.data_type == 4:
        layout = "F8_x32_I" if t.pixel_format == PIXEL_FEATURE else "F8_x8_I"
    else:
        raise LoadableError(f"output tensor {t.name!r}: data type {t.type_name} has no DIMG format")
    if layout not in NUMBERINGS[numbering]:
        numbering = "2019"  # x8: only the 2019 app writes it
    _, c, h, w = t.dims
    meta = DimgMeta(NUMBERINGS[numbering][layout], layout, w, h, c, t.strides[1], t.strides[2], t.size, numbering)
    if atom is not None and atom != meta.atom:
        pix = {PIXEL_FEATURE: "FEATURE", PIXEL_FEATURE_X8: "FEATURE_X8"}.get(t.pixel_format, f"pixel format {t.pixel_format}")
        meta = replace(meta, note=(
            f"output tensor {t.name!r} is {pix} {t.type_name}: NVDLA's test app dumps it as {layout} "
            f"({meta.atom}-byte atoms), but the configuration's surfaces have {atom}-byte atoms, so the dump's "
            "elements are not the output cube in order (as in NVDLA's own goldens for such loadables)"))
    meta.check_header(f"output tensor {t.name!r}")
    return meta


def _elements(meta: DimgMeta, buf: np.ndarray) -> np.ndarray:
    bpe, _, _ = LAYOUTS[meta.layout]
    off = meta.offsets()
    if off.size and int(off.max()) + bpe > buf.size:
        raise LoadableError(f"DIMG: element offset {int(off.max())} lies outside the {buf.size}-byte buffer")
    idx = off[:, None] + np.arange(bpe, dtype=np.int64)[None, :]
    raw = buf[idx].reshape(-1, bpe)
    return raw.view("<u2").ravel() if bpe == 2 else raw.ravel()


def pack_dimg(meta: DimgMeta, buffer: bytes | np.ndarray) -> bytes:
    """The dump of ``buffer`` (the output tensor's memory) as ``DIMG2DIMGFile(..., stableHash=true)``."""
    buf = np.frombuffer(bytes(buffer), dtype=np.uint8) if not isinstance(buffer, np.ndarray) else buffer.view(np.uint8).ravel()
    el = _elements(meta, buf)
    if LAYOUTS[meta.layout][2]:
        el = el.copy()
        nan = ((el & 0x7C00) == 0x7C00) & ((el & 0x03FF) != 0)
        el[el == 0x7800] = 0x0000  # "tmp == 0x8000": the value 32768.0
        el[nan] = 0x77C0  # "tmp = 0x7C00": the value 31744.0
    meta.check_header("DIMG")
    head = HEADER.pack(b"DIMG", 0, meta.format, meta.width, meta.height, meta.channel, meta.line_stride,
                       meta.surface_stride, meta.size)
    return head + el.astype(el.dtype.newbyteorder("<")).tobytes()


def read_dimg(data: bytes, name: str = "DIMG", numbering: str = "2018") -> tuple[DimgMeta, np.ndarray]:
    """Header and elements (c, h, w) of a dump; a malformed one names the field."""
    if len(data) > MAX_DIMG_BYTES:
        raise LoadableError(f"{name}: {len(data)} bytes, more than {MAX_DIMG_BYTES}")
    if len(data) < HEADER.size:
        raise LoadableError(f"{name}: {len(data)} bytes, shorter than the {HEADER.size}-byte header")
    magic, version, *fields = HEADER.unpack_from(data)
    if magic != b"DIMG" or version != 0:
        raise LoadableError(f"{name}: header {magic!r} version {version}, expected b'DIMG' version 0")
    by_number = {v: k for k, v in NUMBERINGS[numbering].items()}
    if fields[0] not in by_number:
        raise LoadableError(f"{name}: surface format {fields[0]} is not a feature format of the {numbering} "
                            f"test app ({sorted(by_number)})")
    width, height, channel, line_stride, surface_stride, size = fields[1:7]
    meta = DimgMeta(fields[0], by_number[fields[0]], width, height, channel, line_stride, surface_stride, size, numbering)
    bpe = LAYOUTS[meta.layout][0]
    n = meta.width * meta.height * meta.channel
    if len(data) != HEADER.size + n * bpe:
        raise LoadableError(f"{name}: {len(data) - HEADER.size} data bytes for {meta.channel}x{meta.height}x{meta.width} "
                            f"elements of {bpe} bytes")
    el = np.frombuffer(data, dtype="<u2" if bpe == 2 else np.uint8, offset=HEADER.size, count=n)
    return meta, el.reshape(meta.channel, meta.height, meta.width)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _fp16_ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in FP16 units in the last place (sign-magnitude mapped onto a line)."""
    def line(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.int64)
        return np.where(x & 0x8000, -(x & 0x7FFF), x)
    return np.abs(line(a) - line(b))


def compare_dimg(actual: bytes, expected: bytes, numbering: str = "2018", expected_name: str = "expected dump") -> dict:
    """MD5 verdict, and element-wise differences with coordinates when the dumps differ:
    {"md5_equal", "actual_md5", "expected_md5", "differ", "first", "worst", "max_ulp"}."""
    out: dict = {"actual_md5": md5(actual), "expected_md5": md5(expected)}
    out["md5_equal"] = out["actual_md5"] == out["expected_md5"]
    if out["md5_equal"]:
        out.update(differ=0, first=None, worst=None, max_ulp=0)
        return out
    ma, ea = read_dimg(actual, "actual dump", numbering)
    me, ee = read_dimg(expected, expected_name, numbering)
    if ma != me:
        out.update(differ=-1, header=(ma, me), first=None, worst=None, max_ulp=None)
        return out
    diff = np.argwhere(ea != ee)
    out["differ"] = int(len(diff))
    if not len(diff):
        out.update(first=None, worst=None, max_ulp=0)
        return out
    is_fp = LAYOUTS[ma.layout][2]
    dist = _fp16_ulps(ea, ee) if is_fp else np.abs(ea.astype(np.int64) - ee.astype(np.int64))
    w = np.unravel_index(int(np.argmax(dist)), dist.shape)
    f = tuple(int(v) for v in diff[0])
    out["first"] = (f, int(ea[f]), int(ee[f]))
    out["worst"] = (tuple(int(v) for v in w), int(ea[w]), int(ee[w]))
    out["max_ulp"] = int(dist.max()) if is_fp else None
    return out
