"""The packaged register maps checked against the user's nvdla/hw checkout.

``nvdla-hil regs check --nvdla-hw PATH`` reads the checkout's own register description
(``spec/manual/NVDLA_*.rdl`` on master for the v2 map, ``cmod/include/arnvdla.uh`` on nvdlav1 for
the v1 map, parsed by :mod:`.rdl`) and lists every difference from the packaged map
(:func:`compare_regmaps`). It sits above the map, the parser and the profiles, which
do not know of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from .profiles import HardwareProfile, load_profile
from .rdl import import_checkout, import_rdl
from .regmap import RegisterMap, load_regmap

__all__ = ["check_against_checkout", "compare_regmaps", "compare_with_rdl"]

T = TypeVar("T")


def compare_with_rdl(regmap: RegisterMap, spec_manual_dir: str | Path) -> list[str]:
    """Differences between ``regmap`` and the RDL in ``spec_manual_dir``; empty = identical."""
    return compare_regmaps(regmap, import_rdl(spec_manual_dir, regmap.generation))


def check_against_checkout(
    nvdla_hw_path: str | Path, profile: str | HardwareProfile = "nv_small"
) -> list[str]:
    """Compare the packaged map of ``profile``'s generation with an nvdla/hw working tree
    (``spec/manual`` on master for v2, ``cmod/include/arnvdla.uh`` on nvdlav1 for v1)."""
    prof = load_profile(profile) if isinstance(profile, str) else profile
    ours = load_regmap(prof.generation)
    return compare_regmaps(ours, import_checkout(nvdla_hw_path, prof.generation))


def _matched(kind: str, where: str, ours: Mapping[str, T], theirs: Mapping[str, T], out: list[str]) -> Iterator[tuple[T, T]]:
    """The pairs of items of both maps by name, in name order; an item only one map has is a line
    of ``out`` (``<where>: <kind> only in upstream|ours``)."""
    for name in sorted(set(ours) | set(theirs)):
        a, b = ours.get(name), theirs.get(name)
        if a is None or b is None:
            out.append(f"{where}{name}: {kind} only in {'upstream' if a is None else 'ours'}")
        else:
            yield a, b


def _attrs(name: str, a: object, b: object, attrs: tuple[str, ...], hexa: tuple[str, ...], out: list[str]) -> None:
    """A line of ``out`` per attribute of ``attrs`` that differs (``hexa`` ones in hex, the rest repr)."""
    for attr in attrs:
        va, vb = getattr(a, attr), getattr(b, attr)
        if va != vb:
            fmt = (lambda v: f"{v:#x}") if attr in hexa else repr
            out.append(f"{name}: {attr} {fmt(va)} != upstream {fmt(vb)}")


def compare_regmaps(ours: RegisterMap, theirs: RegisterMap) -> list[str]:
    """Differences between two maps (block bases, offsets, resets, access, dual, trigger,
    field bits/access/reset/spec/enums), one line each; empty when identical."""
    out: list[str] = []
    for a, b in _matched("block", "", ours.blocks, theirs.blocks, out):
        _attrs(a.name, a, b, ("base",), ("base",), out)
        for ra, rb in _matched("register", f"{a.name}.", a.registers, b.registers, out):
            _attrs(ra.full_name, ra, rb, ("offset", "reset", "access", "dual", "trigger"), ("offset", "reset"), out)
            for fa, fb in _matched("field", f"{ra.full_name}.", ra.fields, rb.fields, out):
                _attrs(fa.full_name, fa, fb, ("msb", "lsb", "access", "reset", "spec_access", "enums"), (), out)
    return out
