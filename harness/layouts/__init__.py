"""Memory layouts: pack numpy tensors into accelerator memory images and unpack them back.

``LAYOUTS`` maps a layout name to its :class:`LayoutSpec`; ``get_layout(name)`` looks one up
(unknown names raise :class:`LayoutError` with close matches). Families: ``nvdla`` (seed 000),
``dmp`` (seed 002, DMP dv-sdk), ``sophgo`` (seed 004, Sophgo TPU local memory).
See README.md in this folder for every layout and parameter.
"""

from __future__ import annotations

from ._base import REQUIRED, AlignmentError, LayoutError, LayoutSpec, Param
from ._base import check_close_name as _close
from .nvdla import nvdla_layouts

__all__ = ["LAYOUTS", "REQUIRED", "AlignmentError", "LayoutError", "LayoutSpec", "Param", "get_layout"]


def _build() -> dict[str, LayoutSpec]:
    specs: list[LayoutSpec] = []
    specs += nvdla_layouts()
    try:
        from .dmp import dmp_layouts
        specs += dmp_layouts()
    except ImportError:  # pragma: no cover - during bring-up
        pass
    try:
        from .sophgo import sophgo_layouts
        specs += sophgo_layouts()
    except ImportError:  # pragma: no cover
        pass
    out: dict[str, LayoutSpec] = {}
    for s in specs:
        if s.name in out:
            raise RuntimeError(f"duplicate layout name {s.name!r}")
        out[s.name] = s
    return out


LAYOUTS: dict[str, LayoutSpec] = _build()


def get_layout(name: str) -> LayoutSpec:
    """Return the layout called ``name``; unknown names raise LayoutError with close matches."""
    try:
        return LAYOUTS[name]
    except KeyError:
        raise _close(name, sorted(LAYOUTS)) from None
