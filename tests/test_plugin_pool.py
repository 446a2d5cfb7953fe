"""A pool of boards: with ``-n N`` each xdist worker gets a board of its own for the whole
session; with fewer boards than workers, tests take turns with a bounded wait; a board is never
used by two tests at once. Two board emulators (TCP, the model behind each), real xdist workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.boards.emulator import serve_in_thread
from nvdla_hil.harness.boards.lab import LabError, SessionBoardLock, load_lab, resolve_board, resolve_boards
from nvdla_hil.harness.targets.model import ModelTarget

pytestmark = pytest.mark.slow  # board pools shared by xdist workers: `make test-slow`, CI's second step

PY = sys.executable
ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_TARGET", "NVDLA_HIL_LAB",
            "NVDLA_HIL_BOARD", "NVDLA_HIL_CONFIG", "NVDLA_HIL_SUMMARY", "NVDLA_TXN_TESTS")

BOARD = """\
  {name}:
    url: {url}
    baud: 3000000
    profile: {profile}
    dram_size: 0x40000000
    reset_address: 0xf0000000
    response_timeout: 10
"""

TEST_FILE = '''
import json, os, time
import pytest



@pytest.mark.parametrize("i", range({n}))
def test_uses_a_board(i, nvdla_target, nvdla_driver, record_property):
    t0 = time.time()
    nvdla_driver.write("SDP.D_CVT_SCALE", 0x100 + i)
    time.sleep({sleep})
    assert nvdla_driver.read("SDP.D_CVT_SCALE") == 0x100 + i  # nobody else wrote it meanwhile
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    record_property("worker", worker)
    with open({uses!r}, "a") as fh:
        fh.write(json.dumps({{"worker": worker, "board": nvdla_target.board_name, "t0": t0,
                             "t1": time.time()}}) + "\\n")
'''


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    env.update(extra)
    return env


def _lab(tmp_path: Path, urls: dict[str, str], extra: str = "pools:\n  zcu102: [board-a, board-b]\n",
         profiles: dict[str, str] | None = None) -> Path:
    body = f"lock_dir: {tmp_path}\nboards:\n" + "".join(
        BOARD.format(name=n, url=u, profile=(profiles or {}).get(n, "nv_small")) for n, u in urls.items())
    p = tmp_path / "lab.yaml"
    p.write_text(body + extra)
    return p


@pytest.fixture
def two_boards():
    with serve_in_thread(ModelTarget("nv_small"), BoardMap(dram_size=0x4000_0000), mode="tcp") as a, \
            serve_in_thread(ModelTarget("nv_small"), BoardMap(dram_size=0x4000_0000), mode="tcp") as b:
        yield {"board-a": a, "board-b": b}


def _run(tmp_path: Path, lab: Path, board: str, workers: int, n: int, sleep: float, *extra: str):
    uses = tmp_path / "uses.jsonl"
    uses.unlink(missing_ok=True)
    (tmp_path / "test_pool.py").write_text(TEST_FILE.format(n=n, sleep=sleep, uses=str(uses)))
    junit = tmp_path / "junit.xml"
    r = subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers), "test_pool.py",
                        "--nvdla-target", "serial", "--nvdla-lab", str(lab), "--nvdla-board", board,
                        "--junitxml", str(junit), *extra],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path, env=_env())
    rows = [json.loads(ln) for ln in uses.read_text().splitlines()] if uses.exists() else []
    return r, rows, junit


def _no_overlap(rows: list[dict]) -> None:
    by_board: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        by_board.setdefault(row["board"], []).append((row["t0"], row["t1"]))
    for board, spans in by_board.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end, f"board {board} used by two tests at once"


def test_each_worker_has_its_own_board(tmp_path, two_boards):
    lab = _lab(tmp_path, {n: e.url for n, e in two_boards.items()})
    r, rows, junit = _run(tmp_path, lab, "pool:zcu102", 2, 8, 0.2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 workers, 2 boards in pool zcu102: gw0 -> board-a, gw1 -> board-b" in r.stdout
    boards_of = {}
    for row in rows:
        boards_of.setdefault(row["worker"], set()).add(row["board"])
    assert set(boards_of) == {"gw0", "gw1"}, rows  # both workers ran tests
    assert boards_of == {"gw0": {"board-a"}, "gw1": {"board-b"}}
    for name, emu in two_boards.items():  # and both boards were really used (reset per test)
        assert emu.stats.resets == sum(1 for row in rows if row["board"] == name) > 0
    # the JUnit properties say which board each test ran on
    for case in ET.parse(junit).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props["target"] == "serial" and props["profile"] == "nv_small"
        assert props["board"] == {"gw0": "board-a", "gw1": "board-b"}[props["worker"]]
    assert not any(json.loads(p.read_text() or "{}") for p in tmp_path.glob("nvdla-hil-*.lock"))  # released


def test_fewer_boards_than_workers_take_turns(tmp_path, two_boards):
    lab = _lab(tmp_path, {n: e.url for n, e in two_boards.items()})
    r, rows, _ = _run(tmp_path, lab, "board-a,board-b", 3, 9, 0.3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 workers, 2 boards in boards board-a,board-b: waiting up to 300 s for a board" in r.stdout
    assert len(rows) == 9 and {row["board"] for row in rows} == {"board-a", "board-b"}
    _no_overlap(rows)


def test_a_test_that_waits_too_long_for_a_board_fails_saying_why(tmp_path, two_boards):
    lab = _lab(tmp_path, {n: e.url for n, e in two_boards.items()})
    r, rows, _ = _run(tmp_path, lab, "zcu102", 3, 3, 4.0, "--nvdla-board-wait", "0.5")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "3 workers, 2 boards in pool zcu102: waited 0.5 s for a board and none came free" in r.stdout
    assert len(rows) == 2  # two tests had a board each; the third gave up
    _no_overlap(rows)


def test_a_pool_skips_a_board_another_regression_holds(tmp_path, two_boards):
    lab = _lab(tmp_path, {n: e.url for n, e in two_boards.items()})
    lab_obj = load_lab(lab)
    other = SessionBoardLock(lab_obj, lab_obj.board("board-a"))
    other.acquire()
    try:
        r, rows, _ = _run(tmp_path, lab, "pool:zcu102", 2, 4, 0.1)
        assert r.returncode == 0, r.stdout + r.stderr
        assert {row["board"] for row in rows} == {"board-b"}
        assert "1 busy: board 'board-a' busy, held by PID" in r.stdout
        r, _, _ = _run(tmp_path, lab, "board-a", 2, 1, 0.0)  # a single board held elsewhere: refused at once
        assert r.returncode == 4 and "board 'board-a' busy, held by PID" in r.stderr, r.stdout + r.stderr
    finally:
        other.release()


# ---- lab file: pools ------------------------------------------------------------------------------------
def test_pool_selection_forms(tmp_path):
    lab = _lab(tmp_path, {"board-a": "socket://127.0.0.1:7101", "board-b": "socket://127.0.0.1:7102"})
    for sel in ("pool:zcu102", "zcu102", "board-a,board-b"):
        _, cfgs, pool = resolve_boards(lab, sel)
        assert [c.name for c in cfgs] == ["board-a", "board-b"]
        assert pool == (None if "," in sel else "zcu102")
    assert resolve_board(lab, "pool:zcu102")[1].name == "board-a"  # where one board is needed: the first
    with pytest.raises(LabError, match="no pool 'nope'; known pools: zcu102"):
        resolve_boards(lab, "pool:nope")
    with pytest.raises(LabError, match="no board 'board-c'"):
        resolve_boards(lab, "board-a,board-c")


@pytest.mark.parametrize("pools,needle", [
    ("pools:\n  zcu102: [board-a, board-c]\n", "pool 'zcu102': no board 'board-c'"),
    ("pools:\n  zcu102: []\n", "expected a non-empty list of board names"),
    ("pools:\n  zcu102: [board-a, board-a]\n", "names a board twice"),
    ("pools:\n  board-a: [board-b]\n", "a board has this name too"),
    ("pools: [board-a]\n", "expected a mapping of pool name to a list of boards"),
])
def test_bad_pools_name_file_and_line(tmp_path, pools, needle):
    lab = _lab(tmp_path, {"board-a": "socket://127.0.0.1:7101", "board-b": "socket://127.0.0.1:7102"}, pools)
    with pytest.raises(LabError, match=needle) as e:
        load_lab(lab)
    assert f"{lab}:{len(lab.read_text().splitlines()) - pools.count(chr(10)) + 1}" in str(e.value)


def test_a_pool_is_one_hardware_build(tmp_path):
    lab = _lab(tmp_path, {"board-a": "socket://127.0.0.1:7101", "board-b": "socket://127.0.0.1:7102"},
               profiles={"board-b": "nv_full"})
    with pytest.raises(LabError, match="different profiles"):
        load_lab(lab)
    lab = _lab(tmp_path, {"board-a": "socket://127.0.0.1:7101", "board-b": "socket://127.0.0.1:7102"}, "",
               profiles={"board-b": "nv_full"})
    with pytest.raises(LabError, match="different profiles"):
        resolve_boards(lab, "board-a,board-b")
