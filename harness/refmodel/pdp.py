"""Bit-exact reference model of NVDLA's PDP (pooling), INT8 and INT16; input from memory or from SDP.

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
* Split-width mode processes the input in column slices (first / mid / last partial widths,
  each slice but the first re-reading ``KW - SW`` overlap columns); padding is only applied
  on the outer edges (left of the first slice, right of the last).
* Every lane of every 8-channel group (padding lanes included) is computed and written.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled, engine_memory
from .dma import CubeGeometry, read_surfaces, write_surfaces
from .ops import rnd, sx

__all__ = ["AVE", "MAX", "MIN", "PdpConfig", "decode_pdp_config", "pad_values", "pool2d", "run_pdp"]

I64 = np.int64
AVE, MAX, MIN = 0, 1, 2
_U32 = 0xFFFF_FFFF
_PAD_SIGN_BIT = (7, 8, 9, 9, 10, 10, 10)  # cmod int_sign_extend sign-bit index for n = 1..7
#: INT16: nvdlav1 cmod ``NV_NVDLA_pdp.cpp``, ``int_sign_extend(pdp_pad_value_nx_, k, 32, ...)``
_PAD_SIGN_BIT_INT16 = (15, 16, 17, 17, 18, 18, 18)
_BITS = {0: 8, 1: 16}  # D_DATA_FORMAT.INPUT_DATA -> element bits


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
    bits: int = 8  # element width: 8 (INT8) or 16 (INT16)


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
    bits = _BITS.get(int(f("D_DATA_FORMAT", "INPUT_DATA")), 8)
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
        pad_value=pad_values([f(f"D_POOLING_PADDING_VALUE_{n}_CFG", f"PAD_VALUE_{n}X") for n in range(1, 8)], bits),
        bits=bits,
    )


def _windows(n_out: int, n_in: int, k: int, stride: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output: input index of every kernel tap ``[n_out, k]`` and its validity."""
    idx = np.arange(n_out)[:, None] * stride - pad + np.arange(k)[None, :]
    valid = (idx >= 0) & (idx < n_in)
    return np.clip(idx, 0, max(n_in - 1, 0)), valid


def pool2d(
    x: np.ndarray, cfg: PdpConfig, out_w: int, out_h: int, *, pad_left: int | None = None, pad_right: int | None = None
) -> np.ndarray:
    """Pool ``x`` (int8 or int16 values as ``cfg.bits`` says, ``[..., H, W, lanes]``) to
    ``[..., out_h, out_w, lanes]`` (int8 / int16).

    ``pad_left``/``pad_right`` override the configured ones (split slices)."""
    x = np.asarray(x, dtype=I64)
    h, w = x.shape[-3], x.shape[-2]
    pl = cfg.pad_left if pad_left is None else pad_left
    cx, vx = _windows(out_w, w, cfg.kernel_w, cfg.stride_w, pl)
    cy, vy = _windows(out_h, h, cfg.kernel_h, cfg.stride_h, cfg.pad_top)
    # gather [..., out_h, kh, out_w, kw, lanes]
    g = x[..., cy[:, :, None, None], cx[None, None, :, :], :]
    valid = (vy[:, :, None, None] & vx[None, None, :, :])[..., None]
    if cfg.method == AVE:
        s = np.where(valid, g, 0).sum(axis=(-4, -2))
        p = np.asarray(cfg.pad_value, dtype=I64)
        nw = cfg.kernel_w - vx.sum(axis=1)  # [out_w]
        nh = cfg.kernel_h - vy.sum(axis=1)  # [out_h]
        pw = p[np.clip(nw, 0, 7)]
        ph = p[np.clip(nh, 0, 7)]
        s = s + ((cfg.kernel_h - nh)[:, None] * pw[None, :] + cfg.kernel_w * ph[:, None])[..., None]
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


def run_pdp(view: RegisterView, mem: MemoryPort, options: ModelOptions, *, source: np.ndarray | None = None) -> LayerResult:
    """Execute one PDP layer (INT8 or INT16) from the executing register group.

    Input from memory (PDP_RDMA, ``FLYING_MODE = OFF_FLYING``) or, on-flying, ``source``:
    SDP's int8/int16 output as a (Cpad, H, W) integer array (``sdp.run_sdp`` with OUTPUT_DST = PDP)."""
    fmt = view.field("PDP", "D_DATA_FORMAT", "INPUT_DATA")
    if fmt not in _BITS:
        raise UnitNotModelled(f"PDP: input data type {({2: 'FP16'}).get(fmt, fmt)} not modelled; INT8/INT16 only")
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
    bpe = cfg.bits // 8
    lanes = options.atom_bytes // bpe  # channels per memory atom (dma.py: group = atom // bpe)
    groups = -(-c // lanes)
    dt = np.int8 if bpe == 1 else np.int16

    if on_flying:
        x = np.asarray(source)
        if x.shape != (groups * lanes, h, w):
            raise ValueError(f"PDP: on-flying input shape {x.shape} != {(groups * lanes, h, w)} (PDP D_DATA_CUBE_IN_*)")
        src = x.astype(dt).reshape(groups, lanes, h, w).transpose(0, 2, 3, 1)  # [g, h, w, lane]
    else:
        src = _read_src(view, mem, w, h, groups, lanes, bpe)
    return _pool_and_write(view, mem, src, cfg, w, out_w, out_h, groups, lanes, bpe)


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


def _pool_and_write(view, mem, src, cfg, w, out_w, out_h, groups, lanes, bpe=1) -> LayerResult:
    atom = lanes
    out = np.zeros((groups, out_h, out_w, atom), dtype=np.int8 if bpe == 1 else "<i2")
    for in_start, in_w, o_start, o_w, pl, pr in _splits(view, w, out_w, cfg):
        part = src[:, :, in_start : in_start + in_w, :]
        out[:, :, o_start : o_start + o_w, :] = pool2d(part, cfg, o_w, out_h, pad_left=pl, pad_right=pr)

    geo = CubeGeometry(
        base=(view.reg("PDP", "D_DST_BASE_ADDR_HIGH") & _U32) << 32 | view.reg("PDP", "D_DST_BASE_ADDR_LOW"),
        line_stride=view.reg("PDP", "D_DST_LINE_STRIDE"),
        surface_stride=view.reg("PDP", "D_DST_SURFACE_STRIDE"),
        width=out_w, height=out_h, channels=groups * atom, group=atom, bpe=bpe,
    )  # fmt: skip
    write_surfaces(engine_memory(mem, view, "PDP", "D_DST_RAM_CFG", "DST_RAM_TYPE"), geo, out.view(np.uint8))
    stats = {("PDP", "D_NAN_INPUT_NUM"): 0, ("PDP", "D_INF_INPUT_NUM"): 0, ("PDP", "D_NAN_OUTPUT_NUM"): 0}
    return LayerResult(stats=stats, elements=int(out.size))
