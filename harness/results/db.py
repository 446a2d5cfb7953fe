"""The results database: every run and every test of every regression, through SQLAlchemy Core.

SQLite beside the run directories (``<results-dir>/results.sqlite``) is the embedded default; a
team's farm shares one PostgreSQL server (``--results-db postgresql://user@host/db``, driven by
psycopg 3). The URL is a SQLAlchemy URL or a file path (an SQLite file).

Tables (prefix ``nvdla_``): ``schema`` (one row: the schema version), ``runs`` (id, start, end,
heartbeat, host, PID, project version, target, profiles, build key, semantics, seed, injected
model bugs, suite, selection, command, run directory, exit code, status, counts), ``tests``
(run, test id, outcome, duration, signature, reason, properties as JSON), ``signatures`` (id,
readable key, parts, first seen), ``labels`` (signature, text, bug link) and ``rtl_coverage``
(run, configuration, NVDLA unit, kind of point, points hit, points in all: a run's RTL code
coverage, ``rtl-coverage/summary.json`` of harness/analysis/rtl_coverage.py, the ``total`` row
included; :meth:`ResultsDB.rtl_coverage` gives the trend per configuration and the latest
run's table).

A run is written as ``running`` when its session starts, its tests as they end, and it is
finished as ``complete`` or ``interrupted`` (Ctrl-C, SIGTERM, a stop on a dead board, tests
left unrun). A run killed outright (SIGKILL, power) stays ``running``: :meth:`ResultsDB.reap`
marks it ``interrupted`` when its process is gone (same host) or its heartbeat is older than
``stale_after`` seconds (another host), so it never shows as passed or missing.

Schema versioning: :data:`SCHEMA_VERSION` is stored in ``nvdla_schema``; opening an older
database applies the steps of :data:`MIGRATIONS` in order, a newer one is refused
(:class:`SchemaError`) rather than misread. A table added later within one version
(:data:`ADDED_TABLES`: new data beside the old, which an older nvdla-hil neither reads nor
misses) is created when a database made before it is opened; a read-only such database is
read without it (nothing of that kind recorded). A missing table of the version's own set
is a corrupt database, never re-created.

A database that cannot be used - a corrupt or truncated file, a schema version that is not one
of ours (0, -1, ``'abc'``), a read-only file or folder, a folder in its place - raises
:class:`ResultsDBError` naming it and what is wrong (the command line exits 2), from the
constructor or from any method; never an SQLAlchemy traceback. A read-only database can still
be read (``nvdla-hil history``); :meth:`ResultsDB.check_writable` says at once when it cannot
be written (``nvdla-hil regress``).
"""

from __future__ import annotations

import functools
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sqlalchemy import (BigInteger, Column, Float, ForeignKey, Integer, MetaData, String, Table, Text, and_, create_engine, delete,
                        event, func, insert, select, update)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, ProgrammingError

from ...drivers.errors import InputError

__all__ = ["SCHEMA_VERSION", "ADDED_TABLES", "ResultsDBError", "SchemaError", "ResultsDB", "RtlCoverageHistory", "db_url",
           "metadata", "runs", "tests", "signatures", "labels", "rtl_coverage"]

SCHEMA_VERSION = 1
STALE_AFTER = 6 * 3600.0  # a running run on another host with no heartbeat for this long is interrupted

metadata = MetaData()
schema = Table("nvdla_schema", metadata, Column("id", Integer, primary_key=True), Column("version", Integer, nullable=False),
               Column("updated", Float))
runs = Table(
    "nvdla_runs", metadata,
    Column("id", String(200), primary_key=True),
    Column("started", Float, nullable=False), Column("ended", Float), Column("heartbeat", Float),
    Column("host", String(255)), Column("pid", Integer), Column("version", String(100)),
    Column("target", String(32)), Column("profile", Text), Column("build_key", Text), Column("semantics", String(16)),
    Column("seed", String(100)), Column("model_bugs", Text), Column("suite", String(200)), Column("selection", Text),
    Column("command", Text), Column("run_dir", Text),
    Column("exit_code", Integer), Column("status", String(16), nullable=False), Column("note", Text),
    Column("collected", Integer), Column("n_passed", Integer), Column("n_failed", Integer), Column("n_error", Integer),
    Column("n_skipped", Integer),
)
tests = Table(
    "nvdla_tests", metadata,
    Column("run_id", String(200), ForeignKey("nvdla_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("nodeid", String(1000), primary_key=True),
    Column("test", Text, index=True), Column("name", Text), Column("outcome", String(40), nullable=False), Column("duration", Float),
    Column("signature", String(32), index=True), Column("reason", Text), Column("properties", Text),
    Column("finished", Float),
)
signatures = Table("nvdla_signatures", metadata, Column("id", String(32), primary_key=True), Column("key", Text),
                   Column("parts", Text), Column("first_seen", Float), Column("first_run", String(200)))
labels = Table("nvdla_labels", metadata, Column("signature", String(32), primary_key=True), Column("text", Text),
               Column("bug", Text), Column("author", String(200)), Column("created", Float), Column("updated", Float))
rtl_coverage = Table(
    "nvdla_rtl_coverage", metadata,
    Column("run_id", String(200), ForeignKey("nvdla_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("config", String(200), primary_key=True), Column("unit", String(200), primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("hit", BigInteger, nullable=False), Column("total", BigInteger, nullable=False),
)

#: tables added within :data:`SCHEMA_VERSION` (additive: an older nvdla-hil leaves them alone): created
#: when a database of this version made before them is opened; their absence is not corruption
ADDED_TABLES = frozenset({rtl_coverage.name})

#: the number columns of a run and of a test row, checked as they are read
_RUN_NUMBERS: Mapping[str, type] = MappingProxyType({
    "started": float, "ended": float, "heartbeat": float, "pid": int, "exit_code": int, "collected": int,
    "n_passed": int, "n_failed": int, "n_error": int, "n_skipped": int})
_TEST_NUMBERS: Mapping[str, type] = MappingProxyType({"duration": float, "finished": float, "started": float})

#: version -> the step that brings a database of that version to version + 1 (none yet: version 1 is the first)
MIGRATIONS: Mapping[int, Callable[[Connection], None]] = MappingProxyType({})


class ResultsDBError(InputError):
    """The results database cannot be used (corrupt, an unknown schema version, read-only, out of
    reach): the message names it and what is wrong; the command line exits 2 for it. ``read_only``:
    it could be read, but not written."""

    def __init__(self, message: str, *, read_only: bool = False) -> None:
        super().__init__(message)
        self.read_only = read_only


class SchemaError(ResultsDBError):
    """The database has a schema this version cannot read."""


def _what_is_wrong(e: DBAPIError, path: str | None) -> str:
    """What an SQLite or server error means for the user, in a few words."""
    msg = str(getattr(e, "orig", None) or e).strip().splitlines()[0] if str(getattr(e, "orig", None) or e).strip() else ""
    low = msg.lower()
    if "not a database" in low or "malformed" in low or "encrypted" in low or "no such column" in low:
        return f"corrupt or not a results database ({msg})"
    if "readonly" in low or "read-only" in low or (path is not None and Path(path).exists() and (
            not os.access(path, os.W_OK) or not os.access(Path(path).parent, os.W_OK))):
        return f"read-only: results cannot be recorded there ({msg})"
    if "unable to open" in low:
        return f"cannot be opened ({msg})"
    if "locked" in low or "busy" in low:
        return f"locked by another process for too long ({msg})"
    return msg or type(e).__name__


#: bytes of an SQLite file header: a shorter non-empty file is a truncated database
SQLITE_HEADER_BYTES = 100

#: columns holding a time (seconds since the epoch), and the bound past which one is corrupt (year 9999)
TIMESTAMPS = frozenset({"started", "ended", "heartbeat", "created", "updated", "time"})
MAX_TIMESTAMP = 253402300799.0


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """A database error in ``method`` becomes a :class:`ResultsDBError` naming the database."""
    @functools.wraps(method)
    def call(self: ResultsDB, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except DBAPIError as e:
            what = _what_is_wrong(e, self.path)
            raise ResultsDBError(f"results database {self.where}: {what}", read_only=what.startswith("read-only")) from None
        except UnicodeDecodeError as e:  # sqlite3 decodes the schema's text: bytes that are not UTF-8
            raise ResultsDBError(f"results database {self.where}: corrupt: text that is not UTF-8 ({e.reason})") from None
    return call


def db_url(url_or_path: str | os.PathLike[str]) -> str:
    """A SQLAlchemy URL: ``postgresql://`` goes through psycopg 3, a plain path is an SQLite file."""
    s = str(url_or_path)
    if s.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + s.split("://", 1)[1]
    if "://" in s:
        return s
    return "sqlite:///" + str(Path(s).expanduser().resolve())


def _sqlite_pragmas(dbapi_conn: Any, _rec: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")  # concurrent runs: readers never block the writer
    cur.close()


def _a_race(e: DBAPIError) -> bool:
    """Another process creating the same tables, or holding the lock, at this moment: worth a retry."""
    low = str(getattr(e, "orig", None) or e).lower()
    return isinstance(e, IntegrityError) or any(w in low for w in ("already exists", "locked", "busy", "duplicate"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: the largest count a coverage row holds (a column of 64-bit integers)
MAX_COUNT = (1 << 62) - 1


@dataclass
class RtlCoverageHistory:
    """RTL coverage over runs (:meth:`ResultsDB.rtl_coverage`), per configuration.

    ``trend``: config -> one entry per run that measured it, oldest first (the trend over nights):
    ``{"run_id", "started", "status", "run_dir", "totals": {kind: (hit, total)}}``.
    ``latest``: config -> the newest of those runs with its per-unit table:
    ``{"run_id", "started", "status", "run_dir", "units": {unit: {kind: (hit, total)}}}``, units
    by name, ``total`` last. ``note``: why there is nothing (a database without the table).
    ``union``: config -> the union over those runs whose folders still hold their per-test files
    (:func:`~..analysis.rtl_coverage.union_over_runs`, filled by the dashboard's caller), with
    ``union_notes`` naming the runs left out."""

    trend: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    note: str = ""
    union: dict[str, dict[str, Any]] = field(default_factory=dict)
    union_notes: list[str] = field(default_factory=list)


def _coverage_row(row: Sequence[Any]) -> tuple[str, str, str, int, int]:
    """One (configuration, unit, kind, hit, total) row, checked: names as text within their
    columns, 0 <= hit <= total; a ValueError saying what is wrong."""
    if len(row) != 5:
        raise ValueError(f"RTL coverage row {row!r}: not (configuration, unit, kind, hit, total)")
    config, unit, kind, hit, total = row
    for what, v, most in (("configuration", config, 200), ("unit", unit, 200), ("kind", kind, 16)):
        if not isinstance(v, str) or not v or len(v) > most:
            raise ValueError(f"RTL coverage row {row!r}: the {what} is not a name of 1 to {most} characters")
    for v in (hit, total):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT:
            raise ValueError(f"RTL coverage row {row!r}: points hit and total are not counts")
    if hit > total:
        raise ValueError(f"RTL coverage row {row!r}: more points hit than there are")
    return config, unit, kind, hit, total


class ResultsDB:
    """One results database (open with a URL or a path; a context manager)."""

    def __init__(self, url: str | os.PathLike[str]) -> None:
        self.url = db_url(url)
        self.path: str | None = None  # the SQLite file
        #: tables of :data:`ADDED_TABLES` this database lacks and could not be given (read-only): why
        self.absent: dict[str, str] = {}
        if self.url.startswith("sqlite:///"):
            self.path = self.url.removeprefix("sqlite:///")
            file = Path(self.path)
            if file.exists() and not file.is_file():
                raise ResultsDBError(f"results database {file}: not a regular file")
            if file.is_file() and 0 < file.stat().st_size < SQLITE_HEADER_BYTES:
                # SQLite takes a file shorter than its header for an empty database and would write a new
                # schema over it: a truncated file is corrupt, never silently replaced
                raise ResultsDBError(f"results database {file}: corrupt: {file.stat().st_size} bytes, shorter than "
                                     f"an SQLite header ({SQLITE_HEADER_BYTES})")
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ResultsDBError(f"results database {file}: cannot create its folder: {e.strerror or e}") from None
            self.engine: Engine = create_engine(self.url, connect_args={"timeout": 60})
            event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            self.engine = create_engine(self.url, pool_pre_ping=True)
        try:
            self.version = self._ensure_schema()
        except ResultsDBError:
            self.engine.dispose()
            raise
        except DBAPIError as e:
            self.engine.dispose()
            raise ResultsDBError(f"results database {self.where}: {_what_is_wrong(e, self.path)}") from None
        except UnicodeDecodeError as e:  # sqlite3 decodes the schema's text: bytes that are not UTF-8
            self.engine.dispose()
            raise ResultsDBError(f"results database {self.where}: corrupt: text that is not UTF-8 ({e.reason})") from None

    def __enter__(self) -> ResultsDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

    @property
    def where(self) -> str:
        """The SQLite file, or the URL without a password (for messages)."""
        return self.path or self.engine.url.render_as_string(hide_password=True)

    # ---- schema ------------------------------------------------------------------------------------

    #: how long opening waits for another process's schema transaction (creating the tables) to end
    SCHEMA_WAIT = 60.0

    def _ensure_schema(self) -> int:
        # two processes creating the tables at once: one loses the race and retries until the other's
        # transaction has ended (bounded by SCHEMA_WAIT, not by a count of tries: under load the
        # other process may hold the lock for seconds)
        deadline = time.monotonic() + self.SCHEMA_WAIT
        attempt = 0
        while True:
            try:
                return self._schema_once()
            except (OperationalError, ProgrammingError, IntegrityError) as e:
                if not _a_race(e) or time.monotonic() > deadline:
                    raise
                attempt += 1
                time.sleep(min(0.1 * attempt, 1.0))

    def _schema_once(self) -> int:
        if self.path is None:
            with self.engine.begin() as c:
                return self._schema_in(c)
        # Python's sqlite3 runs CREATE TABLE outside any transaction (it opens one only before
        # INSERT/UPDATE/DELETE): a reader opening the file between a new database's tables and its
        # version row took it for a corrupt one (a CI run under load). One explicit transaction
        # makes the schema appear whole or not at all.
        with self.engine.connect() as conn:
            c = conn.execution_options(isolation_level="AUTOCOMMIT")
            c.exec_driver_sql("BEGIN")
            try:
                version = self._schema_in(c)
            except BaseException:
                try:
                    c.exec_driver_sql("ROLLBACK")
                except DBAPIError:
                    pass  # the transaction is already gone; the first error is the one to report
                raise
            c.exec_driver_sql("COMMIT")
            return version

    def _schema_in(self, c: Connection) -> int:
        from sqlalchemy import inspect as sa_inspect

        existing = set(sa_inspect(c).get_table_names()) & set(metadata.tables)
        if existing and schema.name not in existing:  # results tables without their schema row: never re-stamped
            raise SchemaError(f"results database {self.where}: corrupt: results tables ({', '.join(sorted(existing))}) "
                              f"but no {schema.name} table")
        metadata.create_all(c, tables=[schema])
        row = c.execute(select(schema.c.version).where(schema.c.id == 1)).first()
        if row is None and existing - {schema.name}:
            raise SchemaError(f"results database {self.where}: corrupt: results tables but no schema version row")
        core = set(metadata.tables) - ADDED_TABLES
        if row is not None and row[0] == SCHEMA_VERSION and core - existing:
            raise SchemaError(f"results database {self.where}: corrupt: table(s) "
                              f"{', '.join(sorted(core - existing))} missing")
        if row is None:
            metadata.create_all(c)
            c.execute(insert(schema).values(id=1, version=SCHEMA_VERSION, updated=time.time()))
            return SCHEMA_VERSION
        version = row[0]
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise SchemaError(f"results database {self.where}: unknown schema version {version!r} "
                              f"(not a results database of nvdla-hil, or a corrupt one)")
        if version > SCHEMA_VERSION:
            raise SchemaError(f"{self.where}: results schema version {version} is newer than this nvdla-hil's "
                              f"({SCHEMA_VERSION}); upgrade nvdla-hil to read it")
        if any(v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)):
            raise SchemaError(f"results database {self.where}: unknown schema version {version} "
                              f"(no migration from it to {SCHEMA_VERSION})")
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](c)
            version += 1
            c.execute(update(schema).where(schema.c.id == 1).values(version=version, updated=time.time()))
        self._add_tables(c, existing)
        metadata.create_all(c, tables=[t for t in metadata.sorted_tables if t.name not in self.absent])
        return version

    def _add_tables(self, c: Connection, existing: set[str]) -> None:
        """Create the :data:`ADDED_TABLES` a database made before them lacks; one that cannot be
        created (a read-only file or account) is left out and named in :attr:`absent`."""
        self.absent = {}
        for name in sorted(ADDED_TABLES - existing):
            try:
                with c.begin_nested():
                    metadata.tables[name].create(c)
            except DBAPIError as e:
                if _a_race(e):  # another process created it meanwhile: the retry finds it
                    raise
                self.absent[name] = _what_is_wrong(e, self.path)

    @_guarded
    def check_writable(self) -> None:
        """Raise :class:`ResultsDBError` now, not in the middle of a run, when results cannot be
        written to this database (a read-only file or folder, a read-only server account)."""
        with self.engine.begin() as c:
            c.execute(update(schema).where(schema.c.id == 1).values(updated=time.time()))

    # ---- runs --------------------------------------------------------------------------------------

    @_guarded
    def start_run(self, run_id: str, **fields: Any) -> None:
        """Write the run as ``running`` (replacing a run of the same id, e.g. an import again)."""
        now = time.time()
        row = {"started": now, "heartbeat": now, "host": socket.gethostname(), "pid": os.getpid(), "status": "running",
               **fields, "id": run_id}
        with self.engine.begin() as c:
            c.execute(delete(runs).where(runs.c.id == run_id))
            c.execute(insert(runs).values(**row))

    @_guarded
    def update_run(self, run_id: str, **fields: Any) -> None:
        with self.engine.begin() as c:
            c.execute(update(runs).where(runs.c.id == run_id).values(**fields))

    @_guarded
    def finish_run(self, run_id: str, exit_code: int | None, status: str, note: str = "", **fields: Any) -> None:
        """End the run: its exit code, ``complete`` or ``interrupted`` (with why), and the counts."""
        with self.engine.begin() as c:
            counts = self._counts(c, run_id)
            c.execute(update(runs).where(runs.c.id == run_id).values(
                ended=time.time(), heartbeat=time.time(), exit_code=exit_code, status=status, note=note,
                **counts, **fields))

    @staticmethod
    def _counts(c: Connection, run_id: str) -> dict[str, int]:
        got: dict[Any, Any] = dict(c.execute(select(tests.c.outcome, func.count()).where(tests.c.run_id == run_id)
                             .group_by(tests.c.outcome)).all())
        return {"n_passed": int(got.get("passed", 0)), "n_failed": int(got.get("failed", 0)),
                "n_error": int(got.get("error", 0)),
                "n_skipped": int(sum(v for k, v in got.items() if str(k).startswith("skipped")))}

    @_guarded
    def record_test(self, run_id: str, nodeid: str, outcome: str, duration: float, *, reason: str = "",
                    properties: dict[str, Any] | None = None, signature: tuple[str, str] | None = None,
                    parts: dict[str, Any] | None = None, name: str | None = None,
                    test: str | None = None) -> None:  # fmt: skip
        """One test's result (``test``: its identity across runs, default the node id); replaces an
        earlier row of the same test in the run, and beats the run's heartbeat."""
        now = time.time()
        with self.engine.begin() as c:
            if signature is not None:
                self._add_signature(c, signature, parts or {}, run_id)
            c.execute(delete(tests).where(and_(tests.c.run_id == run_id, tests.c.nodeid == nodeid)))
            c.execute(insert(tests).values(run_id=run_id, nodeid=nodeid, test=test or nodeid, name=name or nodeid.split("::")[-1],
                                           outcome=outcome, duration=float(duration), reason=reason[:4000],
                                           signature=signature[0] if signature else None,
                                           properties=json.dumps(properties or {}, default=str), finished=now))
            c.execute(update(runs).where(runs.c.id == run_id).values(heartbeat=now, **self._counts(c, run_id)))

    @_guarded
    def record_tests(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Many tests' results in one transaction (``history import`` of a big run): each row has
        :meth:`record_test`'s arguments as keys (``nodeid``, ``outcome``, ``duration``, and the
        optional ones). The run's counts are updated once, not once per test (which made an
        import of 10,000 tests quadratic)."""
        now = time.time()
        with self.engine.begin() as c:
            for r in rows:
                if r.get("signature") is not None:
                    self._add_signature(c, r["signature"], r.get("parts") or {}, run_id)
            ids = [str(r["nodeid"]) for r in rows]
            for i in range(0, len(ids), 500):
                c.execute(delete(tests).where(and_(tests.c.run_id == run_id, tests.c.nodeid.in_(ids[i:i + 500]))))
            values = [dict(run_id=run_id, nodeid=r["nodeid"], test=r.get("test") or r["nodeid"],
                           name=r.get("name") or str(r["nodeid"]).split("::")[-1], outcome=r["outcome"],
                           duration=float(r.get("duration") or 0.0), reason=str(r.get("reason") or "")[:4000],
                           signature=r["signature"][0] if r.get("signature") else None,
                           properties=json.dumps(r.get("properties") or {}, default=str), finished=now)
                      for r in {str(r["nodeid"]): r for r in rows}.values()]  # the last row of a node id wins
            if values:
                c.execute(insert(tests), values)
            c.execute(update(runs).where(runs.c.id == run_id).values(heartbeat=now, **self._counts(c, run_id)))

    @staticmethod
    def _add_signature(c: Connection, signature: tuple[str, str], parts: dict[str, Any], run_id: str) -> None:
        if c.execute(select(signatures.c.id).where(signatures.c.id == signature[0])).first() is not None:
            return
        try:
            with c.begin_nested():
                c.execute(insert(signatures).values(id=signature[0], key=signature[1], first_seen=time.time(),
                                                    first_run=run_id, parts=json.dumps(parts, default=str)))
        except IntegrityError:  # another run added it meanwhile
            pass

    @_guarded
    def reap(self, stale_after: float = STALE_AFTER) -> list[str]:
        """Mark runs whose process is gone as ``interrupted``; returns their ids."""
        host = socket.gethostname()
        gone: list[str] = []
        now = time.time()
        with self.engine.begin() as c:
            for r in c.execute(select(runs.c.id, runs.c.host, runs.c.pid, runs.c.heartbeat)
                               .where(runs.c.status == "running")).all():
                if r.host == host and r.pid and r.pid != os.getpid():
                    dead = not _pid_alive(int(r.pid))
                    why = f"process {r.pid} on {host} ended without finishing the run (killed)"
                else:
                    dead = (now - float(r.heartbeat or 0)) > stale_after
                    why = f"no result for {(now - float(r.heartbeat or 0)) / 3600:.1f} h from {r.host} (killed or lost)"
                if dead:
                    counts = self._counts(c, r.id)
                    c.execute(update(runs).where(runs.c.id == r.id).values(status="interrupted", note=why,
                                                                           ended=r.heartbeat, **counts))
                    gone.append(r.id)
        return gone

    @_guarded
    def runs(self, limit: int | None = None, **where: Any) -> list[dict[str, Any]]:
        """Runs, newest first (``where``: column = value filters)."""
        q = select(runs).order_by(runs.c.started.desc())
        for k, v in where.items():
            q = q.where(runs.c[k] == v)
        if limit:
            q = q.limit(limit)
        with self.engine.connect() as c:
            return [self._typed(dict(r._mapping), _RUN_NUMBERS, "run") for r in c.execute(q).all()]

    @_guarded
    def run(self, run_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as c:
            r = c.execute(select(runs).where(runs.c.id == run_id)).first()
        return self._typed(dict(r._mapping), _RUN_NUMBERS, "run") if r else None

    @_guarded
    def tests_of(self, run_ids: Iterable[str]) -> list[dict[str, Any]]:
        ids = list(run_ids)
        if not ids:
            return []
        with self.engine.connect() as c:
            rows = c.execute(select(tests).where(tests.c.run_id.in_(ids))).all()
        out = []
        for r in rows:
            d = self._typed(dict(r._mapping), _TEST_NUMBERS, "test")
            try:
                props = json.loads(d["properties"] or "{}")
            except (ValueError, RecursionError):
                props = {}
            d["properties"] = props if isinstance(props, dict) else {}
            out.append(d)
        return out

    @_guarded
    def test_history(self, nodeid: str, limit: int = 10) -> list[dict[str, Any]]:
        """The latest results of one test (its identity across runs, column ``test``), newest first, with their run's start and status."""
        q = (select(tests.c.run_id, tests.c.outcome, tests.c.duration, tests.c.signature, runs.c.started, runs.c.status)
             .join(runs, runs.c.id == tests.c.run_id).where(tests.c.test == nodeid)
             .order_by(runs.c.started.desc()).limit(limit))
        with self.engine.connect() as c:
            return [self._typed(dict(r._mapping), _TEST_NUMBERS, "test") for r in c.execute(q).all()]

    @_guarded
    def signatures(self, ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        q = select(signatures)
        if ids is not None:
            q = q.where(signatures.c.id.in_(list(ids)))
        with self.engine.connect() as c:
            return {r.id: dict(r._mapping) for r in c.execute(q).all()}

    def _typed(self, row: dict[str, Any], numbers: Mapping[str, type], what: str) -> dict[str, Any]:
        """``row`` with its number columns as numbers (SQLite keeps whatever was written): a text
        where a number belongs is a corrupt database, said with the row and the column."""
        for col, kind in numbers.items():
            v = row.get(col)
            if v is None:
                continue
            try:
                row[col] = kind(v)
                if kind is float and not math.isfinite(row[col]) and col != "duration":
                    raise ValueError(v)
                if col in TIMESTAMPS and not 0 <= row[col] < MAX_TIMESTAMP:  # a time no clock wrote
                    raise ValueError(v)
            except (TypeError, ValueError, OverflowError):
                raise ResultsDBError(f"results database {self.where}: corrupt: {what} "
                                     f"{row.get('id') or row.get('nodeid')!r} has {col} = {v!r}, not a number") from None
        for col, v in row.items():  # and its text columns as text
            if col not in numbers and v is not None and not isinstance(v, str):
                row[col] = str(v)
        return row

    # ---- RTL coverage --------------------------------------------------------------------------------

    @_guarded
    def record_rtl_coverage(self, run_id: str, rows: Iterable[Sequence[Any]]) -> int:
        """A run's RTL coverage, (configuration, unit, kind, hit, total) rows (the ``total`` unit
        too), replacing what the run had; returns the rows written. A ValueError for a malformed
        row (nothing written), :class:`ResultsDBError` when the run is not in the database."""
        checked = [_coverage_row(tuple(r)) for r in rows]
        keys = [r[:3] for r in checked]
        if len(set(keys)) != len(keys):
            raise ValueError(f"RTL coverage of run {run_id}: a (configuration, unit, kind) given twice")
        if rtl_coverage.name in self.absent:
            raise ResultsDBError(f"results database {self.where}: RTL coverage not recorded: it has no "
                                 f"{rtl_coverage.name} table and cannot be given one ({self.absent[rtl_coverage.name]})",
                                 read_only=self.absent[rtl_coverage.name].startswith("read-only"))
        with self.engine.begin() as c:
            if c.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is None:
                raise ResultsDBError(f"results database {self.where}: RTL coverage not recorded: no run {run_id!r}")
            c.execute(delete(rtl_coverage).where(rtl_coverage.c.run_id == run_id))
            if checked:
                c.execute(insert(rtl_coverage), [{"run_id": run_id, "config": cfg, "unit": unit, "kind": kind, "hit": hit,
                                                  "total": total} for cfg, unit, kind, hit, total in checked])
        return len(checked)

    def _count(self, v: Any, run_id: Any, col: str) -> int:
        """A stored count as an int (SQLite keeps whatever was written): anything else is corrupt."""
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT:
            raise ResultsDBError(f"results database {self.where}: corrupt: RTL coverage of run {run_id!r} has "
                                 f"{col} = {v!r}, not a count")
        return v

    @_guarded
    def rtl_coverage(self, run_ids: Iterable[str] | None = None) -> RtlCoverageHistory:
        """The RTL coverage of the runs ``run_ids`` (default: every run): per configuration, each
        run's totals per kind in the order the runs started, and the newest run's per-unit table
        (:class:`RtlCoverageHistory`)."""
        out = RtlCoverageHistory()
        if rtl_coverage.name in self.absent:
            out.note = (f"results database {self.where} has no {rtl_coverage.name} table (made by an older nvdla-hil, "
                        f"and it cannot be added: {self.absent[rtl_coverage.name]})")
            return out
        ids = None if run_ids is None else list(dict.fromkeys(run_ids))
        if ids is not None and not ids:
            return out
        cov = rtl_coverage.c
        q = (select(cov.run_id, cov.config, cov.kind, cov.hit, cov.total, runs.c.started, runs.c.status, runs.c.run_dir)
             .join(runs, runs.c.id == cov.run_id).where(cov.unit == "total")
             .order_by(runs.c.started, cov.run_id, cov.config, cov.kind))
        if ids is not None:
            q = q.where(cov.run_id.in_(ids))
        with self.engine.connect() as c:
            per: dict[str, dict[str, dict[str, Any]]] = {}  # config -> run id -> entry, oldest first
            for r in c.execute(q).all():
                run = self._typed({"id": r.run_id, "started": r.started, "status": r.status, "run_dir": r.run_dir},
                                  _RUN_NUMBERS, "run")
                entry = per.setdefault(str(r.config), {}).setdefault(run["id"], {
                    "run_id": run["id"], "started": run["started"], "status": run["status"], "run_dir": run["run_dir"],
                    "totals": {}})
                entry["totals"][str(r.kind)] = (self._count(r.hit, r.run_id, "hit"), self._count(r.total, r.run_id, "total"))
            for config, by_run in per.items():
                out.trend[config] = list(by_run.values())
                last = out.trend[config][-1]
                units: dict[str, dict[str, tuple[int, int]]] = {}
                for u in c.execute(select(cov.unit, cov.kind, cov.hit, cov.total)
                                   .where(and_(cov.run_id == last["run_id"], cov.config == config))
                                   .order_by(cov.unit, cov.kind)).all():
                    units.setdefault(str(u.unit), {})[str(u.kind)] = (self._count(u.hit, last["run_id"], "hit"),
                                                                      self._count(u.total, last["run_id"], "total"))
                if "total" in units:
                    units["total"] = units.pop("total")  # last
                out.latest[config] = {k: v for k, v in last.items() if k != "totals"} | {"units": units}
        return out

    # ---- labels --------------------------------------------------------------------------------------

    @_guarded
    def set_label(self, signature: str, text: str, bug: str = "", author: str = "") -> None:
        now = time.time()
        with self.engine.begin() as c:
            old = c.execute(select(labels.c.created).where(labels.c.signature == signature)).first()
            c.execute(delete(labels).where(labels.c.signature == signature))
            c.execute(insert(labels).values(signature=signature, text=text, bug=bug, author=author,
                                            created=old[0] if old else now, updated=now))

    @_guarded
    def remove_label(self, signature: str) -> bool:
        with self.engine.begin() as c:
            return bool(c.execute(delete(labels).where(labels.c.signature == signature)).rowcount)

    @_guarded
    def labels(self) -> dict[str, dict[str, Any]]:
        with self.engine.connect() as c:
            return {r.signature: dict(r._mapping) for r in c.execute(select(labels)).all()}

    @_guarded
    def resolve_signature(self, prefix: str) -> str:
        """The one signature id starting with ``prefix`` (ValueError naming the candidates otherwise)."""
        with self.engine.connect() as c:
            hits = [r[0] for r in c.execute(select(signatures.c.id).where(signatures.c.id.like(f"{prefix}%"))).all()]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise ValueError(f"no failure signature starts with {prefix!r} in {self.where}")
        raise ValueError(f"{prefix!r} matches {len(hits)} signatures ({', '.join(sorted(hits)[:5])}...): give more digits")
