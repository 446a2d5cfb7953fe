"""Packed test vectors, one pytest test per case under ``--nvdla-vectors`` (default: the
suites bundled in ``nvdla_hil.testvectors``; format in ``testvectors/README.md``).

A layer case runs on a fresh target opened on a configured profile that has the features
the case needs and the case's memory atom (its surfaces and strides are laid out for it):
the case's own profile when configured, else the first compatible one; otherwise the test is
skipped with the reason. Layout cases (pack / unpack round trips) need no target.

An explicit ``--nvdla-vectors`` / ``NVDLA_HIL_VECTORS`` that is missing or holds no case is a
collection error naming the option, never a skip.

A layer case that passes without its comparison telling anything (every compared output a single
value or all poison and no non-zero status / statistics register compared, or a result status the
golden lacks: :class:`~nvdla_hil.harness.vectors.run.Informativeness`) records the user property
``weak_pass`` (why): the regression summary counts and lists those passes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvdla_hil.drivers.driver import AccessLog, NvdlaDriver
from nvdla_hil.drivers.profiles import HardwareProfile, load_profile
from nvdla_hil.harness.plugin import PROFILES_KEY, SKIP_LACKS, attach_access_log, set_link_report, suite_spec
from nvdla_hil.harness.plugin.summary import WEAK_PASS_PROPERTY
from nvdla_hil.harness.targets import open_target
from nvdla_hil.harness.targets.workload import case_budget, explain_timeout
from nvdla_hil.harness.vectors import Case, bundled_root, find_cases, load_case, run_case
from nvdla_hil.harness.vectors.run import spec_for_case

#: the ``nvdla_warm_pool`` fixture (also registered by the nvdla_hil plugin; loading it twice is a no-op)
pytest_plugins = ["nvdla_hil.harness.plugin.warm"]


def _source(config: pytest.Config) -> str | None:
    if config.getoption("--nvdla-vectors", default=None):
        return "--nvdla-vectors"
    return "NVDLA_HIL_VECTORS" if os.environ.get("NVDLA_HIL_VECTORS") else None


def _root(config: pytest.Config) -> Path:
    opt = config.getoption("--nvdla-vectors", default=None) or os.environ.get("NVDLA_HIL_VECTORS")
    return Path(opt) if opt else bundled_root()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "vector_case" not in metafunc.fixturenames:
        return
    root = _root(metafunc.config)
    source = _source(metafunc.config)
    paths = find_cases(root) if root.is_dir() else []
    if source and not paths:
        what = "no such folder" if not root.exists() else "not a folder" if not root.is_dir() else \
            "no packed test vectors in this folder (no case.yaml below it)"
        raise pytest.Collector.CollectError(f"{source} {root}: {what}")
    if paths:
        ids = [p.relative_to(root).as_posix() if p != root else p.name for p in paths]
        metafunc.parametrize("vector_case", paths, ids=ids)
    else:
        metafunc.parametrize("vector_case", [None], ids=["no-vectors"])


def _profile_for(config: pytest.Config, case: Case) -> tuple[HardwareProfile | None, str]:
    configured: list[str] = config.stash[PROFILES_KEY]
    names = list(configured)
    own = load_profile(case.profile or "nv_small")
    order = ([own.name] if own.name in names else []) + [n for n in names if n != own.name]
    unit = case.unit or "SDP"
    block = "CDMA" if unit == "CONV" else unit  # a CONV layer needs the convolution pipeline, CDMA first
    for n in order:
        p = load_profile(n)
        if p.atom_bytes == own.atom_bytes and all(p.has(f) for f in case.features) and p.has_unit(block):
            return p, ""
    need = ", ".join(sorted(case.features)) or "-"
    return None, (f"{SKIP_LACKS}: {case.name} needs features [{need}] and a {own.atom_bytes}-byte memory atom "
                  f"(generated on {own.name}); no configured profile ({', '.join(names)}) has them")


def test_vector(vector_case: Path | None, pytestconfig: pytest.Config, request: pytest.FixtureRequest,
                nvdla_warm_pool) -> None:  # noqa: ANN001  # fmt: skip
    if vector_case is None:
        pytest.skip(f"no packed test vectors found under {_root(pytestconfig)}")
    case = load_case(vector_case)  # a VectorError is bad input: the plugin reports it so, the CLI exits 2
    if case.kind == "layout":
        result = run_case(case)
        if not result.passed:
            pytest.fail(result.summary(), pytrace=False)
        return
    prof, why = _profile_for(pytestconfig, case)
    if prof is None:
        pytest.skip(why)
    spec = suite_spec(pytestconfig, prof)
    if (case_spec := spec_for_case(spec, case)) is not spec:
        spec = case_spec
        request.node.user_properties.append(("model_semantics", spec.semantics))
    nodeid = request.node.nodeid
    with open_target(spec, warm=nvdla_warm_pool) as target:
        drv = NvdlaDriver(target, prof)
        log = drv.record(AccessLog(prof.regmap))
        attach_access_log(pytestconfig, nodeid, log, target.link_report)
        budget = case_budget(case, drv, target)
        result = run_case(case, target, drv, target_kind=spec.kind, timeout=budget.seconds)
        link = target.link_report()
        set_link_report(pytestconfig, nodeid, link)
    if result.weak_pass:
        assert result.informativeness is not None
        request.node.user_properties.append((WEAK_PASS_PROPERTY, result.informativeness.why))
    if result.status == "skipped":
        pytest.skip(f"{case.name}: {result.message}")
    if not result.passed:
        tail = "\n".join(log.tail(12))
        why_timeout = explain_timeout(result.message, budget)
        pytest.fail(f"{result.summary()}" + (f"\n{why_timeout}" if why_timeout else "")
                    + f"\nprofile {prof.name}, target {spec.kind}; last register accesses:\n{tail}"
                    + (f"\n{link}" if link else ""), pytrace=False)
