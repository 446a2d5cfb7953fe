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
:class:`~nvdla_hil.harness.lab.SessionBoardLock` on each board it will use in
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
``model_semantics`` (model), ``seed`` (packed vectors) and ``waves`` (a re-run's wave file).

Fixtures: ``nvdla_spec`` (session :class:`TargetSpec`), ``nvdla_target`` (the open
:class:`~nvdla_hil.drivers.transport.Transport` of the test, on every target),
``nvdla_driver`` (:class:`NvdlaDriver` on it), ``nvdla_profile``.
Marker: ``@pytest.mark.nvdla_feature("sdp_lut", ...)`` skips (with the reason) when no
configured profile has the features; the fixtures then open the target on a profile that has them.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ..drivers.driver import AccessLog, NvdlaDriver
from ..drivers.uartbone import BoardDeadError
from ..drivers.profiles import HardwareProfile, load_profile
from ..drivers.transport import Transport
from .coverage import Coverage, coverage_for_session, session_sink
from .targets import TARGETS, TargetSpec, open_target

#: warm Verilator simulators (``nvdla_warm_pool`` fixture, ``--nvdla-fresh-sims``) come with this plugin
pytest_plugins = ["nvdla_hil.harness.warm", "nvdla_hil.harness.results.recorder",  # + results database, live progress
                  "nvdla_hil.harness.boards_health"]  # infrastructure failures apart from test failures

SPEC_KEY = pytest.StashKey[TargetSpec]()
PROFILES_KEY = pytest.StashKey[list[str]]()
LOCK_KEY = pytest.StashKey[object]()
LOGS_KEY = pytest.StashKey[dict]()
COUNTS_KEY = pytest.StashKey[dict]()
OPTS_KEY = pytest.StashKey[dict]()
BOARD_NOTE_KEY = pytest.StashKey[str]()
CURRENT_ITEMS_KEY = pytest.StashKey[list[pytest.Item]]()  # the test running now (innermost last)
RERUN_WAVES_KEY = pytest.StashKey[Path]()
WAVES_SEEN_KEY = pytest.StashKey[list]()
BOARD_DEAD_KEY = pytest.StashKey[dict]()
UNWRITTEN_KEY = pytest.StashKey[list[str]]()  # results that could not be written: 'path: why'
#: per test (item stash): the targets it opened, with their specs
OPENED_KEY = pytest.StashKey[list]()

DEFAULT_PROFILES = "nv_small,nv_small_256_full"

#: skip-reason prefixes the summary counts apart: a unit the target cannot run yet, and a
#: feature the configuration's hardware does not have
SKIP_NOT_MODELLED = "not modelled"
SKIP_LACKS = "lacks unit"


#: deprecated option -> (its prefixed name, the dest the alias stores into). Each alias is
#: registered only when no other plugin has taken the option string or its natural dest
#: (pytest-embedded's ``--target`` is dest ``target``), and only after every plugin and initial
#: conftest has added its options, so it can never break another plugin's registration.
DEPRECATED_ALIASES = {
    "--target": "--nvdla-target",
    "--lab": "--nvdla-lab",
    "--board": "--nvdla-board",
    "--model-semantics": "--nvdla-model-semantics",
    "--poison": "--nvdla-poison",
    "--waves": "--nvdla-waves",
}
#: option name (without ``--nvdla-``) -> how the plugin reads it
_ALIASED = ("target", "lab", "board", "model-semantics", "poison", "waves")


def _alias_dest(old: str) -> str:
    return "nvdla_deprecated_" + old.lstrip("-").replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nvdla-hil", "NVDLA hardware-in-the-loop")
    g.addoption("--nvdla-target", choices=TARGETS, default=None, dest="nvdla_target",
                help="where tests run (default: model, or NVDLA_HIL_TARGET)")
    g.addoption("--nvdla-config", default=None, help=f"hardware profile(s), comma-separated, or all (default: all on the model target, "
                     f"{DEFAULT_PROFILES} elsewhere)")
    g.addoption("--nvdla-traces", default=None, help="folder of NVDLA trace tests (or NVDLA_TRACES)")
    g.addoption("--nvdla-txn", default=None, help="folder of nv_full's traceplayer tests, input.txn (or NVDLA_TXN_TESTS)")
    g.addoption("--nvdla-loadables", default=None,
                help="NVDLA's software regression folder: flatbufs/ and golden/ (or NVDLA_LOADABLES)")
    g.addoption("--nvdla-sw", default=None, help="nvdla/sw checkout whose kmd/firmware runs the loadables (or NVDLA_SW)")
    g.addoption("--nvdla-vectors", default=None, help="folder of packed test vectors (default: bundled suites)")
    g.addoption("--nvdla-hw", default=None, help="nvdla/hw checkout for the verilator target (or NVDLA_HW)")
    g.addoption("--nvdla-lab", default=None, dest="nvdla_lab", help="lab file for the serial target (or NVDLA_HIL_LAB)")
    g.addoption("--nvdla-board", default=None, dest="nvdla_board",
                help="serial target: a board of the lab file, pool:NAME (or a pool's name) or a comma list of "
                     "boards; with -n N each xdist worker gets a board of its own (or NVDLA_HIL_BOARD)")
    g.addoption("--nvdla-board-wait", type=float, default=300.0, metavar="SECONDS",
                help="serial target with fewer boards than workers: how long a test waits for a board (default 300)")
    g.addoption("--nvdla-model-semantics", choices=("rtl", "cmod"), default=None, dest="nvdla_model_semantics",
                help="model follows the RTL (default) or NVDLA's C model")
    g.addoption("--nvdla-poison", action="store_true", default=False, dest="nvdla_poison",
                help="poison checked output regions before each trace")
    g.addoption("--nvdla-waves", action="store_true", default=False, dest="nvdla_waves",
                help="verilator target: dump FST waves of every test")
    g.addoption("--nvdla-failure-waves", choices=("rerun", "off"), default="rerun",
                help="verilator target: re-run a failed test once with waves and link the wave file (default rerun)")
    g.addoption("--nvdla-waves-dir", default=None,
                help="where re-run wave files go (default: beside --nvdla-log, else a temp folder)")
    g.addoption("--nvdla-log", default=None, help="folder for per-test register access logs")
    g.addoption("--nvdla-model-bug", action="append", default=None, metavar="SPEC",
                help="model target: inject a datapath bug into the target (never the reference), e.g. "
                     "SDP.D_CVT_OFFSET.CVT_OFFSET+1 (harness/targets/faults.py); repeatable")
    g.addoption("--nvdla-summary", action="store_true", help="print a per-test summary table at the end")
    g.addoption("--nvdla-summary-file", default=None, help="also write the summary table to this file")
    g.addoption("--nvdla-cluster", default=None, metavar="ADDR", dest="nvdla_cluster",
                help="run the tests on the Dask distributed cluster whose scheduler is ADDR (tcp://host:8786)")
    g.addoption("--nvdla-max-board-failures", type=int, default=3, metavar="N", dest="nvdla_max_board_failures",
                help="stop the session after N consecutive tests failed because the board is dead (0: never; default 3)")
    g.addoption("--nvdla-lg-env", default=None, metavar="FILE", dest="nvdla_lg_env",
                help="serial target without a lab file: the board is the labgrid place named by this labgrid "
                     "environment (its RemotePlace; or LG_ENV)")
    g.addoption("--nvdla-lg-place", default=None, metavar="NAME", dest="nvdla_lg_place",
                help="serial target without a lab file: the board is this labgrid place (or LG_PLACE)")
    g.addoption("--nvdla-lg-coordinator", default=None, metavar="HOST:PORT", dest="nvdla_lg_coordinator",
                help="labgrid coordinator for --nvdla-lg-place (or LG_COORDINATOR; default labgrid's)")
    g.addoption("--nvdla-allow-empty", action="store_true",
                help="a session in which no test ran (all skipped or deselected) is not an error")


def _taken(parser: pytest.Parser, opt: str, dest: str) -> bool:
    """True when some plugin registered option string ``opt`` or dest ``dest`` already."""
    for group in getattr(parser, "_groups", []):
        for o in group.options:
            if opt in o.names() or getattr(o, "dest", None) == dest:
                return True
    actions = getattr(getattr(parser, "optparser", None), "_option_string_actions", {})
    return opt in actions or any(getattr(a, "dest", None) == dest for a in actions.values())


def add_deprecated_aliases(parser: pytest.Parser) -> list[str]:
    """Register the unprefixed aliases nobody else has taken; returns those registered."""
    g = parser.getgroup("nvdla-hil", "NVDLA hardware-in-the-loop")
    done = []
    for old, new in DEPRECATED_ALIASES.items():
        natural = old.lstrip("-").replace("-", "_")
        if _taken(parser, old, natural) or _taken(parser, old, _alias_dest(old)):
            continue
        kw: dict = {"dest": _alias_dest(old), "help": f"deprecated alias of {new}"}
        if old == "--target":
            kw.update(choices=TARGETS, default=None)
        elif old == "--model-semantics":
            kw.update(choices=("rtl", "cmod"), default=None)
        elif old in ("--poison", "--waves"):
            kw.update(action="store_true", default=False)
        else:
            kw.update(default=None)
        try:
            g.addoption(old, **kw)
        except (ValueError, argparse.ArgumentError):  # taken after all: another plugin's, keep theirs
            continue
        done.append(old)
    return done


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]):  # noqa: ANN201
    """After every plugin and initial conftest has registered its options, register the
    deprecated aliases that clash with none of them."""
    try:
        return (yield)
    finally:
        add_deprecated_aliases(parser)


def nvdla_option(config: pytest.Config, name: str):  # noqa: ANN201
    """The value of ``--nvdla-NAME`` (``target``, ``lab``, ``board``, ``model-semantics``,
    ``poison``, ``waves``), or of its deprecated unprefixed alias when that was given."""
    opts = config.stash.get(OPTS_KEY, None)
    if opts is not None and name in opts:
        return opts[name]
    return _resolve_option(config, name, warn=False)


def _resolve_option(config: pytest.Config, name: str, warn: bool = True):  # noqa: ANN202
    new_opt = f"--nvdla-{name}"
    new = config.getoption(new_opt, default=None)
    old_opt = f"--{name}"
    old = getattr(config.option, _alias_dest(old_opt), None)
    if old in (None, False):
        return new
    if new not in (None, False) and new != old:
        raise pytest.UsageError(f"{old_opt} {old} and {new_opt} {new} disagree; pass only {new_opt}")
    if warn and not _is_worker(config):
        config.issue_config_time_warning(pytest.PytestDeprecationWarning(
            f"nvdla-hil: {old_opt} is deprecated, use {new_opt} (the unprefixed name clashes with other "
            f"plugins, e.g. pytest-embedded's --target)"), stacklevel=2)
    return old


def _opt(config: pytest.Config, name: str, env: str, default: str | None = None) -> str | None:
    v = config.getoption(name)
    return v if v is not None else os.environ.get(env, default)


def _check_folder(opt: str, value: str, what: str) -> Path:
    p = Path(value)
    if not p.exists():
        raise pytest.UsageError(f"{opt} {value}: no such folder ({what})")
    if not p.is_dir():
        raise pytest.UsageError(f"{opt} {value}: not a folder ({what})")
    return p


def check_trace_source(opt: str, value: str) -> list:
    """The trace sets under ``value``; UsageError naming ``opt`` when missing or empty."""
    from .traces import find_trace_sets

    p = _check_folder(opt, value, "expected NVDLA trace tests: one configuration's folder or a folder of them")
    sets = find_trace_sets(p)
    if not sets:
        raise pytest.UsageError(f"{opt} {value}: no NVDLA trace tests in this folder (no <trace>/<name>.cfg, "
                                f"nor <config>/<trace>/<name>.cfg)")
    return sets


def check_vector_source(opt: str, value: str) -> list:
    """The packed-vector cases under ``value``; UsageError naming ``opt`` when missing or empty."""
    from .vectors import find_cases

    p = _check_folder(opt, value, "expected packed test vectors")
    cases = find_cases(p)
    if not cases:
        raise pytest.UsageError(f"{opt} {value}: no packed test vectors in this folder (no case.yaml below it)")
    return cases


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _xdist_workers(config: pytest.Config) -> int:
    """How many xdist workers this session runs tests on (1 without xdist)."""
    if _is_worker(config):
        return max(1, int(config.workerinput.get("workercount", 1)))  # type: ignore[attr-defined]
    try:
        dist, tx = config.getoption("dist"), config.getoption("tx")
    except ValueError:  # xdist not loaded
        return 1
    if dist == "no" or not tx:
        return 1
    n = 0
    for spec in tx:
        head, star, _ = str(spec).partition("*")
        n += int(head) if star and head.isdigit() else 1
    return max(1, n)


def session_is_ours(config: pytest.Config) -> bool:
    """Whether this pytest session runs nvdla-hil's tests: a ``--nvdla-*`` option on the command
    line, an argument naming the ``nvdla_hil`` package or a file inside it, or nvdla-hil's own
    source tree as the rootdir. Installed, the plugin loads into every pytest session on the
    machine; another project's session is left exactly as pytest would run it."""
    args = [str(a) for a in (getattr(config.invocation_params, "args", ()) or ())]
    if _asked_for_nvdla(config):
        return True
    pkg = Path(__file__).resolve().parents[1]
    for a in [*args, *(str(x) for x in getattr(config, "args", []) or [])]:
        if a.startswith("-"):
            continue
        if a.split("::", 1)[0].startswith("nvdla_hil"):
            return True
        try:
            p = Path(a.split("::", 1)[0]).resolve()
        except (OSError, ValueError):
            continue
        if p == pkg or pkg in p.parents:
            return True
    try:
        return Path(config.rootpath).resolve() == pkg
    except (OSError, AttributeError):
        return False


def _asked_for_nvdla(config: pytest.Config) -> bool:
    """A ``--nvdla-*`` option on the command line: the user runs this session for nvdla-hil."""
    args = [str(a) for a in (getattr(config.invocation_params, "args", ()) or ())]
    return any(a.startswith(("--nvdla-", "--nvdla_")) for a in args)


def item_is_ours(item: pytest.Item) -> bool:
    """A test of nvdla-hil: the shipped suites, any test of a session started with ``--nvdla-*``
    options (a user's own tests driving a target through ``suite_spec``), or a test using one of
    the plugin's fixtures or markers (``nvdla_target``, ``nvdla_feature``, ...). Only these get
    nvdla-hil's JUnit ``<properties>``."""
    if _is_suite(item) or _asked_for_nvdla(item.config):
        return True
    if any(str(f).startswith("nvdla_") for f in getattr(item, "fixturenames", ()) or ()):
        return True
    return any(m.name.startswith("nvdla_") for m in item.iter_markers())


def _labgrid_beside_embedded(config: pytest.Config) -> None:
    """labgrid (the ``[lab]`` extra) and pytest-embedded both define a ``target`` fixture;
    labgrid's wins and skips without ``--lg-env``, and pytest-embedded's autouse fixtures ask
    for ``target``, so every test of every project skipped ("missing environment config (use
    --lg-env)"). In a session that does not use labgrid (no ``--lg-env``/``--lg-coordinator``,
    no ``LG_ENV``), labgrid's plugin is taken out before the session collects its fixtures,
    exactly as ``-p no:labgrid`` would; a session that uses labgrid keeps it.

    Runs before the session exists (``pytest_cmdline_main``): pytest replays every plugin
    registration to the session's fixture manager, an unregistered plugin included, so
    labgrid's fixtures are also taken off its plugin module (in this process only)."""
    pm = config.pluginmanager
    lab = pm.get_plugin("labgrid")
    if lab is None or pm.get_plugin("pytest_embedded") is None:
        return
    if (config.getoption("lg_env", default=None) or config.getoption("lg_coordinator", default=None)
            or os.environ.get("LG_ENV")):
        return
    pm.unregister(lab)
    for name in ("env", "target", "strategy"):
        if callable(getattr(lab, name, None)):
            delattr(lab, name)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    _labgrid_beside_embedded(config)


def _set_junit_family(config: pytest.Config) -> None:
    """``junit_family=xunit1`` unless the user chose one: per-test ``<properties>`` (target,
    profile, board or RTL build, semantics, seed) are valid JUnit only in xunit1. Only in a
    session that runs nvdla-hil's tests (:func:`session_is_ours`)."""
    if not session_is_ours(config):
        return
    try:
        overrides = config.getoption("override_ini", default=None) or []
        if any(str(o).split("=", 1)[0].strip() == "junit_family" for o in overrides):
            return
        inicfg = getattr(config, "_inicfg", None)
        if inicfg is None:  # pytest 8
            inicfg = config.inicfg
        if "junit_family" in inicfg:
            return
        config._inicache["junit_family"] = "xunit1"  # read once, by junitxml's pytest_configure
    except Exception:  # noqa: BLE001 - a pytest without these internals keeps its own default
        return


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "nvdla_feature(*features): needs hardware features (skipped when absent)")
    config.addinivalue_line("markers", "nvdla_targets(*kinds): runs only on these targets")
    config.stash[LOGS_KEY] = {}
    config.stash[COUNTS_KEY] = {"ran": 0, "suite": 0, "reports": 0}
    config.stash[WAVES_SEEN_KEY] = []
    _set_junit_family(config)
    opts = {name: _resolve_option(config, name) for name in _ALIASED}
    opts["model-semantics"] = opts["model-semantics"] or "rtl"
    config.stash[OPTS_KEY] = opts
    kind = opts["target"] or os.environ.get("NVDLA_HIL_TARGET") or "model"
    if kind not in TARGETS:
        raise pytest.UsageError(f"NVDLA_HIL_TARGET={kind!r}: expected one of {', '.join(TARGETS)}")
    if config.getoption("--nvdla-traces") is not None:
        check_trace_source("--nvdla-traces", config.getoption("--nvdla-traces"))
    if config.getoption("--nvdla-vectors") is not None:
        check_vector_source("--nvdla-vectors", config.getoption("--nvdla-vectors"))
    # the model target can be every configuration at no cost: by default a run may use them all,
    # so no bundled vector or trace is skipped for a profile nobody asked for; a simulator or a
    # board is one build: the default there is nv_small (+ nv_small_256_full for SDP EW)
    default = "all" if kind == "model" else DEFAULT_PROFILES
    profiles = [p.strip() for p in (_opt(config, "--nvdla-config", "NVDLA_HIL_CONFIG", default) or "").split(",") if p.strip()]
    if profiles == ["all"]:
        from ..drivers.profiles import list_profiles

        profiles = list_profiles()
    lab = opts["lab"] or os.environ.get("NVDLA_HIL_LAB")
    board = opts["board"] or os.environ.get("NVDLA_HIL_BOARD")
    hw = _opt(config, "--nvdla-hw", "NVDLA_HW")
    extra: dict = {}
    if kind == "verilator" and not hw:
        raise pytest.UsageError("--nvdla-target verilator needs an nvdla/hw checkout: --nvdla-hw PATH (or NVDLA_HW)")
    if kind == "verilator" and hw and not Path(hw).is_dir():
        raise pytest.UsageError(f"--nvdla-hw {hw}: no such folder (the nvdla/hw checkout for --nvdla-target verilator)")
    if kind == "serial":
        if not lab:
            lab, board = _labgrid_lab(config, profiles[0], board)
        board, profiles, extra = _configure_boards(config, lab, board)
    bugs = config.getoption("--nvdla-model-bug")
    if bugs:
        if kind != "model":
            raise pytest.UsageError("--nvdla-model-bug injects a datapath bug into the model target only")
        extra = {**extra, "model_bugs": list(bugs)}
    for i, p in enumerate(profiles):
        try:
            profiles[i] = load_profile(p, nvdla_hw=hw).name if not p.endswith(".spec") else p
        except Exception as e:  # noqa: BLE001 - turn any profile error into a usage error
            raise pytest.UsageError(f"--nvdla-config: {e}") from None
    config.stash[PROFILES_KEY] = profiles
    summary = bool(os.environ.get("NVDLA_HIL_SUMMARY") or config.getoption("--nvdla-summary"))
    # functional coverage (harness/coverage.py): the session's model targets feed one collector,
    # the caller's (an in-process run, e.g. a Dask worker) or the summary's, else none
    cov = session_sink(config) or (Coverage() if summary else None)
    config.stash[CURRENT_ITEMS_KEY] = []
    config.stash[SPEC_KEY] = TargetSpec(
        kind=kind,
        profile=profiles[0],
        semantics=opts["model-semantics"],
        nvdla_hw=hw,
        waves=bool(opts["waves"]),
        lab=lab,
        board=board,
        extra=extra,
        coverage=cov,
        observer=functools.partial(_target_opened, config),
        # what the session's boards are known to hold, so a test does not resend it (serial)
        memory_book=_memory_book() if kind == "serial" else None,
    )
    config.stash[BOARD_DEAD_KEY] = {"run": 0, "session": None}
    cluster = config.getoption("--nvdla-cluster", default=None)
    if cluster and _xdist_workers(config) > 1:
        raise pytest.UsageError("--nvdla-cluster and pytest-xdist's -n are two ways to run in parallel: use one")
    if cluster and not _is_worker(config) and not config.getoption("collectonly"):
        from .cluster import ClusterLoop

        config.pluginmanager.register(ClusterLoop(config, cluster), "nvdla-hil-cluster")
    config.pluginmanager.register(_RunCounter(config), "nvdla-hil-run-counter")
    if kind == "verilator" and not opts["waves"] and config.getoption("--nvdla-failure-waves") == "rerun":
        config.pluginmanager.register(_WavesOnFailure(), "nvdla-hil-waves-on-failure")
    if summary:
        config.pluginmanager.register(RegressionSummary(config), "nvdla-hil-summary")
        # the coverage table at the end, and coverage.json beside the run directory's logs
        logs = config.getoption("--nvdla-log")
        path = Path(logs).parent / "coverage.json" if logs else None
        config.pluginmanager.register(coverage_for_session(config, path, cov=cov), "nvdla-hil-coverage")


def _labgrid_lab(config: pytest.Config, profile: str, board: str | None) -> tuple[str | None, str | None]:
    """Serial target configured in labgrid's style (``--nvdla-lg-env``/``LG_ENV``, ``--nvdla-lg-place``/
    ``LG_PLACE``, ``--nvdla-lg-coordinator``/``LG_COORDINATOR``) instead of a lab file: a one-board lab
    file for the place (:func:`~nvdla_hil.harness.labgrid_place.labgrid_lab_file`) in a per-user folder,
    so every worker and every concurrent regression uses the same file and the same board locks.
    Without any of them: ``(None, board)`` (the lab-file error follows)."""
    env = _opt(config, "--nvdla-lg-env", "LG_ENV")
    place = _opt(config, "--nvdla-lg-place", "LG_PLACE")
    coordinator = _opt(config, "--nvdla-lg-coordinator", "LG_COORDINATOR")
    if not (env or place):
        return None, board
    from .lab import LabError
    from .labgrid_place import session_lab_file

    try:
        path, name = session_lab_file(place, coordinator, env=env, profile=profile)
    except LabError as e:
        raise pytest.UsageError(f"--nvdla-lg-{'env' if env and not place else 'place'}: {e}") from None
    if board and board != name:
        raise pytest.UsageError(f"--nvdla-board {board} and the labgrid place {name} name two boards: give one")
    return str(path), name


def _probe_boards(lab: str, taken: list) -> None:  # list[SessionBoardLock]
    """Prove each held board's DRAM window before any test runs
    (:func:`~nvdla_hil.harness.targets.serial.probe_board`): a window the board does not map, or a
    board that does not answer, ends the session at once with a configuration error naming the
    board (exit 2), instead of every test failing one by one."""
    from ..drivers.transport import TransportError
    from .lab import LabError
    from .targets.serial import check_reset, probe_board

    for lk in taken:
        try:
            probe_board(lab, lk.cfg.name)
            check_reset(lab, lk.cfg)  # a board nothing resets between tests is refused (exit 2)
        except LabError as e:
            raise pytest.UsageError(f"--nvdla-lab {lab}: {e}") from None
        except (TransportError, OSError) as e:
            raise pytest.UsageError(f"board {lk.cfg.name!r} ({lk.cfg.url}) does not answer: {e}") from None


def _configure_boards(config: pytest.Config, lab: str | None, board: str | None) -> tuple[str, list[str], dict]:
    """Serial target: the boards of the session. The controller takes a session lock on each
    board it will use (one per xdist worker, at most the pool's size; a pool skips boards another
    regression holds); each worker checks that the controller holds them and gets its own
    (worker gwK: the session's board K), or, with fewer boards than workers, takes turns."""
    from .lab import BoardBusyError, BoardLock, LabError, SessionBoardLock, resolve_boards

    if not lab:
        raise pytest.UsageError("--nvdla-target serial needs a lab file and a board: --nvdla-lab FILE --nvdla-board NAME "
                                "(or pool:NAME; or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
    try:
        lab_obj, cfgs, pool = resolve_boards(lab, board)
    except LabError as e:
        raise pytest.UsageError(f"--nvdla-lab {lab}: {e}") from None
    profiles = [cfgs[0].profile]  # a board (or a pool) is one hardware build
    if _is_worker(config):
        held = config.workerinput.get("nvdla_board_lock")  # type: ignore[attr-defined]
        if not held:
            return cfgs[0].name, profiles, {}
        boards = held.get("boards") or [{"name": cfgs[0].name, "path": held["path"]}]
        for b in boards:
            url = lab_obj.board(b["name"]).url
            if not BoardLock(url, board=b["name"], path=b["path"]).is_held_by(int(held["pid"])):
                raise pytest.UsageError(f"board {b['name']!r}: the regression controller (PID {held['pid']}) "
                                        f"does not hold the board lock {b['path']}")
        wid = str(config.workerinput.get("workerid", "gw0"))  # type: ignore[attr-defined]
        home = int(wid[2:]) if wid[2:].isdigit() else 0
        info = {**held, "home": home % len(boards)}
        return boards[home % len(boards)]["name"], profiles, {"session_lock": info}
    workers = _xdist_workers(config)
    taken: list[SessionBoardLock] = []
    busy: list[str] = []
    try:
        for cfg in cfgs:
            if len(taken) >= workers:
                break
            slock = SessionBoardLock(lab_obj, cfg)
            try:
                slock.acquire()
            except BoardBusyError as e:
                if len(cfgs) == 1:
                    raise pytest.UsageError(str(e)) from None
                busy.append(str(e))
                continue
            taken.append(slock)
    except LabError as e:
        for lk in taken:
            lk.release()
        raise pytest.UsageError(str(e)) from None
    except BaseException:
        for lk in taken:
            lk.release()
        raise
    what = f"pool {pool}" if pool else ("boards " + ",".join(c.name for c in cfgs))
    if not taken:
        raise pytest.UsageError(f"every board of {what} is busy: " + "; ".join(busy))
    config.stash[LOCK_KEY] = taken
    if not config.getoption("collectonly"):
        try:
            _probe_boards(lab, taken)
            from .boards_health import health_check_boards

            health_check_boards(config, lab_obj, cfgs, taken)  # --nvdla-health-check: quarantine, replace
        except BaseException:
            for lk in taken:
                lk.release()
            del config.stash[LOCK_KEY]
            raise
    info = {
        "pid": os.getpid(),
        "path": str(taken[0].path),  # the single-board form, kept for older readers
        "boards": [{"name": lk.cfg.name, "path": str(lk.path)} for lk in taken],
        "wait": float(config.getoption("--nvdla-board-wait")),
        "workers": workers,
        "pool": pool or "",
    }
    if len(cfgs) == 1 and workers > 1:
        note = f"{workers} workers share board {taken[0].cfg.name}: their tests take turns on it"
        config.stash[BOARD_NOTE_KEY] = note
    elif len(cfgs) > 1:
        if workers > len(taken):
            note = (f"{workers} workers, {len(taken)} board{'s' if len(taken) != 1 else ''} in {what}: "
                    f"waiting up to {info['wait']:g} s for a board")
        else:
            note = (f"{workers} worker{'s' if workers != 1 else ''}, {len(taken)} board{'s' if len(taken) != 1 else ''} "
                    f"in {what}: " + ", ".join(f"gw{i} -> {lk.cfg.name}" for i, lk in enumerate(taken)))
        if busy:
            note += f" ({len(busy)} busy: " + "; ".join(busy) + ")"
        config.stash[BOARD_NOTE_KEY] = note
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistLockForwarder(info), "nvdla-hil-lock-forwarder")
    return taken[0].cfg.name, profiles, {"session_lock": {**info, "home": 0}}


def _count_board_dead(config: pytest.Config, report: pytest.TestReport) -> None:
    """Stops the session after ``--nvdla-max-board-failures`` consecutive tests failed on a dead board."""
    state = config.stash.get(BOARD_DEAD_KEY, None)
    if state is None or report.when not in ("setup", "call") or (report.when == "setup" and report.passed):
        return
    dead = getattr(report, "nvdla_board_dead", None)
    if not (report.failed and dead):
        state["run"] = 0
        return
    state["run"] += 1
    limit = config.getoption("--nvdla-max-board-failures", default=3) or 0
    session = state["session"]
    if limit and state["run"] >= limit and session is not None and not session.shouldstop:
        spec = config.stash.get(SPEC_KEY, None)
        name = getattr(spec, "board", None)
        board = f"board {name}" if name else "the board"
        session.shouldstop = f"{board} is dead: {state['run']} consecutive tests failed on it; last: {dead}"


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    state = session.config.stash.get(BOARD_DEAD_KEY, None)
    if state is not None:
        state["session"] = session
    note = session.config.stash.get(BOARD_NOTE_KEY, None)
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if note and tr is not None:
        tr.write_line(f"nvdla-hil: {note}")


class _XdistLockForwarder:
    """Tells each xdist worker which session locks its controller holds."""

    def __init__(self, info: dict) -> None:
        self.info = info

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:  # noqa: ANN001
        node.workerinput["nvdla_board_lock"] = dict(self.info)


def pytest_unconfigure(config: pytest.Config) -> None:
    locks = config.stash.get(LOCK_KEY, None)
    if locks is not None:
        for lock in reversed(locks if isinstance(locks, list) else [locks]):
            lock.release()
        del config.stash[LOCK_KEY]


# ---- register-access logs of every test ----------------------------------------------------------


def _safe_nodeid(nodeid: str) -> str:
    return nodeid.replace("/", "_").replace("::", "__").replace("[", "_").replace("]", "")


def log_dir(config: pytest.Config) -> Path | None:
    """``--nvdla-log`` (the folder for per-test register-access logs), or None."""
    d = config.getoption("--nvdla-log", default=None)
    return Path(d) if d else None


def attach_access_log(request_or_config, nodeid: str | None, log: AccessLog,  # noqa: ANN001
                      link_report=None) -> None:  # noqa: ANN001
    """Have the plugin write ``log`` (every register access of the test) to ``--nvdla-log`` once
    the test ``nodeid`` ends, whatever its outcome; ``link_report`` (a string, or a callable
    returning one, e.g. ``target.link_report``) is written after it. Without ``--nvdla-log``
    nothing is written. ``request_or_config``: the test's ``request`` or the pytest config."""
    config = getattr(request_or_config, "config", request_or_config)
    if nodeid is None:
        nodeid = request_or_config.node.nodeid
    if log_dir(config) is None:
        return
    config.stash[LOGS_KEY][nodeid] = (log, link_report)


def set_link_report(request_or_config, nodeid: str, link_report) -> None:  # noqa: ANN001
    """Replace the link report attached with :func:`attach_access_log` (e.g. once computed)."""
    config = getattr(request_or_config, "config", request_or_config)
    entry = config.stash[LOGS_KEY].get(nodeid)
    if entry is not None:
        config.stash[LOGS_KEY][nodeid] = (entry[0], link_report)


def write_access_log(config: pytest.Config, nodeid: str, log: AccessLog, link_report=None,  # noqa: ANN001
                     suffix: str = "") -> Path | None:  # fmt: skip
    d = log_dir(config)
    if d is None:
        return None
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{_safe_nodeid(nodeid)}{suffix}.log"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"# {nodeid}: {len(log.records)} register accesses\n")
        log.dump(fh)
        try:
            link = link_report() if callable(link_report) else link_report
        except Exception as e:  # noqa: BLE001 - the log matters more than the link record
            link = f"(link record unavailable: {e})"
        if link:
            fh.write(f"# link record\n{link}\n")
    return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item):  # noqa: ANN201
    yield
    entry = item.config.stash[LOGS_KEY].pop(item.nodeid, None)
    if entry is not None:  # the re-run with waves keeps the failing run's log and writes its own beside it
        rerun = RERUN_WAVES_KEY in item.config.stash
        log, link_report = entry
        try:
            write_access_log(item.config, item.nodeid, log, link_report, suffix=".waves-rerun" if rerun else "")
        except OSError as e:  # a full or read-only results disk: the test's outcome stands; said once, at the end
            unwritten = item.config.stash.setdefault(UNWRITTEN_KEY, [])
            unwritten.append(f"{e.filename or log_dir(item.config)}: {e.strerror or e}")


# ---- what each test ran on: JUnit classname and <properties> ---------------------------------------------

def _memory_book():  # noqa: ANN202
    from .targets.serial import BoardMemoryBook

    return BoardMemoryBook()


def _target_opened(config: pytest.Config, target: Transport, spec: TargetSpec) -> None:
    """The session spec's observer: record each target a test opens on the test."""
    running = config.stash.get(CURRENT_ITEMS_KEY, [])
    if running:
        running[-1].stash.setdefault(OPENED_KEY, []).append((target, spec))


_SUITES_DIR = Path(__file__).resolve().parent / "suites"


def _suite_module(item: pytest.Item) -> str | None:
    """``nvdla_hil.harness.suites.<module>`` for a test of the shipped suites (found by its file,
    since pytest may import the file under another name, e.g. ``harness.suites.test_vectors``)."""
    path = getattr(item, "path", None)
    if path is None:
        return None
    try:
        p = Path(path).resolve()
    except OSError:
        return None
    return f"nvdla_hil.harness.suites.{p.stem}" if p.parent == _SUITES_DIR and p.suffix == ".py" else None


def _is_suite(item: pytest.Item) -> bool:
    return _suite_module(item) is not None or any(f in item.nodeid.replace("\\", "/") for f in _SUITE_FILES)


def _classname(item: pytest.Item) -> str | None:
    """The dotted module (and class) of a test, when the nodeid does not give a proper one: a
    test of the shipped suites always gets ``nvdla_hil.harness.suites.<module>``, whatever the
    rootdir or the install (``--pyargs`` of an installed module makes its nodeid ``::test``,
    and JUnit's classname empty); any other test only when its nodeid has no file part."""
    mod = _suite_module(item)
    if mod is None:
        if not item.nodeid.startswith("::"):
            return None
        mod = getattr(getattr(item, "module", None), "__name__", None)
        if not mod:
            return None
    cls = getattr(item, "cls", None)
    return mod + (f".{cls.__qualname__}" if cls is not None else "")


def _vector_seed(item: pytest.Item) -> int | None:
    params = getattr(getattr(item, "callspec", None), "params", {}) or {}
    case = params.get("vector_case")
    if not isinstance(case, Path):
        return None
    try:
        from ..drivers import yamlstrict

        doc = yamlstrict.load((case / "case.yaml").read_text(encoding="utf-8"), str(case / "case.yaml"))
        seed = (doc.get("provenance") or {}).get("seed")
    except Exception:  # noqa: BLE001 - a property is not worth a failure
        return None
    return seed if isinstance(seed, int) else None


def _properties(item: pytest.Item) -> list[tuple[str, object]]:
    """target, profile, board (serial) or RTL build key (verilator), model semantics, seed."""
    spec: TargetSpec | None = item.config.stash.get(SPEC_KEY, None)
    if spec is None:
        return []
    opened = item.stash.get(OPENED_KEY, [])
    props: list[tuple[str, object]] = [("target", spec.kind)]

    def uniq(values) -> str:  # noqa: ANN001
        out: list[str] = []
        for v in values:
            if v and str(v) not in out:
                out.append(str(v))
        return ",".join(out)

    profile = uniq(getattr(t, "profile_name", None) or sp.profile for t, sp in opened)
    if profile:
        props.append(("profile", profile))
    if spec.kind == "serial":
        board = uniq(getattr(t, "board_name", None) for t, _ in opened)
        if board:
            props.append(("board", board))
    if spec.kind == "verilator":
        build = uniq(getattr(getattr(t, "build", None), "key", None) for t, _ in opened)
        if build:
            props.append(("rtl_build", build))
    if spec.kind == "model" and opened:
        props.append(("model_semantics", uniq(sp.semantics for _, sp in opened)))
    seed = _vector_seed(item)
    if seed is not None:
        props.append(("seed", seed))
    golden = vector_golden(item)
    if golden is not None:  # where the case's goldens came from: an oracle or the model itself
        props.append(("golden_source", golden))
        props.append(("checked_against", "self-consistency" if golden == "model" else "oracle"))
    return props


GOLDEN_KEY = pytest.StashKey[str]()


def vector_golden(item: pytest.Item) -> str | None:
    """``golden_source.kind`` of a packed-vector test's case (rtl, cmod, seed, hand, model), else None."""
    if GOLDEN_KEY in item.stash:
        return item.stash[GOLDEN_KEY] or None
    params = getattr(getattr(item, "callspec", None), "params", {}) or {}
    case = params.get("vector_case")
    kind = ""
    if isinstance(case, Path):
        try:
            from ..drivers import yamlstrict

            doc = yamlstrict.load((case / "case.yaml").read_text(encoding="utf-8"), str(case / "case.yaml"))
            gs = doc.get("golden_source") if isinstance(doc, dict) else None
            kind = str(gs.get("kind", "")) if isinstance(gs, dict) else ""
        except Exception:  # noqa: BLE001 - the test itself reports a bad case
            kind = ""
    item.stash[GOLDEN_KEY] = kind
    return kind or None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):  # noqa: ANN001, ANN201
    running = item.config.stash.setdefault(CURRENT_ITEMS_KEY, [])
    running.append(item)
    try:
        yield
    finally:
        running.remove(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):  # noqa: ANN001, ANN201
    if call.when == "teardown" and RERUN_WAVES_KEY not in item.config.stash and item_is_ours(item):
        have = {k for k, _ in item.user_properties}
        item.user_properties.extend((k, v) for k, v in _properties(item) if k not in have)
    outcome = yield
    report = outcome.get_result()
    cls = _classname(item)
    if cls:
        report.nvdla_classname = cls  # survives xdist's report serialisation
    if _is_suite(item):
        report.nvdla_suite = True
    golden = vector_golden(item)
    if golden is not None:
        report.nvdla_golden = golden  # survives serialisation; "model": a pass is self-consistency only
    if call.excinfo is not None and (call.excinfo.errisinstance(BoardDeadError)
                                     or any(c.__name__ == "BoardDeadError" for c in call.excinfo.type.__mro__)):
        report.nvdla_board_dead = str(call.excinfo.value)  # survives serialisation (xdist, Dask)
    if call.excinfo is not None and _is_suite(item) and is_bad_input(call.excinfo.value):
        # a malformed trace, vector or manifest is the input's fault, not the target's: its own
        # outcome, one line naming the file and line, no traceback (the CLI exits 2 for it)
        report.nvdla_bad_input = str(call.excinfo.value)
        report.longrepr = f"bad input: {call.excinfo.value}"


def is_bad_input(exc: BaseException) -> bool:
    """A malformed input found while a test ran: the tool's :class:`InputError` (traces, YAML,
    lab files) or a :class:`~nvdla_hil.harness.vectors.VectorError`."""
    from ..drivers.errors import InputError

    return isinstance(exc, InputError) or any(
        c.__name__ == "VectorError" and c.__module__.startswith("nvdla_hil.") for c in type(exc).__mro__)


def _junit_classname(config: pytest.Config, report: pytest.TestReport) -> None:
    cls = getattr(report, "nvdla_classname", None)
    if not cls:
        return
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a pytest without it keeps its own classnames
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    prefix = getattr(xml, "prefix", None)
    xml.node_reporter(report).add_attribute("classname", f"{prefix}.{cls}" if prefix else cls)


# ---- waves of a failed test (verilator target) ------------------------------------------------------------


def rerun_waves(config: pytest.Config) -> Path | None:
    """While the plugin re-runs a failed test to record its waves, the wave file to write (the
    target specs of :func:`suite_spec` and the ``nvdla_target`` fixture ask for it); else None."""
    return config.stash.get(RERUN_WAVES_KEY, None)


def _waves_dir(config: pytest.Config) -> Path:
    d = config.getoption("--nvdla-waves-dir", default=None)
    if d:
        return Path(d)
    logs = log_dir(config)
    if logs is not None:
        return logs.parent / "waves"
    return Path(tempfile.gettempdir()) / f"nvdla-hil-waves-{os.getppid() if _is_worker(config) else os.getpid()}"


class _WavesOnFailure:
    """Verilator target: a test that fails is run once more with waves; the failing run's
    reports stand (the re-run's outcome is noted), and the wave file is linked from the
    report, the JUnit properties and the summary."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):  # noqa: ANN001, ANN201
        from _pytest.runner import runtestprotocol

        config = item.config
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        if any(r.failed for r in reports):
            wave = _waves_dir(config) / f"{_safe_nodeid(item.nodeid)}.fst"
            wave.parent.mkdir(parents=True, exist_ok=True)
            wave.unlink(missing_ok=True)
            config.stash[RERUN_WAVES_KEY] = wave
            try:
                again = runtestprotocol(item, nextitem=nextitem, log=False)
            finally:
                del config.stash[RERUN_WAVES_KEY]
            rerun = "failed" if any(r.failed for r in again) else "skipped" if any(r.skipped for r in again) \
                else "passed"
            if wave.is_file():
                note = f"waves of a re-run of this test with waves (re-run {rerun}): {wave}"
            else:
                why = next((r.longreprtext.strip().splitlines()[-1] for r in again if r.failed and r.longreprtext),
                           "the test opened no verilator target through nvdla-hil")
                note = f"re-run with waves ({rerun}) wrote no wave file {wave}: {why}"
                wave = None  # type: ignore[assignment]
            for r in reports:
                if r.failed:
                    r.sections.append(("nvdla-hil waves", note))
                    if wave is not None:
                        vars(r)["nvdla_waves"] = str(wave)  # an extra report attribute (xdist carries it); read by getattr below
                if r.when == "teardown" and wave is not None:
                    r.user_properties.append(("waves", str(wave)))
        for r in reports:
            ihook.pytest_runtest_logreport(report=r)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


# ---- nothing ran is not green -------------------------------------------------------------------------

_SUITE_FILES = ("suites/test_traces.py", "suites/test_vectors.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    counts = config.stash[COUNTS_KEY]
    counts["suite"] += sum(1 for it in items if _is_suite(it))


class _RunCounter:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.counts = config.stash[COUNTS_KEY]

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes the testcase
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        _junit_classname(self.config, report)
        waves = getattr(report, "nvdla_waves", None)
        if waves:
            self.config.stash[WAVES_SEEN_KEY].append((report.nodeid, waves))
        self.counts["reports"] += 1
        _count_board_dead(self.config, report)
        if getattr(report, "nvdla_suite", False) or any(f in report.nodeid.replace("\\", "/") for f in _SUITE_FILES):
            self.counts["suite"] += 1
        if report.when == "call" and report.passed and getattr(report, "nvdla_golden", None) == "model":
            # golden from the model itself: not a test checked against an oracle (never a plain pass)
            self.counts["self_consistency"] = self.counts.get("self_consistency", 0) + 1
        elif report.when == "call" and report.outcome in ("passed", "failed"):
            self.counts["ran"] += 1
        elif report.failed:  # an error in set-up or teardown is a result too
            self.counts["ran"] += 1


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _is_worker(config) or config.getoption("--nvdla-allow-empty") or config.getoption("collectonly"):
        return
    counts = config.stash.get(COUNTS_KEY, None)
    if counts is None:
        return
    ours = counts["suite"] > 0 or config.getoption("--nvdla-summary")
    if ours and session.exitstatus == pytest.ExitCode.OK and counts["ran"] == 0:
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
        tr = config.pluginmanager.get_plugin("terminalreporter")
        msg = ("nvdla-hil: no test ran (every collected test was skipped or deselected); "
               "this is an error unless --nvdla-allow-empty")
        if counts.get("self_consistency"):
            msg = (f"nvdla-hil: no test was checked against an oracle: {counts['self_consistency']} passed only "
                   f"self-consistency (goldens from the reference model itself); not a green run")
        if tr is not None:
            tr.write_line(msg, red=True)


def configured_profiles(config: pytest.Config) -> list[str]:
    """The profiles this run may use, in the order given."""
    profiles: list[str] = config.stash[PROFILES_KEY]
    return list(profiles)


def _load(config: pytest.Config, name: str) -> HardwareProfile:
    return load_profile(name, nvdla_hw=config.stash[SPEC_KEY].nvdla_hw)


def profile_for(config: pytest.Config, features: tuple[str, ...] | set[str],
                generation: str | None = None) -> HardwareProfile | None:  # fmt: skip
    """The first configured profile that has every feature (of ``generation``), or None."""
    for name in config.stash[PROFILES_KEY]:
        prof = _load(config, name)
        if generation and prof.generation != generation:
            continue
        if all(prof.has(f) for f in features):
            return prof
    return None


def profile_for_trace(config: pytest.Config, own: str | None,
                      features: set[str]) -> tuple[HardwareProfile | None, str]:  # fmt: skip
    """The profile a v2 trace runs on, and why when it is not the trace's own configuration.

    A trace of configuration folder ``own`` runs on that profile when it has the features the
    trace programs; otherwise on the first configured v2 profile that has them."""
    if own is not None:
        mine = _load(config, own)
        missing = sorted(f for f in features if not mine.has(f))
        if not missing:
            return mine, ""
        other = profile_for(config, features, "v2")
        lacks = f"needs {', '.join(missing)}, which {own} lacks"
        if other is None:
            return None, f"{lacks}; no configured profile ({', '.join(configured_profiles(config))}) has it"
        return other, f"{lacks}: run on {other.name}"
    prof = profile_for(config, features, "v2")
    if prof is None:
        return None, (f"needs {', '.join(sorted(features))}, which "
                      f"{' and '.join(configured_profiles(config))} lack{'s' if len(configured_profiles(config)) == 1 else ''}")
    return prof, ""


def trace_root(config: pytest.Config) -> Path | None:
    """``--nvdla-traces`` / NVDLA_TRACES, else the ``--nvdla-hw`` checkout's trace tests."""
    root = _opt(config, "--nvdla-traces", "NVDLA_TRACES")
    if root:
        return Path(root)
    hw = config.stash[SPEC_KEY].nvdla_hw
    if hw and (Path(hw) / "verif" / "tests" / "trace_tests").is_dir():
        return Path(hw) / "verif" / "tests" / "trace_tests"
    return None


def suite_spec(config: pytest.Config, profile: HardwareProfile) -> TargetSpec:
    """The selected target on ``profile``; skips (with what to pass) when the target cannot
    be opened from the options given."""
    spec = config.stash[SPEC_KEY].with_profile(profile.name)
    if spec.kind == "verilator" and not spec.nvdla_hw:
        pytest.skip("verilator target needs an nvdla/hw checkout: --nvdla-hw PATH or NVDLA_HW")
    if spec.kind == "serial" and not (spec.lab and spec.board):
        pytest.skip("serial target needs --nvdla-lab FILE --nvdla-board NAME (or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
    wave = rerun_waves(config)
    if wave is not None and spec.kind == "verilator":  # the re-run of a failed test, with waves
        spec = replace(spec, waves=True, extra={**spec.extra, "wave_file": str(wave)})
    return spec


def _needed_features(item: pytest.Item) -> set[str]:
    feats: set[str] = set()
    for m in item.iter_markers("nvdla_feature"):
        if not m.args or not all(isinstance(a, str) for a in m.args):
            raise pytest.UsageError(f"{item.nodeid}: nvdla_feature needs feature names as strings")
        feats.update(m.args)
    return feats


def pytest_runtest_setup(item: pytest.Item) -> None:
    spec = item.config.stash[SPEC_KEY]
    for m in item.iter_markers("nvdla_targets"):
        if spec.kind not in m.args:
            pytest.skip(f"runs only on target(s) {', '.join(m.args)}, not {spec.kind}")
    feats = _needed_features(item)
    if feats and profile_for(item.config, feats) is None:
        configured: list[str] = item.config.stash[PROFILES_KEY]
        profiles = ", ".join(configured)
        pytest.skip(f"needs {', '.join(sorted(feats))}; no configured profile ({profiles}) has them")


@pytest.fixture(scope="session")
def nvdla_spec(pytestconfig: pytest.Config) -> TargetSpec:
    """How the selected target is opened (kind, profile, paths)."""
    return pytestconfig.stash[SPEC_KEY]


@pytest.fixture
def nvdla_profile(request: pytest.FixtureRequest) -> HardwareProfile:
    """The profile this test runs on: the first configured one with the test's features."""
    feats = _needed_features(request.node)
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


# ---- summary table (used by `nvdla-hil regress`) ---------------------------------------------


class RegressionSummary:
    """Collects one row per test and prints a table (test, outcome, time, reason) at the end,
    then the counts: skips for a unit the target does not model yet and skips for hardware a
    configuration lacks are counted apart, and per configuration when the traces span several."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: list[tuple[str, str, float, str]] = []
        self.golden: dict[str, str] = {}  # nodeid -> golden_source.kind of packed-vector tests

    @staticmethod
    def _reason(report: pytest.TestReport) -> str:
        if report.passed:
            return ""
        if report.skipped and isinstance(report.longrepr, tuple):
            return str(report.longrepr[2]).removeprefix("Skipped: ")
        failure = getattr(report, "nvdla_failure", None)  # the error's own message (harness/results/recorder.py)
        if isinstance(failure, dict) and failure.get("reason"):
            return str(failure["reason"])
        lines = [ln.strip() for ln in report.longreprtext.strip().splitlines()
                 if ln.strip() and not ln.startswith("[gw")]
        first = next((ln for ln in lines if "MISMATCH" in ln or "differ" in ln), None)
        return first or (lines[0] if lines else "")

    @staticmethod
    def outcome_class(outcome: str, why: str) -> str:
        if outcome != "skipped":
            return outcome
        if why.startswith(SKIP_NOT_MODELLED):
            return "skipped: not modelled"
        if why.startswith(SKIP_LACKS):
            return "skipped: lacks unit"
        return "skipped: other"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed") or (
            report.when == "teardown" and report.failed
        ):
            outcome: str = "error" if report.when != "call" and report.failed else report.outcome
            if getattr(report, "nvdla_bad_input", None):
                outcome = "bad input"  # counted apart: the input's fault, not the target's
            elif getattr(report, "nvdla_infra", None):
                outcome = "infrastructure"  # board, link or simulator failed: not the hardware's result
            golden = getattr(report, "nvdla_golden", None)
            if golden is not None:
                self.golden[report.nodeid] = golden
                if outcome == "passed" and golden == "model":
                    outcome = SELF_CONSISTENCY  # goldens from the model itself: never a plain pass
            self.rows.append((report.nodeid, outcome, report.duration, self._reason(report)))

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        tr = terminalreporter
        spec = self.config.stash[SPEC_KEY]
        names: list[str] = self.config.stash[PROFILES_KEY]
        title = f"nvdla-hil regression on {spec.kind} ({', '.join(names)})"
        tr.write_sep("=", title)
        lines: list[str] = [title]
        write_line = tr.write_line

        class _Tee:
            @staticmethod
            def write_line(line: str) -> None:
                lines.append(line)
                write_line(line)

        tr = _Tee
        classes = ("passed", SELF_CONSISTENCY, "failed", "error", "bad input", "infrastructure", "skipped: not modelled",
                   "skipped: lacks unit", "skipped: other")
        counts: dict[str, int] = {}
        per_config: dict[str, dict[str, int]] = {}
        width = min(max((len(n.split("::")[-1]) for n, *_ in self.rows), default=20), 70)
        for nodeid, outcome, dur, why in self.rows:
            cls = self.outcome_class(outcome, why)
            counts[cls] = counts.get(cls, 0) + 1
            name = nodeid.split("::")[-1]
            if name.startswith("test_trace[") and "/" in name:
                cfg = name[len("test_trace[") :].split("/", 1)[0]
                per_config.setdefault(cfg, {})[cls] = per_config.setdefault(cfg, {}).get(cls, 0) + 1
            name = name if len(name) <= width else "..." + name[-(width - 3):]
            tr.write_line(f"{name:<{width}}  {outcome:<8}{dur:8.3f}s  {why[:90]}")
        tr.write_line("")
        if len(per_config) > 1:
            tr.write_line(f"{'configuration':<22}" + "".join(f"{c.replace('skipped: ', 'skip/'):>18}" for c in classes))
            for cfg, cc in per_config.items():
                tr.write_line(f"{cfg:<22}" + "".join(f"{cc.get(c, 0):>18}" for c in classes))
            tr.write_line("")
        tr.write_line("summary: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in classes
                                              if k != SELF_CONSISTENCY or counts.get(k)))
        split = oracle_split(self.rows, self.golden)
        if split:
            tr.write_line(split)
        for line in _waves_lines(self.config):
            tr.write_line(line)
        path = self.config.getoption("--nvdla-summary-file", default=None)
        if path:
            from ..drivers.errors import write_atomic

            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, "\n".join(lines) + "\n")  # never a truncated summary
            except OSError as e:
                self.config.stash.setdefault(UNWRITTEN_KEY, []).append(f"{e.filename or path}: {e.strerror or e}")


#: the outcome of a passing test whose goldens are the reference model's own (golden_source kind model)
SELF_CONSISTENCY = "passed (self-consistency)"


def oracle_split(rows: list[tuple[str, str, float, str]], golden: dict[str, str]) -> str:
    """The summary's oracle line: passing packed-vector tests checked against an oracle (per
    golden_source kind) apart from those that only checked self-consistency. Empty without any."""
    passed = [golden[n] for n, outcome, *_ in rows if n in golden and outcome in ("passed", SELF_CONSISTENCY)]
    if not passed:
        return ""
    kinds: dict[str, int] = {}
    for k in passed:
        if k != "model":
            kinds[k] = kinds.get(k, 0) + 1
    own = passed.count("model")
    line = (f"oracle split: of {len(passed)} passing vector tests, {len(passed) - own} checked against an oracle ("
            + (", ".join(f"{kinds[k]} {k}" for k in sorted(kinds)) or "none") + f"), {own} self-consistency only")
    if own:
        line += " (goldens from the reference model itself: not evidence of correctness)"
    return line


def _waves_lines(config: pytest.Config) -> list[str]:
    seen = config.stash.get(WAVES_SEEN_KEY, [])
    if not seen:
        return []
    return ["waves of failed tests (each re-run once with waves):"] + [f"  {n}: {w}" for n, w in seen]


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # noqa: ANN001
    if config.pluginmanager.has_plugin("nvdla-hil-summary"):
        return  # the summary table prints them
    lines = _waves_lines(config)
    if lines:
        terminalreporter.write_sep("=", "nvdla-hil waves")
        for line in lines:
            terminalreporter.write_line(line)
