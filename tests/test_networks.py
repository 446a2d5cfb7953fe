"""harness/networks without NVDLA's compiler: the float forward pass against Caffe's definitions
computed by hand, the calibration table's rules, the input packing and output reading against
hand-computed offsets, the agreement check catching a misordered output, and the command
line's exit codes for bad input (the compiled runs: tests/test_networks_compiler.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.drivers.errors import ConfigError, InputError
from nvdla_hil.harness.cli import main
from nvdla_hil.harness.loadables.dimg import DimgMeta, pack_dimg
from nvdla_hil.harness.loadables.fbs import PIXEL_FEATURE, PIXEL_FEATURE_X8, TensorDesc
from nvdla_hil.harness.networks.compiler import CompilerError, find_umd, run_step
from nvdla_hil.harness.networks.forward import TOLERANCES, agreement, calibration_table, forward
from nvdla_hil.harness.networks.run import load_net, pack_input, read_output
from nvdla_hil.harness.networks.zoo import Layer, Network, make_network


def _net(layers: list[Layer], shape: tuple[int, int, int], x: np.ndarray) -> Network:
    return Network("t", "data", shape, tuple(layers), x.astype(np.float32))


# ---- the float forward pass ---------------------------------------------------------------------


@pytest.mark.parametrize(("stride", "pad"), [(1, 0), (2, 1), (1, 2)])
def test_convolution_is_caffes_cross_correlation(stride: int, pad: int) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 7, 6))
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    b = rng.normal(size=4).astype(np.float32)
    net = _net([Layer("c", "Convolution", ("data",), "c", {"num_output": 4, "kernel": 3, "stride": stride, "pad": pad},
                      (w, b))], (3, 7, 6), x)
    got = forward(net)["c"]
    xp = np.pad(x.astype(np.float32).astype(np.float64), ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = (7 + 2 * pad - 3) // stride + 1, (6 + 2 * pad - 3) // stride + 1
    assert got.shape == (4, oh, ow)
    for o, i, j in [(0, 0, 0), (3, oh - 1, ow - 1), (2, oh // 2, 1)]:
        want = sum(xp[c, i * stride + u, j * stride + v] * float(w[o, c, u, v])
                   for c in range(3) for u in range(3) for v in range(3)) + float(b[o])
        assert got[o, i, j] == pytest.approx(want, abs=1e-9)


def test_pooling_inner_product_batchnorm_scale_eltwise() -> None:
    x = np.arange(2 * 4 * 4, dtype=np.float32).reshape(2, 4, 4) - 10
    wfc = np.zeros((3, 2 * 2 * 2), np.float32)
    wfc[1, 5] = 1.0  # (c, h, w) = (1, 0, 1) of the pooled blob: Caffe flattens c, h, w
    layers = [
        Layer("p", "Pooling", ("data",), "p", {"pool": "MAX", "kernel": 2, "stride": 2}),
        Layer("a", "Pooling", ("data",), "a", {"pool": "AVE", "kernel": 2, "stride": 2}),
        Layer("fc", "InnerProduct", ("p",), "fc", {"num_output": 3}, (wfc, np.array([0, 0.5, 0], np.float32))),
        Layer("bn", "BatchNorm", ("data",), "bn", {"eps": 0.0},
              (np.array([4.0, 8.0], np.float32), np.array([16.0, 64.0], np.float32), np.array([2.0], np.float32))),
        Layer("sc", "Scale", ("bn",), "sc", {"bias_term": True},
              (np.array([2.0, 3.0], np.float32), np.array([1.0, -1.0], np.float32))),
        Layer("sum", "Eltwise", ("sc", "data"), "sum", {"operation": "SUM"}),
        Layer("r", "ReLU", ("sum",), "r"),
    ]
    b = forward(_net(layers, (2, 4, 4), x))
    assert b["p"][1, 0, 1] == x[1, 0:2, 2:4].max() == 13
    assert b["a"][0, 1, 0] == pytest.approx(x[0, 2:4, 0:2].mean())
    assert b["fc"].shape == (3, 1, 1) and b["fc"][1, 0, 0] == pytest.approx(13.5)
    # BatchNorm divides mean and variance by the moving-average factor (2): (x - 2) / sqrt(8) on channel 0
    assert b["bn"][0, 0, 0] == pytest.approx((-10 - 2) / np.sqrt(8))
    assert b["sc"][1, 3, 3] == pytest.approx((21 - 4) / np.sqrt(32) * 3 - 1)
    assert b["r"].min() == 0 and b["r"][1, 3, 3] == pytest.approx(b["sc"][1, 3, 3] + 21)


def test_zoo_networks_have_the_shapes_of_their_definitions() -> None:
    lenet = forward(make_network("lenet"))
    assert [lenet[k].shape for k in ("conv1", "pool1", "conv2", "pool2", "ip1", "ip2")] == \
        [(20, 24, 24), (20, 12, 12), (50, 8, 8), (50, 4, 4), (500, 1, 1), (10, 1, 1)]
    res = make_network("resnet_block", seed=1)
    assert {la.type for la in res.layers} >= {"BatchNorm", "Scale", "Eltwise"}
    assert forward(res)["res2a_relu"].shape == (16, 16, 16)
    assert not np.array_equal(make_network("lenet", 1).sample, make_network("lenet", 2).sample)
    with pytest.raises(ConfigError, match="no network 'alexnet'.*lenet"):
        make_network("alexnet")


def test_calibration_table_names_every_layer_and_pooling_keeps_its_input_scale() -> None:
    net = make_network("lenet", seed=4)
    blobs = forward(net)
    table = calibration_table(net, blobs)
    assert set(table) == {"data"} | {la.name for la in net.layers}
    assert table["data"] == {"scale": pytest.approx(np.abs(net.sample).max() / 127), "min": 0, "max": 0, "offset": 0}
    assert table["conv1"]["scale"] == pytest.approx(np.abs(blobs["conv1"]).max() / 127)
    assert table["pool1"]["scale"] == table["conv1"]["scale"]
    assert table["pool2"]["scale"] == table["conv2"]["scale"]
    assert table["relu1"]["scale"] == table["ip1"]["scale"]


# ---- input packing, output reading, agreement -----------------------------------------------------


def _tensor(data_type: int, pixel: int, dims: tuple[int, int, int, int], line: int, surf: int, size: int) -> TensorDesc:
    return TensorDesc("data", 0, 0, size, 0, 0, data_type, 0, pixel, 0, dims, (0, line, surf, 0, 0, 0, 0, 0))


def test_pack_input_fp16_x16_atoms() -> None:
    x = np.arange(18 * 2 * 3, dtype=np.float32).reshape(18, 2, 3) / 4
    t = _tensor(2, PIXEL_FEATURE, (1, 18, 2, 3), line=3 * 32, surf=2 * 3 * 32, size=2 * 2 * 3 * 32)
    buf = np.frombuffer(pack_input(x, t, 1.0), np.uint8)
    # channel 17 (second surface, lane 1), h 1, w 2: 1 * 192 + 1 * 96 + 2 * 32 + 1 * 2
    off = 192 + 96 + 64 + 2
    assert buf[off:off + 2].view("<f2")[0] == np.float16(x[17, 1, 2])
    assert buf[0:2].view("<f2")[0] == 0 and buf[2:4].view("<f2")[0] == np.float16(x[1, 0, 0])


@pytest.mark.parametrize(("pixel", "atom"), [(PIXEL_FEATURE, 32), (PIXEL_FEATURE_X8, 8)])
def test_pack_input_int8_quantises_with_the_input_scale(pixel: int, atom: int) -> None:
    x = np.full((9, 1, 2), 0.5, np.float32)
    x[8, 0, 1] = -3.0  # below -128 * scale: clipped
    t = _tensor(4, pixel, (1, 9, 1, 2), line=2 * atom, surf=2 * atom, size=4 * atom)
    buf = np.frombuffer(pack_input(x, t, 0.01), np.int8)
    ch8 = (8 // atom) * 2 * atom + 1 * atom + 8 % atom
    assert buf[ch8] == -128 and buf[atom + 3] == 50


def test_read_output_fp16_and_int8() -> None:
    vals = np.array([1.5, -2.0, 0.25], np.float16)
    meta = DimgMeta(42, "F16_x16_F", 1, 1, 3, 32, 32, 32)
    buf = np.zeros(32, np.uint8)
    buf[:6] = vals.view(np.uint8)
    assert read_output(pack_dimg(meta, buf), 9.0).ravel().tolist() == [1.5, -2.0, 0.25]
    meta8 = DimgMeta(40, "F8_x32_I", 2, 1, 2, 64, 64, 64)
    buf8 = np.zeros(64, np.uint8)
    buf8[[0, 1, 32, 33]] = np.array([10, -4, 7, 127], np.int8).view(np.uint8)
    out = read_output(pack_dimg(meta8, buf8), 0.5)
    assert out.shape == (2, 1, 2) and out[:, 0, :].tolist() == [[5.0, 3.5], [-2.0, 63.5]]


def test_agreement_catches_a_misordered_output() -> None:
    ref = np.random.default_rng(0).normal(size=(16, 4, 4))
    noisy = ref + np.random.default_rng(1).normal(scale=0.003, size=ref.shape)
    good = agreement(noisy, ref, TOLERANCES["fp16"])
    assert good.ok and good.correlation > 0.999
    swapped = np.ascontiguousarray(ref.transpose(0, 2, 1))  # h and w exchanged: a wrong layout
    bad = agreement(swapped, ref, TOLERANCES["int8"])
    assert not bad.ok and bad.correlation < 0.5
    assert "correlation" in bad.describe() and "tolerance" in bad.describe()
    with pytest.raises(ConfigError, match="output is"):
        agreement(ref[:8], ref, TOLERANCES["int8"])


# ---- the checkout, the build steps, the command line ---------------------------------------------


def test_find_umd_names_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVDLA_SW", raising=False)
    with pytest.raises(ConfigError, match="--nvdla-sw"):
        find_umd(None)
    (tmp_path / "umd").mkdir()
    (tmp_path / "umd" / "Makefile").write_text("")
    with pytest.raises(ConfigError, match="umd/apps/compiler/main.cpp is missing"):
        find_umd(tmp_path)


def test_a_failed_build_step_is_named_with_the_tail_of_its_log(tmp_path: Path) -> None:
    logs = tmp_path / ".tmp-k" / "logs"
    logs.mkdir(parents=True)
    script = "for i in $(seq 1 40); do echo line $i; done; echo 'error: Type.h: numeric_limits'; exit 3"
    with pytest.raises(CompilerError) as e:
        run_step("compiler", ["sh", "-c", script], tmp_path, logs, tmp_path / "k")
    msg = str(e.value)
    assert "step 'compiler'" in msg and "exit 3" in msg and "numeric_limits" in msg
    assert "line 40" in msg and "line 5\n" not in msg  # the tail, not the whole log
    assert "line 1\nline 2\n" in (tmp_path / "k.compiler.log").read_text()  # the whole log, kept beside the entry


def test_cli_bad_input_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["net", "compile", str(tmp_path), "--nvdla-sw", str(tmp_path)]) == 2
    assert f"{tmp_path / 'net.json'}: missing" in capsys.readouterr().err
    (tmp_path / "net.json").write_text("{not json")
    assert main(["net", "compile", str(tmp_path)]) == 2
    assert "net.json: not valid JSON" in capsys.readouterr().err
    (tmp_path / "net.json").write_text(json.dumps({"network": "lenet"}))
    with pytest.raises(InputError, match="expected an object with"):
        load_net(tmp_path)
    assert main(["net", "gen", "alexnet", "--out", str(tmp_path / "a"), "--nvdla-sw", str(tmp_path)]) == 2
    assert "no network 'alexnet' in the zoo: lenet" in capsys.readouterr().err
    assert main(["net", "gen", "lenet", "--out", str(tmp_path / "a"), "--nvdla-sw", str(tmp_path)]) == 2
    assert f"{tmp_path} is not an nvdla/sw checkout" in capsys.readouterr().err


def test_compile_names_a_layer_missing_from_the_calibration_table(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from nvdla_hil.harness.networks.run import check_calibration

    net = make_network("lenet")
    (tmp_path / "net.json").write_text(json.dumps({"network": "lenet", "input": "data", "input_scale": 1,
                                                   "output_scale": 1, "input_shape": [1, 28, 28],
                                                   "output_shape": [10, 1, 1],
                                                   "layers": [la.name for la in net.layers]}))
    table = calibration_table(net)
    (tmp_path / "calib.json").write_text(json.dumps(table))
    check_calibration(load_net(tmp_path))  # complete: no error
    del table["pool2"]
    table["ip1"] = {"min": 0}
    (tmp_path / "calib.json").write_text(json.dumps(table))
    assert main(["net", "compile", str(tmp_path), "--precision", "int8"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'calib.json'}: no scale (or min and max) for pool2, ip1" in err


def _fake_checkout(root: Path) -> Path:
    umd = root / "sw" / "umd"
    for f in ("Makefile", "apps/compiler/main.cpp", "external/protobuf-2.6/configure",
              "core/src/compiler/caffe/ditcaffe/ditcaffe.proto"):
        (umd / f).parent.mkdir(parents=True, exist_ok=True)
        (umd / f).write_text(f)
    return umd.parent


#: how long the processes of the concurrent-build test may take before it gives up on them: a
#: hang guard only (every wait below ends on its event first), not an expected duration
BUILD_HANG_GUARD = 300.0


def _slow_fake_build(tmp: Path, key: str, *rest: object) -> dict[str, object]:
    """A build that lasts until the second process has said it waits for this one (an event, not
    a sleep long enough for it to arrive), or until a second build started (the lock failed)."""
    import shutil
    import time

    cache = tmp.parent.parent
    builds = cache / "builds.txt"
    with open(builds, "a") as f:
        f.write(f"{key}\n")
    said = cache.parent / "second.txt"
    deadline = time.monotonic() + BUILD_HANG_GUARD
    while time.monotonic() < deadline:
        if said.exists() and "another process is building this entry" in said.read_text():
            break
        if len(builds.read_text().split()) > 1:
            break
        time.sleep(0.01)
    (tmp / "bin").mkdir()
    shutil.copy(shutil.which("true") or "/bin/true", tmp / "bin" / "nvdla_compiler")
    return {"executable": "bin/nvdla_compiler"}


def _build_in_child(sw: str, said: str) -> None:
    from nvdla_hil.harness.networks.compiler import build_compiler

    with open(said, "a") as f:
        build_compiler(sw, progress=lambda m: (f.write(m + "\n"), f.flush()))


def test_two_processes_building_at_once_build_once_and_the_second_says_for_whom(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing
    import time

    from nvdla_hil.harness.networks import compiler

    sw = _fake_checkout(tmp_path)
    monkeypatch.setenv("NVDLA_HIL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "_build_into", _slow_fake_build)
    ctx = multiprocessing.get_context("fork")
    first = ctx.Process(target=_build_in_child, args=(str(sw), str(tmp_path / "first.txt")))
    first.start()
    builds = tmp_path / "cache" / "builds.txt"
    deadline = time.monotonic() + BUILD_HANG_GUARD
    while not builds.exists() and first.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)  # until the first is building (it holds the entry's lock), not "1 s later"
    assert builds.exists(), f"the first process never started its build (exit code {first.exitcode})"
    second = ctx.Process(target=_build_in_child, args=(str(sw), str(tmp_path / "second.txt")))
    second.start()
    first.join(BUILD_HANG_GUARD)
    second.join(BUILD_HANG_GUARD)
    assert first.exitcode == 0 and second.exitcode == 0
    assert len((tmp_path / "cache" / "builds.txt").read_text().split()) == 1  # one build, one key
    said = (tmp_path / "second.txt").read_text()
    assert "another process is building this entry" in said and f"pid {first.pid}" in said
    assert "built by another process" in said
    assert compiler.cached_compiler(sw) is not None
