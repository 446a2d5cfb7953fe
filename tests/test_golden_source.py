"""Golden provenance as data: every bundled case says where its goldens came from
(``golden_source``), the loader refuses a case that does not, and no bundled golden is the
reference model's own. The layout cases' packed images are re-derived here from the seed
documents' rules (../shared/seeds/), written from the seed text and not from harness/layouts:
the second derivation behind their ``golden_source`` kind ``seed`` / ``hand``. The runner's side
(summary, JUnit, report: "passed (self-consistency)" counted apart) is checked on real runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml

from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.vectors import FORMAT, FORMAT_V1, GOLDEN_KINDS, VectorError, bundled_root, \
    find_cases, golden_source_of, load_case, write_case

ROOT = bundled_root()
LAYER = ROOT / "sdp_cvt" / "sdp_cvt-s1-003"
LAYOUT = ROOT / "layout_dmp" / "layout_dmp-s1-000"
PY = sys.executable
#: the seed documents (../shared/seeds/README.md says which is which)
SEED_DOCS = ("000_8c744a5127d0802a.txt", "001_413b8ad4e7073acc.txt", "002_ad285f997af00d80.txt",
             "003_e27fa70571d492f6.txt", "004_cd00232e087a46a5.txt")

# ---- independent derivations of the layout goldens from the seed documents ------------------------


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _align(a: int, b: int) -> int:
    return _ceil(a, b) * b


def _bytes(arr: np.ndarray) -> np.ndarray:
    """Little-endian bytes of each element: shape arr.shape + (itemsize,)."""
    a = np.ascontiguousarray(arr)
    a = a.astype(a.dtype.newbyteorder("<"))
    return a.view(np.uint8).reshape(arr.shape + (arr.dtype.itemsize,))


# ---- seed 002 (DMP dv-sdk network I/O layout) ---------------------------------------------------

def dmp_conv_io(arr: np.ndarray, transpose: bool) -> np.ndarray:
    """"Convolution Block I/O layout": FP16, chunks of 8 channels; (x, y, n) = (w, h, c) at
    (chunk_id*(W*H*8) + x*(H*C_) + y*C_ + n_) * 2, or (... + y*(W*C_) + x*C_ + n_) * 2 transposed."""
    H, W, C = arr.shape
    out = np.zeros(W * H * C * 2, np.uint8)
    b = _bytes(arr.astype(np.float16))
    for y in range(H):
        for x in range(W):
            for n in range(C):
                cid, n_ = n // 8, n % 8
                C_ = 8 if n // 8 < C // 8 else C % 8
                off = cid * (W * H * 8) + (y * (W * C_) + x * C_ if transpose else x * (H * C_) + y * C_) + n_
                out[off * 2: off * 2 + 2] = b[y, x, n]
    return out


def dmp_output(arr: np.ndarray, transpose: bool) -> np.ndarray:
    """"The layout of a converted network output is DWHC format in float type" (DHWC transposed)."""
    a = arr.astype(np.float32)
    return _bytes(a if transpose else a.transpose(1, 0, 2)).reshape(-1)


def dmp_fc(arr: np.ndarray, float32: bool) -> np.ndarray:
    """"Fully connected block I/O layout": a 1D array, no special handling (FP16, float outputs)."""
    return _bytes(arr.astype(np.float32 if float32 else np.float16)).reshape(-1)


# ---- seed 004 (Sophgo TPU local memory) ---------------------------------------------------------

def sophgo_system(arr: np.ndarray) -> np.ndarray:
    """"Continuous Layout": W stride 1, H stride W, C stride H*W, N stride C*H*W."""
    return _bytes(arr).reshape(-1)


def sophgo_local(arr: np.ndarray, npu_num: int, local_mem_size: int, layout: str, address: int) -> np.ndarray:
    """"Address of Tensor in Local Memory" (A = Q*S + R: NPU Q, offset R), "Scatter Features to
    Different NPUs" (feature (n, c) on NPU (Q + c) mod X, channels per NPU ceil((Q + C) / X)),
    "Strides in Local Memory" (C stride: from c to c + X), "128-Byte Aligned Layout" / "Compact
    Layout" strides. The image is the whole local memory, NPU 0 first (X * S bytes), 0 elsewhere."""
    N, C, H, W = arr.shape
    X, S = npu_num, local_mem_size
    Q, R = divmod(address, S)
    e = arr.dtype.itemsize
    if layout == "aligned":
        assert address % 128 == 0
        cs = _align(H * W, {4: 32, 2: 64, 1: 128}[e])
    else:
        assert address % 4 == 0
        cs = H * W
    ns = cs * _ceil(Q + C, X)
    out = np.zeros(X * S, np.uint8)
    b = _bytes(arr)
    for n in range(N):
        for c in range(C):
            npu, row = (Q + c) % X, (Q + c) // X
            for h in range(H):
                for w in range(W):
                    off = npu * S + R + (n * ns + row * cs + h * W + w) * e
                    out[off: off + e] = b[n, c, h, w]
    return out


# ---- seed 000 (NVDLA in-memory data formats) ----------------------------------------------------

def nvdla_feature(arr: np.ndarray, atom: int, line_stride: int | None, surface_stride: int | None) -> np.ndarray:
    """"Feature Data Format": 1x1x(atom) cubes, channels padded to the atom, mapped C' -> W -> H ->
    C (surfaces); lines and surfaces compact unless strides say otherwise. The image ends with the
    last atom; padding lanes and gaps are 0 ("The attached data can be any value except NaN")."""
    C, H, W = arr.shape
    e = arr.dtype.itemsize
    lanes = atom // e
    ls = W * atom if line_stride is None else line_stride
    ss = ls * H if surface_stride is None else surface_stride
    nsurf = _ceil(C, lanes)
    size = (nsurf - 1) * ss + (H - 1) * ls + W * atom
    out = np.zeros(size, np.uint8)
    b = _bytes(arr)
    for c in range(C):
        for h in range(H):
            for w in range(W):
                off = (c // lanes) * ss + h * ls + w * atom + (c % lanes) * e
                out[off: off + e] = b[c, h, w]
    return out


def nvdla_pixel_r8(arr: np.ndarray) -> np.ndarray:
    """"Pixel Format" T_R8: 1 planar, 1 channel, 1 byte a pixel, pitch linear, "line stride of pitch
    linear shall aligned to 32 bytes" (x offset 0): lines align32(W) bytes apart; the image ends
    with the last pixel (as a feature image ends with its last atom)."""
    H, W, _ = arr.shape
    ls = _align(W, 32)
    out = np.zeros((H - 1) * ls + W, np.uint8)
    for h in range(H):
        out[h * ls: h * ls + W] = arr[h, :, 0].view(np.uint8)
    return out


def nvdla_weight_dc(arr: np.ndarray, group: int, cube: int) -> np.ndarray:
    """"Basic Weight for Direct Convolution": kernels in groups of ``group`` (last one fewer), each
    kernel cut into 1x1x``cube``-element small cubes (no 0s appended to a short last cube), cubes of
    a group scanned C' -> K -> W -> H -> C, groups mapped compactly, 0s to 128-byte alignment.
    (The seed's numbers, 32 kernels and 64 elements for int8, are nv_full's MAC atomic K and C;
    another configuration's come from its profile.) ``arr`` is (K, C, H, W)."""
    K, C, H, W = arr.shape
    e = arr.dtype.itemsize
    b = _bytes(arr)
    chunks = []
    for g0 in range(0, K, group):
        for c0 in range(0, C, cube):
            for h in range(H):
                for w in range(W):
                    for k in range(g0, min(g0 + group, K)):
                        chunks.append(b[k, c0: c0 + cube, h, w].reshape(-1))
    data = np.concatenate(chunks)
    out = np.zeros(_align(data.size, 128), np.uint8)
    out[: data.size] = data
    assert data.size == K * C * H * W * e
    return out


def nvdla_weight_image(arr: np.ndarray, group: int, cube: int) -> np.ndarray:
    """"Basic Weight for image input": channel pre-extension first ("turn all weights in same line
    to a single channel"), then the direct-convolution mapping. Hand-worked reading of that rule:
    a pixel line stores its pixels one after another with each pixel's channels together ("Pixel
    Format"), so kernel line h, (w, c) becomes channel w*C + c of a (K, W*C, H, 1) kernel."""
    K, C, H, W = arr.shape
    ext = arr.transpose(0, 2, 3, 1).reshape(K, H, W * C).transpose(0, 2, 1)[..., None]
    return nvdla_weight_dc(np.ascontiguousarray(ext), group, cube)


def seed_image(case) -> np.ndarray:  # noqa: ANN001
    """The packed image of a bundled layout case, derived from its seed document's rule."""
    lp = case.layout
    a, p, n = lp.array, lp.params, lp.layout
    if n == "dmp.conv_io":
        return dmp_conv_io(a, p["transpose_weight"])
    if n == "dmp.output":
        return dmp_output(a, p["transpose_weight"])
    if n == "dmp.fc":
        return dmp_fc(a, p["float32"])
    if n == "sophgo.system":
        return sophgo_system(a)
    if n == "sophgo.local":
        return sophgo_local(a, p["npu_num"], p["local_mem_size"], p["layout"], p["address"])
    if n == "nvdla.feature":
        return nvdla_feature(a, p["atom_bytes"], p.get("line_stride"), p.get("surface_stride"))
    if n == "nvdla.pixel.T_R8":
        return nvdla_pixel_r8(a)
    if n in ("nvdla.weight.dc", "nvdla.weight.image"):
        hw = load_profile(p["profile"])
        f = nvdla_weight_dc if n == "nvdla.weight.dc" else nvdla_weight_image
        return f(a, hw.mac_atomic_k, hw.mac_atomic_c)
    raise AssertionError(f"{case.name}: no seed derivation for layout {n} (add one before bundling it)")


LAYOUT_CASES = [p for p in find_cases(ROOT) if load_case(p).kind == "layout"]


@pytest.mark.parametrize("path", LAYOUT_CASES, ids=lambda p: p.name)
def test_layout_golden_is_the_seed_rule(path):
    case = load_case(path)
    gs = case.golden_source
    assert gs["kind"] in ("seed", "hand"), gs
    if gs["kind"] == "seed":
        assert gs["document"].split(" ", 1)[0] in SEED_DOCS and gs["section"], gs
    else:
        assert "seed 000" in gs["description"] and "pre-extension" in gs["description"], gs
    want = seed_image(case)
    got = case.layout.packed
    assert want.size == got.size, (case.name, want.size, got.size)
    diff = np.flatnonzero(want != got)
    assert diff.size == 0, f"{case.name}: {diff.size} bytes differ from the seed rule, first at {diff[:4]}"


def test_seed_derivations_catch_a_wrong_image():
    """The derivations are not vacuous: a one-element change of the array moves the image."""
    case = load_case(LAYOUT)
    a = case.layout.array.copy()
    a.reshape(-1)[5] = a.reshape(-1)[5] + np.float16(1)
    assert not np.array_equal(dmp_conv_io(a, False), case.layout.packed)
    w = np.arange(2 * 3 * 2 * 2, dtype=np.int8).reshape(2, 3, 2, 2)  # (K, C, H, W), worked by hand:
    # group of 8 kernels, cubes of 8 channels: h, w outer, k, c inner -> k0c0..2, k1c0..2 per (h, w)
    got = nvdla_weight_dc(w, 8, 8)
    assert got.size == 128 and list(got[:6]) == [0, 4, 8, 12, 16, 20] and list(got[6:12]) == [1, 5, 9, 13, 17, 21]


# ---- every bundled case names an oracle -------------------------------------------------------------


def test_every_bundled_case_names_an_oracle():
    by_kind: dict[str, list[str]] = {}
    for p in find_cases(ROOT):
        case = load_case(p)
        by_kind.setdefault(case.golden_kind, []).append(f"{p.parent.name}/{p.name}")
    assert set(by_kind) <= set(GOLDEN_KINDS)
    assert not by_kind.get("model"), f"goldens from the model itself: {by_kind['model'][:10]}"
    assert sum(map(len, by_kind.values())) >= 279
    for p in find_cases(ROOT):
        gs = load_case(p).golden_source
        if gs["kind"] == "rtl":
            assert gs["config"] and gs["build_key"].startswith("nvdla-" + gs["config"]), (p, gs)
        if gs["kind"] == "cmod":
            assert gs["flavor"] == "nvdlav1" and gs["config"] == "nv_full" and gs["revision"], (p, gs)


# ---- the loader ------------------------------------------------------------------------------------------


def _copy(case: Path, tmp_path: Path) -> Path:
    dst = tmp_path / case.name
    shutil.copytree(case, dst)
    return dst


def _edit(folder: Path, fn) -> None:  # noqa: ANN001
    path = folder / "case.yaml"
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _rejects(folder: Path, *words: str) -> str:
    with pytest.raises(VectorError) as ei:
        load_case(folder)
    msg = str(ei.value)
    assert str(folder / "case.yaml") in msg, msg
    for w in words:
        assert w in msg, msg
    return msg


@pytest.mark.parametrize("src", [LAYER, LAYOUT], ids=["layer", "layout"])
def test_loader_rejects_a_case_without_golden_source(tmp_path, src):
    f = _copy(src, tmp_path)
    _edit(f, lambda d: d.pop("golden_source"))
    _rejects(f, "golden_source", "missing (required)", "rtl, cmod, seed, hand, model")


@pytest.mark.parametrize("edit, words", [
    (lambda g: g.update(kind="guess"), ("golden_source.kind", "'guess' is not one of")),
    (lambda g: g.pop("build_key"), ("golden_source.build_key", "missing (required)")),
    (lambda g: g.update(build_key=""), ("golden_source.build_key", "non-empty string")),
    (lambda g: g.update(build_key=7), ("golden_source.build_key", "non-empty string")),
    (lambda g: g.update(colour="red"), ("golden_source.colour", "unknown key")),
    (lambda g: g.update(simulator="x" * 3000), ("golden_source.simulator", "longer than")),
], ids=["kind", "missing-key", "empty", "not-string", "unknown-key", "too-long"])
def test_loader_rejects_a_malformed_golden_source(tmp_path, edit, words):
    f = _copy(LAYER, tmp_path)
    _edit(f, lambda d: edit(d["golden_source"]))
    _rejects(f, *words)


def test_model_golden_must_say_it_is_no_oracle(tmp_path):
    f = _copy(LAYER, tmp_path)
    _edit(f, lambda d: d.update(golden_source={"kind": "model", "oracle": True, "reason": "trust me"}))
    _rejects(f, "golden_source.oracle", "must be false")
    _edit(f, lambda d: d.update(golden_source={"kind": "model", "reason": "the model"}))
    _rejects(f, "golden_source.oracle", "missing (required)")
    _edit(f, lambda d: d.update(golden_source={"kind": "model", "oracle": False, "reason": "the model"}))
    case = load_case(f)
    assert case.golden_kind == "model" and not case.oracle_checked


def test_format_1_is_refused_with_the_way_to_migrate(tmp_path):
    f = _copy(LAYER, tmp_path)
    _edit(f, lambda d: (d.pop("golden_source"), d.update(format=FORMAT_V1)))
    _rejects(f, "format", FORMAT_V1, "golden_source", FORMAT)


# ---- writers: golden_source derived from the DUT ----------------------------------------------------------


def test_write_case_names_the_model_unless_told_otherwise(tmp_path):
    doc = yaml.safe_load((LAYER / "case.yaml").read_text())
    doc.pop("golden_source")
    blobs = {p.name: p.read_bytes() for p in LAYER.iterdir() if p.name != "case.yaml"}
    write_case(tmp_path / "a", doc, blobs)
    assert load_case(tmp_path / "a").golden_source["kind"] == "model"
    with ModelTarget("nv_small") as t:
        write_case(tmp_path / "b", doc, blobs, dut=t)
    gs = load_case(tmp_path / "b").golden_source
    assert gs["kind"] == "model" and gs["oracle"] is False and "model target (nv_small" in gs["reason"]
    given = {"kind": "hand", "description": "worked on paper"}
    write_case(tmp_path / "c", doc, blobs, golden_source=given)
    text = (tmp_path / "c" / "case.yaml").read_text()
    assert text.index("golden_source:") < text.index("provenance:")  # written just before provenance
    assert load_case(tmp_path / "c").golden_source == given


def test_golden_source_of_real_build_records():
    from nvdla_hil.harness.targets.cmod import CmodBuild
    from nvdla_hil.sims.build import SimBuild

    class _Dut:  # what golden_source_of reads of a target: its build record
        def __init__(self, build):  # noqa: ANN001
            self.build = build

    sim = SimBuild(directory="/c/nvdla-nv_small-0123", executable="/c/x", toplevel="top", config="nv_small",
                   key="nvdla-nv_small-0123", waves=False, verilator="5.048")
    assert golden_source_of(_Dut(sim)) == {"kind": "rtl", "config": "nv_small", "build_key": "nvdla-nv_small-0123",
                                           "simulator": "Verilator 5.048"}
    cm = CmodBuild(directory="/c/k", executable="/c/k/x", library="/c/k/l", nvdla_hw="/nonexistent", config="nv_full",
                   flavor="nvdlav1", key="nvdlav1-nv_full-ab", systemc="SystemC 2.3.4")
    assert golden_source_of(_Dut(cm)) == {"kind": "cmod", "config": "nv_full", "flavor": "nvdlav1",
                                          "build_key": "nvdlav1-nv_full-ab", "systemc": "SystemC 2.3.4"}


def test_regolden_on_the_c_model_rewrites_only_goldens(tmp_path):
    """A bundled INT16 case re-made on NVDLA's nv_full C model: golden_source from the build, the
    goldens equal to the bundled ones, every other byte kept; the model as the target is refused."""
    hw = os.environ.get("NVDLA_HW_V1")
    if not hw or not Path(hw).is_dir():
        pytest.skip("NVDLA_HW_V1 (an nvdla/hw nvdlav1 checkout) not set: no C model to run")
    from nvdla_hil.harness.targets import TargetSpec, open_target
    from nvdla_hil.harness.vectors.generate import regolden

    src = ROOT / "pdp_int16" / "pdp_int16-s1-004"
    f = _copy(src, tmp_path)
    _edit(f, lambda d: d.update(golden_source={"kind": "model", "oracle": False, "reason": "before"}))
    with open_target(TargetSpec(kind="cmod", profile="nv_full", nvdla_hw=hw)) as t:
        r = regolden(f, t)
    assert not r.error and not r.disagreements, r
    case = load_case(f)
    assert case.golden_kind == "cmod" and case.golden_source["build_key"].startswith("nvdlav1-nv_full-")
    for p in src.iterdir():
        if p.name != "case.yaml":
            assert (f / p.name).read_bytes() == p.read_bytes(), p.name
    with ModelTarget("nv_full") as m:
        assert "not an oracle" in regolden(f, m).error


# ---- the runner: self-consistency is never a plain pass ---------------------------------------------------

ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_TARGET", "NVDLA_HIL_LAB",
            "NVDLA_HIL_BOARD", "NVDLA_HIL_CONFIG", "NVDLA_HIL_SUMMARY", "NVDLA_TXN_TESTS")


def _regress(tmp_path: Path, vectors: Path) -> tuple[int, str, Path]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    res = tmp_path / "results"
    r = subprocess.run([PY, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "vectors", "--vectors", str(vectors),
                        "--profile", "nv_small", "--results-dir", str(res)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    return r.returncode, r.stdout + r.stderr, res / "latest"


def _two_cases(tmp_path: Path) -> Path:
    folder = tmp_path / "vec"
    folder.mkdir()
    for name in ("sdp_cvt-s1-000", "sdp_cvt-s1-001"):
        shutil.copytree(ROOT / "sdp_cvt" / name, folder / name)
    return folder


def test_regress_counts_self_consistency_apart(tmp_path):
    folder = _two_cases(tmp_path)
    _edit(folder / "sdp_cvt-s1-001", lambda d: d.update(golden_source={"kind": "model", "oracle": False,
                                                                        "reason": "the model's own"}))
    code, out, run = _regress(tmp_path, folder)
    assert code == 0, out
    assert "passed (self-consistency)" in out
    assert "summary: 1 passed, 1 passed (self-consistency), 0 failed" in out
    assert "oracle split: of 2 passing vector tests, 1 checked against an oracle (1 rtl), 1 self-consistency only" in out
    root = ET.parse(run / "junit.xml").getroot()
    props = {tc.get("name"): {p.get("name"): p.get("value") for p in tc.iter("property")} for tc in root.iter("testcase")}
    assert props["test_vector[sdp_cvt-s1-000]"]["golden_source"] == "rtl"
    assert props["test_vector[sdp_cvt-s1-000]"]["checked_against"] == "oracle"
    assert props["test_vector[sdp_cvt-s1-001]"]["checked_against"] == "self-consistency"
    html = (run / "report.html").read_text()
    assert '<td class="selfc">passed (self-consistency)</td>' in html and 'id="oracle-split"' in html


def test_regress_of_only_self_consistency_is_not_green(tmp_path):
    folder = _two_cases(tmp_path)
    for name in ("sdp_cvt-s1-000", "sdp_cvt-s1-001"):
        _edit(folder / name, lambda d: d.update(golden_source={"kind": "model", "oracle": False, "reason": "own"}))
    code, out, _ = _regress(tmp_path, folder)
    assert code == 2, out  # nothing was checked against an oracle: "no test ran" (plugin._RunCounter)
    assert "no test was checked against an oracle: 2 passed only self-consistency" in out
    assert "0 passed, 2 passed (self-consistency)" in out
