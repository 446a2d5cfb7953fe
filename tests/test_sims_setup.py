"""``nvdla-hil sim setup`` on synthetic folders (fast; no nvdla/hw checkout, no simulator).

Fake tools on a private PATH stand in for cpp/perl/java/python3, and a fake ``tools/bin/tmake``
"generates" ``outdir/<cfg>/vmod`` from ``vmod/`` the way NVDLA's flow does (one file copied with
its width parameter substituted), so every step of setup is exercised, including the known
CSC ``wire``/``assign`` fix in the vmod/ source and the generated copy.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from nvdla_hil.sims import setup as simsetup


def _exe(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_bin(tmp_path: Path, *, perl_modules=("YAML", "Capture::Tiny", "XML::Simple"), java=True,
              python_major=3, cpp=True) -> str:
    b = tmp_path / "fakebin"
    b.mkdir(parents=True, exist_ok=True)
    if cpp:
        _exe(b / "cpp", "exit 0")
    cases = "".join(f'  -M{m}) exit 0;;\n' for m in perl_modules)
    _exe(b / "perl", f'case "$1" in\n{cases}  -M*) echo "Can\'t locate ${{1#-M}}.pm in @INC" >&2; exit 2;;\nesac\nexit 0')
    if java:
        _exe(b / "java", 'echo \'openjdk version "17.0.0"\' >&2; exit 0')
    _exe(b / "python3", f'echo {python_major}')
    _exe(b / "python2", "echo 2")
    return str(b)


# ------------------------------------------------------------------ prerequisites
def test_prerequisites_all_present(tmp_path: Path) -> None:
    res = simsetup.check_prerequisites(_fake_bin(tmp_path))
    assert all(p.ok for p in res), [p for p in res if not p.ok]
    assert sorted(p.name for p in res) == ["cpp", "java", "perl", "perl module Capture::Tiny", "perl module XML::Simple",
                                           "perl module YAML", "python3"]


def test_prerequisites_name_the_debian_packages_of_what_is_missing(tmp_path: Path) -> None:
    res = simsetup.check_prerequisites(_fake_bin(tmp_path, perl_modules=("YAML",), java=False))
    missing = [p for p in res if not p.ok]
    assert {p.name for p in missing} == {"perl module Capture::Tiny", "perl module XML::Simple", "java"}
    assert simsetup.install_hint(missing) == \
        "sudo apt-get install libcapture-tiny-perl libxml-simple-perl default-jre-headless"
    assert "cannot load Capture::Tiny" in next(p.detail for p in missing if "Capture" in p.name)


def test_prerequisites_on_an_empty_path(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    res = simsetup.check_prerequisites(str(tmp_path / "empty"))
    assert not any(p.ok for p in res)
    hint = simsetup.install_hint([p for p in res if not p.ok])
    for pkg in ("cpp", "perl", "libyaml-perl", "libcapture-tiny-perl", "libxml-simple-perl",
                "default-jre-headless", "python3"):
        assert pkg in hint.split()


# ------------------------------------------------------------------ tree.make
def test_tree_make_round_trip_and_valid(tmp_path: Path) -> None:
    path = _fake_bin(tmp_path)
    tools = simsetup.tool_paths(path)
    assert tools["CPP"] == f"{path}/cpp" and tools["PYTHON"] == f"{path}/python3"
    text = simsetup.render_tree_make(tools, ["nv_small"])
    values = simsetup.parse_tree_make(text)
    assert values["PROJECTS"] == "nv_small" and values["USE_DESIGNWARE"] == "0"
    assert values["JAVA"] == f"{path}/java"
    (tmp_path / "tree.make").write_text(text)
    assert simsetup.validate_tree_make(tmp_path / "tree.make", path=path) == []


def test_tree_make_problems_are_named_with_the_line_to_write(tmp_path: Path) -> None:
    path = _fake_bin(tmp_path)
    tm = tmp_path / "tree.make"
    tm.write_text("PROJECTS := nv_small\nUSE_DESIGNWARE := 1\nDESIGNWARE_DIR := /nonexistent\n"
                  "CPP      := /home/utils/gcc-4.8.2/bin/cpp   # NVDLA's default\n"
                  f"PERL := perl\nPYTHON := {path}/python2\nGCC := /nope/gcc\n")
    problems = simsetup.validate_tree_make(tm, path=path)
    text = "\n".join(problems)
    assert f"CPP := /home/utils/gcc-4.8.2/bin/cpp does not exist or is not executable; set `CPP := {path}/cpp`" in text
    assert f"JAVA is not set; add `JAVA := {path}/java`" in text
    assert "is not a Python 3" in text and f"`PYTHON := {path}/python3`" in text
    assert "GCC" not in text          # the vmod flow does not run gcc
    assert "set `USE_DESIGNWARE := 0`" in text
    assert not any(p.startswith("PERL") for p in problems)   # a name on PATH is fine


# ------------------------------------------------------------------ the whole command
_SRC = ("module NV_NVDLA_CSC_dl (x);\noutput [WIDTH -1:0] sc2buf_dat_rd_shift;\n`define NO_JUMP\n"
        "`ifdef NO_JUMP\nwire sc2buf_dat_rd_shift = {WIDTH{1'b0}};\n`endif\nendmodule\n")

# a stand-in for NVDLA's tmake: needs tree.make, "generates" outdir/<cfg>/vmod from vmod/
_TMAKE = r'''
test -e tree.make || { echo "[TMAKE]: tree.make does not exist, please run make to generate a tree.make first"; exit 0; }
cfg=$4
test -n "$TMAKE_BUILDS_NOTHING" && { echo "[TMAKE]: $cfg: PASS"; exit 0; }
echo run >> tmake.runs
o=outdir/$cfg/vmod/nvdla
mkdir -p $o/top $o/csc outdir/$cfg/spec/defs outdir/$cfg/vmod/rams/fpga/model
echo 'module NV_nvdla (a); endmodule' > $o/top/NV_nvdla.v
sed 's/WIDTH/9/g' vmod/nvdla/csc/NV_NVDLA_CSC_dl.v > $o/csc/NV_NVDLA_CSC_dl.v
echo "[TMAKE]: $cfg: PASS"
'''


def _checkout(tmp_path: Path) -> Path:
    hw = tmp_path / "hw"
    _exe(hw / "tools" / "bin" / "tmake", _TMAKE)
    (hw / "spec" / "defs").mkdir(parents=True)
    for cfg in ("nv_small", "nv_small_256_full"):
        (hw / "spec" / "defs" / f"{cfg}.spec").write_text("")
    src = hw / "vmod" / "nvdla" / "csc" / "NV_NVDLA_CSC_dl.v"
    src.parent.mkdir(parents=True)
    src.write_text(_SRC)
    (hw / ".cleanme").write_text("stamp\n")
    return hw


def _run(hw: Path, path: str, **kw) -> tuple[int, str]:
    out: list[str] = []
    rc = simsetup.run_setup(hw, "nv_small_256_full", progress=out.append, path=path, **kw)
    return rc, "\n".join(out)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVDLA_HIL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TMAKE_BUILDS_NOTHING", raising=False)


def test_setup_reports_missing_prerequisites_and_stops(tmp_path: Path) -> None:
    hw = _checkout(tmp_path)
    rc, out = _run(hw, _fake_bin(tmp_path, perl_modules=()))
    assert rc == 1
    assert "sudo apt-get install libyaml-perl libcapture-tiny-perl libxml-simple-perl" in out
    assert not (hw / "tree.make").exists()


def test_setup_writes_tree_make_runs_tmake_reports_the_fix_and_changes_nothing(tmp_path: Path) -> None:
    hw = _checkout(tmp_path)
    rc, out = _run(hw, _fake_bin(tmp_path))
    assert rc == 1, out
    assert "[2/4]" in out and "written" in out and (hw / "tree.make").is_file()
    assert "tmake -build vmod -projects nv_small_256_full" in out
    gen = hw / "outdir/nv_small_256_full/vmod/nvdla/csc/NV_NVDLA_CSC_dl.v"
    assert f"{gen}:5: `wire sc2buf_dat_rd_shift = {{9{{1'b0}}}};`" in out
    assert f"It is generated from {hw / 'vmod/nvdla/csc/NV_NVDLA_CSC_dl.v'}:5" in out
    assert "--apply-fixes" in out and "nothing was changed" in out
    assert (hw / "vmod/nvdla/csc/NV_NVDLA_CSC_dl.v").read_text() == _SRC
    assert "wire sc2buf_dat_rd_shift" in gen.read_text()


def test_setup_apply_fixes_changes_source_and_copy_prints_diff_and_rechecks(tmp_path: Path) -> None:
    hw = _checkout(tmp_path)
    rc, out = _run(hw, _fake_bin(tmp_path), apply_fixes=True)
    assert rc == 0, out
    src = (hw / "vmod/nvdla/csc/NV_NVDLA_CSC_dl.v").read_text().splitlines()
    assert src[4] == "assign sc2buf_dat_rd_shift = {WIDTH{1'b0}};"
    assert src[:4] == _SRC.splitlines()[:4] and src[5:] == _SRC.splitlines()[5:]   # one line changed
    assert "-wire sc2buf_dat_rd_shift = {WIDTH{1'b0}};" in out
    assert "+assign sc2buf_dat_rd_shift = {WIDTH{1'b0}};" in out
    assert "+assign sc2buf_dat_rd_shift = {9{1'b0}};" in out     # the generated copy too
    assert "regenerating" in out and "re-checked: none left" in out
    assert (hw / "tmake.runs").read_text().count("run") == 2
    gen = hw / "outdir/nv_small_256_full/vmod/nvdla/csc/NV_NVDLA_CSC_dl.v"
    assert "assign sc2buf_dat_rd_shift = {9{1'b0}};" in gen.read_text()   # regenerated, fix kept
    # a second run: tree.make is kept, nothing left to fix
    before = (hw / "tree.make").read_bytes()
    rc, out = _run(hw, _fake_bin(tmp_path))
    assert rc == 0 and "exists and is valid" in out and "none found" in out
    assert (hw / "tree.make").read_bytes() == before


def test_setup_never_overwrites_a_bad_tree_make(tmp_path: Path) -> None:
    hw = _checkout(tmp_path)
    bad = "PROJECTS := nv_small\nCPP := /home/utils/gcc-4.8.2/bin/cpp\n"
    (hw / "tree.make").write_text(bad)
    rc, out = _run(hw, _fake_bin(tmp_path))
    assert rc == 1
    assert "never overwrites" in out and "CPP := /home/utils/gcc-4.8.2/bin/cpp does not exist" in out
    assert (hw / "tree.make").read_text() == bad
    assert not (hw / "outdir").exists()


def test_setup_notices_tmake_building_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = _checkout(tmp_path)
    monkeypatch.setenv("TMAKE_BUILDS_NOTHING", "1")
    rc, out = _run(hw, _fake_bin(tmp_path))
    assert rc == 2 and "tmake exited 0 but" in out and "was not generated" in out


def test_setup_stops_before_tmake_deletes_the_tree(tmp_path: Path) -> None:
    hw = _checkout(tmp_path)
    (hw / ".cleaned").write_text("an older stamp\n")
    rc, out = _run(hw, _fake_bin(tmp_path))
    assert rc == 1 and "tmake would delete tree.make and outdir/" in out
    assert not (hw / "tmake.runs").exists()


def test_setup_rejects_a_folder_that_is_not_a_checkout(tmp_path: Path) -> None:
    rc, out = _run(tmp_path, _fake_bin(tmp_path))
    assert rc == 2 and "not an nvdla/hw checkout" in out


def test_setup_is_on_the_cli() -> None:
    from nvdla_hil.harness.cli import build_parser

    args = build_parser().parse_args(["sim", "setup", "--nvdla-hw", "/x", "--config", "nv_large",
                                      "--apply-fixes"])
    assert args.apply_fixes and args.config == "nv_large" and args.nvdla_hw == "/x"
    args = build_parser().parse_args(["sim", "native", "--nvdla-hw", "/x"])
    assert args.config == "nv_small"


def test_native_player_inputs_are_named_when_missing(tmp_path: Path) -> None:
    from nvdla_hil.sims import build as simbuild
    from nvdla_hil.sims.native import native_inputs

    hw = tmp_path / "hw"
    top = hw / "outdir" / "nv_small" / "vmod" / "nvdla" / "top"
    top.mkdir(parents=True)
    (top / "NV_nvdla.v").write_text("module NV_nvdla; endmodule\n")
    with pytest.raises(simbuild.BuildError, match="verif/verilator/nvdla.cpp is missing"):
        native_inputs(hw, "nv_small")
    cpp = hw / "verif" / "verilator" / "nvdla.cpp"
    cpp.parent.mkdir(parents=True)
    cpp.write_text("// stand-in\n")
    with pytest.raises(simbuild.BuildError, match="spec/defs/project.h is missing.*sim setup"):
        native_inputs(hw, "nv_small")
    header = hw / "outdir" / "nv_small" / "spec" / "defs" / "project.h"
    header.parent.mkdir(parents=True)
    header.write_text("")
    assert native_inputs(hw, "nv_small") == (top.parents[1], cpp, header)


# ------------------------------------------------------------------ an nvdlav1 (nv_full) checkout
# nvdlav1's tmake declares `"project=s"` (not -projects), uses IO::Tee, runs each step as
# `make | tee` and prints BUILD PASS whatever happened; its RTL has only the ASIC RAM models.
_TMAKE_V1 = r'''
: <<'PERL_TEXT'
use IO::Tee;
GetOptions("build|b=s" => \@build, "project=s" => \$project);
PERL_TEXT
test "$3" = "-project" || { echo "Unknown option: ${3#-}"; exit 255; }
cfg=$4
mkdir -p outdir/$cfg/vmod/nvdla/top outdir/$cfg/vmod/rams/model outdir/$cfg/vmod/rams/synth
echo 'module NV_nvdla (a); endmodule' > outdir/$cfg/vmod/nvdla/top/NV_nvdla.v
test -n "$TMAKE_STEP_FAILS" && echo "make[1]: *** [vmod/nvdla] Error 2"
echo "==================BUILD PASS=================="
'''


def _checkout_v1(tmp_path: Path) -> Path:
    hw = tmp_path / "hw1"
    _exe(hw / "tools" / "bin" / "tmake", _TMAKE_V1)
    (hw / "spec" / "defs").mkdir(parents=True)
    (hw / "spec" / "defs" / "nv_full.spec").write_text("")
    (hw / "vmod").mkdir()
    return hw


def test_nvdlav1_tmake_flow_is_read_from_its_script(tmp_path: Path) -> None:
    flow = simsetup.tmake_flow(_checkout_v1(tmp_path))
    assert flow.command("nv_full") == ["./tools/bin/tmake", "-build", "vmod", "-project", "nv_full"]
    assert "IO::Tee" in flow.perl_modules
    assert flow.passed("==BUILD PASS==\n", "nv_full") is None
    bad = flow.passed("x\nmake[1]: *** [vmod] Error 2\n==BUILD PASS==\n", "nv_full")
    assert bad is not None and "line 2" in bad
    assert simsetup.tmake_flow(_checkout(tmp_path)).project_option == "-projects"


def test_nvdlav1_needs_io_tee(tmp_path: Path) -> None:
    hw = _checkout_v1(tmp_path)
    out: list[str] = []
    rc = simsetup.run_setup(hw, "nv_full", progress=out.append, path=_fake_bin(tmp_path))
    assert rc == 1 and "MISSING perl module IO::Tee" in "\n".join(out)
    assert "libio-tee-perl" in "\n".join(out)


def test_nvdlav1_setup_refuses_at_once_never_setup_done(tmp_path: Path) -> None:
    hw = _checkout_v1(tmp_path)
    path = _fake_bin(tmp_path, perl_modules=("YAML", "Capture::Tiny", "XML::Simple", "IO::Tee"))
    out: list[str] = []
    rc = simsetup.run_setup(hw, "nv_full", progress=out.append, path=path)
    text = "\n".join(out)
    assert "tmake -build vmod -project nv_full" in text
    assert rc == 2 and "setup done" not in text
    assert "rams/fpga/model is missing" in text and "#0.1" in text and "1.5 CPU-hours" in text


def test_nvdlav1_failed_step_behind_build_pass_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = _checkout_v1(tmp_path)
    path = _fake_bin(tmp_path, perl_modules=("YAML", "Capture::Tiny", "XML::Simple", "IO::Tee"))
    monkeypatch.setenv("TMAKE_STEP_FAILS", "1")
    out: list[str] = []
    rc = simsetup.run_setup(hw, "nv_full", progress=out.append, path=path)
    assert rc == 2 and "a tmake step failed" in "\n".join(out)


def test_sim_build_refuses_rtl_without_fpga_ram_models(tmp_path: Path) -> None:
    from nvdla_hil.sims import build as simbuild
    vmod = tmp_path / "outdir" / "nv_full" / "vmod"
    (vmod / "nvdla" / "top").mkdir(parents=True)
    (vmod / "nvdla" / "top" / "NV_nvdla.v").write_text("module NV_nvdla; endmodule\n")
    (vmod / "rams" / "synth").mkdir(parents=True)
    with pytest.raises(simbuild.BuildError, match="no FPGA RAM models"):
        simbuild.build_nvdla(tmp_path, "nv_full", progress=lambda m: None, cache=tmp_path / "cache")
