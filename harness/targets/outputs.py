"""Where a layer's output lives, and a checked memory region explained element by element.

A trace checks bytes (a CRC, or a dumped region); an engineer needs elements. The registers a
test programmed say which unit wrote the region and how: the destination base address, cube
size, line and surface strides, element size and the memory atom (seed 000's feature data
format: ``addr(c, h, w) = base + (c // group) * surface_stride + h * line_stride + (w * group +
c % group) * bpe`` with ``group = atom / bpe``). :func:`output_cubes` decodes that for SDP, PDP and
CDP from a register snapshot; :func:`diff_region` compares an expected and an actual region
and reports the differing elements by (c, h, w) — count, first and worst, per channel and per
line — with the bytes outside the cube (line and surface gaps, padding lanes) counted apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...drivers.profiles import HardwareProfile
from ...drivers.regmap import RegisterMapError

__all__ = ["OutputCube", "RegionDiff", "output_cubes", "cube_for", "diff_region", "layer_snapshots"]


@dataclass(frozen=True)
class OutputCube:
    """The cube a unit writes: ``channels`` x ``height`` x ``width`` elements of ``bpe`` bytes."""

    unit: str
    base: int
    width: int
    height: int
    channels: int
    line_stride: int
    surface_stride: int
    bpe: int
    atom: int
    port: str = "pri_mem"

    @property
    def group(self) -> int:
        return max(self.atom // self.bpe, 1)

    @property
    def surfaces(self) -> int:
        return -(-self.channels // self.group)

    def locate(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(c, h, w) of byte offsets from ``base`` (shape (n, 3)) and whether each is an
        element of the cube (False: a gap between lines or surfaces, a padding lane)."""
        off = np.asarray(offsets, dtype=np.int64)
        packed_ok = self.line_stride >= self.atom * self.width and self.surface_stride >= self.line_stride * self.height
        s, r = np.divmod(off, max(self.surface_stride, 1))
        h, r = np.divmod(r, max(self.line_stride, 1))
        w, r = np.divmod(r, self.atom)
        c = s * self.group + r // self.bpe
        if not packed_ok and self.height == 1 and self.surface_stride >= self.atom * self.width:
            packed_ok = True  # single line: the line stride is unused
            s, r = np.divmod(off, max(self.surface_stride, 1))
            h = np.zeros_like(s)
            w, r = np.divmod(r, self.atom)
            c = s * self.group + r // self.bpe
        inside = (off >= 0) & (h < self.height) & (w < self.width) & (c < self.channels) & packed_ok
        return np.stack([c, h, w], axis=-1), inside

    def describe(self) -> str:
        kind = {1: "int8", 2: "int16"}.get(self.bpe, f"{self.bpe}-byte")
        return f"{self.unit} output {self.channels}x{self.height}x{self.width} ({kind})"


def layer_snapshots(writes: list[tuple[int, int]], profile: HardwareProfile) -> list[dict[int, int]]:
    """Register values (byte address -> value) as they stood at each ``D_OP_ENABLE`` write of
    a sequence of ``(address, value)`` CSB writes, plus the final state."""
    rm = profile.regmap
    state: dict[int, int] = {}
    snaps: list[dict[int, int]] = []
    for addr, value in writes:
        state[addr] = value
        try:
            if rm.by_address(addr).name == "D_OP_ENABLE" and value & 1:
                snaps.append(dict(state))
        except RegisterMapError:
            continue
    snaps.append(dict(state))
    return snaps


def output_cubes(regs: Mapping[int, int], profile: HardwareProfile) -> list[OutputCube]:
    """The SDP, PDP and CDP output cubes a register snapshot describes."""
    rm = profile.regmap
    atom = profile.atom_bytes

    def f(block: str, reg: str, fld: str) -> int:
        r = rm.register(block, reg)
        return r.field(fld).extract(regs.get(r.address, r.reset))

    def v(block: str, reg: str) -> int:
        r = rm.register(block, reg)
        return regs.get(r.address, r.reset)

    def port(block: str, reg: str, fld: str) -> str:
        try:
            return "pri_mem" if f(block, reg, fld) == 1 else "sec_mem"
        except RegisterMapError:
            return "pri_mem"

    cubes: list[OutputCube] = []
    try:
        if rm.has_block("SDP"):
            out16 = f("SDP", "D_DATA_FORMAT", "OUT_PRECISION") != 0
            cubes.append(OutputCube(
                "SDP", v("SDP", "D_DST_BASE_ADDR_HIGH") << 32 | v("SDP", "D_DST_BASE_ADDR_LOW"),
                f("SDP", "D_DATA_CUBE_WIDTH", "WIDTH") + 1, f("SDP", "D_DATA_CUBE_HEIGHT", "HEIGHT") + 1,
                f("SDP", "D_DATA_CUBE_CHANNEL", "CHANNEL") + 1, v("SDP", "D_DST_LINE_STRIDE"),
                v("SDP", "D_DST_SURFACE_STRIDE"), 2 if out16 else 1, atom,
                port("SDP", "D_DST_DMA_CFG", "DST_RAM_TYPE")))
        if rm.has_block("PDP"):
            in16 = f("PDP", "D_DATA_FORMAT", "INPUT_DATA") != 0
            cubes.append(OutputCube(
                "PDP", v("PDP", "D_DST_BASE_ADDR_HIGH") << 32 | v("PDP", "D_DST_BASE_ADDR_LOW"),
                f("PDP", "D_DATA_CUBE_OUT_WIDTH", "CUBE_OUT_WIDTH") + 1,
                f("PDP", "D_DATA_CUBE_OUT_HEIGHT", "CUBE_OUT_HEIGHT") + 1,
                f("PDP", "D_DATA_CUBE_OUT_CHANNEL", "CUBE_OUT_CHANNEL") + 1,
                v("PDP", "D_DST_LINE_STRIDE"), v("PDP", "D_DST_SURFACE_STRIDE"), 2 if in16 else 1, atom,
                port("PDP", "D_DST_RAM_CFG", "DST_RAM_TYPE")))
        if rm.has_block("CDP"):
            in16 = f("CDP", "D_DATA_FORMAT", "INPUT_DATA_TYPE") != 0
            cubes.append(OutputCube(
                "CDP", v("CDP", "D_DST_BASE_ADDR_HIGH") << 32 | v("CDP", "D_DST_BASE_ADDR_LOW"),
                f("CDP_RDMA", "D_DATA_CUBE_WIDTH", "WIDTH") + 1, f("CDP_RDMA", "D_DATA_CUBE_HEIGHT", "HEIGHT") + 1,
                f("CDP_RDMA", "D_DATA_CUBE_CHANNEL", "CHANNEL") + 1, v("CDP", "D_DST_LINE_STRIDE"),
                v("CDP", "D_DST_SURFACE_STRIDE"), 2 if in16 else 1, atom,
                port("CDP", "D_DST_DMA_CFG", "DST_RAM_TYPE")))
    except RegisterMapError:
        pass
    return cubes


def cube_for(snapshots: Sequence[Mapping[int, int]], profile: HardwareProfile, address: int,
             port: str = "pri_mem") -> OutputCube | None:  # fmt: skip
    """The output cube (of any layer snapshot) whose base is ``address`` on ``port``; the last
    layer that writes there wins."""
    found = None
    for regs in snapshots:
        for cube in output_cubes(regs, profile):
            if cube.base == address and cube.port == port:
                found = cube
    return found


@dataclass
class RegionDiff:
    """Expected vs actual bytes of one checked region, in elements where the cube is known."""

    address: int
    size: int
    cube: OutputCube | None
    n_bytes: int = 0  # differing bytes
    n_elements: int = 0  # differing elements of the cube
    n_outside: int = 0  # differing bytes outside the cube
    coords: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    expected: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    actual: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    per_channel: dict[int, int] = field(default_factory=dict)
    per_line: dict[int, int] = field(default_factory=dict)

    @property
    def matches(self) -> bool:
        return self.n_bytes == 0

    def worst(self) -> int:
        return int(np.argmax(np.abs(self.expected - self.actual))) if self.expected.size else 0

    def element(self, i: int) -> str:
        c, h, w = (int(x) for x in self.coords[i])
        return f"(c={c},h={h},w={w}) expected {int(self.expected[i])} got {int(self.actual[i])}"

    def summary(self, limit: int = 3) -> str:
        if self.matches:
            return f"all {self.size} bytes match"
        parts = [f"{self.n_bytes} of {self.size} bytes differ"]
        if self.cube is not None and self.n_elements:
            chans = sorted(self.per_channel)
            parts.append(f"{self.n_elements} {self.cube.unit} output elements of {self.cube.channels}x"
                         f"{self.cube.height}x{self.cube.width} ({'int16' if self.cube.bpe == 2 else 'int8'}) "
                         f"differ in {len(chans)} channel(s)")
            parts.append("first " + "; ".join(self.element(i) for i in range(min(limit, self.n_elements))))
            parts.append("worst " + self.element(self.worst()))
            if len(chans) <= 8:
                parts.append("per channel " + ", ".join(f"c{c}: {self.per_channel[c]}" for c in chans))
        elif self.cube is None:
            parts.append("no layer of the test writes a cube at this address: byte offsets only")
        if self.n_outside:
            parts.append(f"{self.n_outside} differing bytes lie outside the cube (gaps, padding lanes)")
        return "; ".join(parts)


def diff_region(expected: np.ndarray, actual: np.ndarray, address: int, cube: OutputCube | None) -> RegionDiff:
    """Compare two byte images of the region at ``address``; elements by (c, h, w)."""
    e = np.asarray(expected, dtype=np.uint8).ravel()
    a = np.asarray(actual, dtype=np.uint8).ravel()
    if e.size != a.size:
        raise ValueError(f"expected {e.size} bytes, got {a.size}")
    d = RegionDiff(address, int(e.size), cube)
    bad = np.flatnonzero(e != a)
    d.n_bytes = int(bad.size)
    if not bad.size:
        return d
    if cube is None:
        d.n_outside = 0
        return d
    offs = bad + (address - cube.base)
    coords, inside = cube.locate(offs)
    d.n_outside = int((~inside).sum())
    if inside.any():
        starts = (offs[inside] // cube.bpe) * cube.bpe
        uniq, idx = np.unique(starts, return_index=True)
        d.coords = coords[inside][idx]
        pos = uniq - (address - cube.base)
        dt = "<i1" if cube.bpe == 1 else "<i2"
        take = pos[:, None] + np.arange(cube.bpe)[None, :]
        d.expected = e[take].copy().view(dt).astype(np.int64).ravel()
        d.actual = a[take].copy().view(dt).astype(np.int64).ravel()
        d.n_elements = int(uniq.size)
        ch, n = np.unique(d.coords[:, 0], return_counts=True)
        d.per_channel = {int(c): int(k) for c, k in zip(ch, n)}
        ln, n = np.unique(d.coords[:, 1], return_counts=True)
        d.per_line = {int(h): int(k) for h, k in zip(ln, n)}
    return d
