"""Read an NVDLA loadable: the FlatBuffers file NVDLA's compiler writes and its runtime loads.

The tables are read by their slots in ``umd/core/src/common/loadable.fbs`` of nvdla/sw (root
table ``Loadable``; field *n* of a table is vtable slot ``4 + 2*n``) with the ``flatbuffers``
package's :class:`flatbuffers.table.Table`; neither the schema nor code generated from it is
part of this project. A loadable is untrusted input: every offset is checked to lie inside the
buffer before it is followed, every vector length and blob size is bounded before anything is
allocated, and a malformed file raises :class:`LoadableError` naming the field.

A loadable is bounded by what it expands to, not by its size: FlatBuffers lets every table
point at one shared vector (one address list for every task, one submit list, one 1 MiB blob
for every blob table, one contents list for every memory entry), so a small file could make a
reader materialise gigabytes. Every vector counts each time it is reached, against a budget
for the whole loadable: :data:`MAX_ELEMENTS` list elements in all, :data:`MAX_EXPANDED_BYTES`
bytes of blobs, memory entries and the contents copied into them, :data:`MAX_SUBMITTED` task
runs. Past a budget the loadable is refused, naming the field and the budget. Shared vectors
are decoded once (a cache), so what is kept is no bigger than the file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from flatbuffers import number_types as N

from ...drivers.errors import InputError
from flatbuffers.table import Table

__all__ = ["LoadableError", "Loadable", "Blob", "MemoryEntry", "TaskEntry", "AddressEntry", "SubmitEntry",
           "TensorDesc", "EventEntry", "RelocEntry", "parse_loadable", "MAX_FILE_BYTES", "MAX_ENTRIES",
           "MAX_ELEMENTS", "MAX_EXPANDED_BYTES", "MAX_SUBMITTED",
           "MEM_ALLOC", "MEM_SET", "MEM_INPUT", "MEM_OUTPUT", "IFACE_NONE", "IFACE_DLA1", "IFACE_EMU1"]

#: the largest loadable read (NVDLA's AlexNet loadables are ~240 MB; the shared ones < 1 MB)
MAX_FILE_BYTES = 512 << 20
#: the longest list of any kind (tasks, memory entries, addresses, blobs, tensors, ...)
MAX_ENTRIES = 1 << 16
#: the largest memory entry (bytes) a run places in the target's memory
MAX_MEMORY_BYTES = 256 << 20
#: the longest name
MAX_NAME = 4096
#: list elements a loadable may expand to in all (a shared vector counts each time it is reached)
MAX_ELEMENTS = 1 << 20
#: bytes a loadable may expand to: blob data (per blob table), memory entries and the contents
#: copied into them (per memory entry), each counted each time it is reached
MAX_EXPANDED_BYTES = 1 << 30
#: task runs the submit list may ask for in all
MAX_SUBMITTED = 1 << 12

# MemoryFlags / Interface enums of loadable.fbs
MEM_ALLOC, MEM_SET, MEM_INPUT, MEM_OUTPUT = 1, 2, 4, 8
IFACE_NONE, IFACE_DLA1, IFACE_EMU1 = 0, 1, 2
INTERFACES = {0: "NONE", 1: "DLA1", 2: "EMU1"}
DATA_TYPES = {0: "UNKNOWN", 1: "FLOAT", 2: "HALF", 3: "INT16", 4: "INT8"}
PIXEL_FEATURE, PIXEL_FEATURE_X8 = 36, 37


class LoadableError(InputError):
    """The loadable is malformed; the message names the table, entry and field (a suite reports
    it as "bad input", the command line exits 2)."""


@dataclass(frozen=True)
class Blob:
    name: str
    size: int
    interface: int
    sub_interface: int
    version: tuple[int, int, int]
    data: bytes


@dataclass(frozen=True)
class MemoryEntry:
    id: int
    domain: int  # 0 SYSTEM (DRAM), 1 SRAM (CVSRAM)
    flags: int
    size: int
    alignment: int
    contents: tuple[str, ...]
    offsets: tuple[int, ...]
    bind_id: int
    tensor_desc_id: int

    def flag_names(self) -> str:
        names = [n for b, n in ((MEM_ALLOC, "ALLOC"), (MEM_SET, "SET"), (MEM_INPUT, "INPUT"), (MEM_OUTPUT, "OUTPUT"))
                 if self.flags & b]
        return "|".join(names) or "NONE"


@dataclass(frozen=True)
class TaskEntry:
    id: int
    interface: int
    instance: int
    address_list: tuple[int, ...]
    pre_actions: tuple[int, ...]
    post_actions: tuple[int, ...]


@dataclass(frozen=True)
class AddressEntry:
    id: int
    mem_id: int
    offset: int
    size: int


@dataclass(frozen=True)
class SubmitEntry:
    id: int
    task_ids: tuple[int, ...]


@dataclass(frozen=True)
class EventEntry:
    id: int
    type: int
    target: int
    val: int
    op: int


@dataclass(frozen=True)
class RelocEntry:
    address_id: int
    write_id: int
    offset: int
    interface: int
    sub_interface: int
    reloc_type: int


@dataclass(frozen=True)
class TensorDesc:
    name: str
    id: int
    mem_id: int
    size: int
    offset: int
    data_format: int
    data_type: int
    data_category: int
    pixel_format: int
    pixel_mapping: int
    dims: tuple[int, int, int, int]  # n, c, h, w
    strides: tuple[int, ...]  # stride_0 .. stride_7

    @property
    def type_name(self) -> str:
        return DATA_TYPES.get(self.data_type, str(self.data_type))


@dataclass(frozen=True)
class Loadable:
    version: tuple[int, int, int]
    tasks: tuple[TaskEntry, ...]
    memory: tuple[MemoryEntry, ...]
    addresses: tuple[AddressEntry, ...]
    events: tuple[EventEntry, ...]
    blobs: tuple[Blob, ...]
    tensors: tuple[TensorDesc, ...]
    relocs: tuple[RelocEntry, ...]
    submits: tuple[SubmitEntry, ...]
    _by_name: dict[str, Blob] = field(default_factory=dict, compare=False, repr=False)
    #: what readers derive once per loadable (harness/loadables/runtime.py: entries, decoded tasks)
    derived: dict = field(default_factory=dict, compare=False, repr=False)

    def blob(self, name: str) -> Blob:
        b = self._by_name.get(name)
        if b is None:
            raise LoadableError(f"no blob named {name!r} (a memory entry's contents name it)")
        return b


class _Tab(Table):
    """A :class:`Table` that knows its object's length (from its vtable) to bound its fields."""

    __slots__ = ("obj_len",)

    def __init__(self, buf: bytes, pos: int, obj_len: int) -> None:
        super().__init__(buf, pos)  # Table only reads its buffer
        self.obj_len = obj_len


class _Reader:
    """Bounds-checked access to FlatBuffers tables through :class:`flatbuffers.table.Table`."""

    def __init__(self, buf: bytes, name: str = "loadable") -> None:
        self.buf = buf
        self.n = len(buf)
        self.name = name
        self.elements = 0  # list elements reached so far (shared vectors each time)
        self.expanded = 0  # bytes reached so far (blob data, memory entries, contents)
        self._cache: dict[tuple, object] = {}  # shared vectors decoded once

    def spend(self, elements: int, nbytes: int, what: str) -> None:
        """Count what reaching a field materialises; refuse past the loadable's budget."""
        self.elements += elements
        self.expanded += nbytes
        if self.elements > MAX_ELEMENTS:
            raise LoadableError(f"{what}: the loadable expands to more than {MAX_ELEMENTS} list elements "
                                "(a vector shared by several tables counts each time it is reached)")
        if self.expanded > MAX_EXPANDED_BYTES:
            raise LoadableError(f"{what}: the loadable expands to more than {MAX_EXPANDED_BYTES} bytes of blobs, "
                                f"memory entries and contents ({self.expanded} so far; a vector shared by several "
                                "tables counts each time it is reached)")

    def need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            raise LoadableError(f"{what}: offset {pos} (+{size} bytes) lies outside the {self.n}-byte file")

    def table(self, pos: int, what: str) -> _Tab:
        """The table at ``pos`` after checking its vtable lies inside the buffer."""
        self.need(pos, 4, what)
        vt = pos - struct.unpack_from("<i", self.buf, pos)[0]
        self.need(vt, 4, f"{what} vtable")
        vt_len, obj_len = struct.unpack_from("<HH", self.buf, vt)
        if vt_len < 4 or vt_len % 2:
            raise LoadableError(f"{what}: vtable length {vt_len} is not a valid vtable")
        self.need(vt, vt_len, f"{what} vtable")
        self.need(pos, obj_len, what)
        return _Tab(self.buf, pos, obj_len)

    def _field(self, t: _Tab, slot: int, size: int, what: str) -> int:
        """Absolute position of field ``slot`` (0 = absent), checked to lie inside the table."""
        o = t.Offset(4 + 2 * slot)
        if o:
            # inside the file (a table's vtable object size is not a bound: NVDLA's own
            # loadables place the version struct at the object size itself)
            self.need(t.Pos + o, size, what)
        return t.Pos + o if o else 0

    def scalar(self, t: _Tab, slot: int, flags: N.NumberTypeFlags, default: int, what: str) -> int:
        pos = self._field(t, slot, flags.bytewidth, what)
        return t.Get(flags, pos) if pos else default

    def _indirect(self, t: _Tab, slot: int, what: str) -> int:
        pos = self._field(t, slot, 4, what)
        if not pos:
            return 0
        target = pos + struct.unpack_from("<I", self.buf, pos)[0]
        self.need(target, 4, what)
        return target

    def vector(self, t: _Tab, slot: int, elem: int, what: str, limit: int = MAX_ENTRIES) -> tuple[int, int]:
        """(start, length) of a vector field; (0, 0) when absent. ``elem``: bytes per element."""
        vpos = self._indirect(t, slot, what)
        if not vpos:
            return 0, 0
        n = struct.unpack_from("<I", self.buf, vpos)[0]
        if n > limit:
            raise LoadableError(f"{what}: {n} elements, more than the {limit} allowed")
        self.need(vpos + 4, n * elem, what)
        if elem > 1:  # bytes vectors (names, blob data) are counted by the caller, in bytes
            self.spend(n, 0, what)
        return vpos + 4, n

    def string(self, t: _Tab, slot: int, what: str) -> str:
        start, n = self.vector(t, slot, 1, what, MAX_NAME)
        if not start:
            return ""
        self.spend(0, n, what)
        try:
            return self.buf[start:start + n].decode("utf-8")
        except UnicodeDecodeError:
            raise LoadableError(f"{what}: not UTF-8") from None

    def tables(self, t: _Tab, slot: int, what: str) -> list[_Tab]:
        start, n = self.vector(t, slot, 4, what)
        out = []
        for i in range(n):
            p = start + 4 * i
            out.append(self.table(p + struct.unpack_from("<I", self.buf, p)[0], f"{what}[{i}]"))
        return out

    def scalars(self, t: _Tab, slot: int, fmt: str, what: str) -> tuple[int, ...]:
        size = struct.calcsize("<" + fmt)
        start, n = self.vector(t, slot, size, what)
        if not n:
            return ()
        key = ("scalars", start, n, fmt)
        if key not in self._cache:
            self._cache[key] = struct.unpack_from(f"<{n}{fmt}", self.buf, start)
        return self._cache[key]  # type: ignore[return-value]

    def strings(self, t: _Tab, slot: int, what: str) -> tuple[str, ...]:
        start, n = self.vector(t, slot, 4, what)
        key = ("strings", start, n)
        if key in self._cache:
            cached: tuple[str, ...] = self._cache[key]  # type: ignore[assignment]
            self.spend(0, sum(len(x) for x in cached), what)
            return cached
        out = []
        for i in range(n):
            p = start + 4 * i
            s = p + struct.unpack_from("<I", self.buf, p)[0]
            self.need(s, 4, f"{what}[{i}]")
            ln = struct.unpack_from("<I", self.buf, s)[0]
            if ln > MAX_NAME:
                raise LoadableError(f"{what}[{i}]: a {ln}-byte name, more than {MAX_NAME}")
            self.need(s + 4, ln, f"{what}[{i}]")
            self.spend(0, ln, f"{what}[{i}]")
            out.append(self.buf[s + 4:s + 4 + ln].decode("utf-8", errors="replace"))
        self._cache[key] = tuple(out)
        return tuple(out)

    def data(self, start: int, size: int, what: str) -> bytes:
        """``size`` bytes at ``start`` (counted each time; one copy per shared vector)."""
        self.spend(0, size, what)
        key = ("data", start, size)
        if key not in self._cache:
            self._cache[key] = self.buf[start:start + size]
        return self._cache[key]  # type: ignore[return-value]

    def version(self, t: _Tab, slot: int, what: str) -> tuple[int, int, int]:
        pos = self._field(t, slot, 3, what)
        return tuple(self.buf[pos:pos + 3]) if pos else (0, 0, 0)  # type: ignore[return-value]


U8, U16, I16, U32, I32, U64 = N.Uint8Flags, N.Uint16Flags, N.Int16Flags, N.Uint32Flags, N.Int32Flags, N.Uint64Flags


def _memory_entry(r: _Reader, t: _Tab, q: str) -> MemoryEntry:
    """One ``memory_list`` table, its size, alignment, domain and contents/offsets checked."""
    m = MemoryEntry(r.scalar(t, 0, U16, 0, f"{q}.id"), r.scalar(t, 1, U8, 0, f"{q}.domain"),
                    r.scalar(t, 2, U16, 0, f"{q}.flags"), r.scalar(t, 3, U64, 0, f"{q}.size"),
                    r.scalar(t, 4, U32, 0, f"{q}.alignment"), r.strings(t, 5, f"{q}.contents"),
                    r.scalars(t, 6, "Q", f"{q}.offsets"), r.scalar(t, 7, U16, 0, f"{q}.bind_id"),
                    r.scalar(t, 8, U16, 0, f"{q}.tensor_desc_id"))
    if m.size > MAX_MEMORY_BYTES:
        raise LoadableError(f"{q}.size: {m.size} bytes, more than the {MAX_MEMORY_BYTES} a run places")
    if m.alignment and (m.alignment & (m.alignment - 1) or m.alignment > 1 << 20):
        raise LoadableError(f"{q}.alignment: {m.alignment} is not a power of two up to 1 MiB")
    if m.domain not in (0, 1):
        raise LoadableError(f"{q}.domain: {m.domain} is neither SYSTEM (0) nor SRAM (1)")
    if len(m.contents) != len(m.offsets):
        raise LoadableError(f"{q}: {len(m.contents)} contents but {len(m.offsets)} offsets")
    return m


def _blob(r: _Reader, t: _Tab, q: str) -> Blob:
    """One ``blobs`` table; its ``size`` must fit the data it carries."""
    bname = r.string(t, 0, f"{q}.name")
    size = r.scalar(t, 1, U64, 0, f"{q}.size")
    start, n = r.vector(t, 5, 1, f"{q}.data", MAX_FILE_BYTES)
    if size > n:
        raise LoadableError(f"{q} ({bname}).size: {size} bytes but its data holds {n}")
    return Blob(bname, size, r.scalar(t, 2, U32, 0, f"{q}.interface"), r.scalar(t, 3, U32, 0, f"{q}.sub_interface"),
                r.version(t, 4, f"{q}.version"), r.data(start, size, f"{q} ({bname}).data"))


def _tensor_desc(r: _Reader, t: _Tab, q: str) -> TensorDesc:
    """One ``tensor_desc_list`` table; dimensions within 0..65536."""
    dims = tuple(r.scalar(t, s, I32, 0, f"{q}.{d}") for s, d in zip(range(10, 14), "nchw"))
    if any(not 0 <= d <= 1 << 16 for d in dims):
        raise LoadableError(f"{q}: dimensions {dims} outside 0..65536")
    return TensorDesc(r.string(t, 0, f"{q}.name"), r.scalar(t, 1, U16, 0, f"{q}.id"),
                      r.scalar(t, 2, U16, 0, f"{q}.mem_id"), r.scalar(t, 3, U64, 0, f"{q}.size"),
                      r.scalar(t, 4, U64, 0, f"{q}.offset"), r.scalar(t, 5, U8, 0, f"{q}.data_format"),
                      r.scalar(t, 6, U8, 0, f"{q}.data_type"), r.scalar(t, 7, U8, 0, f"{q}.data_category"),
                      r.scalar(t, 8, U8, 0, f"{q}.pixel_format"), r.scalar(t, 9, U8, 0, f"{q}.pixel_mapping"),
                      dims, tuple(r.scalar(t, s, U32, 0, f"{q}.stride_{s - 14}") for s in range(14, 22)))  # type: ignore[arg-type]


def parse_loadable(data: bytes, name: str = "loadable") -> Loadable:
    """Parse a loadable file's bytes; :class:`LoadableError` names what is malformed."""
    if len(data) > MAX_FILE_BYTES:
        raise LoadableError(f"{name}: {len(data)} bytes, more than the {MAX_FILE_BYTES} allowed")
    if len(data) < 8:
        raise LoadableError(f"{name}: {len(data)} bytes is too short for a FlatBuffers file")
    r = _Reader(bytes(data), name)
    root = r.table(struct.unpack_from("<I", r.buf, 0)[0], f"{name}: Loadable")
    w = f"{name}: Loadable"
    if not r._field(root, 0, 3, f"{w}.version"):
        raise LoadableError(f"{w}.version: the required field is missing")
    version = r.version(root, 0, f"{w}.version")

    tasks = []
    for i, t in enumerate(r.tables(root, 1, f"{w}.task_list")):
        q = f"{w}.task_list[{i}]"
        tasks.append(TaskEntry(r.scalar(t, 0, U16, 0, f"{q}.id"), r.scalar(t, 1, U32, 0, f"{q}.interface"),
                               r.scalar(t, 2, I16, 0, f"{q}.instance"), r.scalars(t, 3, "H", f"{q}.address_list"),
                               r.scalars(t, 4, "H", f"{q}.pre_actions"), r.scalars(t, 5, "H", f"{q}.post_actions")))
    memory = [_memory_entry(r, t, f"{w}.memory_list[{i}]") for i, t in enumerate(r.tables(root, 2, f"{w}.memory_list"))]
    addresses = []
    for i, t in enumerate(r.tables(root, 3, f"{w}.address_list")):
        q = f"{w}.address_list[{i}]"
        addresses.append(AddressEntry(r.scalar(t, 0, U16, 0, f"{q}.id"), r.scalar(t, 1, U16, 0, f"{q}.mem_id"),
                                      r.scalar(t, 2, U64, 0, f"{q}.offset"), r.scalar(t, 3, U64, 0, f"{q}.size")))
    events = []
    for i, t in enumerate(r.tables(root, 4, f"{w}.event_list")):
        q = f"{w}.event_list[{i}]"
        events.append(EventEntry(r.scalar(t, 0, U16, 0, f"{q}.id"), r.scalar(t, 1, U8, 0, f"{q}.type"),
                                 r.scalar(t, 2, U16, 0, f"{q}.target"), r.scalar(t, 3, U32, 0, f"{q}.val"),
                                 r.scalar(t, 4, U8, 0, f"{q}.op")))
    blobs = [_blob(r, t, f"{w}.blobs[{i}]") for i, t in enumerate(r.tables(root, 5, f"{w}.blobs"))]
    tensors = [_tensor_desc(r, t, f"{w}.tensor_desc_list[{i}]")
               for i, t in enumerate(r.tables(root, 6, f"{w}.tensor_desc_list"))]
    relocs = []
    for i, t in enumerate(r.tables(root, 7, f"{w}.reloc_list")):
        q = f"{w}.reloc_list[{i}]"
        relocs.append(RelocEntry(r.scalar(t, 0, U16, 0, f"{q}.address_id"), r.scalar(t, 1, U16, 0, f"{q}.write_id"),
                                 r.scalar(t, 2, U64, 0, f"{q}.offset"), r.scalar(t, 3, U32, 0, f"{q}.interface"),
                                 r.scalar(t, 4, U32, 0, f"{q}.sub_interface"), r.scalar(t, 5, U8, 0, f"{q}.reloc_type")))
    submits = []
    for i, t in enumerate(r.tables(root, 8, f"{w}.submit_list")):
        q = f"{w}.submit_list[{i}]"
        submits.append(SubmitEntry(r.scalar(t, 0, U16, 0, f"{q}.id"), r.scalars(t, 1, "H", f"{q}.task_id")))
    ld = Loadable(version, tuple(tasks), tuple(memory), tuple(addresses), tuple(events), tuple(blobs),
                  tuple(tensors), tuple(relocs), tuple(submits), {b.name: b for b in blobs})
    _check_references(ld, name)
    _check_expansion(ld, r, name)
    return ld


def _check_expansion(ld: Loadable, r: _Reader, name: str) -> None:
    """What running the loadable materialises: every memory entry, every SET content copied into
    its entry (each time it is listed), every task run the submit list asks for."""
    w = f"{name}: Loadable"
    for i, m in enumerate(ld.memory):
        r.spend(0, m.size, f"{w}.memory_list[{i}].size")
        if m.flags & MEM_SET:
            for k, c in enumerate(m.contents):
                r.spend(0, ld._by_name[c].size, f"{w}.memory_list[{i}].contents[{k}]")
    runs = 0
    for i, s in enumerate(ld.submits):
        runs += len(s.task_ids)
        if runs > MAX_SUBMITTED:
            raise LoadableError(f"{w}.submit_list[{i}].task_id: the submit list asks for more than {MAX_SUBMITTED} "
                                "task runs in all (a task list shared by several submits counts each time)")


def _check_references(ld: Loadable, name: str) -> None:
    """Every id a list refers to exists; contents fit their memory entries."""
    w = f"{name}: Loadable"
    for i, a in enumerate(ld.addresses):
        if a.mem_id >= len(ld.memory):
            raise LoadableError(f"{w}.address_list[{i}].mem_id: {a.mem_id}, but there are {len(ld.memory)} memory entries")
        m = ld.memory[a.mem_id]
        if a.offset > m.size:
            raise LoadableError(f"{w}.address_list[{i}].offset: {a.offset} beyond memory entry {a.mem_id} ({m.size} bytes)")
    for i, task in enumerate(ld.tasks):
        for k, aid in enumerate(task.address_list):
            if aid >= len(ld.addresses):
                raise LoadableError(f"{w}.task_list[{i}].address_list[{k}]: address {aid}, but there are {len(ld.addresses)}")
    for i, s in enumerate(ld.submits):
        for k, tid in enumerate(s.task_ids):
            if tid >= len(ld.tasks):
                raise LoadableError(f"{w}.submit_list[{i}].task_id[{k}]: task {tid}, but there are {len(ld.tasks)}")
    for i, m in enumerate(ld.memory):
        if m.id != i:
            raise LoadableError(f"{w}.memory_list[{i}].id: {m.id}, expected {i} (ids are list positions)")
        if not m.flags & MEM_SET:
            continue  # the runtime reads contents only of SET entries (Runtime::loadMemory)
        for k, (c, off) in enumerate(zip(m.contents, m.offsets)):
            b = ld._by_name.get(c)
            if b is None:
                raise LoadableError(f"{w}.memory_list[{i}].contents[{k}]: no blob named {c!r}")
            if off + b.size > m.size:
                raise LoadableError(f"{w}.memory_list[{i}].offsets[{k}]: blob {c!r} ({b.size} bytes) at {off} "
                                    f"does not fit the {m.size}-byte entry")
    for i, td in enumerate(ld.tensors):
        if td.mem_id >= len(ld.memory):
            raise LoadableError(f"{w}.tensor_desc_list[{i}].mem_id: {td.mem_id}, but there are {len(ld.memory)} memory entries")
