"""pytest plugin: warm Verilator simulators, one per build and worker, reset between tests.

A fresh simulator costs 1.5-2.5 s of start-up and NVDLA's 8192-cycle reset per test. With this
plugin each pytest process (the single process, or each pytest-xdist worker) keeps one
simulator per RTL build open in a :class:`~nvdla_hil.harness.targets.verilator.WarmSimulators`
pool; a test gets it back in the state of a fresh start (external memory emptied, NVDLA and the
testbench reset: :meth:`VerilatorTarget.restore_fresh`). A simulator that crashed, hung or was
interrupted mid-request is replaced, never reused.

``nvdla_warm_pool`` (session fixture): the pool, or ``None`` (a fresh simulator per test) when
the target is not ``verilator`` or ``--nvdla-fresh-sims`` is given. Tests pass it on:
``open_target(spec, warm=nvdla_warm_pool)``; the shipped suites do.

``WarmPoolPlugin(pool)``: for a process that outlives one pytest session (a Dask worker),
``pytest.main(args, plugins=[WarmPoolPlugin(pool)])`` makes the fixture return that pool,
which the caller owns and closes (the session does not), so the simulators stay warm from one
session to the next. ``--nvdla-fresh-sims`` is ignored then: the owner chose.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from ..targets.verilator import WarmSimulators
from .keys import SPEC_KEY

__all__ = ["WarmPoolPlugin", "external_pool", "nvdla_warm_pool"]

_FRESH = "--nvdla-fresh-sims"
_log = logging.getLogger(__name__)


class WarmPoolPlugin:
    """Hands an externally owned :class:`WarmSimulators` pool to the ``nvdla_warm_pool`` fixture."""

    def __init__(self, pool: WarmSimulators) -> None:
        self.pool = pool

    def __repr__(self) -> str:
        return f"WarmPoolPlugin({self.pool!r})"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nvdla-hil")
    g.addoption(_FRESH, action="store_true", default=False, dest="nvdla_fresh_sims",
                help="verilator: start a fresh simulator for every test instead of resetting a warm one "
                     "(default: one simulator per build and worker, reset between tests)")


def external_pool(config: pytest.Config) -> WarmSimulators | None:
    """The pool of a registered :class:`WarmPoolPlugin`, if any."""
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, WarmPoolPlugin):
            return plugin.pool
    return None


def _target_kind(config: pytest.Config) -> str:
    spec = config.stash.get(SPEC_KEY, None)
    return spec.kind if spec is not None else "model"


@pytest.fixture(scope="session")
def nvdla_warm_pool(pytestconfig: pytest.Config) -> Iterator[WarmSimulators | None]:
    """The session's warm simulator pool, or ``None`` for a fresh target per test."""
    external = external_pool(pytestconfig)
    if external is not None:
        yield external
        return
    if _target_kind(pytestconfig) != "verilator" or pytestconfig.getoption("nvdla_fresh_sims", default=False):
        yield None
        return
    with WarmSimulators() as pool:
        yield pool
        _log.info("warm simulators: %s", pool.stats.summary())
