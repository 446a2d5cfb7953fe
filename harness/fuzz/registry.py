"""The fuzz units, by name: built once, when this module is first imported, from the explicit list
below of every unit module's :class:`~.legal.UnitSpec` (in the order ``nvdla-hil fuzz --help`` and
the error messages list them); nothing registers itself at import. A new unit is a module of
``fuzz/units/`` defining its spec, its ``constraints/<name>.yaml`` and a line here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...drivers.profiles import HardwareProfile
from .draw import Constraints, constraints_for
from .legal import ConstraintError, UnitSpec, refusal
from .units.cdp import CDP_INT16, CDP_LRN
from .units.conv import CONV
from .units.conv_special import CONV_COMPRESSED, CONV_IMAGE, CONV_WINOGRAD
from .units.pdp_cdp import CDP_FP16, PDP, SDP_PDP
from .units.sdp import SDP_BSBN, SDP_CVT, SDP_EW, SDP_LUT
from .units.sdp_fp16 import SDP_FP16

__all__ = ["GENERATORS", "SCHEMAS", "SPECS", "UNITS", "UNIT_GROUPS", "UNIT_NEEDS", "load_constraints", "unit_refusal",
           "unit_spec"]

#: every unit, by name (read-only)
SPECS: Mapping[str, UnitSpec] = MappingProxyType({u.name: u for u in (
    SDP_LUT, SDP_BSBN, SDP_EW, SDP_CVT, CDP_LRN, CONV, CONV_WINOGRAD, CONV_IMAGE, CONV_COMPRESSED, SDP_FP16, PDP,
    CDP_FP16, SDP_PDP, CDP_INT16)})
UNITS: tuple[str, ...] = tuple(SPECS)
#: per unit: its legal space, the profile features it needs, the coverage groups it aims at, its generator
SCHEMAS: Mapping[str, Mapping[str, Any]] = MappingProxyType({n: u.schema for n, u in SPECS.items()})
UNIT_NEEDS: Mapping[str, tuple[str, ...]] = MappingProxyType({n: u.needs for n, u in SPECS.items()})
UNIT_GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType({n: u.groups for n, u in SPECS.items()})
GENERATORS: Mapping[str, Callable[..., Any]] = MappingProxyType({n: u.generator for n, u in SPECS.items()})


def unit_spec(unit: str) -> UnitSpec:
    """The unit named ``unit``; an unknown name is a :class:`ConstraintError` listing the units."""
    try:
        return SPECS[unit]
    except KeyError:
        raise ConstraintError(f"unknown unit {unit!r}; units: {', '.join(SPECS)}") from None


def load_constraints(unit: str, *, profile: str | None = None, files: Iterable[str | Path] = (),
                     sets: Iterable[str] = ()) -> Constraints:  # fmt: skip
    """The shipped ``constraints/<unit>.yaml``, then each file, then each ``--set``."""
    return constraints_for(unit_spec(unit), profile=profile, files=files, sets=sets)


def unit_refusal(unit: str, prof: HardwareProfile) -> str | None:
    """Why ``unit`` cannot run on ``prof`` (one line), or None when the profile has every
    feature the unit declares essential (and for a name that is no unit)."""
    return refusal(SPECS[unit], prof) if unit in SPECS else None
