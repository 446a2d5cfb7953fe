"""Fuzz unit ``conv``: one flying convolution layer (CDMA -> CSC -> CMAC -> CACC -> SDP -> memory).

Direct convolution at INT8 (every profile), INT16 and FP16 (nv_full), Winograd (nv_full).
Random input cube, kernel size, stride, dilation, zero padding (and its value), channel and
kernel counts within the CBUF of the profile (banks and entries per slice as
:func:`nvdla_hil.harness.refmodel.conv.csc.check_cbuf` checks them), the CDMA input
convertor, the CACC truncation and the SDP output convertor. ``batch`` (default 1; e.g.
``--set batch=4``) runs the layer on several cubes (CDMA/CSC/CACC ``D_BATCH_NUMBER``,
``D_BATCH_STRIDE``, SDP ``BATCH_NUMBER``/``D_DST_BATCH_STRIDE``, one input and output surface per
batch), for even output widths only (see :func:`_batches`). Register programming follows the
``dc_*`` traces of nvdla/hw (``CSC.D_ATOMICS`` = output W*H - 1, ``D_ENTRY_PER_SLICE`` from
:func:`~nvdla_hil.harness.refmodel.conv.csc.feature_entries_per_slice`, weight bytes
128-byte aligned). The golden is the reference model's; the DUT runs the same case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....drivers.profiles import HardwareProfile
from ...refmodel.base import ModelOptions
from ...refmodel.conv.csc import feature_entries_per_slice
from ...refmodel.ops import sx
from ...vectors.format import Hex
from ...vectors.layer import (
    MEM_PORT,
    RAM_TYPE,
    Draft,
    Geo,
    Mem,
    bypass,
    place_feature,
    reg,
)
from ...vectors.surface import packed_size
from ..blocks import pick_cvt
from ..draw import Sampler
from ..legal import PORT, EnumF, IntF, UnitSpec

__all__ = ["SCHEMA", "gen_conv"]

_PREC = {"int8": 0, "int16": 1, "fp16": 2}
_DT = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}

SCHEMA: dict[str, Any] = {
    "precision": EnumF(("int8", "int16", "fp16"), "int8", needs={"int16": "int16", "fp16": "fp16"}),
    "mode": EnumF(("direct", "winograd"), "direct", needs={"winograd": "winograd"}),
    "width": IntF(1, 8192, 4), "height": IntF(1, 8192, 4), "channels": IntF(1, 8192, 8),
    "kernels": IntF(1, 8192, 8), "kernel_w": IntF(1, 32, 3), "kernel_h": IntF(1, 32, 3),
    "stride_x": IntF(1, 8, 1), "stride_y": IntF(1, 8, 1), "dilation_x": IntF(1, 32, 1), "dilation_y": IntF(1, 32, 1),
    "pad_left": IntF(0, 31, 0), "pad_right": IntF(0, 63, 0), "pad_top": IntF(0, 31, 0), "pad_bottom": IntF(0, 63, 0),
    "pad_value": EnumF(("zero", "random")),
    "gaps": EnumF((0, 1), 0),
    "src_port": PORT, "wt_port": PORT, "dst_port": PORT,
    "data": EnumF(("uniform", "edges", "small")),
    "fp_specials": EnumF((0, 1), 0, doc="FP16: put NaN/INF/denormal/-0 values into data and weights"),
    "nan_to_zero": EnumF((0, 1), 0, doc="FP16: CDMA.D_NAN_FLUSH_TO_ZERO"),
    "cdma_cvt": EnumF((0, 1), 0),
    "cdma_cvt_truncate": IntF(0, 63, 0),
    "truncate": EnumF(("fit", "random")),
    "clip_truncate": IntF(0, 31, 0),
    "cvt": EnumF(("fit", "saturate", "random")), "cvt_shift": IntF(0, 63, 0),
    "batch": IntF(1, 32, 1, doc="direct convolution of feature data: D_BATCH_NUMBER + 1 cubes (reduced until CBUF holds them)"),
}


def _lsb(prof: HardwareProfile, reg: str, fld: str) -> int:
    blk, r = reg.split(".", 1)
    return prof.regmap.register(blk, r).field(fld).lsb


def reg_units(prof: HardwareProfile, reg: str, fld: str, nbytes: int) -> int:
    """A byte count/address in a field's units (nv_full's map declares some as upper bits only).
    Fields whose names the fuzz core rescales itself (``*ADDR_LOW*``, ``*LINE_STRIDE``) are not
    passed here."""
    lsb = _lsb(prof, reg, fld)
    if nbytes % (1 << lsb):
        raise ValueError(f"{reg}.{fld} = {nbytes:#x} is not {1 << lsb}-byte aligned")
    return nbytes >> lsb


def _eff(k: int, d: int) -> int:
    return (k - 1) * d + 1


def conv_values(s: Sampler, shape: tuple[int, ...], prec: str, *, weight: bool) -> np.ndarray:
    rng = s.rng
    kind = s["data"]
    if prec == "fp16":
        scale = 1.0 if kind != "small" else 2.0 ** -6
        v = rng.standard_normal(size=shape) * scale * (rng.uniform(0.05, 4.0) if not weight else rng.uniform(0.02, 1.0))
        if kind == "edges":  # wide exponent range: products that align far apart in the MAC
            v = v * np.exp2(rng.integers(-14, 8, size=shape))
        a = v.astype(np.float16)
        if s["fp_specials"]:
            specials = np.array([0.0, -0.0, 6e-8, -6e-8, 6.1e-5, 65504.0, -65504.0, np.inf, -np.inf, np.nan], dtype=np.float16)
            m = rng.random(size=shape) < 0.03
            a[m] = rng.choice(specials, size=int(m.sum()))
        return a
    dt = _DT[prec]
    info = np.iinfo(dt)  # type: ignore[type-var]  # fp16 returned above: dt is int8 or int16
    if kind == "edges":
        edges = np.array([info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max], dtype=np.int64)
        return rng.choice(edges, size=shape).astype(dt)
    if kind == "small":
        return rng.integers(-8, 9, size=shape).astype(dt)
    return rng.integers(int(info.min), int(info.max) + 1, size=shape, dtype=np.int64).astype(dt)


_AXES = (("width", "kernel_w", "dilation_x", "pad_left", "pad_right"),
         ("height", "kernel_h", "dilation_y", "pad_top", "pad_bottom"))


def _fit_kernel(g: dict[str, int]) -> None:
    """Shrink dilation, then kernel size, until the kernel fits the padded input (output >= 1);
    padding stays within the kernel's reach (beyond it an output would read pad values only)."""
    for w, k, d, p0, p1 in _AXES:
        while _eff(g[k], g[d]) > g[w] + g[p0] + g[p1]:
            if g[d] > 1:
                g[d] -= 1
            else:
                g[k] -= 1
        g[p0] = min(g[p0], _eff(g[k], g[d]) - 1)
        g[p1] = min(g[p1], _eff(g[k], g[d]) - 1)
        while _eff(g[k], g[d]) > g[w] + g[p0] + g[p1]:
            g[d] = g[d] - 1 if g[d] > 1 else g[d]
            if g[d] == 1:
                g[k] -= 1


def _out_w(g: dict[str, int]) -> int:
    return (g["width"] + g["pad_left"] + g["pad_right"] - _eff(g["kernel_w"], g["dilation_x"])) // g["stride_x"] + 1


def _span(s: Sampler, name: str) -> tuple[int, int]:
    """The values the constraints let ``name`` take: a range's bounds, the choices' extremes, a
    fixed value (also a field the constraints do not draw: its default) only itself."""
    spec = s.c.fields.get(name)
    if spec is None:
        return int(s[name]), int(s[name])
    if spec.kind == "range":
        return spec.lo, spec.hi
    vals = [int(v) for v in spec.values]
    return min(vals), max(vals)


def _even_out_w(g: dict[str, int], span: dict[str, tuple[int, int]]) -> None:
    """Make the output width even (so at least 2), which a batch of more than one cube needs
    (:func:`_batches`): first by the right padding (within the kernel's reach), else by the
    input width (the nearest that works), each within what the constraints allow (``span``);
    where neither can, the width stays odd and the case says why it ran one batch."""
    def even(ow: int) -> bool:
        return ow >= 2 and ow % 2 == 0

    if even(_out_w(g)):
        return
    reach = _eff(g["kernel_w"], g["dilation_x"]) - 1
    lo, hi = span["pad_right"]
    for pr in sorted(range(lo, min(reach, hi, 63) + 1), key=lambda v: abs(v - g["pad_right"])):
        if even(_out_w({**g, "pad_right": pr})):
            g["pad_right"] = pr
            return
    lo, hi = span["width"]
    for w in sorted(range(max(lo, 1), hi + 1), key=lambda v: (abs(v - g["width"]), v)):
        if even(_out_w({**g, "width": w})):
            g["width"] = w
            return


def geometry(s: Sampler, prof: HardwareProfile, bpe: int) -> dict[str, int]:
    """Draw the layer geometry and shrink it until the output exists and the CBUF holds it. With
    ``batch`` above 1 asked for, the CBUF must hold ``batch`` cubes and the output width is made
    even (:func:`_even_out_w`), so the layer runs every batch asked for wherever it can."""
    g = {k: int(s[k]) for k in ("width", "height", "channels", "kernels", "kernel_w", "kernel_h", "stride_x", "stride_y",
                                "dilation_x", "dilation_y", "pad_left", "pad_right", "pad_top", "pad_bottom")}
    nb = max(int(s.v.get("batch", 1)), 1)
    span = {k: _span(s, k) for k in ("width", "pad_right")}
    _fit_kernel(g)
    opts = ModelOptions.for_profile(prof)
    for _ in range(64):
        if nb > 1:
            _even_out_w(g, span)
        if _cbuf_banks(g, prof, opts, bpe, batch=nb) is not None:
            break
        big = max(("height", "channels", "kernels", "width"), key=lambda n: g[n] * (2 if n != "width" else 1))
        g[big] = max(1, g[big] // 2)
        _fit_kernel(g)
    if _cbuf_banks(g, prof, opts, bpe) is None:  # not even one cube: back to the plain geometry's limits
        raise AssertionError(f"conv: no geometry fits the CBUF of {prof.name}: {g}")
    g["out_w"] = _out_w(g)
    g["out_h"] = (g["height"] + g["pad_top"] + g["pad_bottom"] - _eff(g["kernel_h"], g["dilation_y"])) // g["stride_y"] + 1
    return g


def _cbuf_banks(g: dict[str, int], prof: HardwareProfile, opts: ModelOptions, bpe: int, *,
                batch: int = 1) -> tuple[int, int, int] | None:  # fmt: skip
    """(entries per slice, data banks, weight banks), or None when the layer (``batch`` input
    cubes: ``batch * H`` slices, cmod CSC ``required_slice_num``) does not fit."""
    entries = feature_entries_per_slice(g["width"], g["channels"], opts, bpe)
    entry_bytes = max(opts.cbuf_entry_bytes, opts.mac_atomic_c * bpe)
    per_bank = prof.cbuf_bank_bytes // entry_bytes
    data_banks = -(-entries * g["height"] * batch // per_bank)
    wbytes = -(-g["kernels"] * g["channels"] * g["kernel_w"] * g["kernel_h"] * bpe // 128) * 128
    wt_banks = -(-wbytes // prof.cbuf_bank_bytes)
    if data_banks + wt_banks > prof.cbuf_banks or entries > 0x3FFF:
        return None
    return entries, data_banks, wt_banks


def feature_geo(w: int, h: int, atom: int, gaps: bool, rng: np.random.Generator) -> tuple[int, int]:
    line = w * atom + (atom * int(rng.integers(1, 3)) if gaps else 0)
    return line, h * line + (atom * int(rng.integers(1, 4)) if gaps else 0)


def place_surface(d: Draft, mem: Mem, name: str, arr_or_shape: Any, port: str, atom: int, line: int, surf: int,
             dtype: str, *, output: bool = False) -> int:  # fmt: skip
    """A feature surface with explicit strides: :func:`~nvdla_hil.harness.fuzz._feature`."""
    return place_feature(d, mem, name, arr_or_shape, port, atom, Geo(0, 0, 0, line, surf), output=output, dtype=dtype)


def mac_acc_regs(prof: HardwareProfile, p: int, OW: int, OH: int, K: int, dst: int, oline: int, osurf: int,
                  trunc: int) -> list[dict[str, Any]]:
    """CMAC A/B and CACC registers of a direct convolution of precision ``p`` writing a
    ``K x OH x OW`` result to ``dst`` (CACC's own output port, then SDP on the fly)."""
    return [
        reg("CMAC_A.D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=p),
        reg("CMAC_B.D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=p),
        reg("CACC.D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=p),
        reg("CACC.D_DATAOUT_SIZE_0", DATAOUT_WIDTH=OW - 1, DATAOUT_HEIGHT=OH - 1),
        reg("CACC.D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=K - 1),
        reg("CACC.D_DATAOUT_ADDR", DATAOUT_ADDR=reg_units(prof, "CACC.D_DATAOUT_ADDR", "DATAOUT_ADDR", dst)),
        reg("CACC.D_BATCH_NUMBER", BATCHES=0),
        reg("CACC.D_LINE_STRIDE", LINE_STRIDE=oline),
        reg("CACC.D_SURF_STRIDE", SURF_STRIDE=reg_units(prof, "CACC.D_SURF_STRIDE", "SURF_STRIDE", osurf)),
        reg("CACC.D_DATAOUT_MAP", LINE_PACKED=int(oline == OW * prof.atom_bytes), SURF_PACKED=int(osurf == OH * oline)),
        reg("CACC.D_CLIP_CFG", CLIP_TRUNCATE=trunc),
    ]


@dataclass(frozen=True)
class PixelInput:
    """The image-only CDMA fields (``DATAIN_FORMAT`` = PIXEL): pixel format index, sign override, ROI X
    offset, second-plane base and line stride, mean format and the four global means."""

    pixel_format: int
    sign_override: int
    x_offset: int
    uv_base: int
    uv_line_stride: int
    mean_format: int
    means: tuple[int, ...]


def cdma_regs(prof: HardwareProfile, s: Sampler, *, misc: dict[str, int], src: int, size: tuple[int, int, int],
               line: int, surf: int, entries: int, weight: tuple[int, int, int, int], stride: tuple[int, int],
               pads: dict[str, int], pad_value: int, banks: tuple[int, int], nan_to_zero: int,
               ext: tuple[int, int] | None = None, cvt: tuple[int, int, int, int] = (0, 0, 1, 0),
               pixel: PixelInput | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """CDMA registers of one convolution layer (``D_MISC_CFG`` to ``D_NAN_FLUSH_TO_ZERO``, in one fixed
    write order), shared by the direct, Winograd and image generators.

    ``size`` is the input cube (W, H, C) at ``src``; ``ext`` its extended (W, H) (Winograd; default
    ``size``); ``weight`` is (bytes per kernel, kernels, address, bytes); ``cvt`` (enable, offset,
    scale, truncate) of the input convertor; ``pads`` holds ``pad_left/right/top/bottom``; ``banks``
    (data, weight) counts. Feature input (``pixel`` None) reads ``D_SURF_STRIDE`` and packs lines and
    surfaces when the strides are dense (cmod ``DirectConvDataRequestSequencerCommon``,
    ``NV_NVDLA_cdma.cpp:1014``); image input reads the second plane's ``D_DAIN_ADDR_*_1`` and
    ``D_LINE_UV_STRIDE`` instead (``ImageConvDataRequestSequencerCommon``, ``NV_NVDLA_cdma.cpp:2142-2147``)
    and the global means (``surf`` is then unused, both DAIN_MAP flags 0)."""
    W, H, C = size
    We, He = ext or (W, H)
    kernel_bytes, kernels, waddr, wbytes = weight
    cvt_en, cvt_offset, cvt_scale, cvt_shift = cvt
    px = pixel or PixelInput(0, 0, 0, 0, 0, 0, (0, 0, 0, 0))
    packed = (0, 0) if pixel else (int(line == W * prof.atom_bytes), int(surf == H * line))
    plane1 = [reg("CDMA.D_DAIN_ADDR_HIGH_1", DATAIN_ADDR_HIGH_1=0),
              reg("CDMA.D_DAIN_ADDR_LOW_1", DATAIN_ADDR_LOW_1=px.uv_base)] if pixel else []
    surf_reg = reg("CDMA.D_LINE_UV_STRIDE", UV_LINE_STRIDE=px.uv_line_stride) if pixel else \
        reg("CDMA.D_SURF_STRIDE", SURF_STRIDE=reg_units(prof, "CDMA.D_SURF_STRIDE", "SURF_STRIDE", surf))
    means = [reg("CDMA.D_MEAN_GLOBAL_0", MEAN_RY=px.means[0] & 0xFFFF, MEAN_GU=px.means[1] & 0xFFFF),
             reg("CDMA.D_MEAN_GLOBAL_1", MEAN_BV=px.means[2] & 0xFFFF, MEAN_AX=px.means[3] & 0xFFFF)] if pixel else []
    return [
        reg("CDMA.D_MISC_CFG", **misc),
        reg("CDMA.D_DATAIN_FORMAT", DATAIN_FORMAT=int(pixel is not None), PIXEL_FORMAT=px.pixel_format, PIXEL_MAPPING=0,
             PIXEL_SIGN_OVERRIDE=px.sign_override),
        reg("CDMA.D_DATAIN_SIZE_0", DATAIN_WIDTH=W - 1, DATAIN_HEIGHT=H - 1),
        reg("CDMA.D_DATAIN_SIZE_1", DATAIN_CHANNEL=C - 1),
        reg("CDMA.D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=We - 1, DATAIN_HEIGHT_EXT=He - 1),
        reg("CDMA.D_PIXEL_OFFSET", PIXEL_X_OFFSET=px.x_offset, PIXEL_Y_OFFSET=0),
        reg("CDMA.D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=RAM_TYPE[s["src_port"]]),
        reg("CDMA.D_DAIN_ADDR_HIGH_0", DATAIN_ADDR_HIGH_0=0),
        reg("CDMA.D_DAIN_ADDR_LOW_0", DATAIN_ADDR_LOW_0=src),
        *plane1,
        reg("CDMA.D_LINE_STRIDE", LINE_STRIDE=line),
        surf_reg,
        reg("CDMA.D_DAIN_MAP", LINE_PACKED=packed[0], SURF_PACKED=packed[1]),
        reg("CDMA.D_BATCH_NUMBER", BATCHES=0),
        reg("CDMA.D_ENTRY_PER_SLICE", ENTRIES=entries - 1),
        reg("CDMA.D_FETCH_GRAIN", GRAINS=0),
        reg("CDMA.D_WEIGHT_FORMAT", WEIGHT_FORMAT=0),
        reg("CDMA.D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=kernel_bytes - 1),
        reg("CDMA.D_WEIGHT_SIZE_1", WEIGHT_KERNEL=kernels - 1),
        reg("CDMA.D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=RAM_TYPE[s["wt_port"]]),
        reg("CDMA.D_WEIGHT_ADDR_HIGH", WEIGHT_ADDR_HIGH=0),
        reg("CDMA.D_WEIGHT_ADDR_LOW", WEIGHT_ADDR_LOW=waddr),
        reg("CDMA.D_WEIGHT_BYTES", WEIGHT_BYTES=reg_units(prof, "CDMA.D_WEIGHT_BYTES", "WEIGHT_BYTES", wbytes)),
        reg("CDMA.D_MEAN_FORMAT", MEAN_FORMAT=px.mean_format),
        *means,
        reg("CDMA.D_CVT_CFG", CVT_EN=cvt_en, CVT_TRUNCATE=cvt_shift),
        reg("CDMA.D_CVT_OFFSET", CVT_OFFSET=cvt_offset & 0xFFFF),
        reg("CDMA.D_CVT_SCALE", CVT_SCALE=cvt_scale & 0xFFFF),
        reg("CDMA.D_CONV_STRIDE", CONV_X_STRIDE=stride[0] - 1, CONV_Y_STRIDE=stride[1] - 1),
        reg("CDMA.D_ZERO_PADDING", PAD_LEFT=pads["pad_left"], PAD_RIGHT=pads["pad_right"], PAD_TOP=pads["pad_top"],
             PAD_BOTTOM=pads["pad_bottom"]),
        reg("CDMA.D_ZERO_PADDING_VALUE", PAD_VALUE=pad_value),
        reg("CDMA.D_BANK", DATA_BANK=banks[0] - 1, WEIGHT_BANK=banks[1] - 1),
        reg("CDMA.D_NAN_FLUSH_TO_ZERO", NAN_TO_ZERO=nan_to_zero),
    ]


def _weights(d: Draft, mem: Mem, prof: HardwareProfile, w: np.ndarray, port: str) -> tuple[int, int]:
    """Direct-convolution weights (nvdla.weight.dc); returns (address, bytes as programmed)."""
    params = {"profile": prof.name}
    size = packed_size("nvdla.weight.dc", w.shape, w.dtype, params)
    addr = mem.alloc(MEM_PORT[port], size)
    d.inputs.append(({"name": "weight", "layout": "nvdla.weight.dc", "params": params, "dtype": w.dtype.name,
                      "shape": list(w.shape), "address": Hex(addr), "port": MEM_PORT[port]}, w))
    return addr, -(-w.size * w.itemsize // 128) * 128


def _accumulator_range(x: np.ndarray, w: np.ndarray, g: dict[str, int], pad: int) -> tuple[int, int]:
    """Range of the exact integer convolution sums (to place the CACC truncation)."""
    from ...refmodel.conv.cacc import conv_accumulate
    from ...refmodel.conv.csc import ConvConfig

    cfg = ConvConfig(in_w=g["width"], in_h=g["height"], in_c=g["channels"], k_w=g["kernel_w"], k_h=g["kernel_h"],
                     out_w=g["out_w"], out_h=g["out_h"], out_k=g["kernels"], stride_x=g["stride_x"],
                     stride_y=g["stride_y"], dil_x=g["dilation_x"], dil_y=g["dilation_y"], pad_left=g["pad_left"],
                     pad_top=g["pad_top"], pad_value=pad)  # fmt: skip
    a = conv_accumulate(x.astype(np.int64), w.astype(np.int64), cfg, semantics="cmod")
    return int(a.min(initial=0)), int(a.max(initial=0))


def _cvt_pad_truncate(s: Sampler, prec: str, bpe: int, x: np.ndarray, wt: np.ndarray,
                      g: dict[str, int]) -> tuple[int, dict[str, int], int, int]:  # fmt: skip
    """CDMA's input convertor (integer precisions), the padding value and CACC's truncation
    (``fit``: the accumulator range of this layer's data and weights, a random 8..23 bits kept);
    returns (convertor enabled, convertor, padding value, truncation)."""
    rng = s.rng
    cvt_en = int(s["cdma_cvt"]) if prec != "fp16" else 0
    cvt = {"offset": 0, "scale": 1, "shift": 0}
    if cvt_en:
        cvt = {"offset": int(rng.integers(-64, 65)), "scale": int(rng.integers(-300, 301)) or 1,
               "shift": int(s["cdma_cvt_truncate"])}
    if s["pad_value"] == "zero":
        pad = 0
    elif prec == "fp16":
        pad = int(np.float16(rng.standard_normal()).view(np.uint16))
    else:
        pad = int(rng.integers(-(1 << (8 * bpe - 1)), 1 << (8 * bpe - 1)))

    # CACC truncation
    trunc = 0
    if prec != "fp16":
        if s["truncate"] == "random":
            trunc = int(s["clip_truncate"])
        else:
            from ...refmodel.conv.cdma import cdma_convert

            xc = cdma_convert(x, offset=cvt["offset"], scale=cvt["scale"], truncate=cvt["shift"], out_bits=8 * bpe) \
                if cvt_en else x.astype(np.int64)
            pv = int(sx(pad, 8 * bpe))
            lo, hi = _accumulator_range(xc, wt, g, pv)
            span = max(abs(lo), abs(hi), 1)
            trunc = max(0, math.ceil(math.log2(span)) - int(rng.integers(8, 24)))
        if prec == "int16":
            trunc = min(trunc, 16)  # cmod: cacc_clip_truncate_ + 32 <= 48
    return cvt_en, cvt, pad, trunc


def csc_regs(prof: HardwareProfile, misc: dict[str, int], *, size: tuple[int, int, int], entries: int,
             weight: tuple[int, int, int], kernels: int, wbytes: int, out: tuple[int, int], atomics: int, release: int,
             pad_field: int, banks: tuple[int, int], stride: tuple[int, int] = (1, 1), dilation: tuple[int, int] = (1, 1),
             pad: tuple[int, int] = (0, 0), datain_format: int = 0, post_extension: int = 1,
             pra_truncate: int = 0) -> list[dict[str, Any]]:  # fmt: skip
    """CSC's registers of one layer (every convolution mode): the input cube as CSC sees it
    (``size``: W, H, C, after any Winograd / image extension), ``DATAIN_FORMAT`` (0 feature, 1
    pixel) and the pixel post-extension, the entries a slice holds, the kernel (``weight``: width,
    height, channels) and its bytes, the output cube, the atomics and the slices released, stride,
    dilation, the left / top padding and its value, the CBUF banks (data, weight) and the PRA
    truncation (Winograd)."""
    w, h, c = size
    ww, wh, wc = weight
    ow, oh = out
    return [
        reg("CSC.D_MISC_CFG", **misc),
        reg("CSC.D_DATAIN_FORMAT", DATAIN_FORMAT=datain_format),
        reg("CSC.D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1),
        reg("CSC.D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=c - 1),
        reg("CSC.D_BATCH_NUMBER", BATCHES=0),
        reg("CSC.D_POST_Y_EXTENSION", Y_EXTENSION=post_extension.bit_length() - 1),
        reg("CSC.D_ENTRY_PER_SLICE", ENTRIES=entries - 1),
        reg("CSC.D_WEIGHT_FORMAT", WEIGHT_FORMAT=0),
        reg("CSC.D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=ww - 1, WEIGHT_HEIGHT_EXT=wh - 1),
        reg("CSC.D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=wc - 1, WEIGHT_KERNEL=kernels - 1),
        reg("CSC.D_WEIGHT_BYTES", WEIGHT_BYTES=reg_units(prof, "CSC.D_WEIGHT_BYTES", "WEIGHT_BYTES", wbytes)),
        reg("CSC.D_WMB_BYTES", WMB_BYTES=0),
        reg("CSC.D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1),
        reg("CSC.D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=kernels - 1),
        reg("CSC.D_ATOMICS", ATOMICS=atomics - 1),
        reg("CSC.D_RELEASE", RLS_SLICES=release - 1),
        reg("CSC.D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=stride[0] - 1, CONV_Y_STRIDE_EXT=stride[1] - 1),
        reg("CSC.D_DILATION_EXT", X_DILATION_EXT=dilation[0] - 1, Y_DILATION_EXT=dilation[1] - 1),
        reg("CSC.D_ZERO_PADDING", PAD_LEFT=pad[0], PAD_TOP=pad[1]),
        reg("CSC.D_ZERO_PADDING_VALUE", PAD_VALUE=pad_field),
        reg("CSC.D_BANK", DATA_BANK=banks[0] - 1, WEIGHT_BANK=banks[1] - 1),
        reg("CSC.D_PRA_CFG", PRA_TRUNCATE=pra_truncate),
    ]


def _batched(d: Draft, prof: HardwareProfile, nb: int, h: int, data_banks: int, bstride: int, obstride: int) -> None:
    """A layer of ``nb`` batches (cmod): CDMA / CSC / CACC ``D_BATCH_NUMBER``, SDP's
    ``BATCH_NUMBER``, the slices CSC releases, the data banks, and the batch strides (64-byte
    aligned bases)."""
    for r in d.registers:
        f = r["fields"]
        if r["reg"] in ("CDMA.D_BATCH_NUMBER", "CSC.D_BATCH_NUMBER", "CACC.D_BATCH_NUMBER"):
            f["BATCHES"] = nb - 1
        elif r["reg"] == "SDP.D_FEATURE_MODE_CFG":
            f["BATCH_NUMBER"] = nb - 1
        elif r["reg"] == "CSC.D_RELEASE":
            f["RLS_SLICES"] = nb * h - 1
        elif r["reg"] in ("CDMA.D_BANK", "CSC.D_BANK"):
            f["DATA_BANK"] = data_banks - 1
    d.registers += [
        reg("CDMA.D_BATCH_STRIDE", BATCH_STRIDE=reg_units(prof, "CDMA.D_BATCH_STRIDE", "BATCH_STRIDE", bstride)),
        reg("SDP.D_DST_BATCH_STRIDE", DST_BATCH_STRIDE=reg_units(prof, "SDP.D_DST_BATCH_STRIDE", "DST_BATCH_STRIDE", obstride)),
    ]


def gen_conv(s: Sampler, prof: HardwareProfile, capture: Any) -> Draft:
    prec, mode = s["precision"], s["mode"]
    if mode == "winograd":
        return gen_winograd(s, prof, capture)
    d = Draft(unit="CONV", profile=prof.name, statistics=True)
    rng = s.rng
    mem = Mem.for_case(s)
    atom = prof.atom_bytes
    bpe = 1 if prec == "int8" else 2
    p = _PREC[prec]
    g = geometry(s, prof, bpe)
    entries, data_banks, wt_banks = _cbuf_banks(g, prof, ModelOptions.for_profile(prof), bpe)  # type: ignore[misc]
    W, H, C, K = g["width"], g["height"], g["channels"], g["kernels"]
    KW, KH, OW, OH = g["kernel_w"], g["kernel_h"], g["out_w"], g["out_h"]
    dtn = {"int8": "int8", "int16": "int16", "fp16": "float16"}[prec]
    x = conv_values(s, (C, H, W), prec, weight=False)
    wt = conv_values(s, (K, C, KH, KW), prec, weight=True)
    line, surf = feature_geo(W, H, atom, bool(s["gaps"]), rng)
    opts = ModelOptions.for_profile(prof)
    per_bank = prof.cbuf_bank_bytes // max(opts.cbuf_entry_bytes, opts.mac_atomic_c * bpe)
    nb, short = _batches(s, prof, H, entries, per_bank, wt_banks, OW * OH, OW)
    if nb > 1:
        data_banks = -(-entries * H * nb // per_bank)
        xs = [x] + [conv_values(s, (C, H, W), prec, weight=False) for _ in range(nb - 1)]
        src, bstride = _batch_surfaces(d, mem, "src", xs, s["src_port"], atom, line, surf, dtn)
    else:
        src = place_surface(d, mem, "src", x, s["src_port"], atom, line, surf, dtn)
    waddr, wbytes = _weights(d, mem, prof, wt, s["wt_port"])
    # a 1x1 output cube is packed: the C model asserts SDP's SURFACE_STRIDE == atom (cmod/sdp/NV_NVDLA_sdp.cpp:1489)
    oline, osurf = feature_geo(OW, OH, atom, bool(s["gaps"]) and OW * OH > 1, rng)
    if nb > 1:  # 64-byte aligned lines and surfaces (the CACC pairs atoms from 64-byte aligned addresses)
        oline = -(-oline // 64) * 64
        osurf = -(-max(osurf, OH * oline) // 64) * 64
        dst, obstride = _batch_surfaces(d, mem, "dst", [(K, OH, OW)] * nb, s["dst_port"], atom, oline, osurf, dtn, output=True)
    else:
        dst = place_surface(d, mem, "dst", (K, OH, OW), s["dst_port"], atom, oline, osurf, dtn, output=True)

    cvt_en, cvt, pad, trunc = _cvt_pad_truncate(s, prec, bpe, x, wt, g)
    pad_field = pad & 0xFFFF
    misc = {"CONV_MODE": 0, "IN_PRECISION": p, "PROC_PRECISION": p, "DATA_REUSE": 0, "WEIGHT_REUSE": 0,
            "SKIP_DATA_RLS": 0, "SKIP_WEIGHT_RLS": 0}
    d.registers += cdma_regs(
        prof, s, misc=misc, src=src, size=(W, H, C), line=line, surf=surf, entries=entries,
        weight=(KW * KH * C * bpe, K, waddr, wbytes), cvt=(cvt_en, cvt["offset"], cvt["scale"], cvt["shift"]),
        stride=(g["stride_x"], g["stride_y"]), pads=g, pad_value=pad_field, banks=(data_banks, wt_banks),
        nan_to_zero=int(s["nan_to_zero"]) if prec == "fp16" else 0)
    d.registers += csc_regs(prof, misc, size=(W, H, C), entries=entries, weight=(KW, KH, C), kernels=K, wbytes=wbytes,
                            out=(OW, OH), atomics=OW * OH, release=H, stride=(g["stride_x"], g["stride_y"]),
                            dilation=(g["dilation_x"], g["dilation_y"]), pad=(g["pad_left"], g["pad_top"]),
                            pad_field=pad_field, banks=(data_banks, wt_banks))
    d.registers += mac_acc_regs(prof, p, OW, OH, K, dst, oline, osurf, trunc)
    sdp_flying(d, s, K, OH, OW, dst, oline, osurf, p)
    if nb > 1:
        _batched(d, prof, nb, H, data_banks, bstride, obstride)
    if prec != "fp16":
        d.convertors["sdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
        ev = capture(d)
        xs = ev.get("sdp_out", [{}])[0].get("x", np.zeros(1))
        d.convertors["sdp_out"] = pick_cvt(s, xs, mode=s["cvt"], shift=s["cvt_shift"],
                                           out_max=127 if bpe == 1 else 32767)
    asked = s.v.get("batch", 1)
    d.description = (f"fuzz conv {prec} direct: in {C}x{H}x{W}, {K} kernels {KH}x{KW}, stride {g['stride_x']}x{g['stride_y']}, "
                     f"dilation {g['dilation_x']}x{g['dilation_y']}, pad l{g['pad_left']} r{g['pad_right']} t{g['pad_top']} "
                     f"b{g['pad_bottom']} value {pad}, out {K}x{OH}x{OW}, CDMA cvt {'on' if cvt_en else 'off'}, truncate {trunc}"
                     f"{f', {nb} batches' if nb > 1 else ''}{f' (batch {asked} asked: {short})' if short else ''}")
    return d


def _batches(s: Sampler, prof: HardwareProfile, h: int, entries: int, per_bank: int, wt_banks: int, out_atoms: int,
             out_w: int) -> tuple[int, str]:  # fmt: skip
    """Batch count and, when it is below ``s["batch"]``, why: reduced until the CBUF holds ``batch * H``
    input slices (cmod CSC ``required_slice_num = cube_in_height * batch_num``); 1 for a 1x1 output (SDP
    packs it) and for an odd output width: the cmod CACC hands SDP 2 atoms per batch from 64-byte aligned
    bases (``NV_NVDLA_cacc.cpp`` ``atom_num_batch_2sdp = 2*batch_num``) across line ends while its SDP
    (``SdpDataOperationBatch``) pairs atoms within a line only: the two disagree on odd widths.
    :func:`geometry` shapes the layer so that neither happens when a batch is asked for."""
    want = nb = int(s.v.get("batch", 1))
    if nb > 1 and out_atoms <= 1:
        return 1, "a 1x1 output is packed"
    if nb > 1 and out_w % 2:
        return 1, "odd output width"
    while nb > 1 and -(-entries * h * nb // per_bank) + wt_banks > prof.cbuf_banks:
        nb -= 1
    return nb, (f"the CBUF holds {nb}" if nb < want else "")


def _batch_surfaces(d: Draft, mem: Mem, name: str, cubes: list[Any], port: str, atom: int, line: int, surf: int,
                    dtype: str, *, output: bool = False) -> tuple[int, int]:  # fmt: skip
    """One feature cube per batch, ``stride`` bytes apart (64-byte aligned, >= the cube); returns (base, stride)."""
    params = {"atom_bytes": atom, "line_stride": line, "surface_stride": surf}
    shape = tuple(cubes[0].shape) if isinstance(cubes[0], np.ndarray) else tuple(cubes[0])
    size = packed_size("nvdla.feature", shape, np.dtype(dtype), params)
    stride = max(-(-size // 64) * 64 + 64, -(-(shape[0] * np.dtype(dtype).itemsize) // atom) * surf)
    stride = -(-stride // 64) * 64
    base = mem.alloc(MEM_PORT[port], stride * len(cubes))
    for b, cube in enumerate(cubes):
        meta = {"name": f"{name}{b}" if b else name, "layout": "nvdla.feature", "params": params, "dtype": dtype,
                "shape": list(shape), "address": Hex(base + b * stride), "port": MEM_PORT[port]}
        if output:
            d.outputs.append({**meta, "rule": "bitexact"})
        else:
            d.inputs.append((meta, cube))
    return base, stride


def sdp_flying(d: Draft, s: Sampler, K: int, OH: int, OW: int, dst: int, oline: int, osurf: int, p: int, *,
                winograd: bool = False) -> None:  # fmt: skip
    """SDP in flying mode (input from CACC), every stage bypassed, writing ``dst``."""
    d.registers += [
        reg("SDP.D_DATA_CUBE_WIDTH", WIDTH=OW - 1), reg("SDP.D_DATA_CUBE_HEIGHT", HEIGHT=OH - 1),
        reg("SDP.D_DATA_CUBE_CHANNEL", CHANNEL=K - 1),
        reg("SDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), reg("SDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        reg("SDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=oline), reg("SDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=osurf),
        reg("SDP.D_FEATURE_MODE_CFG", FLYING_MODE=1, OUTPUT_DST=0, WINOGRAD=int(winograd), NAN_TO_ZERO=0, BATCH_NUMBER=0),
        reg("SDP.D_DATA_FORMAT", PROC_PRECISION=p, OUT_PRECISION=p),
        reg("SDP.D_DST_DMA_CFG", DST_RAM_TYPE=RAM_TYPE[s["dst_port"]]),
    ]
    bypass(d, "BS", "BN", "EW")


def gen_winograd(s: Sampler, prof: HardwareProfile, capture: Any) -> Draft:
    raise NotImplementedError("conv: Winograd generation")


CONV = UnitSpec("conv", SCHEMA, (), ("conv.mode", "sdp.prec"), gen_conv)
