"""One fuzz case: drawn from its own stream under the constraints, its golden computed on the
reference model (which feeds coverage), written as a packed vector.

A draw whose golden cannot tell a right layer from one that computed nothing (:func:`degenerate`:
every output one value, all poison or all at the type's extremes, and no status or statistic set)
is drawn again from the case's next stream (``rng_for(seed, index, draw)``), keeping its corners
(:attr:`.draw.Sampler.corners`: the fields its ``extremes`` rate put at an end of their range, such
as a shift past every bit) and drawing everything else, at most :data:`MAX_DRAWS` - 1 times: the
draw kept says so in its provenance (``draw``, ``redrawn``). When every draw is degenerate, the
corner is one where a single value is the layer's nature, and the first draw is kept as drawn
(its pass counted weak). So every corner is still drawn at its rate, and the coverage bins with
it. ``informative=False`` (``fuzz --allow-degenerate``) keeps every first draw."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import coverage as covmod
from ..vectors.layer import (
    Draft,
    manifest_layer,
    model_version,
    rng_for,
    to_field_units,
)
from ..vectors.load import Case, golden_statuses, load_case
from ..vectors.run import execute_layer, output_information
from ..vectors.write import write_case
from .draw import Constraints, Sampler
from .registry import GENERATORS
from ...semantics import Semantics


class EventCapture:
    def __init__(self) -> None:
        self.events: dict[str, list[dict[str, Any]]] = {}

    def event(self, name: str, **data: Any) -> None:
        if name != "layer":
            self.events.setdefault(name, []).append({k: (np.array(v) if isinstance(v, np.ndarray) else v)
                                                     for k, v in data.items()})


def case_name(unit: str, seed: int, index: int) -> str:
    return f"fuzz-{unit}-s{seed}-{index:05d}"


def provenance(c: Constraints, seed: int, index: int, semantics: Semantics, informative: bool = True) -> dict[str, Any]:
    note = f"replay: nvdla-hil fuzz --unit {c.unit} --profile {c.profile.name} --seed {seed} --first {index} --count 1"
    if not informative:
        note += " --allow-degenerate"
    files = [s for s in c.sources[1:] if s != "--set"]
    if files:
        note += "".join(f" --constraints {f}" for f in files)
    if c.overrides:
        note += "".join(f" --set {shlex.quote(o)}" for o in c.overrides)  # a shell-ready replay line
    return {"generator": "nvdla-hil fuzz", "suite": f"fuzz:{c.unit}", "seed": seed, "index": index,
            "model_version": model_version(), "semantics": semantics, "note": note}


def run_reference(d: Draft, name: str, prov: dict[str, Any], work: Path, semantics: Semantics, sink: Any):
    from ..targets.model import ModelTarget

    man, blobs = manifest_layer(name, to_field_units(d), prov, None)
    if work.exists():
        shutil.rmtree(work)
    write_case(work, man, blobs)
    case = load_case(work)
    with ModelTarget(case.profile or "nv_small", semantics=semantics, coverage=sink if sink is not None else False) as t:
        rb = execute_layer(case, t)
    shutil.rmtree(work)
    st = {k: int(v) for k, v in rb.statistics.counters().items()} if rb.statistics is not None else None
    return {"outputs": rb.outputs, "statistics": st, "statuses": dict(rb.statuses)}


#: draws of one case at most: the first, and redraws while the golden says nothing (:func:`degenerate`)
MAX_DRAWS = 4


def degenerate(case: Case) -> str:
    """Why ``case``'s golden cannot tell a right layer from one that computed nothing, "" when it
    can: every output (of more than one element) is one value, all poison or all at its type's
    extremes, and no status register or statistics counter of the golden is non-zero."""
    if any((golden_statuses(case) or {}).values()) or any((case.statistics or {}).values()):
        return ""
    why = []
    for s in case.outputs:
        info = output_information(s)
        if info is None or info.elements <= 1:
            return ""
        if not (info.single_value or info.all_poison or info.fully_saturated):
            return ""
        why.append(f"{s.name}: {info.describe()}")
    return "; ".join(why)


def sampler_for(c: Constraints, seed: int, index: int, draw: int = 0, dut: str = "model") -> Sampler:
    """The field values of draw ``draw`` of case ``index`` of ``seed`` (the Sampler draws them
    first from the draw's stream): a redraw keeps the first draw's corners."""
    first = Sampler(c, rng_for(seed, index), dut=dut)
    if not draw:
        return first
    return Sampler(c, rng_for(seed, index, draw), dut=dut, pinned={k: first.v[k] for k in first.corners})


def generate(c: Constraints, seed: int, index: int, work: Path, *, semantics: Semantics = "rtl",
             coverage: covmod.Coverage | None = None, dut: str = "model", informative: bool = True) -> Path:  # fmt: skip
    """Draw case ``index`` of ``seed`` under ``c``, compute its golden on the reference model
    (feeding ``coverage`` with the draw kept) and write the packed case into ``work/<name>``;
    returns the folder. ``dut``: the target kind the case is for (``Sampler.dut``): a unit steers
    clear of what that target is known not to run (same draws, so a case of one seed and index
    differs only there). ``informative``: draw again, corners kept, while the golden is
    :func:`degenerate`."""
    name = case_name(c.unit, seed, index)
    folder = Path(work) / name
    first = folder.with_name(name + ".draw0")  # the first draw, kept aside while redraws are tried
    if first.exists():
        shutil.rmtree(first)
    rejected: list[str] = []
    kept_cov = covmod.Coverage()
    for draw in range(MAX_DRAWS if informative else 1):
        prov = provenance(c, seed, index, semantics, informative)
        if draw:
            prov |= {"draw": draw, "redrawn": " | ".join(f"draw {k}: {w}" for k, w in enumerate(rejected))}
        s = sampler_for(c, seed, index, draw, dut)

        def capture(d: Draft, prov: dict[str, Any] = prov) -> dict[str, list[dict[str, Any]]]:
            cap = EventCapture()
            run_reference(d, name, prov, folder, semantics, cap)
            return cap.events

        d = GENERATORS[c.unit](s, c.profile, capture)
        cov = covmod.Coverage()
        golden = run_reference(d, name, prov, folder, semantics, cov if coverage is not None else None)
        man, blobs = manifest_layer(name, to_field_units(d), prov, golden)
        write_case(folder, man, blobs)
        why = degenerate(load_case(folder)) if informative else ""
        if not why:
            kept_cov = cov
            break
        rejected.append(why)
        if draw:
            shutil.rmtree(folder)
        else:
            folder.rename(first)
            kept_cov = cov
        if draw == MAX_DRAWS - 1:  # one value is the nature of the corner: the first draw, as drawn
            first.rename(folder)
    if first.exists():
        shutil.rmtree(first)
    if coverage is not None:
        coverage.merge(kept_cov)
    return folder
