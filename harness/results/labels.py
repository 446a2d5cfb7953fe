"""Known-failure labels: a text and a bug link attached to a failure signature.

A label lives in the results database (table ``nvdla_labels``, keyed by the signature id of
:mod:`.signature`), so it is applied by itself wherever that signature returns: the end of a
run (``failure clusters``), ``nvdla-hil history``, the dashboard and each run's report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .textsafe import term_safe

__all__ = ["label_text", "cluster_lines", "clusters"]


def label_text(label: Mapping[str, Any] | None) -> str:
    """``text (bug)`` of a label, or ``""``."""
    if not label:
        return ""
    bug = f" ({label['bug']})" if label.get("bug") else ""
    return f"{label.get('text') or ''}{bug}".strip()


def clusters(tests: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Failing test rows grouped by signature, biggest cluster first."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for t in tests:
        if t.get("signature"):
            out.setdefault(str(t["signature"]), []).append(t)
    return dict(sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def cluster_lines(counts: Mapping[str, int], sigs: Mapping[str, Mapping[str, Any]],
                  labels: Mapping[str, Mapping[str, Any]]) -> list[str]:  # fmt: skip
    """One line per signature: count, id, readable key and its label (``known:``) if any (terminal-safe)."""
    lines = []
    for sig, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        key = term_safe((sigs.get(sig) or {}).get("key", ""))
        lab = term_safe(label_text(labels.get(sig)))
        lines.append(f"{n:4d} x {term_safe(sig)}  {key}" + (f"\n         known: {lab}" if lab else ""))
    return lines
