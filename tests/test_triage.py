"""Triage: injected datapath bugs on the model target (never on the reference), explained by
element against the reference model, with the suspect-register hint.

The bugs are the six kinds issue 13 names (an output-convertor offset off by one, a swapped LUT
priority, a stuck bit in one channel, a wrong CACC truncation, a BS ALU operand, a CDP output
offset) plus a PDP padding value; NVDLA's own traces drive them (``NVDLA_TRACE_SETS``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.cli import main
from nvdla_hil.harness.targets.outputs import OutputCube, diff_region
from nvdla_hil.harness.targets.faults import parse_bug
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import parse_trace, run_trace
from nvdla_hil.harness.analysis.triage import diagnose_trace


def test_output_cube_locates_bytes_by_hand() -> None:
    # int8, 8-byte atom, 10 channels (2 surfaces), 3 wide, 2 high; lines 32 bytes apart (8 spare),
    # surfaces 80 bytes apart (16 spare)
    cube = OutputCube("SDP", 0x1000, width=3, height=2, channels=10, line_stride=32, surface_stride=80, bpe=1, atom=8)
    offsets = np.array([0, 7, 8 * 2 + 5, 32 + 8, 24, 80 + 1, 80 + 3, 64])
    coords, inside = cube.locate(offsets)
    assert coords[:3].tolist() == [[0, 0, 0], [7, 0, 0], [5, 0, 2]]
    assert coords[3].tolist() == [0, 1, 1]
    assert inside.tolist() == [True, True, True, True, False, True, False, False]
    # byte 24 is in the line gap; byte 83 is lane 3 of surface 1 = channel 11 >= 10 (padding
    # lane); byte 64 is past both lines of surface 0
    assert coords[5].tolist() == [9, 0, 0]


def test_diff_region_reports_elements_and_gaps() -> None:
    cube = OutputCube("PDP", 0x100, width=2, height=1, channels=4, line_stride=16, surface_stride=16, bpe=2, atom=8)
    exp = np.zeros(16, dtype=np.uint8)
    act = exp.copy()
    act[2:4] = np.frombuffer(np.int16(-300).tobytes(), dtype=np.uint8)  # (c=1, h=0, w=0)
    act[12] = 7  # (c=2, w=1)
    d = diff_region(exp, act, 0x100, cube)
    assert (d.n_bytes, d.n_elements, d.n_outside) == (3, 2, 0)
    assert d.element(0) == "(c=1,h=0,w=0) expected 0 got -300"
    assert d.per_channel == {1: 1, 2: 1}
    assert "worst (c=1,h=0,w=0) expected 0 got -300" in d.summary()


def test_bad_bug_specs_name_the_register() -> None:
    rm = load_profile("nv_small").regmap
    with pytest.raises(ValueError, match="SDP.D_CVT_OFSET"):
        parse_bug("SDP.D_CVT_OFSET.CVT_OFFSET+1", rm)
    with pytest.raises(ValueError, match="expected BLOCK.REGISTER.FIELD"):
        parse_bug("cvt offset plus one", rm)
    assert parse_bug("stuck:SDP:3:1", rm).channel == 3


@pytest.fixture(scope="module")
def trace_sets() -> Path:
    root = os.environ.get("NVDLA_TRACE_SETS")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA_TRACE_SETS (e.g. ../shared/nvdla/trace_tests) is not set")
    return Path(root)


BUGS = [  # (bug, trace, profile, the register the hint must rank in its top 3)
    ("SDP.D_CVT_OFFSET.CVT_OFFSET+1", "nv_small/sdp_3x3x33_bs_int8_reg_0", "nv_small", "SDP.D_CVT_OFFSET.CVT_OFFSET"),
    ("SDP.D_DP_BS_ALU_SRC_VALUE.BS_ALU_OPERAND+1", "nv_small/sdp_3x3x33_bs_int8_reg_0", "nv_small",
     "SDP.D_DP_BS_ALU_SRC_VALUE.BS_ALU_OPERAND"),
    ("CDP.D_DATOUT_OFFSET.DATOUT_OFFSET+1", "nv_small/cdp_8x8x32_lrn3_int8_0", "nv_small", "CDP.D_DATOUT_OFFSET.DATOUT_OFFSET"),
    ("CACC.D_CLIP_CFG.CLIP_TRUNCATE+1", "nv_small/dc_14x7x49_3x4x49x32_int8_0", "nv_small", "CACC.D_CLIP_CFG.CLIP_TRUNCATE"),
    ("SDP.S_LUT_CFG.LUT_UFLOW_PRIORITY^1", "nv_small_256_full/sdp_3x3x33_ew_le_exp_int8", "nv_small_256_full",
     "SDP.S_LUT_CFG.LUT_UFLOW_PRIORITY"),
    ("PDP.D_POOLING_PADDING_VALUE_1_CFG.PAD_VALUE_1X+1", "nv_small/pdp_8x9x19_3x3_ave_int8_0", "nv_small",
     "PDP.D_POOLING_PADDING_VALUE_1_CFG.PAD_VALUE_1X"),
]


def _failing(trace_sets: Path, bug: str, name: str, profile: str):  # noqa: ANN202
    tr = parse_trace(trace_sets / name)
    with ModelTarget(profile, bugs=[bug]) as m:
        res = run_trace(tr, m, poison=True)
        actual = {c.line: m.mem_read(c.address, c.size, port=c.port) for c in res.checks if c.kind == "crc"}
    assert res.status == "failed", f"{bug} did not change {name}'s output"
    return tr, actual


@pytest.mark.parametrize("bug, name, profile, register", BUGS, ids=[b[0] for b in BUGS])
def test_injected_bug_is_explained_and_its_register_suspected(trace_sets: Path, bug: str, name: str,
                                                              profile: str, register: str) -> None:  # fmt: skip
    tr, actual = _failing(trace_sets, bug, name, profile)
    d = diagnose_trace(tr, actual, profile, runs=160)  # bounded by runs: load-independent
    assert d.regions, d.summary()
    _, region = d.regions[0]
    assert region.n_elements > 0 and region.coords.shape[1] == 3
    text = d.summary()
    assert "first (c=" in text and "worst (c=" in text
    top = [s.register for s in d.suspects[:3]]
    assert register in top, text
    assert any(s.explains for s in d.suspects if s.register == register), text


def test_stuck_bit_is_located_to_its_channel(trace_sets: Path) -> None:
    tr, actual = _failing(trace_sets, "stuck:CDP:3:0", "nv_small/cdp_8x8x32_lrn3_int8_0", "nv_small")
    d = diagnose_trace(tr, actual, "nv_small", runs=40)
    _, region = d.regions[0]
    assert set(region.per_channel) == {3} and region.n_elements == 64  # every pixel of channel 3
    assert all(int(a) - int(e) == 1 for e, a in zip(region.expected, region.actual))  # bit 0 set on 0s
    assert not any(s.explains for s in d.suspects)  # no register explains a stuck bit


def test_trace_command_explains_a_model_bug(trace_sets: Path, capsys) -> None:  # noqa: ANN001
    t = trace_sets / "nv_small" / "sdp_3x3x33_bs_int8_reg_0"
    assert main(["trace", str(t), "--poison", "--model-bug", "SDP.D_CVT_OFFSET.CVT_OFFSET+1"]) == 1
    out = capsys.readouterr().out
    assert "expected 0x87c9168e" in out and "MISMATCH" in out
    assert "SDP output elements of 33x3x3 (int8) differ" in out
    assert "1. SDP.D_CVT_OFFSET.CVT_OFFSET: programmed 0x0, as 0x1 the model reproduces" in out
    assert main(["trace", str(t), "--target", "model", "--model-bug", "NOPE.X.Y+1"]) == 2


def test_regress_with_an_injected_bug_explains_the_failure(trace_sets: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code = main(["regress", "--suite", "traces", "--traces", str(trace_sets / "nv_small"), "--results-dir",
                 str(tmp_path), "--model-bug", "SDP.D_CVT_OFFSET.CVT_OFFSET+1",
                 "-k", "sdp_3x3x33_bs_int8_reg_0 or cdp_8x8x32_lrn3_int8_0"])
    out = capsys.readouterr().out
    assert code == 1
    assert "summary: 1 passed, 1 failed" in out  # the CDP trace does not use the SDP convertor
    assert "294 SDP output elements of 33x3x3 (int8) differ" in out
    assert "1. SDP.D_CVT_OFFSET.CVT_OFFSET: programmed 0x0, as 0x1 the model reproduces" in out
    diags = sorted({p.resolve() for p in tmp_path.glob("*/logs/*.diag.json")})  # the run dir and latest/
    assert len(diags) == 1 and (diags[0].parent.parent / "report.html").is_file()
    # the report's row gives the cause, not only the CRC line: the element diff and the suspect
    page = (diags[0].parent.parent / "report.html").read_text()
    row = next(r for r in page.split("<tr ") if "sdp_3x3x33_bs_int8_reg_0" in r and 'class="cause"' in r)
    assert "294 SDP output elements of 33x3x3 (int8) differ" in row and "MISMATCH" in row
    assert "suspect SDP.D_CVT_OFFSET.CVT_OFFSET (0 of " in row, row
    assert main(["regress", "--suite", "traces", "--traces", str(trace_sets / "nv_small"), "--target", "verilator",
                 "--model-bug", "SDP.D_CVT_OFFSET.CVT_OFFSET+1", "--nvdla-hw", str(tmp_path)]) == 2


def test_the_hint_is_the_same_on_an_idle_and_a_loaded_machine(trace_sets: Path) -> None:
    """The search is bounded by model runs, not seconds: two CPU-bound processes beside it change
    its time, never its answer; a search cut short says so and names the flag that finishes it."""
    import subprocess
    import sys

    bug, name, profile, _ = BUGS[0]
    tr, actual = _failing(trace_sets, bug, name, profile)
    idle = diagnose_trace(tr, actual, profile, runs=25)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = diagnose_trace(tr, actual, profile, runs=25)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert [(s.register, s.remaining_bytes) for s in idle.suspects] == \
        [(s.register, s.remaining_bytes) for s in loaded.suspects]
    assert idle.searched == loaded.searched == 25 and idle.candidates == loaded.candidates > 25
    assert idle.stopped_early and f"--hint-runs {idle.candidates}" in idle.summary()
