"""NVDLA's own trace tests, one pytest test per trace folder under ``--nvdla-traces``.

``--nvdla-traces`` is one configuration's folder (``trace_tests/nv_small``) or a folder of
configuration folders (nvdla/hw's ``verif/tests/trace_tests``; ``--nvdla-hw PATH`` finds it).
A trace of a configuration folder runs on that configuration's profile when the run may use it
(``--nvdla-config``, ``all`` for every shipped profile); a trace that programs a feature its
configuration lacks (the ``sdp_*_ew_*`` traces of nv_small and nv_small_256) runs on the first
configured profile that has it, and says so. A unit the target cannot run is a skip naming
the unit ("not modelled"), counted apart from skips for hardware a configuration lacks.

A trace source that was asked for (``--nvdla-traces``, ``NVDLA_TRACES``, ``--nvdla-hw``) but is
missing, empty, or has no configuration the run may use is a collection error naming the
option, never a skip. Only when no trace source is configured at all (a run of the vectors
suite alone) is the suite one skipped test, ``no-trace-source``, saying what to pass.

Each layer's wait is bounded by an estimate of its work (:mod:`nvdla_hil.harness.targets.workload`):
a hung layer fails after that time, and the message says how long it waited and why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvdla_hil.drivers.driver import AccessLog, NvdlaDriver
from nvdla_hil.harness.plugin import (
    SKIP_LACKS,
    SKIP_NOT_MODELLED,
    attach_access_log,
    configured_profiles,
    nvdla_option,
    profile_for_trace,
    set_link_report,
    suite_spec,
    trace_root,
)
from nvdla_hil.harness.targets import open_target
from nvdla_hil.harness.traces.limits import TraceError
from nvdla_hil.harness.traces.needs import trace_features
from nvdla_hil.harness.traces.parse import parse_trace
from nvdla_hil.harness.traces.player import run_trace
from nvdla_hil.harness.traces.sets import find_trace_sets
from nvdla_hil.harness.targets.workload import explain_timeout, trace_budget

#: the ``nvdla_warm_pool`` fixture (also registered by the nvdla_hil plugin; loading it twice is a no-op)
pytest_plugins = ["nvdla_hil.harness.plugin.warm"]

SKIP_NO_SOURCE = "no trace source configured"


def _source(config: pytest.Config) -> str | None:
    """Which option named the trace root (for messages), or None when none was configured."""
    if config.getoption("--nvdla-traces", default=None):
        return "--nvdla-traces"
    if os.environ.get("NVDLA_TRACES"):
        return "NVDLA_TRACES"
    return "--nvdla-hw" if trace_root(config) is not None else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "trace_case" not in metafunc.fixturenames:
        return
    config = metafunc.config
    root = trace_root(config)
    source = _source(config)
    if root is None or source is None:
        metafunc.parametrize("trace_case", [None], ids=["no-trace-source"])
        return
    if not root.is_dir():
        raise pytest.Collector.CollectError(
            f"{source} {root}: " + ("no such folder" if not root.exists() else "not a folder")
            + " (expected NVDLA trace tests)")
    sets = find_trace_sets(root)
    if not sets:
        raise pytest.Collector.CollectError(f"{source} {root}: no NVDLA trace tests in this folder")
    allowed = set(configured_profiles(config))
    usable = [(c, p) for c, p in sets if c is None or c in allowed]
    if not usable:
        have = sorted({c for c, _ in sets if c})
        raise pytest.Collector.CollectError(
            f"{source} {root}: its configurations ({', '.join(have)}) are none of --nvdla-config "
            f"({', '.join(sorted(allowed))}); pass --nvdla-config all or one of them")
    ids = [p.name if c is None else f"{c}/{p.name}" for c, p in usable]
    metafunc.parametrize("trace_case", usable, ids=ids)


def test_trace(trace_case: tuple[str | None, Path] | None, pytestconfig: pytest.Config,
               record_property, request: pytest.FixtureRequest, nvdla_warm_pool) -> None:  # noqa: ANN001  # fmt: skip
    if trace_case is None:
        pytest.skip(f"{SKIP_NO_SOURCE}: pass --nvdla-traces PATH (or NVDLA_TRACES, or --nvdla-hw PATH) "
                    "to run NVDLA's trace tests")
    config, trace_path = trace_case
    bad: TraceError | None = None
    try:
        trace = parse_trace(trace_path)
    except TraceError as e:
        bad = e
    if bad is not None:
        raise bad  # bad input: the plugin reports it as such, the CLI exits 2
    feats = trace_features(trace)
    prof, why = profile_for_trace(pytestconfig, config, feats)
    if prof is None:
        pytest.skip(f"{SKIP_LACKS}: {trace.name} {why}")
    record_property("profile", prof.name)
    if why:
        record_property("profile_note", why)
    spec = suite_spec(pytestconfig, prof)
    nodeid = request.node.nodeid
    with open_target(spec, warm=nvdla_warm_pool) as target:
        not_reset = target.not_in_reset_state()
        if not_reset:
            pytest.skip(f"{trace.name}: {not_reset}")
        drv = NvdlaDriver(target, prof)
        log = drv.record(AccessLog(prof.regmap))
        attach_access_log(pytestconfig, nodeid, log, target.link_report)
        budget = trace_budget(trace, drv, target)
        try:
            result = run_trace(trace, target, driver=drv, poison=nvdla_option(pytestconfig, "poison"),
                               timeout=budget.seconds)
        except TraceError as e:
            bad = e
        link = target.link_report()
        set_link_report(pytestconfig, nodeid, link)
        actual = {}  # what the target left in each failing region, for the model-vs-target diff
        if bad is None and result.status == "failed":
            actual = {ck.line: target.mem_read(ck.address, ck.size, port=ck.port)
                      for ck in result.checks if ck.kind == "crc" and not ck.passed}
    if bad is not None:
        raise bad  # bad input: the plugin reports it as such, the CLI exits 2
    if result.setup_note:  # a passing test says it too (a fallback, nothing poisoned)
        request.node.user_properties.append(("memory_setup", result.setup_note))
    diagnosis = ""
    if actual:
        from nvdla_hil.harness.plugin import log_dir
        from nvdla_hil.harness.analysis.report import diag_path, trace_lut_info, write_diagnosis
        from nvdla_hil.harness.analysis.triage import diagnose_trace

        diag = diagnose_trace(trace, actual, prof, semantics=spec.semantics)  # bounded by model runs, not time
        request.node.user_properties.append(("diagnosis_s", round(diag.seconds, 3)))
        diagnosis = "\n" + diag.summary()
        if (logs := log_dir(pytestconfig)) is not None:
            write_diagnosis(diag_path(logs, nodeid), diag, test=nodeid, result=result,
                            lut=trace_lut_info(trace, prof))
    if result.status == "skipped":
        pytest.skip(f"{SKIP_NOT_MODELLED}: {trace.name} on {prof.name}: {result.message.removeprefix('unit not modelled: ')}")
    if result.status != "passed":
        tail = "\n".join(log.tail(15))
        why_timeout = explain_timeout(result.message, budget)
        pytest.fail(f"{result.summary()}" + diagnosis + (f"\n{why_timeout}" if why_timeout else "")
                    + f"\nprofile {prof.name}" + (f" ({why})" if why else "")
                    + f"; last register accesses:\n{tail}" + (f"\n{link}" if link else ""), pytrace=False)
