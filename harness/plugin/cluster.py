"""Run a pytest session's tests on Dask distributed workers (``--nvdla-cluster ADDR``).

Like pytest-xdist, but the workers are Dask's: the controller collects as usual, then its
``pytest_runtestloop`` submits one Dask task per item (``client.submit(run_nodeid, ...,
retries=2, pure=False)``). The task runs ``pytest.main([that one test, the session's nvdla
options...])`` in the worker's session host (:mod:`~nvdla_hil.harness.plugin.session_host`: a
child process of the worker made for the run, in the controller's working folder, so the test
files are imported as they are now and relative paths mean what they meant to the controller) with
a collector plugin that serialises every report (``pytest_report_to_serializable``); the controller turns them back into reports
(``pytest_report_from_serializable``, after :func:`~.session_host.restore_report_shapes` gave back
the tuples the host's JSON made lists: a skip's ``longrepr`` above all) and feeds them to ``pytest_runtest_logreport`` as the
futures complete, so the terminal, JUnit, the summary and the run directory see them exactly as
in a local run, streaming.

A worker that dies mid-test: the scheduler runs the task again on another worker (Dask's
``allowed-failures``); each task announces its start on the ``nvdla-hil-start`` event topic, so
a test that started more than once is reported with the user property ``rerun_after_worker_died``
and counted in the summary line ``re-run after a worker died: N``. Ctrl-C cancels the futures and
closes the client.

A Verilator session's simulator is built (or found) in the shared, content-keyed build cache
(sims/cache.py) by the controller before the first task is submitted; the workers load it.

Each Dask worker keeps one session host per run (the :class:`SessionHostWorkerPlugin`, registered
by the controller for the run, the host closed on teardown); on the verilator target the host keeps
one :class:`~nvdla_hil.harness.targets.verilator.WarmSimulators` pool and hands it to every session
through :class:`~nvdla_hil.harness.plugin.warm.WarmPoolPlugin`.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections import Counter

import pytest

from .keys import SPEC_KEY
from .session_host import AUTOLOAD_ENV, SessionHost

try:
    from distributed import WorkerPlugin as _WorkerPlugin
except ImportError:  # the controller reports a usage error when --nvdla-cluster is used without it
    _WorkerPlugin = object  # type: ignore[assignment,misc]

__all__ = ["AUTOLOAD_ENV", "ClusterLoop", "SessionHostWorkerPlugin", "run_nodeid", "worker_args"]

START_TOPIC = "nvdla-hil-start"
HOST_PLUGIN_NAME = "nvdla-hil-session-host"
#: the plugin a worker session loads by name (its entry point is not autoloaded there)
WORKER_PLUGIN = "nvdla_hil.harness.plugin"
#: options of the controller that are not passed to the workers
_NOT_FORWARDED = frozenset({"nvdla_cluster", "nvdla_summary", "nvdla_summary_file"})


class SessionHostWorkerPlugin(_WorkerPlugin):
    """Dask ``WorkerPlugin``: the run's :class:`~nvdla_hil.harness.plugin.session_host.SessionHost` on
    this worker (started in the controller's folder ``cwd`` on the first test, with warm simulators
    when ``warm``), ended with the run (the controller unregisters it) or with the worker."""

    def __init__(self, cwd: str, warm: bool) -> None:
        self.cwd = cwd
        self.warm = warm
        self.host: SessionHost | None = None

    def setup(self, worker) -> None:  # noqa: ANN001
        self.host = SessionHost(self.cwd, self.warm)

    def teardown(self, worker) -> None:  # noqa: ANN001
        if self.host is not None:
            self.host.close(wait=False)  # it ends once its test (if any) is done
            self.host = None


def _worker_host(name: str, cwd: str, warm: bool) -> SessionHost | None:
    """The session host of this run (worker plugin ``name``) on this Dask worker, or None (not in
    a worker, no such plugin)."""
    try:
        from distributed import get_worker

        plugin = get_worker().plugins.get(name)
    except (ImportError, ValueError):
        return None
    host = getattr(plugin, "host", None)
    return host if isinstance(host, SessionHost) and host.cwd == cwd and host.warm == warm else None


def run_nodeid(nodeid: str, argv: list[str], cwd: str, key: str, warm: bool, host: str = HOST_PLUGIN_NAME) -> dict:
    """Dask task: run one test with pytest in this worker's session host of the run (worker plugin
    ``host``; one of its own when the worker has none); its reports, serialised."""
    try:
        from distributed import get_worker

        worker = get_worker()
        worker.log_event(START_TOPIC, {"key": key, "worker": worker.address, "pid": os.getpid()})
        where = worker.address
    except (ImportError, ValueError):  # called outside a worker (tests)
        where = f"pid {os.getpid()}"
    mine = _worker_host(host, cwd, warm)
    if mine is not None:
        result = mine.run(nodeid, argv)
    else:
        with SessionHost(cwd, warm) as own:
            result = own.run(nodeid, argv)
    return {**result, "worker": where}


def _option_args(config: pytest.Config) -> list[str]:
    """The session's nvdla-hil options (those of the ``nvdla-hil`` group that differ from their default)."""
    out: list[str] = []
    group = config._parser.getgroup("nvdla-hil")  # noqa: SLF001 - pytest has no public view of a group's options
    for opt in group.options:
        attrs = opt.attrs()
        dest = attrs.get("dest") or opt.dest
        if dest in _NOT_FORWARDED:
            continue
        value = config.getoption(dest, default=None)
        if value is None or value == attrs.get("default") or value is False:
            continue
        flag = max(opt.names(), key=len)
        action = attrs.get("action")
        # pytest 9's attrs() are the argparse action's: no "action" key; a flag is nargs 0, append holds a list
        if action in ("store_true", "store_const") or (action is None and attrs.get("nargs") == 0):
            out.append(flag)
        elif action == "append" or (action is None and isinstance(value, list)):
            for v in value:
                out += [flag, str(v)]
        else:
            out += [flag, str(value)]
    return out


def worker_args(config: pytest.Config) -> list[str]:
    """pytest arguments of a worker session (after the test's node id)."""
    args = _option_args(config)
    inv = list(config.invocation_params.args)
    for i, a in enumerate(inv):  # -o ini overrides apply on the worker too
        if a in ("-o", "--override-ini") and i + 1 < len(inv):
            args += ["-o", str(inv[i + 1])]
        elif a.startswith("--override-ini="):
            args.append(a)
        elif a == "-p" and i + 1 < len(inv) and not str(inv[i + 1]).startswith("no:"):
            args += ["-p", str(inv[i + 1])]  # a plugin the user named: needed on the worker too
    # plugin autoloading is off on the worker (run_nodeid): nvdla-hil's plugin is named here
    return [*args, "--rootdir", str(config.rootpath), "--import-mode=importlib", "-q", "-p", "no:cacheprovider",
            "-p", WORKER_PLUGIN, "-p", "no:labgrid", "-p", "no:xdist", "-p", "no:randomly"]


def _worker_nodeid(item: pytest.Item) -> str:
    rest = item.nodeid.split("::", 1)
    return str(item.path) + ("::" + rest[1] if len(rest) > 1 else "")


class ClusterLoop:
    """Controller-side plugin: the run loop that sends every item to the Dask cluster at ``address``."""

    def __init__(self, config: pytest.Config, address: str) -> None:
        self.config = config
        self.address = address
        self.started: Counter[str] = Counter()
        self.reruns: list[str] = []
        self.lost: list[str] = []

    def _on_start(self, event) -> None:  # noqa: ANN001 - (timestamp, msg) from the scheduler
        msg = event[1] if isinstance(event, tuple) else event
        if isinstance(msg, dict) and "key" in msg:
            self.started[msg["key"]] += 1

    def _client(self):  # noqa: ANN202
        try:
            from distributed import Client
        except ImportError:
            raise pytest.UsageError("--nvdla-cluster needs dask distributed: pip install 'nvdla-hil[cluster]'") from None
        try:
            return Client(self.address, timeout="20s")
        except OSError as e:
            raise pytest.UsageError(f"--nvdla-cluster {self.address}: cannot reach the Dask scheduler ({e})") from None

    def _build_once(self, spec) -> None:  # noqa: ANN001 - a TargetSpec
        """The session's simulator, built (or found) in the shared build cache before any task is
        submitted, so that the workers only load it (sims/cache.py keys it by content; workers that
        still have to build wait on its build lock and build once). A controller that cannot build
        (no Verilator on a login node, say) leaves the build to the first worker, with a note."""
        from ...sims.build import build_nvdla

        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        say = tr.write_line if tr is not None else print
        t0 = time.monotonic()
        try:
            build = build_nvdla(spec.nvdla_hw, spec.profile, progress=say)
        except Exception as e:  # noqa: BLE001 - the workers try again, under the build lock
            say(f"nvdla-hil cluster: no simulator build on this host ({type(e).__name__}: {e}); the first worker builds it")
            return
        say(f"nvdla-hil cluster: simulator {spec.profile} {build.key[:12]} ready in the shared cache "
            f"({time.monotonic() - t0:.1f} s): {build.directory}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} during collection")
        if session.config.option.collectonly or not session.items:
            return True
        from distributed import as_completed

        spec = self.config.stash[SPEC_KEY]
        warm = spec.kind == "verilator" and not self.config.getoption("nvdla_fresh_sims", default=False)
        if spec.kind == "verilator":
            self._build_once(spec)
        argv = worker_args(self.config)
        cwd = str(self.config.invocation_params.dir)
        client = self._client()
        futures: dict = {}
        run = uuid.uuid4().hex[:8]
        host = f"{HOST_PLUGIN_NAME}-{run}"  # this run's session hosts (another run's are its own)
        try:
            client.subscribe_topic(START_TOPIC, self._on_start)
            client.register_plugin(SessionHostWorkerPlugin(cwd, warm), name=host)
            for i, item in enumerate(session.items):
                key = f"nvdla-hil-{run}-{i}"
                fut = client.submit(run_nodeid, _worker_nodeid(item), argv, cwd, key, warm, host,
                                    retries=2, pure=False, key=key)
                futures[fut] = item
            for fut in as_completed(list(futures)):
                item = futures.pop(fut)
                self._deliver(session, item, fut)
                if session.shouldfail or session.shouldstop:
                    client.cancel(list(futures))
                    break
            with contextlib.suppress(Exception):  # the workers end the run's hosts (and their simulators)
                client.unregister_worker_plugin(host)
        except KeyboardInterrupt:
            client.cancel(list(futures))
            raise
        finally:
            client.close()
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        return True

    def _deliver(self, session: pytest.Session, item: pytest.Item, fut) -> None:  # noqa: ANN001
        hook = item.ihook
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        starts = self.started.get(fut.key, 1)
        try:
            result = fut.result()
            reports = [self.config.hook.pytest_report_from_serializable(config=self.config, data=d) for d in result["reports"]]
            where = result["worker"]
            session_cov = self.config.pluginmanager.get_plugin("nvdla-hil-coverage")
            if result.get("coverage") and session_cov is not None:
                session_cov.cov.merge(result["coverage"])  # one coverage table for the run, as with xdist
        except Exception as e:  # noqa: BLE001 - a lost task (KilledWorker, ...) is a failed test, never a lost one
            self.lost.append(item.nodeid)
            reports = [pytest.TestReport(item.nodeid, item.location, {}, "failed",
                                         f"nvdla-hil cluster: the task of this test failed on every try: {type(e).__name__}: {e}",
                                         "call", user_properties=[])]
            where = "?"
        if not any(isinstance(r, pytest.TestReport) for r in reports):
            reports.append(pytest.TestReport(item.nodeid, item.location, {}, "failed",
                                             f"nvdla-hil cluster: worker {where} collected no test for {item.nodeid}",
                                             "call", user_properties=[]))
        if starts > 1:
            self.reruns.append(item.nodeid)
        for rep in reports:
            if isinstance(rep, pytest.CollectReport):
                rep = pytest.TestReport(item.nodeid, item.location, {}, "failed", rep.longrepr, "setup")
            rep.nodeid = item.nodeid
            rep.user_properties = [*rep.user_properties, ("cluster_worker", where)]
            if starts > 1:
                rep.user_properties.append(("rerun_after_worker_died", starts - 1))
            hook.pytest_runtest_logreport(report=rep)
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        tr = terminalreporter
        tr.write_sep("-", f"nvdla-hil cluster {self.address}")
        tr.write_line(f"re-run after a worker died: {len(self.reruns)}")
        for nodeid in self.reruns:
            tr.write_line(f"  re-run: {nodeid}")
        if self.lost:
            tr.write_line(f"failed on every try: {len(self.lost)}")
