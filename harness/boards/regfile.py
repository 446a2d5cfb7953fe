"""A minimal target for link tests: plain read-write registers and sparse memory."""

from __future__ import annotations

import numpy as np

from ...drivers.transport import Transport
from ...drivers.uartbone import GLB_HW_VERSION
from ..targets.memory import SparseMemory


class RegisterFileTarget(Transport):
    """Every register is plain RW storage (reset 0, GLB HW_VERSION 0x00303031); memory is sparse.

    Stands in for the model target in link tests: it has no side effects, so any value a
    test reads must be the value last written to that address.
    """

    def __init__(self, profile_name: str = "nv_small", reset_values: dict[int, int] | None = None) -> None:
        super().__init__()
        self.profile_name = profile_name
        self.reset_values = {GLB_HW_VERSION: 0x0030_3031} if reset_values is None else dict(reset_values)
        self.regs: dict[int, int] = dict(self.reset_values)
        self.memory = SparseMemory()

    def _read32(self, address: int) -> int:
        return self.regs.get(address, 0)

    def _write32(self, address: int, value: int, posted: bool) -> None:
        if address in self.reset_values and address == GLB_HW_VERSION:
            return  # read-only identification register
        self.regs[address] = value

    def _mem_write(self, address: int, data: np.ndarray, port: str) -> None:
        self.memory.write(address, data)

    def _mem_read(self, address: int, size: int, port: str) -> np.ndarray:
        return self.memory.read(address, size)

    def _reset(self) -> None:
        self.regs = dict(self.reset_values)
