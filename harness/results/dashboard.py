"""``nvdla-hil dashboard``: a static HTML site of the results database.

One ``index.html`` that opens from disk or from any web server: no script or style from outside,
plots inline as SVG (matplotlib). Sections: pass rate per night per target and profile (plot and
table), the runs (status, exit code, counts; each links to its run directory's ``report.html``),
the newest run of each comparable series against the run before it (new failures, fixed, still
failing), flaky tests with flip rates, duration trends (wall time per run, tests that slowed
down), failure clusters with their labels, and a test x run grid (one cell per test and run,
coloured by outcome, its signature and label in the tooltip).
"""

from __future__ import annotations

import html
import io
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .analysis import History, comparable_key, is_fail, night, when
from .labels import label_text
from .textsafe import http_link, rel_link, term_safe

__all__ = ["render_dashboard", "write_dashboard"]

_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px} h2{font-size:15px;margin-top:26px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:4px 0} td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
th{background:#eee;text-align:left} code{font:12px monospace}
.complete{color:#080} .interrupted,.running{color:#b60;font-weight:bold}
.new{color:#b00;font-weight:bold} .fixed{color:#080} .still{color:#a50}
table.grid td{width:14px;height:14px;padding:0;border:1px solid #fff}
table.grid td.name{width:auto;padding:0 6px;font:11px monospace;white-space:nowrap;border:none}
td.p{background:#3a3} td.f{background:#d22} td.e{background:#e80} td.s{background:#ccc} td.n{background:#f4f4f4}
td.i{background:repeating-linear-gradient(45deg,#e80 0 3px,#fff 3px 6px)}
.label{background:#ffd;padding:0 4px;border:1px solid #dd8} svg{max-width:100%;height:auto}
td.prof{max-width:220px;word-break:break-word;font-size:11px}
"""


def _e(s: Any) -> str:
    return html.escape(str(s if s is not None else ""))


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
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


def pass_rate_svg(h: History) -> str | None:
    """Pass rate (passed / tests that ran) per night, one line per (target, profile)."""
    rates = h.pass_rates()
    if not rates:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    nights = sorted({n for pts in rates.values() for n, _, _ in pts})
    pos = {n: i for i, n in enumerate(nights)}
    for (target, profile), pts in rates.items():
        ax.plot([pos[n] for n, _, _ in pts], [100 * r for _, r, _ in pts], "o-", label=term_safe(f"{target} / {profile}"))
    ax.set_xticks(range(len(nights)))
    ax.set_xticklabels(nights, rotation=30, fontsize=7)
    ax.set_ylim(-5, 105)
    ax.set_ylabel("pass rate %")
    ax.set_title("pass rate per night per target and profile", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    return _svg(fig)


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
                label=term_safe(" / ".join(str(k) for k in key[:3] if k)))
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


def render_dashboard(h: History, out: str | Path, grid_runs: int = 30) -> str:
    out = Path(out).resolve()
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    p: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    f"<title>nvdla-hil dashboard</title><style>{_CSS}</style></head><body>",
                    f"<h1>nvdla-hil regressions: {len(h.runs)} runs</h1><p>generated {now}</p>"]
    if not h.runs:
        p.append("<p>no runs in the results database yet</p></body></html>")
        return "\n".join(p)
    p += _pass_rate_section(h)
    p += _runs_section(h, out)
    p += _changes_section(h)
    p += _flaky_section(h)
    p += _durations_section(h)
    p += _clusters_section(h)
    p.append(_grid(h, out, h.runs[:grid_runs]))
    p.append("</body></html>")
    return "\n".join(p)


def _pass_rate_section(h: History) -> list[str]:
    """Pass rate per night, target and profile: the plot and its table."""
    p: list[str] = []
    p.append('<h2 id="passrate">Pass rate per night, target and profile</h2>')
    svg = pass_rate_svg(h)
    if svg:
        p.append(f'<div class="plot" id="passrate-plot">{svg}</div>')
    p.append('<table id="passrate-table"><tr><th>target</th><th>profile</th><th>night</th><th>pass rate</th><th>tests run</th></tr>')
    for (target, profile), pts in h.pass_rates().items():
        for n, rate, total in pts:
            p.append(f'<tr data-target="{_e(target)}" data-profile="{_e(profile)}" data-night="{n}"><td>{_e(target)}</td>'
                     f'<td class="prof">{_e(profile)}</td><td>{n}</td><td data-rate="{rate:.4f}">{100 * rate:.1f}%</td>'
                     f"<td>{total}</td></tr>")
    p.append("</table>")
    return p


def _runs_section(h: History, out: Path) -> list[str]:
    """One row per run, linked to its report.html."""
    p: list[str] = []
    p.append('<h2 id="runs">Runs</h2><table id="runs-table"><tr><th>run</th><th>started (UTC)</th><th>target</th>'
             "<th>profile</th><th>status</th><th>exit</th><th>passed</th><th>failed</th><th>error</th><th>skipped</th>"
             "<th>injected bugs</th><th>note</th></tr>")
    for r in h.runs:
        link = _report_link(r, out)
        name = f'<a href="{_e(link)}">{_e(r["id"])}</a>' if link else _e(r["id"])
        p.append(f'<tr data-run="{_e(r["id"])}" data-status="{_e(r["status"])}"><td><code>{name}</code></td>'
                 f'<td>{when(r["started"])}</td><td>{_e(r.get("target"))}</td><td class="prof">{_e(r.get("profile"))}</td>'
                 f'<td class="{_e(r["status"])}">{_e(r["status"])}</td><td>{_e(r.get("exit_code"))}</td>'
                 f'<td>{r.get("n_passed") or 0}</td><td>{r.get("n_failed") or 0}</td><td>{r.get("n_error") or 0}</td>'
                 f'<td>{r.get("n_skipped") or 0}</td><td>{_e(r.get("model_bugs"))}</td><td>{_e(r.get("note"))}</td></tr>')
    p.append("</table>")
    return p


def _changes_section(h: History) -> list[str]:
    """New failures, fixed and still failing: the newest run of each comparable series against the one before."""
    p: list[str] = []
    p.append('<h2 id="changes">New failures, fixed, still failing (newest run of each series against the one before)</h2>')
    seen: set[tuple] = set()
    for r in h.runs:
        key = comparable_key(r)
        if key in seen:
            continue
        seen.add(key)
        cmp = h.compare(r)
        prev = cmp.previous["id"] if cmp.previous else "none"
        p.append(f'<h3>{_e(r.get("target"))} / {_e(r.get("profile"))} / {_e(r.get("suite"))}: run <code>{_e(r["id"])}</code> '
                 f"against <code>{_e(prev)}</code></h3>")
        p.append(f'<table class="changes" data-run="{_e(r["id"])}"><tr><th>change</th><th>test</th><th>cluster</th><th>label</th></tr>')
        for cls, title, rows in (("new", "new failure", cmp.new), ("fixed", "fixed", cmp.fixed), ("still", "still failing", cmp.still)):
            for row in rows:
                cid = h.cluster(row.get("signature")) or ""
                test = row.get("test") or row["nodeid"]
                lab = label_text(h.label(row.get("signature")))
                p.append(f'<tr data-change="{cls}" data-test="{_e(test)}">'
                         f'<td class="{cls}">{title}</td><td><code>{_e(_short(test))}</code></td>'
                         f'<td><a href="#c-{_e(cid)}"><code>{_e(cid)}</code></a></td><td>{_e(lab)}</td></tr>')
        p.append(f"</table><p>{len(cmp.new)} new, {len(cmp.fixed)} fixed, {len(cmp.still)} still failing</p>")
    return p


def _flaky_section(h: History) -> list[str]:
    """Tests whose outcome flips in the last comparable runs."""
    p: list[str] = []
    p.append('<h2 id="flaky">Flaky tests (pass/fail flips in the last 20 comparable runs)</h2>')
    p.append('<table id="flaky-table"><tr><th>test</th><th>outcomes, oldest first</th><th>flips</th><th>flip rate</th></tr>')
    shown: set[str] = set()
    for r in h.runs:
        for f in h.flaky(r):
            if f.test in shown:
                continue
            shown.add(f.test)
            p.append(f'<tr data-test="{_e(f.test)}" data-rate="{f.rate:.4f}"><td><code>{_e(_short(f.test))}</code></td>'
                     f"<td><code>{f.sequence}</code></td><td>{f.flips}</td><td>{f.rate:.0%}</td></tr>")
    p.append("</table>")
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
    for r in h.runs:  # the newest complete run of each series against the median of the runs before it
        if r["status"] != "complete" or comparable_key(r) in done:
            continue
        done.add(comparable_key(r))
        for t in h.durations(r)[:30]:
            p.append(f'<tr data-test="{_e(t.test)}" data-run="{_e(r["id"])}"><td><code>{_e(_short(t.test))}</code></td>'
                     f'<td><code>{_e(r["id"])}</code></td><td>{t.median_before:.2f} s</td>'
                     f"<td>{t.last:.2f} s</td><td>x{t.ratio:.1f}</td></tr>")
    p.append("</table>")
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


def write_dashboard(h: History, out: str | Path, grid_runs: int = 30) -> Path:
    """Write ``<out>/index.html``; returns its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    page = out / "index.html"
    page.write_text(render_dashboard(h, out, grid_runs), encoding="utf-8")
    return page
