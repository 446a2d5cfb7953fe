"""Small networks, described once as a list of Caffe layers with seeded random weights: written
as a Caffe model by :mod:`.caffe`, run in float by :mod:`.forward`.

Only the layer types NVDLA's Caffe parser knows (``umd/core/src/compiler/caffe/CaffeParser.cpp``)
and the parameters :mod:`.forward` models: Convolution (square kernel, stride, pad, dilation,
groups, with or without bias), Deconvolution (no padding), Pooling (MAX/AVE, padding, Caffe's
ceil mode, global), InnerProduct, ReLU, Sigmoid, TanH, LRN (across channels), BatchNorm (with its
moving-average factor blob), Scale (with bias), Eltwise (SUM, MAX), Softmax (over channels).
Weights are drawn from ``numpy``'s ``default_rng(seed)`` with a He-style spread, so activations
stay in range through the network.

The zoo: LeNet, a ResNet basic block, ResNet-18 and ResNet-50 (:func:`resnet`), and one small
network per row of NVDLA's compiler feature table (:data:`FEATURES`; the rows no Caffe network
can reach are :data:`UNREACHABLE`, with the reason).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...drivers.errors import ConfigError

__all__ = ["FEATURES", "UNREACHABLE", "ZOO", "Feature", "Layer", "Network", "make_network", "pooled_size"]


@dataclass(frozen=True)
class Layer:
    """One Caffe layer: ``params`` in our own names (``num_output``, ``kernel``, ``stride``,
    ``pad``, ``pool``, ``eps``), ``blobs`` its weights in Caffe's order and shapes."""

    name: str
    type: str
    bottoms: tuple[str, ...]
    top: str
    params: dict[str, object] = field(default_factory=dict)
    blobs: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class Network:
    name: str
    input: str
    input_shape: tuple[int, int, int]  # c, h, w (batch 1)
    layers: tuple[Layer, ...]
    #: the network input (c, h, w), float32 in [0, 1) like an image's, drawn with the weights
    sample: np.ndarray

    @property
    def output(self) -> str:
        """The last layer's top (the network's one output)."""
        return self.layers[-1].top


def pooled_size(n: int, kernel: int, stride: int, pad: int) -> int:
    """Caffe's (and NVDLA's parser's, ``CaffeParserPoolingDimsCallback``) pooled size."""
    out = -(-(n + 2 * pad - kernel) // stride) + 1
    if pad and (out - 1) * stride >= n + pad:
        out -= 1
    return out


class _Builder:
    """Appends layers, tracking each blob's shape so weights get the right sizes."""

    def __init__(self, name: str, shape: tuple[int, int, int], seed: int, input_name: str = "data") -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.input = input_name
        self.input_shape = shape
        self.shapes: dict[str, tuple[int, int, int]] = {input_name: shape}
        self.layers: list[Layer] = []

    def _add(self, layer: Layer, shape: tuple[int, int, int]) -> str:
        self.layers.append(layer)
        self.shapes[layer.top] = shape
        return layer.top

    def conv(self, name: str, bottom: str, num_output: int, kernel: int, stride: int = 1, pad: int = 0, *,
             dilation: int = 1, group: int = 1, bias: bool = True) -> str:
        c, h, w = self.shapes[bottom]
        if c % group or num_output % group:
            raise ConfigError(f"{self.name}: convolution {name}: {c} -> {num_output} channels in {group} groups")
        fan_in = c // group * kernel * kernel
        wts = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (num_output, c // group, kernel, kernel)).astype(np.float32)
        blobs = (wts, self.rng.normal(0.0, 0.05, (num_output,)).astype(np.float32)) if bias else (wts,)
        span = dilation * (kernel - 1) + 1
        oh, ow = (h + 2 * pad - span) // stride + 1, (w + 2 * pad - span) // stride + 1
        params: dict[str, object] = {"num_output": num_output, "kernel": kernel, "stride": stride, "pad": pad}
        params |= {"dilation": dilation} if dilation != 1 else {}
        params |= {"group": group} if group != 1 else {}
        params |= {} if bias else {"bias_term": False}
        return self._add(Layer(name, "Convolution", (bottom,), name, params, blobs), (num_output, oh, ow))

    def deconv(self, name: str, bottom: str, num_output: int, kernel: int, stride: int = 1) -> str:
        """Caffe's Deconvolution without padding (the compiler has none): weights (c, num_output, k, k),
        output ``(h - 1) * stride + kernel``."""
        c, h, w = self.shapes[bottom]
        wts = self.rng.normal(0.0, np.sqrt(2.0 / (c * kernel * kernel / stride ** 2)),
                              (c, num_output, kernel, kernel)).astype(np.float32)
        bias = self.rng.normal(0.0, 0.05, (num_output,)).astype(np.float32)
        return self._add(Layer(name, "Deconvolution", (bottom,), name,
                               {"num_output": num_output, "kernel": kernel, "stride": stride, "pad": 0}, (wts, bias)),
                         (num_output, (h - 1) * stride + kernel, (w - 1) * stride + kernel))

    def pool(self, name: str, bottom: str, kernel: int, stride: int, method: str = "MAX", pad: int = 0, *,
             ceil: bool = False, global_: bool = False) -> str:
        """Caffe's pooling: output ``ceil((h + 2 pad - k) / stride) + 1`` (clipped so the last window
        starts inside the input plus its top/left pad); unless ``ceil`` it must tile exactly (at
        Caffe's ceil-mode edge the compiler divides an average by the full window, a known bug)."""
        c, h, w = self.shapes[bottom]
        if global_:
            kernel, stride, pad = h, 1, 0
            if h != w:
                raise ConfigError(f"{self.name}: global pooling {name} of a {h}x{w} map")
        if not ceil and ((h + 2 * pad - kernel) % stride or (w + 2 * pad - kernel) % stride):
            raise ConfigError(f"{self.name}: pooling {name} does not tile {h}x{w} exactly")
        params: dict[str, object] = {"pool": method, "kernel": kernel, "stride": stride, "pad": pad}
        params |= {"global": True} if global_ else {}
        return self._add(Layer(name, "Pooling", (bottom,), name, params),
                         (c, pooled_size(h, kernel, stride, pad), pooled_size(w, kernel, stride, pad)))

    def fc(self, name: str, bottom: str, num_output: int) -> str:
        fan_in = int(np.prod(self.shapes[bottom]))
        wts = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (num_output, fan_in)).astype(np.float32)
        bias = self.rng.normal(0.0, 0.05, (num_output,)).astype(np.float32)
        return self._add(Layer(name, "InnerProduct", (bottom,), name, {"num_output": num_output}, (wts, bias)),
                         (num_output, 1, 1))

    def relu(self, name: str, bottom: str) -> str:
        return self._add(Layer(name, "ReLU", (bottom,), name), self.shapes[bottom])

    def bn_scale(self, bn: str, scale: str, bottom: str, gamma: tuple[float, float] = (0.5, 1.5)) -> str:
        return self.scale(scale, self.bn(bn, bottom), gamma)

    def act(self, name: str, bottom: str, kind: str) -> str:
        """ReLU, Sigmoid or TanH (Caffe's layer type)."""
        return self._add(Layer(name, kind, (bottom,), name), self.shapes[bottom])

    def bn(self, name: str, bottom: str) -> str:
        c = self.shapes[bottom][0]
        mean = self.rng.normal(0.0, 0.2, (c,)).astype(np.float32)
        var = self.rng.uniform(0.5, 1.5, (c,)).astype(np.float32)
        return self._add(Layer(name, "BatchNorm", (bottom,), name, {"eps": 1e-5},
                               (mean, var, np.ones(1, np.float32))), self.shapes[bottom])

    def scale(self, name: str, bottom: str, gamma_range: tuple[float, float] = (0.5, 1.5)) -> str:
        c = self.shapes[bottom][0]
        gamma = self.rng.uniform(*gamma_range, (c,)).astype(np.float32)
        beta = self.rng.normal(0.0, 0.1, (c,)).astype(np.float32)
        return self._add(Layer(name, "Scale", (bottom,), name, {"bias_term": True}, (gamma, beta)), self.shapes[bottom])

    def eltwise(self, name: str, a: str, b: str, operation: str = "SUM") -> str:
        if self.shapes[a] != self.shapes[b]:
            raise ConfigError(f"{self.name}: eltwise {name} of {self.shapes[a]} and {self.shapes[b]}")
        return self._add(Layer(name, "Eltwise", (a, b), name, {"operation": operation}), self.shapes[a])

    def eltwise_sum(self, name: str, a: str, b: str) -> str:
        return self.eltwise(name, a, b, "SUM")

    def lrn(self, name: str, bottom: str, local_size: int = 5, alpha: float = 1e-4, beta: float = 0.75,
            k: float = 1.0) -> str:
        """Caffe's LRN across channels: ``x / (k + alpha / n * sum of x^2 over n channels) ** beta``."""
        return self._add(Layer(name, "LRN", (bottom,), name,
                               {"local_size": local_size, "alpha": alpha, "beta": beta, "k": k}), self.shapes[bottom])

    def softmax(self, name: str, bottom: str) -> str:
        return self._add(Layer(name, "Softmax", (bottom,), name), self.shapes[bottom])

    def network(self) -> Network:
        sample = self.rng.uniform(0.0, 1.0, self.input_shape).astype(np.float32)
        return Network(self.name, self.input, self.input_shape, tuple(self.layers), sample)


def lenet(seed: int, softmax: bool = False) -> Network:
    """Caffe's LeNet (examples/mnist/lenet.prototxt) on a 1x28x28 input: conv 20 5x5, max pool,
    conv 50 5x5, max pool, fc 500, ReLU, fc 10 (and Softmax with ``softmax``)."""
    b = _Builder("lenet_softmax" if softmax else "lenet", (1, 28, 28), seed)
    x = b.conv("conv1", "data", 20, 5)
    x = b.pool("pool1", x, 2, 2)
    x = b.conv("conv2", x, 50, 5)
    x = b.pool("pool2", x, 2, 2)
    x = b.fc("ip1", x, 500)
    x = b.relu("relu1", x)
    x = b.fc("ip2", x, 10)
    if softmax:
        b.softmax("prob", x)
    return b.network()


def resnet_block(seed: int) -> Network:
    """A stem (conv 3x3 + BatchNorm + Scale + ReLU) and one ResNet basic block on a 3x16x16 input:
    two 3x3 convs with BatchNorm/Scale, the identity shortcut summed by Eltwise, ReLU."""
    b = _Builder("resnet_block", (3, 16, 16), seed)
    x = b.conv("conv1", "data", 16, 3, pad=1)
    x = b.bn_scale("bn_conv1", "scale_conv1", x)
    stem = b.relu("conv1_relu", x)
    y = b.conv("res2a_branch2a", stem, 16, 3, pad=1)
    y = b.bn_scale("bn2a_branch2a", "scale2a_branch2a", y)
    y = b.relu("res2a_branch2a_relu", y)
    y = b.conv("res2a_branch2b", y, 16, 3, pad=1)
    y = b.bn_scale("bn2a_branch2b", "scale2a_branch2b", y)
    s = b.eltwise_sum("res2a", stem, y)
    b.relu("res2a_relu", s)
    return b.network()


def _conv_bn(b: _Builder, name: str, bottom: str, num_output: int, kernel: int, stride: int = 1, pad: int = 0,
             relu: bool = True) -> str:
    """A bias-free convolution + BatchNorm + Scale (+ ReLU), named as in Caffe's ResNets
    (``res2a_branch2a``, ``bn2a_branch2a``, ``scale2a_branch2a``, ``res2a_branch2a_relu``)."""
    x = b.conv(name, bottom, num_output, kernel, stride, pad, bias=False)
    suffix = name[3:] if name.startswith("res") else "_" + name
    # a layer summed into the residual stream gets a small Scale (0.2-0.4), so the stream grows
    # ~1.4x per block rather than doubling (with 1.0 ResNet-50's reaches 2e4, near FP16's limit)
    x = b.bn_scale(f"bn{suffix}", f"scale{suffix}", x, (0.5, 1.5) if relu else (0.2, 0.4))
    return b.relu(f"{name}_relu", x) if relu else x


def _stage_names(stage: int, blocks: int) -> list[str]:
    """Caffe's ResNet block names: ``2a, 2b, ...`` (ResNet-50's 4th stage is ``4a..4f``)."""
    return [f"{stage}{chr(ord('a') + i)}" for i in range(blocks)]


def resnet(seed: int, depth: int, size: int = 224) -> Network:
    """ResNet-18 (basic blocks [2, 2, 2, 2]) or ResNet-50 (bottleneck blocks [3, 4, 6, 3]) as in
    Kaiming He's Caffe models on a 3x224x224 input: a 7x7/2 stem conv + BatchNorm + Scale + ReLU,
    3x3/2 max pooling (Caffe's ceil mode: 112 -> 56), stages at 56, 28, 14 and 7, the first block
    of a stage strided (but the first stage's) with a 1x1 projection shortcut where the shape
    changes, 7x7 global average pooling and fc 1000. Convolutions have no bias (BatchNorm and
    Scale follow each). ``size`` < 224: the same network (the same weights for a seed) on a
    smaller input, for NVDLA's C model, which takes hours for 224x224 (32: maps 16, 8, 4, 2, 1)."""
    if depth not in (18, 50):
        raise ConfigError(f"no ResNet-{depth} in the zoo (18 and 50 are)")
    b = _Builder(f"resnet{depth}" + ("" if size == 224 else f"_{size}"), (3, size, size), seed)
    x = _conv_bn(b, "conv1", "data", 64, 7, 2, 3)
    x = b.pool("pool1", x, 3, 2, "MAX", ceil=True)
    layout = [2, 2, 2, 2] if depth == 18 else [3, 4, 6, 3]
    width = 64
    for si, blocks in enumerate(layout):
        for bi, blk in enumerate(_stage_names(si + 2, blocks)):
            stride = 2 if bi == 0 and si > 0 else 1
            out = width if depth == 18 else width * 4
            if b.shapes[x][0] != out or stride != 1:
                short = _conv_bn(b, f"res{blk}_branch1", x, out, 1, stride, relu=False)
            else:
                short = x
            if depth == 18:
                y = _conv_bn(b, f"res{blk}_branch2a", x, width, 3, stride, 1)
                y = _conv_bn(b, f"res{blk}_branch2b", y, width, 3, 1, 1, relu=False)
            else:
                y = _conv_bn(b, f"res{blk}_branch2a", x, width, 1, stride)
                y = _conv_bn(b, f"res{blk}_branch2b", y, width, 3, 1, 1)
                y = _conv_bn(b, f"res{blk}_branch2c", y, out, 1, relu=False)
            x = b.relu(f"res{blk}_relu", b.eltwise_sum(f"res{blk}", short, y))
        width *= 2
    x = b.pool("pool5", x, 7, 1, "AVE", global_=True)
    b.fc("fc1000", x, 1000)
    return b.network()


# The compiler's feature table (umd's CompilerFeatures.md), one small network per row; which
# configurations and precisions NVDLA's compiler accepts for each is FEATURES[name].precisions.

def conv_dilation(seed: int) -> Network:
    """Convolution with dilation 2 (a 3x3 kernel spanning 5x5) and 3, then a plain 3x3."""
    b = _Builder("conv_dilation", (3, 16, 16), seed)
    x = b.relu("relu1", b.conv("conv1", "data", 16, 3, pad=2, dilation=2))
    x = b.relu("relu2", b.conv("conv2", x, 16, 3, pad=3, dilation=3))
    b.conv("conv3", x, 8, 3, pad=1)
    return b.network()


def deconv(seed: int, stride3: bool = False) -> Network:
    """Deconvolution without padding, 2x2 stride 2 (the compiler splits a deconvolution into one
    1x1 convolution per kernel position and a Rubik contract, and refuses one whose kernel is not
    its stride, "Padding issue": 3x3 stride 1 would need the input padded); ``stride3`` adds a
    3x3 stride 3 one (``deconv_s3``: NVDLA's C model hangs at the second of its 9 splits, a C-model bug:
    ``SDP_RDMA_LOST_WAKEUP`` in ``harness/targets/cmod.py``)."""
    b = _Builder("deconv_s3" if stride3 else "deconv", (3, 8, 8), seed)
    x = b.relu("relu1", b.conv("conv1", "data", 16, 3, pad=1))
    x = b.deconv("deconv1", x, 16 if stride3 else 8, 2, 2)
    if stride3:
        b.deconv("deconv2", b.relu("relu2", x), 8, 3, 3)
    return b.network()


def fully_connected(seed: int) -> Network:
    """Fully connected layers on a feature map: fc 64, ReLU, fc 10."""
    b = _Builder("fully_connected", (16, 4, 4), seed)
    x = b.relu("relu1", b.fc("ip1", "data", 64))
    b.fc("ip2", x, 10)
    return b.network()


def group_conv(seed: int) -> Network:
    """Group convolution: 3x3 in 4 groups and 1x1 in 2 groups (the compiler: FP16 only)."""
    b = _Builder("group_conv", (3, 16, 16), seed)
    x = b.relu("relu1", b.conv("conv1", "data", 16, 3, pad=1))
    x = b.relu("relu2", b.conv("conv2", x, 16, 3, pad=1, group=4))
    b.conv("conv3", x, 32, 1, group=2)
    return b.network()


def pooling(seed: int) -> Network:
    """Pooling max and average, with (inclusive) padding, each tiling its input exactly."""
    b = _Builder("pooling", (3, 16, 16), seed)
    x = b.conv("conv1", "data", 16, 3, pad=1)
    x = b.pool("pool1", x, 2, 2, "MAX")
    x = b.pool("pool2", x, 3, 1, "AVE", pad=1)
    x = b.pool("pool3", x, 3, 1, "MAX", pad=1)
    b.pool("pool4", x, 2, 2, "AVE")
    return b.network()


def avgpool_ceil(seed: int) -> Network:
    """Average pooling at Caffe's ceil-mode edge (3x3 stride 2 on 8x8 -> 4x4, the last window
    half outside): a known compiler bug divides such a window by 9, Caffe by its clipped size."""
    b = _Builder("avgpool_ceil", (3, 8, 8), seed)
    x = b.conv("conv1", "data", 16, 3, pad=1)
    b.pool("pool1", x, 3, 2, "AVE", ceil=True)
    return b.network()


def bn_scale(seed: int) -> Network:
    """Bias, BatchNorm and Scale: a bias-free conv + BatchNorm + Scale, a conv with bias +
    BatchNorm alone, a conv + Scale alone."""
    b = _Builder("bn_scale", (3, 16, 16), seed)
    x = b.conv("conv1", "data", 16, 3, pad=1, bias=False)
    x = b.relu("relu1", b.bn_scale("bn1", "scale1", x))
    x = b.relu("relu2", b.bn("bn2", b.conv("conv2", x, 16, 1)))
    b.scale("scale3", b.conv("conv3", x, 8, 1))
    return b.network()


def sigmoid_tanh(seed: int) -> Network:
    """Sigmoid and TanH (the compiler: FP16 only; INT8 compiles to empty LUTs, a known bug)."""
    b = _Builder("sigmoid_tanh", (3, 16, 16), seed)
    x = b.act("sig1", b.conv("conv1", "data", 16, 3, pad=1), "Sigmoid")
    b.act("tanh2", b.conv("conv2", x, 8, 3, pad=1), "TanH")
    return b.network()


def eltwise(seed: int, operation: str = "SUM") -> Network:
    """Two convolution branches joined by Eltwise ``operation`` (SUM; MAX in FP16, which NVDLA's
    compiler's parser cannot reach from Caffe, a known bug)."""
    b = _Builder("eltwise" if operation == "SUM" else f"eltwise_{operation.lower()}", (3, 16, 16), seed)
    x = b.relu("relu1", b.conv("conv1", "data", 16, 3, pad=1))
    y1 = b.conv("conv2a", x, 16, 3, pad=1)
    y2 = b.conv("conv2b", x, 16, 1)
    b.eltwise("ew", y1, y2, operation)
    return b.network()


def lrn(seed: int) -> Network:
    """Local response normalisation across 5 channels (the compiler: FP16 only)."""
    b = _Builder("lrn", (3, 16, 16), seed)
    x = b.relu("relu1", b.conv("conv1", "data", 16, 3, pad=1))
    x = b.lrn("norm1", x, 5, 1e-2, 0.75, 1.0)
    b.conv("conv2", x, 8, 1)
    return b.network()


def softmax(seed: int) -> Network:
    """A small classifier ending in Softmax (NVDLA's runtime runs it on the CPU: an EMU task)."""
    b = _Builder("softmax", (8, 4, 4), seed)
    x = b.relu("relu1", b.conv("conv1", "data", 16, 3, pad=1))
    b.softmax("prob", b.fc("ip1", x, 10))
    return b.network()


#: the zoo: name -> maker(seed)
ZOO: dict[str, Callable[[int], Network]] = {
    "lenet": lenet,
    "lenet_softmax": lambda seed: lenet(seed, softmax=True),
    "resnet_block": resnet_block,
    "resnet18": lambda seed: resnet(seed, 18),
    "resnet50": lambda seed: resnet(seed, 50),
    "resnet18_32": lambda seed: resnet(seed, 18, 32),
    "resnet50_32": lambda seed: resnet(seed, 50, 32),
    "conv_dilation": conv_dilation,
    "deconv": deconv,
    "deconv_s3": lambda seed: deconv(seed, stride3=True),
    "fully_connected": fully_connected,
    "group_conv": group_conv,
    "pooling": pooling,
    "avgpool_ceil": avgpool_ceil,
    "bn_scale": bn_scale,
    "sigmoid_tanh": sigmoid_tanh,
    "eltwise": eltwise,
    "eltwise_max": lambda seed: eltwise(seed, "MAX"),
    "lrn": lrn,
    "softmax": softmax,
}


@dataclass(frozen=True)
class Feature:
    """A row of NVDLA's compiler feature table (nvdla/sw ``CompilerFeatures.md``) and the
    precisions the table marks supported (what the zoo's network for it is compiled in)."""

    row: str
    precisions: tuple[str, ...]


_BOTH = ("int8", "fp16")
#: feature network -> its row of the compiler's feature table
FEATURES: dict[str, Feature] = {
    "conv_dilation": Feature("Convolution: dilation", _BOTH),
    "deconv": Feature("Deconvolution", _BOTH),
    "fully_connected": Feature("Fully connected", _BOTH),
    "group_conv": Feature("Group convolution", ("fp16",)),
    "pooling": Feature("Pooling: max, avg, inclusive padding", _BOTH),
    "avgpool_ceil": Feature("Pooling: avg at Caffe's ceil-mode edge", _BOTH),
    "bn_scale": Feature("Bias, BatchNorm, Scale", _BOTH),
    "sigmoid_tanh": Feature("Sigmoid, TanH", ("fp16",)),
    "eltwise": Feature("EltWise SUM", _BOTH),
    "eltwise_max": Feature("EltWise MAX", ("fp16",)),
    "lrn": Feature("LRN", ("fp16",)),
    "softmax": Feature("Softmax", _BOTH),
}

#: rows of the feature table no Caffe network reaches through ``nvdla_compiler``, and why
#: (read in nvdla/sw 79538ba1)
UNREACHABLE: dict[str, str] = {
    "Convolution: Winograd (FP16)": "umd/core/src/compiler/TargetConfig.cpp sets isWinogradCapable false for "
                                    "nv_full, nv_large and nv_small, and nvdla_compiler has no option to set it",
    "Group convolution: Winograd": "as Winograd",
    "Pooling: min": "the Caffe parser (CaffeParser.cpp parsePooling) accepts MAX and AVE only; "
                    "ditcaffe's PoolingParameter has no MIN",
    "EltWise MIN": "ditcaffe's EltwiseParameter has PROD, SUM and MAX only",
}


def make_network(name: str, seed: int = 0) -> Network:
    try:
        maker = ZOO[name]
    except KeyError:
        raise ConfigError(f"no network {name!r} in the zoo: {', '.join(ZOO)}") from None
    return maker(seed)
