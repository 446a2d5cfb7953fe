"""The litex_server transport: Etherbone over TCP to a real ``litex_server --uart`` whose UART is
the board emulator's pty, as a lab with LiteX's own tools runs it.

Skips (saying so) when LiteX is not installed (``pip install litex``)."""

from __future__ import annotations

import numpy as np
import pytest

litex = pytest.importorskip("litex", reason="LiteX is not installed: pip install litex (for litex_server)")

from nvdla_hil.drivers.etherbone import EtherboneTransport, eb_read_packet, eb_write_packet  # noqa: E402
from nvdla_hil.drivers.uartbone import BoardDeadError, IntegrityPolicy  # noqa: E402
from nvdla_hil.harness.targets import TargetSpec, open_target  # noqa: E402
from nvdla_hil.harness.targets.model import ModelTarget  # noqa: E402
from nvdla_hil.harness.traces import run_trace  # noqa: E402
from nvdla_hil.harness.vectors import bundled_root, find_cases, run_case  # noqa: E402

from _lab import LitexBench  # noqa: E402

@pytest.fixture
def regfile_bench(tmp_path):
    b = LitexBench(tmp_path / "litex_server.log", backend="regfile")
    yield b
    b.close()


def test_packets_match_litex_own_encoder():
    """Our Etherbone bytes are what LiteX's EtherbonePacket.encode() produces."""
    from litex.tools.remote.etherbone import EtherbonePacket, EtherboneReads, EtherboneRecord, EtherboneWrites

    rec = EtherboneRecord(4)
    rec.writes = EtherboneWrites(addr_size=4, base_addr=0x4000_9008, datas=[1, 0xDEADBEEF])
    pkt = EtherbonePacket(32)
    pkt.records = [rec]
    pkt.encode()
    assert eb_write_packet(0x4000_9008, np.array([1, 0xDEADBEEF], np.uint32)) == bytes(pkt.bytes)
    rec = EtherboneRecord(4)
    rec.reads = EtherboneReads(addr_size=4, addrs=[0x8000_0000 + 4 * i for i in range(255)])
    pkt = EtherbonePacket(32)
    pkt.records = [rec]
    pkt.encode()
    assert eb_read_packet(np.arange(255, dtype=np.uint32) * 4 + 0x8000_0000) == bytes(pkt.bytes)


@pytest.mark.parametrize("policy", ["plain", "verify"])
def test_registers_ports_and_memory_through_litex_server(regfile_bench, policy):
    with EtherboneTransport(regfile_bench.url, policy=IntegrityPolicy(policy), board_name="emu",
                            readback_ok=lambda a: a != 0x900C) as t:
        assert t.sync_value == 0x0030_3031
        assert "CommUART" in t.describe()
        vals = [(i * 0x01010101) & 0xFFFFFFFF for i in range(300)]
        t.write_burst(0x5000, vals)
        assert t.read_burst(0x5000, 300) == vals
        t.write_burst(0x900C, [1, 2, 3], incr=False)  # a data port: one record per word
        assert t.read_burst(0x900C, 2, incr=False) == [3, 3]
        data = np.random.default_rng(1).integers(0, 256, 10_003, dtype=np.uint8)
        t.mem_write(0x9000_0001, data)
        assert np.array_equal(t.mem_read(0x9000_0001, data.size), data)
        t.sync()
        assert t.stats.link_faults == 0


def test_litex_own_client_shares_the_board(regfile_bench):
    """LiteX's RemoteClient and this transport use the same litex_server at once."""
    from litex import RemoteClient

    with EtherboneTransport(regfile_bench.url, policy=IntegrityPolicy("verify")) as t:
        t.write32(0x5000, 0x1234_5678, posted=False)
        rc = RemoteClient(host="127.0.0.1", port=regfile_bench.port)
        rc.open()
        try:
            assert rc.read(0x4000_5000) == 0x1234_5678  # CSB 0x5000 at the default csr_base
            rc.write(0x4000_5004, 0xCAFE)
            # LiteX's write is posted: a read on the same connection returns after it has landed
            # (closing at once could drop it before litex_server forwards it)
            assert rc.read(0x4000_5004) == 0xCAFE
        finally:
            rc.close()
        assert t.read32(0x5004) == 0xCAFE


def test_dead_server_is_board_dead_error(regfile_bench):
    """A killed litex_server: the next read is a BoardDeadError naming the board, within bounded
    retries counted on the link (at most the request and one resynchronisation's ``dead_after``
    sync reads, each waiting its configured response_timeout; no retry), not a wall-clock guess;
    later calls fail at once, sending nothing."""
    with EtherboneTransport(regfile_bench.url, board_name="shared-1") as t:
        assert t.read32(0x1000) == 0x0030_3031
        regfile_bench.server.kill()
        regfile_bench.server.wait()
        before = t.stats.snapshot()
        with pytest.raises(BoardDeadError, match=r"board 'shared-1' \(tcp://127\.0\.0\.1:\d+\)"):
            t.read32(0x1000)
        after = t.stats.snapshot()
        work = {k: after[k] - before[k] for k in ("round_trips", "resyncs", "retries")}
        assert work["retries"] == 0 and work["resyncs"] <= 1, work
        assert work["round_trips"] <= 1 + t.policy.dead_after, work
        with pytest.raises(BoardDeadError, match="declared dead earlier"):
            t.read32(0x1000)
        assert t.stats.tx_bytes == after["tx_bytes"] and t.stats.round_trips == after["round_trips"]


TRACES = ["cdp_8x8x64_lrn3_int8_5", "sdp_3x3x33_bn_int8_mem_0", "pdp_8x9x19_3x3_ave_int8_1", "dc_1x1x8_1x1x8x1_int8_0"]


def test_traces_and_vectors_through_litex_server(tmp_path, trace_root):
    """The serial target with ``transport: litex_server``: NVDLA traces and packed vectors give
    the model's results through a real litex_server in front of the board emulator."""
    bench = LitexBench(tmp_path / "litex_server.log", backend="model")
    try:
        lab = tmp_path / "lab.yaml"
        lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  shared:\n    transport: litex_server\n    url: {bench.url}\n"
                       f"    profile: nv_small\n    reset_address: 0xf0000000\n")
        spec = TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="shared")
        for name in TRACES:
            with open_target(spec) as t:
                assert "litex_server" in t.describe()
                got = run_trace(trace_root / name, t, poison=True)
            with ModelTarget("nv_small") as m:
                want = run_trace(trace_root / name, m, poison=True)
            assert got.status == want.status == "passed", got.summary()
            assert [c.actual for c in got.checks] == [c.actual for c in want.checks]
        cases = [p for p in find_cases(bundled_root()) if p.parent.name in ("cdp_lut", "sdp_bsbn")][:2]
        assert len(cases) == 2
        for path in cases:
            with open_target(spec) as t:
                assert run_case(path, t).passed
    finally:
        bench.close()
