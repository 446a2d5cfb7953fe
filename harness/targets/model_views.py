"""The register views the model target (:mod:`.model`) hands its layer models: one unit's
executing register groups (:class:`GroupView`, the reference model's ``RegisterView``) and an
SDP_RDMA that fetches no operand while it is idle (:class:`RdmaIdleView`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...drivers.profiles import HardwareProfile
from ...drivers.regmap import Register
from ..refmodel.base import RegisterView

__all__ = ["GroupView", "RdmaIdleView", "RegisterSource", "ram_type_fields"]


@dataclass(frozen=True)
class RegisterSource:
    """What a view reads, handed over by the model target that owns it (:meth:`.model.ModelTarget.register_view`):
    its register file (``(address, group) -> value``), its field and register lookups with their
    caches (``field_slots``: ``(address, dual, lsb, mask)`` of each field looked up so far;
    ``registers``: each register looked up so far), its LUT tables and profile."""

    regs: dict[tuple[int, int], int]
    field_slots: dict[tuple[str, str, str], tuple[int, bool, int, int]]
    field_slot: Callable[[str, str, str], tuple[int, bool, int, int]]
    registers: dict[tuple[str, str], Register]
    register: Callable[[str, str], Register]
    luts: dict[str, dict[str, np.ndarray]]
    profile: HardwareProfile


class GroupView:
    """RegisterView of one unit's executing group for the layer models."""

    def __init__(self, source: RegisterSource, groups: dict[str, int], default: int = 0) -> None:
        """``groups``: the group each block executes; ``default``: the group of the others."""
        self._luts, self._profile = source.luts, source.profile
        cached, field_at, regs, group_of = source.field_slots.get, source.field_slot, source.regs, groups.get
        reg_cached, register_of = source.registers.get, source.register

        # a layer reads some 60 fields and 20 registers: closures, with few lookups per call
        def field(block: str, register: str, field: str) -> int:
            address, dual, shift, mask = cached((block, register, field)) or field_at(block, register, field)
            return (regs[(address, group_of(block, default) if dual else 0)] >> shift) & mask

        def reg(block: str, register: str) -> int:
            r = reg_cached((block, register)) or register_of(block, register)
            return regs[(r.address, group_of(block, default) if r.dual else 0)]

        self.field, self.reg = field, reg

    def lut(self, block: str, table: str) -> np.ndarray:
        return self._luts[block][table.upper()].copy()

    def has(self, feature: str) -> bool:
        return self._profile.has(feature)


class RdmaIdleView:
    """SDP_RDMA fetches no operand while it is not enabled in the layer's group: a fused
    convolution whose SDP takes its operands from registers (NVDLA's firmware, sdp.c, leaves
    D_BRDMA_CFG at 0 = DISABLE NO, RAM_TYPE CV when SDP_RDMA is not needed)."""

    _ENGINES = ("D_BRDMA_CFG", "D_NRDMA_CFG", "D_ERDMA_CFG")

    def __init__(self, view: RegisterView) -> None:
        self._v = view

    def field(self, block: str, register: str, field: str) -> int:
        if block == "SDP_RDMA" and register in self._ENGINES and field.endswith("_DISABLE"):
            return 1
        return self._v.field(block, register, field)

    def __getattr__(self, name: str):  # reg, lut, has: as the wrapped view
        return getattr(self._v, name)


def ram_type_fields(blocks: Sequence[str], view: RegisterView) -> list[tuple[str, str, str]]:
    """The ``(block, register, field)`` RAM_TYPE fields of the DMA engines a layer of ``blocks``
    uses (``view``: its executing groups), each choosing its engine's memory port (MC = primary
    DBBIF, CV = secondary CVIF)."""
    f = view.field
    engines: list[tuple[str, str, str]] = []
    if "CACC" in blocks:
        engines += [("CDMA", "D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"), ("CDMA", "D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE")]
    if "SDP" in blocks:
        if "SDP_RDMA" in blocks and f("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE") == 0:
            # MRDMA reads the input only off the fly: in flying mode the input comes from CACC
            # and NVDLA's firmware (sdp.c) leaves D_SRC_DMA_CFG unwritten
            engines.append(("SDP_RDMA", "D_SRC_DMA_CFG", "SRC_RAM_TYPE"))
        # an operand engine's RAM type matters only when SDP_RDMA runs in this group (NVDLA's
        # firmware leaves D_BRDMA_CFG = 0, DISABLE=NO RAM_TYPE=CV, on a fused conv without operands)
        rdma_on = "SDP_RDMA" in blocks or f("SDP_RDMA", "D_OP_ENABLE", "OP_EN")
        for eng in ("BRDMA", "NRDMA", "ERDMA"):
            if rdma_on and not f("SDP_RDMA", f"D_{eng}_CFG", f"{eng}_DISABLE"):
                engines.append(("SDP_RDMA", f"D_{eng}_CFG", f"{eng}_RAM_TYPE"))
        if f("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST") == 0:
            engines.append(("SDP", "D_DST_DMA_CFG", "DST_RAM_TYPE"))
    if "CDP" in blocks:
        engines += [("CDP_RDMA", "D_SRC_DMA_CFG", "SRC_RAM_TYPE"), ("CDP", "D_DST_DMA_CFG", "DST_RAM_TYPE")]
    if "RBK" in blocks:
        engines += [("RBK", "D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"), ("RBK", "D_DAOUT_RAM_TYPE", "DATAOUT_RAM_TYPE")]
    if "PDP" in blocks:
        if "PDP_RDMA" in blocks:
            engines.append(("PDP_RDMA", "D_SRC_RAM_CFG", "SRC_RAM_TYPE"))
        engines.append(("PDP", "D_DST_RAM_CFG", "DST_RAM_TYPE"))
    return engines
