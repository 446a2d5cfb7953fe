"""The README's lab recipes run as written: the fenced blocks after ``<!-- recipe: NAME -->`` in
"Boards in a lab" (the lab file, the labgrid exporter configuration, the commands) are taken from
README.md, the lab host's name and ports replaced by loopback and free ports, and run end to end:
the board emulator, a real labgrid coordinator and exporter, the README's own bounded waits for
them (the test adds none: a block that only works when typed slowly fails here), the place
created and matched with ``labgrid-client``, and the regression on the place, which must pass and
leave the place free.

Skips (saying so) when labgrid is not installed."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
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


def _run_line(line: str, cwd: Path, env: dict[str, str], services: list[subprocess.Popen],
              timeout: float) -> subprocess.CompletedProcess:
    """Run one README line in a shell, as a user pasting it would. ``timeout`` is a hang guard
    (processes coming up on a loaded machine), not an expected time: the README's own ``until``
    lines end on the event. On a timeout the services' state is named."""
    try:
        return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        dead = [f"{' '.join(map(str, p.args[:1]))} exited {p.returncode}" for p in services if p.poll() is not None]
        pytest.fail(f"{line!r} did not finish within {timeout:g} s; " + ("; ".join(dead) or "every service still running"))


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
            if line.endswith("&"):  # a service: started, and waited for only by the README's own lines
                argv = shlex.split(line.rstrip("&").strip())
                procs.append(subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=(tmp_path / f"svc{n}.log").open("w"),
                                              stderr=subprocess.STDOUT))
                continue
            argv = shlex.split(line)
            res = _run_line(line, tmp_path, env, procs, timeout=1800 if argv[:2] == ["nvdla-hil", "regress"] else 300)
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
