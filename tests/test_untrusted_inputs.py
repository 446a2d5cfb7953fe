"""Untrusted inputs (issue 10, "never green by mistake"): a trace, a .dat image or a packed
vector that is degenerate, oversized or malformed is a clean error naming the file (and line),
never a pass, a traceback, a CRC MISMATCH or a huge allocation.

Targeted cases first (each failed on the code before this change), then a bounded, derandomised
mutation loop (hypothesis) over the trace parser + .dat reader + a run on the model target, and
over the vector loader.
"""

from __future__ import annotations

import shutil
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvdla_hil.harness.targets.memory import SparseMemory
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import MAX_REGION_BYTES, TraceError, load_dat, parse_trace, run_trace
from nvdla_hil.harness.traces.memory_setup import merge_pieces as _merge_pieces
from nvdla_hil.harness.vectors import VectorError, bundled_root, find_cases, load_case, padding_mask, run_case

DAT = "{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04},\n"
GOOD = """mem_init(pri_mem, 0x80000000, 0x10, ALL_ZERO);
mem_load(pri_mem, 0x80000000, "in.dat");
reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x3);
intr_notify(SDP_0, sync_id_0);
check_crc(sync_id_0, 1, 0x80000000, 0x4, 0xb63cfbcd);
"""


def _trace(tmp_path: Path, body: str | bytes, dat: str | bytes | None = DAT, name: str = "t") -> Path:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / f"{name}.cfg").write_bytes(body.encode() if isinstance(body, str) else body)
    if dat is not None:
        (d / "in.dat").write_bytes(dat.encode() if isinstance(dat, str) else dat)
    return d


def test_good_trace_still_parses(tmp_path):
    assert [c.kind for c in parse_trace(_trace(tmp_path, GOOD)).commands][-1] == "check_crc"


# ---- 1. a trace that checks nothing ------------------------------------------------------------


@pytest.mark.parametrize(("body", "needle", "line"), [
    ("", "no commands", None),
    ("// only a comment\n\n   // another\n", "no commands", None),
    ("reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x3);\n", "no check_crc or check_nothing", None),
    (GOOD.rsplit("check_crc", 1)[0], "no check_crc or check_nothing", None),  # truncated before its checks
    (GOOD.replace("check_crc(sync_id_0, 1, 0x80000000, 0x4, 0xb63cfbcd);", "check_nothing(sync_id_0);"),
     "only check_nothing", None),
    (GOOD + "intr_notify(PDP_0, sync_id_1);\n", "sync id 'sync_id_1' has no check_crc", 6),
    (GOOD + "check_crc(sync_id_7, 1, 0x80000000, 0x4, 0x0);\n", "no intr_notify fires", 6),
    (GOOD.replace("0x4, 0xb63cfbcd", "0x0, 0x0"), "0 bytes checks nothing", 5),
])
def test_trace_that_checks_nothing_is_an_error(tmp_path, body, needle, line):
    with pytest.raises(TraceError, match=needle) as ei:
        parse_trace(_trace(tmp_path, body))
    assert "t.cfg" in str(ei.value)
    assert ei.value.line == line


def test_check_nothing_next_to_a_check_crc_is_legitimate(tmp_path):
    body = GOOD + "intr_notify(PDP_0, sync_id_1);\ncheck_nothing(sync_id_1);\n"
    assert parse_trace(_trace(tmp_path, body)).of_kind("check_nothing")


def test_every_public_trace_is_accepted(trace_root):
    from nvdla_hil.harness.traces import find_trace_sets

    paths = [p for _, p in find_trace_sets(trace_root.parent)] or [p for _, p in find_trace_sets(trace_root)]
    assert len(paths) >= 60
    for p in paths:
        assert parse_trace(p).of_kind("check_crc")


# ---- 2. sizes and addresses bounded before allocation --------------------------------------------


@pytest.mark.parametrize(("line", "needle"), [
    ("mem_init(pri_mem, 0x0, 0x40000001, ALL_ZERO);", "size 0x40000001 is not 1..0x40000000"),
    ("mem_init(pri_mem, 0xffffffffffffff00, 0x200, ALL_ZERO);", "runs past the 64-bit address space"),
    ("mem_init(pri_mem, 0x10000000000000000, 0x10, ALL_ZERO);", "does not fit 64 bits"),
    ("mem_init(pri_mem, 0x0, 0x" + "f" * 5000 + ", ALL_ZERO);", "does not fit 64 bits"),
    ("mem_init(pri_mem, 0x0, " + "9" * 5000 + ", ALL_ZERO);", "does not fit 64 bits"),
    ('mem_load(pri_mem, 0x10000000000000000, "in.dat");', "does not fit 64 bits"),
    ("check_crc(sync_id_0, 1, 0x0, 0x40000001, 0x0);", "size 0x40000001 is not"),
    ("check_crc(sync_id_0, 1, 0xfffffffffffffff0, 0x20, 0x0);", "64-bit address space"),
])
def test_sizes_and_addresses_are_bounded(tmp_path, line, needle):
    with pytest.raises(TraceError, match=needle) as ei:
        parse_trace(_trace(tmp_path, line + "\n" + GOOD))
    assert ei.value.line == 1 and "t.cfg:1" in str(ei.value)


def test_total_set_up_is_bounded(tmp_path):
    body = "".join(f"mem_init(pri_mem, {i << 30:#x}, 0x40000000, ALL_ZERO);\n" for i in range(5)) + GOOD
    with pytest.raises(TraceError, match=r"t\.cfg:5: the trace sets up more than"):
        parse_trace(_trace(tmp_path, body))


def test_dat_record_past_the_bound_and_64_bit_end(tmp_path):
    d = _trace(tmp_path, GOOD, dat="{offset:0x3fffffff, size:2, payload:0x01 0x02},\n")
    with pytest.raises(TraceError, match=r"in\.dat:1: record .* runs past the bound"):
        load_dat(d / "in.dat")
    d = _trace(tmp_path, GOOD.replace("0x80000000, \"in", "0xfffffffffffffffe, \"in"), name="u")
    with ModelTarget("nv_large") as t, pytest.raises(TraceError, match=r"u\.cfg:2: .*64-bit address space"):
        run_trace(d, t)
    # on a 32-bit configuration the profile's address width refuses it first (issue 26)
    with ModelTarget("nv_small") as t, pytest.raises(TraceError, match=r"u\.cfg:2: .*nv_small's 32-bit address"):
        run_trace(d, t)


def test_large_zero_mem_init_is_not_materialised(tmp_path):
    """A 1 GiB ALL_ZERO region costs no memory: the set-up fills it sparsely."""
    body = "mem_init(pri_mem, 0x0, 0x40000000, ALL_ZERO);\n" + GOOD
    d = _trace(tmp_path, body)
    tracemalloc.start()
    try:
        with ModelTarget("nv_small") as t:
            res = run_trace(d, t, timeout=0.2)  # GOOD launches no layer: the wait times out
            pages = len(t.memories["pri_mem"].regions())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.status == "error" and res.checks[0].vacuous, res.summary()  # the memory was set up
    assert peak < 64 << 20, peak
    assert pages <= 4


def test_merge_keeps_file_order_with_fills():
    from nvdla_hil.harness.traces.memory_setup import Fill as _Fill

    pieces = [("pri_mem", 0, _Fill(1 << 20, 0)), ("pri_mem", 10, np.arange(4, dtype=np.uint8)),
              ("pri_mem", (1 << 20) - 2, _Fill(4, 0xFF)), ("pri_mem", 12, _Fill(1, 0xFF))]
    mem, ref = SparseMemory(), np.zeros((1 << 20) + 2, dtype=np.uint8)
    ref[10:14] = np.arange(4)
    ref[(1 << 20) - 2:] = 0xFF
    ref[12] = 0xFF
    for _port, addr, data in _merge_pieces(pieces):
        assert isinstance(data, _Fill) or data.size <= 16 << 20
        mem.fill(addr, data.size, data.value) if isinstance(data, _Fill) else mem.write(addr, data)
    assert np.array_equal(mem.read(0, ref.size), ref)


def test_transport_without_fill_gets_bounded_zero_chunks():
    """A target with only Transport.mem_write receives a zero region in bounded chunks."""
    from nvdla_hil.harness.traces.memory_setup import mem_fill as _mem_fill

    class OnlyWrite:
        is_open = True

        def __init__(self):
            self.sizes: list[tuple[int, int]] = []

        def mem_write(self, address, data, *, port="pri_mem"):
            assert not np.asarray(data).any()
            self.sizes.append((address, np.asarray(data).size))

    t = OnlyWrite()
    _mem_fill(t, "pri_mem", 0x1000, 0x3000001, 0)
    assert max(n for _, n in t.sizes) <= 16 << 20 and sum(n for _, n in t.sizes) == 0x3000001
    assert [a for a, _ in t.sizes] == [0x1000 + i * (16 << 20) for i in range(len(t.sizes))]


def test_sparse_fill_drops_and_shares_pages():
    m = SparseMemory()
    m.write(0, np.full(1 << 18, 7, dtype=np.uint8))
    m.fill(100, (1 << 18) - 200, 0)
    assert len(m.regions()) == 2 and m.read(99, 2).tolist() == [7, 0] and m.read((1 << 18) - 101, 2).tolist() == [0, 7]
    m.fill(1 << 20, 1 << 30, 0xFF)  # 1 GiB of 0xff: one shared page
    assert m.read((1 << 20) + 5, 1)[0] == 0xFF
    m.write((1 << 20) + 5, b"\x01")  # copy on write
    assert m.read((1 << 20) + 4, 3).tolist() == [0xFF, 1, 0xFF] and m.read((1 << 21) + 5, 1)[0] == 0xFF
    with pytest.raises(ValueError, match="64-bit"):
        m.fill((1 << 64) - 1, 2)


# ---- 3. bad values are trace errors ---------------------------------------------------------------


def test_33_bit_crc_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match=r"t\.cfg:5: CRC 0x1b63cfbcd does not fit 32 bits"):
        parse_trace(_trace(tmp_path, GOOD.replace("0xb63cfbcd", "0x1b63cfbcd")))


@pytest.mark.parametrize(("dat", "needle"), [
    ("", r"in\.dat: no memory records"),
    ("{\n}\n", r"in\.dat: no memory records"),
    (DAT + "{offset:0x2, size:2, payload:0x03 0x05},\n", r"in\.dat:2: record overlaps the record of line 1 .* 0x3"),
    ("{offset:0x0, size:2, payload:0x000x01},\n", r"in\.dat:1: malformed memory record"),
    ("{offset:0x0, size:1, payload:0x0" + "0x0" * 40 + "!},\n", r"in\.dat:1: malformed"),
    (b"{offset:0x0, size:1, payload:0x01},\n{offset:0x1, size:1, payload:0x\xc3\xa9},\n", r"in\.dat:2: byte 0xc3"),
    ("{offset:0x0, size:1, payload:0x01}," + " " * (1 << 20) + "\n", r"in\.dat:1: line longer"),
])
def test_bad_dat_is_a_trace_error(tmp_path, dat, needle):
    d = _trace(tmp_path, GOOD, dat=dat)
    with ModelTarget("nv_small") as t, pytest.raises(TraceError, match=needle):
        run_trace(d, t)


def test_consistent_overlap_is_accepted(tmp_path):
    p = tmp_path / "x.dat"
    p.write_text(DAT + "{offset:0x2, size:3, payload:0x03 0x04 0x09},\n")
    assert load_dat(p).tolist() == [1, 2, 3, 4, 9]


def test_dat_symlink_outside_the_folder_is_refused_unread(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT\n")
    d = _trace(tmp_path, GOOD, dat=None)
    (d / "in.dat").symlink_to(secret)
    with ModelTarget("nv_small") as t, pytest.raises(TraceError, match=r"t\.cfg:2.*resolves outside the trace folder") as ei:
        run_trace(d, t)
    assert "TOP-SECRET" not in str(ei.value)


@pytest.mark.parametrize(("body", "line"), [
    (GOOD.replace("0x3);", "0x\u0663);").encode(), 3),  # an Arabic-Indic digit
    (GOOD.encode().replace(b"sync_id_0);\ncheck", b"sync_id_0);\n\xff\xfecheck"), 5),
    (("// caf\u00e9\n" + GOOD).encode(), 1),
])
def test_non_ascii_cfg_names_file_and_line(tmp_path, body, line):
    with pytest.raises(TraceError, match="not ASCII") as ei:
        parse_trace(_trace(tmp_path, body))
    assert ei.value.line == line and f"t.cfg:{line}" in str(ei.value)


@pytest.mark.parametrize("rel", ["../in.dat", "/etc/passwd", "sub\\\\..\\\\..\\\\x.dat"])
def test_mem_load_path_escaping_the_folder(tmp_path, rel):
    with pytest.raises(TraceError, match="must stay inside the trace folder"):
        parse_trace(_trace(tmp_path, GOOD.replace('"in.dat"', f'"{rel}"')))


def test_dat_that_is_a_fifo_is_refused(tmp_path):
    import os

    d = _trace(tmp_path, GOOD, dat=None)
    os.mkfifo(d / "in.dat")
    with ModelTarget("nv_small") as t, pytest.raises(TraceError, match="not a regular file"):
        run_trace(d, t)


# ---- 4. packed vectors --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sdp_case() -> Path:
    return next(p for p in find_cases(bundled_root()) if p.parent.name == "sdp_lut")


def _copy_case(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def test_duplicate_yaml_key_names_file_and_line(sdp_case, tmp_path):
    d = _copy_case(sdp_case, tmp_path)
    text = (d / "case.yaml").read_text()
    assert "statistics:" in text
    (d / "case.yaml").write_text(text + "statistics: {lut_le_hit: 1}\n")
    with pytest.raises(VectorError, match=r"case\.yaml: line \d+: .*duplicate key 'statistics' \(first at line \d+\)"):
        load_case(d)


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda t: t + "colour: blue\n", r"colour: unknown key"),
    (lambda t: __import__("re").sub(r"(?ms)^description: '.*?'\n", "description: [1, 2]\n", t), r"description: expected a string"),
    (lambda t: t.replace("seed: 1", "seed: one"), r"provenance\.seed: expected an integer"),
])
def test_unknown_keys_and_wrong_types_name_the_field(sdp_case, tmp_path, edit, needle):
    d = _copy_case(sdp_case, tmp_path)
    (d / "case.yaml").write_text(edit((d / "case.yaml").read_text()))
    with pytest.raises(VectorError, match=needle):
        load_case(d)


def test_npy_header_declaring_huge_shape_is_refused_before_allocating(tmp_path):
    from numpy.lib import format as npy_format

    src = next(p for p in find_cases(bundled_root()) if p.parent.name == "layout_nvdla")
    d = _copy_case(src, tmp_path)
    import yaml

    man = yaml.safe_load((d / "case.yaml").read_text())
    blob = man["layout"]["data"]
    with (d / "huge.npy").open("wb") as fh:  # 93 GiB declared, 128 bytes held
        npy_format.write_array_header_1_0(fh, {"descr": np.dtype(man["layout"]["dtype"]).str, "fortran_order": False,
                                               "shape": (93 << 30,)})
    (d / "case.yaml").write_text((d / "case.yaml").read_text().replace(f"data: {blob}", "data: huge.npy"))
    tracemalloc.start()
    try:
        with pytest.raises(VectorError, match=r"layout\.data: 'huge\.npy': the \.npy header declares \d+ bytes"):
            load_case(d)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_padding_lanes_of_the_golden_are_compared(tmp_path):
    case = next(c for c in map(load_case, find_cases(bundled_root())) if c.kind == "layer" and c.profile == "nv_small"
                and any(s.packed is not None and padding_mask(s).any() for s in c.outputs))
    with ModelTarget(case.profile) as t:
        assert run_case(case, t).passed
    s = next(s for s in case.outputs if s.packed is not None and padding_mask(s).any())
    i = int(np.flatnonzero(padding_mask(s))[0])
    s.packed.flags.writeable = True
    s.packed[i] ^= 0x5A
    with ModelTarget(case.profile) as t:
        res = run_case(case, t)
    assert res.status == "failed" and "channel-padding bytes differ" in res.summary()


# ---- 5. bounded mutation loop ---------------------------------------------------------------------------

MUT_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def _mutate(data: bytes, ops: list[tuple[int, int, int]]) -> bytes:
    b = bytearray(data)
    lines = data.split(b"\n")
    for kind, pos, val in ops:
        if not b:
            break
        p = pos % len(b)
        if kind == 0:
            b[p] ^= 1 << (val % 8)
        elif kind == 1:
            del b[p:]
        elif kind == 2:
            i = pos % len(lines)
            lines.insert(i, lines[i])
            b = bytearray(b"\n".join(lines))
        elif kind == 3:
            b[p:p] = b"0x" + b"f" * (val % 40 + 1)
        elif kind == 4:
            i = pos % len(lines)
            del lines[i]
            b = bytearray(b"\n".join(lines))
        elif kind == 5:
            toks = bytes(b).split(b",")
            if len(toks) > 2:
                i = pos % (len(toks) - 1)
                toks[i], toks[i + 1] = toks[i + 1], toks[i]
            b = bytearray(b",".join(toks))
        else:
            b[p:p] = bytes([val % 256])
    return bytes(b)


#: CPU seconds one mutated input may cost (parse, and for a trace a run on the model): a hostile
#: size or count that slipped past the caps (a gigabyte filled, CRC'd or copied) costs far more;
#: a well-formed one costs well under 0.2 s. CPU time of this process, not the wall clock: other
#: jobs on a loaded machine delay the process but do not add to its CPU time.
MUT_CPU_SECONDS = 10.0

_OPS = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=4)


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory) -> Path:
    return _trace(tmp_path_factory.mktemp("src"), GOOD, name="src")


@MUT_SETTINGS
@given(ops=_OPS, which=st.sampled_from(["cfg", "dat"]))
def test_mutated_traces_are_clean_errors_or_valid(small_trace, tmp_path_factory, ops, which):
    d = tmp_path_factory.mktemp("m") / "src"
    shutil.copytree(small_trace, d)
    f = d / ("src.cfg" if which == "cfg" else "in.dat")
    f.write_bytes(_mutate(f.read_bytes(), ops))
    cpu0 = time.process_time()
    try:
        tr = parse_trace(d)
        with ModelTarget("nv_small") as t:
            res = run_trace(tr, t, timeout=0.2)
        assert res.status in ("failed", "error", "skipped"), res.summary()  # no layer runs: never a pass
    except TraceError as e:
        assert str(f.parent) in str(e) or f.name in str(e)
    assert time.process_time() - cpu0 < MUT_CPU_SECONDS


@pytest.fixture(scope="module")
def vector_sources() -> list[Path]:
    cases = find_cases(bundled_root())
    return [next(p for p in cases if p.parent.name == s) for s in ("sdp_cvt", "layout_sophgo", "cdp_lut")]


@MUT_SETTINGS
@given(ops=_OPS, src=st.integers(0, 2), which=st.sampled_from(["yaml", "blob"]))
def test_mutated_vectors_are_clean_errors_or_valid(vector_sources, tmp_path_factory, ops, src, which):
    d = tmp_path_factory.mktemp("v") / "case"
    shutil.copytree(vector_sources[src], d)
    f = d / "case.yaml" if which == "yaml" else sorted(p for p in d.iterdir() if p.name != "case.yaml")[0]
    f.write_bytes(_mutate(f.read_bytes(), ops))
    cpu0 = time.process_time()
    try:
        load_case(d)
    except VectorError as e:
        assert "case.yaml" in str(e)
    assert time.process_time() - cpu0 < MUT_CPU_SECONDS


def test_region_cap_is_above_every_public_region():
    assert MAX_REGION_BYTES >= 8 * 0x7B64B00


# ---- a plugin that keeps to itself (issue 26) ---------------------------------------------------------

_OTHER_PROJECT = "def test_a():\n    assert 1\n"


def _embedded_path() -> str | None:
    """pytest-embedded importable here, or from NVDLA_HIL_EMBEDDED_PATH (.ci/run's pip --target
    folder); "" when already importable, None when absent."""
    import importlib.util
    import os

    if importlib.util.find_spec("pytest_embedded") is not None:
        return ""
    extra = os.environ.get("NVDLA_HIL_EMBEDDED_PATH")
    return str(Path(extra).resolve()) if extra and Path(extra, "pytest_embedded").is_dir() else None  # children run elsewhere


def _other_project(tmp_path: Path, *argv: str, pythonpath: str = "") -> tuple[int, str, Path]:
    import os
    import subprocess
    import sys

    (tmp_path / "test_a.py").write_text(_OTHER_PROJECT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVDLA_", "PYTEST_", "LG_"))}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, env.get("PYTHONPATH", "")])
    junit = tmp_path / "j.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "test_a.py",
                        "--junitxml", str(junit), *argv], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=env)
    return r.returncode, r.stdout + r.stderr, junit


def test_another_projects_junit_is_left_alone(tmp_path):
    """Installed, the plugin loads into every pytest session: an unrelated project keeps pytest's
    default JUnit family (xunit2) and gets no nvdla-hil <properties>."""
    import xml.etree.ElementTree as ET

    code, out, junit = _other_project(tmp_path)
    assert code == 0, out
    case = next(ET.parse(junit).getroot().iter("testcase"))
    assert not list(case.iter("property")), ET.tostring(case)
    assert "target" not in junit.read_text()


def test_labgrid_beside_pytest_embedded_skips_nothing(tmp_path):
    """labgrid (the [lab] extra) and pytest-embedded both define a `target` fixture; with both
    installed every test of every project used to skip ("missing environment config")."""
    pytest.importorskip("labgrid")
    path = _embedded_path()
    if path is None:
        pytest.skip("pytest-embedded is not installed (pip install pytest-embedded, or NVDLA_HIL_EMBEDDED_PATH)")
    code, out, _ = _other_project(tmp_path, pythonpath=path)
    assert code == 0 and "1 passed" in out, out
    assert "missing environment config" not in out
    # a session that does use labgrid keeps it (its --lg-env is read, here a missing file)
    code, out, _ = _other_project(tmp_path, "--lg-env", str(tmp_path / "none.yaml"), pythonpath=path)
    assert code != 0 and "none.yaml" in out, out


def test_cluster_workers_load_exactly_the_plugins_the_run_needs(tmp_path, monkeypatch):
    """With pytest-embedded installed, `regress --cluster` used to give 0 passed, 63 errors: its
    autouse fixture failed in the daemonic Dask worker, whose pytest loaded every plugin."""
    import os
    import subprocess
    import sys

    distributed = pytest.importorskip("distributed")
    from nvdla_hil.harness.plugin.cluster import AUTOLOAD_ENV, WORKER_PLUGIN

    path = _embedded_path()
    if path is None:
        pytest.skip("pytest-embedded is not installed (pip install pytest-embedded, or NVDLA_HIL_EMBEDDED_PATH)")
    if path:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as c:
        r = subprocess.run([sys.executable, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "vectors", "-k",
                            "sdp_cvt-s1-00", "--cluster", c.scheduler_address, "--results-dir", str(tmp_path / "r"),
                            "--results-db", str(tmp_path / "db.sqlite")],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("summary: "))
    assert " 0 error" in line and " 0 failed" in line, line
    assert os.environ.get(AUTOLOAD_ENV) is None  # the worker's setting never leaks into this process
    assert WORKER_PLUGIN == "nvdla_hil.harness.plugin"
