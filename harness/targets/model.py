"""The ``model`` target: an in-process virtual NVDLA on the bit-exact reference model.

It behaves like the hardware at the register level (semantics doc sections 7 and 8):

* a register file with reset values; read-only fields ignore writes; ``D_*`` registers exist
  once per register group, ``S_POINTER.PRODUCER`` selects the group CSB accesses address,
  ``S_POINTER.CONSUMER`` is the group the unit executes next;
* the LUT access ports of SDP and CDP with their auto-increment rules (RTL or C model);
* GLB interrupt status (write-1-to-clear), mask and set registers; an interrupt line;
* a sparse external memory per port (``pri_mem``; ``sec_mem`` where the profile has one);
* on ``D_OP_ENABLE`` of a unit's consumer group the layer runs on the reference model once
  every engine of the layer is enabled (e.g. SDP + SDP_RDMA; CDMA/CSC/CMAC/CACC + SDP for a
  convolution); its outputs are in memory at once, but it *completes* only as time passes:
* time passes while the host waits, as on the hardware. Completion events queue in hardware
  order (CDMA data, CDMA weights, CACC, SDP, PDP); one fires when the host waits for the
  interrupt (``wait_irq``) while nothing it has not seen yet is pending. The first event of a
  layer completes it (statistics loaded, OP_EN cleared, consumer
  pointers toggled, a layer waiting in the other group starts); each raises its done bit.
  A host that polls ``S_INTR_STATUS`` instead sees the next unit finish on its second read in
  a row that finds nothing new (nv_full's tests clear the status and read 0 once right after;
  they also poll for BDMA done without waiting; the serial link has no interrupt line).
  So a host that reads ``D_OP_ENABLE`` right after setting it sees 1 (nv_full's traces check
  that), a host that clears every status bit and waits again sees the next unit finish (nv_full's
  traces wait once per unit), and a host that waits for one unit's bit sees the others
  accumulate (the v2 traces) — on a local link and over a serial board alike.

Units the reference model does not cover raise :class:`UnitNotModelled` from the
``D_OP_ENABLE`` write, naming the unit: the harness reports the test as skipped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ...drivers.profiles import HardwareProfile, load_profile
from ...drivers.regmap import Register, RegisterMap, RegisterMapError
from ...drivers.transport import Transport, TransportError
from .memory import RecordingMemory, SparseMemory
from ..refmodel.base import DmaPorts, EventSink, InvalidLayer, LayerResult, ModelOptions, RegisterView, UnitNotModelled
from .model_layers import Layer, LayerModel
from .model_views import GroupView, RdmaIdleView, RegisterSource, ram_type_fields
from ...semantics import Semantics

__all__ = ["ModelTarget", "UnitNotModelled", "LayerConfigError"]


class LayerConfigError(TransportError):
    """The model refuses a layer whose configuration the hardware does not support."""

LUT_DEPTH = {"LE": 65, "LO": 257}

CONV_BLOCKS = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")

#: the order in which a layer's units finish on the hardware (nv_full's conv traces wait for
#: CDMA data, CDMA weights, CACC and SDP done in this order, one at a time)
COMPLETION_ORDER = ("BDMA", "CDMA_DAT", "CDMA_WT", "CACC", "SDP", "CDP", "PDP", "RUBIK")

#: a host polling GLB S_INTR_STATUS sees the next unit finish on its second read in a row that
#: finds nothing new pending (nv_full's sanity3 clears the status and reads 0 once, right away;
#: its sanity1 polls for BDMA done with no wait; the serial link has no interrupt line and polls)
IDLE_POLLS_PER_EVENT = 2


@dataclass
class _LutPort:
    """State of one S_LUT_ACCESS_CFG/DATA port."""

    addr: int = 0
    table: int = 0  # 0 = LE, 1 = LO
    write: int = 0  # LUT_ACCESS_TYPE: 0 = READ, 1 = WRITE
    cfg_written: int = 0


class ModelTarget(Transport):
    """Virtual NVDLA. ``ModelTarget("nv_small")``; use as a context manager.

    Args:
        profile: hardware profile name or object.
        semantics: ``"rtl"`` (default) or ``"cmod"`` for every [DIFF] of the semantics doc.
    """

    def __init__(self, profile: HardwareProfile | str = "nv_small", *, semantics: Semantics = "rtl",
                 record_reads: bool = False, polls_per_event: int | None = None,
                 bugs: list[str] | None = None, coverage: EventSink | bool | None = None) -> None:  # fmt: skip
        super().__init__()
        # functional coverage (harness/analysis/coverage.py): the layers feed it (None/False: none); results never change
        self.coverage: EventSink | None = None if isinstance(coverage, bool) else coverage
        self.profile = load_profile(profile) if isinstance(profile, str) else profile
        self.profile_name = self.profile.name
        self.regmap: RegisterMap = self.profile.regmap
        self.options = ModelOptions.for_profile(self.profile, semantics)
        # injected datapath bugs (harness/targets/faults.py): this target only, never a reference
        from .faults import parse_bug

        self.bugs = [parse_bug(b, self.regmap) for b in (bugs or [])]
        # status polls in a row that let the next unit finish (None: IDLE_POLLS_PER_EVENT; 0: never)
        self.polls_per_event = IDLE_POLLS_PER_EVENT if polls_per_event is None else polls_per_event
        # record_reads: which bytes the layers' DMA engines read (poison only what a layer writes: harness.traces)
        mem_class = RecordingMemory if record_reads else SparseMemory
        self.memories: dict[str, SparseMemory] = {"pri_mem": mem_class()}
        if self.profile.has("sec_mem"):
            self.memories["sec_mem"] = mem_class()
        self.layers_run: list[tuple[str, int, LayerResult]] = []
        # live counters that persist across layers (RTL [DIFF] 8.2: a disabled counter is frozen)
        self._live: dict[str, object] = {}
        self._regs: dict[tuple[int, int], int] = {}
        self._by_addr: dict[int, Register] = {r.address: r for r in self.regmap.registers()}
        self._reset_regs = {(r.address, g): r.reset for r in self._by_addr.values() for g in ((0, 1) if r.dual else (0,))}
        # lookups resolved once per target (the register map never changes): see _register,
        # _field_at, _write32 (ordinary writable registers) and _group_of (S_POINTER.PRODUCER)
        self._reg_by_name: dict[tuple[str, str], Register] = {}
        self._field_by_name: dict[tuple[str, str, str], tuple[int, bool, int, int]] = {}
        self._plain: dict[int, tuple[int, str | None, tuple[tuple[int, int], int, int] | None]] = {}
        self._plain_reads: dict[int, tuple[tuple[int, int], int, int]] = {}
        self._producer: dict[str, tuple[int, int, int]] = {}
        self._luts: dict[str, dict[str, np.ndarray]] = {}
        self._lut_ports: dict[str, _LutPort] = {}
        self._runners: dict[LayerModel, Callable[..., LayerResult]] = {}  # layer model entry points, imported once
        self._done_bits: dict[tuple[Layer, tuple[int, ...]], tuple[int, ...]] = {}  # see _run
        # units -> the (field, value) reads of the last precision check that passed
        self._precisions_passed: dict[tuple[str, ...], tuple[tuple[tuple[str, ...], int], ...]] = {}
        # completion events: (GLB S_INTR_STATUS bits, what completes the layer or None)
        self._events: deque[tuple[int, Callable[[], None] | None]] = deque()
        self._unseen = 0  # status bits raised that no status read has returned yet
        self._idle_polls = 0  # status reads in a row that found nothing new pending
        self._reset_state()
        self._inline_writes = type(self)._write32 is ModelTarget._write32  # see write32
        self._inline_reads = type(self)._read32 is ModelTarget._read32  # see read32

    def describe(self) -> str:
        return f"model target ({self.profile.name}, {self.options.semantics} semantics)"

    # ---- state ------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self._regs.clear()
        self._regs.update(self._reset_regs)
        # The CBUF flush after reset takes time (CDMA S_CBUF_FLUSH_STATUS.FLUSH_DONE): the first read after
        # reset sees it running (nv_full's googlenet trace reads 0 early on), later reads see it done.
        self._flush_reads = 0
        self._luts = {u: {t: np.zeros(n, dtype=np.uint16) for t, n in LUT_DEPTH.items()} for u in ("SDP", "CDP")}
        self._live = {}
        self._lut_ports = {u: _LutPort() for u in ("SDP", "CDP")}
        self._events = deque()
        self._unseen = 0
        self._idle_polls = 0
        self._bdma_queue: list = []  # BDMA commands queued by CFG_OP.EN since the last launch

    def _reset(self) -> None:
        self._reset_state()

    def register_view(self, groups: dict[str, int], default: int = 0) -> GroupView:
        """The layer models' view of the registers: ``groups`` names the group each block executes
        (the others: ``default``); it reads this target's register file as it is then."""
        return GroupView(RegisterSource(self._regs, self._field_by_name, self._field_at, self._reg_by_name,
                                        self._register, self._luts, self.profile), groups, default)

    def _register(self, block: str, reg: str) -> Register:
        """``regmap.register(block, reg)``, looked up once (a failed lookup raises every time)."""
        r = self._reg_by_name.get((block, reg))
        if r is None:
            r = self._reg_by_name[(block, reg)] = self.regmap.register(block, reg)
        return r

    def _field_at(self, block: str, reg: str, field: str) -> tuple[int, bool, int, int]:
        """(address, dual, lsb, unshifted mask) of a field, looked up once."""
        got = self._field_by_name.get((block, reg, field))
        if got is None:
            f = (r := self._register(block, reg)).field(field)
            got = self._field_by_name[(block, reg, field)] = (r.address, r.dual, f.lsb, f.max_value)
        return got

    def _group_of(self, r: Register) -> int:
        if not r.dual:
            return 0
        got = self._producer.get(r.block)  # (S_POINTER address, PRODUCER lsb, mask)
        if got is None:
            f = (ptr := self._register(r.block, "S_POINTER")).field("PRODUCER")
            got = self._producer[r.block] = (ptr.address, f.lsb, f.max_value)
        return (self._regs[(got[0], 0)] >> got[1]) & got[2]

    def _value(self, r: Register, group: int) -> int:
        return self._regs[(r.address, group if r.dual else 0)]

    def _set(self, block: str, reg: str, value: int, group: int = 0) -> None:
        r = self._register(block, reg)
        self._regs[(r.address, group if r.dual else 0)] = value

    def _get(self, block: str, reg: str, group: int = 0) -> int:
        r = self._register(block, reg)
        return self._regs[(r.address, group if r.dual else 0)]

    def _field(self, block: str, reg: str, field: str, group: int = 0) -> int:
        address, dual, shift, mask = self._field_at(block, reg, field)
        return (self._regs[(address, group if dual else 0)] >> shift) & mask

    # ---- register access ------------------------------------------------------------
    def _lookup(self, address: int) -> Register:
        r = self._by_addr.get(address)
        if r is None:
            raise TransportError(f"CSB access to unmapped address {address:#x} on {self.profile.name}")
        return r

    def read32(self, address: int) -> int:
        """:meth:`Transport.read32`, a register whose read has no side effect (one :meth:`_read32` has
        seen) done here with the same checks and observers (unless a subclass has its own ``_read32``)."""
        ptr = self._plain_reads.get(address) if self._inline_reads and self._is_open else None
        if ptr is None:
            return super().read32(address)
        value = self._regs[(address, (self._regs[ptr[0]] >> ptr[1]) & ptr[2])]
        if self._observers:
            self._notify("R", address, value)
        return value

    def _read32(self, address: int) -> int:
        r = self._lookup(address)
        if r.name == "S_LUT_ACCESS_DATA":
            return self._lut_data_read(r.block)
        if r.name == "S_LUT_ACCESS_CFG":
            return self._lut_cfg_read(r.block)
        if r.block == "CDMA" and r.name == "S_CBUF_FLUSH_STATUS":
            self._flush_reads += 1
            return r.field("FLUSH_DONE").insert(self._value(r, 0), int(self._flush_reads > 1))
        if r.block == "GLB" and r.name == "S_INTR_STATUS":
            fired = 0
            if self.polls_per_event and self._events and not (self._pending() & self._unseen):
                self._idle_polls += 1
                if self._idle_polls >= self.polls_per_event:
                    fired = self._fire()
            self._unseen &= fired  # everything else this read returns has now been seen
            return self._value(r, 0)
        group = self._group_of(r)
        # a read without side effects, remembered for read32 with its group's source: the producer
        # pointer's ((address, 0), lsb, mask) for a dual register, else mask 0 (group 0)
        p_address, p_lsb, p_mask = self._producer[r.block] if r.dual else (address, 0, 0)
        self._plain_reads[address] = ((p_address, 0), p_lsb, p_mask)
        return self._value(r, group)

    def write32(self, address: int, value: int, *, posted: bool = True) -> None:
        """:meth:`Transport.write32`, an ordinary register's (one :meth:`_write32` has seen) done here
        with the same checks and observers (unless a subclass has its own ``_write32``)."""
        plain = self._plain.get(address) if self._inline_writes and self._is_open and 0 <= value < 1 << 32 else None
        if plain is None:
            super().write32(address, value, posted=posted)
            return
        self._write_plain(address, value, plain)
        if self._observers:
            self._notify("W", address, value)

    def _write_plain(self, address: int, value: int, plain: tuple) -> None:
        """An ordinary writable register: ``plain`` is (mask, block or None, producer pointer or None)."""
        mask, op_block, ptr = plain
        group = (self._regs[ptr[0]] >> ptr[1]) & ptr[2] if ptr is not None else 0
        key = (address, group)
        self._regs[key] = (self._regs[key] & ~mask) | (value & mask)
        if op_block is not None and value & 1:
            self._op_enable(op_block, group)

    def _write32(self, address: int, value: int, posted: bool) -> None:
        plain = self._plain.get(address)
        if plain is not None:
            self._write_plain(address, value, plain)
            return
        r = self._lookup(address)
        block, name = r.block, r.name
        if name == "S_LUT_ACCESS_DATA":
            self._lut_data_write(block, value)
            return
        if name == "S_LUT_ACCESS_CFG":
            self._lut_cfg_write(block, r, value)
            return
        if block == "GLB" and name == "S_INTR_STATUS":  # write 1 to clear
            self._regs[(address, 0)] &= ~value & 0xFFFFFFFF
            return
        if block == "GLB" and name == "S_INTR_SET":
            self._regs[(self._register("GLB", "S_INTR_STATUS").address, 0)] |= value & r.writable_mask
            return
        if block == "BDMA" and (name == "CFG_OP" or name.startswith("CFG_LAUNCH")):
            self._bdma_write(r, value)
            return
        if not r.writable:
            return  # the hardware ignores writes to read-only registers
        # an ordinary register: remembered so that the next write to it takes the path above
        mask = r.writable_mask
        group = self._group_of(r)
        ptr = None
        if r.dual:  # S_POINTER.PRODUCER selects the group: ((address, 0), lsb, mask)
            p_address, p_lsb, p_mask = self._producer[block]
            ptr = ((p_address, 0), p_lsb, p_mask)
        self._plain[address] = (mask, block if name == "D_OP_ENABLE" else None, ptr)
        key = (address, group if r.dual else 0)
        self._regs[key] = (self._regs[key] & ~mask) | (value & mask)
        if name == "D_OP_ENABLE" and value & 1:
            self._op_enable(block, group)

    # ---- LUT access port (semantics doc 7) --------------------------------------------------
    def _lut_present(self, unit: str) -> bool:
        return unit == "CDP" or self.profile.has("sdp_lut")

    def _lut_cfg_write(self, unit: str, r: Register, value: int) -> None:
        p = self._lut_ports[unit]
        p.cfg_written = value & r.writable_mask
        p.addr = r.field("LUT_ADDR").extract(value)
        p.table = r.field("LUT_TABLE_ID").extract(value)
        p.write = r.field("LUT_ACCESS_TYPE").extract(value)
        self._regs[(r.address, 0)] = p.cfg_written

    def _lut_cfg_read(self, unit: str) -> int:
        p = self._lut_ports[unit]
        r = self._register(unit, "S_LUT_ACCESS_CFG")
        if unit == "SDP" and self.options.semantics == "rtl":
            return p.cfg_written if self._lut_present(unit) else 0
        value = r.field("LUT_ADDR").insert(0, p.addr & 0x3FF)
        if self.options.semantics == "rtl":  # CDP RTL: id/type as written
            value = r.field("LUT_TABLE_ID").insert(value, p.table)
            value = r.field("LUT_ACCESS_TYPE").insert(value, p.write)
        return value  # cmod: id/type read as 0

    def _table(self, unit: str, p: _LutPort) -> np.ndarray:
        return self._luts[unit]["LO" if p.table else "LE"]

    def _advance(self, unit: str, p: _LutPort) -> None:
        last = LUT_DEPTH["LO" if p.table else "LE"] - 1
        if unit == "SDP" and self.options.semantics == "rtl":
            p.addr = (p.addr + 1) & 0x3FF  # 10-bit counter, no limit
        else:
            p.addr = min(p.addr + 1, last)  # sticks at the last entry

    def _lut_data_write(self, unit: str, value: int) -> None:
        p = self._lut_ports[unit]
        if not self._lut_present(unit):
            return
        tbl = self._table(unit, p)
        if p.write:
            if p.addr < tbl.size:
                tbl[p.addr] = value & 0xFFFF
            self._advance(unit, p)
        elif unit == "SDP" and self.options.semantics == "rtl":
            self._advance(unit, p)  # SDP RTL: address increments even on a READ-type data write

    def _write_burst(self, address: int, values: Iterable[int], incr: bool) -> None:
        """A burst to a LUT data port (``incr=False``: a table load) does per word what :meth:`_lut_data_write` does."""
        r = self._by_addr.get(address)
        if incr or r is None or r.name != "S_LUT_ACCESS_DATA":
            super()._write_burst(address, values, incr)
            return
        unit, p = r.block, self._lut_ports[r.block]
        if not self._lut_present(unit):
            return
        tbl, addr, v = self._table(unit, p), p.addr, np.asarray(list(values), dtype=np.int64) & 0xFFFF
        wrap = unit == "SDP" and self.options.semantics == "rtl"  # see _advance
        last = LUT_DEPTH["LO" if p.table else "LE"] - 1
        if p.write and addr + v.size <= tbl.size:  # entries addr.. in turn
            tbl[addr : addr + v.size] = v
        elif p.write and v.size:  # word i goes to a[i]; where several reach one entry the last one stays
            a = addr + np.arange(v.size)
            a = a & 0x3FF if wrap else np.concatenate([a[:1], np.minimum(a[1:], last)])  # sticks at the last entry
            at, first = np.unique(a[a < tbl.size][::-1], return_index=True)
            tbl[at] = v[a < tbl.size][::-1][first]
        p.addr = ((addr + v.size) & 0x3FF) if wrap else (min(addr + v.size, last) if p.write and v.size else addr)

    def _lut_data_read(self, unit: str) -> int:
        p = self._lut_ports[unit]
        if not self._lut_present(unit):
            return 0
        tbl = self._table(unit, p)
        value = int(tbl[p.addr]) if p.addr < tbl.size else 0
        if not p.write:
            self._advance(unit, p)
            return value
        # DATA read while the port is in WRITE mode
        if self.options.semantics == "cmod":
            return 0
        if unit == "SDP":
            self._advance(unit, p)
        return value

    # ---- layer execution --------------------------------------------------------------------
    def _op_enable(self, block: str, group: int) -> None:
        """OP_EN set in ``group`` of ``block``: run the layer once all its engines are enabled
        and the group is the one the unit consumes next."""
        self._clear_stats(block, group)
        self._try_start(block, group)

    def _try_start(self, block: str, group: int) -> tuple[str, ...]:
        """Run the layer of ``block``'s ``group`` if every engine is enabled in the group it
        executes; returns the blocks of the layer started (empty: it waits)."""
        layer = self._layer_of(block, group)
        if layer is None:
            return ()
        gmap = layer.group_map(group)
        if gmap.get(block, group) != group:
            return ()
        if not all(self._field(b, "D_OP_ENABLE", "OP_EN", gmap[b]) for b in layer.blocks):
            return ()  # an engine of the layer is not enabled yet
        if any(self._field(b, "S_POINTER", "CONSUMER") != gmap[b] for b in layer.blocks):
            return ()  # waits until the consumer pointer reaches this group
        if layer.runner is LayerModel.CONV and self._field("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE", gmap["SDP"]) != 1:
            return ()  # the SDP still has a standalone layer in the group it executes next
        self._run(layer, group)
        return layer.blocks

    def _layer_of(self, block: str, group: int) -> Layer | None:
        """The layer that ``block``'s OP_EN belongs to, decoded from the group's registers."""
        if block == "RBK":
            return Layer(("RBK",), ("RUBIK",), LayerModel.RUBIK)
        f = lambda b, r, fld: self._field(b, r, fld, group)  # noqa: E731
        # each engine (SDP and its RDMA, PDP and its RDMA, the conv pipeline in lockstep) executes the
        # group its own consumer pointer names (the enabled block: ``group``): its register groups
        # are its own, and they part when a layer leaves an engine out (a flying input leaves the
        # RDMA idle, its pointer where it was); nothing on the flying data path names a group
        cons = lambda b: group if b == block or (b in CONV_BLOCKS and block in CONV_BLOCKS) \
            else self._field(b, "S_POINTER", "CONSUMER")  # noqa: E731
        # SDP's input is its own group's choice: an SDP_RDMA enabled for a fused convolution (its
        # operands) belongs to that convolution and waits for it, never runs as a standalone SDP
        sdp_group = cons("SDP")
        sdp_flying = self._field("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE", sdp_group) == 1
        mk = lambda blocks, done, runner: Layer(blocks, done, runner, tuple(
            bg for bg in ((b, cons(b)) for b in blocks) if bg[1] != group))  # noqa: E731
        to_pdp = self._field("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST", sdp_group) == 1
        if block in CONV_BLOCKS or (block in ("SDP", "SDP_RDMA") and sdp_flying):
            blocks = ("SDP", *CONV_BLOCKS) + (("PDP",) if to_pdp else ())
            if self._field("SDP_RDMA", "D_OP_ENABLE", "OP_EN", cons("SDP_RDMA")):
                # a fused conv whose SDP reads operands (NVDLA's firmware enables SDP_RDMA):
                # SDP_RDMA completes with the layer (OP_EN cleared, its pointer toggled)
                blocks += ("SDP_RDMA",)
            return mk(blocks, ("SDP", "CACC", "CDMA_DAT", "CDMA_WT") + (("PDP",) if to_pdp else ()), LayerModel.CONV)
        if block in ("SDP", "SDP_RDMA") or (block == "PDP" and f("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE") == 0):  # ON_FLYING
            if to_pdp:
                return mk(("SDP", "SDP_RDMA", "PDP"), ("SDP", "PDP"), LayerModel.SDP_PDP)
            return mk(("SDP", "SDP_RDMA"), ("SDP",), LayerModel.SDP)
        if block in ("PDP", "PDP_RDMA"):
            return mk(("PDP", "PDP_RDMA"), ("PDP",), LayerModel.PDP)
        if block in ("CDP", "CDP_RDMA"):
            return mk(("CDP", "CDP_RDMA"), ("CDP",), LayerModel.CDP)
        return None

    def _clear_stats(self, block: str, group: int) -> None:
        """RTL: a group's hardware-written statistics read 0 from OP_EN set until completion (doc 8.2)."""
        if self.options.semantics != "rtl":
            return
        b = self.regmap.blocks.get(block)
        if b is None:
            return
        for r in b.registers.values():
            if r.dual and not r.writable and r.name != "D_OP_ENABLE":
                self._regs[(r.address, group)] = 0

    def _run(self, layer: Layer, group: int) -> None:
        runner = self._runners.get(layer.runner) or self._runners.setdefault(layer.runner, layer.runner.load())
        gmap = layer.group_map(group)
        view: RegisterView = self.register_view(gmap, group)
        if "SDP" in layer.blocks and "SDP_RDMA" not in layer.blocks and not self._field("SDP_RDMA", "D_OP_ENABLE", "OP_EN", gmap["SDP"]):
            view = RdmaIdleView(view)
        if self.bugs:
            from .faults import FaultyView

            view = FaultyView(view, self.regmap, self.bugs)
        self._check_precisions(layer, view)
        mem = self._memory_of(layer, view)
        opts = self.options
        sink = self._coverage_sink()
        if sink is not None:
            from dataclasses import replace

            opts = replace(self.options, coverage=sink)
        recorders = [m for m in self.memories.values() if isinstance(m, RecordingMemory)]
        for m in recorders:
            m.recording = True
        try:
            if "SDP" in layer.blocks:
                live = self._live.get("SDP")
                if live is None:
                    from ..refmodel.sdp import SdpLiveCounters

                    live = self._live["SDP"] = SdpLiveCounters()
                result = runner(view, mem, opts, live=live)
            else:
                result = runner(view, mem, opts)
        except InvalidLayer as e:
            raise LayerConfigError(f"{layer.done[0]} layer refused: {e}") from None
        finally:
            for m in recorders:
                m.recording = False
        if any(b.stuck for b in self.bugs):
            from .outputs import output_cubes
            from .faults import apply_stuck_bits

            regs = {r.address: self._value(r, group) for r in self._by_addr.values()}
            apply_stuck_bits(self.bugs, [c for c in output_cubes(regs, self.profile) if c.unit in layer.done],
                             self.memories)
        self.layers_run.append((layer.done[0], group, result))
        if sink is not None:
            sink.event("layer", unit=layer.done[0], blocks=layer.blocks, view=view, profile=self.profile,
                       stats=result.stats)
        unit_block = {"CDMA_DAT": "CDMA", "CDMA_WT": "CDMA"}
        units = sorted(layer.done, key=COMPLETION_ORDER.index)
        groups = tuple(gmap.get(unit_block.get(u, u), group) for u in units)  # each done unit's own group
        bits = self._done_bits.get((layer, groups))
        if bits is None:  # GLB S_INTR_STATUS done bits in completion order, found once per layer kind and groups
            done = (f"{u}_DONE_STATUS{g}" for u, g in zip(units, groups, strict=True))
            bits = self._done_bits[(layer, groups)] = tuple(
                m << lsb for _, _, lsb, m in (self._field_at("GLB", "S_INTR_STATUS", d) for d in done))
        self._events.append((bits[0], lambda: self._complete(layer, group, result)))
        self._events.extend((b, None) for b in bits[1:])

    def _coverage_sink(self) -> EventSink | None:
        return self.coverage

    def _complete(self, layer: Layer, group: int, result: LayerResult) -> None:
        """The layer finishes: statistics loaded, OP_EN cleared, consumer pointers toggled; a
        layer already enabled in the other group starts."""
        gmap = layer.group_map(group)
        for (b, reg), v in result.stats.items():
            try:
                self._set(b, reg, int(v) & 0xFFFFFFFF, gmap.get(b, group))
            except RegisterMapError:
                pass
        for b in layer.blocks:
            self._set(b, "D_OP_ENABLE", 0, gmap[b])
            address, _, lsb, mask = self._field_at(b, "S_POINTER", "CONSUMER")
            key = (address, 0)
            self._regs[key] = (self._regs[key] & ~(mask << lsb)) | ((gmap[b] ^ 1) << lsb)
        if not layer.groups:
            other = group ^ 1
            if not self._field(layer.blocks[0], "D_OP_ENABLE", "OP_EN", other):
                return  # the next layer of the other group would need it enabled too (_layer_of keeps it)
            nxt = self._layer_of(layer.blocks[0], other)
            if nxt is not None and all(self._field(b, "D_OP_ENABLE", "OP_EN", other) for b in nxt.blocks):
                self._run(nxt, other)
            return
        started: set[str] = set()  # engines in different groups: each may have a layer waiting
        for b in layer.blocks:
            if b not in started and self._field(b, "D_OP_ENABLE", "OP_EN", gmap[b] ^ 1):
                started.update(self._try_start(b, gmap[b] ^ 1))

    # ---- BDMA: a command queue, not a ping-pong unit (refmodel/bdma.py docstring) ------------
    def _bdma_write(self, r: Register, value: int) -> None:
        """``CFG_OP.EN`` queues a snapshot of the CFG registers (20 deep); ``CFG_LAUNCHn``
        runs every command queued since the last launch as group n, which completes with GLB
        ``BDMA_DONE_STATUSn`` (an empty launch raises nothing). RTL: both keep the value written."""
        from ..refmodel.bdma import QUEUE_DEPTH, BdmaCommand, run_bdma_group

        self._regs[(r.address, 0)] = value & r.writable_mask
        if not value & 1:
            return
        if r.name == "CFG_OP":
            if len(self._bdma_queue) >= QUEUE_DEPTH:
                raise LayerConfigError(f"BDMA refused: CFG_OP with {QUEUE_DEPTH} commands already queued (the queue is full)")
            self._bdma_queue.append(BdmaCommand.from_registers(self.register_view({})))
            self._bdma_status()
            return
        g = int(r.name[-1])
        cmds, self._bdma_queue = self._bdma_queue, []
        st = self._register("BDMA", "STATUS")
        self._set("BDMA", "STATUS", st.field(f"GRP{g}_BUSY").insert(self._get("BDMA", "STATUS"), 1))
        for k in ("READ", "WRITE"):
            self._set("BDMA", f"STATUS_GRP{g}_{k}_STALL", 0)
        if not cmds:
            self._bdma_status()
            return
        for i, c in enumerate(cmds):
            if 0 in (c.src_ram_type, c.dst_ram_type) and "sec_mem" not in self.memories:
                raise LayerConfigError(f"BDMA refused: command {i} CFG_CMD selects CVSRAM (RAM_TYPE 0), which "
                                       f"{self.profile.name} does not have")  # fmt: skip
        try:
            result = run_bdma_group(cmds, DmaPorts(dict(self.memories)), self.options, group=g)
        except InvalidLayer as e:
            raise LayerConfigError(f"BDMA refused: {e}") from None
        self.layers_run.append(("BDMA", g, result))

        def complete() -> None:
            for (b, reg), v in result.stats.items():
                self._set(b, reg, int(v) & 0xFFFFFFFF)
            self._set("BDMA", "STATUS", st.field(f"GRP{g}_BUSY").insert(self._get("BDMA", "STATUS"), 0))
            self._bdma_status()

        self._events.append((self._register("GLB", "S_INTR_STATUS").field(f"BDMA_DONE_STATUS{g}").mask, complete))
        self._bdma_status()

    def _bdma_status(self) -> None:
        from ..refmodel.bdma import QUEUE_DEPTH

        st = self._register("BDMA", "STATUS")
        v = st.field("FREE_SLOT").insert(self._get("BDMA", "STATUS"), QUEUE_DEPTH - len(self._bdma_queue))
        idle = not self._bdma_queue and not any(st.field(f"GRP{g}_BUSY").extract(v) for g in (0, 1))
        self._set("BDMA", "STATUS", st.field("IDLE").insert(v, int(idle)))

    def _pending(self) -> int:
        return self._get("GLB", "S_INTR_STATUS") & ~self._get("GLB", "S_INTR_MASK")

    def _fire(self) -> int:
        """Time passes until the next completion event; returns the status bits it raised."""
        bits, complete = self._events.popleft()
        if complete is not None:
            complete()
        status = self._register("GLB", "S_INTR_STATUS")
        self._regs[(status.address, 0)] |= bits
        self._unseen |= bits
        self._idle_polls = 0
        return bits

    def run_until_idle(self) -> None:
        """Let every queued completion happen (as if the host had waited long enough)."""
        while self._events:
            self._fire()

    def _memory_of(self, layer: Layer, view: RegisterView) -> DmaPorts:
        """The memory ports of the layer's DMA engines (:func:`.model_views.ram_type_fields`; a layer
        may use both). A port the profile lacks is refused naming the register."""
        if "sec_mem" in self.memories:  # with both ports there is nothing to refuse
            return DmaPorts(dict(self.memories))
        for blk, reg, fld in ram_type_fields(layer.blocks, view):
            if view.field(blk, reg, fld) != 1:
                raise LayerConfigError(
                    f"{layer.done[0]} layer refused: {blk}.{reg}.{fld} selects the secondary memory port "
                    f"(CV), which {self.profile.name} does not have; program MC (1)")
        return DmaPorts(dict(self.memories))

    def _check_precisions(self, layer: Layer, view: RegisterView) -> None:
        """Refuse a layer whose precision settings are not in seed 000's conversion tables (a check
        that passed is not repeated while the fields it read read the same)."""
        units = tuple(u for blk, u in (("CACC", "conv"), ("SDP", "sdp"), ("CDP", "cdp"), ("PDP", "pdp"))
                      if blk in layer.blocks)
        passed = self._precisions_passed.get(units)
        if passed is not None and all(view.field(*k) == v for k, v in passed):
            return
        from ..refmodel.validity import InvalidPrecisionConfig, check_config

        reads: list[tuple[tuple[str, ...], int]] = []

        def field(*key: str) -> int:
            reads.append((key, v := view.field(*key)))
            return v

        try:
            rows = check_config(field, units)
        except InvalidPrecisionConfig as e:
            raise LayerConfigError(f"{layer.done[0]} layer refused: {e}") from None
        for unit, row in rows.items():
            for prec in {"int8", "int16", "fp16"} & {row.input, row.output, row.pipeline, row.weight}:
                if not self.profile.has(prec):
                    raise LayerConfigError(
                        f"{layer.done[0]} layer refused: {unit.upper()} uses {prec.upper()}, which "
                        f"{self.profile.name} does not support (profile features: "
                        f"{', '.join(p for p in ('int8', 'int16', 'fp16') if self.profile.has(p))})")
        self._precisions_passed[units] = tuple(reads)

    # ---- interrupt line -------------------------------------------------------------------
    def irq_pending(self) -> bool:
        status = self._get("GLB", "S_INTR_STATUS")
        mask = self._get("GLB", "S_INTR_MASK")
        return bool(status & ~mask)

    def settled(self) -> bool:  # nothing queued: layers end on the host's accesses, never by themselves
        return not self._events

    def _wait_irq(self, timeout: float | None) -> bool:
        # Waiting lets the next unit finish unless the line is up for a bit the host has not
        # seen yet; with nothing queued the line is either up now or will never come up.
        if self._events and not (self._pending() & self._unseen):
            self._fire()
        return self.irq_pending()

    # ---- memory -----------------------------------------------------------------------------
    def _memory(self, port: str) -> SparseMemory:
        try:
            return self.memories[port]
        except KeyError:
            raise TransportError(
                f"{self.profile.name} has no memory port {port!r}; ports: {', '.join(self.memories)}") from None

    def _mem_write(self, address: int, data: np.ndarray, port: str) -> None:
        self._memory(port).write(address, data)

    def _mem_read(self, address: int, size: int, port: str) -> np.ndarray:
        return self._memory(port).read(address, size)
