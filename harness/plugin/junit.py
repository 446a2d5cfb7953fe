"""What each test ran on: JUnit classname and ``<properties>`` (target, profile, board or RTL
build, model semantics, injected model bugs, seed - the vector's, else the run's
``--hypothesis-seed``/``-p randomly`` seed -, nvdla-hil's version with its commit, golden source),
and the report attributes that survive xdist's and Dask's serialisation (suite test, golden kind, dead board, bad input);
the seconds a test waited for a lock another process held (``lock_wait_s``, ``lock_waits``; a
"lock waits" section of the terminal summary), apart from its own time.
"""

from __future__ import annotations

import functools
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ...drivers.uartbone import BoardDeadError
from ...sims import lockwait
from ..results.stopping import reason_of
from ..results.textsafe import is_term_safe, term_safe
from .keys import CURRENT_ITEMS_KEY, GOLDEN_KEY, OPENED_KEY, RERUN_WAVES_KEY, SPEC_KEY
from .options import asked_for_nvdla, session_is_ours

if TYPE_CHECKING:
    from ..targets import TargetSpec

#: the shipped suites whose tests make a session nvdla-hil's (their count decides "nothing ran")
SUITE_FILES = ("suites/test_traces.py", "suites/test_vectors.py")
_SUITES_DIR = Path(__file__).resolve().parents[1] / "suites"


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


def is_suite(item: pytest.Item) -> bool:
    return _suite_module(item) is not None or any(f in item.nodeid.replace("\\", "/") for f in SUITE_FILES)


def item_is_ours(item: pytest.Item) -> bool:
    """A test of nvdla-hil: the shipped suites, any test of a session started with ``--nvdla-*``
    options (a user's own tests driving a target through ``suite_spec``), or a test using one of
    the plugin's fixtures or markers (``nvdla_target``, ``nvdla_feature``, ...). Only these get
    nvdla-hil's JUnit ``<properties>``."""
    if is_suite(item) or asked_for_nvdla(item.config):
        return True
    if any(str(f).startswith("nvdla_") for f in getattr(item, "fixturenames", ()) or ()):
        return True
    return any(m.name.startswith("nvdla_") for m in item.iter_markers())


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
    doc = case_manifest(case)
    prov = doc.get("provenance") if doc else None
    seed = prov.get("seed") if isinstance(prov, dict) else None
    return seed if isinstance(seed, int) else None


def case_manifest(case: Path) -> dict | None:
    """A vector case's manifest as a mapping for a JUnit property, or None: only a regular file of a
    manifest's size is read (a FIFO never hangs the run); the test itself reports a bad case."""
    try:
        from ...drivers import yamlstrict
        from ...drivers.files import read_regular
        from ..vectors.format import MAX_MANIFEST_BYTES

        text = read_regular(case / "case.yaml", MAX_MANIFEST_BYTES).decode("utf-8")
        doc = yamlstrict.load(text, str(case / "case.yaml"))
    except Exception:  # noqa: BLE001 - a property is not worth a failure
        return None
    return doc if isinstance(doc, dict) else None


@functools.cache
def _version() -> str:
    from ..results.recorder import project_version

    return project_version()


def run_seed(config: pytest.Config) -> str | None:
    """The seed the run was given (``--hypothesis-seed``, pytest-randomly's ``-p randomly-seed``), else None."""
    for opt in ("randomly_seed", "hypothesis_seed"):
        try:
            v = config.getoption(opt)
        except ValueError:
            continue
        if v not in (None, "default"):
            return str(v)
    return None


def _properties(item: pytest.Item) -> list[tuple[str, object]]:
    """target, profile, board (serial) or RTL build key (verilator), model semantics, injected
    model bugs, seed, nvdla-hil version."""
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
    bugs = spec.extra.get("model_bugs") or []
    if bugs:  # a run with injected bugs is a test of the harness: its JUnit says so
        props.append(("injected_bugs", ",".join(str(b) for b in bugs)))
    seed: int | str | None = _vector_seed(item)
    if seed is None:
        seed = run_seed(item.config)
    if seed is not None:
        props.append(("seed", seed))
    props.append(("nvdla_hil_version", _version()))
    golden = vector_golden(item)
    if golden is not None:  # where the case's goldens came from: an oracle or the model itself
        props.append(("golden_source", golden))
        props.append(("checked_against", "self-consistency" if golden == "model" else "oracle"))
    return props


def vector_golden(item: pytest.Item) -> str | None:
    """``golden_source.kind`` of a packed-vector test's case (rtl, cmod, seed, hand, model), else None."""
    if GOLDEN_KEY in item.stash:
        return item.stash[GOLDEN_KEY] or None
    params = getattr(getattr(item, "callspec", None), "params", {}) or {}
    case = params.get("vector_case")
    kind = ""
    if isinstance(case, Path):
        doc = case_manifest(case)
        gs = doc.get("golden_source") if doc else None
        kind = str(gs.get("kind", "")) if isinstance(gs, dict) else ""
    item.stash[GOLDEN_KEY] = kind
    return kind or None


#: tests the session was stopped in before they had a result (Ctrl-C, SIGTERM, pytest.exit):
#: (item, seconds it ran, why); each gets a whole JUnit testcase of its own (:func:`close_cut_off`)
CUT_OFF_KEY = pytest.StashKey[list[tuple[pytest.Item, float, str]]]()
#: the test has a result (its call ran, or its set-up failed or skipped): a later cut does not take it away
HAS_RESULT_KEY = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):  # noqa: ANN001, ANN201
    running = item.config.stash.setdefault(CURRENT_ITEMS_KEY, [])
    running.append(item)
    t0 = time.monotonic()
    try:
        # every wait of the test for a lock another process holds (a simulator or C model another
        # process builds, a board another test uses): reported apart from the test's own time
        with lockwait.recording() as waits:
            item.stash[LOCK_WAITS_KEY] = waits
            outcome = yield
    finally:
        running.remove(item)
    exc = outcome.excinfo[1] if outcome.excinfo else None
    if isinstance(exc, (KeyboardInterrupt, pytest.exit.Exception)) and not item.stash.get(HAS_RESULT_KEY, False):
        why = reason_of(exc) or f"pytest.exit: {exc}"
        item.config.stash.setdefault(CUT_OFF_KEY, []).append((item, time.monotonic() - t0, why))


def close_cut_off(session: pytest.Session) -> None:
    """Give each test the session was stopped in a whole JUnit testcase before pytest writes the
    file: its name and classname, the time it ran, and ``<error type="interrupted">`` - never a
    nameless testcase that the counts leave out, never a pass."""
    cut = session.config.stash.get(CUT_OFF_KEY, [])
    if not cut:
        return
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a pytest without it writes no junit.xml of ours
        return
    xml = session.config.stash.get(xml_key, None)
    if xml is None:
        return
    for item, seconds, why in cut:
        report = pytest.TestReport(item.nodeid, item.location, {}, "failed", f"interrupted: {why}", "call",
                                   user_properties=list(item.user_properties), duration=seconds)
        cls = _classname(item)
        if cls:
            setattr(report, "nvdla_classname", cls)  # noqa: B010 - an attribute pytest's TestReport does not declare
        reporter = xml.node_reporter(report)
        reporter.record_testreport(report)
        junit_classname(session.config, report)
        reporter.duration = max(float(getattr(reporter, "duration", 0.0) or 0.0), seconds)
        err = ET.Element("error", message=f"interrupted: {why} while the test ran (no result)", type="interrupted")
        err.text = f"the session was {why} while this test ran; it has no result"
        reporter.append(err)  # counted as an error: the testsuite's tests and errors include it


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):  # noqa: ANN001, ANN201
    if call.when == "teardown" and RERUN_WAVES_KEY not in item.config.stash and item_is_ours(item):
        have = {k for k, _ in item.user_properties}
        item.user_properties.extend((k, v) for k, v in _properties(item) if k not in have)
    if call.when == "teardown" and item_is_ours(item):
        _lock_wait_properties(item)
    outcome = yield
    report = outcome.get_result()
    if call.when == "call" or not report.passed:
        item.stash[HAS_RESULT_KEY] = True  # a cut in its teardown leaves its result as it is
    cls = _classname(item)
    if cls:
        report.nvdla_classname = cls  # survives xdist's report serialisation
    if is_suite(item):
        report.nvdla_suite = True
    golden = vector_golden(item)
    if golden is not None:
        report.nvdla_golden = golden  # survives serialisation; "model": a pass is self-consistency only
    if call.excinfo is not None and (call.excinfo.errisinstance(BoardDeadError)
                                     or any(c.__name__ == "BoardDeadError" for c in call.excinfo.type.__mro__)):
        report.nvdla_board_dead = str(call.excinfo.value)  # survives serialisation (xdist, Dask)
    if call.excinfo is not None and is_suite(item) and is_bad_input(call.excinfo.value):
        # a malformed trace, vector or manifest is the input's fault, not the target's: its own
        # outcome, one line naming the file and line, no traceback (the CLI exits 2 for it)
        report.nvdla_bad_input = str(call.excinfo.value)
        report.longrepr = f"bad input: {term_safe(call.excinfo.value)}"
    if report.longrepr is not None and item_is_ours(item):
        _terminal_safe_longrepr(report)


#: per test (item stash): the :class:`~nvdla_hil.sims.lockwait.LockWait` list of its waits for locks
LOCK_WAITS_KEY = pytest.StashKey[list]()
#: JUnit properties of a test that waited for a lock another process held: the seconds (apart
#: from the test's own time, which includes them) and which locks, held by whom
LOCK_WAIT_PROPERTY = "lock_wait_s"
LOCK_WAITS_PROPERTY = "lock_waits"


def _lock_wait_properties(item: pytest.Item) -> None:
    """``lock_wait_s`` (seconds, to the millisecond as JUnit's ``time``) and ``lock_waits`` (each lock, holder and
    seconds) of a test that waited for a lock; nothing for one that did not."""
    waits = item.stash.get(LOCK_WAITS_KEY, [])
    if not waits or any(k == LOCK_WAIT_PROPERTY for k, _ in item.user_properties):
        return
    item.user_properties.append((LOCK_WAIT_PROPERTY, round(sum(w.seconds for w in waits), 3)))
    item.user_properties.append((LOCK_WAITS_PROPERTY, "; ".join(w.line() for w in waits)))


class LockWaitSummary:
    """The terminal summary's "lock waits" section: each test that waited for a lock another
    process held, how long (not the test's own time) and for which lock. Reads the reports'
    user properties, so it works in the controller of an xdist or Dask run too."""

    def __init__(self) -> None:
        self.waits: list[tuple[str, float, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        props = dict(getattr(report, "user_properties", None) or ())
        if LOCK_WAIT_PROPERTY in props:
            self.waits.append((report.nodeid, float(props[LOCK_WAIT_PROPERTY]), str(props.get(LOCK_WAITS_PROPERTY, ""))))

    def lines(self) -> list[str]:
        if not self.waits:
            return []
        total = sum(s for _, s, _ in self.waits)
        out = [f"lock waits: {len(self.waits)} test(s) waited {total:.1f} s in all for locks other processes held "
               f"(counted in their durations, not their own work; JUnit property {LOCK_WAIT_PROPERTY})"]
        out += [f"  {term_safe(n)}: {term_safe(what)}" for n, _, what in self.waits]
        return out

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        lines = self.lines()
        if lines:
            terminalreporter.write_sep("-", "nvdla-hil lock waits")
            for line in lines:
                terminalreporter.write_line(line)


def register_lock_wait_summary(config: pytest.Config) -> None:
    """Register :class:`LockWaitSummary` once per session (the controller's and each worker's)."""
    if not config.pluginmanager.has_plugin("nvdla-hil-lock-waits"):
        config.pluginmanager.register(LockWaitSummary(), "nvdla-hil-lock-waits")


def _terminal_safe_longrepr(report: pytest.TestReport) -> None:
    """A failure or skip text holding a name or message from a file that would drive the terminal
    (``ESC ] 0 ;``, ``ESC [ 2 J``): pytest prints it, and junit.xml keeps it, escaped."""
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:  # a skip: (file, line, reason)
        path, line, reason = report.longrepr
        if not is_term_safe(str(reason)):
            report.longrepr = (path, line, term_safe(reason))
        return
    text = report.longreprtext
    if not is_term_safe(text, lines=True):
        report.longrepr = term_safe(text, lines=True)


def is_bad_input(exc: BaseException) -> bool:
    """A malformed input found while a test ran: the tool's :class:`InputError` (traces, YAML,
    lab files) or a :class:`~nvdla_hil.harness.vectors.VectorError`."""
    from ...drivers.errors import InputError

    return isinstance(exc, InputError) or any(
        c.__name__ == "VectorError" and c.__module__.startswith("nvdla_hil.") for c in type(exc).__mro__)


def junit_classname(config: pytest.Config, report: pytest.TestReport) -> None:
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


def set_junit_family(config: pytest.Config) -> None:
    """``junit_family=xunit1`` unless the user chose one: per-test ``<properties>`` (target,
    profile, board or RTL build, semantics, seed, lock waits) are valid JUnit only in xunit1; and the
    terminal summary of lock waits (:class:`LockWaitSummary`). Only in a session that runs
    nvdla-hil's tests (:func:`session_is_ours`)."""
    if not session_is_ours(config):
        return
    register_lock_wait_summary(config)  # its waits are JUnit properties too
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
