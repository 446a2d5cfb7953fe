"""The DLA task's descriptors as NVDLA's firmware reads them (``kmd/firmware/include/
dla_interface.h`` of nvdla/sw: packed little-endian structures, facts of their layout only).

A DLA1 task's address list entry 0 is the ``dla_network_desc`` (40 bytes); its indices name the
entries holding the ``dla_common_op_desc`` dependency graph (36 bytes each), the operation
containers (``union dla_operation_container``, 116 bytes: the SDP op is the largest), the
surface containers (``union dla_surface_container``, 644 bytes: the BDMA surface) and the LUTs
(``dla_lut_param``, 700 bytes each).

Firmware interface versions (the version of a task's DLA blobs): before 0.12 (nvdla/sw before
16befcb "Re-design of address list usage", 2019) a ``dla_data_cube`` is 28 bytes, without the
``offset`` field after ``address``; from 0.12 it is 32. The shared loadables are 0.10 and 0.11;
:func:`upgrade_surfaces` turns their surface list into the layout of a 0.12 firmware (offset 0:
the old firmware used the address-list entry itself), the containers' sizes are unchanged.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .fbs import LoadableError

__all__ = ["NetworkDesc", "OpDesc", "Cube", "decode_network", "decode_ops", "is_legacy", "upgrade_surfaces", "OP_NAMES", "PRECISIONS",
           "OP_CONTAINER", "SURF_CONTAINER", "LUT_PARAM", "DEP_DESC"]

OP_NAMES = ("BDMA", "CONV", "SDP", "PDP", "CDP", "RUBIK")
PRECISIONS = {0: "INT8", 1: "INT16", 2: "FP16"}
MEM_TYPES = {0: "MC", 1: "CV", 2: "HW"}
NETWORK = struct.Struct("<8h6h4HhBB")
DEP = struct.Struct("<hbBB3x" + "hBB" * 7)
CUBE = struct.Struct("<HhIIHHHHIII")
CUBE_OLD = struct.Struct("<HhIHHHHIII")  # before firmware 0.12: no offset
#: index of the output (dst) cube and the number of cubes in each op's surface desc, and the
#: bytes after the cubes (conv: offset_u s64, in_line_uv_stride u32)
SURF_CUBES = {1: (5, 12), 2: (5, 0), 3: (2, 0), 4: (2, 0), 5: (2, 0)}
OP_CONTAINER, SURF_CONTAINER, LUT_PARAM, DEP_DESC = 116, 644, 700, DEP.size
MAX_OPS = 4096


@dataclass(frozen=True)
class NetworkDesc:
    operation_desc_index: int
    surface_desc_index: int
    dependency_graph_index: int
    lut_data_index: int
    roi_array_index: int
    surface_index: int
    stat_list_index: int
    op_head: tuple[int, ...]
    num_rois: int
    num_operations: int
    num_luts: int
    num_addresses: int
    input_layer: int
    dynamic_roi: int


@dataclass(frozen=True)
class Cube:
    """``struct dla_data_cube``"""

    type: int  # 0 MC, 1 CV, 2 HW
    address: int  # address-list index (-1: none)
    offset: int
    size: int
    width: int
    height: int
    channel: int
    line_stride: int
    surf_stride: int
    plane_stride: int

    def describe(self) -> str:
        where = MEM_TYPES.get(self.type, str(self.type))
        if self.type == 2:
            return f"{self.width}x{self.height}x{self.channel} (on the fly)"
        return (f"{self.width}x{self.height}x{self.channel} {where}[{self.address}]+{self.offset} "
                f"line {self.line_stride} surf {self.surf_stride}")


@dataclass(frozen=True)
class OpDesc:
    index: int
    op_type: int
    roi_index: int
    dependency_count: int
    consumers: tuple[tuple[int, int], ...]  # (index, event) per op type
    fused_parent: tuple[int, int]
    precision: str
    detail: str
    src: Cube | None
    dst: Cube | None
    extra: tuple[tuple[str, Cube], ...]  # weights, x1/x2/y operands
    lut_index: int = -1

    @property
    def name(self) -> str:
        return OP_NAMES[self.op_type] if self.op_type < len(OP_NAMES) else f"op{self.op_type}"


def decode_network(data: bytes | memoryview) -> NetworkDesc:
    if len(data) < NETWORK.size:
        raise LoadableError(f"dla_network_desc: {len(data)} bytes, expected {NETWORK.size}")
    v = NETWORK.unpack_from(data)
    nd = NetworkDesc(v[0], v[1], v[2], v[3], v[4], v[5], v[6], tuple(v[8:14]), v[14], v[15], v[16], v[17], v[18], v[19])
    if nd.num_operations > MAX_OPS:
        raise LoadableError(f"dla_network_desc.num_operations: {nd.num_operations}, more than {MAX_OPS}")
    # the firmware indexes its own arrays with these without checking them
    for k, h in enumerate(nd.op_head):
        if not -1 <= h < max(nd.num_operations, 1):
            raise LoadableError(f"dla_network_desc.op_head[{k}]: {h}, outside -1..{nd.num_operations - 1}")
    if nd.dynamic_roi:
        raise LoadableError("dla_network_desc.dynamic_roi: dynamic ROI needs an ROI array from the application, "
                            "which the runtime does not bind")
    if nd.num_operations and nd.num_rois != 1:
        raise LoadableError(f"dla_network_desc.num_rois: {nd.num_rois}; a static-ROI network has 1")
    return nd


def _cube(data: bytes | memoryview, index: int, legacy: bool = False) -> Cube:
    if legacy:
        t, a, s, w, h, c, _, ls, ss, ps = CUBE_OLD.unpack_from(data, index * CUBE_OLD.size)
        return Cube(t, a, 0, s, w, h, c, ls, ss, ps)
    t, a, o, s, w, h, c, _, ls, ss, ps = CUBE.unpack_from(data, index * CUBE.size)
    return Cube(t, a, o, s, w, h, c, ls, ss, ps)


def is_legacy(version: tuple[int, int, int]) -> bool:
    """A DLA blob version before firmware interface 0.12 (28-byte data cubes)."""
    return tuple(version) < (0, 12, 0)


def upgrade_surfaces(op_types: list[int], surfs: bytes) -> bytes:
    """A pre-0.12 surface list in the 0.12 layout: each data cube gains ``offset = 0``."""
    out = bytearray(surfs)
    for i, op_type in enumerate(op_types):
        if op_type not in SURF_CUBES:
            continue  # BDMA: no data cubes
        n, tail = SURF_CUBES[op_type]
        old = surfs[i * SURF_CONTAINER:(i + 1) * SURF_CONTAINER]
        new = bytearray(SURF_CONTAINER)
        for k in range(n):
            t, a, sz, w, h, c, r, ls, ss, ps = CUBE_OLD.unpack_from(old, k * CUBE_OLD.size)
            CUBE.pack_into(new, k * CUBE.size, t, a, 0, sz, w, h, c, r, ls, ss, ps)
        new[n * CUBE.size:n * CUBE.size + tail] = old[n * CUBE_OLD.size:n * CUBE_OLD.size + tail]
        out[i * SURF_CONTAINER:(i + 1) * SURF_CONTAINER] = new
    return bytes(out)


def _prec(v: int) -> str:
    return PRECISIONS.get(v, f"?{v}")


def decode_ops(nd: NetworkDesc, dep: bytes | memoryview, ops: bytes | memoryview, surfs: bytes | memoryview,
               legacy: bool = False) -> list[OpDesc]:
    """Every operation of the network: dependency entry, op and surface containers
    (``legacy``: 28-byte data cubes, firmware interface before 0.12)."""
    n = nd.num_operations
    for what, buf, size in (("dependency graph", dep, DEP_DESC), ("operation list", ops, OP_CONTAINER),
                            ("surface list", surfs, SURF_CONTAINER)):
        if len(buf) < n * size:
            raise LoadableError(f"{what}: {len(buf)} bytes for {n} operations of {size} bytes")
    out = []
    for i in range(n):
        d = DEP.unpack_from(dep, i * DEP_DESC)
        index, roi, op_type, dep_count = d[:4]
        cons = tuple((d[4 + 3 * k], d[5 + 3 * k]) for k in range(6))
        fused = (d[22], d[23])
        # the firmware follows these indices into its processor and op-cache arrays unchecked
        index = i  # dla_common_op_desc.index is "set by ucode": the firmware writes the position
        for k, (ci, _) in enumerate((*cons, fused)):
            if not -1 <= ci < n:
                what = f"consumers[{k}]" if k < 6 else "fused_parent"
                raise LoadableError(f"operation {i}: dla_common_op_desc.{what}.index {ci}, outside -1..{n - 1}")
        o = ops[i * OP_CONTAINER:(i + 1) * OP_CONTAINER]
        s = surfs[i * SURF_CONTAINER:(i + 1) * SURF_CONTAINER]
        src = dst = None
        extra: list[tuple[str, Cube]] = []
        lut = -1
        if op_type == 0:  # BDMA
            st, dt, ntr = struct.unpack_from("<BBH", s)
            if ntr > 20:
                raise LoadableError(f"operation {i}: dla_bdma_surface_desc.num_transfers {ntr} > 20")
            tr = [struct.unpack_from("<hhIIIIIII", s, 4 + 32 * k) for k in range(ntr)]
            prec = "-"
            detail = "; ".join(f"[{t[0]}]->[{t[1]}] line {t[2]} x{t[3]} surf x{t[6]}" for t in tr)
            detail = f"{ntr} transfer(s) {MEM_TYPES.get(st, st)}->{MEM_TYPES.get(dt, dt)}: {detail}"
        elif op_type == 1:  # CONV
            conv_mode, in_prec, out_prec = o[0], o[72], o[73]
            stride_x, stride_y = o[61], o[62]
            prec = f"{_prec(in_prec)}->{_prec(out_prec)}"
            kw, kh, kc = struct.unpack_from("<HHH", o, 38)
            detail = (f"{'winograd' if conv_mode == 1 else 'direct'} kernel {kw}x{kh}x{kc} stride {stride_x}x{stride_y} "
                      f"pad {o[63]},{o[64]},{o[65]},{o[66]}")
            extra.append(("weight", _cube(s, 0, legacy)))
            src, dst = _cube(s, 3, legacy), _cube(s, 4, legacy)
        elif op_type == 2:  # SDP
            src_p, dst_p, lut = struct.unpack_from("<BBh", o)
            prec = f"{_prec(src_p)}->{_prec(dst_p)}"
            parts = []
            for name, base in (("x1", 20), ("x2", 52), ("y", 84)):
                en, alu, typ, mode, act = o[base:base + 5]
                if en:
                    parts.append(f"{name}(alu {alu} type {typ} mode {mode} act {act})")
            detail = " ".join(parts) or "bypass"
            src, dst = _cube(s, 0, legacy), _cube(s, 4, legacy)
            for (name, k), base in zip((("x1", 1), ("x2", 2), ("y", 3)), (20, 52, 84)):
                c = _cube(s, k, legacy)
                if o[base] and c.address != -1 and c.type != 2:  # enabled, operand in memory
                    extra.append((name, c))
        elif op_type == 3:  # PDP
            prec = _prec(o[22])
            detail = f"pool mode {o[13]} kernel {o[14] + 1}x{o[15] + 1} stride {o[16]}x{o[17]}"
            src, dst = _cube(s, 0, legacy), _cube(s, 1, legacy)
        elif op_type == 4:  # CDP
            in_p, out_p, lut = struct.unpack_from("<BBh", o)
            prec = f"{_prec(in_p)}->{_prec(out_p)}"
            detail = f"local size {o[20]}"
            src, dst = _cube(s, 0, legacy), _cube(s, 1, legacy)
        elif op_type == 5:  # RUBIK
            prec = _prec(o[1])
            detail = f"mode {o[0]} stride {o[2]}x{o[3]}"
            src, dst = _cube(s, 0, legacy), _cube(s, 1, legacy)
        else:
            raise LoadableError(f"operation {i}: dla_common_op_desc.op_type {op_type} is not an NVDLA operation")
        if lut >= max(nd.num_luts, 0) and lut != -1:
            raise LoadableError(f"operation {i}: lut_index {lut}, but the network has {nd.num_luts} LUTs")
        out.append(OpDesc(index, op_type, roi, dep_count, cons, fused, prec, detail, src, dst, tuple(extra), lut))
    return out
