"""A generated network's files (``nvdla-hil net gen``), and a compiled network run through the
loadable machinery (:func:`nvdla_hil.harness.loadables.check.check_loadable`) with its output
compared with the float forward pass.

A network folder holds ``net.prototxt``, ``net.caffemodel``, ``calib.json`` (the INT8
calibration table), ``input.npy`` (the float input, c x h x w), ``expected.npy`` (the float
forward pass's output) and ``net.json`` (name, seed, input and output names and their
calibration scales); compiled loadables go beside them as ``<config>-<precision>.nvdla``
(``<config>-<precision>-<informat>.nvdla`` for an input format other than ncxhwx).

The input is packed into the loadable's input tensor as its descriptor says (FEATURE: atoms of
``x`` channels, ``(c // x) * surface_stride + h * line_stride + (w * x + c % x) * bpe`` with
x = 16 for FP16, 32 for INT8, 8 for INT8 FEATURE_X8; an image: ``h * line_stride + (w * C + c)
* bpe``), INT8 quantised with the input's calibration scale; the output dump (DIMG, :mod:`nvdla_hil.harness.loadables.dimg`) is read back
as FP16 values, or INT8 values times the output layer's scale.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers.errors import ConfigError, InputError
from ..loadables.dimg import NUMBERINGS, DimgMeta, read_dimg
from ..loadables.fbs import PIXEL_FEATURE, PIXEL_FEATURE_X8, Loadable, TensorDesc
from .forward import TOLERANCES, Agreement, agreement, calibration_table, forward, write_calibration
from .zoo import Network, make_network

__all__ = ["NetFiles", "NetRun", "check_calibration", "generate", "issues_for", "layer_specs", "load_net", "pack_input",
           "read_output", "run_network"]

HALF, INT8 = 2, 4


@dataclass(frozen=True)
class NetFiles:
    folder: Path
    meta: dict[str, Any]

    @property
    def prototxt(self) -> Path:
        return self.folder / "net.prototxt"

    @property
    def caffemodel(self) -> Path:
        return self.folder / "net.caffemodel"

    @property
    def calib(self) -> Path:
        return self.folder / "calib.json"

    def loadable(self, config: str, precision: str, informat: str = "ncxhwx") -> Path:
        return self.folder / f"{config}-{precision}{'' if informat == 'ncxhwx' else '-' + informat}.nvdla"


def layer_specs(net: Network, blobs: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Per layer its name, type, parameters and input height (``in_hw``): what
    :func:`.compiler.known_issues` reads (kept in ``net.json``)."""
    return [{"name": la.name, "type": la.type, "params": la.params, "in_hw": int(blobs[la.bottoms[0]].shape[1])}
            for la in net.layers]


def generate(name: str, seed: int, folder: Path, write_model: Callable[[Any, Path, Path], None]) -> NetFiles:
    """Write network ``name`` of the zoo into ``folder``; ``write_model(net, prototxt, caffemodel)``
    writes the Caffe files (:func:`.caffe.write_caffe` with the checkout's schema)."""
    net = make_network(name, seed)
    blobs = forward(net)
    table = calibration_table(net, blobs)
    folder.mkdir(parents=True, exist_ok=True)
    files = NetFiles(folder, {"network": name, "seed": seed, "input": net.input, "output": net.output,
                              "layers": [la.name for la in net.layers], "input_shape": list(net.input_shape),
                              "output_shape": list(blobs[net.output].shape),
                              "input_scale": table[net.input]["scale"],
                              "output_scale": table[net.layers[-1].name]["scale"],
                              "layer_specs": layer_specs(net, blobs)})
    write_model(net, files.prototxt, files.caffemodel)
    write_calibration(files.calib, table)
    np.save(folder / "input.npy", net.sample)
    np.save(folder / "expected.npy", blobs[net.output].astype(np.float32))
    (folder / "net.json").write_text(json.dumps(files.meta, indent=2) + "\n")
    return files


def load_net(folder: Path) -> NetFiles:
    """A network folder ``net gen`` wrote; a missing or malformed file is an :class:`InputError`."""
    meta_path = folder / "net.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise InputError(f"{meta_path}: missing (not a folder `nvdla-hil net gen` wrote)") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{meta_path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    need = ("network", "input_scale", "output_scale", "input_shape", "output_shape")
    if not isinstance(meta, dict) or any(k not in meta for k in need):
        raise InputError(f"{meta_path}: expected an object with {', '.join(need)}")
    return NetFiles(folder, meta)


def issues_for(files: NetFiles, config: str, precision: str, informat: str = "ncxhwx") -> list[str]:
    """The compiler's known issues this network meets (:func:`.compiler.known_issues`)."""
    from .compiler import known_issues

    specs = files.meta.get("layer_specs")
    shape = files.meta.get("input_shape")
    channels = shape[0] if isinstance(shape, list) and shape and isinstance(shape[0], int) else 0
    return known_issues(specs if isinstance(specs, list) else [], config, precision, informat, channels)


def check_calibration(files: NetFiles) -> None:
    """Every layer of the network and its input has an entry in ``calib.json`` (the compiler
    aborts on a missing one without naming it)."""
    try:
        table = json.loads(files.calib.read_text())
    except FileNotFoundError:
        raise InputError(f"{files.calib}: missing (an INT8 compilation needs the calibration table)") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{files.calib}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(table, dict):
        raise InputError(f"{files.calib}: expected an object of layer name -> {{\"scale\": ...}}")
    names = [files.meta.get("input", "data"), *files.meta.get("layers", [])]
    missing = [n for n in names if not isinstance(table.get(n), dict) or
               not ("scale" in table[n] or {"min", "max"} <= set(table[n]))]
    if missing:
        raise InputError(f"{files.calib}: no scale (or min and max) for {', '.join(missing)}; the compiler "
                         f"needs one for the input and every layer")


def _array(path: Path, shape: list[int]) -> np.ndarray:
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable .npy array ({e})") from None
    if list(a.shape) != list(shape):
        raise InputError(f"{path}: shape {list(a.shape)}, net.json says {shape}")
    return a


def pack_input(x: np.ndarray, t: TensorDesc, scale: float) -> bytes:
    """The float input (c, h, w) as the bytes of the loadable's input tensor ``t``: a feature
    surface, or a pitch-linear image (the compiler's choice when the first layer is a
    convolution: ``A16B16G16R16_F`` for FP16, 8-bit ``A8B8G8R8``-type for INT8), whose pixels
    hold the tensor's channels interleaved, channel 0 at the lowest address; the input's
    channels are padded with zeros to the tensor's."""
    if t.data_type == HALF:
        bpe = 2
    elif t.data_type == INT8:
        bpe = 1
    else:
        raise ConfigError(f"input tensor {t.name!r}: data type {t.type_name} is not packed (FP16 and INT8 are)")
    _, c, h, w = t.dims
    if x.shape[1:] != (h, w) or x.shape[0] > c:
        raise ConfigError(f"the input is {x.shape}, the loadable's input tensor {t.name!r} is {(c, h, w)}")
    x = np.concatenate([x, np.zeros((c - x.shape[0], h, w), x.dtype)]) if x.shape[0] < c else x
    if bpe == 2:
        vals = x.astype(np.float16).view(np.uint16).astype(np.uint16)
    else:
        vals = np.clip(np.rint(x / scale), -128, 127).astype(np.int8).view(np.uint8)
    ci, hi, wi = np.arange(c)[:, None, None], np.arange(h)[None, :, None], np.arange(w)[None, None, :]
    if t.pixel_format in (PIXEL_FEATURE, PIXEL_FEATURE_X8):
        atom = 16 if bpe == 2 else 8 if t.pixel_format == PIXEL_FEATURE_X8 else 32
        off = (ci // atom) * t.strides[2] + hi * t.strides[1] + (wi * atom + ci % atom) * bpe
    else:
        off = hi * t.strides[1] + (wi * c + ci) * bpe
    flat = off.ravel()
    if int(flat.max()) + bpe > t.size:
        raise ConfigError(f"input tensor {t.name!r}: {t.size} bytes cannot hold {c}x{h}x{w} at its strides")
    buf = np.zeros(t.size, np.uint8)
    if bpe == 2:
        buf[flat] = (vals.ravel() & 0xFF).astype(np.uint8)
        buf[flat + 1] = (vals.ravel() >> 8).astype(np.uint8)
    else:
        buf[flat] = vals.ravel()
    return buf.tobytes()


def read_output(dump: bytes, scale: float, written: DimgMeta | None = None) -> np.ndarray:
    """The output values (c, h, w) of a DIMG dump: FP16 as is, INT8 times ``scale``;
    ``written``: the metadata the dump was written with, which says the test app's format
    numbering (the file alone does not: 41 is INT8 x8 in 2019's, INT16 x16 in 2018's)."""
    numbering = "2018"
    if written is not None:
        numbering = next((n for n, m in NUMBERINGS.items() if m.get(written.layout) == written.format), numbering)
    meta, el = read_dimg(dump, "output dump", numbering)
    if meta.layout.startswith("F16_"):
        return el.astype("<u2").view(np.float16).astype(np.float64)
    return el.view(np.int8).astype(np.float64) * scale


def _io_tensors(ld: Loadable) -> tuple[TensorDesc, TensorDesc]:
    ins = [m for m in ld.memory if m.flags & 4]
    outs = [m for m in ld.memory if m.flags & 8]
    if not ins or not outs:
        raise ConfigError("the loadable has no INPUT or no OUTPUT memory entry")
    return ld.tensors[ins[0].tensor_desc_id], ld.tensors[outs[0].tensor_desc_id]


@dataclass
class NetRun:
    status: str  # passed, failed
    precision: str
    agreement: Agreement | None
    message: str
    seconds: float
    dump: bytes = b""


def run_network(loadable: Path, files: NetFiles, *, spec: Any, nvdla_sw: str | None,  # noqa: ANN401 - a TargetSpec
                log: Callable[[str], None] | None = None) -> NetRun:
    """Run ``loadable`` (compiled from ``files``) on ``spec``'s target and compare its output
    with the float forward pass within :data:`~.forward.TOLERANCES` of its precision."""
    from ..loadables.check import check_loadable, read_loadable

    ld = read_loadable(loadable)
    t_in, t_out = _io_tensors(ld)
    precision = "fp16" if t_out.data_type == HALF else "int8"
    x = _array(files.folder / "input.npy", files.meta["input_shape"])
    expected = _array(files.folder / "expected.npy", files.meta["output_shape"])
    raw = loadable.with_name(loadable.name + ".input.raw")
    raw.write_bytes(pack_input(x, t_in, float(files.meta["input_scale"])))
    v = check_loadable(loadable, spec=spec, nvdla_sw=nvdla_sw, input_path=str(raw), log=log)
    if v.result is None:
        return NetRun("failed", precision, None, v.message or "the run produced no output", v.seconds)
    got = read_output(v.result.dump, float(files.meta["output_scale"]), v.result.meta)
    if got.shape != expected.shape:
        return NetRun("failed", precision, None, f"the output dump is {got.shape}, the float forward pass's "
                      f"{expected.shape}", v.seconds, v.result.dump)
    a = agreement(got, expected, TOLERANCES[precision])
    status = "passed" if v.status == "passed" and a.ok else "failed"
    return NetRun(status, precision, a, "\n".join(filter(None, [v.message, a.describe()])), v.seconds, v.result.dump)
