"""The session's target and profiles: ``pytest_configure`` resolves the options into the session's
:class:`~nvdla_hil.harness.targets.TargetSpec` (kind, profiles, checkout, lab and board, coverage
collector) and registers the plugin objects the run needs (summary, coverage, waves on failure,
the Dask cluster loop); the suites ask here which profile a test runs on (:func:`profile_for`,
:func:`profile_for_trace`), where the traces are (:func:`trace_root`) and how to open the target
(:func:`suite_spec`).

Misconfiguration is never green: everything that can be checked before the first test is a
``pytest.UsageError`` here (pytest exit 4; ``nvdla-hil regress`` exits 2).
"""

from __future__ import annotations

import functools
import os
from dataclasses import replace
from pathlib import Path

import pytest

from ...drivers.profiles import HardwareProfile, load_profile
from ...drivers.transport import Transport
from ..analysis.coverage import Coverage
from ..targets import TARGETS, TargetSpec, checkout_problem, clock_gating_spec
from .boards import configure_boards, labgrid_lab
from .coverage import coverage_for_session, session_sink
from .junit import set_junit_family
from .rtl_coverage import RtlCoverageSession, rtl_coverage_folder
from .keys import (
    BOARD_DEAD_KEY,
    COUNTS_KEY,
    CURRENT_ITEMS_KEY,
    LOGS_KEY,
    OPENED_KEY,
    OPTS_KEY,
    PROFILES_KEY,
    SPEC_KEY,
    WAVES_SEEN_KEY,
    configured_profiles,
    is_worker,
)
from .options import (
    ALIASED,
    DEFAULT_PROFILES,
    check_trace_source,
    check_vector_source,
    env_option,
    resolve_option,
    xdist_workers,
)
from .summary import RegressionSummary, RunCounter
from .waves import WavesOnFailure, rerun_waves


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "nvdla_feature(*features): needs hardware features (skipped when absent)")
    config.addinivalue_line("markers", "nvdla_targets(*kinds): runs only on these targets")
    config.stash[LOGS_KEY] = {}
    config.stash[COUNTS_KEY] = {"ran": 0, "suite": 0, "reports": 0}
    config.stash[WAVES_SEEN_KEY] = []
    set_junit_family(config)
    opts = {name: resolve_option(config, name) for name in ALIASED}
    opts["model-semantics"] = opts["model-semantics"] or "rtl"
    config.stash[OPTS_KEY] = opts
    kind = _target_kind(config, opts)
    profiles, hw, lab, board, extra = _where_it_runs(config, kind, opts)
    config.stash[PROFILES_KEY] = profiles
    summary = bool(os.environ.get("NVDLA_HIL_SUMMARY") or config.getoption("--nvdla-summary"))
    # functional coverage (harness/analysis/coverage.py): the session's model targets feed one collector,
    # the caller's (an in-process run, e.g. a Dask worker) or the summary's, else none
    cov = session_sink(config) or (Coverage() if summary else None)
    config.stash[CURRENT_ITEMS_KEY] = []
    rtl_cov = rtl_coverage_folder(config, kind)
    if rtl_cov is not None:
        config.pluginmanager.register(RtlCoverageSession(config, rtl_cov), "nvdla-hil-rtl-coverage")
    config.stash[SPEC_KEY] = TargetSpec(
        kind=kind,
        profile=profiles[0],
        semantics=opts["model-semantics"],
        nvdla_hw=hw,
        waves=bool(opts["waves"]),
        lab=lab,
        board=board,
        extra=extra,
        coverage=cov,
        observer=functools.partial(_target_opened, config),
        # what the session's boards are known to hold, so a test does not resend it (serial)
        memory_book=_memory_book() if kind == "serial" else None,
        rtl_coverage=rtl_cov,
    )
    from ..traces.pgo import rtl_build_spec  # the trace player: only imported when a session starts

    try:
        config.stash[SPEC_KEY] = rtl_build_spec(config.stash[SPEC_KEY], env_option(
            config, "--nvdla-rtl-build", "NVDLA_HIL_RTL_BUILD", "plain") or "plain")
    except ValueError as e:
        raise pytest.UsageError(f"--nvdla-rtl-build / NVDLA_HIL_RTL_BUILD {e}") from None
    gating = env_option(config, "--nvdla-rtl-clock-gating", "NVDLA_HIL_RTL_CLOCK_GATING", "auto") or "auto"
    try:  # nvdla/hw#183 (harness/targets/verilator.py SLCG_WEIGHT_LEAK)
        config.stash[SPEC_KEY] = clock_gating_spec(config.stash[SPEC_KEY], gating)
    except ValueError as e:
        raise pytest.UsageError(f"--nvdla-rtl-clock-gating / NVDLA_HIL_RTL_CLOCK_GATING: {e}") from None
    config.stash[BOARD_DEAD_KEY] = {"run": 0, "session": None}
    _register_plugins(config, kind, opts, summary, cov)


def _target_kind(config: pytest.Config, opts: dict) -> str:
    """``--nvdla-target`` (or NVDLA_HIL_TARGET, default model); an explicit ``--nvdla-traces`` or
    ``--nvdla-vectors`` is checked here too (a folder that holds tests)."""
    kind = opts["target"] or os.environ.get("NVDLA_HIL_TARGET") or "model"
    if kind not in TARGETS:
        raise pytest.UsageError(f"NVDLA_HIL_TARGET={kind!r}: expected one of {', '.join(TARGETS)}")
    if config.getoption("--nvdla-traces") is not None:
        check_trace_source("--nvdla-traces", config.getoption("--nvdla-traces"))
    if config.getoption("--nvdla-vectors") is not None:
        check_vector_source("--nvdla-vectors", config.getoption("--nvdla-vectors"))
    return kind


def _where_it_runs(config: pytest.Config, kind: str, opts: dict) -> tuple[list[str], str | None, str | None, str | None, dict]:
    """The run's profiles (checked), the nvdla/hw checkout, the lab file and board (serial: the
    session's board locks are taken here), and the target spec's extras."""
    # the model target can be every configuration at no cost: by default a run may use them all,
    # so no bundled vector or trace is skipped for a profile nobody asked for; a simulator or a
    # board is one build: the default there is nv_small (+ nv_small_256_full for SDP EW)
    default = "all" if kind == "model" else DEFAULT_PROFILES
    profiles = [p.strip() for p in (env_option(config, "--nvdla-config", "NVDLA_HIL_CONFIG", default) or "").split(",") if p.strip()]
    if profiles == ["all"]:
        from ...drivers.profiles import list_profiles

        profiles = list_profiles()
    lab = opts["lab"] or os.environ.get("NVDLA_HIL_LAB")
    board = opts["board"] or os.environ.get("NVDLA_HIL_BOARD")
    hw = env_option(config, "--nvdla-hw", "NVDLA_HW")
    extra: dict = {}
    problem = checkout_problem(kind, hw, target_option="--nvdla-target")
    if problem:
        raise pytest.UsageError(problem)
    if kind == "serial":
        if not lab:
            lab, board = labgrid_lab(config, profiles[0], board)
        board, profiles, extra = configure_boards(config, lab, board)
    bugs = config.getoption("--nvdla-model-bug")
    if bugs:
        if kind != "model":
            raise pytest.UsageError("--nvdla-model-bug injects a datapath bug into the model target only")
        extra = {**extra, "model_bugs": list(bugs)}
    for i, p in enumerate(profiles):
        try:
            profiles[i] = load_profile(p, nvdla_hw=hw).name if not p.endswith(".spec") else p
        except Exception as e:  # noqa: BLE001 - turn any profile error into a usage error
            raise pytest.UsageError(f"--nvdla-config: {e}") from None
    return profiles, hw, lab, board, extra


def _register_plugins(config: pytest.Config, kind: str, opts: dict, summary: bool, cov: Coverage | None) -> None:
    """The plugin objects this run needs: the Dask cluster loop, the run counter, waves of failed
    tests (verilator), the summary table and the coverage table."""
    cluster = config.getoption("--nvdla-cluster", default=None)
    if cluster and xdist_workers(config) > 1:
        raise pytest.UsageError("--nvdla-cluster and pytest-xdist's -n are two ways to run in parallel: use one")
    if cluster and not is_worker(config) and not config.getoption("collectonly"):
        from .cluster import ClusterLoop

        config.pluginmanager.register(ClusterLoop(config, cluster), "nvdla-hil-cluster")
    config.pluginmanager.register(RunCounter(config), "nvdla-hil-run-counter")
    if kind == "verilator" and not opts["waves"] and config.getoption("--nvdla-failure-waves") == "rerun":
        config.pluginmanager.register(WavesOnFailure(), "nvdla-hil-waves-on-failure")
    if summary:
        config.pluginmanager.register(RegressionSummary(config), "nvdla-hil-summary")
        # the coverage table at the end, and coverage.json beside the run directory's logs
        logs = config.getoption("--nvdla-log")
        path = Path(logs).parent / "coverage.json" if logs else None
        config.pluginmanager.register(coverage_for_session(config, path, cov=cov), "nvdla-hil-coverage")


def _memory_book():  # noqa: ANN202
    from ..targets.serial import BoardMemoryBook

    return BoardMemoryBook()


def _target_opened(config: pytest.Config, target: Transport, spec: TargetSpec) -> None:
    """The session spec's observer: record each target a test opens on the test."""
    running = config.stash.get(CURRENT_ITEMS_KEY, [])
    if running:
        running[-1].stash.setdefault(OPENED_KEY, []).append((target, spec))


def _load(config: pytest.Config, name: str) -> HardwareProfile:
    return load_profile(name, nvdla_hw=config.stash[SPEC_KEY].nvdla_hw)


def profile_for(config: pytest.Config, features: tuple[str, ...] | set[str],
                generation: str | None = None) -> HardwareProfile | None:  # fmt: skip
    """The first configured profile that has every feature (of ``generation``), or None."""
    for name in config.stash[PROFILES_KEY]:
        prof = _load(config, name)
        if generation and prof.generation != generation:
            continue
        if all(prof.has(f) for f in features):
            return prof
    return None


def profile_for_trace(config: pytest.Config, own: str | None,
                      features: set[str]) -> tuple[HardwareProfile | None, str]:  # fmt: skip
    """The profile a v2 trace runs on, and why when it is not the trace's own configuration.

    A trace of configuration folder ``own`` runs on that profile when it has the features the
    trace programs; otherwise on the first configured v2 profile that has them."""
    if own is not None:
        mine = _load(config, own)
        missing = sorted(f for f in features if not mine.has(f))
        if not missing:
            return mine, ""
        other = profile_for(config, features, "v2")
        lacks = f"needs {', '.join(missing)}, which {own} lacks"
        if other is None:
            return None, f"{lacks}; no configured profile ({', '.join(configured_profiles(config))}) has it"
        return other, f"{lacks}: run on {other.name}"
    prof = profile_for(config, features, "v2")
    if prof is None:
        return None, (f"needs {', '.join(sorted(features))}, which "
                      f"{' and '.join(configured_profiles(config))} lack{'s' if len(configured_profiles(config)) == 1 else ''}")
    return prof, ""


def trace_root(config: pytest.Config) -> Path | None:
    """``--nvdla-traces`` / NVDLA_TRACES, else the ``--nvdla-hw`` checkout's trace tests."""
    root = env_option(config, "--nvdla-traces", "NVDLA_TRACES")
    if root:
        return Path(root)
    hw = config.stash[SPEC_KEY].nvdla_hw
    if hw and (Path(hw) / "verif" / "tests" / "trace_tests").is_dir():
        return Path(hw) / "verif" / "tests" / "trace_tests"
    return None


def suite_spec(config: pytest.Config, profile: HardwareProfile) -> TargetSpec:
    """The selected target on ``profile``; skips (with what to pass) when the target cannot
    be opened from the options given."""
    spec = config.stash[SPEC_KEY].with_profile(profile.name)
    if spec.kind == "verilator" and not spec.nvdla_hw:
        pytest.skip("verilator target needs an nvdla/hw checkout: --nvdla-hw PATH or NVDLA_HW")
    if spec.kind == "serial" and not (spec.lab and spec.board):
        pytest.skip("serial target needs --nvdla-lab FILE --nvdla-board NAME (or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
    wave = rerun_waves(config)
    if wave is not None and spec.kind == "verilator":  # the re-run of a failed test, with waves
        spec = replace(spec, waves=True, extra={**spec.extra, "wave_file": str(wave)})
    return spec


def needed_features(item: pytest.Item) -> set[str]:
    feats: set[str] = set()
    for m in item.iter_markers("nvdla_feature"):
        if not m.args or not all(isinstance(a, str) for a in m.args):
            raise pytest.UsageError(f"{item.nodeid}: nvdla_feature needs feature names as strings")
        feats.update(m.args)
    return feats


def pytest_runtest_setup(item: pytest.Item) -> None:
    spec = item.config.stash[SPEC_KEY]
    for m in item.iter_markers("nvdla_targets"):
        if spec.kind not in m.args:
            pytest.skip(f"runs only on target(s) {', '.join(m.args)}, not {spec.kind}")
    feats = needed_features(item)
    if feats and profile_for(item.config, feats) is None:
        configured: list[str] = item.config.stash[PROFILES_KEY]
        profiles = ", ".join(configured)
        pytest.skip(f"needs {', '.join(sorted(feats))}; no configured profile ({profiles}) has them")
