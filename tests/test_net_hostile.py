"""Hostile inputs of ``nvdla-hil net gen|compile|run`` (issue 37): harness/networks/inputs.py on
its own (a network folder written by :func:`~nvdla_hil.harness.networks.run.generate`, then one
file spoiled: specials, sizes, strict JSON, calibration tables, arrays, outputs aimed at inputs),
with the checkout's schema the prototxt and caffemodel checks, and the commands end to end
(exit 2 with one line naming the file, nothing written outside, no hang).

The module tests need nothing. The schema tests need an nvdla/sw checkout (``NVDLA_SW``, else
``../shared/nvdla_src/sw``) whose compiler is built into the cache (`nvdla-hil net
build-compiler`; they never build it); the command-line tests also run NVDLA's firmware on the
model target. Each skips, saying why, without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.drivers.errors import InputError
from nvdla_hil.harness.networks import inputs
from nvdla_hil.harness.networks.run import generate

CLI = [sys.executable, "-m", "nvdla_hil.harness.cli"]
SHARED_SW = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_src" / "sw"
LENET = ("conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2")


def _placeholder_model(net, prototxt: Path, caffemodel: Path) -> None:  # noqa: ANN001 - a zoo.Network
    prototxt.write_text(f'name: "{net.name}"\n')
    caffemodel.write_bytes(b"\n\x05lenet")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A network folder as `net gen lenet` writes it (the Caffe files are placeholders)."""
    out = tmp_path / "lenet"
    generate("lenet", 0, out, _placeholder_model)
    return out


def _refused(fn, *args, match: str, **kw) -> str:  # noqa: ANN001
    with pytest.raises(InputError) as e:
        fn(*args, **kw)
    msg = str(e.value)
    assert match in msg, msg
    assert "\x1b" not in msg and "\x07" not in msg and "\n" not in msg, msg
    return msg


def _edit_json(path: Path, fn) -> None:  # noqa: ANN001
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


# ---- the folder and net.json ------------------------------------------------------------------------------


def test_a_generated_folder_passes_every_check(folder: Path) -> None:
    files = inputs.load_net(folder, arrays=True)
    assert files.meta["network"] == "lenet" and files.meta["layers"] == list(LENET)
    table = inputs.check_calibration(files)
    assert set(table) == {"data", *LENET}
    inputs.check_model(files)  # without the schema: regular, inside, bounded


@pytest.mark.parametrize(("what", "reason"), [
    ("fifo", "a FIFO, not a regular file"),
    ("dev-zero", "a symlink out of the network folder (to /dev/zero)"),
    ("dev-urandom", "a symlink out of the network folder (to /dev/urandom)"),
    ("folder", "a folder, not a regular file"),
    ("outside", "a symlink out of the network folder"),
    ("loop", "cannot be read"),
    ("dangling", "a symlink to nothing"),
])
def test_a_special_net_json_is_refused_without_opening_it(folder: Path, tmp_path: Path, what: str, reason: str) -> None:
    meta = folder / "net.json"
    outside = tmp_path / "elsewhere.json"
    outside.write_text(meta.read_text())  # a file that would pass: the symlink itself is refused
    meta.unlink()
    if what == "fifo":
        os.mkfifo(meta)
    elif what.startswith("dev-"):
        meta.symlink_to("/dev/" + what[4:])
    elif what == "folder":
        meta.mkdir()
    elif what == "outside":
        meta.symlink_to(outside)
    elif what == "loop":
        meta.symlink_to("net.json")
    else:
        meta.symlink_to(tmp_path / "nothing")
    msg = _refused(inputs.load_net, folder, match=str(meta))
    assert reason in msg, msg


def test_a_symlink_inside_the_folder_is_followed(folder: Path) -> None:
    (folder / "meta-copy.json").write_text((folder / "net.json").read_text())
    (folder / "net.json").unlink()
    (folder / "net.json").symlink_to("meta-copy.json")
    assert inputs.load_net(folder).meta["network"] == "lenet"


def test_a_huge_sparse_net_json_is_refused_by_its_size(folder: Path) -> None:
    os.truncate(folder / "net.json", 4 << 30)
    _refused(inputs.load_net, folder, match="more than the")


@pytest.mark.parametrize(("text", "match"), [
    ('{"network": "a",\n "network": "b"}', "line 2: duplicate key 'network'"),
    ("[" * 20000 + "]" * 20000, "nested more than"),
    ('{"seed": ' + "9" * 5000 + "}", "not usable JSON"),
    ('{"a": "NaN",\n"b": NaN}', "line 2: NaN is not JSON"),
    ('{"a": -Infinity}', "-Infinity is not JSON"),
    ("[1, 2]", "expected an object"),
    ("", "not valid JSON (Expecting value at line 1)"),
    ('{\n"network": "lenet",\n', "at line 3)"),
])
def test_net_json_is_strict_json(folder: Path, text: str, match: str) -> None:
    (folder / "net.json").write_text(text)
    _refused(inputs.load_net, folder, match=match)


def test_net_json_not_utf8(folder: Path) -> None:
    (folder / "net.json").write_bytes(b'{"network": "\xff"}')
    _refused(inputs.load_net, folder, match="not UTF-8")


@pytest.mark.parametrize(("key", "value", "match"), [
    ("input_scale", -1, "'input_scale': expected a scale"),
    ("input_scale", 0, "'input_scale'"),
    ("output_scale", 1e300, "'output_scale'"),
    ("output_scale", "0.1", "'output_scale'"),
    ("output_scale", True, "'output_scale'"),
    ("input_shape", [1, 28], "'input_shape': expected [c, h, w]"),
    ("input_shape", [0, 28, 28], "'input_shape'"),
    ("input_shape", [1.5, 28, 28], "'input_shape'"),
    ("input_shape", [True, 28, 28], "'input_shape'"),
    ("input_shape", [65536, 65536, 65536], "more than"),
    ("output_shape", "10", "'output_shape'"),
    ("network", "x\x1b]0;pwned\x07", "'network': expected a name"),
    ("network", "<script>pwned(1)</script>", "'network'"),
    ("network", "", "'network'"),
    ("input", None, "'input'"),
    ("layers", "conv1", "'layers': expected a list"),
    ("layers", ["conv1", 5], "'layers'[1]"),
    ("layers", ["conv1", "conv1"], "a name twice"),
    ("layers", ["conv1", "a\x1b[2Jb"], "'layers'[1]"),
    ("seed", "0", "'seed': expected an int"),
    ("prototxt", "/etc/passwd", "names a path"),
    ("calib", "../victim.json", "names a path"),
    ("layer_specs", 5, "'layer_specs': expected a list"),
    ("layer_specs", [7], "'layer_specs'[0]: expected an object"),
    ("layer_specs", [{"name": "a\x1b[2J", "type": "ReLU"}], "'layer_specs'[0]: expected an object"),
    ("layer_specs", [{"name": "p", "type": "Pooling", "params": {"pool": "AVE", "kernel": 3, "stride": 0}}],
     "'layer_specs'[0] params \"stride\": 0 is not a usable value"),
    ("layer_specs", [{"name": "p", "type": "Pooling", "params": {"pool": "AVE"}}], "without its kernel and stride"),
    ("layer_specs", [{"name": "c", "type": "Convolution", "params": {"group": "x"}}], "params \"group\""),
    ("layer_specs", [{"name": "c", "type": "ReLU", "in_hw": -1}], "in_hw: expected an int"),
])
def test_net_json_values_are_checked(folder: Path, key: str, value: object, match: str) -> None:
    _edit_json(folder / "net.json", lambda d: d.__setitem__(key, value))
    msg = _refused(inputs.load_net, folder, match=match)
    assert str(folder / "net.json") in msg


@pytest.mark.parametrize("key", ["network", "input", "layers", "input_shape", "output_shape",
                                 "input_scale", "output_scale"])
def test_a_missing_key_is_named(folder: Path, key: str) -> None:
    _edit_json(folder / "net.json", lambda d: d.pop(key))
    _refused(inputs.load_net, folder, match=f"no {key!r}")


def test_a_missing_folder_or_file(tmp_path: Path, folder: Path) -> None:
    _refused(inputs.load_net, tmp_path / "nowhere", match="no such folder")
    _refused(inputs.load_net, folder / "net.json", match="not a folder")
    (folder / "net.json").unlink()
    _refused(inputs.load_net, folder, match="missing (not a folder `nvdla-hil net gen` wrote)")


# ---- the arrays -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("arr", "match"), [
    (np.zeros((1, 28, 27), np.float32), "shape [1, 28, 27], net.json says [1, 28, 28]"),
    (np.zeros((1, 28, 28), np.int32), "expected a float array"),
    (np.zeros((1, 28, 28), np.complex64), "expected a float array"),
    (np.array([{"a": 1}], dtype=object), "expected a float array, got object"),
    (np.full((1, 28, 28), np.nan, np.float32), "NaN or infinite"),
])
def test_input_npy_is_checked(folder: Path, arr: np.ndarray, match: str) -> None:
    with open(folder / "input.npy", "wb") as f:
        np.save(f, arr, allow_pickle=True)
    _refused(inputs.load_net, folder, arrays=True, match=match)


def test_an_npy_header_claiming_a_terabyte_allocates_nothing(folder: Path) -> None:
    hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }"
    hdr += b" " * (118 - len(hdr)) + b"\n"
    (folder / "expected.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr + bytes(64))
    _refused(inputs.load_net, folder, arrays=True, match=str(folder / "expected.npy"))


def test_an_array_that_is_a_fifo_or_too_big(folder: Path) -> None:
    (folder / "input.npy").unlink()
    os.mkfifo(folder / "input.npy")
    _refused(inputs.load_net, folder, arrays=True, match="a FIFO")
    (folder / "input.npy").unlink()
    np.save(folder / "input.npy", np.zeros((1, 28, 28), np.float32))
    os.truncate(folder / "expected.npy", inputs.MAX_NPY + 1)
    _refused(inputs.load_net, folder, arrays=True, match=f"expected.npy: {inputs.MAX_NPY + 1} bytes, more than the")
    np.save(folder / "expected.npy", np.zeros((10, 1, 1), np.float32))
    with open(folder / "expected.npy", "ab") as f:
        f.write(b"\0" * 8)
    _refused(inputs.load_net, folder, arrays=True, match="expected.npy: 48 bytes of data, its header says 40")


# ---- the calibration table -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d["conv1"].__setitem__("scale", -0.5), "'conv1' scale: expected a number"),
    (lambda d: d["conv1"].__setitem__("scale", 0), "'conv1' scale: 0"),
    (lambda d: d["ip2"].__setitem__("scale", 1e300), "'ip2' scale"),
    (lambda d: d["ip2"].__setitem__("scale", "0.1"), "'ip2' scale"),
    (lambda d: d["ip2"].__setitem__("scale", None), "'ip2' scale"),
    (lambda d: d["ip2"].__setitem__("offset", [1]), "'ip2' offset"),
    (lambda d: d.pop("pool2"), "no scale (or min and max) for pool2;"),
    (lambda d: d.pop("data"), "no scale (or min and max) for data;"),
    (lambda d: d.__setitem__("conv1", [0.1]), "'conv1': expected an object"),
    (lambda d: d.__setitem__("conv1", {"scael": 0.1}), "unknown key 'scael'"),
    (lambda d: d.__setitem__("conv1", {"min": 1, "max": -1}), "min 1 is not below max -1"),
    (lambda d: d.__setitem__("conv1", {"offset": 0}), "no scale (or min and max) for conv1;"),
    (lambda d: d.__setitem__("x\x1b]0;t\x07", {"scale": 1}), "not a layer name"),
    (lambda d: d.__setitem__("<img src=x onerror=pwned(1)>", {"scale": 1}), "not a layer name"),
])
def test_the_calibration_table_is_checked(folder: Path, edit, match: str) -> None:  # noqa: ANN001
    _edit_json(folder / "calib.json", edit)
    files = inputs.load_net(folder)
    msg = _refused(inputs.check_calibration, files, match=match)
    assert msg.startswith(str(folder / "calib.json") + ": ")


@pytest.mark.parametrize(("text", "match"), [
    ('{"data": {"scale": NaN}}', "NaN is not JSON"),
    ('{"data": {"scale": Infinity}}', "Infinity is not JSON"),
    ('{"data": {"scale": 1}, "data": {"scale": 2}}', "duplicate key 'data'"),
    ('{"data": ' + "[" * 40 + "]" * 40 + "}", "nested more than"),
    ("[]", "expected an object"),
])
def test_the_calibration_table_is_strict_json(folder: Path, text: str, match: str) -> None:
    (folder / "calib.json").write_text(text)
    _refused(inputs.check_calibration, inputs.load_net(folder), match=match)


def test_min_and_max_without_a_scale_pass(folder: Path) -> None:
    _edit_json(folder / "calib.json", lambda d: d.__setitem__("conv1", {"min": -3.0, "max": 3.0}))
    assert inputs.check_calibration(inputs.load_net(folder))["conv1"] == {"min": -3.0, "max": 3.0}


def test_a_calibration_table_symlinked_out_of_the_folder(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "calib.json").write_text((folder / "calib.json").read_text())
    (folder / "calib.json").unlink()
    (folder / "calib.json").symlink_to(tmp_path / "calib.json")
    _refused(inputs.check_calibration, inputs.load_net(folder), match="a symlink out of the network folder")


def test_the_model_files_are_regular_and_bounded(folder: Path) -> None:
    files = inputs.load_net(folder)
    os.truncate(folder / "net.caffemodel", inputs.MAX_CAFFEMODEL + 1)
    _refused(inputs.check_model, files, match="net.caffemodel: ")
    (folder / "net.prototxt").unlink()
    (folder / "net.prototxt").symlink_to("/dev/zero")
    _refused(inputs.check_model, files, match="net.prototxt: a symlink out of the network folder")


# ---- outputs -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["net.json", "calib.json", "net.prototxt", "net.caffemodel", "input.npy",
                                  "expected.npy"])
def test_an_output_is_never_an_input(folder: Path, name: str) -> None:
    files = inputs.load_net(folder)
    before = (folder / name).read_bytes()
    _refused(inputs.check_output, folder / name, "--dump", files, force=True, match="it is the run's input")
    _refused(inputs.write_output, folder / name, b"x", "--dump", files, force=True, match="it is the run's input")
    assert (folder / name).read_bytes() == before


def test_an_output_through_a_symlink_a_fifo_or_a_hard_link_is_refused(folder: Path, tmp_path: Path) -> None:
    files = inputs.load_net(folder)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "link").symlink_to(victim)
    _refused(inputs.write_output, tmp_path / "link", b"x", "--dump", files, force=True, match="a symlink")
    os.link(victim, tmp_path / "hard")
    _refused(inputs.write_output, tmp_path / "hard", b"x", "--dump", files, force=True, match="hard link")
    os.mkfifo(tmp_path / "fifo")
    _refused(inputs.check_output, tmp_path / "fifo", "--dump", files, force=True, match="a FIFO")
    _refused(inputs.check_output, "/dev/full", "--dump", files, force=True, match="a character device")
    _refused(inputs.check_output, tmp_path / "nowhere" / "x", "--dump", files, match="does not exist")
    loadable = tmp_path / "x.nvdla"
    loadable.write_bytes(b"ld")
    _refused(inputs.check_output, loadable, "--dump", files, loadable, force=True, match="input x.nvdla")
    assert victim.read_text() == "keep" and loadable.read_bytes() == b"ld"


def test_an_existing_output_needs_force_and_is_replaced_whole(folder: Path, tmp_path: Path) -> None:
    files = inputs.load_net(folder)
    out = tmp_path / "out.dimg"
    out.write_bytes(b"old")
    _refused(inputs.write_output, out, b"new", "--dump", files, match="pass --force")
    inputs.write_output(out, b"new", "--dump", files, force=True)
    assert out.read_bytes() == b"new"
    inputs.write_output(tmp_path / "fresh.dimg", b"1", "--dump", files)
    assert (tmp_path / "fresh.dimg").read_bytes() == b"1"


def test_the_runs_scratch_input(folder: Path, tmp_path: Path) -> None:
    files = inputs.load_net(folder)
    raw = folder / "x.nvdla.input.raw"
    assert inputs.check_scratch(raw, files) == raw  # absent: fine
    raw.write_bytes(b"old run")
    assert inputs.check_scratch(raw, files) == raw  # its own earlier file: replaced
    raw.unlink()
    raw.symlink_to("net.json")
    _refused(inputs.check_scratch, raw, files, match="it is the run's input net.json")
    raw.unlink()
    os.mkfifo(raw)
    _refused(inputs.check_scratch, raw, files, match="a FIFO")


def test_gen_never_writes_through_the_folder(folder: Path, tmp_path: Path) -> None:
    _refused(inputs.check_gen_folder, folder, False, match="already holds a network (net.json)")
    assert inputs.check_gen_folder(folder, True) == folder
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (folder / "calib.json").unlink()
    (folder / "calib.json").symlink_to(victim)
    _refused(inputs.check_gen_folder, folder, True, match="calib.json: --out: a symlink")
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "net.prototxt").write_text("mine")
    _refused(inputs.check_gen_folder, partial, False, match="already holds net.prototxt")
    _refused(inputs.check_gen_folder, victim, False, match="not a folder")
    assert inputs.check_gen_folder(tmp_path / "new", False) == tmp_path / "new"


def test_a_compiler_crash_is_named_as_the_compilers(folder: Path) -> None:
    from nvdla_hil.harness.networks.compiler import CompilerError

    files = inputs.load_net(folder)
    e = CompilerError("nvdla_compiler refused net.prototxt for nv_small int8 (killed by signal 6 (134/SIGABRT: ...), "
                      "no fast-math.nvdla written); last lines:\nterminate called")
    err = inputs.compiler_failed(files, "compile (nv_small int8)", e)
    head = str(err).splitlines()[0]
    assert head.startswith(f"{folder}: NVDLA's compiler failed on network 'lenet' at stage compile (nv_small int8) "
                           "(killed by signal 6)"), head
    assert str(err).splitlines()[1] == "terminate called"


def test_printed_names_are_terminal_safe() -> None:
    assert inputs.show("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert inputs.show("x" * 100, 10) == "x" * 10 + "..."


# ---- with the checkout's schema ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nvdla_sw() -> str:
    sw = os.environ.get("NVDLA_SW") or (str(SHARED_SW) if (SHARED_SW / "umd").is_dir() else None)
    if not sw or not (Path(sw) / "umd" / "apps" / "compiler").is_dir():
        pytest.skip("no nvdla/sw checkout with umd/: set NVDLA_SW")
    from nvdla_hil.harness.networks.compiler import cached_compiler

    if cached_compiler(sw) is None:
        pytest.skip("NVDLA's compiler is not in the cache: run `nvdla-hil net build-compiler` (never built here)")
    return sw


@pytest.fixture(scope="module")
def schema(nvdla_sw: str):  # noqa: ANN201 - a caffe.Schema
    from nvdla_hil.harness.networks.caffe import load_schema
    from nvdla_hil.harness.networks.compiler import cached_compiler, find_umd

    build = cached_compiler(nvdla_sw)
    assert build is not None
    return load_schema(find_umd(nvdla_sw), build.protoc)


@pytest.fixture
def real(tmp_path: Path, schema) -> Path:  # noqa: ANN001
    from nvdla_hil.harness.networks.caffe import write_caffe

    out = tmp_path / "lenet"
    generate("lenet", 0, out, lambda net, p, m: write_caffe(schema, net, p, m))
    return out


def test_a_real_model_passes(real: Path, schema) -> None:  # noqa: ANN001
    inputs.check_model(inputs.load_net(real), schema)


@pytest.mark.parametrize(("old", "new", "match"), [
    ("num_output: 20", "num_output: 4294967295", "layer 'conv1' (Convolution) num_output: 4294967295 is outside"),
    ("num_output: 20", "num_output: -1", "net.prototxt: not a Caffe prototxt"),
    ("kernel_size: 5", "kernel_size: 1000", "kernel_size: 1000 is outside"),
    ("kernel_size: 5", "kernel_size: 5\n    stride: 0", "stride: 0 is outside"),
    ("kernel_size: 5", "kernel_size: 5\n    group: 4", "1 -> 20 channels do not split in 4 groups"),
    ('type: "ReLU"', 'type: "\\033]0;t\\007"', "is not a layer type"),
    ('type: "ReLU"', 'type: "<script>pwned(1)</script>"', "is not a layer type"),
    ("kernel_size: 5", "kernel_size: 5\n    dilation: 0", "dilation: 0 is outside"),
    ("kernel_size: 5", "kernel_size: 5\n    group: 30", "group: 30 is outside [1, 20]"),
    ('bottom: "conv1"', 'bottom: "nothing"', "bottoms ['nothing'] must be defined above it"),
    ('name: "conv2"', 'name: "conv2b"', "are not net.json's"),
    ("dim: 28", "dim: 2000000000", "input shape"),
    ("num_output: 20", "num_output: 20\n    frobnicate: 1", "not a Caffe prototxt"),
    ("num_output: 500", "num_output: 5000", "weight blobs of"),
])
def test_the_prototxt_is_checked_against_net_json_and_the_weights(real: Path, schema, old: str, new: str,  # noqa: ANN001
                                                                   match: str) -> None:
    p = real / "net.prototxt"
    assert old in p.read_text()
    p.write_text(p.read_text().replace(old, new, 1))
    msg = _refused(inputs.check_model, inputs.load_net(real), schema, match=match)
    assert msg.startswith(str(real) + "/net."), msg


def test_a_layer_type_this_tool_does_not_model_is_left_to_the_compiler(real: Path, schema) -> None:  # noqa: ANN001
    p = real / "net.prototxt"
    p.write_text(p.read_text().replace('type: "ReLU"', 'type: "Python"', 1))
    inputs.check_model(inputs.load_net(real), schema)  # its shape is unknown: nothing after it is judged on it


def test_every_small_network_of_the_zoo_passes(tmp_path: Path, schema) -> None:  # noqa: ANN001
    from nvdla_hil.harness.networks.caffe import write_caffe
    from nvdla_hil.harness.networks.zoo import ZOO

    small = [n for n in ZOO if not n.startswith("resnet") or n == "resnet_block"]
    assert len(small) >= 3
    for name in small:
        generate(name, 1, tmp_path / name, lambda net, p, m: write_caffe(schema, net, p, m))
        files = inputs.load_net(tmp_path / name, arrays=True)
        inputs.check_calibration(files)
        inputs.check_model(files, schema)


def test_a_deeply_nested_prototxt(real: Path, schema) -> None:  # noqa: ANN001
    (real / "net.prototxt").write_text("layer { convolution_param { " * 5000)
    _refused(inputs.check_model, inputs.load_net(real), schema, match="net.prototxt: not a Caffe prototxt")


@pytest.mark.parametrize("cut", [16, 1000, 100_000, 1_000_000, -10_000])
def test_a_truncated_caffemodel(real: Path, schema, cut: int) -> None:  # noqa: ANN001
    m = real / "net.caffemodel"
    m.write_bytes(m.read_bytes()[:cut])
    _refused(inputs.check_model, inputs.load_net(real), schema, match=str(m))


def test_caffemodel_blobs_are_checked(real: Path, schema) -> None:  # noqa: ANN001
    m = real / "net.caffemodel"
    model = schema.net.FromString(m.read_bytes())
    conv2 = next(la for la in model.layer if la.name == "conv2")
    del conv2.blobs[0].data[-1]
    m.write_bytes(model.SerializeToString())
    _refused(inputs.check_model, inputs.load_net(real), schema, match="layer 'conv2': blob shape [50, 20, 5, 5] holds "
             "25000 values, the blob has 24999")
    del next(la for la in model.layer if la.name == "ip1").blobs[:]
    del conv2.blobs[0].data[:]
    m.write_bytes(model.SerializeToString())
    _refused(inputs.check_model, inputs.load_net(real), schema, match="layer 'conv2'")


# ---- the commands end to end (after the call sites of harness/cli/net.py: see the module docstring) ---------------


@pytest.fixture(scope="module")
def compiled(nvdla_sw: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`net gen lenet` and `net compile` for nv_small INT8, once."""
    base = tmp_path_factory.mktemp("net") / "lenet"
    for argv in (["net", "gen", "lenet", "--out", str(base)],
                 ["net", "compile", str(base), "--config", "nv_small", "--precision", "int8"]):
        r = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=900, env={**os.environ,
                           "NVDLA_SW": nvdla_sw}, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr[-2000:]
    return base


@pytest.fixture
def net(compiled: Path, tmp_path: Path) -> Path:
    import shutil

    out = tmp_path / "lenet"
    shutil.copytree(compiled, out, symlinks=True)
    return out


def _cli(argv: list[str], nvdla_sw: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env={**os.environ, "NVDLA_SW": nvdla_sw})


def _exit2(r: subprocess.CompletedProcess, *names: str) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("nvdla-hil net: ")]
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(lines) == 1, (r.returncode, r.stderr[-3000:])
    for n in names:
        assert n in lines[0], lines[0]
    assert "\x1b" not in r.stdout + r.stderr
    return lines[0]


@pytest.mark.parametrize(("file", "what"), [
    ("net.json", "fifo"), ("calib.json", "fifo"), ("net.prototxt", "fifo"), ("net.caffemodel", "fifo"),
    ("net.json", "zero"), ("net.caffemodel", "urandom"), ("net.prototxt", "outside"), ("net.caffemodel", "sparse"),
])
def test_compile_refuses_a_special_file(net: Path, nvdla_sw: str, tmp_path: Path, file: str, what: str) -> None:
    p = net / file
    p.unlink()
    if what == "fifo":
        os.mkfifo(p)
    elif what in ("zero", "urandom"):
        p.symlink_to("/dev/" + what)
    elif what == "outside":
        (tmp_path / "x").write_text("x")
        p.symlink_to(tmp_path / "x")
    else:
        with open(p, "wb") as f:
            f.truncate(1 << 40)
    _exit2(_cli(["net", "compile", str(net), "--config", "nv_small", "--precision", "int8"], nvdla_sw), str(p))


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d["conv2"].__setitem__("scale", float("nan")), "NaN is not JSON"),
    (lambda d: d["conv2"].__setitem__("scale", -1), "'conv2' scale"),
    (lambda d: d.pop("ip1"), "no scale (or min and max) for ip1"),
])
def test_compile_refuses_a_bad_calibration_table_before_the_compiler(net: Path, nvdla_sw: str, edit,  # noqa: ANN001
                                                                     match: str) -> None:
    _edit_json(net / "calib.json", edit)
    _exit2(_cli(["net", "compile", str(net), "--config", "nv_small", "--precision", "int8"], nvdla_sw),
           str(net / "calib.json"), match)


def test_compile_refuses_a_garbled_model_naming_it(net: Path, nvdla_sw: str) -> None:
    m = net / "net.caffemodel"
    m.write_bytes(m.read_bytes()[:5000])
    _exit2(_cli(["net", "compile", str(net)], nvdla_sw), str(m), "truncated or garbled")


def test_compile_never_writes_over_an_input_or_through_a_symlink(net: Path, nvdla_sw: str, tmp_path: Path) -> None:
    before = (net / "net.prototxt").read_bytes()
    _exit2(_cli(["net", "compile", str(net), "-o", str(net / "net.prototxt")], nvdla_sw), "-o/--output")
    assert (net / "net.prototxt").read_bytes() == before
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (net / "nv_full-fp16.nvdla").symlink_to(victim)
    _exit2(_cli(["net", "compile", str(net)], nvdla_sw), "a symlink")
    assert victim.read_text() == "keep"


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d.__setitem__("input_shape", [0, 28, 28]), "'input_shape'"),
    (lambda d: d.__setitem__("network", "x\x1b]0;pwned\x07"), "'network'"),
    (lambda d: d.__setitem__("output_scale", -1), "'output_scale'"),
    (lambda d: d.__setitem__("input_npy", "/etc/passwd"), "names a path"),
])
def test_run_refuses_bad_metadata(net: Path, nvdla_sw: str, edit, match: str) -> None:  # noqa: ANN001
    _edit_json(net / "net.json", edit)
    _exit2(_cli(["net", "run", str(net / "nv_small-int8.nvdla"), "--target", "model"], nvdla_sw),
           str(net / "net.json"), match)


def test_run_refuses_a_fifo_input_array(net: Path, nvdla_sw: str) -> None:
    (net / "input.npy").unlink()
    os.mkfifo(net / "input.npy")
    _exit2(_cli(["net", "run", str(net / "nv_small-int8.nvdla"), "--target", "model"], nvdla_sw),
           str(net / "input.npy"), "a FIFO")


@pytest.mark.parametrize("target", ["nv_small-int8.nvdla", "net.json", "input.npy", "nv_small-int8.nvdla.input.raw"])
def test_run_dump_never_overwrites_an_input(net: Path, nvdla_sw: str, target: str) -> None:
    path = net / target
    if not path.exists():
        path.write_bytes(b"an earlier run's")
    before = path.read_bytes()
    _exit2(_cli(["net", "run", str(net / "nv_small-int8.nvdla"), "--target", "model", "--dump", str(path), "--force"],
                nvdla_sw), "--dump")
    assert path.read_bytes() == before


def test_run_never_writes_its_input_file_through_a_symlink(net: Path, nvdla_sw: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (net / "nv_small-int8.nvdla.input.raw").symlink_to(victim)
    _exit2(_cli(["net", "run", str(net / "nv_small-int8.nvdla"), "--target", "model"], nvdla_sw), "a symlink")
    assert victim.read_text() == "keep"


def test_run_writes_its_dump_once_and_refuses_it_next_time(net: Path, nvdla_sw: str) -> None:
    dump = net / "out.dimg"
    r = _cli(["net", "run", str(net / "nv_small-int8.nvdla"), "--target", "model", "--dump", str(dump)], nvdla_sw)
    assert r.returncode == 0 and dump.stat().st_size > 0, r.stderr[-2000:]
    _exit2(_cli(["net", "run", str(net / "nv_small-int8.nvdla"), "--target", "model", "--dump", str(dump)], nvdla_sw),
           "pass --force")


def test_gen_never_writes_through_a_symlink_in_its_folder(net: Path, nvdla_sw: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (net / "calib.json").unlink()
    (net / "calib.json").symlink_to(victim)
    _exit2(_cli(["net", "gen", "lenet", "--out", str(net), "--force"], nvdla_sw), "calib.json", "a symlink")
    assert victim.read_text() == "keep"
