"""The serial target end to end: NVDLA traces and packed vectors through a real byte stream
(pty and TCP) to the board emulator serving the model, with the same results as the model."""

from __future__ import annotations

import numpy as np
import pytest

from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.drivers.transport import LinkIntegrityError, TransportTimeoutError
from nvdla_hil.drivers.uartbone import BoardMap, IntegrityPolicy, SerialTransport
from nvdla_hil.harness.boards.emulator import FaultConfig, serve_in_thread
from nvdla_hil.harness.targets import TargetSpec, open_target
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.targets.serial import readback_rules
from nvdla_hil.harness.traces import run_trace
from nvdla_hil.harness.vectors import bundled_root, find_cases, run_case

TRACES = ["cdp_8x8x64_lrn3_int8_5", "sdp_3x3x33_bn_int8_mem_0", "pdp_8x9x19_3x3_ave_int8_1", "dc_1x1x8_1x1x8x1_int8_0"]
DRAM = 0x4000_0000  # the default window: NVDLA 0x80000000..0xc0000000 (the traces use 0x8..., 0x9..., 0xa...)

LAB = """\
lock_dir: {lock}
boards:
  emu:
    url: {url}
    baud: 3000000
    profile: {profile}
    integrity: {integrity}
    reset_address: 0xf0000000
"""


@pytest.fixture(params=["pty", "tcp"])
def board(request, tmp_path):
    """A lab file whose one board is the emulator (nv_small model) on a pty or TCP socket."""
    model = ModelTarget("nv_small")
    with serve_in_thread(model, BoardMap(), mode=request.param) as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(LAB.format(lock=tmp_path, url=emu.url, profile="nv_small", dram=DRAM, integrity="verify"))
        yield TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="emu"), emu


def test_traces_match_the_model(board, trace_root):
    spec, emu = board
    reruns = 0
    for name in TRACES:
        with open_target(spec) as t:  # the board is reset on open, as NVDLA's flow resets per test
            over_serial = run_trace(trace_root / name, t, poison=True)
        with ModelTarget("nv_small") as m:
            in_process = run_trace(trace_root / name, m, poison=True)
        assert over_serial.status == in_process.status == "passed", over_serial.summary()
        assert [c.actual for c in over_serial.checks] == [c.actual for c in in_process.checks]
        # the lean set-up does not send a checked region's gaps; where an earlier trace left
        # other bytes there, the first run fails and the trace is reset and rerun with them sent
        reruns += "rerun" in over_serial.setup
    assert emu.stats.resets == len(TRACES) + reruns


def test_vectors_pass_over_the_link(board):
    spec, _ = board
    cases = [p for p in find_cases(bundled_root()) if p.parent.name in ("cdp_lut", "sdp_bsbn")][:4]
    assert cases
    for path in cases:
        with open_target(spec) as t:
            res = run_case(path, t)
        assert res.passed, res.format() if hasattr(res, "format") else res


# ---- LUT tables over the link: the index/port pair is verified as a unit ----------------------------------
def _tables(seed: int) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(-32768, 32768, 65).tolist(), rng.integers(-32768, 32768, 257).tolist()


def _truth_lut(model: ModelTarget, table: str) -> list[int]:
    """The table as the model holds it, read in-process (no link in between)."""
    return NvdlaDriver(model, "nv_small").precision.read_lut("CDP", table).tolist()


def test_lut_load_and_read_back_over_the_link(tmp_path):
    """Reading the LUT port pops an entry: a read done twice to compare must redo the CFG
    write too. The verified load reads the table back through the same pair."""
    model = ModelTarget("nv_small")
    le, lo = _tables(5)
    with serve_in_thread(model, BoardMap()) as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(LAB.format(lock=tmp_path, url=emu.url, profile="nv_small", dram=DRAM, integrity="verify"))
        with open_target(TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="emu")) as t:
            drv = NvdlaDriver(t, "nv_small")
            drv.precision.load_lut("CDP", "LE", le)
            drv.precision.load_lut("CDP", "LO", lo)
            assert drv.precision.read_lut("CDP", "LE").tolist() == le
            assert drv.precision.verify_lut("CDP", "LO", lo) == []
            # a raw read of the port is read once: a second, comparing read would pop LE[1]
            t.write32(0xD008, drv.encode(("CDP", "S_LUT_ACCESS_CFG"), {"LUT_TABLE_ID": "LE", "LUT_ACCESS_TYPE": "READ"}),
                      posted=False)
            assert t.read32(0xD00C) == le[0] & 0xFFFF and t.read32(0xD00C) == le[1] & 0xFFFF
            assert t.stats.verify_mismatches == 0 and t.stats.retries == 0
        assert _truth_lut(model, "LE") == le and _truth_lut(model, "LO") == lo


@pytest.mark.parametrize("mode", ["pty", "tcp"])
def test_lut_loads_on_a_faulty_link_are_correct_or_reported(mode, tmp_path):
    """Every LUT load either raises or left exactly the requested table in the board."""
    model = ModelTarget("nv_small")
    model.open()
    ok, mask, pops = readback_rules("nv_small")
    outcome = {"ok": 0, "reported": 0, "wrong": 0}
    faults = FaultConfig(drop=0.0005, corrupt=0.0005, seed=3)
    with serve_in_thread(model, BoardMap(), faults=faults, mode=mode, fsm_timeout=0.005) as emu:
        t = SerialTransport(emu.url, 3_000_000, board_map=BoardMap(dram_size=DRAM),
                            policy=IntegrityPolicy("verify", retries=5), readback_ok=ok, readback_mask=mask,
                            read_pops=pops, response_timeout=0.05, board_timeout=0.01)
        with t:
            pc = NvdlaDriver(t, "nv_small").precision
            for i in range(20):
                le, lo = _tables(100 + i)
                try:
                    pc.load_lut("CDP", "LE", le)
                    pc.load_lut("CDP", "LO", lo)
                except (LinkIntegrityError, TransportTimeoutError):
                    outcome["reported"] += 1
                    continue
                good = _truth_lut(model, "LE") == le and _truth_lut(model, "LO") == lo
                outcome["ok" if good else "wrong"] += 1
            link = t.stats.snapshot()
    model.close()
    print(outcome, link, emu.stats.corrupted, emu.stats.dropped)
    assert emu.stats.corrupted > 0 and emu.stats.dropped > 0
    assert outcome["wrong"] == 0 and outcome["ok"] > 0
    assert link["retries"] > 0  # faults hit LUT loads, and the whole unit was redone


def test_trace_lut_payload_is_proven_over_the_link(tmp_path, trace_root):
    """NVDLA's LRN traces program the CDP LUT register by register. The player sends each
    CFG+DATA run as one indirect-port unit, so a corrupted LUT entry on the wire is caught by
    the read-back and rewritten, and the trace still passes its CRC."""
    model = ModelTarget("nv_small")
    with serve_in_thread(model, BoardMap()) as emu:
        header = bytes([0x03, 65]) + ((0x4000_0000 + 0xD00C) >> 2).to_bytes(4, "big")  # LE: 65 words
        feed, hits = emu.core.feed, []

        def corrupting_feed(data: bytes, now: float) -> bytes:
            buf = bytearray(data)
            at = buf.find(header)
            if at >= 0 and not hits and at + 9 < len(buf):
                buf[at + 9] ^= 0x01  # LSB of the first LE entry
                hits.append(at)
            return feed(bytes(buf), now)

        emu.core.feed = corrupting_feed
        lab = tmp_path / "lab.yaml"
        lab.write_text(LAB.format(lock=tmp_path, url=emu.url, profile="nv_small", dram=DRAM, integrity="verify"))
        with open_target(TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="emu")) as t:
            res = run_trace(trace_root / "cdp_8x8x64_lrn3_int8_5", t)
            # the corrupted LUT write is caught and redone; a status register that changes between its
            # two agreeing reads while the layer computes (load-dependent) may add mismatches, never
            # a fault of another kind (a timeout or a short reply)
            assert len(hits) == 1 and t.stats.verify_mismatches >= 1 and t.stats.retries >= 1
            assert t.stats.link_faults == t.stats.verify_mismatches
            assert f"{t.stats.verify_mismatches} read mismatches" in t.link_report()
    assert res.status == "passed", res.summary()
