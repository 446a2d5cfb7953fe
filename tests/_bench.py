"""The benchmark scripts of ``bench/`` loaded as modules, for the tests that check their logic and
their README command lines: :func:`bench_module`."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


@contextlib.contextmanager
def bench_module(name: str, *, also: tuple[str, ...] = ()) -> Iterator[ModuleType]:
    """``bench/<name>.py`` as module ``name``: its folder on ``sys.path`` (a bench imports
    ``benchenv`` and its siblings from there) and the module in ``sys.modules`` (its dataclasses
    look their module up) while in use; both taken away after, with the siblings named in ``also``."""
    added = str(BENCH) not in sys.path
    if added:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        for n in (name, *also):
            sys.modules.pop(n, None)
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(str(BENCH))
