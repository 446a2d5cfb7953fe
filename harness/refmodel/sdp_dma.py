"""SDP's DMA engines: SDP_RDMA (MRDMA, the main input; BRDMA/NRDMA/ERDMA, the BS/BN/EW operand
cubes or per-channel vectors) and WDMA (the output cube), shared by the integer (:mod:`.sdp`) and
FP16 (:mod:`.sdp_fp`) datapaths. Registers: ``SDP_RDMA.D_{SRC,BS,BN,EW}_*``, ``SDP.D_DST_*``
(nvdla/hw ``vmod/nvdla/sdp`` NV_NVDLA_SDP_MRDMA*, NV_NVDLA_SDP_RDMA*, NV_NVDLA_SDP_WDMA*; cmod
``cmod/sdp/NV_NVDLA_sdp.cpp`` ``SdpRdmaSequence``/``WdmaSequence``); feature layout in :mod:`.dma`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import MemoryPort, ModelOptions, RegisterView, UnitNotModelled, engine_memory
from .dma import CubeGeometry, read_cube, read_vector, surfaces, write_cube
from .ops import sx

__all__ = ["USE_ALU", "USE_BOTH", "USE_MUL", "Cube", "cube_geometry", "fetch_operands", "packed_1x1", "read_main",
           "reg_address", "stage_operand", "write_dst"]

# D_*RDMA_CFG.*_DATA_USE
USE_MUL, USE_ALU, USE_BOTH = 0, 1, 2


def reg_address(view: RegisterView, block: str, stem: str) -> int:
    """64-bit byte address from ``<stem>_LOW``/``_HIGH`` raw registers."""
    return (int(view.reg(block, f"{stem}_HIGH")) << 32) | int(view.reg(block, f"{stem}_LOW"))


@dataclass(frozen=True)
class Cube:
    """The cube SDP processes: ``channels`` in surfaces of ``group`` elements (the processing
    precision's group; operand engines use it too, cmod ``SdpRdmaSequence``)."""

    width: int
    height: int
    channels: int
    group: int  # elements per surface

    @property
    def cpad(self) -> int:
        return surfaces(self.channels, self.group) * self.group


def fetch_operands(
    view: RegisterView, mem: MemoryPort, cube: Cube, dma: str, prefix: str, options: ModelOptions
) -> dict[str, np.ndarray]:
    """Operands fetched by BRDMA/NRDMA/ERDMA (``dma`` = 'BRDMA'..., ``prefix`` = 'BS'...):
    {'ALU': arr, 'MUL': arr} with arrays broadcastable to (Cpad, H, W), 16-bit signed."""
    cfg = f"D_{dma}_CFG"
    if view.field("SDP_RDMA", cfg, f"{dma}_DISABLE"):
        return {}
    use = view.field("SDP_RDMA", cfg, f"{dma}_DATA_USE")
    bpc = 2 if view.field("SDP_RDMA", cfg, f"{dma}_DATA_SIZE") else 1
    per_element = bool(view.field("SDP_RDMA", cfg, f"{dma}_DATA_MODE"))
    comps = 2 if use == USE_BOTH else 1
    base = reg_address(view, "SDP_RDMA", f"D_{prefix}_BASE_ADDR")
    port = engine_memory(mem, view, "SDP_RDMA", cfg, f"{dma}_RAM_TYPE")
    if per_element:
        geo = CubeGeometry(
            base=base,
            line_stride=int(view.reg("SDP_RDMA", f"D_{prefix}_LINE_STRIDE")),
            surface_stride=packed_1x1(cube.width, cube.height, cube.group, bpc * comps,
                                      int(view.reg("SDP_RDMA", f"D_{prefix}_SURFACE_STRIDE"))),
            width=cube.width,
            height=cube.height,
            channels=cube.channels,
            group=cube.group,
            bpe=bpc * comps,
        )
        vals = read_cube(port, geo, comps=comps)  # (comps, Cpad, H, W)
    else:
        vals = read_vector(port, base, cube.cpad, bpc=bpc, comps=comps)[:, :, None, None]
    if use == USE_BOTH:
        return {"ALU": vals[0], "MUL": vals[1]}
    if use == USE_ALU:
        return {"ALU": vals[0]}
    if use == USE_MUL:
        return {"MUL": vals[0]}
    raise UnitNotModelled(f"SDP: {dma}_DATA_USE={use} (reserved) not modelled")


def stage_operand(view: RegisterView, stage: str, kind: str, fetched: dict[str, np.ndarray], dma: str) -> np.ndarray | int:
    """16-bit signed operand of BS/BN ALU or MUL: register or memory (section 3.1)."""
    src = view.field("SDP", f"D_DP_{stage}_{kind}_CFG", f"{stage}_{kind}_SRC")
    if src == 0:
        return sx(view.field("SDP", f"D_DP_{stage}_{kind}_SRC_VALUE", f"{stage}_{kind}_OPERAND"), 16)
    if kind not in fetched:
        raise UnitNotModelled(
            f"SDP: {stage} {kind} operand from memory but SDP_RDMA {dma} does not deliver it "
            f"(disabled or DATA_USE mismatch)"
        )
    return fetched[kind]


def packed_1x1(w: int, h: int, group: int, bpe: int, surface_stride: int) -> int:
    """SDP's DMA engines move a 1 x 1 x C cube as one request of its surfaces back to back: the
    RTL's ``cfg_mode_1x1_pack`` (``WIDTH == 0 && HEIGHT == 0``) in NV_NVDLA_SDP_MRDMA_ig.v,
    NV_NVDLA_SDP_RDMA_ig.v (BS/BN/EW operand cubes) and NV_NVDLA_SDP_WDMA_cmd.v ignores
    ``SURFACE_STRIDE`` (found by ``nvdla-hil fuzz`` against the nv_small RTL). PDP and CDP have
    no such mode."""
    return w * group * bpe if (w == 1 and h == 1) else surface_stride


def cube_geometry(view: RegisterView, block: str, prefix: str, w: int, h: int, c: int, group: int, bpe: int) -> CubeGeometry:
    """Geometry of the cube ``block``'s ``<prefix>_BASE_ADDR``/``_LINE_STRIDE``/``_SURFACE_STRIDE``
    registers describe (a 1 x 1 x C cube: surfaces packed, :func:`packed_1x1`)."""
    return CubeGeometry(
        base=reg_address(view, block, f"D_{prefix}_BASE_ADDR"),
        line_stride=int(view.reg(block, f"D_{prefix}_LINE_STRIDE")),
        surface_stride=packed_1x1(w, h, group, bpe, int(view.reg(block, f"D_{prefix}_SURFACE_STRIDE"))),
        width=w,
        height=h,
        channels=c,
        group=group,
        bpe=bpe,
    )


def read_main(view: RegisterView, mem: MemoryPort, w: int, h: int, c: int, group: int, in_bpe: int) -> np.ndarray:
    """MRDMA: the main input cube from ``SDP_RDMA``'s ``D_SRC_*`` registers, (Cpad, H, W)."""
    src = cube_geometry(view, "SDP_RDMA", "SRC", w, h, c, group, in_bpe)
    port = engine_memory(mem, view, "SDP_RDMA", "D_SRC_DMA_CFG", "SRC_RAM_TYPE")
    return read_cube(port, src)[0]  # (Cpad, H, W) int64, sign-extended


def write_dst(view: RegisterView, mem: MemoryPort, y: np.ndarray, w: int, h: int, c: int, out_group: int,
              out_bpe: int) -> None:
    """WDMA: the output cube ``y`` (Cpad, H, W) to ``SDP``'s ``D_DST_*`` cube."""
    dst = cube_geometry(view, "SDP", "DST", w, h, c, out_group, out_bpe)
    write_cube(engine_memory(mem, view, "SDP", "D_DST_DMA_CFG", "DST_RAM_TYPE"), dst, y)
