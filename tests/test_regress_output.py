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
    line = next(x for x in out.splitlines() if x.startswith("functional coverage of "))
    assert "10 reference-model layers" in line and "reachable bins hit" in line and "coverage.txt" in line, line
    table = (run / "coverage.txt").read_text()
    assert table.rstrip().splitlines()[-1].startswith("total: ") and "cdp.cvt" in table
    assert (run / "coverage.json").is_file()


def test_coverage_table_on_request(tmp_path, capsys):
    code, out, run = _run(tmp_path, capsys, "--coverage-table")
    assert code == 0, out
    assert "nvdla-hil functional coverage" in out
    assert (run / "coverage.txt").read_text().strip().splitlines()[-1] in out
