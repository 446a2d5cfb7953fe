"""The UARTBone link's readback rules: agreeing reads, proven reads, verified writes.

The link carries no checksum, so under the ``verify`` policy (:mod:`.uartbone_policy`) a read
counts only when separate reads agree, or when it equals what the caller expects; a register
write counts once it reads back. Address errors are the residual risk: a result that a
misaddressed request would also give (uniform words, 0, all ones) needs more agreeing reads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .transport import LinkIntegrityError
from .uartbone_link import LinkFault, UartboneLink
from .uartbone_policy import fill_like
from .uartbone_wire import encode_write

__all__ = ["VerifiedLink"]


class VerifiedLink(UartboneLink):
    """:class:`UartboneLink` with the integrity policy's read and write rules (word level)."""

    def _uniform(self, word: int, words: np.ndarray, incr: bool) -> bool:
        """Could a corrupted request address have produced ``words`` (one burst)? UARTBone
        carries no checksum, so a corrupted address byte reads another location, most often
        unmapped or untouched space (0, or all ones on a bus error) or a constant-filled
        buffer. Two such reads agree whenever both land in it: a uniform incrementing burst,
        or one register reading 0 or all ones, needs ``policy.uniform_reads`` agreeing reads.
        A DRAM word alone counts as uniform (memory may hold a fill pattern anywhere)."""
        if incr and words.size > 1:
            return bool((words == words[0]).all())
        region = self.board_map.decode(word * 4)
        return (region is not None and region[0] == "dram") or int(words[0]) in (0, 0xFFFFFFFF)

    def _agreeing(self, read: Callable[[], np.ndarray], reads: int, suspect: Callable[[np.ndarray], bool],
                  what: str) -> np.ndarray:
        """``read()`` done ``reads`` times, or ``policy.uniform_reads`` times when the first
        result is ``suspect`` (one a misaddressed request would also give); all must agree."""
        first = read()
        need = max(reads, self.policy.uniform_reads) if suspect(first) else reads
        for _ in range(need - 1):
            if not np.array_equal(first, read()):
                self.stats.verify_mismatches += 1
                raise LinkFault(f"{what} differs between reads")
        return first

    def _read_agreed(self, word: int, count: int, incr: bool, reads: int, uniform: bool = True) -> np.ndarray:
        """Each burst read ``reads`` times in separate round trips, all agreeing; with
        ``uniform``, ``policy.uniform_reads`` times when the burst is :meth:`_uniform` (an
        address error hits one request, so the rule applies burst by burst)."""
        out = np.empty(count, dtype=np.uint32)
        for done in range(0, count, self.max_read_burst):
            n = min(self.max_read_burst, count - done)
            w = word + (done if incr else 0)
            def once(w: int = w, n: int = n) -> np.ndarray:
                return self._read_words_once(w, n, incr)

            def suspicious(words: np.ndarray, w: int = w) -> bool:
                return bool(uniform and self._uniform(w, words, incr))

            out[done : done + n] = self._agreeing(once, reads, suspicious, f"read of word {w:#x}+{n}")
        return out

    def _read_words(self, word: int, count: int, incr: bool, uniform: bool = True) -> np.ndarray:
        """Policy-checked read: in verify mode two separate reads must agree, or
        ``policy.uniform_reads`` when the result is one an address error would also give."""
        if not self.policy.verify:
            return self._read_words_once(word, count, incr)
        return self._read_agreed(word, count, incr, 2, uniform)

    def _read_proven(self, word: int, want: np.ndarray, mask: np.ndarray | None = None, *,
                     settle: bool = False) -> tuple[np.ndarray, bool]:
        """Verify policy for a read whose result the caller expects (``want``, compared on the
        bits of ``mask``): a write's read-back, a check's golden. Returns the words and whether
        every burst equalled ``want``.

        One read, in bursts one word short of the longest. A burst equal to what was expected
        is not what link noise makes, unless a misaddressed request lands on an identical copy:
        likely only for a uniform burst (zeros, a fill). So each uniform burst is read once
        more, extended over a distinctive neighbour word (not 0 or all ones, from a
        non-uniform burst): the pair proves the address at the cost of one word, not
        ``uniform_reads - 1`` whole reads; a uniform burst with no such neighbour takes the
        ``uniform_reads`` rule (callers plant distinctive words where they can,
        :attr:`read_probe_spacing`). A burst that differs from ``want`` is, with
        ``settle``, read again by the plain verify rule (the first read counts: two agreeing
        reads, ``uniform_reads`` when uniform), else returned as read (a write's read-back:
        the caller rewrites). A proof read that disagrees is a link fault (the caller retries)."""
        count = int(want.size)
        care = np.full(count, 0xFFFFFFFF, dtype=np.uint32) if mask is None else mask
        step = max(1, self.max_read_burst - 1)
        out = np.empty(count, dtype=np.uint32)
        bursts = [(d, min(step, count - d)) for d in range(0, count, step)]
        for d, n in bursts:
            out[d : d + n] = self._read_words_once(word + d, n, True)
        same = (out & care) == (want & care)
        ok = [bool(same[d : d + n].all()) for d, n in bursts]
        flat = [fill_like(out[d]) if n == 1 else bool((out[d : d + n] == out[d]).all()) for d, n in bursts]

        def distinctive(j: int, u: int) -> bool:
            v = int(out[j])
            b = j // step
            return v != u and v not in (0, 0xFFFFFFFF) and ok[b] and not flat[b]

        def again(lo: int, hi: int, times: int) -> None:
            for _ in range(times):
                if not np.array_equal(self._read_words_once(word + lo, hi - lo, True), out[lo:hi]):
                    self.stats.verify_mismatches += 1
                    raise LinkFault(f"read of word {word + lo:#x}+{hi - lo} differs between reads")

        for b, (d, n) in enumerate(bursts):
            if not ok[b]:
                if settle:  # the board holds something else: the plain verify rule
                    again(d, d + n, (self.policy.uniform_reads if flat[b] else 2) - 1)
                continue
            if not flat[b]:
                continue
            u = int(out[d])
            if d + n < count and distinctive(d + n, u):
                again(d, d + n + 1, 1)
            elif d > 0 and distinctive(d - 1, u):
                again(d - 1, d + n, 1)
            else:  # no neighbour: the uniform rule (a fault campaign found two agreeing reads too few)
                again(d, d + n, self.policy.uniform_reads - 1)
        return out, all(ok)

    def _read_back(self, word: int, count: int) -> np.ndarray:
        """Read back words just written (verify mode): one read proves a distinctive value;
        a uniform one (writing 0 is the common case) is what a write sent elsewhere plus a
        misaddressed read-back would also show, so it takes ``policy.uniform_reads``."""
        return self._read_agreed(word, count, True, 1)

    def _mask_of_word(self, word: int) -> int:
        """Read-back mask of the register at board word address ``word``."""
        a = word * 4
        bm = self.board_map
        if bm.csr_base <= a < bm.csr_base + bm.csr_size:
            return self.readback_mask(a - bm.csr_base) & 0xFFFFFFFF
        return 0xFFFFFFFF

    def _verify_pending(self) -> None:
        """Read back every pending readback-able write; on mismatch rewrite all of them (idempotent)."""
        if not self._pending:
            self._flush_tx()
            return
        pending = dict(self._pending)

        def check() -> None:
            items = sorted(pending.items())
            i = 0
            while i < len(items):
                j = i + 1
                while j < len(items) and items[j][0] == items[j - 1][0] + 1 and j - i < self.max_read_burst:
                    j += 1
                got = self._read_back(items[i][0], j - i)
                want = np.array([v for _, v in items[i:j]], dtype=np.uint32)
                mask = np.array([self._mask_of_word(w) for w, _ in items[i:j]], dtype=np.uint32)
                if not np.array_equal(got & mask, want & mask):
                    self.stats.verify_mismatches += 1
                    raise LinkFault(f"write read-back mismatch at word {items[i][0]:#x}")
                i = j

        try:
            for attempt in range(self.policy.retries + 1):
                try:
                    check()
                    return
                except LinkFault as e:
                    self.stats.link_faults += 1
                    self._resync()
                    if attempt == self.policy.retries:
                        raise LinkIntegrityError(
                            f"{self.where}: register writes could not be verified after "
                            f"{attempt + 1} attempts: {e}"
                        ) from None
                    self.stats.retries += 1
                    for w, v in sorted(pending.items()):
                        self._tx += encode_write(w, [v])
                        self.stats.commands += 1
        finally:
            self._pending.clear()

    def _fence(self) -> None:
        """Make every queued write happen (and, in verify mode, prove it)."""
        if self.policy.verify:
            self._verify_pending()
        else:
            self._flush_tx()
