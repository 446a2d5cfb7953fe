"""Every outcome kind of a worker's test reaches the controller in the shape pytest's reporters
expect (``nvdla-hil regress --cluster``): skip, xfail, xpass, error and failure, through a real Dask
scheduler and two worker processes on 127.0.0.1, the regression in a subprocess as a user runs it.

A skip's ``longrepr`` is the tuple ``(path, lineno, reason)``; a JSON round trip (the worker's
session host) makes it a list, on which JUnit's ``append_skipped`` asserts: INTERNALERROR, exit 3,
no JUnit file. The run below has a skip of each kind, so it cannot pass with that shape lost."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow  # a real Dask scheduler and workers: `make test-slow`, CI's second step

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]

KINDS = '''
import pytest

def test_pass():
    pass

def test_fail():
    assert 1 == 2

def test_skip_call():
    pytest.skip("not here")

@pytest.mark.skip(reason="marked skip")
def test_skip_mark():
    pass

@pytest.mark.xfail(reason="known bad")
def test_xfail():
    assert False

@pytest.mark.xfail(reason="known bad but passes")
def test_xpass():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_error(broken):
    pass
'''

#: a bundled vector nv_small lacks the units of: the plugin's own skip ("lacks unit: ...")
LACKS_UNIT = "fuzz-sdp-pdp-s1-00007"


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as c:
        yield c.scheduler_address


def _cases(path: Path) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[str | None, str | None]]]:
    """(suite counts, test name -> outcome, test name -> (type, message) of its skip/error/failure)."""
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    counts = {k: suite.get(k, "") for k in ("tests", "failures", "errors", "skipped")}
    outcome, detail = {}, {}
    for case in suite.iter("testcase"):
        kinds = [c for c in case if c.tag in ("failure", "error", "skipped")]
        name = str(case.get("name"))
        outcome[name] = kinds[0].tag if kinds else "passed"
        if kinds:
            detail[name] = (kinds[0].get("type"), kinds[0].get("message"))
    return counts, outcome, detail


def _regress(tmp: Path, name: str, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    res = tmp / name
    proc = subprocess.run([*CLI, "regress", "--target", "model", "--suite", "vectors", "--profile", "nv_small",
                           "-k", f"test_kinds or {LACKS_UNIT}", "--results-dir", str(res), *extra,
                           "--", str(tmp / "test_kinds.py")],
                          capture_output=True, text=True, timeout=240, cwd=tmp)
    return proc, res / "latest"


def test_every_outcome_kind_through_the_cluster(cluster, tmp_path):
    (tmp_path / "test_kinds.py").write_text(KINDS)
    remote, run = _regress(tmp_path, "cluster", "--cluster", cluster)
    out = remote.stdout[-4000:] + remote.stderr[-3000:]
    assert "INTERNALERROR" not in remote.stdout, out
    assert remote.returncode == 1, out  # a test failed: not 3 (internal error)
    assert (run / "junit.xml").is_file(), out
    counts, outcome, detail = _cases(run / "junit.xml")
    assert counts == {"tests": "8", "failures": "1", "errors": "1", "skipped": "4"}, counts
    assert outcome == {"test_pass": "passed", "test_fail": "failure", "test_skip_call": "skipped",
                       "test_skip_mark": "skipped", "test_xfail": "skipped", "test_xpass": "passed",
                       "test_error": "error", f"test_vector[pdp_flying/{LACKS_UNIT}]": "skipped"}
    assert detail["test_skip_call"] == ("pytest.skip", "not here")
    assert detail["test_skip_mark"] == ("pytest.skip", "marked skip")
    assert detail["test_xfail"] == ("pytest.xfail", "known bad")
    assert detail["test_error"][1] == 'failed on setup with "RuntimeError: fixture broke"'
    assert detail["test_fail"][1] == "assert 1 == 2"
    vec_type, vec_msg = detail[f"test_vector[pdp_flying/{LACKS_UNIT}]"]
    assert vec_type == "pytest.skip" and vec_msg.startswith(f"lacks unit: {LACKS_UNIT} needs features")
    # the terminal's counts and the plugin's summary (its skip kinds come from the skip's reason)
    assert "1 failed, 1 passed, 3 skipped" in remote.stdout and "1 xfailed, 1 xpassed, 1 error" in remote.stdout, out
    summary = next(ln for ln in remote.stdout.splitlines() if ln.startswith("summary: "))
    assert "2 passed, 1 failed, 1 error" in summary and "1 skipped: lacks unit" in summary, summary
    meta = json.loads((run / "run.json").read_text())
    assert meta["exit_code"] == 1 and meta["pytest_exit_code"] == 1
    assert "re-run after a worker died: 0" in remote.stdout
    # every test ran on a worker of the cluster
    workers = {p.get("value") for p in ET.parse(run / "junit.xml").getroot().iter("property")
               if p.get("name") == "cluster_worker"}
    assert workers and all(w.startswith("tcp://127.0.0.1:") for w in workers)


def test_cluster_reports_match_a_local_run(cluster, tmp_path):
    """The same JUnit (outcomes, types, messages, texts) and summary line as the run without --cluster."""
    (tmp_path / "test_kinds.py").write_text(KINDS)
    local, lrun = _regress(tmp_path, "local")
    remote, rrun = _regress(tmp_path, "cluster", "--cluster", cluster)
    assert local.returncode == remote.returncode == 1, remote.stdout[-3000:] + remote.stderr[-2000:]
    assert _cases(lrun / "junit.xml") == _cases(rrun / "junit.xml")
    line = [ln for ln in local.stdout.splitlines() if ln.startswith("summary: ")]
    assert line and line == [ln for ln in remote.stdout.splitlines() if ln.startswith("summary: ")]


def test_restore_report_shapes_gives_back_tuples():
    from nvdla_hil.harness.plugin.session_host import restore_report_shapes

    data = json.loads(json.dumps({"longrepr": ("a.py", 3, "why"), "location": ("a.py", 2, "t"),
                                  "sections": [("Captured stdout call", "x")], "user_properties": [("k", 1)]}))
    got = restore_report_shapes(data)
    assert got == {"longrepr": ("a.py", 3, "why"), "location": ("a.py", 2, "t"),
                   "sections": [("Captured stdout call", "x")], "user_properties": [("k", 1)]}
    exc = {"longrepr": {"reprcrash": None, "reprtraceback": {}, "sections": []}}
    assert restore_report_shapes(exc)["longrepr"] == exc["longrepr"]  # the exception form is pytest's to rebuild
