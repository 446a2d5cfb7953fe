"""The ``net`` class of bench/bench_hostile.py: hostile inputs of ``nvdla-hil net gen|compile|run``.

A network folder is generated and compiled once (``net gen lenet``; ``net compile`` for nv_small
INT8, the loadable every ``run`` step uses); each input is a copy of that folder with one file
spoiled: ``net.json`` (specials, wrong types, NaN/inf/negative/huge scales, shapes, names with
terminal escapes and HTML, keys naming paths outside, duplicate keys, deep nesting),
``calib.json`` (the same, missing layers), ``net.prototxt`` (bad parameters, unknown layer types,
dangling bottoms, truncations, garbles), ``net.caffemodel`` (truncations, garbles, blobs edited
through the checkout's schema), ``input.npy``/``expected.npy`` (shapes, dtypes, pickles, lying
headers), and the outputs (``run --dump`` and ``compile -o`` aimed at an input or through a
symlink, the run's ``.input.raw`` scratch file a symlink/FIFO/hard link, ``gen --out`` over
symlinks). A victim file beside each folder is hashed with it: written through a symlink, it
shows as overwritten.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

from bench_hostile_inputs import Job, Step

SPECIALS = ("fifo", "zero", "urandom", "victim", "folder", "sparse", "loop")
LAYERS = ("conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2")
NAMES = ["x\x1b]0;pwned\x07", "<script>pwned('n')</script>", "a\x1b[2Jb", "nul\x00", "../../victim", "", "a" * 300,
         "<img src=x onerror=pwned(1)>"]
BAD_NUMBERS = [float("nan"), float("inf"), float("-inf"), -1, 0, 1e300, "0.1", None, True, [0.1], {"a": 1}, 10 ** 400]


def net_setup(work: Path) -> tuple[Path, list[Job]]:
    """The base network folder and the Jobs that write it (run before the class's inputs)."""
    base = work / "net" / "base" / "lenet"
    steps = [Step(["net", "gen", "lenet", "--out", str(base)], "0"),
             Step(["net", "compile", str(base), "--config", "nv_small", "--precision", "int8"], "0")]
    return base, [Job("net", "setup: net gen lenet, net compile nv_small int8", steps, [])]


def _special(p: Path, what: str, victim: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)
    if what == "fifo":
        os.mkfifo(p)
    elif what == "folder":
        p.mkdir()
    elif what == "victim":  # a symlink out of the folder, to a file that would pass
        p.symlink_to(victim)
    elif what in ("zero", "urandom"):
        p.symlink_to(f"/dev/{what}")
    elif what == "sparse":  # past every limit (the caffemodel's is 256 MiB); hashed before and after
        with open(p, "wb") as f:
            f.truncate(300 << 20)
    else:
        p.symlink_to(p.name)


def _garble(data: bytes, rng: random.Random, n: int = 4) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, n)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def _nesting(depth: int) -> str:
    return "[" * depth + "]" * depth


# ---- the mutations: each edits the copied folder and says its steps and expectation ---------------------------

Mutation = tuple[str, Callable[[Path, Path], None], str, str]  # label, edit(folder, victim), steps, expect


def _json_edit(name: str, fn: Callable[[dict], object]) -> Callable[[Path, Path], None]:
    def edit(folder: Path, victim: Path) -> None:
        doc = json.loads((folder / name).read_text())
        out = fn(doc)
        (folder / name).write_text(json.dumps(doc if out is None else out))
    return edit


def _text(name: str, text: str | bytes) -> Callable[[Path, Path], None]:
    def edit(folder: Path, victim: Path) -> None:
        (folder / name).write_bytes(text.encode() if isinstance(text, str) else text)
    return edit


def _sub(name: str, old: str, new: str, count: int = 1) -> Callable[[Path, Path], None]:
    def edit(folder: Path, victim: Path) -> None:
        t = (folder / name).read_text()
        assert old in t, (name, old)
        (folder / name).write_text(t.replace(old, new, count))
    return edit


def _set(key: str, value: object) -> Callable[[dict], None]:
    def fn(d: dict) -> None:
        d[key] = value
    return fn


def _meta_mutations() -> list[Mutation]:
    out: list[Mutation] = []
    for k in ("input_scale", "output_scale"):
        out += [(f"net.json {k}={v!r:.20}", _json_edit("net.json", _set(k, v)), "CR", "2") for v in BAD_NUMBERS]
    shapes = [[], [1, 28], [1, 28, 28, 1], [0, 28, 28], [-1, 28, 28], [65537, 28, 28], ["1", 28, 28], [1.5, 28, 28],
              [True, 28, 28], [65536, 65536, 65536], [1, 28, 29], 28, None]
    out += [(f"net.json input_shape={v!r:.30}", _json_edit("net.json", _set("input_shape", v)), "CR", "2") for v in shapes]
    out += [(f"net.json output_shape={v!r:.30}", _json_edit("net.json", _set("output_shape", v)), "R", "2")
            for v in shapes[:9]]
    for v in (*NAMES, 5, None, ["conv1"]):
        out += [(f"net.json network={v!r:.30}", _json_edit("net.json", _set("network", v)), "CR", "2")]
    layer_vals = ["conv1", [], [1, 2], ["conv1", "conv1"], ["data", *LAYERS], [*LAYERS[:3], NAMES[0], *LAYERS[4:]],
                  [*LAYERS[:3], NAMES[1], *LAYERS[4:]], list(LAYERS[:-1])]
    out += [(f"net.json layers={v!r:.40}", _json_edit("net.json", _set("layers", v)), "C", "2") for v in layer_vals]
    for key in ("network", "input", "layers", "input_shape", "output_shape", "input_scale", "output_scale"):
        out.append((f"net.json without {key}", _json_edit("net.json", lambda d, k=key: d.pop(k) and None), "CR", "2"))
    for key, path in (("prototxt", "/etc/passwd"), ("calib", "../victim.txt"), ("folder", "/"), ("input_npy", ".")):
        out.append((f"net.json {key}={path}", _json_edit("net.json", _set(key, path)), "CR", "2"))
    specs = [5, [7], [{"name": NAMES[0], "type": "ReLU"}], [{"name": "p", "type": "Pooling", "params": {"pool": "AVE"}}],
             [{"name": "p", "type": "Pooling", "params": {"pool": "AVE", "kernel": 3, "stride": 0}, "in_hw": 8}],
             [{"name": "c", "type": "Convolution", "params": {"group": "x"}}], [{"name": "c", "type": "Deconvolution",
                                                                               "params": {"kernel": [], "stride": 1}}],
             [{"name": "c", "type": "ReLU", "in_hw": -1}], [{"name": "c", "type": "ReLU", "params": []}]]
    out += [(f"net.json layer_specs={v!r:.40}", _json_edit("net.json", _set("layer_specs", v)), "CR", "2") for v in specs]
    out += [
        ("net.json seed=9*5000 digits", _sub("net.json", '"seed": 0', '"seed": ' + "9" * 5000), "CR", "2"),
        ("net.json duplicate network", _sub("net.json", '"network": "lenet"', '"network": "lenet", "network": "x"'),
         "CR", "2"),
        ("net.json [*100000", _text("net.json", _nesting(100000)), "CR", "2"),
        ("net.json nested 50 in a key", _sub("net.json", '"seed": 0', '"seed": 0, "x": ' + _nesting(50)), "CR", "2"),
        ("net.json a list", _text("net.json", "[1, 2]"), "CR", "2"),
        ("net.json a string", _text("net.json", '"lenet"'), "CR", "2"),
        ("net.json empty", _text("net.json", ""), "CR", "2"),
        ("net.json not UTF-8", _text("net.json", b"\xff\xfe{\x00}\x00"), "CR", "2"),
        ("net.json NaN literal", _sub("net.json", '"seed": 0', '"seed": NaN'), "CR", "2"),
        ("net.json 60 KiB of spaces then {}", _text("net.json", " " * 60000 + "{}"), "CR", "2"),
        ("net.json 100 KiB", _text("net.json", '{"a": "' + "x" * 100000 + '"}'), "CR", "2"),
    ]
    return out


def _calib_mutations() -> list[Mutation]:
    out: list[Mutation] = []
    for i, v in enumerate(BAD_NUMBERS):
        layer = ("data", *LAYERS)[i % 8]
        out.append((f"calib.json {layer} scale={v!r:.20}",
                    _json_edit("calib.json", lambda d, la=layer, v=v: d[la].__setitem__("scale", v)), "I", "2"))
    for layer in ("data", *LAYERS):
        out.append((f"calib.json without {layer}", _json_edit("calib.json", lambda d, la=layer: d.pop(la) and None),
                    "I", "2"))
    for name in NAMES:
        out.append((f"calib.json key {name!r:.20}", _json_edit("calib.json", lambda d, n=name: d.__setitem__(n, {"scale": 1})),
                    "I", "2"))
    out += [
        ("calib.json {}", _text("calib.json", "{}"), "I", "2"),
        ("calib.json a list", _text("calib.json", "[]"), "I", "2"),
        ("calib.json entry a list", _json_edit("calib.json", _set("conv1", [0.1])), "I", "2"),
        ("calib.json entry a number", _json_edit("calib.json", _set("conv1", 0.1)), "I", "2"),
        ("calib.json entry unknown key", _json_edit("calib.json", _set("conv1", {"scael": 0.1})), "I", "2"),
        ("calib.json min > max", _json_edit("calib.json", _set("conv1", {"min": 1, "max": -1})), "I", "2"),
        ("calib.json min/max NaN", _json_edit("calib.json", _set("conv1", {"min": float("nan"), "max": 1})), "I", "2"),
        ("calib.json min/max only", _json_edit("calib.json", _set("conv1", {"min": -3.0, "max": 3.0})), "I", "maybe"),
        ("calib.json duplicate conv1", _sub("calib.json", '"conv1": {', '"conv1": {"scale": 1}, "conv1": {'), "I", "2"),
        ("calib.json [*100000", _text("calib.json", _nesting(100000)), "I", "2"),
        ("calib.json deep in an entry", _sub("calib.json", '"offset": 0', '"offset": ' + _nesting(40)), "I", "2"),
        ("calib.json 100k extra layers", _json_edit("calib.json", lambda d: d.update(
            {f"extra{i}": {"scale": 0.5} for i in range(100000)})), "I", "maybe"),
        ("calib.json 5 MiB", _text("calib.json", '{"a": "' + "x" * (5 << 20) + '"}'), "I", "2"),
        ("calib.json truncated", lambda f, v: (f / "calib.json").write_bytes((f / "calib.json").read_bytes()[:300]),
         "I", "2"),
        ("calib.json UPPER-CASE name", _sub("calib.json", '"conv1"', '"CONV1"'), "I", "2"),
    ]
    return out


def _proto_mutations() -> list[Mutation]:
    p = "net.prototxt"
    out: list[Mutation] = []
    for v in ("0", "-1", "65537", "4294967295", "99999999999999999999", "1e9", '"x"'):
        out.append((f"prototxt num_output {v}", _sub(p, "num_output: 20", f"num_output: {v}"), "C", "2"))
    for v in ("0", "1000", "-3"):
        out.append((f"prototxt kernel_size {v}", _sub(p, "kernel_size: 5", f"kernel_size: {v}"), "C", "2"))
    out += [
        ("prototxt stride 0", _sub(p, "kernel_size: 5", "kernel_size: 5\n    stride: 0"), "C", "2"),
        ("prototxt pad 1000", _sub(p, "kernel_size: 5", "kernel_size: 5\n    pad: 1000"), "C", "2"),
        ("prototxt group 4", _sub(p, "kernel_size: 5", "kernel_size: 5\n    group: 4"), "C", "2"),
        ("prototxt dilation 0", _sub(p, "kernel_size: 5", "kernel_size: 5\n    dilation: 0"), "C", "2"),
        ("prototxt type Python", _sub(p, 'type: "ReLU"', 'type: "Python"'), "C", "2"),
        ("prototxt type <script>", _sub(p, 'type: "ReLU"', 'type: "<script>pwned(1)</script>"'), "C", "2"),
        ("prototxt type with escapes", _sub(p, 'type: "ReLU"', 'type: "\\033]0;pwned\\007"'), "C", "2"),
        ("prototxt dangling bottom", _sub(p, 'bottom: "conv1"', 'bottom: "nothing"'), "C", "2"),
        ("prototxt layer renamed", _sub(p, 'name: "conv2"', 'name: "conv2b"'), "C", "2"),
        ("prototxt layer named with escapes", _sub(p, 'name: "conv2"', 'name: "\\033[2Jconv2"'), "C", "2"),
        ("prototxt input dim 0", _sub(p, "dim: 1\n  dim: 28", "dim: 1\n  dim: 0"), "C", "2"),
        ("prototxt input dim huge", _sub(p, "dim: 28", "dim: 2000000000"), "C", "2"),
        ("prototxt unknown field", _sub(p, "num_output: 20", "num_output: 20\n    frobnicate: 1"), "C", "2"),
        ("prototxt deep nesting", _text(p, "layer { convolution_param { " * 5000), "C", "2"),
        ("prototxt 5 MiB", _text(p, "# " + "x" * (5 << 20)), "C", "2"),
        ("prototxt not UTF-8", _text(p, b"name: \"\xff\xfe\""), "C", "2"),
        ("prototxt empty", _text(p, ""), "C", "2"),
        ("prototxt a layer twice", lambda f, v: (f / p).write_text(
            (t := (f / p).read_text()) + "layer {" + t.split("layer {")[1]), "C", "2"),
    ]
    return out


def _npy(arr: object) -> Callable[[Path, Path], None]:
    def edit(folder: Path, victim: Path) -> None:
        import numpy as np

        with open(folder / "input.npy", "wb") as f:
            np.save(f, arr, allow_pickle=True)
    return edit


def _lying_header(folder: Path, victim: Path) -> None:
    hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }"
    hdr += b" " * (118 - len(hdr)) + b"\n"
    (folder / "input.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr + b"\0" * 64)


def _npy_mutations() -> list[Mutation]:
    import numpy as np

    x = np.zeros((1, 28, 28), np.float32)
    nan = x.copy()
    nan[0, 3, 3] = np.nan
    return [
        ("input.npy wrong shape", _npy(np.zeros((1, 28, 27), np.float32)), "R", "2"),
        ("input.npy 2-D", _npy(np.zeros((28, 28), np.float32)), "R", "2"),
        ("input.npy int32", _npy(x.astype(np.int32)), "R", "2"),
        ("input.npy complex", _npy(x.astype(np.complex64)), "R", "2"),
        ("input.npy objects (a pickle)", _npy(np.array([{"a": 1}], dtype=object)), "R", "2"),
        ("input.npy NaN", _npy(nan), "R", "2"),
        ("input.npy float64", _npy(x.astype(np.float64)), "R", "maybe"),
        ("input.npy 2^40 elements in the header", _lying_header, "R", "2"),
        ("input.npy truncated", lambda f, v: (f / "input.npy").write_bytes((f / "input.npy").read_bytes()[:200]),
         "R", "2"),
        ("input.npy not npy", _text("input.npy", "hello"), "R", "2"),
        ("input.npy 100 MiB", lambda f, v: os.truncate(f / "input.npy", 100 << 20), "R", "2"),
        ("expected.npy wrong shape", lambda f, v: shutil.copyfile(f / "input.npy", f / "expected.npy"), "R", "2"),
        ("expected.npy a pickle", lambda f, v: _npy(np.array([None], dtype=object))(f, v) or
         os.replace(f / "input.npy", f / "expected.npy"), "R", "2"),
    ]


def _output_mutations(base: Path) -> list[Mutation]:
    def link(name: str, to: str = "victim") -> Callable[[Path, Path], None]:
        return lambda f, v: _special(f / name, to, v)

    def hard(name: str) -> Callable[[Path, Path], None]:
        return lambda f, v: os.link(v, f / name)

    none = (lambda f, v: None)  # noqa: E731
    raw = "base.nvdla.input.raw"
    out: list[Mutation] = []
    for target in ("base.nvdla", "net.json", "input.npy", "net.caffemodel", "expected.npy", raw):
        out.append((f"run --dump the input {target}", none, f"R--dump={target}", "2"))
    out += [
        ("run --dump a symlink to the victim", link("out.dimg"), "R--dump=out.dimg", "2"),
        ("run --dump an existing file", _text("out.dimg", "keep me"), "R--dump=out.dimg", "2"),
        ("run --dump a FIFO", link("out.dimg", "fifo"), "R--dump=out.dimg", "2"),
        ("run --dump a hard link to the victim", hard("out.dimg"), "R--dump=out.dimg --force", "2"),
        ("run --dump /dev/full", none, "R--dump=/dev/full", "2"),
        ("run --dump a folder", link("out.dimg", "folder"), "R--dump=out.dimg --force", "2"),
        ("run --dump in a missing folder", none, "R--dump=nowhere/out.dimg", "2"),
        ("run: .input.raw a symlink to the victim", link(raw), "R", "2"),
        ("run: .input.raw a symlink to net.json", lambda f, v: (f / raw).symlink_to("net.json"), "R", "2"),
        ("run: .input.raw a FIFO", link(raw, "fifo"), "R", "2"),
        ("run: .input.raw a hard link to the victim", hard(raw), "R", "2"),
        ("run: .input.raw a folder", link(raw, "folder"), "R", "2"),
        ("run --net a file", none, "R--net=net.json", "2"),
        ("run --net a missing folder", none, "R--net=nowhere", "2"),
    ]
    for target in ("net.prototxt", "calib.json", "net.caffemodel", "net.json"):
        out.append((f"compile -o the input {target}", none, f"C-o={target}", "2"))
    out += [
        ("compile -o a symlink to the victim", link("x.nvdla"), "C-o=x.nvdla", "2"),
        ("compile -o a FIFO", link("x.nvdla", "fifo"), "C-o=x.nvdla", "2"),
        ("compile -o a hard link to the victim", hard("x.nvdla"), "C-o=x.nvdla", "2"),
        ("compile: its loadable a symlink to the victim", link("nv_full-fp16.nvdla"), "C", "2"),
        ("compile: its loadable a FIFO", link("nv_full-fp16.nvdla", "fifo"), "C", "2"),
    ]
    for name in ("net.json", "calib.json", "input.npy", "net.prototxt", "net.caffemodel", "expected.npy"):
        out.append((f"gen --force over {name} a symlink to the victim", link(name), "G --force", "2"))
    out += [
        ("gen --force over net.json a FIFO", link("net.json", "fifo"), "G --force", "2"),
        ("gen over a folder with net.prototxt only", lambda f, v: [os.unlink(f / n) for n in os.listdir(f)
                                                                    if n != "net.prototxt"] and None, "G", "2"),
        ("gen --out a file", none, "G=net.json", "2"),
        ("gen --out a FIFO", lambda f, v: os.mkfifo(f / "pipe"), "G=pipe", "2"),
        ("gen --force over its own network", none, "G --force", "0"),
    ]
    return out


def _specials() -> list[Mutation]:
    out: list[Mutation] = []
    for name, steps in (("net.json", "CR"), ("calib.json", "I"), ("net.prototxt", "C"), ("net.caffemodel", "C"),
                        ("input.npy", "R"), ("expected.npy", "R")):
        for what in SPECIALS:
            out.append((f"{name} {what}", lambda f, v, n=name, w=what: _special(f / n, w, v), steps, "2"))
    return out


def _model_mutations(rng: random.Random, data: bytes, n: int) -> list[Mutation]:
    out: list[Mutation] = []
    for i in range(n):
        cut = rng.randrange(16, len(data) * 9 // 10)
        out.append((f"caffemodel truncated at {cut}", _text("net.caffemodel", data[:cut]), "C", "2"))
        out.append((f"caffemodel garbled #{i}", _text("net.caffemodel", _garble(data, rng)), "C", "maybe"))
        out.append((f"caffemodel head garbled #{i}", _text("net.caffemodel", _garble(data[:64], rng) + data[64:]),
                    "C", "maybe"))
    out.append(("caffemodel 300 MiB", lambda f, v: os.truncate(f / "net.caffemodel", 300 << 20), "C", "2"))
    out.append(("caffemodel empty", _text("net.caffemodel", b""), "C", "2"))
    return out


def _text_mutations(rng: random.Random, base: Path, n: int) -> list[Mutation]:
    out: list[Mutation] = []
    for name, steps in (("net.prototxt", "C"), ("net.json", "CR"), ("calib.json", "I")):
        data = (base / name).read_bytes()
        for i in range(n):
            cut = rng.randrange(1, len(data) - 3)
            out.append((f"{name} truncated at {cut}", _text(name, data[:cut]), steps, "2"))
            out.append((f"{name} garbled #{i}", _text(name, _garble(data, rng, 3)), steps, "maybe"))
    return out


def _step(spec: str, folder: Path) -> list[Step]:
    """The steps of a mutation: C compile fp16 nv_full, I compile int8 nv_small, R run the base
    loadable on the model, G gen into the folder; ``=VALUE`` or ``--force`` after a letter."""
    out: list[Step] = []
    for part in spec.replace("CR", "C R").split():
        head, _, val = part.partition("=")
        kind, opt = head[0], head[1:]
        force = "--force" in spec and kind in "RG"
        if kind == "C":
            argv = ["net", "compile", str(folder), "--config", "nv_full", "--precision", "fp16"]
            if opt == "-o":
                argv += ["-o", str(folder / val)]
        elif kind == "I":
            argv = ["net", "compile", str(folder), "--config", "nv_small", "--precision", "int8"]
        elif kind == "R":
            argv = ["net", "run", str(folder / "base.nvdla"), "--target", "model"]
            if opt == "--dump":
                argv += ["--dump", val if val.startswith("/") else str(folder / val)]
            elif opt == "--net":
                argv += ["--net", str(folder / val)]
        elif kind == "G":
            argv = ["net", "gen", "lenet", "--out", str(folder / val) if val else str(folder)]
        else:
            continue
        if force:
            argv.append("--force")
        out.append(Step(argv, "2"))
    return out


def net_jobs(work: Path, rng: random.Random, n: int, base: Path) -> list[Job]:
    """About ``n`` hostile inputs (at least the built ones, about 280) on copies of ``base``."""
    if not (base / "net.json").is_file() or not (base / "nv_small-int8.nvdla").is_file():
        return []
    muts = (_specials() + _meta_mutations() + _calib_mutations() + _proto_mutations() + _npy_mutations()
            + _output_mutations(base))
    extra = max(2, (n - len(muts)) // 9)
    muts += _model_mutations(rng, (base / "net.caffemodel").read_bytes(), extra)
    muts += _text_mutations(rng, base, extra)
    if n < len(muts):  # --quick: a sample of every kind
        muts = [muts[i] for i in sorted(rng.sample(range(len(muts)), n))]
    jobs = []
    for i, (label, edit, spec, expect) in enumerate(muts):
        d = work / "net" / f"{i:05d}"
        folder = d / "lenet"
        shutil.copytree(base, folder, ignore=shutil.ignore_patterns("*.nvdla", "*.raw"))
        shutil.copyfile(base / "nv_small-int8.nvdla", folder / "base.nvdla")
        victim = d / "victim.txt"
        shutil.copyfile(base / "net.json", victim)  # a file that would pass: only a refusal keeps it out
        edit(folder, victim)
        steps = _step(spec, folder)
        for s in steps:
            s.expect = expect
        jobs.append(Job("net", label, steps, [d]))
    return jobs
