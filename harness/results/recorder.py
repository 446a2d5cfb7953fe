"""Record a run in the results database as it goes: :class:`Recorder`, a pytest plugin object the
``nvdla_hil`` plugin registers (:mod:`nvdla_hil.harness.plugin.results`, with the options and the
live progress), and :func:`record_exit` for ``nvdla-hil regress``.

Options (group ``nvdla-hil results``; not forwarded to Dask worker sessions, whose results reach
the database through the controller that owns the run, harness/plugin/cluster.py):

``--nvdla-results-db URL|PATH``  NVDLA_HIL_RESULTS_DB: record the run there (SQLite path or
                                 ``postgresql://...``); ``nvdla-hil regress`` always passes one
``--nvdla-run-dir DIR``          the run directory (its name is the run id; default: a new id)
``--nvdla-progress {auto,tty,plain,off}``  live progress (regress passes ``auto``)

Where the data comes from: the controller's ``pytest_runtest_logreport`` (local, xdist and Dask
reports alike) sees each phase; the test row is written at its teardown report, whose
``user_properties`` hold the plugin's per-test properties (target, profile, board, rtl_build,
model_semantics, seed, waves). The structured failure is computed where the test ran
(``pytest_runtest_makereport``: the exception, the diagnosis sidecar ``logs/<test>.diag.json`` of
harness/analysis/report.py) and travels on the report as ``nvdla_failure`` (a JSON-able dict; xdist and
the Dask collector serialise report attributes).

A run is ``interrupted`` when pytest was interrupted (Ctrl-C; SIGTERM and SIGHUP are turned into
one while a run is recorded, never inside a result's bookkeeping: harness/results/stopping.py),
stopped early (``session.shouldstop``, e.g. a dead board) or left collected tests without a result;
a killed run is found later by :meth:`ResultsDB.reap`.

RTL coverage (``--nvdla-rtl-coverage``, harness/plugin/rtl_coverage.py): its ``summary.json`` is
written at the end of the session (the terminal summary), after the run's row is finished; the
recorder records it (:func:`record_rtl_coverage`: one row per configuration, unit and kind) when
pytest unconfigures, from ``--nvdla-rtl-coverage-dir``, else ``<run dir>/rtl-coverage/``, when
this session wrote it.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .db import ResultsDBError
from .signature import failure_info, signature_of
from .stopping import RunStop, reason_of
from .textsafe import term_safe

if TYPE_CHECKING:
    from .db import ResultsDB

#: the outcome of a test the session was stopped in (Ctrl-C, SIGTERM, a stop on a dead board)
#: before it had a result: never a pass
INTERRUPTED = "interrupted"

def project_version() -> str:
    """nvdla-hil's version, with the git commit when it runs from a checkout."""
    from ... import __version__

    here = Path(__file__).resolve().parents[2]
    if (here / ".git").exists():
        try:
            out = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True, timeout=5, check=False)
            if out.returncode == 0 and out.stdout.strip():
                dirty = subprocess.run(["git", "-C", str(here), "diff", "--quiet", "HEAD"], capture_output=True,
                                       timeout=5, check=False).returncode
                return f"{__version__}+g{out.stdout.strip()}{'.dirty' if dirty else ''}"
        except (OSError, subprocess.SubprocessError):
            pass
    return __version__


def record_exit(argv: list[str], exit_code: int) -> None:
    """After ``nvdla-hil regress`` has decided its exit code (bad input, an interrupt, an unwritable
    disk can change pytest's), write it to the run's row; never raises (the results are on disk)."""
    def opt(flag: str) -> str | None:
        return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag), None)

    url, run_dir = opt("--nvdla-results-db"), opt("--nvdla-run-dir")
    if not (url and run_dir):
        return
    try:
        from .db import ResultsDB

        with ResultsDB(url) as db:
            db.update_run(Path(run_dir).name, exit_code=int(exit_code))
    except ResultsDBError as e:
        print(f"nvdla-hil regress: results database not updated with the exit code: {term_safe(e)}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001
        print(f"nvdla-hil regress: results database not updated with the exit code: {type(e).__name__}: {e}",
              file=sys.stderr)


def rtl_coverage_rows(summary: Mapping[str, Any]) -> list[tuple[str, str, str, int, int]]:
    """The database rows of an RTL coverage summary (``rtl_coverage.load_summary``):
    (configuration, unit, kind, hit, total), each configuration's ``total`` row included; a
    ValueError naming the configuration whose table is malformed."""
    from ..analysis.rtl_coverage_html import rtl_coverage_units

    rows: list[tuple[str, str, str, int, int]] = []
    for name, one in summary["configs"].items():
        try:
            units = rtl_coverage_units(one)
        except ValueError as e:
            raise ValueError(f"configuration {name!r}: {e}") from None
        rows += [(str(name), unit, kind, hit, total) for unit, kinds in units.items() for kind, (hit, total) in kinds.items()]
    return rows


def record_rtl_coverage(db: ResultsDB, run_id: str, folder: str | Path) -> int | None:
    """Record ``<folder>/summary.json`` (a run's ``rtl-coverage/``) as run ``run_id``'s RTL
    coverage, replacing what it had; returns the rows written, None when the folder has no
    summary. An InputError (a ValueError) when the summary is malformed, nothing written;
    :class:`ResultsDBError` when the database refuses (the run is not there, read-only)."""
    path = Path(folder) / "summary.json"
    if not (path.exists() or path.is_symlink()):
        return None
    from ..analysis.rtl_coverage import load_summary

    return db.record_rtl_coverage(run_id, rtl_coverage_rows(load_summary(path)))


def _exc_parts(report: pytest.TestReport, call: Any) -> tuple[str, str]:
    """The exception type and the error's own message (never the traceback)."""
    if call is not None and call.excinfo is not None:
        exc = call.excinfo.value
        name = type(exc).__name__
        msg = str(getattr(exc, "msg", None) or exc)
        return name, msg
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        head, _, rest = str(crash.message).partition(": ")
        return (head, rest) if rest and head.isidentifier() else ("", str(crash.message))
    return "", str(report.longreprtext or "")


def structured_failure(nodeid: str, logs: Path | None, report: pytest.TestReport, call: Any) -> dict[str, Any]:
    """The structured failure of a failed report (:func:`~.signature.failure_info`); ``logs``: the
    run's per-test log folder (``--nvdla-log``), where the test's diagnosis sidecar is, or None."""
    from ..analysis.report import diag_path, read_diagnosis

    exc_type, message = _exc_parts(report, call)
    diag = None
    if logs is not None and report.when == "call":
        diag = read_diagnosis(diag_path(logs, nodeid))
    outcome = "failed" if report.when == "call" else "error"
    return failure_info(outcome, report.when, exc_type, message, diag)


def _suite_of(items: list[pytest.Item]) -> str:
    names: list[str] = []
    for it in items:
        mod = getattr(getattr(it, "module", None), "__name__", "") or ""
        base = mod.rsplit(".", 1)[-1].removeprefix("test_") if mod else Path(str(it.path)).stem.removeprefix("test_")
        if base not in names:
            names.append(base)
    return ",".join(sorted(names))[:200]


class Recorder:
    """Writes the run and each test to the results database as the session goes. ``spec`` (the
    session's target spec) and ``profiles`` describe the run; ``classify(outcome, reason)`` is the
    outcome class of a test as the summary counts it (a skip's reason tells its class)."""

    def __init__(self, config: pytest.Config, url: str, *, spec: Any = None, profiles: Sequence[str] = (),
                 classify: Callable[[str, str], str] | None = None, stop: RunStop | None = None) -> None:
        from .db import ResultsDB

        self.config = config
        self.spec = spec
        self.profiles = list(profiles)
        self.classify = classify
        run_dir = config.getoption("--nvdla-run-dir", default=None)
        self.run_dir = Path(run_dir).resolve() if run_dir else None
        if self.run_dir is not None:
            self.run_id = self.run_dir.name
        else:  # the form of nvdla-hil regress's run ids (harness/cli new_run_dir)
            self.run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"Z-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            self.db = ResultsDB(url)
        except ResultsDBError as e:
            raise pytest.UsageError(f"--nvdla-results-db: {e}") from None
        except Exception as e:  # noqa: BLE001
            raise pytest.UsageError(f"--nvdla-results-db: cannot open {url}: {type(e).__name__}: {e}") from None
        try:
            self.db.check_writable()  # a read-only database is said now, not as an internal error mid-run
        except ResultsDBError as e:
            self.db.close()
            raise pytest.UsageError(f"--nvdla-results-db: {e}") from None
        self.pending: dict[str, dict[str, Any]] = {}
        self.collected = 0
        self.suites: set[str] = set()  # under xdist: the suites the results came from
        self.from_workers = False  # xdist: the controller collects nothing, results come from workers
        self.done: set[str] = set()
        self.interrupted = ""
        self.stop = stop  # the run's signal handling (what stopped it), harness/results/stopping.py
        self.sig_seen: dict[str, int] = {}
        self.db_error = ""  # the database failed mid-run (disk full, made read-only): said at the end
        self.started = time.time()

    # ---- session --------------------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        spec, profiles = self.spec, self.profiles
        bugs = (spec.extra.get("model_bugs") if spec is not None else None) or []
        seed = None
        for opt in ("randomly_seed", "hypothesis_seed"):
            try:
                v = self.config.getoption(opt)
            except ValueError:
                continue
            if v not in (None, "default"):
                seed = str(v)
                break
        argv = [str(a) for a in self.config.invocation_params.args]
        try:
            self._start_run(spec, profiles, bugs, seed, argv)
        except ResultsDBError as e:
            raise pytest.UsageError(f"--nvdla-results-db: {e}") from None

    def _start_run(self, spec: Any, profiles: list[str], bugs: list[str], seed: str | None, argv: list[str]) -> None:
        self.db.start_run(self.run_id, host=socket.gethostname(), pid=os.getpid(), version=project_version(),
                          target=getattr(spec, "kind", None), profile=",".join(profiles),
                          semantics=getattr(spec, "semantics", None), seed=seed, model_bugs=",".join(bugs),
                          selection=self.config.getoption("keyword", default="") or "",
                          command=" ".join(argv)[:4000], run_dir=str(self.run_dir) if self.run_dir else None)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items or not self.collected:  # under xdist the controller collects nothing: see below
            self._collected(len(session.items), _suite_of(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the run's tests are the workers' collection (each collects the same); its
        suite comes from the results' files (:meth:`_suite_from`), since node ids may not name them."""
        self.from_workers = True
        if len(ids) > self.collected:
            self.collected = len(ids)
            self._update(collected=self.collected)

    def _collected(self, n: int, suite: str) -> None:
        self.collected = n
        self._update(collected=n, suite=suite or None)

    def _suite_from(self, report: pytest.TestReport) -> None:
        """A suite named by a result's file (``harness/suites/test_vectors.py`` -> vectors), for a run
        whose controller collected nothing (xdist, a cluster)."""
        base = Path(str(report.location[0])).stem.removeprefix("test_") if report.location else ""
        if base and base not in self.suites:
            self.suites.add(base)
            self._update(suite=",".join(sorted(self.suites))[:200])

    def _update(self, **fields: Any) -> None:
        try:
            self.db.update_run(self.run_id, **fields)
        except ResultsDBError as e:
            self.db_error = str(e)

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.interrupted = self.interrupted or reason_of(excinfo.value) or "interrupted (Ctrl-C)"

    def _stopped_by(self) -> str:
        """What stopped the session: a signal (even one held until the session ended), an interrupt."""
        return (self.stop.reason if self.stop is not None else "") or self.interrupted

    # ---- tests ----------------------------------------------------------------------------------

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.pending.setdefault(nodeid, {"duration": 0.0, "outcome": "passed", "info": None})["t0"] = time.monotonic()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        p = self.pending.setdefault(report.nodeid, {"duration": 0.0, "outcome": "passed", "info": None})
        p["duration"] += float(report.duration or 0.0)
        if report.when == "call" or (report.when == "setup" and not report.passed) or report.failed:
            if self.from_workers:
                self._suite_from(report)
            outcome = "error" if report.when != "call" and report.failed else report.outcome
            if not (p.get("set") and outcome == "passed"):
                p["outcome"] = outcome
                p["set"] = True
            if report.failed and p["outcome"] in ("failed", "error"):
                lines = (report.longreprtext or "").strip().splitlines()
                p["info"] = p["info"] or getattr(report, "nvdla_failure", None) or {
                    "outcome": outcome, "when": report.when, "exception": "", "reason": lines[-1] if lines else ""}
            if report.skipped:
                p["reason"] = self._skip_reason(report)
        cls = getattr(report, "nvdla_classname", None)
        if cls:
            p["test"] = f"{cls}::{report.nodeid.split('::')[-1]}"
        if report.when == "teardown":
            p["properties"] = dict(report.user_properties)
            self._write(report.nodeid)

    @staticmethod
    def _skip_reason(report: pytest.TestReport) -> str:
        if isinstance(report.longrepr, tuple):
            return str(report.longrepr[2]).removeprefix("Skipped: ")
        return ""

    def _outcome_class(self, outcome: str, reason: str) -> str:
        return self.classify(outcome, reason) if self.classify is not None else outcome

    def _write(self, nodeid: str, cut_off: str = "") -> None:
        """Write a test's row; ``cut_off``: why the session stopped before the test had a result
        (it is recorded as ``interrupted``, never with the outcome of its set-up alone)."""
        p = self.pending.pop(nodeid, None)
        if p is None or self.db_error:
            return
        info = p.get("info")
        sig = signature_of(info) if info and p["outcome"] in ("failed", "error") else None
        reason = (info or {}).get("reason", "") if sig else p.get("reason", "")
        outcome = self._outcome_class(p["outcome"], reason)
        if cut_off and not p.get("set"):  # no result of its own (a call, a failed or skipped set-up) before the cut
            outcome, reason = INTERRUPTED, f"interrupted: {cut_off} while the test ran (no result)"
            p["duration"] = max(p["duration"], time.monotonic() - p.get("t0", time.monotonic()))  # until the cut
        try:
            self.db.record_test(self.run_id, nodeid, outcome, p["duration"], reason=reason,
                                properties=p.get("properties") or {}, signature=sig, parts=info, test=p.get("test"))
        except ResultsDBError as e:  # said at the end of the run; the run itself goes on
            self.db_error = str(e)
            return
        if sig:
            self.sig_seen[sig[0]] = self.sig_seen.get(sig[0], 0) + 1
        self.done.add(nodeid)

    # ---- end ------------------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):  # noqa: ANN201
        yield  # after every other implementation (the plugin may turn OK into NO_TESTS_COLLECTED)
        stopped = session.shouldstop or session.shouldfail
        why = self.interrupted = self._stopped_by()
        for nodeid in list(self.pending):  # a test cut short (interrupt): interrupted, never passed
            self._write(nodeid, cut_off=why or (f"stopped early: {stopped}" if stopped else "the session ended"))
        if self.db_error:
            return
        code = int(session.exitstatus)
        if not why and stopped:
            why = f"stopped early: {stopped}"
        if not why and code == int(pytest.ExitCode.INTERRUPTED):
            why = "interrupted (a collection error or an interrupt)"
        if not why and self.collected and len(self.done) < self.collected and code != int(pytest.ExitCode.USAGE_ERROR):
            why = f"{self.collected - len(self.done)} of {self.collected} collected tests have no result"
        allow_empty = bool(self.config.getoption("--nvdla-allow-empty", default=False))
        rc = {0: 0, 1: 1}.get(code, 0 if (code == 5 and allow_empty) else 2)
        if self.interrupted:
            rc = 130  # Ctrl-C or SIGTERM: the exit code nvdla-hil gives (harness/cli EXIT_INTERRUPTED)
        try:
            props = self.db.tests_of([self.run_id])
            run = self.db.run(self.run_id) or {}
        except ResultsDBError as e:
            self.db_error = str(e)
            return
        builds = sorted({str(t["properties"].get("rtl_build")) for t in props if t["properties"].get("rtl_build")})
        boards = sorted({str(t["properties"].get("board")) for t in props if t["properties"].get("board")})
        seeds = sorted({str(t["properties"].get("seed")) for t in props if t["properties"].get("seed") is not None})
        extra: dict[str, Any] = {"build_key": ",".join(builds + [f"board:{b}" for b in boards]) or None}
        if not run.get("seed") and seeds:
            extra["seed"] = ",".join(seeds) if len(seeds) <= 3 else f"{len(seeds)} seeds (per test)"
        try:
            self.db.finish_run(self.run_id, rc, "interrupted" if why else "complete", why, **extra)
        except ResultsDBError as e:
            self.db_error = str(e)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.db_error:
            terminalreporter.write_line(f"results database: run {self.run_id} not fully recorded: "
                                        f"{term_safe(self.db_error)}", red=True)
            return
        if not self.sig_seen:
            terminalreporter.write_line(f"results database: run {self.run_id} in {term_safe(self.db.where)}")
            return
        from .labels import cluster_lines
        from .signature import cluster_map

        try:
            sigs = self.db.signatures()
            labels = self.db.labels()
        except ResultsDBError as e:
            terminalreporter.write_line(f"results database: {term_safe(e)}", red=True)
            return
        cmap = cluster_map({k: v.get("key") or "" for k, v in sigs.items()})
        counts: dict[str, int] = {}
        for sig, n in self.sig_seen.items():
            counts[cmap.get(sig, sig)] = counts.get(cmap.get(sig, sig), 0) + n
        for sig, lab in list(labels.items()):  # a label given to a member signature labels its cluster
            labels.setdefault(cmap.get(sig, sig), lab)
        terminalreporter.write_sep("-", f"failure clusters: {sum(counts.values())} failures in {len(counts)} cluster(s)")
        for line in cluster_lines(counts, sigs, labels):
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"results database: run {self.run_id} in {term_safe(self.db.where)} "
                                    f"(nvdla-hil history; label a cluster: nvdla-hil history label SIGNATURE --text ...)")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        try:
            self._record_rtl_coverage(config)
        finally:
            self.db.close()

    def _record_rtl_coverage(self, config: pytest.Config) -> None:
        """The session's RTL coverage summary (written by its terminal summary, after the run's row
        was finished), recorded with the run; a summary this session did not write is not."""
        if self.db_error or not config.getoption("--nvdla-rtl-coverage", default=None):
            return
        where = config.getoption("--nvdla-rtl-coverage-dir", default=None)
        folder = Path(where) if where else self.run_dir / "rtl-coverage" if self.run_dir is not None else None
        if folder is None:
            return
        try:
            if (folder / "summary.json").stat().st_mtime < self.started - 1:  # an earlier session's
                return
            record_rtl_coverage(self.db, self.run_id, folder)
        except FileNotFoundError:  # no coverage merged (the session says why)
            return
        except (ValueError, OSError) as e:  # InputError and ResultsDBError are ValueErrors
            print(f"results database: RTL coverage of run {self.run_id} not recorded: {term_safe(e)}", file=sys.stderr)
