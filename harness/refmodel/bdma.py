"""BDMA (nv_full's bridge DMA): memory-to-memory copies of 32-byte-granular lines.

Sources: nvdla/hw ``nvdlav1`` C model ``cmod/bdma/NV_NVDLA_bdma.cpp``
(``OperationEnableTriggerThread``, ``LaunchGroup0/1TriggerThread``), ``cmod/bdma/BdmaCore.cpp``
(``ReadRequestSequenceGeneratorThread``, ``WriteRequestSequenceGeneratorThread``,
``BdmaIntrThread``), ``cmod/bdma/gen/bdma_reg_model.cpp`` (``BdmaAccessRegister``,
``BdmaClearGrp0Int``), and the RTL ``vmod/nvdla/bdma/NV_NVDLA_BDMA_csb.v`` (command FIFO,
gather/launch counters, status and interrupt), ``NV_NVDLA_BDMA_load.v`` (read address
sequence), ``NV_NVDLA_BDMA_store.v`` (write sequence, done per group).

What one copy command does (C model and RTL agree)
---------------------------------------------------
All fields are raw register fields as the register map extracts them::

    src   = CFG_SRC_ADDR_HIGH.V8 << 32 | CFG_SRC_ADDR_LOW.V32 << 5     (32-byte aligned: bits 4:0
    dst   = CFG_DST_ADDR_HIGH.V8 << 32 | CFG_DST_ADDR_LOW.V32 << 5      are not stored)
    line  = (CFG_LINE.SIZE + 1) * 32 bytes                               (minus one, 32-byte units)
    lines = CFG_LINE_REPEAT.NUMBER + 1                                   (minus one)
    surfs = CFG_SURF_REPEAT.NUMBER + 1                                   (minus one)
    strides CFG_{SRC,DST}_{LINE,SURF}.STRIDE << 5 bytes                  (32-byte units)

    for s in range(surfs): for l in range(lines):
        copy `line` bytes  src + s*SRC_SURF + l*SRC_LINE  ->  dst + s*DST_SURF + l*DST_LINE

read over the port ``CFG_CMD.SRC_RAM_TYPE`` selects and written over ``DST_RAM_TYPE``
(1 = MC = DBBIF, ``pri_mem``; 0 = CVSRAM = CVIF, ``sec_mem``). Bytes between lines and
surfaces are untouched; nothing is converted. (RTL: load.v ``line_addr``/``surf_addr`` in
64 bits, one read request of ``SIZE+1`` atoms per line; cmod: ``line_size = (SIZE+1)*32``.)

Differences, each under ``ModelOptions.semantics``:

* RTL: the store side receives only 13 bits of each repeat count (load.v packs
  ``ld2st_line_repeat_number[12:0]`` / ``ld2st_surf_repeat_number[12:0]`` into ``ld2st_wr_pd``;
  store.v's ``reg_line_repeat_number`` is 13 bits) while the load side counts 24 bits, so a
  command with ``NUMBER >= 8192`` reads more lines than it writes: refused (:class:`InvalidLayer`)
  under ``rtl``; the C model copies all of them.
* The C model computes surface/line offsets in 32 bits (``surface_iter * (stride << 5)``),
  the RTL in 64; only offsets past 4 GiB differ, which the model refuses as too large anyway.

How BDMA is started (not a ``D_OP_ENABLE`` ping-pong unit)
----------------------------------------------------------
BDMA has **one** copy of its registers (no ``S_POINTER``, no ``D_*``/group registers) and a
**command queue** of 20 entries (``STATUS.FREE_SLOT`` resets to 0x14):

1. The host programs the ``CFG_*`` registers of one copy and writes ``CFG_OP.EN = 1``: the
   current ``CFG_SRC_*``..``CFG_DST_SURF`` values are pushed into the queue as one command
   (RTL csb.v ``csb_fifo_wr_pvld = op_en_trigger & cfg_op_0_en``: *every* write of ``CFG_OP``
   with EN=1 pushes; cmod ``BdmaAccessRegister``: ``op_count++``, snapshot). ``FREE_SLOT``
   drops by one. Nothing runs yet.
2. Writing ``CFG_LAUNCH0.GRP0_LAUNCH = 1`` (or ``CFG_LAUNCH1.GRP1_LAUNCH = 1``) closes a
   *group*: all commands pushed since the previous launch (RTL ``gather_count``, cmod
   ``op_count``) execute in order, and ``STATUS.GRP0_BUSY`` (``GRP1_BUSY``) is set at the launch.
3. When the last command of the group has been written (its last write acknowledged), the
   group is done: ``STATUS.GRPn_BUSY`` clears, ``STATUS_GRPn_READ/WRITE_STALL`` load their
   counts (cleared to 0 at the launch; they only count when ``CFG_STATUS.STALL_COUNT_EN``),
   and BDMA pulses ``bdma2glb_done_intr[n]``, i.e. GLB ``S_INTR_STATUS.BDMA_DONE_STATUSn``
   (bit 6 for group 0, bit 7 for group 1). A launch with no command pushed since the last
   one executes nothing and raises no interrupt (RTL: ``launch_count`` 0 never reaches
   ``is_last_cmd``; cmod: the loop of ``op_count`` = 0 commands never sets ``require_ack``).
   ``STATUS.IDLE`` is 1 when the queue is empty and nothing is in flight.

Register read-back: the RTL keeps ``CFG_OP.EN`` and ``CFG_LAUNCHn`` at the values written
(they are plain trigger registers, reg.v ``*_trigger = *_wren``); nv_full's sanity1/sanity2
traces read back 1 from both right after writing them. The C model instead clears ``CFG_OP.EN``
as soon as the command is queued (``BdmaClearOperationEnable``) and ``GRPn_LAUNCH`` when the
group's interrupt fires (``BdmaClearGrp0Int``), and ignores ``CFG_*`` writes while EN is 1.

This module is stateless: :meth:`BdmaCommand.from_registers` is the snapshot taken at a
``CFG_OP.EN`` write, :func:`run_bdma_group` executes a launched group, and :func:`run_bdma`
(the ``run(view, mem, options)`` entry point) executes the single command the registers
currently describe as group ``group``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .base import (RAM_TYPE_PORTS, DmaPorts, InvalidLayer, LayerResult, MemoryPort, ModelOptions, RegisterView,
                   UnitNotModelled)
from .dma import gather_rows, scatter_rows

__all__ = ["BdmaCommand", "QUEUE_DEPTH", "port_memory", "run_bdma", "run_bdma_group"]

#: command queue depth (STATUS.FREE_SLOT reset value; RTL csb.v ``20 - csb_fifo_wr_count``)
QUEUE_DEPTH = 20
#: the RTL store side's repeat counters are 13 bits wide (see module docstring)
_RTL_REPEAT_LIMIT = 1 << 13
#: the model copies at most this many bytes per command (a larger one is not modelled)
MAX_COPY_BYTES = 1 << 30

# ---- ports; the rows are moved by dma.gather_rows / dma.scatter_rows, as for every unit ----


def port_memory(mem: MemoryPort | DmaPorts, ram_type: int) -> MemoryPort:
    """The memory a ``*_RAM_TYPE`` value selects (1 = MC ``pri_mem``, 0 = CV ``sec_mem``), like
    :func:`base.engine_memory` but from a stored value (a queued BDMA command). A plain
    ``MemoryPort`` serves both ports."""
    if not isinstance(mem, DmaPorts):
        return mem
    return mem.port(RAM_TYPE_PORTS.get(int(ram_type), "sec_mem"))


def _merge(starts: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted [lo, hi) intervals covering the rows."""
    s = np.sort(np.asarray(starts, dtype=np.int64).ravel())
    e = s + nbytes
    run_end = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    los = s[idx]
    his = np.maximum.reduceat(e, idx)
    return los, his


def _overlap(a: np.ndarray, b: np.ndarray, nbytes: int) -> bool:
    """Whether any row of ``a`` shares a byte with any row of ``b`` (all ``nbytes`` long)."""
    alo, ahi = _merge(a, nbytes)
    blo, bhi = _merge(b, nbytes)
    i = np.searchsorted(alo, bhi, side="left") - 1  # last a-interval starting before b ends
    valid = i >= 0
    return bool(np.any(ahi[i[valid]] > blo[valid]))


# ---- commands -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BdmaCommand:
    """One queued copy: the snapshot of ``CFG_SRC_ADDR_LOW`` .. ``CFG_DST_SURF`` taken when
    ``CFG_OP.EN`` is written 1. Raw register fields (minus-one counts, 32-byte units)."""

    src_addr_low: int  # CFG_SRC_ADDR_LOW.V32 (address bits 31:5)
    src_addr_high: int  # CFG_SRC_ADDR_HIGH.V8 (address bits 63:32)
    dst_addr_low: int
    dst_addr_high: int
    line_size: int  # CFG_LINE.SIZE: (bytes / 32) - 1
    src_ram_type: int  # CFG_CMD.SRC_RAM_TYPE: 1 = MC, 0 = CVSRAM
    dst_ram_type: int
    line_repeat: int  # CFG_LINE_REPEAT.NUMBER: lines - 1
    src_line_stride: int  # CFG_SRC_LINE.STRIDE (32-byte units)
    dst_line_stride: int
    surf_repeat: int  # CFG_SURF_REPEAT.NUMBER: surfaces - 1
    src_surf_stride: int
    dst_surf_stride: int

    @classmethod
    def from_registers(cls, view: RegisterView) -> BdmaCommand:
        f = lambda reg, fld: int(view.field("BDMA", reg, fld))  # noqa: E731
        return cls(
            src_addr_low=f("CFG_SRC_ADDR_LOW", "V32"), src_addr_high=f("CFG_SRC_ADDR_HIGH", "V8"),
            dst_addr_low=f("CFG_DST_ADDR_LOW", "V32"), dst_addr_high=f("CFG_DST_ADDR_HIGH", "V8"),
            line_size=f("CFG_LINE", "SIZE"),
            src_ram_type=f("CFG_CMD", "SRC_RAM_TYPE"), dst_ram_type=f("CFG_CMD", "DST_RAM_TYPE"),
            line_repeat=f("CFG_LINE_REPEAT", "NUMBER"),
            src_line_stride=f("CFG_SRC_LINE", "STRIDE"), dst_line_stride=f("CFG_DST_LINE", "STRIDE"),
            surf_repeat=f("CFG_SURF_REPEAT", "NUMBER"),
            src_surf_stride=f("CFG_SRC_SURF", "STRIDE"), dst_surf_stride=f("CFG_DST_SURF", "STRIDE"),
        )  # fmt: skip

    # decoded geometry, bytes
    @property
    def src(self) -> int:
        return (self.src_addr_high << 32) | (self.src_addr_low << 5)

    @property
    def dst(self) -> int:
        return (self.dst_addr_high << 32) | (self.dst_addr_low << 5)

    @property
    def line_bytes(self) -> int:
        return (self.line_size + 1) * 32

    @property
    def lines(self) -> int:
        return self.line_repeat + 1

    @property
    def surfaces(self) -> int:
        return self.surf_repeat + 1

    @property
    def total_bytes(self) -> int:
        return self.line_bytes * self.lines * self.surfaces

    def row_starts(self, side: str) -> np.ndarray:
        """Start address of every line, ``int64 (surfaces, lines)``; ``side`` "src" or "dst"."""
        base = self.src if side == "src" else self.dst
        ls = (self.src_line_stride if side == "src" else self.dst_line_stride) << 5
        ss = (self.src_surf_stride if side == "src" else self.dst_surf_stride) << 5
        s = np.arange(self.surfaces, dtype=np.int64)[:, None]
        l_ = np.arange(self.lines, dtype=np.int64)[None, :]
        return base + s * ss + l_ * ls


def _check(cmd: BdmaCommand, options: ModelOptions, index: int) -> None:
    where = f"BDMA command {index}" if index else "BDMA"
    if options.semantics == "rtl":
        for reg, n in (("CFG_LINE_REPEAT", cmd.line_repeat), ("CFG_SURF_REPEAT", cmd.surf_repeat)):
            if n >= _RTL_REPEAT_LIMIT:
                raise InvalidLayer(
                    f"{where}: BDMA.{reg}.NUMBER = {n} needs more than 13 bits; the RTL's store side "
                    f"keeps only NUMBER[12:0] (NV_NVDLA_BDMA_load.v ld2st_wr_pd) and would write fewer "
                    f"lines than it reads")  # fmt: skip
    if cmd.total_bytes > MAX_COPY_BYTES:
        raise UnitNotModelled(f"BDMA: a copy of {cmd.total_bytes} bytes is larger than the model handles "
                              f"({MAX_COPY_BYTES} bytes)")  # fmt: skip


def _copy(cmd: BdmaCommand, mem: MemoryPort | DmaPorts, index: int) -> None:
    src_mem = port_memory(mem, cmd.src_ram_type)
    dst_mem = port_memory(mem, cmd.dst_ram_type)
    src_rows, dst_rows = cmd.row_starts("src"), cmd.row_starts("dst")
    if src_mem is dst_mem and _overlap(src_rows, dst_rows, cmd.line_bytes):
        where = f"BDMA command {index}" if index else "BDMA"
        raise InvalidLayer(
            f"{where}: the bytes written (CFG_DST_ADDR/CFG_DST_LINE/CFG_DST_SURF) overlap the bytes read "
            f"(CFG_SRC_ADDR/CFG_SRC_LINE/CFG_SRC_SURF) on the same memory port; the result would depend on "
            f"how far the reads run ahead of the writes")  # fmt: skip
    data = gather_rows(src_mem, src_rows, cmd.line_bytes)
    scatter_rows(dst_mem, dst_rows, data)


def _stats(group: int) -> dict[tuple[str, str], int]:
    # The model has no memory stalls: the group's stall counters load 0 at completion.
    return {("BDMA", f"STATUS_GRP{group}_READ_STALL"): 0, ("BDMA", f"STATUS_GRP{group}_WRITE_STALL"): 0}


def run_bdma_group(commands: Sequence[BdmaCommand], mem: MemoryPort | DmaPorts, options: ModelOptions,
                   *, group: int = 0) -> LayerResult:  # fmt: skip
    """Execute a launched group: the commands queued since the previous launch, in order.
    Every command is checked before any byte moves. Returns the group's statistics
    (``STATUS_GRP<group>_READ/WRITE_STALL``); ``elements`` is the number of bytes copied."""
    if group not in (0, 1):
        raise ValueError(f"BDMA group must be 0 or 1, not {group!r}")
    if len(commands) > QUEUE_DEPTH:
        raise InvalidLayer(f"BDMA: {len(commands)} commands queued; the command queue holds {QUEUE_DEPTH}")
    many = len(commands) > 1
    for i, cmd in enumerate(commands, 1):
        _check(cmd, options, i if many else 0)
    for i, cmd in enumerate(commands, 1):
        _copy(cmd, mem, i if many else 0)
    res = LayerResult(stats=_stats(group), elements=sum(c.total_bytes for c in commands))
    if not commands:
        res.notes.append("empty group: nothing copied, no interrupt")
    return res


def run_bdma(view: RegisterView, mem: MemoryPort | DmaPorts, options: ModelOptions, *, group: int = 0) -> LayerResult:
    """Execute the one copy command the BDMA registers currently describe, as group ``group``
    (the usual program: CFG_* then CFG_OP.EN = 1 then CFG_LAUNCH<group> = 1)."""
    return run_bdma_group([BdmaCommand.from_registers(view)], mem, options, group=group)
