"""The README's lab recipes run as written: the fenced blocks after ``<!-- recipe: NAME -->`` in
"Boards in a lab" (the lab file, the labgrid exporter configuration, the commands) are taken from
README.md, the lab host's name and ports replaced by loopback and free ports, and run end to end:
the board emulator, a real labgrid coordinator and exporter, the place created and matched with
``labgrid-client``, and the regression on the place, which must pass and leave the place free.

Skips (saying so) when labgrid is not installed."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the README's lab recipes run as written: `make test-slow`, CI's second step


pytest.importorskip("labgrid", reason="labgrid is not installed: pip install 'labgrid>=24'")

README = Path(__file__).resolve().parents[1] / "README.md"
BIN = Path(sys.executable).parent


def recipes() -> dict[str, str]:
    """NAME -> the fenced block that follows ``<!-- recipe: NAME -->`` in README.md."""
    text = README.read_text(encoding="utf-8")
    found = dict(re.findall(r"<!-- recipe: (\S+) -->\n```\w*\n(.*?)```", text, flags=re.S))
    assert {"lab.yaml", "exporter.yaml", "commands"} <= set(found), sorted(found)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(cond, what: str, proc: subprocess.Popen | None = None, timeout: float = 300) -> None:  # noqa: ANN001
    """Poll ``cond()`` until true; fails at once if ``proc`` (the service waited for) exits.
    ``timeout`` is a hang guard (processes coming up on a loaded machine), not an expected time:
    the wait ends on the event."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what} did not happen: the process exited with {proc.returncode}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.2)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def test_readme_recipes_run_as_written(tmp_path):
    r = recipes()
    ports = {"20408": str(_free_port()), "7777": str(_free_port()), "1234": str(_free_port())}

    def local(text: str) -> str:
        text = text.replace("labhost", "127.0.0.1")
        for old, new in ports.items():
            text = re.sub(rf"\b{old}\b", new, text)
        return text

    (tmp_path / "lab.yaml").write_text(local(r["lab.yaml"]) + f"lock_dir: {tmp_path}\n")
    (tmp_path / "exporter.yaml").write_text(local(r["exporter.yaml"]))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "LG_USERNAME": "readme",
           "LG_HOSTNAME": "hil-host", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("LG_COORDINATOR", None)
    procs: list[subprocess.Popen] = []
    coordinator = f"127.0.0.1:{ports['20408']}"
    try:
        for n, line in enumerate(local(r["commands"]).splitlines()):
            line = line.split("  #", 1)[0].strip()
            if not line:
                continue
            argv = shlex.split(line.rstrip("&").strip())
            if line.endswith("&"):  # a service: started, then waited for
                procs.append(subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=(tmp_path / f"svc{n}.log").open("w"),
                                              stderr=subprocess.STDOUT))
                if argv[0] == "nvdla-hil":
                    _wait(lambda: _listening(int(ports["7777"])), "the board emulator listening", procs[-1])
                elif argv[0] == "labgrid-coordinator":
                    _wait(lambda: _listening(int(ports["20408"])), "the coordinator listening", procs[-1])
                elif argv[0] == "labgrid-exporter":
                    _wait(lambda: "NetworkSerialPort" in subprocess.run(
                        [str(BIN / "labgrid-client"), "-x", coordinator, "resources"], capture_output=True,
                        text=True, env=env, timeout=60).stdout, "the exporter publishing its port", procs[-1])
                continue
            res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
            out = res.stdout + res.stderr
            assert res.returncode == 0, f"{line}\n{out[-3000:]}"
            if argv[:2] == ["nvdla-hil", "regress"]:
                summary = next(x for x in out.splitlines() if x.startswith("summary:"))
                assert re.search(r"summary: [1-9]\d* passed, 0 failed, 0 error, 0 bad input, 0 infrastructure",
                                 summary), summary
                print(f"README recipe: {summary}")
        show = subprocess.run([str(BIN / "labgrid-client"), "-x", coordinator, "-p", "nvdla-arty-3", "show"],
                              capture_output=True, text=True, env=env, timeout=60).stdout
        assert re.search(r"acquired:\s+None", show), show  # the regression gave the place back
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
