"""Shared helpers of the reference-model tests (test-only, imported as ``_regview``).

* :class:`RegView` - a dict-backed ``RegisterView`` for unit tests that build a layer's
  registers by hand: values by register name, fields extracted with the project's register
  map (``drivers/regmap.py``, v2 = nv_small family), registers not set read their reset value
  as on hardware after reset. LUT contents and profile features are plain attributes.
* :func:`trace_names` / :func:`run_on_model` - NVDLA trace tests on the real trace player
  (``harness.traces.run_trace``) and the model target; the profile is nv_small unless the
  trace programs SDP EW/LUT (then nv_small_256_full, as the trace suite does).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.drivers.regmap import RegisterMap, load_regmap
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import TraceResult, parse_trace, run_trace, trace_features
from nvdla_hil.semantics import Semantics

__all__ = ["FULL_PROFILE", "RegView", "run_on_model", "trace_names"]

FULL_PROFILE = "nv_small_256_full"  # nv_small plus SDP EW + LUT (and sec_mem)
LUT_DEPTH = {"LE": 65, "LO": 257}


class RegView:
    """RegisterView over ``regs[(block, register)] -> raw 32-bit value``.

    ``features``: profile features ``has()`` reports (``profile=`` takes them from a profile).
    ``luts``: ``{"LE": uint16[65], "LO": uint16[257]}``, returned by ``lut()`` for any block.
    Unknown register or field names raise the register map's errors.
    """

    def __init__(
        self,
        regs: dict[tuple[str, str], int] | None = None,
        *,
        features: Iterable[str] = (),
        profile: str | None = None,
        regmap: RegisterMap | None = None,
    ) -> None:
        self.regs: dict[tuple[str, str], int] = dict(regs or {})
        self.features: set[str] = set(features)
        if profile is not None:
            prof = load_profile(profile)
            self.features |= {f for f, on in prof.features.items() if on}
            regmap = regmap or prof.regmap
        self.regmap: RegisterMap = regmap or load_regmap("v2")
        self.luts: dict[str, np.ndarray] = {t: np.zeros(n, np.uint16) for t, n in LUT_DEPTH.items()}

    # ---- RegisterView ------------------------------------------------------------------
    def reg(self, block: str, register: str) -> int:
        r = self.regmap.register(block, register)
        return self.regs.get((block, register), r.reset)

    def field(self, block: str, register: str, field: str) -> int:
        return self.regmap.register(block, register).field(field).extract(self.reg(block, register))

    def lut(self, block: str, table: str) -> np.ndarray:
        return self.luts[table].copy()

    def has(self, feature: str) -> bool:
        return feature in self.features

    # ---- building a layer ----------------------------------------------------------------
    def set(self, block: str, register: str, value: int) -> RegView:
        """Raw register value (checked against the map)."""
        self.regmap.register(block, register)
        self.regs[(block, register)] = int(value) & 0xFFFFFFFF
        return self

    def set_field(self, block: str, register: str, field: str, value: int | str) -> RegView:
        """One field (an int or an enum name), other bits kept."""
        r = self.regmap.register(block, register)
        self.regs[(block, register)] = r.field(field).insert(self.reg(block, register), value)
        return self


# ---- NVDLA trace tests on the model target ---------------------------------------------


def _configured_root(config: pytest.Config) -> Path | None:
    """The trace folder as the ``trace_root`` fixture finds it (option, then NVDLA_TRACES)."""
    root = config.getoption("--nvdla-traces", default=None) or os.environ.get("NVDLA_TRACES")
    return Path(root) if root and Path(root).is_dir() else None


def trace_names(config: pytest.Config, prefix: str, *, exclude: str | None = None) -> list[str | None]:
    """Trace folder names starting with ``prefix`` for parametrizing at collection time;
    ``[None]`` when no traces are configured (the test then skips through ``trace_root``)."""
    root = _configured_root(config)
    if root is None:
        return [None]
    names = sorted(p.name for p in root.iterdir()
                   if p.is_dir() and p.name.startswith(prefix) and not (exclude and exclude in p.name))
    return names or [None]


@contextmanager
def run_on_model(path: Path, semantics: Semantics = "rtl", profile: str | None = None) -> Iterator[tuple[TraceResult, ModelTarget]]:
    """Run one trace on a fresh ModelTarget through the real player (no poisoning); yields
    the result and the still-open target (``layers_run``, statistics registers, memory)."""
    if not path.is_dir():
        pytest.skip(f"trace {path.name} not in {path.parent}")
    trace = parse_trace(path)
    if profile is None:
        profile = FULL_PROFILE if trace_features(trace) & {"sdp_ew", "sdp_lut"} else "nv_small"
    with ModelTarget(profile, semantics=semantics) as t:
        yield run_trace(trace, t), t
