"""Which simulator build a session uses: the checkout's content is hashed once per configuration
and session, not once per test.

The builds themselves live in the on-disk cache (``~/.cache/nvdla-hil``; ``sims/cache.py`` for
Verilator, :func:`~.cmod.build_cmod` for the C model), keyed by content; a :class:`BuildCache` only
remembers, for one session, which of them a (checkout, configuration) resolved to. It is owned by
the :class:`~nvdla_hil.harness.targets.TargetSpec` the session opens its targets from, and handed
to each :class:`~.verilator.VerilatorTarget` / :class:`~.cmod.CmodTarget` that spec creates.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["BuildCache", "resolve_build"]

B = TypeVar("B")


def resolve_build(given: Any, build_cls: Any, make: Callable[[], B], cache: BuildCache | None, key: Hashable) -> B:
    """The build a target runs: the one it was given (a build object, or the folder of one),
    else the session's memo of ``make()`` under ``key``, else a fresh ``make()``."""
    if isinstance(given, build_cls):
        return given
    if given is not None:
        return build_cls.load(Path(given))
    return make() if cache is None else cache.get(key, make)


class BuildCache:
    """Builds by key (checkout, configuration, ...), each resolved once. Thread-safe; a copy
    (pickle, deepcopy) starts empty, since it is only a memo of the on-disk cache."""

    def __init__(self) -> None:
        self._builds: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], B]) -> B:
        """The build remembered under ``key``, else ``make()``'s (also when the remembered
        build's executable has gone from the disk since)."""
        with self._lock:
            build = self._builds.get(key)
        if build is None or not Path(build.executable).is_file():
            build = make()
            with self._lock:
                self._builds[key] = build
        return build

    def __len__(self) -> int:
        with self._lock:
            return len(self._builds)

    def __reduce__(self) -> tuple[type[BuildCache], tuple[()]]:
        return (BuildCache, ())

    def __repr__(self) -> str:
        return f"BuildCache({len(self)} builds)"
