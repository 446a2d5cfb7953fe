"""Test-vector generator: random cases, goldens from the reference model or from an oracle.

Every case is drawn from its own stream ``numpy.random.Generator(PCG64(seed).jumped(index))``
so case ``index`` of ``(suite, seed)`` can be regenerated alone, byte for byte, from the
``provenance`` of its manifest (``nvdla-hil vectors gen --from-manifest``). Goldens (output
images and statistics) are first what the virtual NVDLA (:class:`ModelTarget`, reference model)
produces for the case (``golden_source`` kind ``model``: self-consistency only); layout cases pack
with the layout registry. :func:`regolden` then re-makes a layer case's goldens on an oracle
(NVDLA's RTL under Verilator or its C model): the oracle's images and counters, the oracle named
in ``golden_source``, every difference from the old goldens reported.

Suites (``SUITES``):

=================  =============================================================================
``sdp_lut``        SDP EW-stage LUT (nv_small_256_full): LE exponent/linear + LO linear, inputs
                   spread over both tables and both out-of-range sides, all 8 priority combos
``cdp_lut``        CDP (LRN) LUT on nv_small: random LUT over the square-sum range, convertors
``sdp_cvt``        SDP output convertor / saturation (int8 and int16 outputs), nv_small
``sdp_bsbn``       SDP BS/BN ALU/MUL/PReLU/ReLU with register and memory operands, nv_small
``sdp_int16``      SDP on nv_full with INT16: 16->16, 16->8 (PROC INT8) and 8->16; BS/BN with
                   16-bit register/memory operands, PReLU/ReLU, output convertor at the edges
``pdp_int16``      PDP INT16 (nv_full): max/min/average, padding values, reciprocals
``cdp_int16``      CDP LRN INT16 (nv_full): 17-bit input convertor, 37-bit square sums, LUT,
                   INT16 output convertor and saturation
``layout_nvdla``   NVDLA feature / weight / pixel layouts: array + packed image
``layout_dmp``     DMP dv-sdk layouts
``layout_sophgo``  Sophgo TPU local-memory layouts
=================  =============================================================================

The suites' generators live by unit (:mod:`.suite_sdp`, :mod:`.suite_cdp_pdp`, :mod:`.suite_layout`)
and build their layers with the register writers of :mod:`.layer`, the same ones the fuzz units use
(SDP memory to memory and its operand DMAs, CDP LRN); :func:`regolden` is :mod:`.regolden`'s.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .format import FORMAT, Case, VectorError
from .layer import Draft, manifest_layer, model_version, rng_for
from .load import load_case
from .regolden import Regolden, regolden
from .run import execute_layer
from .suite_cdp_pdp import gen_cdp_int16, gen_cdp_lut, gen_pdp_int16
from .suite_layout import gen_layout_dmp, gen_layout_nvdla, gen_layout_sophgo
from .suite_sdp import gen_sdp_bsbn, gen_sdp_cvt, gen_sdp_int16, gen_sdp_lut
from .surface import pack_surface, unpack_surface
from .write import write_case
from ...semantics import Semantics

__all__ = [
    "SUITES",
    "Draft",
    "Regolden",
    "case_name",
    "generate_case",
    "generate_suite",
    "model_version",
    "regenerate",
    "regolden",
]


def case_name(suite: str, seed: int, index: int) -> str:
    return f"{suite}-s{seed}-{index:03d}"


SUITES: dict[str, Callable[[np.random.Generator, int], Draft]] = {
    "sdp_lut": gen_sdp_lut,
    "cdp_lut": gen_cdp_lut,
    "sdp_cvt": gen_sdp_cvt,
    "sdp_bsbn": gen_sdp_bsbn,
    "sdp_int16": gen_sdp_int16,
    "pdp_int16": gen_pdp_int16,
    "cdp_int16": gen_cdp_int16,
    "layout_nvdla": gen_layout_nvdla,
    "layout_dmp": gen_layout_dmp,
    "layout_sophgo": gen_layout_sophgo,
}


# ---- building and writing -------------------------------------------------------------------------


def _provenance(suite: str, seed: int, index: int, semantics: Semantics) -> dict[str, Any]:
    return {"generator": "nvdla-hil vectors gen", "suite": suite, "seed": seed, "index": index,
            "model_version": model_version(), "semantics": semantics}



def _manifest_layout(name: str, d: Draft, prov: dict[str, Any]) -> tuple[dict, dict]:
    assert d.layout is not None and d.array is not None
    packed = pack_surface(d.layout["name"], d.array, d.layout["params"])
    lay = {"name": d.layout["name"], "params": dict(d.layout["params"]), "dtype": d.layout["dtype"],
           "shape": list(d.layout["shape"]), "data": "array.bin", "packed": "packed.bin"}
    man = {"format": FORMAT, "name": name, "kind": "layout", "description": d.description, "family": d.family,
           "layout": lay, "provenance": prov}
    arr = np.ascontiguousarray(d.array)
    return man, {"array.bin": arr.astype(arr.dtype.newbyteorder("<")).tobytes(), "packed.bin": packed.tobytes()}


def generate_case(suite: str, seed: int, index: int, out: str | Path, *, semantics: Semantics = "rtl") -> Path:
    """Generate case ``index`` of ``suite`` with ``seed`` into ``out/<case name>/``; returns the folder."""
    try:
        gen = SUITES[suite]
    except KeyError:
        raise ValueError(f"unknown suite {suite!r}; suites: {', '.join(SUITES)}") from None
    d = gen(rng_for(seed, index), index)
    name = case_name(suite, seed, index)
    prov = _provenance(suite, seed, index, semantics)
    final = Path(out) / name
    with tempfile.TemporaryDirectory(prefix="nvdla-vec-") as tmp:
        work = Path(tmp) / name
        if d.layout is not None:
            man, blobs = _manifest_layout(name, d, prov)
        else:
            man, blobs = manifest_layer(name, d, prov, None)
            golden = _golden_for(d, name, prov, work, semantics)
            man, blobs = manifest_layer(name, d, prov, golden)
        write_case(work, man, blobs)
        load_case(work)  # the final case must pass the loader
        if final.exists():
            shutil.rmtree(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(work, final)
    return final


def _golden_for(d: Draft, name: str, prov: dict[str, Any], work: Path, semantics: Semantics) -> dict[str, Any]:
    """Run the draft on the model; with ``d.tune`` try every shift and keep the most informative."""
    shifts = list(d.tune[1]) if d.tune else [None]
    best: tuple[int, int, dict[str, Any]] | None = None
    for sh in shifts:
        if sh is not None:
            d.convertors[d.tune[0]]["shift"] = sh  # type: ignore[index]  # tune names a convertor dict
        man, blobs = manifest_layer(name, d, prov, None)
        write_case(work, man, blobs)
        case = load_case(work)
        golden = _golden(case, semantics)
        shutil.rmtree(work)
        s0 = case.outputs[0]
        vals = unpack_surface(s0.layout, golden["outputs"][s0.name], s0.shape, s0.dtype, s0.params)
        score = len(np.unique(vals))
        if best is None or score > best[0]:
            best = (score, -1 if sh is None else sh, golden)
    assert best is not None
    if d.tune:
        d.convertors[d.tune[0]]["shift"] = best[1]
    return best[2]


def _golden(case: Case, semantics: Semantics) -> dict[str, Any]:
    from ..targets.model import ModelTarget

    with ModelTarget(case.profile or "nv_small", semantics=semantics) as t:
        rb = execute_layer(case, t)
    st = None
    if rb.statistics is not None:
        st = {k: int(v) for k, v in rb.statistics.counters().items()}
    return {"outputs": rb.outputs, "statistics": st, "statuses": dict(rb.statuses)}


def generate_suite(suite: str, seed: int, count: int, out: str | Path, *, semantics: Semantics = "rtl") -> list[Path]:
    return [generate_case(suite, seed, i, out, semantics=semantics) for i in range(count)]


def regenerate(manifest: str | Path, out: str | Path) -> Path:
    """Regenerate one case from its manifest's provenance (suite, seed, index, semantics)."""
    case = load_case(manifest)
    p = case.provenance
    missing = [k for k in ("suite", "seed", "index") if p.get(k) is None]
    if missing:
        raise VectorError(case.path, "provenance", f"cannot regenerate: missing {', '.join(missing)}")
    return generate_case(p["suite"], int(p["seed"]), int(p["index"]), out, semantics=p.get("semantics") or "rtl")



