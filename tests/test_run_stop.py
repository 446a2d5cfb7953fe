"""A signal never splits a result's bookkeeping (harness/results/stopping.py).

The project's CI (2026-11-29) saw ``nvdla-hil regress`` stopped by SIGTERM exit 3 (an internal
error) although the results database said 130: the interrupt had landed inside pytest's JUnit
writer finalising a testcase (``_NodeReporter.finalize`` clears the testcase's attributes before
it stores its XML), and writing junit.xml at the session's end then raised AttributeError. A
second run found the other way: an interrupt on an instruction with no line number, whose
traceback pytest's terminal reporter cannot format (TypeError). Both are delivered here on
purpose: a signal raised inside each bookkeeping hook, and inside that finalize window.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nvdla_hil.harness.results.db import ResultsDB
from nvdla_hil.harness.results.stopping import RunStop, reason_of, without_lineless_entries

BUG = "SDP.D_CVT_OFFSET.CVT_OFFSET+1"  # some traces fail, so failure reports are written too
ENV_KEYS = ("NVDLA_HIL_RESULTS_DB", "NVDLA_HIL_RESULTS", "NVDLA_HIL_TARGET", "NVDLA_HIL_CONFIG")

#: a pytest plugin that sends the run SIGTERM from inside one hook (SIG_AT), at its SIG_N-th call
INJECTOR = textwrap.dedent('''
    import os, signal
    import pytest

    WHERE, WHEN = os.environ["SIG_AT"], int(os.environ["SIG_N"])
    calls = {"n": 0}

    def _signal_here(hook):
        if hook == WHERE:
            calls["n"] += 1
            if calls["n"] == WHEN:
                signal.raise_signal(signal.SIGTERM)
                for _ in range(100):  # the handler runs at the next instruction: here
                    pass

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(report): _signal_here("logreport")
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(item): _signal_here("runtest_call")
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(session): _signal_here("collection_finish")
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(session): _signal_here("sessionfinish")

    if WHERE == "junit_finalize":  # the window CI hit, between clearing the testcase and storing its XML
        import _pytest.junitxml as junitxml

        def finalize(self):
            data = self.to_xml()
            self.__dict__.clear()
            _signal_here("junit_finalize")
            self.to_xml = lambda: data

        junitxml._NodeReporter.finalize = finalize
''')


@pytest.mark.slow  # a signal campaign, a regression per case: `make test-slow`
@pytest.mark.parametrize(("where", "nth"), [("junit_finalize", 3), ("logreport", 3), ("collection_finish", 1),
                                            ("sessionfinish", 1), ("runtest_call", 3)])
def test_sigterm_inside_the_bookkeeping_stops_the_run_with_130_and_whole_results(
        where: str, nth: int, trace_root: Path, tmp_path: Path) -> None:
    if where == "junit_finalize":
        import _pytest.junitxml as junitxml

        if not hasattr(getattr(junitxml, "_NodeReporter", None), "finalize"):
            pytest.skip("this pytest's JUnit writer has no _NodeReporter.finalize (the window CI hit)")
    (tmp_path / "sigterm_injector.py").write_text(INJECTOR)
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    env.update(SIG_AT=where, SIG_N=str(nth), PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")])))
    argv = [sys.executable, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "traces", "--traces", str(trace_root),
            "--results-dir", str(results), "--model-bug", BUG, "-k", "sdp_3x3x33 or cdp_8x8x32", "--",
            "-p", "sigterm_injector"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 130, out[-3000:]
    assert "internal error" not in out and "Traceback" not in out, out[-3000:]
    run_dir = next(p for p in results.iterdir() if p.is_dir() and not p.is_symlink())
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")  # whole, parseable
    assert suite is not None
    with ResultsDB(results / "results.sqlite") as db:
        run = db.runs()[0]
        assert (run["status"], run["exit_code"], run["note"]) == ("interrupted", 130, "stopped by SIGTERM"), run
        rows = db.tests_of([run["id"]])
    # every test the database has is in junit.xml too (the interrupt split neither writer)
    in_junit = {tc.get("name") for tc in suite.iter("testcase")}
    assert {r["test"].split("::")[-1] for r in rows} <= in_junit, (rows, in_junit)
    if where == "junit_finalize":  # at the third test's JUnit record: the first two were whole before it
        assert len(rows) >= 2, rows
    if where == "sessionfinish":  # held until the end: every test ran and is recorded
        assert len(rows) == run["collected"] == len(in_junit)
    if where == "runtest_call":  # at once, inside the third test: it is "interrupted", never a pass
        cut = [r for r in rows if r["outcome"] == "interrupted"]
        assert len(cut) == 1 and "stopped by SIGTERM" in cut[0]["reason"], rows
        assert len(rows) == 3, rows


@pytest.fixture
def run_stop() -> RunStop:
    """A RunStop holding SIGTERM and SIGHUP, whatever this test process inherited (a run started in
    the background or under nohup inherits SIGINT or SIGHUP ignored, which RunStop keeps so)."""
    saved = {s: signal.signal(s, lambda *_: None) for s in (signal.SIGTERM, signal.SIGHUP)}
    stop = RunStop()
    stop.install()
    try:
        yield stop
    finally:
        stop.uninstall()
        for s, old in saved.items():
            signal.signal(s, old)


def test_a_signal_in_a_held_block_is_raised_when_it_ends(run_stop: RunStop) -> None:
    after = []
    with pytest.raises(KeyboardInterrupt) as caught:
        with run_stop.held():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
            after.append("the block ran to its end")
    assert after == ["the block ran to its end"]
    assert str(caught.value) == "SIGTERM" and run_stop.reason == "stopped by SIGTERM" and not run_stop.pending
    assert reason_of(caught.value) == "stopped by SIGTERM"


def test_a_second_signal_stops_at_once_and_outside_a_block_at_once(run_stop: RunStop) -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt) as caught:
        with run_stop.held():
            signal.raise_signal(signal.SIGHUP)
            signal.raise_signal(signal.SIGHUP)
            for _ in range(1000):
                pass
            reached.append("after the second signal")
    assert reached == [] and str(caught.value) == "SIGHUP" and run_stop.reason == "stopped by SIGHUP"
    with pytest.raises(KeyboardInterrupt) as caught:
        signal.raise_signal(signal.SIGTERM)
        for _ in range(1000):
            pass
    assert str(caught.value) == "SIGTERM"
    assert run_stop.reason == "stopped by SIGHUP"  # the first signal says what stopped the run


def test_at_the_session_end_a_signal_is_recorded_not_raised(run_stop: RunStop) -> None:
    with run_stop.held(raise_after=False):
        signal.raise_signal(signal.SIGTERM)
        for _ in range(1000):
            pass
    assert run_stop.pending == "SIGTERM" and run_stop.reason == "stopped by SIGTERM"


def test_a_signal_ignored_at_start_stays_ignored_and_handlers_are_given_back() -> None:
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    old_term = signal.getsignal(signal.SIGTERM)
    try:
        stop = RunStop()
        stop.install()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == stop._on_signal  # noqa: SLF001
        stop.uninstall()
        assert signal.getsignal(signal.SIGTERM) == old_term
    finally:
        signal.signal(signal.SIGHUP, old_hup)


def _traceback_with_a_lineless_entry() -> types.TracebackType:
    """A real interrupt's traceback with an entry spliced in whose line is None (CPython 3.11 gives
    one when the signal lands on an instruction without a line number)."""
    def inner() -> None:
        raise KeyboardInterrupt("SIGTERM")

    try:
        inner()
    except KeyboardInterrupt as e:
        tb = e.__traceback__
    assert tb is not None and tb.tb_next is not None
    lineless = types.TracebackType(tb.tb_next, tb.tb_frame, 10**6, -1)  # an instruction past the code: no line
    assert lineless.tb_lineno is None
    return types.TracebackType(lineless, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)


def test_line_less_traceback_entries_are_dropped_so_pytest_can_format_the_interrupt() -> None:
    tb = _traceback_with_a_lineless_entry()
    lines_before = [t.tb_lineno for t in _entries(tb)]
    assert None in lines_before
    head = without_lineless_entries(tb)
    assert head is tb and [t.tb_lineno for t in _entries(head)] == [n for n in lines_before if n is not None]
    excinfo = pytest.ExceptionInfo.from_exc_info((KeyboardInterrupt, KeyboardInterrupt("SIGTERM"), head))
    assert "KeyboardInterrupt" in str(excinfo.getrepr(funcargs=True))  # what pytest's terminal reporter does


def _entries(tb: types.TracebackType | None) -> list[types.TracebackType]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def test_sigterm_while_regress_writes_its_results_is_held_then_exit_130_with_whole_results(
        trace_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """After the tests: a scheduler's kill while ``regress`` writes run.json, the report and
    ``latest`` (it used to end the process there, exit 143, run.json left "running")."""
    from nvdla_hil.harness.cli import main
    from nvdla_hil.harness.cli import regress as cli_regress

    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)
    real = cli_regress._write_report

    def report_then_killed(run: Path, db: object) -> None:
        signal.raise_signal(signal.SIGTERM)  # held: the report is still written
        real(run, db)

    monkeypatch.setattr(cli_regress, "_write_report", report_then_killed)
    before = signal.getsignal(signal.SIGTERM)
    results = tmp_path / "results"
    code = main(["regress", "--suite", "traces", "--traces", str(trace_root), "--results-dir", str(results),
                 "-k", "sdp_3x3x33 or cdp_8x8x32"])
    err = capsys.readouterr().err
    assert code == 130, err[-2000:]
    assert "SIGTERM while the results were written: they are whole" in err, err
    assert signal.getsignal(signal.SIGTERM) == before  # given back as it was
    run_dir = (results / "latest").resolve()
    meta = json.loads((run_dir / "run.json").read_text())
    assert (meta["status"], meta["exit_code"]) == ("interrupted", 130), meta
    assert meta["tests"]["finished"] == meta["tests"]["collected"] > 0, meta  # every test ran and is recorded
    assert (run_dir / "report.html").is_file() and ET.parse(run_dir / "junit.xml").getroot() is not None
    with ResultsDB(results / "results.sqlite") as db:
        assert db.runs()[0]["exit_code"] == 130
