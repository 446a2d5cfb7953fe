"""LeNet compiled by NVDLA's compiler with image input (``--informat nhwc``: A16B16G16R16_F, its default),
nv_full FP16: the first convolution (5x5 on a 1-channel image, pre-extended to 20 channels) is post-extended
by 2 lines (``CSC.D_POST_Y_EXTENSION`` = 1). The loadable is accepted for nv_full (its image input is no
feature surface: harness/loadables/runtime.py ``loadable_config``) and runs on the model target.

Oracle: the float forward pass of the weights the compiler wrote. NVDLA's compiler (nvdla/sw
``WeightTranslationUnit.h`` ``execWtTrnsOpsForIMGPostCE``) steps kernel rows by ``atomic C / Ce`` = 64 / 20 = 3
where its own plan (``prepWtTrnsOpsForIMGPostCE``) and the hardware step by the post factor 2: the MAC steps
get kernel rows (0, 1), (3, 4), (4) instead of (0, 1), (2, 3), (4). NVDLA's C model runs the loadable to the
same dump as the model (byte for byte, measured: ``net run --target cmod``), so the output is the float
network with that first kernel, not the Caffe network's; the test pins both. With the compiler's weight blob
(found byte for byte as ``nvdla.weight.image`` of those rows) replaced by the layout's packing of the real
kernel, the loadable passes its float check (and its dump is the C model's, byte for byte, measured).
Slow (builds the compiler cold): ``make test-slow``."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.cli import main
from nvdla_hil.harness.layouts import get_layout
from nvdla_hil.harness.loadables.check import read_loadable
from nvdla_hil.harness.loadables.runtime import check_profile, loadable_config
from nvdla_hil.harness.networks.compiler import CompilerError, build_compiler
from nvdla_hil.harness.networks.forward import TOLERANCES, agreement, forward
from nvdla_hil.harness.networks.run import read_output
from nvdla_hil.harness.networks.zoo import make_network

pytestmark = pytest.mark.slow

SHARED_SW = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_src" / "sw"


@pytest.fixture(scope="module")
def nvdla_sw() -> str:
    sw = os.environ.get("NVDLA_SW") or (str(SHARED_SW) if (SHARED_SW / "umd").is_dir() else None)
    if not sw or not (Path(sw) / "umd" / "apps" / "compiler").is_dir():
        pytest.skip("no nvdla/sw checkout with umd/: set NVDLA_SW (its compiler is built into the cache)")
    try:
        build_compiler(sw)
    except CompilerError as e:
        pytest.skip(f"NVDLA's compiler cannot be built here: {e}")
    return sw


def test_lenet_image_input_runs_post_extended_on_the_model(nvdla_sw: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "lenet"
    assert main(["net", "gen", "lenet", "--out", str(folder), "--nvdla-sw", nvdla_sw]) == 0
    assert main(["net", "compile", str(folder), "--config", "nv_full", "--precision", "fp16", "--informat", "nhwc",
                 "--nvdla-sw", nvdla_sw]) == 0
    loadable = folder / "nv_full-fp16-nhwc.nvdla"
    ld = read_loadable(loadable)
    assert loadable_config(ld)["atoms"] == [32]  # the 8-byte pixels of the image input are not counted
    check_profile(ld, load_profile("nv_full"), loadable.name)
    with pytest.raises(Exception, match="nv_small has 8-byte atoms"):
        check_profile(ld, load_profile("nv_small"), loadable.name)
    capsys.readouterr()
    dump = tmp_path / "out.dimg"
    main(["net", "run", str(loadable), "--target", "model", "--nvdla-sw", nvdla_sw, "--dump", str(dump)])
    out = capsys.readouterr().out
    assert "UnitNotModelled" not in out and "refused" not in out, out
    got = read_output(dump.read_bytes(), 1.0)
    net = make_network("lenet", 0)
    conv1 = net.layers[0]
    w, b = conv1.blobs
    as_compiled = dataclasses.replace(conv1, blobs=(w[:, :, [0, 1, 3, 4, 4], :], b))
    compiled = dataclasses.replace(net, layers=(as_compiled, *net.layers[1:]))
    x = np.load(folder / "input.npy")
    want = forward(compiled, x)[net.output]
    assert agreement(got.reshape(want.shape), want, TOLERANCES["fp16"]).ok
    caffe = forward(net, x)[net.output]
    assert not agreement(got.reshape(caffe.shape), caffe, TOLERANCES["fp16"]).ok  # the compiler's weights differ

    # the same loadable with the first layer's weights as the hardware reads them: the float check passes
    layout = get_layout("nvdla.weight.image")
    w4 = np.zeros((w.shape[0], 4, *w.shape[2:]), np.float16)  # A16B16G16R16_F: the channel zero-padded to 4
    w4[:, :1] = w
    n = w4.size * 2
    bad = np.asarray(layout.pack(w4[:, :, [0, 1, 3, 4, 4], :], profile="nv_full", post_extension=2)).tobytes()[:n]
    good = np.asarray(layout.pack(w4, profile="nv_full", post_extension=2)).tobytes()[:n]
    data = loadable.read_bytes()
    at = data.find(bad)
    assert at >= 0 and data.find(bad, at + 1) < 0, "the compiler's post-extended weights are not where expected"
    fixed = folder / "fixed-nhwc.nvdla"
    fixed.write_bytes(data[:at] + good + data[at + n:])
    rc = main(["net", "run", str(fixed), "--net", str(folder), "--target", "model", "--nvdla-sw", nvdla_sw])
    out = capsys.readouterr().out
    assert rc == 0 and "PASS lenet" in out, out
