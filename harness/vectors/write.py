"""Writing a case (deterministic bytes) and naming where its goldens came from
(``golden_source``: an oracle target's build, or the reference model itself)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ...drivers.precision import golden_status_values
from .format import MANIFEST, Hex


def model_golden_source(reason: str = "") -> dict[str, Any]:
    """The ``golden_source`` of goldens the reference model computed itself (not an oracle)."""
    return {"kind": "model", "oracle": False,
            "reason": reason or "outputs of this project's reference model: self-consistency, no oracle"}


def golden_source_of(dut: Any) -> dict[str, Any]:
    """``golden_source`` of goldens read back from the target ``dut``: NVDLA's C model (its build's
    configuration, flavor, key and checkout revision when the checkout is a git work tree), a
    Verilator RTL build (configuration, build key, simulator), a board (the RTL on an FPGA), or
    the reference model (self-consistency)."""
    build = getattr(dut, "build", None) or getattr(getattr(dut, "_sim", None), "build", None)
    if build is not None and getattr(build, "flavor", None):
        g: dict[str, Any] = {"kind": "cmod", "config": str(build.config), "flavor": str(build.flavor),
                             "build_key": str(build.key)}
        rev = _git_revision(Path(str(build.nvdla_hw)))
        if rev:
            g["revision"] = rev
        if getattr(build, "systemc", None):
            g["systemc"] = str(build.systemc)
        return g
    if build is not None and getattr(build, "toplevel", None):
        g = {"kind": "rtl", "config": str(build.config), "build_key": str(build.key)}
        if getattr(build, "verilator", None):
            sim = str(build.verilator)
            g["simulator"] = sim if sim.lower().startswith("verilator") else f"Verilator {sim}"
        return g
    board = getattr(dut, "board_name", None)
    if board:
        return {"kind": "rtl", "config": str(getattr(dut, "profile_name", "") or "unknown"),
                "build_key": f"board {board}", "note": str(getattr(dut, "describe", lambda: board)())}
    describe = getattr(dut, "describe", None)
    return model_golden_source(f"outputs of {describe() if describe else type(dut).__name__}: "
                               f"self-consistency, no oracle")


def _with_statuses(body: dict[str, Any], statuses: dict[str, int]) -> dict[str, Any]:
    """``body`` with ``statuses`` set, placed after ``statistics`` (else at the end)."""
    out: dict[str, Any] = {}
    for k, v in body.items():
        if k == "statuses":
            continue
        out[k] = v
        if k == "statistics":
            out["statuses"] = dict(statuses)
    if "statuses" not in out:
        out["statuses"] = dict(statuses)
    return out


def _git_revision(checkout: Path) -> str | None:
    """HEAD commit of a git work tree (read from ``.git``, no subprocess), else None."""
    try:
        head = (checkout / ".git" / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref: "):
            ref = head[5:]
            p = checkout / ".git" / ref
            if p.is_file():
                return p.read_text(encoding="utf-8").strip()
            packed = (checkout / ".git" / "packed-refs").read_text(encoding="utf-8")
            return next((ln.split()[0] for ln in packed.splitlines() if ln.endswith(" " + ref)), None)
        return head or None
    except OSError:
        return None


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(Hex, lambda d, v: d.represent_scalar("tag:yaml.org,2002:int", f"{int(v):#x}"))


def write_case(folder: str | Path, manifest: Mapping[str, Any], blobs: Mapping[str, bytes | np.ndarray], *,
               dut: Any = None, golden_source: Mapping[str, Any] | None = None,
               statuses: Mapping[str, int] | None = None) -> Path:
    """Write ``case.yaml`` and the blobs (raw bytes) into ``folder``; returns the manifest path.
    Output is deterministic: same inputs, same bytes. ``golden_source`` is, in this order: the
    one derived from ``dut`` (the target whose outputs are the goldens, :func:`golden_source_of`),
    the one given, the manifest's own, else the reference model's (self-consistency: a writer
    that names no oracle never claims one). It is written just before ``provenance``.
    ``statuses``: the status registers the layer set as the golden's target read them back
    (:attr:`~.run.LayerReadback.statuses`, :attr:`~.run.CaseResult.actual_statuses`): written as the
    golden's ``statuses`` (replacing the manifest's), less the counters an RTL golden may not hold
    (:func:`~...drivers.precision.golden_status_values`); empty or None: the manifest's own."""
    gs = golden_source_of(dut) if dut is not None else golden_source or manifest.get("golden_source") \
        or model_golden_source()
    body = {k: v for k, v in manifest.items() if k not in ("golden_source", "provenance")}
    if statuses:
        body = _with_statuses(body, golden_status_values(statuses, str(gs.get("kind", "model"))))
    manifest = body | \
        {"golden_source": dict(gs)} | ({"provenance": manifest["provenance"]} if "provenance" in manifest else {})
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in blobs.items():
        if "/" in name or name.startswith(".") or name == MANIFEST:
            raise ValueError(f"bad blob name {name!r}")
        raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        (folder / name).write_bytes(raw)
    text = yaml.dump(dict(manifest), Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100)
    path = folder / MANIFEST
    path.write_text(f"# nvdla-hil packed test vector; format: testvectors/README.md\n{text}", encoding="utf-8")
    return path


