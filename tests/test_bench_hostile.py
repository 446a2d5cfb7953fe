"""bench/bench_hostile.py: its static check of generated HTML and its input hashing against
hand-written oracles, and its ``--quick`` campaign (about 60 hostile loadables, results
databases, run folders and report/dashboard fields through the real commands): no traceback, no
hang, no wrong exit code, nothing overwritten, no live payload.

The defects the campaign found are tested at the end (six fixed: a report written through a
planted symlink, a stored time past datetime's range, a schema that is not UTF-8, a 1-byte
database, a junit.xml that is a symlink loop, a reader that re-created missing tables); the one still open is named in KNOWN, so the campaign still fails on anything new."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from _bench import bench_module

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "nvdla_hil.harness.cli"]


@pytest.fixture(scope="module")
def bench():
    with bench_module("bench_hostile", also=("bench_hostile_inputs",)) as mod:  # it imports its input builders
        yield mod


# ---- the static HTML check: oracles are hand-written pages -------------------------------------------


@pytest.mark.parametrize("page", [
    "<p><script>pwned('a')</script></p>",
    "<td><img src=x onerror=\"pwned('img')\"></td>",
    "<td title=\"\"><svg onload=pwned('svg')>\">",
    "<a href=\" JaVa\tScript:pwned('bug')\">bug</a>",
    "<a href='data:text/html,<script>pwned(1)</script>'>x</a>",
    "<style>td{}</style><script>pwned('style')</script>",
    "<!-- x --><script>pwned('comment')</script>",
])
def test_a_live_payload_is_found(bench, page: str) -> None:
    assert bench.live_payloads(page), page


@pytest.mark.parametrize("page", [
    "<p>&lt;script&gt;pwned('a')&lt;/script&gt;</p>",
    "<td title=\"&quot;&gt;&lt;svg onload=pwned('svg')&gt;\">x</td>",
    "<a href=\"https://bugs.example/NV-1?q=%22%3E%3Cscript%3Epwned()\">bug</a>",
    "<span class=\"bug-inert\">javascript:pwned('bug')</span>",
    "<script>var rows = document.querySelectorAll('tr');</script><td>pwned</td>",
    "<textarea>&lt;/textarea&gt;&lt;script&gt;pwned('ta')&lt;/script&gt;</textarea>",
])
def test_an_escaped_payload_is_not(bench, page: str) -> None:
    assert bench.live_payloads(page) == [], page


def test_snapshot_sees_a_file_rewritten_through_a_symlink(bench, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    run = tmp_path / "run"
    run.mkdir()
    (run / "junit.xml").write_text("<testsuites/>")
    (run / "report.html").symlink_to(victim)
    before = bench.snapshot([run, victim], {run / "report.html"})
    assert set(before) == {str(run / "junit.xml"), str(victim)}
    (run / "report.html").write_text("written through the link")
    after = bench.snapshot([run, victim], {run / "report.html"})
    assert [p for p in before if after[p] != before[p]] == [str(victim)]


# ---- the quick campaign -----------------------------------------------------------------------------------

#: what the campaign may still report that is not a defect, by the problem it shows: an import of
#: 200,000 tests is linear (6.2 s of CPU, 1.3 s for 10,000: 2026-11-29) but passes the 10 s limit
#: on a loaded machine (34 s at load 14); 10,000 tests must stay within it
KNOWN = {
    "history import of 200,000 tests on a loaded machine": lambda p: p["column"] == "hangs"
    and p["label"] == "junit-200000-cases",
}


@pytest.mark.slow  # about 60 inputs through the real commands, two of them regressions: 1-2 minutes
def test_the_quick_campaign_is_clean(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_hostile.py"), "--quick", "--json", str(out)],
                       capture_output=True, text=True, timeout=1200, stdin=subprocess.DEVNULL)
    assert out.is_file(), r.stdout[-3000:] + r.stderr[-3000:]
    figures = json.loads(out.read_text())
    classes, total = figures["classes"], figures["total"]
    assert {"results-db", "run-folder", "fields"} <= set(classes), r.stdout
    assert total["inputs"] >= 50, r.stdout
    new = [p for p in figures["problems"] if not any(known(p) for known in KNOWN.values())]
    for column in ("tracebacks", "hangs", "wrong_exit", "overwritten", "scripts", "rss_over_1g", "term_escapes"):
        assert [p["text"] for p in new if p["column"] == column] == [], (column, r.stdout[-4000:])
    # the pages were drawn and held the payloads (escaped): the script check saw them
    assert classes["fields"]["pages"] >= 5 and classes["fields"]["pages_marked"] >= 5, classes["fields"]
    assert total["commands"] >= total["inputs"]


# ---- the defects it found, fixed -----------------------------------------------------------------------------


def test_report_never_writes_through_a_symlink_in_the_run_folder(bench, tmp_path: Path) -> None:
    run = tmp_path / "results" / "20261129T000000Z-1-abcdef"
    sys.modules["bench_hostile_inputs"].base_run(run)  # a well-formed run folder
    victim = tmp_path / "victim.txt"
    victim.write_text("a file outside the run folder\n")
    (run / "report.html").symlink_to(victim)
    r = subprocess.run([*CLI, "report", str(run)], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr, r.stderr
    assert victim.read_text() == "a file outside the run folder\n"


@pytest.mark.parametrize("command", ["history", "dashboard"])
def test_a_start_time_out_of_range_is_bad_input_not_an_internal_error(bench, tmp_path: Path, command: str) -> None:
    db = tmp_path / "results.sqlite"
    sys.modules["bench_hostile_inputs"].base_db(db)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE nvdla_runs SET started = 1e308")
    c.close()
    argv = ["history", "--results-db", str(db)] if command == "history" else \
        ["dashboard", "--results-db", str(db), "--out", str(tmp_path / "site")]
    r = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "NVDLA_HIL_RESULTS": str(tmp_path)})
    assert r.returncode == 2 and "Traceback" not in r.stderr and "corrupt" in r.stderr, r.stderr[-2000:]


def test_a_schema_that_is_not_utf8_is_a_corrupt_database(bench, tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    sys.modules["bench_hostile_inputs"].base_db(db)
    data = bytearray(db.read_bytes())
    at = data.find(b"CREATE TABLE nvdla_runs (")
    assert at > 0
    data[at + 24] = 0xCC  # the "(" of nvdla_runs' schema: a syntax error SQLite quotes, in bytes that are not UTF-8
    db.write_bytes(bytes(data))
    r = subprocess.run([*CLI, "history", "--results-db", str(db)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and str(db) in r.stderr, r.stderr[-2000:]


def test_a_one_byte_file_is_not_an_empty_database(tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    db.write_bytes(b"x")
    r = subprocess.run([*CLI, "history", "--results-db", str(db)], capture_output=True, text=True, timeout=120)
    assert db.read_bytes() == b"x", "the file was replaced"
    assert r.returncode == 2 and str(db) in r.stderr, r.stdout + r.stderr


def test_a_junit_xml_symlink_loop_is_bad_input_not_an_empty_run(tmp_path: Path) -> None:
    run = tmp_path / "results" / "20261129T000000Z-1-abcdef"
    run.mkdir(parents=True)
    (run / "run.json").write_text('{"status": "finished", "exit_code": 0}')
    (run / "junit.xml").symlink_to(run / "loop.xml")
    (run / "loop.xml").symlink_to(run / "junit.xml")
    r = subprocess.run([*CLI, "history", "--results-db", str(tmp_path / "db.sqlite"), "import", str(run)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and str(run / "junit.xml") in r.stderr and "Traceback" not in r.stderr, r.stdout + r.stderr


@pytest.mark.parametrize("damage", ["DROP TABLE nvdla_tests", "DELETE FROM nvdla_schema", "DROP TABLE nvdla_schema"])
def test_a_reader_never_recreates_what_is_missing(bench, tmp_path: Path, damage: str) -> None:
    """A database with results but a missing table or schema row is corrupt: history reads nothing
    into it (exit 2, naming it) and the file is left as it was."""
    db = tmp_path / "results.sqlite"
    sys.modules["bench_hostile_inputs"].base_db(db)
    with sqlite3.connect(db) as c:
        c.execute(damage)
    c.close()
    before = db.read_bytes()
    r = subprocess.run([*CLI, "history", "--results-db", str(db)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and str(db) in r.stderr and "corrupt" in r.stderr, r.stdout + r.stderr
    assert db.read_bytes() == before
