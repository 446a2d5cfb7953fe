"""The runtime's part of running a loadable, in Python, with NVDLA's firmware driving the target.

What NVDLA's runtime (``umd/core/src/runtime/Runtime.cpp``), its test app (``umd/apps/runtime``)
and the Linux KMD (``kmd/port/linux``) do, in order:

1. **Memory**: every ALLOC memory entry gets a buffer; the KMD's allocations are zero-filled and
   page aligned, so each entry is placed at the next ``max(4096, alignment)`` boundary of the
   target's DRAM (from 0x80000000 on the primary port; SRAM entries on the secondary port from
   0x50000000) and its SET contents are written at their offsets (``Runtime::loadMemory``).
   Bound tensors (INPUT/OUTPUT) are buffers of the test app: the output zeroed (``Tensor2DIMG``),
   the input the image it is given; without one the app's input buffer stays as allocated, zero
   (``copyImageToInputTensor`` returns without copying when the image type is unknown).
2. **Tasks** in submit-list order (``Runtime::submitInternal``). A DLA1 task's address list is
   ``task.address_list`` mapped to (memory entry, offset) (``fillTaskAddressList``), handed to the
   firmware by ``dla_execute_task``; the KMD's ``dla_get_dma_address`` gives the entry's DMA
   address plus the offset, ``dla_data_read`` reads the entry from its start plus the offset the
   firmware asks (``nvdla_core_callbacks.c``). After each interrupt ``dla_isr_handler`` and
   ``dla_process_events`` run until the task completes. An EMU1 task runs on the CPU emulator
   (:mod:`.emulator`) over the same entries.
3. **Output**: the test app dumps the output tensor (bind id 0) as a ``DIMG`` (:mod:`.dimg`).
"""

from __future__ import annotations

import ctypes
import errno
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...drivers.profiles import HardwareProfile
from ...drivers.transport import Transport
from .descriptors import OP_CONTAINER, Cube, OpDesc, decode_network, decode_ops, is_legacy, upgrade_surfaces
from .dimg import DimgMeta, meta_for_tensor, pack_dimg
from .emulator import decode_emu_task, float_to_half_ties_away, run_emu_ops
from .fbs import (IFACE_DLA1, IFACE_EMU1, MEM_ALLOC, MEM_INPUT, MEM_OUTPUT, MEM_SET, AddressEntry, Loadable, LoadableError,
                  TaskEntry, TensorDesc)
from .firmware import Firmware, FirmwareError

__all__ = ["Placement", "address_entry", "check_span", "place_memory", "loadable_config", "check_profile", "RunResult", "run_loadable",
           "dla_ops", "input_from_file", "OpSnapshot", "entry_bytes"]

DRAM_BASE = 0x8000_0000
SRAM_BASE = 0x5000_0000
PAGE = 4096
COMPLETED = re.compile(r"Completed (\w+) operation index (\d+) ROI (\d+)")
MAX_EVENTS = 100_000
#: output surfaces kept for localisation in one run, in all
MAX_SNAPSHOT_BYTES = 256 << 20


@dataclass(frozen=True)
class Placement:
    """Where each memory entry lives: (port, address); entries without ALLOC have none."""

    where: dict[int, tuple[str, int]]

    def of(self, mem_id: int) -> tuple[str, int]:
        try:
            return self.where[mem_id]
        except KeyError:
            raise LoadableError(f"memory entry {mem_id} is not allocated (its flags lack ALLOC)") from None


def place_memory(ld: Loadable, profile: HardwareProfile) -> Placement:
    where: dict[int, tuple[str, int]] = {}
    cursor = {"pri_mem": DRAM_BASE, "sec_mem": SRAM_BASE}
    for m in ld.memory:
        if not m.flags & MEM_ALLOC:
            continue
        port = "pri_mem" if m.domain == 0 else "sec_mem"
        if port == "sec_mem" and not profile.has("sec_mem"):
            raise LoadableError(f"memory entry {m.id} is in SRAM (CVSRAM), which {profile.name} does not have")
        align = max(PAGE, m.alignment or 1)
        a = (cursor[port] + align - 1) // align * align
        where[m.id] = (port, a)
        cursor[port] = a + max(m.size, 1)
    return Placement(where)


def task_version(ld: Loadable, task_index: int) -> tuple[int, int, int]:
    """The firmware interface version a DLA1 task was written for: the version of the blob
    holding its network descriptor (address-list entry 0)."""
    t = ld.tasks[task_index]
    if not t.address_list:
        raise LoadableError(f"task {t.id}: an empty address list (entry 0 is the network descriptor)")
    m = ld.memory[ld.addresses[t.address_list[0]].mem_id]
    for c in m.contents if m.flags & MEM_SET else ():
        return ld.blob(c).version
    raise LoadableError(f"task {t.id}: its network descriptor (memory entry {m.id}) has no contents")


#: operations decoded from a loadable's DLA tasks in all (tasks sharing one network count each)
MAX_TOTAL_OPS = 1 << 16


def address_entry(ld: Loadable, task: TaskEntry, index: int, who: str) -> AddressEntry:
    """Address-list entry ``index`` of ``task``: the only way NVDLA's firmware and an EMU task
    name memory (LoadableError naming ``who`` for an index outside the list)."""
    if not 0 <= index < len(task.address_list):
        raise LoadableError(f"{who}: address-list index {index} outside its {len(task.address_list)} entries")
    return ld.addresses[task.address_list[index]]


def check_span(who: str, access: str, index: int, offset: int, size: int, room: int) -> None:
    """An access of ``size`` bytes at ``offset`` of address-list entry ``index`` stays within the
    ``room`` bytes of its memory entry, or its first page (NVDLA's KMD maps whole pages)."""
    if offset < 0 or size < 0 or offset + size > max(room, PAGE):
        raise LoadableError(f"{who}: {access} of {size} bytes at {offset} of address-list entry {index} "
                            f"beyond its {room} bytes")


def dla_ops(ld: Loadable, task_index: int) -> tuple[list[OpDesc], int]:
    """The operations of a DLA1 task from its descriptor blobs, and its LUT count (decoded once
    per task; all tasks together at most :data:`MAX_TOTAL_OPS` operations)."""
    key = ("dla_ops", task_index)
    if key in ld.derived:
        return ld.derived[key]
    t = ld.tasks[task_index]
    legacy = is_legacy(task_version(ld, task_index))

    def entry(i: int) -> memoryview:
        a = address_entry(ld, t, i, f"task {t.id}")
        return memoryview(entry_bytes(ld, a.mem_id))[a.offset:]

    nd = decode_network(entry(0))
    total = ld.derived.get("ops_total", 0) + nd.num_operations
    if total > MAX_TOTAL_OPS:
        raise LoadableError(f"task {t.id}: dla_network_desc.num_operations: the loadable's DLA tasks hold more than "
                            f"{MAX_TOTAL_OPS} operations in all (tasks sharing one network count each)")
    ld.derived["ops_total"] = total
    ops = [] if nd.num_operations == 0 else decode_ops(
        nd, entry(nd.dependency_graph_index), entry(nd.operation_desc_index), entry(nd.surface_desc_index), legacy)
    ld.derived[key] = (ops, nd.num_luts)
    return ops, nd.num_luts


def _upgrades(ld: Loadable, fw_version: tuple[int, int, int]) -> dict[int, bytes]:
    """Memory entries to write in the firmware's layout: the surface lists of pre-0.12 tasks
    when the firmware is 0.12 or later (:func:`~.descriptors.upgrade_surfaces`)."""
    out: dict[int, bytes] = {}
    if is_legacy(fw_version):
        return out
    for i, t in enumerate(ld.tasks):
        if t.interface != IFACE_DLA1 or not is_legacy(task_version(ld, i)):
            continue
        ops, _ = dla_ops(ld, i)
        a0 = ld.addresses[t.address_list[0]]
        nd = decode_network(memoryview(entry_bytes(ld, a0.mem_id))[a0.offset:])
        if not nd.num_operations:
            continue
        a = ld.addresses[t.address_list[nd.surface_desc_index]]
        raw = out.get(a.mem_id, entry_bytes(ld, a.mem_id))
        out[a.mem_id] = raw[:a.offset] + upgrade_surfaces([o.op_type for o in ops], raw[a.offset:])
    return out


def entry_bytes(ld: Loadable, mem_id: int) -> bytes:
    """The initial contents of a memory entry (zeros plus its SET blobs), built once per entry:
    together no more than the parser's expansion budget (:data:`~.fbs.MAX_EXPANDED_BYTES`)."""
    key = ("entry", mem_id)
    if key not in ld.derived:
        m = ld.memory[mem_id]
        buf = bytearray(m.size)
        if m.flags & MEM_SET:
            for c, off in zip(m.contents, m.offsets):
                b = ld.blob(c)
                buf[off:off + b.size] = b.data
        ld.derived[key] = bytes(buf)
    return ld.derived[key]


#: ``dla_conv_op_desc.data_format`` (byte 8 of the op container) of feature input; the pixel formats are
#: 0..35 (nvdla/sw ``dla_interface.h`` ``FORMAT_T_*`` / ``FORMAT_FEATURE``)
CONV_DATA_FORMAT_OFFSET, FORMAT_FEATURE = 8, 36


def _conv_pixel_input(ld: Loadable, task_index: int) -> set[int]:
    """Indices of the task's CONV operations whose input is an image (pixel surface): their
    ``dla_conv_op_desc.data_format`` is a pixel format, not ``FORMAT_FEATURE``."""
    ops, _ = dla_ops(ld, task_index)  # checks the indices and the blob sizes first
    if not any(op.name == "CONV" for op in ops):
        return set()
    t = ld.tasks[task_index]
    a0 = ld.addresses[t.address_list[0]]
    nd = decode_network(memoryview(entry_bytes(ld, a0.mem_id))[a0.offset:])
    a = ld.addresses[t.address_list[nd.operation_desc_index]]
    raw = memoryview(entry_bytes(ld, a.mem_id))[a.offset:]
    return {op.index for op in ops if op.name == "CONV"
            and raw[op.index * OP_CONTAINER + CONV_DATA_FORMAT_OFFSET] != FORMAT_FEATURE}


def loadable_config(ld: Loadable) -> dict:
    """What the loadable was compiled for, from its descriptors: the atom size of its feature
    surfaces (line stride / width of every in-memory feature cube: 8 bytes on nv_small, 32 on
    nv_full) and the units it uses (BDMA and Rubik exist only on nv_full). The image input of a
    CONV in pixel mode is no feature surface (its line stride is pixels x bytes per pixel, padded
    to the compiler's line alignment) and is not counted."""
    atoms: set[int] = set()
    units: set[str] = set()
    for i, t in enumerate(ld.tasks):
        if t.interface != IFACE_DLA1:
            continue
        ops, _ = dla_ops(ld, i)
        pixel = _conv_pixel_input(ld, i)
        for op in ops:
            units.add(op.name)
            for c in (op.src, op.dst):
                if c is op.src and op.index in pixel:
                    continue
                if c is not None and c.type != 2 and c.width and c.height > 1 and c.line_stride % c.width == 0 \
                        and op.name in ("CONV", "SDP", "PDP", "CDP"):
                    atoms.add(c.line_stride // c.width)
    return {"atoms": sorted(atoms), "units": sorted(units)}


def check_profile(ld: Loadable, profile: HardwareProfile, name: str = "loadable") -> None:
    """Refuse a loadable written for another configuration, naming both."""
    cfg = loadable_config(ld)
    atom = profile.atom_bytes
    wrong = [a for a in cfg["atoms"] if a != atom]
    if wrong:
        written = "nv_small (8-byte atoms)" if wrong[0] == 8 else f"a {wrong[0]}-byte-atom configuration (nv_full)"
        raise LoadableError(f"{name} was written for {written}: its feature surfaces have {wrong[0]}-byte atoms "
                            f"(line stride / width), but profile {profile.name} has {atom}-byte atoms")
    for unit, feat in (("BDMA", "bdma"), ("RUBIK", "rubik"), ("PDP", "pdp"), ("CDP", "cdp")):
        if unit in cfg["units"] and not profile.has(feat):
            raise LoadableError(f"{name} uses {unit}, which profile {profile.name} does not have (nv_full does)")


def input_from_file(path: str, tensor: TensorDesc, data: bytes | None = None) -> bytes:
    """A user's input: a PGM (P5, 8-bit) converted as the test app's ``createImageCopy`` does
    (FP16: ``half(float(pixel) - mean) / normalize`` with mean 0, normalize 1, into the
    tensor's 16-channel atoms), or a raw tensor of exactly the tensor's size. ``data``: the
    file's bytes, already read (harness/loadables/check.py reads only regular files)."""
    if data is None:
        with open(path, "rb") as f:
            data = f.read(min(tensor.size, 1 << 28) + (1 << 20))
    if data[:2] == b"P5":
        m = re.match(rb"P5\s+(?:#[^\n]*\n\s*)*(\d+)\s+(\d+)\s+(\d+)\s", data)
        if not m:
            raise LoadableError(f"{path}: a malformed PGM header")
        w, h, maxval = (int(v) for v in m.groups())
        if maxval > 255 or w * h > 1 << 24:
            raise LoadableError(f"{path}: PGM {w}x{h} maxval {maxval}: only 8-bit images up to 16 Mpixels")
        if len(data) - m.end() < w * h:
            raise LoadableError(f"{path}: PGM {w}x{h} holds {len(data) - m.end()} pixel bytes, not {w * h}")
        px = np.frombuffer(data, np.uint8, count=w * h, offset=m.end())
        if tensor.data_type != 2:
            raise LoadableError(f"{path}: a PGM becomes an FP16 tensor; {tensor.name!r} is {tensor.type_name}")
        _, c, th, tw = tensor.dims
        if (th, tw) != (h, w) or c < 1:
            raise LoadableError(f"{path}: PGM {w}x{h}, the input tensor {tensor.name!r} is {tw}x{th}x{c}")
        buf = np.zeros(tensor.size, np.uint8)
        off = (np.arange(h)[:, None] * tensor.strides[1] + np.arange(w)[None, :] * 32).ravel()
        bits = float_to_half_ties_away(px.astype(np.float32)).astype("<u2").view(np.uint8).reshape(-1, 2)
        buf[off[:, None] + np.arange(2)] = bits
        return buf.tobytes()
    if len(data) != tensor.size:
        raise LoadableError(f"{path}: {len(data)} bytes; a raw input must be exactly the tensor's {tensor.size} bytes "
                            f"({tensor.name!r}), or a PGM")
    return data


@dataclass
class OpSnapshot:
    task: int
    op: OpDesc
    data: bytes  # the op's output surface right after it completed (empty: not in memory)


@dataclass
class RunResult:
    dump: bytes
    meta: DimgMeta
    seconds: float
    snapshots: list[OpSnapshot] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    ops: dict[int, list[OpDesc]] = field(default_factory=dict)
    snapshot_bytes: int = 0


def _surface_extent(c: Cube) -> int:
    return min(c.size or (c.surf_stride * max(1, c.channel)), 64 << 20)


class _TaskDriver:
    """The KMD's portability callbacks for one DLA task on one target."""

    def __init__(self, ld: Loadable, task_index: int, target: Transport, placement: Placement,
                 log: Callable[[int, str], None]) -> None:
        self.ld, self.task, self.target, self.placement = ld, ld.tasks[task_index], target, placement
        self.errors: list[BaseException] = []
        self._log = log

    def _entry(self, index: int) -> tuple[str, int, int, int]:
        """(port, base of the memory entry, address offset, entry size) of an address-list index."""
        a = address_entry(self.ld, self.task, index, f"task {self.task.id}")
        port, base = self.placement.of(a.mem_id)
        return port, base, a.offset, self.ld.memory[a.mem_id].size

    def _guard(self, fn: Callable[[], int], fail: int) -> int:
        try:
            return fn()
        except BaseException as e:  # noqa: BLE001 - a ctypes callback must not raise; re-raised after
            self.errors.append(e)
            return fail

    def reg_read(self, addr: int) -> int:
        return self._guard(lambda: self.target.read32(addr), 0)

    def reg_write(self, addr: int, value: int) -> None:
        def go() -> int:
            self.target.write32(addr, value)
            return 0
        self._guard(go, 0)

    def data_read(self, index: int, offset: int, size: int, buf: int) -> int:
        def go() -> int:
            port, base, _, msize = self._entry(index)
            check_span(f"task {self.task.id}", "firmware read", index, offset, size, msize)
            data = self.target.mem_read(base + offset, size, port=port)
            ctypes.memmove(buf, np.ascontiguousarray(data, dtype=np.uint8).ctypes.data, size)
            return 0
        return self._guard(go, -errno.EFAULT)

    def data_write(self, index: int, offset: int, size: int, buf: int) -> int:
        def go() -> int:
            port, base, _, msize = self._entry(index)
            check_span(f"task {self.task.id}", "firmware write", index, offset, size, msize)
            self.target.mem_write(base + offset, ctypes.string_at(buf, size), port=port)
            return 0
        return self._guard(go, -errno.EFAULT)

    def dma_address(self, index: int) -> int | None:
        try:
            _, base, off, _ = self._entry(index)
            return base + off
        except LoadableError as e:
            self.errors.append(e)
            return None


def run_loadable(ld: Loadable, profile: HardwareProfile, target: Transport, firmware: Firmware, *,
                 input_data: bytes | None = None, timeout: float = 60.0, numbering: str = "2018",
                 snapshot: bool = False, log: Callable[[str], None] | None = None) -> RunResult:
    """Run every task of the loadable on ``target`` (open) and return the output dump."""
    t0 = time.monotonic()
    placement = place_memory(ld, profile)
    lines: list[str] = []
    say = log or (lambda s: None)
    outputs = [m for m in ld.memory if m.flags & MEM_OUTPUT]
    inputs = [m for m in ld.memory if m.flags & MEM_INPUT]
    if not outputs:
        raise LoadableError("the loadable has no OUTPUT memory entry to dump")
    out_mem = min(outputs, key=lambda m: m.bind_id)
    if out_mem.tensor_desc_id >= len(ld.tensors):
        raise LoadableError(f"memory entry {out_mem.id}: tensor_desc_id {out_mem.tensor_desc_id}, but there are "
                            f"{len(ld.tensors)} tensor descriptors")
    out_tensor = ld.tensors[out_mem.tensor_desc_id]
    if out_tensor.size > out_mem.size:
        raise LoadableError(f"output tensor {out_tensor.name!r}: size {out_tensor.size} bytes, more than its memory "
                            f"entry {out_mem.id} ({out_mem.size} bytes)")
    meta = meta_for_tensor(out_tensor, numbering, profile.atom_bytes)  # refused before anything runs
    upgraded = _upgrades(ld, firmware.build.version)
    for m in ld.memory:
        if not m.flags & MEM_ALLOC:
            continue
        port, a = placement.of(m.id)
        data = upgraded.get(m.id) or entry_bytes(ld, m.id)
        if m.flags & MEM_INPUT and input_data is not None and m is inputs[0]:
            data = input_data[:m.size].ljust(m.size, b"\0")
        target.mem_write(a, data, port=port)
    result = RunResult(b"", meta, 0.0, log=lines)
    for s in ld.submits:
        for tid in s.task_ids:
            t = ld.tasks[tid]
            if t.interface == IFACE_DLA1:
                try:
                    _run_dla(ld, tid, profile, target, firmware, placement, timeout, result, snapshot, lines, say)
                except FirmwareError as e:  # what completed before it is kept for localisation
                    e.partial = result  # type: ignore[attr-defined]
                    raise
            elif t.interface == IFACE_EMU1:
                _run_emu(ld, tid, target, placement, say)
            else:
                raise LoadableError(f"task {t.id}: interface {t.interface} is neither DLA1 nor EMU1")
    port, a = placement.of(out_mem.id)
    buf = target.mem_read(a, out_tensor.size, port=port)
    result.dump = pack_dimg(result.meta, buf)
    result.seconds = time.monotonic() - t0
    return result


def _run_emu(ld: Loadable, tid: int, target: Transport, placement: Placement, say: Callable[[str], None]) -> None:
    t = ld.tasks[tid]

    def loc(index: int) -> tuple[str, int, int]:
        a = address_entry(ld, t, index, f"EMU task {t.id}")
        port, base = placement.of(a.mem_id)
        return port, base + a.offset, ld.memory[a.mem_id].size - a.offset

    def read(index: int, offset: int, size: int) -> bytes:
        port, a, room = loc(index)
        check_span(f"EMU task {t.id}", "read", index, offset, size, room)
        return target.mem_read(a + offset, size, port=port).tobytes()

    def write(index: int, offset: int, data: bytes) -> None:
        port, a, room = loc(index)
        check_span(f"EMU task {t.id}", "write", index, offset, len(data), room)
        target.mem_write(a + offset, data, port=port)

    ops = decode_emu_task(read(0, 0, 6), lambda i: read(i, 0, loc(i)[2]))
    say(f"task {t.id} (EMU1): {', '.join(f'{o.name} {o.params}' for o in ops)}")
    run_emu_ops(ops, read, write)


def _run_dla(ld: Loadable, tid: int, profile: HardwareProfile, target: Transport, fw: Firmware, placement: Placement,
             timeout: float, result: RunResult, snapshot: bool, lines: list[str], say: Callable[[str], None]) -> None:
    from ..targets import layer_timeout

    t = ld.tasks[tid]
    ops, _ = dla_ops(ld, tid)
    result.ops[tid] = ops
    drv = _TaskDriver(ld, tid, target, placement, lambda lvl, s: None)

    def on_log(level: int, msg: str) -> None:
        msg = msg.rstrip()
        if level >= 1:
            lines.append(msg)
        if level >= 2:
            say(f"firmware: {msg}")
        m = COMPLETED.search(msg)
        if m and snapshot:
            i = int(m.group(2))
            op = ops[i] if 0 <= i < len(ops) else None
            data = b""
            extent = _surface_extent(op.dst) if op is not None and op.dst is not None else 0
            if op is not None and op.dst is not None and op.dst.type != 2 and op.dst.address >= 0 \
                    and result.snapshot_bytes + extent <= MAX_SNAPSHOT_BYTES:  # past it: not localised
                try:
                    port, base, _, _ = drv._entry(op.dst.address)
                    data = target.mem_read(base + op.dst.offset, extent, port=port).tobytes()
                    result.snapshot_bytes += len(data)
                except Exception as e:  # noqa: BLE001 - recorded and re-raised after the callback
                    drv.errors.append(e)
            if op is not None:
                result.snapshots.append(OpSnapshot(tid, op, data))

    def check(what: str) -> None:
        if drv.errors:
            e = drv.errors[0]
            raise FirmwareError(f"task {t.id}: {what}: {type(e).__name__}: {e}") from e

    fw.bind(drv.reg_read, drv.reg_write, drv.data_read, drv.data_write, drv.dma_address, on_log)
    fw.init()
    err = fw.execute(len(t.address_list), profile.atom_bytes, profile.has("bdma"), profile.has("rubik"),
                     profile.has("weight_compression"))
    check("dla_execute_task")
    if err:
        raise FirmwareError(f"task {t.id}: dla_execute_task returned {err}; firmware said: {' | '.join(lines[-5:])}")
    say(f"task {t.id} (DLA1): {len(ops)} operation(s) handed to the firmware")
    wait = max(timeout, layer_timeout(target))
    try:
        if ops:
            for _ in range(MAX_EVENTS):
                if not target.wait_irq(wait):
                    done_ops = sorted({s.op.index for s in result.snapshots if s.task == tid})
                    hint = getattr(target, "hang_hint", lambda units: "")({o.name for o in ops if o.index not in done_ops})
                    raise FirmwareError(f"task {t.id}: no interrupt within {wait:.0f} s; operations completed so far: "
                                        f"{done_ops or 'none'} of {len(ops)}" + (f"; {hint}" if hint else ""))
                fw.isr()
                check("dla_isr_handler")
                err, complete = fw.process_events()
                check("dla_process_events")
                if err:
                    raise FirmwareError(f"task {t.id}: dla_process_events returned {err}; firmware said: "
                                        f"{' | '.join(lines[-5:])}")
                if complete:
                    break
            else:
                raise FirmwareError(f"task {t.id}: not complete after {MAX_EVENTS} interrupts")
    finally:
        fw.clear_task()
