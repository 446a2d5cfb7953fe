"""Interfaces between the virtual NVDLA (``harness.targets.model``) and the layer models.

A layer model is a function ``run(view: RegisterView, mem: MemoryPort, options: ModelOptions)
-> LayerResult``. It reads the *executing* register group of its block(s) through ``view``,
reads its input surfaces from and writes its outputs to ``mem``, and returns the
statistics the hardware would load into that group's status/perf registers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

__all__ = ["RegisterView", "MemoryPort", "ModelOptions", "LayerResult", "UnitNotModelled"]


class UnitNotModelled(NotImplementedError):
    """The reference model does not cover this unit/mode yet. Reported as a skip, never as
    a pass: the message names the unit and the feature."""


class RegisterView(Protocol):
    def field(self, block: str, register: str, field: str) -> int:
        """Unsigned raw value of ``block.register.field`` in the executing group
        (``D_*``) or the single copy (``S_*``). Names as in the register map,
        e.g. ``view.field("SDP", "D_DP_BS_CFG", "BS_BYPASS")``."""
        ...

    def reg(self, block: str, register: str) -> int:
        """Raw 32-bit value of ``block.register`` (executing group for ``D_*``)."""
        ...

    def lut(self, block: str, table: str) -> np.ndarray:
        """LUT contents as stored (``table`` is ``"LE"`` (65 entries) or ``"LO"`` (257)),
        ``uint16`` array; the model reinterprets them as int16."""
        ...

    def has(self, feature: str) -> bool:
        """Whether the hardware profile has a feature (``"sdp_lut"``, ``"sdp_ew"``, ...)."""
        ...


class MemoryPort(Protocol):
    def read(self, address: int, size: int) -> np.ndarray: ...  # uint8
    def write(self, address: int, data: np.ndarray) -> None: ...


@dataclass(frozen=True)
class ModelOptions:
    """Knobs of the reference model.

    ``semantics``: ``"rtl"`` (default) follows the RTL of the selected profile for every
    difference marked [DIFF] in docs/nvdla-precision-semantics.md; ``"cmod"`` follows
    NVDLA's C model.
    """

    semantics: str = "rtl"
    atom_bytes: int = 8

    def __post_init__(self) -> None:
        if self.semantics not in ("rtl", "cmod"):
            raise ValueError(f"semantics must be 'rtl' or 'cmod', not {self.semantics!r}")


@dataclass
class LayerResult:
    """What a layer leaves in the executing group's status registers.

    ``stats`` maps ``(block, register)`` to the value loaded at layer completion, e.g.
    ``{("SDP", "D_PERF_OUT_SATURATION"): 12}``. Registers not named keep their value.
    ``elements`` is the number of output elements written (for reports).
    """

    stats: dict[tuple[str, str], int] = field(default_factory=dict)
    elements: int = 0
    notes: list[str] = field(default_factory=list)
