"""cocotb side of the CSB (configuration space bus) master: one Python wake-up per access.

Protocol as the NV_nvdla RTL implements it (``csb2nvdla_*`` / ``nvdla2csb_*``):
  * request: the master holds ``valid`` with ``addr`` (CSB *word* address, byte >> 2),
    ``wdat``, ``write`` and ``nposted``; the request is taken at a rising clock edge where
    ``valid`` and ``ready`` are both high.
  * read: the data comes back later as a one-cycle pulse of ``nvdla2csb_valid`` with
    ``nvdla2csb_data``.
  * write: posted writes (``nposted = 0``) have no response; a non-posted write is
    acknowledged by a one-cycle pulse of ``nvdla2csb_wr_complete``.
One request is outstanding at a time.

The handshake itself runs in HDL (``hdl/nvdla_hil_csb_master.sv``), cycle by cycle in the
simulator. Python sets the request on the master's ``host_*`` ports, toggles ``host_req``
and sleeps until ``host_ack`` follows it: one value-change callback per access, whatever the
slave's latency. Every wait is bounded by ``timeout_cycles`` in the HDL (``host_err`` says
which wait ran out) and by a simulated-time guard here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cocotb.handle import HierarchyObject, LogicObject
from cocotb.triggers import First, Timer, ValueChange

__all__ = ["CsbDriver", "CsbSignals", "CsbTimeout", "unsigned"]

#: host_err codes of nvdla_hil_csb_master.sv
NOT_ACCEPTED, NO_RESPONSE = 1, 2


class CsbTimeout(Exception):
    """The CSB slave did not accept a request or did not respond in time."""


def unsigned(sig: LogicObject) -> int:
    """A signal's value as an unsigned int (cocotb 2 ``LogicArray`` or a plain integer)."""
    v: Any = sig.value
    to_unsigned = getattr(v, "to_unsigned", None)
    return int(to_unsigned()) if to_unsigned else int(v)


@dataclass
class CsbSignals:
    """The host side of ``nvdla_hil_csb_master`` as the wrapper's top exposes it."""

    req: LogicObject
    addr: LogicObject
    wdat: LogicObject
    write: LogicObject
    nposted: LogicObject
    timeout: LogicObject
    ack: LogicObject
    rdata: LogicObject
    err: LogicObject

    @classmethod
    def from_top(cls, dut: HierarchyObject, prefix: str = "host_") -> CsbSignals:
        """The nvdla-hil wrapper's port names (``host_req``, ``host_ack``, ...)."""
        g = lambda n: getattr(dut, prefix + n)
        return cls(req=g("req"), addr=g("addr"), wdat=g("wdat"), write=g("write"), nposted=g("nposted"),
                   timeout=g("timeout"), ack=g("ack"), rdata=g("rdata"), err=g("err"))


class CsbDriver:
    """Issue CSB reads and writes through the HDL master, one at a time."""

    def __init__(self, sig: CsbSignals, *, timeout_cycles: int = 10_000, clock_period_ns: int = 10) -> None:
        self.sig = sig
        self.timeout_cycles = timeout_cycles
        self.clock_period_ns = clock_period_ns
        self.reads = 0
        self.writes = 0
        self._req = 0
        self.idle()

    def idle(self) -> None:
        """No access pending: ``host_req`` equal to the ``host_ack`` the master's reset sets."""
        s = self.sig
        s.timeout.value = self.timeout_cycles
        s.write.value = 0
        s.nposted.value = 0
        s.addr.value = 0
        s.wdat.value = 0
        s.req.value = self._req

    async def _access(self, word_addr: int, data: int, write: bool, nposted: bool) -> int:
        s = self.sig
        s.addr.value = word_addr & 0xFFFF
        s.wdat.value = data & 0xFFFFFFFF
        s.write.value = int(write)
        s.nposted.value = int(nposted)
        self._req ^= 1
        s.req.value = self._req
        # The HDL gives up after timeout_cycles per wait; the guard only catches a broken master.
        guard = Timer((2 * self.timeout_cycles + 8) * self.clock_period_ns, unit="ns")
        done = await First(ValueChange(s.ack), guard)
        if done is guard:
            raise CsbTimeout(f"CSB master did not finish the access to word {word_addr:#06x} "
                             f"(host_ack never followed host_req)")
        err = unsigned(s.err)
        if err == NOT_ACCEPTED:
            raise CsbTimeout(f"CSB request to word {word_addr:#06x} not accepted within "
                             f"{self.timeout_cycles} cycles (csb ready stuck low)")
        if err == NO_RESPONSE:
            what = "write completion" if write else "read response"
            raise CsbTimeout(f"no CSB {what} for word {word_addr:#06x} within {self.timeout_cycles} cycles")
        return unsigned(s.rdata)

    async def write(self, byte_addr: int, value: int, *, posted: bool = True) -> None:
        await self._access(byte_addr >> 2, value, True, not posted)
        self.writes += 1

    async def read(self, byte_addr: int) -> int:
        value = await self._access(byte_addr >> 2, 0, False, False)
        self.reads += 1
        return value
