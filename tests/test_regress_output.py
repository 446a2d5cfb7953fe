"""What ``nvdla-hil regress`` prints: the summary leads, the functional-coverage table is in the
run folder (``coverage.txt``) and on the terminal only when asked (``--coverage-table``), and a
session that fed no bins says so instead of printing a table of empty bins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvdla_hil.harness.cli import main


def _run(tmp_path: Path, capsys, *extra: str) -> tuple[int, str, Path]:
    code = main(["regress", "--suite", "vectors", "-k", "sdp_cvt-s1-00", "--results-dir", str(tmp_path / "r"),
                 "--results-db", str(tmp_path / "db.sqlite"), *extra])
    out = capsys.readouterr().out
    return code, out, (tmp_path / "r" / "latest").resolve()


def test_coverage_is_one_line_and_the_table_is_in_the_run_folder(tmp_path, capsys):
    code, out, run = _run(tmp_path, capsys)
    assert code == 0, out
    assert "nvdla-hil functional coverage" not in out  # no table
    line = next(x for x in out.splitlines() if x.startswith("functional coverage: "))
    assert "10 model layers" in line and "reachable bins hit" in line and "coverage.txt" in line, line
    assert len(line) <= 120, line  # one row of a 120-column terminal
    table = (run / "coverage.txt").read_text()
    assert table.rstrip().splitlines()[-1].startswith("total: ") and "cdp.cvt" in table
    assert (run / "coverage.json").is_file()


def test_coverage_table_on_request(tmp_path, capsys):
    code, out, run = _run(tmp_path, capsys, "--coverage-table")
    assert code == 0, out
    assert "nvdla-hil functional coverage" in out
    assert (run / "coverage.txt").read_text().strip().splitlines()[-1] in out


def test_triage_of_a_run_with_injected_bugs_says_so(tmp_path, capsys):
    """A run that injected a model bug failed because of it: triaging one of its tests without the
    bug reruns it clean, and says so with the command that reproduces the run."""
    bug = "stuck:SDP:0:0"
    code = main(["regress", "--suite", "vectors", "-k", "sdp_cvt-s1-000", "--results-dir", str(tmp_path / "r"),
                 "--results-db", str(tmp_path / "db.sqlite"), "--model-bug", bug])
    assert code == 1, capsys.readouterr()
    capsys.readouterr()
    run = (tmp_path / "r" / "latest").resolve()
    code = main(["triage", "test_vector[sdp_cvt/sdp_cvt-s1-000]", "--run", str(run)])
    out = capsys.readouterr().out
    assert code == 0, out  # the clean rerun passed
    assert "injected model bugs" in out and f"--model-bug '{bug}'" in out, out


ROWS, COLUMNS = 40, 100  # one screen: a 100x40 terminal window


def _on_a_terminal(argv: list[str], columns: int, env: dict[str, str]) -> tuple[int, list[str]]:
    """Run ``argv`` on a real pseudo-terminal ``columns`` wide and return (exit code, the screen's
    rows as a terminal draws them): pyte replays the bytes, so the progress line redrawn in place
    with ``\\r`` is one row and a long line takes as many rows as it wraps to."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import termios

    import pyte

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 500, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env={**env, "COLUMNS": str(columns)},
                            close_fds=True)
    os.close(slave)
    screen = pyte.Screen(columns, 500)
    stream = pyte.ByteStream(screen)
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        stream.feed(chunk)  # the terminal turns \n into \r\n (ONLCR), as a real one does
    os.close(master)
    code = proc.wait(timeout=600)  # a hang guard; the run ends on its own
    rows = [line.rstrip() for line in screen.display]
    while rows and not rows[-1]:
        rows.pop()
    return code, rows


@pytest.mark.slow  # the whole make regress (about 30 s): `make test-slow`, CI's second step
def test_make_regress_fits_one_screen_when_all_pass(tmp_path):
    """``make regress``'s command (every trace set, nv_full's txn tests, the bundled vectors,
    loadables and networks on the model target) prints, on a terminal 100 columns wide, at most
    40 rows with make's 3-line echo of the command when everything passes, and no warning. The figure is the screen as drawn, by pyte."""
    import os
    import shutil
    import sys

    root = Path(__file__).resolve().parents[1]
    traces = Path(os.environ.get("NVDLA_TRACE_SETS") or root.parent / "shared" / "nvdla" / "trace_tests")
    txn = Path(os.environ.get("NVDLA_TXN_TESTS") or root.parent / "shared" / "nvdla" / "traceplayer_v1")
    if not traces.is_dir() or not txn.is_dir():
        pytest.skip(f"needs NVDLA's trace tests ({traces}) and nv_full's txn tests ({txn}), as make regress does")
    tool = shutil.which("nvdla-hil", path=str(Path(sys.executable).parent))
    assert tool, "nvdla-hil is not installed beside this Python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    sw = root.parent / "shared" / "nvdla_src" / "sw"
    if not env.get("NVDLA_SW") and sw.is_dir():  # as the Makefile's default
        env["NVDLA_SW"] = str(sw)
    env.update(NVDLA_HIL_RESULTS=str(tmp_path / "results"), NVDLA_HIL_RESULTS_DB=str(tmp_path / "db.sqlite"),
               TERM="xterm")
    code, rows = _on_a_terminal([tool, "regress", "--target", "model", "--traces", str(traces), "--txn", str(txn)],
                                COLUMNS, env)
    shown = "\n".join(rows)
    assert code == 0, shown
    summary = next(r for r in rows if r.startswith("summary: "))
    assert re.match(r"summary: [1-9]\d* passed, 0 failed", summary), shown
    assert not [r for r in rows if "warning" in r.lower()], shown
    assert len(rows) + 3 <= ROWS, f"{len(rows)} rows at {COLUMNS} columns, and make's 3:\n{shown}"
    print(f"make regress on a {COLUMNS}-column terminal: {len(rows)} rows (+3 for make's echo of the command)")
