"""NVDLA loadables (harness/loadables): the FlatBuffers reader on untrusted input, the DIMG dump,
the runtime's FP16 conversion and emulator, and the shared regression run through NVDLA's own
firmware on the model target against NVDLA's golden dumps (lead.md5 of nvdla/sw regression/).

Goldens: the shared loadables' ``o_000000.dimg``/``lead.md5`` (NVDLA's regression, run on NVDLA's
hardware flow); the FP16 and softmax examples are worked by hand from half_float's rules
(``umd/external/include/half.h``: round to nearest, ties away from zero)."""

from __future__ import annotations

import hashlib
import os
import random
import re
import struct
from pathlib import Path

import flatbuffers
import numpy as np
import pytest

from nvdla_hil.harness.loadables.dimg import DimgMeta, compare_dimg, pack_dimg, read_dimg
from nvdla_hil.harness.loadables.emulator import EmuBuffer, EmuOp, float_to_half_ties_away, run_emu_ops
from nvdla_hil.harness.loadables.fbs import LoadableError, parse_loadable

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_sw"


def _root() -> Path | None:
    env = os.environ.get("NVDLA_LOADABLES")
    p = Path(env) if env else SHARED
    return p if (p / "flatbufs").is_dir() else None


@pytest.fixture(scope="module")
def loadables_root() -> Path:
    root = _root()
    if root is None:
        pytest.skip("NVDLA's software regression is not here: set NVDLA_LOADABLES to a folder with flatbufs/ and "
                    "golden/ (e.g. ../shared/nvdla_sw)")
    return root


# ---- a loadable built slot by slot (loadable.fbs field order; no generated code) ----------------
def _build(*, mem_size: int = 64, blob: bytes = b"\x01\x02", mem_id: int = 0, version: bool = True) -> bytes:
    b = flatbuffers.Builder(256)
    data = b.CreateByteVector(blob)
    bname = b.CreateString("b0")
    b.StartObject(6)  # Blob
    b.PrependUOffsetTRelativeSlot(0, bname, 0)
    b.PrependUint64Slot(1, len(blob), 0)
    b.PrependUOffsetTRelativeSlot(5, data, 0)
    blob_t = b.EndObject()
    cname = b.CreateString("b0")
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(cname)
    contents = b.EndVector()
    b.StartVector(8, 1, 8)
    b.PrependUint64(0)
    offsets = b.EndVector()
    b.StartObject(9)  # MemoryListEntry
    b.PrependUint16Slot(2, 3, 0)  # ALLOC|SET
    b.PrependUint64Slot(3, mem_size, 0)
    b.PrependUOffsetTRelativeSlot(5, contents, 0)
    b.PrependUOffsetTRelativeSlot(6, offsets, 0)
    mem_t = b.EndObject()
    b.StartObject(4)  # AddressListEntry
    b.PrependUint16Slot(1, mem_id, 0)
    b.PrependUint64Slot(3, mem_size, 0)
    addr_t = b.EndObject()
    vecs = []
    for t in (mem_t, addr_t, blob_t):
        b.StartVector(4, 1, 4)
        b.PrependUOffsetTRelative(t)
        vecs.append(b.EndVector())
    b.StartObject(9)  # Loadable
    if version:
        b.Prep(1, 3)
        for v in (0, 7, 0):
            b.PrependUint8(v)
        b.PrependStructSlot(0, b.Offset(), 0)
    b.PrependUOffsetTRelativeSlot(2, vecs[0], 0)
    b.PrependUOffsetTRelativeSlot(3, vecs[1], 0)
    b.PrependUOffsetTRelativeSlot(5, vecs[2], 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def test_a_loadable_built_by_slot_reads_back() -> None:
    ld = parse_loadable(_build())
    assert ld.version == (0, 7, 0)
    assert len(ld.memory) == 1 and ld.memory[0].size == 64 and ld.memory[0].flag_names() == "ALLOC|SET"
    assert ld.memory[0].contents == ("b0",) and ld.blob("b0").data == b"\x01\x02"
    assert ld.addresses[0].mem_id == 0


@pytest.mark.parametrize("kwargs, field", [
    ({"mem_size": 1}, "memory_list[0].offsets[0]"),          # the blob does not fit its entry
    ({"mem_size": 1 << 40}, "memory_list[0].size"),          # bounded before anything is placed
    ({"mem_id": 5}, "address_list[0].mem_id"),               # a reference to nothing
    ({"version": False}, "Loadable.version"),                # the required field
])
def test_malformed_loadables_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(LoadableError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_loadable(_build(**kwargs))


def test_offsets_and_lengths_are_bounded_before_use() -> None:
    good = bytearray(_build())
    with pytest.raises(LoadableError, match="outside the"):
        parse_loadable(struct.pack("<I", len(good) + 100) + bytes(good[4:]))  # root beyond the file
    with pytest.raises(LoadableError, match="too short"):
        parse_loadable(b"\x00\x01")
    # the blob's data vector claims 2**31 bytes: refused by its length, nothing allocated
    blob = b"\x01\x02"
    i = good.find(struct.pack("<I", len(blob)) + blob)
    good[i:i + 4] = struct.pack("<I", 1 << 31)
    with pytest.raises(LoadableError, match=r"blobs\[0\].data"):
        parse_loadable(bytes(good))


def test_corrupted_shared_loadables_only_ever_raise_loadable_errors(loadables_root: Path) -> None:
    """Truncations and byte flips of real loadables: parsed, or refused with LoadableError."""
    from nvdla_hil.harness.loadables.runtime import loadable_config

    rng = random.Random(25)
    for name in ("BDMA/BDMA_L0_0_fbuf", "CDP/CDP_L0_0_small_fbuf", "SDP/SDP_X1_L0_0_fbuf"):
        data = (loadables_root / "flatbufs/kmd" / name).read_bytes()
        refused = 0
        cuts = list(range(0, len(data), max(1, len(data) // 60)))
        for n in cuts:  # a cut file parses (the cut fell in padding) or is refused; nothing else
            try:
                parse_loadable(data[:n])
            except LoadableError:
                refused += 1
        assert refused >= len(cuts) * 9 // 10
        for _ in range(150):
            buf = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            try:
                loadable_config(parse_loadable(bytes(buf)))
            except LoadableError:
                pass


def test_shared_mnist_is_three_tasks_with_an_unfilled_input(loadables_root: Path) -> None:
    from nvdla_hil.harness.loadables.check import profile_for_loadable, read_loadable
    from nvdla_hil.harness.loadables.runtime import dla_ops

    ld = read_loadable(loadables_root / "flatbufs/kmd/NN/NN_L0_0_fbuf")
    assert [t.interface for t in ld.tasks] == [2, 1, 2]  # EMU1, DLA1, EMU1
    inp = [m for m in ld.memory if m.flags & 4]
    assert len(inp) == 1 and inp[0].flag_names() == "ALLOC|INPUT" and not inp[0].contents
    data = ld.tensors[inp[0].tensor_desc_id]
    assert (data.name, data.dims, data.type_name) == ("data", (1, 1, 28, 28), "HALF")
    ops, _ = dla_ops(ld, 1)
    assert [o.name for o in ops] == ["CONV", "SDP", "PDP", "CONV", "SDP", "PDP", "CONV", "SDP", "SDP", "CONV", "SDP"]
    assert ops[0].src.width == 28 and ops[0].dst.channel == 20 and ops[0].precision == "FP16->FP16"
    assert profile_for_loadable(ld) == "nv_full"
    assert profile_for_loadable(read_loadable(loadables_root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf")) == "nv_small"


# ---- DIMG -------------------------------------------------------------------------------------
def test_golden_dumps_read_with_the_2018_numbering(loadables_root: Path) -> None:
    for g in sorted(loadables_root.glob("golden/*/dla/o_000000.dimg")):
        data = g.read_bytes()
        assert hashlib.md5(data).hexdigest() == (g.parent / "lead.md5").read_text().split()[0]
        meta, el = read_dimg(data)
        assert el.shape == (meta.channel, meta.height, meta.width)
    meta, _ = read_dimg((next(loadables_root.glob("golden/CDP_L0_0_[0-9a-f]*/dla/o_000000.dimg"))).read_bytes())
    assert (meta.format, meta.layout) == (41, "F16_x16_I")  # INT16: 41 in the 2018 app, 42 in 2019's


def test_dimg_pack_follows_the_app_rules() -> None:
    """Hand-worked: an FP16 x16 cube 2x1x17, line stride 32*2, surface stride 64*... element (c,h,w)
    at (c//16)*surf + h*line + w*32 + (c%16)*2; 0x7800 (32768.0) written 0, NaN written 0x77C0."""
    meta = DimgMeta(42, "F16_x16_F", 2, 1, 17, 64, 128, 256)
    buf = np.zeros(256, np.uint8)
    vals = {(0, 0, 0): 0x3C00, (0, 0, 1): 0x7800, (16, 0, 1): 0x7E01, (5, 0, 0): 0x8000}
    for (c, h, w), v in vals.items():
        off = (c // 16) * 128 + h * 64 + w * 32 + (c % 16) * 2
        buf[off:off + 2] = np.frombuffer(struct.pack("<H", v), np.uint8)
    out = pack_dimg(meta, buf)
    assert out[:8] == b"DIMG\0\0\0\0" and struct.unpack_from("<7I", out, 8) == (42, 2, 1, 17, 64, 128, 256)
    el = np.frombuffer(out, "<u2", offset=36).reshape(17, 1, 2)
    assert el[0, 0, 0] == 0x3C00 and el[0, 0, 1] == 0 and el[16, 0, 1] == 0x77C0 and el[5, 0, 0] == 0x8000
    bad = bytearray(out)
    bad[36 + 2 * 33] ^= 1  # element (16, 0, 1)
    cmp = compare_dimg(bytes(bad), out)
    assert not cmp["md5_equal"] and cmp["differ"] == 1 and cmp["first"][0] == (16, 0, 1) and cmp["max_ulp"] == 1


# ---- the runtime's FP16 and emulator ----------------------------------------------------------
@pytest.mark.parametrize("x, bits", [
    (1.0 + 2.0 ** -11, 0x3C01),     # a tie: away from zero (numpy's ties-to-even gives 0x3C00)
    (-(1.0 + 2.0 ** -11), 0xBC01),
    (65520.0, 0x7C00),              # 65504 + half an ulp: rounds away, to infinity
    (2.0 ** -25, 0x0001),           # exponent 102: rounds up to the smallest denormal
    (2.0 ** -26, 0x0000),
    (0.1, 0x2E66),
])
def test_float_to_half_rounds_ties_away(x: float, bits: int) -> None:
    assert int(float_to_half_ties_away(np.array([x], np.float32))[0]) == bits


def test_softmax_of_ten_zeros_is_a_tenth_each() -> None:
    """Hand-worked: max 0, sumexp 10, 1/10 = 0.1f -> FP16 0x2E66 in every channel."""
    mem = {0: bytearray(20), 1: bytearray(20)}
    buf = lambda i: EmuBuffer(i, 0, 20, 2, 1, 1, 10, 32, 32)  # noqa: E731
    op = EmuOp(1, "2018", {"axis": 1}, buf(0), buf(1))
    run_emu_ops([op], lambda i, o, n: bytes(mem[i][o:o + n]),
                lambda i, o, d: mem[i].__setitem__(slice(o, o + len(d)), d))
    assert list(np.frombuffer(bytes(mem[1]), "<u2")) == [0x2E66] * 10


# ---- the shared regression through NVDLA's firmware on the model target ------------------------
def _cases(root: Path | None) -> list:
    if root is None:
        return [pytest.param(None, id="no-loadables")]
    from nvdla_hil.harness.loadables.check import find_loadables

    return [pytest.param(c, id=c[0]) for c in find_loadables(root)]


@pytest.mark.parametrize("case", _cases(_root()))
def test_shared_loadable_passes_on_the_model(case, loadables_root: Path, nvdla_sw: str) -> None:  # noqa: ANN001
    from nvdla_hil.harness.loadables.check import check_loadable, profile_for_loadable, read_loadable
    from nvdla_hil.harness.targets import TargetSpec

    name, path, golden = case
    prof = profile_for_loadable(read_loadable(path))
    assert prof == ("nv_small" if name.endswith("_small") else "nv_full")
    v = check_loadable(path, spec=TargetSpec("model", prof), nvdla_sw=nvdla_sw, golden=golden)
    assert v.status == "passed", v.message
    assert v.md5 == (golden.parent / "lead.md5").read_text().split()[0]


def test_a_model_bug_names_the_first_wrong_layer_of_mnist(loadables_root: Path, nvdla_sw: str) -> None:
    """Bit 3 of channel 5 of every SDP output stuck at 1: MNIST's first SDP (operation 1, the
    bias of conv1; every pixel of a channel is 0xab77 for the runtime's all-zero input, bit 3
    clear) is the first layer whose output differs."""
    from nvdla_hil.harness.loadables.check import check_loadable, with_bugs
    from nvdla_hil.harness.targets import TargetSpec

    nn = loadables_root / "flatbufs/kmd/NN/NN_L0_0_fbuf"
    golden = next(loadables_root.glob("golden/NN_L0_0_*/dla/o_000000.dimg"))
    v = check_loadable(nn, spec=with_bugs(TargetSpec("model", "nv_full"), ["stuck:SDP:5:3"]), nvdla_sw=nvdla_sw,
                       golden=golden)
    assert v.status == "failed" and v.layer is not None, v.message
    assert (v.layer.task, v.layer.index, v.layer.op, v.layer.precision) == (1, 1, "SDP", "FP16->FP16")
    (c, h, w), expected, actual = v.layer.first
    assert c == 5 and expected == 0xAB77 and actual == 0xAB7F
    assert "first wrong layer: task 1 operation 1 (SDP FP16->FP16)" in v.message


def test_a_loadable_for_another_configuration_is_refused(loadables_root: Path) -> None:
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.loadables.check import read_loadable
    from nvdla_hil.harness.loadables.runtime import check_profile

    ld = read_loadable(loadables_root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf")
    with pytest.raises(LoadableError, match="written for nv_small.*profile nv_full has 32-byte atoms"):
        check_profile(ld, load_profile("nv_full"), "CDP_L0_0_small")
    with pytest.raises(LoadableError, match="uses BDMA, which profile nv_small does not have"):
        check_profile(read_loadable(loadables_root / "flatbufs/kmd/BDMA/BDMA_L0_0_fbuf"), load_profile("nv_small"))


def test_cli_show_and_bad_input_exit_codes(loadables_root: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from nvdla_hil.harness.cli import main

    assert main(["loadable", "show", str(loadables_root / "flatbufs/kmd/NN/NN_L0_0_fbuf")]) == 0
    out = capsys.readouterr().out
    assert "EMU POWER (2018 layout)" in out and "op 10 SDP" in out and "'data'" in out
    bad = tmp_path / "bad_fbuf"
    bad.write_bytes((loadables_root / "flatbufs/kmd/BDMA/BDMA_L0_0_fbuf").read_bytes()[:100])
    assert main(["loadable", "show", str(bad)]) == 2
    assert "outside the 100-byte file" in capsys.readouterr().err


def test_suite_skips_saying_why_without_a_checkout(loadables_root: Path, tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    from nvdla_hil.harness.cli import main

    monkeypatch.delenv("NVDLA_SW", raising=False)
    code = main(["regress", "--suite", "loadables", "--loadables", str(loadables_root), "--allow-empty",
                 "-k", "CDP_L0_0_small", "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    assert re.search(r"(?<!\d)1 skipped, 10 deselected", out), out[-2000:]  # the one -k picked, and only it
    assert "no nvdla/sw checkout" in (tmp_path / "latest" / "junit.xml").read_text()


def test_small_loadables_pass_over_a_serial_link(loadables_root: Path, nvdla_sw: str, tmp_path: Path) -> None:
    """The serial target (LiteX UARTBone over TCP) to the board emulator serving an nv_small
    model: the firmware's register accesses and the runtime's memory go over the byte stream."""
    from nvdla_hil.drivers.uartbone import BoardMap
    from nvdla_hil.harness.boards.emulator import serve_in_thread
    from nvdla_hil.harness.loadables.check import check_loadable
    from nvdla_hil.harness.targets import TargetSpec
    from nvdla_hil.harness.targets.model import ModelTarget

    with serve_in_thread(ModelTarget("nv_small"), BoardMap(), mode="tcp") as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  emu:\n    url: {emu.url}\n    baud: 3000000\n"
                       f"    profile: nv_small\n    integrity: verify\n    reset_address: 0xf0000000\n")
        spec = TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="emu")
        for name in ("SDP/SDP_X1_L0_0_small", "CONV/CONV_D_L0_0_small"):
            short = name.split("/")[1]
            golden = next(g for g in loadables_root.glob(f"golden/{short}_*/dla/o_000000.dimg")
                          if g.parents[1].name.rsplit("_", 1)[0] == short)
            v = check_loadable(loadables_root / f"flatbufs/kmd/{name}_fbuf", spec=spec, nvdla_sw=nvdla_sw, golden=golden)
            assert v.status == "passed", v.message
            assert v.md5 == (golden.parent / "lead.md5").read_text().split()[0]


def test_emu_descriptors_of_the_2019_layout_decode() -> None:
    """Hand-built per emu_interface.h of nvdla/sw master: a 24-byte POWER container (op_type at 0,
    scale factors f32 at 4 and 8, power/scale/shift at 12/16/20) and buffer descriptors with
    addressIndexOffset; format 3 is FP16 there."""
    from nvdla_hil.harness.loadables.emulator import decode_emu_task

    net = struct.pack("<hhH", 1, 2, 1)
    op = struct.pack("<B3x2f3f", 0, 1.0, 1.0, 2.0, 0.5, 1.0)
    bufs = bytearray(512)
    struct.pack_into("<hIIHHHHII", bufs, 0, 3, 64, 32, 3, 1, 1, 10, 32, 32)
    struct.pack_into("<hIIHHHHII", bufs, 256, 4, 0, 32, 3, 1, 1, 10, 32, 32)
    entries = {1: op, 2: bytes(bufs)}
    (emu,) = decode_emu_task(net, lambda i: entries[i])
    assert (emu.name, emu.layout) == ("POWER", "2019")
    assert emu.params == {"power": 2.0, "scale": 0.5, "shift": 1.0, "input_scale": 1.0, "output_scale": 1.0}
    assert (emu.src.address_index, emu.src.offset, emu.src.format, emu.src.channel) == (3, 64, 3, 10)
    mem = {3: bytearray(96), 4: bytearray(32)}
    mem[3][64:84] = np.full(10, 0x4000, "<u2").tobytes()  # 2.0: (1 + 0.5 * 2) ** 2 = 4.0 = 0x4400
    run_emu_ops([emu], lambda i, o, n: bytes(mem[i][o:o + n]),
                lambda i, o, d: mem[i].__setitem__(slice(o, o + len(d)), d))
    assert list(np.frombuffer(bytes(mem[4][:20]), "<u2")) == [0x4400] * 10


def test_descriptor_indices_the_firmware_follows_are_checked_first(loadables_root: Path) -> None:
    """NVDLA's firmware indexes its arrays with the dependency graph's consumer indices unchecked:
    a loadable whose graph points outside the network is refused before the firmware sees it."""
    from nvdla_hil.harness.loadables.runtime import dla_ops

    data = bytearray((loadables_root / "flatbufs/kmd/NN/NN_L0_0_fbuf").read_bytes())
    dep = parse_loadable(bytes(data)).blob("task-1-dep_graph").data
    at = data.find(dep)
    assert at > 0 and data.find(dep, at + 1) == -1
    struct.pack_into("<h", data, at + 12, 99)  # operation 0, consumers[1] (CONV) index
    with pytest.raises(LoadableError, match=r"operation 0: dla_common_op_desc.consumers\[1\].index 99, outside -1..10"):
        dla_ops(parse_loadable(bytes(data)), 1)


def test_triage_reruns_a_failed_loadable_and_names_its_first_wrong_layer(loadables_root: Path, nvdla_sw: str,
                                                                          tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """A regression of MNIST with an injected SDP bug, then `triage` on its failed test: the bundle
    keeps the firmware's register accesses, both output dumps and the first wrong layer."""
    import json

    from nvdla_hil.harness.cli import main

    bug = ["--model-bug", "stuck:SDP:5:3"]
    code = main(["regress", "--target", "model", "--suite", "loadables", "--loadables", str(loadables_root),
                 "--nvdla-sw", nvdla_sw, "--results-dir", str(tmp_path), "-k", "NN_L0_0", *bug])
    assert code == 1
    capsys.readouterr()
    assert main(["triage", "NN_L0_0", "--run", str(tmp_path / "latest"), *bug]) == 1
    out = capsys.readouterr().out
    assert "first wrong layer: task 1 operation 1 (SDP FP16->FP16)" in out
    bundle = tmp_path / "latest" / "bundles" / "test_loadable_NN_L0_0"
    diag = json.loads((bundle / "diag.json").read_text())
    assert diag["first_wrong_layer"].startswith("first wrong layer: task 1 operation 1 (SDP FP16->FP16)")
    log = (bundle / "access.log").read_text()
    assert " W SDP.D_OP_ENABLE" in log and " R GLB.S_INTR_STATUS" in log  # the firmware's own accesses
    assert (bundle / "regions" / "output.actual.dimg").stat().st_size == (bundle / "regions" / "output.expected.dimg").stat().st_size
