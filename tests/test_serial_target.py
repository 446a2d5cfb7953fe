"""The serial target end to end: NVDLA traces and packed vectors through a real byte stream
(pty and TCP) to the board emulator serving the model, with the same results as the model."""

from __future__ import annotations

import pytest

from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.board_emu import serve_in_thread
from nvdla_hil.harness.targets import TargetSpec, open_target
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import run_trace
from nvdla_hil.harness.vectors import bundled_root, find_cases, run_case

TRACES = ["cdp_8x8x64_lrn3_int8_5", "sdp_3x3x33_bn_int8_mem_0", "pdp_8x9x19_3x3_ave_int8_1", "dc_1x1x8_1x1x8x1_int8_0"]
DRAM = 0x4000_0000  # NVDLA 0x80000000..0xc0000000 (the traces use 0x8..., 0x9..., 0xa...)

LAB = """\
lock_dir: {lock}
boards:
  emu:
    url: {url}
    baud: 3000000
    profile: {profile}
    dram_size: {dram:#x}
    integrity: {integrity}
    reset_address: 0xf0000000
    response_timeout: 10   # the emulator computes a layer inside the bus write that launches it
"""


@pytest.fixture(params=["pty", "tcp"])
def board(request, tmp_path):
    """A lab file whose one board is the emulator (nv_small model) on a pty or TCP socket."""
    model = ModelTarget("nv_small")
    with serve_in_thread(model, BoardMap(dram_size=DRAM), mode=request.param) as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(LAB.format(lock=tmp_path, url=emu.url, profile="nv_small", dram=DRAM, integrity="verify"))
        yield TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="emu"), emu


def test_traces_match_the_model(board, trace_root):
    spec, emu = board
    for name in TRACES:
        with open_target(spec) as t:  # the board is reset on open, as NVDLA's flow resets per test
            over_serial = run_trace(trace_root / name, t, poison=True)
        with ModelTarget("nv_small") as m:
            in_process = run_trace(trace_root / name, m, poison=True)
        assert over_serial.status == in_process.status == "passed", over_serial.summary()
        assert [c.actual for c in over_serial.checks] == [c.actual for c in in_process.checks]
    assert emu.stats.resets == len(TRACES)


def test_vectors_pass_over_the_link(board):
    spec, _ = board
    cases = [p for p in find_cases(bundled_root()) if p.parent.name in ("cdp_lut", "sdp_bsbn")][:4]
    assert cases
    for path in cases:
        with open_target(spec) as t:
            res = run_case(path, t)
        assert res.passed, res.format() if hasattr(res, "format") else res
