"""SDP with FP16 processing (PROC_PRECISION = FP16), bit for bit as NVDLA's C model computes it.

Sources (nvdla/hw branch nvdlav1, the nv_full C model): ``cmod/sdp/NV_NVDLA_sdp.cpp`` (input
``Fp16ToFp32``, NaN/INF input counters on the raw FP16 atoms), ``cmod/hls_wrapper/
sdp_hls_wrapper.cpp`` (NAN_TO_ZERO on the fp32 input, the FP16 saturation and NaN output
counters), ``cmod/hls/sdp/sdp_x.cpp`` (BS/BN), ``sdp_y_core.cpp``/``sdp_y_cvt.cpp`` (EW),
``sdp_c.cpp`` (output), arithmetic in :mod:`.fp16` (``nvdla_float.h``). Seed 000 "FP16
Supporting": INF inputs become SDP's large value (fp32 max), NaN propagates unless NAN_TO_ZERO.

Per element, on fp32 bit patterns (int64 arrays):

* input: FP16 -> fp32 (exact; +/-INF -> +/-0x7f7fffff); NAN_TO_ZERO turns NaN into +0;
* BS/BN: ALU (max/min/sum, EQL -> 0/1) with the 16-bit register or memory operand taken as FP16
  (NaN flushed when NAN_TO_ZERO, then widened; the ALU shift is not used), MUL with an FP16
  operand (PReLU keeps non-negative values, NaN with sign 0 included), ReLU (NaN kept); the MUL
  shift is not used;
* EW: MUL then ALU; a register operand is the 32-bit register read as an fp32 pattern as is
  (no NaN flush, no INF mapping); a memory operand is FP16 through the operand convertor, which
  in FP mode only flushes NaN (NAN_TO_ZERO) and widens (offset/scale/truncate/bypass unused);
  the EW truncate is not used;
* output: fp32 -> FP16 (RNE, denormals, clip to 65504, NaN payload = low mantissa bits); for
  OUT = INT16 then FP16 -> int16 (ties away from zero, saturate, NaN -> -32768); the output
  convertor's offset/scale/shift are not used;
* statistics: ``D_PERF_OUT_SATURATION`` counts FP16 outputs equal to +/-0x7bff (0 for INT16
  output), ``SDP.D_STATUS_NAN_OUTPUT_NUM`` the NaN FP16 outputs (OUT = FP16 and
  ``SDP.PERF_NAN_INF_COUNT_EN``), ``SDP_RDMA.D_STATUS_NAN/INF_INPUT_NUM`` the NaN / INF in the
  input atoms read (``SDP_RDMA.PERF_NAN_INF_COUNT_EN``); padding lanes of the last surface are
  processed and counted like the others.

Output on the fly to PDP (``D_FEATURE_MODE_CFG.OUTPUT_DST = PDP``; cmod ``SdpDataOperationDC``
copies ``sdp_data_out`` - the same 16-bit FP16 / int16 results WDMA would write - into the
``sdp2pdp`` payload): :func:`.pdp.run_pdp` consumes them (PDP's NaN flush and input counters
do not apply on the fly); the PDP statistics join SDP's. EW EQL sends nothing (refused).

The LUT on FP16 data: :func:`.lut.sdp_lut_fp` (tables hold FP16, interpolation in fp17).

BS, BN and EW run on float32 values (:data:`VALUES`, :mod:`.fp16_native`'s ``fp32_*_values``:
one conversion each way for the whole chain) when the data and every operand are normal or zero
and no ALU compares for EQL; otherwise on the bit patterns (:data:`PATTERNS`, :mod:`.fp16`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import fp16 as F
from .fp16_native import fp32_add_values, fp32_mul_values, fp32_values
from .base import InvalidLayer, LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled
from .lut import LutStats, decode_sdp_lut_params, lut_stats, sdp_lut_fp
from .ops import sx
from .sdp_dma import Cube, fetch_operands, stage_operand, write_dst
from .sdp_stats import SdpDatapathOut, SdpLiveCounters, sdp_statistics

__all__ = ["bs_bn_stage_fp", "ew_stage_fp", "fp_alu", "fp_datapath", "fp_finish", "fp_input"]

I64 = np.int64
ALGO_MAX, ALGO_MIN, ALGO_SUM, ALGO_EQL = 0, 1, 2, 3
PREC_INT16, PREC_FP16 = 1, 2


def fp_alu(algo: int, a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """cmod ``FpAlu``: SUM = FpAdd, MAX/MIN = FpCmp, EQL = 1 where the patterns differ, else 0."""
    b = np.asarray(b, dtype=I64)
    if algo == ALGO_SUM:
        return F.fp32_add_bits(a, b)
    if algo == ALGO_EQL:
        a, b = np.broadcast_arrays(np.asarray(a, I64), b)
        return (a != b).astype(I64)
    return F.fp32_max_bits(a, b, take_max=algo == ALGO_MAX)


def _alu_values(algo: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`fp_alu` on float32 values (normal or zero; never EQL, whose 0/1 result is no
    value): SUM = :func:`.fp16_native.fp32_add_values`; ``FpCmp`` orders the patterns by sign,
    then magnitude, i.e. the values, +0 above -0 (ties are equal patterns)."""
    if algo == ALGO_SUM:
        return fp32_add_values(a, b)
    a_gt = np.asarray(a > b)
    tie = a == b
    if np.count_nonzero(tie):  # equal values: +0 above -0
        a_gt = a_gt | (tie & np.signbit(b) & ~np.signbit(a))
    return np.where(a_gt if algo == ALGO_MAX else ~a_gt, a, b)


def _relu_values(x: np.ndarray) -> np.ndarray:
    """``FpRelu`` on values: a negative value (-0 too) -> +0."""
    return np.where(np.signbit(x), np.float32(0), x)


@dataclass(frozen=True)
class _Arith:
    """The fp32 operations of a stage on one representation of its data: bit patterns (int64,
    any pattern) or float32 values (normal or zero only: :func:`_as_values`)."""

    alu: Callable[[int, np.ndarray, Any], np.ndarray]  # operands: an array, or an int / 0-d array (a register)
    mul: Callable[[np.ndarray, Any], np.ndarray]
    relu: Callable[[np.ndarray], np.ndarray]
    negative: Callable[[np.ndarray], np.ndarray]  # the sign bit set (PReLU keeps the others)


PATTERNS = _Arith(fp_alu, F.fp32_mul_bits, F.fp32_relu_bits, lambda x: (np.asarray(x, I64) >> 31) & 1 != 0)
VALUES = _Arith(_alu_values, fp32_mul_values, _relu_values, np.signbit)


def _op16(bits: np.ndarray | int, nan_to_zero: bool) -> np.ndarray:
    """A 16-bit FP16 operand (register or memory) -> fp32 pattern, NaN flushed to +0 first."""
    b = np.asarray(bits, dtype=I64) & 0xFFFF
    if nan_to_zero:
        b = F.nan_to_zero(b.astype(np.uint16))
    return F.fp16_to_fp32_bits(b.astype(np.uint16))


def bs_bn_stage_fp(d: np.ndarray, *, alu_bypass: bool, alu_algo: int, alu_op: np.ndarray | int, mul_bypass: bool,
                   mul_prelu: bool, mul_op: np.ndarray | int, relu_bypass: bool, arith: _Arith = PATTERNS) -> np.ndarray:  # fmt: skip
    """One BS/BN stage in FP (cmod sdp_x.cpp X_alu -> X_mul -> X_relu); data and operands are fp32
    patterns, or float32 values with ``arith`` = :data:`VALUES`."""
    x = d
    if not alu_bypass:
        x = arith.alu(alu_algo, x, alu_op)
    if not mul_bypass:
        p = arith.mul(x, mul_op)
        x = np.where(arith.negative(x), p, x) if mul_prelu else p
    if not relu_bypass:
        x = arith.relu(x)
    return x


def ew_stage_fp(d: np.ndarray, *, alu_bypass: bool, alu_algo: int, alu_op: np.ndarray | int, mul_bypass: bool,
                mul_prelu: bool, mul_op: np.ndarray | int, arith: _Arith = PATTERNS) -> np.ndarray:  # fmt: skip
    """EW (Y) in FP without the LUT (cmod sdp_y_core.cpp: Y_mul then Y_alu); as :func:`bs_bn_stage_fp`."""
    x = d
    if not mul_bypass:
        p = arith.mul(x, mul_op)
        x = np.where(arith.negative(x), p, x) if mul_prelu else p
    if not alu_bypass:
        x = arith.alu(alu_algo, x, alu_op)
    return x


def fp_input(raw: np.ndarray, nan_to_zero: bool) -> tuple[np.ndarray, F.NanInfCounts]:
    """Main input: FP16 patterns (sign-extended ints from the DMA) -> fp32 patterns, with the
    NaN/INF counts of the raw data (cmod counts before NAN_TO_ZERO)."""
    bits = np.asarray(raw, dtype=I64).astype(np.uint16)  # the low 16 bits
    counts = F.count_nan_inf_inputs(bits)
    x = F.fp16_to_fp32_bits(bits)
    if nan_to_zero and counts.nan:
        x = np.where(F.fp32_is_nan(x), 0, x)
    return x, counts


def _stage_ops(view: RegisterView, stage: str, dma: str, fetched, n2z: bool) -> dict:
    """The BS/BN stage's settings and operands (fp32 patterns), :func:`bs_bn_stage_fp`'s arguments."""
    cfg = f"D_DP_{stage}_CFG"
    f = lambda name: int(view.field("SDP", cfg, f"{stage}_{name}"))
    alu_bypass, mul_bypass = bool(f("ALU_BYPASS")), bool(f("MUL_BYPASS"))
    alu_op = 0 if alu_bypass else _op16(stage_operand(view, stage, "ALU", fetched, dma), n2z)
    mul_op = 0 if mul_bypass else _op16(stage_operand(view, stage, "MUL", fetched, dma), n2z)
    return dict(alu_bypass=alu_bypass, alu_algo=f("ALU_ALGO"), alu_op=alu_op, mul_bypass=mul_bypass,
                mul_prelu=bool(f("MUL_PRELU")), mul_op=mul_op, relu_bypass=bool(f("RELU_BYPASS")))


def _ew_operand_fp(view: RegisterView, kind: str, fetched, n2z: bool) -> np.ndarray | int:
    cfg = f"D_DP_EW_{kind}_CFG"
    if view.field("SDP", cfg, f"EW_{kind}_SRC") == 0:
        return int(view.field("SDP", f"D_DP_EW_{kind}_SRC_VALUE", f"EW_{kind}_OPERAND")) & 0xFFFFFFFF
    if kind not in fetched:
        raise UnitNotModelled(f"SDP: EW {kind} operand from memory but SDP_RDMA ERDMA does not deliver it "
                              "(disabled or DATA_USE mismatch)")  # fmt: skip
    return _op16(fetched[kind], n2z)


def _widened_values(x: np.ndarray) -> np.ndarray | None:
    """:func:`.fp16_native.fp32_values` of fp32 patterns widened from FP16 (:func:`.fp16.fp16_to_fp32_bits`):
    each is normal or zero (INF becomes the maximal value, denormals are normalised) unless it is
    a NaN, so NaN is all there is to look for."""
    v = np.asarray(x, I64).astype(np.uint32).view(np.float32)
    return None if np.count_nonzero(np.isnan(v)) else v


def _as_values(x: np.ndarray, stages: list[tuple[str, dict]], *, widened: bool = False,
               ) -> tuple[np.ndarray, list[tuple[str, dict]]] | None:
    """The data and every operand of the stages as float32 values (:data:`VALUES`), or None when
    one is not normal or zero (NaN, the INF pattern, a denormal pattern) or an ALU compares for
    EQL (its 0/1 result is no value): the stages then run on the patterns. ``widened``: the data
    was widened from FP16; so were the array operands (:func:`_op16`), while an int operand is a
    32-bit register pattern as is (:func:`_ew_operand_fp`)."""
    xv = _widened_values(x) if widened else fp32_values(x)
    if xv is None:
        return None
    out = []
    for kind, ops in stages:
        ops = dict(ops)
        for name in ("alu", "mul"):
            if ops[f"{name}_bypass"]:
                continue
            if name == "alu" and ops["alu_algo"] == ALGO_EQL:
                return None
            op = ops[f"{name}_op"]
            v = fp32_values(op) if isinstance(op, int) else _widened_values(op)
            if v is None:
                return None
            ops[f"{name}_op"] = v
        out.append((kind, ops))
    return xv, out


def _check_two_byte(view: RegisterView, dma: str) -> None:
    if not view.field("SDP_RDMA", f"D_{dma}_CFG", f"{dma}_DISABLE") and not view.field(
            "SDP_RDMA", f"D_{dma}_CFG", f"{dma}_DATA_SIZE"):
        raise UnitNotModelled(f"SDP: FP16 processing with {dma}_DATA_SIZE = ONE_BYTE not modelled "
                              "(the cmod asserts TWO_BYTE operands for 16-bit processing)")


def fp_datapath(view: RegisterView, mem: MemoryPort, raw: np.ndarray, cube: Cube, options: ModelOptions, *,
                flying: bool = False) -> SdpDatapathOut:
    """Input conversion, BS, BN, EW (+ LUT) on the (Cpad, H, W) FP16 input (raw DMA values; in
    flying mode the CACC's fp32 patterns); the results are fp32 patterns, or their float32 values
    when the stages ran on values and no LUT follows."""
    n2z = bool(view.field("SDP", "D_FEATURE_MODE_CFG", "NAN_TO_ZERO"))
    if flying:  # CACC delivers fp32 patterns (cmod: the 32-bit CACC payload copied as is); no input counters
        x, counts = np.asarray(raw, dtype=I64) & 0xFFFFFFFF, F.NanInfCounts()
        if n2z:
            x = np.where(F.fp32_is_nan(x), 0, x)
    else:
        x, counts = fp_input(raw, n2z)
    notes: list[str] = []
    stages: list[tuple[str, dict]] = []  # every stage's settings and operands, then the data through them
    if not view.field("SDP", "D_DP_BS_CFG", "BS_BYPASS"):
        _check_two_byte(view, "BRDMA")
        stages.append(("BS", _stage_ops(view, "BS", "BRDMA", fetch_operands(view, mem, cube, "BRDMA", "BS", options), n2z)))
    if not view.field("SDP", "D_DP_BN_CFG", "BN_BYPASS"):
        _check_two_byte(view, "NRDMA")
        stages.append(("BN", _stage_ops(view, "BN", "NRDMA", fetch_operands(view, mem, cube, "NRDMA", "BN", options), n2z)))
    eql = lut_on = ew_on = False
    lstats = LutStats()
    ew = lambda name: int(view.field("SDP", "D_DP_EW_CFG", name))  # noqa: E731
    if not ew("EW_BYPASS"):
        _check_two_byte(view, "ERDMA")
        fetched = fetch_operands(view, mem, cube, "ERDMA", "EW", options)
        alu_bypass, mul_bypass, alu_algo = bool(ew("EW_ALU_BYPASS")), bool(ew("EW_MUL_BYPASS")), ew("EW_ALU_ALGO")
        stages.append(("EW", dict(alu_bypass=alu_bypass, alu_algo=alu_algo,
                                  alu_op=0 if alu_bypass else _ew_operand_fp(view, "ALU", fetched, n2z),
                                  mul_bypass=mul_bypass, mul_prelu=bool(ew("EW_MUL_PRELU")),
                                  mul_op=0 if mul_bypass else _ew_operand_fp(view, "MUL", fetched, n2z))))
        eql = not alu_bypass and alu_algo == ALGO_EQL
        ew_on = True
    values = _as_values(x, stages, widened=not flying) if stages else None
    arith, (x, stages) = (PATTERNS, (x, stages)) if values is None else (VALUES, values)
    for stage, ops in stages:
        x = ew_stage_fp(x, arith=arith, **ops) if stage == "EW" else bs_bn_stage_fp(x, arith=arith, **ops)
    lut = ew_on and not ew("EW_LUT_BYPASS")
    if values is not None:  # the results are normal or zero too: their patterns (as float32 values to the output)
        x = np.asarray(x, np.float32).view(np.uint32).astype(I64) if lut else np.asarray(x, np.float32)
    if lut:
        x, hle, hlo, kind = sdp_lut_fp(x, decode_sdp_lut_params(view), view.lut("SDP", "LE"), view.lut("SDP", "LO"),
                                        observer=options.coverage)
        lstats, lut_on = lut_stats(hle, hlo, kind), True
    return SdpDatapathOut(x, eql=eql, lut=lstats, lut_on=lut_on, ew_on=ew_on, input_counts=counts, notes=notes)


def fp_finish(view: RegisterView, mem: MemoryPort, options: ModelOptions, dp: SdpDatapathOut, cube: Cube, out_prec: int, *,
              live: SdpLiveCounters | None, to_pdp: bool) -> LayerResult:  # fmt: skip
    """Output (cmod sdp_c.cpp, FP branch), WDMA, statistics; ``dp.x``: fp32 patterns or float32
    values (:func:`fp_datapath`; EQL results are patterns)."""
    x, eql, notes, counts = dp.x, dp.eql, dp.notes, dp.input_counts
    atom = options.atom_bytes
    group = atom // 2
    stats: dict[tuple[str, str], int] = {}
    pdp_res: LayerResult | None = None
    if eql:
        if to_pdp:  # cmod SdpDataOperationDC: the EQL branch sends nothing to PDP, which then waits forever
            raise InvalidLayer("SDP: EW ALU EQL with OUTPUT_DST = PDP: SDP sends no data to PDP (C model hangs)")
        y = sx(x, 16)
        sat_count, nan_out = 0, 0
        stats[("SDP", "D_STATUS")] = int(np.any(y != 0))
    else:
        h = F.fp32_to_fp16_bits(x)
        nan_out = int(np.count_nonzero(F.is_nan(h)))
        if out_prec == PREC_INT16:
            y = F.fp16_to_int16_cmod(h)
            sat_count = 0
        else:
            y = h.astype(I64)
            sat_count = F.count_saturated_outputs(h)
        ocube = Cube(cube.width, cube.height, cube.channels, group)
        y = y[: ocube.cpad]
        if to_pdp:  # the 16-bit results (FP16 patterns / int16) go to PDP as they would to WDMA
            from .pdp import run_pdp

            pdp_res = run_pdp(view, mem, options, source=y)
        else:
            write_dst(view, mem, y, cube.width, cube.height, cube.channels, group, 2)
    stats.update(sdp_statistics(view, options.semantics, sat_count, dp, live))
    if out_prec == PREC_FP16 and view.field("SDP", "D_PERF_ENABLE", "PERF_NAN_INF_COUNT_EN"):
        stats[("SDP", "D_STATUS_NAN_OUTPUT_NUM")] = nan_out
    if view.field("SDP_RDMA", "D_PERF_ENABLE", "PERF_NAN_INF_COUNT_EN"):
        stats[("SDP_RDMA", "D_STATUS_NAN_INPUT_NUM")] = counts.nan
        stats[("SDP_RDMA", "D_STATUS_INF_INPUT_NUM")] = counts.inf
    if pdp_res is not None:
        stats.update(pdp_res.stats)
        notes.extend(pdp_res.notes)
    return LayerResult(stats=stats, elements=int(y.size) if not eql else 0, notes=notes)
