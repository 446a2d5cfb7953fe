"""bench/bench_network.py: its ResNet-50 shape table, its MAC counting and, where NVDLA's
software regression and nvdla/sw are here, MNIST through the firmware on the model target."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _bench import bench_module

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="module")
def bench():
    with bench_module("bench_network") as mod:
        yield mod


def test_resnet50_table_counts_torchvisions_macs(bench):
    """Oracle: torchvision's resnet50 (v1.5) lists 4.09 GFLOPS counted as multiply-accumulates;
    conv1 by hand: 112 x 112 outputs x 64 kernels x 7 x 7 x 3 = 118,013,952; fc 2048 x 1000."""
    layers = bench.resnet50_layers()
    convs = [x for x in layers if x.kernels]
    assert len(convs) == 54  # 1 + 3 x 16 bottleneck convolutions + 4 projections + fc
    assert len(layers) - len(convs) == 2  # max and average pooling
    assert layers[0].out_wh == (112, 112) and layers[0].macs == 112 * 112 * 64 * 7 * 7 * 3
    assert layers[-1].macs == 2048 * 1000
    assert next(x for x in layers if x.name == "conv5_3c").out_wh == (7, 7)
    assert round(sum(x.macs for x in layers) / 1e9, 2) == 4.09


def test_bottleneck_stride_on_the_3x3(bench):
    """v1.5: the first block of stages 3-5 strides its 3x3 convolution and its projection."""
    by = {x.name: x for x in bench.resnet50_layers()}
    assert by["conv3_1a"].in_whc == (56, 56, 256) and by["conv3_1a"].out_wh == (56, 56)
    assert by["conv3_1b"].stride == 2 and by["conv3_1b"].out_wh == (28, 28)
    assert by["conv3_1proj"].out_wh == (28, 28) and by["conv3_1proj"].kernels == 512


def test_bad_arguments_exit_2(bench, capsys):
    assert bench.main(["--repeat", "0"]) == 2
    assert "--repeat" in capsys.readouterr().err


def _traces() -> Path | None:
    env = os.environ.get("NVDLA_TRACES")
    p = Path(env) if env else SHARED / "nvdla" / "trace_tests" / "nv_small"
    return p if (p / "dc_35x22x54_6x8x54x29_int8_0").is_dir() else None


def test_trace_macs_from_csc_registers(bench):
    """The trace's CSC registers against its name (``dc_WxHxC_RxSxCxK``: input 35x22x54, kernel
    6x8x54, 29 kernels); the output 36x24 is the registers' (padding), not the name's."""
    root = _traces()
    if root is None:
        pytest.skip("NVDLA's nv_small traces are not here: set NVDLA_TRACES to nvdla/hw's "
                    "verif/tests/trace_tests/nv_small")
    from nvdla_hil.harness.traces import parse_trace

    (w, h, k, r, s, c), = bench.trace_convs(parse_trace(root / "dc_35x22x54_6x8x54x29_int8_0"))
    assert (k, r, s, c) == (29, 6, 8, 54)
    assert (w, h) == (36, 24)


def test_mnist_on_the_model_matches_nvdlas_md5(bench):
    """Oracle: NVDLA's golden MD5 of MNIST (``golden/NN_L0_0_*/dla/lead.md5``); every one of its
    11 DLA operations is timed, its CONV operations' MACs from the descriptors (LeNet: 24x24x20
    x 5x5x1, 8x8x50 x 5x5x20, 1x1x500 x 4x4x50, 1x1x10 x 1x1x500)."""
    env = os.environ.get("NVDLA_LOADABLES")
    loadables = Path(env) if env else SHARED / "nvdla_sw"
    sw = os.environ.get("NVDLA_SW")
    if not (loadables / "flatbufs" / "kmd" / "NN").is_dir():
        pytest.skip("NVDLA's software regression is not here: set NVDLA_LOADABLES (e.g. ../shared/nvdla_sw)")
    if not sw or not (Path(sw) / "kmd" / "firmware" / "scheduler.c").is_file():
        pytest.skip("NVDLA_SW is not set to an nvdla/sw checkout (its kmd/firmware runs MNIST)")
    args = bench.build_parser().parse_args(["--loadables", str(loadables), "--nvdla-sw", sw])
    run = bench.run_mnist("model", args, 1)
    assert run.ok, (run.md5, run.expected, run.error)
    assert len(run.ops) == 11 and all(o.seconds >= 0 for o in run.ops)
    assert [o.macs for o in run.ops if o.name == "CONV"] == [288_000, 1_600_000, 400_000, 5_000]
    assert sum(o.seconds for o in run.ops) <= run.seconds
