"""A board as a labgrid place: acquire it, find its serial endpoint, release it.

labgrid (PyPI ``labgrid`` >= 24, gRPC coordinator) is what shared embedded labs run: exporters
publish resources to a coordinator, users acquire *places* (named sets of resources) exclusively.
A lab entry ``labgrid: {place: NAME, coordinator: HOST:PORT}`` makes the serial target
(:class:`~nvdla_hil.harness.targets.serial.SerialTarget`) lease the place for as long as it is
open:

* :meth:`LabgridPlace.acquire`: the place is acquired through the coordinator (as
  ``labgrid-client -p NAME acquire`` does), or used as it is when this user on this host already
  holds it (``labgrid-client acquire`` beforehand, or a session-wide acquisition); a place held
  by someone else is :class:`~nvdla_hil.harness.boards.lab.BoardBusyError` naming the holder;
* the endpoint comes from the place's first ``NetworkSerialPort``, ``RawSerialPort`` or
  ``USBSerialPort`` resource: exported over the network (``host``, ``port``) it is
  ``socket://host:port`` for ``protocol: raw`` and ``rfc2217://host:port`` otherwise (the
  exporter's ser2net default); a local device is its path;
* :meth:`LabgridPlace.release` releases only what :meth:`acquire` acquired, also after an
  error, on Ctrl-C, SIGTERM and SIGHUP; an interpreter that exits without closing the target
  releases it at exit. A process killed outright (SIGKILL, a lost machine) cannot:
  ``labgrid-client -p NAME release --kick`` frees the place.

The coordinator is ``coordinator`` (lab entry), else ``LG_COORDINATOR``, else labgrid's default
``127.0.0.1:20408``, as labgrid's own tools and pytest plugin choose it. labgrid is optional:
without it, opening such a board is a :class:`~nvdla_hil.harness.boards.lab.LabError` saying what to
install.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import io
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .lab import BoardBusyError, LabError

__all__ = ["SERIAL_RESOURCES", "DeferredSignals", "LabgridPlace", "PlaceBoardMismatch", "PlaceLease", "coordinator_address", "endpoint_url",
           "labgrid_lab_file", "place_from_env", "place_lab_file", "session_lab_file"]

#: resource classes that carry a serial endpoint, in the order they are looked for
SERIAL_RESOURCES = ("NetworkSerialPort", "RawSerialPort", "USBSerialPort")
DEFAULT_COORDINATOR = "127.0.0.1:20408"
T = TypeVar("T")


def coordinator_address(explicit: str | None = None) -> str:
    """``explicit``, else ``LG_COORDINATOR``, else labgrid's default."""
    return explicit or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR


def endpoint_url(cls: str, params: dict) -> str:
    """A pyserial URL for one serial resource's parameters (module docstring)."""
    host, port = params.get("host"), params.get("port")
    if host and isinstance(port, int):
        scheme = "socket" if params.get("protocol", "rfc2217") == "raw" else "rfc2217"
        return f"{scheme}://{host}:{port}"
    if isinstance(port, str) and port:
        return port  # a local device path (RawSerialPort)
    raise LabError(f"labgrid {cls} resource has no usable endpoint (params {params!r})")


def place_from_env(path: str | os.PathLike[str]) -> tuple[str, str | None]:
    """The place (and coordinator, if given) of a labgrid environment file (``--lg-env``):
    ``targets: {main: {resources: {RemotePlace: {name: NAME}}}}`` and ``options: {coordinator_address}``."""
    from ...drivers import yamlstrict

    p = Path(path)
    try:
        doc = yamlstrict.load(p.read_text(encoding="utf-8"), str(p))
    except OSError as e:
        raise LabError(f"labgrid environment {p}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise LabError(f"labgrid environment {p}: not a text file ({e})") from None
    except yamlstrict.YamlError as e:
        raise LabError(f"labgrid environment {e}") from None
    try:
        targets = doc["targets"]
        target = targets.get("main") or next(iter(targets.values()))
        res = target["resources"]
        rp = res["RemotePlace"] if isinstance(res, dict) else next(r["RemotePlace"] for r in res if "RemotePlace" in r)
        name = rp["name"]
    except (KeyError, TypeError, StopIteration, AttributeError):
        raise LabError(f"labgrid environment {p}: no targets: main: resources: RemotePlace: name: PLACE") from None
    coord = (doc.get("options") or {}).get("coordinator_address") if isinstance(doc, dict) else None
    return str(name), (str(coord) if coord else None)


@dataclass(frozen=True, slots=True)
class PlaceLease:
    place: str
    coordinator: str
    url: str
    resource: str  # "CLASS exporter/group/name"
    acquired_here: bool  # False: the user held the place already; it is left acquired


def signal_name(signum: int) -> str:
    import signal

    return signal.Signals(signum).name


class DeferredSignals:
    """A block that SIGINT, SIGTERM and SIGHUP do not interrupt: each one that arrives is held
    and raised again (``signal.raise_signal``) when the block ends, after the handlers are set
    to :attr:`then` (by default back to what they were). For the coordinator steps that must
    not be split: an acquisition cut short after the coordinator granted it, or a release cut
    short before it was sent, would leave the place acquired with no process to give it back.

    Python runs signal handlers in the main thread only; elsewhere the block defers nothing."""

    NAMES = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.saved: dict[int, object] = {}
        self.then: dict[int, object] = {}
        self.pending: list[int] = []

    def _hold(self, signum: int, frame: object) -> None:
        if signum not in self.pending:
            self.pending.append(signum)

    def __enter__(self) -> DeferredSignals:
        import signal

        if threading.current_thread() is threading.main_thread():
            for name in self.NAMES:
                signum = getattr(signal, name, None)
                if signum is not None:
                    self.saved[signum] = signal.signal(signum, self._hold)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for signum, old in self.saved.items():
            signal.signal(signum, self.then.get(signum, old))  # type: ignore[arg-type]
        for signum in self.pending:
            signal.raise_signal(signum)


class LabgridPlace:
    """Lease one labgrid place (module docstring). A context manager: ``with LabgridPlace(...) as lease``."""

    def __init__(self, place: str, coordinator: str | None = None) -> None:
        self.place = place
        self.coordinator = coordinator_address(coordinator)
        self.lease: PlaceLease | None = None
        self._saved: dict[int, object] = {}  # signal -> the handler _catch_signals replaced

    # ---- a labgrid client session, on an event loop of its own ---------------------------------
    #: how long one coordinator step (acquire, release) may take before it is reported as not done
    STEP_TIMEOUT = 30.0

    def _in_thread(self, fn: Callable[[], T], what: str) -> T:
        """Run ``fn`` in a thread of its own: labgrid's client (gRPC aio) binds to the thread's
        event loop, which must not be the caller's (pytest-asyncio, an application loop). The
        caller holds :class:`DeferredSignals`, so the wait cannot be cut short by a signal; it is
        bounded by :attr:`STEP_TIMEOUT` instead (a coordinator that stops answering)."""
        box: dict[str, object] = {}

        def run() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                box["error"] = e

        th = threading.Thread(target=run, name="labgrid-client", daemon=True)
        try:
            th.start()
        except RuntimeError:  # interpreter shutdown (3.12+ refuses new threads in atexit): run here
            run()
        th.join(self.STEP_TIMEOUT)
        if th.is_alive():
            raise LabError(f"labgrid place {self.place!r}: the coordinator {self.coordinator} did not finish the {what} "
                           f"within {self.STEP_TIMEOUT:.0f} s; the place may still be acquired: "
                           f"labgrid-client -x {self.coordinator} -p {self.place} release --kick")
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box["value"]  # type: ignore[return-value]

    @contextlib.contextmanager
    def _session(self):  # noqa: ANN202
        try:
            from labgrid.remote.client import start_session
        except ImportError as e:
            raise LabError(f"labgrid place {self.place!r}: labgrid is not installed ({e}); pip install 'labgrid>=24'") from None
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        args = argparse.Namespace(place=self.place, allow_unmatched=False, kick=False)
        try:
            session = start_session(self.coordinator, extra={"args": args}, loop=loop)
        except Exception as e:  # noqa: BLE001 - gRPC and labgrid raise many kinds
            loop.close()
            raise LabError(f"labgrid place {self.place!r}: cannot reach the coordinator {self.coordinator}: "
                           f"{type(e).__name__}: {e}") from None
        try:
            yield session, loop
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(session.stop())
                loop.run_until_complete(session.close())
            loop.close()

    def _run(self, loop: asyncio.AbstractEventLoop, coro: object) -> None:
        """Run a labgrid client coroutine, its progress messages kept off our output."""
        with contextlib.redirect_stdout(io.StringIO()):
            loop.run_until_complete(coro)  # type: ignore[arg-type]

    def acquire(self) -> PlaceLease:
        """Acquire the place (or use this user's acquisition) and find its serial endpoint.

        The coordinator's acquisition is one step that a signal cannot split: SIGINT, SIGTERM
        and SIGHUP arriving meanwhile wait for it (:class:`DeferredSignals`) and then take
        effect with the place registered, so they release it. While the place is held, SIGTERM
        (a CI timeout, a batch system) and SIGHUP (a closed terminal or SSH session) release it
        as Ctrl-C does (:meth:`_on_signal`); an interpreter that exits releases it at exit.
        SIGKILL cannot be caught: ``labgrid-client -p PLACE release --kick`` frees what it leaves."""
        if self.lease is not None:
            return self.lease
        with DeferredSignals() as deferred:
            lease = self._in_thread(self._acquire, "acquisition")
            self.lease = lease
            if lease.acquired_here:
                atexit.register(self.release)
                self._saved = {s: deferred.saved[s] for s in deferred.saved if signal_name(s) in self.RELEASE_ON}
                deferred.then = dict.fromkeys(self._saved, self._on_signal)
        return lease

    #: signals that end a process whose owner wants it gone, released like Ctrl-C
    RELEASE_ON = ("SIGTERM", "SIGHUP")

    def _on_signal(self, signum: int, frame: object) -> None:
        """Release the place now, then do what the signal would have done: the handler it
        replaced (the regression's SIGTERM-as-interrupt), nothing when it was ignored, or, for the
        default (terminate), a KeyboardInterrupt, so the run stops as on Ctrl-C."""
        import signal

        old = self._saved.get(signum, signal.SIG_DFL)
        self.release()
        if callable(old):
            old(signum, frame)
        elif old != signal.SIG_IGN:
            raise KeyboardInterrupt(f"{signal.Signals(signum).name}: labgrid place {self.place!r} released")

    def _acquire(self) -> PlaceLease:
        from labgrid.remote.client import Error as LabgridError

        with self._session() as (session, loop):
            try:
                place = session.get_place(self.place)
            except LabgridError as e:
                raise LabError(f"labgrid place {self.place!r} on {self.coordinator}: {e}") from None
            me = f"{session.gethostname()}/{session.getuser()}"
            here = False
            if place.acquired and place.acquired != me:
                raise BoardBusyError(f"labgrid place {self.place!r} is acquired by {place.acquired} "
                                     f"(coordinator {self.coordinator}); wait, or ask them to release it")
            if not place.acquired:
                try:
                    self._run(loop, session.acquire())
                except LabgridError as e:
                    text = str(e)
                    if "acquired" in text:
                        raise BoardBusyError(f"labgrid place {self.place!r}: {text}") from None
                    raise LabError(f"labgrid place {self.place!r}: cannot acquire: {text}") from None
                here = True
            try:
                url, what = self._endpoint(session)
            except BaseException:
                if here:
                    with contextlib.suppress(Exception):
                        self._run(loop, session.release())
                raise
        return PlaceLease(self.place, self.coordinator, url, what, here)

    def _endpoint(self, session: object) -> tuple[str, str]:
        place = session.get_place(self.place)  # type: ignore[attr-defined]
        resources = session.get_target_resources(place)  # type: ignore[attr-defined]
        for cls in SERIAL_RESOURCES:
            for (name, rcls), entry in sorted(resources.items()):
                if rcls == cls:
                    if not entry.avail:
                        raise BoardBusyError(f"labgrid place {self.place!r}: its {cls} {name!r} is not available "
                                             f"(exporter down?)")
                    return endpoint_url(cls, dict(entry.params)), f"{cls} {name}"
        have = ", ".join(sorted(f"{c} {n}" for n, c in resources)) or "none"
        raise LabError(f"labgrid place {self.place!r} has no serial resource ({', '.join(SERIAL_RESOURCES)}); "
                       f"its resources: {have}")

    def release(self) -> None:
        """Release the place if :meth:`acquire` acquired it (idempotent). Like the acquisition,
        one step a signal cannot split: a signal arriving meanwhile takes effect after it, with
        the handlers :meth:`acquire` replaced back in place."""
        with DeferredSignals() as deferred:
            lease, self.lease = self.lease, None
            if lease is None or not lease.acquired_here:
                return
            with contextlib.suppress(Exception):
                atexit.unregister(self.release)
            saved, self._saved = self._saved, {}
            # our handler gives way to the one it replaced, unless someone replaced ours since
            deferred.then = {s: old for s, old in saved.items() if deferred.saved.get(s) == self._on_signal}

            def release() -> None:
                with self._session() as (session, loop):
                    self._run(loop, session.release())

            self._in_thread(release, "release")

    def __enter__(self) -> PlaceLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def session_lab_file(place: str | None = None, coordinator: str | None = None, *,
                     env: str | os.PathLike[str] | None = None, profile: str = "nv_small") -> tuple[Path, str]:
    """:func:`labgrid_lab_file` in the per-user folder ``~/.cache/nvdla-hil/labgrid`` (``XDG_CACHE_HOME``),
    so every xdist worker and every concurrent regression on the place shares one file and one set
    of board locks (what ``--lg-place``/``--nvdla-lg-place`` use)."""
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nvdla-hil" / "labgrid"
    folder.mkdir(parents=True, exist_ok=True)
    return labgrid_lab_file(folder, place, coordinator, env=env, profile=profile)


class PlaceBoardMismatch(LabError):
    """A board name given beside a labgrid place that is another board."""

    def __init__(self, board: str, place: str) -> None:
        super().__init__(f"board {board} and the labgrid place {place} name two boards: give one")
        self.board = board
        self.place = place


def place_lab_file(place: str | None, env: str | os.PathLike[str] | None, coordinator: str | None, *,
                   profile: str, board: str | None = None) -> tuple[str, str] | None:
    """The serial target configured in labgrid's style (a place, or a labgrid environment naming
    one; else ``LG_PLACE``/``LG_ENV``; the coordinator, else ``LG_COORDINATOR``) instead of a lab
    file: the one-board lab file of :func:`session_lab_file` and the board's name (the place's).
    None when neither a place nor an environment is given (the caller asks for a lab file).

    What ``nvdla-hil --lg-place/--lg-env`` and the pytest plugin's ``--nvdla-lg-place/--nvdla-lg-env``
    both resolve. A place that cannot be used is a :class:`~nvdla_hil.harness.boards.lab.LabError`;
    a ``board`` that is not the place is :class:`PlaceBoardMismatch`."""
    place = place or os.environ.get("LG_PLACE")
    env = env or os.environ.get("LG_ENV")
    if not (place or env):
        return None
    path, name = session_lab_file(place, coordinator or os.environ.get("LG_COORDINATOR"), env=env, profile=profile)
    if board and board != name:
        raise PlaceBoardMismatch(board, name)
    return str(path), name


def _env_reset_address(path: str | os.PathLike[str]) -> int | None:
    """``options: {nvdla_hil_reset_address: ADDR}`` of a labgrid environment file: the board's
    reset register (labgrid keeps free-form options there), else None."""
    from ...drivers import yamlstrict

    try:
        doc = yamlstrict.load(Path(path).read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, yamlstrict.YamlError):
        return None  # place_from_env has already said what is wrong with it
    opts = doc.get("options") if isinstance(doc, dict) else None
    v = opts.get("nvdla_hil_reset_address") if isinstance(opts, dict) else None
    if isinstance(v, str):
        try:
            v = int(v, 0)
        except ValueError:
            raise LabError(f"labgrid environment {path}: options: nvdla_hil_reset_address {v!r} is not an address") from None
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**64):
        raise LabError(f"labgrid environment {path}: options: nvdla_hil_reset_address {v!r} is not an address")
    return v


def labgrid_lab_file(folder: str | os.PathLike[str], place: str | None = None, coordinator: str | None = None, *,
                     env: str | os.PathLike[str] | None = None, profile: str = "nv_small", baud: int = 3_000_000,
                     reset_address: int | None = None) -> tuple[Path, str]:
    """A lab file with one board, the labgrid place, for runs configured in labgrid's style
    (``--lg-env FILE`` / ``LG_ENV``, a place name / ``LG_PLACE``, ``--lg-coordinator`` /
    ``LG_COORDINATOR``) rather than by a lab file. Returns the file (written into ``folder``)
    and the board name (the place's)."""
    from .lab import load_lab

    if env is not None:
        env_place, env_coord = place_from_env(env)
        place, coordinator = place or env_place, coordinator or env_coord
        if reset_address is None:
            reset_address = _env_reset_address(env)
    place = place or os.environ.get("LG_PLACE")
    if not place:
        raise LabError("no labgrid place: give one (LG_PLACE) or a labgrid environment naming a RemotePlace (LG_ENV)")
    entry = {"place": place, **({"coordinator": coordinator} if coordinator else {})}
    fields = {"labgrid": entry, "profile": profile, "baud": baud,
              **({"reset_address": reset_address} if reset_address is not None else {})}
    import yaml

    path = Path(folder) / f"labgrid-{place}.lab.yaml"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")  # atomic: concurrent sessions write the same file
    tmp.write_text(yaml.safe_dump({"lock_dir": str(Path(folder)), "boards": {place: fields}}, sort_keys=False))
    os.replace(tmp, path)
    load_lab(path)  # checked like any lab file (a bad place name is named here)
    return path, place
