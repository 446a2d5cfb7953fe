"""What a series of runs says: the previous comparable run, new / fixed / still failing / cause
changed tests, flaky tests with flip rates, duration trends, pass/fail per run per series, and
failure clusters. Shared by ``nvdla-hil history`` (terminal), ``nvdla-hil dashboard`` (HTML) and
the run report.

Two runs are *comparable* (one *series*) when everything that decides their results but the
build is the same: suite(s), target, profiles, model semantics, injected model bugs, seed and
test selection (``-k``). A nightly compares with the night before, not with a one-test rerun,
a run with another injected bug or another seed. Within a series:

* *new*: failing now, passed (or absent) in the previous comparable run; *fixed*: the reverse;
* *still failing*: failing in both with the same failure cluster (signature);
* *cause changed*: failing in both, with another cluster: the test fails for a new reason;
* *flaky*: a test whose outcome flipped between pass and fail at least twice among the series'
  runs of one build (project version with its git commit), every failure with one cluster: the
  same code, the same inputs, the same failure, sometimes. A flip across builds is a regression
  or a fix, a flip with another signature is a cause change: neither is flakiness.
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

__all__ = ["History", "load_history", "comparable_key", "Comparison", "Flaky", "DurationTrend", "is_fail", "commit_of",
           "series_name", "SERIES_FIELDS"]

FAIL = ("failed", "error")


def is_fail(outcome: str | None) -> bool:
    return outcome in FAIL


#: what makes two runs' results comparable (the columns of a run), in the order :func:`series_name` shows them
SERIES_FIELDS = ("suite", "target", "profile", "semantics", "model_bugs", "seed", "selection")


def _bugs(run: Mapping[str, Any]) -> str:
    """The injected model bugs in a fixed order (the order on the command line does not matter)."""
    return ",".join(sorted(b for b in str(run.get("model_bugs") or "").split(",") if b))


def comparable_key(run: Mapping[str, Any]) -> tuple:
    """Runs with one key form one series: the same suite, target, profiles, semantics, injected
    bugs, seed and ``-k``; only the build (and the time) may differ."""
    return (run.get("suite") or "", run.get("target") or "", run.get("profile") or "", run.get("semantics") or "",
            _bugs(run), str(run.get("seed") or ""), run.get("selection") or "")


def profiles_label(profile: str | None) -> str:
    """A run's profile list as a chart or table cell shows it: one or two names as they are, more as
    ``7 profiles`` (the whole list goes in a tooltip, and stays whole in ``history``)."""
    names = [x for x in str(profile or "").split(",") if x]
    return ",".join(names) if len(names) <= 2 else f"{len(names)} profiles"


def series_name(key: tuple, *, compact: bool = False) -> str:
    """A series key as people read it: ``vectors / model / nv_small / rtl / bug SDP... / seed 1 / -k x``
    (``compact``: a long profile list as ``7 profiles``, for chart titles and headings)."""
    suite, target, profile, semantics, bugs, seed, sel = key
    profile = profiles_label(profile) if compact else profile
    parts = [suite or "-", target or "-", profile or "-", semantics or "-", f"bugs {bugs}" if bugs else "no bugs"]
    if seed:
        parts.append(f"seed {seed}")
    if sel:
        parts.append(f"-k {sel}")
    return " / ".join(parts)


def commit_of(run: Mapping[str, Any]) -> str:
    """The build of a run as people name it: the git commit of its version (``0.1.0+g38cf099`` ->
    ``38cf099``, ``.dirty`` kept), else the version, else ``?``."""
    v = str(run.get("version") or "")
    return v.split("+g", 1)[1] if "+g" in v else (v or "?")


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
    changed: list[dict[str, Any]] = field(default_factory=list)  # failing in both, another cluster
    was: dict[str, dict[str, Any]] = field(default_factory=dict)  # test key -> its row in the previous run

    @property
    def counts(self) -> str:
        return (f"{len(self.new)} new, {len(self.fixed)} fixed, {len(self.still)} still failing, "
                f"{len(self.changed)} cause changed")


@dataclass
class Flaky:
    test: str
    sequence: str  # oldest first: P pass, F fail/error
    flips: int
    rate: float  # flips / transitions
    build: str = ""  # the commit whose runs flipped


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
            if before is not None:
                cmp.was[key] = before
            if is_fail(row["outcome"]):
                if before is None or not is_fail(before["outcome"]):
                    cmp.new.append(row)
                elif self.same_cause(row, before):
                    cmp.still.append(row)
                else:
                    cmp.changed.append(row)
            elif row["outcome"] == "passed" and before is not None and is_fail(before["outcome"]):
                cmp.fixed.append(row)
        return cmp

    def same_cause(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
        """Two failures with one cause: the same outcome kind and failure cluster."""
        return a["outcome"] == b["outcome"] and self.cluster(a.get("signature")) == self.cluster(b.get("signature"))

    def flaky(self, run: Mapping[str, Any], window: int = 20) -> list[Flaky]:
        """Tests that flipped between pass and fail at least twice among the last ``window`` runs of
        ``run``'s series built from ``run``'s commit, every failure with one cause (one flip is a
        regression or a fix; a flip to another cause is a cause change; two with one are a test
        that flips). Runs of other builds are not counted: their code differs."""
        build = commit_of(run)
        series = [r for r in self.series(run) if commit_of(r) == build and r["started"] <= run["started"]][-window:]
        seqs: dict[str, str] = {}
        causes: dict[str, list[dict[str, Any]]] = {}
        for r in series:
            for key, row in self.tests.get(r["id"], {}).items():
                if row["outcome"] == "passed" or is_fail(row["outcome"]):
                    seqs[key] = seqs.get(key, "") + ("F" if is_fail(row["outcome"]) else "P")
                    if is_fail(row["outcome"]):
                        causes.setdefault(key, []).append(row)
        out = []
        for key, seq in seqs.items():
            flips = sum(a != b for a, b in zip(seq, seq[1:]))
            fails = causes.get(key, [])
            if flips >= 2 and all(self.same_cause(f, fails[0]) for f in fails):
                out.append(Flaky(key, seq, flips, flips / (len(seq) - 1), build))
        return sorted(out, key=lambda f: (-f.rate, f.test))

    def all_series(self) -> dict[tuple, list[dict[str, Any]]]:
        """Every series of the runs read: key -> its runs, oldest first; the series with the newest run first."""
        acc: dict[tuple, list[dict[str, Any]]] = {}
        for r in self.runs:  # newest first
            acc.setdefault(comparable_key(r), []).append(r)
        return {k: sorted(v, key=lambda r: r["started"]) for k, v in acc.items()}

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
