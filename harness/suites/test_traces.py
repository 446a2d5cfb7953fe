"""NVDLA's own trace tests, one pytest test per trace folder under ``--nvdla-traces``.

Each trace runs on a fresh target opened on the first configured profile that has the
features the trace programs (e.g. ``sdp_*_ew_*`` traces need the SDP EW/LUT of
nv_small_256_full). A unit the target cannot run is a skip naming the unit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvdla_hil.drivers.driver import AccessLog, NvdlaDriver
from nvdla_hil.harness.plugin import profile_for, suite_spec
from nvdla_hil.harness.targets import layer_timeout, open_target
from nvdla_hil.harness.traces import find_traces, parse_trace, run_trace, trace_features


def _trace_root(config: pytest.Config) -> Path | None:
    root = config.getoption("--nvdla-traces") or os.environ.get("NVDLA_TRACES")
    return Path(root) if root else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "trace_path" not in metafunc.fixturenames:
        return
    root = _trace_root(metafunc.config)
    paths = find_traces(root) if root and root.is_dir() else []
    if paths:
        metafunc.parametrize("trace_path", paths, ids=[p.name for p in paths])
    else:
        metafunc.parametrize("trace_path", [None], ids=["no-traces"])


def test_trace(trace_path: Path | None, pytestconfig: pytest.Config) -> None:
    if trace_path is None:
        root = _trace_root(pytestconfig)
        pytest.skip(f"no NVDLA traces found (--nvdla-traces PATH or NVDLA_TRACES; looked in {root})")
    trace = parse_trace(trace_path)
    feats = trace_features(trace)
    prof = profile_for(pytestconfig, feats)
    if prof is None:
        pytest.skip(f"{trace.name} needs {', '.join(sorted(feats))}: add a profile with them to --nvdla-config")
    spec = suite_spec(pytestconfig, prof)
    with open_target(spec) as target:
        drv = NvdlaDriver(target, prof)
        log = drv.record(AccessLog(prof.regmap))
        result = run_trace(trace, target, driver=drv, poison=pytestconfig.getoption("--poison"),
                           timeout=layer_timeout(target))
        link = target.link_report()
    if result.status == "skipped":
        pytest.skip(f"{trace.name}: {result.message}")
    if result.status != "passed":
        tail = "\n".join(log.tail(15))
        pytest.fail(f"{result.summary()}\nprofile {prof.name}; last register accesses:\n{tail}"
                    + (f"\n{link}" if link else ""), pytrace=False)
