"""``nvdla-hil history``: the results database in the terminal.

Sections: the last runs (status, exit code, counts, time, commit; under each its series - suite,
target, profiles, semantics, injected bugs, seed, ``-k`` - and host and build key, never cut), the
chosen run (default the newest) against the previous comparable run (new failures, fixed, still
failing, cause changed, each with its cluster and label), flaky tests with their flip rates,
duration trends, and the failure clusters of the run and of all runs shown, with their labels.
Test names are printed whole, so they can be copied into ``-k``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .analysis import History, commit_of, comparable_key, series_name, when
from .labels import label_text
from .progress import fmt_seconds
from .textsafe import term_safe

__all__ = ["render_history"]


def _short(test: str) -> str:
    """The test's name (its module dropped), whole: it is what ``-k`` takes."""
    return test.split("::")[-1]


def _provenance(r: dict[str, Any]) -> str:
    """Where and from what a run came: host, build key (RTL build or board)."""
    parts = [f"host {r.get('host') or '?'}"]
    if r.get("build_key"):
        parts.append(f"build {r['build_key']}")
    parts.append(f"version {r.get('version') or '?'}")
    return ", ".join(parts)


def _dur(run: dict[str, Any]) -> str:
    if run.get("ended") and run.get("started"):
        return fmt_seconds(float(run["ended"]) - float(run["started"]))
    return "-"


def _terminal_safe(out: Callable[[str], None]) -> Callable[[str], None]:
    return lambda line: out(term_safe(line))


def render_history(h: History, run_id: str | None = None, runs_shown: int = 15, window: int = 20,
                   out: Callable[[str], None] = print) -> int:  # fmt: skip
    """Print the history; returns the number of new failures of the chosen run. Every line goes
    through :func:`~.textsafe.term_safe`: names from files never drive the terminal."""
    out = _terminal_safe(out)
    if not h.runs:
        out("no runs in the results database yet (nvdla-hil regress records each run; "
            "nvdla-hil history import DIR... brings in past run directories)")
        return 0
    out(f"runs (newest first, {min(runs_shown, len(h.runs))} of {len(h.runs)}; under each: its series, then host, "
        f"build and version):")
    out(f"  {'run':34s} {'started (UTC)':19s} {'commit':14s} {'status':11s} exit "
        f"{'pass':>5s} {'fail':>5s} {'err':>4s} {'skip':>5s} {'time':>8s}")
    for r in h.runs[:runs_shown]:
        code = "-" if r.get("exit_code") is None else str(r["exit_code"])
        out(f"  {r['id']:34s} {when(r['started'])} {commit_of(r):14s} {r['status']:11s} {code:>4s} "
            f"{r.get('n_passed') or 0:5d} {r.get('n_failed') or 0:5d} {r.get('n_error') or 0:4d} {r.get('n_skipped') or 0:5d} "
            f"{_dur(r):>8s}" + (f"  ({r['note']})" if r["status"] != "complete" and r.get("note") else ""))
        out(f"      {series_name(comparable_key(r))}")
        out(f"      {_provenance(r)}")
    run = h.run_by_id(run_id) if run_id else h.runs[0]
    cmp = h.compare(run)
    out("")
    if cmp.previous is None:
        out(f"run {run['id']} ({commit_of(run)}): no earlier comparable run "
            f"(same suite, target, profiles, semantics, injected bugs, seed, -k)")
    else:
        out(f"run {run['id']} ({commit_of(run)}) against the previous comparable run {cmp.previous['id']} "
            f"({commit_of(cmp.previous)}):")
    out(f"  series: {series_name(comparable_key(run))}")
    for title, rows in (("new failures", cmp.new), ("fixed", cmp.fixed), ("still failing", cmp.still),
                        ("CAUSE CHANGED", cmp.changed)):
        out(f"  {title} ({len(rows)}):")
        for row in rows[:40]:
            key = str(row.get("test") or row["nodeid"])
            cid = h.cluster(row.get("signature"))
            if title == "fixed":
                cid = h.cluster((cmp.was.get(key) or {}).get("signature"))
            lab = label_text(h.label(row.get("signature")))
            was = h.cluster((cmp.was.get(key) or {}).get("signature")) if title == "CAUSE CHANGED" else None
            out(f"    {_short(key)}" + (f"  [{was or '-'} -> {cid or '-'}]" if title == "CAUSE CHANGED" else
                                        f"  [{cid}]" if cid else "")
                + (f"  known: {lab}" if lab else ""))
        if len(rows) > 40:
            out(f"    ... and {len(rows) - 40} more")
    flaky = h.flaky(run, window)
    series = h.series(run)
    same = [r for r in series if commit_of(r) == commit_of(run)]
    out("")
    out(f"flaky tests (pass/fail flips, one failure cause, in the last {min(window, len(same))} comparable runs of "
        f"build {commit_of(run)}; oldest first): {len(flaky)}")
    for f in flaky[:20]:
        out(f"  {_short(f.test)}  {f.sequence}  {f.flips} flips, flip rate {f.rate:.0%}")
    trends = h.durations(run, window)
    out("")
    out(f"duration trends (this run against the median of earlier comparable runs): {len(trends)}")
    for t in trends[:15]:
        out(f"  {_short(t.test)}  {t.median_before:.2f} s -> {t.last:.2f} s (x{t.ratio:.1f})")
    totals = [float(r["ended"]) - float(r["started"]) for r in series if r.get("ended") and r["status"] == "complete"][-10:]
    if totals:
        out("  run wall times, oldest first: " + ", ".join(fmt_seconds(s) for s in totals))
    out("")
    mine = h.clusters([run["id"]])
    out(f"failure clusters of run {run['id']}: {sum(c['count'] for c in mine)} failures in {len(mine)} cluster(s)")
    for c in mine:
        _cluster_line(c, out)
    every = h.clusters([r["id"] for r in h.runs])
    out("")
    out(f"failure clusters of all {len(h.runs)} runs shown: {len(every)}")
    for c in every[:25]:
        _cluster_line(c, out, runs=True)
    return len(cmp.new)


def _cluster_line(c: dict[str, Any], out: Callable[[str], None], runs: bool = False) -> None:
    lab = label_text(c.get("label"))
    where = f" in {len(c['runs'])} run(s)" if runs else ""
    out(f"  {c['count']:4d} x {c['signature']}  {c['key']}  ({len(c['tests'])} test(s){where})")
    if lab:
        out(f"         known: {lab}")
    elif c.get("reasons"):
        out(f"         e.g. {c['reasons'][0][:110]}")
