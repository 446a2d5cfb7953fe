"""Board health checks and quarantine (``harness/boards_health.py``, ``--nvdla-health-check``): a
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

from nvdla_hil.harness.boards_health import QUARANTINE_FILE, health_layer

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]


def _emu(backend: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.board_emu", "board-emu", "--tcp=0", "--backend",
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
        assert len(ran) >= 2 and all(c.find("failure") is None and c.find("error") is None for c in ran)
        boards = {p.get("value") for c in ran for p in c.iter("property") if p.get("name") == "board"}
        assert boards == {"good"}, boards
    finally:
        for p in (sick, good):
            p.kill()
            p.wait(10)
