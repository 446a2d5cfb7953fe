"""nv_full's own trace tests (nvdla/hw nvdlav1 ``verif/traces/traceplayer``; ``input.txn``
format, :mod:`nvdla_hil.harness.traces.txn`), one pytest test per test folder under ``--nvdla-txn``
(or ``NVDLA_TXN_TESTS``).

They run on the first configured profile that is an nvdlav1 design (nv_full); when the run may
use none (a Verilator run of the v2 RTL), each is a skip counted as "lacks unit". A folder that
was asked for but is missing or empty is a collection error naming the option.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvdla_hil.drivers.driver import AccessLog
from nvdla_hil.harness.plugin import (
    SKIP_LACKS,
    SKIP_NOT_MODELLED,
    attach_access_log,
    configured_profiles,
    profile_for,
    set_link_report,
    suite_spec,
)
from nvdla_hil.harness.targets import layer_timeout, open_target
from nvdla_hil.harness.traces.limits import TraceError
from nvdla_hil.harness.traces.txn import find_txns, parse_txn, run_txn

#: the ``nvdla_warm_pool`` fixture (also registered by the nvdla_hil plugin; loading it twice is a no-op)
pytest_plugins = ["nvdla_hil.harness.plugin.warm"]


def _source(config: pytest.Config) -> tuple[str | None, Path | None]:
    opt = config.getoption("--nvdla-txn", default=None)
    if opt:
        return "--nvdla-txn", Path(opt)
    env = os.environ.get("NVDLA_TXN_TESTS")
    return ("NVDLA_TXN_TESTS", Path(env)) if env else (None, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "txn_test" not in metafunc.fixturenames:
        return
    source, root = _source(metafunc.config)
    tests = find_txns(root) if root is not None and root.is_dir() else []
    if source and not tests:
        what = "no such folder" if root is None or not root.exists() else "no input.txn test below it"
        raise pytest.Collector.CollectError(f"{source} {root}: {what}")
    if tests:
        metafunc.parametrize("txn_test", tests, ids=[f"nv_full/{p.name}" for p in tests])
    else:
        metafunc.parametrize("txn_test", [None], ids=["no-txn-source"])


def test_txn(txn_test: Path | None, pytestconfig: pytest.Config, request: pytest.FixtureRequest,
             record_property, nvdla_warm_pool) -> None:  # noqa: ANN001  # fmt: skip
    if txn_test is None:
        pytest.skip("no nv_full traceplayer tests configured: pass --nvdla-txn PATH (or set NVDLA_TXN_TESTS)")
    bad: TraceError | None = None
    try:
        test = parse_txn(txn_test)
    except TraceError as e:
        bad = e
    if bad is not None:
        raise bad  # bad input: the plugin reports it as such, the CLI exits 2
    prof = profile_for(pytestconfig, (), "v1")
    if prof is None:
        pytest.skip(f"{SKIP_LACKS}: {test.name} is an nvdlav1 (nv_full) test; no configured profile "
                    f"({', '.join(configured_profiles(pytestconfig))}) is an nvdlav1 design")
    record_property("profile", prof.name)
    spec = suite_spec(pytestconfig, prof)
    with open_target(spec, warm=nvdla_warm_pool) as target:
        log = AccessLog(prof.regmap)
        target.add_observer(log)
        attach_access_log(request, request.node.nodeid, log)
        try:
            result = run_txn(test, target, profile=prof, timeout=layer_timeout(target))
        except TraceError as e:
            bad = e
        set_link_report(request, request.node.nodeid, target.link_report())
    if bad is not None:
        raise bad  # bad input: the plugin reports it as such, the CLI exits 2
    if result.status == "skipped":
        pytest.skip(f"{SKIP_NOT_MODELLED}: {test.name} on {prof.name}: {result.message.removeprefix('unit not modelled: ')}")
    if result.status != "passed":
        tail = "\n".join(log.tail(15))
        pytest.fail(f"{result.summary()}\nprofile {prof.name}; last register accesses:\n{tail}", pytrace=False)
