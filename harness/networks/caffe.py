"""A :class:`~.zoo.Network` written as a Caffe model: the deploy prototxt (text) and the
``.caffemodel`` (binary ``NetParameter`` with the weights), in the schema of the user's checkout.

The schema is never part of this project: the checkout's
``umd/core/src/compiler/caffe/ditcaffe/ditcaffe.proto`` (package ``ditcaffe``, the one NVDLA's
Caffe parser is generated from) is compiled at run time by a ``protoc`` (the one built with the
compiler from the checkout's bundled protobuf 2.6.1, else one on ``PATH``) into a descriptor
set, which the ``protobuf`` Python package turns into message classes.

Written as NVDLA's parser reads them (``CaffeParser.cpp``): the input as ``input`` +
``input_shape`` (1, c, h, w); per layer its name, type, bottoms and top; the weights by layer
name in the caffemodel's ``layer`` list, each blob with its ``shape`` and float ``data``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...drivers.errors import ConfigError
from .zoo import Layer, Network

__all__ = ["Schema", "load_schema", "proto_path", "write_caffe"]

PROTO = Path("core/src/compiler/caffe/ditcaffe/ditcaffe.proto")


def proto_path(umd: Path) -> Path:
    p = umd / PROTO
    if not p.is_file():
        raise ConfigError(f"{umd.parent} has no Caffe schema: umd/{PROTO} is missing")
    return p


@dataclass(frozen=True)
class Schema:
    """The message classes of the checkout's ``ditcaffe.proto`` this module uses."""

    net: Any  # ditcaffe.NetParameter
    source: Path


def load_schema(umd: Path, protoc: Path | None = None) -> Schema:
    """Compile ``ditcaffe.proto`` of the checkout with ``protoc`` (else ``protoc`` on PATH)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped]

    proto = proto_path(umd)
    exe = str(protoc) if protoc and Path(protoc).is_file() else shutil.which("protoc")
    if not exe:
        raise ConfigError("no protoc to read the checkout's ditcaffe.proto: run `nvdla-hil net build-compiler` "
                          "(it builds the checkout's protobuf 2.6.1 protoc) or install protobuf-compiler")
    with tempfile.TemporaryDirectory(prefix="nvdla-proto-") as d:
        out = Path(d) / "ditcaffe.desc"
        r = subprocess.run([exe, "--proto_path=.", f"--descriptor_set_out={out}", proto.name],
                           cwd=proto.parent, capture_output=True, text=True, timeout=120, check=False)
        if r.returncode or not out.is_file():
            raise ConfigError(f"{proto}: {exe} could not compile it (exit {r.returncode}): {r.stderr.strip()[-800:]}")
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    try:
        desc = pool.FindMessageTypeByName("ditcaffe.NetParameter")
    except KeyError:
        raise ConfigError(f"{proto} defines no ditcaffe.NetParameter") from None
    return Schema(message_factory.GetMessageClass(desc), proto)


def _params(layer: Layer, msg: Any) -> None:  # noqa: ANN401 - a ditcaffe.LayerParameter
    p = layer.params
    if layer.type in ("Convolution", "Deconvolution"):
        c = msg.convolution_param
        c.num_output = int(p["num_output"])  # type: ignore[call-overload]
        c.kernel_size.append(int(p["kernel"]))  # type: ignore[call-overload]
        if p["stride"] != 1:
            c.stride.append(int(p["stride"]))  # type: ignore[call-overload]
        if p["pad"]:
            c.pad.append(int(p["pad"]))  # type: ignore[call-overload]
        if p.get("dilation", 1) != 1:
            c.dilation.append(int(p["dilation"]))  # type: ignore[call-overload]
        if p.get("group", 1) != 1:
            c.group = int(p["group"])  # type: ignore[call-overload]
        if p.get("bias_term") is False:
            c.bias_term = False
    elif layer.type == "Pooling":
        q = msg.pooling_param
        q.pool = q.DESCRIPTOR.fields_by_name["pool"].enum_type.values_by_name[str(p["pool"])].number
        if p.get("global"):
            q.global_pooling = True
        else:
            q.kernel_size = int(p["kernel"])  # type: ignore[call-overload]
            q.stride = int(p["stride"])  # type: ignore[call-overload]
            if p.get("pad"):
                q.pad = int(p["pad"])  # type: ignore[call-overload]
    elif layer.type == "LRN":
        r = msg.lrn_param  # every field set: the parser's defaults differ from Caffe's (beta 5, not 0.75)
        r.local_size = int(p["local_size"])  # type: ignore[call-overload]
        r.alpha, r.beta, r.k = float(p["alpha"]), float(p["beta"]), float(p["k"])  # type: ignore[arg-type]
    elif layer.type == "InnerProduct":
        msg.inner_product_param.num_output = int(p["num_output"])  # type: ignore[call-overload]
    elif layer.type == "BatchNorm":
        msg.batch_norm_param.use_global_stats = True
        msg.batch_norm_param.eps = float(p["eps"])  # type: ignore[arg-type]
    elif layer.type == "Scale":
        msg.scale_param.bias_term = bool(p["bias_term"])
    elif layer.type == "Eltwise":
        e = msg.eltwise_param
        e.operation = e.DESCRIPTOR.fields_by_name["operation"].enum_type.values_by_name[str(p["operation"])].number


def _layer(net_msg: Any, layer: Layer, *, weights: bool) -> None:  # noqa: ANN401
    m = net_msg.layer.add()
    m.name = layer.name
    m.type = layer.type
    m.bottom.extend(layer.bottoms)
    m.top.append(layer.top)
    _params(layer, m)
    if weights:
        for blob in layer.blobs:
            b = m.blobs.add()
            b.shape.dim.extend(int(d) for d in blob.shape)
            b.data.extend(blob.astype("float32").ravel())


def write_caffe(schema: Schema, net: Network, prototxt: Path, caffemodel: Path) -> None:
    """Write the deploy prototxt and the binary caffemodel of ``net``."""
    from google.protobuf import text_format

    deploy = schema.net()
    deploy.name = net.name
    deploy.input.append(net.input)
    deploy.input_shape.add().dim.extend([1, *net.input_shape])
    model = schema.net()
    model.name = net.name
    for layer in net.layers:
        _layer(deploy, layer, weights=False)
        _layer(model, layer, weights=True)
    _atomic(prototxt, text_format.MessageToString(deploy).encode())
    _atomic(caffemodel, model.SerializeToString())


def _atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
