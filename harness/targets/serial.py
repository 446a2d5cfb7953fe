"""Serial (LiteX UARTBone) target from a lab file: lock the board, open the link, release both.

Outside a regression (``regs``, ``trace``, scripts) each :func:`open_serial_target` takes the
board's lock itself. Inside a regression the pytest controller holds the board for the whole
session (:class:`~nvdla_hil.harness.lab.SessionBoardLock`) and passes ``session_lock`` (the
lock file and the holder's PID) to every test's target: the target checks that the session
still holds the board, then waits on the session's ``.use`` file so that xdist workers take
turns on the link, and never takes (or drops) the board lock itself.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

from ...drivers.transport import TransportError
from ...drivers.uartbone import SerialTransport
from ..lab import BoardBusyError, BoardConfig, BoardLock, resolve_board, run_reset

__all__ = ["make_serial_transport", "open_serial_target"]


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


def make_serial_transport(cfg: BoardConfig, readback_ok: Callable[[int], bool] | None = None) -> SerialTransport:
    """An unopened :class:`SerialTransport` configured from one lab board entry; unless given,
    the read-back rules come from the board profile's register map."""
    ok, mask, pops = readback_rules(cfg.profile)
    return SerialTransport(
        cfg.url,
        cfg.baud,
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


@contextlib.contextmanager
def open_serial_target(
    lab_path: str | os.PathLike[str] | None,
    board_name: str | None,
    wait: float = 0,
    *,
    readback_ok: Callable[[int], bool] | None = None,
    session_lock: dict | None = None,
) -> Iterator[SerialTransport]:
    """Lock ``board_name`` from the lab file, open its link and yield the transport.

    ``lab_path``/``board_name`` default to ``NVDLA_HIL_LAB``/``NVDLA_HIL_BOARD``. ``wait`` is how
    long to wait for a busy board (0: fail at once with who holds it). The lock is held for the
    life of the context and dropped by the kernel if the process dies. ``readback_ok`` tells the
    verify policy which registers read back (from the register map).

    ``session_lock`` (``{"path": ..., "pid": ...}``, set by the pytest plugin) says a regression
    session holds the board: the target checks that it still does, and only takes the
    session's per-use lock (waiting for the other workers' tests).
    """
    lab, cfg = resolve_board(lab_path, board_name)
    if session_lock:
        held = BoardLock(cfg.url, board=cfg.name, path=session_lock["path"])
        if not held.is_held_by(int(session_lock["pid"])):
            raise BoardBusyError(
                f"board {cfg.name!r}: this regression (PID {session_lock['pid']}) no longer holds its lock "
                f"{session_lock['path']}; now held by {held.holder()}")
        lock = BoardLock(cfg.url, board=cfg.name, path=str(session_lock["path"]) + ".use")
        lock.acquire(None)
    else:
        lock = BoardLock(cfg.url, lab.lock_dir, board=cfg.name)
        lock.acquire(wait)
    try:
        transport = make_serial_transport(cfg, readback_ok)
        try:
            transport.open()
            if cfg.reset_address is not None:
                transport.reset()  # every session starts from a reset NVDLA, as NVDLA's own flow does
        except TransportError as e:
            transport.close()
            raise TransportError(f"board {cfg.name!r} ({lab.path}): {e}") from e
        try:
            yield transport
        finally:
            transport.close()
    finally:
        lock.release()


