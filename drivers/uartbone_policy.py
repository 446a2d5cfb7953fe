"""The UARTBone link's integrity policy and its accounting.

Integrity (the link has no checksum; see ``docs`` in :class:`IntegrityPolicy`):

* ``plain``: a short or late response is detected (timeout), the link is resynchronised and
  idempotent operations are retried. A corrupted byte in a response is **not** detected.
* ``verify``: every read is done twice in separate round trips and the two must agree
  (four times when the result is uniform, see ``VerifiedLink._uniform`` in :mod:`.uartbone_verify`);
  every write to a register that reads back (``readback_ok``) is read back and compared,
  and rewritten on mismatch (a uniform read-back, e.g. a written 0, is confirmed the same
  way). Memory writes are read back, and a memory read whose caller knows what it should
  hold (``mem_read(expect=...)``: a check's golden) is done once when it matches
  (``VerifiedLink._read_proven``): a result equal to the expected one is not what link
  noise makes, unless a misaddressed burst lands on an identical copy, which is plausible
  only for a uniform burst; such a burst is read again one word longer, over a distinctive
  neighbour word, else by the ``uniform_reads`` rule (the trace player plants distinctive
  probe words in the never-written gaps of checked regions so that this is rare, see
  ``read_probe_spacing``). A read that does not match is read again until two reads agree
  (four when uniform), so it returns what the board holds. Writes to registers that do not read back (triggers,
  LUT data port, W1C) are non-idempotent: each is followed by a read of the sync register
  that proves the framing survived; if it did not, LinkIntegrityError. Reads of a data
  port that pops (``read_pops``, fixed bursts) are done once and never repeated.
* Indirect ports (``read_indirect``/``write_indirect``: the LUT's CFG/DATA pair) are
  idempotent as a unit: under ``verify`` a table is written, read back through the pair
  in the same request and rewritten whole on a mismatch; a table read is two agreeing
  CFG-then-read sequences. This proves the payload that a lone port write cannot.
  NVDLA's traces program the LUT register by register; the trace player sends each CFG +
  DATA run through ``write_indirect`` so those are proven too.
  What verify cannot catch: a corrupted *payload* byte of a raw non-readback write (a
  trigger such as OP_ENABLE, a write-1-to-clear), and a stray
  write that a corrupted address or command byte sends to another register. Both need a
  link with a checksum (Etherbone over UDP, or a CRC'd bridge).

Guarantees under ``verify`` (tested by fault injection through ``harness/boards/emulator.py``,
0.5 % dropped + 0.5 % corrupted bytes each way): every value returned by a read, and every
readback-able write reported as done, matched the board's register at that moment; any
other outcome raised LinkIntegrityError or TransportTimeoutError within the retry budget
(each wait bounded by ``response_timeout`` + wire time; a resync by ~1.5x the FSM timer).
Not guaranteed: the payload of raw non-readback writes, and registers hit by stray writes.
Residual risk for reads: independently corrupted reads agreeing on the same wrong value.
A corrupted request address (4 of the 6 header bytes) is the way there: at a per-byte
corruption rate p each read misses with q ~ 4p, and the wrong words are mostly uniform
(unmapped space reads all ones on a LiteX SoC, 0 elsewhere), so two agreeing reads would leave ~q^2 (4e-4 at p = 0.5 %, the
campaign's first silent failures); uniform results take four reads (q^4 ~ 2e-7), and a
distinctive result needs both corrupted addresses to be the same one (~q^2 / 1020).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["IntegrityPolicy", "LinkStats", "fill_like"]


@dataclass(frozen=True, slots=True)
class IntegrityPolicy:
    """``mode``: ``plain`` or ``verify`` (module docstring); ``retries`` per operation;
    ``uniform_reads``: in verify mode, how many reads must agree on a result that a
    corrupted request address would plausibly also produce (a uniform window, a register
    reading 0 or all ones); any other result needs two. ``dead_after``: resynchronisations
    in a row that get no answer at all (each after the bridge's FSM timer has surely reset
    it) before the board is declared dead (:class:`BoardDeadError`); a link that loses
    bytes often (a fault campaign) needs more than the default."""

    mode: str = "verify"
    retries: int = 3
    uniform_reads: int = 4
    dead_after: int = 2

    def __post_init__(self) -> None:
        if self.mode not in ("plain", "verify"):
            raise ValueError(f"integrity mode {self.mode!r} is not one of 'plain', 'verify'")
        if self.retries < 0:
            raise ValueError(f"integrity retries {self.retries} must be >= 0")
        if self.uniform_reads < 2:
            raise ValueError(f"integrity uniform_reads {self.uniform_reads} must be >= 2")
        if self.dead_after < 1:
            raise ValueError(f"integrity dead_after {self.dead_after} must be >= 1")

    @property
    def verify(self) -> bool:
        return self.mode == "verify"


@dataclass(slots=True)
class LinkStats:
    """Wire accounting. ``round_trips`` counts requests that waited for a response."""

    tx_bytes: int = 0
    rx_bytes: int = 0
    round_trips: int = 0
    commands: int = 0
    retries: int = 0
    resyncs: int = 0
    link_faults: int = 0
    discarded_bytes: int = 0
    verify_mismatches: int = 0

    def reset(self) -> None:
        for f in self.__dataclass_fields__:
            setattr(self, f, 0)

    def snapshot(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def fill_like(word: np.uint32) -> bool:
    """A lone word that a fill could have left anywhere: its four bytes equal (0, all ones,
    0xA5A5A5A5); another single word is as distinctive as a burst."""
    w = int(word)
    return w == (w & 0xFF) * 0x01010101
