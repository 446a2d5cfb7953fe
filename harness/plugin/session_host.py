"""A child process that runs pytest sessions of one test each for a Dask worker
(:mod:`~nvdla_hil.harness.plugin.cluster`), started in the controller's working folder.

Why a process of its own: a pytest session imports the test files, their conftest and helpers once
per process, and a Dask worker lives across many runs; in a host made for one run the test files
are imported as they are now (never a same-named module of an earlier run), relative paths mean
what they meant to the controller (the host's working folder is the controller's, given to
:class:`subprocess.Popen`), and plugin autoloading is off in the host's environment, not in the
worker's. The Dask worker, its threads and its folder are left as they are.

One host serves one run on one worker: it keeps the run's warm Verilator simulators
(:class:`~nvdla_hil.harness.targets.verilator.WarmSimulators`) from one test to the next, and ends
when the worker drops it (end of the run, a new run, the worker's exit) or its worker dies.

Protocol: one JSON request per line on the host's stdin (``{"nodeid", "argv"}``), one JSON result
per line on its stdout (what :func:`run_session` returns); pytest's own output goes to /dev/null.
JSON has no tuple: :func:`restore_report_shapes` gives each serialised report back the tuples
pytest's reporters expect (a skip's ``longrepr`` ``(path, lineno, reason)``, ``location``,
``sections``, ``user_properties``), as pytest-xdist's execnet channel keeps them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["AUTOLOAD_ENV", "SessionHost", "restore_report_shapes", "run_session"]

#: pytest reads it when a session starts: no setuptools entry-point plugin is loaded
AUTOLOAD_ENV = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


def run_session(nodeid: str, argv: list[str], pool: Any = None) -> dict:
    """Run one test with pytest in this process; its reports (serialised), the exit code, how
    many tests were collected and the session's functional coverage. ``pool``: the warm
    simulators the session's ``nvdla_warm_pool`` fixture hands out, or None."""
    import pytest

    from ..analysis.coverage import Coverage
    from .collector import ReportCollector
    from .coverage import CoverageSink

    collector = ReportCollector()
    cov = Coverage()  # the session's model targets feed it (sent back, merged by the controller)
    plugins: list[object] = [collector, CoverageSink(cov)]
    if pool is not None:
        from .warm import WarmPoolPlugin

        plugins.append(WarmPoolPlugin(pool))
    code = pytest.main([nodeid, *argv], plugins=plugins)
    return {"reports": collector.reports, "exit": int(code), "collected": collector.collected, "coverage": cov.to_json()}


#: fields of a serialised report (``pytest_report_to_serializable``) that are lists of pairs
_PAIR_LISTS = ("sections", "user_properties")


def restore_report_shapes(data: dict) -> dict:
    """A serialised report as pytest made it, after a JSON round trip turned its tuples into lists:
    ``longrepr`` of a skip (``(path, lineno, reason)``; JUnit's ``append_skipped`` and the terminal's
    skip summary need the tuple), ``location`` and the pairs of ``sections`` / ``user_properties``.
    ``data`` is changed in place and returned; the exception form of ``longrepr`` (a dict) is
    left to ``pytest_report_from_serializable``."""
    if isinstance(data.get("longrepr"), list):
        data["longrepr"] = tuple(data["longrepr"])
    if isinstance(data.get("location"), list):
        data["location"] = tuple(data["location"])
    for key in _PAIR_LISTS:
        if isinstance(data.get(key), list):
            data[key] = [tuple(p) if isinstance(p, list) else p for p in data[key]]
    return data


def _serve(requests: IO[str], replies: IO[str], warm: bool) -> None:
    """The host's loop: one session per request, until stdin ends."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        pool = None
        if warm:
            from ..targets.verilator import WarmSimulators

            pool = stack.enter_context(WarmSimulators())
        for line in requests:
            req = json.loads(line)
            t0 = time.monotonic()
            try:
                result = run_session(str(req["nodeid"]), [str(a) for a in req["argv"]], pool)
            except BaseException as e:  # noqa: BLE001 - said to the worker, which fails the test with it
                result = {"error": f"{type(e).__name__}: {e}"}
            result["seconds"] = time.monotonic() - t0
            replies.write(json.dumps(result, default=str) + "\n")
            replies.flush()


def main(argv: list[str] | None = None) -> int:
    """``python -m nvdla_hil.harness.plugin.session_host [--warm]``: serve requests on stdin."""
    args = sys.argv[1:] if argv is None else argv
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # pytest's terminal output (and a test's prints) never mix with the replies
    os.close(devnull)
    _serve(sys.stdin, replies, warm="--warm" in args)
    return 0


class SessionHost:
    """The worker's side of one host process (module docstring): started in ``cwd`` on first use,
    one request at a time, ended by :meth:`close` (or when this side's process ends)."""

    def __init__(self, cwd: str, warm: bool) -> None:
        self.cwd = cwd
        self.warm = warm
        self.proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            env = {**os.environ, AUTOLOAD_ENV: "1"}  # exactly the plugins the run names with -p (worker_args)
            self.proc = subprocess.Popen(
                # -P: the working folder is not put on sys.path (a Dask worker's never was)
                [sys.executable, "-P", "-m", "nvdla_hil.harness.plugin.session_host", *(["--warm"] if self.warm else [])],
                cwd=self.cwd if Path(self.cwd).is_dir() else None, env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True, encoding="utf-8")
        return self.proc

    def run(self, nodeid: str, argv: list[str]) -> dict:
        """One test's session in the host; what :func:`run_session` returned (``seconds`` added).
        A host that dies or fails meanwhile is a ``RuntimeError`` (Dask retries the task)."""
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps({"nodeid": nodeid, "argv": argv}) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except OSError as e:
                line = ""
                why = str(e)
            else:
                why = ""
            if not line:
                code = proc.wait(timeout=30)
                raise RuntimeError(f"nvdla-hil session host (pid {proc.pid}) ended (exit {code}) {why}".rstrip())
        result = json.loads(line)
        if "error" in result:
            raise RuntimeError(f"nvdla-hil session host: {result['error']}")
        result["reports"] = [restore_report_shapes(d) for d in result.get("reports", [])]
        return result

    def close(self, wait: bool = True) -> None:
        """End the host: its stdin closes, it finishes its test (if one runs) and closes its warm
        simulators; ``wait``: until it has ended (killed after two minutes)."""
        with self._lock if wait else contextlib.nullcontext():
            proc, self.proc = self.proc, None
            if proc is None:
                return
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            if not wait:
                return
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    def __enter__(self) -> SessionHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    sys.exit(main())
