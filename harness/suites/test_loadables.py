"""NVDLA's software regression (``regression/`` of nvdla/sw): one pytest test per loadable under
``--nvdla-loadables`` (or ``NVDLA_LOADABLES``; ``nvdla-hil regress`` defaults to
``../shared/nvdla_sw``), run through NVDLA's own firmware (``--nvdla-sw`` or ``NVDLA_SW``) on the
selected target and compared by MD5 with its ``golden/<name>_<hash>/dla/o_000000.dimg``.

Loadables are found by their content (a FlatBuffers file shaped like a Loadable), whatever their
names. One without a golden still runs; it is then neither passed nor failed: a skip whose
reason starts with :data:`SKIP_NO_GOLDEN` ("ran, no golden"), with the output's MD5.

Each loadable runs on the profile it was written for (:func:`~nvdla_hil.harness.loadables.check.profile_for_loadable`:
8-byte-atom surfaces are nv_small's, the others nv_full's) when the run may use it, else it is a
skip counted as "lacks unit". A folder that was asked for but is missing or holds no loadable is
a collection error naming the option; without any source the suite is one skipped test saying
what to pass, and without an nvdla/sw checkout every loadable is a skip saying so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvdla_hil.harness.loadables.check import NO_GOLDEN
from nvdla_hil.harness.suites.loadable_runs import SKIP_NO_SW, firmware_checkout, run_on_its_profile  # noqa: F401

#: the ``nvdla_warm_pool`` fixture (also registered by the nvdla_hil plugin; loading it twice is a no-op)
pytest_plugins = ["nvdla_hil.harness.plugin.warm"]

SKIP_NO_SOURCE = "no loadables configured"
#: the outcome of a loadable that ran with no golden to compare its output with ("ran, no golden")
SKIP_NO_GOLDEN = NO_GOLDEN


def _source(config: pytest.Config) -> tuple[str | None, Path | None]:
    opt = config.getoption("--nvdla-loadables", default=None)
    if opt:
        return "--nvdla-loadables", Path(opt)
    env = os.environ.get("NVDLA_LOADABLES")
    return ("NVDLA_LOADABLES", Path(env)) if env else (None, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "loadable_case" not in metafunc.fixturenames:
        return
    from nvdla_hil.harness.loadables.check import find_loadables

    source, root = _source(metafunc.config)
    cases = find_loadables(root) if root is not None and root.is_dir() else []
    if source and not cases:
        what = "no such folder" if root is None or not root.exists() else \
            "no loadable below it (no FlatBuffers file shaped like a Loadable)"
        raise pytest.Collector.CollectError(f"{source} {root}: {what}")
    if cases:
        metafunc.parametrize("loadable_case", cases, ids=[c[0] for c in cases])
    else:
        metafunc.parametrize("loadable_case", [None], ids=["no-loadables-source"])


def test_loadable(loadable_case: tuple[str, Path, Path | None] | None, pytestconfig: pytest.Config,
                  record_property, nvdla_warm_pool) -> None:  # noqa: ANN001  # fmt: skip
    if loadable_case is None:
        pytest.skip(f"{SKIP_NO_SOURCE}: pass --nvdla-loadables PATH (or NVDLA_LOADABLES) naming NVDLA's software "
                    "regression folder (flatbufs/ and golden/, e.g. ../shared/nvdla_sw)")
    name, path, golden = loadable_case
    sw = firmware_checkout(pytestconfig, name)
    v, spec, prof = run_on_its_profile(name, path, golden, pytestconfig, record_property, nvdla_warm_pool, sw)
    if v.outcome == SKIP_NO_GOLDEN:
        record_property("outcome", SKIP_NO_GOLDEN)
        pytest.skip(f"{SKIP_NO_GOLDEN}: {name} ran on {spec.kind} ({prof.name}), output MD5 {v.md5}; no "
                    f"golden/{name}_*/dla/o_000000.dimg to compare it with")
    if v.status != "passed":
        pytest.fail(f"{name} on {spec.kind} ({prof.name}): {v.message}", pytrace=False)
