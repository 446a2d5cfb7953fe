"""The RTL coverage section of a run's report.html (and the per-unit table the dashboard shows):
read from ``<run>/rtl-coverage/summary.json`` (:func:`~.rtl_coverage.load_summary`), every
value checked before it is drawn, every string escaped; a malformed summary is said in the
section and never breaks the report."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results.textsafe import rel_link

__all__ = ["rtl_coverage_html", "rtl_coverage_units", "rtl_table_html"]


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


#: the largest count a coverage summary may hold (harness/results/db.py stores them as 64-bit integers)
MAX_POINTS = (1 << 62) - 1
#: ranked tests listed per configuration
MAX_RANKED = 500


def _count(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_POINTS:
        raise ValueError(f"{what}: {v!r} is not a count")
    return v


def _seconds(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1e9:
        raise ValueError(f"{what}: {v!r} is not a number of seconds")
    return float(v)


def rtl_coverage_units(one: Any) -> dict[str, dict[str, tuple[int, int]]]:
    """A configuration's per-unit table from an RTL coverage summary (``summary["configs"][name]``
    of harness/analysis/rtl_coverage.py), checked: unit -> kind -> (hit, total) for each kind of
    ``KINDS`` ((0, 0) when the summary has none), ``total`` last (summed over the units when the
    summary lacks it). A ValueError says what is malformed."""
    from .rtl_coverage import KINDS

    units = one.get("units") if isinstance(one, dict) else None
    if not isinstance(units, dict):
        raise ValueError("no per-unit table ('units' is not an object)")
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for unit, kinds in units.items():
        if not isinstance(unit, str) or not unit or len(unit) > 200:
            raise ValueError(f"unit {unit!r}: not a name of 1 to 200 characters")
        if not isinstance(kinds, dict):
            raise ValueError(f"unit {unit!r}: not an object of kinds")
        row: dict[str, tuple[int, int]] = {}
        for k in KINDS:
            pair = kinds.get(k, [0, 0])
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise ValueError(f"unit {unit!r}, {k}: not [hit, total]")
            hit, total = _count(pair[0], f"unit {unit!r}, {k} hit"), _count(pair[1], f"unit {unit!r}, {k} total")
            if hit > total:
                raise ValueError(f"unit {unit!r}, {k}: {hit} points hit of {total}")
            row[k] = (hit, total)
        out[unit] = row
    given = out.pop("total", None)
    out["total"] = given or {k: (sum(r[k][0] for r in out.values()), sum(r[k][1] for r in out.values())) for k in KINDS}
    return out


def _pct(hit: int, total: int) -> str:
    return f"{100.0 * hit / total:.1f}%" if total else "-"


def rtl_table_html(name: str, units: Mapping[str, Mapping[str, Sequence[int]]]) -> str:
    """The per-unit table of configuration ``name`` (unit -> kind -> (hit, total), in the order
    given): a row per unit (upper case; ``total`` as it is), hit/total and percent of each kind."""
    from .rtl_coverage import KINDS

    rows = [f'<table class="rtlcov" data-config="{_e(name)}"><tr><th>unit</th>'
            + "".join(f"<th>{_e(k)}</th>" for k in KINDS) + "</tr>"]
    for unit, kinds in units.items():
        cells = "".join(f'<td data-kind="{_e(k)}" data-hit="{h}" data-total="{t}">'
                        + (f'{h}/{t} <span class="pct">{_pct(h, t)}</span>' if t else "-") + "</td>"
                        for k, (h, t) in ((k, tuple(kinds.get(k, (0, 0)))) for k in KINDS))
        cls = ' class="total"' if unit == "total" else ""
        rows.append(f'<tr data-unit="{_e(unit)}"{cls}><td class="unit">{_e(unit if unit == "total" else unit.upper())}</td>'
                    f"{cells}</tr>")
    rows.append("</table>")
    return "".join(rows)


def _rtl_view_html(run: Path, one: dict[str, Any]) -> str:
    """The link to lcov's HTML view (relative to the run folder), or why there is none."""
    view = one.get("html")
    if view is None:
        note = one.get("html_note")
        return f'<p class="rtlcov-html">no annotated-source HTML view: {_e(note if note else "none was written")}</p>'
    if not isinstance(view, str) or not view or view.startswith("/") or "\\" in view or ".." in view.split("/"):
        raise ValueError(f"html: {view!r} is not a path inside rtl-coverage/")
    where = run / "rtl-coverage" / view
    missing = "" if where.is_file() else " (not in this run folder: it was copied without it)"
    return (f'<p class="rtlcov-html">annotated source (lcov): <a class="rtlcov-view" '
            f'href="{_e(rel_link("rtl-coverage/" + view))}">{_e("rtl-coverage/" + view)}</a>{_e(missing)}</p>')


def _rtl_rank_html(one: dict[str, Any]) -> str:
    """One line: how few tests keep every point the run hit, in how much of its time; the tests."""
    rank = one.get("rank")
    if not isinstance(rank, dict):
        raise ValueError("no ranking ('rank' is not an object)")
    keep, gained = rank.get("tests"), rank.get("gained")
    if not isinstance(keep, list) or not all(isinstance(t, str) for t in keep):
        raise ValueError("rank.tests: not a list of test names")
    if not isinstance(gained, list) or len(gained) != len(keep):
        raise ValueError("rank.gained: not one count per ranked test")
    gained = [_count(g, "rank.gained") for g in gained]
    tests = _count(one.get("tests"), "tests")
    secs, secs_all = _seconds(rank.get("seconds"), "rank.seconds"), _seconds(rank.get("seconds_all"), "rank.seconds_all")
    timed = _count(rank.get("timed", len(keep)), "rank.timed")
    untimed = f"; {len(keep) - timed} of them without a time" if timed < len(keep) else ""
    items = "".join(f"<li><code>{_e(t)}</code> +{g} points</li>" for t, g in zip(keep[:MAX_RANKED], gained, strict=False))
    more = f"<li>... and {len(keep) - MAX_RANKED} more</li>" if len(keep) > MAX_RANKED else ""
    return (f'<p class="rtlcov-rank" data-keep="{len(keep)}" data-tests="{tests}">{len(keep)} of {tests} tests keep every '
            f"point this run hit ({secs:.1f} s of {secs_all:.1f} s){_e(untimed)}</p>"
            + (f"<details><summary>those tests, in the order picked, with the points each adds</summary><ol>{items}{more}"
               "</ol></details>" if keep else ""))


def _rtl_config_html(run: Path, i: int, name: str, one: Any) -> list[str]:
    units = rtl_coverage_units(one)  # a configuration without its table is said to be malformed
    facts = []
    for key, what in (("tests", "tests"), ("points", "points"), ("files", "per-test files")):
        v = one.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            facts.append(f"{v} {what}")
    build = one.get("build")
    h = [f'<h3 id="rtlcov-{i}">configuration <code>{_e(name)}</code></h3>',
         f'<p class="rtlcov-facts">{_e(", ".join(facts))}' + (f"; build <code>{_e(build)}</code>" if build else "") + "</p>",
         rtl_table_html(name, units)]
    for what, part in (("HTML view", lambda: _rtl_view_html(run, one)), ("ranking", lambda: _rtl_rank_html(one))):
        try:
            h.append(part())
        except ValueError as e:
            h.append(f'<p class="rtlcov-bad">{what}: malformed summary: {_e(e)}</p>')
    return h


def rtl_coverage_html(run: Path) -> list[str]:
    """The "RTL coverage" section of a run's report: per configuration measured, the per-unit
    table (hit/total and percent of each kind of point), the link to lcov's annotated-source view
    and the ranking line, from ``<run>/rtl-coverage/summary.json`` (nothing when there is none);
    a summary that cannot be read, or a malformed part of it, is said in the section."""
    path = run / "rtl-coverage" / "summary.json"
    if not (path.exists() or path.is_symlink()):
        return []
    h = ['<h2 id="rtl-coverage">RTL coverage</h2>']
    try:
        from .rtl_coverage import load_summary

        summary = load_summary(path)
    except (ValueError, OSError, RecursionError) as e:  # InputError is a ValueError
        h.append(f'<p class="rtlcov-bad" id="rtlcov-bad">rtl-coverage/summary.json cannot be read: {_e(e)}</p>')
        return h
    if not summary["configs"]:
        h.append("<p>no configuration was measured</p>")
    for i, (name, one) in enumerate(summary["configs"].items()):
        try:
            h += _rtl_config_html(run, i, str(name), one)
        except Exception as e:  # noqa: BLE001 - a malformed summary never breaks the report
            h.append(f'<p class="rtlcov-bad">configuration <code>{_e(name)}</code>: malformed summary: {_e(e)}</p>')
    return h
