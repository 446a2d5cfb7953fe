"""A new SQLite results database appears whole or not at all (harness/results/db.py).

Found by ``make flaky`` at load 21: a test opened the database a regression was creating, between
its tables and its schema-version row, and was told the file was corrupt. Python's ``sqlite3``
runs ``CREATE TABLE`` outside any transaction, so the schema has to be one explicit transaction.

The race is made certain here, not left to timing: the creating thread stops between its tables
and its version row (it waits on an event inside ``insert``), and a second opener looks at the
file while it is stopped (its look is signalled from inside ``inspect``). Only then does the
creator go on.
"""

from __future__ import annotations

import threading
from pathlib import Path

import sqlalchemy

from nvdla_hil.harness.results import db as dbmod
from nvdla_hil.harness.results.db import SCHEMA_VERSION, ResultsDB

WAIT = 300.0  # the suite's hang guard: each wait below ends on an event, this only bounds a hang


def test_a_reader_never_sees_a_half_made_schema(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    path = tmp_path / "results.sqlite"
    paused, go, reader_looked = threading.Event(), threading.Event(), threading.Event()
    threads: dict[str, threading.Thread] = {}
    real_insert, real_inspect = dbmod.insert, sqlalchemy.inspect

    def insert(table):  # noqa: ANN001, ANN202
        if threading.current_thread() is threads.get("creator") and table is dbmod.schema:
            paused.set()
            assert go.wait(WAIT)
        return real_insert(table)

    def inspect(c):  # noqa: ANN001, ANN202
        got = real_inspect(c)
        if threading.current_thread() is threads.get("reader"):
            names = got.get_table_names

            def get_table_names(*a, **k):  # noqa: ANN002, ANN003, ANN202
                try:
                    return names(*a, **k)
                finally:  # the reader has read the file's tables: only now may the creator go on
                    reader_looked.set()

            got.get_table_names = get_table_names
        return got

    monkeypatch.setattr(dbmod, "insert", insert)
    monkeypatch.setattr(sqlalchemy, "inspect", inspect)
    outcome: dict[str, object] = {}

    def open_db(who: str) -> None:
        try:
            with ResultsDB(path) as db:
                outcome[who] = db.version
        except Exception as e:  # noqa: BLE001 - the test reports what the opener met
            outcome[who] = e

    threads["creator"] = threading.Thread(target=open_db, args=("creator",))
    threads["creator"].start()
    assert paused.wait(WAIT), "the creator never reached its version row"
    threads["reader"] = threading.Thread(target=open_db, args=("reader",))
    threads["reader"].start()
    assert reader_looked.wait(WAIT), "the reader never looked at the file"
    go.set()
    for t in threads.values():
        t.join(WAIT)
        assert not t.is_alive()
    assert outcome == {"creator": SCHEMA_VERSION, "reader": SCHEMA_VERSION}, outcome
