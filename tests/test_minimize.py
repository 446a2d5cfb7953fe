"""The minimiser (harness/analysis/minimize.py, `nvdla-hil minimize`): failing NVDLA traces and packed
vectors shrunk to small packed vectors that fail the same way on the same target."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.harness.cli import triage as triage_cli
from nvdla_hil.harness.analysis.minimize import (Signature, case_data_bytes, case_signature, minimize_path, reshape,
                                        trace_data_bytes, trace_to_state)
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import bundled_root, find_cases, load_case, run_case


def cli(*argv: str) -> int:
    p = argparse.ArgumentParser(prog="nvdla-hil")
    sub = p.add_subparsers(dest="command", required=True)
    triage_cli.add_subcommands(sub)
    args = p.parse_args(list(argv))
    return int(args.func(args) or 0)


@pytest.fixture(scope="module")
def trace_sets() -> Path:
    root = os.environ.get("NVDLA_TRACE_SETS")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA_TRACE_SETS (e.g. ../shared/nvdla/trace_tests) is not set")
    return Path(root)


CASES = [  # (trace, profile, injected bug, smallest cube the failure needs)
    ("nv_small/sdp_3x3x33_bs_int8_reg_0", "nv_small", "SDP.D_CVT_OFFSET.CVT_OFFSET+1", None),
    ("nv_small/cdp_8x8x32_lrn3_int8_0", "nv_small", "CDP.D_DATOUT_OFFSET.DATOUT_OFFSET+1", None),
    ("nv_small/pdp_8x9x19_3x3_ave_int8_0", "nv_small", "PDP.D_POOLING_PADDING_VALUE_1_CFG.PAD_VALUE_1X+1", None),
    ("nv_small/sdp_8x8x32_bypass_int8_0", "nv_small", "stuck:SDP:3:0", 4),  # channel 3 must exist
    ("nv_small_256_full/sdp_3x3x33_ew_le_exp_int8", "nv_small_256_full", "SDP.S_LUT_CFG.LUT_UFLOW_PRIORITY^1", None),
]


@pytest.mark.parametrize("trace,profile,bug,min_c", CASES, ids=[c[2] for c in CASES])
def test_injected_bugs_on_public_traces_shrink_below_a_tenth(trace_sets, tmp_path, trace, profile, bug, min_c):
    path = trace_sets / trace
    res = minimize_path(path, lambda: ModelTarget(profile, bugs=[bug]), profile=profile, out=tmp_path / "min",
                        budget=20)
    assert res.original_bytes == trace_data_bytes(path)
    assert res.final_bytes * 10 < res.original_bytes, res.summary()
    assert res.signature.checks == ("dst",) and res.signature.unit == trace.split("/")[1][:3].upper()
    if min_c:
        assert res.final_dims[0] == min_c
    # the saved vector: loads, passes on a healthy model, fails the same way on the bugged one
    case = load_case(tmp_path / "min")
    assert case_data_bytes(case) == res.final_bytes
    with ModelTarget(profile) as t:
        assert run_case(case, t).passed
    with ModelTarget(profile, bugs=[bug]) as t:
        assert case_signature(case, t) == res.signature
    print(f"{trace} + {bug}: {res.original_bytes} -> {res.final_bytes} bytes "
          f"({res.original_dims} -> {res.final_dims})")


def test_reshape_recomputes_strides_and_pdp_output(trace_sets):
    st = trace_to_state(trace_sets / "nv_small/pdp_8x9x19_3x3_ave_int8_0", "nv_small")
    assert st.dims == (19, 9, 8)
    small = reshape(st, 5, 4, 3)
    assert small.dims == (5, 4, 3) and np.array_equal(small.x, st.x[:5, :4, :3])
    assert small.regs["PDP_RDMA.D_SRC_LINE_STRIDE"] == 3 * 8 and small.regs["PDP_RDMA.D_SRC_SURFACE_STRIDE"] == 4 * 24
    ow = small.get("PDP", "D_DATA_CUBE_OUT_WIDTH", "CUBE_OUT_WIDTH") + 1
    assert small.regs["PDP.D_DST_LINE_STRIDE"] == ow * 8
    assert reshape(st, 1, 1, 1) is None  # width 1 + PAD_LEFT 1 + PAD_RIGHT 0 < the 3-wide kernel: no output


def test_a_failing_packed_vector_shrinks(tmp_path):
    src = next(p for p in find_cases(bundled_root()) if p.parent.name == "cdp_lut")
    bug = "CDP.D_DATOUT_OFFSET.DATOUT_OFFSET+1"
    case = load_case(src)
    res = minimize_path(src, lambda: ModelTarget(case.profile, bugs=[bug]), out=tmp_path / "v", budget=20)
    assert res.final_bytes < res.original_bytes == case_data_bytes(case)
    assert res.signature == Signature(("dst",), "CDP")
    assert res.lut_entries[1] <= res.lut_entries[0]


def test_cli(trace_sets, tmp_path, capsys):
    t = str(trace_sets / "nv_small/sdp_3x3x33_bs_int8_reg_0")
    out = tmp_path / "m"
    assert cli("minimize", t, "--out", str(out), "--model-bug", "SDP.D_CVT_OFFSET.CVT_OFFSET+1", "--budget", "20") == 0
    assert "fails the same way" in capsys.readouterr().out and (out / "case.yaml").is_file()
    assert cli("minimize", t, "--out", str(out), "--model-bug", "SDP.D_CVT_OFFSET.CVT_OFFSET+1") == 2  # exists
    assert cli("minimize", t, "--out", str(tmp_path / "n")) == 1  # a healthy model: nothing fails
    assert "does not fail" in capsys.readouterr().err
    assert cli("minimize", str(trace_sets / "nv_small/dc_1x1x8_1x1x8x1_int8_0"), "--out", str(tmp_path / "d"),
               "--model-bug", "CACC.D_CLIP_CFG.CLIP_TRUNCATE+1") == 1
    assert "not a packed vector" in capsys.readouterr().err  # a convolution layer (CDMA..CACC->SDP)
