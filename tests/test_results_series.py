"""Comparable series, flaky calls and cause changes on a database built by real ``nvdla-hil regress``
runs (harness/results/analysis.py, history.py, dashboard.py, runreport.py).

Every run here is a real regression on the model target, in a child process, on a small
selection of the bundled packed vectors (``--suite vectors -k sdp_cvt-s1-00``: 10 cases) and,
when NVDLA's trace tests are there, one trace (a second suite): clean runs, two injected bugs,
a run stopped by SIGTERM, and three builds.

How the build is varied: ``project_version()`` (harness/results/recorder.py) is nvdla-hil's
``__version__`` plus ``+g<commit>`` from ``git rev-parse --short HEAD`` of the checkout. The child
process (:data:`CHILD`) replaces that function, before the command line runs, with one that
returns ``0.1.0+g<commit>`` for the commit the test names (``SERIES_TEST_COMMIT``): the run, its
JUnit properties and everything read from the database then carry that commit, as a run from
that checkout would. Build ``c0ffee3`` also carries a defect of its own that the run does not
declare: the child adds ``stuck:SDP:0:0`` to the model's bugs behind the command line's back
(``SERIES_TEST_DEFECT``), as a code change in that build would; its runs are in the same series
as the earlier ones (same declared bugs), and the tests that now fail another way are a change
of cause.

Oracles: the injected faults (harness/targets/faults.py) are deterministic, so on one build and
one series a test's outcome and signature never change: the true number of flaky tests is 0.
The cause changes are found from the stored signature ids of consecutive comparable runs, read
straight from the database's rows (not from the analysis under test).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvdla_hil.harness.cli import main
from nvdla_hil.harness.results.analysis import History, commit_of, load_history
from nvdla_hil.harness.results.db import ResultsDB

pytestmark = pytest.mark.slow  # 14 real regressions build the database: `make test-slow`, CI's second step

CVT = "SDP.D_CVT_OFFSET.CVT_OFFSET+1"
STUCK = "stuck:SDP:0:0"
K = "sdp_cvt-s1-00"
ENV_KEYS = ("NVDLA_HIL_RESULTS_DB", "NVDLA_HIL_RESULTS", "NVDLA_HIL_TARGET", "NVDLA_HIL_CONFIG")
A, B, C = "aaaa111", "bbbb222", "c0ffee3"

#: the child: nvdla-hil's command line with project_version() naming the test's commit (and, for
#: build c0ffee3, a model defect the run does not declare); optionally held mid-run: once its
#: results database (``SERIES_TEST_HOLD``) has a result of the running run, every later model
#: target waits for the test's SIGTERM, so the signal lands mid-run as an ordering of events, not
#: because the rest of the run was slowed down enough for the test to be quick
CHILD = r"""
import os, sys, time
import nvdla_hil.harness.results.recorder as recorder
commit = os.environ["SERIES_TEST_COMMIT"]
recorder.project_version = lambda: "0.1.0+g" + commit
defect = os.environ.get("SERIES_TEST_DEFECT")
hold = os.environ.get("SERIES_TEST_HOLD")
def recorded():
    from nvdla_hil.harness.results.db import ResultsDB
    if not os.path.exists(hold):
        return False
    with ResultsDB(hold) as db:
        running = [r for r in db.runs() if r["status"] == "running"]
        return bool(running and db.tests_of([running[0]["id"]]))
if defect or hold:
    from nvdla_hil.harness.targets import model
    original = model.ModelTarget.__init__
    def init(self, *a, bugs=None, **kw):
        if hold and recorded():
            while True:  # until the test's SIGTERM
                time.sleep(1)
        original(self, *a, bugs=[*(bugs or []), *([defect] if defect else [])], **kw)
    model.ModelTarget.__init__ = init
from nvdla_hil.harness.cli import main

sys.exit(main(sys.argv[1:]))
"""


def _traces() -> Path | None:
    for p in (os.environ.get("NVDLA_TRACES"), Path(__file__).resolve().parents[2] / "shared/nvdla/trace_tests/nv_small"):
        if p and (Path(p) / "cdp_8x8x32_lrn3_int8_0").is_dir():
            return Path(p)
    return None


def _env(commit: str, defect: str = "", hold: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    env.update(SERIES_TEST_COMMIT=commit, SERIES_TEST_DEFECT=defect, SERIES_TEST_HOLD=str(hold or ""))
    return env


def _argv(results: Path, bugs: list[str], suite: str = "vectors", k: str = K, traces: Path | None = None) -> list[str]:
    argv = [sys.executable, "-c", CHILD, "regress", "--target", "model", "--suite", suite, "-k", k,
            "--results-dir", str(results)]
    if traces is not None:
        argv += ["--traces", str(traces)]
    for b in bugs:
        argv += ["--model-bug", b]
    return argv


def _run(results: Path, commit: str, bugs: list[str], **kw: object) -> int:
    defect = str(kw.pop("defect", ""))
    proc = subprocess.run(_argv(results, bugs, **kw), env=_env(commit, defect), capture_output=True, text=True,  # type: ignore[arg-type]
                          timeout=600, check=False)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode


def _interrupted(results: Path, commit: str, bugs: list[str]) -> None:
    """A run stopped by SIGTERM after its first result (held mid-run from then on: :data:`CHILD`)."""
    db_path = results / "results.sqlite"
    proc = subprocess.Popen(_argv(results, bugs), env=_env(commit, hold=db_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            with ResultsDB(db_path) as db:
                running = [r for r in db.runs() if r["status"] == "running"]
                if running and db.tests_of([running[0]["id"]]):
                    break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-3000:]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The database: 12 or 14 real runs, oldest first (see the module doc)."""
    results = tmp_path_factory.mktemp("series") / "results"
    traces = _traces()
    t0 = time.monotonic()
    plan: list[tuple[str, str, list[str], dict]] = [
        ("clean", A, [], {}),
        ("cvt", A, [CVT], {}),
        ("cvt again", A, [CVT], {}),
        ("changed bug", A, [STUCK], {}),
        ("clean again", A, [], {}),
        ("interrupted", A, [CVT], {"interrupt": True}),
        ("clean, new build", B, [], {}),
        ("cvt, new build", B, [CVT], {}),
        ("stuck, new build", B, [STUCK], {}),
        ("cvt, build with a defect", C, [CVT], {"defect": STUCK}),
        ("cvt, build with a defect, again", C, [CVT], {"defect": STUCK}),
        ("clean, build with a defect", C, [], {"defect": STUCK}),
    ]
    if traces is not None:  # a second suite: one CDP trace the SDP bugs cannot touch
        plan += [("traces", A, [], {"suite": "traces", "k": "cdp_8x8x32_lrn3_int8_0", "traces": traces}),
                 ("traces, new build", B, [], {"suite": "traces", "k": "cdp_8x8x32_lrn3_int8_0", "traces": traces})]
    codes = {}
    for name, commit, bugs, kw in plan:
        if kw.pop("interrupt", False):
            _interrupted(results, commit, bugs)
            codes[name] = 130
        else:
            codes[name] = _run(results, commit, bugs, **kw)
    with ResultsDB(results / "results.sqlite") as db:
        h = load_history(db)
    return {"results": results, "h": h, "plan": plan, "codes": codes, "seconds": time.monotonic() - t0,
            "traces": traces}


#: the outcomes that count as a failure (JUnit's failure and error); the oracle's own, not the analysis's
FAILED = frozenset({"failed", "error"})


def _series_of(run) -> tuple:  # noqa: ANN001
    """The series a run is in, written here apart from the analysis under test: the same suite,
    target, profile, semantics, injected bugs (in any order), seed and ``-k``; only the build differs."""
    bugs = ",".join(sorted(b for b in (run["model_bugs"] or "").split(",") if b))
    return (run["suite"] or "", run["target"] or "", run["profile"] or "", run["semantics"] or "", bugs,
            str(run["seed"] or ""), run["selection"] or "")


def _oracle_changes(h: History) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(run id, test) of every cause change and every same-cause failure, from the stored signature ids of
    each run and the comparable run before it (the newest complete one)."""
    changed, same = set(), set()
    for r in h.runs:
        before = [p for p in h.runs if _series_of(p) == _series_of(r) and p["started"] < r["started"]]
        complete = [p for p in before if p["status"] == "complete"] or before
        if not complete:
            continue
        prev = max(complete, key=lambda p: p["started"])
        for test, row in h.tests[r["id"]].items():
            old = h.tests[prev["id"]].get(test)
            if old is not None and row["outcome"] in FAILED and old["outcome"] in FAILED:
                (same if old["signature"] == row["signature"] else changed).add((r["id"], test))
    return changed, same


def test_the_runs_are_real_and_recorded(built: dict) -> None:
    h: History = built["h"]
    assert len(h.runs) >= 10 and len(h.runs) == len(built["plan"])
    by_commit = {commit_of(r) for r in h.runs}
    assert by_commit == {A, B, C}
    statuses = [r["status"] for r in reversed(h.runs)]
    assert statuses.count("interrupted") == 1 and statuses.count("complete") == len(h.runs) - 1
    stopped = next(r for r in h.runs if r["status"] == "interrupted")
    assert stopped["note"] == "stopped by SIGTERM" and 0 < (stopped["n_passed"] or 0) + (stopped["n_failed"] or 0) < 10
    assert {r["suite"] for r in h.runs} == ({"vectors", "traces"} if built["traces"] else {"vectors"})
    # the bugs make real failures: CVT breaks 6 of the 10 cases, stuck-at 7 (the model against goldens from RTL)
    assert built["codes"]["clean"] == 0 and built["codes"]["cvt"] == 1 and built["codes"]["changed bug"] == 1


def test_no_false_flaky_call(built: dict, capsys: pytest.CaptureFixture) -> None:
    """Every failure is a deterministic injected fault (or build defect): not one test is flaky,
    though tests flip between pass and fail across bugs, builds and suites."""
    h: History = built["h"]
    assert [f for r in h.runs for f in h.flaky(r)] == []
    # what the old definition (any run of target+profile+suite+semantics+-k, any build) would have called flaky
    seqs: dict[str, str] = {}
    for r in sorted(h.runs, key=lambda r: r["started"]):
        if r["suite"] == "vectors":
            for test, row in h.tests[r["id"]].items():
                seqs[test] = seqs.get(test, "") + ("F" if row["outcome"] in FAILED else "P")
    naive = [t for t, s in seqs.items() if sum(a != b for a, b in zip(s, s[1:])) >= 2]
    assert len(naive) >= 5  # the trap this database sets: flips across bugs and builds are everywhere
    assert main(["history", "--results-dir", str(built["results"])]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^flaky tests \(.*\): 0$", out, re.M), out
    page = _dashboard(built, capsys)
    flaky = page[page.index('id="flaky-table"'):]
    assert "<tr data-test=" not in flaky[:flaky.index("</table>")]


def test_every_cause_change_is_marked(built: dict, capsys: pytest.CaptureFixture) -> None:
    h: History = built["h"]
    changed, same = _oracle_changes(h)
    assert changed  # the defect of build c0ffee3 changes how some CVT failures look
    got_changed = {(r["id"], str(t["test"])) for r in h.runs for t in h.compare(r).changed}
    got_still = {(r["id"], str(t["test"])) for r in h.runs for t in h.compare(r).still}
    assert got_changed == changed and got_still == same
    # the run with the changed bug is not compared with the bug before it: another series
    stuck = [r for r in h.runs if r["model_bugs"] == STUCK]
    assert len(stuck) == 2  # h.runs is newest first: the oldest run with that bug starts its series
    assert h.compare(stuck[-1]).previous is None
    assert h.compare(stuck[0]).previous["id"] == stuck[1]["id"]
    # history marks each change of the newest run with a defect, with the cluster before and after
    run = max((r for r in h.runs if commit_of(r) == C and r["model_bugs"] == CVT), key=lambda r: r["started"])
    first = min((r for r in h.runs if commit_of(r) == C and r["model_bugs"] == CVT), key=lambda r: r["started"])
    mine = {t for rid, t in changed if rid == first["id"]}
    assert mine and main(["history", "--results-dir", str(built["results"]), "--run", first["id"]]) == 0
    out = capsys.readouterr().out
    block = out[out.index("CAUSE CHANGED ("):out.index("flaky tests")]
    assert f"CAUSE CHANGED ({len(mine)}):" in block
    for t in mine:
        assert t.split("::")[-1] in block
    assert re.search(r"\[\w{12} -> \w{12}\]", block)
    # the dashboard shows the newest run of each series: the second defect run has the same causes as the first
    assert not h.compare(run).changed and h.compare(run).still
    # the run report of the first defect run says it against the run before
    report = (Path(first["run_dir"]) / "report.html").read_text()
    assert report.count('data-change="changed"') == len(mine) and f"{len(mine)} cause changed" in report
    assert f"({commit_of(h.compare(first).previous)})" in report


def _dashboard(built: dict, capsys: pytest.CaptureFixture) -> str:
    out = built["results"].parent / "site"
    assert main(["dashboard", "--results-dir", str(built["results"]), "--out", str(out)]) == 0
    capsys.readouterr()
    return (out / "index.html").read_text()


def test_every_run_shows_its_build_and_provenance(built: dict, capsys: pytest.CaptureFixture) -> None:
    h: History = built["h"]
    assert main(["history", "--results-dir", str(built["results"]), "--show", "50"]) == 0
    out = capsys.readouterr().out
    page = _dashboard(built, capsys)
    for r in h.runs:
        line = next(ln for ln in out.splitlines() if ln.startswith(f"  {r['id']} "))
        assert f" {commit_of(r)} " in line, line
        row = re.search(rf'<tr data-run="{r["id"]}" data-status="\w+" data-commit="(\w+)">(.*?)</tr>', page)
        assert row and row.group(1) == commit_of(r)
        assert f"<code title=\"0.1.0+g{commit_of(r)}\">{commit_of(r)}</code>" in row.group(2)
        assert f'<a class="report" href="../results/{r["id"]}/report.html">report</a>' in row.group(2) or r["status"] != "complete"
        assert f"<td>{r['host']}</td>" in row.group(2) and f"<td>{r.get('seed') or ''}</td>" in row.group(2)
    # the whole profile list and each test's whole name, copyable into -k
    assert "nv_small,nv_small_256,nv_small_256_full,nv_medium_512,nv_medium_1024_full,nv_large,nv_full" in out
    assert "bugs " + CVT in out
    cvt = next(r for r in h.runs if r["model_bugs"] == CVT and r["status"] == "complete")
    assert main(["history", "--results-dir", str(built["results"]), "--run", cvt["id"]]) == 0
    assert re.search(r"^    test_vector\[sdp_cvt/sdp_cvt-s1-001\]  ", capsys.readouterr().out, re.M)
    # one bar chart per series, every run on it labelled with its commit
    plot = page[page.index('id="passrate-plot"'):page.index("</div>", page.index('id="passrate-plot"'))]
    for c in (A, B, C):
        assert c in plot
    assert 'id="next"' in page and "nvdla-hil triage" in page


def test_junit_names_seed_bugs_and_build(built: dict) -> None:
    h: History = built["h"]
    run = next(r for r in h.runs if r["model_bugs"] == CVT and r["status"] == "complete")
    junit = (Path(run["run_dir"]) / "junit.xml").read_text()
    assert junit.count(f'<property name="injected_bugs" value="{CVT}" />') == 10
    assert junit.count('<property name="seed" value="1" />') == 10  # the vectors' provenance seed
    assert junit.count(f'<property name="nvdla_hil_version" value="0.1.0+g{commit_of(run)}" />') == 10


def test_import_and_report_take_the_database_after_the_subcommand(built: dict, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)
    other = tmp_path / "imported.sqlite"
    assert main(["history", "import", str(built["results"]), "--results-db", str(other)]) == 0
    assert f"run(s) imported into {other}" in capsys.readouterr().out
    assert main(["history", "show", "--results-db", str(other)]) == 0
    shown = capsys.readouterr().out
    for r in built["h"].runs:
        assert f"  {r['id']} " in shown
    with ResultsDB(other) as db:
        imported = load_history(db)
    # the imported runs keep their build (from JUnit), seed and bugs (the profile list is the profiles the
    # tests ran on: run.json does not name the default list regress chose)
    def facts(h: History) -> dict:
        return {r["id"]: (commit_of(r), r["suite"], r["semantics"], r["model_bugs"] or "", r["seed"], r["selection"])
                for r in h.runs if r["status"] == "complete"}
    assert facts(imported) == facts(built["h"])
    # a copied run folder: its report says what it lacks, and takes the database from NVDLA_HIL_RESULTS_DB
    run = next(r for r in built["h"].runs if r["model_bugs"] == CVT and r["status"] == "complete")
    copy = tmp_path / "copy" / run["id"]
    copy.mkdir(parents=True)
    for name in ("junit.xml", "run.json"):
        (copy / name).write_bytes((Path(run["run_dir"]) / name).read_bytes())
    assert main(["report", str(copy)]) == 0
    assert "no results database" in (copy / "report.html").read_text()
    monkeypatch.setenv("NVDLA_HIL_RESULTS_DB", str(built["results"] / "results.sqlite"))
    assert main(["report", str(copy)]) == 0
    page = (copy / "report.html").read_text()
    assert "no results database" not in page and f"commit <code title=\"0.1.0+g{commit_of(run)}\">" in page


def test_eta_says_what_it_assumes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress line's ETA (harness/results/progress.py) on the costs measured on a trace run with an
    injected SDP bug: a pass 0.2 s, a failure 12 s (the failure's diagnosis and suspect search)."""
    from types import SimpleNamespace

    from nvdla_hil.harness.results import progress

    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    p = progress.LiveProgress(config=None, mode="off")  # type: ignore[arg-type]
    p.total = 20

    def finish(k: int, failed: bool, secs: float) -> None:
        now[0] += secs
        p.pytest_runtest_logreport(SimpleNamespace(nodeid=f"t{k}", when="call", failed=failed))  # type: ignore[arg-type]
        p.pytest_runtest_logreport(SimpleNamespace(nodeid=f"t{k}", when="teardown", failed=False))  # type: ignore[arg-type]

    assert p.eta() == "?"
    for k in range(8):
        finish(k, False, 0.2)
    assert p.eta() == "0:02 if none fail"  # 12 left x 0.2 s: said as what it is, not a promise
    finish(8, True, 12.0)
    finish(9, True, 12.0)
    # 10 left: at the 2-in-10 share seen, 10 x (0.2 x 12 + 0.8 x 0.2) = 25.6 s; all failing, 10 x 12 = 120 s
    assert p.eta() == "0:26 at 20% failing, up to 2:00"
    assert "[10/20] 2 failed | 0:26 elapsed, ETA 0:26 at 20% failing, up to 2:00" == p.line()
    for k in range(10, 20):
        finish(k, False, 0.2)
    assert p.eta() == "0:00"


def test_progress_knows_the_total_under_xdist(tmp_path: Path) -> None:
    """With -j 2 the controller collects nothing itself: the total comes from the workers'
    collection (it read [N/0], ETA ? and printed a line per test)."""
    r = subprocess.run([sys.executable, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "vectors", "-k", "sdp_cvt",
                        "-j", "2", "--results-dir", str(tmp_path)], capture_output=True, text=True, timeout=600,
                       check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "nvdla-hil: 12 tests to run" in r.stdout  # the bundled sdp_cvt suite has 12 cases
    assert "progress [12/12] 0 failed" in r.stdout and "/0]" not in r.stdout
