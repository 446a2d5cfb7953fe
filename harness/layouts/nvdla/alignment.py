"""Seed 000's "Requirements of alignment" table and its check, with the atom-derived rows
following the configuration's memory atom (see ``STRIDE_RULE``).
"""

from __future__ import annotations

from .._base import LayoutError, check_aligned
from .common import STRIDE_RULE, atom_size, hardware_profile

#: Seed 000 'Requirements of alignment': format -> (start address, line stride, surface stride,
#: planar/cube stride, data size); None = NA.
ALIGNMENT: dict[str, tuple[int | None, int | None, int | None, int | None, int | None]] = {
    "feature": (32, 32, 32, 32, None),
    "weight": (256, None, None, None, 128),
    "wmb": (256, None, None, None, 128),
    "wgs": (256, None, None, None, 128),
    "pixel": (32, 32, None, None, None),
    "bias": (32, 32, 32, None, None),
    "prelu": (32, None, None, None, None),
    "bn": (32, None, None, None, None),
    "ew": (32, 32, None, None, 32),
}
_ALIGN_FIELDS = ("start_address", "line_stride", "surface_stride", "planar_stride", "data_size")

#: Rows whose 32-byte address/stride alignment is the nv_full memory atom: CDMA (feature) and SDP
#: RDMA/WDMA (bias, PReLU, BN, EW) take base address and strides as [31:log2(atom)] in nvdla/hw
#: master, so on a smaller atom (nv_small: 8) the rule is the atom. Weights, WMB/WGS, pixels and
#: the EW data size keep the seed's fixed values.
_ATOM_ROWS = frozenset({"feature", "bias", "prelu", "bn", "ew"})
_ATOM_FIELDS = ("start_address", "line_stride", "surface_stride", "planar_stride")


def check_alignment(fmt: str, *, atom_bytes: int | None = None, profile: str | None = None,
                    **values: int) -> None:
    """Validate addresses/strides/sizes of ``fmt`` against the alignment table.

    ``values`` keys: start_address, line_stride, surface_stride, planar_stride, data_size.
    The table is seed 000's (32-byte atom, nv_full). Give ``profile`` (or ``atom_bytes``) to
    check the atom-derived rows (feature, bias, prelu, bn, ew addresses and strides) against
    that configuration's memory atom instead, e.g. 8 bytes on nv_small.
    """
    if fmt not in ALIGNMENT:
        raise LayoutError(f"unknown format {fmt!r} for the alignment table; known: {sorted(ALIGNMENT)}")
    row = dict(zip(_ALIGN_FIELDS, ALIGNMENT[fmt]))
    source = "seed 000 alignment table"
    if atom_bytes is None and profile is not None:
        atom_bytes = hardware_profile(profile).atom_bytes
    if atom_bytes is not None and fmt in _ATOM_ROWS:
        atom = atom_size({"atom_bytes": atom_bytes})
        row.update({k: atom for k in _ATOM_FIELDS if row[k] is not None})
        source = f"the {atom}-byte memory atom of {profile or f'atom_bytes={atom}'}; {STRIDE_RULE}"
    for key, val in values.items():
        if key not in row:
            raise LayoutError(f"check_alignment: unknown field {key!r}; accepted: {list(_ALIGN_FIELDS)}")
        if val is None or (align := row[key]) is None:
            continue
        check_aligned(f"{fmt} {key}", val, align, f"alignment of {key.replace('_', ' ')} for {fmt} is {align} bytes ({source})")
