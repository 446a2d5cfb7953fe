"""LiteX UARTBone: a :class:`Transport` to an NVDLA board over a serial link.

The protocol is split along its own boundaries, each in its module; every name is importable
from here as before:

* :mod:`.uartbone_wire`: the wire format (commands, bursts, the bridge's 100 ms FSM timer);
* :mod:`.boardmap`: where NVDLA's CSB and DRAM windows sit on the board's bus;
* :mod:`.uartbone_policy`: the integrity policy (``plain``/``verify``, what each guarantees);
* :mod:`.uartbone_link`: the port, resynchronisation, retries, timeouts and a dead board;
* :mod:`.uartbone_verify`: the readback rules (agreeing and proven reads, verified writes);
* here, :class:`SerialTransport`: registers, indirect (LUT) ports, memory, interrupt, reset and
  the proof that the board maps its DRAM window.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import numpy as np

from .boardmap import BoardConfigError, BoardMap
from .transport import (
    LinkIntegrityError,
    NotOpenError,
    Timeout,
    TransportError,
    TransportTimeoutError,
)
from .uartbone_link import GLB_HW_VERSION, GLB_INTR_STATUS, BoardDeadError, LinkFault, NoAnswer
from .uartbone_policy import IntegrityPolicy, LinkStats
from .uartbone_verify import VerifiedLink
from .uartbone_wire import (
    ADDR_BYTES,
    CMD_READ_FIXED,
    CMD_READ_INCR,
    CMD_WRITE_FIXED,
    CMD_WRITE_INCR,
    FSM_TIMEOUT,
    HEADER_BYTES,
    MAX_BURST,
    decode_words,
    encode_read,
    encode_write,
    max_burst_words,
    wire_bytes_read,
    wire_bytes_write,
)

__all__ = [
    "ADDR_BYTES",
    "BoardConfigError",
    "BoardDeadError",
    "CMD_READ_FIXED",
    "CMD_READ_INCR",
    "CMD_WRITE_FIXED",
    "CMD_WRITE_INCR",
    "FSM_TIMEOUT",
    "GLB_HW_VERSION",
    "GLB_INTR_STATUS",
    "HEADER_BYTES",
    "MAX_BURST",
    "BoardMap",
    "IntegrityPolicy",
    "LinkIntegrityError",
    "LinkStats",
    "SerialTransport",
    "TransportTimeoutError",
    "decode_words",
    "encode_read",
    "encode_write",
    "max_burst_words",
    "wire_bytes_read",
    "wire_bytes_write",
]


class SerialTransport(VerifiedLink):
    """NVDLA access over LiteX UARTBone on any pyserial URL: registers, indirect (LUT) ports,
    memory, interrupt polling, reset and the DRAM window probe, each under the integrity policy.
    Constructor arguments: :class:`~.uartbone_link.UartboneLink`."""

    # ---- registers ------------------------------------------------------------------------------
    def _read32(self, address: int) -> int:
        return self._read_burst(address, 1, True)[0]

    def _read_burst(self, address: int, count: int, incr: bool) -> list[int]:
        if count <= 0:
            return []
        self._fence()
        word = self.board_map.csr(address) >> 2
        if incr:
            self.board_map.csr(address + 4 * (count - 1))
        what = f"read of {count} word(s) at CSB {address:#x}"
        if not incr or self.read_pops(address):
            # a data port: each read moves its pointer, so a read is neither repeated nor
            # double-checked; read_indirect is the verified way to read such a port
            vals = self._attempt(what, lambda: self._read_words_once(word, count, incr), idempotent=False)
        else:
            vals = self._attempt(what, lambda: self._read_words(word, count, incr))
        return [int(v) for v in vals]

    def _write32(self, address: int, value: int, posted: bool) -> None:
        self._write_burst(address, [value], True)
        if not posted:
            self._fence()
            if not self.policy.verify:
                self._attempt("write completion", self._read_sync)

    def _write_burst(self, address: int, values: Iterable[int], incr: bool) -> None:
        vals = np.asarray(list(values), dtype=np.uint32)
        if vals.size == 0:
            return
        word = self.board_map.csr(address) >> 2
        addrs = [address + 4 * i for i in range(vals.size)] if incr else [address]
        self.board_map.csr(addrs[-1])
        idempotent = incr and all(self.readback_ok(a) for a in addrs)
        if not self.policy.verify:
            # posted: queued, sent with the next read, fence, sync or close (or at 4 KiB), so a
            # run of writes costs one system call, not one each
            self._queue_write(word, vals, incr)
            return
        if idempotent:
            self._queue_write(word, vals, incr)
            for i, v in enumerate(vals):
                self._pending[word + i] = int(v)
            if len(self._pending) >= self.verify_batch:
                self._verify_pending()
            else:
                self._flush_tx()
            return
        # Non-idempotent: verify everything before it, send it once, then prove the framing held.
        self._verify_pending()
        self._queue_write(word, vals, incr)
        what = f"write of {vals.size} word(s) to {'port' if not incr else 'CSB'} {address:#x}"

        def sync_after() -> None:
            v = self._read_sync()
            if v != self.sync_value:
                raise LinkFault(f"sync read {v:#x} after write, expected {self.sync_value:#x}")

        self._attempt(what, sync_after, idempotent=False)

    # ---- indirect ports (LUT access) -----------------------------------------------------------------
    def _indirect_words(self, index_address: int, data_address: int) -> tuple[int, int]:
        self._check(index_address)
        self._check(data_address)
        return self.board_map.csr(index_address) >> 2, self.board_map.csr(data_address) >> 2

    def _indirect_read_once(self, iw: int, index_value: int, dw: int, count: int) -> np.ndarray:
        """Index write and port read in one request (the read is last, as the bridge needs).
        The read command's 6 bytes reach the bus at least 6 byte times after the write (20 µs
        at 3 Mbaud: thousands of NVDLA cycles), which covers the CFG-to-DATA latency that
        makes the RTL need a non-posted CFG write."""
        self._queue_write(iw, np.array([index_value], dtype=np.uint32), True)
        return self._read_words_once(dw, count, False)

    def _indirect_agreed(self, iw: int, index_value: int, dw: int, count: int, reads: int) -> np.ndarray:
        """``reads`` index-then-port sequences that agree; ``policy.uniform_reads`` when the
        port gave one value throughout, which is what a misaddressed fixed burst returns."""
        return self._agreeing(lambda: self._indirect_read_once(iw, index_value, dw, count), reads,
                              lambda words: bool((words == words[0]).all()), f"indirect read of port word {dw:#x}")

    def read_indirect(self, index_address: int, index_value: int, data_address: int, count: int) -> list[int]:
        """The index write and the port reads are repeated together: alone each is
        non-idempotent (the port pointer moves), as a unit they are not. Verify policy: two
        sequences must agree (more for a uniform result); plain: once, repeated on a fault."""
        iw, dw = self._indirect_words(index_address, data_address)
        if count <= 0:
            return []
        self._fence()
        reads = 2 if self.policy.verify else 1
        what = f"indirect read of {count} word(s) at CSB {data_address:#x} (index {index_address:#x} = {index_value:#x})"
        vals = [int(v) for v in self._attempt(what, lambda: self._indirect_agreed(iw, index_value, dw, count, reads))]
        self._notify("W", index_address, index_value)
        for v in vals:
            self._notify("R", data_address, v)
        return vals

    def write_indirect(
        self,
        index_address: int,
        index_value: int,
        data_address: int,
        values: Sequence[int],
        *,
        readback_index: int | None = None,
        mask: int = 0xFFFFFFFF,
    ) -> None:
        """Verify policy with ``readback_index``: index write, port writes, then the table
        read back through ``readback_index`` in the same request; on a mismatch the whole
        unit is written again (it is idempotent as a unit). This proves what a single
        port write cannot: the payload. Otherwise as the base class (port writes reported,
        never repeated, on a fault)."""
        if not self.policy.verify or readback_index is None:
            super().write_indirect(index_address, index_value, data_address, values)
            return
        iw, dw = self._indirect_words(index_address, data_address)
        vals = np.asarray([int(v) for v in values], dtype=np.uint32)
        if vals.size == 0:
            return
        self._fence()

        def unit() -> None:
            self._queue_write(iw, np.array([index_value], dtype=np.uint32), True)
            self._queue_write(dw, vals, False)
            got = self._indirect_agreed(iw, readback_index, dw, vals.size, 1)
            if not np.array_equal(got & np.uint32(mask), vals & np.uint32(mask)):
                self.stats.verify_mismatches += 1
                raise LinkFault(f"indirect write to port {data_address:#x} read back different")

        self._attempt(f"indirect write of {vals.size} word(s) at CSB {data_address:#x} "
                      f"(index {index_address:#x} = {index_value:#x})", unit)
        self._notify("W", index_address, index_value)
        for v in vals:
            self._notify("W", data_address, int(v))

    # ---- memory ------------------------------------------------------------------------------
    def _mem_base(self, address: int, size: int, port: str) -> int:
        if port != "pri_mem":
            raise TransportError(f"{self.where}: only pri_mem is mapped on this board, not {port!r}")
        return self.board_map.dram(address, size)

    def _mem_write(self, address: int, data: np.ndarray, port: str) -> None:
        size = int(data.size)
        if size == 0:
            return
        base = self._mem_base(address, size, port)
        self._fence()
        start, end = base & ~3, (base + size + 3) & ~3
        buf: np.ndarray | None = None
        if start != base or end != base + size:
            # Unaligned head/tail: read-modify-write the edge words.
            buf = np.zeros(end - start, dtype=np.uint8)
            head = self._attempt("memory head read", lambda: self._read_words(start >> 2, 1, True))
            buf[:4] = np.frombuffer(head.astype("<u4").tobytes(), dtype=np.uint8)
            if end - 4 > start:
                tail = self._attempt("memory tail read", lambda: self._read_words((end - 4) >> 2, 1, True))
                buf[-4:] = np.frombuffer(tail.astype("<u4").tobytes(), dtype=np.uint8)
            buf[base - start : base - start + size] = data
        else:
            buf = np.ascontiguousarray(data, dtype=np.uint8)
        words = buf.view("<u4").astype(np.uint32)
        first = start >> 2
        step = self.max_write_burst * 16  # words per verified chunk

        for off in range(0, words.size, step):
            chunk = words[off : off + step]

            def put(off: int = off, chunk: np.ndarray = chunk) -> None:
                self._queue_write(first + off, chunk, True)
                if self.policy.verify:
                    if not self._read_proven(first + off, chunk)[1]:
                        self.stats.verify_mismatches += 1
                        raise LinkFault(f"memory read-back mismatch near {address + 4 * off:#x}")

            self._attempt(f"memory write at {address:#x}", put)
        self._flush_tx()

    def _mem_read(self, address: int, size: int, port: str) -> np.ndarray:
        if size <= 0:
            return np.zeros(0, dtype=np.uint8)
        base = self._mem_base(address, size, port)
        self._fence()
        start, end = base & ~3, (base + size + 3) & ~3
        words = self._attempt(
            f"memory read at {address:#x}", lambda: self._read_words(start >> 2, (end - start) >> 2, True)
        )
        raw = np.frombuffer(words.astype("<u4").tobytes(), dtype=np.uint8)
        return raw[base - start : base - start + size].copy()

    @property
    def read_probe_spacing(self) -> int:
        """Under verify: a memory read that matches its expectation is proven in one read when
        every burst holds a distinctive word, so a caller that can plant such words (probes) in
        bytes nothing else touches should plant one every this many bytes; 0 under plain."""
        return 4 * max(1, self.max_read_burst - 1) if self.policy.verify else 0

    def _mem_read_expecting(self, address: int, size: int, port: str, expect: np.ndarray) -> np.ndarray:
        """Verify policy: bursts that equal ``expect`` are proven by :meth:`_read_proven` (one
        read, plus one word per uniform burst); bursts that differ are read again until two (or
        ``uniform_reads``) agree, so what comes back is what the board holds."""
        if not self.policy.verify or size <= 0:
            return self._mem_read(address, size, port)
        base = self._mem_base(address, size, port)
        self._fence()
        start, end = base & ~3, (base + size + 3) & ~3
        lo = base - start
        nwords = (end - start) >> 2
        raw_want = np.zeros(end - start, dtype=np.uint8)
        raw_want[lo : lo + size] = expect
        raw_care = np.zeros(end - start, dtype=np.uint8)
        raw_care[lo : lo + size] = 0xFF  # the edge words' other bytes are not the caller's
        want, care = raw_want.view("<u4").astype(np.uint32), raw_care.view("<u4").astype(np.uint32)
        words, _ = self._attempt(f"memory read at {address:#x}",
                                 lambda: self._read_proven(start >> 2, want[:nwords], care[:nwords], settle=True))
        raw = np.frombuffer(words.astype("<u4").tobytes(), dtype=np.uint8)
        return raw[lo : lo + size].copy()

    # ---- interrupt, reset -------------------------------------------------------------------------
    def _wait_irq(self, timeout: float | None) -> bool:
        """Poll GLB S_INTR_STATUS until a bit is set or ``timeout`` passes (no interrupt wire)."""
        self._fence()
        deadline = Timeout(timeout)
        word = self.board_map.csr(self.intr_status_address) >> 2
        while True:
            # 0 only means "poll again": no need to confirm it like a result
            v = self._attempt("interrupt status poll", lambda: self._read_words(word, 1, True, uniform=False))
            if int(v[0]):
                return True
            if deadline.expired():
                return False
            time.sleep(0.0005)

    def _reset(self) -> None:
        """Reset NVDLA: write 1 to the SoC's reset register (``reset_address``, a board bus
        address such as LiteX's ``ctrl_reset`` CSR) or run the lab's reset command."""
        if self.reset_hook is None and self.reset_address is None:
            raise TransportError(f"{self.where}: no reset_address or reset_command configured for this board")
        self._tx.clear()
        self._pending.clear()
        if self.reset_address is not None:
            self._queue_write(self.reset_address >> 2, np.array([1], dtype=np.uint32), True)
            self._flush_tx()
        else:
            assert self.reset_hook is not None  # checked above
            self.reset_hook()
        self._resync()

    def flush(self) -> None:
        """Put every queued posted write on the wire now (no round trip, nothing verified)."""
        if not self.is_open:
            raise NotOpenError()
        self._flush_tx()

    def sync(self) -> None:
        """Return once the board has processed every write sent so far (verified in verify mode)."""
        if not self.is_open:
            raise NotOpenError()
        self._fence()
        self._attempt("sync", self._read_sync)

    # ---- the board map, proven ------------------------------------------------------------------
    def _word_mapped(self, word: int) -> bool:
        """Write a distinctive value to one board word, read it back, put the old value back.
        A LiteX SoC drops a write to an address no slave decodes and answers its read with
        0xFFFFFFFF after the bus timeout (``wishbone.Timeout``, litex/soc/interconnect/wishbone.py)."""
        def once() -> bool:
            try:
                old = int(self._read_words_once(word, 1, True)[0])
                probe = (old ^ 0x5AA5_C33C) & 0xFFFF_FFFF
                self._queue_write(word, np.array([probe], dtype=np.uint32), True)
                got = int(self._read_words_once(word, 1, True)[0])
            except NoAnswer:
                # no reply at all: the bus timed out on the word (the bridge lost the read sent
                # behind a stalled write, or a bus timeout longer than its FSM timer cut the
                # reply); the resync proves the board itself is alive, or raises BoardDeadError
                self._resync()
                return False
            self._queue_write(word, np.array([old], dtype=np.uint32), True)
            self._flush_tx()
            return got == probe

        # a fault on a lossy link is told apart from an unmapped word by asking twice
        return bool(self._attempt(f"probe of board word {word:#x}", lambda: once() or once()))

    def probe_window(self, granule: int = 1 << 20) -> None:
        """Prove the board maps the whole DRAM window of :attr:`board_map` (its first and last
        word); otherwise raise :class:`BoardConfigError` naming the configured window and the part
        of it the board maps (found by bisection to ``granule`` bytes; ~20 probes)."""
        if not self.is_open:
            raise NotOpenError()
        self._fence()
        bm = self.board_map
        first, last = bm.dram_base >> 2, (bm.dram_base + bm.dram_size - 4) >> 2
        lab = (f"the configured DRAM window (NVDLA {bm.dram_nvdla_base:#x}..{bm.dram_nvdla_base + bm.dram_size - 1:#x} "
               f"at board {bm.dram_base:#x}..{bm.dram_base + bm.dram_size - 1:#x}; lab file fields dram_base, "
               f"dram_nvdla_base, dram_size)")
        if not self._word_mapped(first):
            raise BoardConfigError(f"{self.where}: the board maps nothing at board address {bm.dram_base:#x}, the start of "
                                   f"{lab}; the board's memory is elsewhere: set dram_base to where its DRAM sits")
        if self._word_mapped(last):
            return
        lo, hi = 0, bm.dram_size  # mapped at offset lo, unmapped at hi - 4
        while hi - lo > granule:
            mid = (lo + (hi - lo) // 2) & ~3
            if self._word_mapped((bm.dram_base + mid) >> 2):
                lo = mid
            else:
                hi = mid
        end = bm.dram_base + hi
        raise BoardConfigError(
            f"{self.where}: {lab} is larger than the board's: the board maps board {bm.dram_base:#x}..~{end - 1:#x} "
            f"(NVDLA {bm.dram_nvdla_base:#x}..~{bm.dram_nvdla_base + hi - 1:#x}, {hi >> 20} MiB, probed to "
            f"{granule >> 10} KiB) but not board {bm.dram_base + bm.dram_size - 4:#x}; make dram_size at most {hi:#x} "
            f"or serve the board with a larger window")
