"""`nvdla-hil loadable show|run` on untrusted files: only regular files are read (FIFOs, devices,
directories refused at once naming the option), ``--dump`` never overwrites an input, a loadable
is bounded by what it expands to (shared vectors counted each time they are reached), and every
exit-2 message about a loadable's descriptors or its golden names the file.

Inputs: NVDLA's shared regression loadables (../shared/nvdla_sw, or NVDLA_LOADABLES) patched
field by field, and small loadables built here with the ``flatbuffers`` library slot by slot
(loadable.fbs's field order; no generated code)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import flatbuffers
import pytest
from flatbuffers.table import Table

from nvdla_hil.harness.loadables.dimg import DimgMeta, pack_dimg
from nvdla_hil.harness.loadables.fbs import MAX_ELEMENTS, MAX_EXPANDED_BYTES, MAX_SUBMITTED, LoadableError

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_sw"
CLI = [sys.executable, "-m", "nvdla_hil.harness.cli"]


def _root() -> Path | None:
    env = os.environ.get("NVDLA_LOADABLES")
    p = Path(env) if env else SHARED
    return p if (p / "flatbufs").is_dir() else None


@pytest.fixture(scope="module")
def root() -> Path:
    r = _root()
    if r is None:
        pytest.skip("NVDLA's software regression is not here (NVDLA_LOADABLES or ../shared/nvdla_sw)")
    return r


def _cli(*args: str, env_sw: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NVDLA_SW"}
    if env_sw:
        env["NVDLA_SW"] = env_sw
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


# ---- patching one field of a real loadable -------------------------------------------------------
def _field(buf: bytes, list_slot: int, index: int, slot: int) -> int:
    """Byte position of scalar field ``slot`` of table ``index`` of the root's list ``list_slot``."""
    root = Table(buf, struct.unpack_from("<I", buf, 0)[0])
    o = root.Offset(4 + 2 * list_slot)
    t = Table(buf, root.Indirect(root.Vector(o) + 4 * index))
    off = t.Offset(4 + 2 * slot)
    assert off, "the field is stored at its default; patch another loadable"
    return t.Pos + off


def _output_tensor_index(buf: bytes) -> tuple[int, int]:
    from nvdla_hil.harness.loadables.fbs import parse_loadable

    ld = parse_loadable(buf)
    m = next(m for m in ld.memory if m.flags & 8)
    return m.tensor_desc_id, m.id


# ---- 5: only regular files --------------------------------------------------------------------------
def test_fifos_devices_and_folders_are_refused_at_once_naming_the_option(root: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes: a read would hang forever
    ld = str(root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf")
    cases = [
        (["loadable", "show", str(fifo)], f"loadable {fifo}: a FIFO"),
        (["loadable", "show", "/dev/zero"], "loadable /dev/zero: a character device"),
        (["loadable", "show", str(tmp_path)], f"loadable {tmp_path}: a directory"),
        (["loadable", "run", str(fifo), "--target", "model"], f"loadable {fifo}: a FIFO"),
        (["loadable", "run", ld, "--target", "model", "--golden", str(fifo)], f"--golden {fifo}: a FIFO"),
        (["loadable", "run", ld, "--target", "model", "--golden", "/dev/urandom"], "--golden /dev/urandom: a character"),
        (["loadable", "run", ld, "--target", "model", "--input", "/dev/zero"], "--input /dev/zero: a character device"),
        (["loadable", "run", ld, "--target", "model", "--input", str(fifo)], f"--input {fifo}: a FIFO"),
        (["loadable", "run", ld, "--target", "model", "--golden", str(tmp_path)], f"--golden {tmp_path}: a directory"),
    ]
    for args, msg in cases:
        r = _cli(*args, timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert msg in r.stderr and "not a regular file" in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_a_file_over_the_size_limit_is_refused_before_reading(root: Path, tmp_path: Path) -> None:
    big = tmp_path / "big_golden.dimg"
    with open(big, "wb") as f:
        f.truncate((256 << 20) + 1)  # sparse: the size alone refuses it
    r = _cli("loadable", "run", str(root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf"), "--target", "model",
             "--golden", str(big))
    assert r.returncode == 2 and f"--golden {big}: {(256 << 20) + 1} bytes, more than" in r.stderr, r.stderr


# ---- 6: outputs never overwrite inputs -----------------------------------------------------------------
def test_dump_refuses_inputs_existing_files_and_missing_folders(root: Path, tmp_path: Path) -> None:
    src = tmp_path / "CDP_L0_0_small_fbuf"
    shutil.copy(root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf", src)
    golden = tmp_path / "golden.dimg"
    shutil.copy(next(root.glob("golden/CDP_L0_0_small_*/dla/o_000000.dimg")), golden)
    hard = tmp_path / "hard.dimg"
    os.link(golden, hard)
    sym = tmp_path / "sym.dimg"
    sym.symlink_to(src)
    other = tmp_path / "other.dimg"
    other.write_bytes(b"keep")
    before = {p: p.read_bytes() for p in (src, golden, other)}
    base = ["loadable", "run", str(src), "--target", "model", "--golden", str(golden)]
    for dump, force, msg in [
        (src, True, "it is the loadable of this run"),
        (golden, True, "it is the golden of this run"),
        (hard, True, "it is the golden of this run"),          # same inode, another name
        (sym, True, "it is the loadable of this run"),         # resolves to the loadable
        (tmp_path / "." / src.name, True, "it is the loadable of this run"),
        (other, False, "the file exists; pass --force"),
        (tmp_path / "no" / "such" / "x.dimg", False, "does not exist"),
    ]:
        r = _cli(*base, "--dump", str(dump), *(["--force"] if force else []))
        assert r.returncode == 2, (dump, r.stdout, r.stderr)
        assert f"--dump {dump}: " in r.stderr and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in before} == before


def test_dump_to_a_full_device_or_written_with_force(root: Path, tmp_path: Path, nvdla_sw: str) -> None:
    src = root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf"
    golden = next(root.glob("golden/CDP_L0_0_small_*/dla/o_000000.dimg"))
    r = _cli("loadable", "run", str(src), "--target", "model", "--dump", "/dev/full", "--force", env_sw=nvdla_sw)
    assert r.returncode == 2 and "--dump /dev/full: cannot write it: No space left on device" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = _cli("loadable", "run", str(src), "--target", "model", "--dump", "/dev/full", env_sw=nvdla_sw)
    assert r.returncode == 2 and "--dump /dev/full: the file exists" in r.stderr
    out = tmp_path / "out.dimg"
    out.write_bytes(b"old")
    r = _cli("loadable", "run", str(src), "--target", "model", "--dump", str(out), "--force", env_sw=nvdla_sw)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-2].startswith("PASS CDP_L0_0_small") or "PASS CDP_L0_0_small" in r.stdout
    assert out.read_bytes() == golden.read_bytes()  # NVDLA's golden, byte for byte


def test_a_descriptor_that_would_overflow_the_dimg_header_exits_2_naming_the_file(root: Path, tmp_path: Path,
                                                                                  nvdla_sw: str) -> None:
    buf = bytearray((root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf").read_bytes())
    ti, _ = _output_tensor_index(bytes(buf))
    struct.pack_into("<Q", buf, _field(bytes(buf), 6, ti, 3), 1 << 33)  # tensor size: 8 GiB
    bad = tmp_path / "huge_out_fbuf"
    bad.write_bytes(bytes(buf))
    r = _cli("loadable", "run", str(bad), "--target", "model", env_sw=nvdla_sw)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert str(bad) in r.stderr and "size 8589934592 bytes, more than its memory entry" in r.stderr, r.stderr
    with pytest.raises(LoadableError, match="DIMG: size 8589934592 does not fit"):
        pack_dimg(DimgMeta(40, "F8_x32_I", 1, 1, 1, 32, 32, 1 << 33), bytes(64))


# ---- 7: exit-2 messages name the file ------------------------------------------------------------------
def test_descriptor_and_golden_errors_name_the_file(root: Path, tmp_path: Path, nvdla_sw: str) -> None:
    # a network descriptor whose op_head points outside its operations: found in the descriptors
    src = (root / "flatbufs/kmd/PDP/PDP_L0_0_small_fbuf").read_bytes()
    from nvdla_hil.harness.loadables.fbs import parse_loadable

    ld = parse_loadable(src)
    net_mem = ld.memory[ld.addresses[ld.tasks[0].address_list[0]].mem_id]
    blob = ld.blob(net_mem.contents[0])
    at = src.find(blob.data[:40])
    assert at > 0
    bad = bytearray(src)
    struct.pack_into("<h", bad, at + 16 + 2 * 0, 99)  # op_head[0] (after the eight s16 indices)
    p = tmp_path / "bad_head_fbuf"
    p.write_bytes(bytes(bad))
    r = _cli("loadable", "show", str(p))
    assert r.returncode == 2 and str(p) in r.stderr and "op_head[0]: 99" in r.stderr, r.stderr
    # a golden that is not a DIMG
    g = tmp_path / "golden.dimg"
    g.write_bytes(b"not a dump at all, but long enough for a header......")
    r = _cli("loadable", "run", str(root / "flatbufs/kmd/PDP/PDP_L0_0_small_fbuf"), "--target", "model",
             "--golden", str(g), env_sw=nvdla_sw)
    assert r.returncode == 2 and f"golden {g}" in r.stderr and "expected b'DIMG'" in r.stderr, r.stderr


# ---- 4: bounded by what a loadable expands to -------------------------------------------------------------
def _vec_of(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _build_shared(*, tasks: int = 0, addr_len: int = 0, submits: int = 0, blobs: int = 0, blob_size: int = 0,
                  mems: int = 0, contents: int = 0, mem_size: int = 64) -> bytes:
    """A loadable whose tables all point at one shared vector of each kind."""
    b = flatbuffers.Builder(1024 + blob_size)
    data = b.CreateByteVector(b"\x5a" * blob_size) if blobs else 0
    bname = b.CreateString("b0")
    blob_ts = []
    for _ in range(blobs):
        b.StartObject(6)
        b.PrependUOffsetTRelativeSlot(0, bname, 0)
        b.PrependUint64Slot(1, blob_size, 0)
        b.PrependUOffsetTRelativeSlot(5, data, 0)  # every blob: the same data vector
        blob_ts.append(b.EndObject())
    cname = b.CreateString("b0")
    cont = _vec_of(b, [cname] * contents)  # one contents list: the same name again and again
    b.StartVector(8, contents, 8)
    for _ in range(contents):
        b.PrependUint64(0)
    offs = b.EndVector()
    mem_ts = []
    for _ in range(max(mems, 1)):
        b.StartObject(9)
        b.PrependUint16Slot(2, 3 if contents else 1, 0)  # ALLOC(|SET)
        b.PrependUint64Slot(3, mem_size, 0)
        if contents:
            b.PrependUOffsetTRelativeSlot(5, cont, 0)
            b.PrependUOffsetTRelativeSlot(6, offs, 0)
        mem_ts.append(b.EndObject())
    # memory entries take their ids from their places: patch below by building distinct tables
    b.StartObject(4)
    addr_t = b.EndObject()
    b.StartVector(2, addr_len, 2)
    for _ in range(addr_len):
        b.PrependUint16(0)
    alist = b.EndVector()  # one address list for every task
    task_ts = []
    for _ in range(tasks):
        b.StartObject(6)
        b.PrependUint32Slot(1, 1, 0)
        b.PrependUOffsetTRelativeSlot(3, alist, 0)
        task_ts.append(b.EndObject())
    b.StartVector(2, 1, 2)
    b.PrependUint16(0)
    tids = b.EndVector()  # one task list for every submit
    sub_ts = []
    for _ in range(submits):
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(1, tids, 0)
        sub_ts.append(b.EndObject())
    v_tasks, v_mem, v_addr = _vec_of(b, task_ts), _vec_of(b, mem_ts), _vec_of(b, [addr_t])
    v_blobs, v_subs = _vec_of(b, blob_ts), _vec_of(b, sub_ts)
    b.StartObject(9)
    b.Prep(1, 3)
    for v in (0, 11, 0):
        b.PrependUint8(v)
    b.PrependStructSlot(0, b.Offset(), 0)
    b.PrependUOffsetTRelativeSlot(1, v_tasks, 0)
    b.PrependUOffsetTRelativeSlot(2, v_mem, 0)
    b.PrependUOffsetTRelativeSlot(3, v_addr, 0)
    b.PrependUOffsetTRelativeSlot(5, v_blobs, 0)
    b.PrependUOffsetTRelativeSlot(8, v_subs, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


@pytest.mark.parametrize("kwargs, what", [
    ({"tasks": 2000, "addr_len": 30000}, f"more than {MAX_ELEMENTS} list elements"),        # shared address list
    ({"blobs": 2048, "blob_size": 1 << 20}, f"more than {MAX_EXPANDED_BYTES} bytes"),       # shared 1 MiB blob
    ({"blobs": 1, "blob_size": 1 << 20, "contents": 2000, "mem_size": 1 << 20},
     f"more than {MAX_EXPANDED_BYTES} bytes"),                                               # shared contents
    ({"tasks": 1, "addr_len": 0, "submits": MAX_SUBMITTED + 1}, f"more than {MAX_SUBMITTED} task runs"),
])
def test_shared_vectors_count_each_time_and_are_refused_past_the_budget(kwargs: dict, what: str, tmp_path: Path,
                                                                        capsys, nvdla_sw: str) -> None:  # noqa: ANN001
    from nvdla_hil.harness.cli import main

    data = _build_shared(**kwargs)
    assert len(data) < (1 << 21)  # a small file...
    p = tmp_path / "shared.lod"
    p.write_bytes(data)
    tracemalloc.start()
    try:
        code = main(["loadable", "show", str(p)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert code == 2 and str(p) in err and what in err, err
    assert peak < 64 << 20, f"{peak} bytes allocated to refuse it"  # ...refused without expanding it
    r = _cli("loadable", "run", str(p), "--target", "model", env_sw=nvdla_sw)
    assert r.returncode == 2 and str(p) in r.stderr and what in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_shared_vector_within_the_budget_is_read_once(tmp_path: Path) -> None:
    from nvdla_hil.harness.loadables.check import read_loadable

    p = tmp_path / "ok.lod"
    p.write_bytes(_build_shared(tasks=100, addr_len=1000, blobs=50, blob_size=4096))
    ld = read_loadable(p)
    assert len(ld.tasks) == 100 and all(t.address_list is ld.tasks[0].address_list for t in ld.tasks)
    assert len(ld.blobs) == 50 and all(bl.data is ld.blobs[0].data for bl in ld.blobs)
