"""The nvdla-hil command line, run in-process (main(argv)) and once as the installed script."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
import subprocess
import xml.etree.ElementTree as ET

import pytest

from nvdla_hil.harness.cli import build_parser, main


def test_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("regress", "regs", "trace"):
        assert re.search(rf"^\s+{cmd}\s", out, re.M), out


@pytest.mark.parametrize("cmd", [["regress"], ["regs", "read"], ["regs", "write"], ["trace"], ["regs", "check"]])
def test_every_subcommand_has_help(cmd, capsys):
    with pytest.raises(SystemExit) as ei:
        main([*cmd, "--help"])
    assert ei.value.code == 0
    assert f"usage: nvdla-hil {' '.join(cmd)} [-h]" in capsys.readouterr().out


def test_regs_read_decodes_fields(capsys):
    assert main(["regs", "read", "SDP.D_DP_BS_CFG"]) == 0
    out = capsys.readouterr().out
    assert "SDP.D_DP_BS_CFG = 0x00000073" in out and "BS_BYPASS=YES" in out


def test_regs_unknown_register_is_exit_2_with_suggestion(capsys):
    assert main(["regs", "read", "CDP.D_LRN_CGF"]) == 2
    assert "did you mean CDP.D_LRN_CFG" in capsys.readouterr().err


def test_regs_write_fields_checks_range(capsys):
    assert main(["regs", "write", "SDP.D_CVT_SHIFT", "CVT_SHIFT=3"]) == 0
    assert "SDP.D_CVT_SHIFT <= 0x00000003" in capsys.readouterr().out
    assert main(["regs", "write", "SDP.D_CVT_SHIFT", "CVT_SHIFT=99"]) == 2
    assert "does not fit [5:0]" in capsys.readouterr().err


def test_regs_info_and_list(capsys):
    assert main(["regs", "info", "CDP.S_LUT_ACCESS_CFG"]) == 0
    out = capsys.readouterr().out
    assert "@ 0xd008" in out and "[17:17] LUT_ACCESS_TYPE" in out and "WRITE=1" in out
    assert main(["regs", "list", "GLB"]) == 0
    assert "GLB.S_INTR_STATUS" in capsys.readouterr().out


def test_trace_command_reports_checks(trace_root, capsys, tmp_path):
    log = tmp_path / "access.log"
    code = main(["trace", str(trace_root / "cdp_8x8x32_lrn3_int8_0"), "--poison", "--log", str(log)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PASSED" in out and "expected 0xf1e8ba9e got 0xf1e8ba9e ok" in out
    assert "CDP.D_OP_ENABLE" in log.read_text()


def test_trace_command_bad_trace_is_exit_2(tmp_path, capsys):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "bad.cfg").write_text("reg_write(NVDLA_SDP.D_CVT_SCALE_0, zz);\n")
    assert main(["trace", str(d)]) == 2
    assert "bad.cfg:1" in capsys.readouterr().err


def test_regress_writes_junit_and_summary(trace_root, tmp_path, capsys):
    junit = tmp_path / "junit.xml"
    code = main(["regress", "--suite", "traces", "--traces", str(trace_root), "--junit", str(junit),
                 "--results-dir", str(tmp_path / "results"), "-k", "cdp_8x8x32_lrn3_int8_0 or sdp_8x8x32_bypass_int8_0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "nvdla-hil regression on model" in out
    assert "summary: 2 passed, 0 failed, 0 error, 0 bad input, 0 infrastructure, 0 skipped: not modelled, 0 skipped: lacks unit" in out
    suite = ET.parse(junit).getroot()
    cases = suite.iter("testcase")
    assert sorted(c.get("name") for c in cases) == [
        "test_trace[cdp_8x8x32_lrn3_int8_0]", "test_trace[sdp_8x8x32_bypass_int8_0]"]


def test_installed_script_runs():
    beside = Path(sys.executable).parent / "nvdla-hil"  # the venv's scripts folder
    exe = str(beside) if beside.exists() else shutil.which("nvdla-hil")
    if exe is None:
        pytest.skip("nvdla-hil script not on PATH (package not installed)")
    r = subprocess.run([exe, "regs", "read", "GLB.S_NVDLA_HW_VERSION"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "0x00303031" in r.stdout


def test_parser_builds_without_optional_parts():
    assert build_parser().prog == "nvdla-hil"
