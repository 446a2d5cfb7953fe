"""``nvdla-hil`` command line: regression, registers, traces, vectors, layouts, sims, boards.

Every subcommand has ``--help``.

Exit codes (the contract; ``regress --help`` repeats it):

* **0** only when at least one test (or check) ran and none failed;
* **1** when a test or check failed (or had an error while running);
* **2** for bad input or configuration, with a message naming what is wrong: the file and
  line, the option, the register or the board (only the tool's own error types, and an
  ``OSError`` naming a path: :func:`exit_code_for`);
* **130** when Ctrl-C or SIGTERM stopped the command;
* **3** for an internal error (any other exception): its traceback, "please report".

Inside ``regress`` a malformed trace, vector or manifest found while the suite runs is the
outcome "bad input" (one line naming file and line, counted apart) and exits 2 if nothing failed. For ``regress`` that includes a missing or
  empty ``--traces``/``--vectors`` folder (or ``NVDLA_TRACES``), ``--target verilator`` without
  an nvdla/hw checkout, ``--target serial`` without a lab file and board, a board another
  regression holds, a lab file that does not load, an explicit ``--junit`` file that exists
  (without ``--force``), a collection error, and a run in which no test ran (every test
  skipped or deselected, or none collected) unless ``--allow-empty`` was given.

Results are never lost: each ``regress`` writes into its own run directory
``<results-dir>/<run-id>/`` (run-id: UTC timestamp, PID and a random suffix, created with
``os.mkdir`` so two runs never share one) holding ``junit.xml``, ``summary.txt`` (the printed
table), ``logs/`` (one register-access log per test, with the link record when the target
has one) and ``run.json`` (written as "running" at the start, "finished" or "interrupted" at the
end: :func:`run_state`), each written whole or not at all; ``<results-dir>/latest`` is then
pointed at it atomically (a temporary symlink moved over it with ``os.replace``). Commands
that write files (``trace --log``, ``pack``, ``unpack``, ``vectors gen``, ``profile derive
--out``, ``regress --junit``) refuse to overwrite an existing file unless ``--force``, and
never overwrite their own input.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import importlib.util
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..drivers.errors import ConfigError, ResultsError, is_own_error, write_atomic
from ..drivers.regmap import RegisterMapError
from ..drivers.transport import Transport
from .targets import TARGETS, TargetSpec, layer_timeout, open_target

__all__ = ["main", "build_parser", "run_state", "EXIT_INTERRUPTED", "EXIT_INTERNAL", "EXIT_INFRASTRUCTURE"]

#: Ctrl-C (or SIGTERM) stopped the command: 128 + SIGINT, as shells report it; never 2 (bad input)
EXIT_INTERRUPTED = 130
#: a programming error inside nvdla-hil (a traceback is printed): please report it
EXIT_INTERNAL = 3
#: tests could not run to a result because the board, its link or the simulator failed, and no
#: test failed on its result (harness/boards_health.py): the lab's problem, not the hardware's
EXIT_INFRASTRUCTURE = 4

SUITES = {
    "traces": "nvdla_hil.harness.suites.test_traces",
    "txn": "nvdla_hil.harness.suites.test_txn",
    "vectors": "nvdla_hil.harness.suites.test_vectors",
    "loadables": "nvdla_hil.harness.suites.test_loadables",
}


def _default_loadables() -> str | None:
    """NVDLA_LOADABLES, else ../shared/nvdla_sw (NVDLA's software regression) next to a source checkout."""
    env = os.environ.get("NVDLA_LOADABLES")
    if env:
        return env
    here = Path(__file__).resolve().parents[1]
    for cand in (Path.cwd() / "../shared/nvdla_sw", here / "../shared/nvdla_sw"):
        if (cand / "flatbufs").is_dir():
            return str(cand.resolve())
    return None


def _default_traces() -> str | None:
    """NVDLA_TRACES, else ../shared/nvdla/trace_tests/nv_small next to a source checkout."""
    env = os.environ.get("NVDLA_TRACES")
    if env:
        return env
    here = Path(__file__).resolve().parents[1]
    for cand in (Path.cwd() / "../shared/nvdla/trace_tests/nv_small", here / "../shared/nvdla/trace_tests/nv_small"):
        if cand.is_dir():
            return str(cand.resolve())
    return None


def _default_txn() -> str | None:
    """NVDLA_TXN_TESTS, else ../shared/nvdla/traceplayer_v1 next to a source checkout."""
    env = os.environ.get("NVDLA_TXN_TESTS")
    if env:
        return env
    here = Path(__file__).resolve().parents[1]
    for cand in (Path.cwd() / "../shared/nvdla/traceplayer_v1", here / "../shared/nvdla/traceplayer_v1"):
        if cand.is_dir():
            return str(cand.resolve())
    return None


def _add_target_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument("--target", choices=TARGETS, default=os.environ.get("NVDLA_HIL_TARGET", "model"),
                   help="where to run (default: model, the in-process virtual NVDLA)")
    g.add_argument("--profile", "--nvdla-config", dest="profile", default=os.environ.get("NVDLA_HIL_CONFIG"),
                   help="hardware profile (nv_small, nv_small_256_full, nv_full, ...)")
    g.add_argument("--model-semantics", choices=("rtl", "cmod"), default="rtl",
                   help="model target: follow the RTL (default) or NVDLA's C model where they differ")
    g.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"), help="nvdla/hw checkout (verilator and cmod targets)")
    g.add_argument("--waves", action="store_true", help="verilator target: dump FST waves")
    g.add_argument("--lab", default=os.environ.get("NVDLA_HIL_LAB"), help="lab file (serial target)")
    g.add_argument("--board", default=os.environ.get("NVDLA_HIL_BOARD"), help="board name (serial target)")
    g.add_argument("--lg-place", default=None, metavar="NAME",
                   help="serial target without --lab: the board is this labgrid place (or LG_PLACE)")
    g.add_argument("--lg-env", default=None, metavar="FILE",
                   help="serial target without --lab: the labgrid place of this labgrid environment (or LG_ENV)")
    g.add_argument("--lg-coordinator", default=None, metavar="HOST:PORT",
                   help="labgrid coordinator of --lg-place (or LG_COORDINATOR)")


def _labgrid_lab(args: argparse.Namespace) -> None:
    """``--target serial`` with a labgrid place (``--lg-place``/``--lg-env``, or LG_PLACE/LG_ENV)
    instead of ``--lab``: a one-board lab file for the place (shared per user, see
    :func:`~nvdla_hil.harness.labgrid_place.session_lab_file`) becomes ``--lab``/``--board``."""
    if getattr(args, "target", None) != "serial" or getattr(args, "lab", None) or not hasattr(args, "lg_place"):
        return
    place = args.lg_place or os.environ.get("LG_PLACE")
    env = args.lg_env or os.environ.get("LG_ENV")
    if not (place or env):
        return
    from .lab import LabError
    from .labgrid_place import session_lab_file

    prof = args.profile.split(",")[0] if args.profile else "nv_small"
    try:
        path, name = session_lab_file(place, args.lg_coordinator or os.environ.get("LG_COORDINATOR"), env=env,
                                      profile=prof)
    except LabError as e:
        raise _Bad(f"{'--lg-place' if place else '--lg-env'}: {e}") from None
    if args.board and args.board != name:
        raise _Bad(f"--board {args.board} and the labgrid place {name} name two boards: give one")
    args.lab, args.board = str(path), name


def _spec(args: argparse.Namespace, profile: str | None = None) -> TargetSpec:
    prof = profile or (args.profile.split(",")[0] if args.profile else "nv_small")
    book = None
    if args.target == "serial":  # several traces in one command: what the board holds is not resent
        from .targets.serial import BoardMemoryBook

        book = BoardMemoryBook()
    return TargetSpec(kind=args.target, profile=prof, semantics=args.model_semantics, nvdla_hw=args.nvdla_hw,
                      waves=args.waves, lab=args.lab, board=args.board, memory_book=book)


# ---- regress ------------------------------------------------------------------------------


class _Bad(ConfigError):
    """Bad input or configuration: exit 2 with this message."""


def _check_regress(args: argparse.Namespace, suites: list[str]) -> str | None:
    """Validate everything that can be checked before pytest starts; the trace root to pass."""
    import pytest

    from .plugin import check_trace_source, check_vector_source

    if args.target in ("verilator", "cmod"):
        if not args.nvdla_hw:
            raise _Bad(f"--target {args.target} needs an nvdla/hw checkout: pass --nvdla-hw PATH (or set NVDLA_HW)")
        if not Path(args.nvdla_hw).is_dir():
            raise _Bad(f"--nvdla-hw {args.nvdla_hw}: no such folder (the nvdla/hw checkout for --target {args.target})")
    if args.model_bug and args.target != "model":
        raise _Bad("--model-bug injects a datapath bug into the model target only (--target model)")
    if args.target == "serial":
        from .lab import LabError, resolve_board

        if not args.lab:
            raise _Bad("--target serial needs a lab file and a board: pass --lab FILE --board NAME "
                       "(or set NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
        try:
            resolve_board(args.lab, args.board)
        except LabError as e:
            raise _Bad(f"--lab {args.lab}: {e}") from None
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
                    raise _Bad("--suite traces: no NVDLA trace tests configured: pass --traces PATH "
                               "(or set NVDLA_TRACES, or give --nvdla-hw PATH)")
        elif args.traces:
            raise _Bad(f"--traces {args.traces} was given but --suite {args.suite} runs no traces")
        if "txn" in suites:
            if args.txn:
                if not Path(args.txn).is_dir() or not any(Path(args.txn).rglob("input.txn")):
                    raise _Bad(f"--txn {args.txn}: {'no such folder' if not Path(args.txn).is_dir() else 'no input.txn test below it'}")
            else:
                args.txn = _default_txn()
                if args.txn is None and args.suite == "txn":
                    raise _Bad("--suite txn: no nv_full traceplayer tests configured: pass --txn PATH "
                               "(or set NVDLA_TXN_TESTS)")
        elif args.txn:
            raise _Bad(f"--txn {args.txn} was given but --suite {args.suite} runs no nv_full tests")
        if "loadables" in suites:
            if args.loadables:
                if not Path(args.loadables).is_dir() or not any(Path(args.loadables).glob("flatbufs/**/*_fbuf")):
                    raise _Bad(f"--loadables {args.loadables}: "
                               f"{'no such folder' if not Path(args.loadables).is_dir() else 'no flatbufs/**/*_fbuf loadable below it'}")
            else:
                args.loadables = _default_loadables()
                if args.loadables is None and args.suite == "loadables":
                    raise _Bad("--suite loadables: no loadables configured: pass --loadables PATH (or set NVDLA_LOADABLES)")
        elif args.loadables:
            raise _Bad(f"--loadables {args.loadables} was given but --suite {args.suite} runs no loadables")
        if "vectors" in suites and args.vectors:
            check_vector_source("--vectors", args.vectors)
        elif args.vectors:
            raise _Bad(f"--vectors {args.vectors} was given but --suite {args.suite} runs no vectors")
    except pytest.UsageError as e:
        raise _Bad(str(e)) from None
    if args.junit and Path(args.junit).exists() and not args.force:
        raise _Bad(f"--junit {args.junit}: the file exists; pass --force to replace it "
                   "(or leave --junit out: each run writes <results-dir>/<run-id>/junit.xml)")
    if args.log_dir and Path(args.log_dir).is_dir() and any(Path(args.log_dir).iterdir()) and not args.force:
        raise _Bad(f"--log-dir {args.log_dir}: the folder is not empty; pass --force to write into it "
                   "(or leave --log-dir out: each run writes <results-dir>/<run-id>/logs/)")
    return traces


def new_run_dir(results: str | os.PathLike[str]) -> Path:
    """A fresh ``<results>/<UTC timestamp>-<pid>-<random>`` folder; never an existing one."""
    root = Path(results)
    root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"{datetime.now(UTC).microsecond // 1000:03d}Z"
    for _ in range(100):
        run = root / f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            os.mkdir(run)
        except FileExistsError:
            continue
        return run
    raise OSError(f"{root}: could not create a new run directory")


def point_latest(run: Path) -> Path:
    """Point ``<results>/latest`` at ``run`` atomically (a temporary symlink moved over it)."""
    latest = run.parent / "latest"
    tmp = run.parent / f".latest-{os.getpid()}-{secrets.token_hex(4)}"
    os.symlink(run.name, tmp)
    try:
        os.replace(tmp, latest)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return latest


def _cmd_regress(args: argparse.Namespace) -> int:
    import pytest

    suites = list(SUITES) if args.suite == "all" else [args.suite]
    try:
        traces = _check_regress(args, suites)
    except _Bad as e:
        print(f"nvdla-hil regress: {e}", file=sys.stderr)
        return 2
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
    junit = Path(args.junit) if args.junit else run / "junit.xml"
    junit_part = run / ".junit.xml.part"  # pytest writes here; renamed into place only when whole
    if args.junit:
        junit.parent.mkdir(parents=True, exist_ok=True)
    logs = Path(args.log_dir) if args.log_dir else run / "logs"
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
    if args.poison:
        argv.append("--nvdla-poison")
    if args.allow_empty:
        argv.append("--nvdla-allow-empty")
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
    t0 = time.monotonic()
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
    if watch.interrupted:
        rc, why = EXIT_INTERRUPTED, "interrupted (Ctrl-C or SIGTERM); the results up to then are kept"
        print(f"nvdla-hil regress: interrupted; exit {EXIT_INTERRUPTED}", file=sys.stderr)
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
        if args.allow_empty:
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
    unwritten = list(watch.unwritten)
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
    meta.update({"status": "interrupted" if watch.interrupted else "finished", "pytest_argv": argv,
                 "ended": datetime.now(UTC).isoformat(timespec="seconds"),
                 "seconds": round(time.monotonic() - t0, 3), "exit_code": rc, "result": why,
                 "pytest_exit_code": int(code), "junit": str(junit), "logs": str(logs),
                 "tests": {"failed": watch.failed, "bad_input": watch.bad_input, "infrastructure": watch.infra}})
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
    from .results.recorder import record_exit

    record_exit(argv, rc)  # the results database gets the command's own exit code (bad input, interrupt, disk)
    try:
        from .report import write_report

        print(f"report: {write_report(run, db=args.results_db)}")
    except Exception as e:  # noqa: BLE001 - a report that cannot be drawn never hides the results
        with contextlib.suppress(OSError):
            (run / "report.html").unlink(missing_ok=True)  # never a truncated report
        where = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename else f"{type(e).__name__}: {e}"
        print(f"report: not written ({where})", file=sys.stderr)
    try:
        latest = point_latest(run)
        print(f"results: {run} ({latest} -> {run.name})")
    except OSError as e:
        print(f"results: {run} (could not update {run.parent / 'latest'}: {e})", file=sys.stderr)
    return rc


class _RunWatch:
    """A pytest plugin object the ``regress`` command passes to ``pytest.main``: what happened,
    for the exit code (interrupt, real failures, malformed inputs, results not written)."""

    def __init__(self) -> None:
        self.interrupted = False
        self.failed = 0
        self.bad_input = 0
        self.infra = 0  # failures of the board, link or simulator (harness/boards_health.py)
        self.unwritten: list[str] = []
        self.session_raised = False
        self.config: Any = None

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
        from .plugin import UNWRITTEN_KEY

        self.unwritten.extend(config.stash.get(UNWRITTEN_KEY, []))


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a job scheduler's kill, ``timeout``) stops the run as Ctrl-C does, so run.json
    and the summary record it as interrupted; SIGKILL cannot be caught (run.json stays "running")."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, _raise)
    # SIGHUP (a closed terminal or SSH session) likewise: a labgrid place, board locks and results
    # are given back as on Ctrl-C (harness/labgrid_place.py)
    old_hup = signal.signal(signal.SIGHUP, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGHUP, old_hup)


def run_state(run: str | os.PathLike[str]) -> str:
    """The state of a run directory from its ``run.json``: ``finished``, ``interrupted`` (Ctrl-C,
    SIGTERM, or a process that died while the status still said ``running`` - a SIGKILL, a crash,
    a lost machine), ``running`` (its process is alive on this host, or another host's), or
    ``unknown`` (no readable run.json)."""
    try:
        meta = json.loads((Path(run) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "unknown"
    status = str(meta.get("status") or ("finished" if "exit_code" in meta else "unknown"))
    if status != "running":
        return status
    if meta.get("host") != socket.gethostname():
        return "running"
    try:
        os.kill(int(meta.get("pid") or 0), 0)
    except ProcessLookupError:
        return "interrupted"
    except (PermissionError, ValueError, OverflowError):
        return "running"
    return "running" if int(meta.get("pid") or 0) > 0 else "interrupted"


# ---- regs ---------------------------------------------------------------------------------


def _parse_value(text: str) -> int | str:
    try:
        return int(text, 0)
    except ValueError:
        return text  # an enum name


#: registers that exist only with a profile feature: SDP's LUT (S_LUT_*: NV_NVDLA_SDP_core's LUT
#: is built only when the .spec defines SDP_LUT_ENABLE; CDP's LUT is always there)
_FEATURE_REGISTERS = ((("SDP", "S_LUT_"), "sdp_lut"),)


def _regs_check(profile: Any, reg: Any) -> None:
    """A register of a unit or feature the profile lacks is an error (``regs`` on real hardware
    would read an absent register as 0 and look fine)."""
    from ..drivers.profiles import FeatureMissingError

    if not profile.has_unit(reg.block):
        raise FeatureMissingError(f"{profile.name} has no {reg.block} unit ({reg.full_name})")
    for (block, prefix), feat in _FEATURE_REGISTERS:
        if reg.block == block and reg.name.startswith(prefix) and not profile.has(feat):
            try:
                profile.require(feat)
            except FeatureMissingError as e:
                raise FeatureMissingError(f"{e}: {reg.full_name}") from None


def _regs_values(name: str, values: list[str]) -> dict[str, int | str] | int:
    """``regs write`` arguments: one VALUE, or FIELD=VALUE pairs (each field once)."""
    if not any("=" in a for a in values):
        if len(values) != 1:
            raise _Bad(f"regs write {name}: give one VALUE or FIELD=VALUE pairs, not {len(values)} values")
        try:
            return int(values[0], 0)
        except ValueError:
            raise _Bad(f"regs write {name}: {values[0]!r} is not a number (give 0x..., 0b... or decimal, "
                       "or FIELD=VALUE)") from None
    out: dict[str, int | str] = {}
    for a in values:
        k, eq, v = a.partition("=")
        k = k.strip()
        if not eq or not k or not v:
            raise _Bad(f"regs write {name}: {a!r}: expected FIELD=VALUE")
        if k.upper() in (f.upper() for f in out):
            raise _Bad(f"regs write {name}: field {k} given twice")
        out[k] = _parse_value(v)
    return out


def _cmd_regs(args: argparse.Namespace) -> int:
    from ..drivers.driver import NvdlaDriver
    from ..drivers.profiles import load_profile

    if args.regs_cmd == "check":
        from ..drivers.regmap import check_against_checkout

        hw = args.nvdla_hw
        if not hw:
            print("nvdla-hil regs check: give --nvdla-hw PATH (or NVDLA_HW)", file=sys.stderr)
            return 2
        diffs = check_against_checkout(hw, args.profile or "nv_small")
        for d in diffs:
            print(d)
        print(f"{len(diffs)} difference(s) between the bundled register map and {hw}")
        return 1 if diffs else 0
    if args.profile is not None and ("," in args.profile or not args.profile.strip()):
        raise _Bad(f"--profile {args.profile!r}: regs works on one profile; name one (e.g. nv_small)")
    profile = load_profile((args.profile or "nv_small").split(",")[0])
    if args.regs_cmd == "list":
        rm = profile.regmap
        for block in args.blocks or list(rm.blocks):
            b = rm.block(block)
            for r in b.registers.values():
                fields = ", ".join(f"{f.name}[{f.msb}:{f.lsb}]" for f in r.fields.values())
                flags = ("dual " if r.dual else "") + ("trigger " if r.trigger else "")
                print(f"{r.address:#07x} {r.full_name:45s} {r.access:2s} rst={r.reset:#010x} {flags}{fields}")
        return 0
    if args.regs_cmd == "info":
        r = profile.regmap.register(args.name)
        print(f"{r.full_name} @ {r.address:#x} (offset {r.offset:#x}), access {r.access}, reset {r.reset:#010x}"
              + (", per register group" if r.dual else "") + (", write has side effects" if r.trigger else ""))
        for f in r.fields.values():
            enums = (" {" + ", ".join(f"{k}={v}" for k, v in f.enums.items()) + "}") if f.enums else ""
            print(f"  [{f.msb}:{f.lsb}] {f.name} {f.access} reset={f.reset:#x}{enums}")
        return 0
    if args.regs_cmd in ("read", "write"):
        for name in (args.names if args.regs_cmd == "read" else [args.name]):
            _regs_check(profile, profile.regmap.register(name))
        values = _regs_values(args.name, args.values) if args.regs_cmd == "write" else None
    if args.regs_cmd == "dump":
        for block in args.blocks or []:
            if not profile.has_unit(block):
                raise _Bad(f"regs dump: {profile.name} has no {block} unit "
                           f"(its units: {', '.join(sorted(profile.units))})")
    with open_target(_spec(args, profile.name)) as target:
        drv = NvdlaDriver(target, profile)
        if args.regs_cmd == "read":
            for name in args.names:
                r = drv.register(name)
                v = drv.read(name)
                decoded = ", ".join(f"{k}={f.decode(fv) or hex(fv)}" for k, f in r.fields.items()
                                    for fv in [f.extract(v)])
                print(f"{r.full_name} = {v:#010x}  ({decoded})")
        elif args.regs_cmd == "write":
            if isinstance(values, dict):
                value = drv.set_fields(args.name, values)
            else:
                assert values is not None
                value = values
                drv.write(args.name, value)
            print(f"{drv.register(args.name).full_name} <= {value:#010x}")
        elif args.regs_cmd == "dump":
            dumped = drv.dump(args.blocks or None)
            if not dumped:
                raise _Bad(f"regs dump {' '.join(args.blocks or [])}: no readable register to dump")
            for name, v in dumped.items():
                print(f"{name:45s} {v:#010x}")
    return 0


# ---- trace --------------------------------------------------------------------------------


def _refuse_log(log: str, trace, force: bool) -> str | None:  # noqa: ANN001
    """Why ``--log`` must not be written (it is the trace or one of its files; it exists), or None."""
    dest = Path(log).resolve()
    own = {trace.path.resolve()}
    for c in trace.of_kind("mem_load"):
        own.add((trace.folder / c.args[2]).resolve())
    if dest in own:
        return "that is the trace's own file; choose another path"
    if dest.is_dir():
        return "is a folder; give a file path"
    if dest.parent.resolve() == trace.folder.resolve() and not force:
        return "would be written into the trace's folder; choose another path (or pass --force)"
    if dest.exists() and not force:
        return "the file exists; pass --force to replace it"
    return None



def _cmd_trace(args: argparse.Namespace) -> int:
    from ..drivers.driver import AccessLog, NvdlaDriver
    from ..drivers.profiles import load_profile
    from ..drivers.profiles import list_profiles
    from .traces import parse_trace, run_trace, trace_features
    from .workload import explain_timeout, trace_budget

    p = Path(args.path)
    if (p / "input.txn").is_file() or p.name == "input.txn":
        return _cmd_txn(args)
    trace = parse_trace(args.path)
    if args.log:
        bad = _refuse_log(args.log, trace, args.force)
        if bad:
            print(f"nvdla-hil trace: --log {args.log}: {bad}", file=sys.stderr)
            return 2
    feats = trace_features(trace)
    if args.profile:
        profiles = args.profile.split(",")
    else:  # a trace in a configuration's folder (trace_tests/<config>/<trace>) runs on that configuration
        own = trace.folder.parent.name
        profiles = ([own] if own in list_profiles() else []) + ["nv_small", "nv_small_256_full"]
    profs = [load_profile(p, nvdla_hw=args.nvdla_hw) for p in dict.fromkeys(profiles)]
    prof = next((p for p in profs if all(p.has(f) for f in feats)), None)
    if prof is None:
        missing = sorted(f for f in feats if not profs[0].has(f))
        lacking = " and ".join(p.name for p in profs)
        print(f"{trace.name} needs {', '.join(missing)}, which {lacking} lack{'s' if len(profs) == 1 else ''}; "
              f"give --nvdla-config a profile that has it (e.g. nv_small_256_full)", file=sys.stderr)
        return 2
    if args.model_bug and args.target != "model":
        print("nvdla-hil trace: --model-bug injects a bug into the model target only (--target model)", file=sys.stderr)
        return 2
    if args.model_bug:
        from .targets.model import ModelTarget

        opened: Transport = ModelTarget(prof, semantics=args.model_semantics, bugs=args.model_bug)
    else:
        opened = open_target(_spec(args, prof.name))
    actual: dict[int, object] = {}
    with opened as target:
        drv = NvdlaDriver(target, prof)
        log = drv.record(AccessLog(prof.regmap))
        budget = trace_budget(trace, drv, target)
        if args.timeout is not None:
            budget = dataclasses.replace(budget, seconds=args.timeout, source="--timeout")
        result = run_trace(trace, target, driver=drv, poison=args.poison, timeout=budget.seconds)
        if result.status == "failed":  # what the target left in each failing region, for the diff
            actual = {ck.line: target.mem_read(ck.address, ck.size, port=ck.port)
                      for ck in result.checks if ck.kind == "crc" and not ck.passed}
        if args.stats:
            for unit in trace.units():
                if unit in ("SDP", "CDP", "PDP", "CACC"):
                    try:
                        st = drv.precision.read_statistics(unit, 0)
                    except RegisterMapError as e:
                        print(f"  statistics {unit}: {e}")
                        continue
                    print(f"  statistics {unit} group 0: {st.counters()}")
    print(f"[{prof.name} on {args.target}]")
    print(result.summary())
    why = explain_timeout(result.message, budget)
    if why:
        print(why)
    if actual and not args.no_diagnose:
        from .triage import diagnose_trace

        diag = diagnose_trace(trace, actual, prof, semantics=args.model_semantics, budget=args.hint_budget)  # type: ignore[arg-type]
        print(diag.summary())
    return _finish_trace(args, result, log)


def _finish_trace(args: argparse.Namespace, result, log) -> int:  # noqa: ANN001
    """The end of ``trace`` (both formats): the access log to ``--log`` or its tail on a
    failure, and the exit code (2 when nothing was checked)."""
    if args.log:
        with open(args.log, "w", encoding="utf-8") as fh:
            log.dump(fh)
        print(f"register access log: {args.log} ({len(log.records)} accesses)")
    elif result.status in ("failed", "error"):
        print("last register accesses:")
        print("\n".join("  " + line for line in log.tail(15)))
    if result.status == "skipped":
        print(f"nvdla-hil trace: nothing was checked: {result.message}", file=sys.stderr)
        return 2
    return 0 if result.status == "passed" else 1


def _cmd_txn(args: argparse.Namespace) -> int:
    """``trace`` on one of nv_full's traceplayer tests (a folder with ``input.txn``)."""
    from ..drivers.driver import AccessLog
    from ..drivers.profiles import load_profile
    from .txn import parse_txn, run_txn

    test = parse_txn(args.path)
    prof = load_profile((args.profile or "nv_full").split(",")[0], nvdla_hw=args.nvdla_hw)
    if prof.generation != "v1":
        print(f"{test.name} is an nvdlav1 (nv_full) test; --nvdla-config {prof.name} is a {prof.generation} design",
              file=sys.stderr)
        return 2
    if args.log and Path(args.log).exists() and not args.force:
        print(f"nvdla-hil trace: --log {args.log}: the file exists; pass --force to replace it", file=sys.stderr)
        return 2
    if args.log and Path(args.log).resolve().parent == test.folder.resolve():
        print(f"nvdla-hil trace: --log {args.log}: refusing to write into the test's own folder", file=sys.stderr)
        return 2
    with open_target(_spec(args, prof.name)) as target:
        log = AccessLog(prof.regmap)
        target.add_observer(log)
        result = run_txn(test, target, profile=prof, timeout=args.timeout or layer_timeout(target))
    print(f"[{prof.name} on {args.target}]")
    print(result.summary())
    return _finish_trace(args, result, log)


# ---- profile ------------------------------------------------------------------------------


def _cmd_profile(args: argparse.Namespace) -> int:
    import yaml

    from ..drivers.profiles import list_profiles, load_profile
    from ..drivers.specdefs import SpecError, profile_from_spec, spec_path

    if args.profile_cmd == "list":
        for name in list_profiles():
            p = load_profile(name)
            feats = ", ".join(f for f, on in p.features.items() if on)
            print(f"{name:20s} {p.generation} atom {p.atom_bytes:2d}  MAC C/K {p.mac_atomic_c}/{p.mac_atomic_k}  "
                  f"CBUF {p.cbuf_banks}x{p.cbuf_bank_width}x{p.cbuf_bank_depth}  {feats}")
        return 0
    if args.profile_cmd == "show":
        p = load_profile(args.name, nvdla_hw=args.nvdla_hw)
        print(yaml.safe_dump({p.name: {k: v for k, v in vars(p).items() if k != "name"}}, sort_keys=False,
                             default_flow_style=None, width=100), end="")
        return 0
    # derive: one profile per configuration of a checkout (or given .spec files)
    out: dict[str, dict] = {}
    try:
        sources = [Path(s) for s in args.specs]
        if args.nvdla_hw:
            configs = args.config or sorted(q.stem for q in (Path(args.nvdla_hw) / "spec" / "defs").glob("*.spec")
                                            if q.stem != "projects")
            sources += [spec_path(args.nvdla_hw, c) for c in configs]
        if not sources:
            print("nvdla-hil profile derive: give --nvdla-hw PATH [--config NAME ...] or .spec files", file=sys.stderr)
            return 2
        for src in sources:
            out[src.stem] = profile_from_spec(src)
    except SpecError as e:
        print(f"nvdla-hil profile derive: {e}", file=sys.stderr)
        return 2
    text = yaml.safe_dump({"format": "nvdla-hil-profiles/1", "profiles": out}, sort_keys=False,
                          default_flow_style=None, width=100)
    if args.out:
        dest = Path(args.out)
        if dest.exists() and not args.force:
            print(f"nvdla-hil profile derive: {dest} exists; pass --force to replace it", file=sys.stderr)
            return 2
        dest.write_text(text, encoding="utf-8")
        print(f"wrote {len(out)} profile(s) to {dest}")
    else:
        print(text, end="")
    if args.compare:
        bad = 0
        for name, d in out.items():
            try:
                shipped = load_profile(name)
            except ValueError:
                print(f"{name}: not shipped (use the .spec path as --nvdla-config)")
                continue
            for k, v in d.items():
                have: Any = getattr(shipped, k) if k != "units" else list(shipped.units)
                if k in ("features", "throughput"):
                    have = dict(have)
                if have != v:
                    bad += 1
                    print(f"{name}.{k}: shipped {have!r}, spec says {v!r}")
        print(f"{bad} difference(s) between the shipped profiles and the spec files")
        return 1 if bad else 0
    return 0


# ---- parser -------------------------------------------------------------------------------


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nvdla-hil",
        description="Hardware-in-the-loop test harness and register driver for NVDLA accelerators.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("regress", help="run a regression suite on a target and print a summary table",
                       description="Run a named suite (NVDLA traces, packed vectors, or all) through pytest "
                                   "on a target; prints a per-test table with outcome and time, and keeps every "
                                   "result in its own run directory.",
                       epilog=REGRESS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_target_options(p)
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
    p.add_argument("-k", dest="keyword", help="only tests matching this pytest -k expression")
    p.add_argument("-j", "--jobs", type=int, default=1, help="parallel workers (pytest-xdist)")
    p.add_argument("--cluster", metavar="ADDR", default=os.environ.get("NVDLA_HIL_CLUSTER"),
                   help="run the tests on a Dask distributed cluster: its scheduler address, tcp://host:8786 "
                        "(or NVDLA_HIL_CLUSTER; needs dask[distributed])")
    p.add_argument("--max-board-failures", type=int, default=None, metavar="N",
                   help="stop after N consecutive tests failed on a dead board (default 3; 0: never)")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    p.set_defaults(func=_cmd_regress)

    p = sub.add_parser("regs", help="read, write, dump, list or check registers by name")
    rs = p.add_subparsers(dest="regs_cmd", metavar="ACTION", required=True)
    for name, hlp in (("read", "read registers (decoded fields)"), ("write", "write a register or fields"),
                      ("dump", "read every register of some blocks"), ("list", "list the register map"),
                      ("info", "show one register's fields"), ("check", "compare the map with an nvdla/hw checkout")):
        q = rs.add_parser(name, help=hlp)
        _add_target_options(q)
        if name == "read":
            q.add_argument("names", nargs="+", help="register names, e.g. SDP.D_CVT_SCALE")
        elif name == "write":
            q.add_argument("name", help="register name")
            q.add_argument("values", nargs="+", help="VALUE, or FIELD=VALUE ... (enum names allowed)")
        elif name in ("dump", "list"):
            q.add_argument("blocks", nargs="*", help="blocks (default: all)")
        elif name == "info":
            q.add_argument("name", help="register name")
    p.set_defaults(func=_cmd_regs)

    p = sub.add_parser("trace", help="run one NVDLA trace test and report each check")
    _add_target_options(p)
    p.add_argument("path", help="trace folder or .cfg file")
    p.add_argument("--poison", action="store_true", help="poison checked output regions first")
    p.add_argument("--log", help="write the full register access log here (refuses an existing file unless "
                                 "--force, and always refuses the trace's own files)")
    p.add_argument("--force", action="store_true", help="let --log replace an existing file")
    p.add_argument("--stats", action="store_true", help="print the units' statistics registers afterwards")
    p.add_argument("--model-bug", action="append", metavar="SPEC",
                   help="model target: inject a datapath bug into the target (never the reference), e.g. "
                        "SDP.D_CVT_OFFSET.CVT_OFFSET+1 or stuck:SDP:3:0 (harness/targets/faults.py); repeatable")
    p.add_argument("--no-diagnose", action="store_true",
                   help="on a failed check, skip the model-vs-target diff and the suspect-register search")
    p.add_argument("--hint-budget", type=float, default=20.0,
                   help="seconds the suspect-register search may take (default 20)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for each interrupt (default: estimated from the layers' work on a "
                        "simulator - factor x expected cycles / simulated cycles per second, with a floor - "
                        "else the target's own, 30 s)")
    p.set_defaults(func=_cmd_trace)

    p = sub.add_parser("profile", help="list, show or derive hardware profiles (from spec/defs/<config>.spec)")
    ps = p.add_subparsers(dest="profile_cmd", metavar="ACTION", required=True)
    ps.add_parser("list", help="the shipped profiles, one line each")
    q = ps.add_parser("show", help="every field of one profile")
    q.add_argument("name", help="profile name or a path to a .spec file")
    q.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"), help="checkout for unshipped configurations")
    q = ps.add_parser("derive", help="derive profiles from an nvdla/hw checkout's spec/defs/*.spec",
                      description="Read spec/defs/<config>.spec of a checkout (every configuration, or those "
                                  "named with --config) or the .spec files given, and print profiles YAML.")
    q.add_argument("specs", nargs="*", help=".spec files")
    q.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"), help="nvdla/hw checkout")
    q.add_argument("--config", action="append", help="configuration name (repeatable; default: all)")
    q.add_argument("--out", help="write the YAML here instead of printing it")
    q.add_argument("--force", action="store_true", help="replace --out if it exists")
    q.add_argument("--compare", action="store_true", help="compare with the shipped profiles; exit 1 on a difference")
    p.set_defaults(func=_cmd_profile)

    _add_optional(sub)
    return parser


def _add_optional(sub: argparse._SubParsersAction) -> None:
    """Subcommands contributed by other parts of the package (vectors, layouts, sims, boards)."""
    import importlib

    for mod in ("nvdla_hil.harness.vectors_cli", "nvdla_hil.harness.triage_cli", "nvdla_hil.harness.fuzz_cli",
                "nvdla_hil.harness.layouts.cli", "nvdla_hil.harness.loadables.cli",
                "nvdla_hil.sims.cli",
                "nvdla_hil.harness.board_emu", "nvdla_hil.harness.results.cli"):
        try:
            m = importlib.import_module(mod)
        except ImportError as e:
            if e.name and mod.startswith(e.name):
                continue  # that part is not installed
            raise
        m.add_subcommands(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args._argv = list(sys.argv[1:] if argv is None else argv)
    try:
        _labgrid_lab(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"nvdla-hil {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `nvdla-hil regs dump | head`: the reader left; not an error of ours
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the interpreter's final flush is quiet
        return 0
    except Exception as e:  # noqa: BLE001 - the exit-code contract decides below
        code = exit_code_for(e)
        if code == EXIT_INTERNAL:
            import traceback

            traceback.print_exc()
            print(f"nvdla-hil {args.command}: internal error, please report (the traceback above; "
                  f"{type(e).__name__}: {e})", file=sys.stderr)
        else:
            print(f"nvdla-hil {args.command}: {_describe(e)}", file=sys.stderr)
        return code


#: OSErrors about a path the user gave or the environment (a missing file, a full or read-only
#: disk): exit 2 with the path; any other OSError from our own code is internal
_ENV_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT,
                         errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENAMETOOLONG, errno.ELOOP,
                         errno.ENOTEMPTY, errno.EMFILE, errno.ENFILE, errno.EFBIG, errno.EXDEV, errno.EBUSY})


def exit_code_for(exc: BaseException) -> int:
    """The exit-code contract for an exception that ends a command: 130 for an interrupt; 2 for
    the tool's own error types (bad input or configuration, a board that cannot be reached, a
    results disk that is full: :func:`~nvdla_hil.drivers.errors.is_own_error`) and for an
    ``OSError`` naming a path (missing, unreadable, disk full); 3 (internal error) for anything
    else - a bare ``ValueError`` or ``KeyError`` is a bug of ours, not the user's input."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if is_own_error(exc):
        return 2
    if isinstance(exc, OSError) and exc.filename is not None and exc.errno in _ENV_ERRNOS:
        return 2
    return EXIT_INTERNAL


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not is_own_error(exc) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
