"""NVDLA hardware configuration profiles: the six public configurations of nvdla/hw master
(nv_small, nv_small_256, nv_small_256_full, nv_medium_512, nv_medium_1024_full, nv_large) and
nvdlav1's nv_full.

A profile says which units exist, which optional features a build of NVDLA has and the sizes
everything downstream follows (memory atom, MAC atomic C/K, CBUF geometry, memory interfaces).
The shipped values are data (``drivers/data/profiles.yaml``) derived from nvdla/hw
``spec/defs/<name>.spec`` by :mod:`.specdefs`. A user's own configuration is a profile too:
``load_profile("path/to/my.spec")`` derives it from the spec file, and
``load_profile(name, nvdla_hw=checkout)`` derives an unshipped name from the checkout.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import RegisterMapError
from . import yamlstrict
from .regmap import GENERATIONS, RegisterMap, UnitNotPresentError, load_regmap
from .specdefs import SpecError, profile_from_spec

__all__ = [
    "HardwareProfile",
    "FeatureMissingError",
    "ProfileError",
    "FEATURES",
    "FEATURE_TEXT",
    "load_profile",
    "list_profiles",
    "profile_from_spec_file",
]

FEATURES: tuple[str, ...] = (
    "sdp_lut",
    "sdp_ew",
    "sdp_bs",
    "sdp_bn",
    "winograd",
    "weight_compression",
    "rubik",
    "bdma",
    "cdp",
    "pdp",
    "sec_mem",
    "int8",
    "int16",
    "fp16",
)

FEATURE_TEXT = {
    "sdp_lut": "SDP LUT",
    "sdp_ew": "SDP element-wise (EW) stage",
    "sdp_bs": "SDP BS stage",
    "sdp_bn": "SDP BN stage",
    "winograd": "Winograd convolution",
    "weight_compression": "weight compression",
    "rubik": "Rubik unit",
    "bdma": "BDMA unit",
    "cdp": "CDP unit",
    "pdp": "PDP unit",
    "sec_mem": "secondary memory port (CVIF/SRAMIF)",
    "int8": "INT8 precision",
    "int16": "INT16 precision",
    "fp16": "FP16 precision",
}


class ProfileError(RegisterMapError, ValueError):
    """Unknown profile name or malformed profiles file (a register-map/profile error, and a
    ``ValueError`` as before)."""


class FeatureMissingError(UnitNotPresentError):
    """The profile lacks an optional feature, e.g. ``nv_small has no SDP LUT (sdp_lut)``."""


@dataclass(frozen=True)
class HardwareProfile:
    """One NVDLA build. Immutable (its mappings are read-only), so one loaded profile is shared
    by every caller; its restricted register map is computed once per profile object, on first
    use (:attr:`regmap`)."""

    name: str
    generation: str
    atom_bytes: int
    mac_atomic_c: int
    mac_atomic_k: int
    cbuf_banks: int
    cbuf_bank_width: int
    cbuf_bank_depth: int
    max_batch: int
    primary_memif_width: int
    secondary_memif_width: int
    mem_address_width: int
    features: Mapping[str, bool] = field(default_factory=dict, hash=False)
    units: tuple[str, ...] = ()
    throughput: Mapping[str, int] = field(default_factory=dict, hash=False)
    source: str = ""  # the spec file the values come from

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", MappingProxyType(dict(self.features)))
        object.__setattr__(self, "throughput", MappingProxyType(dict(self.throughput)))

    # feature flags as attributes (profile.sdp_lut, ...)
    def __getattr__(self, name: str) -> Any:
        feats = self.__dict__.get("features", {})
        if name in FEATURES:
            return bool(feats.get(name, False))
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def cbuf_bank_bytes(self) -> int:
        return self.cbuf_bank_width * self.cbuf_bank_depth

    @property
    def cbuf_bytes(self) -> int:
        return self.cbuf_banks * self.cbuf_bank_bytes

    def has(self, feature: str) -> bool:
        if feature not in FEATURES:
            close = difflib.get_close_matches(feature, FEATURES, n=2)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ProfileError(f"unknown feature {feature!r}{hint} (known: {', '.join(FEATURES)})")
        return bool(self.features.get(feature, False))

    def require(self, feature: str) -> None:
        if not self.has(feature):
            raise FeatureMissingError(f"{self.name} has no {FEATURE_TEXT[feature]} ({feature})")

    def has_unit(self, block: str) -> bool:
        b = block[6:] if block.upper().startswith("NVDLA_") else block
        return b in self.units

    def require_unit(self, block: str) -> None:
        if not self.has_unit(block):
            raise UnitNotPresentError(f"{self.name} has no {block} unit")

    @functools.cached_property
    def regmap(self) -> RegisterMap:
        """The register map of this profile's generation, restricted to its units (absent units
        raise :class:`UnitNotPresentError`). Derived from immutable data, kept on the profile
        object itself (no module-level cache)."""
        return load_regmap(self.generation).restricted_to(self)

    @property
    def cbuf_entry_bytes(self) -> int:
        """One CBUF entry in bytes, the unit of ``D_ENTRY_PER_SLICE``: a bank row on the v2
        designs (``cbuf_bank_width``, which equals MAC atomic C at INT8 in every public .spec);
        128 bytes on nvdlav1's nv_full (its C model's ``CBUF_ENTRY_SIZE``, four 32-byte atoms,
        at INT8 and INT16 alike)."""
        return 128 if self.generation == "v1" else self.cbuf_bank_width


_INT_KEYS = (
    "atom_bytes",
    "mac_atomic_c",
    "mac_atomic_k",
    "cbuf_banks",
    "cbuf_bank_width",
    "cbuf_bank_depth",
    "max_batch",
    "primary_memif_width",
    "secondary_memif_width",
    "mem_address_width",
)


def _profile_from(name: str, d: Mapping[str, Any], file: str) -> HardwareProfile:
    where = f"{file}: profile {name}"
    if not isinstance(d, Mapping):
        raise ProfileError(f"{where}: expected a mapping")
    gen = d.get("generation")
    if gen not in GENERATIONS:
        raise ProfileError(f"{where}: generation {gen!r} not in {GENERATIONS}")
    ints: dict[str, int] = {}
    for k in _INT_KEYS:
        v = d.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ProfileError(f"{where}: {k} must be a non-negative int, got {v!r}")
        ints[k] = v
    feats = d.get("features") or {}
    unknown = set(feats) - set(FEATURES)
    missing = set(FEATURES) - set(feats)
    if unknown or missing or not all(isinstance(v, bool) for v in feats.values()):
        raise ProfileError(
            f"{where}: features must give true/false for exactly {', '.join(FEATURES)}"
            f" (unknown {sorted(unknown)}, missing {sorted(missing)})"
        )
    units = d.get("units") or []
    if not isinstance(units, list) or not all(isinstance(u, str) for u in units):
        raise ProfileError(f"{where}: units must be a list of block names")
    thr = d.get("throughput") or {}
    if not isinstance(thr, Mapping) or not all(isinstance(v, int) for v in thr.values()):
        raise ProfileError(f"{where}: throughput must map unit names to ints")
    unknown_keys = set(d) - {"generation", "features", "units", "throughput", "source", *_INT_KEYS}
    if unknown_keys:
        raise ProfileError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown_keys)))}")
    for k in ("atom_bytes", "mac_atomic_c", "mac_atomic_k", "cbuf_banks", "cbuf_bank_width",
              "cbuf_bank_depth", "max_batch", "primary_memif_width"):  # fmt: skip
        if ints[k] == 0:
            raise ProfileError(f"{where}: {k} must be positive")
    if ints["atom_bytes"] & (ints["atom_bytes"] - 1):
        raise ProfileError(f"{where}: atom_bytes {ints['atom_bytes']} is not a power of two")
    if not 32 <= ints["mem_address_width"] <= 64:
        raise ProfileError(f"{where}: mem_address_width must be 32..64")
    return HardwareProfile(
        name=name,
        generation=gen,
        features=dict(feats),
        units=tuple(units),
        throughput=dict(thr),
        source=str(d.get("source", "")),
        **ints,
    )


@functools.lru_cache(maxsize=1)
def _all_profiles() -> Mapping[str, HardwareProfile]:
    """The shipped profiles, parsed once: a pure loader of package data whose result is
    immutable (a read-only mapping of frozen profiles), so caching it shares no mutable state."""
    file = "profiles.yaml"
    text = resources.files(__package__).joinpath("data", file).read_text(encoding="utf-8")
    data = yamlstrict.load(text, file)
    if not isinstance(data, Mapping) or data.get("format") != "nvdla-hil-profiles/1":
        raise ProfileError(f"{file}: not a nvdla-hil-profiles/1 file")
    return MappingProxyType({n: _profile_from(n, d, file) for n, d in data["profiles"].items()})


def list_profiles() -> list[str]:
    return list(_all_profiles())


def profile_from_spec_file(path: str | Path, name: str | None = None) -> HardwareProfile:
    """A profile derived from an nvdla/hw configuration spec (``spec/defs/<config>.spec``)."""
    p = Path(path)
    try:
        d = profile_from_spec(p)
    except SpecError as e:
        raise ProfileError(str(e)) from None
    return _profile_from(name or p.stem, d, str(p))


def load_profile(name: str | HardwareProfile, *, nvdla_hw: str | Path | None = None) -> HardwareProfile:
    """The profile called ``name``: a shipped name, a path to a ``.spec`` file, or (with
    ``nvdla_hw``) a configuration of that checkout that is not shipped. Unknown names list
    the known ones."""
    if isinstance(name, HardwareProfile):
        return name
    if name.endswith(".spec"):
        return profile_from_spec_file(name)
    profs = _all_profiles()
    if name in profs:
        return profs[name]
    if nvdla_hw is not None:
        cand = Path(nvdla_hw) / "spec" / "defs" / f"{name}.spec"
        if cand.is_file():
            return profile_from_spec_file(cand, name)
    close = difflib.get_close_matches(name, list(profs), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise ProfileError(
        f"unknown hardware profile {name!r}{hint} (known: {', '.join(profs)}; or a path to a "
        f"spec/defs/<config>.spec file)"
    )
