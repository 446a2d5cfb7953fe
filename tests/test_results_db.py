"""The results database on real runs (harness/results): ``nvdla-hil regress`` on the model target with
an injected datapath bug (harness/targets/faults.py) records each run as it goes; failures cluster by
their structured signature; a label comes back on the next run with the same bug; new / fixed /
flaky tests follow from the series; past run directories import to the same rows; interrupted and
killed runs are recorded as interrupted; progress is printed as the run goes.

Oracle of every failure here: the reference model (harness/refmodel) against the same model with
SDP.D_CVT_OFFSET.CVT_OFFSET decoded one too high; the suspect-register search of harness/analysis/triage.py
names that field."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvdla_hil.harness.cli import main
from nvdla_hil.harness.results.analysis import load_history
from nvdla_hil.harness.results.db import SCHEMA_VERSION, ResultsDB, SchemaError, schema
from nvdla_hil.harness.results.importer import import_dirs

BUG = "SDP.D_CVT_OFFSET.CVT_OFFSET+1"
#: two traces the bug breaks (SDP output off by one everywhere), one it cannot touch (CDP)
K = "sdp_3x3x33_bn_int8_reg_0 or sdp_3x3x33_bn_int8_mem_0 or cdp_8x8x32_lrn3_int8_0"
SUITE = "nvdla_hil.harness.suites.test_traces::"
ENV_KEYS = ("NVDLA_HIL_RESULTS_DB", "NVDLA_HIL_RESULTS", "NVDLA_HIL_TARGET", "NVDLA_HIL_CONFIG")


def _regress(trace_root: Path, results: Path, bug: bool, *extra: str) -> list[str]:
    args = ["regress", "--suite", "traces", "--traces", str(trace_root), "--poison", "--results-dir", str(results), "-k", K]
    return args + (["--model-bug", BUG] if bug else []) + list(extra)


@pytest.fixture(scope="module")
def series(trace_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Four real runs: bug, bug (after a label was given), no bug, bug."""
    mp = pytest.MonkeyPatch()
    for k in ENV_KEYS:
        mp.delenv(k, raising=False)
    results = tmp_path_factory.mktemp("series") / "results"
    outs: list[str] = []
    codes: list[int] = []
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    def run(bug: bool) -> None:
        buf = StringIO()
        with redirect_stdout(buf), redirect_stderr(buf):
            codes.append(main(_regress(trace_root, results, bug)))
        outs.append(buf.getvalue())

    run(True)
    with ResultsDB(results / "results.sqlite") as db:
        (first,) = db.runs()
        sig = next(t["signature"] for t in db.tests_of([first["id"]]) if t["signature"])
    label = io_main(["history", "--results-dir", str(results), "label", sig[:6], "--text", "CVT offset one too high",
                     "--bug", "https://bugs.example/nvdla/1"])
    run(True)
    run(False)
    run(True)
    mp.undo()
    return {"results": results, "outs": outs, "codes": codes, "sig": sig, "label_out": label}


def io_main(argv: list[str]) -> str:
    from contextlib import redirect_stdout
    from io import StringIO

    buf = StringIO()
    with redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


def test_each_run_is_recorded_with_its_facts(series: dict) -> None:
    assert series["codes"] == [1, 1, 0, 1]
    with ResultsDB(series["results"] / "results.sqlite") as db:
        runs = list(reversed(db.runs()))  # oldest first
        assert [r["status"] for r in runs] == ["complete"] * 4
        assert [(r["n_passed"], r["n_failed"]) for r in runs] == [(1, 2), (1, 2), (3, 0), (1, 2)]
        assert [r["exit_code"] for r in runs] == [1, 1, 0, 1]
        for r in runs:
            assert r["target"] == "model" and r["semantics"] == "rtl" and r["suite"] == "traces"
            assert r["run_dir"] and Path(r["run_dir"]).name == r["id"] and (Path(r["run_dir"]) / "report.html").is_file()
            assert r["host"] and r["version"].startswith("0.") and r["ended"] >= r["started"]
            assert r["collected"] == 3
        assert [r["model_bugs"] for r in runs] == [BUG, BUG, "", BUG]
        tests = {t["test"]: t for t in db.tests_of([runs[0]["id"]])}
        bad = tests[SUITE + "test_trace[sdp_3x3x33_bn_int8_reg_0]"]
        assert bad["outcome"] == "failed" and bad["signature"] == series["sig"]
        assert bad["reason"].startswith("sync_id_0: crc") and bad["reason"].endswith("MISMATCH (region poisoned before the run)")
        assert bad["properties"]["target"] == "model" and bad["properties"]["profile"] == "nv_small"
        assert tests[SUITE + "test_trace[cdp_8x8x32_lrn3_int8_0]"]["outcome"] == "passed"
        key = db.signatures([series["sig"]])[series["sig"]]["key"]
    assert key == "failed | crc | SDP | dense uniform | err 1- | suspect SDP.D_CVT_OFFSET.CVT_OFFSET"


def test_label_returns_with_the_same_failure(series: dict) -> None:
    assert f"labelled {series['sig']}" in series["label_out"]
    first, again, clean, last = series["outs"]
    assert "failure clusters: 2 failures in 1 cluster(s)" in first and "known:" not in first
    assert "failure clusters: 2 failures in 1 cluster(s)" in again
    assert "known: CVT offset one too high (https://bugs.example/nvdla/1)" in again
    assert "known: CVT offset one too high" in last and "failure clusters" not in clean
    out = io_main(["history", "--results-dir", str(series["results"])])
    assert "known: CVT offset one too high (https://bugs.example/nvdla/1)" in out
    report = (Path(series["results"]) / "latest" / "report.html").read_text()
    assert "CVT offset one too high" in report and "nvdla-hil triage" in report and "--model-bug SDP.D_CVT_OFFSET" in report


def test_new_fixed_and_flaky_across_the_series(series: dict) -> None:
    """The runs with the bug form one series, the clean run another (an injected bug decides the
    results: runs with and without it are not comparable). Every failure is the bug's, one cause
    each time: still failing, never new, fixed or flaky."""
    with ResultsDB(series["results"] / "results.sqlite") as db:
        h = load_history(db)
    a, b, c, d = reversed(h.runs)
    bad = {SUITE + "test_trace[sdp_3x3x33_bn_int8_reg_0]", SUITE + "test_trace[sdp_3x3x33_bn_int8_mem_0]"}
    assert h.previous(a) is None and h.previous(c) is None and h.previous(d)["id"] == b["id"]
    cmp_b = h.compare(b)
    assert not cmp_b.new and not cmp_b.fixed and not cmp_b.changed and {t["test"] for t in cmp_b.still} == bad
    cmp_c = h.compare(c)
    assert not cmp_c.fixed and not cmp_c.new and not cmp_c.still
    cmp_d = h.compare(d)
    assert {t["test"] for t in cmp_d.still} == bad and not cmp_d.new and not cmp_d.changed
    assert all(not h.flaky(r) for r in h.runs)
    (cl,) = h.clusters([r["id"] for r in h.runs])
    assert cl["count"] == 6 and set(cl["tests"]) == bad and len(cl["runs"]) == 3
    assert cl["label"]["text"] == "CVT offset one too high"
    out = io_main(["history", "--results-dir", str(series["results"])])
    assert "still failing (2):" in out and "new failures (0):" in out and "CAUSE CHANGED (0):" in out
    assert "one failure cause, in the last 3 comparable runs of build" in out and "oldest first): 0" in out


def test_import_of_the_run_directories_gives_the_same_rows(series: dict, tmp_path: Path) -> None:
    with ResultsDB(series["results"] / "results.sqlite") as db:
        recorded = {r["id"]: r for r in db.runs()}
        rec_tests = {(t["run_id"], t["test"]): t for t in db.tests_of(recorded)}
    with ResultsDB(tmp_path / "imported.sqlite") as db:
        done = import_dirs(db, [str(series["results"])])
        assert sorted(rid for rid, _, _ in done) == sorted(recorded) and all(s == "complete" for *_, s in done)
        for rid, r in recorded.items():
            got = db.run(rid)
            assert got is not None
            for k in ("target", "model_bugs", "suite", "exit_code", "status", "n_passed", "n_failed", "semantics"):
                assert got[k] == r[k], (k, got[k], r[k])
        assert rec_tests and {(t["run_id"], t["test"]) for t in db.tests_of(recorded)} == set(rec_tests)
        for t in db.tests_of(recorded):
            mine = rec_tests[(t["run_id"], t["test"])]
            assert (t["outcome"], t["signature"], t["reason"]) == (mine["outcome"], mine["signature"], mine["reason"])


def test_schema_version_is_kept_and_a_newer_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with ResultsDB(path) as db:
        assert db.version == SCHEMA_VERSION
        with db.engine.begin() as c:
            c.execute(schema.update().values(version=SCHEMA_VERSION + 1))
    with pytest.raises(SchemaError, match="newer than this nvdla-hil"):
        ResultsDB(path)


def _wait_for_a_result(db_path: Path, proc: subprocess.Popen) -> str:
    """Wait (polling; the run's own pace) until the run has recorded its first test result."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if db_path.is_file():
            with ResultsDB(db_path) as db:
                runs = db.runs()
                if runs and db.tests_of([runs[0]["id"]]):
                    return runs[0]["id"]
        time.sleep(0.5)
    raise AssertionError(f"the run recorded no result (exit {proc.poll()})")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_interrupted_and_killed_runs_are_interrupted(how: str, trace_root: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    argv = [sys.executable, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "traces", "--traces", str(trace_root),
            "--results-dir", str(results), "--model-bug", BUG, "-k", "sdp_ or cdp_"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        rid = _wait_for_a_result(results / "results.sqlite", proc)
        proc.send_signal(getattr(signal, how))
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    with ResultsDB(results / "results.sqlite") as db:
        h = load_history(db)  # finds the killed run's process gone
        run = h.run_by_id(rid)
        assert run["status"] == "interrupted", run
        assert 0 < (run["n_passed"] or 0) + (run["n_failed"] or 0) < run["collected"]
        if how == "SIGTERM":
            assert run["note"] == "stopped by SIGTERM" and run["exit_code"] == 130 and proc.returncode == 130, out[-3000:]
            # plain progress, not a terminal's status line (no carriage returns or escapes); whether a
            # progress line came before the signal is the run's pace (one every 5 % of the tests)
            assert "tests to run" in out and "\r" not in out and "\x1b[" not in out, out[-2000:]
            # how much of the run did not happen, in its result line, run.json and the report
            meta = json.loads((results / "latest" / "run.json").read_text())
            m = re.search(r"after (\d+) of (\d+) tests \((\d+) not run(?:, (\d+) cut off)?\)", meta["result"])
            assert m, meta["result"]
            done, total, left, cut = (int(g or 0) for g in m.groups())
            ran = sum(run[k] or 0 for k in ("n_passed", "n_failed", "n_error", "n_skipped"))
            assert total == run["collected"] == meta["tests"]["collected"] and done == ran == meta["tests"]["finished"]
            assert left > 0 and done + left + cut == total, meta["result"]
            assert f"nvdla-hil regress: interrupted {m.group(0)}; exit 130" in out, out[-2000:]
            assert m.group(0) in (results / "latest" / "report.html").read_text()
        else:
            assert "killed" in run["note"] and run["exit_code"] is None
    listing = io_main(["history", "--results-dir", str(results)])
    assert " interrupted " in listing


def test_live_progress_on_a_terminal_and_no_warnings(trace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)
    args = ["regress", "--suite", "traces", "--traces", str(trace_root), "--poison", "--results-dir", str(tmp_path / "r"),
            "--model-bug", BUG, "-k", "sdp_3x3x33_bn_int8_reg_0 or cdp_8x8x32_lrn3_int8_0", "--", "--nvdla-progress", "tty"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "\r[0/2] 0 failed | 0:" in out and "ETA ? | test_trace[" in out  # the status line, the test running now
    assert "\r[1/2] " in out and "\r[2/2] 1 failed | " in out and "ETA 0:00" in out
    assert "warnings summary" not in out and "Warning" not in out


@pytest.mark.slow  # a Dask cluster: `make test-slow`
def test_dask_workers_results_land_in_the_owning_run(series: dict, trace_root: Path, tmp_path: Path) -> None:
    """A regression on a real Dask cluster (scheduler and a worker process on 127.0.0.1): the workers'
    sessions record nothing of their own (even with NVDLA_HIL_RESULTS_DB set); the controller records
    every test, with the signature the worker computed from its diagnosis sidecar."""
    distributed = pytest.importorskip("distributed")
    db_path = tmp_path / "shared.sqlite"
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    env["NVDLA_HIL_RESULTS_DB"] = str(db_path)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as c:
        proc = subprocess.run([sys.executable, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "traces", "--traces",
                               str(trace_root), "--results-dir", str(tmp_path / "r"), "--model-bug", BUG,
                               "-k", "sdp_3x3x33_bn_int8_reg_0 or cdp_8x8x32_lrn3_int8_0", "--cluster", c.scheduler_address],
                              capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    with ResultsDB(db_path) as db:
        (run,) = db.runs()
        tests = {t["test"]: t for t in db.tests_of([run["id"]])}
    assert run["status"] == "complete" and (run["n_passed"], run["n_failed"]) == (1, 1)
    # the same failure kind as the local runs (without --poison: the check line differs, the signature not)
    assert tests[SUITE + "test_trace[sdp_3x3x33_bn_int8_reg_0]"]["signature"] == series["sig"]
    assert tests[SUITE + "test_trace[sdp_3x3x33_bn_int8_reg_0]"]["properties"].get("cluster_worker")


def test_report_script_runs_in_a_browser(series: dict) -> None:
    """The report's filter/sort/collapse script runs in headless Chromium (it counts the rows shown)."""
    import shutil
    import tempfile

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("chromium is not installed (apt-get install chromium): the report's script is not run in a browser")
    report = (Path(series["results"]) / "latest" / "report.html").resolve()
    with tempfile.TemporaryDirectory() as prof:
        dom = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={prof}",
                              "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=90).stdout
    assert '<span id="shown">3 of 3 tests shown</span>' in dom  # written by the page's script
    assert 'class="sortable"' in dom and dom.count('class="hf"') == 6  # two failing tests, F F P F each (oldest first)


def test_a_run_on_workers_is_in_the_same_series_as_one_without(tmp_path: Path) -> None:
    """Under ``-j 2`` (xdist) the controller collects nothing; the run's suite and test count come
    from the workers, so it is recorded with the same suite (and compared with) a run without
    workers. Before, its suite was empty: another series, and ``history`` showed ``-``."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    db_path = tmp_path / "db.sqlite"
    for jobs in ("1", "2"):
        proc = subprocess.run([sys.executable, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "vectors",
                               "-k", "sdp_cvt-s1-00", "-j", jobs, "--results-dir", str(tmp_path / "r"),
                               "--results-db", str(db_path)], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with ResultsDB(db_path) as db:
        h = load_history(db)
    one, two = sorted(h.runs, key=lambda r: r["started"])
    assert (one["suite"], one["collected"]) == (two["suite"], two["collected"]) == ("vectors", 10), (one, two)
    assert h.compare(two).previous is not None and h.compare(two).previous["id"] == one["id"]
