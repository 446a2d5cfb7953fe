"""The float forward pass of a :class:`~.zoo.Network` (numpy, float64, Caffe's semantics), the
INT8 calibration table NVDLA's compiler reads, and the comparison of a run's output with the
float result.

Calibration table: the JSON ``umd/apps/compiler/ParseTest.cpp`` (``parseTensorScales``) reads,
in the form of the checkout's ``umd/utils/calibdata/resnet50.json``: one object per network input
and per layer name, ``{"scale": s, "min": 0, "max": 0, "offset": 0}``; the compiler sets the
tensor's dynamic range to ``[-127 s, 127 s]``. ``s`` is the largest magnitude of the layer's
float output over 127, except for a layer that does not requantise (Pooling, ReLU), which
carries its input's scale: the compiler needs a pooling layer's scale to equal its input's.

The comparison is a sanity check (a wrong layout, channel order or scale shows as a low
correlation), never a golden: an INT8 run differs from float by its quantisation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...drivers.errors import ConfigError
from .zoo import Layer, Network

__all__ = ["TOLERANCES", "Agreement", "Tolerance", "agreement", "calibration_table", "forward",
           "write_calibration"]


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    c, h, wd = xp.shape
    oh, ow = (h - k) // stride + 1, (wd - k) // stride + 1
    cols = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::stride, ::stride][:, :oh, :ow]
    return np.einsum("chwij,ocij->ohw", cols, w) + b[:, None, None]


def _pool(x: np.ndarray, kernel: int, stride: int, method: str) -> np.ndarray:
    win = np.lib.stride_tricks.sliding_window_view(x, (kernel, kernel), axis=(1, 2))[:, ::stride, ::stride]
    return win.max(axis=(3, 4)) if method == "MAX" else win.mean(axis=(3, 4))


def _layer(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    x = ins[0]
    p = layer.params
    bl = [blob.astype(np.float64) for blob in layer.blobs]
    if layer.type == "Convolution":
        return _conv(x, bl[0], bl[1], int(p["stride"]), int(p["pad"]))  # type: ignore[call-overload]
    if layer.type == "Pooling":
        return _pool(x, int(p["kernel"]), int(p["stride"]), str(p["pool"]))  # type: ignore[call-overload]
    if layer.type == "InnerProduct":
        return (bl[0] @ x.reshape(-1) + bl[1]).reshape(-1, 1, 1)
    if layer.type == "ReLU":
        return np.maximum(x, 0.0)
    if layer.type == "BatchNorm":
        f = 0.0 if bl[2][0] == 0 else 1.0 / bl[2][0]
        mean, var = bl[0] * f, bl[1] * f
        return (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + float(p["eps"]))  # type: ignore[arg-type]
    if layer.type == "Scale":
        return x * bl[0][:, None, None] + bl[1][:, None, None]
    if layer.type == "Eltwise":
        return ins[0] + ins[1]
    if layer.type == "Softmax":
        e = np.exp(x - x.max(axis=0, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)
    raise ConfigError(f"layer {layer.name}: the float forward pass does not model {layer.type}")


def forward(net: Network, x: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every blob of the network (input included) for the input ``x`` (default: its sample)."""
    blobs = {net.input: (net.sample if x is None else x).astype(np.float64)}
    for layer in net.layers:
        blobs[layer.top] = _layer(layer, [blobs[b] for b in layer.bottoms])
    return blobs


def calibration_table(net: Network, blobs: dict[str, np.ndarray] | None = None) -> dict[str, dict[str, float]]:
    """The compiler's calibration table for ``net`` from its float blobs (module docstring)."""
    blobs = blobs or forward(net)

    def scale_of(a: np.ndarray) -> float:
        m = float(np.abs(a).max())
        return m / 127.0 if m > 0 else 1.0 / 127.0

    scales = {net.input: scale_of(blobs[net.input])}
    for layer in net.layers:
        keeps = layer.type in ("Pooling", "ReLU")
        scales[layer.top] = scales[layer.bottoms[0]] if keeps else scale_of(blobs[layer.top])
    table = {net.input: scales[net.input]} | {layer.name: scales[layer.top] for layer in net.layers}
    return {name: {"scale": s, "min": 0, "max": 0, "offset": 0} for name, s in table.items()}


def write_calibration(path: Path, table: dict[str, dict[str, float]]) -> None:
    path.write_text(json.dumps(table, indent=4) + "\n")


@dataclass(frozen=True)
class Tolerance:
    """The agreement a run must reach with the float forward pass: Pearson correlation at
    least ``min_correlation`` and the largest error at most ``max_error`` of the float output's
    largest magnitude."""

    min_correlation: float
    max_error: float

    def describe(self) -> str:
        return f"correlation >= {self.min_correlation}, max error <= {self.max_error:.0%} of max |float|"


#: per precision. FP16 keeps ~3 decimal digits through the network (measured: correlation
#: 1.00000, max error <= 0.09% on the zoo, seeds 0-5). INT8 quantises every layer to 8 bits with
#: per-tensor scales of a random network: correlation >= 0.987, most outputs within 3%, but a
#: channel can be off by up to ~45% of the largest output (resnet_block seed 1, channel 13,
#: the stem's INT8 output saturates; the same on nv_full and nv_small, and NVDLA's C model
#: computes the same output: the compiler's quantisation, not the target), so its max-error
#: bound only catches gross faults; the correlation catches a misordered output
TOLERANCES = {"fp16": Tolerance(0.999, 0.01), "int8": Tolerance(0.98, 0.5)}


@dataclass(frozen=True)
class Agreement:
    correlation: float
    max_error: float  # relative to the float output's largest magnitude
    worst: tuple[int, int, int]  # (c, h, w) of the largest error
    tolerance: Tolerance

    @property
    def ok(self) -> bool:
        return self.correlation >= self.tolerance.min_correlation and self.max_error <= self.tolerance.max_error

    def describe(self) -> str:
        return (f"correlation {self.correlation:.5f}, max error {self.max_error:.2%} of max |float| at (c,h,w)="
                f"{self.worst} (tolerance: {self.tolerance.describe()})")


def agreement(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> Agreement:
    """How well a run's output (c, h, w) agrees with the float forward pass's."""
    if actual.shape != expected.shape:
        raise ConfigError(f"the run's output is {actual.shape}, the float forward pass's {expected.shape}")
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    if not np.all(np.isfinite(a)):
        corr = -1.0
    elif a.std() == 0 or e.std() == 0:
        corr = 1.0 if np.allclose(a, e) else 0.0
    else:
        corr = float(np.corrcoef(a, e)[0, 1])
    err = np.abs(a - e)
    err = np.where(np.isfinite(err), err, np.inf)
    i = int(np.argmax(err))
    scale = float(np.abs(e).max()) or 1.0
    worst = tuple(int(v) for v in np.unravel_index(i, actual.shape))
    rel = float(err[i]) / scale
    return Agreement(corr if not math.isnan(corr) else 0.0, rel, worst, tolerance)  # type: ignore[arg-type]
