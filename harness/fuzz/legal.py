"""What is legal for a fuzz unit: the field kinds of a unit's schema (:class:`IntF`,
:class:`EnumF`), the profile features a value or a unit needs (:func:`lacks`, :func:`allowed`),
the errors of a bad constraint, and :class:`UnitSpec`, what a unit declares."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import InputError
from ...drivers.profiles import (
    FEATURE_TEXT,
    HardwareProfile,
    list_profiles,
    load_profile,
)


class ConstraintError(InputError):
    """A bad constraint file or ``--set``; the message names the file, line and key."""


# ---- schema: what is legal --------------------------------------------------------------------------


@dataclass(frozen=True)
class IntF:
    lo: int
    hi: int
    default: int = 0
    doc: str = ""


@dataclass(frozen=True)
class EnumF:
    values: tuple[Any, ...]
    default: Any = None
    doc: str = ""
    #: value -> the profile feature (or tuple of features, all needed) it needs; a value whose
    #: feature the profile lacks is dropped from every draw on that profile (:func:`allowed`)
    needs: Mapping[Any, str | tuple[str, ...]] = field(default_factory=dict)

    def dflt(self) -> Any:
        return self.values[0] if self.default is None else self.default


# ---- what a profile has: essential and optional features ------------------------------------------------
#
# One mechanism for every unit. A unit declares
#   * its ESSENTIAL features (``UnitSpec.needs``): a profile without one of them refuses
#     the unit at once (:class:`UnitUnavailable`, a ConstraintError: exit 2, one line naming the
#     unit, the profile and the feature);
#   * its OPTIONAL features per value (``EnumF(needs={value: feature})``): on a profile without the
#     feature the value is dropped from the draw (a constraint file's choices narrow to what the
#     profile has; a fixed ``value`` or ``--set`` that needs it is an error naming the feature).
# Generators that pick among hardware options in code (not from a schema field) narrow with
# :func:`allowed` / :meth:`Sampler.has` the same way.


def lacks(prof: HardwareProfile, needs: str | Iterable[str] | None) -> list[str]:
    """The features of ``needs`` (one name, several, or None) that ``prof`` lacks, in order."""
    if not needs:
        return []
    feats = (needs,) if isinstance(needs, str) else tuple(needs)
    return [f for f in feats if not prof.has(f)]


def allowed(leg: EnumF, prof: HardwareProfile, values: Iterable[Any] | None = None) -> tuple[Any, ...]:
    """The values of ``leg`` (or of ``values``, a subset of them) that ``prof`` has every
    feature for (``leg.needs``): what a generator may draw on this profile. Example, in a
    generator: ``fmt = s.rng.choice(allowed(SCHEMA["format"], prof))``."""
    return tuple(v for v in (leg.values if values is None else values) if not lacks(prof, leg.needs.get(v)))


def feature_text(f: str) -> str:
    """A profile feature in words, with its name: ``the SDP LUT (sdp_lut)``."""
    return f"{FEATURE_TEXT.get(f, f)} ({f})"


class UnitUnavailable(ConstraintError):
    """A fuzz unit whose essential feature the profile lacks; the message is one line naming the
    unit, the profile, the missing feature(s) and the shipped profiles that have them."""


@dataclass(frozen=True)
class UnitSpec:
    """A fuzz unit: its legal space (``schema``: :class:`IntF` / :class:`EnumF` per field, in
    drawing order), the profile features it cannot run without (``needs``: the unit is refused on
    a profile lacking one, :func:`refusal`), the coverage groups it aims at and its generator
    (``generator(sampler, profile, capture) -> Draft``). Optional features narrow the draw
    instead: ``EnumF(..., needs={value: feature})`` drops the value on a profile without the
    feature. The unit's shipped constraints are ``constraints/<name>.yaml``."""

    name: str
    schema: Mapping[str, Any]
    needs: tuple[str, ...]
    groups: tuple[str, ...]
    generator: Callable[..., Any]

    def __post_init__(self) -> None:  # every unit places its surfaces (PLACE_MIB), last in drawing order
        object.__setattr__(self, "schema", {**self.schema, "place_mib": PLACE_MIB})


def refusal(spec: UnitSpec, prof: HardwareProfile) -> str | None:
    """Why the unit cannot run on ``prof`` (one line, naming the shipped profiles that could), or
    None when the profile has every feature the unit declares essential."""
    missing = lacks(prof, spec.needs)
    if not missing:
        return None
    others = [n for n in list_profiles() if not lacks(load_profile(n), missing)]
    return (f"fuzz unit {spec.name} needs the {', '.join(map(feature_text, missing))}, which profile {prof.name} lacks"
            + (f" (profiles with it: {', '.join(others)})" if others else ""))


#: a surface's port (``pri`` / ``sec``: the secondary port only on profiles that have one)
PORT = EnumF(("pri", "sec"), "pri", needs={"sec": "sec_mem"})
ONOFF = EnumF((0, 1), 0)

#: MiB above 0x80000000 where a case's surfaces start (harness/vectors/layer.py ``Mem``): 0 unless a
#: constraint draws it. No shipped constraint file does (every seed's draws stay as they were); a
#: coverage-steered run draws it over the whole range when its baseline never toggled the address
#: bits above the first MiBs (harness/fuzz/steer.py ``hole_constraints``). Up to 1920: the largest
#: case's surfaces still end below 4 GiB, inside every shipped profile's address space (nv_small's is 32 bits).
PLACE_MIB = IntF(0, 1920, 0)

#: schema fragments the SDP and CDP units share: the cube and its surfaces, the output convertor,
#: the LUT, memory operands
CUBE = {
    "shape": EnumF(("cube", "1x1xC", "single_line")),
    "width": IntF(1, 8192, 1), "height": IntF(1, 8192, 1), "channels": IntF(1, 8192, 1),
    "gaps": EnumF((0, 1), 0), "src_port": PORT, "dst_port": PORT,
    "data": EnumF(("uniform", "edges")),
}
CVT = {"cvt": EnumF(("fit", "saturate", "random")), "cvt_shift": IntF(0, 63, 0)}
LUT = {
    "le_function": EnumF(("exponent", "linear")),
    "table": EnumF(("random_walk", "monotone", "random", "extreme")),
    "layout": EnumF(("overlap", "disjoint", "random")),
    "lo_span_pct": IntF(1, 100, 30), "le_span_pct": IntF(1, 100, 30),
    "le_exp_offset": EnumF(("top_in_range", "low", "random"), "low"),
    "le_index_offset": IntF(-128, 127, 0),
    "uflow_priority": EnumF(("LE", "LO")), "oflow_priority": EnumF(("LE", "LO")), "hybrid_priority": EnumF(("LE", "LO")),
    "slope_scale": IntF(-32768, 32767, 0), "slope_shift": IntF(-16, 15, 0),
}
OPS = {
    "op_port": PORT, "op_mode": EnumF(("channel", "element")),
}
