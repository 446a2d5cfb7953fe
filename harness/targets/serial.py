"""Serial (LiteX UARTBone) target from a lab file: lock the board, open the link, release both.

:class:`SerialTarget` is a :class:`~nvdla_hil.drivers.transport.Transport` (a
:class:`~nvdla_hil.drivers.uartbone.SerialTransport`) whose ``open()`` also takes the board and
whose ``close()`` releases it, so ``open_target`` hands every caller the same kind of open,
typed object on every target.

Outside a regression (``regs``, ``trace``, scripts) each target takes the board's lock itself.
Inside a regression the pytest controller holds the session's boards for the whole session
(:class:`~nvdla_hil.harness.lab.SessionBoardLock`, one per board of a pool) and passes
``session_lock`` (the lock files and the holder's PID) to every test's target: the target checks
that the session still holds them, then takes one board's ``.use`` file (its xdist worker's own
board first) so that no board is used by two tests at once, and never takes (or drops) a board
lock itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ...drivers.transport import TransportError
from ...drivers.uartbone import SerialTransport
from ..lab import BoardBusyError, BoardConfig, BoardLock, resolve_board, run_reset

__all__ = ["SerialTarget", "make_serial_transport", "open_serial_target"]


def readback_rules(profile: str) -> tuple[Callable[[int], bool], Callable[[int], int], Callable[[int], bool]]:
    """``readback_ok``/``readback_mask``/``read_pops`` for the verify policy, from the profile's
    register map: a register reads back when it has no side effect on write and every field
    is read-write; the bits compared are its fields (undefined bits read 0). Reads of the LUT
    data ports advance the LUT address (semantics doc 7): those pop."""
    from ...drivers.profiles import load_profile
    from ...drivers.regmap import RegisterMapError

    regmap = load_profile(profile).regmap

    def reg(address: int):  # noqa: ANN202
        try:
            return regmap.by_address(address)
        except RegisterMapError:
            return None

    def ok(address: int) -> bool:
        r = reg(address)
        return bool(r and not r.trigger and r.fields and all(f.access == "rw" for f in r.fields.values()))

    def mask(address: int) -> int:
        r = reg(address)
        return r.writable_mask if r else 0xFFFFFFFF

    def pops(address: int) -> bool:
        r = reg(address)
        return bool(r and r.name == "S_LUT_ACCESS_DATA")

    return ok, mask, pops


def _transport_kwargs(cfg: BoardConfig, readback_ok: Callable[[int], bool] | None = None) -> dict:
    ok, mask, pops = readback_rules(cfg.profile)
    return dict(
        url=cfg.url,
        baudrate=cfg.baud,
        board_map=cfg.board_map,
        policy=cfg.policy,
        readback_ok=readback_ok or ok,
        readback_mask=mask,
        read_pops=pops,
        response_timeout=cfg.response_timeout,
        board_timeout=cfg.board_timeout,
        profile_name=cfg.profile,
        reset_hook=run_reset(cfg),
        reset_address=cfg.reset_address,
    )


def make_serial_transport(cfg: BoardConfig, readback_ok: Callable[[int], bool] | None = None) -> SerialTransport:
    """An unopened :class:`SerialTransport` configured from one lab board entry; unless given,
    the read-back rules come from the board profile's register map."""
    return SerialTransport(**_transport_kwargs(cfg, readback_ok))


class SerialTarget(SerialTransport):
    """A lab board as a :class:`~nvdla_hil.drivers.transport.Transport`: ``open()`` takes the
    board (its lock, or inside a regression the session's per-use lock), opens the link and
    resets NVDLA (when the board has a ``reset_address``); ``close()`` releases all of it, also
    after an error. Use it as a context manager (``with open_target(spec) as t``), like every
    other target.

    ``session_lock`` (set by the pytest plugin) says a regression session holds the boards:
    ``{"pid": controller PID, "boards": [{"name", "path"}, ...], "home": index, "wait": s,
    "workers": n, "pool": name}`` (or the older single-board ``{"path", "pid"}``). The target
    checks that the session still holds them, then takes the ``.use`` lock of one of them: its
    worker's own board first (``home``), else the first that frees up, waiting at most ``wait``
    seconds. So a board is never used by two tests at once, and a worker with a board of its
    own never waits.
    """

    def __init__(self, lab_path: str | os.PathLike[str] | None, board_name: str | None, wait: float = 0, *,
                 readback_ok: Callable[[int], bool] | None = None, session_lock: dict | None = None) -> None:
        self.lab, cfg = resolve_board(lab_path, board_name)
        self._readback_ok = readback_ok
        self._wait = wait
        self.session_lock = dict(session_lock) if session_lock else None
        self._lock: BoardLock | None = None
        self.cfg = cfg
        super().__init__(**_transport_kwargs(cfg, readback_ok))

    @property
    def board_name(self) -> str:
        """The lab name of the board this target talks (or last talked) to."""
        return self.cfg.name

    def _candidates(self) -> list[tuple[str, str]]:
        s = self.session_lock or {}
        boards = s.get("boards") or [{"name": self.cfg.name, "path": s["path"]}]
        home = int(s.get("home", 0)) % len(boards)
        order = boards[home:] + boards[:home]
        return [(str(b["name"]), str(b["path"])) for b in order]

    def _take_session_board(self) -> None:
        s = self.session_lock
        assert s is not None
        pid = int(s["pid"])
        cands = self._candidates()
        for name, path in cands:
            cfg = self.lab.board(name)
            held = BoardLock(cfg.url, board=name, path=path)
            if not held.is_held_by(pid):
                raise BoardBusyError(
                    f"board {name!r}: this regression (PID {pid}) no longer holds its lock {path}; "
                    f"now held by {held.holder()}")
        wait = float(s.get("wait", 300.0))
        deadline = time.monotonic() + wait
        while True:
            for name, path in cands:
                cfg = self.lab.board(name)
                lock = BoardLock(cfg.url, board=name, path=path + ".use")
                try:
                    lock.acquire(0)
                except BoardBusyError:
                    continue
                self._lock = lock
                if name != self.cfg.name:  # another board of the session's pool: its link settings
                    observers = list(self._observers)
                    self.cfg = cfg
                    SerialTransport.__init__(self, **_transport_kwargs(cfg, self._readback_ok))
                    self._observers = observers
                return
            if len(cands) == 1:  # one board: wait for the other workers' test, as long as it takes
                lock = BoardLock(self.cfg.url, board=self.cfg.name, path=cands[0][1] + ".use")
                lock.acquire(None)
                self._lock = lock
                return
            if time.monotonic() >= deadline:
                pool = f" in pool {s['pool']}" if s.get("pool") else ""
                users = "; ".join(f"{n}: {BoardLock(self.lab.board(n).url, board=n, path=p + '.use').holder()}"
                                  for n, p in cands)
                raise BoardBusyError(
                    f"{s.get('workers', '?')} workers, {len(cands)} boards{pool}: waited {wait:g} s for a board "
                    f"and none came free (in use by {users}); use fewer workers (-n) or more boards, or raise "
                    f"--nvdla-board-wait")
            time.sleep(0.05)

    def open(self) -> None:
        if self.is_open:
            return super().open()  # raises "already open"
        if self.session_lock:
            self._take_session_board()
        else:
            lock = BoardLock(self.cfg.url, self.lab.lock_dir, board=self.cfg.name)
            lock.acquire(self._wait)
            self._lock = lock
        try:
            super().open()
            if self.cfg.reset_address is not None:
                self.reset()  # every test starts from a reset NVDLA, as NVDLA's own flow does
        except BaseException as e:
            try:
                super().close()
            finally:
                self._release()
            if isinstance(e, TransportError):
                raise TransportError(f"board {self.cfg.name!r} ({self.lab.path}): {e}") from e
            raise

    def _release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()

    def __enter__(self) -> SerialTarget:
        if not self.is_open:
            self.open()
        return self


def open_serial_target(
    lab_path: str | os.PathLike[str] | None,
    board_name: str | None,
    wait: float = 0,
    *,
    readback_ok: Callable[[int], bool] | None = None,
    session_lock: dict | None = None,
) -> SerialTarget:
    """The board ``board_name`` of the lab file as an unopened :class:`SerialTarget`; ``with``
    it (or ``open()`` it) to lock the board, open its link and reset NVDLA.

    ``lab_path``/``board_name`` default to ``NVDLA_HIL_LAB``/``NVDLA_HIL_BOARD``. ``wait`` is how
    long to wait for a busy board (0: fail at once with who holds it). The lock is held while
    the target is open and dropped by the kernel if the process dies. ``readback_ok`` tells the
    verify policy which registers read back (from the register map). ``session_lock``: see
    :class:`SerialTarget`.
    """
    return SerialTarget(lab_path, board_name, wait, readback_ok=readback_ok, session_lock=session_lock)
