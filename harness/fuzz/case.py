"""One fuzz case: drawn from its own stream under the constraints, its golden computed on the
reference model (which feeds coverage), written as a packed vector."""

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
from ..vectors.load import load_case
from ..vectors.run import execute_layer
from ..vectors.write import write_case
from .draw import Constraints, Sampler
from .registry import GENERATORS


class EventCapture:
    def __init__(self) -> None:
        self.events: dict[str, list[dict[str, Any]]] = {}

    def event(self, name: str, **data: Any) -> None:
        if name != "layer":
            self.events.setdefault(name, []).append({k: (np.array(v) if isinstance(v, np.ndarray) else v)
                                                     for k, v in data.items()})


def case_name(unit: str, seed: int, index: int) -> str:
    return f"fuzz-{unit}-s{seed}-{index:05d}"


def provenance(c: Constraints, seed: int, index: int, semantics: str) -> dict[str, Any]:
    note = f"replay: nvdla-hil fuzz --unit {c.unit} --profile {c.profile.name} --seed {seed} --first {index} --count 1"
    files = [s for s in c.sources[1:] if s != "--set"]
    if files:
        note += "".join(f" --constraints {f}" for f in files)
    if c.overrides:
        note += "".join(f" --set {shlex.quote(o)}" for o in c.overrides)  # a shell-ready replay line
    return {"generator": "nvdla-hil fuzz", "suite": f"fuzz:{c.unit}", "seed": seed, "index": index,
            "model_version": model_version(), "semantics": semantics, "note": note}


def run_reference(d: Draft, name: str, prov: dict[str, Any], work: Path, semantics: str, sink: Any):
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


def generate(c: Constraints, seed: int, index: int, work: Path, *, semantics: str = "rtl",
             coverage: covmod.Coverage | None = None, dut: str = "model") -> Path:  # fmt: skip
    """Draw case ``index`` of ``seed`` under ``c``, compute its golden on the reference model
    (feeding ``coverage``) and write the packed case into ``work/<name>``; returns the folder.
    ``dut``: the target kind the case is for (``Sampler.dut``): a unit steers clear of what that
    target is known not to run (same draws, so a case of one seed and index differs only there)."""
    rng = rng_for(seed, index)
    s = Sampler(c, rng, dut=dut)
    name = case_name(c.unit, seed, index)
    prov = provenance(c, seed, index, semantics)
    folder = Path(work) / name

    def capture(d: Draft) -> dict[str, list[dict[str, Any]]]:
        cap = EventCapture()
        run_reference(d, name, prov, folder, semantics, cap)
        return cap.events

    d = GENERATORS[c.unit](s, c.profile, capture)
    golden = run_reference(d, name, prov, folder, semantics, coverage)
    man, blobs = manifest_layer(name, to_field_units(d), prov, golden)
    write_case(folder, man, blobs)
    load_case(folder)
    return folder


