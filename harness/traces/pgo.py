"""Training a profile-guided simulator build (:mod:`~nvdla_hil.harness.targets.rtl_build`): NVDLA's
trace tests run on the instrumented build, each on a fresh simulator (its profile is written when
the simulator quits). A trace that does not pass stops the build with an error naming it: a
profile of a broken run would be of the wrong code."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..targets import TargetSpec
from ..targets.rtl_build import RTL_BUILDS

__all__ = ["rtl_build_spec", "train_on_traces"]


def rtl_build_spec(spec: TargetSpec, choice: str) -> TargetSpec:
    """``spec`` running the ``choice`` simulator build (:data:`~..targets.rtl_build.RTL_BUILDS`;
    the option or ``NVDLA_HIL_RTL_BUILD``): a profile-guided one is trained by
    :func:`train_on_traces` when not cached. Other targets are left as they are. ValueError for a
    build that does not exist (the caller names its option)."""
    if choice not in RTL_BUILDS:
        raise ValueError(f"{choice!r}: expected one of {', '.join(RTL_BUILDS)}")
    if choice == "plain" or spec.kind != "verilator":
        return spec
    return replace(spec, extra={**spec.extra, "rtl_build": choice, "pgo_train": train_on_traces})


def train_on_traces(build: Any, traces: list[Path], timeout: float = 600.0) -> None:
    """Run every trace folder of ``traces`` on ``build`` (an instrumented simulator build)."""
    from nvdla_hil.sims.build import BuildError

    from ..targets.verilator import VerilatorTarget
    from .parse import parse_trace
    from .player import run_trace

    for t in traces:
        with VerilatorTarget(build, config=build.config) as sim:
            r = run_trace(parse_trace(t), sim, timeout=timeout)
        if r.status != "passed":
            raise BuildError(f"profile-guided build: training trace {t} {r.status} on the instrumented build: {r.message}")
