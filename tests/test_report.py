"""The regression report page (harness/analysis/report.py), the diagnosis sidecar, and `triage` bundles
(harness/cli/triage.py): parsed from real run directories, checked in a real headless browser."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from _checkouts import generated_rtl

from nvdla_hil.harness.cli import triage as triage_cli
from nvdla_hil.harness.targets.outputs import OutputCube, diff_region
from nvdla_hil.harness.analysis.report import (diag_path, fp16_errors, fp16_histogram_png, heat_mosaic, heatmap_png, parse_junit,
                                      read_diagnosis, render_report, write_diagnosis)
from nvdla_hil.harness.analysis.triage import TraceDiagnosis
from nvdla_hil.harness.vectors import bundled_root, find_cases, load_case

NVDLA_HIL = [sys.executable, "-m", "nvdla_hil.harness.cli"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nvdla-hil")
    sub = p.add_subparsers(dest="command", required=True)
    triage_cli.add_subcommands(sub)
    return p


def cli(*argv: str) -> int:
    args = _parser().parse_args(list(argv))
    return int(args.func(args) or 0)


def _diag() -> TraceDiagnosis:
    cube = OutputCube("SDP", 0x1000, width=3, height=2, channels=10, line_stride=24, surface_stride=48, bpe=1, atom=8)
    exp = np.zeros(96, dtype=np.uint8)
    act = exp.copy()
    act[[0, 8, 16 + 3, 48 + 1]] = [1, 2, 3, 4]  # (c0,h0,w0) (c0,h0,w1) (c3,h0,w2) (c9,h0,w0)
    d = TraceDiagnosis("t", "nv_small")
    d.regions.append((7, diff_region(exp, act, 0x1000, cube)))
    return d


def test_sidecar_round_trip_and_heat_map(tmp_path: Path) -> None:
    path = write_diagnosis(diag_path(tmp_path / "logs", "::test_trace[t]"), _diag(), test="test_trace[t]")
    assert path.name == "__test_trace_t.diag.json"
    doc = read_diagnosis(path)
    assert doc is not None and doc["format"] == "nvdla-hil-diag/1"
    r = doc["regions"][0]
    assert (r["line"], r["n_elements"], r["coords"][0]) == (7, 4, [0, 0, 0])
    assert r["per_channel"] == {"0": 2, "3": 1, "9": 1}
    mosaic, tiles, title = heat_mosaic(r)
    # one tile per differing channel (0, 3, 9), in channel order, |actual - expected| where they differ
    assert [label for _, _, label in tiles] == ["c=0: 2 differ", "c=3: 1 differ", "c=9: 1 differ"]
    (y0, x0, _), (y3, x3, _), (y9, x9, _) = tiles
    assert (mosaic[y0, x0], mosaic[y0, x0 + 1], mosaic[y3, x3 + 2], mosaic[y9, x9]) == (1, 2, 3, 4)
    assert np.nansum(mosaic) == 10 and np.isnan(mosaic[y0 - 1, x0]) and "first" not in title
    uri = heatmap_png(r)
    assert uri is not None and uri.startswith("data:image/png;base64,") and len(uri) > 2000
    assert read_diagnosis(tmp_path / "missing.json") is None


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="5">
<testcase classname="harness.suites.test_traces" name="test_trace[a]" time="0.5"><properties>
<property name="profile" value="nv_small"/><property name="target" value="model"/></properties>
<failure message="a: FAILED">a: FAILED (0.01 s) - 1 of 2 checks failed
  sync_id_0: crc pri_mem[0x90000000+0x100] expected 0x00000001 got 0x00000001 ok (vacuous: matched before the layer ran)
  sync_id_1: crc pri_mem[0x90001000+0x100] expected 0x00000002 got 0x00000003 MISMATCH
last register accesses:
  12.0 W SDP.D_OP_ENABLE 0xb038 0x1</failure></testcase>
<testcase classname="harness.suites.test_traces" name="test_trace[b]" time="0.1"><properties>
<property name="profile" value="nv_small_256_full"/><property name="target" value="model"/></properties></testcase>
<testcase classname="x" name="test_trace[c]" time="0"><skipped message="not modelled: c on nv_small: Winograd"/></testcase>
<testcase classname="x" name="test_txn[d]" time="0"><skipped message="lacks unit: d is an nvdlav1 test"/></testcase>
<testcase classname="x" name="test_vector[e]" time="0.2"><error message="TimeoutError: no interrupt">boom</error></testcase>
</testsuite></testsuites>"""


def test_junit_rows_reason_and_skips(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text(JUNIT)
    rows = {r.test_id: r for r in parse_junit(tmp_path / "junit.xml")}
    a = rows["a"]
    assert a.outcome == "failed" and a.profile == "nv_small" and a.target == "model"
    assert a.reason.startswith("sync_id_1: crc") and a.reason.endswith("MISMATCH")  # not the log line
    assert len(a.vacuous) == 1
    assert [rows[k].outcome for k in "bcde"] == ["passed", "skipped: not modelled", "skipped: lacks unit", "error"]
    page = render_report(tmp_path)
    assert 'data-outcome="skipped: not modelled">1<' in page and 'data-outcome="failed">1<' in page
    assert "vacuous:" in page


def test_fp16_histogram_against_seed_001_thresholds() -> None:
    """No FP16 layer runs on the model; the mechanism on hand-made CDP data: the errors and
    limits are compare.py's, the picture shows them against the threshold."""
    from nvdla_hil.harness.analysis.compare import compare_cdp

    rng = np.random.default_rng(1)
    ref = rng.uniform(-2, 2, 500).astype(np.float16)
    out = (ref.astype(np.float32) + rng.normal(0, 3e-5, 500).astype(np.float32)).astype(np.float16)
    mv = np.full(500, 2.0)
    err, limit = fp16_errors("cdp", ref.view(np.uint16), out.view(np.uint16), max_value=mv)
    assert int(np.count_nonzero(~(err <= limit))) == compare_cdp(ref, out, max_value=mv).n_failed > 0
    assert fp16_histogram_png("cdp", ref.view(np.uint16), out.view(np.uint16), max_value=mv).startswith("data:image/png")
    with pytest.raises(ValueError, match="no FP16 threshold"):
        fp16_errors("bitexact", ref, out)


# ---- a real run directory, a real browser ------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    pytest.skip("chromium is not installed (apt-get install chromium): the report is not checked in a browser")


def _browser(url: str, *extra: str) -> subprocess.CompletedProcess:
    exe = _chromium()
    with tempfile.TemporaryDirectory() as prof:
        return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={prof}", *extra, url],
                              capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory) -> Path:
    """`nvdla-hil regress` over two LUT vectors, one with a corrupted golden (a real failure),
    and the sidecar the suite hook writes for it."""
    root = tmp_path_factory.mktemp("run")
    vec = root / "vectors"
    cases = [p for p in find_cases(bundled_root()) if p.parent.name == "sdp_lut"][:2]
    for p in cases:
        shutil.copytree(p, vec / p.name)
    bad = vec / cases[1].name
    case = load_case(bad)
    gold = bad / case.outputs[0].blob
    data = bytearray(gold.read_bytes())
    for i in range(0, min(len(data), 40), 3):
        data[i] ^= 0x10
    gold.write_bytes(bytes(data))
    env = {**os.environ, "NVDLA_HIL_RESULTS": str(root / "results")}
    r = subprocess.run([*NVDLA_HIL, "regress", "--suite", "vectors", "--vectors", str(vec)], capture_output=True,
                       text=True, env=env, cwd=root, timeout=120)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    run = (root / "results" / "latest").resolve()
    # what the suites' hook will do (report.write_diagnosis beside the test's log)
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.analysis.report import vector_lut_info
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import run_case

    row = next(r for r in parse_junit(run / "junit.xml") if r.outcome == "failed")
    case = load_case(bad)
    with ModelTarget(case.profile) as t:
        res = run_case(case, t)
    diag = triage_cli._vector_diag(case, res, load_profile(case.profile).name)
    log = next((run / "logs").glob(f"*{row.name.replace('/', '_').replace('[', '_').replace(']', '')}.log"))
    write_diagnosis(log.with_name(log.name.removesuffix(".log") + ".diag.json"), diag, test=row.name,
                    lut=vector_lut_info(case))
    return run


def test_report_of_a_real_run_in_a_browser(failing_run: Path, tmp_path: Path) -> None:
    _chromium()  # skips, saying so, without a browser
    assert cli("report", str(failing_run)) == 0
    page = failing_run / "report.html"
    text = page.read_text()
    assert "http://" not in text and "https://" not in text  # opens from disk, nothing fetched
    rows = [r for r in parse_junit(failing_run / "junit.xml")]
    assert sum(r.outcome == "failed" for r in rows) == 1 and sum(r.outcome == "passed" for r in rows) == 1
    dom = _browser(page.as_uri(), "--dump-dom").stdout
    assert 'id="summary"' in dom and 'data-outcome="failed">1<' in dom and 'data-outcome="passed">1<' in dom
    assert 'class="heatmap"' in dom and 'src="data:image/png;base64,' in dom
    assert 'class="lutplot"' in dom
    assert "register log" in dom and "differ" in dom
    shot = tmp_path / "report.png"
    _browser(page.as_uri(), f"--screenshot={shot}", "--window-size=1280,2000")
    assert shot.is_file() and shot.stat().st_size > 20000
    if os.environ.get("NVDLA_HIL_KEEP_SHOT"):
        shutil.copy(shot, os.environ["NVDLA_HIL_KEEP_SHOT"])


def test_triage_bundle_on_the_model_with_an_injected_bug(trace_sets_run: Path) -> None:
    run = trace_sets_run
    code = cli("triage", "sdp_3x3x33_bs_int8_reg_0", "--run", str(run), "--model-bug",
               "SDP.D_CVT_OFFSET.CVT_OFFSET+1", "--hint-runs", "30")
    assert code == 1
    b = run / "bundles" / "test_trace_sdp_3x3x33_bs_int8_reg_0"
    names = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    assert {"index.html", "access.log", "diag.json", "stats.json", "result.txt", "rerun.json"} <= names
    assert any(n.endswith(".actual.bin") for n in names) and any(n.endswith(".expected.bin") for n in names)
    doc = json.loads((b / "diag.json").read_text())
    assert doc["regions"] and doc["suspects"][0]["register"] == "SDP.D_CVT_OFFSET.CVT_OFFSET"
    assert "SDP.D_CVT_OFFSET" in (b / "access.log").read_text()
    html = (b / "index.html").read_text()
    assert 'class="heatmap"' in html and "http://" not in html and "https://" not in html
    # the run's report links the bundle
    assert "bundles/test_trace_sdp_3x3x33_bs_int8_reg_0/index.html" in render_report(run)
    assert cli("triage", "no_such_test", "--run", str(run)) == 2


def test_triage_on_the_serial_target(trace_sets_run: Path, tmp_path: Path) -> None:
    """The board emulator serves a model with the bug; the run says target serial."""
    from nvdla_hil.drivers.uartbone import BoardMap
    from nvdla_hil.harness.boards.emulator import serve_in_thread
    from nvdla_hil.harness.targets.model import ModelTarget

    run = tmp_path / "run"
    run.mkdir()
    rows = (trace_sets_run / "junit.xml").read_text().replace('name="target" value="model"', 'name="target" value="serial"')
    (run / "junit.xml").write_text(rows)
    meta = json.loads((trace_sets_run / "run.json").read_text())
    with serve_in_thread(ModelTarget("nv_small", bugs=["stuck:SDP:3:0"]), BoardMap(dram_size=0x4000_0000),
                         mode="tcp") as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  emu:\n    url: {emu.url}\n    baud: 3000000\n"
                       f"    profile: nv_small\n    dram_size: 0x40000000\n    integrity: verify\n"
                       f"    reset_address: 0xf0000000\n    response_timeout: 10\n")
        meta["pytest_argv"] += ["--nvdla-lab", str(lab), "--nvdla-board", "emu"]
        (run / "run.json").write_text(json.dumps(meta))
        code = cli("triage", "test_trace[sdp_3x3x33_bs_int8_reg_0]", "--run", str(run), "--hint-runs", "20")
    assert code == 1
    doc = json.loads((run / "bundles" / "test_trace_sdp_3x3x33_bs_int8_reg_0" / "diag.json").read_text())
    assert set(doc["regions"][0]["per_channel"]) == {"3"}  # only channel 3 (elements whose bit 0 was 0)
    b = run / "bundles" / "test_trace_sdp_3x3x33_bs_int8_reg_0"
    assert json.loads((b / "rerun.json").read_text())["target"] == "serial"
    assert "SDP.D_OP_ENABLE" in (b / "access.log").read_text()


@pytest.fixture(scope="module")
def trace_sets_run(tmp_path_factory) -> Path:
    root = os.environ.get("NVDLA_TRACE_SETS")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA_TRACE_SETS (e.g. ../shared/nvdla/trace_tests) is not set")
    out = tmp_path_factory.mktemp("traces")
    r = subprocess.run([*NVDLA_HIL, "regress", "--suite", "traces", "--traces", str(Path(root) / "nv_small"),
                        "-k", "sdp_3x3x33_bs_int8_reg_0", "--results-dir", str(out)],
                       capture_output=True, text=True, cwd=out, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return (out / "latest").resolve()


@pytest.mark.slow  # builds the wave-tracing simulator when it is not cached
@pytest.mark.skipif(not os.environ.get("NVDLA_HW"), reason="NVDLA_HW (an nvdla/hw checkout) is not set: "
                    "the Verilator triage (waves) needs it")
def test_triage_on_verilator_writes_waves(trace_sets_run: Path, tmp_path: Path) -> None:
    generated_rtl(os.environ["NVDLA_HW"], "nv_small")  # the shared read-only checkout: its cache copy
    run = tmp_path / "run"
    shutil.copytree(trace_sets_run, run)
    j = run / "junit.xml"
    j.write_text(j.read_text().replace('name="target" value="model"', 'name="target" value="verilator"'))
    code = cli("triage", "sdp_3x3x33_bs_int8_reg_0", "--run", str(run))
    b = run / "bundles" / "test_trace_sdp_3x3x33_bs_int8_reg_0"
    assert code == 0  # NVDLA's own nv_small trace passes on its RTL
    assert any(p.suffix in (".fst", ".vcd") for p in b.iterdir())
