"""Regressions on a Dask distributed cluster (``--nvdla-cluster``, ``regress --cluster``), and the
stop after consecutive dead-board failures.

A real scheduler and two worker processes on 127.0.0.1 (``distributed.LocalCluster``); the
regression runs in a subprocess, as a user would run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from _signals import with_default_signals
pytestmark = pytest.mark.slow  # a real Dask scheduler and workers: `make test-slow`, CI's second step


distributed = pytest.importorskip("distributed")

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]

#: hang guard for the runs and waits here: each ends on its event (or on the run's exit) first;
#: not an expected duration (a Python process's start alone took over 40 s on a loaded machine)
HANG_GUARD = 300.0


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as c, distributed.Client(c) as client:
        yield c.scheduler_address, client


def _junit(path: Path) -> dict[str, str]:
    """test name -> outcome, from a JUnit file."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[case.get("name")] = kinds[0] if kinds else "passed"
    return out


def _regress(tmp: Path, name: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    res = tmp / name
    proc = subprocess.run([*CLI, "regress", "--target", "model", "--suite", "vectors", "-k", "cdp_lut or sdp_lut",
                           "--results-dir", str(res), *extra], capture_output=True, text=True, timeout=HANG_GUARD, cwd=tmp)
    return proc, _junit(res / "latest" / "junit.xml")


def test_regress_on_cluster_matches_local(cluster, tmp_path):
    addr, _ = cluster
    local, want = _regress(tmp_path, "local")
    remote, got = _regress(tmp_path, "cluster", "--cluster", addr)
    assert local.returncode == 0, local.stdout[-2000:] + local.stderr[-2000:]
    assert remote.returncode == 0, remote.stdout[-2000:] + remote.stderr[-2000:]
    assert len(want) >= 10
    assert got == want  # the same tests, the same outcomes
    line = next(ln for ln in remote.stdout.splitlines() if ln.startswith("summary: "))
    assert line == next(ln for ln in local.stdout.splitlines() if ln.startswith("summary: "))
    assert "re-run after a worker died: 0" in remote.stdout
    run = tmp_path / "cluster" / "latest"
    assert (run / "summary.txt").is_file() and (run / "report.html").is_file()
    assert any((run / "logs").iterdir())  # the workers wrote the per-test logs into the run directory
    # the workers' functional coverage is merged into the run's: the same counts as the local run
    import json

    cov_local = json.loads((tmp_path / "local" / "latest" / "coverage.json").read_text())
    cov_cluster = json.loads((run / "coverage.json").read_text())
    assert cov_local["layers"] >= 10 and sum(cov_local["bins"].values()) > 0
    assert cov_cluster["layers"] == cov_local["layers"] and cov_cluster["bins"] == cov_local["bins"]


# the test runs in its Dask worker's session host (harness/plugin/session_host.py), a child of the
# worker: the mark names the worker's pid (the host's parent), which the test below kills. It
# runs until the test creates GO (an event: it is surely still running when the test acts on it,
# however loaded the machine), then leaves an end mark. Its own wait is a hang guard only.
SLOW_TESTS = '''
import os, time, pathlib, pytest

@pytest.mark.parametrize("i", range(4))
def test_slow(i):
    d = pathlib.Path(MARKS)
    (d / f"start-{i}-{os.getppid()}").write_text("")
    guard = time.monotonic() + 600
    while not pathlib.Path(GO).exists():
        assert time.monotonic() < guard, "never let go"
        time.sleep(0.05)
    (pathlib.Path(ENDS) / f"end-{i}-{os.getppid()}").write_text("")
'''


def _slow_file(tmp_path: Path, n: int = 4) -> tuple[Path, Path, Path]:
    """``test_slow.py`` in ``tmp_path`` with ``n`` gated tests; (marks, go, ends)."""
    marks, ends, go = tmp_path / "marks", tmp_path / "ends", tmp_path / "go"
    marks.mkdir()
    ends.mkdir()
    (tmp_path / "test_slow.py").write_text(f"MARKS = {str(marks)!r}\nGO = {str(go)!r}\nENDS = {str(ends)!r}\n"
                                           + SLOW_TESTS.replace("range(4)", f"range({n})"))
    return marks, go, ends


def _until(cond, proc: subprocess.Popen | None = None) -> bool:  # noqa: ANN001
    """Poll ``cond()`` until true (True), ``proc`` exits or the hang guard passes (False)."""
    deadline = time.monotonic() + HANG_GUARD
    while not cond():
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            return bool(cond())
        time.sleep(0.05)
    return True


def test_killed_worker_test_is_rerun_and_reported(cluster, tmp_path):
    """A worker killed while its test runs (the test cannot end before GO is created, after the
    kill): that test is run again on another worker and reported as re-run."""
    addr, client = cluster
    marks, go, _ = _slow_file(tmp_path)
    junit = tmp_path / "junit.xml"
    worker_pids = set(client.run(os.getpid).values())
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:labgrid", "-q",
                             "test_slow.py", "--nvdla-cluster", addr, "--junitxml", str(junit)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    victims: list[tuple[str, int]] = []

    def started_on_a_worker() -> bool:
        victims[:] = [(m.name.split("-")[1], int(m.name.rsplit("-", 1)[1])) for m in marks.iterdir()
                      if int(m.name.rsplit("-", 1)[1]) in worker_pids]
        return bool(victims)

    try:
        if not _until(started_on_a_worker, proc):
            proc.kill()
            pytest.fail("no test started on a worker: " + proc.communicate()[0][-3000:])
        victim = victims[0]
        os.kill(victim[1], signal.SIGKILL)
    finally:
        go.touch()  # let the tests end (the killed worker's first, never: it is gone)
    out, _ = proc.communicate(timeout=HANG_GUARD)
    assert proc.returncode == 0, out[-3000:]
    assert "4 passed" in out
    assert "re-run after a worker died: 1" in out
    assert f"re-run: test_slow.py::test_slow[{victim[0]}]" in out
    starts = [m.name for m in marks.iterdir() if m.name.startswith(f"start-{victim[0]}-")]
    assert len(starts) == 2  # started on the killed worker, then again elsewhere
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {f"test_slow[{i}]" for i in range(4)}
    props = {p.get("name"): p.get("value") for p in cases[f"test_slow[{victim[0]}]"].iter("property")}
    assert props.get("rerun_after_worker_died") == "1"


DEAD_BOARD = '''
import pytest
from nvdla_hil.drivers.uartbone import BoardDeadError

@pytest.mark.parametrize("i", range(6))
def test_board(i):
    raise BoardDeadError("board arty-1 (socket://127.0.0.1:1) does not answer")
'''


# another module's BoardDeadError (say a transport's own) is matched by its class name
DEAD_BOARD_BY_NAME = DEAD_BOARD.replace("from nvdla_hil.drivers.uartbone import BoardDeadError",
                                        "class BoardDeadError(OSError):\n    pass")


@pytest.mark.parametrize(("limit", "ran", "source"), [("3", 3, DEAD_BOARD), ("0", 6, DEAD_BOARD), ("3", 3, DEAD_BOARD_BY_NAME)])
def test_stop_after_consecutive_dead_board_failures(tmp_path, limit, ran, source):
    (tmp_path / "test_dead.py").write_text(source)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:labgrid", "-q", "test_dead.py",
                           "--nvdla-max-board-failures", limit], cwd=tmp_path, capture_output=True, text=True,
                          timeout=HANG_GUARD)
    assert f"{ran} failed" in proc.stdout, proc.stdout[-2000:]
    stopped = "is dead: 3 consecutive tests failed on it; last: board arty-1 (socket://127.0.0.1:1) does not answer"
    assert (stopped in proc.stdout) == (limit == "3")


def test_ctrl_c_cancels_the_cluster_tasks(cluster, tmp_path):
    """Ctrl-C while tests run (they cannot end before GO): the run is interrupted, the scheduler
    forgets its tasks, and once the tests that were running have ended no new one starts. "No new
    one" is checked after an event, not a pause: a task submitted to each worker afterwards has
    run there, so any test task a worker still held (queued before it) has started by then."""
    addr, client = cluster
    marks, go, ends = _slow_file(tmp_path, 8)
    proc = subprocess.Popen(with_default_signals([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                                                  "no:labgrid", "-q", "test_slow.py", "--nvdla-cluster", addr]),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        if not _until(lambda: any(marks.iterdir()), proc):
            proc.kill()
            pytest.fail("no test started on a worker: " + proc.communicate()[0][-3000:])
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=HANG_GUARD)
        assert proc.returncode == 2, out[-3000:]  # pytest's "interrupted"
        assert "KeyboardInterrupt" in out
        # the controller cancelled its futures: the scheduler forgets every task of the run
        assert _until(lambda: client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0)
        started = len(list(marks.iterdir()))
    finally:
        go.touch()  # the tests already running finish in their workers
    for w in client.scheduler_info()["workers"]:  # behind whatever each worker still held
        client.submit(os.getpid, workers=[w], allow_other_workers=False, pure=False).result(timeout=HANG_GUARD)
    assert _until(lambda: len(list(ends.iterdir())) == len(list(marks.iterdir())))  # every started test has ended
    # no new one started (at most one per worker could have been handed out just before the cancel)
    assert len(list(marks.iterdir())) <= started + 2 < 8


def test_worker_sessions_import_the_test_files_anew(tmp_path):
    """A Dask worker runs many sessions in one process: a test file of a later run (same module
    name, other folder or edited) is imported as it is now, not taken from sys.modules."""
    from nvdla_hil.harness.plugin.cluster import run_nodeid

    outcomes = []
    for i, body in enumerate(("def test_same():\n    pass\n", "def test_same():\n    assert False, 'second'\n")):
        d = tmp_path / f"run{i}"
        d.mkdir()
        (d / "test_same_name.py").write_text(body)
        res = run_nodeid(str(d / "test_same_name.py") + "::test_same", ["-p", "no:cacheprovider", "-p", "no:labgrid",
                         "--import-mode=importlib", "--rootdir", str(d)], str(d), f"k{i}", False)
        outcomes.append([r["outcome"] for r in res["reports"] if r.get("when") == "call"])
    assert outcomes == [["passed"], ["failed"]]
    assert "test_same_name" not in sys.modules
