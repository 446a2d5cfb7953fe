"""Goldens from an oracle: a layer case run on NVDLA's RTL or C model, its output images and
counters written as the case's goldens, ``golden_source`` naming the oracle, every difference from
the old goldens reported (``nvdla-hil vectors regolden``)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from .format import Case, Hex
from .load import load_case
from .run import compare_surface, execute_layer
from .write import golden_source_of, write_case


@dataclass
class Regolden:
    """What :func:`regolden` did to one case: the oracle's ``golden_source``, where the old golden
    (e.g. the reference model's) disagreed with the oracle, and the seconds the oracle took."""

    name: str
    path: Path
    golden_source: dict[str, Any] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""


def _oracle_statistics(case: Case, stats: Any, kind: str) -> dict[str, int] | None:
    """The oracle's counters for the counters the case checks; on the RTL, not the counters it
    counts in clock cycles rather than elements (``precision.RTL_INEXACT``, semantics doc 13)."""
    from ...drivers.precision import golden_counters

    if case.statistics is None or stats is None:
        return None
    return golden_counters(stats, kind, case.statistics)


class _HexLoader(yaml.SafeLoader):
    """A safe loader that keeps integers written in hexadecimal as :class:`Hex`, so a manifest
    read and written back keeps its bytes (addresses stay ``0x80000000``)."""


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    v = yaml.SafeLoader.construct_yaml_int(loader, node)
    return Hex(v) if str(node.value).lower().lstrip("+-").startswith("0x") else v


_HexLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def regolden(folder: str | Path, target: Any, out: str | Path | None = None) -> Regolden:
    """Run the layer case in ``folder`` on the open ``target`` (an oracle: NVDLA's RTL or C model)
    and rewrite its goldens (output images, statistics counters) with what the oracle computed,
    its ``golden_source`` derived from the target; registers, inputs and the rest of the case are
    kept byte for byte. A target's error leaves the case as it was (``error`` says why). The old
    goldens are compared with the oracle's first: every difference is listed (a model bug when the
    old goldens were the model's). Written in place unless ``out`` names another folder."""
    import time

    from ...drivers import yamlstrict
    from ...drivers.precision import Statistics, compare_statistics
    from ..targets import layer_timeout

    case = load_case(folder)
    res = Regolden(case.name, case.folder)
    if case.kind != "layer":
        res.error = "a layout case has no target run (its golden is the packed image)"
        return res
    gs = golden_source_of(target)
    res.golden_source = gs
    if gs["kind"] == "model":
        res.error = "the target is the reference model itself: not an oracle"
        return res
    t0 = time.monotonic()
    try:
        rb = execute_layer(case, target, timeout=layer_timeout(target))
        outputs, stats = rb.outputs, rb.statistics
    except Exception as e:  # noqa: BLE001 - any target failure leaves the case alone, named
        res.error = f"{type(e).__name__}: {e}"
        res.seconds = time.monotonic() - t0
        return res
    res.seconds = time.monotonic() - t0
    from dataclasses import replace

    for s in case.outputs:  # bit for bit, whatever the case's own rule tolerates
        chk = compare_surface(replace(s, rule="bitexact", rule_params={}), outputs[s.name])
        if not chk.passed:
            res.disagreements.append(f"{s.name}: {chk.message}")
    new_stats = _oracle_statistics(case, stats, gs["kind"])
    if new_stats is not None and case.statistics is not None and stats is not None:
        old = Statistics(block=stats.block, group=stats.group, **{k: case.statistics[k] for k in new_stats})
        cmp = compare_statistics(old, Statistics(block=stats.block, group=stats.group, **new_stats))
        for k, (was, got) in cmp.mismatched.items():
            res.disagreements.append(f"statistics.{k}: old golden {was}, oracle {got}")
    yamlstrict.load(case.path.read_text(encoding="utf-8"), str(case.path))  # strict (load_case passed it)
    man = yaml.load(case.path.read_text(encoding="utf-8"), Loader=_HexLoader)
    blobs = {p.name: p.read_bytes() for p in case.folder.iterdir() if p.is_file() and p.name != "case.yaml"}
    for o in man["outputs"]:
        raw = np.ascontiguousarray(outputs[o["name"]]).tobytes()
        if "expected" in o:
            blobs[o["expected"]] = raw
        else:
            import zlib

            o["crc"] = Hex(zlib.crc32(raw) & 0xFFFFFFFF)
    if new_stats is not None:
        man["statistics"] = new_stats
    prov = dict(man.get("provenance") or {})
    if gs["kind"] == "cmod":
        prov["semantics"] = "cmod"  # the golden follows the C model's side of every [DIFF]
    elif gs["kind"] == "rtl":
        prov["semantics"] = "rtl"
    describe = getattr(target, "describe", None)
    who = describe() if describe else type(target).__name__
    note = f"golden: the outputs of {who} (nvdla-hil vectors regolden)"
    prov["note"] = "; ".join(x for x in (str(prov.get("note", "")).split("; golden:")[0], note) if x)
    man["provenance"] = prov
    dest = Path(out) / case.folder.name if out is not None else case.folder
    with tempfile.TemporaryDirectory(prefix="nvdla-regolden-") as tmp:
        work = Path(tmp) / case.folder.name
        write_case(work, man, blobs, dut=target, statuses=rb.statuses)
        load_case(work)  # what we write must load
        dest.mkdir(parents=True, exist_ok=True)
        for p in work.iterdir():
            shutil.copyfile(p, dest / p.name)
    res.path = dest
    return res
