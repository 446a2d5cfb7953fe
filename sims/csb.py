"""cocotb driver for NVDLA's CSB (configuration space bus) slave port.

Protocol as the NV_nvdla RTL implements it (``csb2nvdla_*`` / ``nvdla2csb_*``):
  * request: the master holds ``valid`` with ``addr`` (CSB *word* address, byte >> 2),
    ``wdat``, ``write`` and ``nposted``; the request is taken at a rising clock edge where
    ``valid`` and ``ready`` are both high.
  * read: the data comes back later as a one-cycle pulse of ``nvdla2csb_valid`` with
    ``nvdla2csb_data``.
  * write: posted writes (``nposted = 0``) have no response; a non-posted write is
    acknowledged by a one-cycle pulse of ``nvdla2csb_wr_complete``.
One request is outstanding at a time. Every wait is bounded by ``timeout_cycles``.

Signals are sampled in the ReadOnly phase before an edge and driven right after an edge, so
the driver only runs Python while an access is in flight (a few cycles per access).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from cocotb.handle import HierarchyObject, LogicObject
from cocotb.triggers import ReadOnly, RisingEdge

__all__ = ["CsbDriver", "CsbSignals", "CsbTimeout", "unsigned"]


class CsbTimeout(Exception):
    """The CSB slave did not accept a request or did not respond in time."""


def unsigned(sig: LogicObject) -> int:
    """A signal's value as an unsigned int (cocotb 2 ``LogicArray`` or a plain integer)."""
    v: Any = sig.value
    to_unsigned = getattr(v, "to_unsigned", None)
    return int(to_unsigned()) if to_unsigned else int(v)


@dataclass
class CsbSignals:
    clk: LogicObject
    valid: LogicObject
    ready: LogicObject
    addr: LogicObject
    wdat: LogicObject
    write: LogicObject
    nposted: LogicObject
    rvalid: LogicObject
    rdata: LogicObject
    wr_complete: LogicObject

    @classmethod
    def from_top(cls, dut: HierarchyObject, prefix: str = "csb_") -> CsbSignals:
        """The nvdla-hil wrapper's port names (``csb_valid``, ``csb_ready``, ...)."""
        g = lambda n: getattr(dut, prefix + n)
        return cls(clk=cast(LogicObject, dut.clk), valid=g("valid"), ready=g("ready"), addr=g("addr"),
                   wdat=g("wdat"), write=g("write"), nposted=g("nposted"),
                   rvalid=g("rvalid"), rdata=g("rdata"), wr_complete=g("wr_complete"))


class CsbDriver:
    """Issue CSB reads and writes; call only from a coroutine that just saw a rising edge."""

    def __init__(self, sig: CsbSignals, *, timeout_cycles: int = 10_000) -> None:
        self.sig = sig
        self.timeout_cycles = timeout_cycles
        self.reads = 0
        self.writes = 0
        self.idle()

    def idle(self) -> None:
        self.sig.valid.value = 0
        self.sig.write.value = 0
        self.sig.nposted.value = 0
        self.sig.addr.value = 0
        self.sig.wdat.value = 0

    async def _request(self, word_addr: int, data: int, write: bool, nposted: bool) -> None:
        s = self.sig
        s.addr.value = word_addr & 0xFFFF
        s.wdat.value = data & 0xFFFFFFFF
        s.write.value = int(write)
        s.nposted.value = int(nposted)
        s.valid.value = 1
        for _ in range(self.timeout_cycles):
            await ReadOnly()
            taken = unsigned(s.ready) == 1
            await RisingEdge(s.clk)
            if taken:
                s.valid.value = 0
                return
        s.valid.value = 0
        raise CsbTimeout(f"CSB request to word {word_addr:#06x} not accepted within "
                         f"{self.timeout_cycles} cycles (csb ready stuck low)")

    async def _await_pulse(self, pulse: LogicObject, what: str, word_addr: int) -> int:
        s = self.sig
        for _ in range(self.timeout_cycles):
            await ReadOnly()
            if unsigned(pulse) == 1:
                data = unsigned(s.rdata)
                await RisingEdge(s.clk)
                return data
            await RisingEdge(s.clk)
        raise CsbTimeout(f"no CSB {what} for word {word_addr:#06x} within {self.timeout_cycles} cycles")

    async def write(self, byte_addr: int, value: int, *, posted: bool = True) -> None:
        word = byte_addr >> 2
        await self._request(word, value, True, not posted)
        if not posted:
            await self._await_pulse(self.sig.wr_complete, "write completion", word)
        self.writes += 1

    async def read(self, byte_addr: int) -> int:
        word = byte_addr >> 2
        await self._request(word, 0, False, False)
        value = await self._await_pulse(self.sig.rvalid, "read response", word)
        self.reads += 1
        return value
