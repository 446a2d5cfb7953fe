"""NVDLA in-memory data formats (seed 000, "In-memory data formats"), one module per kind of data:

* :mod:`.feature` -- feature data ``(C, H, W)`` and the SDP operands (bias, PReLU, batch-norm,
  element-wise: ``(C,)``/``(C, H, W)`` with a trailing ``2`` axis when two components per
  element are stored) that share its C' -> W -> H -> C order;
* :mod:`.weight` -- weights ``(K, C, H, W)`` = kernels, channels, kernel height, kernel width:
  direct convolution, image input, Winograd, deconvolution; :mod:`.compressed` -- their sparse
  compression (WGS / WMB / data);
* :mod:`.pixel` -- pixels ``(H, W, channels)`` with channels in CBUF order (R, G, B, A) / (Y, U, V, A);
* :mod:`.alignment` -- the alignment table; :mod:`.common` -- profile, precision and atom rules.

Elements are moved bit-exactly (fp16 NaN payloads and -0.0 survive a round trip).
``nvdla_layouts()`` lists this family's layouts for the registry in ``harness/layouts``; the
names below are re-exported for code that imports them from ``layouts.nvdla``.
"""

from __future__ import annotations

from .._base import LayoutSpec
from .alignment import ALIGNMENT, check_alignment
from .common import PRECISIONS, SEED, STRIDE_RULE
from .compressed import (
    CompressedWeights,
    compress_weights,
    compressed_layout,
    compressed_offsets,
    compressed_pack,
    compressed_unpack,
    decompress_weights,
)
from .feature import (
    COMPONENTS_PER_ELEMENT,
    CubeGeometry,
    bytes_per_atom,
    cube_geometry,
    cube_plan,
    feature_1x1_as_cube,
    feature_layout,
    feature_offset,
    feature_pack,
    feature_unpack,
    make_sdp_layout,
    sdp_layouts,
)
from .pixel import PIXEL_ALIGN, PIXEL_FORMATS, PixelFormat, make_pixel_layout, pixel_layouts
from .weight import (
    WEIGHT_DATA_ALIGN,
    WEIGHT_START_ALIGN,
    WINOGRAD_G,
    dc_pack,
    dc_pieces,
    dc_plan,
    dc_unpack,
    deconv_pack,
    deconv_split,
    deconv_unpack,
    image_pack,
    image_plan,
    image_pre_extend,
    image_pre_extend_inverse,
    image_unpack,
    weight_cube_elements,
    weight_group_bytes,
    weight_group_size,
    weight_layouts,
    winograd_channel_extend,
    winograd_pack,
    winograd_phase1,
    winograd_pieces,
    winograd_plan,
    winograd_unpack,
)

__all__ = [
    "ALIGNMENT", "COMPONENTS_PER_ELEMENT", "PIXEL_ALIGN", "PIXEL_FORMATS", "PRECISIONS", "SEED",
    "STRIDE_RULE", "WEIGHT_DATA_ALIGN", "WEIGHT_START_ALIGN", "WINOGRAD_G",
    "CompressedWeights", "CubeGeometry", "PixelFormat",
    "bytes_per_atom", "check_alignment", "compress_weights", "compressed_offsets", "compressed_pack",
    "compressed_unpack", "cube_geometry", "cube_plan", "dc_pack", "dc_pieces", "dc_plan", "dc_unpack",
    "decompress_weights", "deconv_pack", "deconv_split", "deconv_unpack", "feature_1x1_as_cube",
    "feature_offset", "feature_pack", "feature_unpack", "image_pack", "image_plan", "image_pre_extend",
    "image_pre_extend_inverse", "image_unpack", "make_pixel_layout", "make_sdp_layout", "nvdla_layouts",
    "weight_cube_elements", "weight_group_bytes", "weight_group_size", "winograd_channel_extend",
    "winograd_pack", "winograd_phase1", "winograd_pieces", "winograd_plan", "winograd_unpack",
]


def nvdla_layouts() -> list[LayoutSpec]:
    """Every NVDLA layout, in registry order: feature data, the weight mappings, compressed
    weights, the SDP operands, then the 36 pixel formats."""
    return [feature_layout(), *weight_layouts(), compressed_layout(), *sdp_layouts(), *pixel_layouts()]
