"""cocotb test module run inside the simulator process: serves transport requests.

The host (``nvdla_hil.harness.targets.verilator.VerilatorTarget``) starts the simulator with
``COCOTB_TEST_MODULES=nvdla_hil.sims.tb_server`` and an inherited socket (fd number in
``NVDLA_HIL_SOCK_FD``). Requests and replies are one JSON object per line:

  {"op": "reset", "low_cycles": 20, "wait_cycles": 8192}
  {"op": "write", "addr": BYTE, "value": V, "posted": true}
  {"op": "read", "addr": BYTE}                                  -> {"value": V}
  {"op": "read_burst", "addr": BYTE, "count": N, "incr": true}  -> {"values": [...]}
  {"op": "write_burst", "addr": BYTE, "values": [...], "incr": true}
  {"op": "write_seq", "writes": [[BYTE, V], ...]}                (posted, in order)
  {"op": "wait_irq", "max_cycles": N, "wall": SECONDS, "settle": N} -> {"irq": bool, "waited": n}
      (with the line already high, ``settle`` cycles run before answering)
  {"op": "run", "cycles": N}
  {"op": "status"}                                              -> {"cycles": n, "irq": 0|1}
  {"op": "coverage", "path": FILE}   (instrumented builds: the RTL coverage counted since the
      last such request written to FILE in Verilator's coverage.dat format, then zeroed;
      without "path" only zeroed)
  {"op": "quit"}

Every reply carries ``"cycles"`` (core clock cycles since start). ``reset`` is sent once at
start-up and, by a warm simulator pool (``WarmSimulators`` in the host module), between tests
after the host has emptied the shared memory: the testbench keeps no other state. Errors reply
``{"error": "...", "kind": "timeout"|"error"}``. Simulated time only advances while a request
is being served: the simulator blocks on the socket in between, so the host may access the
shared memory file (the backdoor) without racing the bus.

Memory is not in this protocol: the AXI memory model (``hdl/nvdla_hil_axi_mem.h``) keeps its
bytes in a shared-memory file that the host maps directly.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

import cocotb
from cocotb.triggers import RisingEdge, ValueChange
from cocotb.utils import get_sim_time
from nvdla_hil.sims.csb import CsbDriver, CsbSignals, CsbTimeout, unsigned

CLOCK_PERIOD_NS = 10
#: cycles simulated between wall-clock deadline checks while waiting for the interrupt
WAIT_CHUNK = 20_000
#: the most cycles one run of the main loop makes (host_run_cycles is 32 bits wide)
RUN_MAX = (1 << 32) - 1


class _Server:
    def __init__(self, dut: Any, sock: socket.socket, *, clock_gating: bool | None = None) -> None:
        self.dut = dut
        self.clock_gating = clock_gating  # NVDLA's SLCG as set at start-up (None: the top has none)
        self.sock = sock
        self.rfile = sock.makefile("rb")
        self.csb = CsbDriver(CsbSignals.from_top(dut))

    def cycles(self) -> int:
        return int(get_sim_time("ns")) // CLOCK_PERIOD_NS

    def reply(self, obj: dict[str, Any]) -> None:
        obj["cycles"] = self.cycles()
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    async def sync(self) -> None:
        """Align to just after a rising edge (runs end mid-cycle)."""
        await RisingEdge(self.dut.clk)

    async def host_run(self, cycles: int, *, until_irq: bool) -> None:
        """Let the simulator's main loop make up to ``cycles`` whole cycles on its own, with no
        VPI work per cycle (``hdl/nvdla_hil_main.cpp``), stopping after the rising edge where
        ``intr`` is high when ``until_irq``: one wake-up (``host_run_ack``) for the whole run."""
        self.dut.host_run_irq.value = int(until_irq)
        self.dut.host_run_cycles.value = min(cycles, RUN_MAX)
        await ValueChange(self.dut.host_run_ack)

    async def run_cycles(self, n: int) -> None:
        """``n`` cycles, then the next rising edge (as a Timer of ``n`` periods and a
        RisingEdge were: the same cycle counts)."""
        while n > 0:
            c0 = self.cycles()
            await self.host_run(n, until_irq=False)
            n -= max(1, self.cycles() - c0)  # a run ends early only before a due cocotb Timer
        await self.sync()

    async def op_reset(self, req: dict[str, Any]) -> dict[str, Any]:
        """The reset sequence of a start, also used between tests by a warm simulator pool:
        the CSB master idle, ``rstn`` (NVDLA core and CSB resets, the AXI memory models'
        queues) low for ``low_cycles``, then ``wait_cycles`` for NVDLA's reset to finish."""
        await self.sync()
        self.csb.idle()
        self.csb.reads = self.csb.writes = 0
        self.dut.rstn.value = 0
        await self.run_cycles(int(req.get("low_cycles", 20)))
        self.dut.rstn.value = 1
        await self.run_cycles(int(req.get("wait_cycles", 8192)))
        return {}

    async def op_wait_irq(self, req: dict[str, Any]) -> dict[str, Any]:
        max_cycles = int(req.get("max_cycles", 0)) or None
        wall = req.get("wall")
        deadline = None if wall is None else time.monotonic() + float(wall)
        start = self.cycles()
        intr = self.dut.intr
        settle = int(req.get("settle", 0))
        if settle and unsigned(intr) == 1:
            # Line already high (another unit's interrupt still pending): let the design run
            # a quantum so a host polling for a different status bit makes progress.
            await self.run_cycles(settle)
            return {"irq": True, "waited": self.cycles() - start}
        while True:
            if unsigned(intr) == 1:
                return {"irq": True, "waited": self.cycles() - start}
            chunk = WAIT_CHUNK
            if max_cycles is not None:
                left = max_cycles - (self.cycles() - start)
                if left <= 0:
                    return {"irq": False, "waited": self.cycles() - start, "why": "cycles"}
                chunk = min(chunk, left)
            if deadline is not None and time.monotonic() >= deadline:
                return {"irq": False, "waited": self.cycles() - start, "why": "wall"}
            await self.host_run(chunk, until_irq=True)
            await self.sync()

    async def handle(self, req: dict[str, Any]) -> dict[str, Any] | None:
        op = req.get("op")
        if op == "write":
            await self.csb.write(int(req["addr"]), int(req["value"]), posted=bool(req.get("posted", True)))
            return {}
        if op == "read":
            return {"value": await self.csb.read(int(req["addr"]))}
        if op == "write_burst":
            addr = int(req["addr"])
            incr = bool(req.get("incr", True))
            for i, v in enumerate(req["values"]):
                await self.csb.write(addr + 4 * i if incr else addr, int(v))
            return {}
        if op == "write_seq":
            for addr, value in req["writes"]:
                await self.csb.write(int(addr), int(value))
            return {}
        if op == "read_burst":
            addr = int(req["addr"])
            incr = bool(req.get("incr", True))
            vals = [await self.csb.read(addr + 4 * i if incr else addr) for i in range(int(req["count"]))]
            return {"values": vals}
        if op == "wait_irq":
            return await self.op_wait_irq(req)
        if op == "reset":
            return await self.op_reset(req)
        if op == "run":
            await self.run_cycles(int(req["cycles"]))
            return {}
        if op == "status":
            return {"irq": unsigned(self.dut.intr)}
        if op == "coverage":
            return write_coverage(req.get("path"))
        if op == "quit":
            return None
        raise ValueError(f"unknown op {op!r}")

    async def serve(self) -> None:
        self.reply({"hello": self.dut._name, "reads": 0, "clock_gating": self.clock_gating})
        while True:
            line = self.rfile.readline()  # blocks the simulator: time stands still
            if not line:
                return  # host went away
            try:
                req = json.loads(line)
                out = await self.handle(req)
                if out is None:
                    self.reply({})
                    return
            except CsbTimeout as e:
                out = {"error": str(e), "kind": "timeout"}
            except Exception as e:  # noqa: BLE001 - report it to the host, keep serving
                out = {"error": f"{type(e).__name__}: {e}", "kind": "error"}
            self.reply(out)


def write_coverage(path: str | None) -> dict[str, Any]:
    """Write the RTL coverage counted so far to ``path`` (None: nowhere) and zero the counters,
    through ``nvdla_hil_coverage_write`` / ``_zero`` (``hdl/nvdla_hil_cov.cpp``), which only an
    instrumented build (``sim build --coverage``) has and exports to this process's symbols."""
    import ctypes

    try:
        lib = ctypes.CDLL(None)
        write, zero = lib.nvdla_hil_coverage_write, lib.nvdla_hil_coverage_zero
    except AttributeError:
        raise ValueError("this simulator was not built with RTL coverage (sim build --coverage line,toggle)") from None
    if path is None:
        zero()
        return {"zeroed": True}
    write.argtypes = [ctypes.c_char_p]
    write.restype = ctypes.c_int
    if write(os.fsencode(str(path))) != 0:
        raise OSError(f"cannot write RTL coverage to {path}")
    return {"written": path}


@cocotb.test()
async def serve(dut: Any) -> None:
    """Serve host requests until the host sends ``quit`` or closes the socket."""
    fd = int(os.environ["NVDLA_HIL_SOCK_FD"])
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    dut.rstn.value = 0
    # NVDLA's second-level clock gating (nvdla_hil_top.sv): on unless the host asks for it off;
    # the CSB fixture has none (None in the hello)
    gating = None
    if hasattr(dut, "clock_gating_off"):
        gating = os.environ.get("NVDLA_HIL_CLOCK_GATING", "on") != "off"
        dut.clock_gating_off.value = int(not gating)
    # The clock runs in C++ (hdl/nvdla_hil_main.cpp, CLOCK_PERIOD_NS apart, starting low): no
    # cocotb Clock, so no VPI call per half cycle.
    await RisingEdge(dut.clk)
    server = _Server(dut, sock, clock_gating=gating)
    try:
        await server.serve()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the host closed the connection: end the simulation quietly
    finally:
        sock.close()
