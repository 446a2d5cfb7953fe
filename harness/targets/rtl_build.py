"""Which simulator of NVDLA's RTL the verilator target runs: the plain build, or the
profile-guided one (``rtl_build="pgo"``: ``regress --rtl-build pgo``, ``--nvdla-rtl-build pgo``).

A profile-guided build (:func:`~nvdla_hil.sims.build.build_pgo`) is the same Verilated model
compiled a second time with the branch and call profile of a first, instrumented build that ran
NVDLA's own trace tests: the same RTL, the same flags, the same cycles (``bench/bench_sim.py``
checks the pinned cycle counts), about 1.3-1.4x fewer CPU-seconds per simulated cycle than the
plain build (``sims/README.md``, "Speed options of the build"). The training runs on the trace
runner (:mod:`~nvdla_hil.harness.traces.pgo`, handed in by the plugin and the CLI: ``sims`` and
the targets know nothing of traces); this module chooses the training set and the build. Training
and both builds happen once per checkout and configuration (the cache key names the training
set); a training trace that does not pass on the instrumented build stops the build with an
error naming it, since a profile of a broken run would be of the wrong code.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PGO_TRAINING", "RTL_BUILDS", "nvdla_build", "pgo_training"]

#: what ``rtl_build`` may name
RTL_BUILDS = ("plain", "pgo")

#: the traces a profile-guided build of a configuration trains on: one to three per unit (none of
#: ``bench/bench_sim.py``'s measured LONGEST_NV_SMALL, so the bench measures traces the profile has
#: not seen); a configuration not listed trains on the first trace of each unit's name prefix
PGO_TRAINING: dict[str, tuple[str, ...]] = {
    "nv_small": (
        "dc_24x44x14_5x3x14x41_int8_0", "dc_6x8x192_3x3x192x32_int8_0", "dc_13x15x64_5x3x64x16_int8_0",
        "sdp_3x3x33_bn_int8_reg_0", "sdp_23x13x42_bs_int8_mem_0", "pdp_8x8x64_2x2_ave_int8_0",
        "pdp_28x28x8_2x2_max_int8_0", "cdp_8x8x64_lrn3_int8_0", "sdp_pdp_32x16x32_pass_through_int8_0",
    ),
}


def _trace_roots(nvdla_hw: str | os.PathLike[str] | None, config: str) -> list[Path]:
    """Where a configuration's trace tests may be: the checkout's ``verif/tests/trace_tests``,
    ``$NVDLA_TRACE_SETS/<config>``, ``$NVDLA_TRACES`` when it is that configuration's folder."""
    roots = []
    hw = nvdla_hw or os.environ.get("NVDLA_HW")
    if hw:
        roots.append(Path(hw).expanduser() / "verif" / "tests" / "trace_tests" / config)
    if os.environ.get("NVDLA_TRACE_SETS"):
        roots.append(Path(os.environ["NVDLA_TRACE_SETS"]) / config)
    if os.environ.get("NVDLA_TRACES") and Path(os.environ["NVDLA_TRACES"]).name == config:
        roots.append(Path(os.environ["NVDLA_TRACES"]))
    return roots


def pgo_training(nvdla_hw: str | os.PathLike[str] | None, config: str) -> list[Path]:
    """The trace folders a profile-guided build of ``config`` trains on (:data:`PGO_TRAINING`);
    BuildError when no trace-test folder of the configuration is found, or one named is missing."""
    from nvdla_hil.sims.build import BuildError

    roots = _trace_roots(nvdla_hw, config)
    root = next((r for r in roots if r.is_dir()), None)
    if root is None:
        raise BuildError(f"a profile-guided {config} build trains on NVDLA's trace tests, and none was found "
                         f"(looked in: {', '.join(str(r) for r in roots) or 'nowhere'}; "
                         f"set NVDLA_TRACE_SETS to the folder holding <config>/<trace>/)")
    names = PGO_TRAINING.get(config)
    if names is None:
        firsts: dict[str, str] = {}
        for p in sorted(root.iterdir()):
            if p.is_dir() and (p / f"{p.name}.cfg").is_file():
                firsts.setdefault(p.name.split("_", 1)[0], p.name)
        names = tuple(firsts.values())
    missing = [n for n in names if not (root / n / f"{n}.cfg").is_file()]
    if missing or not names:
        raise BuildError(f"{root}: the profile-guided build's training traces are missing: {', '.join(missing) or 'all'}")
    return [root / n for n in names]


def nvdla_build(nvdla_hw: str | os.PathLike[str] | None, config: str, *, waves: bool = False,
                coverage: Sequence[str] = (), rtl_build: str = "plain",
                train: Callable[[Any, list[Path]], None] | None = None) -> Any:
    """The :class:`~nvdla_hil.sims.build.SimBuild` a verilator target of ``config`` runs (built
    or taken from the cache). ``rtl_build="pgo"`` is the profile-guided build, trained when not
    cached by ``train(instrumented build, trace folders)`` (:func:`~..traces.pgo.train_on_traces`,
    which the plugin and the CLI hand in: running traces is a layer above the targets). It has no
    waves or coverage variant (those builds are for looking into a run, not for speed)."""
    from nvdla_hil.sims.build import BuildError, build_nvdla, build_pgo

    if rtl_build not in RTL_BUILDS:
        raise BuildError(f"unknown RTL build {rtl_build!r}; builds: {', '.join(RTL_BUILDS)}")
    if rtl_build == "plain" or waves or coverage:
        return build_nvdla(nvdla_hw, config, waves=waves, coverage=coverage)
    traces = pgo_training(nvdla_hw, config)

    def run_training(build: Any) -> None:  # only when the trained build is not cached
        if train is None:
            raise BuildError("the profile-guided build is not cached and there is no trainer (the trace runner) to "
                             "make it: open the target through nvdla-hil's CLI or pytest plugin, or pass "
                             "pgo_train=harness.traces.pgo.train_on_traces")
        train(build, traces)

    return build_pgo(nvdla_hw, config, train=run_training, training=f"{config} traces {' '.join(t.name for t in traces)}")
