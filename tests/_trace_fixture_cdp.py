"""Test-only mini trace player for the CDP/PDP reference-model tests.

Reads NVDLA trace tests (``<name>.cfg`` + ``*.dat``), keeps the last value written to each
register (single register group: the traces only use group 0), emulates the CDP LUT
access port (S_LUT_ACCESS_CFG/DATA, docs section 7), runs a layer model on ``intr_notify``
of its unit and checks every ``check_crc`` (zlib CRC-32, unwritten bytes 0).

Field bit ranges below are the nv_small register description (nvdla/hw
``spec/manual/NVDLA_{CDP,CDP_RDMA,PDP,PDP_RDMA}.rdl``); the project's regmap replaces
this once it is available.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from nvdla_hil.harness.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import LayerResult, ModelOptions

TRACE_DIR = Path(os.environ.get("NVDLA_TRACES", "/work/shared/nvdla/trace_tests/nv_small"))

# block -> register -> field -> (msb, lsb)
FIELDS: dict[str, dict[str, dict[str, tuple[int, int]]]] = {
    "CDP": {
        "S_STATUS": {"STATUS_0": (1, 0), "STATUS_1": (17, 16)},
        "S_POINTER": {"PRODUCER": (0, 0), "CONSUMER": (16, 16)},
        "S_LUT_ACCESS_CFG": {"LUT_ADDR": (9, 0), "LUT_TABLE_ID": (16, 16), "LUT_ACCESS_TYPE": (17, 17)},
        "S_LUT_ACCESS_DATA": {"LUT_DATA": (15, 0)},
        "S_LUT_CFG": {"LUT_LE_FUNCTION": (0, 0), "LUT_UFLOW_PRIORITY": (4, 4), "LUT_OFLOW_PRIORITY": (5, 5), "LUT_HYBRID_PRIORITY": (6, 6)},
        "S_LUT_INFO": {"LUT_LE_INDEX_OFFSET": (7, 0), "LUT_LE_INDEX_SELECT": (15, 8), "LUT_LO_INDEX_SELECT": (23, 16)},
        "S_LUT_LE_START_LOW": {"LUT_LE_START_LOW": (31, 0)},
        "S_LUT_LE_START_HIGH": {"LUT_LE_START_HIGH": (5, 0)},
        "S_LUT_LE_END_LOW": {"LUT_LE_END_LOW": (31, 0)},
        "S_LUT_LE_END_HIGH": {"LUT_LE_END_HIGH": (5, 0)},
        "S_LUT_LO_START_LOW": {"LUT_LO_START_LOW": (31, 0)},
        "S_LUT_LO_START_HIGH": {"LUT_LO_START_HIGH": (5, 0)},
        "S_LUT_LO_END_LOW": {"LUT_LO_END_LOW": (31, 0)},
        "S_LUT_LO_END_HIGH": {"LUT_LO_END_HIGH": (5, 0)},
        "S_LUT_LE_SLOPE_SCALE": {"LUT_LE_SLOPE_UFLOW_SCALE": (15, 0), "LUT_LE_SLOPE_OFLOW_SCALE": (31, 16)},
        "S_LUT_LE_SLOPE_SHIFT": {"LUT_LE_SLOPE_UFLOW_SHIFT": (4, 0), "LUT_LE_SLOPE_OFLOW_SHIFT": (9, 5)},
        "S_LUT_LO_SLOPE_SCALE": {"LUT_LO_SLOPE_UFLOW_SCALE": (15, 0), "LUT_LO_SLOPE_OFLOW_SCALE": (31, 16)},
        "S_LUT_LO_SLOPE_SHIFT": {"LUT_LO_SLOPE_UFLOW_SHIFT": (4, 0), "LUT_LO_SLOPE_OFLOW_SHIFT": (9, 5)},
        "D_OP_ENABLE": {"OP_EN": (0, 0)},
        "D_FUNC_BYPASS": {"SQSUM_BYPASS": (0, 0), "MUL_BYPASS": (1, 1)},
        "D_DST_BASE_ADDR_LOW": {"DST_BASE_ADDR_LOW": (31, 0)},
        "D_DST_BASE_ADDR_HIGH": {"DST_BASE_ADDR_HIGH": (31, 0)},
        "D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": (31, 0)},
        "D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": (31, 0)},
        "D_DST_DMA_CFG": {"DST_RAM_TYPE": (0, 0)},
        "D_DST_COMPRESSION_EN": {"DST_COMPRESSION_EN": (0, 0)},
        "D_DATA_FORMAT": {"INPUT_DATA_TYPE": (1, 0)},
        "D_NAN_FLUSH_TO_ZERO": {"NAN_TO_ZERO": (0, 0)},
        "D_LRN_CFG": {"NORMALZ_LEN": (1, 0)},
        "D_DATIN_OFFSET": {"DATIN_OFFSET": (15, 0)},
        "D_DATIN_SCALE": {"DATIN_SCALE": (15, 0)},
        "D_DATIN_SHIFTER": {"DATIN_SHIFTER": (4, 0)},
        "D_DATOUT_OFFSET": {"DATOUT_OFFSET": (31, 0)},
        "D_DATOUT_SCALE": {"DATOUT_SCALE": (15, 0)},
        "D_DATOUT_SHIFTER": {"DATOUT_SHIFTER": (5, 0)},
        "D_NAN_INPUT_NUM": {"NAN_INPUT_NUM": (31, 0)},
        "D_INF_INPUT_NUM": {"INF_INPUT_NUM": (31, 0)},
        "D_NAN_OUTPUT_NUM": {"NAN_OUTPUT_NUM": (31, 0)},
        "D_OUT_SATURATION": {"OUT_SATURATION": (31, 0)},
        "D_PERF_ENABLE": {"DMA_EN": (0, 0), "LUT_EN": (1, 1)},
        "D_PERF_WRITE_STALL": {"PERF_WRITE_STALL": (31, 0)},
        "D_PERF_LUT_UFLOW": {"PERF_LUT_UFLOW": (31, 0)},
        "D_PERF_LUT_OFLOW": {"PERF_LUT_OFLOW": (31, 0)},
        "D_PERF_LUT_HYBRID": {"PERF_LUT_HYBRID": (31, 0)},
        "D_PERF_LUT_LE_HIT": {"PERF_LUT_LE_HIT": (31, 0)},
        "D_PERF_LUT_LO_HIT": {"PERF_LUT_LO_HIT": (31, 0)},
        "D_CYA": {"CYA": (31, 0)},
    },
    "CDP_RDMA": {
        "S_STATUS": {"STATUS_0": (1, 0), "STATUS_1": (17, 16)},
        "S_POINTER": {"PRODUCER": (0, 0), "CONSUMER": (16, 16)},
        "D_OP_ENABLE": {"OP_EN": (0, 0)},
        "D_DATA_CUBE_WIDTH": {"WIDTH": (12, 0)},
        "D_DATA_CUBE_HEIGHT": {"HEIGHT": (12, 0)},
        "D_DATA_CUBE_CHANNEL": {"CHANNEL": (12, 0)},
        "D_SRC_BASE_ADDR_LOW": {"SRC_BASE_ADDR_LOW": (31, 0)},
        "D_SRC_BASE_ADDR_HIGH": {"SRC_BASE_ADDR_HIGH": (31, 0)},
        "D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": (31, 0)},
        "D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": (31, 0)},
        "D_SRC_DMA_CFG": {"SRC_RAM_TYPE": (0, 0)},
        "D_SRC_COMPRESSION_EN": {"SRC_COMPRESSION_EN": (0, 0)},
        "D_OPERATION_MODE": {"OPERATION_MODE": (1, 0)},
        "D_DATA_FORMAT": {"INPUT_DATA": (1, 0)},
        "D_PERF_ENABLE": {"DMA_EN": (0, 0)},
        "D_PERF_READ_STALL": {"PERF_READ_STALL": (31, 0)},
        "D_CYA": {"CYA": (31, 0)},
    },
    "PDP": {
        "S_STATUS": {"STATUS_0": (1, 0), "STATUS_1": (17, 16)},
        "S_POINTER": {"PRODUCER": (0, 0), "CONSUMER": (16, 16)},
        "D_OP_ENABLE": {"OP_EN": (0, 0)},
        "D_DATA_CUBE_IN_WIDTH": {"CUBE_IN_WIDTH": (12, 0)},
        "D_DATA_CUBE_IN_HEIGHT": {"CUBE_IN_HEIGHT": (12, 0)},
        "D_DATA_CUBE_IN_CHANNEL": {"CUBE_IN_CHANNEL": (12, 0)},
        "D_DATA_CUBE_OUT_WIDTH": {"CUBE_OUT_WIDTH": (12, 0)},
        "D_DATA_CUBE_OUT_HEIGHT": {"CUBE_OUT_HEIGHT": (12, 0)},
        "D_DATA_CUBE_OUT_CHANNEL": {"CUBE_OUT_CHANNEL": (12, 0)},
        "D_OPERATION_MODE_CFG": {"POOLING_METHOD": (1, 0), "FLYING_MODE": (4, 4), "SPLIT_NUM": (15, 8)},
        "D_NAN_FLUSH_TO_ZERO": {"NAN_TO_ZERO": (0, 0)},
        "D_PARTIAL_WIDTH_IN": {"PARTIAL_WIDTH_IN_FIRST": (9, 0), "PARTIAL_WIDTH_IN_LAST": (19, 10), "PARTIAL_WIDTH_IN_MID": (29, 20)},
        "D_PARTIAL_WIDTH_OUT": {"PARTIAL_WIDTH_OUT_FIRST": (9, 0), "PARTIAL_WIDTH_OUT_LAST": (19, 10), "PARTIAL_WIDTH_OUT_MID": (29, 20)},
        "D_POOLING_KERNEL_CFG": {"KERNEL_WIDTH": (3, 0), "KERNEL_HEIGHT": (11, 8), "KERNEL_STRIDE_WIDTH": (19, 16), "KERNEL_STRIDE_HEIGHT": (23, 20)},
        "D_RECIP_KERNEL_WIDTH": {"RECIP_KERNEL_WIDTH": (16, 0)},
        "D_RECIP_KERNEL_HEIGHT": {"RECIP_KERNEL_HEIGHT": (16, 0)},
        "D_POOLING_PADDING_CFG": {"PAD_LEFT": (2, 0), "PAD_TOP": (6, 4), "PAD_RIGHT": (10, 8), "PAD_BOTTOM": (14, 12)},
        "D_POOLING_PADDING_VALUE_1_CFG": {"PAD_VALUE_1X": (18, 0)},
        "D_POOLING_PADDING_VALUE_2_CFG": {"PAD_VALUE_2X": (18, 0)},
        "D_POOLING_PADDING_VALUE_3_CFG": {"PAD_VALUE_3X": (18, 0)},
        "D_POOLING_PADDING_VALUE_4_CFG": {"PAD_VALUE_4X": (18, 0)},
        "D_POOLING_PADDING_VALUE_5_CFG": {"PAD_VALUE_5X": (18, 0)},
        "D_POOLING_PADDING_VALUE_6_CFG": {"PAD_VALUE_6X": (18, 0)},
        "D_POOLING_PADDING_VALUE_7_CFG": {"PAD_VALUE_7X": (18, 0)},
        "D_SRC_BASE_ADDR_LOW": {"SRC_BASE_ADDR_LOW": (31, 0)},
        "D_SRC_BASE_ADDR_HIGH": {"SRC_BASE_ADDR_HIGH": (31, 0)},
        "D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": (31, 0)},
        "D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": (31, 0)},
        "D_DST_BASE_ADDR_LOW": {"DST_BASE_ADDR_LOW": (31, 0)},
        "D_DST_BASE_ADDR_HIGH": {"DST_BASE_ADDR_HIGH": (31, 0)},
        "D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": (31, 0)},
        "D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": (31, 0)},
        "D_DST_RAM_CFG": {"DST_RAM_TYPE": (0, 0)},
        "D_DATA_FORMAT": {"INPUT_DATA": (1, 0)},
        "D_INF_INPUT_NUM": {"INF_INPUT_NUM": (31, 0)},
        "D_NAN_INPUT_NUM": {"NAN_INPUT_NUM": (31, 0)},
        "D_NAN_OUTPUT_NUM": {"NAN_OUTPUT_NUM": (31, 0)},
        "D_PERF_ENABLE": {"DMA_EN": (0, 0)},
        "D_PERF_WRITE_STALL": {"PERF_WRITE_STALL": (31, 0)},
        "D_CYA": {"CYA": (31, 0)},
    },
    "PDP_RDMA": {
        "S_STATUS": {"STATUS_0": (1, 0), "STATUS_1": (17, 16)},
        "S_POINTER": {"PRODUCER": (0, 0), "CONSUMER": (16, 16)},
        "D_OP_ENABLE": {"OP_EN": (0, 0)},
        "D_DATA_CUBE_IN_WIDTH": {"CUBE_IN_WIDTH": (12, 0)},
        "D_DATA_CUBE_IN_HEIGHT": {"CUBE_IN_HEIGHT": (12, 0)},
        "D_DATA_CUBE_IN_CHANNEL": {"CUBE_IN_CHANNEL": (12, 0)},
        "D_FLYING_MODE": {"FLYING_MODE": (0, 0)},
        "D_SRC_BASE_ADDR_LOW": {"SRC_BASE_ADDR_LOW": (31, 0)},
        "D_SRC_BASE_ADDR_HIGH": {"SRC_BASE_ADDR_HIGH": (31, 0)},
        "D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": (31, 0)},
        "D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": (31, 0)},
        "D_SRC_RAM_CFG": {"SRC_RAM_TYPE": (0, 0)},
        "D_DATA_FORMAT": {"INPUT_DATA": (1, 0)},
        "D_OPERATION_MODE_CFG": {"SPLIT_NUM": (7, 0)},
        "D_POOLING_KERNEL_CFG": {"KERNEL_WIDTH": (3, 0), "KERNEL_STRIDE_WIDTH": (7, 4)},
        "D_POOLING_PADDING_CFG": {"PAD_WIDTH": (3, 0)},
        "D_PARTIAL_WIDTH_IN": {"PARTIAL_WIDTH_IN_FIRST": (9, 0), "PARTIAL_WIDTH_IN_LAST": (19, 10), "PARTIAL_WIDTH_IN_MID": (29, 20)},
        "D_PERF_ENABLE": {"DMA_EN": (0, 0)},
        "D_PERF_READ_STALL": {"PERF_READ_STALL": (31, 0)},
        "D_CYA": {"CYA": (31, 0)},
    },
}

_CMD = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*;")
_REG = re.compile(r"NVDLA_(\w+?)\.(\w+)_0$")
_DAT = re.compile(r"\{\s*offset:\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*size:\s*(\d+)\s*,\s*payload:([^}]*)\}")


class TraceError(ValueError):
    pass


@dataclass
class TraceView:
    """RegisterView over the last written register values."""

    regs: dict[tuple[str, str], int] = field(default_factory=dict)
    luts: dict[str, np.ndarray] = field(
        default_factory=lambda: {"LE": np.zeros(65, np.uint16), "LO": np.zeros(257, np.uint16)}
    )
    features: frozenset[str] = frozenset()
    _lut_addr: int = 0
    _lut_table: str = "LE"
    _lut_write: bool = False

    def reg(self, block: str, register: str) -> int:
        if register not in FIELDS.get(block, {}):
            raise KeyError(f"unknown register {block}.{register}")
        return self.regs.get((block, register), 0)

    def field(self, block: str, register: str, name: str) -> int:
        try:
            msb, lsb = FIELDS[block][register][name]
        except KeyError:
            raise KeyError(f"unknown field {block}.{register}.{name}") from None
        return (self.reg(block, register) >> lsb) & ((1 << (msb - lsb + 1)) - 1)

    def lut(self, block: str, table: str) -> np.ndarray:
        if block != "CDP":
            raise KeyError(f"no LUT in {block}")
        return self.luts[table].copy()

    def has(self, feature: str) -> bool:
        return feature in self.features

    def write(self, block: str, register: str, value: int) -> None:
        if register not in FIELDS.get(block, {}):
            raise KeyError(f"unknown register {block}.{register}")
        self.regs[(block, register)] = value & 0xFFFFFFFF
        if block == "CDP" and register == "S_LUT_ACCESS_CFG":
            self._lut_addr = value & 0x3FF
            self._lut_table = "LO" if value >> 16 & 1 else "LE"
            self._lut_write = bool(value >> 17 & 1)
        elif block == "CDP" and register == "S_LUT_ACCESS_DATA" and self._lut_write:
            t = self.luts[self._lut_table]
            if self._lut_addr < t.size:
                t[self._lut_addr] = value & 0xFFFF
            self._lut_addr = min(self._lut_addr + 1, t.size - 1)


def load_dat(path: Path) -> list[tuple[int, bytes]]:
    """Parse a trace ``.dat`` memory image into ``(offset, bytes)`` records."""
    out = []
    text = path.read_text()
    for m in _DAT.finditer(text):
        off, size = int(m.group(1), 0), int(m.group(2))
        payload = bytes(int(tok, 16) for tok in m.group(3).split())
        if len(payload) != size:
            raise TraceError(f"{path}: record at offset {off:#x} has {len(payload)} bytes, size says {size}")
        out.append((off, payload))
    return out


@dataclass
class Check:
    sync: str
    address: int
    size: int
    crc: int
    actual: int | None = None


@dataclass
class TraceRun:
    name: str
    checks: list[Check]
    results: list[LayerResult]


Model = Callable[..., LayerResult]


def trace_names(prefix: str) -> list[str]:
    if not TRACE_DIR.is_dir():
        return []
    return sorted(p.name for p in TRACE_DIR.iterdir() if p.is_dir() and p.name.startswith(prefix))


def run_trace(name: str, models: dict[str, Model], options: ModelOptions | None = None) -> TraceRun:
    """Replay trace ``name``; ``models`` maps a unit name (``"CDP"``, ``"PDP"``) to a model."""
    options = options or ModelOptions()
    folder = TRACE_DIR / name
    cfg = folder / f"{name}.cfg"
    view = TraceView()
    mem = SparseMemory()
    checks: list[Check] = []
    results: list[LayerResult] = []
    done: set[str] = set()
    for lineno, line in enumerate(cfg.read_text().splitlines(), 1):
        line = line.split("//", 1)[0]
        m = _CMD.match(line)
        if not m:
            continue
        cmd, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        if cmd == "reg_write":
            r = _REG.match(args[0])
            if not r:
                raise TraceError(f"{cfg}:{lineno}: bad register {args[0]!r}")
            view.write(r.group(1), r.group(2), int(args[1], 0))
        elif cmd == "mem_init":
            if args[3] != "ALL_ZERO":
                raise TraceError(f"{cfg}:{lineno}: pattern {args[3]} not supported")
            mem.fill(int(args[1], 0), int(args[2], 0), 0)
        elif cmd == "mem_load":
            fname = args[2].strip('"')
            path = (folder / fname).resolve()
            if path.parent != folder.resolve():
                raise TraceError(f"{cfg}:{lineno}: file {fname!r} outside the trace folder")
            base = int(args[1], 0)
            for off, payload in load_dat(path):
                mem.write(base + off, payload)
        elif cmd == "intr_notify":
            unit = args[0].split("_")[0]
            if unit not in models:
                raise TraceError(f"{cfg}:{lineno}: no model for unit {unit}")
            results.append(models[unit](view, mem, options))
            done.add(args[1])
        elif cmd == "check_crc":
            addr, size, crc = (int(a, 0) for a in args[2:5])
            chk = Check(args[0], addr, size, crc)
            chk.actual = zlib.crc32(mem.read(addr, size).tobytes()) & 0xFFFFFFFF
            checks.append(chk)
        elif cmd in ("check_nothing", "poll_reg_equal"):
            pass
        else:
            raise TraceError(f"{cfg}:{lineno}: unknown command {cmd!r}")
    return TraceRun(name, checks, results)
