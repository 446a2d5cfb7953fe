"""Run directories that survive (issue 26): ``junit.xml``, ``run.json`` and ``summary.txt`` are
written whole or not at all; ``run.json`` says "running" from the start, so a SIGKILLed run
reads as interrupted; Ctrl-C is exit 130 and recorded; a full or read-only results disk is
named with its path (a small tmpfs, mounted when the tests run as root; skipped otherwise)."""

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

from _signals import with_default_signals
from nvdla_hil.drivers.errors import ResultsError, write_atomic
from nvdla_hil.harness.cli import main, run_state

PY = sys.executable


def test_write_atomic_replaces_whole_or_leaves_the_old_file(tmp_path):
    p = tmp_path / "run.json"
    write_atomic(p, "old\n")
    write_atomic(p, b"new\n")
    assert p.read_text() == "new\n"
    mask = os.umask(0o022)
    os.umask(mask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~mask  # as open() makes files, not mkstemp's 0600
    with pytest.raises(ResultsError) as ei:
        write_atomic(tmp_path / "missing" / "x.json", "x")
    assert str(tmp_path / "missing" / "x.json") in str(ei.value)
    assert sorted(q.name for q in tmp_path.iterdir()) == ["run.json"]  # no temporary left behind


def test_run_json_says_finished_and_junit_is_whole(tmp_path, capsys):
    code = main(["regress", "--suite", "vectors", "-k", "sdp_cvt-s1-000", "--results-dir", str(tmp_path / "r"),
                 "--results-db", str(tmp_path / "db.sqlite")])
    assert code == 0, capsys.readouterr()
    run = (tmp_path / "r" / "latest").resolve()
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "finished" and meta["exit_code"] == 0 and meta["pid"] == os.getpid()
    assert run_state(run) == "finished"
    assert (run / "junit.xml").read_text().rstrip().endswith("</testsuites>")
    assert not list(run.glob(".*.part")) and not list(run.glob("*.part"))


def _start(tmp_path: Path, ignore: tuple[signal.Signals, ...] = ()) -> tuple[subprocess.Popen, Path]:
    """A regression of every bundled vector in a child process; returns once its run.json exists."""
    res = tmp_path / "r"
    p = subprocess.Popen(with_default_signals([PY, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "vectors",
                                               "--results-dir", str(res), "--results-db", str(tmp_path / "db.sqlite")],
                                              ignore=ignore),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = [d for d in res.glob("2*") if (d / "run.json").is_file() and (d / "logs").is_dir()
                and any((d / "logs").iterdir())]
        if runs:
            return p, runs[0]
        if p.poll() is not None:
            break
        time.sleep(0.1)
    p.kill()
    out, err = p.communicate()
    pytest.fail(f"the regression did not start a test: {out[-2000:]} {err[-2000:]}")


def test_a_killed_run_reads_as_interrupted(tmp_path):
    p, run = _start(tmp_path)
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "running" and meta["pid"] == p.pid
    assert run_state(run) == "running"
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert json.loads((run / "run.json").read_text())["status"] == "running"  # whole, never truncated
    assert run_state(run) == "interrupted"
    assert not (run / "junit.xml").exists()  # never a truncated one


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_are_exit_130_and_recorded(tmp_path, sig):
    p, run = _start(tmp_path)
    p.send_signal(sig)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130, out[-3000:] + err[-3000:]
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["exit_code"] == 130
    assert run_state(run) == "interrupted"
    assert "interrupted" in err


@pytest.mark.slow  # the whole bundled suite runs to its end
def test_a_nohup_run_keeps_running_through_a_hang_up(tmp_path):
    """``nohup nvdla-hil regress ... &`` asks for hang-ups to be ignored: the run must not install
    its SIGHUP-as-Ctrl-C handler over that (a SIGHUP'd run without nohup stops, tests above)."""
    p, run = _start(tmp_path, ignore=(signal.SIGHUP,))  # as nohup starts it
    assert p.poll() is None  # still running: the hang-up lands mid-run
    p.send_signal(signal.SIGHUP)
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, out[-3000:] + err[-3000:]
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "finished" and meta["exit_code"] == 0
    done = re.search(r"summary: (\d+) passed, 0 failed", out)
    assert done and int(done.group(1)) > 100, out[-3000:]  # every bundled vector, not a run cut short


def _mount(where: Path, *opts: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(opts), "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path):
    where = tmp_path / "disk"
    _mount(where, "size=48k")  # 12 pages: a run of 12 layers (a log each, the reports) needs more
    yield where
    subprocess.run(["umount", str(where)], check=False)


@pytest.fixture
def read_only_disk(tmp_path):
    where = tmp_path / "ro"
    _mount(where, "size=1m", "ro")
    yield where
    subprocess.run(["umount", str(where)], check=False)


def test_full_results_disk_is_named_with_its_path_and_nothing_is_truncated(small_disk, tmp_path, capsys):
    code = main(["regress", "--suite", "vectors", "-k", "sdp_cvt", "--results-dir", str(small_disk / "r"),
                 "--results-db", str(tmp_path / "db.sqlite")])
    out = capsys.readouterr()
    assert code == 2, out
    assert "results not written" in out.err and str(small_disk / "r") in out.err and "No space left" in out.err
    assert "Traceback" not in out.err
    for run in (small_disk / "r").glob("2*"):
        for name in ("junit.xml", "run.json", "summary.txt", "report.html"):
            f = run / name
            assert not f.exists() or f.stat().st_size > 0, f  # absent, or whole
        if (run / "run.json").exists():
            json.loads((run / "run.json").read_text())
        if (run / "junit.xml").exists():
            assert (run / "junit.xml").read_text().rstrip().endswith("</testsuites>")


def test_read_only_results_disk_is_exit_2_naming_it(read_only_disk, tmp_path, capsys):
    code = main(["regress", "--suite", "vectors", "-k", "sdp_cvt-s1-000", "--results-dir", str(read_only_disk / "r"),
                 "--results-db", str(tmp_path / "db.sqlite")])
    err = capsys.readouterr().err
    assert code == 2
    assert str(read_only_disk / "r") in err and "Read-only file system" in err, err
    assert "Traceback" not in err
