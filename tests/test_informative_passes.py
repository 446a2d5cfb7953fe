"""Every pass informative (issue 40): the status registers a layer sets are compared (SDP's
``D_STATUS.STATUS_UNEQUAL`` of EW ALU EQL mode, which writes no output), each case's result says
how much its comparison could tell (distinct values, share at the type's extremes, one value,
all poison), and the regression summary counts and lists the *weak* passes.

Oracles of the goldens here: the EQL cases are hand-derived from the precision-semantics document
(``/work/shared/docs/nvdla-precision-semantics.md``; 3.0: with BS / BN bypassed the EW input is
the int8 input value, 3.2: EQL gives 0 where ``y == opA`` else 1, 3.3: EQL mode writes nothing to
memory and sets ``D_STATUS.STATUS_UNEQUAL`` to 1 if any result is non-zero): their output golden
is the poison image (nothing written) and their status golden the 3.3 flag. The information
contents are of hand-built arrays (counted by construction). The summary test's weak golden is
the bundled case ``sdp_cvt/sdp_cvt-s1-003``'s own (golden_source kind rtl: a Verilator RTL build).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from nvdla_hil.drivers.precision import golden_status_values
from nvdla_hil.harness.analysis.compare import information_content
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import FORMAT, POISON_BYTE, VectorError, bundled_root, load_case, pack_surface, \
    packed_size, run_case, write_case
from nvdla_hil.harness.vectors.load import golden_statuses, layer_statuses
from nvdla_hil.harness.vectors.run import execute_layer, output_information

ROOT = bundled_root()
PY = sys.executable
PROFILE = "nv_small_256_full"  # has the SDP EW stage (sdp_ew)
C, H, W = 8, 2, 3
OPERAND = 5  # EW ALU operand from the register (EW_ALU_SRC = REG)
#: hand oracle (semantics doc 3.0 / 3.2 / 3.3)
HAND = {"kind": "hand", "description": "semantics doc 3.0, 3.2, 3.3: BS/BN bypassed, EW ALU EQL against a "
                                       "register operand; nothing written (poison image), STATUS_UNEQUAL = "
                                       "1 iff any input element differs from the operand"}


def _eql_case(folder: Path, x: np.ndarray, *, statuses: dict[str, int] | None = None, name: str = "eql") -> Path:
    """A standalone SDP layer in EW ALU EQL mode (BS, BN, EW MUL and LUT bypassed) comparing the
    int8 cube ``x`` with :data:`OPERAND`; its output golden is all poison (3.3: nothing is written)."""
    params = {"atom_bytes": 8}
    nbytes = packed_size("nvdla.feature", (C, H, W), np.dtype(np.int8), params)
    regs = [
        {"reg": "SDP_RDMA.D_DATA_CUBE_WIDTH", "fields": {"WIDTH": W - 1}},
        {"reg": "SDP_RDMA.D_DATA_CUBE_HEIGHT", "fields": {"HEIGHT": H - 1}},
        {"reg": "SDP_RDMA.D_DATA_CUBE_CHANNEL", "fields": {"CHANNEL": C - 1}},
        {"reg": "SDP.D_DATA_CUBE_WIDTH", "fields": {"WIDTH": W - 1}},
        {"reg": "SDP.D_DATA_CUBE_HEIGHT", "fields": {"HEIGHT": H - 1}},
        {"reg": "SDP.D_DATA_CUBE_CHANNEL", "fields": {"CHANNEL": C - 1}},
        {"reg": "SDP_RDMA.D_SRC_BASE_ADDR_LOW", "value": 0x80000000},
        {"reg": "SDP_RDMA.D_SRC_LINE_STRIDE", "value": W * 8},
        {"reg": "SDP_RDMA.D_SRC_SURFACE_STRIDE", "value": W * H * 8},
        {"reg": "SDP_RDMA.D_FEATURE_MODE_CFG", "fields": {"IN_PRECISION": "INT8", "PROC_PRECISION": "INT8"}},
        {"reg": "SDP_RDMA.D_BRDMA_CFG", "fields": {"BRDMA_DISABLE": 1}},
        {"reg": "SDP_RDMA.D_NRDMA_CFG", "fields": {"NRDMA_DISABLE": 1}},
        {"reg": "SDP_RDMA.D_ERDMA_CFG", "fields": {"ERDMA_DISABLE": 1}},
        {"reg": "SDP_RDMA.D_SRC_DMA_CFG", "fields": {"SRC_RAM_TYPE": "MC"}},
        {"reg": "SDP.D_DST_BASE_ADDR_LOW", "value": 0x80010000},
        {"reg": "SDP.D_DST_LINE_STRIDE", "value": W * 8},
        {"reg": "SDP.D_DST_SURFACE_STRIDE", "value": W * H * 8},
        {"reg": "SDP.D_DST_DMA_CFG", "fields": {"DST_RAM_TYPE": "MC"}},
        {"reg": "SDP.D_DATA_FORMAT", "value": 0},
        {"reg": "SDP.D_DP_BS_CFG", "fields": {"BS_BYPASS": 1}},
        {"reg": "SDP.D_DP_BN_CFG", "fields": {"BN_BYPASS": 1}},
        {"reg": "SDP.D_DP_EW_ALU_CFG", "fields": {"EW_ALU_SRC": 0, "EW_ALU_CVT_BYPASS": 1}},
        {"reg": "SDP.D_DP_EW_ALU_SRC_VALUE", "fields": {"EW_ALU_OPERAND": OPERAND}},
        {"reg": "SDP.D_DP_EW_CFG", "fields": {"EW_BYPASS": 0, "EW_ALU_BYPASS": 0, "EW_ALU_ALGO": "EQL",
                                              "EW_MUL_BYPASS": 1, "EW_LUT_BYPASS": 1}},
    ]
    man = {
        "format": FORMAT, "name": name, "kind": "layer", "unit": "SDP", "profile": PROFILE,
        "description": "EW ALU EQL against a register operand (semantics doc 3.3)",
        "registers": regs, "convertors": {"sdp_out": {"offset": 0, "scale": 1, "shift": 0}},
        "inputs": [{"name": "src", "layout": "nvdla.feature", "params": params, "dtype": "int8",
                    "shape": [C, H, W], "address": 0x80000000, "data": "src.bin"}],
        "outputs": [{"name": "dst", "layout": "nvdla.feature", "params": params, "dtype": "int8",
                     "shape": [C, H, W], "address": 0x80010000, "expected": "dst.bin", "rule": "bitexact"}],
    }
    blobs = {"src.bin": x.astype(np.int8).tobytes(), "dst.bin": bytes([POISON_BYTE]) * nbytes}
    write_case(folder, man, blobs, golden_source=HAND, statuses=statuses)
    return folder


def _cube(differing: int = 0) -> np.ndarray:
    x = np.full((C, H, W), OPERAND, dtype=np.int8)
    x.reshape(-1)[:differing] = OPERAND + 1
    return x


# ---- (a) the EQL status is part of the golden and compared ------------------------------------------


def test_eql_layer_sets_d_status_and_the_model_reads_it_back(tmp_path):
    case = load_case(_eql_case(tmp_path / "eql", _cube(differing=1)))
    assert layer_statuses(case) == ("SDP.D_STATUS",)
    with ModelTarget(PROFILE) as t:
        rb = execute_layer(case, t)
    # semantics doc 3.3: one element differs from the operand -> STATUS_UNEQUAL = 1; nothing written
    assert rb.statuses == {"SDP.D_STATUS": 1}
    assert np.all(rb.outputs["dst"] == POISON_BYTE)


def test_eql_golden_records_d_status_and_a_wrong_dut_fails_naming_it(tmp_path):
    # the golden written from a target's read-back (as a generator or fuzz --keep would), checked
    # against the hand oracle: all elements equal the operand -> STATUS_UNEQUAL = 0 (doc 3.2, 3.3)
    probe = load_case(_eql_case(tmp_path / "probe", _cube()))
    with ModelTarget(PROFILE) as t:
        rb = execute_layer(probe, t)
    assert rb.statuses == {"SDP.D_STATUS": 0}
    folder = _eql_case(tmp_path / "eql", _cube(), statuses=rb.statuses)
    doc = yaml.safe_load((folder / "case.yaml").read_text())
    assert doc["statuses"] == {"SDP.D_STATUS": 0}
    assert list(doc).index("statuses") < list(doc).index("golden_source")
    case = load_case(folder)
    assert golden_statuses(case) == {"SDP.D_STATUS": 0}
    with ModelTarget(PROFILE) as t:
        good = run_case(case, t)
    assert good.passed, good.summary()
    assert good.statuses is not None and good.statuses.matched == {"SDP.D_STATUS": 0}
    # a DUT whose EW ALU sees operand 6: every element now differs -> it reports STATUS_UNEQUAL = 1
    with ModelTarget(PROFILE, bugs=["SDP.D_DP_EW_ALU_SRC_VALUE.EW_ALU_OPERAND+1"]) as bad_dut:
        bad = run_case(case, bad_dut)
    assert bad.status == "failed", bad.summary()
    assert [c.passed for c in bad.checks] == [True]  # the output check alone (all poison) cannot see it
    assert "SDP.D_STATUS expected 0 got 1" in bad.message
    assert "SDP.D_STATUS: expected 0, got 1  MISMATCH" in bad.summary()


def test_eql_status_golden_of_one_is_an_informative_pass(tmp_path):
    case = load_case(_eql_case(tmp_path / "eql", _cube(differing=3), statuses={"SDP.D_STATUS": 1}))
    with ModelTarget(PROFILE) as t:
        res = run_case(case, t)
    assert res.passed and not res.weak_pass, res.summary()
    info = res.informativeness
    assert info is not None and info.registers == {"SDP.D_STATUS": 1}
    assert info.outputs["dst"].all_poison
    assert info.why == f"output all poison: the layer wrote nothing ({C * H * W} elements); compared SDP.D_STATUS = 1"


def test_eql_case_without_status_golden_still_runs_as_a_weak_pass(tmp_path):
    case = load_case(_eql_case(tmp_path / "eql", _cube(differing=1)))  # an old vector: no statuses
    assert golden_statuses(case) is None
    with ModelTarget(PROFILE) as t:
        res = run_case(case, t)
    assert res.passed and res.statuses is None
    assert res.actual_statuses == {"SDP.D_STATUS": 1}  # read back all the same (for fuzz --keep / regolden)
    assert res.weak_pass
    assert res.informativeness is not None and res.informativeness.uncompared == ("SDP.D_STATUS",)
    assert "output all poison: the layer wrote nothing" in res.informativeness.why
    assert "SDP.D_STATUS set by the layer but not in the golden: not compared" in res.informativeness.why


def test_a_status_golden_of_zero_with_unwritten_outputs_is_weak(tmp_path):
    case = load_case(_eql_case(tmp_path / "eql", _cube(), statuses={"SDP.D_STATUS": 0}))
    with ModelTarget(PROFILE) as t:
        res = run_case(case, t)
    assert res.passed and res.weak_pass  # compared, but a layer computing nothing reads 0 too
    assert "compared 1 status / statistics registers, all 0 in the golden" in res.informativeness.why


@pytest.mark.parametrize("edit, where, words", [
    ({"SDP.D_NOT_A_REG": 1}, "statuses.SDP.D_NOT_A_REG", "not a status register"),
    ({"SDP.D_STATUS": 2}, "statuses.SDP.D_STATUS", "outside [0, 1]"),
    ({"SDP.D_STATUS": "yes"}, "statuses.SDP.D_STATUS", "expected an integer"),
    ([1], "statuses", "expected a mapping"),
])
def test_loader_checks_statuses(tmp_path, edit, where, words):
    folder = _eql_case(tmp_path / "eql", _cube())
    path = folder / "case.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["statuses"] = edit
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(VectorError) as ei:
        load_case(folder)
    assert where in str(ei.value) and words in str(ei.value), str(ei.value)


def test_rtl_golden_never_records_cycle_counting_counters():
    # semantics doc 13 (drivers.precision.RTL_INEXACT): the RTL's SDP LUT counters count clocks
    got = golden_status_values({"SDP.D_PERF_LUT_LE_HIT": 9, "SDP.D_STATUS": 1, "PDP.D_NAN_INPUT_NUM": 0}, "rtl")
    assert got == {"SDP.D_STATUS": 1, "PDP.D_NAN_INPUT_NUM": 0}
    assert golden_status_values({"SDP.D_PERF_LUT_LE_HIT": 9}, "cmod") == {"SDP.D_PERF_LUT_LE_HIT": 9}


# ---- (b) information content of a hand-built output ---------------------------------------------------


def test_information_content_int8():
    x = np.array([-128, 127, 127, 0, 5, 5, 5, -3], dtype=np.int8)  # 5 distinct; 3 of 8 at -128 / 127
    info = information_content(x)
    assert (info.elements, info.distinct, info.saturated) == (8, 5, 3)
    assert info.saturated_share == pytest.approx(3 / 8)
    assert not info.single_value and not info.all_poison and not info.fully_saturated
    assert info.describe() == "5 distinct values in 8 elements, 37.5% at the int8 extremes"


def test_information_content_int16_and_fp16_extremes():
    i16 = np.array([-32768, 32767, 1, 1], dtype=np.int16)
    assert (information_content(i16).distinct, information_content(i16).saturated) == (3, 2)
    # FP16 +-inf and +-65504 (0x7bff, the largest finite) are extremes; 1.0 and NaN are not
    f16 = np.array([np.inf, -np.inf, 65504, -65504, 1.0, np.nan], dtype=np.float16)
    info = information_content(f16)
    assert (info.distinct, info.saturated) == (6, 4)
    # +0 and -0 are two bit patterns, as a bit-exact comparison sees them
    assert information_content(np.array([0.0, -0.0], dtype=np.float16)).distinct == 2


def test_information_content_single_value_and_all_poison():
    zeros = information_content(np.zeros(4096, dtype=np.int8))
    assert zeros.single_value and zeros.value == "0"
    assert zeros.describe() == "golden is one value (0) in all 4096 elements"
    full = information_content(np.full(6, 127, dtype=np.int8))
    assert full.fully_saturated and full.single_value
    image = np.full(64, POISON_BYTE, dtype=np.uint8)
    poisoned = information_content(image.view(np.int8)[:48], image, poison=POISON_BYTE)
    assert poisoned.all_poison and poisoned.single_value
    assert poisoned.describe() == "output all poison: the layer wrote nothing (48 elements)"
    image[3] = 0
    assert not information_content(image.view(np.int8), image, poison=POISON_BYTE).all_poison


def test_output_information_of_a_packed_surface(tmp_path):
    # a packed golden: channel-padding lanes are no elements (C = 5 in 8-byte atoms)
    x = np.arange(-2, 3, dtype=np.int8).repeat(2 * 3).reshape(5, 2, 3)  # 5 distinct values, one per channel
    folder = tmp_path / "c"
    params = {"atom_bytes": 8}
    packed = pack_surface("nvdla.feature", x, params)
    man = {"format": FORMAT, "name": "c", "kind": "layer", "unit": "SDP", "profile": "nv_small",
           "inputs": [], "outputs": [{"name": "dst", "layout": "nvdla.feature", "params": params, "dtype": "int8",
                                      "shape": [5, 2, 3], "address": 0x80010000, "expected": "dst.bin"}]}
    write_case(folder, man, {"dst.bin": packed.tobytes()}, golden_source=HAND)
    info = output_information(load_case(folder).outputs[0])
    assert info is not None and (info.elements, info.distinct, info.saturated) == (30, 5, 0)


# ---- (c) the regression summary counts and lists weak passes --------------------------------------------

ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_TARGET", "NVDLA_HIL_LAB",
            "NVDLA_HIL_BOARD", "NVDLA_HIL_CONFIG", "NVDLA_HIL_SUMMARY", "NVDLA_TXN_TESTS")


def test_bundled_single_value_case_is_a_weak_pass():
    # sdp_cvt-s1-003's golden (RTL) is 0 in all 80 elements; its statistics golden all 0
    with ModelTarget("nv_small") as t:
        weak = run_case(load_case(ROOT / "sdp_cvt" / "sdp_cvt-s1-003"), t)
        strong = run_case(load_case(ROOT / "sdp_cvt" / "sdp_cvt-s1-000"), t)
    assert weak.weak_pass and weak.informativeness.why.startswith("golden is one value (0) in all 80 elements")
    assert strong.passed and not strong.weak_pass, strong.informativeness


def test_regress_summary_counts_and_lists_weak_passes(tmp_path):
    vec = tmp_path / "vec"
    vec.mkdir()
    for name in ("sdp_cvt-s1-000", "sdp_cvt-s1-003"):
        shutil.copytree(ROOT / "sdp_cvt" / name, vec / name)
    _eql_case(vec / "eql-no-status", _cube(differing=1), name="eql-no-status")
    _eql_case(vec / "eql-status", _cube(differing=1), statuses={"SDP.D_STATUS": 1}, name="eql-status")
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    res = tmp_path / "results"
    r = subprocess.run([PY, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "vectors", "--vectors", str(vec),
                        "--profile", f"nv_small,{PROFILE}", "--results-dir", str(res)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("summary: "))
    assert line.startswith("summary: 4 passed, 0 failed"), line
    assert line.endswith("; 2 of 4 passes weak (single-value or unwritten outputs): see summary.txt"), line
    summary = (res / "latest" / "summary.txt").read_text()
    listed = [ln.strip() for ln in summary.splitlines() if ln.startswith("  test_vector[")]
    assert len(listed) == 2, summary
    assert listed[0].startswith("test_vector[eql-no-status]: output all poison: the layer wrote nothing")
    assert "SDP.D_STATUS set by the layer but not in the golden: not compared" in listed[0]
    assert listed[1].startswith("test_vector[sdp_cvt-s1-003]: golden is one value (0) in all 80 elements")
    assert "weak passes (2)" in summary and "eql-status]:" not in summary.split("weak passes")[1]
    # the terminal has the count, not the list (it is in summary.txt)
    assert "test_vector[sdp_cvt-s1-003]: golden is one value" not in r.stdout
    junit = (res / "latest" / "junit.xml").read_text()
    assert junit.count('name="weak_pass"') == 2
