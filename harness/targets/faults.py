"""Datapath bugs injected into a model target (never into the reference it is compared with),
so the model-vs-target triage path can be exercised without broken hardware.

A bug is a short spec string:

==========================================  ====================================================
``SDP.D_CVT_OFFSET.CVT_OFFSET+1``           the datapath sees the field 1 higher than programmed
``CACC.D_CLIP_CFG.CLIP_TRUNCATE-1``         ... 1 lower
``SDP.S_LUT_CFG.LUT_HYBRID_PRIORITY^1``     ... with these bits flipped (a swapped priority)
``CDP.D_DATOUT_OFFSET.DATOUT_OFFSET=0``     ... stuck at this value
``stuck:SDP:3:0``                           bit 0 of every output element of channel 3 of the
                                            SDP (or PDP, CDP) output stuck at 1
==========================================  ====================================================

Register bugs act where the layer model reads the register (the programmed value is what the
host reads back, as with a broken decoder on silicon); field values wrap to the field width.
``ModelTarget(bugs=[...])`` and ``nvdla-hil trace --model-bug SPEC`` take them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...drivers.errors import ConfigError
from ...drivers.regmap import RegisterMap, RegisterMapError

__all__ = ["Bug", "FaultyView", "parse_bug", "apply_stuck_bits"]

_REG = re.compile(r"^([A-Z0-9_]+)\.([A-Z0-9_]+)\.([A-Z0-9_]+)\s*([-+^=])\s*(0[xX][0-9a-fA-F]+|\d+)$")
_STUCK = re.compile(r"^stuck:(SDP|PDP|CDP):(\d+):(\d+)$")


@dataclass(frozen=True)
class Bug:
    spec: str
    block: str = ""
    register: str = ""
    field: str = ""
    op: str = ""
    value: int = 0
    unit: str = ""  # stuck bits
    channel: int = 0
    bit: int = 0

    @property
    def stuck(self) -> bool:
        return bool(self.unit)

    def alter(self, v: int, width: int) -> int:
        mask = (1 << width) - 1
        if self.op == "+":
            return (v + self.value) & mask
        if self.op == "-":
            return (v - self.value) & mask
        if self.op == "^":
            return (v ^ self.value) & mask
        return self.value & mask


def parse_bug(spec: str, regmap: RegisterMap) -> Bug:
    """A :class:`Bug` from its spec; a clear ValueError naming the register for a bad one."""
    s = spec.strip()
    m = _STUCK.match(s)
    if m:
        bit = int(m.group(3))
        if bit > 15:
            raise ConfigError(f"bug {spec!r}: bit {bit} is outside a 16-bit element")
        return Bug(spec=s, unit=m.group(1), channel=int(m.group(2)), bit=bit)
    m = _REG.match(s)
    if m is None:
        raise ConfigError(f"bug {spec!r}: expected BLOCK.REGISTER.FIELD{{+,-,^,=}}N or stuck:UNIT:CHANNEL:BIT")
    block, reg, fld, op, val = m.groups()
    try:
        regmap.register(block, reg).field(fld)
    except RegisterMapError as e:
        raise ConfigError(f"bug {spec!r}: {e}") from None
    return Bug(spec=s, block=block, register=reg, field=fld, op=op, value=int(val, 0))


class FaultyView:
    """A RegisterView that shows the layer model the bugged field values."""

    def __init__(self, inner, regmap: RegisterMap, bugs: list[Bug]) -> None:  # noqa: ANN001
        self._inner = inner
        self._rm = regmap
        self._bugs = [b for b in bugs if not b.stuck]

    def _bugged(self, block: str, register: str, raw: int) -> int:
        for b in self._bugs:
            if b.block == block and b.register == register:
                f = self._rm.register(block, register).field(b.field)
                raw = f.insert(raw, b.alter(f.extract(raw), f.width))
        return raw

    def reg(self, block: str, register: str) -> int:
        return self._bugged(block, register, self._inner.reg(block, register))

    def field(self, block: str, register: str, field: str) -> int:
        raw = self._bugged(block, register, self._inner.reg(block, register))
        return self._rm.register(block, register).field(field).extract(raw)

    def lut(self, block: str, table: str) -> np.ndarray:
        return self._inner.lut(block, table)

    def has(self, feature: str) -> bool:
        return self._inner.has(feature)


def apply_stuck_bits(bugs: list[Bug], cubes, memories) -> None:  # noqa: ANN001
    """After a layer: force the stuck bits in the written output cubes (``harness.outputs``)."""
    for b in (b for b in bugs if b.stuck):
        for cube in cubes:
            if cube.unit != b.unit or b.channel >= cube.channels:
                continue
            mem = memories.get(cube.port)
            if mem is None:
                continue
            s, lane = divmod(b.channel, cube.group)
            byte, bit = divmod(b.bit, 8)
            if byte >= cube.bpe:
                continue
            for h in range(cube.height):
                line = cube.base + s * cube.surface_stride + h * cube.line_stride
                data = np.asarray(mem.read(line, cube.width * cube.atom), dtype=np.uint8).copy()
                data[lane * cube.bpe + byte :: cube.atom] |= np.uint8(1 << bit)
                mem.write(line, data)
