"""Minimal NVDLA trace-test reader for the SDP reference-model tests (test fixture only;
the real trace player lives in the harness).

Understands ``mem_init``, ``mem_load`` (the ``{offset:.., size:.., payload:..}`` .dat format,
offsets relative to the load address), ``reg_write(NVDLA_BLOCK.REG_0, value)``,
``intr_notify`` and ``check_crc``. SDP LUT tables are filled through
``S_LUT_ACCESS_CFG``/``S_LUT_ACCESS_DATA`` as in doc section 7. Field bit ranges of the
SDP/SDP_RDMA registers are from NVDLA's ``spec/manual/NVDLA_SDP*.rdl`` (facts only).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from nvdla_hil.harness.memory import SparseMemory

# block reg field[msb:lsb] ...   (registers whose fields the SDP model reads)
_FIELDS = """
SDP S_LUT_CFG LUT_LE_FUNCTION[0:0] LUT_UFLOW_PRIORITY[4:4] LUT_OFLOW_PRIORITY[5:5] LUT_HYBRID_PRIORITY[6:6]
SDP S_LUT_INFO LUT_LE_INDEX_OFFSET[7:0] LUT_LE_INDEX_SELECT[15:8] LUT_LO_INDEX_SELECT[23:16]
SDP S_LUT_LE_START LUT_LE_START[31:0]
SDP S_LUT_LE_END LUT_LE_END[31:0]
SDP S_LUT_LO_START LUT_LO_START[31:0]
SDP S_LUT_LO_END LUT_LO_END[31:0]
SDP S_LUT_LE_SLOPE_SCALE LUT_LE_SLOPE_UFLOW_SCALE[15:0] LUT_LE_SLOPE_OFLOW_SCALE[31:16]
SDP S_LUT_LE_SLOPE_SHIFT LUT_LE_SLOPE_UFLOW_SHIFT[4:0] LUT_LE_SLOPE_OFLOW_SHIFT[9:5]
SDP S_LUT_LO_SLOPE_SCALE LUT_LO_SLOPE_UFLOW_SCALE[15:0] LUT_LO_SLOPE_OFLOW_SCALE[31:16]
SDP S_LUT_LO_SLOPE_SHIFT LUT_LO_SLOPE_UFLOW_SHIFT[4:0] LUT_LO_SLOPE_OFLOW_SHIFT[9:5]
SDP S_LUT_ACCESS_CFG LUT_ADDR[9:0] LUT_TABLE_ID[16:16] LUT_ACCESS_TYPE[17:17]
SDP S_LUT_ACCESS_DATA LUT_DATA[15:0]
SDP D_DATA_CUBE_WIDTH WIDTH[12:0]
SDP D_DATA_CUBE_HEIGHT HEIGHT[12:0]
SDP D_DATA_CUBE_CHANNEL CHANNEL[12:0]
SDP D_DP_BS_CFG BS_BYPASS[0:0] BS_ALU_BYPASS[1:1] BS_ALU_ALGO[3:2] BS_MUL_BYPASS[4:4] BS_MUL_PRELU[5:5] BS_RELU_BYPASS[6:6]
SDP D_DP_BS_ALU_CFG BS_ALU_SRC[0:0] BS_ALU_SHIFT_VALUE[13:8]
SDP D_DP_BS_ALU_SRC_VALUE BS_ALU_OPERAND[15:0]
SDP D_DP_BS_MUL_CFG BS_MUL_SRC[0:0] BS_MUL_SHIFT_VALUE[15:8]
SDP D_DP_BS_MUL_SRC_VALUE BS_MUL_OPERAND[15:0]
SDP D_DP_BN_CFG BN_BYPASS[0:0] BN_ALU_BYPASS[1:1] BN_ALU_ALGO[3:2] BN_MUL_BYPASS[4:4] BN_MUL_PRELU[5:5] BN_RELU_BYPASS[6:6]
SDP D_DP_BN_ALU_CFG BN_ALU_SRC[0:0] BN_ALU_SHIFT_VALUE[13:8]
SDP D_DP_BN_ALU_SRC_VALUE BN_ALU_OPERAND[15:0]
SDP D_DP_BN_MUL_CFG BN_MUL_SRC[0:0] BN_MUL_SHIFT_VALUE[15:8]
SDP D_DP_BN_MUL_SRC_VALUE BN_MUL_OPERAND[15:0]
SDP D_DP_EW_CFG EW_BYPASS[0:0] EW_ALU_BYPASS[1:1] EW_ALU_ALGO[3:2] EW_MUL_BYPASS[4:4] EW_MUL_PRELU[5:5] EW_LUT_BYPASS[6:6]
SDP D_DP_EW_ALU_CFG EW_ALU_SRC[0:0] EW_ALU_CVT_BYPASS[1:1]
SDP D_DP_EW_ALU_SRC_VALUE EW_ALU_OPERAND[31:0]
SDP D_DP_EW_ALU_CVT_OFFSET_VALUE EW_ALU_CVT_OFFSET[31:0]
SDP D_DP_EW_ALU_CVT_SCALE_VALUE EW_ALU_CVT_SCALE[15:0]
SDP D_DP_EW_ALU_CVT_TRUNCATE_VALUE EW_ALU_CVT_TRUNCATE[5:0]
SDP D_DP_EW_MUL_CFG EW_MUL_SRC[0:0] EW_MUL_CVT_BYPASS[1:1]
SDP D_DP_EW_MUL_SRC_VALUE EW_MUL_OPERAND[31:0]
SDP D_DP_EW_MUL_CVT_OFFSET_VALUE EW_MUL_CVT_OFFSET[31:0]
SDP D_DP_EW_MUL_CVT_SCALE_VALUE EW_MUL_CVT_SCALE[15:0]
SDP D_DP_EW_MUL_CVT_TRUNCATE_VALUE EW_MUL_CVT_TRUNCATE[5:0]
SDP D_DP_EW_TRUNCATE_VALUE EW_TRUNCATE[9:0]
SDP D_FEATURE_MODE_CFG FLYING_MODE[0:0] OUTPUT_DST[1:1] WINOGRAD[2:2] NAN_TO_ZERO[3:3] BATCH_NUMBER[12:8]
SDP D_DATA_FORMAT PROC_PRECISION[1:0] OUT_PRECISION[3:2]
SDP D_CVT_OFFSET CVT_OFFSET[31:0]
SDP D_CVT_SCALE CVT_SCALE[15:0]
SDP D_CVT_SHIFT CVT_SHIFT[5:0]
SDP D_PERF_ENABLE PERF_DMA_EN[0:0] PERF_LUT_EN[1:1] PERF_SAT_EN[2:2] PERF_NAN_INF_COUNT_EN[3:3]
SDP_RDMA D_DATA_CUBE_WIDTH WIDTH[12:0]
SDP_RDMA D_DATA_CUBE_HEIGHT HEIGHT[12:0]
SDP_RDMA D_DATA_CUBE_CHANNEL CHANNEL[12:0]
SDP_RDMA D_BRDMA_CFG BRDMA_DISABLE[0:0] BRDMA_DATA_USE[2:1] BRDMA_DATA_SIZE[3:3] BRDMA_DATA_MODE[4:4] BRDMA_RAM_TYPE[5:5]
SDP_RDMA D_NRDMA_CFG NRDMA_DISABLE[0:0] NRDMA_DATA_USE[2:1] NRDMA_DATA_SIZE[3:3] NRDMA_DATA_MODE[4:4] NRDMA_RAM_TYPE[5:5]
SDP_RDMA D_ERDMA_CFG ERDMA_DISABLE[0:0] ERDMA_DATA_USE[2:1] ERDMA_DATA_SIZE[3:3] ERDMA_DATA_MODE[4:4] ERDMA_RAM_TYPE[5:5]
SDP_RDMA D_FEATURE_MODE_CFG FLYING_MODE[0:0] WINOGRAD[1:1] IN_PRECISION[3:2] PROC_PRECISION[5:4] OUT_PRECISION[7:6] BATCH_NUMBER[12:8]
"""

# reset values that matter when a trace does not write the register (rdl "reset")
_RESETS = {
    ("SDP", "D_DP_BS_CFG"): 0x73,
    ("SDP", "D_DP_BN_CFG"): 0x53,
    ("SDP", "D_DP_EW_CFG"): 0x53,
    ("SDP", "D_DP_EW_ALU_CFG"): 0x2,
    ("SDP", "D_DP_EW_MUL_CFG"): 0x2,
    ("SDP_RDMA", "D_BRDMA_CFG"): 0x1,
    ("SDP_RDMA", "D_NRDMA_CFG"): 0x1,
    ("SDP_RDMA", "D_ERDMA_CFG"): 0x1,
}


def _parse_fields() -> dict[tuple[str, str], dict[str, tuple[int, int]]]:
    out: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
    for line in _FIELDS.strip().splitlines():
        block, reg, *flds = line.split()
        d = out.setdefault((block, reg), {})
        for f in flds:
            m = re.fullmatch(r"(\w+)\[(\d+):(\d+)\]", f)
            assert m, f
            d[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


FIELDS = _parse_fields()


@dataclass
class DictView:
    """RegisterView over a plain dict of raw register values."""

    regs: dict[tuple[str, str], int] = field(default_factory=dict)
    features: set[str] = field(default_factory=set)
    tables: dict[str, np.ndarray] = field(
        default_factory=lambda: {"LE": np.zeros(65, np.uint16), "LO": np.zeros(257, np.uint16)}
    )

    def reg(self, block: str, register: str) -> int:
        return self.regs.get((block, register), _RESETS.get((block, register), 0))

    def field(self, block: str, register: str, name: str) -> int:
        try:
            msb, lsb = FIELDS[(block, register)][name]
        except KeyError:
            raise KeyError(f"unknown field {block}.{register}.{name}") from None
        return (self.reg(block, register) >> lsb) & ((1 << (msb - lsb + 1)) - 1)

    def lut(self, block: str, table: str) -> np.ndarray:
        return self.tables[table].copy()

    def has(self, feature: str) -> bool:
        return feature in self.features

    def write(self, block: str, register: str, value: int) -> None:
        """CSB write with the SDP LUT access side effect (doc section 7)."""
        self.regs[(block, register)] = value
        if block == "SDP" and register == "S_LUT_ACCESS_DATA":
            cfg = self.reg("SDP", "S_LUT_ACCESS_CFG")
            if (cfg >> 17) & 1:  # WRITE
                tab = self.tables["LO" if (cfg >> 16) & 1 else "LE"]
                addr = cfg & 0x3FF
                if addr < tab.size:
                    tab[addr] = value & 0xFFFF
                self.regs[("SDP", "S_LUT_ACCESS_CFG")] = (cfg & ~0x3FF) | ((addr + 1) & 0x3FF)


_DAT_REC = re.compile(r"\{\s*offset:\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*size:\s*(\d+)\s*,\s*payload:([^}]*)\}")


def load_dat(path: Path, mem: SparseMemory, base: int) -> None:
    """Load a trace ``.dat`` image at ``base``."""
    text = path.read_text()
    for m in _DAT_REC.finditer(text):
        off, size = int(m.group(1), 0), int(m.group(2))
        data = np.array([int(t, 16) for t in m.group(3).split()], dtype=np.uint8)
        if data.size != size:
            raise ValueError(f"{path}: record at offset {off:#x} has {data.size} bytes, size says {size}")
        mem.write(base + off, data)


@dataclass
class Check:
    addr: int
    size: int
    crc: int


_CALL = re.compile(r"^\s*(\w+)\((.*)\);")


def run_trace(folder: Path, layer, *, features: set[str], **kwargs) -> list[tuple[Check, int]]:
    """Replay ``folder``'s trace; ``layer(view, mem)`` runs at each ``intr_notify(SDP_*)``.
    Returns ``[(check, actual_crc), ...]``."""
    cfg = folder / f"{folder.name}.cfg"
    mem = SparseMemory()
    view = DictView(features=set(features))
    results: list[tuple[Check, int]] = []
    for lineno, line in enumerate(cfg.read_text().splitlines(), 1):
        m = _CALL.match(line)
        if not m:
            continue
        cmd, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        if cmd == "mem_init":
            mem.fill(int(args[1], 0), int(args[2], 0), 0)
        elif cmd == "mem_load":
            name = args[2].strip('"')
            p = (folder / name).resolve()
            if p.parent != folder.resolve():
                raise ValueError(f"{cfg}:{lineno}: blob outside the trace folder: {name}")
            load_dat(p, mem, int(args[1], 0))
        elif cmd == "reg_write":
            rm = re.fullmatch(r"NVDLA_(\w+?)\.(\w+)_0", args[0])
            if not rm:
                raise ValueError(f"{cfg}:{lineno}: bad register name {args[0]!r}")
            view.write(rm.group(1), rm.group(2), int(args[1], 0) & 0xFFFFFFFF)
        elif cmd == "intr_notify":
            if args[0].startswith("SDP"):
                layer(view, mem)
        elif cmd == "check_crc":
            chk = Check(int(args[2], 0), int(args[3], 0), int(args[4], 0))
            results.append((chk, zlib.crc32(mem.read(chk.addr, chk.size).tobytes()) & 0xFFFFFFFF))
    return results
