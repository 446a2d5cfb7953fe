"""PDP's FP16 pooling (``INPUT_DATA = FP16``, nv_full), bit for bit as NVDLA's C model folds it:
the rules are in :mod:`.pdp`'s docstring (FP16), the sources nvdlav1 ``cmod/pdp/NV_NVDLA_pdp.cpp``
and ``cmod/hls_wrapper/pdp_hls_wrapper.cpp`` (``HLS_PDP_PoolingStage0Calc_FP16_W/_H``,
``HLS_PDP_PoolingStage1Calc_FP16``); the fold itself is compiled (:mod:`.pdp_fp_fold`, loaded
with the first FP16 pooling), its windows, pads and conversion tables are set up here. Also the
pooling window geometry the INT pooling of :mod:`.pdp` shares (:func:`pool_windows`).
"""

from __future__ import annotations

import functools
from typing import Protocol

import numpy as np

from .base import UnitNotModelled
from .fp16 import fp16_to_fp17_bits, fp17_mul_bits
from .fp16_extra import fp17_to_fp16_bits

__all__ = ["AVE", "MAX", "MIN", "PoolConfig", "pool2d_fp16", "pool2d_fp16_slices", "pool_windows"]

I64 = np.int64
AVE, MAX, MIN = 0, 1, 2  # D_OPERATION_MODE_CFG.POOLING_METHOD
#: fp17 1.0 .. 8.0 (cmod pdp_hls_wrapper.cpp ``kernel_width_map``; index 8 is past its end)
_KW_FP17 = (0x0000, 0x7C00, 0x8000, 0x8200, 0x8400, 0x8500, 0x8600, 0x8700, 0x8800)


class PoolConfig(Protocol):
    """What FP16 pooling reads of a layer's decoded registers (:class:`.pdp.PdpConfig`)."""

    method: int
    kernel_w: int
    kernel_h: int
    stride_w: int
    stride_h: int
    pad_left: int
    pad_top: int
    recip_w: int
    recip_h: int
    pad_raw: tuple[int, ...]


def pool_windows(n_out: int, n_in: int, k: int, stride: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output: input index of every kernel tap ``[n_out, k]`` and its validity."""
    idx = np.arange(n_out)[:, None] * stride - pad + np.arange(k)[None, :]
    valid = (idx >= 0) & (idx < n_in)
    return np.minimum(np.maximum(idx, 0), max(n_in - 1, 0)), valid  # np.clip, without its Python-level wrapper


def _edge_pads(n_out: int, n_in: int, k: int, stride: int, pad: int, p: np.ndarray, left_needs_pad: bool) -> np.ndarray:
    """Per output ``(PL, PR)``: ``P[lead + trail]`` when the window has leading padding (the
    cmod's second case needs a nonzero configured pad for the width direction), else
    ``(0, P[trail])``."""
    start = np.arange(n_out, dtype=I64) * stride - pad
    lead = np.maximum(0, -start)
    trail = np.maximum(0, start + k - n_in)
    both = (lead > 0) & (trail > 0)
    lead_only = (lead > 0) & (trail == 0)
    pl = np.where(lead_only, p[np.minimum(lead, 7)], 0)
    pl = np.where(both & (pad > 0 if left_needs_pad else True), p[np.minimum(lead + trail, 7)], pl)
    pr = np.where((lead == 0) & (trail > 0), p[np.minimum(trail, 7)], 0)
    return np.stack([pl, pr], axis=1).astype(I64)


def pool2d_fp16(
    x: np.ndarray, cfg: PoolConfig, out_w: int, out_h: int, *, pad_left: int | None = None, pad_right: int | None = None
) -> np.ndarray:
    """FP16 pooling of ``x`` (FP16 patterns ``[..., H, W, lanes]``) to ``[..., out_h, out_w,
    lanes]`` uint16, in the cmod's order and rounding (module docstring, FP16)."""
    pl = cfg.pad_left if pad_left is None else pad_left
    return pool2d_fp16_slices(x, cfg, [(0, np.shape(x)[-2], out_w, pl)], out_h)


def pool2d_fp16_slices(x: np.ndarray, cfg: PoolConfig, slices: list[tuple[int, int, int, int]], out_h: int) -> np.ndarray:
    """:func:`pool2d_fp16` of several width slices side by side in ``x`` at once: ``slices``
    holds per slice ``(first column in x, input width, output width, left pad)``; the outputs
    are side by side in the same order. Every output is computed from its own slice's taps
    alone, as a separate call per slice would (the split slices of one layer: the cmod pools
    them one after the other, ``PoolingStage0SequenceThread``), in one call of the compiled fold
    (:func:`.pdp_fp_fold.pool_fp16_fold`)."""
    from .pdp_fp_fold import pool_fp16_fold  # compiled: loaded with the first FP16 pooling only

    x = np.asarray(x, dtype=I64) & 0xFFFF
    h = x.shape[-3]
    if cfg.method not in (AVE, MAX, MIN):
        raise UnitNotModelled(f"PDP: pooling method {cfg.method} not defined")
    if min(cfg.kernel_w, cfg.kernel_h) < 1:  # the register fields encode size - 1, so k >= 1
        raise ValueError("PDP: pooling kernel with no taps")
    wins = [pool_windows(o_w, n_in, cfg.kernel_w, cfg.stride_w, pl) for _, n_in, o_w, pl in slices]
    idx_w = np.concatenate([i + off for (i, _), (off, *_) in zip(wins, slices, strict=True)])
    valid_w = np.concatenate([v for _, v in wins])
    idx_h, valid_h = pool_windows(out_h, h, cfg.kernel_h, cfg.stride_h, cfg.pad_top)
    out_w = idx_w.shape[0]
    pads = np.zeros((4, max(out_w, out_h)), dtype=I64)  # every pad value +0: no pads to add
    p = np.asarray(cfg.pad_raw, dtype=I64)
    if cfg.method == AVE and p.any():
        pads[:2, :out_w] = np.concatenate(
            [_edge_pads(o_w, n_in, cfg.kernel_w, cfg.stride_w, pl, p, True) for _, n_in, o_w, pl in slices]).T
        ph = _edge_pads(out_h, h, cfg.kernel_h, cfg.stride_h, cfg.pad_top, p, False)
        if ph.any():  # +0 pads times the (positive) kernel width stay +0
            pads[2:, :out_h] = fp17_mul_bits(ph, I64(_KW_FP17[min(cfg.kernel_w, 8)])).T
    fp17, fp16 = _conversion_tables()
    return pool_fp16_fold(x, cfg.method, idx_w, valid_w, idx_h, valid_h, pads,
                          (cfg.recip_w & 0x1FFFF, cfg.recip_h & 0x1FFFF), fp17, fp16)


@functools.cache
def _conversion_tables() -> tuple[np.ndarray, np.ndarray]:
    """``Fp16ToFp17`` of every FP16 pattern (int64) and ``Fp17ToFp16`` of every fp17 pattern
    (uint16): :func:`.fp16.fp16_to_fp17_bits` / :func:`.fp16_extra.fp17_to_fp16_bits`, for the fold."""
    return (np.ascontiguousarray(fp16_to_fp17_bits(np.arange(1 << 16, dtype=np.uint16)), dtype=I64),
            np.ascontiguousarray(fp17_to_fp16_bits(np.arange(1 << 17, dtype=I64)), dtype=np.uint16))
