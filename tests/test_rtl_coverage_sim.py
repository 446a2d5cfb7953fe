"""RTL code coverage from a real instrumented Verilator build of NVDLA's RTL (nv_small).

Skips unless an nvdla/hw checkout with generated RTL (``NVDLA_HW``) and NVDLA's nv_small traces
(``NVDLA_TRACES``) are there. The first run builds the instrumented simulator (about 7 minutes
on 2 cores; cached). The traces are checked against their own CRCs as in every run; what is
asserted here is the coverage: each test's file holds what the test did from NVDLA's reset
state, so a run split over two xdist workers merges to exactly the per-unit table (and the
per-test hits) of a one-worker run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _checkouts import generated_rtl

from nvdla_hil.harness.analysis import rtl_coverage as rc

pytestmark = pytest.mark.slow

TRACES = ("cdp_1x1x1_lrn3_int8_0", "dc_1x1x8_1x1x8x1_int8_0", "pdp_8x8x64_2x2_ave_int8_0",
          "sdp_3x3x33_bn_int8_mem_0")


@pytest.fixture(scope="module")
def rtl_env() -> dict[str, str]:
    hw, traces = os.environ.get("NVDLA_HW"), os.environ.get("NVDLA_TRACES")
    if not hw:
        pytest.skip("needs NVDLA_HW: an nvdla/hw checkout")
    generated_rtl(hw, "nv_small")  # the shared read-only checkout: NVDLA's flow run once in its cache copy
    if not traces or not all((Path(traces) / t).is_dir() for t in TRACES):
        pytest.skip("needs NVDLA_TRACES: NVDLA's nv_small trace tests")
    pytest.importorskip("cocotb")
    return {**os.environ, "NVDLA_HW": hw, "NVDLA_TRACES": traces}


def regress(env: dict[str, str], results: Path, jobs: int, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "nvdla_hil.harness.cli", "regress", "--target", "verilator", "--profile", "nv_small",
           "--suite", "traces", "--traces", env["NVDLA_TRACES"], "--results-dir", str(results),
           "--rtl-coverage", "line,toggle", "-j", str(jobs), "-k", " or ".join(TRACES), *extra]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "RTL coverage of nv_small" in r.stdout
    return rc.load_summary(results / "latest" / "rtl-coverage" / "summary.json")["configs"]["nv_small"]


def test_two_workers_merge_to_what_one_worker_gives(rtl_env: dict[str, str], tmp_path: Path) -> None:
    one = regress(rtl_env, tmp_path / "one", 1)
    two = regress(rtl_env, tmp_path / "two", 2)
    assert one["tests"] == two["tests"] == len(TRACES)
    assert one["units"] == two["units"]
    hits = {t: v["hit"] for t, v in one["per_test"].items()}
    assert hits == {t: v["hit"] for t, v in two["per_test"].items()}
    # every unit a trace drives is hit; the design is much bigger than four traces
    total = one["units"]["total"]
    for kind in ("line", "branch", "toggle"):
        assert 0 < total[kind][0] < total[kind][1]
    for unit in ("cdma", "csc", "cmac", "cacc", "sdp", "pdp", "cdp"):
        assert one["units"][unit]["line"][0] > 0, unit
    assert one["rank"]["tests"] and set(one["rank"]["tests"]) <= set(one["per_test"])
    html = tmp_path / "one" / "latest" / "rtl-coverage" / (one["html"] or "none")
    if one["html"] is None:
        assert "genhtml" in one["html_note"]
    else:
        # genhtml's index lists the RTL's folders (nvdla/cdma, ...); each folder's page its NV_NVDLA_* files
        assert html.is_file() and 'href="nvdla/cdma/index.html"' in html.read_text()
        assert "NV_NVDLA_CDMA" in (html.parent / "nvdla" / "cdma" / "index.html").read_text()


def test_dask_workers_merge_to_what_one_worker_gives(rtl_env: dict[str, str], tmp_path: Path) -> None:
    """The same run on a real Dask scheduler with two worker processes (harness/plugin/cluster.py):
    each test's session in a worker writes its file into the run's folder, the controller merges.
    Before 2026-11-30 a worker's second session refused the folder its first had written to ("already
    holds the coverage of an earlier run"): half the tests failed and their coverage was missing."""
    distributed = pytest.importorskip("distributed")
    one = regress(rtl_env, tmp_path / "one", 1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as cluster:
        dask = regress(rtl_env, tmp_path / "dask", 1, "--cluster", cluster.scheduler_address)
    assert one["tests"] == dask["tests"] == len(TRACES)
    assert one["units"] == dask["units"]
    assert {t: v["hit"] for t, v in one["per_test"].items()} == {t: v["hit"] for t, v in dask["per_test"].items()}
    # the merge and its outputs are the controller's alone: one summary, written once
    assert len(list((tmp_path / "dask" / "latest" / "rtl-coverage").glob("summary*.json"))) == 1


def test_a_plain_build_says_it_has_no_coverage(rtl_env: dict[str, str], tmp_path: Path) -> None:
    from nvdla_hil.drivers.transport import TransportError
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(nvdla_hw=rtl_env["NVDLA_HW"], config="nv_small") as sim, \
            pytest.raises(TransportError, match="not built with RTL coverage"):
        sim.write_rtl_coverage(tmp_path / "x.dat")


def test_steered_fuzz_keeps_what_reaches_new_points_and_mutates_it(rtl_env: dict[str, str], tmp_path: Path) -> None:
    """A short steered run: cases that reach new RTL points are kept and mutated, every case
    still agrees with the model, and the summary counts what the budget bought."""
    cmd = [sys.executable, "-m", "nvdla_hil.harness.cli", "fuzz", "--unit", "pdp", "--target", "verilator",
           "--profile", "nv_small", "--steer", "rtl-coverage", "--cycles", "40000", "--seed", "3",
           "--rtl-coverage-dir", str(tmp_path / "cov")]
    r = subprocess.run(cmd, env=rtl_env, capture_output=True, text=True, timeout=3600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "(mutant of fuzz-pdp-s3-" in r.stdout
    summary = next(line for line in r.stdout.splitlines() if line.startswith("summary: "))
    assert "rtl-coverage" in summary and " 0 failed" in summary
    runs = rc.merge_folder(tmp_path / "cov" / "tests")
    cases = [t for t in runs["nv_small"].tests if not rc.is_baseline(t)]
    assert any("-s3-1" in t for t in cases)  # mutants take indices from 1_000_000
