"""Small networks, described once as a list of Caffe layers with seeded random weights: written
as a Caffe model by :mod:`.caffe`, run in float by :mod:`.forward`.

Only the layer types NVDLA's Caffe parser knows (``umd/core/src/compiler/caffe/CaffeParser.cpp``)
and the parameters :mod:`.forward` models: Convolution (square kernel, stride, pad, one group),
Pooling (MAX/AVE), InnerProduct, ReLU, BatchNorm (with its moving-average factor blob), Scale
(with bias), Eltwise (SUM), Softmax (over channels). Weights are drawn from ``numpy``'s
``default_rng(seed)`` with a He-style spread, so activations stay in range through the network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...drivers.errors import ConfigError

__all__ = ["Layer", "Network", "ZOO", "make_network"]


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

    def conv(self, name: str, bottom: str, num_output: int, kernel: int, stride: int = 1, pad: int = 0) -> str:
        c, h, w = self.shapes[bottom]
        fan_in = c * kernel * kernel
        wts = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (num_output, c, kernel, kernel)).astype(np.float32)
        bias = self.rng.normal(0.0, 0.05, (num_output,)).astype(np.float32)
        oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
        return self._add(Layer(name, "Convolution", (bottom,), name,
                               {"num_output": num_output, "kernel": kernel, "stride": stride, "pad": pad},
                               (wts, bias)), (num_output, oh, ow))

    def pool(self, name: str, bottom: str, kernel: int, stride: int, method: str = "MAX") -> str:
        c, h, w = self.shapes[bottom]
        if (h - kernel) % stride or (w - kernel) % stride:
            raise ConfigError(f"{self.name}: pooling {name} does not tile {h}x{w} exactly")
        return self._add(Layer(name, "Pooling", (bottom,), name, {"pool": method, "kernel": kernel, "stride": stride}),
                         (c, (h - kernel) // stride + 1, (w - kernel) // stride + 1))

    def fc(self, name: str, bottom: str, num_output: int) -> str:
        fan_in = int(np.prod(self.shapes[bottom]))
        wts = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (num_output, fan_in)).astype(np.float32)
        bias = self.rng.normal(0.0, 0.05, (num_output,)).astype(np.float32)
        return self._add(Layer(name, "InnerProduct", (bottom,), name, {"num_output": num_output}, (wts, bias)),
                         (num_output, 1, 1))

    def relu(self, name: str, bottom: str) -> str:
        return self._add(Layer(name, "ReLU", (bottom,), name), self.shapes[bottom])

    def bn_scale(self, bn: str, scale: str, bottom: str) -> str:
        c = self.shapes[bottom][0]
        mean = self.rng.normal(0.0, 0.2, (c,)).astype(np.float32)
        var = self.rng.uniform(0.5, 1.5, (c,)).astype(np.float32)
        top = self._add(Layer(bn, "BatchNorm", (bottom,), bn, {"eps": 1e-5},
                              (mean, var, np.ones(1, np.float32))), self.shapes[bottom])
        gamma = self.rng.uniform(0.5, 1.5, (c,)).astype(np.float32)
        beta = self.rng.normal(0.0, 0.1, (c,)).astype(np.float32)
        return self._add(Layer(scale, "Scale", (top,), scale, {"bias_term": True}, (gamma, beta)), self.shapes[top])

    def eltwise_sum(self, name: str, a: str, b: str) -> str:
        if self.shapes[a] != self.shapes[b]:
            raise ConfigError(f"{self.name}: eltwise {name} of {self.shapes[a]} and {self.shapes[b]}")
        return self._add(Layer(name, "Eltwise", (a, b), name, {"operation": "SUM"}), self.shapes[a])

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


#: the zoo: name -> maker(seed)
ZOO: dict[str, Callable[[int], Network]] = {
    "lenet": lenet,
    "lenet_softmax": lambda seed: lenet(seed, softmax=True),
    "resnet_block": resnet_block,
}


def make_network(name: str, seed: int = 0) -> Network:
    try:
        maker = ZOO[name]
    except KeyError:
        raise ConfigError(f"no network {name!r} in the zoo: {', '.join(ZOO)}") from None
    return maker(seed)
