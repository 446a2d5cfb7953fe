"""``nvdla-hil dashboard``: a static HTML site of the results database.

One ``index.html`` that opens from disk or from any web server: no script or style from outside,
plots inline as SVG (matplotlib). Sections: what to run next (the commands for each series' new
failures, cause changes, flaky tests and interrupted runs), passed and failed tests of every run
as bars, one chart per comparable series (a red night stands out; runs labelled by time and
commit) and the pass rate per night (table), the runs (commit, series, seed, injected bugs,
host, build key, status, counts; each links to its run directory's ``report.html``), the newest
run of each series against the run before it (new failures, fixed, still failing, cause
changed), flaky tests with flip rates and their build, duration trends (wall time per run, tests
that slowed down), RTL coverage (given the database's :meth:`ResultsDB.rtl_coverage`: per
configuration, the newest run's per-unit table, linked to its lcov HTML view while its run
folder has it, and line/branch/toggle percent over the runs), failure clusters with their labels,
and a test x run grid (one cell per test and run, coloured by outcome, its signature and label
in the tooltip).
"""

from __future__ import annotations

import html
import io
import os
import re
import shlex
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .analysis import History, commit_of, comparable_key, is_fail, night, profiles_label, series_name, when
from .labels import label_text
from .textsafe import http_link, rel_link, term_safe

if TYPE_CHECKING:
    from .db import RtlCoverageHistory

__all__ = ["render_dashboard", "write_dashboard"]

_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px} h2{font-size:15px;margin-top:26px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:4px 0} td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
tr.none td{color:#777;font-style:italic}
th{background:#eee;text-align:left} code{font:12px monospace}
.complete{color:#080} .interrupted,.running{color:#b60;font-weight:bold}
.new{color:#b00;font-weight:bold} .fixed{color:#080} .still{color:#a50} .changed{color:#80b;font-weight:bold}
pre.next{background:#eef4ff;padding:4px;white-space:pre-wrap}
table.grid td{width:14px;height:14px;padding:0;border:1px solid #fff}
table.grid td.name{width:auto;padding:0 6px;font:11px monospace;white-space:nowrap;border:none}
td.p{background:#3a3} td.f{background:#d22} td.e{background:#e80} td.s{background:#ccc} td.n{background:#f4f4f4}
td.i{background:repeating-linear-gradient(45deg,#e80 0 3px,#fff 3px 6px)}
.label{background:#ffd;padding:0 4px;border:1px solid #dd8} svg{max-width:100%;height:auto}
td.prof{max-width:220px;word-break:break-word;font-size:11px}
table.rtlcov td{text-align:right} table.rtlcov td.unit{text-align:left} table.rtlcov tr.total td{font-weight:bold}
"""


def _e(s: Any) -> str:
    return html.escape(str(s if s is not None else ""))


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none"}):  # text stays text: searchable, copyable, smaller
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    # matplotlib repeats each label in an XML comment: labels come from the database, and a comment
    # is nothing the picture needs
    return re.sub(r"<!--.*?-->", "", text[text.index("<svg"):], flags=re.S)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def run_label(r: dict[str, Any]) -> str:
    """A run on a chart's axis: its start (UTC) and its commit."""
    return f"{datetime.fromtimestamp(float(r['started']), UTC).strftime('%m-%d %H:%M')}\n{commit_of(r)}"


def series_bars_svg(h: History, max_series: int = 8, max_runs: int = 30) -> str | None:
    """Passed (green) and failed + error (red) tests of each run, stacked, one chart per comparable
    series (the series with the newest run on top), runs oldest first labelled by time and commit;
    an interrupted run's bar is hatched. A red night is a red bar, whatever ran beside it."""
    series = [(k, rs[-max_runs:]) for k, rs in list(h.all_series().items())[:max_series]]
    series = [(k, rs) for k, rs in series if any(_ran(r) for r in rs)]
    if not series:
        return None
    plt = _plt()
    fig, axes = plt.subplots(len(series), 1, figsize=(9, 1.2 + 2.0 * len(series)), squeeze=False)
    for ax, (key, rs) in zip(axes[:, 0], series):
        x = list(range(len(rs)))
        passed = [int(r.get("n_passed") or 0) for r in rs]
        failed = [int(r.get("n_failed") or 0) + int(r.get("n_error") or 0) for r in rs]
        hatch = ["//" if r["status"] != "complete" else "" for r in rs]
        for i in x:
            ax.bar(i, passed[i], color="#3a3", hatch=hatch[i], edgecolor="#555" if hatch[i] else "#3a3")
            ax.bar(i, failed[i], bottom=passed[i], color="#d22", hatch=hatch[i], edgecolor="#555" if hatch[i] else "#d22")
            if failed[i]:
                ax.text(i, passed[i] + failed[i], str(failed[i]), ha="center", va="bottom", fontsize=7, color="#b00")
        ax.set_xticks(x)
        ax.set_xticklabels([run_label(r) for r in rs], fontsize=6)
        ax.set_xlim(-0.6, max(len(rs), 6) - 0.4)
        ax.set_ylabel("tests", fontsize=7)
        ax.set_title(term_safe(series_name(key, compact=True))[:150], fontsize=8, loc="left")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("passed (green) and failed (red) tests per run, per comparable series; hatched: interrupted",
                 fontsize=9)
    fig.tight_layout()
    return _svg(fig)


def _ran(r: dict[str, Any]) -> int:
    return int(r.get("n_passed") or 0) + int(r.get("n_failed") or 0) + int(r.get("n_error") or 0)


def run_times_svg(h: History) -> str | None:
    """Wall time of each complete run (an interrupted one is not comparable), per comparable series."""
    series: dict[tuple, list[dict[str, Any]]] = {}
    for r in sorted(h.runs, key=lambda r: r["started"]):
        if r.get("ended") and r["status"] == "complete":
            series.setdefault(comparable_key(r), []).append(r)
    if not series:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 2.8))
    for key, rs in series.items():
        ax.plot([datetime.fromtimestamp(r["started"], UTC) for r in rs],
                [float(r["ended"]) - float(r["started"]) for r in rs], "o-",
                label=term_safe(series_name(key, compact=True))[:90])
    ax.set_ylabel("seconds")
    ax.set_title("run wall time per comparable series", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.autofmt_xdate()
    return _svg(fig)


def _report_link(run: dict[str, Any], out: Path) -> str | None:
    d = run.get("run_dir")
    if not d:
        return None
    rep = Path(d) / "report.html"
    if not rep.is_file():
        return None
    try:
        return rel_link(Path(os.path.relpath(rep, out)).as_posix())  # a folder "javascript:x" stays a path
    except ValueError:  # another drive
        return rep.resolve().as_uri()


def _short(test: str) -> str:
    return test.split("::")[-1]


def _test_cell(h: History, test: str, row: dict[str, Any] | None, run: dict[str, Any]) -> str:
    if row is None:
        return f'<td class="n" title="{_e(_short(test))}: not in run {_e(run["id"])}"></td>'
    o = str(row["outcome"])
    cls = "f" if o == "failed" else "e" if o == "error" else "p" if o == "passed" else "i" if o == "interrupted" else "s"
    tip = f"{_short(test)} in {run['id']}: {o} ({float(row.get('duration') or 0):.2f} s)"
    if row.get("signature"):
        tip += f"; cluster {h.cluster(row['signature'])}"
        lab = label_text(h.label(row["signature"]))
        if lab:
            tip += f"; known: {lab}"
    if row.get("reason"):
        tip += f"; {row['reason'][:160]}"
    return f'<td class="{cls}" data-outcome="{_e(o)}" title="{_e(tip)}"></td>'


def render_dashboard(h: History, out: str | Path, grid_runs: int = 30, rtl_coverage: RtlCoverageHistory | None = None) -> str:
    """The page; ``rtl_coverage``: the database's RTL coverage of ``h``'s runs
    (``db.rtl_coverage([r["id"] for r in h.runs])``), drawn as its section (none without it)."""
    out = Path(out).resolve()
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    p: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    f"<title>nvdla-hil dashboard</title><style>{_CSS}</style></head><body>",
                    f"<h1>nvdla-hil regressions: {len(h.runs)} runs</h1><p>generated {now}</p>"]
    if not h.runs:
        p.append("<p>no runs in the results database yet</p></body></html>")
        return "\n".join(p)
    p += _next_section(h)
    p += _pass_rate_section(h)
    p += _runs_section(h, out)
    p += _changes_section(h)
    p += _flaky_section(h)
    p += _durations_section(h)
    if rtl_coverage is not None:
        p += _rtl_coverage_section(h, out, rtl_coverage)
    p += _clusters_section(h)
    p.append(_grid(h, out, h.runs[:grid_runs]))
    p.append("</body></html>")
    return "\n".join(p)


def _pass_rate_section(h: History) -> list[str]:
    """Passed and failed per run, per series (the plot), and the pass rate per night, target and profile (a table)."""
    p: list[str] = []
    p.append('<h2 id="passrate">Passed and failed per run, per series</h2>')
    svg = series_bars_svg(h)
    if svg:
        p.append(f'<div class="plot" id="passrate-plot">{svg}</div>')
    p.append('<h3>Pass rate per night, target and profile</h3><table id="passrate-table"><tr><th>target</th>'
             "<th>profile</th><th>night</th><th>pass rate</th><th>tests run</th></tr>")
    for (target, profile), pts in h.pass_rates().items():
        for n, rate, total in pts:
            p.append(f'<tr data-target="{_e(target)}" data-profile="{_e(profile)}" data-night="{n}"><td>{_e(target)}</td>'
                     f'<td class="prof" title="{_e(profile)}">{_e(profiles_label(profile))}</td><td>{n}</td>'
                     f'<td data-rate="{rate:.4f}">{100 * rate:.1f}%</td>'
                     f"<td>{total}</td></tr>")
    p.append("</table>")
    return p


def _runs_section(h: History, out: Path) -> list[str]:
    """One row per run, with its commit, series, seed, injected bugs, host and build key, linked to its report.html."""
    p: list[str] = []
    # the verdict (status, exit, counts) beside the run, where a window of any width shows it; the provenance after
    p.append('<h2 id="runs">Runs</h2><table id="runs-table"><tr><th>run</th><th>report</th><th>started (UTC)</th>'
             "<th>commit</th><th>status</th><th>exit</th><th>passed</th><th>failed</th><th>error</th><th>skipped</th>"
             "<th>note</th><th>suite</th><th>target</th><th>profile</th><th>semantics</th><th>seed</th>"
             "<th>injected bugs</th><th>-k</th><th>host</th><th>build key</th></tr>")
    for r in h.runs:
        link = _report_link(r, out)
        name = f'<a href="{_e(link)}">{_e(r["id"])}</a>' if link else _e(r["id"])
        rep = f'<a class="report" href="{_e(link)}">report</a>' if link else "no report.html"
        p.append(f'<tr data-run="{_e(r["id"])}" data-status="{_e(r["status"])}" data-commit="{_e(commit_of(r))}">'
                 f"<td><code>{name}</code></td><td>{rep}</td>"
                 f'<td>{when(r["started"])}</td><td><code title="{_e(r.get("version"))}">{_e(commit_of(r))}</code></td>'
                 f'<td class="{_e(r["status"])}">{_e(r["status"])}</td><td>{_e(r.get("exit_code"))}</td>'
                 f'<td>{r.get("n_passed") or 0}</td><td>{r.get("n_failed") or 0}</td><td>{r.get("n_error") or 0}</td>'
                 f'<td>{r.get("n_skipped") or 0}</td><td>{_e(_note(r))}</td>'
                 f'<td>{_e(r.get("suite"))}</td><td>{_e(r.get("target"))}</td>'
                 f'<td class="prof" title="{_e(r.get("profile"))}">{_e(profiles_label(r.get("profile")))}</td>'
                 f'<td>{_e(r.get("semantics"))}</td><td>{_e(r.get("seed"))}</td><td>{_e(r.get("model_bugs"))}</td>'
                 f'<td><code>{_e(r.get("selection"))}</code></td><td>{_e(r.get("host"))}</td>'
                 f'<td class="prof">{_e(r.get("build_key"))}</td></tr>')
    p.append("</table>")
    return p


def _note(r: dict) -> str:
    """The run's note, with how many of its tests never ran when it stopped early."""
    ran = sum(r.get(k) or 0 for k in ("n_passed", "n_failed", "n_error", "n_skipped"))
    left = (r.get("collected") or 0) - ran
    early = f"{left} of {r['collected']} not run" if r["status"] != "complete" and left > 0 else ""
    return "; ".join(x for x in (str(r.get("note") or ""), early) if x)


_CHANGES = (("new", "new failure"), ("fixed", "fixed"), ("still", "still failing"), ("changed", "CAUSE CHANGED"))


def _changes_section(h: History) -> list[str]:
    """New failures, fixed, still failing and cause changed: the newest run of each series against the one before."""
    p: list[str] = []
    p.append('<h2 id="changes">New failures, fixed, still failing, cause changed (newest run of each series against '
             "the one before)</h2>")
    for key, rs in h.all_series().items():
        r = rs[-1]
        cmp = h.compare(r)
        prev = f"{cmp.previous['id']} ({commit_of(cmp.previous)})" if cmp.previous else "none"
        p.append(f"<h3 title=\"{_e(series_name(key))}\">{_e(series_name(key, compact=True))}: "
                 f"run <code>{_e(r['id'])}</code> ({_e(commit_of(r))}) "
                 f"against <code>{_e(prev)}</code></h3>")
        p.append(f'<table class="changes" data-run="{_e(r["id"])}"><tr><th>change</th><th>test</th><th>cluster</th>'
                 "<th>before</th><th>label</th></tr>")
        for cls, title in _CHANGES:
            for row in getattr(cmp, cls):
                test = str(row.get("test") or row["nodeid"])
                before = cmp.was.get(test) or {}
                cid = h.cluster(row.get("signature")) or ""
                was = f"{before.get('outcome', '-')} {h.cluster(before.get('signature')) or ''}" if before else "not run"
                lab = label_text(h.label(row.get("signature")))
                p.append(f'<tr data-change="{cls}" data-test="{_e(test)}">'
                         f'<td class="{cls}">{title}</td><td><code>{_e(_short(test))}</code></td>'
                         f'<td><a href="#c-{_e(cid)}"><code>{_e(cid)}</code></a></td><td><code>{_e(was)}</code></td>'
                         f"<td>{_e(lab)}</td></tr>")
        if not any(getattr(cmp, cls) for cls, _ in _CHANGES):
            p.append(f'<tr class="none"><td colspan="5">{_none_reason(r, cmp.previous)}</td></tr>')
        p.append(f"</table><p>{_e(cmp.counts)}</p>")
    return p


def _none_reason(run: dict, previous: dict | None) -> str:
    """What an empty change table means: nothing failed, or nothing to compare with."""
    failing = (run.get("n_failed") or 0) + (run.get("n_error") or 0)
    if previous is None and not failing:
        return "none: no failure, and no earlier comparable run"
    return "none: no failure, as before" if not failing else "none"


def _flaky_section(h: History) -> list[str]:
    """Tests whose outcome flips among the comparable runs of one build, with one failure cause."""
    p: list[str] = []
    p.append('<h2 id="flaky">Flaky tests (pass/fail flips among the last 20 comparable runs of one build, one failure '
             "cause)</h2>")
    p.append('<table id="flaky-table"><tr><th>test</th><th>outcomes, oldest first</th><th>flips</th><th>flip rate</th>'
             "<th>build</th><th>series</th></tr>")
    shown: set[tuple[str, str]] = set()
    for key, rs in h.all_series().items():
        for r in reversed(rs):  # the newest run of each build of the series
            for f in h.flaky(r):
                if (f.test, f.build) in shown:
                    continue
                shown.add((f.test, f.build))
                p.append(f'<tr data-test="{_e(f.test)}" data-rate="{f.rate:.4f}"><td><code>{_e(_short(f.test))}</code></td>'
                         f"<td><code>{f.sequence}</code></td><td>{f.flips}</td><td>{f.rate:.0%}</td>"
                         f"<td><code>{_e(f.build)}</code></td>"
                         f"<td title=\"{_e(series_name(key))}\">{_e(series_name(key, compact=True))}</td></tr>")
    if not shown:
        p.append('<tr class="none"><td colspan="6">none: no test flipped between comparable runs of one build</td></tr>')
    p.append("</table>")
    return p


def _rerun(r: dict[str, Any], k: str | None = None) -> str:
    """``nvdla-hil regress`` with the options of run ``r``'s series (``k``: one test instead of its ``-k``)."""
    cmd = ["nvdla-hil", "regress", "--target", str(r.get("target") or "model")]
    if r.get("suite"):
        cmd += ["--suite", str(r["suite"])]
    profiles = [x for x in str(r.get("profile") or "").split(",") if x]
    if len(profiles) == 1:
        cmd += ["--profile", profiles[0]]
    if r.get("semantics") and r["semantics"] != "rtl" and r.get("target") == "model":
        cmd += ["--model-semantics", str(r["semantics"])]
    for b in (x for x in str(r.get("model_bugs") or "").split(",") if x):
        cmd += ["--model-bug", b]
    sel = k if k is not None else r.get("selection")
    if sel:
        cmd += ["-k", str(sel)]
    return shlex.join(cmd)


def _test_id(test: str) -> str:
    """What ``-k`` selects one test by: the last part of its id in brackets, else its name."""
    name = _short(test)
    inner = name[name.index("[") + 1:-1] if "[" in name and name.endswith("]") else name
    return inner.rsplit("/", 1)[-1]


def _next_section(h: History) -> list[str]:  # long: one block of commands per kind of finding, each said in its own words
    """What to run next, per series: triage each new failure and cause change (a bug bundle), rerun
    it on the same build to see it fail again, rerun flaky tests, rerun an interrupted run."""
    p: list[str] = ['<h2 id="next">What to run next</h2>']
    items: list[str] = []
    for key, rs in h.all_series().items():
        r = rs[-1]
        cmp = h.compare(r)
        cmds: list[str] = []
        why: list[str] = []
        if r["status"] != "complete":
            why.append(f"the newest run was {r['status']}" + (f" ({r['note']})" if r.get("note") else ""))
            cmds.append(_rerun(r))
        bugs = "".join(f" --model-bug {shlex.quote(b)}" for b in str(r.get("model_bugs") or "").split(",") if b)
        first = "first run of its series: " if cmp.previous is None else ""
        for title, rows in ((first + "new failure", cmp.new), ("cause changed", cmp.changed)):
            by_cluster: dict[str, list[str]] = {}  # one triage and one rerun per failure cluster
            for row in rows:
                by_cluster.setdefault(h.cluster(row.get("signature")) or "", []).append(str(row.get("test") or row["nodeid"]))
            for cid, tests in list(by_cluster.items())[:5]:
                test = tests[0]
                why.append(f"{title}: {_short(test)}" + (f" and {len(tests) - 1} more of cluster {cid}" if len(tests) > 1 else
                                                         f" (cluster {cid})" if cid else ""))
                if r.get("run_dir"):
                    cmds.append(f"nvdla-hil triage {shlex.quote(_short(test))} --run {shlex.quote(str(r['run_dir']))}{bugs}")
                cmds.append(_rerun(r, _test_id(test)) + "   # fails again on this build?")
            if len(by_cluster) > 5:
                why.append(f"... and {len(by_cluster) - 5} more clusters of {title}s")
        for f in h.flaky(r)[:5]:
            why.append(f"flaky on {f.build}: {_short(f.test)} ({f.sequence})")
            cmds.append(f"for i in 1 2 3 4 5; do {_rerun(r, _test_id(f.test))}; done")
        if not cmds:
            continue
        items.append(f'<div class="next" data-series="{_e(series_name(key))}"><h3 title="{_e(series_name(key))}">'
                     f'{_e(series_name(key, compact=True))}: run '
                     f"<code>{_e(r['id'])}</code> ({_e(commit_of(r))})</h3><ul>"
                     + "".join(f"<li>{_e(w)}</li>" for w in why)
                     + f'</ul><pre class="next">{_e(chr(10).join(dict.fromkeys(cmds)))}</pre></div>')
    p += items or ["<p>nothing new: no new failure, cause change, flaky test or interrupted run in the newest run "
                   "of any series</p>"]
    return p


def _durations_section(h: History) -> list[str]:
    """Tests of the newest complete run of each series that took longer than the median before."""
    p: list[str] = []
    p.append('<h2 id="durations">Duration trends</h2>')
    svg = run_times_svg(h)
    if svg:
        p.append(f'<div class="plot">{svg}</div>')
    p.append('<table id="durations-table"><tr><th>test</th><th>run</th><th>median before</th><th>newest</th><th>ratio</th></tr>')
    done: set[tuple] = set()
    slower = 0
    for r in h.runs:  # the newest complete run of each series against the median of the runs before it
        if r["status"] != "complete" or comparable_key(r) in done:
            continue
        done.add(comparable_key(r))
        for t in h.durations(r)[:30]:
            p.append(f'<tr data-test="{_e(t.test)}" data-run="{_e(r["id"])}"><td><code>{_e(_short(t.test))}</code></td>'
                     f'<td><code>{_e(r["id"])}</code></td><td>{t.median_before:.2f} s</td>'
                     f"<td>{t.last:.2f} s</td><td>x{t.ratio:.1f}</td></tr>")
            slower += 1
    if not slower:
        p.append('<tr class="none"><td colspan="5">none: no test of a series\' newest complete run is slower than '
                 "its median before</td></tr>")
    p.append("</table>")
    return p


def _plain(s: Any) -> str:
    """Text for a matplotlib label: terminal-safe, and a ``$`` is not mathtext."""
    return term_safe(s).replace("$", r"\$")


def rtl_trend_svg(trend: Sequence[dict[str, Any]], runs: dict[str, dict[str, Any]]) -> str | None:
    """Line, branch and toggle percent of one configuration over its runs (oldest first, labelled
    by time and commit; a run that did not complete is a hollow marker)."""
    from ..analysis.rtl_coverage import KINDS

    if not trend:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 2.6))
    x = list(range(len(trend)))
    done = [i for i, e in enumerate(trend) if e.get("status") == "complete"]
    other = [i for i in x if i not in done]
    for k, style, mark in zip(KINDS, ("-", "--", ":"), ("o", "s", "^")):
        ys = [100.0 * e["totals"][k][0] / e["totals"][k][1] if e["totals"].get(k, (0, 0))[1] else float("nan") for e in trend]
        if all(y != y for y in ys):  # a kind no run measured
            continue
        line = ax.plot(x, ys, style, label=k)[0]
        ax.plot(done, [ys[i] for i in done], mark, color=line.get_color())
        ax.plot(other, [ys[i] for i in other], mark, mfc="none", color=line.get_color())
    labels = ["\n".join(_plain(part) for part in run_label(runs.get(e["run_id"]) or {"started": e["started"]}).split("\n"))
              for e in trend]
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=6)
    ax.set_xlim(-0.6, max(len(trend), 6) - 0.4)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of points hit", fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("RTL coverage per run (hollow: the run did not complete)", fontsize=8, loc="left")
    fig.tight_layout()
    return _svg(fig)


def _rtl_view_link(run: dict[str, Any], config: str, out: Path) -> str | None:
    """The link to a run's lcov HTML view of ``config``, relative to the dashboard, when its run
    folder still has it (its ``rtl-coverage/summary.json`` names it)."""
    d = run.get("run_dir")
    if not d:
        return None
    folder = Path(d) / "rtl-coverage"
    try:
        from ..analysis.rtl_coverage import load_summary

        view = (load_summary(folder / "summary.json")["configs"].get(config) or {}).get("html")
    except (ValueError, OSError, AttributeError, RecursionError):  # gone, unreadable or malformed: no link
        return None
    if not isinstance(view, str) or not view or view.startswith("/") or "\\" in view or ".." in view.split("/"):
        return None
    page = folder / view
    if not page.is_file():
        return None
    try:
        return rel_link(Path(os.path.relpath(page, out)).as_posix())
    except ValueError:  # another drive
        return page.resolve().as_uri()


def _rtl_coverage_section(h: History, out: Path, cov: RtlCoverageHistory) -> list[str]:
    """Per configuration: the newest run's per-unit table (linked to its HTML view while its
    folder has it), and the totals of each run, as a chart and a table."""
    from ..analysis.rtl_coverage_html import rtl_table_html
    from ..analysis.rtl_coverage import KINDS

    n = len(cov.trend)
    p: list[str] = [f'<h2 id="rtl-coverage">RTL coverage ({n} configuration{"" if n == 1 else "s"})</h2>']
    if cov.note:
        p.append(f"<p>{_e(cov.note)}</p>")
    if not cov.trend:
        p.append("<p>no run here measured RTL coverage (nvdla-hil regress --target verilator --rtl-coverage "
                 "line,toggle)</p>")
        return p
    runs = {r["id"]: r for r in h.runs}
    for i, (config, trend) in enumerate(sorted(cov.trend.items())):
        last = cov.latest[config]
        run = runs.get(last["run_id"]) or {"id": last["run_id"], "run_dir": last.get("run_dir")}
        report = _report_link(run, out)
        rid = f'<a href="{_e(report)}">{_e(last["run_id"])}</a>' if report else _e(last["run_id"])
        view = _rtl_view_link(run, config, out)
        p.append(f'<div class="rtlcov" data-config="{_e(config)}"><h3 id="rtlcov-{i}">configuration <code>{_e(config)}</code>: '
                 f'newest run <code>{rid}</code> ({when(last["started"])}, {_e(last.get("status"))})</h3>')
        p.append(f'<p><a class="rtlcov-view" href="{_e(view)}">annotated source (lcov HTML view)</a></p>' if view else
                 "<p>no annotated-source view: the run folder does not have it (any more)</p>")
        p.append(rtl_table_html(config, last["units"]))
        svg = rtl_trend_svg(trend, runs)
        if svg:
            p.append(f'<div class="plot">{svg}</div>')
        p.append(f'<table class="rtlcov-trend" data-config="{_e(config)}"><tr><th>run</th><th>started (UTC)</th>'
                 f"<th>commit</th><th>status</th>" + "".join(f"<th>{_e(k)}</th>" for k in KINDS) + "</tr>")
        for e in trend:
            r = runs.get(e["run_id"]) or {}
            cells = "".join(f'<td data-kind="{_e(k)}" data-hit="{hit}" data-total="{tot}">'
                            + (f"{hit}/{tot} {100.0 * hit / tot:.1f}%" if tot else "-") + "</td>"
                            for k, (hit, tot) in ((k, e["totals"].get(k, (0, 0))) for k in KINDS))
            p.append(f'<tr data-run="{_e(e["run_id"])}"><td><code>{_e(e["run_id"])}</code></td><td>{when(e["started"])}</td>'
                     f'<td><code>{_e(commit_of(r)) if r else "?"}</code></td><td class="{_e(e.get("status"))}">'
                     f'{_e(e.get("status"))}</td>{cells}</tr>')
        p.append("</table>")
        p += _rtl_union(config, cov)
        p.append("</div>")
    return p


def _rtl_union(config: str, cov: RtlCoverageHistory) -> list[str]:
    """What the runs above proved together: the union of their points (per unit), and each run's
    share (the design points it hit, and those no other run hit)."""
    from ..analysis.rtl_coverage_html import rtl_table_html

    union = cov.union.get(config)
    if not union:
        why = "; ".join(cov.union_notes[:3]) or "no run folder holds its per-test files"
        return [f'<p class="rtlcov-union-none">no union over the runs: {_e(why)}</p>']
    runs = union["runs"]
    p = [f'<h4 class="rtlcov-union" data-config="{_e(config)}">union of {len(runs)} run{"" if len(runs) == 1 else "s"} '
         f"(the points any of them hit; from the per-test files their folders hold)</h4>",
         rtl_table_html(f"{config} (union)", union["units"]),
         f'<table class="rtlcov-share" data-config="{_e(config)}"><tr><th>run</th><th>design points hit</th>'
         "<th>hit by no other run</th></tr>"]
    for rid in runs:
        one = union["share"].get(rid, {"hit": 0, "only": 0})
        p.append(f'<tr data-run="{_e(rid)}"><td><code>{_e(rid)}</code></td><td>{one["hit"]}</td><td>{one["only"]}</td></tr>')
    p.append("</table>")
    if cov.union_notes:
        p.append(f'<p class="rtlcov-union-left-out">left out: {_e("; ".join(cov.union_notes[:5]))}'
                 + (f" (and {len(cov.union_notes) - 5} more)" if len(cov.union_notes) > 5 else "") + "</p>")
    return p


def _clusters_section(h: History) -> list[str]:
    """Every failure cluster with its signature, counts, label and an example reason."""
    p: list[str] = []
    every = h.clusters([r["id"] for r in h.runs])
    p.append(f'<h2 id="clusters">Failure clusters ({len(every)})</h2><table id="clusters-table"><tr><th>cluster</th>'
             "<th>signature</th><th>failures</th><th>tests</th><th>runs</th><th>label</th><th>example</th></tr>")
    for c in every:
        given: dict[str, Any] | None = c.get("label")
        labhtml = ""
        if given:
            url = http_link(given.get("bug"))  # only http(s) is a link: a stored javascript: link stays text
            bug = (f' <a class="bug" href="{_e(url)}" rel="noopener noreferrer">{_e(given["bug"])}</a>' if url else
                   f' <span class="bug">{_e(given["bug"])}</span>' if given.get("bug") else "")
            labhtml = f'<span class="label">{_e(given.get("text"))}</span>{bug}'
        p.append(f'<tr id="c-{_e(c["signature"])}" data-cluster="{_e(c["signature"])}" data-count="{c["count"]}">'
                 f'<td><code>{_e(c["signature"])}</code></td><td>{_e(c["key"])}</td><td>{c["count"]}</td>'
                 f'<td>{len(c["tests"])}</td><td>{len(c["runs"])}</td><td>{labhtml}</td>'
                 f'<td>{_e((c["reasons"] or [""])[0][:140])}</td></tr>')
    p.append("</table>")
    return p


def _grid(h: History, out: Path, runs: Sequence[dict[str, Any]]) -> str:
    cols = sorted(runs, key=lambda r: r["started"])
    tests: dict[str, int] = {}
    for r in cols:
        for key, row in h.tests.get(r["id"], {}).items():
            tests[key] = tests.get(key, 0) + (1 if is_fail(row["outcome"]) else 0)
    order = sorted(tests, key=lambda k: (-tests[k], k))
    head = []
    for r in cols:
        link = _report_link(r, out)
        label = night(r["started"])[5:]
        cell = f'<a href="{_e(link)}">{label}</a>' if link else label
        head.append(f'<th title="{_e(r["id"])} ({_e(r["status"])})" data-run="{_e(r["id"])}" '
                    f'style="writing-mode:vertical-rl;font-size:10px">{cell}</th>')
    rows = [f'<h2 id="grid">Tests x runs ({len(order)} tests, {len(cols)} runs, oldest first; failing tests first)</h2>',
            '<table class="grid" id="grid-table"><tr><th></th>' + "".join(head) + "</tr>"]
    for key in order:
        cells = "".join(_test_cell(h, key, h.tests.get(r["id"], {}).get(key), r) for r in cols)
        rows.append(f'<tr data-test="{_e(key)}"><td class="name">{_e(_short(key))}</td>{cells}</tr>')
    rows.append("</table>")
    return "\n".join(rows)


def write_dashboard(h: History, out: str | Path, grid_runs: int = 30, rtl_coverage: RtlCoverageHistory | None = None) -> Path:
    """Write ``<out>/index.html``; returns its path (``rtl_coverage``: as :func:`render_dashboard`)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    page = out / "index.html"
    page.write_text(render_dashboard(h, out, grid_runs, rtl_coverage), encoding="utf-8")
    return page
