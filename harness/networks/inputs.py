"""The untrusted inputs of ``nvdla-hil net gen|compile|run``, checked before anything reads,
compiles or writes them: each refusal is an :class:`InputError` (exit 2) of one line naming the
file (and the key or layer) and what is wrong, with control characters in names escaped.

- **The network folder** ``net gen`` writes and ``net compile``/``net run`` read: each of its
  files (:data:`FOLDER_FILES`) is a regular file inside the folder (a symlink leaving it, a FIFO,
  a device or a folder is refused without opening it) of a bounded size, read through
  :func:`nvdla_hil.drivers.files.read_regular`.
- ``net.json``: strict JSON (no duplicate key, no ``NaN``/``Infinity``, bounded nesting), an
  object whose known keys have their types and bounds (names printable, shapes of positive
  ints with a bounded element count, scales finite and positive) and no value naming a path:
  the folder's files have fixed names.
- ``calib.json`` (the compiler's calibration table, read by its RapidJSON code, which aborts
  the compiler on a missing layer or a non-number): an object with one entry per network
  input and layer, each ``{"scale": s}`` (and optionally ``min``, ``max``, ``offset``) or
  ``{"min": a, "max": b}``, the numbers finite, the scale in ``(0, MAX_SCALE]``.
- ``net.prototxt`` and ``net.caffemodel``: bounded; with the checkout's schema (the message
  classes of :func:`.caffe.load_schema`), parsed (a truncated or garbled file is named), layer
  names matching ``net.json``, every bottom defined before it is used, the parameters bounded,
  the shapes followed through the layer types this tool models (convolution and deconvolution
  with groups and dilation, pooling, inner product, eltwise, the shape-keeping ones; another
  type leaves what follows it to the compiler), each weight blob the size its layer needs and
  holding as many values as its shape says.
- ``input.npy``/``expected.npy``: ``.npy`` without pickle, float, finite, of the shapes
  ``net.json`` says.
- **Outputs** (``--dump``, ``-o``, the loadable's ``.input.raw`` scratch file, ``net gen``'s
  folder): never one of the run's inputs, never through a symlink or into a FIFO or device, an
  existing file only when the command may replace it; written whole or not at all.
- **The compiler's own failures** (an abort, rc 134, a crash) are named as the compiler's, with
  the network and the stage: :func:`compiler_failed`.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers.errors import InputError, write_atomic
from ...drivers.files import read_regular

__all__ = ["FOLDER_FILES", "MAX_CAFFEMODEL", "MAX_CALIB", "MAX_META", "MAX_NPY", "MAX_PROTOTXT", "MAX_SCALE",
           "check_calibration", "check_gen_folder", "check_model", "check_output", "check_scratch",
           "compiler_failed", "load_array", "load_net", "member", "read_json", "show", "write_output"]

MAX_META = 64 << 10
MAX_CALIB = 4 << 20
MAX_PROTOTXT = 1 << 20  # a deploy prototxt is a few KiB (ResNet-50: 60 KiB); 1 MiB parses in about 1 s
MAX_CAFFEMODEL = 160 << 20  # ResNet-50: 102 MB; parsed in memory (about 3x the file at peak)
MAX_NPY = 64 << 20
#: JSON nesting accepted (the files are two levels deep)
MAX_DEPTH = 16
#: a calibration scale's largest value (the compiler keeps ``127 * scale`` in a float32)
MAX_SCALE = 1e6
MAX_LAYERS = 4096
#: elements of one blob (c * h * w) and of one weight blob
MAX_ELEMENTS = 1 << 24
MAX_DIM = 1 << 16
#: a layer's kernel, stride and pad at most this
MAX_WINDOW = 64
#: the files of a network folder (``net gen``), each read only as a regular file inside it
FOLDER_FILES = ("net.json", "net.prototxt", "net.caffemodel", "calib.json", "input.npy", "expected.npy")
META_KEYS = ("network", "seed", "input", "output", "layers", "input_shape", "output_shape", "input_scale",
             "output_scale")
META_NEEDED = ("network", "input", "layers", "input_shape", "output_shape", "input_scale", "output_scale")
CALIB_KEYS = ("scale", "min", "max", "offset")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/+\-]{0,127}")


def show(text: object, limit: int = 80) -> str:
    """``text`` safe to print: control characters (terminal escapes) escaped, cut at ``limit``."""
    s = str(text)
    out = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in s[:limit])
    return out + ("..." if len(s) > limit else "")


def _name_ok(value: object) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def _bad(path: Path | str, what: str) -> InputError:
    return InputError(f"{show(path, 200)}: {what}")


# ---- files of the folder -----------------------------------------------------------------------------------


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def member(folder: Path, name: str, limit: int, *, missing: str = "missing") -> Path:
    """``folder/name`` when it is a regular file of at most ``limit`` bytes inside ``folder``
    (a symlink may point only inside it); nothing is opened."""
    path = folder / name
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise _bad(path, "a symlink to nothing") from None
        raise _bad(path, missing) from None
    except OSError as e:
        raise _bad(path, f"cannot be read: {e.strerror or e}") from None
    if os.path.islink(path):
        try:
            Path(os.path.realpath(path)).relative_to(os.path.realpath(folder))
        except ValueError:
            raise _bad(path, f"a symlink out of the network folder (to {show(os.path.realpath(path), 120)}); "
                       "a network folder's files are its own") from None
    if not stat.S_ISREG(st.st_mode):
        raise _bad(path, f"{_kind(st.st_mode)}, not a regular file; only regular files are read")
    if st.st_size > limit:
        raise _bad(path, f"{st.st_size} bytes, more than the {limit} this file may have")
    return path


def _depth_ok(text: str) -> bool:
    """Nesting of at most MAX_DEPTH brackets outside strings (before json builds anything)."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


class _JsonDup(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _JsonDup(f"duplicate key {show(k)!r}", k)
        out[k] = v
    return out


def _constant(name: str) -> Any:  # noqa: ANN401 - never returns
    raise _JsonDup(f"{name} is not JSON (a number must be finite)")


def read_json(path: Path, limit: int) -> Any:  # noqa: ANN401 - a JSON document
    """Strict JSON of the regular file ``path`` (at most ``limit`` bytes): UTF-8, no duplicate
    key, no NaN/Infinity, nesting at most :data:`MAX_DEPTH`; errors name the file and line."""
    data = read_regular(path, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(path, f"not UTF-8 text (byte {e.start})") from None
    if not _depth_ok(text):
        raise _bad(path, f"nested more than {MAX_DEPTH} levels deep")
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise _bad(path, f"not valid JSON ({e.msg} at line {e.lineno})") from None
    except _JsonDup as e:
        word = str(e).split(" ", 1)[0]
        if word in ("NaN", "Infinity", "-Infinity"):
            at = re.search(r"(?<![\w\"])" + re.escape(word) + r"(?![\w\"])", text)
        else:  # the key's second occurrence
            keys = list(re.finditer(re.escape(json.dumps(e.args[1])) + r"\s*:", text)) if len(e.args) > 1 else []
            at = keys[1] if len(keys) > 1 else None
        raise _bad(path, (f"line {text.count(chr(10), 0, at.start()) + 1}: " if at else "") + str(e.args[0])) from None
    except (ValueError, RecursionError) as e:  # int('9' * 5000): too many digits
        raise _bad(path, f"not usable JSON ({show(e)})") from None


# ---- net.json ------------------------------------------------------------------------------------------


def _shape(path: Path, key: str, value: object) -> list[int]:
    if (not isinstance(value, list) or len(value) != 3
            or not all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= MAX_DIM for d in value)):
        raise _bad(path, f"{key!r}: expected [c, h, w], three ints from 1 to {MAX_DIM}, got {show(json.dumps(value))}")
    if math.prod(value) > MAX_ELEMENTS:
        raise _bad(path, f"{key!r}: {value} has more than {MAX_ELEMENTS} elements")
    return value


def _scale(path: Path, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_SCALE:
        raise _bad(path, f"{key!r}: expected a scale, a number in (0, {MAX_SCALE:g}], got {show(json.dumps(value))}")
    return float(value)


def check_meta(path: Path, meta: object) -> dict[str, Any]:
    """``net.json``'s object, its keys checked (module docstring)."""
    if not isinstance(meta, dict):
        raise _bad(path, f"expected an object with {', '.join(META_NEEDED)}, got a {type(meta).__name__}")
    for key in META_NEEDED:
        if key not in meta:
            raise _bad(path, f"no {key!r} (not a folder `nvdla-hil net gen` wrote)")
    for key in ("network", "input", "output"):
        if key in meta and not _name_ok(meta[key]):
            raise _bad(path, f"{key!r}: expected a name of letters, digits and _.:/+- (at most 128), got "
                       f"{show(json.dumps(meta[key]))}")
    layers = meta["layers"]
    if not isinstance(layers, list) or not 1 <= len(layers) <= MAX_LAYERS:
        raise _bad(path, f"'layers': expected a list of 1 to {MAX_LAYERS} layer names")
    for i, name in enumerate(layers):
        if not _name_ok(name):
            raise _bad(path, f"'layers'[{i}]: not a layer name: {show(json.dumps(name))}")
    if len(set(layers)) != len(layers) or meta["input"] in layers:
        raise _bad(path, "'layers': a name twice (or the input's name)")
    _shape(path, "input_shape", meta["input_shape"])
    _shape(path, "output_shape", meta["output_shape"])
    _scale(path, "input_scale", meta["input_scale"])
    _scale(path, "output_scale", meta["output_scale"])
    if "seed" in meta and (isinstance(meta["seed"], bool) or not isinstance(meta["seed"], int)):
        raise _bad(path, f"'seed': expected an int, got {show(json.dumps(meta['seed']))}")
    if "layer_specs" in meta:
        _layer_specs(path, meta["layer_specs"])
    for key, value in meta.items():
        if key not in META_KEYS and isinstance(value, str) and ("/" in value or "\\" in value or value.startswith(".")):
            raise _bad(path, f"{show(key)!r} names a path ({show(value)}); a network folder's files have fixed "
                       f"names ({', '.join(FOLDER_FILES)}) and are read from the folder only")
    return meta


def _layer_specs(path: Path, specs: object) -> None:
    """``layer_specs`` (what :func:`.compiler.known_issues` reads): a list of objects with a
    ``name`` and ``type``, ``params`` of names, bounded ints, finite numbers and flags (a
    non-global pooling with its kernel and stride), ``in_hw`` a positive int."""
    if not isinstance(specs, list) or len(specs) > MAX_LAYERS:
        raise _bad(path, f"'layer_specs': expected a list of at most {MAX_LAYERS} layer objects")
    for i, spec in enumerate(specs):
        where = f"'layer_specs'[{i}]"
        if not isinstance(spec, dict) or not _name_ok(spec.get("name")) or not _name_ok(spec.get("type")):
            raise _bad(path, f"{where}: expected an object with a layer name and type, got {show(json.dumps(spec))}")
        hw = spec.get("in_hw")
        if hw is not None and (isinstance(hw, bool) or not isinstance(hw, int) or not 1 <= hw <= MAX_DIM):
            raise _bad(path, f"{where} in_hw: expected an int from 1 to {MAX_DIM}, got {show(json.dumps(hw))}")
        params = spec.get("params", {})
        if not isinstance(params, dict):
            raise _bad(path, f"{where} params: expected an object, got {show(json.dumps(params))}")
        for k, v in params.items():
            ok = (isinstance(v, bool) or (isinstance(v, int) and 0 <= v <= MAX_DIM)
                  or (isinstance(v, float) and math.isfinite(v)) or _name_ok(v))
            count = k in ("kernel", "stride", "pad", "group", "dilation", "num_output", "local_size")
            if not _name_ok(k) or not ok or (count and (isinstance(v, bool) or not isinstance(v, int))) or (
                    k in ("kernel", "stride", "group", "dilation") and v == 0):
                raise _bad(path, f"{where} params {show(json.dumps(k))}: {show(json.dumps(v))} is not a usable value")
        if spec["type"] == "Pooling" and not params.get("global") and not {"kernel", "stride"} <= set(params):
            raise _bad(path, f"{where}: a pooling without its kernel and stride")


def load_array(path: Path, shape: list[int], folder: Path | None = None) -> np.ndarray:
    """A float ``.npy`` array (no pickle) of ``shape``, finite; bounded before it is read."""
    folder = folder or path.parent
    member(folder, path.name, MAX_NPY)
    data = read_regular(path, MAX_NPY)
    f = io.BytesIO(data)
    try:  # the header first: its shape and dtype checked before anything is allocated
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        dims, _, dtype = read_header(f)
    except (OSError, ValueError, EOFError, SyntaxError, TypeError) as e:
        raise _bad(path, f"not a .npy array without objects ({show(e, 160)})") from None
    if dtype.kind != "f" or dtype.hasobject:
        raise _bad(path, f"expected a float array, got {show(dtype)}")
    if list(dims) != list(shape):
        raise _bad(path, f"shape {list(dims)}, net.json says {list(shape)}")
    if len(data) - f.tell() != math.prod(dims) * dtype.itemsize:
        raise _bad(path, f"{len(data) - f.tell()} bytes of data, its header says {math.prod(dims) * dtype.itemsize}")
    try:
        a = np.load(io.BytesIO(data), allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise _bad(path, f"not a .npy array without objects ({show(e, 160)})") from None
    if not np.all(np.isfinite(a)):
        raise _bad(path, "holds NaN or infinite values")
    return a


def load_net(folder: Path, *, arrays: bool = False) -> Any:  # noqa: ANN401 - a run.NetFiles
    """The network folder ``folder`` (:class:`.run.NetFiles`) with its ``net.json`` checked;
    ``arrays``: ``input.npy`` and ``expected.npy`` checked too (``net run`` reads them)."""
    from .run import NetFiles

    folder = Path(folder)
    if not folder.is_dir():
        raise _bad(folder, "not a folder (a folder `nvdla-hil net gen` wrote)" if folder.exists() else
                   "no such folder")
    path = member(folder, "net.json", MAX_META, missing="missing (not a folder `nvdla-hil net gen` wrote)")
    meta = check_meta(path, read_json(path, MAX_META))
    if arrays:
        load_array(folder / "input.npy", meta["input_shape"], folder)
        load_array(folder / "expected.npy", meta["output_shape"], folder)
    return NetFiles(folder, meta)


# ---- calib.json -----------------------------------------------------------------------------------------


def _number(path: Path, where: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise _bad(path, f"{where}: expected a number in [{low:g}, {high:g}], got {show(json.dumps(value))}")
    return float(value)


def check_calibration(files: Any) -> dict[str, dict[str, float]]:  # noqa: ANN401 - a run.NetFiles
    """``calib.json`` of ``files``: every entry the compiler reads present and usable (module
    docstring); the compiler aborts on a missing one without naming it."""
    path = member(files.folder, files.calib.name, MAX_CALIB,
                  missing="missing (an INT8 compilation needs the calibration table)")
    table = read_json(path, MAX_CALIB)
    if not isinstance(table, dict):
        raise _bad(path, f"expected an object of layer name -> {{\"scale\": ...}}, got a {type(table).__name__}")
    for name, entry in table.items():
        if not _name_ok(name):
            raise _bad(path, f"key {show(json.dumps(name))}: not a layer name")
        if not isinstance(entry, dict):
            raise _bad(path, f"{name!r}: expected an object {{\"scale\": s}}, got {show(json.dumps(entry))}")
        extra = [k for k in entry if k not in CALIB_KEYS]
        if extra:
            raise _bad(path, f"{name!r}: unknown key {show(extra[0])!r} (expected {', '.join(CALIB_KEYS)})")
        if "scale" in entry:
            _number(path, f"{name!r} scale", entry["scale"], 0, MAX_SCALE)
            if entry["scale"] == 0:
                raise _bad(path, f"{name!r} scale: 0 (a scale must be positive)")
        for k in ("min", "max", "offset"):
            if k in entry:
                _number(path, f"{name!r} {k}", entry[k], -127 * MAX_SCALE, 127 * MAX_SCALE)
        if "scale" not in entry and {"min", "max"} <= set(entry) and not entry["min"] < entry["max"]:
            raise _bad(path, f"{name!r}: min {entry['min']} is not below max {entry['max']}")
    names = [files.meta.get("input", "data"), *files.meta.get("layers", [])]
    lacking = [n for n in names if n not in table or not ("scale" in table[n] or {"min", "max"} <= set(table[n]))]
    if lacking:
        raise _bad(path, f"no scale (or min and max) for {', '.join(show(n) for n in lacking[:8])}"
                   f"{' ...' if len(lacking) > 8 else ''}; the compiler needs one for the input and every layer")
    return table


# ---- net.prototxt and net.caffemodel ---------------------------------------------------------------------


def _ints(field: Any, path: Path, where: str, low: int, high: int) -> list[int]:  # noqa: ANN401
    vals = [int(v) for v in field]
    for v in vals:
        if not low <= v <= high:
            raise _bad(path, f"{where}: {v} is outside [{low}, {high}]")
    return vals


def _one(vals: list[int], default: int, path: Path, where: str) -> int:
    if len(set(vals)) > 1:
        raise _bad(path, f"{where}: different values per axis {vals}; the zoo's layers are square")
    return vals[0] if vals else default


Shape = tuple[int, int, int]
#: types whose output has their first input's shape (no weights, or per-channel ones)
SAME_SHAPE = {"ReLU": [], "Sigmoid": [], "TanH": [], "LRN": [], "Softmax": [], "Dropout": [], "Power": [],
              "AbsVal": [], "BNLL": [], "ELU": [], "PReLU": [1], "BatchNorm": [1, 1, 0], "Scale": [1, 1]}


def _window(path: Path, where: str, p: Any) -> tuple[int, int, int, int]:  # noqa: ANN401 - a ConvolutionParameter
    """(kernel, stride, pad, dilation) of a convolution, bounded, the same on both axes."""
    k = _one(_ints(p.kernel_size, path, f"{where} kernel_size", 1, MAX_WINDOW), 0, path, where)
    s = _one(_ints(p.stride, path, f"{where} stride", 1, MAX_WINDOW), 1, path, where)
    pad = _one(_ints(p.pad, path, f"{where} pad", 0, MAX_WINDOW), 0, path, where)
    d = _one(_ints(p.dilation, path, f"{where} dilation", 1, MAX_WINDOW), 1, path, where)
    if k == 0 or p.HasField("kernel_h") or p.HasField("stride_h") or p.HasField("pad_h"):
        raise _bad(path, f"{where}: kernel_size (square) is needed; kernel_h/_w, stride_h/_w and pad_h/_w are not used")
    return k, s, pad, d


def _layer_shape(path: Path, layer: Any, ins: list[Shape | None]) -> tuple[Shape | None, list[int]]:  # noqa: ANN401
    """(output shape, element count of each weight blob, 0 for one not checked) of one parsed
    LayerParameter; parameters bounded. A type this tool does not model keeps its shape unknown
    (None: nothing after it is checked against it); the compiler judges it."""
    where = f"layer {show(layer.name)!r} ({show(layer.type)})"
    if layer.type in ("Convolution", "Deconvolution"):
        p = layer.convolution_param
        n = _ints([p.num_output], path, f"{where} num_output", 1, MAX_DIM)[0]
        g = _ints([p.group], path, f"{where} group", 1, n)[0]
        k, s, pad, d = _window(path, where, p)
    elif layer.type == "Pooling":
        p = layer.pooling_param
        for field, low in (("kernel_size", 0), ("stride", 1), ("pad", 0)):
            _ints([getattr(p, field)], path, f"{where} {field}", low, MAX_WINDOW)
    elif layer.type == "InnerProduct":
        n = _ints([layer.inner_product_param.num_output], path, f"{where} num_output", 1, MAX_DIM)[0]
    if any(i is None for i in ins):
        return None, []
    c, h, w = ins[0]  # type: ignore[misc]
    if layer.type in ("Convolution", "Deconvolution"):
        if c % g or n % g:
            raise _bad(path, f"{where}: {c} -> {n} channels do not split in {g} groups")
        span = d * (k - 1) + 1
        if layer.type == "Convolution":
            if span > h + 2 * pad or span > w + 2 * pad:
                raise _bad(path, f"{where}: kernel {k} (dilation {d}) does not fit its {h}x{w} input (pad {pad})")
            out: Shape | None = (n, (h + 2 * pad - span) // s + 1, (w + 2 * pad - span) // s + 1)
            weights = n * (c // g) * k * k
        else:
            out, weights = (n, (h - 1) * s + span - 2 * pad, (w - 1) * s + span - 2 * pad), c * (n // g) * k * k
        blobs = [weights, n]
    elif layer.type == "Pooling":
        p = layer.pooling_param
        k, s, pad = (h, 1, 0) if p.global_pooling else (p.kernel_size, p.stride, p.pad)
        if not 1 <= k <= h + 2 * pad or k > w + 2 * pad:
            raise _bad(path, f"{where}: kernel {k} does not fit its {h}x{w} input (pad {pad})")
        out, blobs = (c, _pooled(h, k, s, pad), _pooled(w, k, s, pad)), []
    elif layer.type == "InnerProduct":
        out, blobs = (n, 1, 1), [n * c * h * w, n]
    elif layer.type == "Eltwise":
        if len(ins) < 2 or any(i != ins[0] for i in ins):
            raise _bad(path, f"{where}: needs two or more bottoms of one shape, got {ins}")
        out, blobs = ins[0], []
    elif layer.type in SAME_SHAPE:
        out, blobs = ins[0], [c * m for m in SAME_SHAPE[layer.type]]
    else:
        return None, []
    if out is not None and (min(out) < 1 or math.prod(out) > MAX_ELEMENTS) or any(b > MAX_ELEMENTS * 4 for b in blobs):
        raise _bad(path, f"{where}: its output {out} or its weights are empty or larger than this tool runs")
    return out, blobs


def _pooled(n: int, kernel: int, stride: int, pad: int) -> int:
    """Caffe's pooled size (ceil, the last window starting inside the input and its pad)."""
    out = -(-(n + 2 * pad - kernel) // stride) + 1
    return out - 1 if pad and (out - 1) * stride >= n + pad else out


def _blob_count(path: Path, where: str, blob: Any) -> int:  # noqa: ANN401 - a BlobProto
    dims = [int(d) for d in blob.shape.dim] if blob.HasField("shape") else \
        [int(blob.num), int(blob.channels), int(blob.height), int(blob.width)]
    if any(d < 0 for d in dims) or math.prod(dims) > MAX_ELEMENTS * 4:
        raise _bad(path, f"{where}: blob shape {dims[:8]} is negative or too large")
    n, have = math.prod(dims), len(blob.data) or len(blob.double_data)
    if have != n:
        raise _bad(path, f"{where}: blob shape {dims[:8]} holds {n} values, the blob has {have}")
    return n


def _parse(schema: Any, path: Path, data: bytes, text: bool) -> Any:  # noqa: ANN401
    from google.protobuf import message, text_format  # type: ignore[import-untyped]

    msg = schema.net()
    try:
        if text:
            text_format.Parse(data.decode("utf-8"), msg)
        else:
            msg.ParseFromString(data)
    except UnicodeDecodeError as e:
        raise _bad(path, f"not UTF-8 text (byte {e.start})") from None
    except text_format.ParseError as e:
        raise _bad(path, f"not a Caffe prototxt: {show(e, 200)}") from None
    except message.DecodeError as e:
        raise _bad(path, f"not a Caffe model (truncated or garbled protobuf: {show(e, 160)})") from None
    except (RecursionError, ValueError, TypeError, OverflowError) as e:
        raise _bad(path, f"not a Caffe {'prototxt' if text else 'model'} ({show(e, 160)})") from None
    return msg


def _shapes(files: Any, proto: Path, deploy: Any) -> dict[str, list[int]]:  # noqa: ANN401 - NetFiles, NetParameter
    meta = files.meta
    inputs = list(deploy.input)
    if inputs != [meta["input"]]:
        raise _bad(proto, f"input {show(inputs)}: net.json says one input {meta['input']!r}")
    dims = [int(d) for d in deploy.input_shape[0].dim] if deploy.input_shape else [int(d) for d in deploy.input_dim]
    if dims != [1, *meta["input_shape"]]:
        raise _bad(proto, f"input shape {show(dims)}: net.json says {[1, *meta['input_shape']]}")
    names = [la.name for la in deploy.layer]
    if names != meta["layers"]:
        raise _bad(proto, f"layers {show(names, 120)} are not net.json's {show(meta['layers'], 120)}")
    shapes: dict[str, Shape | None] = {meta["input"]: tuple(meta["input_shape"])}
    need: dict[str, list[int]] = {}
    for la in deploy.layer:
        where = f"layer {show(la.name)!r}"
        if not _name_ok(la.type):
            raise _bad(proto, f"{where}: type {show(json.dumps(la.type))} is not a layer type")
        if len(la.top) != 1 or not la.bottom or any(b not in shapes for b in la.bottom):
            raise _bad(proto, f"{where}: bottoms {show(list(la.bottom))} must be defined above it, one top")
        out, need[la.name] = _layer_shape(proto, la, [shapes[b] for b in la.bottom])
        shapes[la.top[0]] = out
    last = shapes[deploy.layer[-1].top[0]]
    if last is not None and list(last) != meta["output_shape"]:
        raise _bad(proto, f"output {list(last)}: net.json says {meta['output_shape']}")
    return need


def check_model(files: Any, schema: Any = None) -> None:  # noqa: ANN401 - run.NetFiles, caffe.Schema
    """``net.prototxt`` and ``net.caffemodel`` of ``files``: regular, inside the folder,
    bounded; with ``schema`` (:func:`.caffe.load_schema`), parsed and checked against
    ``net.json`` (module docstring), so NVDLA's compiler sees only a well-formed network."""
    proto = member(files.folder, "net.prototxt", MAX_PROTOTXT)
    model = member(files.folder, "net.caffemodel", MAX_CAFFEMODEL)
    if schema is None:
        return
    need = _shapes(files, proto, _parse(schema, proto, read_regular(proto, MAX_PROTOTXT), True))
    weights = _parse(schema, model, read_regular(model, MAX_CAFFEMODEL), False)
    seen = {}
    for la in weights.layer:
        if la.name in seen:
            raise _bad(model, f"layer {show(la.name)!r} twice")
        seen[la.name] = la
    for name, counts in need.items():
        if not any(counts):
            continue
        la = seen.get(name)
        where = f"layer {show(name)!r}"
        if la is None or not la.blobs:
            raise _bad(model, f"{where}: no weights (net.prototxt has the layer)")
        got = [_blob_count(model, where, b) for b in la.blobs]
        if len(got) > len(counts) or any(n and g != n for g, n in zip(got, counts)):  # a bias may be left out
            raise _bad(model, f"{where}: weight blobs of {got} values, the layer needs {counts}")


# ---- outputs ----------------------------------------------------------------------------------------------


def _inputs(files: Any, extra: Iterable[str | os.PathLike[str]]) -> list[tuple[str, Path]]:  # noqa: ANN401
    out = [(name, Path(files.folder) / name) for name in FOLDER_FILES] if files is not None else []
    return out + [(Path(p).name, Path(p)) for p in extra]


def check_output(path: str | os.PathLike[str], option: str, files: Any = None,  # noqa: ANN401 - run.NetFiles
                 *extra: str | os.PathLike[str], force: bool = False) -> Path:
    """Refuse an output ``path`` that is one of the run's inputs (the network folder's files,
    ``extra``: by resolved path or inode), a symlink, a FIFO, device or folder, an existing file
    unless ``force``, or in a folder that does not exist."""
    p = Path(path)
    try:
        st: os.stat_result | None = os.lstat(p)
    except OSError:
        st = None
    for what, inp in _inputs(files, extra):
        try:
            same = os.path.realpath(p) == os.path.realpath(inp) or (st is not None and os.path.samefile(p, inp))
        except OSError:
            same = False
        if same:
            raise _bad(p, f"{option}: it is the run's input {what} ({show(inp, 120)}); an output never overwrites "
                       "an input")
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise _bad(p, f"{option}: a symlink; an output is never written through one")
        if not stat.S_ISREG(st.st_mode):
            raise _bad(p, f"{option}: {_kind(st.st_mode)}; an output is a regular file")
        if st.st_nlink > 1:
            raise _bad(p, f"{option}: a file with {st.st_nlink} names (a hard link); not replaced")
        if not force:
            raise _bad(p, f"{option}: the file exists; pass --force to replace it")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise _bad(p, f"{option}: its folder {show(parent, 120)} does not exist")
    return p


def write_output(path: str | os.PathLike[str], data: bytes, option: str, files: Any = None,  # noqa: ANN401
                 *extra: str | os.PathLike[str], force: bool = False) -> None:
    """Check ``path`` again (:func:`check_output`) and write it whole or not at all (a
    temporary file renamed over it: a path swapped for a symlink meanwhile is replaced, never
    followed); a full disk is an error naming it."""
    check_output(path, option, files, *extra, force=force)
    write_atomic(path, data)


def check_scratch(path: str | os.PathLike[str], files: Any = None) -> Path:  # noqa: ANN401 - run.NetFiles
    """The file a run writes for itself (``<loadable>.input.raw``): replaced when it is a
    regular file of its own, refused when a symlink, FIFO, device, folder, hard link or one
    of the network's files."""
    return check_output(path, "the run's input file", files, force=True)


def check_gen_folder(out: str | os.PathLike[str], force: bool) -> Path:
    """``net gen``'s ``--out``: a folder (made if missing) whose network files, when present,
    are regular files of their own (replaced with ``--force`` only); never a symlink or FIFO
    among them, so nothing outside the folder is written."""
    folder = Path(out)
    if os.path.lexists(folder) and not folder.is_dir():
        raise _bad(folder, "--out: exists and is not a folder")
    present = [n for n in FOLDER_FILES if os.path.lexists(folder / n)]
    if present and not force:
        what = "a network (net.json)" if "net.json" in present else f"{present[0]}"
        raise _bad(folder, f"already holds {what}: pass --force to overwrite it")
    for name in present:
        check_output(folder / name, "--out", None, force=True)
    return folder


# ---- the compiler's failures -----------------------------------------------------------------------------


def compiler_failed(files: Any, stage: str, exc: BaseException) -> InputError:  # noqa: ANN401 - run.NetFiles
    """The compiler's own failure (an abort, a crash, a refusal) named as the compiler's: the
    network, its folder and the stage on the first line, the compiler's last lines after it."""
    text = str(exc)
    head, _, tail = text.partition("\n")
    m = re.search(r"killed by signal (\d+)|exit (-?\d+)", head)
    how = (f"killed by signal {m.group(1)}" if m and m.group(1) else f"exit {m.group(2)}") if m else "failed"
    name = files.meta.get("network", "?") if files is not None else "?"
    return InputError(f"{show(files.folder if files is not None else '?', 200)}: NVDLA's compiler failed on network "
                      f"{show(name)!r} at stage {stage} ({how}): {show(head, 400)}"
                      + "".join(f"\n{show(line, 300)}" for line in tail.splitlines()[-20:]))
