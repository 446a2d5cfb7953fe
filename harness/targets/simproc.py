"""A simulator in a child process: the client side shared by the verilator and cmod targets.

Both targets start a simulator executable (Verilator + cocotb, or NVDLA's C model behind our
host) as a child in its own session, talk to it over an inherited socket with one request and
one reply per line, and share the external memory with it: two sparse 4 GiB files
(``pri_mem``, ``sec_mem``), unlinked at once, whose descriptors the child inherits and both
processes map (backdoor loads and reads, no bus cycles). The simulator only runs while it
serves a request, so touching the memory between requests cannot race it.

This class owns that machinery: the run directory and log, the memory windows (and emptying
them), spawning, the request/reply line with a wall-clock deadline, crash detection, and the
tear-down (``quit``, then SIGKILL to the process group after 2 s). Subclasses say how a request
and a reply are spelled and what the executable, its environment and its greeting are.

A simulator that does not answer in time is killed and the call raises
:class:`~nvdla_hil.drivers.transport.TransportTimeoutError`; one that exits or closes the socket
raises ``crashed_error`` naming its log. Either way the target is closed (its run directory kept
for a post-mortem); ``open()`` starts a fresh simulator.
"""

from __future__ import annotations

import mmap
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ...drivers.transport import Transport, TransportError, TransportTimeoutError

__all__ = ["PORTS", "WINDOW", "SimProcessTarget"]

WINDOW = 1 << 32
PORTS = ("pri_mem", "sec_mem")


class SimProcessTarget(Transport):
    """Base of targets whose accelerator is a simulator process (see the module docstring)."""

    #: the simulator's name in messages ("simulator", "C model")
    sim_name = "simulator"
    #: raised when the process exits or breaks the protocol
    crashed_error: type[TransportError] = TransportError
    #: name of the log in the run directory, prefix of a temporary run directory
    log_name = "sim.log"
    run_prefix = "nvdla-hil-sim-"
    mem_prefix = "nvdla-hil-"
    #: the line that asks the simulator to end
    quit_line = b"quit\n"

    def __init__(self, *, request_timeout: float, startup_timeout: float,
                 run_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.request_timeout = request_timeout
        self.startup_timeout = startup_timeout
        self._run_dir_arg = Path(run_dir) if run_dir else None
        self.run_dir: Path | None = None
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._rbuf = b""
        self._mem_fds: list[int] = []
        self._maps: dict[str, mmap.mmap] = {}
        self._views: dict[str, np.ndarray] = {}
        self._own_run_dir = False
        self._failed = False
        self._in_flight = False  # a request was sent and its reply not read (an interrupted call)

    # ---- run directory, memory, process ----------------------------------------------------------
    def _make_run_dir(self) -> None:
        if self._run_dir_arg:
            self.run_dir = self._run_dir_arg
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._own_run_dir = False
        else:
            self.run_dir = Path(tempfile.mkdtemp(prefix=self.run_prefix))
            self._own_run_dir = True
        self.log_path = self.run_dir / self.log_name

    def _in_run_dir(self, name: str) -> Path:
        """A file in the run directory (made by :meth:`_make_run_dir` when the target opens)."""
        if self.run_dir is None:
            raise TransportError(f"{type(self).__name__}: not started, so it has no run directory yet")
        return self.run_dir / name

    def _map_memory(self) -> None:
        """Create both memory windows: sparse 4 GiB files, unlinked at once (nothing is left in
        /dev/shm even if either process is killed), kept open so that :meth:`clear_memory` can
        empty them."""
        shm = Path("/dev/shm") if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK) else None
        for port in PORTS:
            fd, name = tempfile.mkstemp(prefix=f"{self.mem_prefix}{port}-", dir=shm)
            os.unlink(name)
            self._mem_fds.append(fd)
            os.ftruncate(fd, WINDOW)
            self._maps[port] = mmap.mmap(fd, WINDOW, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self._views[port] = np.frombuffer(self._maps[port], dtype=np.uint8)

    def _spawn_process(self, args: list[str], env: dict[str, str], *, log_mode: str = "wb") -> None:
        """Start ``args`` in the run directory with the socket (``NVDLA_HIL_SOCK_FD``) and the
        memory descriptors (``NVDLA_HIL_MEM<i>_FD``) inherited; output goes to the log."""
        assert self.log_path is not None and self.run_dir is not None
        parent, child = socket.socketpair()
        self._sock = parent
        self._rbuf = b""
        self._in_flight = False
        env = dict(env)
        env["NVDLA_HIL_SOCK_FD"] = str(child.fileno())
        for i, fd in enumerate(self._mem_fds):
            env[f"NVDLA_HIL_MEM{i}_FD"] = str(fd)
        try:
            with open(self.log_path, log_mode) as log:
                self._proc = subprocess.Popen(args, cwd=self.run_dir, env=env, stdin=subprocess.DEVNULL,
                                              stdout=log, stderr=subprocess.STDOUT,
                                              pass_fds=(child.fileno(), *self._mem_fds), start_new_session=True)
        finally:
            child.close()

    def _stop_process(self) -> None:
        """Ask the simulator to quit; kill its process group if it has not ended after 2 s."""
        proc, self._proc = self._proc, None
        if self._sock is not None:
            if proc is not None and proc.poll() is None:
                try:
                    self._sock.sendall(self.quit_line)
                except OSError:
                    pass
            self._sock.close()
            self._sock = None
        if proc is not None:
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        self._rbuf = b""
        self._in_flight = False

    def _release_memory(self) -> None:
        self._views.clear()
        for m in self._maps.values():
            try:
                m.close()
            except BufferError:  # a caller still holds a view; the OS frees it at exit
                pass
        self._maps.clear()
        for fd in self._mem_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._mem_fds.clear()

    def _teardown(self) -> None:
        self._stop_process()
        self._release_memory()

    def _keep_run_dir(self) -> bool:
        return self._failed

    def _close(self) -> None:
        self._teardown()
        if self._own_run_dir and self.run_dir is not None and not self._keep_run_dir():
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _fail(self, exc: TransportError) -> TransportError:
        """Kill the simulator, mark the target closed, return ``exc`` for raising."""
        self._failed = True
        self._teardown()
        self._is_open = False
        return exc

    def _log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines() if self.log_path else []
        except OSError:
            return ""
        return "\n".join("    " + ln for ln in lines[-n:])

    # ---- one line each way ------------------------------------------------------------------------
    def _recv_line(self, timeout: float, what: str) -> bytes:
        """The next reply line; kills the simulator on the deadline or when it has gone."""
        if self._sock is None:
            raise TransportError(f"the {self.sim_name} is not running")
        deadline = time.monotonic() + timeout
        while b"\n" not in self._rbuf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(TransportTimeoutError(
                    f"{self.sim_name} did not answer {what} within {timeout:.0f} s (wall clock); "
                    f"killed it. Log: {self.log_path}"))
            r, _, _ = select.select([self._sock], [], [], min(left, 1.0))
            if not r:
                if self._proc is not None and self._proc.poll() is not None:
                    break
                continue
            try:
                chunk = self._sock.recv(1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                break
            self._rbuf += chunk
        if b"\n" not in self._rbuf:
            rc = self._proc.poll() if self._proc is not None else None
            raise self._fail(self.crashed_error(
                f"{self.sim_name} exited (code {rc}) during {what}; log {self.log_path}:\n{self._log_tail()}"))
        line, self._rbuf = self._rbuf.split(b"\n", 1)
        self._in_flight = False
        return line

    def _send_line(self, line: bytes) -> None:
        """Send one request line (ending in a newline); its reply is then owed."""
        if self._sock is None:
            raise TransportError(f"the {self.sim_name} is not running")
        try:
            self._sock.sendall(line)
        except OSError as e:
            raise self._fail(self.crashed_error(f"{self.sim_name} connection lost: {e}; log {self.log_path}")) from e
        self._in_flight = True

    # ---- state for reuse (warm simulators) ---------------------------------------------------------
    def clear_memory(self) -> None:
        """Empty both external-memory windows: every byte reads 0 again, as in a new simulator.

        The windows are files both processes map; truncating a file to 0 and back drops its
        pages from every mapping (POSIX: the bytes past the old end read as zero), so this
        costs only what was written. Call it only between requests (the simulator is then
        blocked on its socket and touches no memory)."""
        if not self._mem_fds:
            raise TransportError(f"the {self.sim_name} is not running")
        for fd in self._mem_fds:
            os.ftruncate(fd, 0)
            os.ftruncate(fd, WINDOW)

    def healthy(self) -> bool:
        """The process is alive and no request was left half-done (an interrupted call would
        leave its reply unread and every later reply one behind)."""
        return (self._is_open and self._proc is not None and self._proc.poll() is None
                and self._sock is not None and not self._in_flight and not self._rbuf)

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds the simulator process has used so far (Linux
        ``/proc/PID/stat``), for benchmarks that must not be fooled by a loaded machine;
        ``None`` when it is not running or the platform has no ``/proc``."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        try:
            stat = Path(f"/proc/{self._proc.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    # ---- external memory ----------------------------------------------------------------------------
    def _view(self, port: str) -> np.ndarray:
        if port not in PORTS:
            raise ValueError(f"unknown memory port {port!r}; expected one of {PORTS}")
        return self._views[port]

    def _mem_write(self, address: int, data: np.ndarray, port: str) -> None:
        off = address & (WINDOW - 1)
        if off + data.size > WINDOW:
            raise ValueError(f"memory write {address:#x}+{data.size} leaves the 4 GiB window")
        self._view(port)[off:off + data.size] = data

    def _mem_read(self, address: int, size: int, port: str) -> np.ndarray:
        off = address & (WINDOW - 1)
        if off + size > WINDOW:
            raise ValueError(f"memory read {address:#x}+{size} leaves the 4 GiB window")
        return self._view(port)[off:off + size].copy()
