"""Shared test helpers for the lab (test-only, imported as ``_lab``): a free loopback port and
the board emulator behind a real ``litex_server --uart``, each its own process."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

LITEX_SERVER = shutil.which("litex_server") or str(Path(sys.executable).with_name("litex_server"))

#: how long a server may take to come up before the bench gives up: a hang guard, not an expected
#: time (the wait ends as soon as it listens, or at once if it dies); a Python server's start
#: took over 40 s on a loaded 2-core machine, so a tight guess here is a flaky failure
START_HANG_GUARD = 300.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LitexBench:
    """board-emu (its own process, on a pty) behind a real ``litex_server --uart`` (its own process)."""

    def __init__(self, log: Path, backend: str = "regfile", emu_args: tuple[str, ...] = ()) -> None:
        pytest.importorskip("litex", reason="LiteX is not installed: pip install litex (for litex_server)")
        if not Path(LITEX_SERVER).exists():
            pytest.skip("litex_server is not on PATH (pip install litex)")
        self.emu = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.boards.emulator", "board-emu", "--pty",
                                     "--backend", backend, *emu_args], stdout=subprocess.PIPE, text=True)
        self.pty = self.emu.stdout.readline().strip()  # type: ignore[union-attr]
        self.port = free_port()
        self.server = subprocess.Popen([LITEX_SERVER, "--uart", "--uart-port", self.pty, "--uart-baudrate", "3000000",
                                        "--bind-ip", "127.0.0.1", "--bind-port", str(self.port)],
                                       stdout=log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_HANG_GUARD
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.server.poll() is not None:
                    self.close()
                    pytest.fail(f"litex_server did not come up: {log.read_text()[-2000:]}")
                time.sleep(0.1)
        self.url = f"tcp://127.0.0.1:{self.port}"

    def close(self) -> None:
        for p in (self.server, self.emu):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
            p.wait(10)
