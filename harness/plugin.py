"""pytest plugin (entry point ``nvdla_hil``): target selection, fixtures, markers, summary.

Options (each with an environment-variable fallback, as labgrid's ``--lg-env``/``LG_ENV``):

``--target {model,verilator,serial}``  NVDLA_HIL_TARGET, default ``model``
``--nvdla-config P[,P2...]|all``       NVDLA_HIL_CONFIG, hardware profile(s) the run may use; a test runs
                                       on the first profile that has the features it needs (default
                                       ``nv_small,nv_small_256_full``; ``all``: every shipped profile;
                                       a path to a ``spec/defs/<config>.spec`` is a profile too)
``--nvdla-traces PATH``                NVDLA_TRACES, folder of NVDLA trace tests: one configuration's,
                                       or a folder of configuration folders (default with
                                       ``--nvdla-hw``: the checkout's ``verif/tests/trace_tests``)
``--nvdla-vectors PATH``               NVDLA_HIL_VECTORS, folder of packed test vectors (default: bundled)
``--nvdla-hw PATH``                    NVDLA_HW, the user's nvdla/hw checkout (verilator target)
``--lab FILE --board NAME``            NVDLA_HIL_LAB / NVDLA_HIL_BOARD (serial target)
``--model-semantics {rtl,cmod}``       the model follows the RTL (default) or NVDLA's C model
``--poison``                           poison checked output regions before each trace
``--waves``                            verilator: dump FST waves
``--nvdla-log DIR``                    write each test's register-access log (and link record) to DIR
``--nvdla-allow-empty``                a session in which no test ran is not an error

Misconfiguration is never green. Before the first test (``pytest.UsageError``, pytest exit 4;
``nvdla-hil regress`` exits 2): an explicit ``--nvdla-traces``/``--nvdla-vectors`` that is not a
folder, or holds no tests; ``--target verilator`` without ``--nvdla-hw``; ``--target serial``
without a lab file and board (or a lab file that does not load); a board another regression
holds. At collection (a collection error naming the source, exit 2): ``NVDLA_TRACES`` /
``NVDLA_HIL_VECTORS`` naming a missing or empty folder. At the end: a session of the shipped
suites (or of ``nvdla-hil regress``) in which tests were collected but none passed or failed
(all skipped or deselected) exits 5 (``NO_TESTS_COLLECTED``) unless ``--nvdla-allow-empty``.

Register-access logs: suites call :func:`attach_access_log` with their :class:`AccessLog`
(and the target's link report); with ``--nvdla-log DIR`` the plugin writes it after the
test, whatever its outcome. The ``nvdla_target`` fixture does this by itself.

Board lock (serial target): the controller process (the only process without xdist) takes
the board's :class:`~nvdla_hil.harness.lab.SessionBoardLock` in ``pytest_configure`` and holds
it until ``pytest_unconfigure``; xdist workers receive the lock file and the controller's PID
(``workerinput``), check in their own ``pytest_configure`` that the controller holds it, and
each test's target takes only the session's ``.use`` lock, so workers take turns on the link.

Fixtures: ``nvdla_spec`` (session :class:`TargetSpec`), ``nvdla_target`` (an open target per
test), ``nvdla_driver`` (:class:`NvdlaDriver` on it), ``nvdla_profile``.
Marker: ``@pytest.mark.nvdla_feature("sdp_lut", ...)`` skips (with the reason) when no
configured profile has the features; the fixtures then open the target on a profile that has them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..drivers.driver import AccessLog, NvdlaDriver
from ..drivers.profiles import HardwareProfile, load_profile
from .targets import TARGETS, TargetSpec, open_target

SPEC_KEY = pytest.StashKey[TargetSpec]()
PROFILES_KEY = pytest.StashKey[list[str]]()
LOCK_KEY = pytest.StashKey[object]()
LOGS_KEY = pytest.StashKey[dict]()
COUNTS_KEY = pytest.StashKey[dict]()

DEFAULT_PROFILES = "nv_small,nv_small_256_full"

#: skip-reason prefixes the summary counts apart: a unit the target cannot run yet, and a
#: feature the configuration's hardware does not have
SKIP_NOT_MODELLED = "not modelled"
SKIP_LACKS = "lacks unit"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nvdla-hil", "NVDLA hardware-in-the-loop")
    g.addoption("--target", choices=TARGETS, default=None, help="where tests run (default: model, or NVDLA_HIL_TARGET)")
    g.addoption("--nvdla-config", default=None, help=f"hardware profile(s), comma-separated, or all (default: all on the model target, "
                     f"{DEFAULT_PROFILES} elsewhere)")
    g.addoption("--nvdla-traces", default=None, help="folder of NVDLA trace tests (or NVDLA_TRACES)")
    g.addoption("--nvdla-txn", default=None, help="folder of nv_full's traceplayer tests, input.txn (or NVDLA_TXN_TESTS)")
    g.addoption("--nvdla-vectors", default=None, help="folder of packed test vectors (default: bundled suites)")
    g.addoption("--nvdla-hw", default=None, help="nvdla/hw checkout for the verilator target (or NVDLA_HW)")
    g.addoption("--lab", default=None, help="lab file for the serial target (or NVDLA_HIL_LAB)")
    g.addoption("--board", default=None, help="board name in the lab file (or NVDLA_HIL_BOARD)")
    g.addoption("--model-semantics", choices=("rtl", "cmod"), default="rtl", help="model follows RTL or C model")
    g.addoption("--poison", action="store_true", help="poison checked output regions before each trace")
    g.addoption("--waves", action="store_true", help="verilator target: dump FST waves")
    g.addoption("--nvdla-log", default=None, help="folder for per-test register access logs")
    g.addoption("--nvdla-summary", action="store_true", help="print a per-test summary table at the end")
    g.addoption("--nvdla-summary-file", default=None, help="also write the summary table to this file")
    g.addoption("--nvdla-allow-empty", action="store_true",
                help="a session in which no test ran (all skipped or deselected) is not an error")


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "nvdla_feature(*features): needs hardware features (skipped when absent)")
    config.addinivalue_line("markers", "nvdla_targets(*kinds): runs only on these targets")
    config.stash[LOGS_KEY] = {}
    config.stash[COUNTS_KEY] = {"ran": 0, "suite": 0, "reports": 0}
    kind = _opt(config, "--target", "NVDLA_HIL_TARGET", "model")
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
    lab, board = _opt(config, "--lab", "NVDLA_HIL_LAB"), _opt(config, "--board", "NVDLA_HIL_BOARD")
    hw = _opt(config, "--nvdla-hw", "NVDLA_HW")
    extra: dict = {}
    if kind == "verilator" and not hw:
        raise pytest.UsageError("--target verilator needs an nvdla/hw checkout: --nvdla-hw PATH (or NVDLA_HW)")
    if kind == "verilator" and not Path(hw).is_dir():
        raise pytest.UsageError(f"--nvdla-hw {hw}: no such folder (the nvdla/hw checkout for --target verilator)")
    if kind == "serial":
        from .lab import BoardBusyError, LabError, SessionBoardLock, resolve_board

        if not lab:
            raise pytest.UsageError("--target serial needs a lab file and a board: --lab FILE --board NAME "
                                    "(or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
        try:
            lab_obj, cfg = resolve_board(lab, board)
        except LabError as e:
            raise pytest.UsageError(f"--lab {lab}: {e}") from None
        board = cfg.name
        profiles = [cfg.profile]  # a board is one hardware build
        if _is_worker(config):
            held = config.workerinput.get("nvdla_board_lock")  # type: ignore[attr-defined]
            if held:
                from .lab import BoardLock

                if not BoardLock(cfg.url, board=cfg.name, path=held["path"]).is_held_by(int(held["pid"])):
                    raise pytest.UsageError(f"board {cfg.name!r}: the regression controller (PID {held['pid']}) "
                                            f"does not hold the board lock {held['path']}")
                extra = {"session_lock": held}
        else:
            slock = SessionBoardLock(lab_obj, cfg)
            try:
                slock.acquire()
            except BoardBusyError as e:
                raise pytest.UsageError(str(e)) from None
            except LabError as e:
                raise pytest.UsageError(str(e)) from None
            config.stash[LOCK_KEY] = slock
            extra = {"session_lock": {"path": str(slock.path), "pid": os.getpid()}}
            if config.pluginmanager.hasplugin("xdist"):
                config.pluginmanager.register(_XdistLockForwarder(extra["session_lock"]), "nvdla-hil-lock-forwarder")
    for i, p in enumerate(profiles):
        try:
            profiles[i] = load_profile(p, nvdla_hw=hw).name if not p.endswith(".spec") else p
        except Exception as e:  # noqa: BLE001 - turn any profile error into a usage error
            raise pytest.UsageError(f"--nvdla-config: {e}") from None
    config.stash[PROFILES_KEY] = profiles
    config.stash[SPEC_KEY] = TargetSpec(
        kind=kind,
        profile=profiles[0],
        semantics=config.getoption("--model-semantics"),
        nvdla_hw=hw,
        waves=config.getoption("--waves"),
        lab=lab,
        board=board,
        extra=extra,
    )
    config.pluginmanager.register(_RunCounter(config), "nvdla-hil-run-counter")
    if os.environ.get("NVDLA_HIL_SUMMARY") or config.getoption("--nvdla-summary"):
        config.pluginmanager.register(RegressionSummary(config), "nvdla-hil-summary")


class _XdistLockForwarder:
    """Tells each xdist worker which session lock its controller holds."""

    def __init__(self, info: dict) -> None:
        self.info = info

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:  # noqa: ANN001
        node.workerinput["nvdla_board_lock"] = dict(self.info)


def pytest_unconfigure(config: pytest.Config) -> None:
    lock = config.stash.get(LOCK_KEY, None)
    if lock is not None:
        lock.release()  # type: ignore[attr-defined]
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


def write_access_log(config: pytest.Config, nodeid: str, log: AccessLog, link_report=None) -> Path | None:  # noqa: ANN001
    d = log_dir(config)
    if d is None:
        return None
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{_safe_nodeid(nodeid)}.log"
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
    if entry is not None:
        write_access_log(item.config, item.nodeid, *entry)


# ---- nothing ran is not green -------------------------------------------------------------------------

_SUITE_FILES = ("suites/test_traces.py", "suites/test_vectors.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    counts = config.stash[COUNTS_KEY]
    counts["suite"] += sum(1 for it in items if any(f in it.nodeid.replace("\\", "/") for f in _SUITE_FILES))


class _RunCounter:
    def __init__(self, config: pytest.Config) -> None:
        self.counts = config.stash[COUNTS_KEY]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.counts["reports"] += 1
        if any(f in report.nodeid.replace("\\", "/") for f in _SUITE_FILES):
            self.counts["suite"] += 1
        if report.when == "call" and report.outcome in ("passed", "failed"):
            self.counts["ran"] += 1
        elif report.failed:  # an error in set-up or teardown is a result too
            self.counts["ran"] += 1


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _is_worker(config) or config.getoption("--nvdla-allow-empty"):
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
        if tr is not None:
            tr.write_line(msg, red=True)


def configured_profiles(config: pytest.Config) -> list[str]:
    """The profiles this run may use, in the order given."""
    return list(config.stash[PROFILES_KEY])


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
        pytest.skip("serial target needs --lab FILE --board NAME (or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
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
        profiles = ", ".join(item.config.stash[PROFILES_KEY])
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
def nvdla_target(request: pytest.FixtureRequest, nvdla_spec: TargetSpec, nvdla_profile: HardwareProfile) -> Iterator:
    """An open target for this test, released afterwards (even on failure)."""
    target = open_target(suite_spec(request.config, nvdla_profile))
    with target:
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

    @staticmethod
    def _reason(report: pytest.TestReport) -> str:
        if report.passed:
            return ""
        if report.skipped and isinstance(report.longrepr, tuple):
            return str(report.longrepr[2]).removeprefix("Skipped: ")
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
            outcome = "error" if report.when != "call" and report.failed else report.outcome
            self.rows.append((report.nodeid, outcome, report.duration, self._reason(report)))

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        tr = terminalreporter
        spec = self.config.stash[SPEC_KEY]
        title = f"nvdla-hil regression on {spec.kind} ({', '.join(self.config.stash[PROFILES_KEY])})"
        tr.write_sep("=", title)
        lines: list[str] = [title]
        write_line = tr.write_line

        class _Tee:
            @staticmethod
            def write_line(line: str) -> None:
                lines.append(line)
                write_line(line)

        tr = _Tee
        classes = ("passed", "failed", "error", "skipped: not modelled", "skipped: lacks unit", "skipped: other")
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
        tr.write_line("summary: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in classes))
        path = self.config.getoption("--nvdla-summary-file", default=None)
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
