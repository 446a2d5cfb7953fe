"""Board health checks and quarantine (``harness/boards/health.py``, ``--nvdla-health-check``): a
pool of two emulated boards, one of which answers on its link but whose NVDLA computes nothing
(the emulator's plain register-file backend); the broken one fails the known-good layer at session
start, is quarantined in the lab's state file, and the regression runs on the other board, every
test passing there.

Oracle: the health layer is a bundled vector whose golden is an RTL run (``golden_source: rtl``)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest


from nvdla_hil.harness.boards.health import QUARANTINE_FILE, health_layer

pytestmark = pytest.mark.slow  # boards going bad mid-run, quarantine across sessions: `make test-slow`, CI's second step

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]


def _emu(backend: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.boards.emulator", "board-emu", "--tcp=0", "--backend",
                          backend], stdout=subprocess.PIPE, text=True)
    return p, p.stdout.readline().strip()  # type: ignore[union-attr]


def test_health_layer_is_an_oracle_vector():
    from nvdla_hil.drivers import yamlstrict

    layer = health_layer("nv_small")
    assert layer is not None
    doc = yamlstrict.load((layer / "case.yaml").read_text(), str(layer))
    assert doc["golden_source"]["kind"] == "rtl" and doc["profile"] == "nv_small" and doc["kind"] == "layer"


def test_broken_board_is_quarantined_and_the_pool_runs_on(tmp_path):
    sick, sick_url = _emu("regfile")
    good, good_url = _emu("model")
    try:
        board = "    baud: 3000000\n    profile: nv_small\n    reset_address: 0xf0000000\n"
        lab = tmp_path / "lab.yaml"
        lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  sick:\n    url: {sick_url}\n{board}"
                       f"  good:\n    url: {good_url}\n{board}pools:\n  p: [sick, good]\n")
        res = tmp_path / "results"
        r = subprocess.run([*CLI, "regress", "--target", "serial", "--lab", str(lab), "--board", "pool:p", "--suite",
                            "vectors", "-k", "cdp_lut", "--results-dir", str(res), "--", "--nvdla-health-check"],
                           capture_output=True, text=True, timeout=900, cwd=tmp_path)
        out = r.stdout + r.stderr
        assert r.returncode == 0, out[-4000:]
        assert "board sick QUARANTINED" in out and "board good: health check passed" in out, out[-4000:]
        record = json.loads((tmp_path / QUARANTINE_FILE).read_text())
        assert list(record) == ["sick"] and "known-good layer" in record["sick"]["reason"], record
        cases = list(ET.parse(res / "latest" / "junit.xml").getroot().iter("testcase"))
        ran = [c for c in cases if c.find("skipped") is None]
        # -k cdp_lut: the 16 bundled cdp_lut cases, every one run (none skipped) and passed
        assert len(cases) == 16 and len(ran) == 16, [c.get("name") for c in cases]
        assert all(c.find("failure") is None and c.find("error") is None for c in ran)
        boards = {p.get("value") for c in ran for p in c.iter("property") if p.get("name") == "board"}
        assert boards == {"good"}, boards
    finally:
        for p in (sick, good):
            p.kill()
            p.wait(10)


def _emu_args(*args: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.boards.emulator", "board-emu", "--tcp=0", *args],
                         stdout=subprocess.PIPE, text=True)
    return p, p.stdout.readline().strip()  # type: ignore[union-attr]


def _ran_on(res) -> dict[str, tuple[str, bool]]:  # noqa: ANN001
    """test name -> (board, passed) from a run's JUnit file."""
    out = {}
    for c in ET.parse(res / "latest" / "junit.xml").getroot().iter("testcase"):
        if c.find("skipped") is not None:
            continue
        board = next((p.get("value") for p in c.iter("property") if p.get("name") == "board"), None)
        out[c.get("name")] = (board, c.find("failure") is None and c.find("error") is None)
    return out


def test_board_that_goes_bad_mid_run_is_quarantined_and_later_sessions_skip_it(tmp_path):
    """A board that passes its session-start health check and then computes wrong (the emulator's
    CVT_OFFSET+1 fault switching on at its 4th reset: the health check's reset and two tests
    before it) fails tests until ``--nvdla-health-recheck`` (3) consecutive failures; its re-check
    of the known-good layer fails, it is quarantined mid-run, and every later test runs, and
    passes, on the pool's other board. The next session skips it from the start (exit 0, every test
    on the good board), and a session asking for it alone is refused (exit 2) naming the record."""
    flaky, flaky_url = _emu_args("--model-bug", "SDP.D_CVT_OFFSET.CVT_OFFSET+1", "--bug-after-resets", "3")
    good, good_url = _emu_args()
    try:
        board = "    baud: 3000000\n    profile: nv_small\n    reset_address: 0xf0000000\n"
        lab = tmp_path / "lab.yaml"
        lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  flaky:\n    url: {flaky_url}\n{board}"
                       f"  good:\n    url: {good_url}\n{board}pools:\n  p: [flaky, good]\n")

        def regress(board_arg: str, res) -> subprocess.CompletedProcess:  # noqa: ANN001
            return subprocess.run([*CLI, "regress", "--target", "serial", "--lab", str(lab), "--board", board_arg,
                                   "--suite", "vectors", "-k", "sdp_cvt", "--results-dir", str(res), "--",
                                   "--nvdla-health-check", "-p", "no:randomly"],
                                  capture_output=True, text=True, timeout=900, cwd=tmp_path)

        r = regress("pool:p", tmp_path / "r1")
        out = r.stdout + r.stderr
        assert r.returncode == 1, out[-4000:]  # the failures before the quarantine are reported, not hidden
        assert "board flaky: health check passed" in out, out[-4000:]
        assert "board flaky QUARANTINED mid-run after 3 consecutive failures" in out, out[-4000:]
        assert "may be the board's, not the design's: rerun on a healthy board" in out, out[-4000:]
        record = json.loads((tmp_path / QUARANTINE_FILE).read_text())
        assert list(record) == ["flaky"] and "health re-check after 3 consecutive failures" in record["flaky"]["reason"]
        ran = _ran_on(tmp_path / "r1")
        order = sorted(ran)
        bad = [n for n in order if not ran[n][1]]
        assert bad and all(ran[n][0] == "flaky" for n in bad), ran
        assert [ran[n] for n in order[:2]] == [("flaky", True)] * 2, ran  # the two tests before the fault
        # sdp_cvt-s1-003 passes on the faulty board (the fault misses it): the count of consecutive
        # failures starts again, so the quarantine comes only after 004, 005 and 006
        assert [n[-5:-1] for n in bad] == ["-002", "-004", "-005", "-006"], ran
        after = order[order.index(bad[-1]) + 1:]
        assert len(after) == 5 and all(ran[n] == ("good", True) for n in after), ran  # the pool ran on without it

        r = regress("pool:p", tmp_path / "r2")
        out = r.stdout + r.stderr
        assert r.returncode == 0, out[-4000:]
        assert "board 'flaky' is quarantined since" in out, out[-4000:]
        assert {b for b, ok in _ran_on(tmp_path / "r2").values()} == {"good"}

        r = regress("flaky", tmp_path / "r3")
        assert r.returncode == 2, (r.stdout + r.stderr)[-4000:]
        assert "board 'flaky' is quarantined since" in r.stdout + r.stderr
        assert f"delete its entry 'flaky' from {tmp_path / QUARANTINE_FILE}" in r.stdout + r.stderr
    finally:
        for p in (flaky, good):
            p.kill()
            p.wait(10)
