"""SDP moves a 1 x 1 x C cube as one request of its surfaces back to back, ignoring
SURFACE_STRIDE (the RTL's cfg_mode_1x1_pack, in the MRDMA, the operand RDMAs and the WDMA).
Found by `nvdla-hil fuzz --target verilator` (sdp-cvt on nv_small, a 1x1x34 cube with surface
gaps: 3 of 3 mismatched before the model followed it, 0 after). Expected bytes by hand."""

from __future__ import annotations

import numpy as np

from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.harness.targets.model import ModelTarget

SRC, DST = 0x8000_0000, 0x8000_2000


def _passthrough(t: ModelTarget, *, w: int, h: int, c: int, line: int, surf: int) -> None:
    drv = NvdlaDriver(t)
    for blk in ("SDP_RDMA", "SDP"):
        drv.write_fields(f"{blk}.D_DATA_CUBE_WIDTH", WIDTH=w - 1)
        drv.write_fields(f"{blk}.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1)
        drv.write_fields(f"{blk}.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)
    drv.write("SDP_RDMA.D_FEATURE_MODE_CFG", 0)  # INT8 in/proc/out (the reset value says INT16)
    drv.write("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC)
    drv.write("SDP_RDMA.D_SRC_LINE_STRIDE", line)
    drv.write("SDP_RDMA.D_SRC_SURFACE_STRIDE", surf)
    drv.write("SDP.D_DST_BASE_ADDR_LOW", DST)
    drv.write("SDP.D_DST_LINE_STRIDE", line)
    drv.write("SDP.D_DST_SURFACE_STRIDE", surf)
    for blk, reg in (("SDP_RDMA", "D_SRC_DMA_CFG"), ("SDP", "D_DST_DMA_CFG")):
        drv.write(f"{blk}.{reg}", 1)  # MC
    for stage in ("BS", "BN", "EW"):
        drv.write_fields(f"SDP.D_DP_{stage}_CFG", **{f"{stage}_BYPASS": 1})
    drv.write_fields("SDP.D_CVT_SCALE", CVT_SCALE=1)
    drv.launch("SDP_RDMA", "SDP")
    t.run_until_idle()


def test_1x1xC_cube_surfaces_are_packed() -> None:
    src = (np.arange(256) * 37 % 251).astype(np.uint8)
    with ModelTarget("nv_small") as t:
        t.mem_write(SRC, src)
        t.mem_write(DST, np.full(256, 0xA5, dtype=np.uint8))
        _passthrough(t, w=1, h=1, c=34, line=16, surf=48)  # strides with gaps, ignored at 1x1
        out = t.mem_read(DST, 256)
    # 34 channels = 5 surfaces of 8 bytes (the last with 6 padding lanes processed alike),
    # read from and written to 40 contiguous bytes; nothing beyond them is touched
    assert np.array_equal(out[:40], src[:40])
    assert (out[40:] == 0xA5).all()


def test_other_cubes_keep_their_strides() -> None:
    src = (np.arange(256) * 37 % 251).astype(np.uint8)
    with ModelTarget("nv_small") as t:
        t.mem_write(SRC, src)
        t.mem_write(DST, np.full(256, 0xA5, dtype=np.uint8))
        _passthrough(t, w=2, h=1, c=16, line=16, surf=48)  # 2 surfaces of 16 bytes, 48 apart
        out = t.mem_read(DST, 256)
    assert np.array_equal(out[:16], src[:16]) and np.array_equal(out[48:64], src[48:64])
    assert (out[16:48] == 0xA5).all() and (out[64:] == 0xA5).all()
