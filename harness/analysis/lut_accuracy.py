"""How well a programmed LUT follows its function: a LUT program of ``drivers/lutgen.py`` run
through the bit-exact LUT model (``harness/refmodel/lut.py`` for SDP, ``cdp.py`` for CDP) on a
dense input grid, compared with the function in real output units. A tool for choosing LUT
programs, not part of the model (seed 003, LUT programming)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...drivers.lutgen import Fn, LutProgram, eval_function
from ..refmodel.cdp import cdp_lut
from ..refmodel.lut import sdp_lut
from ...semantics import Semantics

__all__ = ["LutError", "program_error"]


@dataclass(frozen=True)
class LutError:
    """Error of a programmed LUT against the function, in real output units (``Y/out_scale``)."""

    max_abs: float
    mean_abs: float
    worst_x: float
    points: int


def program_error(program: LutProgram, fn: Fn, unit: str | None = None, *, points: int = 4097,
                  x_range: tuple[float, float] | None = None, semantics: Semantics = "rtl") -> LutError:
    """Run a dense grid of the input range of a :class:`~nvdla_hil.drivers.lutgen.LutProgram`
    through the bit-exact LUT model of ``unit`` (SDP :func:`sdp_lut` / CDP :func:`cdp_lut`) and
    compare with ``fn``: worst-case and mean absolute error in real output units. The grid is
    integer LUT inputs ``X`` (duplicates removed)."""
    u = (unit or program.unit).lower()
    if u not in ("sdp", "cdp"):
        raise ValueError(f"unit must be 'sdp' or 'cdp', not {unit!r}")
    lo_x, hi_x = x_range or program.x_range
    xi_lo = math.ceil((lo_x - program.in_offset) * program.in_scale)
    xi_hi = math.floor((hi_x - program.in_offset) * program.in_scale)
    grid = np.unique(np.round(np.linspace(xi_lo, xi_hi, points)).astype(np.int64))
    le, lo = program.le.view(np.uint16), program.lo.view(np.uint16)
    if u == "sdp":
        y = sdp_lut(grid, program.params, le, lo, semantics)[0]
    else:
        y = cdp_lut(grid, le, lo, program.params, semantics)[0]
    got = np.asarray(y, dtype=np.float64) / program.out_scale
    ref = eval_function(fn, grid / program.in_scale + program.in_offset, "reference")
    err = np.abs(got - ref)
    i = int(np.argmax(err))
    return LutError(max_abs=float(err[i]), mean_abs=float(err.mean()),
                    worst_x=float(grid[i] / program.in_scale + program.in_offset), points=int(grid.size))
