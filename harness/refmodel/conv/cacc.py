"""CACC: accumulation of the CMAC steps into partial sums, and the final truncation to 32 bits
(INT8/INT16; FP16 in ``cacc_fp16``).

INT8: the RTL keeps 34-bit partial sums saturated after every step, the cmod accumulates
exactly ([DIFF] 4a); INT16: both saturate to 48 bits. The truncation ``clamp(rnd(A, t), 32)``
follows ``NV_NVDLA_CACC_CALC_int8.v`` (RTL) or exact rounding (cmod), see :func:`cacc_truncate`.
"""

from __future__ import annotations

import numpy as np

from ..ops import rnd
from ._common import I64, INT32_MAX, INT32_MIN, PREC_INT8, PREC_INT16, PSUM_BITS, PSUM_BITS_INT16
from .cmac import mac_step
from .csc import ConvConfig, pad_input, tap
from ....semantics import Semantics

__all__ = ["cacc_truncate", "conv_accumulate", "direct_conv"]


def conv_accumulate(
    d: np.ndarray, w: np.ndarray, cfg: ConvConfig, *, atomic_c: int = 8, semantics: Semantics = "rtl",
    psum_bits: int = PSUM_BITS, cmod_saturates: bool = False,
) -> np.ndarray:  # fmt: skip
    """CMAC + CACC accumulation: (K, OH, OW) int64 sums of ``w[k,c,ky,kx] * d[c, y, x]``.

    ``d`` is the converted (C, H, W) input, ``w`` (K, C, KH, KW). INT8: RTL 34-bit saturating
    partial sums, one step per (channel slice, kernel position) with the slice outer
    ([DIFF] 4a); cmod: exact. INT16 (``psum_bits`` 48, ``cmod_saturates``): both models
    saturate the 48-bit partial sum after every step."""
    padded, _, _ = pad_input(d, cfg)
    k, c = w.shape[0], w.shape[1]
    bound = int(np.abs(w).sum(axis=(1, 2, 3)).max(initial=0)) * int(np.abs(padded).max(initial=0))
    lim = (1 << (psum_bits - 1)) - 1
    exact = (semantics == "cmod" and not cmod_saturates) or bound <= lim
    acc = np.zeros((k, cfg.out_h, cfg.out_w), dtype=I64)
    use_float = bound < (1 << 52)  # float64 BLAS is exact below 2^53
    if exact:
        for ky in range(cfg.k_h):
            for kx in range(cfg.k_w):
                t = tap(padded, cfg, ky, kx).reshape(c, -1)
                wk = w[:, :, ky, kx]
                acc += mac_step(wk, t, use_float=use_float).reshape(acc.shape)
        return acc
    lo = -(1 << (psum_bits - 1))
    # one step: |sum of atomic_c products| <= atomic_c * 2^30 (INT16), the running sum stays
    # within 48 bits + one step: int64 is exact
    for s in range(0, c, atomic_c):
        for ky in range(cfg.k_h):
            for kx in range(cfg.k_w):
                t = tap(padded, cfg, ky, kx)[s : s + atomic_c].reshape(-1, cfg.out_h * cfg.out_w)
                acc += mac_step(w[:, s : s + atomic_c, ky, kx], t, use_float=False).reshape(acc.shape)
                np.clip(acc, lo, lim, out=acc)
    return acc


def cacc_truncate(
    a: np.ndarray, truncate: int, *, semantics: Semantics = "rtl"
) -> tuple[np.ndarray, int]:
    """CACC clip (doc section 4): ``clamp(rnd(A, t), 32)`` and the saturation count.

    RTL (``NV_NVDLA_CACC_CALC_int8.v``): ``{A, 16'b0} >>> t`` gives the floor, a guard bit and
    a 15-bit sticky field; round up when ``guard & (A >= 0 | sticky)``. For ``t > 16`` the
    sticky field misses bits ``t-17 .. 0``, so a negative value just above a tie rounds down
    ([DIFF] 4b). Saturation when the floor leaves int32 or a positive INT32_MAX rounds up
    (rule 1.2). cmod: exact rounding, count when the rounded value leaves int32."""
    a = np.asarray(a, dtype=I64)
    t = int(truncate)
    if semantics == "rtl" and t > 0:
        q = a >> t
        guard = (a >> (t - 1)) & 1
        lo = max(t - 16, 0)
        sticky = ((a >> lo) & ((I64(1) << (t - 1 - lo)) - 1)) != 0
        inc = (guard == 1) & ((a >= 0) | sticky)
        flag = (q < INT32_MIN) | (q > INT32_MAX) | (inc & (q == INT32_MAX))
        out = np.where(flag, np.where(a < 0, INT32_MIN, INT32_MAX), q + inc)
        return out.astype(I64), int(np.count_nonzero(flag))
    r = rnd(a, t)
    out = np.clip(r, INT32_MIN, INT32_MAX)
    if semantics == "rtl":  # t == 0: clamp only
        flag = (a < INT32_MIN) | (a > INT32_MAX)
    else:
        flag = (r < INT32_MIN) | (r > INT32_MAX)
    return out, int(np.count_nonzero(flag))


def direct_conv(d: np.ndarray, w: np.ndarray, cfg: ConvConfig, *, truncate: int, atomic_c: int = 8,
                semantics: Semantics = "rtl", precision: int = PREC_INT8) -> tuple[np.ndarray, int]:  # fmt: skip
    """Convolution + CACC clip: (K, OH, OW) int32 values as int64, saturation count.
    ``precision`` INT16 selects the 48-bit saturating partial sums of both models."""
    if precision == PREC_INT16:
        acc = conv_accumulate(d, w, cfg, atomic_c=atomic_c, semantics=semantics, psum_bits=PSUM_BITS_INT16,
                              cmod_saturates=True)  # fmt: skip
    else:
        acc = conv_accumulate(d, w, cfg, atomic_c=atomic_c, semantics=semantics)
    return cacc_truncate(acc, truncate, semantics=semantics)
