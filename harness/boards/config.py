"""What a lab file describes: the boards (:class:`BoardConfig`: where a board is, how to reach
it, its address map and link policy) and the lab (:class:`Lab`: boards, pools, lock directory),
with :class:`LabError` for a wrong file or selection. Reading the file is :mod:`.lab`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ...drivers.errors import InputError
from ...drivers.profiles import list_profiles
from ...drivers.uartbone import FSM_TIMEOUT, BoardMap, IntegrityPolicy

_DEFAULT_MAP = BoardMap()
ENV_LAB = "NVDLA_HIL_LAB"
ENV_BOARD = "NVDLA_HIL_BOARD"
#: how the host reaches the board: UARTBone bytes on a pyserial URL, or Etherbone over TCP to
#: LiteX's litex_server (drivers/etherbone.py)
TRANSPORTS = ("uartbone", "litex_server")
PROFILES = tuple(list_profiles())


class LabError(InputError):
    """The lab file or board selection is wrong; the message names file, board and field."""


@dataclass(frozen=True, slots=True)
class BoardConfig:
    """One board of a lab file (the fields and their meaning: :mod:`.lab`'s docstring)."""

    name: str
    url: str
    baud: int = 115200
    profile: str = "nv_small"
    csr_base: int = _DEFAULT_MAP.csr_base
    csr_size: int = _DEFAULT_MAP.csr_size
    dram_base: int = _DEFAULT_MAP.dram_base
    dram_nvdla_base: int = _DEFAULT_MAP.dram_nvdla_base
    dram_size: int = _DEFAULT_MAP.dram_size
    integrity: str = "verify"
    retries: int = 3
    uniform_reads: int = 4
    response_timeout: float = 0.5
    board_timeout: float = FSM_TIMEOUT
    reset_command: tuple[str, ...] | None = None
    reset_timeout: float = 120.0
    reset_address: int | None = None
    #: ``registers``: no reset line; run anyway with NVDLA brought to a known state by its registers
    #: before each test (``harness/targets/serial.py: restore_known_state``), which is not equivalent
    #: to a reset for every suite. Without it, a board with neither reset_address nor reset_command
    #: is refused at session start
    reset: str | None = None
    transport: str = "uartbone"
    probe_window: bool = True
    labgrid_place: str | None = None
    labgrid_coordinator: str | None = None

    @property
    def board_map(self) -> BoardMap:
        return BoardMap(
            csr_base=self.csr_base,
            csr_size=self.csr_size,
            dram_base=self.dram_base,
            dram_nvdla_base=self.dram_nvdla_base,
            dram_size=self.dram_size,
        )

    @property
    def policy(self) -> IntegrityPolicy:
        return IntegrityPolicy(self.integrity, self.retries, self.uniform_reads)


@dataclass(frozen=True, slots=True)
class Lab:
    """A lab file read: its boards by name, its pools and where board locks live."""

    path: Path
    boards: dict[str, BoardConfig]
    lock_dir: Path
    pools: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def select(self, selection: str) -> tuple[list[BoardConfig], str | None]:
        """The boards a ``--nvdla-board`` value names, and the pool's name (None when not a pool).

        ``NAME`` (a board, or a pool of the lab file), ``pool:NAME``, or a comma list of boards
        (an unnamed pool). Every board of a pool must have the same profile (a pool is one
        hardware build, so a test's result does not depend on which board it got)."""
        sel = selection.strip()
        pool: str | None = None
        if sel.startswith("pool:"):
            pool = sel[len("pool:"):].strip()
            if pool not in self.pools:
                known = ", ".join(sorted(self.pools)) or "(none: add a 'pools:' mapping)"
                raise LabError(f"{self.path}: no pool {pool!r}; known pools: {known}")
            names = list(self.pools[pool])
        elif "," in sel:
            names = [n.strip() for n in sel.split(",") if n.strip()]
            if len(set(names)) != len(names):
                raise LabError(f"{self.path}: board list {selection!r} names a board twice")
        elif sel in self.pools and sel not in self.boards:
            pool, names = sel, list(self.pools[sel])
        else:
            names = [sel]
        cfgs = [self.board(n) for n in names]
        if not cfgs:
            raise LabError(f"{self.path}: board selection {selection!r} names no board")
        profiles = {c.profile for c in cfgs}
        if len(profiles) > 1:
            which = ", ".join(f"{c.name} ({c.profile})" for c in cfgs)
            raise LabError(f"{self.path}: boards {which}" + (f" of pool {pool!r}" if pool else "")
                           + " have different profiles; a pool is one hardware build")
        return cfgs, pool

    def board(self, name: str) -> BoardConfig:
        try:
            return self.boards[name]
        except KeyError:
            known = ", ".join(sorted(self.boards)) or "(none)"
            raise LabError(f"{self.path}: no board {name!r}; known boards: {known}") from None
