"""``nvdla-hil history``: the results database in the terminal.

Sections: the last runs (status, exit code, counts, time, injected bugs), the chosen run (default
the newest) against the previous comparable run (new failures, fixed, still failing, each with
its cluster and label), flaky tests with their flip rates, duration trends, and the failure
clusters of the run and of all runs shown, with their labels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .analysis import History, when
from .labels import label_text
from .progress import fmt_seconds
from .textsafe import term_safe

__all__ = ["render_history"]


def _short(test: str, width: int = 60) -> str:
    name = test.split("::")[-1]
    return name if len(name) <= width else "..." + name[-(width - 3):]


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
    out(f"runs (newest first, {min(runs_shown, len(h.runs))} of {len(h.runs)}):")
    out(f"  {'run':34s} {'started (UTC)':19s} {'target':8s} {'profile':24s} {'status':11s} exit "
        f"{'pass':>5s} {'fail':>5s} {'err':>4s} {'skip':>5s} {'time':>8s}  injected")
    for r in h.runs[:runs_shown]:
        code = "-" if r.get("exit_code") is None else str(r["exit_code"])
        out(f"  {r['id'][:34]:34s} {when(r['started'])} {str(r.get('target') or '-')[:8]:8s} "
            f"{str(r.get('profile') or '-')[:24]:24s} {r['status'][:11]:11s} {code:>4s} "
            f"{r.get('n_passed') or 0:5d} {r.get('n_failed') or 0:5d} {r.get('n_error') or 0:4d} {r.get('n_skipped') or 0:5d} "
            f"{_dur(r):>8s}  {r.get('model_bugs') or ''}" + (f"  ({r['note']})" if r["status"] != "complete" and r.get("note") else ""))
    run = h.run_by_id(run_id) if run_id else h.runs[0]
    cmp = h.compare(run)
    out("")
    if cmp.previous is None:
        out(f"run {run['id']}: no earlier comparable run (same target, profiles, suite, semantics, -k)")
    else:
        out(f"run {run['id']} against the previous comparable run {cmp.previous['id']}:")
    for title, rows in (("new failures", cmp.new), ("fixed", cmp.fixed), ("still failing", cmp.still)):
        out(f"  {title} ({len(rows)}):")
        for row in rows[:40]:
            cid = h.cluster(row.get("signature"))
            lab = label_text(h.label(row.get("signature")))
            out(f"    {_short(row.get('test') or row['nodeid'])}" + (f"  [{cid}]" if cid else "")
                + (f"  known: {lab}" if lab else ""))
        if len(rows) > 40:
            out(f"    ... and {len(rows) - 40} more")
    flaky = h.flaky(run, window)
    series = h.series(run)
    out("")
    out(f"flaky tests (pass/fail flips in the last {min(window, len(series))} comparable runs; oldest first): {len(flaky)}")
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
