"""Serial (LiteX UARTBone) target from a lab file: lock the board, open the link, release both.

:class:`SerialTarget` is a :class:`~nvdla_hil.drivers.transport.Transport` (a
:class:`~nvdla_hil.drivers.uartbone.SerialTransport`) whose ``open()`` also takes the board and
whose ``close()`` releases it, so ``open_target`` hands every caller the same kind of open,
typed object on every target.

Outside a regression (``regs``, ``trace``, scripts) each target takes the board's lock itself.
Inside a regression the pytest controller holds the session's boards for the whole session
(:class:`~nvdla_hil.harness.boards.lab.SessionBoardLock`, one per board of a pool) and passes
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

from ...drivers.transport import Transport, TransportError
from ...drivers.uartbone import BoardConfigError, BoardDeadError, SerialTransport
from ..boards.lab import BoardBusyError, BoardConfig, BoardLock, LabError, resolve_board, run_reset
from ..boards.quarantine import quarantine_path, quarantined
from .memory import KnownMemory

__all__ = ["BoardDeadError", "BoardMemoryBook", "SerialTarget", "make_serial_transport", "open_serial_target", "probe_board",
           "restore_known_state"]


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
    does not map raises :class:`~nvdla_hil.harness.boards.lab.LabError` naming both windows: a
    configuration error (``nvdla-hil regress`` exit 2), not a link fault."""
    lab, cfg = resolve_board(lab_path, board_name)
    if cfg.labgrid_place:
        _probe_place(lab.path, cfg)
    elif cfg.probe_window:
        with make_serial_transport(cfg) as t:
            try:
                t.probe_window()
            except BoardConfigError as e:
                raise _window_error(lab.path, cfg, e) from None


def check_reset(lab_path: object, cfg: BoardConfig) -> None:
    """A regression's boards must come back to a known state before every test: a reset
    (``reset_address`` or ``reset_command``), or, accepted explicitly with ``reset: registers``,
    :func:`restore_known_state`. Registers alone are not equivalent to a reset: a unit's
    register-group consumer pointer and the state a layer leaves inside NVDLA (the convolution
    buffer, a flying SDP->PDP pipeline) persist; on nv_small, pdp_flying_rtl/fuzz-sdp-pdp-s2-00001
    times out after -00000 with every register restored (``tests/test_lab_reset.py``). So a board
    with no reset is refused (:class:`LabError`, exit 2) naming what is missing."""
    if cfg.reset_address is not None or cfg.reset_command or cfg.reset == "registers":
        return
    raise LabError(
        f"{lab_path}: board {cfg.name!r} ({cfg.url}) has no reset: add reset_address (the SoC's reset register, "
        f"e.g. LiteX ctrl_reset 0xf0000000) or reset_command to its lab entry. Without one nothing brings NVDLA "
        f"back to a known state between tests, and its registers alone cannot (a unit's group pointers and "
        f"what a layer leaves inside it persist: pdp_flying_rtl/fuzz-sdp-pdp-s2-00001 fails after -00000); "
        f"'reset: registers' runs anyway with the register-level known state")


def _probe_place(lab_path: object, cfg: BoardConfig) -> None:
    """A labgrid board at session start: acquire its place (a place someone else holds is a
    :class:`LabError` naming the holder: the run stops at once, exit 2), prove its window through
    the place's serial endpoint, and release it again (each test acquires it for itself)."""
    import dataclasses

    from ..boards.labgrid_place import LabgridPlace

    place = LabgridPlace(cfg.labgrid_place or "", cfg.labgrid_coordinator)
    try:
        lease = place.acquire()
    except BoardBusyError as e:
        raise LabError(f"{lab_path}: board {cfg.name!r}: {e}") from None
    try:
        if cfg.probe_window:
            with make_serial_transport(dataclasses.replace(cfg, url=lease.url, labgrid_place=None)) as t:
                try:
                    t.probe_window()
                except BoardConfigError as e:
                    raise _window_error(lab_path, cfg, e) from None
    finally:
        place.release()


#: registers the known-state routine never writes: triggers and pointers are handled apart, a
#: LUT data port pops, and the interrupt status is write-1-to-clear
_KNOWN_STATE_SKIP = ("S_POINTER", "D_OP_ENABLE", "S_LUT_ACCESS_DATA", "S_INTR_STATUS")


def restore_known_state(t: Transport, profile: str, *, idle_timeout: float = 5.0) -> dict[str, int]:
    """Bring NVDLA back to the state a reset leaves, by its registers (a board without a reset):

    1. every unit idle: each unit's ``S_STATUS`` reads IDLE for both register groups (a layer still
       running is waited for, up to ``idle_timeout``, then a :class:`TransportError`: without a
       reset nothing else stops it);
    2. every plain read-write register (all fields ``rw``, no trigger) at its reset value from the
       profile's register map, in both register groups of a per-group (``dual``) register: what a
       layer leaves behind there (a test that leaves a field at its reset value relies on it);
    3. each unit's producer pointer where its consumer is: the group the unit runs next (the
       consumer is read-only; it only moves when a layer completes, so it is reported, not set);
    4. GLB ``S_INTR_STATUS`` cleared (write 1 to clear every set bit), and read back as 0.

    Returns each unit's consumer group. The register map comes from ``drivers/data`` (NVDLA's
    RDL/manual), the order (idle, registers, pointers, interrupts) from NVDLA's programming flow
    (``sw/kmd`` programs a group only while its unit is idle and clears the status it handled)."""
    from ...drivers.profiles import load_profile
    from ...drivers.transport import Timeout

    regmap = load_profile(profile).regmap
    units = [b for b in sorted(regmap.blocks.values(), key=lambda b: b.base)
             if regmap.has_block(b.name) and "S_POINTER" in b.registers]
    deadline = Timeout(idle_timeout)
    for b in units:
        st = b.registers.get("S_STATUS")
        if st is None:
            continue
        while True:
            v = t.read32(st.address)
            if (v & 0x3) == 0 and ((v >> 16) & 0x3) == 0:
                break
            if deadline.expired():
                raise TransportError(f"{b.name} is still busy after {idle_timeout:g} s (S_STATUS={v:#010x}): NVDLA "
                                     f"cannot be brought to a known state without a reset")
            time.sleep(0.001)
    plain = [r for r in regmap.registers() if r.writable and not r.trigger and r.fields
             and r.name not in _KNOWN_STATE_SKIP and all(f.access == "rw" for f in r.fields.values())]

    def write_runs(regs: list) -> None:  # noqa: ANN001
        run: list = []
        for r in regs + [None]:
            if r is not None and run and r.address == run[-1].address + 4:
                run.append(r)
                continue
            if run:
                t.write_burst(run[0].address, [int(x.reset) & 0xFFFF_FFFF for x in run])
            run = [r] if r is not None else []

    write_runs([r for r in plain if not r.dual])
    consumers: dict[str, int] = {}
    for b in units:
        ptr = b.registers["S_POINTER"]
        dual = [r for r in plain if r.dual and r.block == b.name]
        cons = (t.read32(ptr.address) >> 16) & 1
        for g in (0, 1):
            if dual:
                t.write32(ptr.address, g, posted=False)
                write_runs(dual)
        t.write32(ptr.address, cons, posted=False)
        consumers[b.name] = cons
    glb = regmap.register("GLB.S_INTR_STATUS")
    for _ in range(3):
        v = t.read32(glb.address)
        if not v:
            break
        t.write32(glb.address, v, posted=False)
    sync = getattr(t, "sync", None)
    if sync is not None:
        sync()
    return consumers


class SerialTarget(SerialTransport):
    """A lab board as a :class:`~nvdla_hil.drivers.transport.Transport`: ``open()`` takes the
    board (its lock, or inside a regression the session's per-use lock), opens the link and
    resets NVDLA (``reset_address``, else ``reset_command``; with neither, NVDLA is brought to the
    register-level known state of :func:`restore_known_state`); ``close()`` releases all of it, also
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
        #: with no reset line (``reset: registers``): each unit's consumer group after the
        #: register-level known state (None: the board was reset)
        self.consumers: dict[str, int] | None = None
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
            from ...drivers.etherbone import make_port

            return make_port(self.url, self.response_timeout)
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
        sick = quarantined(self.lab)  # quarantined mid-run (a failed health re-check): the pool goes on without it
        if sick:
            cands = [c for c in cands if c[0] not in sick]
            if not cands:
                raise BoardBusyError(
                    "every board of this regression is quarantined: "
                    + "; ".join(f"{n}: {sick[n].get('reason', '?')}" for n, _ in self._candidates())
                    + f" (see {quarantine_path(self.lab)})")
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

    def not_in_reset_state(self) -> str | None:
        """Why NVDLA's own traces and firmware cannot run now (None: they can). A trace, and the
        firmware running a loadable, program register group 0 of every unit first, as a reset
        leaves them; without a reset line the register-level known state cannot move a consumer
        pointer back (it is read-only: only a completed layer moves it), so a unit an earlier layer
        left at group 1 would never run the layer. Packed vectors do not mind: they program each
        engine in the group it runs next."""
        moved = sorted(b for b, g in (self.consumers or {}).items() if g)
        if not moved:
            return None
        return (f"board {self.cfg.name!r} has no reset (reset: registers) and the consumer pointer of "
                f"{', '.join(moved)} is at group 1 from an earlier layer; NVDLA's traces and firmware assume every unit at "
                f"group 0, as after a reset (a consumer pointer is read-only): add reset_address or reset_command "
                f"to run them")

    def _lease_place(self) -> None:
        """A labgrid board: acquire its place (or use this user's acquisition); its serial
        resource is the endpoint this open talks to."""
        from ..boards.labgrid_place import LabgridPlace

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
            if self.cfg.reset_address is not None or self.cfg.reset_command:
                self.reset()  # every test starts from a reset NVDLA, as NVDLA's own flow does
            else:  # no reset line: as near to it as registers go (check_reset refuses it unless accepted)
                self.consumers = restore_known_state(self, self.cfg.profile)
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
