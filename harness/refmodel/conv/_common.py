"""Constants and register helpers shared by the convolution pipeline stages."""

from __future__ import annotations

import numpy as np

from ..base import RegisterView

I64 = np.int64
PSUM_BITS = 34  # RTL nv_small CACC partial-sum width (INT8)
PSUM_BITS_INT16 = 48  # nvdlav1 NV_NVDLA_CACC_CALC_int16.v / cmod MAX_INT_48BITS (INT16)
PREC_INT8, PREC_INT16, PREC_FP16 = 0, 1, 2
PREC_NAMES = {0: "INT8", 1: "INT16", 2: "FP16"}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def reg_addr(view: RegisterView, block: str, high: str, low: str) -> int:
    """64-bit address from a HIGH/LOW register pair."""
    return (int(view.reg(block, high)) << 32) | int(view.reg(block, low))
