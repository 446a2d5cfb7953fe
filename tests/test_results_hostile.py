"""Hostile input to the results surfaces (the results database, run folders, names printed on a
terminal, a regression stopped mid-test), each through the real command:

* a non-http(s) ``--bug`` link is refused (exit 2);
* a corrupt, truncated, unknown-version, read-only or not-a-file database: ``history``,
  ``dashboard`` and ``regress`` exit 2 naming the path and what is wrong, never a traceback;
* a run folder with a malformed junit.xml or run.json (not XML, not an object, wrong field
  types, huge, a FIFO): ``history import`` and ``report`` exit 2 naming the file, never hang;
* names holding terminal escape codes are printed escaped (summary, history);
* a regression stopped by SIGTERM mid-test records that test as ``interrupted`` - in the
  database, junit.xml (well-formed, counts matching), the report and the dashboard.

The browser side of hostile names (script injection) is tests/test_results_hostile_browser.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from nvdla_hil.harness.cli import main
from nvdla_hil.harness.results.db import ResultsDB
from nvdla_hil.harness.results.signature import failure_info, signature_of
from nvdla_hil.harness.results.textsafe import http_link, term_safe

PY = sys.executable
ESC = "\x1b]0;pwned\x07\x1b[2J"  # sets the window title, clears the screen
SIG = signature_of(failure_info("failed", "call", "Failed", f"sync_id_0: crc {ESC} MISMATCH"))


def _db_with_a_failure(path: Path, text: str = "x") -> None:
    with ResultsDB(path) as db:
        db.start_run(f"r1{text}", started=1767225600.0, target=f"model{text}", profile=f"nv_small{text}",
                     suite="vectors", semantics="rtl", selection="", model_bugs=f"bug{text}")
        db.record_test(f"r1{text}", f"m::test_vector[a{text}]", "failed", 1.0, reason=f"out {text} MISMATCH",
                       signature=SIG, test=f"m::test_vector[a{text}]")
        db.record_test(f"r1{text}", f"m::test_vector[b{text}]", "passed", 1.0, test=f"m::test_vector[b{text}]")
        db.finish_run(f"r1{text}", 1, "interrupted", note=f"note {text}")


# ---- 1: bug links -------------------------------------------------------------------------------------


@pytest.mark.parametrize("bug", ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)",
                                 "java\tscript:alert(1)", "data:text/html,<script>alert(1)</script>",
                                 "vbscript:x", "file:///etc/passwd", "//evil.example/x", "https:", "http:///x",
                                 "https://ok.example/\x1b]0;x\x07"])
def test_a_bug_link_that_is_not_http_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], bug: str) -> None:
    db = tmp_path / "results.sqlite"
    _db_with_a_failure(db)
    code = main(["history", "--results-db", str(db), "label", SIG[0][:8], "--text", "known", "--bug", bug])
    err = capsys.readouterr().err
    assert code == 2 and "--bug" in err and "http" in err and "\x1b" not in err
    with ResultsDB(db) as rdb:
        assert rdb.labels() == {}


def test_an_http_bug_link_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "results.sqlite"
    _db_with_a_failure(db)
    for bug in ("https://bugs.example/NV-1?a=b#c", "HTTP://bugs.example/2"):
        assert main(["history", "--results-db", str(db), "label", SIG[0][:8], "--text", "known", "--bug", bug]) == 0
        with ResultsDB(db) as rdb:
            assert rdb.labels()[SIG[0]]["bug"] == bug
    assert http_link("https://bugs.example/NV-1") == "https://bugs.example/NV-1"
    assert http_link("javascript:alert(1)") is None and http_link("") is None


# ---- 2: a database that cannot be used ---------------------------------------------------------------


def _schema_version(value: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        _db_with_a_failure(path)
        with sqlite3.connect(path) as c:
            c.execute(f"UPDATE nvdla_schema SET version = {value}")
    return make


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is no SQLite database, just text\n" * 200)


def _truncated(path: Path) -> None:
    _db_with_a_failure(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _folder(path: Path) -> None:
    path.mkdir()


BROKEN = {
    "garbage": (_garbage, "corrupt"),
    "truncated": (_truncated, "corrupt"),
    "version 0": (_schema_version("0"), "unknown schema version 0"),
    "version -1": (_schema_version("-1"), "unknown schema version -1"),
    "version abc": (_schema_version("'abc'"), "unknown schema version 'abc'"),
    "a folder": (_folder, "not a regular file"),
}


@pytest.fixture()
def read_only_db(tmp_path: Path):  # noqa: ANN201
    """A results database file nobody may write: immutable (chattr +i) as root, mode 0444 otherwise."""
    path = tmp_path / "ro.sqlite"
    _db_with_a_failure(path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    with ResultsDB(path) as db:  # a run whose process was killed: reaping it would need a write
        db.start_run("r1x-killed", started=1767225700.0, pid=dead.pid, target="model", profile="nv_small")
    if os.geteuid() == 0:
        r = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make a file read-only for root here (chattr +i: {r.stderr.strip()})")
        yield path
        subprocess.run(["chattr", "-i", str(path)], check=False)
    else:
        path.chmod(0o444)
        yield path
        path.chmod(0o644)


def _commands(db: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {"history": ["history", "--results-db", str(db)],
            "dashboard": ["dashboard", "--results-db", str(db), "--out", str(tmp_path / "site")],
            "regress": ["regress", "--suite", "vectors", "-k", "sdp_cvt-s1-000", "--results-dir", str(tmp_path / "r"),
                        "--results-db", str(db)]}


def _exits_2_naming(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    both = out + err
    assert code == 2, both[-3000:]
    assert "Traceback" not in both and "INTERNALERROR" not in both and "internal error" not in both, both[-3000:]
    for n in needles:
        assert n in both, (n, both[-3000:])


@pytest.mark.parametrize("kind", list(BROKEN))
@pytest.mark.parametrize("command", ["history", "dashboard", "regress"])
def test_a_broken_database_is_exit_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str,
                                               command: str) -> None:  # fmt: skip
    make, what = BROKEN[kind]
    db = tmp_path / "results.sqlite"
    make(db)
    _exits_2_naming(_commands(db, tmp_path)[command], capsys, str(db), what)


@pytest.mark.parametrize("command", ["regress", "label", "import"])
def test_writing_to_a_read_only_database_is_exit_2_naming_it(read_only_db: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str], command: str) -> None:  # fmt: skip
    argv = {"regress": _commands(read_only_db, tmp_path)["regress"],
            "label": ["history", "--results-db", str(read_only_db), "label", SIG[0][:8], "--text", "known"],
            "import": ["history", "--results-db", str(read_only_db), "import", str(_run_folder(tmp_path))]}[command]
    _exits_2_naming(argv, capsys, str(read_only_db), "read-only")


@pytest.mark.parametrize("command", ["history", "dashboard"])
def test_a_read_only_database_is_read_as_it_is(read_only_db: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str], command: str) -> None:  # fmt: skip
    """Reading needs no write: the runs are shown; a killed run that cannot be marked interrupted
    stays "running" (never passed) and the reader is told why."""
    assert main(_commands(read_only_db, tmp_path)[command]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if command == "history":
        assert re.search(r"r1x-killed .* running ", out) and re.search(r"r1x .* interrupted ", out), out
        assert "read-only" in err and str(read_only_db) in err and "not marked interrupted" in err, err
    else:
        assert 'data-status="running"' in (tmp_path / "site" / "index.html").read_text()


@pytest.mark.parametrize("command", ["history", "dashboard"])
@pytest.mark.parametrize("update, what", [("UPDATE nvdla_runs SET n_passed = '<script>x</script>'", "n_passed = '<script>"),
                                          ("UPDATE nvdla_tests SET duration = 'slow'", "duration = 'slow'"),
                                          ("UPDATE nvdla_runs SET started = 'yesterday'", "started = 'yesterday'")])
def test_a_row_with_text_where_a_number_belongs_is_corrupt(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           update: str, what: str, command: str) -> None:  # fmt: skip
    db = tmp_path / "results.sqlite"
    _db_with_a_failure(db)
    with sqlite3.connect(db) as c:
        c.execute(update)
    _exits_2_naming(_commands(db, tmp_path)[command], capsys, str(db), "corrupt", what)
    assert not (tmp_path / "site" / "index.html").exists()


# ---- 3: malformed run folders ------------------------------------------------------------------------

JUNIT = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" '
         'skipped="0" tests="2"><testcase classname="nvdla_hil.harness.suites.test_vectors" name="test_vector[a]" '
         'time="0.1"><failure message="out MISMATCH">x</failure></testcase><testcase '
         'classname="nvdla_hil.harness.suites.test_vectors" name="test_vector[b]" time="0.2" /></testsuite></testsuites>')
RUN_JSON = json.dumps({"status": "finished", "command": ["nvdla-hil", "regress"], "started": "2026-11-29T00:00:00+00:00",
                       "seconds": 1.0, "exit_code": 1, "pytest_argv": []})


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


#: case -> (file, how to break it, what the message says)
MALFORMED = {
    "junit not XML": ("junit.xml", lambda p: p.write_text("<testsuites><testcase name='x'"), "not valid JUnit XML"),
    "junit not JUnit": ("junit.xml", lambda p: p.write_text("<html><body/></html>"), "not a JUnit file"),
    "junit bad time": ("junit.xml", lambda p: p.write_text(JUNIT.replace('time="0.1"', 'time="soon"')), "time 'soon'"),
    "junit entities": ("junit.xml", lambda p: p.write_text(
        '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        "<testsuites><testcase name='&b;'/></testsuites>"), "DOCTYPE"),
    "junit binary": ("junit.xml", lambda p: p.write_bytes(b"\x00\xff\xfe" * 100), "not valid JUnit XML"),
    "run.json a list": ("run.json", lambda p: p.write_text("[1, 2, 3]"), "a JSON list, not an object"),
    "run.json a string": ("run.json", lambda p: p.write_text('"finished"'), "a JSON str, not an object"),
    "run.json a number": ("run.json", lambda p: p.write_text("42"), "a JSON int, not an object"),
    "run.json null": ("run.json", lambda p: p.write_text("null"), "a JSON NoneType, not an object"),
    "run.json not JSON": ("run.json", lambda p: p.write_text("{status: finished"), "not valid JSON"),
    "run.json deep": ("run.json", lambda p: p.write_text("[" * 100000 + "]" * 100000), "not valid JSON"),
    "run.json command a string": ("run.json", lambda p: p.write_text('{"command": "nvdla-hil regress"}'),
                                  "field 'command' is a str"),
    "run.json command of numbers": ("run.json", lambda p: p.write_text('{"command": [1, 2]}'),
                                    "'command' must be a list of strings"),
    "run.json seconds a string": ("run.json", lambda p: p.write_text('{"seconds": "1"}'), "field 'seconds'"),
    "run.json huge": ("run.json", lambda p: p.write_text('{"note": "' + "x" * (5 << 20) + '"}'), "bytes, more than"),
    "run.json a folder": ("run.json", lambda p: (p.unlink(), p.mkdir()), "not a regular file"),
    "run.json a FIFO": ("run.json", _fifo, "not a regular file"),
    "junit a FIFO": ("junit.xml", _fifo, "not a regular file"),
}


def _run_folder(root: Path) -> Path:
    run = root / "results" / "20261129T000000Z-1-abcdef"
    (run / "logs").mkdir(parents=True)
    (run / "junit.xml").write_text(JUNIT)
    (run / "run.json").write_text(RUN_JSON)
    return run


def _nvdla_hil(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A real command in a child (a FIFO that is read would block it: the timeout fails the test)."""
    return subprocess.run([PY, "-m", "nvdla_hil.harness.cli", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_run_folder_is_exit_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          case: str) -> None:  # fmt: skip
    name, spoil, what = MALFORMED[case]
    run = _run_folder(tmp_path)
    spoil(run / name)
    db = tmp_path / "imported.sqlite"
    commands = [["history", "--results-db", str(db), "import", str(run)], ["report", str(run)]]
    for argv in commands:
        if "FIFO" in case:
            r = _nvdla_hil(*argv, cwd=tmp_path)
            code, out = r.returncode, r.stdout + r.stderr
        else:
            code = main(argv)
            out = "".join(capsys.readouterr())
        if argv[0] == "report" and case == "junit a FIFO":  # refused before reading: "no junit.xml"
            assert code == 2 and str(run) in out, out
            continue
        assert code == 2, (argv, out[-3000:])
        assert "Traceback" not in out and "internal error" not in out, out[-3000:]
        assert str(run / name) in out and what in out, (argv, out[-3000:])
    assert not (run / "report.html").exists()
    with ResultsDB(db) as rdb:
        assert rdb.runs() == []  # nothing half-imported


def test_a_fifo_among_the_logs_is_never_read(tmp_path: Path) -> None:
    """A diagnosis sidecar that is a FIFO: the import and the report go on without it (no hang)."""
    run = _run_folder(tmp_path)
    os.mkfifo(run / "logs" / "test_vector_a.diag.json")
    r = _nvdla_hil("history", "--results-db", str(tmp_path / "db.sqlite"), "import", str(run), cwd=tmp_path)
    assert r.returncode == 0 and "2 tests" in r.stdout, r.stdout + r.stderr
    r = _nvdla_hil("report", str(run), cwd=tmp_path)
    assert r.returncode == 0 and (run / "report.html").is_file(), r.stdout + r.stderr


# ---- 5: names that would drive the terminal -----------------------------------------------------------


def test_term_safe_escapes_every_control_character() -> None:
    assert term_safe(ESC) == "\\x1b]0;pwned\\x07\\x1b[2J"
    assert term_safe("a\u202eb\x9bc\x7fd\u2066") == "a\\u202eb\\x9bc\\x7fd\\u2066"
    assert term_safe("a\nb\tc") == "a\\x0ab\\x09c" and term_safe("a\nb\tc", lines=True) == "a\nb\tc"
    assert term_safe("plain ünïcode name [x/y]") == "plain ünïcode name [x/y]"


def test_history_prints_names_from_the_database_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "results.sqlite"
    _db_with_a_failure(db, ESC)
    with ResultsDB(db) as rdb:
        rdb.set_label(SIG[0], f"label {ESC}", "https://bugs.example/1", ESC)
    assert main(["history", "--results-db", str(db)]) == 0
    assert main(["history", "--results-db", str(db), "label", SIG[0][:8], "--text", f"again {ESC}"]) == 0
    assert main(["dashboard", "--results-db", str(db), "--out", str(tmp_path / f"site{ESC}")]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out  # shown, escaped: names, reasons, label, note, profile
    assert "label \\x1b]0;pwned" in out and "again \\x1b]0;pwned" in out and "note \\x1b]0;" in out


def test_the_regression_summary_prints_vector_names_escaped(tmp_path: Path) -> None:
    """A vector case folder named with escape codes, one good and one malformed: the summary
    table, the bad-input line and pytest's own summary show the name escaped."""
    from nvdla_hil.harness.vectors import bundled_root, find_cases

    src = next(p for p in find_cases(bundled_root()) if p.name == "sdp_cvt-s1-000")
    good = tmp_path / "vec" / "sdp_cvt" / f"good{ESC}"
    bad = tmp_path / "vec" / "sdp_cvt" / f"bad{ESC}"
    shutil.copytree(src, good)
    shutil.copytree(src, bad)
    (bad / "case.yaml").write_text((bad / "case.yaml").read_text() + "\nbogus_key: 1\n")
    r = _nvdla_hil("regress", "--suite", "vectors", "--vectors", str(tmp_path / "vec"), "--results-dir",
                   str(tmp_path / "r"), "--results-db", str(tmp_path / "db.sqlite"), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-3000:]  # the malformed case is bad input
    assert "\x1b" not in out and "\x07" not in out, repr(out[max(out.find("\x1b") - 200, 0):][:400])
    summary = next((tmp_path / "r").glob("2*/summary.txt")).read_text()  # passing rows: in the summary file
    assert "\x1b" not in summary and re.search(r"good\\x1b\]0;pwned\\x07\\x1b\[2J\]\s+passed", summary), summary
    assert re.search(r"bad\\x1b\]0;pwned\\x07\\x1b\[2J\]\s+bad input", out), out[-3000:]


# ---- 4: a regression stopped by SIGTERM in the middle of a test ---------------------------------------

SLOW_TEST = '''
import os, time
from pathlib import Path

def test_quick():
    pass

def test_slow():
    Path(os.environ["SLOW_MARK"]).write_text("started")
    time.sleep(120)
'''


def test_a_test_cut_off_by_sigterm_is_interrupted_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "test_slow.py").write_text(SLOW_TEST)
    mark = tmp_path / "started"
    db = tmp_path / "db.sqlite"
    res = tmp_path / "r"
    p = subprocess.Popen([PY, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "vectors", "-k",
                          "sdp_cvt-s1-000 or test_quick or test_slow", "--results-dir", str(res), "--results-db", str(db),
                          "--", str(tmp_path / "extra" / "test_slow.py")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                         env={**os.environ, "SLOW_MARK": str(mark)})
    deadline = time.monotonic() + 120
    while not mark.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), "the slow test never started"
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, out[-3000:] + err[-3000:]
    run = (res / "latest").resolve()

    # the database: the cut-off test is interrupted (with the time it ran), never passed
    with ResultsDB(db) as rdb:
        rows = {t["nodeid"].split("::")[-1]: t for t in rdb.tests_of([run.name])}
        (r,) = rdb.runs()
    assert rows["test_slow"]["outcome"] == "interrupted", rows["test_slow"]
    assert rows["test_slow"]["duration"] >= 0.3 and "SIGTERM" in rows["test_slow"]["reason"]
    assert rows["test_quick"]["outcome"] == "passed" and rows["test_vector[sdp_cvt/sdp_cvt-s1-000]"]["outcome"] == "passed"
    assert r["status"] == "interrupted" and r["n_passed"] == 2 and r["exit_code"] == 130

    # junit.xml: every testcase named, the counts are the testcases
    root = ET.parse(run / "junit.xml").getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert all(c.get("name") for c in cases), [c.attrib for c in cases]
    assert int(suite.get("tests", -1)) == len(cases) == 3
    errors = [c for c in cases if c.find("error") is not None]
    assert int(suite.get("errors", -1)) == len(errors) == 1 and int(suite.get("failures", -1)) == 0
    (cut,) = errors
    assert cut.get("name") == "test_slow" and cut.find("error").get("type") == "interrupted"

    # the regression summary names it
    assert re.search(r"test_slow\s+interrupted", out), out[-3000:]

    # the report: interrupted, not passed
    html = (run / "report.html").read_text()
    assert re.search(r'<tr data-outcome="interrupted"><td><code>test_slow</code>', html), html[-3000:]
    assert 'data-outcome="interrupted">1<' in html and 'data-outcome="passed">2<' in html

    # the dashboard: its cell is drawn as interrupted, not green
    assert main(["dashboard", "--results-db", str(db), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    cell = re.search(r'<tr data-test="[^"]*test_slow"><td class="name">test_slow</td>(<td [^>]*>)', page)
    assert cell and 'class="i"' in cell.group(1) and 'data-outcome="interrupted"' in cell.group(1), page[-2000:]

    # the import of the run folder reads it back the same way
    assert main(["history", "--results-db", str(tmp_path / "again.sqlite"), "import", str(run)]) == 0
    with ResultsDB(tmp_path / "again.sqlite") as rdb:
        again = {t["nodeid"].split("::")[-1]: t["outcome"] for t in rdb.tests_of([run.name])}
    assert again["test_slow"] == "interrupted"
    capsys.readouterr()
