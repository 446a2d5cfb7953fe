"""Infrastructure failures apart from test failures (``harness/boards/health.py``): a board that
hangs mid-run (the emulator's ``--wedge-after``, a real ``litex_server`` in front of it that then
wedges in ``CommUART.read``, or one killed mid-run) ends ``nvdla-hil regress`` in bounded time with
exit 4, outcome ``infrastructure`` in the summary, the JUnit property ``verdict=infrastructure`` and
one line per failure naming board, URL and what was tried; never a source listing of the transport."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


from nvdla_hil.drivers.uartbone import BoardDeadError, LinkIntegrityError
from nvdla_hil.drivers.driver import LayerTimeoutError
from nvdla_hil.harness.boards.health import infrastructure_reason
from nvdla_hil.harness.boards.lab import BoardBusyError

pytestmark = pytest.mark.slow  # boards and litex_server failing mid-run: `make test-slow`, CI's second step

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]


def test_what_counts_as_infrastructure():
    assert infrastructure_reason(BoardDeadError("board 'a' (socket://h:1): no answer")) == \
        "BoardDeadError: board 'a' (socket://h:1): no answer"
    assert infrastructure_reason(LinkIntegrityError("x")) == "LinkIntegrityError: x"
    assert infrastructure_reason(BoardBusyError("held by PID 1")) == "BoardBusyError: held by PID 1"
    assert infrastructure_reason(LayerTimeoutError("PDP group 1: no done interrupt")) is None  # the hardware's doing
    assert infrastructure_reason(AssertionError("MISMATCH")) is None
    assert infrastructure_reason(ValueError("x")) is None


def _emu(*args: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.boards.emulator", "board-emu", *args],
                         stdout=subprocess.PIPE, text=True)
    return p, p.stdout.readline().strip()  # type: ignore[union-attr]


def _regress(tmp: Path, url: str, extra: str = "", during=None) -> tuple[subprocess.CompletedProcess, Path]:  # noqa: ANN001
    lab = tmp / "lab.yaml"
    lab.write_text(f"lock_dir: {tmp}\nboards:\n  emu:\n    url: {url}\n    baud: 3000000\n    profile: nv_small\n"
                   f"    reset_address: 0xf0000000\n    response_timeout: 0.3\n{extra}")
    res = tmp / "results"
    proc = subprocess.Popen([*CLI, "regress", "--target", "serial", "--lab", str(lab), "--board", "emu", "--suite",
                             "vectors", "--results-dir", str(res)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=tmp)
    th = threading.Thread(target=during, args=(res,), daemon=True) if during else None
    if th:
        th.start()
    out, _ = proc.communicate(timeout=900)  # the bound this file is about: it always ends
    if th:
        th.join(60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, ""), res / "latest"


def _check_infra_run(r: subprocess.CompletedProcess, run: Path, url: str) -> None:
    out = r.stdout
    assert r.returncode == 4, out[-4000:]
    assert not re.search(r"(uartbone\w*|etherbone)\.py", out), out[-4000:]  # no source listings (the UARTBone modules)
    assert "infrastructure failure" in out and "no test failed on its result" in out, out[-4000:]
    summary = (run / "summary.txt").read_text()
    counts = next(x for x in summary.splitlines() if x.startswith("summary:"))
    assert " 0 failed," in counts and " 0 infrastructure" not in counts, counts
    cases = list(ET.parse(run / "junit.xml").getroot().iter("testcase"))
    passed = [c for c in cases if not any(k.tag in ("failure", "error", "skipped") for k in c)]
    infra = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    assert passed and infra, counts
    for c in infra:
        el = c.find("failure") if c.find("failure") is not None else c.find("error")
        props = {(p.get("name"), p.get("value")) for p in c.iter("property")}
        assert ("verdict", "infrastructure") in props, (c.get("name"), props)
        msg = el.get("message", "")
        assert msg.startswith("infrastructure failure: BoardDeadError: ") and "\n" not in msg, msg
        assert "'emu'" in msg and url in msg, msg
        assert not re.search(r"uartbone\w*\.py", el.text or ""), el.text
    meta = (run / "run.json").read_text()
    assert json.loads(meta)["exit_code"] == 4, meta
    tests = json.loads(meta)["tests"]
    assert tests["infrastructure"] >= len(infra) > 0 and tests["failed"] == 0, tests


def test_board_that_hangs_mid_run_is_an_infrastructure_verdict(tmp_path):
    emu, url = _emu("--tcp=0", "--wedge-after", "60000")
    try:
        t0 = time.monotonic()
        r, run = _regress(tmp_path, url)
        print(f"wedged board: regress ended after {time.monotonic() - t0:.1f} s, exit {r.returncode}")
        _check_infra_run(r, run, url)
    finally:
        emu.kill()
        emu.wait(10)


@pytest.mark.parametrize("fault", ["wedge", "kill"])
def test_litex_server_fault_mid_run_is_an_infrastructure_verdict(tmp_path, fault):
    """A real litex_server in front of the emulator: the emulator wedges (litex_server then hangs
    in ``CommUART.read``, as in the report that started this), or litex_server is killed once the
    first tests have finished."""
    from _lab import LitexBench

    bench = LitexBench(tmp_path / "litex_server.log", backend="model",
                       emu_args=("--wedge-after", "60000") if fault == "wedge" else ())
    killed: list[float] = []

    def kill_after_first_tests(res: Path) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            logs = list(res.glob("*/logs/*.log"))
            if len(logs) >= 3:
                killed.append(time.monotonic())
                bench.server.kill()
                return
            time.sleep(0.2)

    try:
        r, run = _regress(tmp_path, bench.url, "    transport: litex_server\n",
                          during=kill_after_first_tests if fault == "kill" else None)
        if killed:
            print(f"litex_server killed; regress ended {time.monotonic() - killed[0]:.1f} s later, exit {r.returncode}")
        _check_infra_run(r, run, bench.url)
    finally:
        bench.close()
