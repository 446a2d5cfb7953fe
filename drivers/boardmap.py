"""Where NVDLA's two address spaces sit on a board's bus (the lab file's window fields).

Board mapping: the NVDLA CSB byte space sits at ``BoardMap.csr_base`` on the board's bus,
and NVDLA's DRAM (DBBIF) addresses ``dram_nvdla_base..+dram_size`` at ``dram_base``. The default
window is NVDLA 0x80000000..0xbfffffff (1 GiB): NVDLA's nv_small traces place their surfaces at
0x80000000, 0x90000000 and 0xa0000000. :meth:`~.uartbone.SerialTransport.probe_window` proves that the
board maps the whole window (an unmapped word of a LiteX SoC answers 0xFFFFFFFF after the bus
timeout and drops writes); a window the board does not map is a :class:`BoardConfigError`
naming both windows, not a link fault.

Memory is byte addressed little-endian on the bus (LiteX SoCs are little-endian), so the
word carrying bytes ``b0 b1 b2 b3`` has value ``b0 | b1<<8 | ...`` and goes on the wire as
``b3 b2 b1 b0``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["BoardConfigError", "BoardMap"]


class BoardConfigError(ConfigError):
    """The board map does not fit: an address outside the configured DRAM window, or a window
    (from the lab file) that the board does not map. A configuration error, not a link fault."""


@dataclass(frozen=True, slots=True)
class BoardMap:
    """Where NVDLA's two address spaces sit on the board's bus (byte addresses).

    register: board = ``csr_base + csb_address`` for ``csb_address < csr_size``.
    memory:   board = ``dram_base + (nvdla_address - dram_nvdla_base)`` for
              ``dram_nvdla_base <= nvdla_address < dram_nvdla_base + dram_size``.
    """

    csr_base: int = 0x4000_0000
    csr_size: int = 0x0004_0000
    dram_base: int = 0x8000_0000
    dram_nvdla_base: int = 0x8000_0000
    dram_size: int = 0x4000_0000

    def __post_init__(self) -> None:
        for name in ("csr_base", "dram_base", "dram_nvdla_base"):
            v = getattr(self, name)
            if v % 4 or not 0 <= v < 1 << 32:
                raise ValueError(f"BoardMap.{name}={v:#x} must be a 4-byte aligned 32-bit address")
        if self.csr_size <= 0 or self.csr_base + self.csr_size > 1 << 32:
            raise ValueError(f"BoardMap csr window {self.csr_base:#x}+{self.csr_size:#x} leaves the 32-bit bus")
        if self.dram_size <= 0 or self.dram_base + self.dram_size > 1 << 32:
            raise ValueError(f"BoardMap dram window {self.dram_base:#x}+{self.dram_size:#x} leaves the 32-bit bus")
        a0, a1 = self.csr_base, self.csr_base + self.csr_size
        b0, b1 = self.dram_base, self.dram_base + self.dram_size
        if a0 < b1 and b0 < a1:
            raise ValueError("BoardMap csr and dram windows overlap")

    def csr(self, csb_address: int) -> int:
        if not 0 <= csb_address < self.csr_size:
            raise ValueError(f"CSB address {csb_address:#x} outside the {self.csr_size:#x}-byte register window")
        return self.csr_base + csb_address

    def dram(self, nvdla_address: int, size: int) -> int:
        off = nvdla_address - self.dram_nvdla_base
        if off < 0 or off + size > self.dram_size:
            raise BoardConfigError(
                f"memory {nvdla_address:#x}+{size:#x} outside the DRAM window "
                f"{self.dram_nvdla_base:#x}+{self.dram_size:#x} (lab file: dram_nvdla_base, dram_size)"
            )
        return self.dram_base + off

    def decode(self, board_address: int) -> tuple[str, int] | None:
        """Board byte address -> ("csr", csb_address) / ("dram", nvdla_address) / None."""
        if self.csr_base <= board_address < self.csr_base + self.csr_size:
            return "csr", board_address - self.csr_base
        if self.dram_base <= board_address < self.dram_base + self.dram_size:
            return "dram", board_address - self.dram_base + self.dram_nvdla_base
        return None
