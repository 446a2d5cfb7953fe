"""The serial target's session start: every held board is probed before any test runs, so a
lab window the board does not map, or a board that does not answer, ends the regression at
once with a configuration error (exit 2) naming the board, instead of failing test after test."""

from __future__ import annotations

import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.boards.emulator import serve_in_thread
from nvdla_hil.harness.targets.model import ModelTarget

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]


def _regress(tmp: Path, lab: Path, board: str = "arty") -> tuple[subprocess.CompletedProcess, Path]:
    res = tmp / "results"
    proc = subprocess.run([*CLI, "regress", "--target", "serial", "--lab", str(lab), "--board", board,
                           "--suite", "vectors", "-k", "cdp_lut", "--results-dir", str(res)],
                          capture_output=True, text=True, timeout=300, cwd=tmp)
    return proc, res / "latest" / "junit.xml"


def _testcases(junit: Path) -> list[str]:
    if not junit.exists():
        return []
    return [c.get("name", "") for c in ET.parse(junit).getroot().iter("testcase")]


@pytest.mark.slow  # waits out the bus timeouts of a whole window: `make test-slow`
def test_window_the_board_does_not_map_stops_the_run_before_any_test(tmp_path):
    with serve_in_thread(ModelTarget("nv_small"), BoardMap(dram_size=0x1000_0000), mode="tcp") as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  arty:\n    url: {emu.url}\n    baud: 3000000\n")
        proc, junit = _regress(tmp_path, lab)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, out[-3000:]
        assert "0x80000000..0xbfffffff" in out and "0x80000000..~0x8fffffff" in out, out[-3000:]
        assert "'arty'" in out
        assert _testcases(junit) == []  # nothing ran on a board with the wrong window
        # the same lab with the window the board maps runs the tests (the probe is not in the way)
        lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  arty:\n    url: {emu.url}\n    baud: 3000000\n"
                       f"    dram_size: 0x10000000\n    reset_address: 0xf0000000\n")
        proc, junit = _regress(tmp_path, lab)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        cases = list(ET.parse(junit).getroot().iter("testcase"))  # -k cdp_lut: its 16 cases, all run and passed
        assert len(cases) == 16 and not any(c.find(k) is not None for c in cases for k in ("skipped", "failure", "error"))


def test_board_that_does_not_answer_stops_the_run_naming_it(tmp_path):
    with socket.socket() as s:  # a TCP port nobody listens on: the board's link cannot be opened
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lab = tmp_path / "lab.yaml"
    lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  arty:\n    url: socket://127.0.0.1:{port}\n    baud: 3000000\n")
    proc, junit = _regress(tmp_path, lab)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert f"board 'arty' (socket://127.0.0.1:{port}) does not answer" in out, out[-3000:]
    assert _testcases(junit) == []
