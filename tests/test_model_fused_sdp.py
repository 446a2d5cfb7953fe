"""A convolution whose SDP reads an operand (SDP_RDMA enabled with the convolution, as NVDLA's
firmware programs a fused conv + bias/BatchNorm/Scale), on nv_small, which has no secondary
memory port.

In flying mode SDP takes its input from CACC: MRDMA's ``D_SRC_DMA_CFG.SRC_RAM_TYPE`` is not used,
and NVDLA's firmware (``kmd/firmware/sdp.c``) does not write it, leaving its reset value, which
names the secondary port (CV). The model refused such a layer on nv_small ("selects the secondary
memory port") although the RTL runs it: every int8 network NVDLA's compiler builds for nv_small
has them.

Oracle: the RTL golden of ``conv_image_rtl/fuzz-conv-image-s31-00000`` (Verilator, nv_small). The
layer is changed by a BS multiplier of 1 per channel read from memory (``x * 1 >> 0``: the
identity on CACC's output), so the RTL's output is the golden unchanged.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import yaml

from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import bundled_root, run_case

CASE = "conv_image_rtl/fuzz-conv-image-s31-00000"
OPERAND_ADDR = 0x80010000


def _with_operand(tmp_path: Path, *, src_ram_type: int | None) -> Path:
    src = bundled_root() / CASE
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    doc = yaml.safe_load((dst / "case.yaml").read_text())
    channels = doc["outputs"][0]["shape"][-1]
    regs = doc["registers"]
    regs = [r for r in regs if r["reg"] != "SDP.D_DP_BS_CFG"]
    cube = {r["reg"].split(".")[1]: r for r in regs if r["reg"].startswith("SDP.D_DATA_CUBE")}
    regs += [
        {"reg": f"SDP_RDMA.{name}", "fields": dict(r["fields"])} for name, r in cube.items()
    ] + [
        {"reg": "SDP_RDMA.D_FEATURE_MODE_CFG", "fields": {"FLYING_MODE": 1, "WINOGRAD": 0, "IN_PRECISION": 0,
                                                       "PROC_PRECISION": 0, "OUT_PRECISION": 0, "BATCH_NUMBER": 0}},
        {"reg": "SDP.D_DP_BS_CFG", "fields": {"BS_BYPASS": 0, "BS_ALU_BYPASS": 1, "BS_ALU_ALGO": 0, "BS_MUL_BYPASS": 0,
                                              "BS_MUL_PRELU": 0, "BS_RELU_BYPASS": 1}},
        {"reg": "SDP.D_DP_BS_MUL_CFG", "fields": {"BS_MUL_SRC": 1, "BS_MUL_SHIFT_VALUE": 0}},
        {"reg": "SDP_RDMA.D_BRDMA_CFG", "fields": {"BRDMA_DISABLE": 0, "BRDMA_DATA_USE": 0, "BRDMA_DATA_SIZE": 1,
                                                   "BRDMA_DATA_MODE": 0, "BRDMA_RAM_TYPE": 1}},
        {"reg": "SDP_RDMA.D_BS_BASE_ADDR_LOW", "fields": {"BS_BASE_ADDR_LOW": OPERAND_ADDR}},
        {"reg": "SDP_RDMA.D_BS_BASE_ADDR_HIGH", "fields": {"BS_BASE_ADDR_HIGH": 0}},
        {"reg": "SDP_RDMA.D_BS_LINE_STRIDE", "fields": {"BS_LINE_STRIDE": 16}},
        {"reg": "SDP_RDMA.D_BS_SURFACE_STRIDE", "fields": {"BS_SURFACE_STRIDE": 16}},
        {"reg": "SDP_RDMA.D_ERDMA_CFG", "fields": {"ERDMA_DISABLE": 1}},
        {"reg": "SDP_RDMA.D_NRDMA_CFG", "fields": {"NRDMA_DISABLE": 1}},
    ]
    if src_ram_type is not None:
        regs.append({"reg": "SDP_RDMA.D_SRC_DMA_CFG", "fields": {"SRC_RAM_TYPE": src_ram_type}})
    doc["registers"] = regs
    doc["launch"] = ["SDP_RDMA", "SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"]
    np.ones((1, 1, channels), dtype=np.int16).tofile(dst / "bs_mul.bin")
    doc["inputs"].append({"name": "bs_mul", "layout": "nvdla.feature", "params": {"atom_bytes": 16}, "dtype": "int16",
                          "shape": [1, 1, channels], "address": OPERAND_ADDR, "port": "pri_mem", "data": "bs_mul.bin"})
    (dst / "case.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return dst


def test_fused_conv_sdp_operand_ignores_the_unused_mrdma_port_on_nv_small(tmp_path):
    """D_SRC_DMA_CFG left at reset (CV), as NVDLA's firmware leaves it: the layer runs and gives
    the RTL's output (before: refused, "SRC_RAM_TYPE selects the secondary memory port")."""
    case = _with_operand(tmp_path / "reset", src_ram_type=None)
    with ModelTarget("nv_small") as t:
        result = run_case(case, t)
    assert result.passed, result


def test_fused_conv_sdp_operand_with_mrdma_on_mc_is_the_same(tmp_path):
    """The same layer with SRC_RAM_TYPE written MC, as a trace would: the same output."""
    case = _with_operand(tmp_path / "mc", src_ram_type=1)
    with ModelTarget("nv_small") as t:
        result = run_case(case, t)
    assert result.passed, result


def test_a_real_operand_port_is_still_checked(tmp_path):
    """What the layer does read is still refused on a port nv_small lacks: BRDMA on CV."""
    case = _with_operand(tmp_path / "cv", src_ram_type=None)
    text = (case / "case.yaml").read_text().replace("BRDMA_RAM_TYPE: 1", "BRDMA_RAM_TYPE: 0")
    (case / "case.yaml").write_text(text)
    with ModelTarget("nv_small") as t:
        result = run_case(case, t)
    assert not result.passed
    assert "BRDMA_RAM_TYPE selects the secondary memory port" in str(result), result
