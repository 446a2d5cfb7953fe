"""The packaged register maps checked against the user's nvdla/hw checkout.

``nvdla-hil regs check --nvdla-hw PATH`` reads the checkout's own register description
(``spec/manual/NVDLA_*.rdl`` on master for the v2 map, ``cmod/include/arnvdla.uh`` on nvdlav1 for
the v1 map, parsed by :mod:`.rdl`) and lists every difference from the packaged map
(:func:`compare_regmaps`). It sits above the map, the parser and the profiles, which
do not know of it.
"""

from __future__ import annotations

from pathlib import Path

from .profiles import HardwareProfile, load_profile
from .rdl import import_checkout, import_rdl
from .regmap import RegisterMap, load_regmap

__all__ = ["check_against_checkout", "compare_regmaps", "compare_with_rdl"]


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


def compare_regmaps(ours: RegisterMap, theirs: RegisterMap) -> list[str]:
    """Differences between two maps (block bases, offsets, resets, access, dual, trigger,
    field bits/access/reset/spec/enums), one line each; empty when identical."""
    out: list[str] = []
    for bname in sorted(set(ours.blocks) | set(theirs.blocks)):
        a, b = ours.blocks.get(bname), theirs.blocks.get(bname)
        if a is None or b is None:
            out.append(f"{bname}: block only in {'upstream' if a is None else 'ours'}")
            continue
        if a.base != b.base:
            out.append(f"{bname}: base {a.base:#x} != upstream {b.base:#x}")
        for rname in sorted(set(a.registers) | set(b.registers)):
            ra, rb = a.registers.get(rname), b.registers.get(rname)
            if ra is None or rb is None:
                out.append(
                    f"{bname}.{rname}: register only in {'upstream' if ra is None else 'ours'}"
                )
                continue
            for attr in ("offset", "reset", "access", "dual", "trigger"):
                va, vb = getattr(ra, attr), getattr(rb, attr)
                if va != vb:
                    fmt = (lambda v: f"{v:#x}") if attr in ("offset", "reset") else repr
                    out.append(f"{ra.full_name}: {attr} {fmt(va)} != upstream {fmt(vb)}")
            for fname in sorted(set(ra.fields) | set(rb.fields)):
                fa, fb = ra.fields.get(fname), rb.fields.get(fname)
                if fa is None or fb is None:
                    out.append(
                        f"{ra.full_name}.{fname}: field only in "
                        f"{'upstream' if fa is None else 'ours'}"
                    )
                    continue
                for attr in ("msb", "lsb", "access", "reset", "spec_access", "enums"):
                    va, vb = getattr(fa, attr), getattr(fb, attr)
                    if va != vb:
                        out.append(f"{fa.full_name}: {attr} {va!r} != upstream {vb!r}")
    return out
