"""Networks through NVDLA's own compiler, built from the user's nvdla/sw checkout (``NVDLA_SW``,
else the shared public checkout ``../shared/nvdla_src/sw``) into the cache: the Caffe model we
write is what the checkout's schema reads back, LeNet compiles for nv_full FP16 and nv_small
INT8 and runs on the model target through NVDLA's firmware, its output agreeing with the float
forward pass (a sanity check, not a golden). Skips, saying why, without a checkout or when the
compiler cannot be built; the first run builds it (about ten minutes on two cores)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest


from nvdla_hil.harness.cli import main
from nvdla_hil.harness.networks.caffe import load_schema, write_caffe
from nvdla_hil.harness.networks.compiler import CompilerBuild, CompilerError, build_compiler, compile_network, find_umd
from nvdla_hil.harness.networks.run import generate
from nvdla_hil.harness.networks.zoo import make_network

pytestmark = pytest.mark.slow  # builds NVDLA's compiler (about 15 min cold) and compiles networks: `make test-slow`, CI's second step

SHARED_SW = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_src" / "sw"


@pytest.fixture(scope="module")
def nvdla_sw() -> str:
    sw = os.environ.get("NVDLA_SW") or (str(SHARED_SW) if (SHARED_SW / "umd").is_dir() else None)
    if not sw or not (Path(sw) / "umd" / "apps" / "compiler").is_dir():
        pytest.skip("no nvdla/sw checkout with umd/: set NVDLA_SW (its compiler is built into the cache)")
    return sw


@pytest.fixture(scope="module")
def compiler(nvdla_sw: str) -> CompilerBuild:
    try:
        return build_compiler(nvdla_sw)
    except CompilerError as e:
        pytest.skip(f"NVDLA's compiler cannot be built here: {e}")


def test_the_caffemodel_reads_back_through_the_checkouts_schema(nvdla_sw: str, compiler: CompilerBuild,
                                                                 tmp_path: Path) -> None:
    from google.protobuf import text_format

    schema = load_schema(find_umd(nvdla_sw), compiler.protoc)
    net = make_network("resnet_block", seed=2)
    write_caffe(schema, net, tmp_path / "n.prototxt", tmp_path / "n.caffemodel")
    model = schema.net.FromString((tmp_path / "n.caffemodel").read_bytes())
    deploy = text_format.Parse((tmp_path / "n.prototxt").read_text(), schema.net())
    assert [la.name for la in deploy.layer] == [la.name for la in net.layers]
    assert list(deploy.input_shape[0].dim) == [1, 3, 16, 16]
    bn = next(la for la in model.layer if la.name == "bn2a_branch2b")
    ours = next(la for la in net.layers if la.name == "bn2a_branch2b")
    assert len(bn.blobs) == 3 and np.array_equal(np.array(bn.blobs[1].data, np.float32), ours.blobs[1])
    conv = next(la for la in model.layer if la.name == "res2a_branch2a")
    assert list(conv.blobs[0].shape.dim) == [16, 16, 3, 3]


def test_a_missing_calibration_entry_is_named(nvdla_sw: str, compiler: CompilerBuild, tmp_path: Path) -> None:
    schema = load_schema(find_umd(nvdla_sw), compiler.protoc)
    files = generate("lenet", 0, tmp_path / "n", lambda net, p, m: write_caffe(schema, net, p, m))
    calib = tmp_path / "partial.json"
    calib.write_text(files.calib.read_text().replace('"pool2"', '"not_pool2"'))
    with pytest.raises(CompilerError, match="nvdla_compiler refused"):
        compile_network(compiler, files.prototxt, files.caffemodel, tmp_path / "x.nvdla", config="nv_small",
                        precision="int8", calib=calib)


@pytest.mark.parametrize(("network", "config", "precision", "informat"), [
    ("lenet", "nv_full", "fp16", "ncxhwx"), ("lenet", "nv_small", "int8", "ncxhwx"),
    ("lenet", "nv_small", "int8", "nhwc"),  # the first convolution reads an image
    ("resnet_block", "nv_full", "fp16", "ncxhwx"), ("resnet_block", "nv_small", "int8", "ncxhwx"),
])
def test_networks_compile_and_run_on_the_model_target(nvdla_sw: str, compiler: CompilerBuild, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str], network: str, config: str,
                                                      precision: str, informat: str) -> None:
    folder = tmp_path / network
    assert main(["net", "gen", network, "--out", str(folder), "--nvdla-sw", nvdla_sw]) == 0
    assert main(["net", "compile", str(folder), "--config", config, "--precision", precision,
                 "--informat", informat, "--nvdla-sw", nvdla_sw]) == 0
    loadable = folder / f"{config}-{precision}{'' if informat == 'ncxhwx' else '-' + informat}.nvdla"
    assert loadable.stat().st_size > 0
    rc = main(["net", "run", str(loadable), "--target", "model", "--nvdla-sw", nvdla_sw,
               "--dump", str(tmp_path / "out.dimg")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"PASS {network}" in out and "correlation" in out
    assert (tmp_path / "out.dimg").read_bytes()[:4] == b"DIMG"


def test_run_fails_when_the_output_is_not_the_networks(nvdla_sw: str, compiler: CompilerBuild, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    for seed in (0, 1):
        assert main(["net", "gen", "lenet", "--seed", str(seed), "--out", str(tmp_path / f"s{seed}"),
                     "--nvdla-sw", nvdla_sw]) == 0
    assert main(["net", "compile", str(tmp_path / "s0"), "--nvdla-sw", nvdla_sw]) == 0
    capsys.readouterr()
    # seed 0's loadable judged against seed 1's input and float output: other weights, same shapes
    assert main(["net", "run", str(tmp_path / "s0" / "nv_full-fp16.nvdla"), "--net", str(tmp_path / "s1"),
                 "--nvdla-sw", nvdla_sw]) == 1
    assert "FAIL lenet" in capsys.readouterr().out
