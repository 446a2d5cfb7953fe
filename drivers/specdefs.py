"""Derive a hardware profile from an nvdla/hw configuration spec (``spec/defs/<config>.spec``).

A ``.spec`` file is a list of C-preprocessor defines, one per configurable choice
(``#define MAC_ATOMIC_C_SIZE_32``, ``#define SDP_LUT_ENABLE``), followed by
``#include "projects.spec"`` which turns them into RTL macros. NVDLA's own flow (``tmake``
with ``tools/bin/epp``) reads the same lines; this reader takes only the ``#define`` lines of
the configuration file itself, which is all a profile needs:

============================  ==========================================================
define                        profile field
============================  ==========================================================
``MEMORY_ATOMIC_SIZE_n``      ``atom_bytes``
``MAC_ATOMIC_C_SIZE_n``       ``mac_atomic_c``
``MAC_ATOMIC_K_SIZE_n``       ``mac_atomic_k``
``CBUF_BANK_NUMBER_n``        ``cbuf_banks``
``CBUF_BANK_WIDTH_n``         ``cbuf_bank_width`` (bytes)
``CBUF_BANK_DEPTH_n``         ``cbuf_bank_depth``
``BATCH_ENABLE`` +            ``max_batch`` (1 when ``BATCH_DISABLE``)
``MAX_BATCH_SIZE_n``
``PRIMARY_MEMIF_WIDTH_n``     ``primary_memif_width`` (bits)
``SECONDARY_MEMIF_WIDTH_n``   ``secondary_memif_width`` (0 when ``SECONDARY_MEMIF_DISABLE``)
``MEM_ADDRESS_WIDTH_n``       ``mem_address_width`` (nvdlav1 specs have none: 64)
``*_THROUGHPUT_n``            ``throughput`` (``x`` = 0: unit absent)
``<FEATURE>_ENABLE/DISABLE``  ``features`` and ``units``
``FEATURE_DATA_TYPE_*``       ``int8``/``int16``/``fp16`` (nvdlav1 specs name none: the v1
                              design has all three, per its hardware architecture document)
============================  ==========================================================

Generation: a spec that names its data types (every nvdla/hw master spec does, and master's
``projects.spec`` stops with ``#error`` without ``FEATURE_DATA_TYPE_INT8``) is a v2 design; one
that does not is the nvdlav1 design (``nv_full``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["SpecError", "parse_spec", "profile_from_spec", "spec_path"]

_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)\b(.*)$")
_MAX_SPEC_BYTES = 1 << 20

# (profile feature, spec switch); the switch is <NAME>_ENABLE / <NAME>_DISABLE.
_SWITCHES: tuple[tuple[str, str], ...] = (
    ("weight_compression", "WEIGHT_COMPRESSION"),
    ("winograd", "WINOGRAD"),
    ("sec_mem", "SECONDARY_MEMIF"),
    ("sdp_lut", "SDP_LUT"),
    ("sdp_bs", "SDP_BS"),
    ("sdp_bn", "SDP_BN"),
    ("sdp_ew", "SDP_EW"),
    ("bdma", "BDMA"),
    ("rubik", "RUBIK"),
    ("pdp", "PDP"),
    ("cdp", "CDP"),
)

_SIZES: tuple[tuple[str, str], ...] = (
    ("atom_bytes", "MEMORY_ATOMIC_SIZE"),
    ("mac_atomic_c", "MAC_ATOMIC_C_SIZE"),
    ("mac_atomic_k", "MAC_ATOMIC_K_SIZE"),
    ("cbuf_banks", "CBUF_BANK_NUMBER"),
    ("cbuf_bank_width", "CBUF_BANK_WIDTH"),
    ("cbuf_bank_depth", "CBUF_BANK_DEPTH"),
    ("primary_memif_width", "PRIMARY_MEMIF_WIDTH"),
)

_THROUGHPUTS: tuple[tuple[str, str], ...] = (
    ("sdp_bs", "SDP_BS_THROUGHPUT"),
    ("sdp_bn", "SDP_BN_THROUGHPUT"),
    ("sdp_ew", "SDP_EW_THROUGHPUT"),
    ("pdp", "PDP_THROUGHPUT"),
    ("cdp", "CDP_THROUGHPUT"),
)


class SpecError(InputError):
    """A configuration spec (an input file of the user's checkout) is missing, unreadable or
    lacks a define a profile needs; a ``ValueError`` as before."""


def spec_path(nvdla_hw: str | Path, config: str) -> Path:
    """``<checkout>/spec/defs/<config>.spec``, or a clear error listing the configurations."""
    defs = Path(nvdla_hw) / "spec" / "defs"
    p = defs / f"{config}.spec"
    if not p.is_file():
        have = sorted(q.stem for q in defs.glob("*.spec") if q.stem != "projects")
        raise SpecError(
            f"{p}: no such configuration spec"
            + (f" (this checkout has: {', '.join(have)})" if have else " (not an nvdla/hw checkout?)")
        )
    return p


def parse_spec(path: str | Path) -> dict[str, tuple[str, int]]:
    """The ``#define`` names of one spec file, each with (value text, line number).

    Only ``//`` and ``/* */`` comments are stripped; ``#include`` lines are not followed
    (``projects.spec`` derives RTL macros, it makes no configuration choice)."""
    p = Path(path)
    try:
        if p.stat().st_size > _MAX_SPEC_BYTES:
            raise SpecError(f"{p}: {p.stat().st_size} bytes, not a configuration spec")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read: {e}") from None
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    out: dict[str, tuple[str, int]] = {}
    for no, line in enumerate(text.splitlines(), 1):
        line = line.split("//", 1)[0]
        m = _DEFINE.match(line)
        if m:
            out[m.group(1)] = (m.group(2).strip(), no)
    return out


def _sized(defs: dict[str, tuple[str, int]], stem: str, where: str, *, required: bool = True) -> int | None:
    """Value of the one ``<stem>_<n>`` define (``_x`` means "not present": None)."""
    hits = [(k, ln) for k, (_, ln) in defs.items() if k.startswith(stem + "_") and k[len(stem) + 1 :].isalnum()]
    hits = [(k, ln) for k, ln in hits if re.fullmatch(r"\d+|x", k[len(stem) + 1 :])]
    if len(hits) > 1:
        lines = ", ".join(f"{k} (line {ln})" for k, ln in hits)
        raise SpecError(f"{where}: {stem}_* defined more than once: {lines}")
    if not hits:
        if required:
            raise SpecError(f"{where}: no {stem}_<n> define")
        return None
    val = hits[0][0][len(stem) + 1 :]
    return None if val == "x" else int(val)


def _switch(defs: dict[str, tuple[str, int]], stem: str, where: str) -> bool:
    en, dis = f"{stem}_ENABLE" in defs, f"{stem}_DISABLE" in defs
    if en == dis:
        raise SpecError(f"{where}: exactly one of {stem}_ENABLE / {stem}_DISABLE must be defined")
    return en


def profile_from_spec(path: str | Path) -> dict[str, Any]:
    """A profile (the mapping stored under ``profiles:`` in ``profiles.yaml``) for one spec."""
    p = Path(path)
    where = str(p)
    defs = parse_spec(p)
    if not defs:
        raise SpecError(f"{where}: no #define lines; not an NVDLA configuration spec")
    types = {t for t in ("INT8", "INT16", "FP16") if f"FEATURE_DATA_TYPE_{t}" in defs}
    generation = "v2" if types else "v1"
    if generation == "v1":
        types = {"INT8", "INT16", "FP16"}
    feats: dict[str, bool] = {f: _switch(defs, s, where) for f, s in _SWITCHES}
    feats.update(int8="INT8" in types, int16="INT16" in types, fp16="FP16" in types)
    prof: dict[str, Any] = {"generation": generation}
    for key, stem in _SIZES:
        prof[key] = _sized(defs, stem, where)
    batch = _switch(defs, "BATCH", where)
    prof["max_batch"] = (_sized(defs, "MAX_BATCH_SIZE", where, required=False) or 1) if batch else 1
    sec = _sized(defs, "SECONDARY_MEMIF_WIDTH", where, required=False)
    prof["secondary_memif_width"] = (sec or 0) if feats["sec_mem"] else 0
    if feats["sec_mem"] and not sec:
        raise SpecError(f"{where}: SECONDARY_MEMIF_ENABLE without a SECONDARY_MEMIF_WIDTH_<n>")
    prof["mem_address_width"] = _sized(defs, "MEM_ADDRESS_WIDTH", where, required=False) or 64
    prof["throughput"] = {k: (_sized(defs, s, where, required=False) or 0) for k, s in _THROUGHPUTS}
    prof["features"] = feats
    prof["units"] = _units(generation, feats)
    prof["source"] = f"spec/defs/{p.name}"
    return prof


def _units(generation: str, f: dict[str, bool]) -> list[str]:
    """CSB blocks a build instantiates (v2: GEC is never instantiated; CFGROM exists)."""
    units = ["CFGROM", "GLB"] if generation == "v2" else ["GLB", "GEC"]
    units.append("MCIF")
    if f["sec_mem"]:
        units.append("CVIF")
    if f["bdma"]:
        units.append("BDMA")
    units += ["CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC", "SDP_RDMA", "SDP"]
    if f["pdp"]:
        units += ["PDP_RDMA", "PDP"]
    if f["cdp"]:
        units += ["CDP_RDMA", "CDP"]
    if f["rubik"]:
        units.append("RBK")
    return units
