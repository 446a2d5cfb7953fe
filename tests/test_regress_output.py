"""What ``nvdla-hil regress`` prints: the summary leads, the functional-coverage table is in the
run folder (``coverage.txt``) and on the terminal only when asked (``--coverage-table``), and a
session that fed no bins says so instead of printing a table of empty bins."""

from __future__ import annotations

from pathlib import Path

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
    main(["triage", "test_vector[sdp_cvt/sdp_cvt-s1-000]", "--run", str(run)])
    out = capsys.readouterr().out
    assert "injected model bugs" in out and f"--model-bug '{bug}'" in out, out
