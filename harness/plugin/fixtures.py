"""The plugin's fixtures: ``nvdla_spec`` (the session's target spec), ``nvdla_profile`` (the first
configured profile with the test's features), ``nvdla_target`` (the open transport of the test, on
every target, its register accesses logged with ``--nvdla-log``) and ``nvdla_driver``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ...drivers.driver import AccessLog, NvdlaDriver
from ...drivers.profiles import HardwareProfile
from ...drivers.transport import Transport
from ..targets import TargetSpec, open_target
from .keys import SPEC_KEY
from .logs import attach_access_log, log_dir, set_link_report
from .session import needed_features, profile_for, suite_spec

@pytest.fixture(scope="session")
def nvdla_spec(pytestconfig: pytest.Config) -> TargetSpec:
    """How the selected target is opened (kind, profile, paths)."""
    return pytestconfig.stash[SPEC_KEY]


@pytest.fixture
def nvdla_profile(request: pytest.FixtureRequest) -> HardwareProfile:
    """The profile this test runs on: the first configured one with the test's features."""
    feats = needed_features(request.node)
    prof = profile_for(request.config, feats)
    if prof is None:
        pytest.skip(f"no configured profile has {', '.join(sorted(feats))}")
    return prof


@pytest.fixture
def nvdla_target(request: pytest.FixtureRequest, nvdla_spec: TargetSpec,
                 nvdla_profile: HardwareProfile) -> Iterator[Transport]:  # fmt: skip
    """The open target of this test (a :class:`~nvdla_hil.drivers.transport.Transport` on every
    target: model, verilator and serial), released afterwards (even on failure)."""
    with open_target(suite_spec(request.config, nvdla_profile)) as target:
        if not isinstance(target, Transport):  # pragma: no cover - every target is one
            raise TypeError(f"{nvdla_spec.kind} target gave {type(target).__name__}, not an open Transport")
        if log_dir(request.config) is not None:
            log = AccessLog(nvdla_profile.regmap)
            target.add_observer(log)
            attach_access_log(request.config, request.node.nodeid, log, target.link_report())
            try:
                yield target
            finally:
                set_link_report(request.config, request.node.nodeid, target.link_report())
        else:
            yield target


@pytest.fixture
def nvdla_driver(nvdla_target, nvdla_profile: HardwareProfile) -> NvdlaDriver:  # noqa: ANN001
    """The register driver on the open target."""
    return NvdlaDriver(nvdla_target, nvdla_profile)
