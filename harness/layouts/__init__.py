"""Memory layouts: pack numpy tensors into accelerator memory images and unpack them back.

``LAYOUTS`` maps a layout name to its :class:`LayoutSpec`; ``get_layout(name)`` looks one up
(unknown names raise :class:`LayoutError` with close matches). Families: ``nvdla`` (seed 000),
``dmp`` (seed 002, DMP dv-sdk), ``sophgo`` (seed 004, Sophgo TPU local memory).
See README.md in this folder for every layout and parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ._base import REQUIRED, AlignmentError, LayoutError, LayoutSpec, Param
from ._base import check_close_name as _close
from .dmp import dmp_layouts
from .nvdla import nvdla_layouts
from .sophgo import sophgo_layouts

__all__ = ["LAYOUTS", "REQUIRED", "AlignmentError", "LayoutError", "LayoutSpec", "Param", "get_layout"]


def build_layouts() -> dict[str, LayoutSpec]:
    """Every layout of every family by name; a name given twice is a programming error."""
    out: dict[str, LayoutSpec] = {}
    for s in [*nvdla_layouts(), *dmp_layouts(), *sophgo_layouts()]:
        if s.name in out:
            raise RuntimeError(f"duplicate layout name {s.name!r}")
        out[s.name] = s
    return out


#: The registry: built once from the families' explicit lists, read-only afterwards.
LAYOUTS: Mapping[str, LayoutSpec] = MappingProxyType(build_layouts())


def get_layout(name: str) -> LayoutSpec:
    """Return the layout called ``name``; unknown names raise LayoutError with close matches."""
    try:
        return LAYOUTS[name]
    except KeyError:
        raise _close(name, sorted(LAYOUTS)) from None
