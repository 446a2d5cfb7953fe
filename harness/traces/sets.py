"""Where the traces are: every trace folder below a root, and the configuration each belongs to."""

from __future__ import annotations

from pathlib import Path

__all__ = ["find_traces", "find_trace_sets"]


def find_traces(root: str | Path) -> list[Path]:
    """Every trace folder below ``root`` (a folder holding one ``.cfg``), sorted by name."""
    root = Path(root)
    return sorted(p.parent for p in root.rglob("*.cfg"))


def find_trace_sets(root: str | Path) -> list[tuple[str | None, Path]]:
    """``(configuration, trace folder)`` for every trace below ``root``.

    ``root`` is either one configuration's folder (``.../trace_tests/nv_small``: configuration
    None, the run's profiles decide) or a folder of per-configuration folders, as nvdla/hw's
    ``verif/tests/trace_tests`` (each trace then belongs to the configuration its folder names).
    """
    root = Path(root)
    direct = sorted(p.parent for p in root.glob("*/*.cfg"))
    if direct or any(root.glob("*.cfg")):
        return [(None, p) for p in find_traces(root)]
    out: list[tuple[str | None, Path]] = []
    for sub in sorted(q for q in root.iterdir() if q.is_dir()):
        out += [(sub.name, p) for p in sorted(c.parent for c in sub.glob("*/*.cfg"))]
    return out
