"""Building a layer case: the blocks every generator shares (the bundled suites of
:mod:`.generate` and the random layers of :mod:`nvdla_hil.harness.fuzz`).

* :class:`Draft`: a case before its goldens exist; :func:`manifest_layer` turns it into the
  manifest and blobs :func:`~.write.write_case` writes; :func:`to_field_units` turns the byte
  addresses and strides a generator writes into the register map's field units.
* Register writers: :func:`reg` (one register, fields by name), :func:`bypass` / :func:`rdma_off`
  (SDP stages and operand DMAs off), and one writer per unit for the registers every layer of
  that unit programs the same way: :func:`sdp_cube_registers` (SDP_RDMA -> SDP memory to memory),
  :func:`sdp_operand_dma` (an SDP operand read from memory) and :func:`cdp_lrn_registers` (CDP
  LRN). Register order is the order a generator calls them in (a manifest lists its writes).
* Memory placement: :class:`Mem` (page-aligned allocation per port), :class:`Geo` (cube and
  strides), :func:`place_feature` (a feature surface placed by :class:`Mem`) and
  :func:`feature_io` (one at a fixed address).
* Reproducibility: :func:`rng_for` (case ``index`` of ``seed``: ``PCG64(seed).jumped(index)``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...drivers.profiles import load_profile
from .format import FORMAT, Hex
from .surface import packed_size

__all__ = [
    "MEM_PORT",
    "PRI_BASE",
    "RAM_TYPE",
    "Draft",
    "Geo",
    "Mem",
    "bypass",
    "cdp_lrn_registers",
    "feature_io",
    "lut_tables",
    "manifest_layer",
    "model_version",
    "place_feature",
    "rdma_off",
    "reg",
    "rng_for",
    "sdp_cube_registers",
    "sdp_operand_dma",
    "to_field_units",
]

PRI_BASE = 0x8000_0000  # primary port: bit 31 set (the model routes bit-31-clear addresses to sec_mem)
#: a generator's port name -> the manifest's port, and the DMA engines' RAM_TYPE field (1: MC = primary)
MEM_PORT = {"pri": "pri_mem", "sec": "sec_mem"}
RAM_TYPE = {"pri": 1, "sec": 0}


def model_version() -> str:
    try:
        from importlib.metadata import version

        return f"nvdla-hil {version('nvdla-hil')}"
    except Exception:  # noqa: BLE001 - not installed
        return "nvdla-hil (source)"


def rng_for(seed: int, index: int, draw: int = 0) -> np.random.Generator:
    """The case's own random stream: PCG64(seed) jumped ``index`` times; a redraw ``draw`` > 0 of
    the case (the fuzzer's, when a draw's golden says nothing) has its own stream, seeded by
    ``(seed, index, draw)``."""
    if draw:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, index, draw])))
    return np.random.Generator(np.random.PCG64(seed).jumped(index))


@dataclass
class Draft:
    """A case before its goldens exist."""

    unit: str | None = None
    profile: str | None = None
    description: str = ""
    registers: list[dict[str, Any]] = field(default_factory=list)
    lut: dict[str, Any] | None = None  # {unit, config}
    lut_tables: dict[str, np.ndarray] = field(default_factory=dict)  # le/lo int16
    convertors: dict[str, dict[str, int]] = field(default_factory=dict)
    inputs: list[tuple[dict[str, Any], np.ndarray]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    statistics: bool = False
    launch: tuple[str, ...] | None = None  # blocks to enable (None: the loader's default for the unit)
    features: tuple[str, ...] = ()  # declared profile features (the loader derives the others)
    # layout cases
    layout: dict[str, Any] | None = None  # {name, params, dtype, shape}
    array: np.ndarray | None = None
    family: str | None = None
    # pick this convertor's shift from the range so the golden output has the most distinct values
    tune: tuple[str, range] | None = None


# ---- register writers --------------------------------------------------------------------------------------


def reg(name: str, **flds: int | str) -> dict[str, Any]:
    """One register write, ``BLOCK.REGISTER`` with its fields by name (addresses kept in hex)."""
    return {"reg": name, "fields": {k: Hex(v) if k.endswith("_ADDR_LOW") and isinstance(v, int) else v
                                    for k, v in flds.items()}}


def bypass(d: Draft, *stages: str) -> None:
    """SDP stages (``BS``, ``BN``, ``EW``) bypassed whole."""
    for st in stages:
        if st == "EW":
            d.registers.append(reg("SDP.D_DP_EW_CFG", EW_BYPASS=1, EW_ALU_BYPASS=1, EW_MUL_BYPASS=1, EW_LUT_BYPASS=1))
        else:
            d.registers.append(reg(f"SDP.D_DP_{st}_CFG", **{f"{st}_BYPASS": 1, f"{st}_ALU_BYPASS": 1,
                                                           f"{st}_MUL_BYPASS": 1, f"{st}_RELU_BYPASS": 1}))


def rdma_off(d: Draft, *dmas: str) -> None:
    """SDP_RDMA operand engines (``BRDMA``, ``NRDMA``, ``ERDMA``) disabled."""
    for dma in dmas:
        d.registers.append(reg(f"SDP_RDMA.D_{dma}_CFG", **{f"{dma}_DISABLE": 1}))


def sdp_cube_registers(d: Draft, w: int, h: int, c: int, *, src: int, dst: int, line: int, surf: int,
                       proc: int = 0, out: int = 0, rdma_mode: Mapping[str, int] | None = None, nan_to_zero: int | None = 0,
                       src_ram: int = 1, dst_ram: int = 1) -> None:  # fmt: skip
    """SDP memory to memory: the cube of SDP_RDMA and SDP, the source and destination surfaces
    (same line and surface strides), the precisions (``PROC_PRECISION`` / ``OUT_PRECISION``:
    0 INT8, 1 INT16, 2 FP16; SDP_RDMA's ``D_FEATURE_MODE_CFG`` fields as ``rdma_mode`` gives them,
    else IN = PROC) and the DMA ports (``RAM_TYPE`` 1 = MC, the primary port; the reset value
    is the secondary port). ``nan_to_zero`` None leaves ``NAN_TO_ZERO`` out of SDP's
    ``D_FEATURE_MODE_CFG`` (its reset value)."""
    for blk in ("SDP_RDMA", "SDP"):
        d.registers += [reg(f"{blk}.D_DATA_CUBE_WIDTH", WIDTH=w - 1), reg(f"{blk}.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1),
                        reg(f"{blk}.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)]
    mode = dict(rdma_mode) if rdma_mode is not None else \
        {"FLYING_MODE": 0, "WINOGRAD": 0, "IN_PRECISION": proc, "PROC_PRECISION": proc, "OUT_PRECISION": out, "BATCH_NUMBER": 0}
    n2z = {} if nan_to_zero is None else {"NAN_TO_ZERO": nan_to_zero}
    sdp_mode: dict[str, int] = {"FLYING_MODE": 0, "OUTPUT_DST": 0, "WINOGRAD": 0, **n2z, "BATCH_NUMBER": 0}
    d.registers += [
        reg("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src), reg("SDP_RDMA.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
        reg("SDP_RDMA.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line), reg("SDP_RDMA.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
        reg("SDP_RDMA.D_FEATURE_MODE_CFG", **mode),
        reg("SDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), reg("SDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        reg("SDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=line), reg("SDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf),
        reg("SDP.D_FEATURE_MODE_CFG", **sdp_mode),
        reg("SDP.D_DATA_FORMAT", PROC_PRECISION=proc, OUT_PRECISION=out),
        reg("SDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=src_ram), reg("SDP.D_DST_DMA_CFG", DST_RAM_TYPE=dst_ram),
    ]


def sdp_operand_dma(d: Draft, dma: str, stage: str, kind: str, addr: int, line: int, surf: int, *, per_element: bool,
                    size16: bool = True, ram: int = 1) -> None:  # fmt: skip
    """An SDP operand read from memory by ``dma`` (BRDMA / NRDMA / ERDMA) for ``stage`` (BS / BN /
    EW): the ALU's or the MUL's (``kind``), 1 or 2 bytes an element (``size16``), one per channel
    or one per element (``per_element``), at ``addr`` with its strides."""
    d.registers += [
        reg(f"SDP_RDMA.D_{dma}_CFG", **{f"{dma}_DISABLE": 0, f"{dma}_DATA_USE": 1 if kind == "ALU" else 0,
                                       f"{dma}_DATA_SIZE": int(size16), f"{dma}_DATA_MODE": int(per_element),
                                       f"{dma}_RAM_TYPE": ram}),
        reg(f"SDP_RDMA.D_{stage}_BASE_ADDR_LOW", **{f"{stage}_BASE_ADDR_LOW": addr}),
        reg(f"SDP_RDMA.D_{stage}_BASE_ADDR_HIGH", **{f"{stage}_BASE_ADDR_HIGH": 0}),
        reg(f"SDP_RDMA.D_{stage}_LINE_STRIDE", **{f"{stage}_LINE_STRIDE": line}),
        reg(f"SDP_RDMA.D_{stage}_SURFACE_STRIDE", **{f"{stage}_SURFACE_STRIDE": surf}),
    ]


def cdp_lrn_registers(d: Draft, w: int, h: int, c: int, *, src: int, dst: int, line: int, surf: int, precision: int,
                      normalz_len: int, sqsum_bypass: int, mul_bypass: int, src_ram: int = 1,
                      dst_ram: int = 1) -> None:  # fmt: skip
    """CDP LRN memory to memory: CDP_RDMA's cube and source, CDP's destination (same strides),
    the data format (0 INT8, 1 INT16, 2 FP16), the window (``NORMALZ_LEN``: 3, 5, 7 or 9
    channels), the SQSUM / MUL bypasses and the DMA ports."""
    d.registers += [
        reg("CDP_RDMA.D_DATA_CUBE_WIDTH", WIDTH=w - 1), reg("CDP_RDMA.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1),
        reg("CDP_RDMA.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1),
        reg("CDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src), reg("CDP_RDMA.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
        reg("CDP_RDMA.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line), reg("CDP_RDMA.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
        reg("CDP_RDMA.D_DATA_FORMAT", INPUT_DATA=precision), reg("CDP.D_DATA_FORMAT", INPUT_DATA_TYPE=precision),
        reg("CDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), reg("CDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        reg("CDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=line), reg("CDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf),
        reg("CDP.D_LRN_CFG", NORMALZ_LEN=normalz_len),
        reg("CDP.D_FUNC_BYPASS", SQSUM_BYPASS=sqsum_bypass, MUL_BYPASS=mul_bypass),
        reg("CDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=src_ram), reg("CDP.D_DST_DMA_CFG", DST_RAM_TYPE=dst_ram),
    ]


def lut_tables(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Smooth-ish random tables (random walk) so interpolation is exercised with real slopes."""
    le = np.cumsum(rng.integers(-600, 601, 65)) + int(rng.integers(-8000, 8001))
    lo = np.cumsum(rng.integers(-200, 201, 257)) + int(rng.integers(-8000, 8001))
    return {"le": np.clip(le, -32768, 32767).astype(np.int16), "lo": np.clip(lo, -32768, 32767).astype(np.int16)}


# ---- memory placement -------------------------------------------------------------------------------------


class Mem:
    """Surfaces placed one after another per port from :data:`PRI_BASE` (plus ``offset`` bytes),
    each on a fresh 4 KiB page with a free page between; never past 4 GiB."""

    def __init__(self, offset: int = 0) -> None:
        self.next = {"pri_mem": PRI_BASE + offset, "sec_mem": PRI_BASE + offset}

    @classmethod
    def for_case(cls, s: Any) -> Mem:
        """Placement from a fuzz case's ``place_mib`` (its sampler's value; 0 when it has none)."""
        return cls(int(s.v.get("place_mib", 0)) << 20)

    def alloc(self, port: str, nbytes: int) -> int:
        a = self.next[port]
        if a + nbytes > 1 << 32:
            raise ValueError(f"{port} surface of {nbytes} bytes at {a:#x} would end past the 32-bit address space")
        self.next[port] = (a + nbytes + 0xFFF) // 0x1000 * 0x1000 + 0x1000
        return a


@dataclass
class Geo:
    """A feature cube (width, height, channels) and its line and surface strides in bytes."""

    w: int
    h: int
    c: int
    line: int
    surf: int


def place_feature(d: Draft, mem: Mem, name: str, arr_or_shape: Any, port: str, atom: int, geo: Geo, *,
                  output: bool = False, dtype: str = "int8") -> int:  # fmt: skip
    """An input (an array) or output (a shape) feature surface with ``geo``'s strides, placed by
    ``mem`` on ``port`` (``pri`` / ``sec``); returns its address."""
    params = {"atom_bytes": atom, "line_stride": geo.line, "surface_stride": geo.surf}
    shape = list(arr_or_shape.shape) if isinstance(arr_or_shape, np.ndarray) else list(arr_or_shape)
    size = packed_size("nvdla.feature", tuple(shape), np.dtype(dtype), params)
    addr = mem.alloc(MEM_PORT[port], size)
    meta = {"name": name, "layout": "nvdla.feature", "params": params, "dtype": dtype, "shape": shape,
            "address": Hex(addr), "port": MEM_PORT[port]}
    if output:
        d.outputs.append({**meta, "rule": "bitexact"})
    else:
        d.inputs.append((meta, arr_or_shape))
    return addr


def feature_io(d: Draft, name: str, arr: np.ndarray, addr: int, *, atom: int, output: bool = False) -> None:
    """A packed feature surface (no gaps) at ``addr`` on the primary port: an input holding
    ``arr``, or an output of ``arr``'s shape and dtype."""
    meta = {"name": name, "layout": "nvdla.feature", "params": {"atom_bytes": atom}, "dtype": str(arr.dtype),
            "shape": list(arr.shape), "address": Hex(addr), "port": "pri_mem"}
    if output:
        d.outputs.append({**meta, "rule": "bitexact"})
    else:
        d.inputs.append((meta, arr))


# ---- draft -> manifest ------------------------------------------------------------------------------------


def to_field_units(d: Draft) -> Draft:
    """Generators give addresses and strides in bytes; a register map may declare them as the
    upper bits only (nv_full's v1 map: bits [31:5], 32-byte units), so each byte value is
    shifted by its field's lsb (no-op for the v2 maps) in a copy of the draft. A value that
    is not aligned to the field's unit is a generator bug, named."""
    assert d.profile is not None, "a layer draft names its profile"
    rm = load_profile(d.profile).regmap
    out = copy.copy(d)
    out.registers = []
    for r in d.registers:
        blk, rname = r["reg"].split(".", 1)
        fl = dict(r["fields"])
        for fname, v in fl.items():
            if "ADDR_LOW" in fname or fname.endswith(("LINE_STRIDE", "SURFACE_STRIDE")):
                lsb = rm.register(blk, rname).field(fname).lsb
                if lsb:
                    if int(v) % (1 << lsb):
                        raise ValueError(f"{r['reg']}.{fname} = {int(v):#x} is not {1 << lsb}-byte aligned")
                    fl[fname] = Hex(int(v) >> lsb) if "ADDR_LOW" in fname else int(v) >> lsb
        out.registers.append({**r, "fields": fl})
    return out


def manifest_layer(name: str, d: Draft, prov: dict[str, Any], golden: dict[str, Any] | None) -> tuple[dict, dict]:
    """The manifest and blobs of a layer draft; ``golden`` None: placeholders (a CRC of 0, empty
    statistics) for the reference run that computes the goldens."""
    blobs: dict[str, bytes] = {}
    man: dict[str, Any] = {"format": FORMAT, "name": name, "kind": "layer", "description": d.description,
                           "unit": d.unit, "profile": d.profile}
    if d.features:
        man["features"] = list(d.features)
    if d.launch is not None:
        man["launch"] = list(d.launch)
    man["registers"] = [dict(r) for r in d.registers]
    if d.lut is not None:
        lut = {"unit": d.lut["unit"], "config": dict(d.lut["config"])}
        for t, arr in d.lut_tables.items():
            blobs[f"lut_{t}.bin"] = arr.astype("<i2").tobytes()
            lut[t] = f"lut_{t}.bin"
        man["lut"] = lut
    if d.convertors:
        man["convertors"] = {k: dict(v) for k, v in d.convertors.items()}
    man["inputs"] = []
    for meta, arr in d.inputs:
        fname = f"{meta['name']}.bin"
        blobs[fname] = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        man["inputs"].append({**meta, "data": fname})
    man["outputs"] = []
    for meta in d.outputs:
        o = dict(meta)
        if golden is None:
            o["crc"] = 0  # placeholder while the golden is computed
        else:
            fname = f"{meta['name']}.expected.bin"
            blobs[fname] = golden["outputs"][meta["name"]].tobytes()
            o["expected"] = fname
        man["outputs"].append(o)
    if golden is None and d.statistics:
        man["statistics"] = {}  # placeholder: read the counters back while computing the golden
    elif golden is not None and golden.get("statistics") is not None:
        man["statistics"] = golden["statistics"]
    if golden is not None and golden.get("statuses"):
        man["statuses"] = dict(golden["statuses"])  # the status registers the layer set (vectors/run.py)
    man["provenance"] = prov
    return man, blobs
