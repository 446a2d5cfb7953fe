"""Fuzz units ``conv-image`` (every profile), ``conv-compressed`` and ``conv-winograd`` (nv_full: weight
compression, Winograd): special convolutions.

``conv-image``: a flying convolution whose input is an image in a pixel format of seed 000 the profile
decodes (``nvdla.pixel.T_*``, pitch linear, 1 or 2 planes; the v2 INT8-only builds: the 8-bit formats,
nv_full: all), with a random X offset within the profile's memory atom and line strides,
the CDMA convertor (offset or per-channel mean, scale, truncation, sign override) into INT8,
INT16 or FP16 where seed 000 allows it, left/right padding by CDMA and top/bottom by CSC. The
weights are the image-input format (channel pre-extension, ``nvdla.weight.image``); the CSC
registers describe the pre-extended 1-wide kernel (``refmodel/conv/image.py``). Optionally the
weights are compressed (``weight_format``) and, for 1- and 4-component formats, the CSC
post-extends 2 or 4 lines (``post_extension``: at most atomic C / post pre-extended channels, any
kernel height).
``weights=identity`` probes the pixel path alone (output channel k = converted component k).

``conv-compressed``: the direct convolution of the ``conv`` unit with its weights made sparse
(random density, whole zero kernel groups) and stored in ``nvdla.weight.compressed`` (WGS | WMB |
data), ``D_WEIGHT_FORMAT`` = COMPRESSED.

``conv-winograd``: a flying Winograd F(2x2, 3x3) convolution (``refmodel/conv/winograd.py``) at
INT8/INT16/FP16: CDMA padding on all sides (total a multiple of 4*stride) with zero or random pad
values, stride 2 channel extension, PRA truncation, weights ``G g G^T`` of random 3x3 (3s x 3s)
kernels (``nvdla.weight.winograd`` phase 1) or raw 4x4 values, optionally sparse-compressed; the
output 2..6 pixels inside the extended input, width and height multiples of 4 (SDP WINOGRAD).

Compressed weights for the C model (``--target cmod``, every unit above): the C model never finishes
a layer whose compressed data ends on a 128-byte boundary before trailing all-zero kernel groups
(``targets/cmod.py`` ``KNOWN_LIMITS``); in such a case the first weight of the first trailing zero
group becomes 1 (no draw: the case is otherwise the one drawn for any other target).

Goldens come from the DUT (``--keep``), never from the model alone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ....drivers.profiles import HardwareProfile
from ...layouts.nvdla import PIXEL_FORMATS, compressed_offsets
from ...refmodel.conv.image import x_offset_max
from ...vectors.format import Hex
from ...vectors.layer import MEM_PORT, Draft, Mem, reg
from ...vectors.surface import pack_surface, packed_size
from ..blocks import pick_cvt
from ..draw import Sampler
from ..legal import PORT, EnumF, IntF, UnitSpec
from .conv import SCHEMA as CONV_SCHEMA
from .conv import (
    PixelInput,
    cdma_regs,
    conv_values,
    csc_regs,
    feature_geo,
    gen_conv,
    mac_acc_regs,
    place_surface,
    reg_units,
    sdp_flying,
)

__all__ = ["COMPRESSED_SCHEMA", "IMAGE_SCHEMA", "WINOGRAD_SCHEMA", "gen_conv_compressed", "gen_conv_image", "gen_conv_winograd"]

_PREC = {"int8": 0, "int16": 1, "fp16": 2}
_FORMATS = tuple(PIXEL_FORMATS)


def _format_needs(name: str) -> str | None:
    """The profile feature a pixel format needs: FP16 formats ``fp16``; formats with 10-, 12- or
    16-bit components ``int16`` (the v2 RTL built with ``FEATURE_DATA_TYPE_INT8`` decodes only the
    8-bit formats: ``NV_NVDLA_CDMA_IMG_ctrl.v`` keeps the others under ``#ifndef
    NVDLA_FEATURE_DATA_TYPE_INT8``); 8-bit formats nothing."""
    f = PIXEL_FORMATS[name]
    if f.float:
        return "fp16"
    return None if {w for _, w in f.fields} <= {8} else "int16"

IMAGE_SCHEMA: dict[str, Any] = {
    "format": EnumF(_FORMATS, "T_R8", needs={n: f for n in _FORMATS if (f := _format_needs(n))}),
    "precision": EnumF(("int8", "int16", "fp16"), "int8", needs={"int16": "int16", "fp16": "fp16"}),
    "width": IntF(1, 8192, 8), "height": IntF(1, 8192, 4), "kernels": IntF(1, 8192, 8),
    "kernel_w": IntF(1, 32, 3), "kernel_h": IntF(1, 32, 3), "stride_x": IntF(1, 8, 1), "stride_y": IntF(1, 8, 1),
    "pad_left": IntF(0, 31, 0), "pad_right": IntF(0, 63, 0), "pad_top": IntF(0, 31, 0), "pad_bottom": IntF(0, 63, 0),
    "pad_value": EnumF(("zero", "random")),
    "x_offset": IntF(0, 31, 0), "line_gap": IntF(0, 4, 0),
    "cvt": EnumF((0, 1), 1), "mean": EnumF((0, 1), 0), "sign_override": EnumF((0, 1), 0),
    "cvt_truncate": IntF(0, 63, 0), "data": EnumF(("uniform", "edges", "small")),
    "src_port": PORT, "wt_port": PORT, "dst_port": PORT,
    "sdp_cvt": EnumF(("fit", "saturate", "random")),
    "post_extension": EnumF((1, 2, 4), 1, doc="CSC channel post-extension: 2 or 4 lines per MAC step"),
    "weight_format": EnumF(("uncompressed", "compressed"), "uncompressed", needs={"compressed": "weight_compression"}),
    "density": EnumF(("sparse", "half", "dense", "empty"), "half"),
    "zero_groups": EnumF((0, 1), 0, doc="make whole kernel groups all-zero"),
    "fp_specials": EnumF((0, 1), 0, doc="FP16 images: NaN/INF/denormal/-0 components"),
    "nan_flush": EnumF((0, 1), 0, doc="CDMA.D_NAN_FLUSH_TO_ZERO"),
    "weights": EnumF(("random", "identity"), "random",
                     doc="identity: one 1x1 kernel per component with weight 1, so the output is the converted image"),
}

COMPRESSED_SCHEMA: dict[str, Any] = {
    **CONV_SCHEMA,
    "density": EnumF(("sparse", "half", "dense", "empty"), "half"),
    "zero_groups": EnumF((0, 1), 0, doc="make whole kernel groups all-zero"),
}


# ---- conv-image --------------------------------------------------------------------------------


def _fmt_prec(name: str) -> str:
    f = PIXEL_FORMATS[name]
    return "fp16" if f.float else f.precision


def _pixels(s: Sampler, name: str, shape: tuple[int, int, int]) -> np.ndarray:
    """Random image components in the layout's dtype (10-bit fields within their width)."""
    f = PIXEL_FORMATS[name]
    rng = s.rng
    if f.float:
        v: np.ndarray = rng.standard_normal(size=shape) * rng.uniform(0.05, 8.0)
        if s["data"] == "edges":
            v = v * np.exp2(rng.integers(-14, 12, size=shape))
        a = np.clip(v, -65504, 65504).astype(np.float16)
        if int(s["fp_specials"]):  # NaN / INF / denormals / -0 in the image
            sp = np.array([0.0, -0.0, 6e-8, -6e-8, 6.1e-5, 65504.0, -65504.0, np.inf, -np.inf, np.nan], dtype=np.float16)
            m = rng.random(size=shape) < 0.05
            a[m] = rng.choice(sp, size=int(m.sum()))
            a[rng.random(size=shape) < 0.01] = np.array([0x7E01], dtype=np.uint16).view(np.float16)[0]  # NaN payload
        return a
    widths = {"R": 0, "Y": 0, "G": 1, "U": 1, "B": 2, "V": 2, "A": 3, "X": 3}
    bits = np.zeros(shape, dtype=np.int64)
    wmap = {widths[n]: w for n, w in f.fields}
    for ch in range(shape[2]):
        w = wmap[ch]
        top = (1 << w) - 1
        if s["data"] == "edges":
            v = rng.choice(np.array([0, 1, top >> 1, (top >> 1) + 1, top - 1, top], dtype=np.int64), size=shape[:2])
        elif s["data"] == "small":
            v = rng.integers(0, min(top, 15) + 1, size=shape[:2])
        else:
            v = rng.integers(0, top + 1, size=shape[:2])
        bits[..., ch] = v
    dt = np.uint8 if {w for _, w in f.fields} <= {8} else np.uint16
    out = bits.astype(dt)
    return out.view(np.int16) if f.signed else out


def _image_geo(s: Sampler, prof: HardwareProfile, name: str, esize: int) -> dict[str, int]:
    """Geometry within the profile's CBUF: lines of ``ceil(padded width * E * esize / entry)``
    entries (``cbuf_entry_bytes``), data + weight banks within ``cbuf_banks``; the X offset within
    the first memory atom (``refmodel/conv/image.py`` ``x_offset_max``)."""
    f = PIXEL_FORMATS[name]
    E = f.channels
    entry = prof.cbuf_entry_bytes
    per_bank = prof.cbuf_bank_bytes // entry
    g = {k: int(s[k]) for k in ("width", "height", "kernels", "kernel_w", "kernel_h", "stride_x", "stride_y",
                                "pad_left", "pad_right", "pad_top", "pad_bottom")}
    xmax = x_offset_max(f, prof.atom_bytes)
    # beyond the format's range on this atom: redraw within it (clamping would pile the draw on xmax)
    g["x_offset"] = int(s["x_offset"]) if int(s["x_offset"]) <= xmax else int(s.rng.integers(0, xmax + 1))
    for w, k, p0, p1 in (("width", "kernel_w", "pad_left", "pad_right"), ("height", "kernel_h", "pad_top", "pad_bottom")):
        g[p0], g[p1] = min(g[p0], g[k] - 1), min(g[p1], g[k] - 1)
        while g[k] > g[w] + g[p0] + g[p1]:
            g[k] -= 1
            g[p0], g[p1] = min(g[p0], g[k] - 1), min(g[p1], g[k] - 1)
    for _ in range(64):  # CBUF: data lines + weights within the banks
        wp = g["pad_left"] + g["width"] + g["pad_right"]
        entries = -(-wp * E * esize // entry)
        dbanks = -(-entries * g["height"] // per_bank)
        wbytes = -(-g["kernels"] * g["kernel_h"] * g["kernel_w"] * E * esize // 128) * 128
        wbanks = -(-wbytes // prof.cbuf_bank_bytes)
        if dbanks + wbanks <= prof.cbuf_banks:
            break
        big = max(("height", "width", "kernels"), key=lambda n: g[n])
        g[big] = max(1, g[big] // 2)
        for w, k, p0, p1 in (("width", "kernel_w", "pad_left", "pad_right"), ("height", "kernel_h", "pad_top", "pad_bottom")):
            while g[k] > g[w] + g[p0] + g[p1]:
                g[k] -= 1
            g[p0], g[p1] = min(g[p0], g[k] - 1), min(g[p1], g[k] - 1)
    g.update(entries=entries, dbanks=dbanks, wbanks=wbanks, wbytes=wbytes, E=E)
    g["out_w"] = (g["pad_left"] + g["width"] + g["pad_right"] - g["kernel_w"]) // g["stride_x"] + 1
    g["out_h"] = (g["pad_top"] + g["height"] + g["pad_bottom"] - g["kernel_h"]) // g["stride_y"] + 1
    return g


def _weights_values(s: Sampler, shape: tuple[int, ...], prec: str) -> np.ndarray:
    rng = s.rng
    if prec == "fp16":
        return (rng.standard_normal(size=shape) * rng.uniform(0.02, 1.0)).astype(np.float16)
    info = np.iinfo(np.int8 if prec == "int8" else np.int16)
    if s["data"] == "small":
        return rng.integers(-8, 9, size=shape).astype(info.dtype)
    return rng.integers(int(info.min), int(info.max) + 1, size=shape, dtype=np.int64).astype(info.dtype)


def _post_extension(s: Sampler, prof: HardwareProfile, fmt: Any) -> int:
    """The pixel post-extension (1, 2 or 4) and the kernel it needs, set in the draw: with
    ``weights`` identity a 1x1 kernel per component (output channel k = input component k).

    Post-extension by ``post`` lines gives each line ``atomic C / post`` MAC lanes, so the pre-extended
    kernel (``kernel_w * components`` channels) must fit them (refmodel/conv/image.py ``_check_post``);
    any kernel height (a short last step when it is no multiple of ``post``; compressed weights: a
    multiple). The RTL's rule holds while an output position advances ``post * C * SX <= atomic C``
    elements, i.e. ``SX <= kernel_w`` (the fuzzer keeps to it)."""
    if s["weights"] == "identity":  # probe the pixel path: output channel k = input component k
        s.v.update(kernel_w=1, kernel_h=1, kernels=fmt.channels, pad_top=0, pad_bottom=0, stride_y=1, post_extension=1)
    post = int(s["post_extension"])
    per_line = prof.mac_atomic_c // post
    if post > 1 and per_line // fmt.channels >= 1:
        kw = min(max(int(s["kernel_w"]), 1), per_line // fmt.channels)
        kh = max(int(s["kernel_h"]), 1)
        if s["weight_format"] == "compressed":
            kh = post * max(1, kh // post)
        s.v.update(kernel_w=kw, kernel_h=kh, width=max(int(s["width"]), kw), height=max(int(s["height"]), kh),
                   stride_x=min(int(s["stride_x"]), kw))
    else:
        post = 1
    return post


def _pixel_surface(d: Draft, s: Sampler, mem: Mem, name: str, comps: np.ndarray, xo: int,
                   atom: int) -> tuple[int, dict[str, Any], int, int]:  # fmt: skip
    """The input image in memory: the layout's pitch-linear buffer (x offset, 32-byte aligned
    line strides with random gaps, the UV plane of a semi-planar format after the Y plane);
    returns (address, layout parameters, UV base address, bits per component)."""
    rng = s.rng
    fmt = PIXEL_FORMATS[name]
    H, W, E = comps.shape
    cbits = 8 if {w for _, w in fmt.fields} <= {8} else 16
    bpp = [cbits // 8 * (1 if fmt.planes == 2 else (4 if {w for _, w in fmt.fields} & {2} else E))]
    if fmt.planes == 2:
        bpp.append(2 * cbits // 8)
    gap = int(s["line_gap"])
    params: dict[str, Any] = {"x_offset": xo, "line_stride": -(-(xo + W) * bpp[0] // 32) * 32 + 32 * gap}
    if fmt.planes == 2:
        params["uv_line_stride"] = -(-(xo + W) * bpp[1] // 32) * 32 + 32 * int(rng.integers(0, gap + 1))
        params["uv_offset"] = H * params["line_stride"] + 32 * int(rng.integers(0, 3))
    layout = f"nvdla.pixel.{name}"
    size = packed_size(layout, comps.shape, comps.dtype, params)
    src = mem.alloc(MEM_PORT[s["src_port"]], size + 64)
    d.inputs.append(({"name": "src", "layout": layout, "params": params, "dtype": comps.dtype.name,
                      "shape": list(comps.shape), "address": Hex(src), "port": MEM_PORT[s["src_port"]]}, comps))
    base1 = 0
    if fmt.planes == 2:
        base1 = src + params["uv_offset"] + atom * ((xo * bpp[1]) // atom)  # the atom holding pixel xo
    return src, params, base1, cbits


def _pixel_convertor(s: Sampler, prec: str, cbits: int, cvt_en: int) -> tuple[int, int, int, int, int, list[int]]:
    """CDMA's pixel convertor (offset, scale, truncation, the per-component means) sized to the
    components' range and the output precision; returns (mean format, sign override, offset,
    scale, truncation, means)."""
    rng = s.rng
    mean = int(s["mean"]) if cvt_en else 0
    sign = int(s["sign_override"])
    off = scale = trunc_c = 0
    means = [0, 0, 0, 0]
    if cvt_en:
        top = (1 << cbits) - 1
        centre = 0 if sign else top // 2
        span = top // 2 + 1
        off = int(rng.integers(centre - span // 2, centre + span // 2 + 1))
        means = [int(rng.integers(centre - span // 2, centre + span // 2 + 1)) for _ in range(4)]
        out_max = {"int8": 127, "int16": 32767, "fp16": 65504}[prec]
        trunc_c = int(s["cvt_truncate"])
        want = max(1.0, out_max * (2 ** trunc_c) / span)
        scale = int(np.clip(round(want * rng.uniform(0.3, 2.0)), -32768, 32767)) * int(rng.choice([-1, 1]))
        scale = scale or 1
    return mean, sign, off, scale, trunc_c, means


def gen_conv_image(s: Sampler, prof: HardwareProfile, capture: Any) -> Draft:
    name = s["format"]
    fmt = PIXEL_FORMATS[name]
    in_prec = _fmt_prec(name)
    prec = "fp16" if in_prec == "fp16" else s["precision"]
    cvt_en = 1 if (prec != in_prec or int(s["cvt"])) and in_prec != "fp16" else 0
    esize = 1 if prec == "int8" else 2
    p = _PREC[prec]
    d = Draft(unit="CONV", profile=prof.name, statistics=True)
    rng = s.rng
    mem = Mem.for_case(s)
    atom = prof.atom_bytes
    post = _post_extension(s, prof, fmt)
    g = _image_geo(s, prof, name, esize)
    if post > 1 and (g["kernel_w"] * fmt.channels * post > prof.mac_atomic_c or g["stride_x"] > g["kernel_w"]
                     or (s["weight_format"] == "compressed" and g["kernel_h"] % post)):
        post = 1  # the geometry had to shrink
    W, H, E, K = g["width"], g["height"], g["E"], g["kernels"]
    S, R, OW, OH = g["kernel_w"], g["kernel_h"], g["out_w"], g["out_h"]
    xo = g["x_offset"]
    comps = _pixels(s, name, (H, W, E))
    src, params, base1, cbits = _pixel_surface(d, s, mem, name, comps, xo, atom)
    # weights: image-input format (channel pre-extension) of (K, E, R, S) kernels
    wt = _weights_values(s, (K, E, R, S), prec)
    if s["weights"] == "identity":
        wt = np.eye(E, dtype=np.float64)[:, :, None, None].astype(wt.dtype)
    wparams = {"profile": prof.name, "post_extension": post}
    wsize = packed_size("nvdla.weight.image", wt.shape, wt.dtype, wparams)
    waddr = mem.alloc(MEM_PORT[s["wt_port"]], wsize)
    d.inputs.append(({"name": "weight", "layout": "nvdla.weight.image", "params": wparams, "dtype": wt.dtype.name,
                      "shape": list(wt.shape), "address": Hex(waddr), "port": MEM_PORT[s["wt_port"]]}, wt))
    oline, osurf = feature_geo(OW, OH, atom, False, rng)
    dtn = {"int8": "int8", "int16": "int16", "fp16": "float16"}[prec]
    dst = place_surface(d, mem, "dst", (K, OH, OW), s["dst_port"], atom, oline, osurf, dtn, output=True)
    mean, sign, off, scale, trunc_c, means = _pixel_convertor(s, prec, cbits, cvt_en)
    if s["pad_value"] == "zero":
        pad = 0
    elif prec == "fp16":
        pad = int(np.float16(rng.standard_normal()).view(np.uint16))
    else:
        pad = int(rng.integers(-(1 << (8 * esize - 1)), 1 << (8 * esize - 1)))
    pad_field = pad & 0xFFFF
    # CACC truncation: room for the largest sums
    ctrunc = 0
    if prec != "fp16":
        emax = 1 << (8 * esize - 1)
        bound = emax * int(np.abs(wt.astype(np.int64)).sum(axis=(1, 2, 3)).max(initial=1))
        ctrunc = max(0, math.ceil(math.log2(max(bound, 2))) - int(rng.integers(16, 31)))
        if prec == "int16":
            ctrunc = min(ctrunc, 16)
    Ce = S * E
    misc = {"CONV_MODE": 0, "IN_PRECISION": _PREC[in_prec], "PROC_PRECISION": p, "DATA_REUSE": 0, "WEIGHT_REUSE": 0,
            "SKIP_DATA_RLS": 0, "SKIP_WEIGHT_RLS": 0}
    wbytes = g["wbytes"]
    pixel = PixelInput(pixel_format=_FORMATS.index(name), sign_override=sign, x_offset=xo, uv_base=base1,
                       uv_line_stride=params.get("uv_line_stride", 0), mean_format=mean, means=tuple(means))
    d.registers += cdma_regs(
        prof, s, misc=misc, src=src, size=(W, H, E), line=params["line_stride"], surf=0, entries=g["entries"],
        weight=(R * Ce * esize, K, waddr, wbytes), cvt=(cvt_en, off, scale, trunc_c), stride=(g["stride_x"], g["stride_y"]),
        pads=g, pad_value=pad_field, banks=(g["dbanks"], g["wbanks"]), nan_to_zero=int(s["nan_flush"]), pixel=pixel)
    d.registers += csc_regs(prof, misc, datain_format=1, size=(W, H, E), post_extension=post, entries=g["entries"],
                            weight=(1, R, Ce), kernels=K, wbytes=wbytes, out=(OW, OH), atomics=OW * OH, release=H,
                            stride=(g["stride_x"], g["stride_y"]), pad=(g["pad_left"], g["pad_top"]), pad_field=pad_field,
                            banks=(g["dbanks"], g["wbanks"]))
    d.registers += mac_acc_regs(prof, p, OW, OH, K, dst, oline, osurf, ctrunc)
    sdp_flying(d, s, K, OH, OW, dst, oline, osurf, p)
    if s["weight_format"] == "compressed":  # image weights (pre-extension) compressed: seed 000 allows all four formats
        _compress(d, s, prof, {"base": "image", "post_extension": post})
    if prec != "fp16":
        d.convertors["sdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
        ev = capture(d)
        xs = ev.get("sdp_out", [{}])[0].get("x", np.zeros(1))
        d.convertors["sdp_out"] = pick_cvt(s, xs, mode=s["sdp_cvt"], shift=0, out_max=127 if esize == 1 else 32767)
    d.description = (f"fuzz conv-image {name} -> {prec}: {W}x{H} x_offset {xo}, {K} kernels {R}x{S} (pre-extended "
                     f"{Ce} channels), stride {g['stride_x']}x{g['stride_y']}, pad l{g['pad_left']} r{g['pad_right']} "
                     f"t{g['pad_top']} b{g['pad_bottom']} value {pad}, cvt {'on' if cvt_en else 'off'}"
                     f"{' mean' if mean else ''}{' signed' if sign else ''}, out {K}x{OH}x{OW}, truncate {ctrunc}"
                     f"{f', post-extension {post}' if post > 1 else ''}") + d.description
    return d


# ---- conv-compressed ---------------------------------------------------------------------------


def _find(d: Draft, reg: str) -> dict[str, Any]:
    for r in d.registers:
        if r["reg"] == reg:
            return r
    raise KeyError(reg)


def gen_conv_compressed(s: Sampler, prof: HardwareProfile, capture: Any) -> Draft:
    """The ``conv`` unit's direct convolution, its weights sparsified and compressed."""
    d = gen_conv(s, prof, capture)
    _compress(d, s, prof, {"base": "dc"})
    return d


def _cmod_hang_group(packed: np.ndarray, groups: int) -> int | None:
    """The first trailing all-zero kernel group of a packed compressed surface (WGS | WMB | data)
    when its data ends on a 128-byte boundary before it: the C model hangs on that layer."""
    wgs = np.ascontiguousarray(packed[: 4 * groups]).view("<u4")
    nz = np.flatnonzero(wgs)
    if nz.size and nz[-1] < groups - 1 and int(wgs.sum()) % 128 == 0:
        return int(nz[-1]) + 1
    return None


def _compress(d: Draft, s: Sampler, prof: HardwareProfile, base: dict[str, Any]) -> None:
    """Sparsify the draft's ``weight`` input (``density``, ``zero_groups``) and store it in
    ``nvdla.weight.compressed`` over ``base`` (its WGS | WMB | data blob above every other
    surface), programming WEIGHT_FORMAT, the three addresses and the byte counts. For the C model
    a weight is kept where its known hang would follow (:func:`_cmod_hang_group`; no draw)."""
    rng = s.rng
    i = next(j for j, (m, _) in enumerate(d.inputs) if m["name"] == "weight")
    meta, wt = d.inputs[i]
    wt = np.array(wt)
    K = wt.shape[0]
    bpe = wt.dtype.itemsize
    G = prof.mac_atomic_k if bpe == 1 else max(prof.mac_atomic_k // 2, 1)
    density = {"sparse": 0.1, "half": 0.5, "dense": 0.95, "empty": 0.0}[s["density"]]
    keep = rng.random(size=wt.shape) < density
    if int(s["zero_groups"]):
        for g0 in range(0, K, G):
            if rng.random() < 0.5:
                keep[g0 : g0 + G] = False
    wt = np.where(keep, wt, np.zeros((), dtype=wt.dtype)).astype(wt.dtype)
    if wt.dtype == np.float16:  # an FP16 -0.0 is a non-zero WMB element; keep a few
        wt = np.where(keep & (rng.random(size=wt.shape) < 0.02), np.float16(-0.0), wt).astype(np.float16)
    params = {"profile": prof.name, **base}
    packed = pack_surface("nvdla.weight.compressed", wt, params)
    groups = -(-K // G)
    kept = 0
    while s.dut == "cmod" and (g := _cmod_hang_group(packed, groups)) is not None and kept < groups:
        wt[(g * G,) + (0,) * (wt.ndim - 1)] = 1
        packed = pack_surface("nvdla.weight.compressed", wt, params)
        kept += 1
    size = int(packed.size)  # depends on the data (non-zeros)
    wmb_off, data_off = compressed_offsets(groups, wt.size)
    data_bytes = max(128, size - data_off)  # the cmod needs WEIGHT_BYTES > 0 even when every weight is 0
    addr = _above(d)
    d.inputs[i] = ({**meta, "layout": "nvdla.weight.compressed", "params": params, "shape": list(wt.shape),
                    "address": Hex(addr)}, wt)
    wmb_bytes = -(-wt.size // 1024) * 128  # one bit per element, 128-byte aligned
    for blk in ("CDMA", "CSC"):
        _find(d, f"{blk}.D_WEIGHT_FORMAT")["fields"]["WEIGHT_FORMAT"] = 1
        _find(d, f"{blk}.D_WEIGHT_BYTES")["fields"]["WEIGHT_BYTES"] = reg_units(prof, f"{blk}.D_WEIGHT_BYTES", "WEIGHT_BYTES",
                                                                             data_bytes)
        wmb = reg_units(prof, f"{blk}.D_WMB_BYTES", "WMB_BYTES", wmb_bytes)
        try:
            _find(d, f"{blk}.D_WMB_BYTES")["fields"]["WMB_BYTES"] = wmb
        except KeyError:
            d.registers.append(reg(f"{blk}.D_WMB_BYTES", WMB_BYTES=wmb))
    _find(d, "CDMA.D_WEIGHT_ADDR_LOW")["fields"]["WEIGHT_ADDR_LOW"] = Hex(addr + data_off)
    d.registers += [
        reg("CDMA.D_WGS_ADDR_HIGH", WGS_ADDR_HIGH=0), reg("CDMA.D_WGS_ADDR_LOW", WGS_ADDR_LOW=addr),
        reg("CDMA.D_WMB_ADDR_HIGH", WMB_ADDR_HIGH=0), reg("CDMA.D_WMB_ADDR_LOW", WMB_ADDR_LOW=addr + wmb_off),
    ]
    # the cmod keeps WMB in CBUF bank 15: data + weight banks must leave it free
    bank = _find(d, "CDMA.D_BANK")["fields"]
    if int(bank["DATA_BANK"]) + 1 + int(bank["WEIGHT_BANK"]) + 1 > 15:
        wb = max(1, 15 - (int(bank["DATA_BANK"]) + 1))
        for blk in ("CDMA", "CSC"):
            _find(d, f"{blk}.D_BANK")["fields"]["WEIGHT_BANK"] = wb - 1
    nnz = int(np.count_nonzero(wt.view(f"<u{bpe}")))
    d.description += (f"; compressed weights: {nnz}/{wt.size} non-zero ({s['density']}{', zero groups' if int(s['zero_groups']) else ''}"
                      f"{f'; a trailing zero group given {kept} weight(s): C model hang' if kept else ''})")


def _above(d: Draft) -> int:
    """A 4 KiB-aligned address above every surface of the draft (all on one port's address space)."""
    top = 0
    for m, _a in d.inputs:
        top = max(top, int(m["address"]) + packed_size(m["layout"], tuple(m["shape"]), np.dtype(m["dtype"]), m["params"]))
    for m in d.outputs:
        top = max(top, int(m["address"]) + packed_size(m["layout"], tuple(m["shape"]), np.dtype(m["dtype"]), m["params"]))
    return (top + 0xFFF) // 0x1000 * 0x1000 + 0x1000


# ---- conv-winograd ------------------------------------------------------------------------------

WINOGRAD_SCHEMA: dict[str, Any] = {
    "precision": EnumF(("int8", "int16", "fp16"), "int8", needs={"int16": "int16", "fp16": "fp16"}),
    "fp_specials": EnumF((0, 1), 0, doc="FP16: put NaN/INF/denormal/-0 values into data and weights"),
    "nan_to_zero": EnumF((0, 1), 0, doc="FP16: CDMA.D_NAN_FLUSH_TO_ZERO"),
    "width": IntF(1, 512, 8), "height": IntF(1, 512, 8), "channels": IntF(1, 1024, 8), "kernels": IntF(1, 1024, 8),
    "stride": EnumF((1, 2), 1, doc="conv stride (x = y): the CDMA channel-extends the input, weights are extended 3x3"),
    "pad_left": IntF(0, 7, 1), "pad_top": IntF(0, 7, 1), "extra_right": IntF(0, 7, 0), "extra_bottom": IntF(0, 7, 0),
    "out_shrink": IntF(0, 2, 0, doc="output tiles dropped (x4 pixels) from the largest output"),
    "pad_value": EnumF(("zero", "random")),
    "weights": EnumF(("transformed", "random"), "transformed",
                     doc="transformed: G g G^T of random 3x3 (3s x 3s) kernels (seed 000 phase 1); random: raw 4x4 values"),
    "pra_truncate": IntF(0, 3, 0), "gaps": EnumF((0, 1), 0),
    "src_port": PORT, "wt_port": PORT, "dst_port": PORT,
    "data": EnumF(("uniform", "edges", "small")),
    "truncate": EnumF(("fit", "random")), "clip_truncate": IntF(0, 31, 0),
    "cvt": EnumF(("fit", "saturate", "random")), "cvt_shift": IntF(0, 63, 0),
    "weight_format": EnumF(("uncompressed", "compressed"), "uncompressed"),
    "density": EnumF(("sparse", "half", "dense", "empty"), "half"),
    "zero_groups": EnumF((0, 1), 0, doc="make whole kernel groups all-zero"),
}


def _wino_values(s: Sampler, shape: tuple[int, ...], bits: int) -> np.ndarray:
    rng = s.rng
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if s["data"] == "edges":
        v = rng.choice(np.array([lo, lo + 1, -1, 0, 1, hi - 1, hi], dtype=np.int64), size=shape)
    elif s["data"] == "small":
        v = rng.integers(-8, 9, size=shape)
    else:
        v = rng.integers(lo, hi + 1, size=shape, dtype=np.int64)
    return v.astype(np.int8 if bits == 8 else np.int16)


def _wino_geometry(s: Sampler, prof: HardwareProfile, bpe: int) -> dict[str, int]:
    """Padded sizes multiples of 4*stride, output 2 pixels inside the extended input, W/H multiples of 4,
    CBUF within the banks (data ``He*(entries)`` entries, weights ``K*Ce*16*bpe`` bytes)."""
    st = int(s["stride"])
    g = {k: int(s[k]) for k in ("width", "height", "channels", "kernels", "pad_left", "pad_top", "extra_right",
                                "extra_bottom", "out_shrink")}
    lanes = prof.atom_bytes // bpe
    for _ in range(64):
        tw = -(-max(g["pad_left"] + g["width"] + g["extra_right"], 8 * st) // (4 * st)) * 4 * st
        th = -(-max(g["pad_top"] + g["height"] + g["extra_bottom"], 8 * st) // (4 * st)) * 4 * st
        we, he = tw // st, th // st
        surf = -(-g["channels"] // lanes)
        ce = st * st * surf * lanes
        entries = (tw // (4 * st)) * surf * st * st
        data_banks = -(-he * entries // (prof.cbuf_bank_bytes // prof.cbuf_entry_bytes))
        wt_banks = -(-(-(-g["kernels"] * ce * 16 * bpe // 128) * 128) // prof.cbuf_bank_bytes)
        if data_banks + wt_banks <= prof.cbuf_banks and entries <= 0x3FFF:
            break
        big = max(("height", "channels", "kernels", "width"), key=lambda n: g[n])
        g[big] = max(1, g[big] // 2)
    g["pad_left"] = min(g["pad_left"], tw - 1)
    g["width"] = min(g["width"], tw - g["pad_left"])
    g["pad_right"] = tw - g["pad_left"] - g["width"]
    g["pad_top"] = min(g["pad_top"], th - 1)
    g["height"] = min(g["height"], th - g["pad_top"])
    g["pad_bottom"] = th - g["pad_top"] - g["height"]
    ow = max(4, we - 4 - 4 * min(g["out_shrink"], (we - 8) // 4))
    oh = max(4, he - 4 - 4 * min(g["out_shrink"], (he - 8) // 4))
    g.update(stride=st, tw=tw, th=th, we=we, he=he, ce=ce, surf=surf, entries=entries, data_banks=data_banks,
             wt_banks=wt_banks, ow=ow, oh=oh)
    return g


def _wino_truncate(s: Sampler, g: dict[str, int], x: np.ndarray, wt: np.ndarray, pad: int, pra_t: int, prec: str, bpe: int,
                   atom: int) -> int:  # fmt: skip
    """CACC's truncation of a Winograd layer: drawn (``random``) or placed from the exact
    accumulator range of this layer (zero padding lanes as packed), a random 8..23 bits kept."""
    from ...refmodel.conv.winograd import pra, winograd_output

    rng = s.rng
    W, H, C, K, st = g["width"], g["height"], g["channels"], g["kernels"], g["stride"]
    We, He, Ce, OW, OH = g["we"], g["he"], g["ce"], g["ow"], g["oh"]
    trunc = int(s["clip_truncate"]) if s["truncate"] == "random" else 0
    if s["truncate"] != "random" and prec != "fp16":
        lanes = atom // bpe
        pc = np.full((g["surf"] * lanes, g["th"], g["tw"]), pad, dtype=np.int64)
        pc[:, g["pad_top"] : g["pad_top"] + H, g["pad_left"] : g["pad_left"] + W] = 0
        pc[:C, g["pad_top"] : g["pad_top"] + H, g["pad_left"] : g["pad_left"] + W] = x
        e = pc.reshape(g["surf"] * lanes, He, st, We, st).transpose(2, 4, 0, 1, 3).reshape(Ce, He, We)
        yy = 2 * np.arange(OH // 2)[:, None, None, None] + np.arange(4)[None, None, :, None]
        xx = 2 * np.arange(OW // 2)[None, :, None, None] + np.arange(4)[None, None, None, :]
        v = pra(e[:, yy, xx], pra_t, 8 * bpe).reshape(Ce, -1, 16).astype(np.float64)
        m = np.einsum("kcp,cnp->knp", wt.astype(np.float64).reshape(K, Ce, 16), v)
        acc = winograd_output(np.rint(m).astype(np.int64).reshape(K, -1, 4, 4))
        span = max(int(np.abs(acc).max(initial=1)), 1)
        trunc = max(0, math.ceil(math.log2(span)) - int(rng.integers(8, 24)))
    return trunc


def gen_conv_winograd(s: Sampler, prof: HardwareProfile, capture: Any) -> Draft:
    """One flying Winograd convolution (``CONV_MODE`` WINOGRAD in CDMA/CSC/CMAC/CACC, SDP WINOGRAD)."""
    from ...layouts.nvdla import winograd_phase1

    prec = s["precision"]
    d = Draft(unit="CONV", profile=prof.name, statistics=True)
    rng = s.rng
    mem = Mem.for_case(s)
    atom = prof.atom_bytes
    bpe = 1 if prec == "int8" else 2
    p = _PREC[prec]
    g = _wino_geometry(s, prof, bpe)
    W, H, C, K, st = g["width"], g["height"], g["channels"], g["kernels"], g["stride"]
    We, He, Ce, OW, OH = g["we"], g["he"], g["ce"], g["ow"], g["oh"]
    dtn = {"int8": "int8", "int16": "int16", "fp16": "float16"}[prec]
    vals = (lambda shape, weight: conv_values(s, shape, "fp16", weight=weight)) if prec == "fp16" else \
        (lambda shape, weight: _wino_values(s, shape, 8 * bpe))
    x = vals((C, H, W), False)
    if s["weights"] == "transformed":
        wt = winograd_phase1(vals((K, C, 3 * st, 3 * st), True), stride=st, atom_bytes=atom)
    else:
        wt = vals((K, Ce, 4, 4), True)
    line, surf = feature_geo(W, H, atom, bool(s["gaps"]), rng)
    src = place_surface(d, mem, "src", x, s["src_port"], atom, line, surf, dtn)
    params = {"profile": prof.name}
    wsize = packed_size("nvdla.weight.winograd", wt.shape, wt.dtype, params)
    waddr = mem.alloc(MEM_PORT[s["wt_port"]], wsize)
    d.inputs.append(({"name": "weight", "layout": "nvdla.weight.winograd", "params": params, "dtype": wt.dtype.name,
                      "shape": list(wt.shape), "address": Hex(waddr), "port": MEM_PORT[s["wt_port"]]}, wt))
    wbytes = -(-wt.size * wt.itemsize // 128) * 128
    oline, osurf = feature_geo(OW, OH, atom, bool(s["gaps"]), rng)
    dst = place_surface(d, mem, "dst", (K, OH, OW), s["dst_port"], atom, oline, osurf, dtn, output=True)
    if s["pad_value"] == "zero":
        pad = 0
    elif prec == "fp16":
        pad = int(np.float16(rng.standard_normal()).view(np.uint16))
    else:
        pad = int(rng.integers(-(1 << (8 * bpe - 1)), 1 << (8 * bpe - 1)))
    pra_t = int(s["pra_truncate"]) if prec != "fp16" else 0
    trunc = _wino_truncate(s, g, x, wt, pad, pra_t, prec, bpe, atom)
    if prec != "int8":
        trunc = min(trunc, 16) if prec == "int16" else 0  # cmod: cacc_clip_truncate_ + 32 <= 48
    misc = {"CONV_MODE": 1, "IN_PRECISION": p, "PROC_PRECISION": p, "DATA_REUSE": 0, "WEIGHT_REUSE": 0,
            "SKIP_DATA_RLS": 0, "SKIP_WEIGHT_RLS": 0}
    d.registers += cdma_regs(
        prof, s, misc=misc, src=src, size=(W, H, C), ext=(We, He), line=line, surf=surf, entries=g["entries"],
        weight=(16 * Ce * bpe, K, waddr, wbytes), stride=(st, st), pads=g, pad_value=pad & 0xFFFF,
        banks=(g["data_banks"], g["wt_banks"]), nan_to_zero=int(s["nan_to_zero"]) if prec == "fp16" else 0)
    d.registers += csc_regs(prof, misc, size=(We, He, Ce), entries=g["entries"], weight=(4, 4, Ce), kernels=K, wbytes=wbytes,
                            out=(OW, OH), atomics=OW * OH // 4, release=He // 4, pad_field=pad & 0xFFFF,
                            banks=(g["data_banks"], g["wt_banks"]), pra_truncate=pra_t)
    regs = mac_acc_regs(prof, p, OW, OH, K, dst, oline, osurf, trunc)
    for r in regs:
        if "CONV_MODE" in r["fields"]:
            r["fields"]["CONV_MODE"] = 1
    d.registers += regs
    sdp_flying(d, s, K, OH, OW, dst, oline, osurf, p, winograd=True)
    if s["weight_format"] == "compressed":
        _compress(d, s, prof, {"base": "winograd"})
    if prec != "fp16":
        d.convertors["sdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
        ev = capture(d)
        xs = ev.get("sdp_out", [{}])[0].get("x", np.zeros(1))
        d.convertors["sdp_out"] = pick_cvt(s, xs, mode=s["cvt"], shift=s["cvt_shift"], out_max=127 if bpe == 1 else 32767)
    d.description = (f"fuzz conv {prec} winograd: in {C}x{H}x{W}, stride {st}, pad l{g['pad_left']} r{g['pad_right']} "
                     f"t{g['pad_top']} b{g['pad_bottom']} value {pad}, extended {Ce}x{He}x{We}, {K} kernels "
                     f"({s['weights']}), PRA truncate {pra_t}, out {K}x{OH}x{OW}, CACC truncate {trunc}") + d.description
    return d


CONV_WINOGRAD = UnitSpec("conv-winograd", WINOGRAD_SCHEMA, ("winograd",), ("conv.mode",), gen_conv_winograd)
CONV_IMAGE = UnitSpec("conv-image", IMAGE_SCHEMA, (), ("conv.mode", "conv.pixel"), gen_conv_image)
CONV_COMPRESSED = UnitSpec("conv-compressed", COMPRESSED_SCHEMA, ("weight_compression",), ("conv.mode",), gen_conv_compressed)
