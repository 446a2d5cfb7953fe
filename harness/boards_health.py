"""Two verdicts kept apart: a test failure (the hardware computed something wrong) and an
infrastructure failure (the board died or hung, the link failed, the simulator crashed or hung,
no board could be had), so a flaky cable never reads as a hardware bug.

A pytest plugin (registered by ``nvdla_hil.harness.plugin``): a test whose exception is an
infrastructure error (:func:`infrastructure_reason`) gets

* one line as its failure text, ``infrastructure failure: <message>`` (the message names the board,
  its URL and what was tried), never a source listing of the transport;
* the report attribute ``nvdla_infra`` (it survives xdist's and Dask's report serialisation), which
  the summary table counts as outcome ``infrastructure`` and ``nvdla-hil regress`` turns into
  exit code 4 when no test failed on its result (``harness/cli.py``);
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
``nvdla-hil-quarantine.json`` in its lock folder, and a labgrid place's comment) and replaced by
the next free board of its pool (:func:`health_check_boards`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

__all__ = ["INFRA_PROPERTY", "infrastructure_reason"]

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


def _dead_target(item: pytest.Item) -> str | None:
    """The reason a target the test opened was declared dead (a serial board), if one was."""
    from .plugin import OPENED_KEY

    for target, _ in item.stash.get(OPENED_KEY, []):
        dead = getattr(target, "dead_reason", None)
        if dead:
            return f"BoardDeadError: {getattr(target, 'where', '')}: {dead}"
    return None


def _result_error(text: str) -> str | None:
    """The trace and vector players catch transport errors into an ``error`` result that the suite
    fails with: the first line names the class."""
    m = _RESULT_ERROR.match(text.strip().splitlines()[0] if text.strip() else "")
    if not m or m.group(1) in _NOT_INFRA or m.group(1) not in _INFRA_NAMES:
        return None
    return f"{m.group(1)}: {m.group(2)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):  # noqa: ANN001, ANN201
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed:
        return
    why = infrastructure_reason(call.excinfo.value)
    if why is None and call.excinfo.type.__name__ == "Failed":  # pytest.fail(result.summary())
        why = _result_error(str(call.excinfo.value)) or _dead_target(item)
    if why is None:
        return
    report.nvdla_infra = why
    report.longrepr = f"infrastructure failure: {why}"
    if INFRA_PROPERTY not in item.user_properties:
        item.user_properties.append(INFRA_PROPERTY)
        if call.when == "teardown":
            report.user_properties = list(item.user_properties)


class _InfraCount:
    def __init__(self) -> None:
        self.infra: list[str] = []
        self.failed = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        if getattr(report, "nvdla_infra", None):
            self.infra.append(report.nodeid)
        elif not getattr(report, "nvdla_bad_input", None):
            self.failed += 1

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        if not self.infra:
            return
        n = len(dict.fromkeys(self.infra))
        terminalreporter.write_line(
            f"nvdla-hil: {n} infrastructure failure{'s' if n != 1 else ''} (board dead or hung, link fault, "
            f"simulator crashed or hung, no board: not the hardware's result) and {self.failed} test "
            f"failure{'s' if self.failed != 1 else ''}", red=True)


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("nvdla-hil-infra-count"):
        config.pluginmanager.register(_InfraCount(), "nvdla-hil-infra-count")


# ---- board health and quarantine (LAVA's health checks) ---------------------------------------------

#: the lab's quarantine record, in its lock folder: {board: {"since", "reason", "host", "pid"}}
QUARANTINE_FILE = "nvdla-hil-quarantine.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nvdla-hil")
    g.addoption("--nvdla-health-check", action="store_true", default=False, dest="nvdla_health_check",
                help="serial target: before any test, each board runs a short known-good layer (a bundled "
                     "vector whose golden is an RTL run) and must match it; a board that fails is quarantined "
                     "(the lab's quarantine file, and a comment on its labgrid place) and the session goes on "
                     "with the rest of its pool")


def quarantine_path(lab) -> Path:  # noqa: ANN001
    return Path(lab.lock_dir) / QUARANTINE_FILE


def quarantined(lab) -> dict[str, dict]:  # noqa: ANN001
    """The lab's quarantined boards (an unreadable or malformed record counts as none)."""
    import json

    try:
        doc = json.loads(quarantine_path(lab).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) else {}


def quarantine(lab, cfg, reason: str) -> None:  # noqa: ANN001
    """Record ``cfg``'s board as quarantined in the lab's state file (and, for a labgrid board, as a
    comment on its place, best effort). Clear it by deleting its entry from the file."""
    import json
    import os
    import socket
    from datetime import UTC, datetime

    from ..drivers.errors import write_atomic

    record = quarantined(lab)
    record[cfg.name] = {"since": datetime.now(UTC).isoformat(timespec="seconds"), "reason": reason,
                        "host": socket.gethostname(), "pid": os.getpid()}
    write_atomic(quarantine_path(lab), json.dumps(record, indent=2) + "\n")
    if cfg.labgrid_place:
        import subprocess
        import sys

        from .labgrid_place import coordinator_address

        client = Path(sys.executable).with_name("labgrid-client")
        if client.exists():
            subprocess.run([str(client), "-x", coordinator_address(cfg.labgrid_coordinator), "-p", cfg.labgrid_place,
                            "set-comment", f"nvdla-hil quarantine: {reason}"[:500]], capture_output=True, timeout=60,
                           check=False)


def health_layer(profile: str) -> Path | None:
    """The known-good layer for ``profile``: the smallest bundled layer vector of that profile whose
    golden is an RTL run (an oracle, not the model's own output)."""
    from ..drivers import yamlstrict
    from .vectors import bundled_root, find_cases

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
    from .targets.serial import make_serial_transport, restore_known_state
    from .vectors import run_case

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


def health_check_boards(config: pytest.Config, lab, cfgs: list, taken: list) -> None:  # noqa: ANN001
    """Session start (``--nvdla-health-check``): each held board runs :func:`check_health`; a board
    that fails is quarantined, its session lock released, and the next free board of the pool
    (not quarantined) is taken in its place. ``taken`` (the session's locks) is updated in place.
    No healthy board left: a usage error (exit 2) naming each board and why."""
    from .lab import BoardBusyError, SessionBoardLock
    from .targets.serial import probe_board

    if not config.getoption("nvdla_health_check", default=False):
        return
    notes: list[str] = config.stash.setdefault(HEALTH_KEY, [])
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
        while spare:
            c = spare.pop(0)
            s = SessionBoardLock(lab, c)
            try:
                s.acquire()
            except BoardBusyError:
                continue
            try:
                probe_board(lab.path, c.name)
            except Exception as e:  # noqa: BLE001
                s.release()
                failed.append(f"{c.name}: {e}")
                continue
            queue.append(s)
            break
    taken.extend(keep)
    if not keep:
        raise pytest.UsageError("no board passed its health check (each is quarantined): " + "; ".join(failed))


HEALTH_KEY = pytest.StashKey[list]()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    for note in session.config.stash.get(HEALTH_KEY, []):
        if tr is not None:
            tr.write_line(f"nvdla-hil: {note}")
