"""pytest plugin (entry point ``nvdla_hil``): target selection, fixtures, markers, summary.

Options: every ``--nvdla-*`` option, its environment-variable fallback (as labgrid's
``--lg-env``/``LG_ENV``) and its default are in ``pytest --help`` (group "nvdla-hil",
:mod:`.options`); the README's "Running things" shows them in use. The unprefixed names of earlier
versions are deprecated aliases, registered only where no other plugin has taken the name.

Misconfiguration is never green: before the first test, a run that cannot test anything (a trace
or vector folder given that is not one or holds no tests, a target without what it needs - an
nvdla/hw checkout: :func:`~nvdla_hil.harness.targets.checkout_problem`, a lab file and board -, a
board another regression holds) is a ``pytest.UsageError`` (pytest exit 4; ``nvdla-hil regress``
exits 2); a session of the shipped suites in which tests were collected but none passed or failed
exits 5 unless ``--nvdla-allow-empty``.

Fixtures: ``nvdla_spec`` (session :class:`TargetSpec`), ``nvdla_target`` (the open
:class:`~nvdla_hil.drivers.transport.Transport` of the test, on every target),
``nvdla_driver`` (:class:`NvdlaDriver` on it), ``nvdla_profile``.
Marker: ``@pytest.mark.nvdla_feature("sdp_lut", ...)`` skips (with the reason) when no
configured profile has the features; the fixtures then open the target on a profile that has them.

Where each part lives (``__init__`` only gathers them: pytest reads the hooks and fixtures of this
module object, the entry point):

==================  =================================================================================
``keys``            the run-wide stash keys and :func:`configured_profiles` (a leaf of the plugin)
``options``         every ``--nvdla-*`` option, environment fallbacks, deprecated aliases, folder checks
``session``         ``pytest_configure``: the session's target spec and profiles; profile selection
``boards``          board locks, labgrid places, dead-board stop (serial target)
``fixtures``        ``nvdla_spec``, ``nvdla_profile``, ``nvdla_target``, ``nvdla_driver``
``logs``            per-test register-access logs (``--nvdla-log``)
``junit``           JUnit classname and ``<properties>``, report attributes (bad input, dead board)
``waves``           re-run of a failed verilator test with waves
``summary``         the summary table, the oracle split, "nothing ran is not green"
``coverage``        the session's functional coverage table and ``coverage.json``
``health``          infrastructure failures apart from test failures, board health checks (a plugin)
``results``         the results database and live progress (a plugin)
``warm``            warm Verilator simulators (a plugin)
``cluster``         the Dask cluster loop; ``session_host``, ``collector``: a worker's sessions
==================  =================================================================================
"""

from __future__ import annotations

from .boards import pytest_sessionstart, pytest_unconfigure
from .fixtures import nvdla_driver, nvdla_profile, nvdla_spec, nvdla_target
from .junit import is_bad_input, item_is_ours, pytest_runtest_makereport, pytest_runtest_protocol, vector_golden
from .keys import (
    BOARD_DEAD_KEY,
    BOARD_NOTE_KEY,
    COUNTS_KEY,
    CURRENT_ITEMS_KEY,
    GOLDEN_KEY,
    LOCK_KEY,
    LOGS_KEY,
    OPENED_KEY,
    OPTS_KEY,
    PROFILES_KEY,
    RERUN_WAVES_KEY,
    SPEC_KEY,
    UNWRITTEN_KEY,
    WAVES_SEEN_KEY,
    configured_profiles,
)
from .logs import attach_access_log, log_dir, pytest_runtest_teardown, set_link_report, write_access_log
from .options import (
    DEFAULT_PROFILES,
    DEPRECATED_ALIASES,
    add_deprecated_aliases,
    check_trace_source,
    check_vector_source,
    nvdla_option,
    pytest_addoption,
    pytest_cmdline_main,
    pytest_load_initial_conftests,
    session_is_ours,
)
from .session import (
    profile_for,
    profile_for_trace,
    pytest_configure,
    pytest_runtest_setup,
    suite_spec,
    trace_root,
)
from .summary import (
    SELF_CONSISTENCY,
    SKIP_LACKS,
    SKIP_NOT_MODELLED,
    RegressionSummary,
    oracle_split,
    pytest_collection_modifyitems,
    pytest_sessionfinish,
)
from .waves import pytest_terminal_summary, rerun_waves

#: plugins that come with this one: warm Verilator simulators (``nvdla_warm_pool`` fixture,
#: ``--nvdla-fresh-sims``), the results database and live progress, infrastructure failures apart
#: from test failures (each a module of its own: their hooks share names with the ones above)
pytest_plugins = ["nvdla_hil.harness.plugin.warm", "nvdla_hil.harness.plugin.results",
                  "nvdla_hil.harness.plugin.health"]

__all__ = [
    # run-wide keys
    "BOARD_DEAD_KEY", "BOARD_NOTE_KEY", "COUNTS_KEY", "CURRENT_ITEMS_KEY", "GOLDEN_KEY", "LOCK_KEY", "LOGS_KEY",
    "OPENED_KEY", "OPTS_KEY", "PROFILES_KEY", "RERUN_WAVES_KEY", "SPEC_KEY", "UNWRITTEN_KEY", "WAVES_SEEN_KEY",
    # what suites and the command line use
    "DEFAULT_PROFILES", "DEPRECATED_ALIASES", "SELF_CONSISTENCY", "SKIP_LACKS", "SKIP_NOT_MODELLED", "RegressionSummary",
    "add_deprecated_aliases", "attach_access_log", "check_trace_source", "check_vector_source", "configured_profiles",
    "is_bad_input", "item_is_ours", "log_dir", "nvdla_option", "oracle_split", "profile_for", "profile_for_trace",
    "rerun_waves", "session_is_ours", "set_link_report", "suite_spec", "trace_root", "vector_golden",
    "write_access_log",
    # hooks (pytest looks them up on this module)
    "pytest_addoption", "pytest_cmdline_main", "pytest_collection_modifyitems", "pytest_configure",
    "pytest_load_initial_conftests", "pytest_runtest_makereport", "pytest_runtest_protocol", "pytest_runtest_setup",
    "pytest_runtest_teardown", "pytest_sessionfinish", "pytest_sessionstart", "pytest_terminal_summary",
    "pytest_unconfigure",
    # fixtures
    "nvdla_driver", "nvdla_profile", "nvdla_spec", "nvdla_target",
]
