"""Interfaces between the virtual NVDLA (``harness.targets.model``) and the layer models.

A layer model is a function ``run(view: RegisterView, mem: MemoryPort, options: ModelOptions)
-> LayerResult``. It reads the *executing* register group of its block(s) through ``view``,
reads its input surfaces from and writes its outputs to ``mem``, and returns the
statistics the hardware would load into that group's status/perf registers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...errors import ModelError
from ...semantics import Semantics, check_semantics

__all__ = ["RegisterView", "MemoryPort", "DmaPorts", "engine_memory", "ModelOptions", "LayerResult",
           "UnitNotModelled", "InvalidLayer"]


class UnitNotModelled(ModelError, NotImplementedError):
    """The reference model does not cover this unit/mode yet. Reported as a skip, never as
    a pass: the message names the unit and the feature."""


class InvalidLayer(ModelError, ValueError):
    """The registers describe a layer the hardware cannot run as programmed (e.g. more CBUF
    banks than the configuration has); the message names the register. The model target
    refuses such a layer instead of inventing a result."""


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


#: ``*_RAM_TYPE`` field values of the v2 register map: 1 = MC (primary DBBIF port, ``pri_mem``),
#: 0 = CV (secondary CVIF/SRAMIF port, ``sec_mem``), as the RDL's enums say.
RAM_TYPE_PORTS = {1: "pri_mem", 0: "sec_mem"}


class DmaPorts:
    """The external memories a layer's DMA engines reach, each engine choosing its port with
    its own ``*_RAM_TYPE`` field (e.g. SDP reading its input over MCIF and its EW operand over
    CVIF). Layer models fetch the port of an engine with :func:`engine_memory`."""

    def __init__(self, memories: dict[str, MemoryPort]) -> None:
        self.memories = memories

    def port(self, name: str) -> MemoryPort:
        try:
            return self.memories[name]
        except KeyError:
            raise UnitNotModelled(f"memory port {name} is not present") from None


def engine_memory(mem: MemoryPort | DmaPorts, view: RegisterView, block: str, register: str,
                  field: str) -> MemoryPort:  # fmt: skip
    """The memory the DMA engine whose port is ``block.register.field`` (a ``*_RAM_TYPE``)
    reads or writes. A plain ``MemoryPort`` (unit tests, one-port profiles) serves every engine."""
    if not isinstance(mem, DmaPorts):
        return mem
    return mem.port(RAM_TYPE_PORTS.get(int(view.field(block, register, field)), "sec_mem"))


class EventSink(Protocol):
    """What the layer models report functional-coverage events to (``harness.coverage.Coverage``)."""

    def event(self, name: str, **data: Any) -> None: ...


@dataclass(frozen=True)
class ModelOptions:
    """Knobs of the reference model.

    ``semantics``: ``"rtl"`` (default) follows the RTL of the selected profile for every
    difference marked [DIFF] in docs/nvdla-precision-semantics.md; ``"cmod"`` follows
    NVDLA's C model.
    """

    semantics: Semantics = "rtl"
    #: memory atom in bytes (profile ``atom_bytes``): the channel group of every DMA cube
    atom_bytes: int = 8
    #: MAC atomic C / K (profile ``mac_atomic_c/k``): the channel slice and kernel group of
    #: the direct-convolution weight format and of CMAC's accumulation steps
    mac_atomic_c: int = 8
    mac_atomic_k: int = 8
    #: convolution buffer geometry (profile ``cbuf_*``): banks, and bytes per bank entry
    cbuf_banks: int = 32
    cbuf_bank_width: int = 8
    cbuf_bank_depth: int = 512
    cbuf_entry_bytes: int = 8
    #: functional-coverage observer (``harness.coverage.Coverage`` or anything with
    #: ``event(name, **data)``): layer models report per-element events to it. ``None`` (the
    #: default): no events, no cost; it never changes a result and takes no part in equality.
    coverage: EventSink | None = field(default=None, compare=False, repr=False)

    @classmethod
    def for_profile(cls, profile, semantics: Semantics = "rtl") -> ModelOptions:
        """The options of a hardware profile (``drivers.profiles.HardwareProfile``); the
        defaults above are nv_small's, for unit tests of single functions only."""
        return cls(semantics=semantics, atom_bytes=profile.atom_bytes,
                   mac_atomic_c=profile.mac_atomic_c, mac_atomic_k=profile.mac_atomic_k,
                   cbuf_banks=profile.cbuf_banks, cbuf_bank_width=profile.cbuf_bank_width,
                   cbuf_bank_depth=profile.cbuf_bank_depth,
                   cbuf_entry_bytes=profile.cbuf_entry_bytes)  # fmt: skip

    def __post_init__(self) -> None:
        check_semantics(self.semantics)


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
