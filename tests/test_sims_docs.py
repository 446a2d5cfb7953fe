"""The RTL command examples of the docs work: every ``nvdla-hil ...`` line in the ```sh blocks of
sims/README.md and README.md parses with the real argument parser (and ``bench/bench_sim.py``
lines with the bench's), and with an nvdla/hw checkout in ``NVDLA_HW`` the cheap ones run:
``sim setup`` without tmake (``--no-tmake``, never ``--apply-fixes``: read-only) and ``sim build``
when its simulator is already cached. Without ``NVDLA_HW`` that part skips, saying so.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _bench import bench_module

from nvdla_hil.sims.checkout import generated_root

REPO = Path(__file__).resolve().parents[1]
#: (file, section) whose ```sh blocks are checked; None: the whole file
DOCS = ((REPO / "sims" / "README.md", None), (REPO / "README.md", "## Simulating the RTL"))


def _sh_blocks(path: Path, section: str | None = None) -> list[tuple[int, str]]:
    """(line number, text) of every ```sh block (of ``section`` only, when given)."""
    out, lines = [], path.read_text().splitlines()
    i, end = 0, len(lines)
    if section is not None:
        if section not in lines:
            raise AssertionError(f"{path.name} has no section `{section}`")
        i = lines.index(section) + 1
        end = next((j for j in range(i, len(lines)) if lines[j].startswith("## ")), len(lines))
    while i < end:
        if lines[i].strip() in ("```sh", "```bash", "```shell"):
            start, body = i + 2, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            out.append((start, "\n".join(body)))
        i += 1
    return out


def _commands(path: Path, section: str | None = None) -> list[tuple[str, str, list[str]]]:
    """(file:line, shown command, argv) of every command in the sh blocks; heredoc bodies and
    comments skipped, continuation lines joined, ``a && b`` split."""
    cmds = []
    for start, block in _sh_blocks(path, section):
        lines = block.split("\n")
        i = 0
        while i < len(lines):
            no, line = start + i, lines[i]
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            i += 1
            heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
            if heredoc:
                while i < len(lines) and lines[i].strip() != heredoc.group(1):
                    i += 1
                i += 1
            try:
                words = shlex.split(line, comments=True)
            except ValueError as e:
                raise AssertionError(f"{path.name}:{no}: cannot split `{line}`: {e}") from None
            cmd: list[str] = []
            for w in [*words, "&&"]:
                if w in ("&&", ";", "||"):
                    if cmd:
                        cmds.append((f"{path.name}:{no}", " ".join(cmd), cmd))
                    cmd = []
                else:
                    cmd.append(w)
    return cmds


def _nvdla_hil_commands() -> list[tuple[str, list[str]]]:
    out = []
    for doc, section in DOCS:
        for where, _shown, argv in _commands(doc, section):
            if argv[0] == "nvdla-hil":
                out.append((where, argv[1:]))
    return out


def _bench_commands() -> list[tuple[str, list[str]]]:
    out = []
    for doc, section in DOCS:
        for where, _shown, argv in _commands(doc, section):
            if len(argv) > 1 and argv[0].startswith("python") and argv[1].endswith("bench/bench_sim.py"):
                out.append((where, argv[2:]))
    return out


def test_the_docs_show_the_rtl_commands() -> None:
    sub = {tuple(a[:2]) for _, a in _nvdla_hil_commands()}
    assert {("sim", "setup"), ("sim", "build"), ("sim", "native"), ("regress", "--target")} <= sub, sub
    assert _bench_commands(), "sims/README.md shows how to run bench/bench_sim.py"


@pytest.mark.parametrize("where,argv", _nvdla_hil_commands(), ids=lambda v: v if isinstance(v, str) else None)
def test_doc_command_parses(where: str, argv: list[str]) -> None:
    from nvdla_hil.harness.cli import build_parser

    parser = build_parser()
    try:
        parser.parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{where}: `nvdla-hil {' '.join(argv)}` does not parse (exit {e.code})")


def test_doc_bench_commands_parse() -> None:
    with bench_module("bench_sim") as bench:
        for where, argv in _bench_commands():
            try:
                bench.build_parser().parse_args(argv)
            except SystemExit as e:
                pytest.fail(f"{where}: `bench/bench_sim.py {' '.join(argv)}` does not parse (exit {e.code})")


# ------------------------------------------------------------------ with a checkout
def _checkout() -> Path:
    hw = os.environ.get("NVDLA_HW")
    if not hw:
        pytest.skip("NVDLA_HW is not set: set it to an nvdla/hw checkout to run the docs' cheap "
                    "`sim setup --no-tmake` / cached `sim build` commands")
    if not (Path(hw) / "tools" / "bin" / "tmake").is_file():
        pytest.fail(f"NVDLA_HW={hw} is not an nvdla/hw checkout (no tools/bin/tmake)")
    return Path(hw)


def _opt(argv: list[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv else default


def _localize(argv: list[str], hw: Path) -> list[str]:
    return [str(hw) if a in ("~/nvdla-hw", "$NVDLA_HW") else a for a in argv]


def _nvdla_hil() -> list[str]:
    return [sys.executable, "-m", "nvdla_hil.harness.cli"]


def test_doc_setup_commands_run_without_tmake() -> None:
    hw = _checkout()
    ran = 0
    for where, argv in _nvdla_hil_commands():
        if argv[:2] != ["sim", "setup"]:
            continue
        argv = [a for a in _localize(argv, hw) if a != "--apply-fixes"] + ["--no-tmake"]
        cfg = _opt(argv, "--config", "nv_small")
        if not (generated_root(hw, cfg) / "outdir" / cfg / "vmod").is_dir():  # a read-only checkout: its cache copy
            continue  # not generated in this checkout; running tmake is not cheap
        r = subprocess.run([*_nvdla_hil(), *argv], capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode in (0, 1), f"{where}: {r.stdout}\n{r.stderr}"
        assert "[1/4]" in r.stdout and "[4/4]" in r.stdout, f"{where}: {r.stdout}"
        ran += 1
    if not ran:
        pytest.skip(f"no configuration the docs set up is generated in {hw}/outdir")


def test_doc_build_commands_run_when_cached() -> None:
    hw = _checkout()
    from nvdla_hil.sims import build as simbuild

    ran = 0
    for where, argv in _nvdla_hil_commands():
        if argv[:2] != ["sim", "build"] or "--fixture" in argv:
            continue
        argv = _localize(argv, hw)
        cfg = _opt(argv, "--config", "nv_small")
        try:  # the build the command names: an instrumented one is its own cache entry
            cached = simbuild.cached_nvdla(hw, cfg, coverage=_opt(argv, "--coverage", ""))
        except simbuild.BuildError:
            continue
        if cached is None:
            continue  # building takes minutes: not a cheap check
        r = subprocess.run([*_nvdla_hil(), *argv], capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode == 0, f"{where}: {r.stderr}"
        assert r.stdout.strip() == cached.directory and "cached" in r.stderr, f"{where}: {r.stderr}"
        ran += 1
    if not ran:
        pytest.skip(f"none of the docs' `sim build` configurations is cached for {hw}")
