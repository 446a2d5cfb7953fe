"""Rubik (RBK, nv_full): data-layout transforms in memory: contract, split, merge.

Sources: nvdla/hw ``nvdlav1`` C model ``cmod/rubik/NV_NVDLA_rbk.cpp``
(``RubikRdmaSequenceContract/Split/Merge``, ``RubikDataPathSequenceContract``,
``RubikWdmaSequenceContract/Split/Merge``, ``SendDmaWriteRequest``), ``cmod/rubik/gen/
rbk_reg_model.cpp`` (``RbkAccessRegister``, ``RbkUpdateVariables``) and the RTL
``vmod/nvdla/rubik/NV_NVDLA_RUBIK_seq_gen.v`` (read/write address sequences),
``NV_NVDLA_RUBIK_rf_ctrl.v`` (byte masks of the written atoms), ``NV_NVDLA_RUBIK_rf_core.v``.

RBK is an ordinary two-group unit (``S_POINTER``, ``D_OP_ENABLE``); its layer is RBK alone and
it raises GLB ``RUBIK_DONE_STATUS<group>``. Rubik moves bytes; it never converts values.

Registers (raw fields as the register map extracts them)::

    W, H   = D_DATAIN_SIZE_0.DATAIN_WIDTH + 1, DATAIN_HEIGHT + 1
    Cin    = D_DATAIN_SIZE_1.DATAIN_CHANNEL + 1,  Cout = D_DATAOUT_SIZE_1.DATAOUT_CHANNEL + 1
    e      = 1 (IN_PRECISION INT8) or 2 (INT16, FP16) bytes per element
    k      = 32 / e elements per 32-byte atom (a surface holds k channels; nv_full's atom)
    src    = D_DAIN_ADDR_HIGH << 32 | D_DAIN_ADDR_LOW << 5,  dst likewise from D_DAOUT_*
    every *_STRIDE field << 5 bytes (32-byte units): LINE, SURF, PLANAR (in), OLINE, OSURF,
    OPLANAR (out), CS0 = D_CONTRACT_STRIDE_0, CS1 = D_CONTRACT_STRIDE_1
    sx, sy = D_DECONV_STRIDE.DECONV_X_STRIDE + 1, DECONV_Y_STRIDE + 1
    input port D_DAIN_RAM_TYPE, output port D_DAOUT_RAM_TYPE (1 = MCIF pri_mem, 0 = CVIF sec_mem)

**Contract** (RUBIK_MODE 0; deconvolution output re-interleave): the input is ``sx*sy``
sub-cubes of ``So = ceil(Cout/k)`` surfaces each, W x H; whole 32-byte atoms move::

    in  atom (so, h, ys, xs, w) at src + so*SURF + h*LINE + (ys*sx + xs)*CS0 + w*32
    out atom                    at dst + so*OSURF + (h*sy + ys)*OLINE + (w*sx + xs)*32

so each output line is ``W*sx`` atoms (RTL seq_gen ``contract_wr_size = inwidth*(x_stride+1)-1``
for sx <= 8; 8-atom pieces for sx > 8, same bytes). DATAIN_CHANNEL is not used.
[DIFF] The RTL steps between sub-cubes with CS0 (seq_gen ``cube_stride``/``cubey_stride =
cube_stride*(x_stride+1)``) and between output lines with OLINE only (``out_intern_stride =
out_line_stride``, ``wr_line_cnt`` up to ``H*sy-1``), ignoring CS1 (``mon_block_stride``). The
C model ignores CS0, reading sub-cube ``ys*sx+xs`` at ``((ys*sx+xs)*So + so)*SURF``, and puts
output line (h, ys) at ``h*CS1 + ys*OLINE``. Both agree when software programs
``CS0 = So*SURF`` and ``CS1 = sy*OLINE`` (what nvdla/sw's kmd does); ``semantics`` picks.

**Split** (RUBIK_MODE 1; feature cube -> one plane per channel)::

    in  element (c, h, w) at src + (c//k)*SURF + h*LINE + w*32 + (c%k)*e   (atoms, Cin channels)
    out plane c, line h   at dst + c*OPLANAR + h*OLINE: W*e bytes, then zeros up to the next
                          32-byte boundary (cmod memsets ``reorder_array_``; RTL rf_ctrl
                          ``split_rd_mask`` zeroes the bytes past the line in the last atom)

**Merge** (RUBIK_MODE 2; planes -> feature cube)::

    in  plane c, line h   at src + c*PLANAR + h*LINE: ceil(W*e/32) atoms read, bytes past W*e dropped
    out atom (s, h, w)    at dst + s*OSURF + h*OLINE + w*32, lane j = channel s*k + j; lanes
                          past the last channel are written 0 (cmod memset; RTL
                          ``merge_byte_mask`` = planes*e valid bytes)

For split and merge the C model and the RTL count channels with different registers (cmod
split writes with DATAOUT_CHANNEL, merge with DATAIN_CHANNEL; RTL seq_gen reads with
``inchannel`` and counts written surfaces with ``outchannel`` but planes with ``inchannel``),
so a layer whose DATAIN_CHANNEL and DATAOUT_CHANNEL differ is refused (:class:`InvalidLayer`).

Statistics: D_PERF_READ_STALL / D_PERF_WRITE_STALL load 0 (the model has no stalls).
"""

from __future__ import annotations

import numpy as np

from .base import (DmaPorts, InvalidLayer, LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled,
                   engine_memory)
from .dma import gather_rows, scatter_rows

__all__ = ["CONTRACT", "SPLIT", "MERGE", "ATOM", "run_rubik"]

CONTRACT, SPLIT, MERGE = 0, 1, 2
ATOM = 32  # bytes per atom (cmod RUBIK_ATOM_CUBE_SIZE)
_ELEMENT_BYTES = {0: 1, 1: 2, 2: 2}  # IN_PRECISION INT8, INT16, FP16
#: the model moves at most this many bytes per layer
MAX_LAYER_BYTES = 1 << 30


def _addr(view: RegisterView, high: str, low: str) -> int:
    return (int(view.field("RBK", f"D_{high}", high)) << 32) | (int(view.field("RBK", f"D_{low}", low)) << 5)


def run_rubik(view: RegisterView, mem: MemoryPort | DmaPorts, options: ModelOptions) -> LayerResult:
    """Run the RBK layer of the executing group (see the module docstring for the rules)."""
    f = lambda reg, fld: int(view.field("RBK", reg, fld))  # noqa: E731
    mode = f("D_MISC_CFG", "RUBIK_MODE")
    prec = f("D_MISC_CFG", "IN_PRECISION")
    if mode not in (CONTRACT, SPLIT, MERGE):
        raise InvalidLayer(f"RBK.D_MISC_CFG.RUBIK_MODE = {mode} is not CONTRACT (0), SPLIT (1) or MERGE (2)")
    if prec not in _ELEMENT_BYTES:
        raise InvalidLayer(f"RBK.D_MISC_CFG.IN_PRECISION = {prec} is not INT8 (0), INT16 (1) or FP16 (2)")
    e = _ELEMENT_BYTES[prec]
    k = ATOM // e
    W = f("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    H = f("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
    cin = f("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    cout = f("D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1
    src = _addr(view, "DAIN_ADDR_HIGH", "DAIN_ADDR_LOW")
    dst = _addr(view, "DAOUT_ADDR_HIGH", "DAOUT_ADDR_LOW")
    st = lambda reg: f(f"D_{reg}", reg) << 5  # noqa: E731
    src_mem = engine_memory(mem, view, "RBK", "D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE")
    dst_mem = engine_memory(mem, view, "RBK", "D_DAOUT_RAM_TYPE", "DATAOUT_RAM_TYPE")

    if mode == CONTRACT:
        sx = f("D_DECONV_STRIDE", "DECONV_X_STRIDE") + 1
        sy = f("D_DECONV_STRIDE", "DECONV_Y_STRIDE") + 1
        n_surf = -(-cout // k)
        _limit(n_surf * H * sy * W * sx * ATOM)
        line, surf = st("DAIN_LINE_STRIDE"), st("DAIN_SURF_STRIDE")
        oline, osurf = st("DAOUT_LINE_STRIDE"), st("DAOUT_SURF_STRIDE")
        if options.semantics == "rtl":
            cube = st("CONTRACT_STRIDE_0")
            out_h, out_y = sy * oline, oline  # output line h*sy + ys
        else:
            cube = n_surf * surf
            out_h, out_y = st("CONTRACT_STRIDE_1"), oline
        so = np.arange(n_surf, dtype=np.int64)[:, None, None, None]
        h = np.arange(H, dtype=np.int64)[None, :, None, None]
        ys = np.arange(sy, dtype=np.int64)[None, None, :, None]
        xs = np.arange(sx, dtype=np.int64)[None, None, None, :]
        # one input row of W atoms per (so, h, ys, xs)
        rows = gather_rows(src_mem, src + so * surf + h * line + (ys * sx + xs) * cube, W * ATOM)
        rows = rows.reshape(n_surf, H, sy, sx, W, ATOM).transpose(0, 1, 2, 4, 3, 5)  # (so, h, ys, w, xs, atom)
        starts = dst + so[..., 0] * osurf + h[..., 0] * out_h + ys[..., 0] * out_y  # (so, h, ys)
        scatter_rows(dst_mem, starts, rows.reshape(n_surf, H, sy, W * sx * ATOM))
        n_out = n_surf * H * sy * W * sx * ATOM
    else:
        if cin != cout:
            raise InvalidLayer(
                f"RBK {'split' if mode == SPLIT else 'merge'}: D_DATAIN_SIZE_1.DATAIN_CHANNEL ({cin - 1}) and "
                f"D_DATAOUT_SIZE_1.DATAOUT_CHANNEL ({cout - 1}) differ; the C model and the RTL count the "
                f"channels of this mode with different registers")  # fmt: skip
        C = cin
        n_surf = -(-C // k)
        plane_bytes = -(-W * e // ATOM) * ATOM  # each plane line is read/written as whole atoms
        _limit(max(n_surf * H * W * ATOM, C * H * plane_bytes))
        c = np.arange(C, dtype=np.int64)
        hh = np.arange(H, dtype=np.int64)
        if mode == SPLIT:
            line, surf = st("DAIN_LINE_STRIDE"), st("DAIN_SURF_STRIDE")
            oline, oplanar = st("DAOUT_LINE_STRIDE"), st("DAOUT_PLANAR_STRIDE")
            s = np.arange(n_surf, dtype=np.int64)
            rows = gather_rows(src_mem, src + s[:, None] * surf + hh[None, :] * line, W * ATOM)  # (S, H, W*32)
            el = rows.reshape(n_surf, H, W, k, e).transpose(0, 3, 1, 2, 4).reshape(n_surf * k, H, W * e)[:C]
            out = np.zeros((C, H, plane_bytes), dtype=np.uint8)
            out[:, :, : W * e] = el
            scatter_rows(dst_mem, dst + c[:, None] * oplanar + hh[None, :] * oline, out)
            n_out = C * H * plane_bytes
        else:
            line, planar = st("DAIN_LINE_STRIDE"), st("DAIN_PLANAR_STRIDE")
            oline, osurf = st("DAOUT_LINE_STRIDE"), st("DAOUT_SURF_STRIDE")
            rows = gather_rows(src_mem, src + c[:, None] * planar + hh[None, :] * line, plane_bytes)  # (C, H, pb)
            planes = np.zeros((n_surf * k, H, W, e), dtype=np.uint8)
            planes[:C] = rows[:, :, : W * e].reshape(C, H, W, e)
            out = planes.reshape(n_surf, k, H, W, e).transpose(0, 2, 3, 1, 4).reshape(n_surf, H, W * ATOM)
            s = np.arange(n_surf, dtype=np.int64)
            scatter_rows(dst_mem, dst + s[:, None] * osurf + hh[None, :] * oline, out)
            n_out = n_surf * H * W * ATOM
    stats = {("RBK", "D_PERF_READ_STALL"): 0, ("RBK", "D_PERF_WRITE_STALL"): 0}
    return LayerResult(stats=stats, elements=n_out // e)


def _limit(nbytes: int) -> None:
    if nbytes > MAX_LAYER_BYTES:
        raise UnitNotModelled(f"RBK: a layer moving {nbytes} bytes is larger than the model handles "
                              f"({MAX_LAYER_BYTES} bytes)")  # fmt: skip
