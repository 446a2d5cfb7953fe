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

Input, BS, BN and EW run as one compiled loop on float32 values (:mod:`.sdp_fp_chain`) when the
data and every operand are normal or zero and no ALU compares for EQL; otherwise on the bit
patterns, field by field (:func:`bs_bn_stage_fp`, :func:`ew_stage_fp`, :mod:`.fp16`).
"""

from __future__ import annotations

import numpy as np

from . import fp16 as F
from .base import InvalidLayer, LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled
from .lut import LutStats, decode_sdp_lut_params, lut_stats, sdp_lut_fp
from .ops import sx
from .sdp_dma import Cube, fetch_operands, stage_operand, write_dst
from .sdp_fp_chain import ALGO_EQL, ALGO_MAX, ALGO_SUM, FpOperand, FpStage, chain_values, fp16_of_values
from .sdp_stats import SdpDatapathOut, SdpLiveCounters, sdp_statistics

__all__ = ["bs_bn_stage_fp", "chain_on_patterns", "ew_stage_fp", "fp_alu", "fp_datapath", "fp_finish", "fp_input",
           "stage_on_patterns"]

I64 = np.int64
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


def _negative(x: np.ndarray) -> np.ndarray:
    """The sign bit of fp32 patterns (what PReLU tests: -0 and a negative NaN too)."""
    return (np.asarray(x, I64) >> 31) & 1 != 0


def bs_bn_stage_fp(d: np.ndarray, *, alu_bypass: bool, alu_algo: int, alu_op: np.ndarray | int, mul_bypass: bool,
                   mul_prelu: bool, mul_op: np.ndarray | int, relu_bypass: bool) -> np.ndarray:  # fmt: skip
    """One BS/BN stage in FP (cmod sdp_x.cpp X_alu -> X_mul -> X_relu) on fp32 patterns."""
    x = d
    if not alu_bypass:
        x = fp_alu(alu_algo, x, alu_op)
    if not mul_bypass:
        p = F.fp32_mul_bits(x, mul_op)
        x = np.where(_negative(x), p, x) if mul_prelu else p
    if not relu_bypass:
        x = F.fp32_relu_bits(x)
    return x


def ew_stage_fp(d: np.ndarray, *, alu_bypass: bool, alu_algo: int, alu_op: np.ndarray | int, mul_bypass: bool,
                mul_prelu: bool, mul_op: np.ndarray | int) -> np.ndarray:  # fmt: skip
    """EW (Y) in FP without the LUT (cmod sdp_y_core.cpp: Y_mul then Y_alu); as :func:`bs_bn_stage_fp`."""
    x = d
    if not mul_bypass:
        p = F.fp32_mul_bits(x, mul_op)
        x = np.where(_negative(x), p, x) if mul_prelu else p
    if not alu_bypass:
        x = fp_alu(alu_algo, x, alu_op)
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


def _op16(bits: np.ndarray | int, nan_to_zero: bool) -> np.ndarray:
    """A 16-bit FP16 operand (register or memory) -> fp32 pattern, NaN flushed to +0 first."""
    b = np.asarray(bits, dtype=I64) & 0xFFFF
    if nan_to_zero:
        b = F.nan_to_zero(b.astype(np.uint16))
    return F.fp16_to_fp32_bits(b.astype(np.uint16))


def _pattern(op: FpOperand | None, n2z: bool) -> np.ndarray | int:
    """An operand as fp32 patterns (0 when bypassed): FP16 through :func:`_op16`, a 32-bit register as is."""
    if op is None:
        return 0
    return _op16(op.raw, n2z) if op.fp16 else op.raw


def stage_on_patterns(x: np.ndarray, st: FpStage, n2z: bool) -> np.ndarray:
    """One stage on fp32 patterns, field by field (every pattern; the ALU's EQL too)."""
    alu, mul = _pattern(st.alu, n2z), _pattern(st.mul, n2z)
    if st.name == "EW":
        return ew_stage_fp(x, alu_bypass=st.alu is None, alu_algo=st.alu_algo, alu_op=alu, mul_bypass=st.mul is None,
                           mul_prelu=st.mul_prelu, mul_op=mul)
    return bs_bn_stage_fp(x, alu_bypass=st.alu is None, alu_algo=st.alu_algo, alu_op=alu, mul_bypass=st.mul is None,
                          mul_prelu=st.mul_prelu, mul_op=mul, relu_bypass=not st.relu)


def chain_on_patterns(raw: np.ndarray, stages: list[FpStage], *, n2z: bool, flying: bool,
                      ) -> tuple[np.ndarray, F.NanInfCounts]:
    """Input and stages field by field, on fp32 patterns (every pattern; what the compiled chain,
    :func:`.sdp_fp_chain.chain_values`, leaves): the results and the input's NaN/INF counts."""
    if flying:  # CACC delivers fp32 patterns (cmod: the 32-bit CACC payload copied as is); no input counters
        x, counts = np.asarray(raw, dtype=I64) & 0xFFFFFFFF, F.NanInfCounts()
        if n2z:
            x = np.where(F.fp32_is_nan(x), 0, x)
    else:
        x, counts = fp_input(raw, n2z)
    for st in stages:
        x = stage_on_patterns(x, st, n2z)
    return np.asarray(x, I64), counts


def _bs_bn_stage(view: RegisterView, stage: str, dma: str, fetched: dict[str, np.ndarray]) -> FpStage:
    """The BS/BN stage's settings and FP16 operands."""
    cfg = f"D_DP_{stage}_CFG"
    f = lambda name: int(view.field("SDP", cfg, f"{stage}_{name}"))  # noqa: E731
    alu = None if f("ALU_BYPASS") else FpOperand(stage_operand(view, stage, "ALU", fetched, dma))
    mul = None if f("MUL_BYPASS") else FpOperand(stage_operand(view, stage, "MUL", fetched, dma))
    return FpStage(stage, alu_algo=f("ALU_ALGO"), alu=alu, mul=mul, mul_prelu=bool(f("MUL_PRELU")),
                   relu=not f("RELU_BYPASS"))


def _ew_operand_fp(view: RegisterView, kind: str, fetched: dict[str, np.ndarray]) -> FpOperand:
    """EW's operand: the 32-bit register read as an fp32 pattern as is, or FP16 from ERDMA."""
    cfg = f"D_DP_EW_{kind}_CFG"
    if view.field("SDP", cfg, f"EW_{kind}_SRC") == 0:
        return FpOperand(int(view.field("SDP", f"D_DP_EW_{kind}_SRC_VALUE", f"EW_{kind}_OPERAND")) & 0xFFFFFFFF,
                         fp16=False)
    if kind not in fetched:
        raise UnitNotModelled(f"SDP: EW {kind} operand from memory but SDP_RDMA ERDMA does not deliver it "
                              "(disabled or DATA_USE mismatch)")  # fmt: skip
    return FpOperand(fetched[kind])


def _check_two_byte(view: RegisterView, dma: str) -> None:
    if not view.field("SDP_RDMA", f"D_{dma}_CFG", f"{dma}_DISABLE") and not view.field(
            "SDP_RDMA", f"D_{dma}_CFG", f"{dma}_DATA_SIZE"):
        raise UnitNotModelled(f"SDP: FP16 processing with {dma}_DATA_SIZE = ONE_BYTE not modelled "
                              "(the cmod asserts TWO_BYTE operands for 16-bit processing)")


def fp_datapath(view: RegisterView, mem: MemoryPort, raw: np.ndarray, cube: Cube, options: ModelOptions, *,
                flying: bool = False) -> SdpDatapathOut:
    """Input conversion, BS, BN, EW (+ LUT) on the (Cpad, H, W) FP16 input (raw DMA values; in
    flying mode the CACC's fp32 patterns); the results are fp32 patterns, or their float32 values
    when the compiled chain ran (:mod:`.sdp_fp_chain`) and no LUT follows."""
    n2z = bool(view.field("SDP", "D_FEATURE_MODE_CFG", "NAN_TO_ZERO"))
    notes: list[str] = []
    stages: list[FpStage] = []
    if not view.field("SDP", "D_DP_BS_CFG", "BS_BYPASS"):
        _check_two_byte(view, "BRDMA")
        stages.append(_bs_bn_stage(view, "BS", "BRDMA", fetch_operands(view, mem, cube, "BRDMA", "BS", options)))
    if not view.field("SDP", "D_DP_BN_CFG", "BN_BYPASS"):
        _check_two_byte(view, "NRDMA")
        stages.append(_bs_bn_stage(view, "BN", "NRDMA", fetch_operands(view, mem, cube, "NRDMA", "BN", options)))
    eql = lut_on = ew_on = False
    lstats = LutStats()
    ew = lambda name: int(view.field("SDP", "D_DP_EW_CFG", name))  # noqa: E731
    if not ew("EW_BYPASS"):
        _check_two_byte(view, "ERDMA")
        fetched = fetch_operands(view, mem, cube, "ERDMA", "EW", options)
        alu_bypass, mul_bypass, alu_algo = bool(ew("EW_ALU_BYPASS")), bool(ew("EW_MUL_BYPASS")), ew("EW_ALU_ALGO")
        stages.append(FpStage("EW", alu_algo=alu_algo, alu=None if alu_bypass else _ew_operand_fp(view, "ALU", fetched),
                              mul=None if mul_bypass else _ew_operand_fp(view, "MUL", fetched),
                              mul_prelu=bool(ew("EW_MUL_PRELU"))))
        eql = not alu_bypass and alu_algo == ALGO_EQL
        ew_on = True
    lut = ew_on and not ew("EW_LUT_BYPASS")
    fast = chain_values(raw, stages, n2z=n2z, flying=flying)
    x: np.ndarray
    if fast is not None:  # every pattern normal or zero: the results are too (their patterns to the LUT)
        values, nan_in, inf_in = fast
        counts = F.NanInfCounts() if flying else F.NanInfCounts(nan=nan_in, inf=inf_in)
        x = values.view(np.uint32).astype(I64) if lut else values
    else:
        x, counts = chain_on_patterns(raw, stages, n2z=n2z, flying=flying)
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
        if x.dtype == np.float32:  # values, normal or zero (:func:`fp_datapath`): no NaN among the outputs
            h, saturated = fp16_of_values(x)
            nan_out = 0
        else:
            h = F.fp32_to_fp16_bits(x)
            nan_out, saturated = int(np.count_nonzero(F.is_nan(h))), None  # counted below if FP16 goes out
        if out_prec == PREC_INT16:
            y = F.fp16_to_int16_cmod(h)
            sat_count = 0
        else:
            y = h.astype(I64)
            sat_count = F.count_saturated_outputs(h) if saturated is None else saturated
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
