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
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...drivers.transport import TransportError
from ...drivers.uartbone import BoardConfigError, BoardDeadError, SerialTransport
from ..lab import BoardBusyError, BoardConfig, BoardLock, LabError, resolve_board, run_reset
from ..memory import KnownMemory

__all__ = ["BoardDeadError", "BoardMemoryBook", "SerialTarget", "make_serial_transport", "open_serial_target", "probe_board"]


class BoardMemoryBook:
    """What one session knows its boards' memory holds, from one test to the next.

    A board keeps its DRAM across tests and resets, so after a test the host still knows the
    bytes it wrote and read back there; the next test on a slow link need not send them again
    (``harness.traces``, lean set-up). The knowledge is only kept when the test accounted for
    every change (:meth:`SerialTarget.vouch_known_memory`: a passing run of the trace or
    vector player, nothing else done on the link after it), and only while nobody else used
    the board: every close of a :class:`SerialTarget` on the board, with or without a book,
    writes a fresh stamp next to the board's lock, and a book hands back its record only
    when the stamp is still the one it wrote. One book per regression session (the pytest
    plugin keeps it in the session; there is no process-wide one)."""

    def __init__(self) -> None:
        self._records: dict[str, tuple[str, dict[str, KnownMemory]]] = {}

    def take(self, board: str, stamp_path: Path) -> dict[str, KnownMemory]:
        """The board's record if this book wrote the board's current stamp, else an empty one."""
        kept = self._records.pop(board, None)
        try:
            stamp = stamp_path.read_text().strip()
        except OSError:
            stamp = ""
        if kept is not None and stamp and kept[0] == stamp:
            return kept[1]
        return {"pri_mem": KnownMemory()}

    def keep(self, board: str, stamp: str, record: dict[str, KnownMemory]) -> None:
        self._records[board] = (stamp, record)


def _new_stamp(stamp_path: Path) -> str:
    """Write a fresh stamp (atomically) saying the board was used; ``""`` if it cannot be written."""
    stamp = uuid.uuid4().hex
    tmp = stamp_path.with_name(f"{stamp_path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(stamp + "\n")
        os.replace(tmp, stamp_path)
    except OSError:
        return ""
    return stamp


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
        board_name=cfg.name,
    )


def make_serial_transport(cfg: BoardConfig, readback_ok: Callable[[int], bool] | None = None) -> SerialTransport:
    """An unopened :class:`SerialTransport` (an :class:`~nvdla_hil.drivers.etherbone.EtherboneTransport`
    for ``transport: litex_server``) configured from one lab board entry; unless given, the
    read-back rules come from the board profile's register map. A labgrid board needs its place
    acquired first: use :class:`SerialTarget`."""
    if cfg.labgrid_place:
        raise LabError(f"board {cfg.name!r} is a labgrid place ({cfg.labgrid_place}): open it as a SerialTarget")
    kw = _transport_kwargs(cfg, readback_ok)
    if cfg.transport == "litex_server":
        from ...drivers.etherbone import EtherboneTransport

        kw["board_timeout"] = min(kw["board_timeout"], 0.005)
        return EtherboneTransport(**kw)
    return SerialTransport(**kw)


def _window_error(lab_path: object, cfg: BoardConfig, e: BoardConfigError) -> LabError:
    msg = str(e)
    return LabError(f"{lab_path}: {msg}" if f"board {cfg.name!r}" in msg else f"{lab_path}: board {cfg.name!r}: {msg}")


def probe_board(lab_path: str | os.PathLike[str] | None, board_name: str | None) -> None:
    """Open the board's link without a lock (the caller holds the board: a regression's session
    lock) and prove its DRAM window (:meth:`SerialTransport.probe_window`). A window the board
    does not map raises :class:`~nvdla_hil.harness.lab.LabError` naming both windows: a
    configuration error (``nvdla-hil regress`` exit 2), not a link fault."""
    lab, cfg = resolve_board(lab_path, board_name)
    if not cfg.probe_window or cfg.labgrid_place:
        return  # a labgrid place is probed when a test acquires it
    with make_serial_transport(cfg) as t:
        try:
            t.probe_window()
        except BoardConfigError as e:
            raise _window_error(lab.path, cfg, e) from None


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

    #: a UART is a slow link: NVDLA traces send only the bytes their layers read and the checked
    #: regions, already poisoned, and read nothing before the run (harness.traces, setup="lean")
    lean_setup = True

    def __init__(self, lab_path: str | os.PathLike[str] | None, board_name: str | None, wait: float = 0, *,
                 readback_ok: Callable[[int], bool] | None = None, session_lock: dict | None = None,
                 memory_book: BoardMemoryBook | None = None) -> None:
        self.lab, cfg = resolve_board(lab_path, board_name)
        self._readback_ok = readback_ok
        self._wait = wait
        self.session_lock = dict(session_lock) if session_lock else None
        self.memory_book = memory_book
        #: per memory port, what the board is known to hold (see :class:`BoardMemoryBook`)
        self.known_memory: dict[str, KnownMemory] = {"pri_mem": KnownMemory()}
        self._vouched: tuple[int, int] | None = None
        self._lock: BoardLock | None = None
        self._place: Any = None  # a LabgridPlace while open (labgrid is an optional dependency)
        self.cfg = cfg
        super().__init__(**self._kwargs(cfg))

    def _kwargs(self, cfg: BoardConfig) -> dict:
        kw = _transport_kwargs(cfg, self._readback_ok)
        if cfg.transport == "litex_server":
            from ...drivers.etherbone import EB_MAX

            kw.update(board_timeout=min(kw["board_timeout"], 0.005), max_write_burst=EB_MAX, max_read_burst=EB_MAX)
        return kw

    def _make_port(self):  # noqa: ANN202 - a pyserial-like port
        """The board's port: Etherbone to litex_server for ``transport: litex_server``."""
        if self.cfg.transport == "litex_server":
            from ...drivers.etherbone import EtherbonePort, parse_tcp_url

            host, port = parse_tcp_url(self.url)
            return EtherbonePort(host, port, connect_timeout=max(1.0, self.response_timeout + 1.0))
        return super()._make_port()

    def describe(self) -> str:
        via = f"litex_server {self.url}" if self.cfg.transport == "litex_server" else f"UARTBone {self.url}"
        place = f", labgrid place {self.cfg.labgrid_place}" if self.cfg.labgrid_place else ""
        return f"board {self.cfg.name!r}: {via} ({self.policy.mode}, {self.profile_name}{place})"

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
                    SerialTransport.__init__(self, **self._kwargs(cfg))
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

    def _lease_place(self) -> None:
        """A labgrid board: acquire its place (or use this user's acquisition); its serial
        resource is the endpoint this open talks to."""
        from ..labgrid_place import LabgridPlace

        place = LabgridPlace(self.cfg.labgrid_place or "", self.cfg.labgrid_coordinator)
        self.url = place.acquire().url
        self._place = place

    def open(self) -> None:
        if self.is_open:
            return super().open()  # raises "already open"
        if self.session_lock:
            self._take_session_board()
        else:
            lock = BoardLock(self.cfg.url, self.lab.lock_dir, board=self.cfg.name)
            lock.acquire(self._wait)
            self._lock = lock
        self._vouched = None
        self.known_memory = (self.memory_book.take(self.cfg.name, self._stamp_path()) if self.memory_book
                             else {"pri_mem": KnownMemory()})
        try:
            if self.cfg.labgrid_place:
                self._lease_place()
            super().open()
            if self.cfg.reset_address is not None:
                self.reset()  # every test starts from a reset NVDLA, as NVDLA's own flow does
            if self.cfg.probe_window:
                self.probe_window()
        except BaseException as e:
            try:
                super().close()
            finally:
                self._release()
            if isinstance(e, BoardConfigError):
                raise _window_error(self.lab.path, self.cfg, e) from None
            if isinstance(e, TransportError) and f"board {self.cfg.name!r}" not in str(e):
                msg = f"board {self.cfg.name!r} ({self.lab.path}): {e}"
                try:
                    wrapped = type(e)(msg)  # the same class: BoardDeadError stays BoardDeadError
                except TypeError:
                    wrapped = TransportError(msg)
                raise wrapped from e
            raise

    def _stamp_path(self) -> Path:
        assert self._lock is not None
        return Path(str(self._lock.path).removesuffix(".use") + ".mem")

    def vouch_known_memory(self) -> None:
        """The run just finished accounted for every change to the board's memory (a passing
        trace or vector run): :attr:`known_memory` may serve the next test, unless anything
        else crosses the link before this target closes."""
        self._vouched = (self.stats.tx_bytes, self.stats.rx_bytes)

    def _release(self) -> None:
        if self._lock is not None:
            stamp = _new_stamp(self._stamp_path())
            vouched = self._vouched is not None and self._vouched == (self.stats.tx_bytes, self.stats.rx_bytes)
            if self.memory_book is not None and stamp and vouched and self._dead is None:
                self.memory_book.keep(self.cfg.name, stamp, self.known_memory)
            self._vouched = None
        lock, self._lock = self._lock, None
        place, self._place = self._place, None
        try:
            if place is not None:
                place.release()
        finally:
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
    memory_book: BoardMemoryBook | None = None,
) -> SerialTarget:
    """The board ``board_name`` of the lab file as an unopened :class:`SerialTarget`; ``with``
    it (or ``open()`` it) to lock the board, open its link and reset NVDLA.

    ``lab_path``/``board_name`` default to ``NVDLA_HIL_LAB``/``NVDLA_HIL_BOARD``. ``wait`` is how
    long to wait for a busy board (0: fail at once with who holds it). The lock is held while
    the target is open and dropped by the kernel if the process dies. ``readback_ok`` tells the
    verify policy which registers read back (from the register map). ``session_lock``: see
    :class:`SerialTarget`.
    """
    return SerialTarget(lab_path, board_name, wait, readback_ok=readback_ok, session_lock=session_lock,
                        memory_book=memory_book)
