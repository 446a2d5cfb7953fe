"""Targets: where a test runs. Each is a :class:`~nvdla_hil.drivers.transport.Transport`
and a context manager that always releases its board, process or files.

==============  ==========================================================================
``model``       in-process virtual NVDLA on the bit-exact reference model (default)
``verilator``   the public NVDLA RTL under Verilator, driven by cocotb (``sims/``)
``serial``      an FPGA board over a UART bridge (LiteX UARTBone), from a lab file
==============  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...drivers.transport import Transport

__all__ = ["TargetSpec", "TARGETS", "open_target", "layer_timeout"]

TARGETS = ("model", "verilator", "serial")


@dataclass(frozen=True)
class TargetSpec:
    """How to open a target; built from pytest options, CLI flags or a lab file."""

    kind: str = "model"
    profile: str = "nv_small"
    semantics: str = "rtl"  # model target: follow the RTL or the C model on every [DIFF]
    nvdla_hw: str | None = None  # verilator: path of the user's nvdla/hw checkout
    waves: bool = False  # verilator: dump FST waves
    lab: str | None = None  # serial: lab file
    board: str | None = None  # serial: board name in the lab file
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in TARGETS:
            raise ValueError(f"unknown target {self.kind!r}; targets: {', '.join(TARGETS)}")

    def with_profile(self, profile: str) -> TargetSpec:
        return TargetSpec(self.kind, profile, self.semantics, self.nvdla_hw, self.waves, self.lab, self.board, self.extra)


def open_target(spec: TargetSpec) -> Transport:
    """Create the target described by ``spec`` (not yet opened; use ``with``)."""
    if spec.kind == "model":
        from .model import ModelTarget

        return ModelTarget(spec.profile, semantics=spec.semantics)
    if spec.kind == "verilator":
        from .verilator import VerilatorTarget

        return VerilatorTarget(nvdla_hw=spec.nvdla_hw, config=spec.profile, waves=spec.waves, **spec.extra)
    from .serial import open_serial_target

    if not spec.lab or not spec.board:
        raise ValueError("the serial target needs a lab file and a board name (--lab lab.yaml --board NAME, "
                         "or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
    return open_serial_target(spec.lab, spec.board, **spec.extra)


def layer_timeout(target: Transport) -> float:
    """Seconds one layer may take on ``target``: 30 s unless the target says otherwise (a
    Verilator simulation of a large layer needs minutes)."""
    return float(getattr(target, "suggested_layer_timeout", 30.0))
