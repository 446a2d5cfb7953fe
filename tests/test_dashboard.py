"""``nvdla-hil dashboard`` and the analysis behind it, on a hand-worked series of runs written through
the results database's own API (harness/results/db.py): every expected set and rate below is worked
out by hand from the table in :func:`series_db`. The page is then opened in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from nvdla_hil.harness.cli import main
from nvdla_hil.harness.results.analysis import load_history
from nvdla_hil.harness.results.db import ResultsDB
from nvdla_hil.harness.results.signature import failure_info, signature_of

DAY = 86400.0
T0 = 1767225600.0  # 2026-01-01 00:00 UTC
M = "nvdla_hil.harness.suites.test_traces::test_trace[t{}]"
SIG_A = signature_of(failure_info("failed", "call", "Failed", "sync_id_0: crc a expected 0x1 got 0x2 MISMATCH",
                                  {"regions": [{"cube": {"unit": "SDP", "width": 4, "height": 4, "channels": 1},
                                                "coords": [[0, 1, 1]], "expected": [1], "actual": [0], "n_elements": 1}],
                                   "suspects": [], "checks": []}))
SIG_B = signature_of(failure_info("error", "setup", "BoardDeadError", "board b0 does not answer"))

#: run -> (night, target, {test: outcome}); F = failed (cluster A), E = error (cluster B)
TABLE = {
    "m1": (0, "model", {1: "P", 2: "P", 3: "F", 4: "P"}),
    "m2": (1, "model", {1: "P", 2: "E", 3: "F", 4: "P"}),
    "s1": (1.05, "serial", {1: "P", 2: "P"}),
    "m3": (2, "model", {1: "P", 2: "P", 3: "F", 4: "E"}),
    "m4": (2.1, "model", {1: "P", 2: "E", 3: "P", 4: "E"}),
}


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.fixture()
def series_db(tmp_path: Path) -> Path:
    path = tmp_path / "results" / "results.sqlite"
    with ResultsDB(path) as db:
        for rid, (night, target, outcomes) in TABLE.items():
            start = T0 + night * DAY + 3600
            db.start_run(rid, started=start, heartbeat=start, target=target, profile="nv_small", suite="traces",
                         semantics="rtl", selection="", collected=len(outcomes))
            for t, o in outcomes.items():
                sig = SIG_A if o == "F" else SIG_B if o == "E" else None
                dur = 3.0 if (rid, t) == ("m4", 1) else 1.0
                db.record_test(rid, M.format(t), {"P": "passed", "F": "failed", "E": "error"}[o], dur,
                               signature=sig, reason="x" if sig else "", test=M.format(t))
            db.finish_run(rid, 1 if "F" in outcomes.values() or "E" in outcomes.values() else 0, "complete")
            db.update_run(rid, ended=start + 10 + night)
        # a serial run killed on the third night after one result: its process is gone
        start = T0 + 2.5 * DAY
        db.start_run("s2", started=start, heartbeat=start, target="serial", profile="nv_small", suite="traces",
                     semantics="rtl", selection="", collected=2, pid=_dead_pid())
        db.record_test("s2", M.format(1), "passed", 1.0, test=M.format(1))
        db.set_label(SIG_A[0], "known: CRC of a one-element SDP error", "https://bugs.example/7")
    return path


def test_analysis_of_the_hand_worked_series(series_db: Path) -> None:
    with ResultsDB(series_db) as db:
        h = load_history(db)
    assert [r["id"] for r in h.runs] == ["s2", "m4", "m3", "s1", "m2", "m1"]
    s2 = h.run_by_id("s2")
    assert s2["status"] == "interrupted" and "killed" in s2["note"] and s2["n_passed"] == 1
    m4 = h.run_by_id("m4")
    cmp = h.compare(m4)
    assert cmp.previous["id"] == "m3"
    assert [r["test"] for r in cmp.new] == [M.format(2)]
    assert [r["test"] for r in cmp.fixed] == [M.format(3)]
    assert [r["test"] for r in cmp.still] == [M.format(4)]
    flaky = h.flaky(m4)
    assert [(f.test, f.sequence, f.flips, f.rate) for f in flaky] == [(M.format(2), "PFPF", 3, 1.0)]
    (trend,) = h.durations(m4)
    assert (trend.test, trend.median_before, trend.last) == (M.format(1), 1.0, 3.0)
    rates = h.pass_rates()
    assert rates[("model", "nv_small")] == [("2026-01-01", 0.75, 4), ("2026-01-02", 0.5, 4), ("2026-01-03", 0.5, 8)]
    assert rates[("serial", "nv_small")] == [("2026-01-02", 1.0, 2), ("2026-01-03", 1.0, 1)]
    cl = {c["signature"]: c for c in h.clusters([r["id"] for r in h.runs])}
    assert {k: v["count"] for k, v in cl.items()} == {SIG_B[0]: 4, SIG_A[0]: 3}
    assert cl[SIG_A[0]]["label"]["text"] == "known: CRC of a one-element SDP error" and cl[SIG_B[0]]["label"] is None


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    pytest.skip("chromium is not installed (apt-get install chromium): the dashboard is not checked in a browser")


def test_dashboard_shows_the_series(series_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "site"
    assert main(["dashboard", "--results-db", str(series_db), "--out", str(out)]) == 0
    assert "dashboard: " in capsys.readouterr().out
    page = (out / "index.html").read_text()
    assert not re.search(r'(src|href)="(https?:)?//(?!bugs\.example/)', page)  # opens from disk: nothing fetched
    changes = dict(re.findall(r'data-change="(\w+)" data-test="([^"]+)"', page))
    assert changes == {"new": M.format(2), "fixed": M.format(3), "still": M.format(4)}
    assert re.findall(r'<tr data-test="([^"]+)" data-rate="([\d.]+)"', page) == [(M.format(2), "1.0000")]
    rates = re.findall(r'data-target="(\w+)" data-profile="nv_small" data-night="([\d-]+)"><td>\w+</td><td class="prof" title="nv_small">nv_small</td>'
                       r'<td>[\d-]+</td><td data-rate="([\d.]+)"', page)
    assert rates == [("model", "2026-01-01", "0.7500"), ("model", "2026-01-02", "0.5000"), ("model", "2026-01-03", "0.5000"),
                     ("serial", "2026-01-02", "1.0000"), ("serial", "2026-01-03", "1.0000")]
    assert re.findall(r'data-cluster="(\w+)" data-count="(\d+)"', page) == [(SIG_B[0], "4"), (SIG_A[0], "3")]
    assert "known: CRC of a one-element SDP error" in page and 'href="https://bugs.example/7"' in page
    assert 'data-run="s2" data-status="interrupted"' in page
    assert page.count("<svg") == 2  # pass-rate and wall-time plots, inline
    assert re.findall(r'<tr data-test="([^"]+)" data-run="(\w+)"><td><code>[^<]*</code></td><td><code>\w+</code></td>'
                      r'<td>([\d.]+) s</td><td>([\d.]+) s</td>', page) == [(M.format(1), "m4", "1.00", "3.00")]
    grid = page[page.index('id="grid-table"'):]
    assert grid.count('class="f"') == 3 and grid.count('class="e"') == 4
    exe = _chromium()
    shot = tmp_path / "dashboard.png"
    with tempfile.TemporaryDirectory() as prof:
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={prof}",
                        f"--screenshot={shot}", "--window-size=1300,2400", (out / "index.html").as_uri()],
                       capture_output=True, timeout=90, check=False)
        dom = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={prof}",
                              "--dump-dom", (out / "index.html").as_uri()], capture_output=True, text=True, timeout=90)
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20000
    assert "Failure clusters (2)" in dom.stdout and 'data-change="new"' in dom.stdout


def test_a_long_profile_list_is_one_short_cell_with_the_whole_list_in_its_tooltip() -> None:
    """The regression's default set of seven profiles made every runs-table row nine lines tall; a
    cell or chart title shows ``7 profiles`` and the tooltip (and ``history``) the whole list."""
    from nvdla_hil.harness.results.analysis import profiles_label, series_name

    seven = "nv_small,nv_small_256,nv_small_256_full,nv_medium_512,nv_medium_1024_full,nv_large,nv_full"
    assert profiles_label(seven) == "7 profiles"
    assert profiles_label("nv_small,nv_full") == "nv_small,nv_full" and profiles_label("") == ""
    key = ("vectors", "model", seven, "rtl", "", "", "")
    assert series_name(key, compact=True) == "vectors / model / 7 profiles / rtl / no bugs"
    assert seven in series_name(key)
