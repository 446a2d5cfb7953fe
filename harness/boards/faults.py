"""Fault injection on the emulated link: seeded per-byte drops and corruption in both
directions, a response delay, a link that goes silent and one that stops reading (a hung
bridge). :class:`FaultConfig` says what; :class:`ByteFaults` applies it to a byte stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bridge import EmuStats


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Per-byte fault rates (both directions), response delay and a silent link."""

    drop: float = 0.0
    corrupt: float = 0.0
    delay: float = 0.0  # seconds: each response waits uniform(0, delay)
    silent_after: int | None = None  # received bytes after which the board stops answering
    #: received bytes after which the board stops reading its link at all (a hung bridge, a
    #: stopped ``litex_server``): the host's writes then fill the OS buffers and block
    wedge_after: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("drop", "corrupt"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise ValueError(f"fault rate {name}={v} outside [0, 1)")
        if self.delay < 0:
            raise ValueError(f"delay {self.delay} must be >= 0")

    @property
    def active(self) -> bool:
        return bool(self.drop or self.corrupt)


class ByteFaults:
    """Drops and corrupts bytes of a stream at :class:`FaultConfig`'s rates, from its seed."""

    def __init__(self, cfg: FaultConfig, stats: EmuStats) -> None:
        self.cfg = cfg
        self.stats = stats
        self.rng = np.random.default_rng(cfg.seed)

    def apply(self, data: bytes) -> bytes:
        if not data or not self.cfg.active:
            return data
        arr = np.frombuffer(data, dtype=np.uint8).copy()
        n = arr.size
        if self.cfg.corrupt:
            hit = self.rng.random(n) < self.cfg.corrupt
            k = int(hit.sum())
            if k:
                arr[hit] ^= self.rng.integers(1, 256, size=k, dtype=np.uint8)
                self.stats.corrupted += k
        if self.cfg.drop:
            keep = self.rng.random(n) >= self.cfg.drop
            self.stats.dropped += int(n - keep.sum())
            arr = arr[keep]
        return arr.tobytes()
