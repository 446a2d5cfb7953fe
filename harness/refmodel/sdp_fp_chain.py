"""SDP's FP16 processing chain - input widening, BS, BN, EW - as one compiled loop over the cube,
for the layers whose data and operands are all normal or zero (nearly every layer).

For those, the C model's fp32 add and multiply are IEEE float32 arithmetic with the corrections
:mod:`.fp16_native` states (``fp32_add_values``, ``fp32_mul_values``: an overflow gives the signed
maximal value, a sum below 2^-126 the zero of the larger magnitude's sign, a product in the flush
band a signed zero), ``FpCmp`` orders values (+0 above -0) and ``FpRelu`` makes a negative value
(-0 too) +0; every result is again normal or zero. The stage order is the C model's: BS and BN
``X_alu -> X_mul (PReLU: the product only where the sign bit is set) -> X_relu`` (``sdp_x.cpp``),
EW ``Y_mul -> Y_alu`` (``sdp_y_core.cpp``). Inputs: the FP16 main input widened exactly
(``Fp16ToFp32``; INF becomes the maximal value), or CACC's fp32 patterns on the fly; NAN_TO_ZERO
flushes a NaN input and a NaN FP16 operand to +0; the EW register operand is the 32-bit pattern
as is. Any other pattern (a NaN left, the fp32 INF pattern, a denormal fp32 pattern) ends the
loop early: the caller then runs the field-by-field rules (:mod:`.sdp_fp`, :mod:`.fp16`), which
take every pattern, and the ALU's EQL (a 0/1 result, no value) always goes there.

Why compiled: as numpy array expressions the chain is 10-15 calls per fp32 operation, each 1-3
us on the small cubes most layers have (``bench/bench_model.py --units sdp-fp16``); one loop
keeps every intermediate in registers. ``tests/test_sdp_fp_chain.py`` checks it against the
field-by-field rules, which the bundled suites check against the C model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .fp16 import FP16_TO_FP32_TABLE
from .fp16_native import MUL_FLUSH
from .jit import f32_bits, f32_from_bits, kernel

__all__ = ["ALGO_EQL", "ALGO_MAX", "ALGO_MIN", "ALGO_SUM", "FpOperand", "FpStage", "chain_values", "fp16_of_values"]

ALGO_MAX, ALGO_MIN, ALGO_SUM, ALGO_EQL = 0, 1, 2, 3
_I64 = np.int64
_F32_MAX = np.float32(np.finfo(np.float32).max)
_F32_TINY = 2.0**-126
_NO_OPERAND = np.zeros(1, _I64)
# a stage row of the kernel's table (:func:`_stage_rows`): kind, ALU algorithm (-1: bypassed), MUL on,
# PReLU, ReLU, then the ALU operand's and the MUL operand's (FP16, channel, line, element strides)
_ABSENT, _BS_BN, _EW = 0, 1, 2
_ALU_COLS, _MUL_COLS = 5, 9
_NO_ROW = (_ABSENT,) + (0,) * 12


@dataclass(frozen=True)
class FpOperand:
    """An operand of a stage as the hardware reads it: ``raw`` FP16 patterns (``fp16``; the low
    16 bits count; NaN flushed by NAN_TO_ZERO, then widened) or a 32-bit fp32 pattern taken as is
    (the EW register operand). An array broadcasts to the cube (Cpad, H, W): per channel
    (Cpad, 1, 1) or per element; an int is a register's value."""

    raw: np.ndarray | int
    fp16: bool = True


@dataclass(frozen=True)
class FpStage:
    """One stage's settings: ``name`` BS, BN or EW; ``alu``/``mul`` None when bypassed; ``relu``
    (BS/BN only) when not bypassed."""

    name: str
    alu_algo: int = ALGO_SUM
    alu: FpOperand | None = None
    mul: FpOperand | None = None
    mul_prelu: bool = False
    relu: bool = False


@njit(inline="always")
def _normal_or_zero(p: int) -> bool:
    m = p & 0x7FFFFFFF
    return m == 0 or (0x800000 <= m < 0x7F800000)


@njit(inline="always")
def _negative(x: np.float32) -> bool:
    return (f32_bits(x) >> np.uint32(31)) != 0


@njit(inline="always")
def _signed_max(r: np.float32) -> np.float32:
    return -_F32_MAX if _negative(r) else _F32_MAX


@njit(inline="always")
def _signed_zero(negative: bool) -> np.float32:
    return np.float32(-0.0) if negative else np.float32(0.0)


@njit(inline="always")
def _add(a: np.float32, b: np.float32) -> np.float32:
    """``FpAdd<8,23>`` (:func:`.fp16_native.fp32_add_values`)."""
    r = a + b
    if np.isinf(r):
        r = _signed_max(r)
    if abs(r) < _F32_TINY:  # the zero of the larger magnitude's sign, a's on a tie
        r = _signed_zero(_negative(a) if abs(a) >= abs(b) else _negative(b))
    return r


@njit(inline="always")
def _mul(a: np.float32, b: np.float32) -> np.float32:
    """``FpMul<8,23>`` (:func:`.fp16_native.fp32_mul_values`): the exact float64 product rounded."""
    p = np.float64(a) * np.float64(b)
    r = np.float32(p)
    if np.isinf(r):
        r = _signed_max(r)
    ap = abs(p)
    if ap < _F32_TINY:  # flushed unless its rounding reaches 2^-126 with an exponent sum at the bias
        flush = ap < MUL_FLUSH
        if not flush:
            es = ((f32_bits(a) >> np.uint32(23)) & np.uint32(0xFF)) + ((f32_bits(b) >> np.uint32(23)) & np.uint32(0xFF))
            flush = es < 127
        if flush:
            r = _signed_zero(_negative(r))
    return r


@njit(inline="always")
def _alu(algo: int, a: np.float32, b: np.float32) -> np.float32:
    """``FpAlu`` without EQL: SUM, or ``FpCmp``'s MAX/MIN (+0 above -0)."""
    if algo == ALGO_SUM:
        return _add(a, b)
    a_gt = a > b or (a == b and _negative(b) and not _negative(a))
    if algo == ALGO_MAX:
        return a if a_gt else b
    return b if a_gt else a


@njit(inline="always")
def _operand_value(q: int, fp16: bool, n2z: bool) -> tuple[np.float32, bool]:
    """An operand's fp32 pattern (``fp16``: widened from FP16; a NaN then flushed to +0 by
    NAN_TO_ZERO) as a value, and whether it is normal or zero."""
    if fp16 and n2z and (q & 0x7FFFFFFF) > 0x7F800000:
        q = 0
    return f32_from_bits(np.uint32(q)), _normal_or_zero(q)


# Only scalars cross a function call inside the loop below: an array argument would cost a
# reference count update per element.
@kernel
def _chain(x: np.ndarray, shape: np.ndarray, flying: bool, n2z: bool, cfg: np.ndarray, ops: tuple,
           table: np.ndarray, out: np.ndarray) -> tuple[bool, int, int]:  # fmt: skip
    """The chain over the cube ``x`` (raw, flat; ``shape`` (C, H, W)) into ``out`` (float32 values),
    stages and operands as :func:`_stage_rows` gives them; returns (finished: every pattern normal
    or zero, NaN inputs, INF inputs counted so far)."""
    nan_in, inf_in, i = 0, 0, 0
    for c in range(shape[0]):
        for h in range(shape[1]):
            for w in range(shape[2]):
                p = x[i]
                if flying:  # CACC's fp32 pattern
                    p &= 0xFFFFFFFF
                    if n2z and (p & 0x7FFFFFFF) > 0x7F800000:
                        p = 0
                else:  # FP16, counted before the flush
                    b = p & 0xFFFF
                    if (b & 0x7FFF) > 0x7C00:
                        nan_in += 1
                        if n2z:
                            b = 0
                    elif (b & 0x7FFF) == 0x7C00:
                        inf_in += 1
                    p = table[b]
                if not _normal_or_zero(p):
                    return False, nan_in, inf_in
                v = f32_from_bits(np.uint32(p))
                for s in range(3):
                    kind, algo, mul_on = cfg[s, 0], cfg[s, 1], cfg[s, 2]
                    if kind == _ABSENT:
                        continue
                    a_val = m_val = np.float32(0.0)
                    if algo >= 0:
                        q = ops[2 * s][c * cfg[s, _ALU_COLS + 1] + h * cfg[s, _ALU_COLS + 2] + w * cfg[s, _ALU_COLS + 3]]
                        q = table[q & 0xFFFF] if cfg[s, _ALU_COLS] else q & 0xFFFFFFFF
                        a_val, ok = _operand_value(q, cfg[s, _ALU_COLS] != 0, n2z)
                        if not ok:
                            return False, nan_in, inf_in
                    if mul_on:
                        q = ops[2 * s + 1][c * cfg[s, _MUL_COLS + 1] + h * cfg[s, _MUL_COLS + 2] + w * cfg[s, _MUL_COLS + 3]]
                        q = table[q & 0xFFFF] if cfg[s, _MUL_COLS] else q & 0xFFFFFFFF
                        m_val, ok = _operand_value(q, cfg[s, _MUL_COLS] != 0, n2z)
                        if not ok:
                            return False, nan_in, inf_in
                    if kind == _BS_BN and algo >= 0:  # the ALU first
                        v = _alu(algo, v, a_val)
                    if mul_on and (not cfg[s, 3] or _negative(v)):  # PReLU: the product where the sign bit is set
                        v = _mul(v, m_val)
                    if kind == _EW and algo >= 0:  # the ALU after the multiplier
                        v = _alu(algo, v, a_val)
                    if cfg[s, 4] and _negative(v):  # ReLU
                        v = np.float32(0.0)
                out[i] = v
                i += 1
    return True, nan_in, inf_in


def _flat(op: FpOperand | None, shape: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """An operand as a flat int64 array and its (FP16, channel, line, element) strides, 0 where it
    broadcasts over the cube's ``shape``."""
    if op is None:
        return _NO_OPERAND, (0, 0, 0, 0)
    raw = np.asarray(op.raw, _I64)
    if raw.ndim == 0:
        return raw.reshape(1), (int(op.fp16), 0, 0, 0)
    if raw.ndim != 3 or any(n != 1 and n != m for n, m in zip(raw.shape, shape)):
        raise ValueError(f"SDP operand of shape {raw.shape} does not broadcast to the cube {shape}")
    c, h, w = raw.shape
    return raw.reshape(-1), (int(op.fp16), h * w if c > 1 else 0, w if h > 1 else 0, 1 if w > 1 else 0)


def _stage_rows(stages: list[FpStage], shape: tuple[int, ...]) -> tuple[np.ndarray, tuple[np.ndarray, ...]] | None:
    """The kernel's stage table (rows BS, BN, EW; columns as :data:`_NO_ROW` says) and the six
    operand arrays (ALU, MUL of each row); None when an ALU compares for EQL."""
    rows = {n: _NO_ROW for n in ("BS", "BN", "EW")}
    ops = dict.fromkeys(("BS", "BN", "EW"), (_NO_OPERAND, _NO_OPERAND))
    for st in stages:
        if st.alu is not None and st.alu_algo == ALGO_EQL:
            return None
        alu, alu_cols = _flat(st.alu, shape)
        mul, mul_cols = _flat(st.mul, shape)
        rows[st.name] = (_EW if st.name == "EW" else _BS_BN, st.alu_algo if st.alu is not None else -1,
                         int(st.mul is not None), int(st.mul_prelu), int(st.relu), *alu_cols, *mul_cols)
        ops[st.name] = (alu, mul)
    return np.array(list(rows.values()), _I64), (*ops["BS"], *ops["BN"], *ops["EW"])


def chain_values(x: np.ndarray, stages: list[FpStage], *, n2z: bool, flying: bool,
                 ) -> tuple[np.ndarray, int, int] | None:
    """The chain on the (Cpad, H, W) input ``x`` (raw FP16 from the DMA, or CACC's fp32 patterns
    when ``flying``): (float32 results (Cpad, H, W), NaN inputs, INF inputs), or None when a
    pattern is not normal or zero or an ALU compares for EQL (then the field-by-field rules apply)."""
    x = np.ascontiguousarray(x, _I64)
    shape = x.shape
    plan = _stage_rows(stages, shape)
    if plan is None:
        return None
    cfg, ops = plan
    out = np.empty(shape, np.float32)
    done, nan_in, inf_in = _chain(x.reshape(-1), np.array(shape, _I64), flying, n2z, cfg, ops, FP16_TO_FP32_TABLE,
                                  out.reshape(-1))
    return (out, int(nan_in), int(inf_in)) if done else None


@njit(inline="always")
def _fp16_bits(v: np.float32) -> int:
    """``Fp32ToFp16`` of a normal or zero value (:func:`.fp16.fp32_to_fp16_bits`): round to nearest
    even, FP16 denormals produced, below 2^-25 a signed zero, a result of 2^16 or more (a round-up
    past 65504 too) the signed maximum 0x7bff."""
    u = int(f32_bits(v))
    sign = (u >> 16) & 0x8000
    e = (u >> 23) & 0xFF
    if e == 0:  # zero
        return sign
    sig = (u & 0x7FFFFF) | 0x800000  # 24 bits, value sig * 2^(e - 150)
    if e >= 113:  # an FP16 normal: 11 bits kept, 13 rounded off
        h = ((e - 112) << 10) + ((sig >> 13) & 0x3FF)
        rest = sig & 0x1FFF
        if rest > 0x1000 or (rest == 0x1000 and h & 1):
            h += 1  # a carry into the exponent is the next binade's pattern
        return sign | (0x7BFF if h >= 0x7C00 else h)
    shift = 126 - e  # an FP16 denormal (or zero): sig * 2^(e - 126) in units of 2^-24
    if shift > 25:
        return sign
    h = sig >> shift
    rest = sig & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if rest > half or (rest == half and h & 1):
        h += 1
    return sign | h


@kernel
def _fp16_kernel(x: np.ndarray, out: np.ndarray) -> int:
    saturated = 0
    for i in range(x.size):
        h = _fp16_bits(x[i])
        saturated += (h & 0x7FFF) == 0x7BFF
        out[i] = h
    return saturated


def fp16_of_values(x: np.ndarray) -> tuple[np.ndarray, int]:
    """The FP16 outputs of float32 results that are normal or zero (:func:`chain_values`'s):
    (uint16 patterns, how many are +/-0x7bff, ``D_PERF_OUT_SATURATION``'s count)."""
    x = np.ascontiguousarray(x, np.float32)
    out = np.empty(x.shape, np.uint16)
    saturated = _fp16_kernel(x.reshape(-1), out.reshape(-1))
    return out, int(saturated)
