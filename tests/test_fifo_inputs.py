"""A FIFO or a device where a file belongs is refused at once, naming it, never read: a vector
case's manifest (``vectors run`` and a whole ``regress --suite vectors``, which reads manifests in
three places), a lab file (``--lab``), and ``/dev/zero`` as one (issue 37's hangs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "nvdla_hil.harness.cli"]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd, stdin=subprocess.DEVNULL)


def test_a_fifo_manifest_is_bad_input_in_vectors_run_and_regress(tmp_path: Path) -> None:
    case = tmp_path / "vec" / "suite" / "case"
    case.mkdir(parents=True)
    os.mkfifo(case / "case.yaml")
    r = _run("vectors", "run", str(case), cwd=tmp_path)
    assert r.returncode == 2 and "not a regular file" in r.stdout + r.stderr, r.stdout + r.stderr
    r = _run("regress", "--suite", "vectors", "--vectors", str(tmp_path / "vec"), "--results-dir", str(tmp_path / "r"),
             cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "bad input" in out and str(case / "case.yaml") in out, out[-3000:]


def test_a_fifo_or_device_lab_file_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "lab.yaml")
    for lab in (tmp_path / "lab.yaml", Path("/dev/zero")):
        r = _run("regress", "--target", "serial", "--lab", str(lab), "--board", "b", "--suite", "vectors",
                 "--results-dir", str(tmp_path / "r"), cwd=tmp_path)
        out = r.stdout + r.stderr
        assert r.returncode == 2 and str(lab) in out and "not a regular file" in out, out[-3000:]
