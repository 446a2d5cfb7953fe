"""Loadables are found by content, not by name, and a loadable without a golden is neither
passed nor failed: "ran, no golden" (`regress --suite loadables` and `loadable run`).

Inputs: copies of NVDLA's shared regression loadables and goldens under other names, beside
files that are not loadables (a text file named like one, a DIMG, a README)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nvdla_hil.harness.loadables.check import NO_GOLDEN, find_loadables, looks_like_loadable

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_sw"


@pytest.fixture(scope="module")
def root() -> Path:
    env = os.environ.get("NVDLA_LOADABLES")
    p = Path(env) if env else SHARED
    if not (p / "flatbufs").is_dir():
        pytest.skip("NVDLA's software regression is not here (NVDLA_LOADABLES or ../shared/nvdla_sw)")
    return p


@pytest.fixture()
def tree(root: Path, tmp_path: Path) -> Path:
    """CDP_L0_0_small as NVDLA names it, with its golden; PDP_L0_0_small renamed ``net.lod`` in
    another folder, with no golden; decoys: a text file named ``junk_fbuf``, a DIMG, a README."""
    t = tmp_path / "reg"
    (t / "flatbufs/kmd/CDP").mkdir(parents=True)
    (t / "models/pdp").mkdir(parents=True)
    shutil.copy(root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf", t / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf")
    shutil.copy(root / "flatbufs/kmd/PDP/PDP_L0_0_small_fbuf", t / "models/pdp/net.lod")
    g = next(root.glob("golden/CDP_L0_0_small_*/dla"))
    shutil.copytree(g, t / "golden" / g.parent.name / "dla")
    (t / "flatbufs/kmd/CDP/junk_fbuf").write_text("not a loadable, whatever its name says\n" * 4)
    shutil.copy(g / "o_000000.dimg", t / "models/pdp/stray.dimg")
    (t / "README.md").write_text("# loadables\n")
    return t


def test_loadables_are_found_by_content(tree: Path) -> None:
    found = find_loadables(tree)
    assert [(n, f.relative_to(tree).as_posix(), g is not None) for n, f, g in found] == [
        ("CDP_L0_0_small", "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf", True),
        ("net", "models/pdp/net.lod", False),
    ]
    assert not looks_like_loadable(tree / "flatbufs/kmd/CDP/junk_fbuf")
    assert not looks_like_loadable(tree / "models/pdp/stray.dimg")


def test_every_shared_loadable_is_found_and_no_golden_is_taken_for_one(root: Path) -> None:
    found = find_loadables(root)
    names = sorted(p.name for p in root.glob("flatbufs/**/*_fbuf"))
    assert sorted(f.name for _, f, _ in found) == names and len(names) == 11
    assert all(g is not None for _, _, g in found)
    # each its own: NVDLA's regression names a golden's folder <loadable>_<6 hex digits>, so the
    # golden of CDP_L0_0 is not CDP_L0_0_small_4531af's though that name starts the same way
    for name, _, g in found:
        assert g is not None and re.fullmatch(rf"{re.escape(name)}_[0-9a-f]{{6}}", g.parents[1].name), (name, g)
    assert len({g for _, _, g in found}) == len(found)


def test_loadable_run_without_a_golden_says_so_not_pass(tree: Path, nvdla_sw: str) -> None:
    env = {**os.environ, "NVDLA_SW": nvdla_sw}
    r = subprocess.run([sys.executable, "-m", "nvdla_hil.harness.cli", "loadable", "run",
                        str(tree / "models/pdp/net.lod"), "--target", "model"],
                       capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "RAN, NO GOLDEN net on model (nv_small) (ran, no golden" in r.stdout and "PASS" not in r.stdout, r.stdout


def test_regress_runs_a_renamed_loadable_and_reports_ran_no_golden(tree: Path, nvdla_sw: str, tmp_path: Path,
                                                                   capsys) -> None:  # noqa: ANN001
    from nvdla_hil.harness.cli import main

    code = main(["regress", "--suite", "loadables", "--loadables", str(tree), "--nvdla-sw", nvdla_sw,
                 "--results-dir", str(tmp_path / "res")])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    junit = (tmp_path / "res" / "latest" / "junit.xml").read_text()
    assert 'name="test_loadable[CDP_L0_0_small]"' in junit and 'name="test_loadable[net]"' in junit
    assert "junk" not in junit and "stray" not in junit
    assert f"{NO_GOLDEN}: net ran on model (nv_small), output MD5" in junit
    summary = (tmp_path / "res" / "latest" / "summary.txt").read_text()  # every row; the terminal lists what did not pass
    lines = [ln for ln in summary.splitlines() if ln.startswith(("test_loadable[net]", "test_loadable[CDP_L0_0_small]"))]
    assert any("passed" in ln and "CDP_L0_0_small" in ln for ln in lines), lines
    assert any(NO_GOLDEN in ln and "net" in ln and "failed" not in ln for ln in lines), lines
    assert any(NO_GOLDEN in ln and "net" in ln for ln in out.splitlines()), out[-3000:]  # not a pass: listed
    assert "1 ran, no golden" in out, out[-3000:]
