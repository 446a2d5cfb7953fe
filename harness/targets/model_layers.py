"""The hardware layers the model target (:mod:`.model`) runs: the engines that make one, the
units whose done interrupts it raises, and the reference model that computes it."""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable
from dataclasses import dataclass

from ..refmodel.base import LayerResult, UnitNotModelled

__all__ = ["Layer", "LayerModel"]


class LayerModel(enum.Enum):
    """The reference model of a hardware layer: its module and entry point in
    ``nvdla_hil.harness.refmodel``, imported on first use (:meth:`load`)."""

    CONV = ("conv", "run_conv")
    SDP = ("sdp", "run_sdp")
    SDP_PDP = ("conv", "run_sdp_pdp")
    PDP = ("pdp", "run_pdp")
    CDP = ("cdp", "run_cdp")
    RUBIK = ("rubik", "run_rubik")

    def load(self) -> Callable[..., LayerResult]:
        """The entry point; a model that is not there is a clear UnitNotModelled."""
        module, func = self.value
        try:
            return getattr(importlib.import_module(f"nvdla_hil.harness.refmodel.{module}"), func)
        except (ImportError, AttributeError):
            raise UnitNotModelled(f"{func}: this layer's reference model is not available yet") from None


@dataclass(frozen=True)
class Layer:
    """One hardware layer: the engines that must all be enabled in the group, the units
    whose done interrupt it raises, and the reference-model entry point that runs it."""

    blocks: tuple[str, ...]
    done: tuple[str, ...]
    runner: LayerModel
    #: (block, group) where a block executes another group than the one enabled (a fused conv:
    #: NVDLA's firmware assigns groups per processor, so its SDP may run group 0 while the
    #: conv pipeline runs group 1); empty: every block in the enabled group
    groups: tuple[tuple[str, int], ...] = ()

    def group_map(self, group: int) -> dict[str, int]:
        return {b: group for b in self.blocks} | dict(self.groups)
