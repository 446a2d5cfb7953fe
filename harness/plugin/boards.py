"""Board locks and labgrid places of a serial-target session.

The controller process (the only process without xdist) takes a
:class:`~nvdla_hil.harness.boards.lab.SessionBoardLock` on each board it will use in
``pytest_configure`` and holds them until ``pytest_unconfigure``: one board, or with a pool
(``--nvdla-board pool:NAME`` or a comma list) one board per xdist worker, as many as the pool
has free. Workers receive the lock files and the controller's PID (``workerinput``), check in
their own ``pytest_configure`` that the controller holds them, and each test's target takes only
a session board's ``.use`` lock: worker gwK's own board K first, so with as many boards as
workers each worker has its board for the whole session; with fewer, tests take turns, waiting
at most ``--nvdla-board-wait`` seconds. A board is never used by two tests at once. A labgrid
place (``--nvdla-lg-place``/``--nvdla-lg-env``) is a one-board lab file
(:func:`~nvdla_hil.harness.boards.labgrid_place.place_lab_file`).
"""

from __future__ import annotations

import os

import pytest

from ..boards.lab import BoardBusyError, BoardLock, LabError, SessionBoardLock, resolve_boards
from ..boards.labgrid_place import PlaceBoardMismatch, place_lab_file
from ..boards.health import NoHealthyBoard, replace_unhealthy
from ..boards.quarantine import quarantined, release_hint
from .keys import BOARD_DEAD_KEY, BOARD_NOTE_KEY, HEALTH_KEY, LOCK_KEY, SPEC_KEY, is_worker
from .options import env_option, xdist_workers


def labgrid_lab(config: pytest.Config, profile: str, board: str | None) -> tuple[str | None, str | None]:
    """Serial target configured in labgrid's style (``--nvdla-lg-env``/``LG_ENV``, ``--nvdla-lg-place``/
    ``LG_PLACE``, ``--nvdla-lg-coordinator``/``LG_COORDINATOR``) instead of a lab file: a one-board lab
    file for the place (:func:`~nvdla_hil.harness.boards.labgrid_place.place_lab_file`) in a per-user folder,
    so every worker and every concurrent regression uses the same file and the same board locks.
    Without any of them: ``(None, board)`` (the lab-file error follows)."""
    env = env_option(config, "--nvdla-lg-env", "LG_ENV")
    place = env_option(config, "--nvdla-lg-place", "LG_PLACE")
    coordinator = env_option(config, "--nvdla-lg-coordinator", "LG_COORDINATOR")
    try:
        found = place_lab_file(place, env, coordinator, profile=profile, board=board)
    except PlaceBoardMismatch as e:
        raise pytest.UsageError(f"--nvdla-board {e.board} and the labgrid place {e.place} name two boards: give one") from None
    except LabError as e:
        raise pytest.UsageError(f"--nvdla-lg-{'env' if env and not place else 'place'}: {e}") from None
    return found if found is not None else (None, board)


def _probe_boards(lab: str, taken: list) -> None:  # list[SessionBoardLock]
    """Prove each held board's DRAM window before any test runs
    (:func:`~nvdla_hil.harness.targets.serial.probe_board`): a window the board does not map, or a
    board that does not answer, ends the session at once with a configuration error naming the
    board (exit 2), instead of every test failing one by one."""
    from ...drivers.transport import TransportError
    from ..targets.serial import check_reset, probe_board

    for lk in taken:
        try:
            probe_board(lab, lk.cfg.name)
            check_reset(lab, lk.cfg)  # a board nothing resets between tests is refused (exit 2)
        except LabError as e:
            raise pytest.UsageError(f"--nvdla-lab {lab}: {e}") from None
        except (TransportError, OSError) as e:
            raise pytest.UsageError(f"board {lk.cfg.name!r} ({lk.cfg.url}) does not answer: {e}") from None


def configure_boards(config: pytest.Config, lab: str | None, board: str | None) -> tuple[str, list[str], dict]:
    """Serial target: the boards of the session. The controller takes a session lock on each
    board it will use (one per xdist worker, at most the pool's size; a pool skips boards another
    regression holds); each worker checks that the controller holds them and gets its own
    (worker gwK: the session's board K), or, with fewer boards than workers, takes turns.
    Returns the test's board, the profiles (the board's one build) and the spec's extras."""
    if not lab:
        raise pytest.UsageError("--nvdla-target serial needs a lab file and a board: --nvdla-lab FILE --nvdla-board NAME "
                                "(or pool:NAME; or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
    try:
        lab_obj, cfgs, pool = resolve_boards(lab, board)
    except LabError as e:
        raise pytest.UsageError(f"--nvdla-lab {lab}: {e}") from None
    profiles = [cfgs[0].profile]  # a board (or a pool) is one hardware build
    if is_worker(config):
        name, extra = _worker_board(config, lab_obj, cfgs)
        return name, profiles, extra
    workers = xdist_workers(config)
    taken, busy = _take_boards(lab_obj, cfgs, workers)
    what = f"pool {pool}" if pool else ("boards " + ",".join(c.name for c in cfgs))
    if not taken:
        raise pytest.UsageError(f"every board of {what} is busy: " + "; ".join(busy))
    config.stash[LOCK_KEY] = taken
    if not config.getoption("collectonly"):
        try:
            _probe_boards(lab, taken)
            health_check_boards(config, lab_obj, cfgs, taken)  # --nvdla-health-check: quarantine, replace
        except BaseException:
            for lk in taken:
                lk.release()
            del config.stash[LOCK_KEY]
            raise
    wait = float(config.getoption("--nvdla-board-wait"))
    info = {
        "pid": os.getpid(),
        "path": str(taken[0].path),  # the single-board form, kept for older readers
        "boards": [{"name": lk.cfg.name, "path": str(lk.path)} for lk in taken],
        "wait": wait,
        "workers": workers,
        "pool": pool or "",
    }
    note = _sharing_note(cfgs, taken, busy, workers, what, wait)
    if note:
        config.stash[BOARD_NOTE_KEY] = note
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistLockForwarder(info), "nvdla-hil-lock-forwarder")
    return taken[0].cfg.name, profiles, {"session_lock": {**info, "home": 0}}


def _worker_board(config: pytest.Config, lab_obj, cfgs: list) -> tuple[str, dict]:  # noqa: ANN001
    """An xdist worker: check that the controller holds the session's board locks; this worker's
    own board (gwK: board K of the session, modulo their number) and the spec's extras."""
    held = config.workerinput.get("nvdla_board_lock")  # type: ignore[attr-defined]
    if not held:
        return cfgs[0].name, {}
    boards = held.get("boards") or [{"name": cfgs[0].name, "path": held["path"]}]
    for b in boards:
        url = lab_obj.board(b["name"]).url
        if not BoardLock(url, board=b["name"], path=b["path"]).is_held_by(int(held["pid"])):
            raise pytest.UsageError(f"board {b['name']!r}: the regression controller (PID {held['pid']}) "
                                    f"does not hold the board lock {b['path']}")
    wid = str(config.workerinput.get("workerid", "gw0"))  # type: ignore[attr-defined]
    home = int(wid[2:]) if wid[2:].isdigit() else 0
    info = {**held, "home": home % len(boards)}
    return boards[home % len(boards)]["name"], {"session_lock": info}


def _take_boards(lab_obj, cfgs: list, workers: int) -> tuple[list[SessionBoardLock], list[str]]:  # noqa: ANN001
    """The controller's session locks: one board per worker, at most every board of ``cfgs``; a
    board another regression holds is skipped in a pool (why, in the second list) and a usage
    error alone. Nothing stays locked when this raises."""
    taken: list[SessionBoardLock] = []
    busy: list[str] = []
    sick = quarantined(lab_obj)
    for cfg in cfgs:
        if cfg.name in sick:
            why = (f"board {cfg.name!r} is quarantined since {sick[cfg.name].get('since', '?')}: "
                   f"{sick[cfg.name].get('reason', '?')}; {release_hint(lab_obj, cfg.name)}")
            if len(cfgs) == 1:
                raise pytest.UsageError(why)
            busy.append(why)
    cfgs = [c for c in cfgs if c.name not in sick]
    try:
        for cfg in cfgs:
            if len(taken) >= workers:
                break
            slock = SessionBoardLock(lab_obj, cfg)
            try:
                slock.acquire()
            except BoardBusyError as e:
                if len(cfgs) == 1 and not busy:
                    raise pytest.UsageError(str(e)) from None
                busy.append(str(e))
                continue
            taken.append(slock)
    except LabError as e:
        for lk in taken:
            lk.release()
        raise pytest.UsageError(str(e)) from None
    except BaseException:
        for lk in taken:
            lk.release()
        raise
    return taken, busy


def _sharing_note(cfgs: list, taken: list, busy: list[str], workers: int, what: str, wait: float) -> str:
    """The line printed at session start on how the workers share the session's boards ("" for none)."""
    if len(cfgs) == 1 and workers > 1:
        return f"{workers} workers share board {taken[0].cfg.name}: their tests take turns on it"
    if len(cfgs) <= 1:
        return ""
    if workers > len(taken):
        note = (f"{workers} workers, {len(taken)} board{'s' if len(taken) != 1 else ''} in {what}: "
                f"waiting up to {wait:g} s for a board")
    else:
        note = (f"{workers} worker{'s' if workers != 1 else ''}, {len(taken)} board{'s' if len(taken) != 1 else ''} "
                f"in {what}: " + ", ".join(f"gw{i} -> {lk.cfg.name}" for i, lk in enumerate(taken)))
    if busy:
        note += f" ({len(busy)} busy: " + "; ".join(busy) + ")"
    return note


def health_check_boards(config: pytest.Config, lab, cfgs: list, taken: list) -> None:  # noqa: ANN001
    """Session start (``--nvdla-health-check``): :func:`~nvdla_hil.harness.boards.health.replace_unhealthy`
    on the session's board locks ``taken`` (updated in place); its notes are printed when the
    session starts. No healthy board left: a usage error (exit 2) naming each board and why."""
    if not config.getoption("nvdla_health_check", default=False):
        return
    notes: list[str] = config.stash.setdefault(HEALTH_KEY, [])
    try:
        notes += replace_unhealthy(lab, cfgs, taken)
    except NoHealthyBoard as e:
        raise pytest.UsageError(str(e)) from None


def count_board_dead(config: pytest.Config, report: pytest.TestReport) -> None:
    """Stops the session after ``--nvdla-max-board-failures`` consecutive tests failed on a dead board."""
    state = config.stash.get(BOARD_DEAD_KEY, None)
    if state is None or report.when not in ("setup", "call") or (report.when == "setup" and report.passed):
        return
    dead = getattr(report, "nvdla_board_dead", None)
    if not (report.failed and dead):
        state["run"] = 0
        return
    state["run"] += 1
    limit = config.getoption("--nvdla-max-board-failures", default=3) or 0
    session = state["session"]
    if limit and state["run"] >= limit and session is not None and not session.shouldstop:
        spec = config.stash.get(SPEC_KEY, None)
        name = getattr(spec, "board", None)
        board = f"board {name}" if name else "the board"
        session.shouldstop = f"{board} is dead: {state['run']} consecutive tests failed on it; last: {dead}"


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    state = session.config.stash.get(BOARD_DEAD_KEY, None)
    if state is not None:
        state["session"] = session
    note = session.config.stash.get(BOARD_NOTE_KEY, None)
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if note and tr is not None:
        tr.write_line(f"nvdla-hil: {note}")


class XdistLockForwarder:
    """Tells each xdist worker which session locks its controller holds."""

    def __init__(self, info: dict) -> None:
        self.info = info

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:  # noqa: ANN001
        node.workerinput["nvdla_board_lock"] = dict(self.info)


def pytest_unconfigure(config: pytest.Config) -> None:
    locks = config.stash.get(LOCK_KEY, None)
    if locks is not None:
        for lock in reversed(locks if isinstance(locks, list) else [locks]):
            lock.release()
        del config.stash[LOCK_KEY]
