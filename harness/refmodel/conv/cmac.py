"""CMAC: the multiply stage of direct convolution (INT8/INT16; FP16 in ``cmac_fp16``).

One CMAC step multiplies the input values a kernel position sees (``csc.tap``) by that
position's weights and sums over the channels of the step: ``(K, C) @ (C, OH*OW)``. INT8
products are exact in int64 (cmod ``NV_NVDLA_cmac.cpp`` ``calculation_int8``), INT16
products are exact in the cmod's 44-bit ``sc_int`` (``calculation_int16``).
"""

from __future__ import annotations

import numpy as np

from ._common import I64
from .cmac_fp16 import FP44_NAN_EXP, booth_product, fp16_mac_steps

__all__ = ["FP44_NAN_EXP", "booth_product", "fp16_mac_step", "fp16_mac_steps", "mac_step"]


def mac_step(wk: np.ndarray, t: np.ndarray, *, use_float: bool) -> np.ndarray:
    """Exact ``wk @ t`` for int64 ``wk`` (K, C) and ``t`` (C, N): float64 BLAS when every
    partial sum is known to stay below 2^52 (``use_float``), else int64 matmul."""
    if use_float:
        return (wk.astype(np.float64) @ t.astype(np.float64)).astype(I64)
    return wk @ t


# ---------------------------------------------------------------------------------------
# FP16: block-floating-point MAC of the nvdlav1 C model (cmac_fp16.py; the rules there)


def fp16_mac_step(w_bits: np.ndarray, d_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One FP16 CMAC step: weights (K, Cs) and data (Cs, N) as FP16 bit patterns (Cs <= 64
    channels of one slice). Returns FP44 ``(exp, mant)`` int64 arrays (K, N): ``exp`` 0..56
    (or 63 = NaN, ``mant`` then holding sign << 37 | payload << 27), ``mant`` 38-bit signed.
    :func:`cmac_fp16.fp16_mac_steps` with one step."""
    exp, mant = fp16_mac_steps(np.asarray(w_bits)[None], np.asarray(d_bits)[None])
    return exp[0], mant[0]
