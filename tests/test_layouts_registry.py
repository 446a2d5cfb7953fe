"""Registry, parameter validation, CLI, and a round-trip property test for every layout."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nvdla_hil.harness.layouts import LAYOUTS, LayoutError, LayoutSpec, cli, get_layout
from nvdla_hil.harness.layouts.nvdla import PIXEL_FORMATS


def _bits(rng, shape, dtype):
    dt = np.dtype(dtype)
    return rng.integers(0, 256, size=tuple(shape) + (dt.itemsize,), dtype=np.uint8).view(dt)[..., 0]


def example(name: str, draw, rng) -> tuple[np.ndarray, dict]:
    """A random valid (array, params) pair for layout ``name``."""
    i = lambda lo, hi: draw(st.integers(lo, hi))
    if name == "nvdla.feature":
        dt = draw(st.sampled_from([np.int8, np.int16, np.float16]))
        return _bits(rng, (i(1, 70), i(1, 4), i(1, 4)), dt), {"profile": draw(st.sampled_from(["nv_full", "nv_small"]))}
    if name in ("nvdla.weight.dc", "nvdla.weight.deconv", "nvdla.weight.image", "nvdla.weight.compressed"):
        dt = draw(st.sampled_from([np.int8, np.int16, np.float16]))
        shape = (i(1, 40), i(1, 12), i(1, 5), i(1, 5))
        p: dict = {}
        if name == "nvdla.weight.deconv":
            p = {"stride_x": i(1, 3), "stride_y": i(1, 3)}
        if name == "nvdla.weight.image":
            post = draw(st.sampled_from([1, 2, 4]))
            shape = (i(1, 40), i(1, 4), i(1, 7), i(1, 4))
            if post > 1 and shape[1] * shape[3] > {2: 32, 4: 16}[post]:
                post = 1
            p = {"post_extension": post}
        arr = _bits(rng, shape, dt)
        if name == "nvdla.weight.compressed":
            arr = np.where(rng.random(shape) < 0.5, arr, np.zeros((), dt))
            p = {"base": draw(st.sampled_from(["dc", "image"]))}
        return arr, p
    if name == "nvdla.weight.winograd":
        dt = draw(st.sampled_from([np.int8, np.int16, np.float16]))
        return _bits(rng, (i(1, 40), 4 * i(1, 10), 4, 4), dt), {}
    if name.startswith("nvdla.sdp."):
        prec = draw(st.sampled_from(["int8", "int16", "fp16"]))
        ds = 2 if prec == "fp16" else draw(st.sampled_from([1, 2]))
        dt = np.float16 if prec == "fp16" else (np.int8 if ds == 1 else np.int16)
        use = name.split(".")[-1]
        p = {"proc_precision": prec, "data_size": ds}
        C = i(1, 50)
        if use in ("bias", "ew"):
            mode = "per_element" if use == "ew" else draw(st.sampled_from(["per_channel", "per_element"]))
            if use == "bias":
                p["mode"] = mode
            comps = 1
            if use == "ew":
                p["use"] = draw(st.sampled_from(["ew_alu", "ew_mul", "ew_both"]))
                comps = 2 if p["use"] == "ew_both" else 1
            shape = (C,) if mode == "per_channel" else (C, i(1, 3), i(1, 3))
            shape += (2,) if comps == 2 else ()
        else:
            shape = (C, 2) if use == "bn" else (C,)
        return _bits(rng, shape, dt), p
    if name.startswith("nvdla.pixel."):
        fmt = PIXEL_FORMATS[name.split(".")[-1]]
        dt = np.dtype(LAYOUTS[name].default_dtype)
        H, W = i(1, 4), i(1, 9)
        arr = _bits(rng, (H, W, fmt.channels), dt)
        if fmt.name[2:].startswith(("A2", "B10", "R10G", "V10U10Y10")):
            arr = arr.astype(np.uint16) & np.array([1023, 1023, 1023, 3], np.uint16)
        return arr, {"x_offset": i(0, fmt.x_offset_max)}
    if name == "dmp.conv_io":
        shape = (i(1, 4), i(1, 4), i(1, 20)) if draw(st.booleans()) else (i(1, 3), i(1, 3), i(1, 3), i(1, 20))
        return _bits(rng, shape, np.float16), {"transpose_weight": draw(st.booleans())}
    if name == "dmp.output":
        return rng.random((i(1, 4), i(1, 4), i(1, 12))).astype(np.float32), {"transpose_weight": draw(st.booleans())}
    if name == "dmp.fc":
        return _bits(rng, (i(1, 50),), np.float16), {}
    if name == "sophgo.system":
        return _bits(rng, (i(1, 3), i(1, 5), i(1, 4), i(1, 4)), np.float32), {}
    if name == "sophgo.local":
        mode = draw(st.sampled_from(["none", "4N", "2N", "2IC"]))
        dt = {"none": np.float32, "4N": np.int8, "2N": np.int16, "2IC": np.float32}[mode]
        p = {"npu_num": 4, "local_mem_size": 4096, "mode": mode, "layout": draw(st.sampled_from(["aligned", "compact"])),
             "address": 128 * i(0, 4 * 4096 // 128 - 1)}
        shape = (i(1, 7), i(1, 9), i(1, 3), i(1, 4))
        # keep the tensor inside one NPU's memory
        p["address"] = (p["address"] // 4096) * 4096
        return _bits(rng, shape, dt), p
    if name == "sophgo.matrix":
        M = i(1, 40)
        return _bits(rng, (i(1, 3), M), np.float32), {"npu_num": 4, "local_mem_size": 4096, "w": i(1, M)}
    raise AssertionError(f"no example generator for layout {name}")


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_layout_round_trips(name, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    arr, params = example(name, data.draw, rng)
    spec = get_layout(name)
    buf = spec.pack(arr, **params)
    assert buf.dtype == np.uint8 and buf.ndim == 1
    back = spec.unpack(buf, arr.shape, arr.dtype, **params)
    assert back.shape == arr.shape and back.dtype == arr.dtype
    assert back.tobytes() == arr.tobytes()
    # bytes in, bytes out too
    assert spec.unpack(buf.tobytes(), arr.shape, arr.dtype, **params).tobytes() == arr.tobytes()


def test_registry_shape():
    assert all(isinstance(s, LayoutSpec) and s.name == n for n, s in LAYOUTS.items())
    assert {s.family for s in LAYOUTS.values()} == {"nvdla", "dmp", "sophgo"}
    for s in LAYOUTS.values():
        assert s.description
        for p in s.parameters:
            assert p.name and p.doc and p.type in (int, bool, str, float, tuple)
    # every T_* format of the seed table is registered
    assert sum(n.startswith("nvdla.pixel.T_") for n in LAYOUTS) == 36


def test_unknown_layout_suggests_close_matches():
    with pytest.raises(LayoutError, match=r"did you mean \['nvdla.feature'"):
        get_layout("nvdla.featur")


def test_unknown_param_lists_accepted():
    with pytest.raises(LayoutError, match=r"unknown parameter\(s\) \['atom'\]; accepted: \['atom_bytes'"):
        get_layout("nvdla.feature").pack(np.zeros((1, 1, 1), np.int8), atom=8)


def test_required_param_and_type_errors():
    with pytest.raises(LayoutError, match="'npu_num' is required"):
        get_layout("sophgo.local").pack(np.zeros((1, 1, 1, 1), np.float32), local_mem_size=1024)
    with pytest.raises(LayoutError, match="must be an int"):
        get_layout("nvdla.feature").pack(np.zeros((1, 1, 1), np.int8), line_stride="32")
    with pytest.raises(LayoutError, match="is not one of"):
        get_layout("nvdla.feature").pack(np.zeros((1, 1, 1), np.int8), profile="nv_medium")


def _parser():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd")
    cli.add_subcommands(sub)
    return ap


def test_cli_pack_unpack_round_trip(tmp_path, capsys):
    a = np.arange(40 * 2 * 3, dtype=np.int16).reshape(40, 2, 3)
    np.save(tmp_path / "in.npy", a)
    ap = _parser()
    args = ap.parse_args(["pack", "--layout", "nvdla.feature", "--param", "atom_bytes=8", "--param", "line_stride=0x40",
                          str(tmp_path / "in.npy"), str(tmp_path / "out.bin")])
    assert args.func(args) == 0
    raw = (tmp_path / "out.bin").read_bytes()
    assert raw == get_layout("nvdla.feature").pack(a, atom_bytes=8, line_stride=64).tobytes()
    args = ap.parse_args(["unpack", "--layout", "nvdla.feature", "--shape", "40,2,3", "--dtype", "int16",
                          "--param", "atom_bytes=8", "--param", "line_stride=64",
                          str(tmp_path / "out.bin"), str(tmp_path / "back.npy")])
    assert args.func(args) == 0
    assert np.array_equal(np.load(tmp_path / "back.npy", allow_pickle=False), a)


def test_cli_errors_and_listing(tmp_path, capsys):
    ap = _parser()
    np.save(tmp_path / "in.npy", np.zeros((4, 1, 1), np.int8))
    args = ap.parse_args(["pack", "--layout", "nvdla.feature", "--param", "nope=1", str(tmp_path / "in.npy"),
                          str(tmp_path / "o.bin")])
    assert args.func(args) == 2
    assert "accepted" in capsys.readouterr().err
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    args = ap.parse_args(["pack", "--layout", "nvdla.feature", str(tmp_path / "obj.npy"), str(tmp_path / "o.bin")])
    assert args.func(args) == 2          # pickled object arrays are refused
    args = ap.parse_args(["layouts"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for name in LAYOUTS:
        assert name in out
    assert "--param line_stride=<int>" in out
