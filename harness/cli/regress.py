"""``nvdla-hil regress``: a named suite (NVDLA traces, nv_full's traceplayer tests, packed
vectors, NVDLA's loadables, or all) run through pytest on a target, each run kept whole in its
own run directory (:mod:`nvdla_hil.harness.results.rundir`). The exit codes: the package
docstring and :data:`REGRESS_EPILOG`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...drivers.errors import ResultsError, write_atomic
from ..results.rundir import new_run_dir, point_latest
from ..targets import checkout_problem
from .exits import EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE, EXIT_INTERNAL, EXIT_INTERRUPTED, BadInput
from .options import add_target_options

__all__ = ["SUITES", "REGRESS_EPILOG", "add_subcommands"]

SUITES = {
    "traces": "nvdla_hil.harness.suites.test_traces",
    "txn": "nvdla_hil.harness.suites.test_txn",
    "vectors": "nvdla_hil.harness.suites.test_vectors",
    "loadables": "nvdla_hil.harness.suites.test_loadables",
    "networks": "nvdla_hil.harness.suites.test_networks",
}


def _default_source(env: str, shared: str, marker: str = ".") -> str | None:
    """Where an outside-truth folder is found when no option names it: ``$env``, else
    ``../shared/<shared>`` beside the working folder or beside this source checkout (the layout CI
    and the README's clone use), if it holds ``marker``."""
    if os.environ.get(env):
        return os.environ[env]
    here = Path(__file__).resolve().parents[2]
    for cand in (Path.cwd() / "../shared" / shared, here / "../shared" / shared):
        if (cand / marker).is_dir():
            return str(cand.resolve())
    return None


def _default_loadables() -> str | None:
    """NVDLA's software regression (flatbufs/ and golden/)."""
    return _default_source("NVDLA_LOADABLES", "nvdla_sw", marker="flatbufs")


def _default_traces() -> str | None:
    """NVDLA's nv_small trace tests."""
    return _default_source("NVDLA_TRACES", "nvdla/trace_tests/nv_small")


def _default_txn() -> str | None:
    """nv_full's traceplayer tests."""
    return _default_source("NVDLA_TXN_TESTS", "nvdla/traceplayer_v1")


# ---- checks before pytest starts ------------------------------------------------------------


def _check_nvdla_sw(path: str) -> None:
    """A checkout named but not there would fail every loadable (exit 1, as if the hardware were
    wrong): bad input, said once, before the run."""
    from ..loadables.firmware import FirmwareError, find_nvdla_sw

    try:
        find_nvdla_sw(path)
    except FirmwareError as e:
        raise BadInput(f"--nvdla-sw (or NVDLA_SW) {path}: {e}") from None


def _check_regress(args: argparse.Namespace, suites: list[str]) -> str | None:
    """Validate everything that can be checked before pytest starts; the trace root to pass."""
    # long: one check per option, in the order the options are documented
    import pytest

    from ..plugin.options import check_trace_source, check_vector_source

    problem = checkout_problem(args.target, args.nvdla_hw)
    if problem:
        raise BadInput(problem)
    if args.model_bug and args.target != "model":
        raise BadInput("--model-bug injects a datapath bug into the model target only (--target model)")
    if args.target == "serial":
        from ..boards.lab import LabError, resolve_board

        if not args.lab:
            raise BadInput("--target serial needs a lab file and a board: pass --lab FILE --board NAME "
                       "(or set NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
        try:
            resolve_board(args.lab, args.board)
        except LabError as e:
            raise BadInput(f"--lab {args.lab}: {e}") from None
    traces = None
    try:
        if "traces" in suites:
            if args.traces:
                check_trace_source("--traces", args.traces)
                traces = args.traces
            elif os.environ.get("NVDLA_TRACES"):
                check_trace_source("NVDLA_TRACES", os.environ["NVDLA_TRACES"])
                traces = os.environ["NVDLA_TRACES"]
            elif args.nvdla_hw and (Path(args.nvdla_hw) / "verif/tests/trace_tests").is_dir():
                check_trace_source("--nvdla-hw", str(Path(args.nvdla_hw) / "verif/tests/trace_tests"))
            else:
                traces = _default_traces()
                if traces is None and args.suite == "traces":
                    raise BadInput("--suite traces: no NVDLA trace tests configured: pass --traces PATH "
                               "(or set NVDLA_TRACES, or give --nvdla-hw PATH)")
        elif args.traces:
            raise BadInput(f"--traces {args.traces} was given but --suite {args.suite} runs no traces")
        if "txn" in suites:
            if args.txn:
                if not Path(args.txn).is_dir() or not any(Path(args.txn).rglob("input.txn")):
                    raise BadInput(f"--txn {args.txn}: {'no such folder' if not Path(args.txn).is_dir() else 'no input.txn test below it'}")
            else:
                args.txn = _default_txn()
                if args.txn is None and args.suite == "txn":
                    raise BadInput("--suite txn: no nv_full traceplayer tests configured: pass --txn PATH "
                               "(or set NVDLA_TXN_TESTS)")
        elif args.txn:
            raise BadInput(f"--txn {args.txn} was given but --suite {args.suite} runs no nv_full tests")
        if "loadables" in suites:
            if args.loadables:
                from ..loadables.check import find_loadables

                if not Path(args.loadables).is_dir() or not find_loadables(args.loadables):
                    raise BadInput(f"--loadables {args.loadables}: "
                                   f"{'no such folder' if not Path(args.loadables).is_dir() else 'no loadable below it'}")
            else:
                args.loadables = _default_loadables()
                if args.loadables is None and args.suite == "loadables":
                    raise BadInput("--suite loadables: no loadables configured: pass --loadables PATH (or set NVDLA_LOADABLES)")
            if args.loadables is not None and args.nvdla_sw:
                _check_nvdla_sw(args.nvdla_sw)
        elif args.loadables:
            raise BadInput(f"--loadables {args.loadables} was given but --suite {args.suite} runs no loadables")
        if "vectors" in suites and args.vectors:
            check_vector_source("--vectors", args.vectors)
        elif args.vectors:
            raise BadInput(f"--vectors {args.vectors} was given but --suite {args.suite} runs no vectors")
    except pytest.UsageError as e:
        raise BadInput(str(e)) from None
    if args.junit and Path(args.junit).exists() and not args.force:
        raise BadInput(f"--junit {args.junit}: the file exists; pass --force to replace it "
                   "(or leave --junit out: each run writes <results-dir>/<run-id>/junit.xml)")
    if args.log_dir and Path(args.log_dir).is_dir() and any(Path(args.log_dir).iterdir()) and not args.force:
        raise BadInput(f"--log-dir {args.log_dir}: the folder is not empty; pass --force to write into it "
                   "(or leave --log-dir out: each run writes <results-dir>/<run-id>/logs/)")
    return traces


# ---- the run --------------------------------------------------------------------------------


def _cmd_regress(args: argparse.Namespace) -> int:
    suites = list(SUITES) if args.suite == "all" else [args.suite]
    try:
        traces = _check_regress(args, suites)
        if "networks" in suites and args.nvdla_sw:
            _check_nvdla_sw(args.nvdla_sw)  # the bundled networks run through its firmware
    except BadInput as e:
        print(f"nvdla-hil regress: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    run, meta = _start_run(args)
    junit = Path(args.junit) if args.junit else run / "junit.xml"
    junit_part = run / ".junit.xml.part"  # pytest writes here; renamed into place only when whole
    if args.junit:
        junit.parent.mkdir(parents=True, exist_ok=True)
    logs = Path(args.log_dir) if args.log_dir else run / "logs"
    argv = _pytest_argv(args, suites, traces, run, logs, junit_part)
    t0 = time.monotonic()
    code, watch = _run_pytest(argv, run)
    from ..boards.labgrid_place import DeferredSignals

    # a signal now (a scheduler's kill just as the tests ended) is held until the results are all
    # written, then makes the exit 130 with run.json saying so: the results stay whole
    held = DeferredSignals()
    with held:
        held.then = {signum: signal.SIG_IGN for signum in held.saved}  # re-raised into nothing: handled below
        rc = _finish_run(args, run, meta, argv, code, watch, junit, junit_part, logs, t0)
    for signum, old in held.saved.items():
        signal.signal(signum, old)  # type: ignore[arg-type]
    if held.pending:
        name = signal.Signals(held.pending[0]).name
        print(f"nvdla-hil regress: {name} while the results were written: they are whole; exit 130", file=sys.stderr)
        meta.update({"status": "interrupted", "exit_code": 130,
                     "result": f"{meta.get('result', '')}; then {name} while the results were written (they are whole)"})
        try:
            write_atomic(run / "run.json", json.dumps(meta, indent=2) + "\n")
        except ResultsError as e:
            print(f"nvdla-hil regress: results not written: {e}", file=sys.stderr)
        from ..results.recorder import record_exit

        record_exit(argv, 130)
        return 130
    return rc


def _finish_run(args: argparse.Namespace, run: Path, meta: dict[str, Any], argv: list[str], code: Any,
                watch: _RunWatch, junit: Path, junit_part: Path, logs: Path, t0: float) -> int:
    """After the tests: junit.xml, run.json, the database's exit code, the report and ``latest``;
    the command's exit code."""
    rc, why = _verdict(code, watch, args.allow_empty)
    unwritten = list(watch.unwritten)
    unwritten += _keep_junit(args, run, junit, junit_part, code, rc, watch)
    meta.update({"status": "interrupted" if watch.interrupted else "finished", "pytest_argv": argv,
                 "ended": datetime.now(UTC).isoformat(timespec="seconds"),
                 "seconds": round(time.monotonic() - t0, 3), "exit_code": rc, "result": why,
                 "pytest_exit_code": int(code), "junit": str(junit), "logs": str(logs),
                 "tests": {"failed": watch.failed, "bad_input": watch.bad_input, "infrastructure": watch.infra,
                           "collected": watch.collected, "finished": watch.finished}})
    meta.pop("note", None)
    if unwritten:
        meta["unwritten"] = unwritten
    try:
        write_atomic(run / "run.json", json.dumps(meta, indent=2) + "\n")
    except ResultsError as e:
        unwritten.append(str(e))
    if unwritten:
        for u in dict.fromkeys(unwritten):
            print(f"nvdla-hil regress: results not written: {u}", file=sys.stderr)
        if rc == 0:
            rc = 2  # nothing failed, but the results are not all on disk: the disk is the problem
    from ..results.recorder import record_exit

    record_exit(argv, rc)  # the results database gets the command's own exit code (bad input, interrupt, disk)
    _write_report(run, args.results_db)
    try:
        latest = point_latest(run)
        print(f"results: {run} ({latest} -> {run.name})")
    except OSError as e:
        print(f"results: {run} (could not update {run.parent / 'latest'}: {e})", file=sys.stderr)
    return rc


def _start_run(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """A new run directory with its ``run.json`` saying "running" (until the run ends)."""
    try:
        run = new_run_dir(args.results_dir)
    except OSError as e:
        raise ResultsError(e.errno or 0, f"cannot create a run directory (--results-dir): {e.strerror or e}",
                           str(e.filename or args.results_dir)) from None
    started = datetime.now(UTC).isoformat(timespec="seconds")
    meta: dict[str, Any] = {
        "status": "running", "command": ["nvdla-hil", *getattr(args, "_argv", [])], "cwd": os.getcwd(),
        "started": started, "pid": os.getpid(), "host": socket.gethostname(),
        "note": "written at the start; a run whose status stays 'running' after its process is gone was "
                "cut short (killed): see run_state()",
    }
    write_atomic(run / "run.json", json.dumps(meta, indent=2) + "\n")  # a full disk: ResultsError naming it
    return run, meta


def _pytest_argv(args: argparse.Namespace, suites: list[str], traces: str | None, run: Path, logs: Path,
                 junit_part: Path) -> list[str]:
    """The pytest command line of the run: the suites' modules and the plugin's options."""
    argv = ["-p", "no:cacheprovider", "-q", "--nvdla-summary", "--nvdla-target", args.target,
            "--nvdla-model-semantics", args.model_semantics, "-o", "console_output_style=classic",
            "-o", "junit_family=xunit1",  # per-test <properties> (profile, target)
            "--nvdla-summary-file", str(run / "summary.txt"), "--nvdla-log", str(logs)]
    # the results database (harness/results): the run is recorded there as it goes, with live progress
    argv += ["--nvdla-results-db", args.results_db or str(Path(args.results_dir) / "results.sqlite"),
             "--nvdla-run-dir", str(run), "--nvdla-progress", "auto",
             # this command imported nvdla_hil before pytest could mark it for assertion rewriting (pytest warns
             # once per run for an installed wheel); its suites check with pytest.fail, not bare asserts
             "-W", "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning"]
    argv += ["--pyargs"] + [SUITES[s] for s in suites]
    if args.profile:
        argv += ["--nvdla-config", args.profile]
    if traces:
        argv += ["--nvdla-traces", traces]
    if args.vectors:
        argv += ["--nvdla-vectors", args.vectors]
    if args.txn:
        argv += ["--nvdla-txn", args.txn]
    if args.loadables:
        argv += ["--nvdla-loadables", args.loadables]
    if args.nvdla_sw:
        argv += ["--nvdla-sw", args.nvdla_sw]
    for flag, val in (("--nvdla-hw", args.nvdla_hw), ("--nvdla-lab", args.lab), ("--nvdla-board", args.board)):
        if val:
            argv += [flag, val]
    if args.waves:
        argv.append("--nvdla-waves")
    if getattr(args, "rtl_clock_gating", "auto") != "auto":
        argv += ["--nvdla-rtl-clock-gating", args.rtl_clock_gating]
    if getattr(args, "rtl_build", "plain") != "plain":
        argv += ["--nvdla-rtl-build", args.rtl_build]
    if args.poison:
        argv.append("--nvdla-poison")
    if args.allow_empty:
        argv.append("--nvdla-allow-empty")
    if args.coverage_table:
        argv.append("--nvdla-coverage-table")
    if args.rtl_coverage:
        argv += ["--nvdla-rtl-coverage", args.rtl_coverage, "--nvdla-rtl-coverage-dir", str(run / "rtl-coverage")]
    if args.table:
        argv.append("--nvdla-table")
    for bug in args.model_bug or []:
        argv += ["--nvdla-model-bug", bug]
    argv += ["--junitxml", str(junit_part)]
    if args.keyword:
        argv += ["-k", args.keyword]
    if args.jobs and args.jobs != 1:
        argv += ["-n", str(args.jobs)]
    if args.cluster:
        argv += ["--nvdla-cluster", args.cluster]
    if args.max_board_failures is not None:
        argv += ["--nvdla-max-board-failures", str(args.max_board_failures)]
    argv += args.pytest_args
    # labgrid's pytest plugin asserts when a second session starts in one process
    # (labgrid/logging.py StepLogger.start): leave it out unless a --lg-* option asks for it
    if importlib.util.find_spec("labgrid") is not None and not any(a.startswith("--lg-") for a in argv):
        argv = ["-p", "no:labgrid", *argv]
    return argv


def _run_pytest(argv: list[str], run: Path) -> tuple[Any, _RunWatch]:
    """``pytest.main`` on ``argv`` with a :class:`_RunWatch` (SIGTERM and SIGHUP stop it as Ctrl-C
    does); pytest's exit code, made "tests failed" when the run stopped early for its failures."""
    import pytest

    watch = _RunWatch()
    code: int | pytest.ExitCode
    with _sigterm_as_interrupt():
        try:
            code = pytest.main(argv, plugins=[watch])
        except KeyboardInterrupt:  # a second Ctrl-C while pytest was already stopping
            watch.interrupted, code = True, pytest.ExitCode.INTERRUPTED
        except OSError as e:  # junitxml (or another writer) at the session's end: a full or read-only disk
            watch.unwritten.append(f"{e.filename or run}: {e.strerror or e}")
            watch.session_raised = True
            code = (pytest.ExitCode.TESTS_FAILED if watch.failed or watch.bad_input or watch.infra
                    else pytest.ExitCode.OK)
    for name in ("stdout", "stderr"):  # a stream swapped by a thread (redirect_stdout) and closed by pytest
        if getattr(getattr(sys, name), "closed", False):
            setattr(sys, name, getattr(sys, f"__{name}__"))
    if code == pytest.ExitCode.INTERRUPTED and not watch.interrupted and (watch.failed or watch.infra):
        code = pytest.ExitCode.TESTS_FAILED  # stopped early because of its failures (a dead board, -x)
    return code, watch


def _verdict(code: Any, watch: _RunWatch, allow_empty: bool) -> tuple[int, str]:
    """The command's exit code and its one-line reason (run.json's ``result``) from pytest's exit
    code and what the watch saw; the message for anything but a pass or a plain failure."""
    import pytest

    if watch.interrupted:
        early = watch.not_run()
        rc, why = EXIT_INTERRUPTED, f"interrupted (Ctrl-C or SIGTERM){' ' + early if early else ''}; the results up to then are kept"
        print(f"nvdla-hil regress: interrupted{' ' + early if early else ''}; exit {EXIT_INTERRUPTED}", file=sys.stderr)
    elif code == pytest.ExitCode.OK:
        rc, why = 0, "passed"
    elif code == pytest.ExitCode.TESTS_FAILED and watch.failed == 0 and watch.infra:
        rc, why = EXIT_INFRASTRUCTURE, f"infrastructure: {watch.infra} test(s) stopped by the board, link or simulator"
        print(f"nvdla-hil regress: {watch.infra} infrastructure failure(s) (outcome 'infrastructure' above: board "
              f"dead or hung, link fault, simulator crashed or hung, no board); no test failed on its result; "
              f"exit {EXIT_INFRASTRUCTURE}", file=sys.stderr)
    elif code == pytest.ExitCode.TESTS_FAILED and watch.failed == 0 and watch.bad_input:
        rc, why = 2, f"bad input: {watch.bad_input} malformed test input(s), named above"
        print(f"nvdla-hil regress: {watch.bad_input} test input(s) are malformed (outcome 'bad input' above, "
              "each naming its file and line); no test failed", file=sys.stderr)
    elif code == pytest.ExitCode.TESTS_FAILED:
        rc, why = 1, "a test failed" + (f" (and {watch.bad_input} bad input(s))" if watch.bad_input else "")
    elif code == pytest.ExitCode.NO_TESTS_COLLECTED:
        if allow_empty:
            rc, why = 0, "no test ran (allowed by --allow-empty)"
        else:
            rc, why = 2, "no test ran (none collected, all deselected or all skipped)"
            print("nvdla-hil regress: no test ran (none collected, all deselected, or every test skipped); "
                  "check --traces/--vectors/-k/--nvdla-config, or pass --allow-empty", file=sys.stderr)
    elif code == pytest.ExitCode.USAGE_ERROR:
        rc, why = 2, "bad option or configuration (see the ERROR line above)"
        print("nvdla-hil regress: bad option or configuration (pytest's ERROR above names it)", file=sys.stderr)
    elif code == pytest.ExitCode.INTERRUPTED:
        rc, why = 2, "interrupted or a collection error (see above)"
        print("nvdla-hil regress: interrupted, or a test source could not be collected (see the errors above)",
              file=sys.stderr)
    else:
        rc, why = EXIT_INTERNAL, f"pytest exit code {int(code)}"
        print(f"nvdla-hil regress: pytest stopped with exit code {int(code)} (internal error, please report: "
              "the INTERNALERROR lines above)", file=sys.stderr)
    return rc, why


def _keep_junit(args: argparse.Namespace, run: Path, junit: Path, junit_part: Path, code: Any, rc: int,
                watch: _RunWatch) -> list[str]:
    """Move pytest's JUnit file into place (and to ``--junit``) only when it is whole; what could not
    be written."""
    import pytest

    unwritten: list[str] = []
    try:
        if junit_part.is_file() and junit_part.stat().st_size and rc != EXIT_INTERNAL and not watch.session_raised:
            if args.junit:
                write_atomic(junit, junit_part.read_bytes())
            os.replace(junit_part, run / "junit.xml")
        elif junit_part.exists() or code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            unwritten.append(f"{run / 'junit.xml'}: not written (pytest could not write it whole)")
    except OSError as e:
        unwritten.append(f"{e.filename or junit}: {e.strerror or e}")
    finally:
        junit_part.unlink(missing_ok=True)  # never a truncated junit.xml
    return unwritten


def _write_report(run: Path, db: str | None) -> None:
    """The run's report.html (harness/analysis/report.py); a report that cannot be drawn is said
    so and removed, never hides the results."""
    try:
        from ..analysis.report import write_report

        print(f"report: {write_report(run, db=db)}")
    except Exception as e:  # noqa: BLE001 - a report that cannot be drawn never hides the results
        with contextlib.suppress(OSError):
            (run / "report.html").unlink(missing_ok=True)  # never a truncated report
        where = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename else f"{type(e).__name__}: {e}"
        print(f"report: not written ({where})", file=sys.stderr)


class _RunWatch:
    """A pytest plugin object the ``regress`` command passes to ``pytest.main``: what happened,
    for the exit code (interrupt, real failures, malformed inputs, results not written)."""

    def __init__(self) -> None:
        self.interrupted = False
        self.failed = 0
        self.bad_input = 0
        self.infra = 0  # failures of the board, link or simulator (harness/boards/health.py)
        self.unwritten: list[str] = []
        self.session_raised = False
        self.config: Any = None
        # from the run's recorder at the end (harness/results/recorder.py, which counts the workers'
        # collection under xdist): the tests the run set out to run, those with a result, those cut off
        self.collected = self.finished = self.cut_off = 0

    def not_run(self) -> str:
        """``"after 15 of 308 tests (293 not run)"`` for a run stopped early; "" when it is not known."""
        left = self.collected - self.finished - self.cut_off
        if left <= 0:
            return ""
        return (f"after {self.finished} of {self.collected} tests ({left} not run"
                + (f", {self.cut_off} cut off" if self.cut_off else "") + ")")

    def pytest_configure(self, config: Any) -> None:
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        # pytest stops a session it was told to stop (a dead board: session.shouldstop, or -x) with
        # Session.Interrupted, a KeyboardInterrupt: that is the run's failures, not Ctrl-C
        import pytest

        if not excinfo.errisinstance(pytest.Session.Interrupted):
            self.interrupted = True

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed:
            if getattr(report, "nvdla_bad_input", None):
                self.bad_input += 1
            elif getattr(report, "nvdla_infra", None):
                self.infra += 1
            else:
                self.failed += 1

    def pytest_unconfigure(self, config: Any) -> None:
        from ..plugin.junit import CUT_OFF_KEY
        from ..plugin.keys import UNWRITTEN_KEY
        from ..plugin.results import RECORDER_NAME, STOP_NAME

        self.unwritten.extend(config.stash.get(UNWRITTEN_KEY, []))
        recorder = config.pluginmanager.get_plugin(RECORDER_NAME)
        if recorder is not None:  # its rows include the tests cut off, recorded as interrupted
            self.cut_off = len(config.stash.get(CUT_OFF_KEY, []))
            self.collected, self.finished = recorder.collected, len(recorder.done) - self.cut_off
        stop = config.pluginmanager.get_plugin(STOP_NAME)
        if stop is not None and stop.reason:  # a signal, even one held until the session had ended
            self.interrupted = True


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a job scheduler's kill, ``timeout``) stops the run as Ctrl-C does, so run.json
    and the summary record it as interrupted; SIGKILL cannot be caught (run.json stays "running").
    Inside the pytest session the results plugin's RunStop (harness/results/stopping.py) takes
    the signals over and holds one that arrives in a result's bookkeeping until that is done."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, _raise)
    # SIGHUP (a closed terminal or SSH session) likewise: a labgrid place, board locks and results
    # are given back as on Ctrl-C (harness/boards/labgrid_place.py); unless the run was started
    # with hang-ups ignored (``nohup``), which it keeps, as every Unix tool does
    hup_ignored = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    old_hup = None if hup_ignored else signal.signal(signal.SIGHUP, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        if old_hup is not None:
            signal.signal(signal.SIGHUP, old_hup)


REGRESS_EPILOG = """\
exit codes:
  0  at least one test ran and none failed
  1  a test failed (or had an error while running)
  2  bad input or configuration, named in the message (file and line, option, register,
     board): a missing or empty --traces/--vectors folder or NVDLA_TRACES, --target verilator
     without --nvdla-hw/NVDLA_HW, --target serial without --lab/--board, a board held by another
     regression (PID, host, since when), an existing --junit file without --force, a collection
     error, or a run in which no test ran (all skipped or deselected) unless --allow-empty;
     also a malformed test input found during the run (outcome "bad input", counted apart)
     when no test failed, and a results disk that is full or read-only (named with its path)
  3  internal error (a traceback is printed): please report it
  130  interrupted (Ctrl-C or SIGTERM); run.json says "interrupted"

results:
  every run writes <results-dir>/<run-id>/ (UTC time, PID, random suffix; never reused):
  junit.xml, summary.txt (the table printed), logs/<test>.log (each test's register accesses
  and link record), run.json (command, exit code; "running" until the run ends, so a killed run
  shows); <results-dir>/latest points at the newest.
"""



def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("regress", help="run a regression suite on a target and print a summary table",
                       description="Run a named suite (NVDLA traces, packed vectors, or all) through pytest "
                                   "on a target; prints a per-test table with outcome and time, and keeps every "
                                   "result in its own run directory.",
                       epilog=REGRESS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_options(p)
    p.add_argument("--suite", choices=[*SUITES, "all"], default="all", help="suite to run (default: all)")
    p.add_argument("--traces", help="NVDLA trace folder: one configuration's, or a folder of configuration folders "
                                    "(default: NVDLA_TRACES, else the --nvdla-hw checkout's verif/tests/trace_tests, "
                                    "else ../shared/nvdla/trace_tests/nv_small); a missing or empty folder is an error")
    p.add_argument("--model-bug", action="append", metavar="SPEC",
                   help="model target: inject a datapath bug into the target only (harness/targets/faults.py)")
    p.add_argument("--txn", help="folder of nv_full's traceplayer tests (input.txn; default: NVDLA_TXN_TESTS, else "
                                 "../shared/nvdla/traceplayer_v1)")
    p.add_argument("--vectors", help="packed-vector folder (default: the bundled suites)")
    p.add_argument("--loadables", help="NVDLA's software regression folder, flatbufs/ and golden/ (default: "
                                       "NVDLA_LOADABLES, else ../shared/nvdla_sw)")
    p.add_argument("--nvdla-sw", default=os.environ.get("NVDLA_SW"),
                   help="nvdla/sw checkout whose kmd/firmware runs the loadables (or NVDLA_SW)")
    p.add_argument("--results-dir", default=os.environ.get("NVDLA_HIL_RESULTS", "results"),
                   help="where run directories go (default: results, or NVDLA_HIL_RESULTS); each run writes "
                        "<results-dir>/<run-id>/ and points <results-dir>/latest at it")
    p.add_argument("--results-db", default=os.environ.get("NVDLA_HIL_RESULTS_DB"), metavar="URL",
                   help="record the run in this results database: an SQLite file or postgresql://user@host/db "
                        "(default: NVDLA_HIL_RESULTS_DB, else <results-dir>/results.sqlite); see nvdla-hil history")
    p.add_argument("--junit", default=None,
                   help="also write JUnit XML here (default: only <results-dir>/<run-id>/junit.xml); "
                        "refuses an existing file unless --force")
    p.add_argument("--log-dir", help="write each test's register access log here "
                                     "(default: <results-dir>/<run-id>/logs); refuses a non-empty folder unless --force")
    p.add_argument("--force", action="store_true", help="allow --junit / --log-dir to replace existing results")
    p.add_argument("--allow-empty", action="store_true",
                   help="a run in which no test ran (all skipped or deselected) exits 0 instead of 2")
    p.add_argument("--poison", action="store_true", help="poison checked output regions before each trace")
    p.add_argument("--table", action="store_true",
                   help="list every test at the end (default: what did not pass; every row is in summary.txt)")
    p.add_argument("--rtl-coverage", default=None, metavar="KINDS",
                   help="verilator: measure RTL code coverage (line, toggle, or line,toggle) with the instrumented "
                        "simulator (built once, cached); per-unit table, lcov HTML and per-test ranking in "
                        "RUN/rtl-coverage/ (see sims/README.md)")
    p.add_argument("--coverage-table", action="store_true",
                   help="print the functional-coverage table (default: one line; coverage.txt in the run folder)")
    p.add_argument("-k", dest="keyword", help="only tests matching this pytest -k expression")
    p.add_argument("-j", "--jobs", type=int, default=1, help="parallel workers (pytest-xdist)")
    p.add_argument("--cluster", metavar="ADDR", default=os.environ.get("NVDLA_HIL_CLUSTER"),
                   help="run the tests on a Dask distributed cluster: its scheduler address, tcp://host:8786 "
                        "(or NVDLA_HIL_CLUSTER; needs dask[distributed])")
    p.add_argument("--max-board-failures", type=int, default=None, metavar="N",
                   help="stop after N consecutive tests failed on a dead board (default 3; 0: never)")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    p.set_defaults(func=_cmd_regress)
