"""The exit-code contract (issue 26): 0 ran and passed, 1 a test failed, 2 bad input or
configuration (only the tool's own error types, and an OSError naming a path), 3 an internal
error with its traceback, 130 interrupted. Plus the rows of the issue that end in an exit code:
``regress`` with malformed inputs inside, trace addresses and register writes checked against
the profile, ``regs`` on units and fields the profile lacks, ``fuzz --target verilator``
without the ``sim`` extra."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nvdla_hil.drivers.errors import InputError, ResultsError, is_own_error
from nvdla_hil.harness.cli import profile as profile_cli
from nvdla_hil.harness.cli import EXIT_INTERNAL, EXIT_INTERRUPTED, exit_code_for, main

PY = sys.executable


# ---- the mapping ---------------------------------------------------------------------------------


def test_exit_code_for_each_kind_of_exception():
    from nvdla_hil.drivers.regmap import UnknownRegisterError
    from nvdla_hil.harness.boards.lab import BoardBusyError
    from nvdla_hil.harness.traces import TraceError

    assert exit_code_for(TraceError("t.cfg", 3, "bad")) == 2
    assert exit_code_for(UnknownRegisterError("x")) == 2  # defined in nvdla_hil: the tool's own
    assert exit_code_for(BoardBusyError("held")) == 2
    assert exit_code_for(ResultsError(errno.ENOSPC, "full", "/r/run.json")) == 2
    assert exit_code_for(FileNotFoundError(errno.ENOENT, "No such file", "/x.cfg")) == 2
    assert exit_code_for(KeyboardInterrupt()) == EXIT_INTERRUPTED == 130
    # a bare ValueError / KeyError / OSError without a path is a bug of ours, not bad input
    for exc in (ValueError("boom"), KeyError("k"), TypeError("t"), OSError("no path"), ZeroDivisionError()):
        assert exit_code_for(exc) == EXIT_INTERNAL == 3, exc
    assert is_own_error(InputError("x")) and not is_own_error(ValueError("x"))


@pytest.mark.parametrize(("exc", "code", "needle"), [
    (ValueError("boom"), 3, "internal error, please report"),
    (KeyError("oops"), 3, "internal error, please report"),
    (InputError("lab.yaml:3: baud: not a number"), 2, "lab.yaml:3: baud: not a number"),
    (PermissionError(errno.EACCES, "Permission denied", "/secret/x.cfg"), 2, "/secret/x.cfg: Permission denied"),
    (KeyboardInterrupt(), 130, "interrupted"),
])
def test_main_maps_what_a_command_raises(monkeypatch, capsys, exc, code, needle):
    def boom(args):  # noqa: ANN001, ANN202
        raise exc

    monkeypatch.setattr(profile_cli, "_cmd_profile", boom)
    assert main(["profile", "list"]) == code
    err = capsys.readouterr().err
    assert needle in err, err
    assert ("Traceback (most recent call last)" in err) == (code == 3), err


# ---- regs: units, features and fields the profile lacks --------------------------------------------


@pytest.mark.parametrize(("argv", "needle"), [
    (["regs", "read", "SDP.S_LUT_ACCESS_CFG", "--profile", "nv_small"], "nv_small has no SDP LUT (sdp_lut)"),
    (["regs", "write", "SDP.S_LUT_ACCESS_CFG", "0", "--profile", "nv_small"], "nv_small has no SDP LUT"),
    (["regs", "dump", "GEC", "--profile", "nv_small"], "nv_small has no GEC unit"),
    (["regs", "write", "SDP.D_CVT_SCALE", "CVT_SCALE=1", "CVT_SCALE=2"], "field CVT_SCALE given twice"),
    (["regs", "write", "SDP.D_CVT_SCALE", "twelve"], "'twelve' is not a number"),
    (["regs", "write", "SDP.S_STATUS", "1"], "SDP.S_STATUS is read-only"),
])
def test_regs_refuses_what_the_profile_lacks(capsys, argv, needle):
    assert main(argv) == 2
    out = capsys.readouterr()
    assert needle in out.err, out
    assert "Traceback" not in out.err


def test_regs_still_reads_and_writes_what_the_profile_has(capsys):
    assert main(["regs", "read", "SDP.S_LUT_ACCESS_CFG", "--profile", "nv_small_256_full"]) == 0
    assert main(["regs", "write", "SDP.D_CVT_SCALE", "CVT_SCALE=3"]) == 0
    assert "SDP.D_CVT_SCALE <= 0x00000003" in capsys.readouterr().out


# ---- traces: addresses and register writes against the profile ----------------------------------


def _trace(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "t"
    d.mkdir()
    (d / "t.cfg").write_text(body)
    return d


@pytest.mark.parametrize(("body", "line", "needle"), [
    ("mem_init(pri_mem, 0x10000000000, 0xf00, ALL_ZERO);\n", 1, "outside nv_small's 32-bit address space"),
    ("mem_init(pri_mem, 0xfffff000, 0x2000, ALL_ZERO);\n", 1, "outside nv_small's 32-bit address space"),
    ("", 3, "check_crc pri_mem[0x200000000+0x4] lies outside nv_small's 32-bit"),
    ("reg_write(NVDLA_SDP.S_STATUS_0, 0xdead0000);\n", 1, "SDP.S_STATUS is read-only and cannot hold 0xdead0000"),
])
def test_trace_out_of_the_profile_is_exit_2_naming_file_and_line(tmp_path, capsys, body, line, needle):
    crc_addr = "0x200000000" if not body else "0x80000000"
    tail = ("reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x3);\nintr_notify(SDP_0, sync_id_0);\n"
            f"check_crc(sync_id_0, 1, {crc_addr}, 0x4, 0x0);\n")
    d = _trace(tmp_path, body + tail)
    assert main(["trace", str(d), "--profile", "nv_small"]) == 2
    err = capsys.readouterr().err
    assert f"t.cfg:{line}: " in err and needle in err, err


def test_trace_writing_zero_to_a_status_register_is_accepted_as_nvdla_traces_do():
    """NVDLA's trace generator writes every register, status counters included, with the value it
    expects them to hold; such a write is not refused (only one the register cannot hold is)."""
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.traces import Trace, TraceCommand, check_against_profile

    cmds = [TraceCommand("reg_write", 1, ("NVDLA_SDP.S_STATUS_0", 0), ""),
            TraceCommand("reg_write", 2, ("NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0", 1), "")]
    check_against_profile(Trace("x", Path("x.cfg"), cmds), load_profile("nv_small"))


# ---- regress: malformed inputs inside a regression are "bad input", exit 2 ----------------------


def _vectors(tmp_path: Path) -> Path:
    from nvdla_hil.harness.vectors import bundled_root, find_cases

    src = next(p for p in find_cases(bundled_root()) if p.name == "sdp_cvt-s1-000")
    root = tmp_path / "vec"
    root.mkdir()
    for name, edit in (
        ("dup", lambda t: t + "unit: SDP\n"),
        ("bigint", lambda t: t.replace("name: sdp_cvt-s1-000", "name: sdp_cvt-s1-000\nseed_x: " + "9" * 5000, 1)),
        ("nul", lambda t: t.replace("data: src.bin", 'data: "src\\0.bin"', 1)),
    ):
        shutil.copytree(src, root / name)
        m = root / name / "case.yaml"
        new = edit(m.read_text(encoding="utf-8"))
        assert new != m.read_text(encoding="utf-8"), name
        m.write_text(new, encoding="utf-8")
    return root


def test_regress_with_malformed_vectors_is_bad_input_exit_2(tmp_path, capsys):
    root = _vectors(tmp_path)
    code = main(["regress", "--suite", "vectors", "--vectors", str(root), "--results-dir", str(tmp_path / "r"),
                 "--results-db", str(tmp_path / "db.sqlite")])
    out = capsys.readouterr()
    assert code == 2, out
    assert "3 bad input" in out.out, out.out
    for name, needle in (("dup", "duplicate key 'unit'"), ("bigint", "a number 5000 characters long"),
                         ("nul", "a NUL character")):
        assert f"{name}/case.yaml: line " in out.out and needle in out.out, (name, out.out)
    assert "Traceback" not in out.out + out.err and "\nE " not in out.out
    assert "malformed" in out.err


def test_regress_with_malformed_trace_files_is_bad_input_exit_2_and_a_real_failure_1(tmp_path, capsys):
    traces = tmp_path / "traces"
    for name, cfg, dat in (
        ("badcfg", "mem_init(pri_mem, 0x80000000);\n", None),
        ("baddat", 'mem_load(pri_mem, 0x80000000, "in.dat");\nintr_notify(SDP_0, s);\ncheck_crc(s, 1, 0x80000000, 0x4, 0x0);\n',
         "{offset:0x0, size:4, payload:0x01 0x02 0x03}\n"),
    ):
        (traces / name).mkdir(parents=True)
        (traces / name / f"{name}.cfg").write_text(cfg)
        if dat is not None:
            (traces / name / "in.dat").write_text(dat)
    code = main(["regress", "--suite", "traces", "--traces", str(traces), "--results-dir", str(tmp_path / "r"),
                 "--results-db", str(tmp_path / "db.sqlite")])
    out = capsys.readouterr()
    assert code == 2, out
    assert "2 bad input" in out.out and "badcfg.cfg:1: " in out.out and "in.dat" in out.out, out.out
    assert "Traceback" not in out.out + out.err
    # a check that fails beside them: a real failure, exit 1 (NVDLA's own sdp_1x1x1_pass_through_int8
    # trace with its CRC changed)
    root = os.environ.get("NVDLA_TRACES")
    src = Path(root) / "sdp_1x1x1_pass_through_int8" if root else None
    if src is None or not src.is_dir():
        pytest.skip("NVDLA trace tests not found (NVDLA_TRACES): the real-failure half needs one")
    shutil.copytree(src, traces / "wrong")
    cfg = next((traces / "wrong").glob("*.cfg"))
    text = cfg.read_text()
    i = text.rindex("check_crc(")
    j = text.index(")", i)
    head, _, crc = text[i:j].rpartition(",")
    cfg.write_text(text[:i] + head + f", {int(crc.strip(), 16) ^ 1:#010x}" + text[j:])
    code = main(["regress", "--suite", "traces", "--traces", str(traces), "--results-dir", str(tmp_path / "r"),
                 "--results-db", str(tmp_path / "db.sqlite")])
    out = capsys.readouterr()
    assert code == 1, out
    assert "1 failed" in out.out and "2 bad input" in out.out, out.out


# ---- fuzz without the sim extra -------------------------------------------------------------------


def test_fuzz_verilator_without_the_sim_extra_names_the_real_reason(tmp_path):
    hw = os.environ.get("NVDLA_HW") or str(Path.home() / "nvdla-hw")
    code = ("import sys\n"
            "for m in ('cocotb', 'cocotb_tools', 'cocotb_tools.config', 'cocotb_tools.runner'): sys.modules[m] = None\n"
            "from nvdla_hil.harness.cli import main\n"
            f"sys.exit(main(['fuzz', '--unit', 'sdp-cvt', '--target', 'verilator', '--nvdla-hw', {hw!r}, "
            "'--profile', 'nv_small', '--count', '1']))\n")
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the verilator target could not be opened" in r.stderr, r.stderr
    assert "not a coverage file" not in r.stdout + r.stderr
    assert "Traceback" not in r.stderr
