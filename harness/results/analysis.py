"""What a series of runs says: the previous comparable run, new / fixed / still failing tests,
flaky tests with flip rates, duration trends, pass rate per night per target and profile, and
failure clusters. Shared by ``nvdla-hil history`` (terminal) and ``nvdla-hil dashboard`` (HTML).

Two runs are *comparable* when they ran the same target, profiles, suite(s), semantics and
test selection (``-k``): a nightly compares with the night before, not with a one-test rerun.
A test's identity across runs is its module and name (``nvdla_hil.harness.suites.test_traces::
test_trace[x]`` for the shipped suites, whatever folder pytest ran from).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .db import ResultsDB, ResultsDBError
from .signature import cluster_map

__all__ = ["History", "load_history", "comparable_key", "Comparison", "Flaky", "DurationTrend", "is_fail"]

FAIL = ("failed", "error")


def is_fail(outcome: str | None) -> bool:
    return outcome in FAIL


def comparable_key(run: Mapping[str, Any]) -> tuple:
    return (run.get("target"), run.get("profile"), run.get("suite"), run.get("semantics"), run.get("selection") or "")


def night(ts: float | None) -> str:
    """The UTC date of a run's start (a night's regressions share it)."""
    return datetime.fromtimestamp(float(ts or 0), UTC).strftime("%Y-%m-%d")


def when(ts: float | None) -> str:
    return datetime.fromtimestamp(float(ts or 0), UTC).strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class Comparison:
    run: dict[str, Any]
    previous: dict[str, Any] | None
    new: list[dict[str, Any]] = field(default_factory=list)
    fixed: list[dict[str, Any]] = field(default_factory=list)
    still: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Flaky:
    test: str
    sequence: str  # oldest first: P pass, F fail/error
    flips: int
    rate: float  # flips / transitions


@dataclass
class DurationTrend:
    test: str
    durations: list[float]  # oldest first
    last: float
    median_before: float

    @property
    def ratio(self) -> float:
        return self.last / self.median_before if self.median_before > 0 else float("inf")


@dataclass
class History:
    runs: list[dict[str, Any]]  # newest first
    tests: dict[str, dict[str, dict[str, Any]]]  # run id -> test key -> row
    signatures: dict[str, dict[str, Any]]
    labels: dict[str, dict[str, Any]]
    cluster_of: dict[str, str] = field(default_factory=dict)  # signature id -> cluster id (signature.cluster_map)
    notes: list[str] = field(default_factory=list)  # what the reader should know (a read-only database)

    def cluster(self, sig: str | None) -> str | None:
        return self.cluster_of.get(sig, sig) if sig else None

    def label(self, sig: str | None) -> dict[str, Any] | None:
        """The label of ``sig``'s cluster (given to the cluster or to the signature itself)."""
        if not sig:
            return None
        cid = self.cluster(sig)
        return self.labels.get(cid or "") or self.labels.get(sig) or next(
            (lab for s, lab in self.labels.items() if self.cluster_of.get(s) == cid), None)

    # ---- selection ----------------------------------------------------------------------------------

    def run_by_id(self, run_id: str) -> dict[str, Any]:
        hits = [r for r in self.runs if r["id"] == run_id] or [r for r in self.runs if r["id"].startswith(run_id)]
        if len(hits) != 1:
            raise ValueError(f"run {run_id!r}: {'no such run' if not hits else f'{len(hits)} runs match'} in the database")
        return hits[0]

    def series(self, run: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The runs comparable with ``run``, oldest first."""
        key = comparable_key(run)
        return sorted((r for r in self.runs if comparable_key(r) == key), key=lambda r: r["started"])

    def previous(self, run: Mapping[str, Any]) -> dict[str, Any] | None:
        """The newest comparable run before ``run`` (a complete one when there is one)."""
        before = [r for r in self.series(run) if r["started"] < run["started"]]
        complete = [r for r in before if r["status"] == "complete"]
        pick = complete or before
        return pick[-1] if pick else None

    # ---- sets ------------------------------------------------------------------------------------------

    def compare(self, run: Mapping[str, Any]) -> Comparison:
        """New failures, fixed and still failing tests of ``run`` against the previous comparable run."""
        prev = self.previous(run)
        cur = self.tests.get(run["id"], {})
        old = self.tests.get(prev["id"], {}) if prev else {}
        cmp = Comparison(dict(run), prev)
        for key, row in sorted(cur.items()):
            before = old.get(key)
            if is_fail(row["outcome"]):
                (cmp.still if before is not None and is_fail(before["outcome"]) else cmp.new).append(row)
            elif row["outcome"] == "passed" and before is not None and is_fail(before["outcome"]):
                cmp.fixed.append(row)
        return cmp

    def flaky(self, run: Mapping[str, Any], window: int = 20) -> list[Flaky]:
        """Tests of ``run``'s series whose outcome flipped between pass and fail at least twice in
        the last ``window`` runs (one flip is a regression or a fix; two are a test that flips)."""
        series = self.series(run)[-window:]
        seqs: dict[str, str] = {}
        for r in series:
            for key, row in self.tests.get(r["id"], {}).items():
                if row["outcome"] == "passed" or is_fail(row["outcome"]):
                    seqs[key] = seqs.get(key, "") + ("F" if is_fail(row["outcome"]) else "P")
        out = []
        for key, seq in seqs.items():
            flips = sum(a != b for a, b in zip(seq, seq[1:]))
            if flips >= 2:
                out.append(Flaky(key, seq, flips, flips / (len(seq) - 1)))
        return sorted(out, key=lambda f: (-f.rate, f.test))

    def durations(self, run: Mapping[str, Any], window: int = 20, min_seconds: float = 0.5,
                  ratio: float = 1.5) -> list[DurationTrend]:  # fmt: skip
        """Tests of ``run`` whose time grew (or shrank) by ``ratio`` against the median of their
        earlier comparable runs, by at least ``min_seconds``; biggest change first."""
        series = self.series(run)[-window:]
        per: dict[str, list[float]] = {}
        for r in series:
            if r["started"] > run["started"]:
                continue
            for key, row in self.tests.get(r["id"], {}).items():
                if row.get("duration") is not None and not str(row["outcome"]).startswith(("skipped", "interrupted")):
                    per.setdefault(key, []).append(float(row["duration"]))
        out = []
        for key, ds in per.items():
            if len(ds) < 2 or key not in self.tests.get(run["id"], {}):
                continue
            med = statistics.median(ds[:-1])
            last = ds[-1]
            if abs(last - med) >= min_seconds and (last >= med * ratio or last * ratio <= med):
                out.append(DurationTrend(key, ds, last, med))
        return sorted(out, key=lambda t: -abs(t.last - t.median_before))

    def clusters(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Failure clusters over ``run_ids``: signature, key, label, count, tests, runs; biggest first."""
        acc: dict[str, dict[str, Any]] = {}
        for rid in run_ids:
            for key, row in self.tests.get(rid, {}).items():
                sig = row.get("signature")
                if not sig or not is_fail(row["outcome"]):
                    continue
                cid = self.cluster(sig) or sig
                c = acc.setdefault(cid, {"signature": cid, "count": 0, "tests": [], "runs": [], "reasons": [],
                                         "members": []})
                c["count"] += 1
                if sig not in c["members"]:
                    c["members"].append(sig)
                if key not in c["tests"]:
                    c["tests"].append(key)
                if rid not in c["runs"]:
                    c["runs"].append(rid)
                if row.get("reason") and len(c["reasons"]) < 3 and row["reason"] not in c["reasons"]:
                    c["reasons"].append(row["reason"])
        for sig, c in acc.items():
            c["key"] = (self.signatures.get(sig) or {}).get("key", "")
            c["first_seen"] = (self.signatures.get(sig) or {}).get("first_seen")
            c["label"] = self.label(sig)
        return sorted(acc.values(), key=lambda c: (-c["count"], c["signature"]))

    def pass_rates(self) -> dict[tuple[str, str], list[tuple[str, float, int]]]:
        """(target, profile) -> [(night, pass rate of the tests that ran, tests that ran)], oldest first."""
        acc: dict[tuple[str, str], dict[str, list[int]]] = {}
        for r in self.runs:
            ran = int(r.get("n_passed") or 0) + int(r.get("n_failed") or 0) + int(r.get("n_error") or 0)
            if not ran:
                continue
            d = acc.setdefault((str(r.get("target")), str(r.get("profile"))), {}).setdefault(night(r["started"]), [0, 0])
            d[0] += int(r.get("n_passed") or 0)
            d[1] += ran
        return {k: [(n, p / t, t) for n, (p, t) in sorted(v.items())] for k, v in sorted(acc.items())}


def test_key(row: Mapping[str, Any]) -> str:
    return str(row.get("test") or row["nodeid"])


def load_history(db: ResultsDB, limit: int = 200, target: str | None = None, profile: str | None = None) -> History:
    """The last ``limit`` runs (killed ones marked interrupted first), their tests, signatures and
    labels. A read-only database is read as it is (its killed runs are not marked: ``notes`` says so)."""
    notes: list[str] = []
    try:
        db.reap()
    except ResultsDBError as e:
        if not e.read_only:
            raise
        notes.append(f"{e}; runs whose process was killed are shown as stored, not marked interrupted")
    where = {k: v for k, v in (("target", target), ("profile", profile)) if v}
    runs = db.runs(limit=limit, **where)
    tests: dict[str, dict[str, dict[str, Any]]] = {}
    for row in db.tests_of(r["id"] for r in runs):
        tests.setdefault(row["run_id"], {})[test_key(row)] = row
    sigs = db.signatures()
    return History(runs, tests, sigs, db.labels(), cluster_map({k: v.get("key") or "" for k, v in sigs.items()}),
                   notes=notes)
