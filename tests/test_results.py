"""Results are never lost: each regression has its own run directory (junit, summary, per-test
register-access logs, run record) and ``latest`` points at the newest; two regressions at once
keep both; commands refuse to overwrite results or their own input; a board is held by one
regression for its whole session (all xdist workers), and a second one is refused at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.harness.cli import main

PY = sys.executable
CLI = [PY, "-m", "nvdla_hil.harness.cli"]
ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_LAB", "NVDLA_HIL_BOARD",
            "NVDLA_HIL_TARGET", "NVDLA_HIL_CONFIG", "NVDLA_HIL_RESULTS")
TWO = "cdp_8x8x32_lrn3_int8_0 or sdp_8x8x32_bypass_int8_0 or sdp_cvt-s1-000"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    env.update(extra)
    return env


def _runs(results: Path) -> list[Path]:
    return sorted(p for p in results.iterdir() if p.is_dir() and not p.is_symlink())


def _junit_names(path: Path) -> list[str]:
    return sorted(c.get("name") for c in ET.parse(path).getroot().iter("testcase"))


def test_each_regress_has_its_own_run_directory(trace_root, tmp_path, capsys):
    results = tmp_path / "results"
    args = ["regress", "--traces", str(trace_root), "--results-dir", str(results), "-k", TWO]
    assert main(args) == 0, capsys.readouterr()
    first_out = capsys.readouterr().out
    assert main(args) == 0
    capsys.readouterr()
    runs = _runs(results)
    assert len(runs) == 2 and runs[0] != runs[1]
    latest = results / "latest"
    assert latest.is_symlink() and latest.resolve() == runs[1].resolve()
    for run in runs:
        assert _junit_names(run / "junit.xml") == [
            "test_trace[cdp_8x8x32_lrn3_int8_0]", "test_trace[sdp_8x8x32_bypass_int8_0]",
            "test_vector[sdp_cvt/sdp_cvt-s1-000]"]
        summary = (run / "summary.txt").read_text()
        assert "nvdla-hil regression on model" in summary and "summary: 3 passed, 0 failed" in summary
        assert "test_trace[cdp_8x8x32_lrn3_int8_0]" in summary
        record = json.loads((run / "run.json").read_text())
        assert record["exit_code"] == 0 and record["command"][:2] == ["nvdla-hil", "regress"]
    assert f"results: {runs[0]}" in first_out
    assert "summary: 3 passed" in first_out  # the same table as summary.txt


def test_shipped_suites_write_register_access_logs(trace_root, tmp_path, capsys):
    results = tmp_path / "results"
    assert main(["regress", "--traces", str(trace_root), "--results-dir", str(results), "-k", TWO]) == 0
    capsys.readouterr()
    logs = sorted((results / "latest" / "logs").iterdir())
    names = [p.name for p in logs]
    assert len(logs) == 3, names
    trace_log = next(p for p in logs if "cdp_8x8x32_lrn3_int8_0" in p.name).read_text()
    assert "CDP.D_OP_ENABLE" in trace_log and "GLB.S_INTR_STATUS" in trace_log
    vec_log = next(p for p in logs if "sdp_cvt-s1-000" in p.name).read_text()
    assert "SDP.D_OP_ENABLE" in vec_log


def test_explicit_log_dir_gets_the_logs(trace_root, tmp_path, capsys):
    logs = tmp_path / "mylogs"
    assert main(["regress", "--suite", "traces", "--traces", str(trace_root), "--results-dir", str(tmp_path / "r"),
                 "--log-dir", str(logs), "-k", "cdp_8x8x32_lrn3_int8_0"]) == 0
    assert [p.name for p in logs.iterdir()] and "CDP.D_OP_ENABLE" in next(logs.iterdir()).read_text()
    # a second run into the same, now non-empty, folder would overwrite: refused
    assert main(["regress", "--suite", "traces", "--traces", str(trace_root), "--results-dir", str(tmp_path / "r"),
                 "--log-dir", str(logs), "-k", "cdp_8x8x32_lrn3_int8_0"]) == 2
    assert f"--log-dir {logs}: the folder is not empty" in capsys.readouterr().err


def test_two_concurrent_regressions_keep_both_results(trace_root, tmp_path):
    results = tmp_path / "results"
    cmd = [*CLI, "regress", "--traces", str(trace_root), "--results-dir", str(results), "-k", TWO]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=tmp_path)
             for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    runs = _runs(results)
    assert len(runs) == 2
    for run in runs:
        assert len(_junit_names(run / "junit.xml")) == 3
        assert "3 passed" in (run / "summary.txt").read_text()
        assert len(list((run / "logs").iterdir())) == 3
    assert (results / "latest").resolve() in {r.resolve() for r in runs}
    assert not [p for p in results.iterdir() if p.name.startswith(".latest-")]  # no temporary link left


def test_explicit_junit_refuses_to_overwrite(trace_root, tmp_path, capsys):
    junit = tmp_path / "out" / "junit.xml"
    junit.parent.mkdir()
    junit.write_text("precious")
    args = ["regress", "--suite", "traces", "--traces", str(trace_root), "--results-dir", str(tmp_path / "r"),
            "--junit", str(junit), "-k", "cdp_8x8x32_lrn3_int8_0"]
    assert main(args) == 2
    assert f"--junit {junit}: the file exists; pass --force" in capsys.readouterr().err
    assert junit.read_text() == "precious"
    assert main([*args, "--force"]) == 0
    assert _junit_names(junit) == ["test_trace[cdp_8x8x32_lrn3_int8_0]"]
    assert _junit_names(tmp_path / "r" / "latest" / "junit.xml") == ["test_trace[cdp_8x8x32_lrn3_int8_0]"]


def test_trace_log_refuses_to_overwrite(trace_root, tmp_path, capsys):
    trace = trace_root / "cdp_8x8x32_lrn3_int8_0"
    log = tmp_path / "access.log"
    log.write_text("keep me")
    assert main(["trace", str(trace), "--log", str(log)]) == 2
    assert f"--log {log}: the file exists; pass --force" in capsys.readouterr().err
    assert log.read_text() == "keep me"
    assert main(["trace", str(trace), "--log", str(log), "--force"]) == 0
    assert "CDP.D_OP_ENABLE" in log.read_text()


def test_trace_log_refuses_the_traces_own_files(tmp_path, capsys, trace_root):
    import shutil

    trace = tmp_path / "t"
    shutil.copytree(trace_root / "cdp_8x8x32_lrn3_int8_0", trace)
    cfg = next(trace.glob("*.cfg"))
    data = trace / "CDP_0_input.dat"
    before = {p.name: p.read_bytes() for p in trace.iterdir()}
    for target in (cfg, data):
        assert main(["trace", str(trace), "--log", str(target), "--force"]) == 2
        assert "the trace's own file" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in trace.iterdir()} == before


def test_pack_and_unpack_refuse_to_overwrite(tmp_path, capsys):
    a = tmp_path / "a.npy"
    arr = np.arange(8 * 2 * 2, dtype=np.int8).reshape(8, 2, 2)
    np.save(a, arr)
    raw = a.read_bytes()
    assert main(["pack", "--layout", "nvdla.feature", str(a), str(a)]) == 2
    assert "is the input" in capsys.readouterr().err and a.read_bytes() == raw
    assert main(["pack", "--layout", "nvdla.feature", str(a), str(a), "--force"]) == 2  # never the input
    assert a.read_bytes() == raw
    out = tmp_path / "a.bin"
    out.write_bytes(b"old")
    assert main(["pack", "--layout", "nvdla.feature", str(a), str(out)]) == 2
    assert f"output {out} exists; pass --force" in capsys.readouterr().err and out.read_bytes() == b"old"
    assert main(["pack", "--layout", "nvdla.feature", str(a), str(out), "--force"]) == 0
    packed = out.read_bytes()
    assert packed != b"old"
    assert main(["unpack", "--layout", "nvdla.feature", "--shape", "8,2,2", str(out), str(out)]) == 2
    assert out.read_bytes() == packed
    assert main(["unpack", "--layout", "nvdla.feature", "--shape", "8,2,2", str(out), str(a)]) == 2
    assert a.read_bytes() == raw
    back = tmp_path / "back.npy"
    assert main(["unpack", "--layout", "nvdla.feature", "--shape", "8,2,2", str(out), str(back)]) == 0
    assert np.array_equal(np.load(back), arr)


def test_vectors_gen_refuses_existing_case(tmp_path, capsys):
    out = tmp_path / "vec"
    assert main(["vectors", "gen", "sdp_cvt", "--seed", "3", "--count", "1", "--out", str(out)]) == 0
    case = next(out.iterdir())
    manifest = (case / "case.yaml").read_bytes()
    (case / "note.txt").write_text("mine")
    capsys.readouterr()
    assert main(["vectors", "gen", "sdp_cvt", "--seed", "3", "--count", "1", "--out", str(out)]) == 2
    assert f"case {case} exists; pass --force" in capsys.readouterr().err
    assert (case / "note.txt").exists()
    assert main(["vectors", "gen", "--from-manifest", str(case / "case.yaml"), "--out", str(out), "--force"]) == 2
    assert "over the case it regenerates from" in capsys.readouterr().err
    assert main(["vectors", "gen", "sdp_cvt", "--seed", "3", "--count", "1", "--out", str(out), "--force"]) == 0
    assert (case / "case.yaml").read_bytes() == manifest and not (case / "note.txt").exists()


# ---- one regression holds the board for its whole session ------------------------------------------------

LAB = """\
lock_dir: {lock}
boards:
  {name}:
    url: {url}
    baud: 3000000
    profile: nv_small
    dram_size: 0x40000000
    integrity: verify
    reset_address: 0xf0000000
    response_timeout: 10
"""
SERIAL_TRACES = "cdp_8x8x64_lrn3_int8_5 or sdp_3x3x33_bn_int8_mem_0 or pdp_8x9x19_3x3_ave_int8_1 or dc_1x1x8_1x1x8x1_int8_0"


@pytest.fixture
def board_emu():
    proc = subprocess.Popen([*CLI, "board-emu", "--tcp", "0", "--dram-size", "0x40000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("socket://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else url
        yield url
    finally:
        proc.kill()
        proc.wait()


def _wait_for_holder(lock_dir: Path, pid: int, proc: subprocess.Popen, timeout: float = 600) -> Path:
    """The lock file naming ``pid`` as holder, once it does; fails at once if ``proc`` ends first.
    ``timeout`` is a hang guard (the run's own, as in ``communicate`` below), not an expected time:
    the wait ends on the event, or on the process's death."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in lock_dir.glob("nvdla-hil-socket*.lock"):
            try:
                if json.loads(p.read_text() or "{}").get("pid") == pid:
                    return p
            except ValueError:
                pass
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.05)
    raise AssertionError("the first regression never took the board")


@pytest.mark.slow  # two regressions on one emulated board: `make test-slow`
def test_second_regression_on_a_held_board_is_refused(board_emu, tmp_path, trace_root):
    """Run A (two xdist workers) holds the board as 'emu-a' on socket://localhost:PORT; run B names
    it 'emu-b' on socket://127.0.0.1:PORT: the same board, so B exits 2 at once naming A; A passes.

    "At once, while A holds the board" is an ordering, not a time: A's controller (the lock's
    holder) is stopped (SIGSTOP) from the moment it holds the board until B and a direct register
    read have been refused, so A cannot finish, nor release the board, however slowly B starts on
    a loaded machine. A B that waited for the board instead of refusing would never get it (it
    would hang until its subprocess timeout; one that waited a while first says "(waited N s)")."""
    port = board_emu.rsplit(":", 1)[1]
    lab_a, lab_b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    lab_a.write_text(LAB.format(lock=tmp_path, name="emu-a", url=f"socket://localhost:{port}"))
    lab_b.write_text(LAB.format(lock=tmp_path, name="emu-b", url=f"socket://127.0.0.1:{port}"))

    def regress(lab: Path, name: str, *extra: str) -> list[str]:
        return [*CLI, "regress", "--target", "serial", "--lab", str(lab), "--board", name, "--suite", "traces",
                "--traces", str(trace_root), "--results-dir", str(tmp_path / f"results-{name}"), *extra]

    a = subprocess.Popen(regress(lab_a, "emu-a", "-j", "2", "-k", SERIAL_TRACES), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=_env())
    try:
        lock = _wait_for_holder(tmp_path, a.pid, a)
        os.kill(a.pid, signal.SIGSTOP)  # A holds the board and cannot let it go until SIGCONT below
        try:
            holder = json.loads(lock.read_text())
            assert holder["board"] == "emu-a" and holder["endpoint"] == f"socket://127.0.0.1:{port}"
            b = subprocess.run(regress(lab_b, "emu-b", "-k", SERIAL_TRACES), capture_output=True, text=True,
                               env=_env(), timeout=600)  # a hang guard only: a B that waited for A hangs here
            assert b.returncode == 2, b.stdout + b.stderr
            assert f"board 'emu-b' busy, held by PID {a.pid} on " in b.stderr and " since " in b.stderr
            assert "as board 'emu-a'" in b.stderr
            assert "(waited" not in b.stderr  # refused at once, without waiting for the board
            assert a.poll() is None  # A is alive (stopped) and still holds the board: B was refused meanwhile
            # a direct register read is refused as well, while A still holds the board
            r = subprocess.run([*CLI, "regs", "read", "--target", "serial", "--lab", str(lab_b), "--board", "emu-b",
                                "GLB.S_NVDLA_HW_VERSION"], capture_output=True, text=True, env=_env(), timeout=600)
            assert r.returncode == 2 and f"held by PID {a.pid}" in r.stderr, r.stderr
            assert json.loads(lock.read_text())["pid"] == a.pid  # nothing took the board from A
        finally:
            os.kill(a.pid, signal.SIGCONT)
        out = a.communicate(timeout=600)[0]
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert a.returncode == 0, out
    assert "summary: 4 passed, 0 failed, 0 error" in out
    assert len(list((tmp_path / "results-emu-a" / "latest" / "logs").iterdir())) == 4
    assert not lock.read_text()  # released at the end of A's session
    # with A gone, B runs
    b = subprocess.run(regress(lab_b, "emu-b", "-k", "cdp_8x8x64_lrn3_int8_5"), capture_output=True, text=True,
                       env=_env(), timeout=300)
    assert b.returncode == 0, b.stdout + b.stderr


def test_session_lock_is_keyed_by_name_and_by_endpoint(tmp_path):
    from nvdla_hil.harness.boards.lab import BoardBusyError, SessionBoardLock, load_lab

    dev = tmp_path / "ttyUSB3"
    dev.write_text("")
    (tmp_path / "by-id").symlink_to(dev)
    body = "lock_dir: {d}\nboards:\n  {n}:\n    url: {u}\n"
    labs = {}
    for key, name, url in (("a", "arty", "socket://127.0.0.1:7001"), ("same-name", "arty", "socket://127.0.0.1:7002"),
                           ("dev", "zcu", str(dev)), ("alias", "other", str(tmp_path / "by-id")),
                           ("free", "free", "socket://127.0.0.1:7003")):
        p = tmp_path / f"{key}.yaml"
        p.write_text(body.format(d=tmp_path, n=name, u=url))
        lab = load_lab(p)
        labs[key] = (lab, lab.board(name))
    held = [SessionBoardLock(*labs["a"]), SessionBoardLock(*labs["dev"])]
    for lk in held:
        lk.acquire()
    try:
        with pytest.raises(BoardBusyError, match=rf"board 'arty' busy, held by PID {os.getpid()} on "):
            SessionBoardLock(*labs["same-name"]).acquire()  # same lab name, other URL
        with pytest.raises(BoardBusyError, match=r"board 'other' busy, .*as board 'zcu'"):
            SessionBoardLock(*labs["alias"]).acquire()  # a by-id link to the held device
        free = SessionBoardLock(*labs["free"])
        free.acquire()  # a different board is not blocked
        free.release()
    finally:
        for lk in held:
            lk.release()
    again = SessionBoardLock(*labs["same-name"])
    again.acquire()
    again.release()
