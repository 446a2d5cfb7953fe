"""The plugin's command-line options: every ``--nvdla-*`` option with its environment-variable
fallback, the deprecated unprefixed aliases (registered only where no other plugin has taken the
name), the checks of the trace and vector folders given, and whether a session is nvdla-hil's at
all (installed, the plugin loads into every pytest session on the machine).

Each option's help names its environment variable and default (``pytest --help``, group
"nvdla-hil"): the one list of them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from ..targets import TARGETS
from ..targets.rtl_build import RTL_BUILDS
from .keys import OPTS_KEY, is_worker
from ...semantics import SEMANTICS

DEFAULT_PROFILES = "nv_small,nv_small_256_full"


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
ALIASED = ("target", "lab", "board", "model-semantics", "poison", "waves")


def _alias_dest(old: str) -> str:
    return "nvdla_deprecated_" + old.lstrip("-").replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nvdla-hil", "NVDLA hardware-in-the-loop")
    g.addoption("--nvdla-target", choices=TARGETS, default=None, dest="nvdla_target",
                help="where tests run (default: model, or NVDLA_HIL_TARGET)")
    g.addoption("--nvdla-config", default=None, help=f"hardware profile(s), comma-separated, or all (default: all on the model target, "
                     f"{DEFAULT_PROFILES} elsewhere; or NVDLA_HIL_CONFIG)")
    g.addoption("--nvdla-traces", default=None, help="folder of NVDLA trace tests (or NVDLA_TRACES; default with --nvdla-hw: "
                     "the checkout's verif/tests/trace_tests)")
    g.addoption("--nvdla-txn", default=None, help="folder of nv_full's traceplayer tests, input.txn (or NVDLA_TXN_TESTS)")
    g.addoption("--nvdla-loadables", default=None,
                help="NVDLA's software regression folder: flatbufs/ and golden/ (or NVDLA_LOADABLES)")
    g.addoption("--nvdla-sw", default=None, help="nvdla/sw checkout whose kmd/firmware runs the loadables (or NVDLA_SW)")
    g.addoption("--nvdla-vectors", default=None, help="folder of packed test vectors (or NVDLA_HIL_VECTORS; default: bundled suites)")
    g.addoption("--nvdla-hw", default=None, help="nvdla/hw checkout for the verilator and cmod targets (or NVDLA_HW)")
    g.addoption("--nvdla-lab", default=None, dest="nvdla_lab", help="lab file for the serial target (or NVDLA_HIL_LAB)")
    g.addoption("--nvdla-board", default=None, dest="nvdla_board",
                help="serial target: a board of the lab file, pool:NAME (or a pool's name) or a comma list of "
                     "boards; with -n N each xdist worker gets a board of its own (or NVDLA_HIL_BOARD)")
    g.addoption("--nvdla-board-wait", type=float, default=300.0, metavar="SECONDS",
                help="serial target with fewer boards than workers: how long a test waits for a board (default 300)")
    g.addoption("--nvdla-model-semantics", choices=SEMANTICS, default=None, dest="nvdla_model_semantics",
                help="model follows the RTL (default) or NVDLA's C model")
    g.addoption("--nvdla-poison", action="store_true", default=False, dest="nvdla_poison",
                help="poison checked output regions before each trace")
    g.addoption("--nvdla-waves", action="store_true", default=False, dest="nvdla_waves",
                help="verilator target: dump FST waves of every test")
    g.addoption("--nvdla-rtl-clock-gating", choices=("auto", "on", "off"), default=None,
                help="verilator target: NVDLA's second-level clock gating on as the RTL ships, or off, which works "
                     "round nvdla/hw#183; auto (default): off for loadables and networks, on for the rest (or "
                     "NVDLA_HIL_RTL_CLOCK_GATING)")
    g.addoption("--nvdla-rtl-build", choices=RTL_BUILDS, default=None,
                help="verilator target: the plain simulator build (default), or pgo: the profile-guided build "
                     "(harness/targets/rtl_build.py: same cycles, fewer CPU-seconds; or NVDLA_HIL_RTL_BUILD)")
    g.addoption("--nvdla-failure-waves", choices=("rerun", "off"), default="rerun",
                help="verilator target: re-run a failed test once with waves and link the wave file (default rerun)")
    g.addoption("--nvdla-waves-dir", default=None,
                help="where re-run wave files go (default: beside --nvdla-log, else a temp folder)")
    g.addoption("--nvdla-log", default=None, help="folder for per-test register access logs")
    g.addoption("--nvdla-model-bug", action="append", default=None, metavar="SPEC",
                help="model target: inject a datapath bug into the target (never the reference), e.g. "
                     "SDP.D_CVT_OFFSET.CVT_OFFSET+1 (harness/targets/faults.py); repeatable")
    g.addoption("--nvdla-summary", action="store_true", help="print a per-test summary table at the end (or NVDLA_HIL_SUMMARY)")
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
    g.addoption("--nvdla-table", action="store_true",
                help="list every test in the end-of-run table (default: what did not pass; all rows in the summary file)")
    g.addoption("--nvdla-rtl-coverage", default=None, metavar="KINDS",
                help="verilator: measure RTL code coverage (line, toggle or line,toggle) with the instrumented "
                     "simulator; per-test files, merged table, lcov HTML in the run folder's rtl-coverage/")
    g.addoption("--nvdla-rtl-coverage-dir", default=None,
                help="where RTL coverage goes (default: rtl-coverage/ beside --nvdla-log, else ./nvdla-rtl-coverage)")
    g.addoption("--nvdla-coverage-table", action="store_true",
                help="print the functional-coverage table at the end (default: one line; the table is in the run folder)")


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
            kw.update(choices=SEMANTICS, default=None)
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
    return resolve_option(config, name, warn=False)


def resolve_option(config: pytest.Config, name: str, warn: bool = True):  # noqa: ANN201
    """``--nvdla-NAME`` or its deprecated alias (a deprecation warning, unless ``warn`` is off);
    a usage error when both are given and disagree."""
    new_opt = f"--nvdla-{name}"
    new = config.getoption(new_opt, default=None)
    old_opt = f"--{name}"
    old = getattr(config.option, _alias_dest(old_opt), None)
    if old in (None, False):
        return new
    if new not in (None, False) and new != old:
        raise pytest.UsageError(f"{old_opt} {old} and {new_opt} {new} disagree; pass only {new_opt}")
    if warn and not is_worker(config):
        config.issue_config_time_warning(pytest.PytestDeprecationWarning(
            f"nvdla-hil: {old_opt} is deprecated, use {new_opt} (the unprefixed name clashes with other "
            f"plugins, e.g. pytest-embedded's --target)"), stacklevel=2)
    return old


def env_option(config: pytest.Config, name: str, env: str, default: str | None = None) -> str | None:
    """Option ``name`` when given, else the environment variable ``env``, else ``default``."""
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
    from ..traces import find_trace_sets

    p = _check_folder(opt, value, "expected NVDLA trace tests: one configuration's folder or a folder of them")
    sets = find_trace_sets(p)
    if not sets:
        raise pytest.UsageError(f"{opt} {value}: no NVDLA trace tests in this folder (no <trace>/<name>.cfg, "
                                f"nor <config>/<trace>/<name>.cfg)")
    return sets


def check_vector_source(opt: str, value: str) -> list:
    """The packed-vector cases under ``value``; UsageError naming ``opt`` when missing or empty."""
    from ..vectors import find_cases

    p = _check_folder(opt, value, "expected packed test vectors")
    cases = find_cases(p)
    if not cases:
        raise pytest.UsageError(f"{opt} {value}: no packed test vectors in this folder (no case.yaml below it)")
    return cases


def xdist_workers(config: pytest.Config) -> int:
    """How many xdist workers this session runs tests on (1 without xdist)."""
    if is_worker(config):
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
    if asked_for_nvdla(config):
        return True
    pkg = Path(__file__).resolve().parents[2]
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


def asked_for_nvdla(config: pytest.Config) -> bool:
    """A ``--nvdla-*`` option on the command line: the user runs this session for nvdla-hil."""
    args = [str(a) for a in (getattr(config.invocation_params, "args", ()) or ())]
    return any(a.startswith(("--nvdla-", "--nvdla_")) for a in args)


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
