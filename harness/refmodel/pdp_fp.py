"""PDP's FP16 pooling (``INPUT_DATA = FP16``, nv_full), bit for bit as NVDLA's C model folds it:
the rules are in :mod:`.pdp`'s docstring (FP16), the sources nvdlav1 ``cmod/pdp/NV_NVDLA_pdp.cpp``
and ``cmod/hls_wrapper/pdp_hls_wrapper.cpp`` (``HLS_PDP_PoolingStage0Calc_FP16_W/_H``,
``HLS_PDP_PoolingStage1Calc_FP16``); arithmetic in :mod:`.fp16` / :mod:`.fp16_native`. Also the
pooling window geometry the INT pooling of :mod:`.pdp` shares (:func:`pool_windows`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .base import UnitNotModelled
from .fp16 import fp16_to_fp17_bits, fp17_add_bits, fp17_mul_bits
from .fp16_extra import fp16_cmp_bits, fp17_to_fp16_bits
from .fp16_native import fp17_add_values, fp17_from_values, fp17_mul_values, fp17_values

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


def _fold_axis(x: np.ndarray, axis: int, n_out: int, k: int, stride: int, pad: int,
               step, pads: np.ndarray | None = None, add=fp17_add_bits) -> np.ndarray:  # fmt: skip
    """Fold ``acc = step(acc, v)`` over the kernel taps along ``axis`` of ``x``, in tap order,
    for every output position (its first real tap starts it, taps outside the input are
    skipped); ``pads`` (AVE) gives per output the (PL, PR) fp17 pair added after the last real
    tap (+0 elsewhere) with ``add``. Returns the per-output accumulator."""
    idx, valid = pool_windows(n_out, x.shape[axis], k, stride, pad)
    return _fold_taps(x, axis, idx, valid, step, pads, add)


def _fold_taps(x: np.ndarray, axis: int, idx: np.ndarray, valid: np.ndarray, step,
               pads: np.ndarray | None = None, add=fp17_add_bits) -> np.ndarray:  # fmt: skip
    """:func:`_fold_axis` over given windows: ``idx`` / ``valid`` ``[n_out, k]`` (input index and
    validity of every tap of every output, :func:`pool_windows`); ``add`` adds the pads (fp17
    patterns, or float32 values with :func:`.fp16_native.fp17_add_values`)."""
    n_out, k = idx.shape
    if k < 1:  # a kernel of 0 taps: the register fields encode size - 1, so k >= 1
        raise ValueError("PDP: pooling kernel with no taps")
    first_t = np.argmax(valid, axis=1)  # first real tap per output
    last_t = k - 1 - np.argmax(valid[:, ::-1], axis=1)
    shape = [1] * x.ndim
    shape[axis] = n_out
    gathered = np.take(x, idx.T, axis=axis)  # every tap's inputs at once: [..., k, n_out, ...]
    taps = [gathered[(slice(None),) * axis + (t,)] for t in range(k)]  # tap t: [..., n_out, ...]
    firsts = (first_t[None, :] == np.arange(k)[:, None]).reshape([k, *shape])
    valids = valid.T.reshape([k, *shape])
    # tap 0 starts every accumulator: an output whose first real tap comes later restarts there
    # (``first``), one without a real tap keeps tap 0's value; so no step on tap 0
    acc = taps[0]
    first = first_t[:, None] == np.arange(k)  # [n_out, k]
    real = np.asarray(valid.any(axis=0)).tolist()  # per tap: real for some output (else it changes nothing)
    adds = np.asarray((valid & ~first).any(axis=0)).tolist()  # ... and not the first of one (it steps)
    plain = np.asarray(valid.all(axis=0) & ~first.any(axis=0)).tolist()  # real for all, first of none
    for t in range(1, k):
        if plain[t]:
            acc = step(acc, taps[t])
        elif adds[t]:
            acc = np.where(valids[t], np.where(firsts[t], taps[t], step(acc, taps[t])), acc)
        elif real[t]:  # only first taps: they start their outputs
            acc = np.where(valids[t], taps[t], acc)
    if pads is not None and pads.any():  # +0 pads add nothing (below): no pass without one
        # The cmod adds (PL, PR) after every tap: +0 except after an output's last real tap. x + (+0)
        # is x for every fp17 pattern but the denormal ones (exponent 0, mantissa not 0), which
        # neither Fp16ToFp17 nor Fp17Add produce, so only the last adds count: made once, here, for
        # the outputs whose kept value is their last tap's (not a window without a real tap, which
        # keeps tap 0's value: padded only when the kernel has one tap)
        keep = (valid.any(axis=1) | (last_t == 0)).reshape(shape)
        padded = acc
        for side in (0, 1):  # PL, then PR; a side that is +0 for every output adds nothing
            if pads[:, side].any():
                padded = add(padded, pads[:, side].reshape(shape))
        acc = np.where(keep, padded, acc)
    return acc


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


def _extreme_fp16(x: np.ndarray, idx_w: np.ndarray, valid_w: np.ndarray, idx_h: np.ndarray, valid_h: np.ndarray,
                  take_max: bool) -> np.ndarray | None:  # fmt: skip
    """FP16 MAX / MIN pooling of NaN-free FP16 patterns ``x`` ``[..., H, W, lanes]`` (int64) as one
    reduction per direction: ``FpMax/FpMin<5,10>`` order the patterns by sign, then exponent and
    mantissa, so on ``key = bits ^ (0x8000 if positive else 0xffff)`` (+0 above -0, INF above all
    numbers) they are the integer maximum / minimum, and a fold of them in any order gives the one
    extreme tap (equal keys are equal patterns). None, for the fold of :func:`_fold_taps`, when a
    NaN is among the inputs (the fold's order decides which NaN wins) or a window has no real tap
    in a direction (it keeps tap 0's value)."""
    if not (valid_w.any(axis=1).all() and valid_h.any(axis=1).all()) or ((x & 0x7FFF) > 0x7C00).any():
        return None
    u = x.astype(np.uint16)
    key = u ^ np.where(u >= 0x8000, np.uint16(0xFFFF), np.uint16(0x8000))
    fill = np.uint16(0 if take_max else 0xFFFF)  # the key of a NaN pattern: never an input's here
    red = np.maximum.reduce if take_max else np.minimum.reduce
    g = np.take(key, idx_w, axis=x.ndim - 2)  # [..., H, out_w, kw, lanes]
    if not valid_w.all():
        g = np.where(valid_w[:, :, None], g, fill)
    g = np.take(red(g, axis=-2), idx_h, axis=x.ndim - 3)  # [..., out_h, kh, out_w, lanes]
    if not valid_h.all():
        g = np.where(valid_h[:, :, None, None], g, fill)
    r = red(g, axis=-3)
    return r ^ np.where(r >= 0x8000, np.uint16(0x8000), np.uint16(0xFFFF))


def pool2d_fp16_slices(x: np.ndarray, cfg: PoolConfig, slices: list[tuple[int, int, int, int]], out_h: int) -> np.ndarray:
    """:func:`pool2d_fp16` of several width slices side by side in ``x`` at once: ``slices``
    holds per slice ``(first column in x, input width, output width, left pad)``; the outputs
    are side by side in the same order. Every output is computed from its own slice's taps
    alone, as a separate call per slice would (the split slices of one layer: the cmod pools
    them one after the other, ``PoolingStage0SequenceThread``), but each fold step runs once
    for all of them (a small cube pays numpy's per-call cost once per tap, not once per slice)."""
    x = np.asarray(x, dtype=I64) & 0xFFFF
    h = x.shape[-3]
    wins = [pool_windows(o_w, n_in, cfg.kernel_w, cfg.stride_w, pl) for _, n_in, o_w, pl in slices]
    idx_w = np.concatenate([i + off for (i, _), (off, *_) in zip(wins, slices, strict=True)])
    valid_w = np.concatenate([v for _, v in wins])
    if cfg.method in (MAX, MIN):
        take_max = cfg.method == MAX
        idx_h, valid_h = pool_windows(out_h, h, cfg.kernel_h, cfg.stride_h, cfg.pad_top)
        fast = _extreme_fp16(x, idx_w, valid_w, idx_h, valid_h, take_max)
        if fast is not None:
            return fast
        row = _fold_taps(x, x.ndim - 2, idx_w, valid_w,
                         lambda acc, v: fp16_cmp_bits(acc, v, take_max=take_max))
        out = _fold_axis(row, x.ndim - 3, out_h, cfg.kernel_h, cfg.stride_h, cfg.pad_top,
                         lambda acc, v: fp16_cmp_bits(v, acc, take_max=take_max))
        return out.astype(np.uint16)
    if cfg.method != AVE:
        raise UnitNotModelled(f"PDP: pooling method {cfg.method} not defined")
    p = np.asarray(cfg.pad_raw, dtype=I64)
    xf = fp16_to_fp17_bits(x.astype(np.uint16)).astype(I64)
    pw = ph = None  # every pad value +0: no pads to add (below)
    if p.any():
        pw = np.concatenate([_edge_pads(o_w, n_in, cfg.kernel_w, cfg.stride_w, pl, p, True) for _, n_in, o_w, pl in slices])
        ph = _edge_pads(out_h, h, cfg.kernel_h, cfg.stride_h, cfg.pad_top, p, False)
        if ph.any():  # +0 pads times the (positive) kernel width stay +0
            ph = fp17_mul_bits(ph, I64(_KW_FP17[min(cfg.kernel_w, 8)]))
    t = _average_values(xf, cfg, idx_w, valid_w, out_h, pw, ph)
    if t is None:  # the fold on the patterns
        row = _fold_taps(xf, x.ndim - 2, idx_w, valid_w, lambda acc, v: fp17_add_bits(acc, v), pw)
        acc = _fold_axis(row, x.ndim - 3, out_h, cfg.kernel_h, cfg.stride_h, cfg.pad_top,
                         lambda acc, v: fp17_add_bits(v, acc), ph)
        t = fp17_mul_bits(fp17_mul_bits(acc, I64(cfg.recip_w & 0x1FFFF)), I64(cfg.recip_h & 0x1FFFF))
    return fp17_to_fp16_bits(t)


def _average_values(xf: np.ndarray, cfg: PoolConfig, idx_w: np.ndarray, valid_w: np.ndarray, out_h: int,
                    pw: np.ndarray | None, ph: np.ndarray | None) -> np.ndarray | None:  # fmt: skip
    """The AVERAGE fold of :func:`pool2d_fp16_slices` (fp17 patterns ``xf`` ``[..., H, W, lanes]``,
    pads ``pw``/``ph``) and its two reciprocal products on float32 values
    (:func:`.fp16_native.fp17_add_values`, :func:`~.fp16_native.fp17_mul_values`: one conversion
    each way), fp17 patterns out; NaN inputs fold as +0 and the NaN that wins is put in after
    (:func:`_nan_winners`; the products return a NaN operand as is). None, for the patterns'
    arithmetic, when a pad or a reciprocal is NaN or the INF pattern, or an input is NaN while a
    window has no real tap in a direction (it keeps tap 0's value)."""
    h_ax = xf.ndim - 3
    idx_h, valid_h = pool_windows(out_h, xf.shape[h_ax], cfg.kernel_h, cfg.stride_h, cfg.pad_top)
    nan = (xf & 0xFFFF) > 0xFC00  # exponent 63, mantissa not 0
    has_nan = bool(nan.any())
    if has_nan and not (valid_w.any(axis=1).all() and valid_h.any(axis=1).all()):
        return None
    xv = fp17_values(np.where(nan, 0, xf) if has_nan else xf)
    pads = pw is not None and ph is not None  # both or neither (every pad value +0)
    pwv, phv = (fp17_values(pw), fp17_values(ph)) if pw is not None and ph is not None else (None, None)
    rw, rh = fp17_values(cfg.recip_w & 0x1FFFF), fp17_values(cfg.recip_h & 0x1FFFF)
    if xv is None or rw is None or rh is None or (pads and (pwv is None or phv is None)):
        return None
    # 2^32 (fp17's overflow) out of reach: every sum is below the taps' and pads' magnitudes added
    # up (each rounding to 11 bits adds under 2^-11 of it), so the overflow test can go
    top = lambda v: 0.0 if v is None or v.size == 0 else float(np.abs(v).max())  # noqa: E731
    bound = 1.01 * (cfg.kernel_h * (cfg.kernel_w * top(xv) + 2 * top(pwv)) + 2 * top(phv))
    may = bound >= 2.0**31

    def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fp17_add_values(a, b, may_overflow=may)

    row = _fold_taps(xv, xf.ndim - 2, idx_w, valid_w, add, pwv, add)
    acc = _fold_taps(row, h_ax, idx_h, valid_h, lambda acc, v: add(v, acc), phv, add)
    t = fp17_from_values(fp17_mul_values(fp17_mul_values(acc, rw), rh))
    return _nan_winners(xf, nan, idx_w, valid_w, idx_h, valid_h, t) if has_nan else t


def _nan_winners(xf: np.ndarray, nan: np.ndarray, idx_w: np.ndarray, valid_w: np.ndarray, idx_h: np.ndarray,
                 valid_h: np.ndarray, acc: np.ndarray) -> np.ndarray:  # fmt: skip
    """The NaN an AVERAGE fold ends with (fp17 patterns ``acc`` elsewhere): FpAdd returns a NaN
    operand as is, its first operand's first; along a row the accumulator is the first operand,
    so the first real NaN tap of the window's row stays; down the column the new row is, so the
    last real row holding a NaN wins; the pads after it (not NaN here) change nothing."""
    w_ax, h_ax = xf.ndim - 2, xf.ndim - 3
    g = np.take(nan, idx_w, axis=w_ax) & valid_w[:, :, None]  # [..., H, out_w, kw, lanes]
    first = np.argmax(g, axis=-2)[..., None, :]
    row_val = np.take_along_axis(np.take(xf, idx_w, axis=w_ax), first, axis=-2)[..., 0, :]
    g = np.take(g.any(axis=-2), idx_h, axis=h_ax) & valid_h[:, :, None, None]  # [..., out_h, kh, out_w, lanes]
    kh = idx_h.shape[1]
    last = kh - 1 - np.argmax(np.flip(g, axis=h_ax + 1), axis=h_ax + 1)
    win = np.take_along_axis(np.take(row_val, idx_h, axis=h_ax), np.expand_dims(last, h_ax + 1), axis=h_ax + 1)
    return np.where(g.any(axis=h_ax + 1), np.squeeze(win, h_ax + 1), acc)
