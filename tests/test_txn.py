"""nv_full's traceplayer format (harness/traces/txn.py): parsing, playing, and the model's completion
timing that NVDLA's own nv_full tests rely on.

The public tests come from ``NVDLA_TXN_TESTS`` (CI: ../shared/nvdla/traceplayer_v1); the tests
that need them skip naming the variable when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import TraceError
from nvdla_hil.harness.traces.txn import find_txns, load_txn_data, parse_txn, run_txn


def _test(tmp_path: Path, txn: str, files: dict[str, str] | None = None, plusargs: str | None = None) -> Path:
    d = tmp_path / "t"
    d.mkdir(exist_ok=True)
    (d / "input.txn").write_text(txn)
    for name, text in (files or {}).items():
        (d / name).write_text(text)
    if plusargs is not None:
        (d / "plusargs.txt").write_text(plusargs)
    return d


def _dat(data: bytes, header: str = "Data_size = 0x40\nW = 8\n") -> str:
    lines = [" ".join(f"0x{b:02x}" for b in data[i : i + 32]) for i in range(0, len(data), 32)]
    return header + "\n".join(lines) + "\n"


def test_word_addresses_and_ports(tmp_path: Path) -> None:
    d = _test(tmp_path, "load_mem 0x50000040 0x20 a.dat # to CVSRAM\n"
                        "write_reg 0xffff100b 0x800 #NVDLA_BDMA.CFG_DST_SURF_0\n"
                        "read_reg 0xffff100b 0xffffffe0 0x800\n", {"a.dat": _dat(bytes(range(32)))})
    t = parse_txn(d)
    assert t.commands[0].args == (0x50000040, 0x20, "a.dat", "sec_mem")
    assert t.commands[1].args == (0x100B * 4, 0x800)  # word 0x100b of the v1 map = BDMA 0x402c
    assert t.commands[1].comment == "NVDLA_BDMA.CFG_DST_SURF_0"
    assert t.read_tries == 10 and not t.continue_on_fail
    with ModelTarget("nv_full") as m:
        res = run_txn(t, m)
        assert res.status == "passed", res.summary()
        assert np.array_equal(m.mem_read(0x50000040, 32, port="sec_mem"), np.arange(32, dtype=np.uint8))
        assert m.read32(0x402C) == 0x800


@pytest.mark.parametrize(
    "txn, message",
    [
        ("load_mem 0x90000000 0x20 a.dat\nread_reg 0xffff0000 0x0 0x0\n", "neither memory port"),
        ("load_mem 0x8ffffff0 0x20 a.dat\nread_reg 0xffff0000 0x0 0x0\n", "leaves its 256 MiB window"),
        ("frobnicate 1\n", "unknown command 'frobnicate'"),
        ("read_reg 0xffff0000 0x1\n", "malformed read_reg"),
        ("load_mem 0x80000000 0x20 ../../etc/passwd\nread_reg 0xffff0000 0x0 0x0\n", "inside the test folder"),
        ("load_mem 0x80000000 0x20 missing.dat\nread_reg 0xffff0000 0x0 0x0\n", "missing memory file"),
        ("# only comments\n\n", "no commands"),
        ("write_reg 0xffff0000 0x1\nwait\n", "checks nothing"),
    ],
)
def test_malformed_tests_name_file_and_line(tmp_path: Path, txn: str, message: str) -> None:
    d = _test(tmp_path, txn, {"a.dat": _dat(bytes(32))})
    with pytest.raises(TraceError, match=message) as e:
        parse_txn(d)
    assert "input.txn" in str(e.value)


def test_short_memory_file_is_an_input_error(tmp_path: Path) -> None:
    d = _test(tmp_path, "load_mem 0x80000000 0x40 a.dat\nread_reg 0xffff0000 0x0 0x0\n", {"a.dat": _dat(bytes(32))})
    with ModelTarget("nv_full") as m, pytest.raises(TraceError, match="holds 32 data bytes, the command needs 64"):
        run_txn(d, m)
    with pytest.raises(TraceError, match="0x00..0xff"):
        load_txn_data(_test(tmp_path, "x", {"b.dat": "0x100 0x00\n"}) / "b.dat", 2)


def test_read_reg_tries_and_continue_on_fail(tmp_path: Path) -> None:
    # GLB.S_NVDLA_HW_VERSION (word 0) never reads 0x1234: one failed check; the test stops
    # there unless +continue_on_fail, after which the second read (which matches) still runs
    txn = "read_reg 0xffff0000 0x0000ffff 0x00001234\nwrite_reg 0xffff100b 0x800\nread_reg 0xffff100b 0xffffffe0 0x800\n"
    with ModelTarget("nv_full") as m:
        res = run_txn(_test(tmp_path, txn), m)
    assert res.status == "failed" and len(res.checks) == 1 and "stopped at the first" in res.message
    assert "GLB.S_NVDLA_HW_VERSION & 0x0000ffff: expected 0x00001234" in res.summary()
    with ModelTarget("nv_full") as m:
        res = run_txn(_test(tmp_path, txn, plusargs="+read_reg_poll_retries=3 +continue_on_fail"), m)
    assert res.status == "failed" and [c.passed for c in res.checks] == [False, True]
    assert "3 tries" in res.checks[0].message


def _sdp_passthrough(src: int, dst: int, *, w: int = 2, h: int = 2, c: int = 32) -> list[tuple[str, int]]:
    """An SDP layer copying an INT8 cube from src to dst (every stage bypassed, CVT scale 1)."""
    return [
        ("SDP_RDMA.D_DATA_CUBE_WIDTH", w - 1), ("SDP_RDMA.D_DATA_CUBE_HEIGHT", h - 1),
        ("SDP_RDMA.D_DATA_CUBE_CHANNEL", c - 1), ("SDP_RDMA.D_SRC_BASE_ADDR_LOW", src),
        ("SDP_RDMA.D_SRC_LINE_STRIDE", 32 * w), ("SDP_RDMA.D_SRC_SURFACE_STRIDE", 32 * w * h),
        ("SDP_RDMA.D_SRC_DMA_CFG", 1), ("SDP_RDMA.D_BRDMA_CFG", 1), ("SDP_RDMA.D_NRDMA_CFG", 1),
        ("SDP_RDMA.D_ERDMA_CFG", 1), ("SDP_RDMA.D_FEATURE_MODE_CFG", 0),  # INT8 in/proc/out, not flying
        ("SDP.D_DATA_CUBE_WIDTH", w - 1), ("SDP.D_DATA_CUBE_HEIGHT", h - 1), ("SDP.D_DATA_CUBE_CHANNEL", c - 1),
        ("SDP.D_DST_BASE_ADDR_LOW", dst), ("SDP.D_DST_LINE_STRIDE", 32 * w),
        ("SDP.D_DST_SURFACE_STRIDE", 32 * w * h), ("SDP.D_DST_DMA_CFG", 1),
        ("SDP.D_DP_BS_CFG", 1), ("SDP.D_DP_BN_CFG", 1), ("SDP.D_DP_EW_CFG", 1), ("SDP.D_CVT_SCALE", 1),
        ("SDP_RDMA.D_OP_ENABLE", 1), ("SDP.D_OP_ENABLE", 1),
    ]


def _as_txn(writes: list[tuple[str, int]]) -> str:
    from nvdla_hil.drivers.profiles import load_profile

    rm = load_profile("nv_full").regmap
    return "".join(f"write_reg {0xFFFF0000 | rm.register(n).address // 4:#x} {v:#x} #{n}\n" for n, v in writes)


def test_dump_mem_explains_differences_by_element(tmp_path: Path) -> None:
    data = bytes((i * 7) & 0xFF for i in range(128))
    good = _dat(data)
    bad = bytearray(data)
    bad[32 * 1 + 5] ^= 0xFF  # surface 0, line 0, pixel 1, lane 5 -> (c=5, h=0, w=1)
    txn = ("load_mem 0x80000000 0x80 in.dat\n" + _as_txn(_sdp_passthrough(0x80000000, 0x80100000))
           + "wait\nread_reg 0xffff0003 0x00000001 0x00000001 #GLB.S_INTR_STATUS SDP done\n"
           + "write_reg 0xffff0003 0xffffffff\n"
           + "dump_mem 0x80100000 0x80 good.dat\ndump_mem 0x80100000 0x80 bad.dat\n")
    d = _test(tmp_path, txn, {"in.dat": good, "good.dat": good, "bad.dat": _dat(bytes(bad))})
    with ModelTarget("nv_full") as m:
        res = run_txn(d, m)
    dumps = [c for c in res.checks if c.kind == "dump_mem"]
    assert [c.passed for c in dumps] == [True, False], res.summary()
    msg = dumps[1].message
    assert "1 of 128 bytes differ" in msg and "1 SDP output elements of 32x2x2 (int8)" in msg
    exp = int(np.int8(np.uint8(bad[37])))
    got = int(np.int8(np.uint8(data[37])))
    assert f"(c=5,h=0,w=1) expected {exp} got {got}" in msg


def test_layers_complete_as_time_passes(tmp_path: Path) -> None:
    """OP_EN reads 1 until the host waits; an SDP layer finishes on the first wait and raises
    SDP_DONE_STATUS0."""
    with ModelTarget("nv_full") as m:
        rm = m.regmap
        for name, v in _sdp_passthrough(0x80000000, 0x80100000):
            m.write32(rm.register(name).address, v)
        op = rm.register("SDP.D_OP_ENABLE").address
        assert m.read32(op) == 1  # still running
        assert m.wait_irq(0)
        assert m.read32(op) == 0
        status = rm.register("GLB.S_INTR_STATUS").address
        assert m.read32(status) == rm.register("GLB.S_INTR_STATUS").field("SDP_DONE_STATUS0").mask


@pytest.fixture(scope="module")
def txn_root() -> Path:
    root = os.environ.get("NVDLA_TXN_TESTS")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA_TXN_TESTS (nv_full's traceplayer tests, e.g. ../shared/nvdla/traceplayer_v1) is not set")
    return Path(root)


def test_public_tests_parse(txn_root: Path) -> None:
    tests = find_txns(txn_root)
    assert sorted(t.name for t in tests) == [  # nvdla/hw nvdlav1's verif/traces/traceplayer
        "conv_8x8_fc_int16", "googlenet_conv2_3x3_int16", "pdp_max_pooling_int16", "sanity0", "sanity1",
        "sanity1_cvsram", "sanity2", "sanity2_cvsram", "sanity3", "sanity3_cvsram", "sdp_relu_int16"]
    for t in tests:
        parse_txn(t)


@pytest.mark.parametrize("name", ["sanity0", "sdp_relu_int16"])
def test_public_tests_pass_on_the_model(txn_root: Path, name: str) -> None:
    with ModelTarget("nv_full") as m:
        res = run_txn(txn_root / name, m)
    assert res.status == "passed", res.summary()
    if name == "sdp_relu_int16":  # the whole output feature map, against NVDLA's file
        assert any(c.kind == "dump_mem" and c.passed and "all 4096 bytes match" in c.message for c in res.checks)


def test_regress_runs_nv_fulls_tests(txn_root: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from nvdla_hil.harness.cli import main

    n = 11  # every one of nv_full's public traceplayer tests
    code = main(["regress", "--suite", "txn", "--txn", str(txn_root), "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    assert f"summary: {n} passed, 0 failed" in out
    # a run that may not use nv_full runs none of them: lacks-unit skips, and nothing ran is exit 2
    code = main(["regress", "--suite", "txn", "--txn", str(txn_root), "--nvdla-config", "nv_small",
                 "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 2 and f"{n} skipped: lacks unit" in out


def test_trace_command_plays_a_txn_test(txn_root: Path, capsys) -> None:  # noqa: ANN001
    from nvdla_hil.harness.cli import main

    assert main(["trace", str(txn_root / "pdp_max_pooling_int16")]) == 0
    out = capsys.readouterr().out
    assert "[nv_full on model]" in out and "dump_mem ok" in out
    assert main(["trace", str(txn_root / "sanity0"), "--nvdla-config", "nv_small"]) == 2
