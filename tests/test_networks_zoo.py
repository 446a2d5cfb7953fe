"""The zoo's ResNets and feature-table layers without NVDLA's compiler: the float forward pass of
every layer type the feature networks use against Caffe's definitions computed element by element,
Caffe's pooled-size rule, and the ResNets' topology against the published parameter counts of
the standard networks (torchvision's: 11,689,512 for ResNet-18, 25,557,032 for ResNet-50; the
same networks, with BatchNorm's gamma and beta counted and its running statistics not)."""

from __future__ import annotations

import numpy as np
import pytest

from nvdla_hil.drivers.errors import ConfigError
from nvdla_hil.harness.networks.forward import calibration_table, forward
from nvdla_hil.harness.networks.zoo import FEATURES, ZOO, Layer, Network, make_network, pooled_size


def _net(layers: list[Layer], x: np.ndarray) -> Network:
    return Network("t", "data", x.shape, tuple(layers), x.astype(np.float32))  # type: ignore[arg-type]


def _x(shape: tuple[int, ...], seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.mark.parametrize(("group", "dilation", "stride", "pad"), [(1, 2, 1, 2), (2, 1, 1, 1), (4, 3, 2, 3)])
def test_grouped_dilated_convolution_is_caffes(group: int, dilation: int, stride: int, pad: int) -> None:
    x = _x((4, 9, 8)).astype(np.float64)
    w = _x((8, 4 // group, 3, 3), 6)
    net = _net([Layer("c", "Convolution", ("data",), "c", {"num_output": 8, "kernel": 3, "stride": stride, "pad": pad,
                                                           "dilation": dilation, "group": group, "bias_term": False},
                      (w,))], x)
    got = forward(net)["c"]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    span = dilation * 2 + 1
    oh, ow = (9 + 2 * pad - span) // stride + 1, (8 + 2 * pad - span) // stride + 1
    assert got.shape == (8, oh, ow)
    cg, og = 4 // group, 8 // group
    for o in range(8):
        g = o // og
        for i in range(oh):
            for j in range(ow):
                want = sum(xp[g * cg + c, i * stride + u * dilation, j * stride + v * dilation] * float(w[o, c, u, v])
                           for c in range(cg) for u in range(3) for v in range(3))
                assert got[o, i, j] == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize(("kernel", "stride"), [(2, 2), (3, 3), (3, 1)])
def test_deconvolution_scatters_each_input_through_its_kernel(kernel: int, stride: int) -> None:
    x = _x((3, 4, 5)).astype(np.float64)
    w = _x((3, 2, kernel, kernel), 7)
    b = np.array([0.5, -1.0], np.float32)
    got = forward(_net([Layer("d", "Deconvolution", ("data",), "d",
                              {"num_output": 2, "kernel": kernel, "stride": stride, "pad": 0}, (w, b))], x))["d"]
    want = np.zeros((2, 3 * stride + kernel, 4 * stride + kernel)) + b[:, None, None]
    for c in range(3):
        for i in range(4):
            for j in range(5):
                want[:, i * stride:i * stride + kernel, j * stride:j * stride + kernel] += x[c, i, j] * w[c]
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_pooled_size_is_caffes_ceil_rule_clipped_by_padding() -> None:
    assert pooled_size(112, 3, 2, 0) == 56  # ResNet's pool1: ceil(109 / 2) + 1
    assert pooled_size(8, 3, 2, 0) == 4  # the last window starts at 6, half outside
    assert pooled_size(8, 3, 1, 1) == 8
    assert pooled_size(5, 2, 2, 1) == 3  # ceil(5 / 2) + 1 = 4, but the 4th window would start in the padding


def test_pooling_at_the_ceil_edge_and_with_padding_is_caffes() -> None:
    x = np.arange(1 * 5 * 5, dtype=np.float64).reshape(1, 5, 5)
    layers = [Layer("m", "Pooling", ("data",), "m", {"pool": "MAX", "kernel": 3, "stride": 2, "pad": 0}),
              Layer("a", "Pooling", ("data",), "a", {"pool": "AVE", "kernel": 3, "stride": 2, "pad": 0}),
              Layer("ap", "Pooling", ("data",), "ap", {"pool": "AVE", "kernel": 3, "stride": 1, "pad": 1}),
              Layer("g", "Pooling", ("data",), "g", {"pool": "AVE", "kernel": 5, "stride": 1, "pad": 0, "global": True}),
              # kernel 2 stride 2 on 5: ceil(3 / 2) + 1 = 3 windows, the last cut to row/column 4
              Layer("ac", "Pooling", ("data",), "ac", {"pool": "AVE", "kernel": 2, "stride": 2, "pad": 0}),
              Layer("mc", "Pooling", ("data",), "mc", {"pool": "MAX", "kernel": 2, "stride": 2, "pad": 0})]
    b = forward(_net(layers, x))
    assert b["m"].shape == (1, 2, 2) and b["m"][0, 1, 1] == 24  # window rows/cols 2..4
    # Caffe's AVE without padding: the window is clipped to the input and divided by its clipped size
    assert b["a"][0, 1, 1] == pytest.approx(x[0, 2:5, 2:5].mean())
    # with padding the divisor counts the padded positions (inclusive padding): corner = 4 values / 9
    assert b["ap"][0, 0, 0] == pytest.approx(x[0, 0:2, 0:2].sum() / 9)
    assert b["g"].shape == (1, 1, 1) and b["g"][0, 0, 0] == pytest.approx(x.mean())
    # at the ceil edge the window is clipped and divided by its clipped size (Caffe's pool_size):
    # the corner window is x[4, 4] alone, the top-right one x[0:2, 4] (4 and 9)
    assert b["ac"].shape == (1, 3, 3) and b["ac"][0, 2, 2] == 24 and b["ac"][0, 0, 2] == pytest.approx(6.5)
    assert b["ac"][0, 2, 0] == pytest.approx((20 + 21) / 2)
    assert b["mc"].shape == (1, 3, 3) and b["mc"][0, 2, 2] == 24 and b["mc"][0, 0, 2] == 9


def test_lrn_sigmoid_tanh_eltwise_max_and_prod() -> None:
    x = _x((6, 3, 3)).astype(np.float64)
    layers = [Layer("n", "LRN", ("data",), "n", {"local_size": 5, "alpha": 0.5, "beta": 0.75, "k": 2.0}),
              Layer("s", "Sigmoid", ("data",), "s"), Layer("t", "TanH", ("data",), "t"),
              Layer("mx", "Eltwise", ("s", "t"), "mx", {"operation": "MAX"}),
              Layer("pr", "Eltwise", ("s", "t"), "pr", {"operation": "PROD"})]
    b = forward(_net(layers, x))
    for c in range(6):
        acc = sum(x[j, 1, 2] ** 2 for j in range(max(0, c - 2), min(6, c + 3)))
        assert b["n"][c, 1, 2] == pytest.approx(x[c, 1, 2] / (2.0 + 0.5 / 5 * acc) ** 0.75)
    assert b["s"][0, 0, 0] == pytest.approx(1 / (1 + np.exp(-x[0, 0, 0])))
    assert b["mx"][1, 1, 1] == max(b["s"][1, 1, 1], b["t"][1, 1, 1])
    assert b["pr"][2, 0, 1] == pytest.approx(b["s"][2, 0, 1] * b["t"][2, 0, 1])


@pytest.mark.parametrize(("name", "params", "convs", "last"), [("resnet18", 11_689_512, 20, 512),
                                                                ("resnet50", 25_557_032, 53, 2048)])
def test_resnets_are_the_standard_networks(name: str, params: int, convs: int, last: int) -> None:
    net = make_network(name)
    counted = sum(blob.size for la in net.layers if la.type in ("Convolution", "Scale", "InnerProduct")
                  for blob in la.blobs)
    assert counted == params
    assert sum(la.type == "Convolution" for la in net.layers) == convs
    conv1 = net.layers[0]
    assert (conv1.params["kernel"], conv1.params["stride"], conv1.params["pad"]) == (7, 2, 3)
    assert net.input_shape == (3, 224, 224)
    b = forward(net)
    assert b["pool1"].shape == (64, 56, 56)
    assert b["res5b" if name == "resnet18" else "res5c"].shape == (last, 7, 7)
    assert b["pool5"].shape == (last, 1, 1) and b["fc1000"].shape == (1000, 1, 1)
    # the residual stream stays in range (FP16's 65504 and INT8's per-tensor scales)
    assert max(float(np.abs(v).max()) for v in b.values()) < 100
    # every layer has a scale; the pooling layers carry their input's (the compiler's rule)
    table = calibration_table(net, b)
    assert table["pool1"]["scale"] == table["conv1_relu"]["scale"]


def test_every_feature_row_has_a_network_and_the_networks_run() -> None:
    rows = {f.row for f in FEATURES.values()}
    assert {"Convolution: dilation", "Deconvolution", "Fully connected", "Group convolution",
            "Pooling: max, avg, inclusive padding", "Bias, BatchNorm, Scale", "Sigmoid, TanH", "EltWise SUM",
            "EltWise MAX", "LRN", "Softmax"} <= rows
    for name, feat in FEATURES.items():
        assert name in ZOO and set(feat.precisions) <= {"int8", "fp16"}
        net = make_network(name)
        out = forward(net)[net.output]
        assert np.all(np.isfinite(out)) and out.std() > 0


def test_a_convolution_with_groups_not_dividing_the_channels_is_refused() -> None:
    from nvdla_hil.harness.networks.zoo import _Builder

    b = _Builder("t", (3, 8, 8), 0)
    with pytest.raises(ConfigError, match="3 -> 8 channels in 2 groups"):
        b.conv("c", "data", 8, 3, group=2)


def _issues(name: str, config: str, precision: str, informat: str = "ncxhwx") -> list[str]:
    from nvdla_hil.harness.networks.compiler import known_issues
    from nvdla_hil.harness.networks.run import layer_specs

    net = make_network(name)
    return known_issues(layer_specs(net, forward(net)), config, precision, informat)


def test_known_compiler_issues_are_named_for_the_networks_that_meet_them() -> None:
    """Each known bug of NVDLA's compiler (observed, and where a loadable came out, the C model
    computed what the model does: testvectors/networks/README.md) is reported for the network,
    configuration and precision that meet it, and only there."""
    assert [i.split(":")[0] for i in _issues("sigmoid_tanh", "nv_full", "int8")] == ["sig1", "tanh2"]
    assert _issues("sigmoid_tanh", "nv_full", "fp16") == []
    assert any("group convolution in INT8" in i for i in _issues("group_conv", "nv_large", "int8"))
    assert _issues("group_conv", "nv_full", "fp16") == []
    assert [i.split(" ")[:5] for i in _issues("group_conv", "nv_large", "fp16")] == [["nv_large", "has", "no", "FP16",
                                                                                      "datapath"]]
    assert any("EnumMax" in i for i in _issues("eltwise_max", "nv_full", "fp16"))
    assert any("LRN in INT8" in i for i in _issues("lrn", "nv_small", "int8"))
    assert any("Rubik" in i for i in _issues("deconv", "nv_small", "int8"))
    assert _issues("deconv", "nv_full", "int8") == []
    assert _issues("deconv_s3", "nv_full", "fp16") == []  # 3x3 stride 3: the kernel is its stride
    assert any("ceil-mode edge" in i for i in _issues("avgpool_ceil", "nv_full", "fp16"))
    assert _issues("pooling", "nv_full", "int8") == []  # its pools tile their inputs
    assert _issues("resnet18", "nv_full", "int8") == []  # a 7x7 global pool: the firmware takes it
    assert any("image input" in i for i in _issues("lenet", "nv_full", "int8", "nhwc"))
    assert _issues("lenet", "nv_small", "int8", "nhwc") == []  # nv_small's image input agrees with float
    from nvdla_hil.harness.networks.compiler import known_issues

    # softmax's 8-channel input as an image: the compiler writes a 4-channel input tensor (2026-11-30)
    softmax = known_issues([], "nv_small", "int8", "nhwc", input_channels=8)
    assert softmax and "of 8 channels: a pixel format carries at most 4" in softmax[0]
    assert known_issues([], "nv_small", "int8", "nhwc", input_channels=4) == []
    assert known_issues([], "nv_small", "int8", "ncxhwx", input_channels=8) == []

    wide = [{"name": "pool5", "type": "Pooling", "params": {"pool": "AVE", "kernel": 14, "stride": 1, "global": True},
             "in_hw": 14}]
    assert any("Invalid pool_width" in i for i in known_issues(wide, "nv_full", "fp16"))
    padded = [{"name": "up", "type": "Deconvolution", "params": {"kernel": 3, "stride": 1}, "in_hw": 8}]
    assert any("Padding issue" in i for i in known_issues(padded, "nv_full", "fp16"))


def test_known_issues_ignore_malformed_layer_specs() -> None:
    """``net.json`` is the user's file: entries of the wrong shape name no issue and raise nothing."""
    from nvdla_hil.harness.networks.compiler import known_issues

    junk: list = [None, 3, {"type": "Convolution", "params": {"group": "x"}},
                  {"type": "Pooling", "params": [1], "in_hw": "7"},
                  {"type": "Pooling", "params": {"pool": "AVE", "kernel": "3", "stride": 0}, "in_hw": 8},
                  {"type": "Deconvolution", "params": {"kernel": 2, "stride": 2, "group": {}}}]
    assert known_issues(junk, "nv_full", "int8", "nhwc") == []
