"""The packaged register maps checked against the user's nvdla/hw checkout.

``nvdla-hil regs check --nvdla-hw PATH`` reads the checkout's own register description
(``spec/manual/NVDLA_*.rdl`` on master for the v2 map, ``cmod/include/arnvdla.uh`` on nvdlav1 for
the v1 map, parsed by :mod:`.rdl`) and lists every difference from the packaged map
(:func:`~.regmap.compare_regmaps`). It sits above the map, the parser and the profiles, which
do not know of it.
"""

from __future__ import annotations

from pathlib import Path

from .profiles import HardwareProfile, load_profile
from .rdl import import_checkout, import_rdl
from .regmap import RegisterMap, compare_regmaps, load_regmap

__all__ = ["compare_with_rdl", "check_against_checkout"]


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
