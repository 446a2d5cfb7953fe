"""BDMA reference model (harness/refmodel/bdma.py): hand-derived copies, both memory ports,
gaps between lines untouched, line/surface repeat, the launch-group API, refusals, and
nv_full's sanity2 / sanity2_cvsram traces emulated on a register view.

Rule under test (cmod BdmaCore.cpp, RTL NV_NVDLA_BDMA_load.v): addresses and strides are
the register field << 5, CFG_LINE.SIZE / CFG_LINE_REPEAT / CFG_SURF_REPEAT are minus one,
line l of surface s goes from src + s*SRC_SURF + l*SRC_LINE to dst + s*DST_SURF + l*DST_LINE.
Expected bytes below are written out by hand or with a plain loop over that rule.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from _regview import RegView
from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.refmodel.base import DmaPorts, InvalidLayer, ModelOptions
from nvdla_hil.harness.refmodel.bdma import BdmaCommand, run_bdma, run_bdma_group
from nvdla_hil.harness.refmodel.dma import gather_rows, scatter_rows

RTL = ModelOptions(semantics="rtl", atom_bytes=32)
CMOD = ModelOptions(semantics="cmod", atom_bytes=32)
MC, CV = 1, 0  # CFG_CMD.*_RAM_TYPE: MC = pri_mem, CVSRAM = sec_mem


def _view(*, src, dst, line_size, lines=0, surfs=0, src_line=0, dst_line=0, src_surf=0, dst_surf=0,
          src_ram=MC, dst_ram=MC) -> RegView:  # fmt: skip
    """Registers as a host writes them: byte addresses/strides (multiples of 32), raw
    minus-one counts."""
    v = RegView(profile="nv_full")
    v.set("BDMA", "CFG_SRC_ADDR_LOW", src & 0xFFFFFFFF).set("BDMA", "CFG_SRC_ADDR_HIGH", src >> 32)
    v.set("BDMA", "CFG_DST_ADDR_LOW", dst & 0xFFFFFFFF).set("BDMA", "CFG_DST_ADDR_HIGH", dst >> 32)
    v.set("BDMA", "CFG_LINE", line_size).set("BDMA", "CFG_LINE_REPEAT", lines).set("BDMA", "CFG_SURF_REPEAT", surfs)
    v.set("BDMA", "CFG_SRC_LINE", src_line).set("BDMA", "CFG_DST_LINE", dst_line)
    v.set("BDMA", "CFG_SRC_SURF", src_surf).set("BDMA", "CFG_DST_SURF", dst_surf)
    v.set("BDMA", "CFG_CMD", src_ram | (dst_ram << 1))
    return v


def _pattern(n: int, seed: int = 1) -> np.ndarray:
    return ((np.arange(n) * 7 + seed * 13) % 251 + 1).astype(np.uint8)  # never 0, never 0xEE


def test_minus_one_fields_single_atom():
    # SIZE = 0, LINE_REPEAT = 0, SURF_REPEAT = 0: exactly one 32-byte line
    m = SparseMemory()
    m.write(0x1000, np.arange(64, dtype=np.uint8))
    m.write(0x8000, np.full(96, 0xEE, np.uint8))
    res = run_bdma(_view(src=0x1000, dst=0x8020, line_size=0), m, RTL)
    assert m.read(0x8000, 32).tolist() == [0xEE] * 32
    assert m.read(0x8020, 32).tolist() == list(range(32))
    assert m.read(0x8040, 32).tolist() == [0xEE] * 32
    assert res.elements == 32
    assert res.stats == {("BDMA", "STATUS_GRP0_READ_STALL"): 0, ("BDMA", "STATUS_GRP0_WRITE_STALL"): 0}


def test_address_low_bits_are_not_stored_and_high_word_counts():
    # CFG_SRC_ADDR_LOW bits 4:0 are not part of the field: 0x1010 reads as 0x1000.
    # CFG_DST_ADDR_HIGH = 1 puts the destination at 0x1_0000_0040.
    m = SparseMemory()
    m.write(0x1000, np.arange(32, dtype=np.uint8))
    v = _view(src=0x1000, dst=0x1_0000_0040, line_size=0)
    v.set("BDMA", "CFG_SRC_ADDR_LOW", 0x1010)
    run_bdma(v, m, RTL)
    assert m.read(0x1_0000_0040, 32).tolist() == list(range(32))
    assert m.read(0x40, 32).tolist() == [0] * 32


def test_strided_lines_and_surfaces_with_gaps():
    # 2 surfaces x 3 lines x 32 bytes (SIZE 0). src: line stride 64, surface stride 256.
    # dst: line stride 96, surface stride 0x200. Every byte of the destination window that
    # is not a copied line keeps 0xEE.
    src, dst = 0x2000, 0x9000
    m = SparseMemory()
    m.write(src, _pattern(0x400))
    m.write(dst, np.full(0x400, 0xEE, np.uint8))
    run_bdma(_view(src=src, dst=dst, line_size=0, lines=2, surfs=1, src_line=64, dst_line=96,
                   src_surf=256, dst_surf=0x200), m, RTL)  # fmt: skip
    want = np.full(0x400, 0xEE, np.uint8)
    srcb = _pattern(0x400)
    for s in range(2):
        for ln in range(3):
            o_src, o_dst = s * 256 + ln * 64, s * 0x200 + ln * 96
            want[o_dst : o_dst + 32] = srcb[o_src : o_src + 32]
    assert np.array_equal(m.read(dst, 0x400), want)
    # spot checks written out: surface 1 line 2 comes from src+0x180 and lands at dst+0x2c0
    assert m.read(dst + 0x2C0, 32).tolist() == srcb[0x180:0x1A0].tolist()
    assert m.read(dst + 0x20, 64).tolist() == [0xEE] * 64  # gap after line 0 of surface 0


def test_multi_atom_lines_line_repeat_only():
    # SIZE = 2: 96-byte lines; 4 lines, src packed (stride 96), dst stride 128 (32-byte gaps)
    m = SparseMemory()
    m.write(0x0, _pattern(384, 3))
    m.write(0x4000, np.full(512, 0xEE, np.uint8))
    run_bdma(_view(src=0, dst=0x4000, line_size=2, lines=3, src_line=96, dst_line=128), m, RTL)
    got = m.read(0x4000, 512).reshape(4, 128)
    srcb = _pattern(384, 3).reshape(4, 96)
    assert np.array_equal(got[:, :96], srcb)
    assert np.all(got[:, 96:] == 0xEE)


@pytest.mark.parametrize("src_ram,dst_ram", [(MC, CV), (CV, MC), (CV, CV), (MC, MC)])
def test_memory_ports(src_ram, dst_ram):
    # CFG_CMD.SRC_RAM_TYPE / DST_RAM_TYPE: 1 = MC (pri_mem), 0 = CVSRAM (sec_mem)
    pri, sec = SparseMemory(), SparseMemory()
    ports = {MC: pri, CV: sec}
    ports[src_ram].write(0x100, _pattern(64, 5))
    run_bdma(_view(src=0x100, dst=0x800, line_size=1, src_ram=src_ram, dst_ram=dst_ram),
             DmaPorts({"pri_mem": pri, "sec_mem": sec}), RTL)  # fmt: skip
    assert ports[dst_ram].read(0x800, 64).tolist() == _pattern(64, 5).tolist()
    if src_ram != dst_ram:  # the other port's destination window stays empty
        assert ports[src_ram].read(0x800, 64).tolist() == [0] * 64


def test_same_address_on_two_ports_is_not_an_overlap():
    pri, sec = SparseMemory(), SparseMemory()
    sec.write(0x100, _pattern(32))
    ports = DmaPorts({"pri_mem": pri, "sec_mem": sec})
    run_bdma(_view(src=0x100, dst=0x100, line_size=0, src_ram=CV, dst_ram=MC), ports, RTL)
    assert pri.read(0x100, 32).tolist() == _pattern(32).tolist()


def test_overlapping_source_and_destination_refused():
    m = SparseMemory()
    with pytest.raises(InvalidLayer, match="overlap"):
        run_bdma(_view(src=0x100, dst=0x120, line_size=1), m, RTL)  # 64 bytes from 0x100 -> 0x120
    # interleaved lines that never share a byte are fine: src lines at 0x0, 0x40; dst at 0x20, 0x60
    m.write(0, _pattern(128))
    run_bdma(_view(src=0, dst=0x20, line_size=0, lines=1, src_line=64, dst_line=64), m, RTL)
    assert m.read(0x20, 32).tolist() == _pattern(128)[0:32].tolist()
    assert m.read(0x60, 32).tolist() == _pattern(128)[64:96].tolist()


def test_rtl_refuses_repeat_counts_over_13_bits_cmod_copies():
    v = _view(src=0, dst=0x10_0000, line_size=0, lines=8192, src_line=32, dst_line=32)  # 8193 lines
    m = SparseMemory()
    m.write(0, _pattern(8193 * 32))
    with pytest.raises(InvalidLayer, match="CFG_LINE_REPEAT"):
        run_bdma(v, m, RTL)
    res = run_bdma(v, m, CMOD)
    assert res.elements == 8193 * 32
    assert np.array_equal(m.read(0x10_0000, 8193 * 32), _pattern(8193 * 32))
    with pytest.raises(InvalidLayer, match="CFG_SURF_REPEAT"):
        run_bdma(_view(src=0, dst=0x10_0000, line_size=0, surfs=8192, src_surf=1, dst_surf=1), m, RTL)


def test_launch_group_runs_queued_commands_in_order():
    # two commands in one group 1: the second overwrites the first one's last 32 bytes
    m = SparseMemory()
    m.write(0x0, np.full(64, 0x11, np.uint8))
    m.write(0x100, np.full(32, 0x22, np.uint8))
    c1 = BdmaCommand.from_registers(_view(src=0x0, dst=0x1000, line_size=1))
    c2 = BdmaCommand.from_registers(_view(src=0x100, dst=0x1020, line_size=0))
    res = run_bdma_group([c1, c2], m, RTL, group=1)
    assert m.read(0x1000, 64).tolist() == [0x11] * 32 + [0x22] * 32
    assert res.stats == {("BDMA", "STATUS_GRP1_READ_STALL"): 0, ("BDMA", "STATUS_GRP1_WRITE_STALL"): 0}
    assert res.elements == 96
    # an empty group copies nothing
    assert run_bdma_group([], m, RTL, group=0).elements == 0
    with pytest.raises(InvalidLayer, match="holds 20"):
        run_bdma_group([c1] * 21, m, RTL)


def test_command_snapshot_decodes_registers():
    c = BdmaCommand.from_registers(_view(src=0x1_2345_6780, dst=0x40, line_size=7, lines=7, surfs=2,
                                         src_line=0x100, dst_line=0x120, src_surf=0x800, dst_surf=0x1000,
                                         src_ram=CV, dst_ram=MC))  # fmt: skip
    assert (c.src, c.dst, c.line_bytes, c.lines, c.surfaces) == (0x1_2345_6780, 0x40, 256, 8, 3)
    assert (c.src_ram_type, c.dst_ram_type) == (CV, MC)
    assert c.row_starts("dst")[2, 1] == 0x40 + 2 * 0x1000 + 0x120


def test_row_helpers_keep_gaps_and_write_in_order():
    m = SparseMemory()
    m.write(0, np.full(16, 9, np.uint8))
    scatter_rows(m, np.array([0, 8]), np.array([[1, 1, 1, 1], [2, 2, 2, 2]], np.uint8))
    assert m.read(0, 16).tolist() == [1, 1, 1, 1, 9, 9, 9, 9, 2, 2, 2, 2, 9, 9, 9, 9]
    scatter_rows(m, np.array([0, 2]), np.array([[3, 3, 3, 3], [4, 4, 4, 4]], np.uint8))  # overlap: later wins
    assert m.read(0, 8).tolist() == [3, 3, 4, 4, 4, 4, 9, 9]
    assert gather_rows(m, np.array([[0], [8]]), 2).tolist() == [[[3, 3]], [[2, 2]]]


# ---- nv_full's traceplayer tests sanity2 / sanity2_cvsram ------------------------------------


def _txn_root() -> Path:
    env = os.environ.get("NVDLA_TXN_TESTS")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "nvdla" / "traceplayer_v1"
    if not root.is_dir():
        pytest.skip("NVDLA_TXN_TESTS (nv_full's traceplayer tests, e.g. ../shared/nvdla/traceplayer_v1) is not set")
    return root


@pytest.mark.parametrize("name,port", [("sanity2", "pri_mem"), ("sanity2_cvsram", "sec_mem")])
def test_sanity2_traces_emulated(name, port):
    """Replay the trace's register writes into a view and its load_mem into the port, then run
    the copy. The trace copies 8 lines of 256 bytes (CFG_LINE 7, CFG_LINE_REPEAT 7, strides
    0x100) from 0x?0000000 to 0x?1000000 on one port (CFG_CMD 3 = MC->MC, 0 = CV->CV)."""
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.traces.txn import _data_file, load_txn_data, parse_txn

    txn = parse_txn(_txn_root() / name)
    regmap = load_profile("nv_full").regmap
    v = RegView(profile="nv_full")
    mems = {"pri_mem": SparseMemory(), "sec_mem": SparseMemory()}
    launches = []
    loaded = None
    for c in txn.commands:
        if c.kind == "load_mem":
            addr, size, rel, p = c.args
            loaded = (addr, load_txn_data(_data_file(txn.path, c.line, rel), size), p)
            mems[p].write(addr, loaded[1])
        elif c.kind == "write_reg":
            r = regmap.by_address(c.args[0])
            v.set(r.block, r.name, c.args[1])
            if r.block == "BDMA" and r.name.startswith("CFG_LAUNCH"):
                launches.append(int(r.name[-1]))
        elif c.kind == "read_reg":  # every read-back in these traces is of a value just written
            r = regmap.by_address(c.args[0])
            if r.block == "BDMA":
                assert v.reg(r.block, r.name) & c.args[1] == c.args[2] & c.args[1], (c.line, r.name)
    assert launches == [0]  # one command, launched as group 0 -> GLB BDMA_DONE_STATUS0
    assert loaded is not None and loaded[2] == port
    base = loaded[0]
    res = run_bdma(v, DmaPorts(mems), RTL, group=0)
    assert res.elements == 8 * 256
    dst = base + 0x1000000
    assert np.array_equal(mems[port].read(dst, 2048), loaded[1][:2048])  # packed lines: one block
    assert mems[port].read(dst + 2048, 256).tolist() == [0] * 256  # nothing past the last line
    other = "sec_mem" if port == "pri_mem" else "pri_mem"
    assert mems[other].read(dst, 2048).tolist() == [0] * 2048


def test_sanity1_polls_the_group0_done_bit():
    """sanity1 polls GLB S_INTR_STATUS & 0x40: BDMA_DONE_STATUS0 in the v1 register map."""
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.traces.txn import parse_txn

    txn = parse_txn(_txn_root() / "sanity1")
    regmap = load_profile("nv_full").regmap
    last = [c for c in txn.commands if c.kind == "read_reg"][-1]
    r = regmap.by_address(last.args[0])
    assert (r.block, r.name) == ("GLB", "S_INTR_STATUS")
    assert last.args[1] == r.field("BDMA_DONE_STATUS0").mask == 0x40


@pytest.mark.parametrize("name", ["sanity1", "sanity1_cvsram", "sanity2", "sanity2_cvsram"])
def test_sanity_traces_on_model_target(name):
    """End to end through the txn player on the model target: every register check passes."""
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.traces.txn import run_txn

    folder = _txn_root() / name
    with ModelTarget("nv_full") as t:
        res = run_txn(folder, t)
    assert res.status == "passed" and res.checks, res.summary()
