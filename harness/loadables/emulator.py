"""The runtime's CPU emulator (interface EMU1): POWER and SOFTMAX, as NVDLA's runtime does them
(``umd/core/src/runtime/Emulator.cpp`` of nvdla/sw; descriptors ``priv/emu/emu1/A/emu_interface.h``).

Two descriptor layouts exist under the same emulator version 0.0.1, told apart by the size of
an operation container in the task's op list:

* **2018** (16 bytes; the layout of the shared MNIST loadable, nvdla/sw before 537e0e8):
  ``emu_common_op_desc`` is ``op_type`` only (power: power, scale, shift f32 at 1, 5, 9; softmax:
  axis at 1); ``emu_buffer_desc`` (256 bytes): addressIndex s16, size u32, format u16, width,
  height, channel u16, line_stride, surf_stride u32 (packed); the only format is 2 = FP16 with
  16 channels per 32-byte atom.
* **2019** (24 bytes; nvdla/sw 537e0e8 on): the common desc adds input/output scale factors
  (natural alignment: op_type at 0, scales f32 at 4 and 8; power, scale, shift at 12, 16, 20),
  the buffer desc adds addressIndexOffset u32 after addressIndex; formats INT8 0, INT8_8 1,
  INT16 2, FF16 3 (32 / bpe elements per atom; INT8_8: 8).

Arithmetic as the runtime's C++ (float32, ``half_float`` with round to nearest, ties away from
zero, ``HALF_ROUND_STYLE 1``/``HALF_ROUND_TIES_TO_EVEN 0`` in ``umd/external/include/half.h``):
power ``y = powf(shift + scale * x, power)``; softmax over the channels in order: ``max``,
``sumexp += expf(x - max)`` (sequential float32), ``y = half(expf(x - max) / sumexp)``. ``expf``
is the C library's, called through ctypes (softmax runs over a handful of channels), ``powf``
numpy's float32 power (libm's ``powf``), so the results are the host libm's as the runtime's.

INT8 (formats 0 and 1 of the 2019 layout), ``Emulator::executeSoftmax``/``executePower``:

* softmax, over ``src.channel`` consecutive int8 values (like FP16, not through the atom
  layout): ``pHalfSrc[i] = half(float(s8) * input_scale_factor)`` (float32 product, rounded to
  FP16 ties away); max, sumexp and ``pHalfDst[i] = half(expf(x - max) / sumexp)`` as FP16 but
  over those halves; then for ``dst.channel`` values ``saturate<NvF32, NvS8>(float(pHalfDst[i])
  / output_scale_factor)`` (``half / float`` is float32 division: half_float's operators take
  only half operands, so the half converts to float), :func:`saturate_int8`.
* power, element by element through the atom layout (32 per atom for INT8, 8 for INT8_8):
  ``x = float(s8) * input_scale_factor``, ``y = powf(shift + scale * x, power)``,
  ``saturate(y / output_scale_factor)``, all float32.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .fbs import LoadableError

__all__ = ["EmuOp", "EmuBuffer", "decode_emu_task", "run_emu_ops", "float_to_half_ties_away", "half_to_float",
           "saturate_int8"]

NETWORK = struct.Struct("<hhH")
MAX_EMU_OPS = 1024


@dataclass(frozen=True)
class EmuBuffer:
    address_index: int
    offset: int
    size: int
    format: int
    width: int
    height: int
    channel: int
    line_stride: int
    surf_stride: int


@dataclass(frozen=True)
class EmuOp:
    op_type: int  # 0 POWER, 1 SOFTMAX
    layout: str  # "2018" or "2019"
    params: dict
    src: EmuBuffer
    dst: EmuBuffer

    @property
    def name(self) -> str:
        return {0: "POWER", 1: "SOFTMAX"}.get(self.op_type, f"emu{self.op_type}")


def _buffer(b: bytes | memoryview, off: int, layout: str) -> EmuBuffer:
    if layout == "2018":
        ai, size, fmt, w, h, c, ls, ss = struct.unpack_from("<hIHHHHII", b, off)
        return EmuBuffer(ai, 0, size, fmt, w, h, c, ls, ss)
    ai, aio, size, fmt, w, h, c, ls, ss = struct.unpack_from("<hIIHHHHII", b, off)
    return EmuBuffer(ai, aio, size, fmt, w, h, c, ls, ss)


def decode_emu_task(network: bytes | memoryview, read_entry: Callable[[int], bytes | memoryview]) -> list[EmuOp]:
    """The operations of an EMU1 task; ``read_entry(i)`` returns the bytes of address-list entry i."""
    if len(network) < NETWORK.size:
        raise LoadableError(f"emu_network_desc: {len(network)} bytes, expected {NETWORK.size}")
    op_idx, buf_idx, n = NETWORK.unpack_from(network)
    if n > MAX_EMU_OPS:
        raise LoadableError(f"emu_network_desc.num_operations: {n}, more than {MAX_EMU_OPS}")
    ops_b, bufs_b = read_entry(op_idx), read_entry(buf_idx)
    if n == 0:
        return []
    per_op = len(ops_b) // n
    if per_op >= 24:
        layout, size = "2019", 24
    elif per_op >= 16:
        layout, size = "2018", 16
    else:
        raise LoadableError(f"EMU op list: {len(ops_b)} bytes for {n} operations (16 or 24 bytes each)")
    if len(bufs_b) < n * 512:
        raise LoadableError(f"EMU buffer list: {len(bufs_b)} bytes for {n} operations of 512 bytes")
    out = []
    for i in range(n):
        o = ops_b[i * size:(i + 1) * size]
        op_type = o[0]
        params: dict[str, float]
        if layout == "2018":
            params = dict(zip(("power", "scale", "shift"), struct.unpack_from("<3f", o, 1))) if op_type == 0 else {"axis": o[1]}
            params.update(input_scale=1.0, output_scale=1.0)
        else:
            ins, outs = struct.unpack_from("<2f", o, 4)
            params = dict(zip(("power", "scale", "shift"), struct.unpack_from("<3f", o, 12))) if op_type == 0 else {"axis": o[12]}
            params.update(input_scale=ins, output_scale=outs)
        out.append(EmuOp(op_type, layout, params, _buffer(bufs_b, i * 512, layout), _buffer(bufs_b, i * 512 + 256, layout)))
    return out


# ---- FP16 as half_float converts ------------------------------------------------------------
def half_to_float(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


def float_to_half_ties_away(x: np.ndarray) -> np.ndarray:
    """float32 → FP16 bits, ``half_float::detail::float2half_impl<round_to_nearest>`` with ties
    away from zero (its base/shift tables, then the bit below the kept mantissa is added)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    e9 = bits >> 23  # sign and exponent
    e = e9 & 0xFF
    sign = (e9 >> 8) << 15
    m = bits & 0x7FFFFF
    E = e - 127
    base = np.where(E < -24, 0, np.where(E < -14, 0x0400 >> np.clip(-E - 14, 0, 31),
                    np.where(E <= 15, (E + 15) << 10, 0x7C00)))
    shift = np.where(E < -24, 24, np.where(E < -14, -E - 1, np.where(E <= 15, 13, np.where(e == 255, 13, 24))))
    h = sign + base + (m >> shift)
    rnd = ((m >> (shift - 1)) | (e == 102).astype(np.int64)) & 1
    h = h + (rnd & ((h & 0x7C00) != 0x7C00))
    return h.astype(np.uint16)


def _libm() -> ctypes.CDLL:
    lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    lib.expf.restype = ctypes.c_float
    lib.expf.argtypes = [ctypes.c_float]
    return lib


def _offsets(b: EmuBuffer, layout: str) -> np.ndarray:
    """Byte offset of every (c, h, w) element of a buffer (Emulator::getAddrOffset)."""
    if layout == "2018":
        if b.format != 2:
            raise LoadableError(f"EMU buffer format {b.format}: the 2018 emulator handles only 2 (FP16)")
        bpe, x = 2, 16
    else:
        table = {3: (2, 16), 0: (1, 32), 1: (1, 8)}
        if b.format not in table:
            raise LoadableError(f"EMU buffer format {b.format}: not handled by the runtime's emulator")
        bpe, x = table[b.format]
    c = np.arange(b.channel, dtype=np.int64)[:, None, None]
    h = np.arange(b.height, dtype=np.int64)[None, :, None]
    w = np.arange(b.width, dtype=np.int64)[None, None, :]
    return ((c // x) * b.surf_stride + h * b.line_stride + w * x * bpe + (c % x) * bpe).ravel()


def _is_fp16(op: EmuOp) -> bool:
    return (op.layout == "2018" and op.src.format == 2) or (op.layout == "2019" and op.src.format == 3)


def _is_int8(op: EmuOp) -> bool:
    return op.layout == "2019" and op.src.format in (0, 1)


def saturate_int8(y: np.ndarray) -> np.ndarray:
    """``saturate<NvF32, NvS8>`` (``umd/core/src/common/include/priv/Type.h``): ``std::min`` with
    127, ``std::max`` with -128 (a NaN passes both: ``(b < a) ? b : a``), then
    ``static_cast<NvS8>``, which truncates toward zero. A NaN there is undefined in C++; x86-64's
    ``cvttss2si`` gives 0x80000000, whose low byte is 0."""
    y = np.asarray(y, dtype=np.float32)
    y = np.where(np.float32(127.0) < y, np.float32(127.0), y)
    y = np.where(y < np.float32(-128.0), np.float32(-128.0), y)
    return np.where(np.isnan(y), np.float32(0.0), np.trunc(y)).astype(np.int8)


def _power(op: EmuOp, read: Callable[[int, int, int], bytes], write: Callable[[int, int, bytes], None]) -> None:
    so, do = _offsets(op.src, op.layout), _offsets(op.dst, op.layout)
    bpe = 2 if _is_fp16(op) else 1
    src = np.frombuffer(read(op.src.address_index, op.src.offset, int(so.max()) + bpe if so.size else 0), np.uint8)
    p = op.params
    if bpe == 2:
        x = half_to_float(src[so[:, None] + np.arange(2)].copy().view("<u2").ravel())
    else:  # x = float(int8) * input_scale_factor
        x = src[so].view(np.int8).astype(np.float32) * np.float32(p["input_scale"])
    base = np.float32(p["shift"]) + np.float32(p["scale"]) * x
    y = np.power(base, np.float32(p["power"]), dtype=np.float32)  # numpy's float32 power: libm powf
    size = int(do.max()) + bpe if do.size else 0
    dst = np.frombuffer(read(op.dst.address_index, op.dst.offset, size), np.uint8).copy()
    if bpe == 2:
        dst[do[:, None] + np.arange(2)] = float_to_half_ties_away(y).astype("<u2").view(np.uint8).reshape(-1, 2)
    else:  # y /= output_scale_factor; saturate
        dst[do] = saturate_int8(y / np.float32(p["output_scale"])).view(np.uint8)
    write(op.dst.address_index, op.dst.offset, dst.tobytes())


def _softmax_f32(x: np.ndarray, libm: ctypes.CDLL) -> tuple[np.ndarray, np.float32]:
    """``expf(x - max)`` of every channel and their sequential float32 sum."""
    mx = np.float32(-np.inf)
    for v in x:
        if v > mx:
            mx = v
    ex = [np.float32(libm.expf(float(np.float32(v - mx)))) for v in x]
    s = np.float32(0.0)
    for v in ex:
        s = np.float32(s + v)
    return np.array(ex, dtype=np.float32), s


def _softmax(op: EmuOp, read: Callable[[int, int, int], bytes], write: Callable[[int, int, bytes], None],
             libm: ctypes.CDLL) -> None:
    n = op.src.channel
    if _is_fp16(op):
        x = half_to_float(np.frombuffer(read(op.src.address_index, op.src.offset, 2 * n), "<u2"))
        ex, s = _softmax_f32(x, libm)
        write(op.dst.address_index, op.dst.offset, float_to_half_ties_away(ex / s).astype("<u2").tobytes())
        return
    m = op.dst.channel
    if m > n:  # the runtime would read halves it never wrote
        raise LoadableError(f"EMU SOFTMAX: destination channel {m} exceeds source channel {n} (INT8 softmax "
                            "rescales dst.channel values of the src.channel it computed)")
    src = np.frombuffer(read(op.src.address_index, op.src.offset, n), np.int8)
    # pHalfSrc = half(int8 * input_scale): float32 product, rounded to FP16
    x = half_to_float(float_to_half_ties_away(src.astype(np.float32) * np.float32(op.params["input_scale"])))
    ex, s = _softmax_f32(x, libm)
    h = half_to_float(float_to_half_ties_away(ex / s))  # pHalfDst = half(expf(x - max) / sumexp)
    # half / float is float / float (half_float's operators take only half/expr operands)
    out = saturate_int8(h[:m] / np.float32(op.params["output_scale"]))
    write(op.dst.address_index, op.dst.offset, out.tobytes())


def run_emu_ops(ops: list[EmuOp], read: Callable[[int, int, int], bytes], write: Callable[[int, int, bytes], None]) -> None:
    """Execute the operations; ``read(index, offset, size)`` / ``write(index, offset, data)``
    access address-list entry ``index`` of the task."""
    libm = _libm()
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN) as the C++ computes them, silently
        _run_ops(ops, read, write, libm)


def _run_ops(ops: list[EmuOp], read: Callable[[int, int, int], bytes], write: Callable[[int, int, bytes], None],
             libm: ctypes.CDLL) -> None:
    for op in ops:
        if op.src.format != op.dst.format:
            raise LoadableError(f"EMU {op.name}: source format {op.src.format} differs from destination {op.dst.format}")
        if not (_is_fp16(op) or _is_int8(op)):
            raise LoadableError(f"EMU {op.name}: format {op.src.format} of the {op.layout} layout is neither FP16 nor "
                                "INT8, which the runtime's emulator does not compute")
        if op.op_type == 0:
            _power(op, read, write)
        elif op.op_type == 1:
            _softmax(op, read, write, libm)
        else:
            raise LoadableError(f"EMU operation type {op.op_type} is neither POWER (0) nor SOFTMAX (1)")
