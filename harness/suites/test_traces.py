"""NVDLA's own trace tests, one pytest test per trace folder under ``--nvdla-traces``.

``--nvdla-traces`` is one configuration's folder (``trace_tests/nv_small``) or a folder of
configuration folders (nvdla/hw's ``verif/tests/trace_tests``; ``--nvdla-hw PATH`` finds it).
A trace of a configuration folder runs on that configuration's profile when the run may use it
(``--nvdla-config``, ``all`` for every shipped profile); a trace that programs a feature its
configuration lacks (the ``sdp_*_ew_*`` traces of nv_small and nv_small_256) runs on the first
configured profile that has it, and says so. A unit the target cannot run is a skip naming
the unit ("not modelled"), counted apart from skips for hardware a configuration lacks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nvdla_hil.drivers.driver import AccessLog, NvdlaDriver
from nvdla_hil.harness.plugin import (
    SKIP_LACKS,
    SKIP_NOT_MODELLED,
    configured_profiles,
    profile_for_trace,
    suite_spec,
    trace_root,
)
from nvdla_hil.harness.targets import layer_timeout, open_target
from nvdla_hil.harness.traces import TraceError, find_trace_sets, parse_trace, run_trace, trace_features


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "trace_case" not in metafunc.fixturenames:
        return
    root = trace_root(metafunc.config)
    sets = find_trace_sets(root) if root and root.is_dir() else []
    allowed = set(configured_profiles(metafunc.config))
    sets = [(c, p) for c, p in sets if c is None or c in allowed]
    if sets:
        ids = [p.name if c is None else f"{c}/{p.name}" for c, p in sets]
        metafunc.parametrize("trace_case", sets, ids=ids)
    else:
        metafunc.parametrize("trace_case", [None], ids=["no-traces"])


def test_trace(trace_case: tuple[str | None, Path] | None, pytestconfig: pytest.Config,
               record_property) -> None:  # noqa: ANN001  # fmt: skip
    if trace_case is None:
        pytest.skip(f"no NVDLA traces found (--nvdla-traces PATH or NVDLA_TRACES; looked in {trace_root(pytestconfig)})")
    config, trace_path = trace_case
    bad: TraceError | None = None
    try:
        trace = parse_trace(trace_path)
    except TraceError as e:
        bad = e
    if bad is not None:
        pytest.fail(f"bad trace: {bad}", pytrace=False)
    feats = trace_features(trace)
    prof, why = profile_for_trace(pytestconfig, config, feats)
    if prof is None:
        pytest.skip(f"{SKIP_LACKS}: {trace.name} {why}")
    record_property("profile", prof.name)
    if why:
        record_property("profile_note", why)
    spec = suite_spec(pytestconfig, prof)
    with open_target(spec) as target:
        drv = NvdlaDriver(target, prof)
        log = drv.record(AccessLog(prof.regmap))
        try:
            result = run_trace(trace, target, driver=drv, poison=pytestconfig.getoption("--poison"),
                               timeout=layer_timeout(target))
        except TraceError as e:
            bad = e
        link = target.link_report()
    if bad is not None:
        pytest.fail(f"bad trace: {bad}", pytrace=False)
    if result.status == "skipped":
        pytest.skip(f"{SKIP_NOT_MODELLED}: {trace.name} on {prof.name}: {result.message.removeprefix('unit not modelled: ')}")
    if result.status != "passed":
        tail = "\n".join(log.tail(15))
        pytest.fail(f"{result.summary()}\nprofile {prof.name}" + (f" ({why})" if why else "")
                    + f"; last register accesses:\n{tail}" + (f"\n{link}" if link else ""), pytrace=False)
