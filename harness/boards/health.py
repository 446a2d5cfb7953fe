"""Two verdicts kept apart: a test failure (the hardware computed something wrong) and an
infrastructure failure (the board died or hung, the link failed, the simulator crashed or hung,
no board could be had), so a flaky cable never reads as a hardware bug.

The pytest side (:mod:`nvdla_hil.harness.plugin.health`, registered by the ``nvdla_hil`` plugin):
a test whose exception is an infrastructure error (:func:`infrastructure_reason`) gets

* one line as its failure text, ``infrastructure failure: <message>`` (the message names the board,
  its URL and what was tried), never a source listing of the transport;
* the report attribute ``nvdla_infra`` (it survives xdist's and Dask's report serialisation), which
  the summary table counts as outcome ``infrastructure`` and ``nvdla-hil regress`` turns into
  exit code 4 when no test failed on its result (``harness/cli``);
* the JUnit property ``verdict=infrastructure`` (the HTML report reads it).

What counts as infrastructure: :class:`~nvdla_hil.drivers.transport.LinkIntegrityError` (with
``BoardDeadError``), a ``TransportTimeoutError`` other than a layer's own timeout (a link that would
not resynchronise, a simulator that stopped answering), ``SimulatorCrashed``/``CmodCrashed``,
``NotOpenError`` and ``BoardBusyError``. A layer that never raises its done interrupt
(``LayerTimeoutError``) is the hardware's doing: a test failure. A trace or vector player that
caught such an error into an ``error`` result is recognised by its first line (``NAME: ERROR (t s)
- CLASS: ...``) or by the board the test opened having been declared dead.

Board health (``--nvdla-health-check``), in the manner of LAVA's health checks: at session start
each board runs a short known-good layer (:func:`health_layer`: a bundled vector whose golden is
an RTL run); a board that does not match it is quarantined (:func:`quarantine`: the lab's
``nvdla-hil-quarantine.json`` in its lock folder, and a labgrid place's comment: see
:mod:`.quarantine`) and replaced by the next free board of its pool (:func:`replace_unhealthy`,
:func:`take_spare`). The pytest side also re-checks a board after consecutive failures mid-run
(:class:`~nvdla_hil.harness.plugin.health.HealthRecheck`); the serial target and every later
session skip a quarantined board.
"""

from __future__ import annotations

import re
from pathlib import Path

from .lab import LabError
from .quarantine import QUARANTINE_FILE, quarantine, quarantine_path, quarantined

__all__ = ["INFRA_PROPERTY", "NoHealthyBoard", "QUARANTINE_FILE", "check_health", "health_layer", "infrastructure_reason",
           "quarantine", "quarantine_path", "quarantined", "replace_unhealthy", "result_error", "take_spare"]

#: the JUnit property an infrastructure failure carries
INFRA_PROPERTY = ("verdict", "infrastructure")

_INFRA_NAMES = frozenset({"LinkIntegrityError", "BoardDeadError", "SimulatorCrashed", "CmodCrashed", "NotOpenError",
                          "BoardBusyError", "TransportTimeoutError"})
_NOT_INFRA = frozenset({"LayerTimeoutError"})


def infrastructure_reason(exc: BaseException) -> str | None:
    """One line saying why ``exc`` is an infrastructure failure, or None for anything else.
    Classes are matched by name along the MRO (the tool's own ones, under ``nvdla_hil``)."""
    names = [c.__name__ for c in type(exc).__mro__ if c.__module__.startswith("nvdla_hil.")]
    if any(n in _NOT_INFRA for n in names) or not any(n in _INFRA_NAMES for n in names):
        return None
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


#: a trace or vector result that ended in an error: ``NAME: ERROR (1.47 s) - CLASS: message``
_RESULT_ERROR = re.compile(r"^\S.*?: ERROR \([\d.]+ s\) - (\w+): (.*)$")


def result_error(text: str) -> str | None:
    """The trace and vector players catch transport errors into an ``error`` result that the suite
    fails with: the first line names the class."""
    m = _RESULT_ERROR.match(text.strip().splitlines()[0] if text.strip() else "")
    if not m or m.group(1) in _NOT_INFRA or m.group(1) not in _INFRA_NAMES:
        return None
    return f"{m.group(1)}: {m.group(2)}"


# ---- board health and quarantine (LAVA's health checks) ---------------------------------------------

def health_layer(profile: str) -> Path | None:
    """The known-good layer for ``profile``: the smallest bundled layer vector of that profile whose
    golden is an RTL run (an oracle, not the model's own output)."""
    from ...drivers import yamlstrict
    from ..vectors import bundled_root, find_cases

    best: tuple[int, Path] | None = None
    for path in find_cases(bundled_root()):
        try:
            doc = yamlstrict.load((path / "case.yaml").read_text(encoding="utf-8"), str(path / "case.yaml"))
        except Exception:  # noqa: BLE001 - a bad case is not a health check
            continue
        gs = doc.get("golden_source") if isinstance(doc, dict) else None
        if doc.get("kind") != "layer" or doc.get("profile") != profile or not isinstance(gs, dict) or gs.get("kind") != "rtl":
            continue
        size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
        if best is None or size < best[0]:
            best = (size, path)
    return best[1] if best else None


def check_health(lab, cfg, timeout: float = 10.0) -> str | None:  # noqa: ANN001
    """Run the known-good layer on the board (its own link, no lock: the caller holds the board);
    None when it matches its golden, else why not (one line)."""
    from ..targets.serial import make_serial_transport, restore_known_state
    from ..vectors import run_case

    layer = health_layer(cfg.profile)
    if layer is None:
        return None  # nothing to check against for this profile
    try:
        if cfg.labgrid_place:
            import dataclasses

            from .labgrid_place import LabgridPlace

            place = LabgridPlace(cfg.labgrid_place, cfg.labgrid_coordinator)
            lease = place.acquire()
            try:
                with make_serial_transport(dataclasses.replace(cfg, url=lease.url, labgrid_place=None)) as t:
                    return _run_health(t, cfg, layer, timeout, run_case, restore_known_state)
            finally:
                place.release()
        with make_serial_transport(cfg) as t:
            return _run_health(t, cfg, layer, timeout, run_case, restore_known_state)
    except Exception as e:  # noqa: BLE001 - any failure of the board is a failed health check
        return f"{type(e).__name__}: {' '.join(str(e).split())}"


def _run_health(t, cfg, layer, timeout, run_case, restore_known_state) -> str | None:  # noqa: ANN001
    if cfg.reset_address is not None or cfg.reset_command:
        t.reset()
    else:
        restore_known_state(t, cfg.profile)
    r = run_case(layer, t, timeout=timeout)
    return None if r.passed else f"known-good layer {layer.parent.name}/{layer.name}: {' '.join(r.summary().split())[:300]}"


class NoHealthyBoard(LabError):
    """Every board of the session failed its health check (each is quarantined)."""


def replace_unhealthy(lab, cfgs: list, taken: list) -> list[str]:  # noqa: ANN001
    """Session start (``--nvdla-health-check``): each held board runs :func:`check_health`; a board
    that fails is quarantined, its session lock released, and the next free board of the pool
    (not quarantined) is taken in its place. ``taken`` (the session's locks) is updated in place.
    Returns one note per board checked; no healthy board left: :class:`NoHealthyBoard` naming each
    board and why."""
    notes: list[str] = []
    held = {lk.cfg.name for lk in taken}
    spare = [c for c in cfgs if c.name not in held and c.name not in quarantined(lab)]
    queue, keep, failed = list(taken), [], []
    taken.clear()
    while queue:
        lk = queue.pop(0)
        why = check_health(lab, lk.cfg)
        if why is None:
            keep.append(lk)
            notes.append(f"board {lk.cfg.name}: health check passed")
            continue
        quarantine(lab, lk.cfg, why)
        lk.release()
        failed.append(f"{lk.cfg.name}: {why}")
        notes.append(f"board {lk.cfg.name} QUARANTINED (recorded in {quarantine_path(lab)}): {why}")
        s = take_spare(lab, spare, failed)
        if s is not None:
            queue.append(s)
    taken.extend(keep)
    if not keep:
        raise NoHealthyBoard("no board passed its health check (each is quarantined): " + "; ".join(failed))
    return notes


def take_spare(lab, spare: list, failed: list[str]):  # noqa: ANN001, ANN201 - a SessionBoardLock or None
    """The next board of ``spare`` (BoardConfigs, consumed from the front) that is free and answers
    its probe, with its session lock taken; None when none is. Why each was passed over goes to
    ``failed``."""
    from ..targets.serial import probe_board
    from .lab import BoardBusyError, SessionBoardLock

    while spare:
        c = spare.pop(0)
        s = SessionBoardLock(lab, c)
        try:
            s.acquire()
        except BoardBusyError:
            continue
        try:
            probe_board(lab.path, c.name)
        except Exception as e:  # noqa: BLE001 - a board that does not answer is passed over, saying why
            s.release()
            failed.append(f"{c.name}: {e}")
            continue
        return s
    return None
