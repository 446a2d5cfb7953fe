"""Bit-exact reference model of NVDLA's PDP (pooling), INT8, INT16 and FP16; input from memory or from SDP.

Rules (docs/nvdla-precision-semantics.md section 9; cmod ``cmod/pdp/NV_NVDLA_pdp.cpp``
``LineOperation`` / ``PoolingStage0Calc`` / ``PoolingStage1Calc``; RTL ``vmod/nvdla/pdp``):

* Output ``(ox, oy)`` pools the window of ``KW x KH`` positions starting at
  ``(ox*SW - PAD_LEFT, oy*SH - PAD_TOP)`` of the (per-split) input.
* MAX / MIN: over the real (non-padding) positions only; padding values are not used.
* AVERAGE: ``S = sum(real) + (KH - nh) * P[nw] + KW * P[nh]`` where ``nw`` / ``nh`` are the
  numbers of padded columns / rows in the window and ``P[n]`` = ``D_POOLING_PADDING_VALUE_nX``
  (the pre-multiplied sum of n padding values, sign-extended from bit 7, 8, 9, 9, 10, 10, 10;
  ``P[0] = 0``). Then ``t = rnd(S * RW, 16)``, ``out = rnd(t * RH, 16)`` with the unsigned
  Q1.16 reciprocals ``RW``/``RH``; ties away from zero; the int8 store keeps the low 8 bits.
  That is the cmod's arithmetic (``--model-semantics cmod``). The default (RTL) semantics for
  INT8 follow the nv_small RTL's widths instead (:func:`_ave_int8_rtl`): 11-bit row sums with
  ``PAD_VALUE[10:0]``, ``(PAD_VALUE * KW)[13:0]`` for padded rows, an 11-bit intermediate and a
  positive result that wraps at 7 bits before rounding (:func:`_rtl_round`).
* RTL semantics refuse (``InvalidLayer``) an unused PAD_RIGHT / PAD_BOTTOM of a stride or more
  (:func:`_check_trailing_pad`; the RTL writes wrong outputs or hangs), split width on the
  fly (:func:`_check_flying_split`; the RTL never advances its split counter on SDP's stream), and
  on the fly input columns / rows past the last pooling window (:func:`_check_flying_tail`, an RTL
  limitation: PDP's done does not wait for SDP's stream, SDP hangs or the next layer is corrupted),
  and a slice wider than the line buffer holds for the kernel's rows (:func:`_check_line_buffer`;
  the RTL never raises done).
* Split-width mode processes the input in column slices (first / mid / last partial widths,
  each slice but the first re-reading ``KW - SW`` overlap columns); padding is only applied
  on the outer edges (left of the first slice, right of the last).
* Every lane of every 8-channel group (padding lanes included) is computed and written.
* ``--model-semantics cmod``: the cmod keeps the INT8 window sums (and the padding values and
  their ``* KW`` products) in ``int16_t`` line buffers (``line_buffer_ptr_int8``,
  ``line_operation_buffer_ptr_int8``, ``padding_value_array_ptr_int8``), so ``S`` wraps modulo
  2^16 before the reciprocal multiply (INT16: ``int32_t``, modulo 2^32). Reachable only with
  raw padding values far from ``n * v``. INT16 keeps this exact-sum arithmetic in both semantics
  (no INT16 RTL was checked).

INT16 (``D_DATA_FORMAT.INPUT_DATA = INT16``, nv_full; cmod of nvdla/hw nvdlav1
``cmod/pdp/NV_NVDLA_pdp.cpp``): elements are 2 bytes, a memory atom holds ``atom / 2``
channels (``ELEMENT_PER_ATOM_INT16``); the line buffer is 32-bit (``line_buffer_ptr_int16``),
so window sums are exact; the padding values ``P[n]`` are sign-extended from bit 15, 16, 17,
17, 18, 18, 18 of the 19-bit fields into 32 bits (``int_sign_extend(pdp_pad_value_nx_, k, 32,
...)`` in the INT16 case of the layer set-up); AVERAGE uses the same two Q1.16 reciprocal
steps ``rnd(rnd(S * RW, 16) * RH, 16)`` (``PoolingStage1Calc``, double arithmetic with +/-0.5
and truncation toward zero, exact here because ``|S * RW| < 2^40``) and the int16 store keeps
the low 16 bits (``static_cast<int16_t>``, no clamp). MAX / MIN compare the sign-extended
16-bit values (RTL ``NV_NVDLA_PDP_CORE_cal1d.v``/``cal2d.v``: ``int16_data0/1`` signed
compares under ``reg2dp_int16_en``). PDP converts no precision (seed 000), so input and
output are both INT16.

FP16 (``INPUT_DATA = FP16``, nv_full; cmod ``cmod/pdp/NV_NVDLA_pdp.cpp`` with
``cmod/hls_wrapper/pdp_hls_wrapper.cpp`` ``HLS_PDP_PoolingStage0Calc_FP16_W/_H`` and
``HLS_PDP_PoolingStage1Calc_FP16``): the pooling is a fold in the cmod's order, so the rounding of
every step is reproduced (:func:`.pdp_fp.pool2d_fp16`):

* MAX / MIN: ``FpMax/FpMin<5,10>`` on the FP16 patterns, first over the columns of the window
  (``cmp(acc, x)``, left to right), then over its rows (``cmp(row, acc)``, top to bottom); a NaN
  operand wins (the first in a row, the last row's across rows); INF is kept.
* AVERAGE: fp17 (1+6+10) arithmetic. Per input row, ``o = x`` at the first real column of the
  window, else ``o = fp17_add(o, x)`` (``x`` = ``Fp16ToFp17(input)``: INF -> fp17 maximum); after
  each column ``o = fp17_add(fp17_add(o, PL), PR)`` where ``PL``/``PR`` are +0 except at the
  last real column: ``PL = P[left + right]`` when the window has left padding, else
  ``PR = P[right]`` (``LineOperation``'s add_left/right_padding). The rows are folded the same
  way (``acc = fp17_add(row, acc)``), each step followed by ``+ PT*KW + PB*KW`` (fp17 mul by the
  cmod's ``kernel_width_map``, 1.0 .. 7.0) with ``PT = P[top + bottom]`` / ``PB = P[bottom]`` at
  the last real row. ``P[n]`` = the low 17 bits of ``D_POOLING_PADDING_VALUE_nX`` read as
  fp17. Output ``Fp17ToFp16(fp17_mul(fp17_mul(acc, RW), RH))`` with ``RW``/``RH`` the 17-bit
  ``D_RECIP_KERNEL_*`` fields read as fp17.
* NAN_TO_ZERO (``D_NAN_FLUSH_TO_ZERO``, off-flying only) turns NaN inputs into +0 after the
  counters saw them; ``D_NAN_INPUT_NUM``/``D_INF_INPUT_NUM`` count every element of every atom
  PDP_RDMA reads (padding lanes and the re-read split overlap included,
  ``ExtractDmaPayload``), ``D_NAN_OUTPUT_NUM`` every NaN element of every output atom.
* On the fly (``FLYING_MODE = ON_FLYING``, SDP's ``OUTPUT_DST = PDP``): the input is SDP's
  16-bit output stream consumed in PDP's loop order (:func:`_flying_parts`; split width on the
  fly with ``--model-semantics cmod`` only, :func:`_check_flying_split`); no NaN flush and
  no input counters (both belong to the off-flying PDP_RDMA path), ``D_NAN_OUTPUT_NUM`` as above.
* Kernel width 8 with top/bottom padding reads ``kernel_width_map[8]``, past the end of the
  cmod's table (undefined); the model uses 8.0 there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .base import InvalidLayer, LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled, engine_memory
from .dma import CubeGeometry, read_surfaces, write_surfaces
from .ops import rnd, sx
from .pdp_fp import AVE, MAX, MIN, pool2d_fp16, pool2d_fp16_slices, pool_windows

__all__ = ["AVE", "FLYING_TAIL_RULE", "MAX", "MIN", "PdpConfig", "decode_pdp_config", "pad_values", "pool2d", "pool2d_fp16",
           "run_pdp", "unread_tail"]

I64 = np.int64
_U32 = 0xFFFF_FFFF
_PAD_SIGN_BIT = (7, 8, 9, 9, 10, 10, 10)  # cmod int_sign_extend sign-bit index for n = 1..7
#: INT16: nvdlav1 cmod ``NV_NVDLA_pdp.cpp``, ``int_sign_extend(pdp_pad_value_nx_, k, 32, ...)``
_PAD_SIGN_BIT_INT16 = (15, 16, 17, 17, 18, 18, 18)
_BITS = {0: 8, 1: 16, 2: 16}  # D_DATA_FORMAT.INPUT_DATA -> element bits (2 = FP16)
_FP16 = 2


@dataclass(frozen=True)
class PdpConfig:
    method: int = AVE
    kernel_w: int = 1
    kernel_h: int = 1
    stride_w: int = 1
    stride_h: int = 1
    pad_left: int = 0
    pad_top: int = 0
    pad_right: int = 0
    pad_bottom: int = 0
    recip_w: int = 1 << 16
    recip_h: int = 1 << 16
    pad_value: tuple[int, ...] = (0,) * 8  # P[0..7], P[0] = 0
    bits: int = 8  # element width: 8 (INT8) or 16 (INT16, FP16)
    fp16: bool = False
    pad_raw: tuple[int, ...] = (0,) * 8  # FP16: the low 17 bits of PAD_VALUE_nX (fp17), [0] = 0
    nan_to_zero: bool = False
    #: cmod semantics: the window sum wraps in the cmod's line buffers (INT8: int16, INT16: int32)
    acc_bits: int | None = None
    #: the raw 19-bit ``PAD_VALUE_nX`` fields, [0] = 0 (INT8 RTL datapath, :func:`_ave_int8_rtl`)
    pad_reg: tuple[int, ...] = (0,) * 8
    #: INT8 AVERAGE in the nv_small RTL's widths (default semantics); False = the cmod's arithmetic
    rtl_int8: bool = False


def pad_values(raw: list[int], bits: int = 8) -> tuple[int, ...]:
    """``D_POOLING_PADDING_VALUE_{1..7}_CFG`` -> ``(0, P1, .., P7)`` as the cmod reads them:
    the sign bit is replicated above bit ``k``, OR-ed with the raw 19-bit value, and the result
    kept in the line-buffer type. INT8 (``bits`` 8): ``k`` = 7, 8, 9, 9, 10, 10, 10, kept as
    int16; INT16: ``k`` = 15, 16, 17, 17, 18, 18, 18, kept as int32."""
    signs, keep = (_PAD_SIGN_BIT, 16) if bits == 8 else (_PAD_SIGN_BIT_INT16, 32)
    out = [0]
    for v, k in zip(raw, signs):
        v &= 0x7FFFF
        if v >> k & 1:
            v |= ~((1 << (k + 1)) - 1)
        out.append(int(sx(v, keep)))
    return tuple(out)


def decode_pdp_config(view: RegisterView) -> PdpConfig:
    f = lambda reg, fld: view.field("PDP", reg, fld)
    fmt = int(f("D_DATA_FORMAT", "INPUT_DATA"))
    bits = _BITS.get(fmt, 8)
    raw = [int(f(f"D_POOLING_PADDING_VALUE_{n}_CFG", f"PAD_VALUE_{n}X")) for n in range(1, 8)]
    return PdpConfig(
        method=f("D_OPERATION_MODE_CFG", "POOLING_METHOD"),
        kernel_w=f("D_POOLING_KERNEL_CFG", "KERNEL_WIDTH") + 1,
        kernel_h=f("D_POOLING_KERNEL_CFG", "KERNEL_HEIGHT") + 1,
        stride_w=f("D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH") + 1,
        stride_h=f("D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_HEIGHT") + 1,
        pad_left=f("D_POOLING_PADDING_CFG", "PAD_LEFT"),
        pad_top=f("D_POOLING_PADDING_CFG", "PAD_TOP"),
        pad_right=f("D_POOLING_PADDING_CFG", "PAD_RIGHT"),
        pad_bottom=f("D_POOLING_PADDING_CFG", "PAD_BOTTOM"),
        recip_w=f("D_RECIP_KERNEL_WIDTH", "RECIP_KERNEL_WIDTH"),
        recip_h=f("D_RECIP_KERNEL_HEIGHT", "RECIP_KERNEL_HEIGHT"),
        pad_value=pad_values(raw, bits),
        bits=bits,
        fp16=fmt == _FP16,
        pad_raw=(0, *(v & 0x1FFFF for v in raw)),
        pad_reg=(0, *(v & 0x7FFFF for v in raw)),
        nan_to_zero=bool(f("D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO")),
    )


def pool2d(
    x: np.ndarray, cfg: PdpConfig, out_w: int, out_h: int, *, pad_left: int | None = None, pad_right: int | None = None
) -> np.ndarray:
    """Pool ``x`` (int8 or int16 values as ``cfg.bits`` says, ``[..., H, W, lanes]``) to
    ``[..., out_h, out_w, lanes]`` (int8 / int16).

    ``pad_left``/``pad_right`` override the configured ones (split slices)."""
    x = np.asarray(x, dtype=I64)
    h, w = x.shape[-3], x.shape[-2]
    pl = cfg.pad_left if pad_left is None else pad_left
    cx, vx = pool_windows(out_w, w, cfg.kernel_w, cfg.stride_w, pl)
    cy, vy = pool_windows(out_h, h, cfg.kernel_h, cfg.stride_h, cfg.pad_top)
    # gather [..., out_h, kh, out_w, kw, lanes]
    g = x[..., cy[:, :, None, None], cx[None, None, :, :], :]
    valid = (vy[:, :, None, None] & vx[None, None, :, :])[..., None]
    if cfg.method == AVE and cfg.rtl_int8 and cfg.bits == 8:
        return _ave_int8_rtl(g, vx, vy, cfg)
    if cfg.method == AVE:
        s = np.where(valid, g, 0).sum(axis=(-4, -2))
        p = np.asarray(cfg.pad_value, dtype=I64)
        nw = cfg.kernel_w - vx.sum(axis=1)  # [out_w]
        nh = cfg.kernel_h - vy.sum(axis=1)  # [out_h]
        pw = p[np.clip(nw, 0, 7)]
        ph = p[np.clip(nh, 0, 7)]
        s = s + ((cfg.kernel_h - nh)[:, None] * pw[None, :] + cfg.kernel_w * ph[:, None])[..., None]
        if cfg.acc_bits:
            s = sx(s, cfg.acc_bits)
        t = rnd(s * cfg.recip_w, 16)
        out = rnd(t * cfg.recip_h, 16)
        # low 8 / 16 bits (cmod static_cast to the output type, no clamp)
        return sx(out, cfg.bits).astype(np.int8 if cfg.bits == 8 else np.int16)
    if cfg.method in (MAX, MIN):
        fill = -(1 << 62) if cfg.method == MAX else 1 << 62
        g = np.where(valid, g, fill)
        red = np.max if cfg.method == MAX else np.min
        return red(g, axis=(-4, -2)).astype(np.int8 if cfg.bits == 8 else np.int16)
    raise UnitNotModelled(f"PDP: pooling method {cfg.method} not defined")


def _rtl_round(p: np.ndarray, prod_bits: int, out_bits: int) -> np.ndarray:
    """RTL ``NV_NVDLA_PDP_CORE_cal2d.v`` reciprocal step (``hmult_8bit_*`` / ``vmult_8bit_*``,
    "rounding 0.5=1, -0.5=-1"): the product ``p`` is kept in ``prod_bits`` (its sign is bit
    ``prod_bits - 1``); negative: ``floor(p / 2^16)`` (+1 when the fraction is above one half),
    low ``out_bits`` bits; positive: the low ``out_bits - 1`` bits of ``floor(p / 2^16)`` plus
    the half bit, read as ``out_bits`` two's complement (so a positive result wraps modulo
    2^(out_bits-1) before rounding, e.g. 130 -> 2, and 127.5 -> -128)."""
    p = sx(p, prod_bits)
    q, frac = p >> 16, p & 0xFFFF
    neg = sx(q + (frac > 0x8000), out_bits)
    pos = sx((q & ((1 << (out_bits - 1)) - 1)) + (frac >> 15), out_bits)
    return np.where(p < 0, neg, pos)


def _ave_int8_rtl(g: np.ndarray, vx: np.ndarray, vy: np.ndarray, cfg: PdpConfig) -> np.ndarray:
    """INT8 AVERAGE in the nv_small RTL's datapath widths (``vmod/nvdla/pdp``, generated
    ``outdir/nv_small/vmod/nvdla/pdp``); ``g`` is the gathered ``[..., out_h, kh, out_w, kw, lanes]``.

    * Row sum (``NV_NVDLA_PDP_CORE_unit1d.v``): the real taps of one input row, 11 bits (8+3).
      With ``nw`` padded columns (``cal1d.v`` ``padding_here``, ``pad_table_index = size - active``)
      ``cal1d.v:1944`` adds ``PAD_VALUE_{nw}X[10:0]`` (sign bit 10) and keeps 11 bits (wraps).
    * Column sum (``cal2d.v`` ``pooling_SUM``, 14 bits) of the real rows' row sums; with ``nh``
      padded rows ``cal2d.v:5075/5093`` adds ``(PAD_VALUE_{nh}X (19-bit signed) * KW)[13:0]``
      (sign bit 13) into 15 bits.
    * ``t = _rtl_round(S * RW, 31, 11)`` (``data_hmult_8bit_*_ext`` is 31 bits, ``hmult`` 11),
      ``out = _rtl_round(t * RH, 28, 8)`` (``data_vmult_8bit_*_ext`` 28 bits; cal2d.v:5174-5257).
    """
    p = np.asarray(cfg.pad_reg, dtype=I64)
    nw = cfg.kernel_w - vx.sum(axis=1)  # [out_w]
    nh = cfg.kernel_h - vy.sum(axis=1)  # [out_h]
    row = np.where(vx[None, None, :, :, None], g, 0).sum(axis=-2)  # [..., out_h, kh, out_w, lanes]
    padw = sx(p[np.clip(nw, 0, 7)] & 0x7FF, 11)
    row = np.where((nw > 0)[:, None], sx(row + padw[:, None], 11), row)
    s = sx(np.where(vy[:, :, None, None], row, 0).sum(axis=-3), 14)  # [..., out_h, out_w, lanes]
    padh = sx(sx(p[np.clip(nh, 0, 7)], 19) * cfg.kernel_w, 14)
    s = s + np.where(nh > 0, padh, 0)[:, None, None]
    t = _rtl_round(s * cfg.recip_w, 31, 11)
    return _rtl_round(t * cfg.recip_h, 28, 8).astype(np.int8)


def _splits(view: RegisterView, w: int, out_w: int, cfg: PdpConfig) -> list[tuple[int, int, int, int, int, int]]:
    """``(in_start, in_width, out_start, out_width, pad_left, pad_right)`` per split slice."""
    n = view.field("PDP", "D_OPERATION_MODE_CFG", "SPLIT_NUM") + 1
    if n == 1:
        return [(0, w, 0, out_w, cfg.pad_left, cfg.pad_right)]
    f = lambda fld: view.field("PDP", "D_PARTIAL_WIDTH_IN", fld) + 1
    g = lambda fld: view.field("PDP", "D_PARTIAL_WIDTH_OUT", fld) + 1
    in_first, in_mid, in_last = f("PARTIAL_WIDTH_IN_FIRST"), f("PARTIAL_WIDTH_IN_MID"), f("PARTIAL_WIDTH_IN_LAST")
    out_first, out_mid, out_last = g("PARTIAL_WIDTH_OUT_FIRST"), g("PARTIAL_WIDTH_OUT_MID"), g("PARTIAL_WIDTH_OUT_LAST")
    overlap = cfg.kernel_w - cfg.stride_w
    out = [(0, in_first, 0, out_first, cfg.pad_left, 0)]
    for i in range(1, n):
        start = in_first + (i - 1) * in_mid - overlap
        acc = out_first + (i - 1) * out_mid
        last = i == n - 1
        out.append((start, (in_last if last else in_mid) + overlap, acc, out_last if last else out_mid,
                    0, cfg.pad_right if last else 0))  # fmt: skip
    return out


def _check_trailing_pad(view: RegisterView, cfg: PdpConfig, w: int, h: int, out_w: int, out_h: int) -> None:
    """RTL rule: a PAD_RIGHT / PAD_BOTTOM larger than the padding the last window covers,
    ``max(0, (OUT - 1) * S + K - IN - PAD_LEFT/TOP)`` (split mode: of the last slice), must stay
    below the stride. The RTL derives its line/surface-end flush count from the configured value
    (nv_small ``NV_NVDLA_PDP_CORE_cal1d.v:866-881`` ``flush_num_cal`` = PAD_RIGHT / stride,
    ``:1256`` ``rest_width_use``; ``NV_NVDLA_PDP_CORE_cal2d.v:974-1041`` for PAD_BOTTOM): with an
    unused pad of a stride or more it flushes windows that are not programmed, writing wrong
    outputs (fuzz pdp seed 7 cases 3, 10; seed 8 max/min cases 32, 39) or never completing the
    layer (seed 8 case 0: 6x7 MIN, stride 5x4, H 6, PAD_BOTTOM 6 of 5 used). Refused."""
    _, in_w, _, o_w, pl, pr = _splits(view, w, out_w, cfg)[-1]
    used = max(0, (o_w - 1) * cfg.stride_w + cfg.kernel_w - in_w - pl)
    if pr > used and pr >= cfg.stride_w:
        raise InvalidLayer(f"PDP.D_POOLING_PADDING_CFG.PAD_RIGHT = {pr}: the last output window covers {used} padding "
                           f"column(s); an unused right pad must be below the stride ({cfg.stride_w}) on the RTL")
    used = max(0, (out_h - 1) * cfg.stride_h + cfg.kernel_h - h - cfg.pad_top)
    if cfg.pad_bottom > used and cfg.pad_bottom >= cfg.stride_h:
        raise InvalidLayer(f"PDP.D_POOLING_PADDING_CFG.PAD_BOTTOM = {cfg.pad_bottom}: the last output window covers {used} "
                           f"padding row(s); an unused bottom pad must be below the stride ({cfg.stride_h}) on the RTL")


#: PDP's line buffer, in output columns of one memory atom: nv_small's 8 banks x 128 entries of one
#: element, 8 channels to an atom (``NV_NVDLA_PDP_CORE_cal2d.v``, ``nv_ram_rws_128x18`` x 8); NVDLA's
#: compiler's nv_full figure, 7 KB / (32 channels x 14 bits), is the same 128
PDP_LINE_BUFFER_COLUMNS = 128
#: lines the RTL keeps per ``ceil(KH / SY)`` window rows (NVDLA's compiler, ``PDPNode::calculateMaxWidth``)
RTL_OVERLAP_LINES = (1, 1, 2, 4, 4, 8, 8, 8, 8)


def line_buffer_columns(kernel_h: int, stride_h: int) -> int | None:
    """The widest output slice PDP's line buffer holds for a kernel of ``kernel_h`` rows at row
    stride ``stride_h`` on the RTL (:func:`_check_line_buffer`), None for a one-row kernel (no lines kept)."""
    if kernel_h < 2:
        return None
    return PDP_LINE_BUFFER_COLUMNS // RTL_OVERLAP_LINES[min(-(-kernel_h // stride_h), len(RTL_OVERLAP_LINES) - 1)]


def _check_line_buffer(view: RegisterView, cfg: PdpConfig, w: int, out_w: int) -> None:
    """RTL rule: a slice's output width (the whole width without split) must fit PDP's line buffer,
    ``PDP_LINE_BUFFER_COLUMNS / RTL_OVERLAP_LINES[ceil(KH / SY)]`` columns, when the kernel has more
    than one row. Measured on the nv_small RTL (fuzz pdp, 2026-11-30, INT8 average, one 8-channel
    atom): KH 7 / SY 4 (2 lines) width 64 passes, 65 never raises PDP's done; KH 5 / SY 3 (2 lines)
    64 passes; KH 3 / SY 1 (4 lines) 32 passes, 33 hangs; KH 6 / SY 1 (8 lines) 16 passes, 17 and 24
    hang; KH 1 keeps no lines (129 passes). NVDLA's compiler splits the width by the
    same formula with a 7 KB buffer, which is nv_full's (on nv_small it would allow 4x too wide).
    Refused; the C model has no such limit (``--model-semantics cmod``)."""
    limit = line_buffer_columns(cfg.kernel_h, cfg.stride_h)
    if limit is None:
        return
    lines = PDP_LINE_BUFFER_COLUMNS // limit
    widest = max(s[3] for s in _splits(view, w, out_w, cfg))
    if widest > limit:
        raise InvalidLayer(f"PDP: output width {widest} per slice does not fit the line buffer on the RTL: kernel "
                           f"height {cfg.kernel_h} / stride {cfg.stride_h} keeps {lines} line(s) of at most "
                           f"{limit} columns (split the width: D_OPERATION_MODE_CFG.SPLIT_NUM)")


def _check_flying_split(view: RegisterView) -> None:
    """RTL rule: no split width on the fly (``SPLIT_NUM > 0`` with ``FLYING_MODE = ON_FLYING``).
    On the fly, PDP's pre-processor (nv_small ``NV_NVDLA_PDP_CORE_preproc.v``) counts SDP's stream
    over the whole cube (``line_end`` at ``D_DATA_CUBE_IN_WIDTH``) and raises ``split_end`` only
    with ``surf_end`` of the last surface, i.e. once, at the end of the cube (it is ``cube_end``);
    ``NV_NVDLA_PDP_CORE_cal1d.v`` advances ``splitw_cnt`` only on that bit (``splitw_end_sync``),
    so it stays on the first slice: the first / mid / last partial widths are never switched and
    the output matches the C model's first slice only (fuzz sdp-pdp on the nv_small Verilator RTL,
    seed 3, 40 layers: of 13 split layers the 6 with kernels wider than 1 differ, 2 of them never
    raising PDP's done, the 7 of kernel width 1 agree; without split, seed 2, 100 of 100 agree;
    ``tests/test_pdp_flying_rtl.py``). The C model consumes the stream slice by slice
    (:func:`_flying_parts`, ``--model-semantics cmod``). Refused."""
    n = view.field("PDP", "D_OPERATION_MODE_CFG", "SPLIT_NUM")
    if n:
        raise InvalidLayer(f"PDP.D_OPERATION_MODE_CFG.SPLIT_NUM = {n} with FLYING_MODE = ON_FLYING: the RTL raises "
                           "split_end only at the end of the cube on the fly (PDP_CORE_preproc), so cal1d never leaves "
                           "the first split slice; split width on the fly is modelled with the C model's semantics only")


#: the rule :func:`_check_flying_tail` enforces, as its refusal names it
FLYING_TAIL_RULE = "on the fly the last pooling window must reach the last input column and row"


def unread_tail(n_in, n_out, k: int, stride: int, lead: int) -> np.ndarray:
    """Input columns (rows) after the last of ``n_out`` windows of ``k`` at ``stride`` that start
    ``lead`` (PAD_LEFT / PAD_TOP) before the input: ``max(0, n_in + lead - (n_out - 1) * stride - k)``.
    Works on numpy arrays too (the generator checks whole draws at once)."""
    return np.maximum(0, np.asarray(n_in) + lead - (np.asarray(n_out) - 1) * stride - k)


def _check_flying_tail(cfg: PdpConfig, w: int, h: int, out_w: int, out_h: int) -> None:
    """RTL limitation, on the fly only: the last pooling window must reach the last input column
    and row (:func:`unread_tail` of both is 0). Paths are NVDLA's ``hw/vmod/nvdla`` (master):

    * PDP's done follows its last output beat alone on the fly: ``pdp/NV_NVDLA_PDP_wdma.v:225-237``
      sets ``reading_done_flag`` at the layer's start when ON_FLYING (off the fly it waits for
      PDP_RDMA's ``rdma2wdma_done``, ``:220`` "to avoid layer switched but RDMA still reading"), so
      ``wdma_done`` (``:249-260``, ``dp2reg_done`` ``:266``) rises at ``op_done`` (``:265``).
    * That done flips PDP's consumer group (``pdp/NV_NVDLA_PDP_reg.v:489-495``); the new group's
      op_en (``:618-624``, 0 unless programmed) becomes ``slcg_op_en`` 3 cycles later (``:639-667``),
      which gates the clock of PDP's core (``pdp/NV_NVDLA_pdp.v:258-266``, ``:357-358``;
      ``pdp/NV_NVDLA_PDP_slcg.v:48,112``; no override, ``top/NV_NVDLA_partition_o.v:786``).
    * SDP's input handshake to PDP is flops of that clock (``pdp/NV_NVDLA_PDP_CORE_preproc.v:206-216``)
      and SDP's every output beat needs it (``sdp/NV_NVDLA_SDP_core.v:1195-1199``); SDP's done
      follows its last beat (``sdp/NV_NVDLA_SDP_WDMA_DAT_out.v:730``).

    So input that no window needs, still in SDP when PDP writes its last output, meets a stopped
    PDP: SDP never finishes if the ready flop froze low (nv_small_256_full, SDP 2 elements/cycle into
    PDP's 1: fuzz sdp-pdp seed 7171 case 24, 3 rows below the window; 1 row or 7 columns hang too;
    1 column got in before the clock stopped, a race nothing guarantees), else it is swallowed and PDP
    resumes mid-line at its next layer (nv_small: the next flying layer writes wrong outputs, then
    hangs). Legal by NVDLA's register description and run by the C model (``--model-semantics cmod``):
    refused under rtl semantics (``tests/test_sdp_pdp_flying_rule.py``).

    With NVDLA's clock gating off (``--rtl-clock-gating off``, the work-round of nvdla/hw#183) PDP's
    clock keeps running and nothing hangs, but such layers still differ from the C model: measured
    2026-11-29 with ``fuzz --unit sdp-pdp --model-semantics cmod --set flying_tail=1``, seeds 7172
    (nv_small_256_full) and 7173 (nv_small), 7 of 24 cases wrong, each also when run alone (seed 7171
    case 24 matched). So the rule stands with either setting."""
    cols = int(unread_tail(w, out_w, cfg.kernel_w, cfg.stride_w, cfg.pad_left))
    rows = int(unread_tail(h, out_h, cfg.kernel_h, cfg.stride_h, cfg.pad_top))
    if cols or rows:
        raise InvalidLayer(
            f"PDP on the fly (FLYING_MODE = ON_FLYING): {cols} input column(s) right of and {rows} row(s) below the "
            f"last pooling window (input {w}x{h}, output {out_w}x{out_h}, kernel {cfg.kernel_w}x{cfg.kernel_h}, "
            f"stride {cfg.stride_w}x{cfg.stride_h}, pad left/top {cfg.pad_left}/{cfg.pad_top}): RTL limitation, "
            f"{FLYING_TAIL_RULE} - PDP's done does not wait for SDP's stream and stops PDP's clock, so SDP hangs "
            "(or the next layer is corrupted); the C model runs it (--model-semantics cmod)")


def run_pdp(view: RegisterView, mem: MemoryPort, options: ModelOptions, *, source: np.ndarray | None = None) -> LayerResult:
    """Execute one PDP layer (INT8, INT16 or FP16) from the executing register group.

    Input from memory (PDP_RDMA, ``FLYING_MODE = OFF_FLYING``) or, on-flying, ``source``: SDP's
    output as a (Cpad, H, W) integer array in SDP's processing lanes (``sdp.run_sdp`` /
    ``sdp_fp.fp_finish`` with OUTPUT_DST = PDP: int8/int16 values or FP16 patterns), consumed
    as the cmod's SDP -> PDP stream (:func:`_flying_parts`)."""
    fmt = view.field("PDP", "D_DATA_FORMAT", "INPUT_DATA")
    if fmt not in _BITS:
        raise UnitNotModelled(f"PDP: input data type {fmt} not defined; INT8/INT16/FP16 only")
    on_flying = view.field("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE") == 0
    if on_flying and source is None:
        raise UnitNotModelled("PDP: on-flying mode (input streamed from SDP) not modelled; run SDP+PDP fused")
    if not on_flying and source is not None:
        raise ValueError("PDP: an on-flying source was given but D_OPERATION_MODE_CFG.FLYING_MODE is OFF_FLYING")
    w = view.field("PDP", "D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH") + 1
    h = view.field("PDP", "D_DATA_CUBE_IN_HEIGHT", "CUBE_IN_HEIGHT") + 1
    c = view.field("PDP", "D_DATA_CUBE_IN_CHANNEL", "CUBE_IN_CHANNEL") + 1
    out_w = view.field("PDP", "D_DATA_CUBE_OUT_WIDTH", "CUBE_OUT_WIDTH") + 1
    out_h = view.field("PDP", "D_DATA_CUBE_OUT_HEIGHT", "CUBE_OUT_HEIGHT") + 1
    cfg = decode_pdp_config(view)
    if options.semantics == "cmod":
        if not cfg.fp16:
            cfg = replace(cfg, acc_bits=2 * cfg.bits)
    else:
        if on_flying:
            _check_flying_split(view)
            _check_flying_tail(cfg, w, h, out_w, out_h)
        _check_trailing_pad(view, cfg, w, h, out_w, out_h)
        _check_line_buffer(view, cfg, w, out_w)
        if cfg.bits == 8:
            cfg = replace(cfg, rtl_int8=True)
    bpe = cfg.bits // 8
    lanes = options.atom_bytes // bpe  # channels per memory atom (dma.py: group = atom // bpe)
    groups = -(-c // lanes)
    splits = _splits(view, w, out_w, cfg)
    if on_flying:
        parts = _flying_parts(view, np.asarray(source), splits, groups, h, lanes, bpe, cfg.fp16, options.atom_bytes)
    else:
        src = _read_src(view, mem, w, h, groups, lanes, bpe)
        parts = [src[:, :, a : a + n, :] for a, n, *_ in splits]
    return _pool_and_write(view, mem, parts, splits, cfg, out_w, out_h, groups, lanes, bpe, counted=not on_flying)


def _flying_parts(view: RegisterView, source: np.ndarray, splits, groups: int, h: int, lanes: int, bpe: int,
                  fp16: bool, atom: int) -> list[np.ndarray]:  # fmt: skip
    """The on-flying input of every split slice, ``[groups, h, in_width, lanes]``, as the cmod
    streams it. SDP (``cmod/sdp/NV_NVDLA_sdp.cpp`` ``SdpDataOperationDC``) sends 16-element
    payloads of 16-bit containers (``sdp2pdp``), looping surface (32 channels for INT8
    processing, else 16), line, column, then the 16-lane halves of an INT8 atom; PDP
    (``cmod/pdp/NV_NVDLA_pdp.cpp`` ``FetchInputData``) takes one payload per INT16/FP16 atom, or
    the low bytes of two per INT8 atom, in its own loop: split slice, surface, line, slice
    column (``PoolingStage0SequenceThread`` / ``PoolingStage0SequenceCommon``). So the stream
    is consumed in order, whatever the two engines' cube registers say: a slice of a split layer
    takes the next ``surfaces * H * slice_width`` atoms (a re-read overlap is not re-sent). PDP
    needing more atoms than SDP sends waits forever in the cmod (refused); fewer leaves SDP
    blocked on its 16-entry FIFO (not modelled)."""
    sdp_group = atom if view.field("SDP", "D_DATA_FORMAT", "PROC_PRECISION") == 0 else atom // 2
    sw_ = int(view.field("SDP", "D_DATA_CUBE_WIDTH", "WIDTH")) + 1
    sh_ = int(view.field("SDP", "D_DATA_CUBE_HEIGHT", "HEIGHT")) + 1
    sc_ = int(view.field("SDP", "D_DATA_CUBE_CHANNEL", "CHANNEL")) + 1
    surf = -(-sc_ // sdp_group)
    if source.ndim != 3 or source.shape[1:] != (sh_, sw_) or source.shape[0] < surf * sdp_group:
        raise UnitNotModelled(f"PDP: on-flying source {source.shape} does not hold SDP's {surf * sdp_group} streamed lanes "
                              f"of {sw_}x{sh_} (SDP INT8 processing with 16-bit output to PDP is not modelled)")
    x = np.asarray(source[: surf * sdp_group], dtype=I64).reshape(surf, sdp_group, sh_, sw_)
    stream = x.transpose(0, 2, 3, 1).reshape(-1) & ((1 << (8 * bpe)) - 1)  # the containers' low 8 / 16 bits
    dt = np.int8 if bpe == 1 else (np.uint16 if fp16 else np.int16)
    stream = sx(stream, 8 * bpe).astype(dt) if not fp16 else stream.astype(dt)
    need = sum(groups * h * n * lanes for _, n, *_ in splits)
    if need > stream.size:
        raise InvalidLayer(f"PDP on-flying: PDP reads {need // lanes} atoms (D_DATA_CUBE_IN_*, split widths and their "
                           f"overlap) but SDP sends {stream.size // lanes}; the C model waits forever")
    if need < stream.size:
        raise UnitNotModelled(f"PDP on-flying: PDP reads {need // lanes} atoms but SDP sends {stream.size // lanes} "
                              "(SDP blocks on the sdp2pdp FIFO) - not modelled")
    parts, off = [], 0
    for _, n, *_ in splits:
        k = groups * h * n * lanes
        parts.append(stream[off : off + k].reshape(groups, h, n, lanes))
        off += k
    return parts


def _read_src(view: RegisterView, mem: MemoryPort, w: int, h: int, groups: int, lanes: int,
              bpe: int = 1) -> np.ndarray:  # fmt: skip
    geo = CubeGeometry(
        base=(view.reg("PDP_RDMA", "D_SRC_BASE_ADDR_HIGH") & _U32) << 32 | view.reg("PDP_RDMA", "D_SRC_BASE_ADDR_LOW"),
        line_stride=view.reg("PDP_RDMA", "D_SRC_LINE_STRIDE"),
        surface_stride=view.reg("PDP_RDMA", "D_SRC_SURFACE_STRIDE"),
        width=w, height=h, channels=groups * lanes, group=lanes, bpe=bpe,
    )  # fmt: skip
    port = engine_memory(mem, view, "PDP_RDMA", "D_SRC_RAM_CFG", "SRC_RAM_TYPE")
    raw = np.ascontiguousarray(read_surfaces(port, geo))
    return raw.view(np.int8 if bpe == 1 else "<i2")  # [g, h, w, lane]


def _pool_and_write(view, mem, parts, splits, cfg, out_w, out_h, groups, lanes, bpe=1, counted=True) -> LayerResult:
    atom = lanes
    out = np.zeros((groups, out_h, out_w, atom), dtype=np.int8 if bpe == 1 else "<i2")
    nan_in = inf_in = 0
    fp16_parts: list[np.ndarray] = []
    for part, (_, _, o_start, o_w, pl, pr) in zip(parts, splits):
        if cfg.fp16:
            bits = np.asarray(part).view(np.uint16) if part.dtype.itemsize == 2 else part.astype(np.uint16)
            special = (bits & 0x7C00) == 0x7C00
            nan = special & ((bits & 0x3FF) != 0)
            if counted:  # PDP_RDMA's ExtractDmaPayload counts what it reads; on-flying input is not counted
                nan_in += int(nan.sum())
                inf_in += int((special & ~nan).sum())
                if cfg.nan_to_zero:  # D_NAN_FLUSH_TO_ZERO applies to OFF_FLYING input only (cmod PoolingStage0SequenceCommon)
                    bits = np.where(nan, np.uint16(0), bits)
            fp16_parts.append(bits)
            continue
        out[:, :, o_start : o_start + o_w, :] = pool2d(part, cfg, o_w, out_h, pad_left=pl, pad_right=pr)
    if fp16_parts:  # every slice pooled in one pass (the slices' own windows and pads: pool2d_fp16_slices)
        offs = np.cumsum([0] + [b.shape[-2] for b in fp16_parts])[:-1]
        slices = [(int(o), b.shape[-2], sp[3], sp[4]) for o, b, sp in zip(offs, fp16_parts, splits, strict=True)]
        x = fp16_parts[0] if len(fp16_parts) == 1 else np.concatenate(fp16_parts, axis=-2)
        res = pool2d_fp16_slices(x, cfg, slices, out_h).view(np.int16)
        col = 0
        for _, _, o_start, o_w, _, _ in splits:
            out[:, :, o_start : o_start + o_w, :] = res[:, :, col : col + o_w, :]
            col += o_w

    geo = CubeGeometry(
        base=(view.reg("PDP", "D_DST_BASE_ADDR_HIGH") & _U32) << 32 | view.reg("PDP", "D_DST_BASE_ADDR_LOW"),
        line_stride=view.reg("PDP", "D_DST_LINE_STRIDE"),
        surface_stride=view.reg("PDP", "D_DST_SURFACE_STRIDE"),
        width=out_w, height=out_h, channels=groups * atom, group=atom, bpe=bpe,
    )  # fmt: skip
    write_surfaces(engine_memory(mem, view, "PDP", "D_DST_RAM_CFG", "DST_RAM_TYPE"), geo, out.view(np.uint8))
    nan_out = 0
    if cfg.fp16:
        ob = out.view(np.uint16)
        nan_out = int((((ob & 0x7C00) == 0x7C00) & ((ob & 0x3FF) != 0)).sum())
    stats = {("PDP", "D_NAN_INPUT_NUM"): min(nan_in, _U32), ("PDP", "D_INF_INPUT_NUM"): min(inf_in, _U32),
             ("PDP", "D_NAN_OUTPUT_NUM"): min(nan_out, _U32)}
    return LayerResult(stats=stats, elements=int(out.size))
