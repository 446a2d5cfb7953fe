"""Functional coverage of the reference model: which LUT cases, convertor corners, datapath
modes, cube shapes and memory ports the layers of a run really exercised.

Bins and crosses are defined here, in one place (:data:`GROUPS`). A :class:`Coverage`
collector receives the reference model's per-element events (``sdp_lut``, ``sdp_out``,
``cdp``) and one ``layer`` event per layer from the model target it was given
(``ModelTarget(coverage=cov)``, or ``TargetSpec(coverage=cov)`` for targets made by
:func:`~nvdla_hil.harness.targets.open_target`); there is no process-wide collector. It counts
elements (or layers, for configuration bins) per bin. Collectors merge by adding counts
(:func:`merge`), across xdist workers, fuzz workers and runs; the file format is JSON
(:meth:`Coverage.to_json`, :func:`load`):

    {"format": "nvdla-hil-coverage/1", "layers": 412, "profiles": ["nv_small_256_full"],
     "bins": {"sdp.lut.le_hit": 1234, "sdp.lut.uflow.prio_lo": 0, ...}}

A bin is *reachable* on a profile when the profile has its group's features (the SDP LUT
bins need ``sdp_lut``, second-port bins need ``sec_mem``); :func:`format_table` prints hits
per bin and marks empty reachable bins.

Why not cocotb-coverage: it samples one Python call per coverpoint per value (a decorated
function call per element), which is fine inside a testbench but far too slow for numpy
arrays of every element of every layer; its bins are also tied to the cocotb-coverage
database format. The events here are counted with one vectorised ``count_nonzero`` per bin,
and the JSON format merges with a dict sum.

A pytest session's coverage (``nvdla-hil regress``: the table at the end, ``coverage.json``, the
counts of xdist and Dask workers merged) is the plugin's: :mod:`nvdla_hil.harness.plugin.coverage`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Bin", "Group", "GROUPS", "BINS", "FORMAT", "Coverage", "merge", "load", "reachable", "format_table"]

FORMAT = "nvdla-hil-coverage/1"


@dataclass(frozen=True)
class Bin:
    name: str
    doc: str
    needs: tuple[str, ...] = ()  # profile features beyond the group's


@dataclass(frozen=True)
class Group:
    name: str
    doc: str
    needs: tuple[str, ...]
    bins: tuple[Bin, ...]


def _lut_bins(p: str) -> tuple[Bin, ...]:
    b = [
        Bin(f"{p}.le_hit", "LE hit, LO not (elements)"),
        Bin(f"{p}.lo_hit", "LO hit, LE not"),
    ]
    for case, doc in (("both_hit", "both tables hit"), ("uflow", "both tables underflow"),
                      ("oflow", "both tables overflow"), ("miss", "hybrid miss: one table under-, the other overflows")):
        prio = "hybrid" if case in ("both_hit", "miss") else case
        for t in ("le", "lo"):
            b.append(Bin(f"{p}.{case}.prio_{t}", f"{doc}, {prio} priority {t.upper()}"))
    b += [
        Bin(f"{p}.le_exponent.hit", "LE hit in exponent mode"),
        Bin(f"{p}.le_linear.hit", "LE hit in linear mode"),
        Bin(f"{p}.le.index_first", "LE hit on entry 0"),
        Bin(f"{p}.le.index_last", "LE hit on entry 63 (the last interpolation interval)"),
        Bin(f"{p}.lo.index_first", "LO hit on entry 0"),
        Bin(f"{p}.lo.index_last", "LO hit on entry 255"),
    ]
    for t, what in (("le_offset", "LE index offset (exponent mode)"), ("le_select", "LE index select (linear mode)"),
                    ("lo_select", "LO index select")):
        for sign in ("neg", "zero", "pos"):
            b.append(Bin(f"{p}.cfg.{t}.{sign}", f"{what} {dict(neg='< 0', zero='= 0', pos='> 0')[sign]} (layers)"))
    return tuple(b)


def _cube_bins(u: str) -> tuple[Bin, ...]:
    return (
        Bin(f"{u}.cube.1x1xC", "W = H = 1 (layers)"),
        Bin(f"{u}.cube.single_line", "H = 1, W > 1"),
        Bin(f"{u}.cube.multi_line", "H > 1"),
        Bin(f"{u}.cube.partial_atom", "C not a multiple of the atom's channels"),
        Bin(f"{u}.cube.multi_surface", "C over more than one surface"),
        Bin(f"{u}.cube.gaps", "line or surface stride with a gap"),
    )


def _port_bins(u: str, both: bool = True) -> tuple[Bin, ...]:
    b = [Bin(f"{u}.ports.read.pri", "an engine reads the primary port (MC)"),
         Bin(f"{u}.ports.read.sec", "an engine reads the secondary port (CV)", ("sec_mem",)),
         Bin(f"{u}.ports.write.pri", "output written to the primary port"),
         Bin(f"{u}.ports.write.sec", "output written to the secondary port", ("sec_mem",))]
    if both:
        b.append(Bin(f"{u}.ports.both", "one layer uses both ports", ("sec_mem",)))
    return tuple(b)


def _bsbn_bins(st: str) -> tuple[Bin, ...]:
    p = f"sdp.{st}"
    return tuple(Bin(f"{p}.{k}", d) for k, d in (
        ("alu.max", "ALU max"), ("alu.min", "ALU min"), ("alu.sum", "ALU sum"), ("mul", "MUL (no PReLU)"),
        ("prelu", "MUL PReLU"), ("relu", "ReLU"), ("operand.reg", "an operand from a register"),
        ("operand.mem_channel", "an operand from memory, per channel"),
        ("operand.mem_element", "an operand from memory, per element")))


def _shift_bins(p: str, top: int) -> tuple[Bin, ...]:
    return (Bin(f"{p}.shift.zero", "shift 0 (clamp only) (layers)"), Bin(f"{p}.shift.mid", f"shift 1..{top - 1}"),
            Bin(f"{p}.shift.max", f"shift {top} (the field's maximum)"))


GROUPS: tuple[Group, ...] = (
    Group("sdp.lut", "SDP EW-stage LUT: cases x priorities, LE mode, index extremes", ("sdp_lut",), _lut_bins("sdp.lut")),
    Group("sdp.out", "SDP output convertor", (), (
        Bin("sdp.out.sat_high", "rounded value above the output maximum (elements)"),
        Bin("sdp.out.sat_low", "rounded value below the output minimum"),
        Bin("sdp.out.in_range", "no saturation"),
        *_shift_bins("sdp.out", 63))),
    Group("sdp.bs", "SDP BS stage modes (layers)", ("sdp_bs",), _bsbn_bins("bs")),
    Group("sdp.bn", "SDP BN stage modes (layers)", ("sdp_bn",), _bsbn_bins("bn")),
    Group("sdp.ew", "SDP EW stage modes (layers)", ("sdp_ew",), tuple(Bin(f"sdp.ew.{k}", d) for k, d in (
        ("alu.max", "ALU max"), ("alu.min", "ALU min"), ("alu.sum", "ALU sum"), ("alu.eql", "ALU EQL (no output)"),
        ("mul", "MUL (no PReLU)"), ("prelu", "MUL PReLU"), ("operand.reg", "a register operand"),
        ("operand.mem", "a memory operand"), ("cvt.on", "a memory operand through its convertor"),
        ("cvt.bypass", "a memory operand with the convertor bypassed"), ("lut", "LUT on")))),
    Group("sdp.cube", "SDP input cube shapes (layers)", (), _cube_bins("sdp")),
    Group("sdp.ports", "SDP memory ports (layers)", (), _port_bins("sdp")),
    Group("cdp.lut", "CDP (LRN) LUT: cases x priorities, LE mode, index extremes", ("cdp",), _lut_bins("cdp.lut")),
    Group("cdp.cvt", "CDP convertors and LRN modes", ("cdp",), (
        Bin("cdp.in.sat_high", "input convertor saturates high (elements)"),
        Bin("cdp.in.sat_low", "input convertor saturates low"),
        Bin("cdp.out.sat_high", "output convertor saturates high"),
        Bin("cdp.out.sat_low", "output convertor saturates low"),
        Bin("cdp.out.in_range", "output convertor in range"),
        *_shift_bins("cdp.in", 31), *_shift_bins("cdp.out", 63),
        Bin("cdp.window.3", "LRN window 3 (layers)"), Bin("cdp.window.5", "window 5"), Bin("cdp.window.7", "window 7"),
        Bin("cdp.window.9", "window 9"), Bin("cdp.sqsum_bypass", "square sum bypassed"),
        Bin("cdp.mul_bypass", "multiply bypassed"))),
    Group("cdp.cube", "CDP input cube shapes (layers)", ("cdp",), _cube_bins("cdp")),
    Group("cdp.ports", "CDP memory ports (layers)", ("cdp",), _port_bins("cdp")),
    Group("sdp.prec", "SDP precisions (layers)", (), (
        Bin("sdp.prec.int8", "processing in INT8"), Bin("sdp.prec.int16", "processing in INT16", ("int16",)),
        Bin("sdp.prec.fp16", "processing in FP16", ("fp16",)),
        Bin("sdp.prec.fp16_to_int", "FP16 processing, integer output", ("fp16",)),
        Bin("sdp.prec.nan_to_zero", "FP16 NaN inputs flushed to zero", ("fp16",)),
        Bin("sdp.to_pdp", "output on the fly into PDP"), Bin("sdp.from_cacc", "input on the fly from the convolution"))),
    Group("pdp.pool", "PDP pooling (layers)", ("pdp",), (
        Bin("pdp.method.avg", "average"), Bin("pdp.method.max", "maximum"), Bin("pdp.method.min", "minimum"),
        Bin("pdp.kernel.1x1", "kernel 1x1"), Bin("pdp.kernel.8", "kernel width or height 8 (the largest)"),
        Bin("pdp.kernel.non_square", "kernel width != height"),
        Bin("pdp.stride.overlap", "stride smaller than the kernel (windows overlap)"),
        Bin("pdp.stride.gap", "stride larger than the kernel (inputs skipped)"),
        Bin("pdp.pad.any", "padding on some side"), Bin("pdp.pad.asymmetric", "left != right or top != bottom padding"),
        Bin("pdp.split", "split width (SPLIT_NUM > 0)"), Bin("pdp.flying", "input on the fly from SDP"),
        Bin("pdp.prec.int8", "INT8"), Bin("pdp.prec.int16", "INT16", ("int16",)), Bin("pdp.prec.fp16", "FP16", ("fp16",)),
        Bin("pdp.nan_to_zero", "FP16 NaN inputs flushed to zero", ("fp16",)))),
    Group("pdp.cube", "PDP input cube shapes (layers, from memory)", ("pdp",), _cube_bins("pdp")),
    Group("pdp.ports", "PDP memory ports (layers)", ("pdp",), _port_bins("pdp")),
    Group("conv.mode", "Convolution pipeline modes (layers)", (), (
        Bin("conv.direct", "direct convolution"), Bin("conv.winograd", "Winograd", ("winograd",)),
        Bin("conv.image", "image (pixel) input"), Bin("conv.compressed", "compressed weights", ("weight_compression",)),
        Bin("conv.prec.int8", "INT8"), Bin("conv.prec.int16", "INT16", ("int16",)), Bin("conv.prec.fp16", "FP16", ("fp16",)),
        Bin("conv.kernel.1x1", "1x1 kernel"), Bin("conv.kernel.large", "kernel width or height >= 5"),
        Bin("conv.stride", "stride > 1"), Bin("conv.dilation", "dilation > 1"), Bin("conv.pad", "zero padding"),
        Bin("conv.batch", "batch > 1"), Bin("conv.mean", "image mean/offset applied"))),
    Group("sdp.fp16", "SDP FP16 NaN/INF seen by its counters (layers)", ("fp16",), (
        Bin("sdp.fp16.nan_in", "input NaN (SDP_RDMA D_STATUS_NAN_INPUT_NUM > 0)"), Bin("sdp.fp16.inf_in", "input INF"),
        Bin("sdp.fp16.nan_out", "output NaN (D_STATUS_NAN_OUTPUT_NUM > 0)"))),
    Group("cdp.fp16", "CDP FP16 NaN/INF seen by its counters (layers)", ("fp16", "cdp"), (
        Bin("cdp.fp16.nan_in", "input NaN (D_NAN_INPUT_NUM > 0)"), Bin("cdp.fp16.inf_in", "input INF"))),
    Group("pdp.fp16", "PDP FP16 NaN/INF seen by its counters (layers, input from memory)", ("fp16", "pdp"), (
        Bin("pdp.fp16.nan_in", "input NaN (D_NAN_INPUT_NUM > 0)"), Bin("pdp.fp16.inf_in", "input INF"))),
    Group("conv.pixel", "Image input pixel formats (layers)", (), (
        Bin("conv.pixel.mono", "one channel (T_R*)"), Bin("conv.pixel.rgba8", "8-bit packed RGBA/XRGB"),
        Bin("conv.pixel.rgba10", "10-bit packed (2-bit alpha)", ("int16",)),
        Bin("conv.pixel.rgba16", "16-bit per channel", ("int16",)),  # INT8-only RTL: 8-bit formats only
        Bin("conv.pixel.float", "FP16 pixels (*_F)", ("fp16",)), Bin("conv.pixel.yuv", "packed YUV/AYUV"),
        Bin("conv.pixel.semi_planar", "semi-planar Y + UV (N444)"), Bin("conv.pixel.signed", "sign override (signed pixels)"))),
)

BINS: dict[str, Bin] = {b.name: b for g in GROUPS for b in g.bins}
_GROUP_OF: dict[str, Group] = {b.name: g for g in GROUPS for b in g.bins}


def reachable(profiles: Iterable[Any], groups: Iterable[str] | None = None) -> list[str]:
    """Bins reachable on at least one of ``profiles`` (names or profile objects), optionally
    only those of ``groups`` (group names)."""
    from ...drivers.profiles import load_profile

    profs = [load_profile(p) if isinstance(p, str) else p for p in profiles]
    want = set(groups) if groups is not None else None
    out = []
    for g in GROUPS:
        if want is not None and g.name not in want:
            continue
        for b in g.bins:
            if any(all(p.has(f) for f in (*g.needs, *b.needs)) for p in profs):
                out.append(b.name)
    return out


# ---- the collector ---------------------------------------------------------------------------


def _sign(v: int) -> str:
    return "neg" if v < 0 else "zero" if v == 0 else "pos"


def _rnd(v: np.ndarray, s: int) -> np.ndarray:
    from ..refmodel.ops import rnd

    return rnd(v, s)


class Coverage:
    """Bin counts. Feed it with :meth:`event` (the reference model does) or :meth:`hit`."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {name: 0 for name in BINS}
        self.layers = 0
        self.profiles: set[str] = set()

    # ---- counting ----
    def hit(self, name: str, n: int | np.integer | np.ndarray = 1) -> None:
        if name not in self.counts:
            raise KeyError(f"unknown coverage bin {name!r}")
        if isinstance(n, np.ndarray):
            n = np.count_nonzero(n)
        self.counts[name] += int(n)

    def event(self, name: str, **data: Any) -> None:
        """One event of the reference model (see the ``_on_*`` methods for the data)."""
        handler = getattr(self, f"_on_{name}", None)
        if handler is not None:
            handler(**data)

    def _lut(self, p: str, le_hit, lo_hit, le_uf, lo_uf, le_of, lo_of, params, i_le, i_lo) -> None:  # noqa: ANN001
        both_uf, both_of = le_uf & lo_uf, le_of & lo_of
        both_hit = le_hit & lo_hit
        miss = ~le_hit & ~lo_hit & ~both_uf & ~both_of
        self.hit(f"{p}.le_hit", le_hit & ~lo_hit)
        self.hit(f"{p}.lo_hit", lo_hit & ~le_hit)
        hyb, uf, of = (params.hybrid_priority.lower(), params.uflow_priority.lower(), params.oflow_priority.lower())
        self.hit(f"{p}.both_hit.prio_{hyb}", both_hit)
        self.hit(f"{p}.miss.prio_{hyb}", miss)
        self.hit(f"{p}.uflow.prio_{uf}", both_uf)
        self.hit(f"{p}.oflow.prio_{of}", both_of)
        exp = params.le_function == "exponent"
        self.hit(f"{p}.le_exponent.hit" if exp else f"{p}.le_linear.hit", le_hit)
        self.hit(f"{p}.le.index_first", le_hit & (i_le == 0))
        self.hit(f"{p}.le.index_last", le_hit & (i_le == 63))
        self.hit(f"{p}.lo.index_first", lo_hit & (i_lo == 0))
        self.hit(f"{p}.lo.index_last", lo_hit & (i_lo == 255))
        if exp:
            self.hit(f"{p}.cfg.le_offset.{_sign(params.le_index_offset)}")
        else:
            self.hit(f"{p}.cfg.le_select.{_sign(params.le_index_select)}")
        self.hit(f"{p}.cfg.lo_select.{_sign(params.lo_index_select)}")

    def _on_sdp_lut(self, *, x, params, k_le, k_lo, i_le, i_lo, **_: Any) -> None:  # noqa: ANN001
        from ..refmodel.lut import KIND_HIT, KIND_OF, KIND_UF

        self._lut("sdp.lut", k_le == KIND_HIT, k_lo == KIND_HIT, k_le == KIND_UF, k_lo == KIND_UF,
                  k_le == KIND_OF, k_lo == KIND_OF, params, i_le, i_lo)

    def _on_sdp_out(self, *, x, offset, scale, shift, out_bits, **_: Any) -> None:  # noqa: ANN001
        v = (np.asarray(x, dtype=np.int64) - offset) * scale
        r = np.zeros_like(v) if shift >= 49 else _rnd(v, shift)  # RTL: shift >= 49 gives 0
        hi, lo = (1 << (out_bits - 1)) - 1, -(1 << (out_bits - 1))
        self.hit("sdp.out.sat_high", r > hi)
        self.hit("sdp.out.sat_low", r < lo)
        self.hit("sdp.out.in_range", (r >= lo) & (r <= hi))
        self._shift("sdp.out", shift, 63)

    def _shift(self, p: str, shift: int, top: int) -> None:
        self.hit(f"{p}.shift.zero" if shift == 0 else f"{p}.shift.max" if shift >= top else f"{p}.shift.mid")

    def _on_cdp(self, *, b, s, le_state, lo_state, params, cfg, t, channels, semantics, **_: Any) -> None:  # noqa: ANN001
        from ..refmodel import cdp as cdpm
        from ..refmodel.ops import sx

        lanes = np.arange(np.asarray(b).shape[-1]) < channels
        n = 9 if cfg.bits == 8 else 17
        pre = (np.asarray(b, dtype=np.int64) - cfg.datin_offset) * cfg.datin_scale
        r = _rnd(pre, cfg.datin_shifter)
        self.hit("cdp.in.sat_high", (r > (1 << (n - 1)) - 1) & lanes)
        self.hit("cdp.in.sat_low", (r < -(1 << (n - 1))) & lanes)
        ob = cfg.bits
        ro = _rnd(np.asarray(t, dtype=np.int64), cfg.datout_shifter)
        if semantics == "rtl" and cfg.datout_shifter >= (42 if ob == 8 else 50):
            ro = np.zeros_like(ro)
        hi, lo = (1 << (ob - 1)) - 1, -(1 << (ob - 1))
        self.hit("cdp.out.sat_high", ro > hi)
        self.hit("cdp.out.sat_low", ro < lo)
        self.hit("cdp.out.in_range", (ro >= lo) & (ro <= hi))
        self._shift("cdp.in", cfg.datin_shifter, 31)
        self._shift("cdp.out", cfg.datout_shifter, 63)
        self.hit(f"cdp.window.{2 * cfg.normalz_len + 3}")
        if cfg.sqsum_bypass:
            self.hit("cdp.sqsum_bypass")
        if cfg.mul_bypass:
            self.hit("cdp.mul_bypass")
        # per-table indices of the hits (as the model's _table computes them)
        s = np.asarray(s, dtype=np.int64)
        bits = cfg.bits

        def cmp(start: int) -> int:
            return sx(start, 22) if semantics == "rtl" and bits == 8 else start

        le_abs, lo_abs = (6, 5) if bits == 8 else (7, 6)
        d_le = np.maximum(s - cmp(params.le_start), 1)
        if params.le_function == "exponent":
            i_le = cdpm._floor_log2(d_le) - params.le_index_offset
        else:
            i_le = cdpm._linear_index(d_le, params.le_index_select, 65, semantics, le_abs)[1]
        d_lo = np.maximum(s - cmp(params.lo_start), 1)
        i_lo = cdpm._linear_index(d_lo, params.lo_index_select, 257, semantics, lo_abs)[1]
        uf, of, hit = cdpm.UF, cdpm.OF, cdpm.HIT
        self._lut("cdp.lut", le_state == hit, lo_state == hit, le_state == uf, lo_state == uf, le_state == of,
                  lo_state == of, params, i_le, i_lo)

    _SPECIAL_COUNTERS = {("SDP_RDMA", "D_STATUS_NAN_INPUT_NUM"): "sdp.fp16.nan_in",
                         ("SDP_RDMA", "D_STATUS_INF_INPUT_NUM"): "sdp.fp16.inf_in",
                         ("SDP", "D_STATUS_NAN_OUTPUT_NUM"): "sdp.fp16.nan_out",
                         ("CDP", "D_NAN_INPUT_NUM"): "cdp.fp16.nan_in", ("CDP", "D_INF_INPUT_NUM"): "cdp.fp16.inf_in",
                         ("PDP", "D_NAN_INPUT_NUM"): "pdp.fp16.nan_in", ("PDP", "D_INF_INPUT_NUM"): "pdp.fp16.inf_in"}

    def _on_layer(self, *, unit, blocks, view, profile, stats=None, **_: Any) -> None:  # noqa: ANN001
        self.layers += 1
        for key, name in self._SPECIAL_COUNTERS.items():
            if stats and int(stats.get(key, 0)) > 0:
                self.hit(name)
        self.profiles.add(profile.name)
        f = view.field
        atom = profile.atom_bytes
        if unit == "SDP" and "SDP_RDMA" in blocks:
            w, h, c = (int(f("SDP_RDMA", f"D_DATA_CUBE_{k}", k)) + 1 for k in ("WIDTH", "HEIGHT", "CHANNEL"))
            bpe = 2 if f("SDP_RDMA", "D_FEATURE_MODE_CFG", "IN_PRECISION") == 1 else 1
            ls, ss = int(view.reg("SDP_RDMA", "D_SRC_LINE_STRIDE")), int(view.reg("SDP_RDMA", "D_SRC_SURFACE_STRIDE"))
            self._cube("sdp", w, h, c, atom // bpe, atom, ls, ss)
            reads = [f("SDP_RDMA", "D_SRC_DMA_CFG", "SRC_RAM_TYPE")]
            for eng in ("BRDMA", "NRDMA", "ERDMA"):
                if not f("SDP_RDMA", f"D_{eng}_CFG", f"{eng}_DISABLE"):
                    reads.append(f("SDP_RDMA", f"D_{eng}_CFG", f"{eng}_RAM_TYPE"))
            writes = [] if f("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST") else [f("SDP", "D_DST_DMA_CFG", "DST_RAM_TYPE")]
            self._ports("sdp", reads, writes)
        if unit == "SDP":
            for st, dma in (("BS", "BRDMA"), ("BN", "NRDMA")):
                if profile.has(f"sdp_{st.lower()}") and not f("SDP", f"D_DP_{st}_CFG", f"{st}_BYPASS"):
                    self._bsbn(view, st, dma)
            if profile.has("sdp_ew") and not f("SDP", "D_DP_EW_CFG", "EW_BYPASS"):
                self._ew(view)
        if "SDP" in blocks:
            self._sdp_prec(view, blocks)
        if "PDP" in blocks:
            self._pdp(view, blocks, atom)
        if "CDMA" in blocks:
            self._conv(view)
        if unit == "CDP":
            w, h, c = (int(f("CDP_RDMA", f"D_DATA_CUBE_{k}", k)) + 1 for k in ("WIDTH", "HEIGHT", "CHANNEL"))
            bpe = 2 if f("CDP_RDMA", "D_DATA_FORMAT", "INPUT_DATA") == 1 else 1
            ls, ss = int(view.reg("CDP_RDMA", "D_SRC_LINE_STRIDE")), int(view.reg("CDP_RDMA", "D_SRC_SURFACE_STRIDE"))
            self._cube("cdp", w, h, c, atom // bpe, atom, ls, ss)
            self._ports("cdp", [f("CDP_RDMA", "D_SRC_DMA_CFG", "SRC_RAM_TYPE")], [f("CDP", "D_DST_DMA_CFG", "DST_RAM_TYPE")])

    @staticmethod
    def _getter(view) -> Callable[[str, str, str], int]:  # noqa: ANN001
        """``view.field`` that reads 0 for a register or field this profile does not have."""
        from ...drivers.regmap import RegisterMapError

        def get(blk: str, reg: str, fld: str) -> int:
            try:
                return int(view.field(blk, reg, fld))
            except (RegisterMapError, KeyError, LookupError):
                return 0
        return get

    def _sdp_prec(self, view, blocks) -> None:  # noqa: ANN001
        g = self._getter(view)
        proc, out = g("SDP", "D_DATA_FORMAT", "PROC_PRECISION"), g("SDP", "D_DATA_FORMAT", "OUT_PRECISION")
        self.hit(f"sdp.prec.{('int8', 'int16', 'fp16', 'fp16')[proc & 3]}")
        if proc == 2 and out != 2:
            self.hit("sdp.prec.fp16_to_int")
        if proc == 2 and g("SDP", "D_FEATURE_MODE_CFG", "NAN_TO_ZERO"):
            self.hit("sdp.prec.nan_to_zero")
        if g("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST") and "PDP" in blocks:
            self.hit("sdp.to_pdp")
        if g("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE"):
            self.hit("sdp.from_cacc")

    def _pdp(self, view, blocks, atom: int) -> None:  # noqa: ANN001
        g = self._getter(view)
        self.hit(f"pdp.method.{('avg', 'max', 'min', 'min')[g('PDP', 'D_OPERATION_MODE_CFG', 'POOLING_METHOD') & 3]}")
        kw, kh = g("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_WIDTH") + 1, g("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_HEIGHT") + 1
        sw = g("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH") + 1
        sh = g("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_HEIGHT") + 1
        if kw == kh == 1:
            self.hit("pdp.kernel.1x1")
        if 8 in (kw, kh):
            self.hit("pdp.kernel.8")
        if kw != kh:
            self.hit("pdp.kernel.non_square")
        if sw < kw or sh < kh:
            self.hit("pdp.stride.overlap")
        if sw > kw or sh > kh:
            self.hit("pdp.stride.gap")
        pads = [g("PDP", "D_POOLING_PADDING_CFG", f"PAD_{s}") for s in ("LEFT", "RIGHT", "TOP", "BOTTOM")]
        if any(pads):
            self.hit("pdp.pad.any")
        if pads[0] != pads[1] or pads[2] != pads[3]:
            self.hit("pdp.pad.asymmetric")
        if g("PDP", "D_OPERATION_MODE_CFG", "SPLIT_NUM"):
            self.hit("pdp.split")
        prec = g("PDP", "D_DATA_FORMAT", "INPUT_DATA") & 3
        self.hit(f"pdp.prec.{('int8', 'int16', 'fp16', 'fp16')[prec]}")
        flying = g("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE") == 0
        if flying:
            self.hit("pdp.flying")
        elif prec == 2 and g("PDP", "D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO"):
            self.hit("pdp.nan_to_zero")
        if not flying and "PDP_RDMA" in blocks:
            w, h, c = (g("PDP_RDMA", f"D_DATA_CUBE_IN_{k}", f"CUBE_IN_{k}") + 1 for k in ("WIDTH", "HEIGHT", "CHANNEL"))
            ls, ss = int(view.reg("PDP_RDMA", "D_SRC_LINE_STRIDE")), int(view.reg("PDP_RDMA", "D_SRC_SURFACE_STRIDE"))
            bpe = 1 if prec == 0 else 2
            self._cube("pdp", w, h, c, atom // bpe, atom, ls, ss)
            self._ports("pdp", [g("PDP_RDMA", "D_SRC_RAM_CFG", "SRC_RAM_TYPE")], [g("PDP", "D_DST_RAM_CFG", "DST_RAM_TYPE")])
        else:
            self._ports("pdp", [], [g("PDP", "D_DST_RAM_CFG", "DST_RAM_TYPE")])

    #: pixel format (CDMA D_DATAIN_FORMAT.PIXEL_FORMAT, seed 000 ``T_*``) -> coverage family
    _PIXEL_FAMILY = {**dict.fromkeys(range(0, 6), "mono"), **dict.fromkeys((6, 7), "rgba16"), 8: "float", 9: "yuv",
                     10: "yuv", 11: "float", **dict.fromkeys(range(12, 20), "rgba8"), **dict.fromkeys(range(20, 24), "rgba10"),
                     24: "yuv", 25: "yuv", 26: "yuv", 27: "yuv", **dict.fromkeys(range(28, 36), "semi_planar")}

    def _conv(self, view) -> None:  # noqa: ANN001
        g = self._getter(view)
        winograd = g("CDMA", "D_MISC_CFG", "CONV_MODE") == 1
        image = g("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT") == 1
        self.hit("conv.winograd" if winograd else "conv.direct")
        if g("CDMA", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT"):
            self.hit("conv.compressed")
        self.hit(f"conv.prec.{('int8', 'int16', 'fp16', 'fp16')[g('CDMA', 'D_MISC_CFG', 'PROC_PRECISION') & 3]}")
        kw, kh = g("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1, g("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1
        if kw == kh == 1:
            self.hit("conv.kernel.1x1")
        if max(kw, kh) >= 5:
            self.hit("conv.kernel.large")
        if g("CDMA", "D_CONV_STRIDE", "CONV_X_STRIDE") or g("CDMA", "D_CONV_STRIDE", "CONV_Y_STRIDE"):
            self.hit("conv.stride")
        if g("CSC", "D_DILATION_EXT", "X_DILATION_EXT") or g("CSC", "D_DILATION_EXT", "Y_DILATION_EXT"):
            self.hit("conv.dilation")
        if any(g("CDMA", "D_ZERO_PADDING", f"PAD_{s}") for s in ("LEFT", "RIGHT", "TOP", "BOTTOM")):
            self.hit("conv.pad")
        if g("CDMA", "D_BATCH_NUMBER", "BATCHES"):
            self.hit("conv.batch")
        if image:
            self.hit("conv.image")
            self.hit(f"conv.pixel.{self._PIXEL_FAMILY.get(g('CDMA', 'D_DATAIN_FORMAT', 'PIXEL_FORMAT'), 'mono')}")
            if g("CDMA", "D_DATAIN_FORMAT", "PIXEL_SIGN_OVERRIDE"):
                self.hit("conv.pixel.signed")
            if g("CDMA", "D_MEAN_FORMAT", "MEAN_FORMAT"):
                self.hit("conv.mean")

    def _cube(self, u: str, w: int, h: int, c: int, group: int, atom: int, ls: int, ss: int) -> None:
        if w == 1 and h == 1:
            self.hit(f"{u}.cube.1x1xC")
        elif h == 1:
            self.hit(f"{u}.cube.single_line")
        if h > 1:
            self.hit(f"{u}.cube.multi_line")
        if c % group:
            self.hit(f"{u}.cube.partial_atom")
        surfaces = -(-c // group)
        if surfaces > 1:
            self.hit(f"{u}.cube.multi_surface")
        if (h > 1 and ls > w * atom) or (surfaces > 1 and ss > h * ls):
            self.hit(f"{u}.cube.gaps")

    def _ports(self, u: str, reads: list[int], writes: list[int]) -> None:
        name = {1: "pri", 0: "sec"}
        used = set()
        for kind, types in (("read", reads), ("write", writes)):
            for t in set(types):
                self.hit(f"{u}.ports.{kind}.{name.get(int(t), 'sec')}")
                used.add(int(t))
        if len(used) > 1 and f"{u}.ports.both" in self.counts:
            self.hit(f"{u}.ports.both")

    def _bsbn(self, view, st: str, dma: str) -> None:  # noqa: ANN001
        f = view.field
        p = f"sdp.{st.lower()}"
        cfg = f"D_DP_{st}_CFG"
        if not f("SDP", cfg, f"{st}_ALU_BYPASS"):
            self.hit(f"{p}.alu.{('max', 'min', 'sum', 'sum')[f('SDP', cfg, f'{st}_ALU_ALGO')]}")
            self._operand(view, p, st, "ALU", dma)
        if not f("SDP", cfg, f"{st}_MUL_BYPASS"):
            self.hit(f"{p}.prelu" if f("SDP", cfg, f"{st}_MUL_PRELU") else f"{p}.mul")
            self._operand(view, p, st, "MUL", dma)
        if not f("SDP", cfg, f"{st}_RELU_BYPASS"):
            self.hit(f"{p}.relu")

    def _operand(self, view, p: str, st: str, kind: str, dma: str) -> None:  # noqa: ANN001
        f = view.field
        if not f("SDP", f"D_DP_{st}_{kind}_CFG", f"{st}_{kind}_SRC"):
            self.hit(f"{p}.operand.reg")
        elif f("SDP_RDMA", f"D_{dma}_CFG", f"{dma}_DATA_MODE"):
            self.hit(f"{p}.operand.mem_element")
        else:
            self.hit(f"{p}.operand.mem_channel")

    def _ew(self, view) -> None:  # noqa: ANN001
        f = view.field
        ecfg = lambda k: int(f("SDP", "D_DP_EW_CFG", f"EW_{k}"))  # noqa: E731
        for kind, on in (("ALU", not ecfg("ALU_BYPASS")), ("MUL", not ecfg("MUL_BYPASS"))):
            if not on:
                continue
            if kind == "ALU":
                self.hit(f"sdp.ew.alu.{('max', 'min', 'sum', 'eql')[ecfg('ALU_ALGO')]}")
            else:
                self.hit("sdp.ew.prelu" if ecfg("MUL_PRELU") else "sdp.ew.mul")
            if f("SDP", f"D_DP_EW_{kind}_CFG", f"EW_{kind}_SRC"):
                self.hit("sdp.ew.operand.mem")
                self.hit("sdp.ew.cvt.bypass" if f("SDP", f"D_DP_EW_{kind}_CFG", f"EW_{kind}_CVT_BYPASS") else "sdp.ew.cvt.on")
            else:
                self.hit("sdp.ew.operand.reg")
        if not ecfg("LUT_BYPASS"):
            self.hit("sdp.ew.lut")

    # ---- merging and files ----
    def merge(self, other: Coverage | dict[str, Any]) -> Coverage:
        """Add ``other``'s counts (a collector or its JSON dict) into this one; returns self."""
        if isinstance(other, dict):
            other = from_json(other)
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + int(v)
        self.layers += other.layers
        self.profiles |= other.profiles
        return self

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "layers": self.layers, "profiles": sorted(self.profiles),
                "bins": dict(self.counts)}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n"

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.dumps(), encoding="utf-8")
        tmp.replace(path)
        return path

    def empty(self, bins: Iterable[str]) -> list[str]:
        """The bins of ``bins`` with no hit."""
        return [b for b in bins if not self.counts.get(b)]


def from_json(d: Any, source: str = "<coverage>") -> Coverage:
    """A collector from its JSON dict; a wrong format or an unknown bin is a ValueError naming it."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"{source}: not a coverage file (expected format {FORMAT!r})")
    bins = d.get("bins")
    if not isinstance(bins, dict):
        raise ValueError(f"{source}: 'bins' must be a mapping of bin name to count")
    cov = Coverage()
    for k, v in bins.items():
        if k not in BINS:
            raise ValueError(f"{source}: unknown bin {k!r}")
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{source}: bin {k!r}: count must be a non-negative integer, not {v!r}")
        cov.counts[k] = v
    cov.layers = int(d.get("layers", 0))
    cov.profiles = set(d.get("profiles", []))
    return cov


def load(path: str | Path) -> Coverage:
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}:{e.lineno}: {e.msg}") from None
    except RecursionError:  # "[[[[..." a hundred thousand deep
        raise ValueError(f"{p}: nested too deeply to be a coverage file") from None
    return from_json(d, str(p))


def merge(*covs: Coverage | dict[str, Any]) -> Coverage:
    out = Coverage()
    for c in covs:
        out.merge(c)
    return out


def format_table(cov: Coverage, profiles: Iterable[Any] | None = None, groups: Iterable[str] | None = None,
                 aimed: Iterable[str] | None = None) -> str:  # fmt: skip
    """One line per bin (count, or '-' where no profile of ``profiles`` can reach it; empty
    reachable bins marked), a header line per group with hits / reachable. ``aimed`` (a fuzz
    unit's bins, :func:`~nvdla_hil.harness.fuzz.runner.aimed_bins`): only those count as
    reachable; a bin the profile has but the unit does not draw reads ``not drawn``."""
    profiles = list(profiles) if profiles is not None else sorted(cov.profiles)
    reach = set(reachable(profiles, groups)) if profiles else set(BINS)
    undrawn: set[str] = set()
    if aimed is not None:
        undrawn = {b for b in reach if b not in set(aimed) and not cov.counts.get(b)}
        reach -= undrawn
    want = set(groups) if groups is not None else None
    lines = [f"functional coverage: {cov.layers} reference-model layers"
             + (f" on {', '.join(getattr(p, 'name', p) for p in profiles)}" if profiles else "")]
    tot_hit = tot = 0
    for g in GROUPS:
        if want is not None and g.name not in want:
            continue
        rb = [b for b in g.bins if b.name in reach]
        hit = sum(1 for b in rb if cov.counts.get(b.name))
        tot_hit, tot = tot_hit + hit, tot + len(rb)
        if not rb and not any(cov.counts.get(b.name) for b in g.bins):
            lines.append(f"{g.name:<12} (not reachable on these profiles)")
            continue
        lines.append(f"{g.name:<12} {hit}/{len(rb)} bins  {g.doc}")
        for b in g.bins:
            n = cov.counts.get(b.name, 0)
            mark = "not drawn" if b.name in undrawn else "-" if b.name not in reach else ("EMPTY" if n == 0 else str(n))
            short = b.name[len(g.name) + 1:] if b.name.startswith(g.name + ".") else b.name.split(".", 1)[1]
            lines.append(f"  {short:<24}{mark:>10}  {b.doc}")
    lines.append(f"total: {tot_hit} of {tot} {'aimed' if aimed is not None else 'reachable'} bins hit"
                 + (f"; empty: {tot - tot_hit}" if tot - tot_hit else "")
                 + (f"; {len(undrawn)} reachable bins the unit does not draw" if undrawn else ""))
    return "\n".join(lines)
