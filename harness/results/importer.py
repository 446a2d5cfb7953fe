"""Import past run directories (``results/<run-id>/``) into the results database.

From each folder: ``run.json`` (command, start, duration, exit code; written by ``nvdla-hil
regress`` when the run ended), ``junit.xml`` (every test, its outcome, time, message and
properties) and ``logs/<test>.diag.json`` (the structured failure of a failed trace, whence the
signature). A folder without ``run.json`` is a run that never finished: imported as
``interrupted``. A folder without ``junit.xml`` imports with no tests (and is interrupted).
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime
from pathlib import Path
from typing import Any

from ...drivers.errors import InputError
from ..analysis.junit import TestRow, find_test_file, parse_junit, read_run_json, safe_name
from ..analysis.report import read_diagnosis
from .db import ResultsDB
from .recorder import record_rtl_coverage
from .rundir import run_state
from .signature import failure_info, signature_of

__all__ = ["import_run_dir", "import_dirs"]

_EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failed|Interrupt|Exit|Timeout\w*)): ?(.*)", re.S)


def _started(meta: dict[str, Any], run: Path) -> float:
    s = meta.get("started")
    if isinstance(s, str):
        try:
            return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    m = re.match(r"(\d{8}T\d{6})", run.name)
    if m:
        from datetime import UTC

        return datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC).timestamp()
    return run.stat().st_mtime


def _opts(command: list[str], flag: str) -> list[str]:
    out = []
    for i, a in enumerate(command):
        if a == flag and i + 1 < len(command):
            out.append(command[i + 1])
        elif a.startswith(flag + "="):
            out.append(a.split("=", 1)[1])
    return out


def _failure(row: TestRow, run: Path) -> dict[str, Any]:
    msg = row.message or ""
    m = _EXC.match(msg.strip())
    exc, text = (m.group(1).rsplit(".", 1)[-1], m.group(2)) if m else ("", msg)
    diag = None
    if row.outcome == "failed":
        hit = find_test_file(run / "logs", f"{safe_name(row.name)}.diag.json")
        diag = read_diagnosis(hit) if hit is not None else None
    return failure_info(row.outcome, "call" if row.outcome == "failed" else "setup", exc, text, diag, row.text)


def _run_state(run: Path, meta: dict[str, Any]) -> str:
    """``finished``, ``interrupted``, ``running`` or ``unknown`` (:func:`.rundir.run_state` reads run.json;
    a run.json with an exit code but no status, from an older nvdla-hil, finished)."""
    state = run_state(run)
    return "finished" if state == "finished" or (state == "unknown" and "exit_code" in meta) else state


def import_run_dir(db: ResultsDB, run: str | Path) -> tuple[str, int, str]:
    """Import one run directory; returns (run id, tests, status)."""
    run = Path(run).resolve()
    if not run.is_dir():
        raise InputError(f"{run}: not a run directory")
    meta = read_run_json(run)  # InputError naming the file: not JSON, not an object, too big, a FIFO
    junit = run / "junit.xml"
    # a link that leads nowhere (or in a loop) is not "no junit.xml": parse_junit names what is wrong with it
    rows = parse_junit(junit) if junit.exists() or junit.is_symlink() else []  # InputError when malformed or not a file
    command = [str(c) for c in meta.get("command") or []]
    pyargv = [str(c) for c in meta.get("pytest_argv") or []]
    props = [r.properties for r in rows]
    targets = sorted({p.get("target", "") for p in props if p.get("target")})
    target: str | None = next(iter(_opts(command, "--target") or _opts(pyargv, "--nvdla-target") or targets), None)
    profile: str | None = next(iter(_opts(command, "--profile") or _opts(pyargv, "--nvdla-config")), None)
    if profile is None:
        profile = ",".join(sorted({p.get("profile", "") for p in props if p.get("profile")})) or None
    semantics = (_opts(pyargv, "--nvdla-model-semantics") or _opts(command, "--model-semantics") or ["rtl"])[0]
    bugs = _opts(command, "--model-bug") or _opts(pyargv, "--nvdla-model-bug")
    suite = ",".join(sorted({r.classname.rsplit(".", 1)[-1].removeprefix("test_") for r in rows})) or None
    finished = "exit_code" in meta
    pexit = meta.get("pytest_exit_code")
    state = _run_state(run, meta)
    status = "complete" if state == "finished" and rows and pexit not in (2, 3) else \
        "running" if state == "running" else "interrupted"
    note = "" if status in ("complete", "running") else (
        f"run.json says {meta['status']}" if meta.get("status") in ("interrupted", "running") else
        "no run.json: the run never finished" if not finished else "no junit.xml" if not rows else f"pytest exit code {pexit}")
    started = _started(meta, run)
    builds = sorted({p.get("rtl_build", "") for p in props if p.get("rtl_build")})
    boards = sorted({p.get("board", "") for p in props if p.get("board")})
    versions = sorted({str(p["nvdla_hil_version"]) for p in props if p.get("nvdla_hil_version")})
    seeds = sorted({str(p["seed"]) for p in props if p.get("seed") is not None})
    db.start_run(run.name, started=started, heartbeat=started, host=meta.get("host"), pid=meta.get("pid"),
                 version=meta.get("version") or ",".join(versions) or None,
                 seed=(",".join(seeds) if len(seeds) <= 3 else f"{len(seeds)} seeds (per test)") if seeds else None,
                 target=target, profile=profile, semantics=semantics, model_bugs=",".join(bugs),
                 selection=(_opts(command, "-k") or [""])[0], suite=suite,
                 command=shlex.join(command) if command else None, run_dir=str(run), collected=len(rows),
                 build_key=",".join(builds + [f"board:{b}" for b in boards]) or None)
    records = []
    for r in rows:
        info = _failure(r, run) if r.outcome in ("failed", "error") else None
        sig = signature_of(info) if info else None
        reason = info["reason"] if info else (r.message.removeprefix("Skipped: ") if r.outcome.startswith("skipped")
                                              else r.reason if r.outcome == "interrupted" else "")
        records.append({"nodeid": f"{r.classname}::{r.name}", "outcome": r.outcome, "duration": r.time, "reason": reason,
                        "properties": r.properties, "signature": sig, "parts": info, "name": r.name,
                        "test": f"{r.classname}::{r.name}"})
    db.record_tests(run.name, records)  # one transaction: an import of 10,000 tests is linear
    ended = started + float(meta.get("seconds") or 0) if finished else None
    if status == "running":  # its process is still at it: recorded as running (reap() finds it if it dies)
        return run.name, len(rows), status
    db.finish_run(run.name, meta.get("exit_code"), status, note)
    db.update_run(run.name, ended=ended, heartbeat=ended or started)  # the run's own times, not the import's
    record_rtl_coverage(db, run.name, run / "rtl-coverage")  # InputError naming a malformed summary.json
    return run.name, len(rows), status


def import_dirs(db: ResultsDB, paths: list[str]) -> list[tuple[str, int, str]]:
    """Import each run directory, or each run directory inside a results folder."""
    todo: list[Path] = []
    for p in map(Path, paths):
        if (p / "junit.xml").exists() or (p / "run.json").exists():
            todo.append(p)
            continue
        if not p.is_dir():
            raise InputError(f"{p}: no such folder")
        subs = sorted(d for d in p.iterdir() if d.is_dir() and not d.is_symlink()
                      and ((d / "junit.xml").exists() or (d / "run.json").exists() or (d / "logs").is_dir()))
        if not subs:
            raise InputError(f"{p}: neither a run directory (junit.xml, run.json) nor a folder of them")
        todo += subs
    return [import_run_dir(db, d) for d in todo]
