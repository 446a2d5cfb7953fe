"""pytest plugin (entry point ``nvdla_hil``): target selection, fixtures, markers, summary.

Options, all prefixed ``--nvdla-`` (each with an environment-variable fallback, as labgrid's
``--lg-env``/``LG_ENV``):

``--nvdla-target {model,verilator,serial}``  NVDLA_HIL_TARGET, default ``model``
``--nvdla-config P[,P2...]|all``       NVDLA_HIL_CONFIG, hardware profile(s) the run may use; a test runs
                                       on the first profile that has the features it needs (default
                                       ``nv_small,nv_small_256_full``; ``all``: every shipped profile;
                                       a path to a ``spec/defs/<config>.spec`` is a profile too)
``--nvdla-traces PATH``                NVDLA_TRACES, folder of NVDLA trace tests: one configuration's,
                                       or a folder of configuration folders (default with
                                       ``--nvdla-hw``: the checkout's ``verif/tests/trace_tests``)
``--nvdla-vectors PATH``               NVDLA_HIL_VECTORS, folder of packed test vectors (default: bundled)
``--nvdla-hw PATH``                    NVDLA_HW, the user's nvdla/hw checkout (verilator target)
``--nvdla-lab FILE``                   NVDLA_HIL_LAB (serial target)
``--nvdla-board NAME|pool:NAME|A,B``   NVDLA_HIL_BOARD: a board, a pool of the lab file or a list
``--nvdla-board-wait SECONDS``         fewer boards than workers: how long a test waits for one (300)
``--nvdla-lg-env FILE``, ``--nvdla-lg-place NAME``, ``--nvdla-lg-coordinator HOST:PORT``
                                       LG_ENV / LG_PLACE / LG_COORDINATOR: serial target on a labgrid
                                       place instead of a lab file (the session probes every board first)
``--nvdla-model-semantics {rtl,cmod}`` the model follows the RTL (default) or NVDLA's C model
``--nvdla-poison``                     poison checked output regions before each trace
``--nvdla-waves``                      verilator: dump FST waves of every test
``--nvdla-rtl-clock-gating {auto,on,off}`` verilator: NVDLA's clock gating (auto: off for networks, nvdla/hw#183)
``--nvdla-rtl-build {plain,pgo}``      verilator: the plain or the profile-guided simulator build
``--nvdla-failure-waves {rerun,off}``  verilator: re-run a failed test once with waves (default rerun)
``--nvdla-waves-dir DIR``              where those wave files go (default ``<--nvdla-log>/../waves``)
``--nvdla-log DIR``                    write each test's register-access log (and link record) to DIR
``--nvdla-allow-empty``                a session in which no test ran is not an error

The unprefixed ``--target``, ``--lab``, ``--board``, ``--model-semantics``, ``--poison`` and
``--waves`` of earlier versions are deprecated aliases (a ``PytestDeprecationWarning`` when
used). Each is registered only if no other plugin or initial conftest has registered that
option string or its dest (pytest-embedded's ``--target`` has dest ``target``), and only after
all of them have, so installing this plugin beside another never breaks either.

Misconfiguration is never green. Before the first test (``pytest.UsageError``, pytest exit 4;
``nvdla-hil regress`` exits 2): an explicit ``--nvdla-traces``/``--nvdla-vectors`` that is not a
folder, or holds no tests; ``--nvdla-target verilator`` without ``--nvdla-hw``; ``--nvdla-target
serial`` without a lab file and board (or a lab file that does not load); a board another
regression holds. At collection (a collection error naming the source, exit 2): ``NVDLA_TRACES``
/ ``NVDLA_HIL_VECTORS`` naming a missing or empty folder. At the end: a session of the shipped
suites (or of ``nvdla-hil regress``) in which tests were collected but none passed or failed
(all skipped or deselected) exits 5 (``NO_TESTS_COLLECTED``) unless ``--nvdla-allow-empty``.

Register-access logs: suites call :func:`attach_access_log` with their :class:`AccessLog`
(and the target's link report); with ``--nvdla-log DIR`` the plugin writes it after the
test, whatever its outcome. The ``nvdla_target`` fixture does this by itself.

Board locks (serial target): the controller process (the only process without xdist) takes a
:class:`~nvdla_hil.harness.boards.lab.SessionBoardLock` on each board it will use in
``pytest_configure`` and holds them until ``pytest_unconfigure``: one board, or with a pool
(``--nvdla-board pool:NAME`` or a comma list) one board per xdist worker, as many as the pool
has free. Workers receive the lock files and the controller's PID (``workerinput``), check in
their own ``pytest_configure`` that the controller holds them, and each test's target takes only
a session board's ``.use`` lock: worker gwK's own board K first, so with as many boards as
workers each worker has its board for the whole session; with fewer, tests take turns, waiting
at most ``--nvdla-board-wait`` seconds. A board is never used by two tests at once.

JUnit XML: the plugin sets ``junit_family=xunit1`` unless the user set one, gives the shipped
suites' tests the classname ``nvdla_hil.harness.suites.<module>`` however they were collected
(``--pyargs`` of an installed module otherwise gives an empty one), and records per test the
properties ``target``, ``profile``, ``board`` (serial) or ``rtl_build`` (verilator build key),
``model_semantics`` (model), ``seed`` (packed vectors), ``waves`` (a re-run's wave file), and
``lock_wait_s`` / ``lock_waits`` (seconds the test waited for a lock another process held - a
build, the C model, a board - and which: apart from the test's own work).

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
