"""Bit-exact numpy model of NVDLA's SDP (single-point data processor), INT8/INT16 paths here;
FP16 processing (FP16 -> FP16/INT16) in :mod:`.sdp_fp`, INT16 -> FP16 output below.

Per element ``out = C(EW(BN(BS(x0))))`` (docs/nvdla-precision-semantics.md section 3):
BS/BN = ALU (max/min/sum with a left-shifted 16-bit operand), MUL (16-bit operand or PReLU),
TRT (rounding right shift to 32 bits, applied even with MUL bypassed), ReLU;
EW = operand CVT, MUL + truncate, ALU (saturating), LUT (section 5);
C = output convertor ``RSAT((x - offset) * scale, shift, 17)`` then int8/int16 clamp.
Input comes from SDP_RDMA (memory) or, in flying mode, from the caller (CACC's 32-bit
results, :func:`nvdla_hil.harness.refmodel.conv.run_conv`). The output goes to memory (WDMA)
or, with ``D_FEATURE_MODE_CFG.OUTPUT_DST = PDP``, on the fly into PDP (``pdp.run_pdp``).

Precisions (nv_full; seed 000 "Precision Conversion": SDP converts int8 <-> int16 with the
processing precision "always INT8"; nvdla/hw nvdlav1 cmod ``cmod/sdp/NV_NVDLA_sdp.cpp`` and RTL
``vmod/nvdla/sdp``):

* INT16 -> INT16 (IN = PROC = OUT = INT16): 2-byte input elements, ``atom / 2`` channels per
  memory atom (dma.py ``group = atom // bpe``; cmod ``ELEMENT_PER_GROUP_INT16``), sign-extended
  to 32 bits (``NV_NVDLA_SDP_MRDMA_EG_dout.v``); the BS/BN/EW arithmetic is the INT8 one
  (section 3: 16-bit ALU/MUL operands, 6-bit ALU left shift into 32 bits, 6 used bits of the
  MUL shift, 49-bit products, RSAT to 32 bits); the output convertor ends in
  ``IntSaturation<17, 16>`` (``cmod/hls/sdp/sdp_c.cpp``, ``cfg_out_precision == ENUM_INT16``).
  Operand cubes (BRDMA/NRDMA/ERDMA) use the PROC precision's group (cmod
  ``SdpRdmaSequence``: ``precision = eRdDma == SDP_RDMA_INPUT ? in_precision : proc_precision``).
* INT16 -> INT8 (IN = INT16, PROC = OUT = INT8; cmod ``is_int16_to_int8``, RTL
  ``NV_NVDLA_SDP_MRDMA_ig.v`` ``cfg_mode_16to8``): SDP_RDMA reads the int16 cube in pairs of
  surfaces (the surface count rounded up to even: ``surf_num = ((surf_num+1)/2)*2``,
  ``size_of_surf = reg2dp_channel[12:5]``), so a pixel's ``atom`` channels come from two
  int16 surfaces and the int8 output atom holds all of them; operands, processing and the
  output use the INT8 group ``atom``; the convertor ends in ``IntSaturation<17, 8>``.
* INT8 -> INT16 (IN = PROC = INT8, OUT = INT16; cmod ``is_int8_to_int16``, RTL
  ``NV_NVDLA_SDP_WDMA_cmd.v`` ``cfg_mode_8to16``): every int8 input atom of ``atom``
  channels is written as two int16 surfaces (``surface_num = ((C + 31)/32)*2``), so
  ``2 * ceil(C / atom)`` output surfaces, padding lanes included.
* PROC = INT16 with OUT = INT8 is refused (``UnitNotModelled``): the cmod WDMA then packs two
  consecutive 16-element transactions of the INT16 stream into one int8 atom
  (``SendDmaWriteRequest``), which is not the feature format; seed 000 programs this
  conversion with PROC = INT8.

Entry point: :func:`run_sdp`, called by the virtual NVDLA when SDP's ``D_OP_ENABLE`` fires.
SDP_RDMA/WDMA (input, operands, output): :mod:`.sdp_dma`; statistics registers: :mod:`.sdp_stats`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import InvalidLayer, LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled
from .dma import surfaces
from .fp16 import FP16_MAX_BITS, int_to_fp16
from .lut import LutStats, decode_sdp_lut_params, lut_stats, sdp_lut
from .ops import lsat, rnd, sx
from .sdp_dma import Cube, fetch_operands, read_main, reg_address, stage_operand, write_dst
from .sdp_stats import SdpDatapathOut, SdpLiveCounters, sdp_statistics
from ...semantics import Semantics

__all__ = ["SdpLiveCounters", "bs_bn_stage", "ew_operand_cvt", "ew_stage", "output_convert", "run_sdp"]

I64 = np.int64
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# D_DATA_FORMAT / D_FEATURE_MODE_CFG precision codes
PREC_INT8, PREC_INT16, PREC_FP16 = 0, 1, 2
# ALU_ALGO
ALGO_MAX, ALGO_MIN, ALGO_SUM, ALGO_EQL = 0, 1, 2, 3

# ---------------------------------------------------------------------------------------
# arithmetic stages (pure functions on int64 arrays)


def _rsat32_trt(p: np.ndarray, s: int, semantics: Semantics, in_bits: int) -> np.ndarray:
    """RSAT(p, s, 32); RTL returns 0 for s >= in_bits ([DIFF] 1.1)."""
    if semantics == "rtl" and s >= in_bits:
        return np.zeros_like(p)
    return np.clip(rnd(p, s), INT32_MIN, INT32_MAX)


def bs_bn_stage(
    d: np.ndarray,
    *,
    alu_bypass: bool,
    alu_algo: int,
    alu_op: np.ndarray | int,
    alu_shift: int,
    mul_bypass: bool,
    mul_prelu: bool,
    mul_op: np.ndarray | int,
    mul_shift: int,
    relu_bypass: bool,
    semantics: Semantics = "rtl",
) -> np.ndarray:
    """One BS (X1) or BN (X2) stage, section 3.1. ``alu_op``/``mul_op`` are 16-bit signed
    operands (already sign-extended). Returns 32-bit signed values as int64."""
    d = np.asarray(d, dtype=I64)
    if alu_bypass:
        a = d
    else:
        op_s = lsat(np.asarray(alu_op, dtype=I64), alu_shift, 32)
        if alu_algo == ALGO_MAX:
            a = np.maximum(d, op_s)
        elif alu_algo == ALGO_MIN:
            a = np.minimum(d, op_s)
        else:  # SUM, and EQL falls through to SUM in both models
            a = d + op_s  # exact, 33 bits
    shift = mul_shift & 0x3F  # only [5:0] of the 8-bit field are used
    if mul_bypass:
        t = _rsat32_trt(a, shift, semantics, 49)  # truncation still applied
    else:
        p = a * np.asarray(mul_op, dtype=I64)  # exact, 49 bits
        t = _rsat32_trt(p, shift, semantics, 49)
        if mul_prelu:
            t = np.where(a >= 0, sx(a, 32), t)
    if not relu_bypass:
        t = np.maximum(t, 0)
    return t


def ew_operand_cvt(op16: np.ndarray, *, bypass: bool, offset: int, scale: int, truncate: int) -> np.ndarray:
    """EW operand convertor (section 2): ``RSAT((op - offset) * scale, truncate, 32)``;
    with CVT bypass the 16-bit operand is only sign-extended."""
    op16 = np.asarray(op16, dtype=I64)
    if bypass:
        return op16
    return np.clip(rnd((op16 - I64(offset)) * I64(scale), truncate), INT32_MIN, INT32_MAX)


def ew_stage(
    d: np.ndarray,
    *,
    alu_bypass: bool,
    alu_algo: int,
    alu_op: np.ndarray | int,
    mul_bypass: bool,
    mul_prelu: bool,
    mul_op: np.ndarray | int,
    truncate: int,
    semantics: Semantics = "rtl",
) -> np.ndarray:
    """EW (Y) stage without the LUT, section 3.2: MUL + truncate, then saturating ALU.
    Operands are 32-bit signed (register value or converted memory operand)."""
    y = np.asarray(d, dtype=I64)
    if not mul_bypass:
        p = y * np.asarray(mul_op, dtype=I64)  # |p| <= 2^62: exact in int64
        if semantics == "rtl" and truncate >= 64:
            t = np.zeros_like(p)
        else:
            t = np.clip(rnd(p, truncate), INT32_MIN, INT32_MAX)
        y = np.where(y >= 0, y, t) if mul_prelu else t
    if not alu_bypass:
        op = np.asarray(alu_op, dtype=I64)
        if alu_algo == ALGO_MAX:
            r = np.maximum(y, op)
        elif alu_algo == ALGO_MIN:
            r = np.minimum(y, op)
        elif alu_algo == ALGO_SUM:
            r = y + op
        else:  # EQL
            r = (y != op).astype(I64)
        y = np.clip(r, INT32_MIN, INT32_MAX)
    return y


_CHUNK = 1 << 16  # elements per cache-sized block in the large-array paths


def output_convert(
    x: np.ndarray, *, offset: int, scale: int, shift: int, out_bits: int, semantics: Semantics = "rtl"
) -> tuple[np.ndarray, np.ndarray]:
    """SDP output convertor (section 2, stage C); see :func:`_output_convert`. Large arrays
    are processed in cache-sized blocks (same result)."""
    x = np.asarray(x)
    kw: dict[str, Any] = {"offset": offset, "scale": scale, "shift": shift, "out_bits": out_bits, "semantics": semantics}
    if x.size <= 4 * _CHUNK:
        return _output_convert(x, **kw)
    flat = x.reshape(-1)
    y = np.empty(flat.shape, dtype=I64)
    flag = np.empty(flat.shape, dtype=bool)
    for a in range(0, flat.size, _CHUNK):
        y[a : a + _CHUNK], flag[a : a + _CHUNK] = _output_convert(flat[a : a + _CHUNK], **kw)
    return y.reshape(x.shape), flag.reshape(x.shape)


def _output_convert(
    x: np.ndarray, *, offset: int, scale: int, shift: int, out_bits: int, semantics: Semantics = "rtl"
) -> tuple[np.ndarray, np.ndarray]:
    """SDP output convertor (section 2, stage C): ``RSAT((x - offset) * scale, shift, 17)``,
    then a silent clamp to ``out_bits`` (8 or 16). Returns (values, saturation flags of the
    17-bit RSAT, rule 1.2: RTL flags a floor outside 17 bits or a positive round-up from the
    maximum; cmod flags ``|floor - result| > 1``). RTL: shift >= 49 gives 0, no flag."""
    v = np.asarray(x, dtype=I64) - I64(offset)
    v *= I64(scale)  # 33 x 16 bits: exact
    lo17, hi17 = -(1 << 16), (1 << 16) - 1
    if shift == 0:
        flag = (v < lo17) | (v > hi17)
        np.clip(v, max(lo17, -(1 << (out_bits - 1))), min(hi17, (1 << (out_bits - 1)) - 1), out=v)
        return v, flag
    if semantics == "rtl" and shift >= 49:
        return np.zeros_like(v), np.zeros(v.shape, dtype=bool)
    floor = v >> shift
    rem = v - (floor << shift)
    half = I64(1) << (shift - 1)
    inc = (rem > half) | ((rem == half) & (v >= 0))
    r17 = floor + inc
    np.clip(r17, lo17, hi17, out=r17)
    if semantics == "rtl":
        flag = (floor < lo17) | (floor > hi17) | (inc & (floor == hi17))  # inc implies v >= 0 here
    else:
        flag = np.abs(floor - r17) > 1
    np.clip(r17, -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1, out=r17)
    return r17, flag


# ---------------------------------------------------------------------------------------
# register decoding and operand fetch


def _run_bs_bn(view, stage, dma, d, fetched, semantics) -> np.ndarray:
    cfg = f"D_DP_{stage}_CFG"
    f = lambda name: int(view.field("SDP", cfg, f"{stage}_{name}"))
    alu_bypass, mul_bypass = bool(f("ALU_BYPASS")), bool(f("MUL_BYPASS"))
    alu_op = 0 if alu_bypass else stage_operand(view, stage, "ALU", fetched, dma)
    mul_op = 0 if mul_bypass else stage_operand(view, stage, "MUL", fetched, dma)
    return bs_bn_stage(
        d,
        alu_bypass=alu_bypass,
        alu_algo=f("ALU_ALGO"),
        alu_op=alu_op,
        alu_shift=int(view.field("SDP", f"D_DP_{stage}_ALU_CFG", f"{stage}_ALU_SHIFT_VALUE")),
        mul_bypass=mul_bypass,
        mul_prelu=bool(f("MUL_PRELU")),
        mul_op=mul_op,
        mul_shift=int(view.field("SDP", f"D_DP_{stage}_MUL_CFG", f"{stage}_MUL_SHIFT_VALUE")),
        relu_bypass=bool(f("RELU_BYPASS")),
        semantics=semantics,
    )


def _ew_operand(view, kind: str, fetched) -> np.ndarray | int:
    """32-bit EW operand (section 3.2/2): REG as-is, MEM through the operand CVT."""
    cfg = f"D_DP_EW_{kind}_CFG"
    if view.field("SDP", cfg, f"EW_{kind}_SRC") == 0:
        return sx(view.field("SDP", f"D_DP_EW_{kind}_SRC_VALUE", f"EW_{kind}_OPERAND"), 32)
    if kind not in fetched:
        raise UnitNotModelled(
            f"SDP: EW {kind} operand from memory but SDP_RDMA ERDMA does not deliver it "
            f"(disabled or DATA_USE mismatch)"
        )
    return ew_operand_cvt(
        fetched[kind],
        bypass=bool(view.field("SDP", cfg, f"EW_{kind}_CVT_BYPASS")),
        offset=sx(view.field("SDP", f"D_DP_EW_{kind}_CVT_OFFSET_VALUE", f"EW_{kind}_CVT_OFFSET"), 32),
        scale=sx(view.field("SDP", f"D_DP_EW_{kind}_CVT_SCALE_VALUE", f"EW_{kind}_CVT_SCALE"), 16),
        truncate=int(view.field("SDP", f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE", f"EW_{kind}_CVT_TRUNCATE")),
    )


# ---------------------------------------------------------------------------------------
# the layer


def _check_winograd(view: RegisterView) -> None:
    """SDP in Winograd mode (flying, from a Winograd CACC). The cmod (``sdp/NV_NVDLA_sdp.cpp``
    ``SdpDataOperationWG`` / ``WdmaSequenceWG``, ~l.1195 and ~l.1560) only walks the cube in blocks
    of 2 atoms x 4 lines (``WINOGRAD_HORI/VERT_ATOM_NUM``) and writes every atom to its ordinary
    feature-format address, per-element operands read in the same order (l.478): the values are
    those of the direct path. It asserts OUTPUT_DST = MEM, no EW ALU EQL, no INT8 -> INT16/FP16
    output, width % 4 == 0 and height % 4 == 0 (RDMA l.480); those are refused here."""
    f = lambda r, n: int(view.field("SDP", r, n))  # noqa: E731
    if f("D_FEATURE_MODE_CFG", "OUTPUT_DST") != 0:
        raise InvalidLayer("SDP Winograd mode writes memory only (cmod asserts OUTPUT_DST = MEM)")
    if f("D_DATA_FORMAT", "PROC_PRECISION") == 0 and f("D_DATA_FORMAT", "OUT_PRECISION") != 0:
        raise InvalidLayer("SDP Winograd mode: INT8 -> INT16/FP16 output is not allowed (cmod asserts)")
    if not f("D_DP_EW_CFG", "EW_BYPASS") and not f("D_DP_EW_CFG", "EW_ALU_BYPASS") and f("D_DP_EW_CFG", "EW_ALU_ALGO") == 3:
        raise InvalidLayer("SDP Winograd mode: EW ALU EQL is not supported (cmod 'EQL mode is not supported in winograd')")
    w, h = f("D_DATA_CUBE_WIDTH", "WIDTH") + 1, f("D_DATA_CUBE_HEIGHT", "HEIGHT") + 1
    if w % 4 or h % 4:
        raise InvalidLayer(f"SDP Winograd mode: cube {w}x{h} must be a multiple of 4 in width and height (cmod asserts)")


def _check_modelled(view: RegisterView, flying: bool) -> tuple[int, int, int]:
    """Refuse modes the model does not cover; returns (in, proc, out) precision codes.
    In flying mode the SDP_RDMA feature registers are not used (input from CACC)."""
    if not flying and (view.field("SDP", "D_FEATURE_MODE_CFG", "WINOGRAD")
                       or view.field("SDP_RDMA", "D_FEATURE_MODE_CFG", "WINOGRAD")):
        raise UnitNotModelled("SDP: Winograd mode from memory (flying off) not modelled")
    if view.field("SDP", "D_FEATURE_MODE_CFG", "WINOGRAD"):
        _check_winograd(view)
    if not flying and (view.field("SDP", "D_FEATURE_MODE_CFG", "BATCH_NUMBER")
                       or view.field("SDP_RDMA", "D_FEATURE_MODE_CFG", "BATCH_NUMBER")):
        raise UnitNotModelled("SDP: batch > 1 from memory (flying off) not modelled")
    if view.field("SDP", "D_FEATURE_MODE_CFG", "BATCH_NUMBER") and view.field("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST"):
        raise InvalidLayer("SDP: batch > 1 writes memory only (cmod/sdp/NV_NVDLA_sdp.cpp asserts OUTPUT_DST = MEM)")
    proc = int(view.field("SDP", "D_DATA_FORMAT", "PROC_PRECISION"))
    out = int(view.field("SDP", "D_DATA_FORMAT", "OUT_PRECISION"))
    if flying:
        in_p = rproc = proc
    else:
        in_p = int(view.field("SDP_RDMA", "D_FEATURE_MODE_CFG", "IN_PRECISION"))
        rproc = int(view.field("SDP_RDMA", "D_FEATURE_MODE_CFG", "PROC_PRECISION"))
    if in_p > 2 or proc > 2 or out > 2 or rproc > 2:
        raise UnitNotModelled(f"SDP: reserved precision code (IN={in_p} PROC={proc} OUT={out})")
    if PREC_FP16 in (in_p, proc, out, rproc):
        # seed 000 SDP conversion table: FP16 -> FP16/INT16 (fp32 pipeline), INT16 -> FP16 (int32)
        if not ((in_p == proc == rproc == PREC_FP16 and out in (PREC_FP16, PREC_INT16))
                or (in_p == proc == rproc == PREC_INT16 and out == PREC_FP16)):
            raise UnitNotModelled(f"SDP: precision combination IN={in_p} PROC={proc} (RDMA PROC={rproc}) OUT={out} "
                                  "not modelled (seed 000 table: FP16 -> FP16/INT16, INT16 -> FP16)")
        return in_p, proc, out
    if rproc != proc or not (in_p == proc or (in_p == PREC_INT16 and proc == PREC_INT8)):
        raise UnitNotModelled(
            f"SDP: precision conversion IN={in_p} PROC={proc} (RDMA PROC={rproc}) not modelled "
            "(modelled: IN = PROC, or INT16 input with INT8 processing)"
        )
    if proc == PREC_INT16 and out == PREC_INT8:
        raise UnitNotModelled("SDP: INT16 processing with INT8 output not modelled (the cmod WDMA packs two "
                              "16-element INT16 transactions into one int8 atom); program PROC_PRECISION = INT8 "
                              "for INT16 -> INT8 (seed 000)")  # fmt: skip
    return in_p, proc, out


def _dims(view: RegisterView, block: str) -> tuple[int, int, int]:
    return (
        int(view.field(block, "D_DATA_CUBE_WIDTH", "WIDTH")) + 1,
        int(view.field(block, "D_DATA_CUBE_HEIGHT", "HEIGHT")) + 1,
        int(view.field(block, "D_DATA_CUBE_CHANNEL", "CHANNEL")) + 1,
    )


def run_sdp(
    view: RegisterView,
    mem: MemoryPort,
    options: ModelOptions | None = None,
    *,
    live: SdpLiveCounters | None = None,
    source: np.ndarray | None = None,
) -> LayerResult:
    """Execute one SDP layer and return its statistics.

    Input: memory (SDP_RDMA), or ``source`` in flying mode: the CACC output as a
    (Cpad, H, W) int64 array of 32-bit values (``conv.run_conv``; fp32 bit patterns when
    PROC_PRECISION = FP16). FP16 processing: :mod:`.sdp_fp`. Output: memory, or
    PDP on the fly when ``OUTPUT_DST`` = PDP (the PDP statistics are merged in).

    ``options.semantics`` picks the RTL or cmod side of every [DIFF]; on the RTL side EW
    and LUT are bypassed when the profile lacks them (``view.has('sdp_ew'/'sdp_lut')``),
    as in nv_small (doc section 0). ``live`` carries the RTL live counters across layers
    (see :class:`SdpLiveCounters`).
    """
    options = options if options is not None else ModelOptions()
    flying = bool(view.field("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE"))
    if flying and source is not None and np.ndim(source) == 4:
        return _run_batches(view, mem, options, live, np.asarray(source))
    if flying and source is None:
        raise UnitNotModelled("SDP: flying mode (input from CACC) needs the convolution pipeline (conv.run_conv)")
    if not flying and source is not None:
        raise ValueError("SDP: a flying-mode source was given but D_FEATURE_MODE_CFG.FLYING_MODE is OFF")
    in_prec, proc, out_prec = _check_modelled(view, flying)
    to_pdp = bool(view.field("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST"))
    w, h, c = _dims(view, "SDP")
    if not flying and (w, h, c) != _dims(view, "SDP_RDMA"):
        raise UnitNotModelled(f"SDP: SDP_RDMA cube {_dims(view, 'SDP_RDMA')} differs from SDP cube {(w, h, c)}")
    atom = options.atom_bytes
    proc_bpe = 1 if proc == PREC_INT8 else 2
    group = atom // proc_bpe  # processing / operand group (cmod: proc_precision for BS/BN/EW DMAs)
    cube = Cube(w, h, c, group)

    # main input (MRDMA), or CACC in flying mode
    if flying:
        x = np.asarray(source, dtype=I64)
        if x.shape != (cube.cpad, h, w):
            raise ValueError(f"SDP: flying input shape {x.shape} != {(cube.cpad, h, w)} (SDP D_DATA_CUBE_*)")
    elif in_prec == PREC_INT16 and proc == PREC_INT8:
        # 16 -> 8: int16 surfaces read in pairs (cube.cpad = atom * ceil(C / atom) lanes)
        x = read_main(view, mem, w, h, cube.cpad, atom // 2, 2)
    else:
        x = read_main(view, mem, w, h, c, group, proc_bpe)

    if proc == PREC_FP16:
        from .sdp_fp import fp_datapath, fp_finish  # compiled loops: loaded with the first FP16 SDP layer only

        dp = fp_datapath(view, mem, x, cube, options, flying=flying)
        return fp_finish(view, mem, options, dp, cube, out_prec, live=live, to_pdp=to_pdp)
    dp = _datapath(view, mem, x, cube, options)
    return _finish(view, mem, options, dp, cube, out_prec, live=live, to_pdp=to_pdp, proc=proc)


class _BatchView:
    """The SDP registers of batch ``b``: destination base + ``b * D_DST_BATCH_STRIDE``, one batch."""

    def __init__(self, view: RegisterView, b: int) -> None:
        self._v = view
        base = reg_address(view, "SDP", "D_DST_BASE_ADDR") + b * int(view.reg("SDP", "D_DST_BATCH_STRIDE"))
        self._regs = {("SDP", "D_DST_BASE_ADDR_LOW"): base & 0xFFFFFFFF, ("SDP", "D_DST_BASE_ADDR_HIGH"): base >> 32}

    def reg(self, block: str, register: str) -> int:
        return self._regs.get((block, register), self._v.reg(block, register))

    def field(self, block: str, register: str, field: str) -> int:
        if (block, register, field) == ("SDP", "D_FEATURE_MODE_CFG", "BATCH_NUMBER"):
            return 0
        if (block, register) in self._regs:
            raise NotImplementedError(f"{block}.{register}: read it with reg()")
        return self._v.field(block, register, field)

    def __getattr__(self, name: str):  # noqa: ANN204 - lut/has/... of the wrapped view
        return getattr(self._v, name)


def _run_batches(view: RegisterView, mem: MemoryPort, options: ModelOptions, live: SdpLiveCounters | None,
                 source: np.ndarray) -> LayerResult:  # fmt: skip
    """Flying SDP over ``B = BATCH_NUMBER + 1`` cubes from CACC (``source`` (B, Cpad, H, W)): each
    batch as one cube written at ``D_DST_BASE_ADDR + b * D_DST_BATCH_STRIDE`` (cmod
    ``sdp/NV_NVDLA_sdp.cpp`` ``WdmaSequenceBatch``; ``SdpDataOperationBatch`` runs the same
    datapath per element); the statistics of the layer are the sums over the batches."""
    nb = int(view.field("SDP", "D_FEATURE_MODE_CFG", "BATCH_NUMBER")) + 1
    if source.shape[0] != nb:
        raise ValueError(f"SDP: {source.shape[0]} batches from CACC but BATCH_NUMBER + 1 = {nb}")
    stats: dict[tuple[str, str], int] = {}
    notes: list[str] = []
    elements = 0
    for b in range(nb):
        res = run_sdp(_BatchView(view, b), mem, options, live=live, source=source[b])
        for k, v in res.stats.items():
            stats[k] = min(stats.get(k, 0) + int(v), 0xFFFFFFFF)
        notes.extend(n for n in res.notes if n not in notes)
        elements += res.elements
    return LayerResult(stats=stats, elements=elements, notes=notes)


def _datapath(view: RegisterView, mem: MemoryPort, x: np.ndarray, cube: Cube, options: ModelOptions) -> SdpDatapathOut:
    """BS, BN, EW (+LUT) on the (Cpad, H, W) input."""
    sem = options.semantics
    notes: list[str] = []
    # BS (X1), BN (X2)
    if not view.field("SDP", "D_DP_BS_CFG", "BS_BYPASS"):
        fetched = fetch_operands(view, mem, cube, "BRDMA", "BS", options)
        x = _run_bs_bn(view, "BS", "BRDMA", x, fetched, sem)
    if not view.field("SDP", "D_DP_BN_CFG", "BN_BYPASS"):
        fetched = fetch_operands(view, mem, cube, "NRDMA", "BN", options)
        x = _run_bs_bn(view, "BN", "NRDMA", x, fetched, sem)

    # EW (Y) + LUT
    has_ew = view.has("sdp_ew") or sem == "cmod"
    has_lut = view.has("sdp_lut") or sem == "cmod"
    ew_on = has_ew and not view.field("SDP", "D_DP_EW_CFG", "EW_BYPASS")
    if not has_ew and not view.field("SDP", "D_DP_EW_CFG", "EW_BYPASS"):
        notes.append("SDP: EW configured but absent from the profile: bypassed (RTL)")
    lut_on = False
    lstats = LutStats()
    eql = False
    if ew_on:
        ecfg = lambda name: int(view.field("SDP", "D_DP_EW_CFG", f"EW_{name}"))
        fetched = fetch_operands(view, mem, cube, "ERDMA", "EW", options)
        alu_bypass, mul_bypass = bool(ecfg("ALU_BYPASS")), bool(ecfg("MUL_BYPASS"))
        x = ew_stage(
            x,
            alu_bypass=alu_bypass,
            alu_algo=ecfg("ALU_ALGO"),
            alu_op=0 if alu_bypass else _ew_operand(view, "ALU", fetched),
            mul_bypass=mul_bypass,
            mul_prelu=bool(ecfg("MUL_PRELU")),
            mul_op=0 if mul_bypass else _ew_operand(view, "MUL", fetched),
            truncate=int(view.field("SDP", "D_DP_EW_TRUNCATE_VALUE", "EW_TRUNCATE")),
            semantics=sem,
        )
        eql = not alu_bypass and ecfg("ALU_ALGO") == ALGO_EQL
        if not ecfg("LUT_BYPASS"):
            if has_lut:
                lut_on = True
                p = decode_sdp_lut_params(view)
                x, hle, hlo, kind = sdp_lut(x, p, view.lut("SDP", "LE"), view.lut("SDP", "LO"), sem,
                                            observer=options.coverage)
                lstats = lut_stats(hle, hlo, kind)
            else:
                notes.append("SDP: LUT configured but absent from the profile: bypassed (RTL)")

    return SdpDatapathOut(x, eql=eql, lut=lstats, lut_on=lut_on, ew_on=ew_on, notes=notes)


def _finish(view: RegisterView, mem: MemoryPort, options: ModelOptions, dp: SdpDatapathOut, cube: Cube, out_prec: int, *,
            live: SdpLiveCounters | None, to_pdp: bool, proc: int = PREC_INT8) -> LayerResult:  # fmt: skip
    """Output convertor (C), WDMA or PDP, statistics."""
    x, eql, notes, (w, h, c) = dp.x, dp.eql, dp.notes, (cube.width, cube.height, cube.channels)
    sem = options.semantics
    atom = options.atom_bytes
    pdp_res: LayerResult | None = None
    # output convertor (C) and WDMA
    out_fp16 = out_prec == PREC_FP16  # INT16 -> FP16 (seed 000 table; cmod sdp_c.cpp ``Int17ToFp16``)
    out_bits = 16 if out_prec in (PREC_INT16, PREC_FP16) else 8
    out_bpe = out_bits // 8
    out_group = atom // out_bpe
    stats: dict[tuple[str, str], int] = {}
    if eql:
        if to_pdp:  # cmod SdpDataOperationDC: the EQL branch sends nothing to PDP, which then waits forever
            raise InvalidLayer("SDP: EW ALU EQL with OUTPUT_DST = PDP: SDP sends no data to PDP (the C model hangs)")
        # EQL: C passes the low 16 bits with no saturation flag; nothing is written (3.3)
        y = sx(x, 16)
        sat_count = 0
        stats[("SDP", "D_STATUS")] = int(np.any(y != 0))
    else:
        y, flag = output_convert(
            x,
            offset=sx(view.field("SDP", "D_CVT_OFFSET", "CVT_OFFSET"), 32),
            scale=sx(view.field("SDP", "D_CVT_SCALE", "CVT_SCALE"), 16),
            shift=int(view.field("SDP", "D_CVT_SHIFT", "CVT_SHIFT")),
            out_bits=17 if out_fp16 else out_bits,
            semantics=sem,
        )
        if out_fp16:
            # the 17-bit RSAT result -> FP16 (RNE, +/-65504 at most); the saturation counter then
            # counts outputs equal to +/-0x7bff (cmod sdp_hls_wrapper.cpp sdp_c)
            y = int_to_fp16(y).astype(I64)
            flag = (y & 0x7FFF) == FP16_MAX_BITS
        if options.coverage is not None:  # functional coverage only; no effect on y
            options.coverage.event("sdp_out", x=x, y=y, flag=flag, channels=c, out_bits=out_bits,
                                   offset=sx(view.field("SDP", "D_CVT_OFFSET", "CVT_OFFSET"), 32),
                                   scale=sx(view.field("SDP", "D_CVT_SCALE", "CVT_SCALE"), 16),
                                   shift=int(view.field("SDP", "D_CVT_SHIFT", "CVT_SHIFT")))
        ocube = Cube(w, h, c, out_group)
        if proc == PREC_INT8 and out_bits == 16 and not to_pdp:
            # 8 -> 16: each int8 atom becomes two int16 surfaces (cmod WdmaSequence
            # ``surface_num = ((C+31)/32)*2``, RTL NV_NVDLA_SDP_WDMA_cmd.v cfg_mode_8to16)
            ocube = Cube(w, h, surfaces(c, atom) * atom, out_group)
        if ocube.cpad > y.shape[0]:
            raise UnitNotModelled("SDP: output padding lanes beyond the input's not modelled")
        streamed, y = y, y[: ocube.cpad]
        flag = flag[: ocube.cpad]
        sat_count = int(np.count_nonzero(flag))
        if to_pdp:
            from .pdp import run_pdp

            pdp_res = run_pdp(view, mem, options, source=streamed)  # every lane SDP streams (pdp._flying_parts)
        else:
            write_dst(view, mem, y, w, h, ocube.channels, out_group, out_bpe)

    stats.update(sdp_statistics(view, sem, sat_count, dp, live))
    if out_fp16 and view.field("SDP", "D_PERF_ENABLE", "PERF_NAN_INF_COUNT_EN"):
        stats[("SDP", "D_STATUS_NAN_OUTPUT_NUM")] = 0  # an integer pipeline makes no NaN
    if pdp_res is not None:
        stats.update(pdp_res.stats)
        notes.extend(pdp_res.notes)
    return LayerResult(stats=stats, elements=int(y.size) if not eql else 0, notes=notes)


