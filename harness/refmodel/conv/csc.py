"""CSC: convolution geometry (CSC's own register copies), zero padding, CBUF checks.

The CSC sequences the feature data out of CBUF into CMAC: :func:`decode_conv_config` reads
the geometry it uses, :func:`pad_input` / :func:`tap` give the input each kernel position
sees (padding value outside the cube), :func:`check_cbuf` / :func:`feature_entries_per_slice`
refuse CBUF programming the configuration cannot hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import InvalidLayer, ModelOptions, RegisterView
from ..ops import sx
from ._common import I64, PREC_INT8

__all__ = ["ConvConfig", "check_cbuf", "decode_conv_config", "feature_entries_per_slice", "pad_input", "tap"]


@dataclass(frozen=True)
class ConvConfig:
    """Decoded geometry of one direct-convolution layer (all sizes real, not minus one)."""

    in_w: int
    in_h: int
    in_c: int
    k_w: int
    k_h: int
    out_w: int
    out_h: int
    out_k: int
    stride_x: int = 1
    stride_y: int = 1
    dil_x: int = 1
    dil_y: int = 1
    pad_left: int = 0
    pad_top: int = 0
    pad_value: int = 0  # int8 (int16 at INT16), already sign-extended



def pad_input(d: np.ndarray, cfg: ConvConfig) -> tuple[np.ndarray, int, int]:
    """Embed the (C, H, W) cube in a pad-value frame covering every input position the
    output touches. Returns (padded, y0, x0): padded[:, y - y0, x - x0] = input (y, x)."""
    need_w = (cfg.out_w - 1) * cfg.stride_x + (cfg.k_w - 1) * cfg.dil_x + 1
    need_h = (cfg.out_h - 1) * cfg.stride_y + (cfg.k_h - 1) * cfg.dil_y + 1
    x0, y0 = -cfg.pad_left, -cfg.pad_top
    pw = max(need_w, cfg.pad_left + cfg.in_w)
    ph = max(need_h, cfg.pad_top + cfg.in_h)
    out = np.full((d.shape[0], ph, pw), cfg.pad_value, dtype=I64)
    h = min(cfg.in_h, ph - cfg.pad_top)
    w = min(cfg.in_w, pw - cfg.pad_left)
    out[:, cfg.pad_top : cfg.pad_top + h, cfg.pad_left : cfg.pad_left + w] = d[:, :h, :w]
    return out, y0, x0


def tap(padded: np.ndarray, cfg: ConvConfig, ky: int, kx: int) -> np.ndarray:
    """Input values seen by kernel position (ky, kx) for every output: (C, OH, OW)."""
    y = ky * cfg.dil_y
    x = kx * cfg.dil_x
    return padded[
        :,
        y : y + (cfg.out_h - 1) * cfg.stride_y + 1 : cfg.stride_y,
        x : x + (cfg.out_w - 1) * cfg.stride_x + 1 : cfg.stride_x,
    ]


def feature_entries_per_slice(width: int, channels: int, options: ModelOptions, bpe: int = 1) -> int:
    """CBUF entries one input line (slice) of a feature cube needs.

    A CBUF entry holds ``mac_atomic_c`` channels (``cbuf_bank_width`` bytes at INT8); a line
    holds ``width`` pixels of ``C // atomic_c`` full entries each, and the remaining
    ``C mod atomic_c`` channels take ``t`` memory atoms rounded up to a power of two, so that
    ``atomic_c / (atom * t)`` pixels share one entry. This is the value every direct-
    convolution trace of nvdla/hw master carries in ``CDMA/CSC.D_ENTRY_PER_SLICE`` (all 42,
    on all six configurations); a smaller value makes slices overlap in CBUF. An entry is
    the profile's ``cbuf_entry_bytes`` (nv_full: 128 bytes at INT8 and INT16 alike).

    INT16 (``bpe`` 2): an entry holds ``atomic_c`` int16 channels (``2 * atomic_c`` bytes, the
    nvdlav1 cmod's 128-byte ``CBUF_ENTRY_SIZE``), the same rule in bytes: nvdlav1
    ``NV_NVDLA_cdma.cpp`` ``DirectConvDataResponseSequencerCommon`` computes
    ``(atom_per_channel / 4) * W`` plus ``W``, ``(W + 1) / 2`` or ``(W + 3) / 4`` for 3, 2, 1
    remaining atoms (v1 traces: 8 x 8 x 32 int16 -> ENTRIES 3, 19 x 19 x 64 -> 18)."""
    entry = max(options.cbuf_entry_bytes, options.mac_atomic_c * bpe)
    atoms_per_entry = max(entry // options.atom_bytes, 1)
    full, rest = divmod(channels * bpe, entry)
    tail = -(-rest // options.atom_bytes)
    tail_pad = 0 if tail == 0 else 1 << (tail - 1).bit_length()
    return -(-width * (full * atoms_per_entry + tail_pad) // atoms_per_entry)


def check_cbuf(view: RegisterView, options: ModelOptions) -> None:
    """Refuse CBUF programming the configuration cannot hold: data + weight banks beyond
    ``cbuf_banks``, CDMA and CSC disagreeing on banks or entries per slice, or fewer entries
    per slice than one input line needs (:func:`feature_entries_per_slice`)."""
    f = lambda b, r, n: int(view.field(b, r, n))  # noqa: E731
    for reg, flds in (("D_BANK", ("DATA_BANK", "WEIGHT_BANK")), ("D_ENTRY_PER_SLICE", ("ENTRIES",))):
        for fld in flds:
            if f("CDMA", reg, fld) != f("CSC", reg, fld):
                raise InvalidLayer(f"CDMA.{reg}.{fld} = {f('CDMA', reg, fld)} but CSC.{reg}.{fld} = "
                                   f"{f('CSC', reg, fld)}: the two must describe the same CBUF use")  # fmt: skip
    data, weight = f("CDMA", "D_BANK", "DATA_BANK") + 1, f("CDMA", "D_BANK", "WEIGHT_BANK") + 1
    if data + weight > options.cbuf_banks:
        raise InvalidLayer(f"CDMA.D_BANK: {data} data + {weight} weight banks exceed the configuration's "
                           f"{options.cbuf_banks} CBUF banks")  # fmt: skip
    if f("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT") == 1:
        return  # pixel input: image.fetch_image owns the pixel-line entry rule
    if f("CDMA", "D_MISC_CFG", "CONV_MODE") == 1:
        return  # Winograd: winograd.check_winograd_cbuf owns the 4x4-block entry rule
    w = f("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    c = f("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    bpe = 1 if f("CDMA", "D_MISC_CFG", "PROC_PRECISION") == PREC_INT8 else 2
    need = feature_entries_per_slice(w, c, options, bpe)
    have = f("CDMA", "D_ENTRY_PER_SLICE", "ENTRIES") + 1
    if have < need:
        raise InvalidLayer(f"CDMA.D_ENTRY_PER_SLICE.ENTRIES = {have - 1} (+1 = {have} entries) but a {w}-pixel "
                           f"line of {c} {'16-bit' if bpe == 2 else 'int8'} channels needs {need} CBUF entries "
                           f"of {options.mac_atomic_c * bpe if bpe == 2 else options.cbuf_bank_width} bytes")  # int16 or fp16


def decode_conv_config(view: RegisterView) -> ConvConfig:
    f = lambda b, r, n: int(view.field(b, r, n))
    pad_bits = 8 if f("CSC", "D_MISC_CFG", "PROC_PRECISION") == PREC_INT8 else 16  # FP16: raw bits, sign-extended
    return ConvConfig(
        in_w=f("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT") + 1,
        in_h=f("CSC", "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1,
        in_c=f("CSC", "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1,
        k_w=f("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1,
        k_h=f("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1,
        out_w=f("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1,
        out_h=f("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1,
        out_k=f("CSC", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1,
        stride_x=f("CSC", "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT") + 1,
        stride_y=f("CSC", "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT") + 1,
        dil_x=f("CSC", "D_DILATION_EXT", "X_DILATION_EXT") + 1,
        dil_y=f("CSC", "D_DILATION_EXT", "Y_DILATION_EXT") + 1,
        pad_left=f("CSC", "D_ZERO_PADDING", "PAD_LEFT"),
        pad_top=f("CSC", "D_ZERO_PADDING", "PAD_TOP"),
        pad_value=int(sx(f("CSC", "D_ZERO_PADDING_VALUE", "PAD_VALUE"), pad_bits)),
    )
