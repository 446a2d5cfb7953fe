"""CMAC: the multiply stage of direct convolution (INT8/INT16; FP16 in ``cmac_fp16``).

One CMAC step multiplies the input values a kernel position sees (``csc.tap``) by that
position's weights and sums over the channels of the step: ``(K, C) @ (C, OH*OW)``. INT8
products are exact in int64 (cmod ``NV_NVDLA_cmac.cpp`` ``calculation_int8``), INT16
products are exact in the cmod's 44-bit ``sc_int`` (``calculation_int16``).
"""

from __future__ import annotations

import numpy as np

from ._common import I64

__all__ = ["mac_step"]


def mac_step(wk: np.ndarray, t: np.ndarray, *, use_float: bool) -> np.ndarray:
    """Exact ``wk @ t`` for int64 ``wk`` (K, C) and ``t`` (C, N): float64 BLAS when every
    partial sum is known to stay below 2^52 (``use_float``), else int64 matmul."""
    if use_float:
        return (wk.astype(np.float64) @ t.astype(np.float64)).astype(I64)
    return wk @ t
