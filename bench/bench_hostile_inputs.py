"""The hostile inputs of bench/bench_hostile.py, one builder per class: each returns Jobs (the
commands to run on an input, what they must exit with, the files that must not change, the pages
to check for live payloads). Real files where there are some (NVDLA's regression loadables, the
bundled vectors, a results database written by nvdla-hil's own ResultsDB), spoiled here."""

from __future__ import annotations

import os
import random
import shutil
import socket
import sqlite3
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from benchenv import SHARED

LOADABLES = Path(os.environ.get("NVDLA_LOADABLES") or SHARED / "nvdla_sw")

@dataclass
class Step:
    argv: list[str]
    expect: str  # "2": bad input; "0": must succeed; "maybe": 0, 1 or 2
    regress: bool = False


@dataclass
class Job:
    kind: str
    label: str
    steps: list[Step]
    inputs: list[Path]  # files and folders hashed before and after
    html: list[Path] = field(default_factory=list)  # generated pages checked for live payloads
    skip_hash: set[Path] = field(default_factory=set)  # outputs inside an input folder
    cleanup: list[Path] = field(default_factory=list)  # immutable files (chattr -i afterwards)


# ---- class 1: loadables ---------------------------------------------------------------------------------

#: root table slots of loadable.fbs that are lists of tables (tasks, memory, addresses, events,
#: blobs, tensors, relocs, submits)
TABLE_LISTS = (1, 2, 3, 4, 5, 6, 7, 8)
#: dla_network_desc: byte offset -> what (int16 indices, op_head[6], then uint16 counts)
NET_FIELDS = {0: "operation_desc_index", 2: "surface_desc_index", 4: "dependency_graph_index", 6: "lut_data_index",
              8: "roi_array_index", 10: "surface_index", 12: "stat_list_index", 16: "op_head[0]", 18: "op_head[1]",
              20: "op_head[2]", 22: "op_head[3]", 24: "op_head[4]", 26: "op_head[5]", 28: "num_rois",
              30: "num_operations", 32: "num_luts", 34: "num_addresses", 36: "input_layer"}
U32S = (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFF, 0x10000, 0x100000)


def _root_list(buf: bytes, slot: int) -> tuple[int, int] | None:
    """(position of the first element, length) of the root's list ``slot``, or None."""
    from flatbuffers.table import Table

    root = Table(buf, struct.unpack_from("<I", buf, 0)[0])
    o = root.Offset(4 + 2 * slot)
    if not o:
        return None
    vec = root.Vector(o)
    return vec, struct.unpack_from("<I", buf, vec - 4)[0]


def _table_field(buf: bytes, table: int, slot: int) -> int:
    from flatbuffers.table import Table

    t = Table(buf, table)
    off = t.Offset(4 + 2 * slot)
    return t.Pos + off if off else 0


def mutate_bytes(data: bytes, rng: random.Random, lo: int = 0, hi: int = 0) -> bytes:
    """1-8 byte edits at random places (in ``lo:hi`` when given); a few of them (truncations,
    insertions) shift every offset after them."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        p = rng.randrange(lo, hi) if hi > lo else rng.randrange(len(b)) if b else 0
        op = rng.choice([0, 0, 1, 1, 2, 2, 3, 4, 5]) if hi <= lo else rng.randrange(3)
        if op == 0 and b:
            b[p] ^= 1 << rng.randrange(8)
        elif op == 1 and len(b) > p + 4:
            struct.pack_into("<I", b, p & ~3, rng.choice(U32S + (len(b), len(b) - 4, rng.getrandbits(32))))
        elif op == 2 and b:
            b[p] = rng.choice([0, 0xFF, 0x7F, 0x80])
        elif op == 3:
            b = b[: max(4, p)]
        elif op == 4:
            b[p:p] = bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 8])))
        else:
            q = min(len(b), p + rng.randint(1, 256))
            b[p:p] = b[p:q]
    return bytes(b)


def blob_bytes(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """Byte edits inside one blob (a descriptor list, a LUT, weights): the file still parses and
    the firmware reads the edited descriptors."""
    from nvdla_hil.harness.loadables.fbs import parse_loadable

    blobs = [bl for bl in parse_loadable(data).blobs if len(bl.data) >= 8]
    bl = rng.choice(blobs)
    at = data.find(bytes(bl.data[:64]))
    return f"blob-bytes-{bl.name[:20]}", mutate_bytes(data, rng, at, at + len(bl.data))


def share_tables(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """Every element of one root list pointed at one of its tables (uoffsets stay forward)."""
    buf = bytearray(data)
    lists = [(s, x) for s in TABLE_LISTS if (x := _root_list(data, s)) and x[1] >= 1]
    slot, (vec, n) = rng.choice(lists)
    targets = [vec + 4 * i + struct.unpack_from("<I", buf, vec + 4 * i)[0] for i in range(n)]
    target = rng.choice(targets)
    for i in range(n):
        pos = vec + 4 * i
        if target > pos:
            struct.pack_into("<I", buf, pos, target - pos)
    how = "shared"
    if rng.random() < 0.5:  # and a count past the list's end: the elements are whatever follows
        new_n = rng.choice([n + 1, n * 64, 1 << 16, 1 << 20, 0x7FFFFFFF, (len(buf) - vec) // 4])
        struct.pack_into("<I", buf, vec - 4, new_n)
        how += f"+count{new_n}"
    return f"{how}-slot{slot}", bytes(buf)


def _vec_of(b, offsets: list[int]) -> int:  # noqa: ANN001 - a flatbuffers.Builder
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def amplified(rng: random.Random) -> tuple[str, bytes]:
    """A small loadable whose tables all point at one vector of each kind, sized near or past the
    expansion budgets (list elements, expanded bytes, task runs, memory entry sizes)."""
    import flatbuffers

    p = rng.choice([
        {"tasks": rng.choice([100, 2000, 5000]), "addr_len": rng.choice([1000, 30000, 65535])},
        {"blobs": rng.choice([64, 1000, 1100, 4000]), "blob_size": 1 << 20},
        {"blobs": 1, "blob_size": 1 << 20, "contents": rng.choice([200, 1023, 1025, 5000]), "mem_size": 1 << 20},
        {"tasks": 1, "submits": rng.choice([4095, 4096, 4097, 60000])},
        {"mems": rng.choice([3, 4, 5, 64]), "mem_size": rng.choice([200 << 20, 256 << 20, (256 << 20) + 1])},
        {"tasks": rng.choice([1, 8]), "addr_len": rng.choice([1, 64]), "mems": 2, "mem_size": 64},
    ])
    tasks, addr_len, submits = p.get("tasks", 0), p.get("addr_len", 0), p.get("submits", 0)
    blobs, blob_size, mems = p.get("blobs", 0), p.get("blob_size", 0), p.get("mems", 1)
    contents, mem_size = p.get("contents", 0), p.get("mem_size", 64)
    b = flatbuffers.Builder(1024 + blob_size)
    data = b.CreateByteVector(b"\x5a" * blob_size) if blobs else 0
    bname = b.CreateString("b0")
    blob_ts = []
    for _ in range(blobs):
        b.StartObject(6)
        b.PrependUOffsetTRelativeSlot(0, bname, 0)
        b.PrependUint64Slot(1, blob_size, 0)
        b.PrependUOffsetTRelativeSlot(5, data, 0)
        blob_ts.append(b.EndObject())
    cont = _vec_of(b, [b.CreateString("b0")] * contents)
    b.StartVector(8, contents, 8)
    for _ in range(contents):
        b.PrependUint64(0)
    offs = b.EndVector()
    mem_ts = []
    for i in range(mems):
        b.StartObject(9)
        b.PrependUint16Slot(0, i, 0)
        b.PrependUint16Slot(2, 3 if contents else 1, 0)
        b.PrependUint64Slot(3, mem_size, 0)
        if contents:
            b.PrependUOffsetTRelativeSlot(5, cont, 0)
            b.PrependUOffsetTRelativeSlot(6, offs, 0)
        mem_ts.append(b.EndObject())
    b.StartObject(4)
    addr_t = b.EndObject()
    b.StartVector(2, addr_len, 2)
    for _ in range(addr_len):
        b.PrependUint16(0)
    alist = b.EndVector()
    task_ts = []
    for _ in range(tasks):
        b.StartObject(6)
        b.PrependUint32Slot(1, 1, 0)
        b.PrependUOffsetTRelativeSlot(3, alist, 0)
        task_ts.append(b.EndObject())
    b.StartVector(2, 1, 2)
    b.PrependUint16(0)
    tids = b.EndVector()
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
    for slot, v in ((1, v_tasks), (2, v_mem), (3, v_addr), (5, v_blobs), (8, v_subs)):
        b.PrependUOffsetTRelativeSlot(slot, v, 0)
    b.Finish(b.EndObject())
    return "amplified-" + "-".join(f"{k}{v}" for k, v in p.items()), bytes(b.Output())


def edit_descriptors(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """A network-descriptor field set to a valid-looking or out-of-range value, or a size field of a
    memory entry, tensor or blob made huge."""
    from nvdla_hil.harness.loadables.fbs import parse_loadable

    buf = bytearray(data)
    ld = parse_loadable(data)
    if rng.random() < 0.6 and ld.tasks and ld.tasks[0].address_list:
        net_mem = ld.memory[ld.addresses[ld.tasks[0].address_list[0]].mem_id]
        at = data.find(ld.blob(net_mem.contents[0]).data[:40])
        off = rng.choice(list(NET_FIELDS))
        n_addr = struct.unpack_from("<H", data, at + 34)[0]
        if off == 12 or rng.random() < 0.4:  # -1 (unused) -> a valid index: the firmware follows it
            val = rng.randrange(max(n_addr, 1))
        else:
            val = rng.choice([-1, 0, 1, 5, 255, 0x7FFF, -0x8000, n_addr, n_addr + 1]) if off < 28 else \
                rng.choice([0, 1, 0xFFFF, 0x8000, n_addr + 1])
        struct.pack_into("<H", buf, at + off, val & 0xFFFF)  # int16 fields: -1 is 0xFFFF
        if rng.random() < 0.2:
            buf[at + 38] = 1  # dynamic_roi
        return f"netdesc-{NET_FIELDS[off]}={val}", bytes(buf)
    slot, fslot, what = rng.choice([(2, 3, "memory.size"), (6, 3, "tensor.size"), (5, 1, "blob.size"),
                                    (2, 4, "memory.alignment"), (6, 5, "tensor.dims")])
    lst = _root_list(data, slot)
    if not lst or not lst[1]:
        return "bytes", mutate_bytes(data, rng)
    vec, n = lst
    i = rng.randrange(n)
    table = vec + 4 * i + struct.unpack_from("<I", data, vec + 4 * i)[0]
    pos = _table_field(data, table, fslot)
    if not pos:
        return "bytes", mutate_bytes(data, rng)
    huge = rng.choice([1 << 40, (1 << 64) - 1, (256 << 20) + 1, 256 << 20, 1 << 31, 0])
    width = 8 if what.endswith("size") else 4
    struct.pack_into("<Q" if width == 8 else "<I", buf, pos, huge & ((1 << (8 * width)) - 1))
    return f"{what}[{i}]={huge}", bytes(buf)


def loadable_jobs(work: Path, rng: random.Random, n: int) -> list[Job]:
    srcs = sorted(LOADABLES.glob("flatbufs/**/*_fbuf"))
    if not srcs:
        return []
    jobs = []
    for i in range(n):
        src = srcs[i % len(srcs)]
        data = src.read_bytes()
        d = work / "ld" / f"{i:05d}"
        d.mkdir(parents=True)
        k = i % 10
        if k < 2:
            label, body = "bytes", mutate_bytes(data, rng)
        elif k < 4:
            label, body = blob_bytes(data, rng)
        elif k < 6:
            label, body = share_tables(data, rng)
        elif k == 6:
            label, body = amplified(rng)
        else:
            label, body = edit_descriptors(data, rng)
        f = d / f"{src.stem}_{label.split('-')[0].split('[')[0]}_fbuf"
        f.write_bytes(body)
        inputs = [d]
        run = ["loadable", "run", str(f), "--target", "model"]
        goldens = sorted(LOADABLES.glob(f"golden/{src.name.removesuffix('_fbuf')}_*/dla/o_000000.dimg"))
        if goldens:
            g = d / "golden.dimg"
            shutil.copy(goldens[0], g)
            run += ["--golden", str(g)]
        steps = [Step(["loadable", "show", str(f)], "maybe") if i % 2 else Step(run, "maybe")]
        if i % 5 == 0:  # --dump aimed at an input (itself, its golden, a symlink or hard link to one)
            link = d / "out.dimg"
            target = rng.choice([f, d / "golden.dimg" if goldens else f])
            if rng.random() < 0.5:
                link.symlink_to(target)
            else:
                os.link(target, link)
            dump = rng.choice([f, link, d / "." / f.name])
            steps = [Step([*run, "--dump", str(dump), "--force"], "2")]
            label += "+dump-at-input"
        jobs.append(Job("loadable", f"{src.stem} {label}", steps, inputs))
    return jobs


# ---- class 2: results databases ---------------------------------------------------------------------------


def base_db(path: Path) -> str:
    """A database with a finished run: a failure with a signature, a pass; returns the run id."""
    from nvdla_hil.harness.results.db import ResultsDB
    from nvdla_hil.harness.results.signature import failure_info, signature_of

    sig = signature_of(failure_info("failed", "call", "Failed", "sync_id_0: crc MISMATCH"))
    with ResultsDB(path) as db:
        for r in range(3):
            rid = f"20261129T00000{r}Z-1-abcde{r}"
            db.start_run(rid, started=1767225600.0 + r, target="model", profile="nv_small", suite="vectors",
                         semantics="rtl", selection="", model_bugs="")
            db.record_test(rid, "m::test_vector[a]", "failed", 1.0, reason="out MISMATCH", signature=sig,
                           test="m::test_vector[a]")
            db.record_test(rid, "m::test_vector[b]", "passed", 0.5, test="m::test_vector[b]")
            db.finish_run(rid, 1, "complete", note="")
    return "20261129T000002Z-1-abcde2"


SQL_EDITS = [
    ("version", "UPDATE nvdla_schema SET version = {v}", ["0", "-1", "2", "99", "9223372036854775807", "'abc'",
                                                         "1.5", "x'00'", "'1'"], "2"),
    ("no-schema-table", "DROP TABLE nvdla_schema", [""], "maybe"),
    ("no-tests-table", "DROP TABLE nvdla_tests", [""], "maybe"),
    ("no-schema-row", "DELETE FROM nvdla_schema", [""], "maybe"),
    ("text-for-number", "UPDATE nvdla_runs SET {v} = '<b>x</b>'", ["n_passed", "started", "exit_code"], "2"),
    ("text-duration", "UPDATE nvdla_tests SET duration = {v}", ["'slow'", "x'ff00'"], "2"),
    ("odd-number", "UPDATE nvdla_runs SET started = {v}", ["1e308", "-1e308", "9e18", "-1"], "maybe"),
    ("odd-duration", "UPDATE nvdla_tests SET duration = {v}", ["1e308", "-5", "NULL"], "maybe"),
    ("huge-reason", "UPDATE nvdla_tests SET reason = {v}", ["hex(zeroblob(2000000))", "char(27, 93, 48, 59, 7)"],
     "maybe"),
    ("null-ids", "UPDATE nvdla_tests SET nodeid = {v} WHERE rowid = 1", ["NULL", "''"], "maybe"),
]


def _spoil_db(db: Path, base: Path, rng: random.Random, i: int) -> tuple[str, str, list[Path]]:
    """Make ``db`` from ``base``: returns (label, expected exit, files made immutable)."""
    k = i % 9
    data = base.read_bytes()
    if k == 0:
        cut = rng.choice([0, 1, 16, 99, 100, 4096, rng.randrange(len(data))])
        db.write_bytes(data[:cut])
        return f"truncated-{cut}", "maybe" if cut == 0 else "2", []
    if k == 1:
        page = rng.randrange(len(data) // 4096)
        b = bytearray(data)
        how = rng.choice(["random", "zeros", "ones", "bytes"])
        if how == "bytes":
            for _ in range(rng.randint(1, 64)):
                b[page * 4096 + rng.randrange(4096)] = rng.randrange(256)
        else:
            fill = {"random": bytes(rng.randrange(256) for _ in range(4096)), "zeros": bytes(4096),
                    "ones": b"\xff" * 4096}[how]
            b[page * 4096:(page + 1) * 4096] = fill
        db.write_bytes(bytes(b))
        return f"page{page}-{how}", "maybe", []
    if k == 2:
        b = bytearray(data)
        off = rng.choice([16, 18, 19, 20, 21, 28, 32, 40, 44, 56, 96])
        b[off:off + 2] = bytes([rng.randrange(256), rng.randrange(256)])
        db.write_bytes(bytes(b))
        return f"header@{off}", "maybe", []
    if k in (3, 4):
        name, sql, vals, expect = rng.choice(SQL_EDITS)
        v = rng.choice(vals)
        db.write_bytes(data)
        c = sqlite3.connect(db)
        try:
            with c:
                c.execute(sql.format(v=v))
        except sqlite3.IntegrityError:  # NOT NULL, UNIQUE: SQLite keeps it out
            name = f"{name}-refused"
        finally:
            c.close()
        return f"{name}={v[:20]}", expect, []
    if k == 5:
        db.write_bytes(data)
        if os.geteuid() != 0:
            db.chmod(0o444)
            return "read-only", "maybe", []
        if subprocess.run(["chattr", "+i", str(db)], capture_output=True, check=False).returncode == 0:
            return "read-only", "maybe", [db]  # root writes a 0444 file: only an immutable one is read-only
        return "writable (chattr +i failed)", "maybe", []
    if k == 6:
        what = rng.choice(["folder", "fifo", "dev-zero", "dev-null", "dangling", "one-byte", "socket"])
        if what == "folder":
            db.mkdir()
        elif what == "fifo":
            os.mkfifo(db)
        elif what in ("dev-zero", "dev-null"):
            db.symlink_to(f"/dev/{what[4:]}")
        elif what == "dangling":
            db.symlink_to(db.parent / "nowhere" / "x.sqlite")
        elif what == "one-byte":  # not SQLite's empty database: a file that holds something else
            db.write_bytes(b"x")
            return what, "2", []
        else:
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(db))
            s.close()
        return what, "maybe" if what in ("dev-null", "dangling") else "2", []
    if k == 7:
        db.write_bytes(rng.choice([b"SQLite format 3\x00" + bytes(rng.randrange(256) for _ in range(200)),
                                   b"not a database\n" * 300, bytes(4096) * 3,
                                   b"SQLite format 3\x00" + data[16:4096] + bytes(4096)]))
        return "garbage", "2", []
    b = bytearray(data)  # bytes flipped all over
    for _ in range(rng.randint(1, 200)):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    db.write_bytes(bytes(b))
    return "flips", "maybe", []


def db_jobs(work: Path, rng: random.Random, n: int, n_regress: int) -> list[Job]:
    base = work / "base.sqlite"
    run_id = base_db(base)
    jobs = []
    for i in range(n + n_regress):
        d = work / "db" / f"{i:05d}"
        d.mkdir(parents=True)
        db = d / "results.sqlite"
        label, expect, frozen = _spoil_db(db, base, rng, i)
        if i >= n:  # regress on it: a writer, which never reads the rows it did not write
            bad = (expect == "2" and not label.startswith("text-")) or label == "read-only"
            steps = [Step(["regress", "--suite", "vectors", "-k", "sdp_cvt-s1-000", "--results-dir", str(d / "r"),
                           "--results-db", str(db)], "2" if bad else "maybe", regress=True)]
            inputs = [db] if bad else []
            jobs.append(Job("results-db", "regress " + label, steps, inputs, cleanup=frozen))
            continue
        cmd = rng.choice(["history", "history-run", "dashboard", "dashboard-site"])
        if cmd == "history":
            argv = ["history", "--results-db", str(db)]
        elif cmd == "history-run":
            argv = ["history", "--results-db", str(db), "--run", run_id[:10], "--window", "1000", "--show", "1000"]
        else:
            out = d / "site"
            if cmd == "dashboard-site":  # --out an existing file: refused, never replaced
                out.write_text("keep")
            argv = ["dashboard", "--results-db", str(db), "--out", str(out)]
        if cmd == "dashboard-site":
            expect = "2"
        skip = {d / "site"} if cmd == "dashboard" else set()
        if label == "truncated-0":  # an empty file is a new database (SQLite's convention): it may be written
            skip.add(db)
        jobs.append(Job("results-db", f"{cmd} {label}", [Step(argv, expect)], [d], cleanup=frozen, skip_hash=skip))
    return jobs


# ---- class 3: run folders -----------------------------------------------------------------------------------

JUNIT = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" '
         'skipped="0" tests="2"><testcase classname="nvdla_hil.harness.suites.test_vectors" name="test_vector[a]" '
         'time="0.1"><failure message="out MISMATCH">x</failure></testcase><testcase '
         'classname="nvdla_hil.harness.suites.test_vectors" name="test_vector[b]" time="0.2" /></testsuite>'
         "</testsuites>")
RUN_JSON = ('{"status": "finished", "command": ["nvdla-hil", "regress"], "started": "2026-11-29T00:00:00+00:00", '
            '"seconds": 1.0, "exit_code": 1, "pytest_argv": []}')


def _junit_bad(rng: random.Random, victim: Path) -> tuple[str, str | bytes, str]:
    k = rng.randrange(12)
    if k == 0:
        cut = rng.randrange(len(JUNIT) - 20)
        return f"junit-cut{cut}", JUNIT[:cut], "2"
    if k == 1:
        d = rng.choice([200, 5000, 100000])
        return f"junit-deep{d}", "<testsuites>" + "<a>" * d + "</a>" * d + "</testsuites>", "maybe"
    if k == 2:
        return "junit-billion-laughs", ('<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa">'
                                        + "".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">'
                                                  for p, c in zip("abcdefgh", "bcdefghi", strict=True))
                                        + "]><testsuites><testcase name='&i;'/></testsuites>"), "2"
    if k == 3:
        return "junit-xxe", (f'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file://{victim}">]>'
                             "<testsuites><testsuite><testcase name='&x;'/></testsuite></testsuites>"), "2"
    if k == 4:
        n = rng.choice([10000, 200000])
        cases = "".join(f'<testcase classname="m" name="t{i}" time="0.1"/>' for i in range(n))
        return f"junit-{n}-cases", f'<testsuites><testsuite tests="{n}">{cases}</testsuite></testsuites>', "maybe"
    if k == 5:
        attr = rng.choice(['time="nan"', 'time="inf"', 'time="-1"', 'time="1e309"', f'time="{"9" * 5000}"',
                           'tests="-5"', 'failures="x"', 'time=""'])
        return f"junit-{attr[:12]}", JUNIT.replace('time="0.1"', attr).replace('tests="2"', attr if "tests" in attr
                                                                                else 'tests="2"'), "maybe"
    if k == 6:
        return "junit-nul", JUNIT.replace("test_vector[b]", "test_vector[&#0;b]"), "2"
    if k == 7:
        return "junit-utf16-decl", JUNIT.replace("utf-8", "utf-16"), "maybe"
    if k == 8:
        return "junit-huge-name", JUNIT.replace("test_vector[b]", "b" * rng.choice([100000, 6 << 20])), "maybe"
    if k == 9:
        b = bytearray(JUNIT.encode())
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return "junit-bytes", bytes(b), "maybe"
    if k == 10:
        return "junit-other-root", rng.choice(["<html/>", "<testsuite/>", "<testsuites><testcase/></testsuites>",
                                               "<testsuites>text</testsuites>", ""]), "maybe"
    return "junit-pi", '<?xml-stylesheet href="javascript:x"?>' + JUNIT[JUNIT.index("<testsuites>"):], "maybe"


def _run_json_bad(rng: random.Random) -> tuple[str, str | bytes, str]:
    k = rng.randrange(10)
    if k == 0:
        return "json-list", rng.choice(["[]", "[1, 2, 3]", '[{"status": "finished"}]']), "2"
    if k == 1:
        d = rng.choice([1000, 100000, 1 << 20])
        return f"json-deep{d}", rng.choice(["[", '{"a":'])[0] * d + "]" * d, "2"
    if k == 2:
        return "json-huge", '{"note": "' + "x" * rng.choice([5 << 20, 20 << 20]) + '"}', "2"
    if k == 3:
        return "json-bigint", '{"exit_code": ' + "9" * rng.choice([400, 5000, 100000]) + "}", "maybe"
    if k == 4:
        field_, v = rng.choice([("status", "5"), ("started", "[]"), ("seconds", '"x"'), ("seconds", "-1"),
                                ("seconds", "1e999"), ("seconds", "NaN"), ("exit_code", '"x"'),
                                ("exit_code", "1180591620717411303424"), ("pytest_argv", "{}"), ("command", "[null]"),
                                ("started", '"2026-99-99"'), ("started", '"\\u0000"'), ("command", '["\\ud800"]')])
        return f"json-{field_}={v[:10]}", '{"' + field_ + '": ' + v + "}", "maybe"
    if k == 5:
        return "json-dup-keys", '{"status": "finished", "status": ["x"]}', "maybe"
    if k == 6:
        return "json-bytes", rng.choice([b"\xef\xbb\xbf" + RUN_JSON.encode(), RUN_JSON.encode("utf-16"),
                                         b"\xff\xfe\x00{", RUN_JSON.encode()[:30] + b"\x00" + RUN_JSON.encode()[30:]]), \
            "maybe"
    if k == 7:
        return "json-scalar", rng.choice(["null", "42", '"finished"', "true", ""]), "2"
    if k == 8:
        return "json-many-keys", "{" + ",".join(f'"k{i}": {i}' for i in range(200000)) + "}", "maybe"
    return "json-cut", RUN_JSON[:rng.randrange(1, len(RUN_JSON) - 1)], "2"


def _special(p: Path, what: str, victim: Path) -> None:
    p.unlink(missing_ok=True)
    if what == "fifo":
        os.mkfifo(p)
    elif what == "folder":
        p.mkdir()
    elif what == "victim":
        p.symlink_to(victim)
    elif what in ("passwd", "zero", "urandom"):
        p.symlink_to({"passwd": "/etc/passwd", "zero": "/dev/zero", "urandom": "/dev/urandom"}[what])
    else:  # a symlink loop
        p.symlink_to(p.name)


def base_run(run: Path) -> None:
    (run / "logs").mkdir(parents=True)
    (run / "junit.xml").write_text(JUNIT)
    (run / "run.json").write_text(RUN_JSON)
    (run / "logs" / "test_vector_a.log").write_text("log\n")


def rundir_jobs(work: Path, rng: random.Random, n: int) -> list[Job]:
    jobs = []
    for i in range(n):
        d = work / "rd" / f"{i:05d}"
        victim = d / "victim.txt"
        run = d / "results" / "20261129T000000Z-1-abcdef"
        base_run(run)
        victim.parent.mkdir(parents=True, exist_ok=True)
        victim.write_text("a file outside the run folder\n")
        k = i % 6
        expect, target = "2", run
        if k in (0, 1):
            label, body, expect = _junit_bad(rng, victim) if k == 0 else _run_json_bad(rng)
            p = run / ("junit.xml" if k == 0 else "run.json")
            if isinstance(body, str):
                p.write_text(body, encoding="utf-8", errors="surrogatepass")
            else:
                p.write_bytes(body)
        elif k == 2:
            name = rng.choice(["junit.xml", "run.json"])
            what = rng.choice(["fifo", "folder", "victim", "passwd", "zero", "urandom", "loop"])
            _special(run / name, what, victim)
            label = f"{name}-{what}"
        elif k == 3:  # the logs: FIFOs, symlinks out, a malformed diagnosis sidecar
            what = rng.choice(["diag-fifo", "logs-link", "diag-bad", "diag-link", "diag-huge"])
            diag = run / "logs" / "test_vector_a.diag.json"
            if what == "diag-fifo":
                os.mkfifo(diag)
            elif what == "logs-link":
                shutil.rmtree(run / "logs")
                (run / "logs").symlink_to(rng.choice(["/", "/proc/self", str(d)]))
            elif what == "diag-bad":
                diag.write_text(rng.choice(["[", "[]", '{"layer": ' + "[" * 50000 + "}", "\x00"]))
            elif what == "diag-link":
                diag.symlink_to(rng.choice(["/dev/zero", str(victim), "/etc/shadow"]))
            else:
                diag.write_text('{"x": "' + "y" * (30 << 20) + '"}')
            label, expect = what, "maybe"
        elif k == 4:  # report.html a symlink to a file outside: the report must not write through it
            (run / "report.html").symlink_to(victim)
            label, expect = "report.html-link-out", "maybe"
        else:  # a folder of runs: deep, looping, many
            what = rng.choice(["loop", "deep", "many", "file"])
            target = d / "results"
            if what == "loop":
                (target / "loop").symlink_to(".")
                (target / "up").symlink_to("..")
            elif what == "deep":
                p = target
                for _ in range(rng.choice([50, 400])):
                    p = p / "d"
                p.mkdir(parents=True)
            elif what == "many":
                for j in range(rng.choice([200, 2000])):
                    (target / f"r{j:05d}").mkdir()
            else:
                target = run / "junit.xml"
            label, expect = f"folder-{what}", "maybe"
        db = d / "imported.sqlite"
        if target != run or (i % 2 == 0 and k != 4):
            steps = [Step(["history", "--results-db", str(db), "import", str(target)], expect)]
        else:
            steps = [Step(["report", str(run), *(["--out", str(d / "out.html")] if i % 3 == 0 else [])], expect)]
        jobs.append(Job("run-folder", label, steps, [run, victim], skip_hash={run / "report.html"}))
    return jobs


# ---- class 4: fields drawn in the report and the dashboard -----------------------------------------------

PAYLOADS = [
    "<script>pwned('script')</script>",
    "<img src=x onerror=\"pwned('img')\">",
    "\"><svg onload=pwned('svg-dq')>",
    "'><svg onload=pwned('svg-sq')>",
    "javascript:pwned('href')",
    "</script><script>pwned('close')</script>",
    "--><script>pwned('comment')</script>",
    "</style><script>pwned('style')</script>",
    "</textarea><script>pwned('ta')</script>",
    "<a href=\"javascript:pwned('a')\">x</a>",
    "{{constructor.constructor('pwned()')()}}",
    "\x1b]0;pwned\x07\x1b[2J",
    "\u202e<b onmouseover=pwned('rlo')>",
]
BUGS = [("javascript:pwned('bug')//", "2"), ("JaVaScRiPt:pwned('bug')", "2"), (" javascript:pwned(1)", "2"),
        ("java\tscript:pwned(1)", "2"), ("data:text/html,<script>pwned('d')</script>", "2"), ("vbscript:pwned", "2"),
        ("//evil.example/pwned", "2"), ("https://bugs.example/NV-1?a=\"><script>pwned('q')</script>", "0"),
        ("https://bugs.example/NV-1#'><svg onload=pwned('h')>", "0"), ("http://x/\x1b]0;pwned\x07", "2"),
        ("https://bugs.example/browse/NV-1", "0"), (None, "0")]
#: vector folder names (no "/": they are folder names) holding payloads
NAMES = ["v<script>pwned('n1')<", "v<img src=x onerror=pwned('n2')>", "v\"><svg onload=pwned('n3')>",
         "v'><svg onload=pwned('n4')>", "v\x1b]0;pwned\x07\x1b[2J", "v--><svg onload=pwned('n5')>"]


def fields_setup(work: Path) -> tuple[Path, Job] | None:
    """A regression over vectors named with payloads (half of them failing) into a results folder:
    (the folder, the regression as a Job), or None without the bundled vectors."""
    from nvdla_hil.harness.vectors import bundled_root, find_cases

    src = next((p for p in find_cases(bundled_root()) if p.name == "sdp_cvt-s1-000"), None)
    if src is None:
        return None
    vec = work / "fields" / "vec" / "sdp_cvt"
    for j, name in enumerate(NAMES):
        d = vec / name
        shutil.copytree(src, d)
        if j % 2 == 0:  # a wrong expected output: the test fails, its failure gets a signature
            b = bytearray((d / "dst.expected.bin").read_bytes())
            b[0] ^= 0x55
            (d / "dst.expected.bin").write_bytes(bytes(b))
    res = work / "fields" / "results"
    job = Job("fields", "regress over payload-named vectors",
              [Step(["regress", "--suite", "vectors", "--vectors", str(vec.parent), "--results-dir", str(res)],
                    "maybe", regress=True)], [vec.parent], html=[res / "latest" / "report.html"])
    return res, job


def fields_jobs(work: Path, rng: random.Random, n: int, res: Path) -> list[Job]:
    from nvdla_hil.harness.results.db import ResultsDB

    with ResultsDB(res / "results.sqlite") as rdb:
        sigs = sorted(rdb.signatures())
    run = (res / "latest").resolve()
    jobs = []
    for i in range(n):
        d = work / "fields" / f"{i:05d}"
        shutil.copytree(res, d / "results", symlinks=True)
        r = d / "results"
        text = rng.choice(PAYLOADS) + f" #{i}"
        bug, expect = rng.choice(BUGS)
        author = rng.choice(PAYLOADS)
        sig = rng.choice(sigs) if sigs else "0"
        label = ["history", "--results-dir", str(r), "label", sig[:10], "--text", text, "--author", author]
        if bug is not None:
            label += ["--bug", bug]
        steps = [Step(label, expect),
                 Step(["dashboard", "--results-dir", str(r), "--out", str(d / "site")], "0") if i % 2 else
                 Step(["report", str(r / run.name)], "0")]
        if i % 3 == 0:
            steps.append(Step(["history", "--results-dir", str(r)], "0"))
        jobs.append(Job("fields", f"{text[:24]!r} bug={str(bug)[:20]!r}", steps, [],
                        html=[d / "site" / "index.html", r / run.name / "report.html"]))
    return jobs
