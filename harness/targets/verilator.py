"""Verilator target: the public NVDLA RTL simulated under Verilator, driven through cocotb.

The pytest/CLI process starts the simulator (a binary built by ``nvdla-hil sim build``) as a
child process running the cocotb module ``nvdla_hil.sims.tb_server``, and talks to it over an
inherited socket with one JSON request/response per line (register access, burst, reset,
wait for the interrupt). Per-cycle work stays in the simulator: the clock is cocotb's C++
(GPI) clock, the AXI memory is HDL + C++ DPI, and Python runs only per transaction.

External memory is a pair of 4 GiB sparse shared-memory files (``pri_mem``, ``sec_mem``)
that the simulator's memory model and this process both map; ``mem_write``/``mem_read`` touch
them directly (backdoor, no bus cycles). That is race-free because the simulator only runs
while it serves a request, and requests are synchronous.

Deadlines: every request has a wall-clock limit; ``wait_irq`` also has a simulated-cycle
budget. A simulator that does not answer in time is killed and the call raises
:class:`TransportTimeoutError`; a simulator that dies raises :class:`TransportError` naming
its log. In both cases the target is closed; ``open()`` starts a fresh simulator.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from nvdla_hil.drivers.transport import Transport, TransportError, TransportTimeoutError

__all__ = ["SimulatorCrashed", "VerilatorTarget"]

_WINDOW = 1 << 32
_PORTS = ("pri_mem", "sec_mem")

#: GLB registers read for the dump attached to interrupt timeouts (CSB byte addresses).
GLB_DUMP = {"GLB_HW_VERSION": 0x1000, "GLB_S_INTR_MASK": 0x1004, "GLB_S_INTR_SET": 0x1008,
            "GLB_S_INTR_STATUS": 0x100C}


_BUILDS: dict[tuple[str, str, bool], Any] = {}
_log = logging.getLogger(__name__)


class SimulatorCrashed(TransportError):
    """The simulator process exited or broke the protocol."""


class VerilatorTarget(Transport):
    """Transport onto a Verilator simulation of NVDLA RTL (or of the project's CSB fixture).

    Args:
        build: a :class:`~nvdla_hil.sims.build.SimBuild`, the directory of one, or ``None`` to
            build (or reuse the cached build of) ``nvdla_hw``/``config``.
        nvdla_hw: nvdla/hw checkout with ``outdir/<config>/vmod`` (default ``$NVDLA_HW``).
        config: NVDLA project, e.g. ``nv_small``.
        waves: record an FST wave file (``wave_file``, default ``<run dir>/dump.fst``).
        request_timeout: wall-clock seconds for one register access or burst.
        irq_max_cycles: simulated-cycle budget of one ``wait_irq``.
        startup_timeout: wall-clock seconds for the simulator to start and reset.
        run_dir: where the simulator log (and waves) go; default a fresh temp dir.
        irq_settle_cycles: when ``wait_irq`` finds the line already high (another unit's
            interrupt pending), simulate this many cycles before returning, so a driver
            polling GLB S_INTR_STATUS for a different bit advances simulated time.
    """

    #: wall-clock seconds a layer may take here: the largest nv_small trace layer is ~1.2 M
    #: cycles (~30 s at ~40k cycles/s), so callers should not use a model-sized timeout
    suggested_layer_timeout: float = 600.0

    def __init__(self, build: Any = None, *, nvdla_hw: str | os.PathLike[str] | None = None,
                 config: str = "nv_small", waves: bool = False,
                 wave_file: str | os.PathLike[str] | None = None,
                 request_timeout: float = 60.0, irq_max_cycles: int = 200_000_000,
                 startup_timeout: float = 120.0, run_dir: str | os.PathLike[str] | None = None,
                 reset_wait_cycles: int | None = None, irq_settle_cycles: int = 256) -> None:
        super().__init__()
        self._build_arg = build
        self._nvdla_hw = nvdla_hw
        self._config = config
        self.waves = waves
        self.wave_file = Path(wave_file) if wave_file else None
        self.request_timeout = request_timeout
        self.irq_max_cycles = irq_max_cycles
        self.startup_timeout = startup_timeout
        self._run_dir_arg = Path(run_dir) if run_dir else None
        self._reset_wait = reset_wait_cycles
        self.irq_settle_cycles = irq_settle_cycles
        self.build: Any = None
        self.profile_name = config
        self.run_dir: Path | None = None
        self.wave_path: Path | None = None
        self.log_path: Path | None = None
        self.cycles = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._rbuf = b""
        self._maps: dict[str, mmap.mmap] = {}
        self._views: dict[str, np.ndarray] = {}
        self._own_run_dir = False

    # ---- build / process life cycle ----------------------------------------------
    def _resolve_build(self) -> Any:
        from nvdla_hil.sims.build import SimBuild, build_nvdla

        b = self._build_arg
        if isinstance(b, SimBuild):
            return b
        if b is not None:
            return SimBuild.load(Path(b))
        # one content-hash check per process and configuration, not one per test
        key = (str(self._nvdla_hw or os.environ.get("NVDLA_HW")), self._config, self.waves)
        build = _BUILDS.get(key)
        if build is None or not Path(build.executable).is_file():
            build = _BUILDS[key] = build_nvdla(self._nvdla_hw, self._config, waves=self.waves)
        return build

    def _sim_env(self) -> dict[str, str]:
        import cocotb_tools.config as cfg
        import find_libpython

        env = dict(os.environ)
        libpython = env.get("LIBPYTHON_LOC") or find_libpython.find_libpython()
        if not libpython:
            raise TransportError("cannot find libpython for cocotb (set LIBPYTHON_LOC)")
        env.update({
            "PATH": env.get("PATH", "") + os.pathsep + str(cfg.libs_dir),
            # this host's cocotb libraries, whatever the (shared, copied) build's RUNPATH says
            "LD_LIBRARY_PATH": os.pathsep.join(p for p in (str(cfg.libs_dir), env.get("LD_LIBRARY_PATH", "")) if p),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "PYGPI_PYTHON_BIN": sys.executable,
            "GPI_USERS": f"{libpython};{cfg.pygpi_entry_point()}",
            "COCOTB_TOPLEVEL": self.build.toplevel,
            "COCOTB_TEST_MODULES": "nvdla_hil.sims.tb_server",
            "TOPLEVEL_LANG": "verilog",
            "COCOTB_TRUST_INERTIAL_WRITES": "1",
            "COCOTB_RESULTS_FILE": str(self.run_dir / "results.xml"),
            "COCOTB_LOG_LEVEL": env.get("COCOTB_LOG_LEVEL", "WARNING"),
        })
        return env

    def _open(self) -> None:
        from nvdla_hil.sims.build import BuildError

        try:
            self.build = self._resolve_build()
        except BuildError as e:
            raise TransportError(f"cannot build the {self._config} simulator: {e}") from e
        self.profile_name = self.build.config if self.build.config != "fixture" else "fixture"
        try:
            self._start()
        except BaseException:
            self._teardown()
            raise

    def _start(self) -> None:
        if self._run_dir_arg:
            self.run_dir = self._run_dir_arg
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._own_run_dir = False
        else:
            self.run_dir = Path(tempfile.mkdtemp(prefix="nvdla-hil-sim-"))
            self._own_run_dir = True
        self.log_path = self.run_dir / "sim.log"
        shm = Path("/dev/shm") if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK) else None
        mem_fds: list[int] = []
        try:
            for port in _PORTS:
                # sparse 4 GiB file, unlinked at once: the simulator inherits the descriptor,
                # so nothing is left in /dev/shm even if either process is killed
                fd, name = tempfile.mkstemp(prefix=f"nvdla-hil-{port}-", dir=shm)
                os.unlink(name)
                mem_fds.append(fd)
                os.ftruncate(fd, _WINDOW)
                self._maps[port] = mmap.mmap(fd, _WINDOW, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                self._views[port] = np.frombuffer(self._maps[port], dtype=np.uint8)
            self._spawn(mem_fds)
        finally:
            for fd in mem_fds:
                os.close(fd)
        hello = self._recv(self.startup_timeout, "simulator start-up")
        self.cycles = int(hello.get("cycles", 0))
        self._do_reset(self.startup_timeout)

    def _spawn(self, mem_fds: list[int]) -> None:
        parent, child = socket.socketpair()
        self._sock = parent
        args = [self.build.executable]
        if self.waves:
            if not self.build.waves:
                raise TransportError("waves requested but the simulator was built without --waves")
            fmt = getattr(self.build, "wave_format", "") or "fst"
            wave = self.wave_file or (self.run_dir / f"dump.{fmt}")
            self.wave_path = wave
            args += ["--trace", "--trace-file", str(wave)]
        env = self._sim_env()
        env["NVDLA_HIL_SOCK_FD"] = str(child.fileno())
        for i, fd in enumerate(mem_fds):
            env[f"NVDLA_HIL_MEM{i}_FD"] = str(fd)
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(args, cwd=self.run_dir, env=env, stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=subprocess.STDOUT,
                                          pass_fds=(child.fileno(), *mem_fds), start_new_session=True)
        child.close()

    def _teardown(self) -> None:
        proc, self._proc = self._proc, None
        if self._sock is not None:
            if proc is not None and proc.poll() is None:
                try:
                    self._sock.sendall(b'{"op": "quit"}\n')
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
        self._views.clear()
        for m in self._maps.values():
            try:
                m.close()
            except BufferError:  # a caller still holds a view; the OS frees it at exit
                pass
        self._maps.clear()
        self._rbuf = b""

    def _close(self) -> None:
        self._teardown()
        if self.wave_path is not None:
            _log.warning("waves of %s: %s", self._config, self.wave_path)
        if self._own_run_dir and self.run_dir is not None and not self._keep_run_dir():
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _keep_run_dir(self) -> bool:
        return self.waves or getattr(self, "_failed", False)

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

    # ---- request/response ----------------------------------------------------------
    def _recv(self, timeout: float, what: str) -> dict[str, Any]:
        assert self._sock is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._rbuf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(TransportTimeoutError(
                    f"simulator did not answer {what} within {timeout:.0f} s (wall clock); "
                    f"killed it. Log: {self.log_path}"))
            r, _, _ = select.select([self._sock], [], [], min(left, 1.0))
            if not r:
                if self._proc is not None and self._proc.poll() is not None:
                    break
                continue
            try:
                chunk = self._sock.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            self._rbuf += chunk
        if b"\n" not in self._rbuf:
            rc = self._proc.poll() if self._proc is not None else None
            raise self._fail(SimulatorCrashed(
                f"simulator exited (code {rc}) during {what}; log {self.log_path}:\n{self._log_tail()}"))
        line, self._rbuf = self._rbuf.split(b"\n", 1)
        reply = json.loads(line)
        self.cycles = int(reply.get("cycles", self.cycles))
        return reply

    def _request(self, req: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        if self._sock is None:
            raise TransportError("simulator is not running")
        try:
            self._sock.sendall(json.dumps(req).encode() + b"\n")
        except OSError as e:
            raise self._fail(SimulatorCrashed(f"simulator connection lost: {e}; log {self.log_path}")) from e
        reply = self._recv(timeout or self.request_timeout, f"{req['op']} request")
        if "error" in reply:
            cls = TransportTimeoutError if reply.get("kind") == "timeout" else TransportError
            raise cls(f"simulator: {reply['error']}")
        return reply

    # ---- Transport API -----------------------------------------------------------------
    def _read32(self, address: int) -> int:
        return int(self._request({"op": "read", "addr": address})["value"])

    def _write32(self, address: int, value: int, posted: bool) -> None:
        self._request({"op": "write", "addr": address, "value": value, "posted": posted})

    def _read_burst(self, address: int, count: int, incr: bool) -> list[int]:
        r = self._request({"op": "read_burst", "addr": address, "count": count, "incr": incr})
        return [int(v) for v in r["values"]]

    def _write_burst(self, address: int, values: Iterable[int], incr: bool) -> None:
        self._request({"op": "write_burst", "addr": address, "values": list(values), "incr": incr})

    def _view(self, port: str) -> np.ndarray:
        if port not in _PORTS:
            raise ValueError(f"unknown memory port {port!r}; expected one of {_PORTS}")
        if port == "sec_mem" and self.build is not None and "CVIF_DW" not in self.build.parameters \
                and self.build.config != "fixture":
            raise TransportError(f"{self.build.config} has no secondary (CVIF) memory port")
        return self._views[port]

    def _mem_write(self, address: int, data: np.ndarray, port: str) -> None:
        off = address & (_WINDOW - 1)
        if off + data.size > _WINDOW:
            raise ValueError(f"memory write {address:#x}+{data.size} leaves the 4 GiB window")
        self._view(port)[off:off + data.size] = data

    def _mem_read(self, address: int, size: int, port: str) -> np.ndarray:
        off = address & (_WINDOW - 1)
        if off + size > _WINDOW:
            raise ValueError(f"memory read {address:#x}+{size} leaves the 4 GiB window")
        return self._view(port)[off:off + size].copy()

    def _wait_irq(self, timeout: float | None) -> bool:
        wall = self.request_timeout * 10 if timeout is None else float(timeout)
        r = self._request({"op": "wait_irq", "max_cycles": self.irq_max_cycles, "wall": wall,
                           "settle": self.irq_settle_cycles},
                          timeout=wall + self.request_timeout)
        return bool(r["irq"])

    def _do_reset(self, timeout: float) -> None:
        wait = self._reset_wait if self._reset_wait is not None else self.build.reset_wait_cycles
        self._request({"op": "reset", "low_cycles": 20, "wait_cycles": wait}, timeout=timeout)

    def _reset(self) -> None:
        self._do_reset(self.startup_timeout)

    # ---- extras --------------------------------------------------------------------------
    def run_cycles(self, n: int) -> None:
        """Advance simulated time by ``n`` core clock cycles."""
        self._request({"op": "run", "cycles": int(n)}, timeout=self.request_timeout + n / 1000.0)

    def irq_level(self) -> int:
        return int(self._request({"op": "status"})["irq"])

    def register_dump(self, addresses: dict[str, int] | None = None) -> dict[str, int | str]:
        """Read registers for a triage dump; unreadable entries hold the error text."""
        out: dict[str, int | str] = {}
        for name, addr in (addresses or GLB_DUMP).items():
            try:
                out[name] = self.read32(addr)
            except TransportError as e:
                out[name] = f"<{e}>"
                if not self.is_open:
                    break
        return out

    def wait_irq_or_raise(self, timeout: float | None, what: str = "interrupt",
                          dump: dict[str, int] | None = None) -> None:
        """``wait_irq`` that raises TransportTimeoutError with a register dump on timeout."""
        if not self.wait_irq(timeout):
            regs = self.register_dump(dump)
            text = ", ".join(f"{k}={v:#010x}" if isinstance(v, int) else f"{k}={v}" for k, v in regs.items())
            raise TransportTimeoutError(f"no {what} after {timeout} s at cycle {self.cycles}; {text}")

    def describe(self) -> str:
        b = self.build
        if b is None:
            return f"VerilatorTarget({self._config}, not built)"
        waves = f"; waves {self.wave_path}" if self.wave_path else ""
        return f"Verilator RTL sim {b.config} ({b.verilator}; {b.directory}{waves})"

    def __repr__(self) -> str:
        return f"VerilatorTarget(config={self._config!r}, open={self.is_open})"


def open_fixture(**kwargs: Any) -> VerilatorTarget:
    """A VerilatorTarget on the project's CSB fixture (builds it if needed)."""
    from nvdla_hil.sims.build import build_fixture

    return VerilatorTarget(build_fixture(progress=lambda m: None), config="fixture", **kwargs)


def _main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - manual smoke test
    t = open_fixture()
    with t:
        print(hex(t.read32(0)))
    return 0
