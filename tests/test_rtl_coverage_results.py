"""RTL coverage as results: the run report's "RTL coverage" section, the results database's
``nvdla_rtl_coverage`` table (recorded when a run ends, the trend over runs), the dashboard's
section, and ``nvdla-hil report`` of a copied run folder.

The run folders are synthetic: per-test coverage files written the way Verilator's runtime
writes them (``verilated_cov.cpp``: ``C '<key>' <count>`` lines), compacted and merged by
harness/analysis/rtl_coverage.py and written by its ``write_outputs`` (no simulator runs). The
expected numbers are worked out by hand from :data:`POINTS` and the tests' counts below.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nvdla_hil.harness.analysis import rtl_coverage as rc
from nvdla_hil.harness.analysis.report import render_report, write_report
from nvdla_hil.harness.analysis.rtl_coverage_html import rtl_coverage_units
from nvdla_hil.harness.cli import main
from nvdla_hil.harness.results.analysis import load_history
from nvdla_hil.harness.results.dashboard import render_dashboard, write_dashboard
from nvdla_hil.harness.results.db import ResultsDB, SchemaError
from nvdla_hil.harness.results.recorder import Recorder, record_rtl_coverage

from test_rtl_coverage import dat  # noqa: E402 - the coverage tests own the format fixture (POINTS)

# POINTS (the small design) and dat() (a coverage.dat as verilated_cov.cpp writes it) are the
# coverage tests' own: one fixture of the file format for both
HOSTILE_TEST = "suite::test_x[<script>pwned('test')</script>]"
HOSTILE_CONFIG = "<img src=x onerror=pwned('config')>"
#: three tests: t1 hits the CDMA line, the 'if' branch and a PDP toggle; t2 the SDP line; t3
#: nothing t1 does not. Merged: line 2/3 (CDMA, SDP; not the RAM), branch 1/2, toggle 1/2.
TESTS = {
    "suite::t1": [1, 1, 0, 0, 1, 0, 5, 0],
    "suite::t2": [2, 0, 0, 3, 0, 0, 5, 0],
    HOSTILE_TEST: [1, 1, 0, 0, 0, 0, 5, 0],
}
SECONDS = {"suite::t1": 2.0, "suite::t2": 3.0, HOSTILE_TEST: 1.0}


def coverage_folder(run: Path, tests: dict[str, list[int]] | None = None, *, config: str = "nv_small",
                    view: bool = True) -> dict[str, Any]:
    """``<run>/rtl-coverage/`` as a run writes it: per-test files compacted, merged, written by
    ``write_outputs``; ``view``: the lcov HTML view is there (an index.html in its place, since
    genhtml may not be installed), else the summary says why not."""
    tests = TESTS if tests is None else tests
    folder = run / "rtl-coverage"
    per_test = folder / "tests"
    per_test.mkdir(parents=True, exist_ok=True)
    for i, (test, counts) in enumerate(tests.items()):
        raw = per_test / f"t{i}.{os.getpid()}.{i}.dat"
        raw.write_bytes(dat(counts))
        rc.compact(raw, per_test, test=test, config=config, build=f"nvdla-{config}-k-cov-line-toggle")
    summary = rc.write_outputs(folder, rc.merge_folder(per_test, seconds=SECONDS), html=False)
    if view:  # what write_outputs says when genhtml drew the view
        for one in summary["configs"].values():
            (folder / one["folder"] / "html").mkdir(parents=True, exist_ok=True)
            (folder / one["folder"] / "html" / "index.html").write_text("<html><body>lcov</body></html>")
            one["html"], one["html_note"] = f"{one['folder']}/html/index.html", None
        (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return summary


def _junit(run: Path, names: list[str]) -> None:
    from xml.sax.saxutils import quoteattr

    cases = "".join(f'<testcase classname="nvdla_hil.harness.suites.test_traces" name={quoteattr(n)} time="1.0"/>'
                    for n in names)
    (run / "junit.xml").write_text('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
                                   f'failures="0" skipped="0" tests="{len(names)}">{cases}</testsuite></testsuites>')


def _run_folder(root: Path, name: str = "20261201T000000Z-1-aaaaaa", **kw: Any) -> Path:
    run = root / name
    run.mkdir(parents=True)
    _junit(run, ["test_trace[a]", "test_trace[b]"])
    (run / "run.json").write_text(json.dumps({"status": "finished", "command": ["nvdla-hil", "regress"], "exit_code": 0,
                                              "seconds": 6.0}))
    coverage_folder(run, **kw)
    return run


@pytest.fixture(autouse=True)
def _no_ambient_db(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVDLA_HIL_RESULTS_DB", raising=False)


def _section(page: str) -> str:
    assert 'id="rtl-coverage"' in page, "no RTL coverage section"
    return page[page.index('id="rtl-coverage"'):]


def _cells(section: str, unit: str) -> dict[str, tuple[int, int]]:
    import re

    row = re.search(rf'<tr data-unit="{unit}"[^>]*>(.*?)</tr>', section)
    assert row, unit
    return {k: (int(h), int(t)) for k, h, t in re.findall(r'data-kind="(\w+)" data-hit="(\d+)" data-total="(\d+)"', row.group(1))}


# ---- the run report -------------------------------------------------------------------------------


def test_the_report_shows_each_configuration_its_units_view_and_ranking(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    sec = _section(render_report(run))
    assert '<table class="rtlcov" data-config="nv_small">' in sec
    assert _cells(sec, "cdma") == {"line": (1, 1), "branch": (1, 2), "toggle": (0, 0)}
    assert _cells(sec, "pdp") == {"line": (0, 0), "branch": (0, 0), "toggle": (1, 2)}
    assert _cells(sec, "total") == {"line": (2, 3), "branch": (1, 2), "toggle": (1, 2)}
    units = [u for u in __import__("re").findall(r'<tr data-unit="([^"]+)"', sec)]
    assert units == ["cdma", "pdp", "rams", "sdp", "total"]  # by name, the total last; never the testbench
    assert '<td class="unit">CDMA</td>' in sec and '<td class="unit">total</td>' in sec
    assert "1/2 <span class=\"pct\">50.0%</span>" in sec and "2/3 <span class=\"pct\">66.7%</span>" in sec
    assert 'href="rtl-coverage/nv_small/html/index.html"' in sec  # relative: opens from the run folder
    # t1 (3 points) then t2 (1 more); the third adds nothing: 2 of 3 tests, 5 s of the 6 s all took
    assert "2 of 3 tests keep every point this run hit (5.0 s of 6.0 s)" in sec
    assert "<code>suite::t1</code> +3 points</li><li><code>suite::t2</code> +1 points" in sec


def test_the_report_says_why_there_is_no_html_view_and_escapes_what_the_files_name(tmp_path: Path) -> None:
    run = _run_folder(tmp_path, config=HOSTILE_CONFIG, view=False,
                      tests={HOSTILE_TEST: TESTS["suite::t1"], "suite::t2": TESTS["suite::t2"]})
    page = render_report(run)
    sec = _section(page)
    assert HOSTILE_CONFIG not in page and HOSTILE_TEST not in page and "<script>pwned" not in page
    assert "configuration <code>&lt;img src=x onerror=pwned(&#x27;config&#x27;)&gt;</code>" in sec
    assert "<code>suite::test_x[&lt;script&gt;pwned(&#x27;test&#x27;)&lt;/script&gt;]</code> +3 points" in sec
    assert "no annotated-source HTML view: not asked for" in sec and 'class="rtlcov-view"' not in sec
    assert _cells(sec, "total") == {"line": (2, 3), "branch": (1, 2), "toggle": (1, 2)}
    assert "2 of 2 tests keep every point" in sec


def test_a_run_without_rtl_coverage_has_no_section(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _junit(run, ["test_trace[a]"])
    assert 'id="rtl-coverage"' not in render_report(run)


def _damage(what: str) -> Any:
    def change(summary: dict[str, Any]) -> Any:
        one = summary["configs"]["nv_small"]
        if what == "hit > total":
            one["units"]["cdma"]["line"] = [5, 1]
        elif what == "text count":
            one["units"]["total"]["toggle"] = ["1", 2]
        elif what == "units missing":
            del one["units"]
        elif what == "config not an object":
            summary["configs"]["nv_small"] = ["x"]
        elif what == "rank":
            one["rank"]["gained"] = "lots"
        elif what == "html escapes the folder":
            one["html"] = "../../../etc/passwd"
        return summary
    return change


MALFORMED: dict[str, tuple[Any, str]] = {
    "not JSON": (b"{\"format\": ", "cannot be read: "),
    "another format": (json.dumps({"format": "x/1", "configs": {}}).encode(), "not an nvdla-hil RTL coverage summary"),
    "a list": (b"[1, 2]", "not an nvdla-hil RTL coverage summary"),
    "hit > total": (_damage("hit > total"), "malformed summary: unit &#x27;cdma&#x27;, line: 5 points hit of 1"),
    "text count": (_damage("text count"), "malformed summary: unit &#x27;total&#x27;, toggle hit: &#x27;1&#x27; is not a count"),
    "units missing": (_damage("units missing"), "malformed summary: no per-unit table"),
    "config not an object": (_damage("config not an object"), "malformed summary: no per-unit table"),
    "rank": (_damage("rank"), "ranking: malformed summary: rank.gained"),
    "html escapes the folder": (_damage("html escapes the folder"), "HTML view: malformed summary: html: &#x27;../../../etc/passwd&#x27;"),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_summary_is_said_in_the_section_and_the_report_is_still_written(tmp_path: Path, kind: str) -> None:
    run = _run_folder(tmp_path)
    path = run / "rtl-coverage" / "summary.json"
    bad, said = MALFORMED[kind]
    if callable(bad):
        bad = json.dumps(bad(json.loads(path.read_text()))).encode()
    path.write_bytes(bad)
    page = write_report(run).read_text(encoding="utf-8")
    sec = _section(page)
    assert said in sec and 'class="rtlcov-bad"' in sec, sec[:2000]
    assert "test_trace[a]" in page and page.rstrip().endswith("</html>")  # the rest of the report is there
    if kind in ("rank", "html escapes the folder"):  # the table is still shown; only that part is not
        assert _cells(sec, "total")["line"] == (2, 3)
    assert 'href="rtl-coverage/../' not in sec


def test_a_summary_that_is_a_folder_or_a_fifo_is_said_not_read(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    path = run / "rtl-coverage" / "summary.json"
    path.unlink()
    os.mkfifo(path)  # a reader that opened it would hang
    sec = _section(write_report(run).read_text(encoding="utf-8"))
    assert "rtl-coverage/summary.json cannot be read" in sec


def test_nvdla_hil_report_of_a_copied_run_folder_has_the_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_folder(tmp_path / "farm")
    copy = tmp_path / "elsewhere" / run.name
    shutil.copytree(run, copy)
    shutil.rmtree(run)
    assert main(["report", str(copy)]) == 0
    sec = _section((copy / "report.html").read_text(encoding="utf-8"))
    assert _cells(sec, "total") == {"line": (2, 3), "branch": (1, 2), "toggle": (1, 2)}
    assert 'href="rtl-coverage/nv_small/html/index.html"' in sec and (copy / "rtl-coverage/nv_small/html/index.html").is_file()
    shutil.rmtree(copy / "rtl-coverage" / "nv_small" / "html")  # copied without the view: said, never a dead link hidden
    assert main(["report", str(copy)]) == 0
    assert "not in this run folder" in _section((copy / "report.html").read_text(encoding="utf-8"))


def test_units_of_a_summary_are_checked_and_the_total_kept_last() -> None:
    units = rtl_coverage_units({"units": {"total": {"line": [3, 4]}, "sdp": {"line": [1, 2], "weird": [9, 9]},
                                          "cdma": {"line": [2, 2]}}})
    assert list(units) == ["sdp", "cdma", "total"]
    assert units["sdp"] == {"line": (1, 2), "branch": (0, 0), "toggle": (0, 0)}
    assert rtl_coverage_units({"units": {"sdp": {"line": [1, 2]}}})["total"]["line"] == (1, 2)  # summed when absent
    for bad in ({"units": {"sdp": {"line": [True, 2]}}}, {"units": {"sdp": {"line": [1]}}}, {"units": {"": {}}},
                {"units": {"sdp": {"line": [-1, 2]}}}, {"units": {"sdp": {"line": [1.0, 2]}}}, {"units": []}, "x"):
        with pytest.raises(ValueError):
            rtl_coverage_units(bad)


# ---- the results database -------------------------------------------------------------------------


#: three nights: t1 alone, then t1 + t2, then all three (the totals grow, then stay)
NIGHTS = [({"suite::t1": TESTS["suite::t1"]}, 1767225600.0),
          ({"suite::t1": TESTS["suite::t1"], "suite::t2": TESTS["suite::t2"]}, 1767312000.0),
          (TESTS, 1767398400.0)]


def _three_runs(root: Path, db: ResultsDB) -> list[Path]:
    runs = []
    for n, (tests, started) in reversed(list(enumerate(NIGHTS))):  # recorded newest first: the order comes from the start
        run = root / f"night{n}"
        run.mkdir(parents=True)
        coverage_folder(run, tests)
        db.start_run(run.name, started=started, target="verilator", profile="nv_small", suite="traces", semantics="rtl",
                     run_dir=str(run), version="0.1.0+gabc1234")
        db.finish_run(run.name, 0, "complete")
        assert record_rtl_coverage(db, run.name, run / "rtl-coverage") == 5 * 3  # 4 units + total, 3 kinds
        runs.insert(0, run)
    return runs


def test_runs_are_recorded_and_the_trend_comes_back_in_time_order(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "results.sqlite") as db:
        _three_runs(tmp_path, db)
        cov = db.rtl_coverage()
        assert list(cov.trend) == ["nv_small"]
        trend = cov.trend["nv_small"]
        assert [e["run_id"] for e in trend] == ["night0", "night1", "night2"]
        assert [e["totals"]["line"] for e in trend] == [(1, 3), (2, 3), (2, 3)]
        assert [e["totals"]["branch"] for e in trend] == [(1, 2)] * 3
        assert [e["totals"]["toggle"] for e in trend] == [(1, 2)] * 3
        assert [e["status"] for e in trend] == ["complete"] * 3
        latest = cov.latest["nv_small"]
        assert latest["run_id"] == "night2" and list(latest["units"]) == ["cdma", "pdp", "rams", "sdp", "total"]
        assert latest["units"]["sdp"] == {"line": (1, 1), "branch": (0, 0), "toggle": (0, 0)}
        # only the runs asked for (the dashboard's): the newest of those is the latest
        assert db.rtl_coverage(["night0", "night1"]).latest["nv_small"]["run_id"] == "night1"
        assert db.rtl_coverage([]).trend == {}
        # recorded again: replaced, not doubled; a run replaced by start_run loses its coverage (cascade)
        record_rtl_coverage(db, "night2", tmp_path / "night2" / "rtl-coverage")
        assert len(db.rtl_coverage().trend["nv_small"]) == 3
        db.start_run("night2", started=1767398400.0)
        assert [e["run_id"] for e in db.rtl_coverage().trend["nv_small"]] == ["night0", "night1"]


def test_a_malformed_summary_or_an_unknown_run_records_nothing(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    with ResultsDB(tmp_path / "results.sqlite") as db:
        assert record_rtl_coverage(db, "nope", tmp_path / "empty") is None  # no summary: nothing to record
        with pytest.raises(ValueError, match="no run 'nope'"):
            record_rtl_coverage(db, "nope", run / "rtl-coverage")
        db.start_run(run.name, started=1767225600.0)
        path = run / "rtl-coverage" / "summary.json"
        summary = json.loads(path.read_text())
        summary["configs"]["nv_small"]["units"]["cdma"]["line"] = [2, 1]
        path.write_text(json.dumps(summary))
        with pytest.raises(ValueError, match=r"configuration 'nv_small': unit 'cdma', line: 2 points hit of 1"):
            record_rtl_coverage(db, run.name, run / "rtl-coverage")
        with pytest.raises(ValueError, match="not a name"):
            db.record_rtl_coverage(run.name, [("x" * 201, "total", "line", 1, 2)])
        assert db.rtl_coverage().trend == {}


def test_a_database_of_this_version_made_before_the_table_gets_it_on_open(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    with ResultsDB(path) as db:
        db.start_run("old", started=1767225600.0)
    with sqlite3.connect(path) as c:  # what an nvdla-hil before the table left
        c.execute("DROP TABLE nvdla_rtl_coverage")
    c.close()
    with ResultsDB(path) as db:
        assert db.absent == {} and db.runs()[0]["id"] == "old"
        run = _run_folder(tmp_path, name="old")
        assert record_rtl_coverage(db, "old", run / "rtl-coverage") == 15
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT count(*) FROM nvdla_rtl_coverage WHERE unit = 'total'").fetchone() == (3,)
    c.close()
    with sqlite3.connect(path) as c:  # a table of the version's own set missing is still corrupt
        c.execute("DROP TABLE nvdla_labels")
    c.close()
    with pytest.raises(SchemaError, match="nvdla_labels missing"):
        ResultsDB(path)


def test_a_read_only_database_made_before_the_table_is_read_without_it(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite"
    with ResultsDB(path) as db:
        db.start_run("old", started=1767225600.0)
        db.finish_run("old", 0, "complete")
    with sqlite3.connect(path) as c:
        c.execute("DROP TABLE nvdla_rtl_coverage")
    c.close()
    if os.geteuid() == 0:
        r = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make a file read-only for root here (chattr +i: {r.stderr.strip()})")
    else:
        path.chmod(0o444)
    try:
        before = path.read_bytes()
        with ResultsDB(path) as db:
            assert "nvdla_rtl_coverage" in db.absent and [r["id"] for r in db.runs()] == ["old"]
            cov = db.rtl_coverage()
            assert cov.trend == {} and "no nvdla_rtl_coverage table" in cov.note and "read-only" in cov.note
            with pytest.raises(ValueError, match="RTL coverage not recorded") as e:
                db.record_rtl_coverage("old", [("nv_small", "total", "line", 1, 2)])
            assert getattr(e.value, "read_only", False)
        assert path.read_bytes() == before
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=False)
        else:
            path.chmod(0o644)


def _config(opts: dict[str, Any]) -> Any:
    """What the recorder asks of pytest's config: its options."""
    return SimpleNamespace(getoption=lambda name, default=None: opts.get(name, default))


def test_the_recorder_records_the_sessions_summary_when_pytest_ends(tmp_path: Path) -> None:
    url = str(tmp_path / "results.sqlite")
    run = tmp_path / "20261201T000000Z-1-aaaaaa"
    opts = {"--nvdla-run-dir": str(run), "--nvdla-rtl-coverage": "line,toggle"}
    rec = Recorder(_config(opts), url)
    rec.db.start_run(rec.run_id, started=time.time())
    coverage_folder(run)  # the plugin's terminal summary, after the run's row was finished
    rec.pytest_unconfigure(_config(opts))
    with ResultsDB(url) as db:
        assert db.rtl_coverage().latest["nv_small"]["units"]["total"]["line"] == (2, 3)

    # a session that measured nothing, or a summary an earlier session left, is not recorded
    for opts2, age in (({"--nvdla-run-dir": str(run)}, 0), (opts, 3600)):
        rec = Recorder(_config(opts2), url)
        rec.db.start_run(rec.run_id, started=time.time())
        old = time.time() - age
        os.utime(run / "rtl-coverage" / "summary.json", (old, old))
        rec.pytest_unconfigure(_config(opts2))
        with ResultsDB(url) as db:
            assert db.rtl_coverage().trend == {}  # start_run replaced the run: its old rows went with it


def test_the_recorder_says_a_malformed_summary_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "20261201T000000Z-1-aaaaaa"
    elsewhere = tmp_path / "cov"
    opts = {"--nvdla-run-dir": str(run), "--nvdla-rtl-coverage": "line", "--nvdla-rtl-coverage-dir": str(elsewhere)}
    rec = Recorder(_config(opts), str(tmp_path / "results.sqlite"))
    rec.db.start_run(rec.run_id, started=time.time())
    elsewhere.mkdir()
    (elsewhere / "summary.json").write_text("{not json")
    rec.pytest_unconfigure(_config(opts))
    err = capsys.readouterr().err
    assert f"RTL coverage of run {run.name} not recorded" in err and "not JSON" in err


# ---- the dashboard ----------------------------------------------------------------------------------


def test_the_dashboard_shows_the_latest_table_the_trend_and_the_view(tmp_path: Path) -> None:
    out = tmp_path / "site"
    with ResultsDB(tmp_path / "results.sqlite") as db:
        runs = _three_runs(tmp_path / "results", db)
        h = load_history(db)
        cov = db.rtl_coverage([r["id"] for r in h.runs])
    page = write_dashboard(h, out, rtl_coverage=cov).read_text(encoding="utf-8")
    sec = _section(page)
    sec = sec[:sec.index('id="clusters"')]
    assert "configuration <code>nv_small</code>: newest run <code>" in sec and ">night2</a>" not in sec  # no report.html
    assert _cells(sec, "total") == {"line": (2, 3), "branch": (1, 2), "toggle": (1, 2)}
    assert _cells(sec, "cdma") == {"line": (1, 1), "branch": (1, 2), "toggle": (0, 0)}
    assert f'href="{os.path.relpath(runs[2] / "rtl-coverage/nv_small/html/index.html", out)}"' in sec
    trend = sec[sec.index('class="rtlcov-trend"'):]
    import re

    assert re.findall(r'<tr data-run="(\w+)">', trend) == ["night0", "night1", "night2"]
    assert re.findall(r'data-kind="line" data-hit="(\d+)" data-total="(\d+)">([^<]*)<', trend) == [
        ("1", "3", "1/3 33.3%"), ("2", "3", "2/3 66.7%"), ("2", "3", "2/3 66.7%")]
    assert "<svg" in sec and "<code>abc1234</code>" in trend
    # the newest run's folder is gone: no link to a view that is not there; the numbers stay
    shutil.rmtree(runs[2])
    sec = _section(render_dashboard(h, out, rtl_coverage=cov))
    assert 'class="rtlcov-view"' not in sec and "does not have it" in sec and _cells(sec, "total")["line"] == (2, 3)
    # drawn without the database's coverage: no section
    assert 'id="rtl-coverage"' not in render_dashboard(h, out)


def test_the_dashboard_escapes_a_hostile_configuration(tmp_path: Path) -> None:
    run = _run_folder(tmp_path, config=HOSTILE_CONFIG)
    with ResultsDB(tmp_path / "results.sqlite") as db:
        db.start_run(run.name, started=1767225600.0, target="verilator", run_dir=str(run), version="0.1$\\x$")
        db.finish_run(run.name, 0, "interrupted")
        record_rtl_coverage(db, run.name, run / "rtl-coverage")
        h = load_history(db)
        cov = db.rtl_coverage()
    page = render_dashboard(h, tmp_path / "site", rtl_coverage=cov)
    assert HOSTILE_CONFIG not in page
    assert 'data-config="&lt;img src=x onerror=pwned(&#x27;config&#x27;)&gt;"' in page
    assert 'class="rtlcov-view"' in page and "<svg" in _section(page)


# ---- in a real browser ------------------------------------------------------------------------------


def test_no_payload_runs_in_the_coverage_sections_in_a_browser(tmp_path: Path) -> None:
    from test_results_hostile_browser import _chromium, _click_everything  # noqa: I001 - the sibling module's browser

    exe = _chromium()
    results = tmp_path / "results"
    run = _run_folder(results, config=HOSTILE_CONFIG, tests={HOSTILE_TEST: TESTS["suite::t1"]})
    with ResultsDB(results / "results.sqlite") as db:
        db.start_run(run.name, started=1767225600.0, target="verilator", run_dir=str(run))
        db.finish_run(run.name, 0, "complete")
        record_rtl_coverage(db, run.name, run / "rtl-coverage")
        h = load_history(db)
        cov = db.rtl_coverage()
    assert main(["report", str(run)]) == 0
    pages = [run / "report.html", write_dashboard(h, results, rtl_coverage=cov)]
    for page in pages:
        assert "rtl-coverage" in page.read_text(encoding="utf-8")
        ran, hrefs = _click_everything(exe, page)
        assert ran == [], f"{page.name}: injected script ran: {ran}"
        assert any(h.endswith("rtl-coverage/_img_src_x_onerror_pwned_config_/html/index.html") for h in hrefs), hrefs


def test_the_dashboard_shows_the_union_over_nights_and_each_nights_share(tmp_path: Path) -> None:
    """Two nights that each hit what the other did not: the union (from the per-test files their
    folders hold) is more than either night's table, and each night's share names the points only
    it hit. t1 hits the CDMA line, the branch and a PDP toggle; t2 the CDMA and SDP lines (TESTS above)."""
    from nvdla_hil.harness.cli import main

    db_path = tmp_path / "results.sqlite"
    with ResultsDB(db_path) as db:
        for name, tests, started in (("nightA", {"suite::t1": TESTS["suite::t1"]}, 1767225600.0),
                                     ("nightB", {"suite::t2": TESTS["suite::t2"]}, 1767312000.0),
                                     ("nightC", {"suite::t2": TESTS["suite::t2"]}, 1767398400.0)):
            run = tmp_path / "results" / name
            run.mkdir(parents=True)
            coverage_folder(run, tests)
            db.start_run(name, started=started, target="verilator", profile="nv_small", suite="traces",
                         semantics="rtl", run_dir=str(run), version="0.1.0+gabc1234")
            db.finish_run(name, 0, "complete")
            record_rtl_coverage(db, name, run / "rtl-coverage")
    shutil.rmtree(tmp_path / "results" / "nightC" / "rtl-coverage" / "tests")  # its per-test files are gone
    out = tmp_path / "site"
    assert main(["dashboard", "--results-db", str(db_path), "--out", str(out)]) == 0
    sec = _section((out / "index.html").read_text(encoding="utf-8"))
    sec = sec[:sec.index('id="clusters"')]
    newest = sec[:sec.index('class="rtlcov-trend"')]
    assert _cells(newest, "total") == {"line": (2, 3), "branch": (0, 2), "toggle": (0, 2)}  # nightC alone (t2)
    union = sec[sec.index('class="rtlcov-union"'):]
    assert "union of 2 runs" in union
    assert _cells(union, "total") == {"line": (2, 3), "branch": (1, 2), "toggle": (1, 2)}  # more than any night
    import re

    share = dict((rid, (int(h), int(o))) for rid, h, o in
                 re.findall(r'<tr data-run="(\w+)"><td><code>\w+</code></td><td>(\d+)</td><td>(\d+)</td></tr>', union))
    # A: CDMA line, branch, toggle (the line is B's too); B: both lines (SDP only B's); C is left out, and said so
    assert share == {"nightA": (3, 2), "nightB": (2, 1)}
    assert "left out: nightC: its folder no longer holds per-test RTL coverage" in union
