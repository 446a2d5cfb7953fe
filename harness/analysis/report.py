"""One HTML page per regression run (``results/<run-id>/report.html``), and the JSON sidecar
through which a failing test hands its element-wise diagnosis to that page.

The page opens from disk (no server, no external URL: pictures are embedded as ``data:`` PNGs,
links are relative to the run directory). It shows the counts (passed, failed, error, skipped
as *not modelled* vs *lacks unit*), one row per test (target, profile, outcome, time, the real
failure reason: the first failing check line, i.e. the first line holding ``MISMATCH`` or
``differ``), vacuous checks flagged, and links to each test's register log and triage bundle.
Pictures, where looking beats reading: a mismatch heat map per channel (h x w) of every
failing region, the LUT curve of LUT layers (programmed LE/LO tables, their regions, hit
counts), and a histogram of FP16 errors against seed 001's thresholds.

Diagnosis sidecar (``logs/<test>.diag.json``, :data:`DIAG_FORMAT`), written by whoever fails
the test (:func:`write_diagnosis`)::

    {"format": "nvdla-hil-diag/1", "test": nodeid, "trace": name, "profile": "nv_small",
     "summary": "model vs target ...",             # TraceDiagnosis.summary()
     "checks": ["sync_id_0: crc ... MISMATCH"],     # optional: every check line of the run
     "regions": [{"line": 101, "address": int, "size": int, "n_bytes": int, "n_elements": int,
                  "n_outside": int, "summary": str,
                  "cube": {"unit", "base", "width", "height", "channels", "line_stride",
                           "surface_stride", "bpe", "atom", "port"} | null,
                  "coords": [[c, h, w], ...], "expected": [...], "actual": [...],   # capped
                  "per_channel": {"c": n}, "per_line": {"h": n}}],
     "suspects": [{"register", "programmed", "tried", "remaining_bytes", "total_bytes",
                   "explains", "text"}],
     "lut": {"unit", "config": {LutConfig fields}, "le": [65], "lo": [257],
             "stats": {"lut_le_hit": n, ...}} | absent,
     "fp16": {"rule", "expected": [bits], "actual": [bits], "params": {...}} | absent}
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..results.textsafe import http_link, rel_link
from .rtl_coverage_html import rtl_coverage_html
from .junit import (INTERRUPTED, SELF_CONSISTENCY, VACUOUS, TestRow, error_reason, failure_reason, find_test_file,
                    oracle_counts, parse_junit, read_regular, read_run_json, safe_name)
from ...semantics import Semantics

__all__ = ["DIAG_FORMAT", "MAX_ELEMENTS", "TestRow", "diag_path", "diagnosis_dict", "write_diagnosis",
           "read_diagnosis", "lut_info", "parse_junit", "oracle_counts", "SELF_CONSISTENCY", "failure_reason",
           "error_reason", "heatmap_png", "lut_png",
           "fp16_errors", "fp16_histogram_png", "render_report", "write_report", "safe_name"]

DIAG_FORMAT = "nvdla-hil-diag/1"
MAX_ELEMENTS = 20000  # differing elements kept per region in a sidecar
MAX_DIAG_BYTES = 64 << 20  # a bigger sidecar is not read


def diag_path(log_dir: str | Path, nodeid: str) -> Path:
    """``<log_dir>/<test>.diag.json``, next to the test's register log."""
    return Path(log_dir) / f"{safe_name(nodeid)}.diag.json"


# ---- sidecar -------------------------------------------------------------------------------------


def _region_dict(line: int, d: Any) -> dict[str, Any]:
    cube = None if d.cube is None else {k: (v if not isinstance(v, np.integer) else int(v))
                                        for k, v in dataclasses.asdict(d.cube).items()}
    n = min(int(d.n_elements), MAX_ELEMENTS)
    return {"line": int(line), "address": int(d.address), "size": int(d.size), "n_bytes": int(d.n_bytes),
            "n_elements": int(d.n_elements), "n_outside": int(d.n_outside), "summary": d.summary(), "cube": cube,
            "coords": np.asarray(d.coords[:n]).astype(int).tolist(),
            "expected": np.asarray(d.expected[:n]).astype(int).tolist(),
            "actual": np.asarray(d.actual[:n]).astype(int).tolist(),
            "per_channel": {str(k): int(v) for k, v in d.per_channel.items()},
            "per_line": {str(k): int(v) for k, v in d.per_line.items()}}


def diagnosis_dict(diag: Any = None, *, test: str = "", result: Any = None, lut: dict[str, Any] | None = None,
                   fp16: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sidecar content of a :class:`~nvdla_hil.harness.analysis.triage.TraceDiagnosis` (and, when
    given, the run's check lines from a TraceResult, LUT data from :func:`lut_info`, FP16 data)."""
    out: dict[str, Any] = {"format": DIAG_FORMAT, "test": test}
    if diag is not None:
        out.update(trace=diag.trace, profile=diag.profile, summary=diag.summary(), note=diag.note,
                   searched=int(diag.searched), seconds=round(float(diag.seconds), 3),
                   regions=[_region_dict(ln, d) for ln, d in diag.regions],
                   suspects=[{"register": s.register, "programmed": int(s.programmed), "tried": int(s.tried),
                              "remaining_bytes": int(s.remaining_bytes), "total_bytes": int(s.total_bytes),
                              "explains": bool(s.explains), "text": s.describe()} for s in diag.suspects])
    if result is not None:
        out["status"] = result.status
        out["checks"] = [c.describe() for c in result.checks]
    if lut is not None:
        out["lut"] = lut
    if fp16 is not None:
        out["fp16"] = {k: (np.asarray(v).astype(int).tolist() if k in ("expected", "actual") else v)
                       for k, v in fp16.items()}
    return out


def write_diagnosis(path: str | Path, diag: Any = None, **kw: Any) -> Path:
    """Write the sidecar of ``diag`` (a TraceDiagnosis; keywords as :func:`diagnosis_dict`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(diagnosis_dict(diag, **kw), indent=1) + "\n", encoding="utf-8")
    return path


def read_diagnosis(path: str | Path) -> dict[str, Any] | None:
    """A sidecar's content, or None when missing, not a regular file, too big or not a sidecar of
    this format."""
    try:
        doc = json.loads(read_regular(path, MAX_DIAG_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # InputError is a ValueError
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == DIAG_FORMAT else None


def lut_info(unit: str, config: Any, le: Any, lo: Any, stats: dict[str, int] | None = None) -> dict[str, Any]:
    """The ``lut`` entry of a sidecar from a LutConfig and the two tables."""
    cfg = dataclasses.asdict(config) if dataclasses.is_dataclass(config) and not isinstance(config, type) else dict(config)
    return {"unit": unit, "config": cfg, "le": np.asarray(le).astype(int).tolist(),
            "lo": np.asarray(lo).astype(int).tolist(), "stats": dict(stats or {})}


# ---- pictures -----------------------------------------------------------------------------------


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def heat_mosaic(region: dict[str, Any], max_channels: int = 16) -> tuple[np.ndarray, list[tuple[int, int, str]], str] | None:
    """The differing channels of ``region`` (a sidecar region, or RegionDiff through
    :func:`_region_dict`) as one image: an h x w tile of |actual - expected| per channel, up to
    four tiles a row, NaN between tiles (a label row above each, one column between); with each
    tile's (row, column) of its top-left element and its label, and the figure's title."""
    cube = region.get("cube")
    coords = np.asarray(region.get("coords") or [], dtype=np.int64).reshape(-1, 3)
    if cube is None or not coords.size:
        return None
    err = np.abs(np.asarray(region["actual"], dtype=np.int64) - np.asarray(region["expected"], dtype=np.int64))
    chans = np.unique(coords[:, 0])
    shown = chans[:max_channels]
    h, w = int(cube["height"]), int(cube["width"])
    ncol = min(len(shown), 4)
    nrow = -(-len(shown) // ncol)
    label_rows = max(1, -(-h // 6))  # room for a tile's label, in element rows
    mosaic = np.full((nrow * (h + label_rows), ncol * (w + 1) - 1), np.nan)
    tiles = []
    for k, c in enumerate(shown):
        y, x = (k // ncol) * (h + label_rows) + label_rows, (k % ncol) * (w + 1)
        sel = coords[:, 0] == c
        tile = np.zeros((h, w))
        tile[coords[sel, 1], coords[sel, 2]] = err[sel]
        mosaic[y:y + h, x:x + w] = tile
        tiles.append((y, x, f"c={int(c)}: {int(sel.sum())} differ"))
    more = f" (first {len(shown)} of {len(chans)} channels)" if len(chans) > len(shown) else ""
    title = f"{cube['unit']} output {cube['channels']}x{h}x{w}: |actual - expected| per channel{more}"
    return mosaic, tiles, title


def heatmap_png(region: dict[str, Any], max_channels: int = 16) -> str | None:
    """A grid of h x w heat maps, one per differing channel (:func:`heat_mosaic`), drawn as one
    image with each tile labelled (data URI). One image rather than an axes per channel: a failing
    run's report draws one per failing test, and sixteen axes with ticks cost about ten times as much."""
    m = heat_mosaic(region, max_channels)
    if m is None:
        return None
    mosaic, tiles, title = m
    plt = _plt()
    ncol = min(len(tiles), 4)
    nrow = -(-len(tiles) // ncol)
    fig, ax = plt.subplots(figsize=(2.6 * ncol + 0.8, 2.3 * nrow + 0.4))
    cmap = plt.get_cmap("magma").with_extremes(bad="white")
    im = ax.imshow(mosaic, cmap=cmap, vmin=0, vmax=max(float(np.nanmax(mosaic)), 1.0),
                   interpolation="nearest", aspect="auto")
    for y, x, label in tiles:
        ax.text(x - 0.5, y - 0.6, label, fontsize=7, va="bottom", ha="left")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("w (left to right in each tile)", fontsize=7)
    ax.set_ylabel("h (top to bottom in each tile)", fontsize=7)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _png(fig)


def _lut_x(cfg: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input positions of the LE and LO entries, and an x range covering both tables."""
    i_le = np.arange(65)
    if cfg.get("le_function") == "exponent":
        le_x = cfg["le_start"] + np.where(i_le + cfg.get("le_index_offset", 0) < 62,
                                          2.0 ** (i_le + cfg.get("le_index_offset", 0)), np.inf)
    else:
        le_x = cfg["le_start"] + i_le * 2.0 ** cfg.get("le_index_select", 0)
    lo_x = cfg["lo_start"] + np.arange(257) * 2.0 ** cfg.get("lo_index_select", 0)
    fin = np.concatenate([le_x[np.isfinite(le_x)][:40], lo_x, [cfg["le_end"], cfg["lo_end"]]])
    lo, hi = float(fin.min()), float(fin.max())
    pad = 0.1 * max(hi - lo, 1.0)
    dense = np.linspace(min(cfg["lo_start"], cfg["le_start"]) - 64, cfg["lo_end"] + 64, 600)
    xs = np.unique(np.concatenate([np.linspace(lo - pad, hi + pad, 400), dense, fin]))
    return le_x, lo_x, xs


def lut_png(lut: dict[str, Any]) -> str:
    """The programmed tables (entries at their input positions), the curve the unit computes
    from them (SDP: the reference model's interpolation), the LE/LO regions and the hit counts."""
    plt = _plt()
    cfg = lut["config"]
    le, lo = np.asarray(lut["le"], dtype=np.int64), np.asarray(lut["lo"], dtype=np.int64)
    le_x, lo_x, xs = _lut_x(cfg)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [3, 1]})
    ax.axvspan(cfg["le_start"], cfg["le_end"], color="tab:blue", alpha=0.08, label="LE region")
    ax.axvspan(cfg["lo_start"], cfg["lo_end"], color="tab:orange", alpha=0.08, label="LO region")
    ok = np.isfinite(le_x)
    ax.plot(le_x[ok], le[ok], "o", ms=3, color="tab:blue", label="LE entries (65)")
    ax.plot(lo_x, lo, ".", ms=2, color="tab:orange", label="LO entries (257)")
    if lut.get("unit") == "SDP":
        try:
            from ...drivers.precision import LutConfig
            from ..refmodel.lut import sdp_lut

            y, *_ = sdp_lut(np.round(xs).astype(np.int64), LutConfig(**cfg), le, lo)
            ax.plot(xs, y, "-", lw=1, color="k", label="unit output (reference model)")
        except Exception:  # noqa: BLE001 - a picture never fails the report
            pass
    else:
        order = np.argsort(np.concatenate([le_x[ok], lo_x]))
        ax.plot(np.concatenate([le_x[ok], lo_x])[order], np.concatenate([le[ok], lo])[order], "-", lw=0.6,
                color="gray", label="tables, interpolated")
    ax.set_xlim(xs[0], xs[-1])
    if cfg.get("le_function") == "exponent":  # entries 2^i apart: a symmetric log axis shows them all
        ax.set_xscale("symlog", linthresh=max(1.0, abs(cfg["lo_end"] - cfg["lo_start"]) / 4))
    tab = np.concatenate([le, lo])
    span = max(int(tab.max() - tab.min()), 1)
    ax.set_ylim(tab.min() - 0.25 * span, tab.max() + 0.25 * span)
    ax.set_title(f"{lut.get('unit', '')} LUT: LE {cfg.get('le_function')}, priorities uflow "
                 f"{cfg.get('uflow_priority')} / oflow {cfg.get('oflow_priority')} / hybrid {cfg.get('hybrid_priority')}",
                 fontsize=9)
    ax.set_xlabel("LUT input")
    ax.legend(fontsize=7, loc="best")
    stats = lut.get("stats") or {}
    names = ["lut_le_hit", "lut_lo_hit", "lut_uflow", "lut_oflow", "lut_hybrid"]
    vals = [int(stats.get(n, 0) or 0) for n in names]
    bx.bar([n.removeprefix("lut_") for n in names], vals, color=["tab:blue", "tab:orange", "gray", "gray", "tab:green"])
    bx.set_title("hit counts" + ("" if stats else " (no statistics)"), fontsize=9)
    bx.tick_params(axis="x", labelsize=7, rotation=30)
    return _png(fig)


def fp16_errors(rule: str, expected: Any, actual: Any, **params: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per element ``(|a - b|, limit)`` of seed 001's FP16 rule (``cc_dc``, ``cc_winograd``,
    ``cdp``, ``pdp``) on FP16 bit patterns; the same arithmetic as :mod:`harness.compare`."""
    from . import compare as cmp

    e = cmp._fp16.as_bits(np.asarray(expected))
    a = cmp._fp16.as_bits(np.asarray(actual))
    err, _ = cmp._nan_aware(cmp._values(e), cmp._values(a))
    if rule == "cc_dc":
        limit = cmp._cc_limit(e, np.broadcast_to(params["max_exp"], e.shape), params["r"] * params["s"] * params["c"],
                              params.get("scale", 1.0))
    elif rule == "cc_winograd":
        limit = cmp._cc_limit(e, np.broadcast_to(params["max_exp"], e.shape), 18 * params["c"], params.get("scale", 1.0))
    elif rule in ("cdp", "pdp"):
        mv = np.abs(np.broadcast_to(np.asarray(params["max_value"], dtype=np.float64), e.shape))
        limit = np.minimum(cmp.CDP_PDP_ABS_LIMIT, cmp.CDP_PDP_REL_LIMIT * mv)
    else:
        raise ValueError(f"{rule!r} has no FP16 threshold (seed 001: cc_dc, cc_winograd, cdp, pdp)")
    return np.asarray(err, dtype=np.float64).ravel(), np.broadcast_to(limit, e.shape).astype(np.float64).ravel()


def fp16_histogram_png(rule: str, expected: Any, actual: Any, **params: Any) -> str:
    """Histogram of error / threshold (log scale) with the pass line at 1."""
    plt = _plt()
    err, limit = fp16_errors(rule, expected, actual, **params)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(limit > 0, err / limit, np.inf)
    nz = ratio[(ratio > 0) & np.isfinite(ratio)]
    fig, ax = plt.subplots(figsize=(7, 3))
    if nz.size:
        bins = np.logspace(np.log10(nz.min()) - 0.1, np.log10(max(nz.max(), 1.0)) + 0.1, 40)
        ax.hist(nz, bins=bins, color="tab:blue")
        ax.set_xscale("log")
    ax.axvline(1.0, color="red", lw=1.5, label="threshold (seed 001)")
    n_fail = int(np.count_nonzero(~(err <= limit)))
    ax.set_title(f"FP16 {rule}: error / threshold of {err.size} elements; {n_fail} over, "
                 f"{int(np.count_nonzero(err == 0))} exact (not shown)", fontsize=9)
    ax.set_xlabel("|expected - actual| / limit")
    ax.legend(fontsize=7)
    return _png(fig)


# ---- the page -------------------------------------------------------------------------------------

_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px} h2{font-size:15px;margin-top:24px}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
th{background:#eee;text-align:left}
.passed{color:#080} .failed,.error{color:#b00;font-weight:bold} .skipped{color:#888} .selfc{color:#a60}
.interrupted{color:#b60;font-weight:bold}
.counts td{font-size:15px;text-align:right} code,pre{font:12px monospace}
pre{background:#f6f6f6;padding:6px;white-space:pre-wrap} .vac{color:#a60} .cause{color:#333;font-size:11px}
img{max-width:100%;border:1px solid #ddd;margin:4px 0}
table.rtlcov td{text-align:right} table.rtlcov td.unit{text-align:left} table.rtlcov tr.total td{font-weight:bold}
.rtlcov-bad{color:#b00;font-weight:bold}
"""


def diagnosis_cause(diag: dict | None) -> str:
    """The cause as one table cell: the element diff's first clause (which unit's elements differ,
    how many, in which shape) and the top suspect register when the hint found one that explains
    the failure, from the test's ``.diag.json``; the CRC line alone says only *that* it failed."""
    if not diag:
        return ""
    lines = [ln.strip() for ln in str(diag.get("summary") or "").splitlines()]
    diff = next((ln for ln in lines if " differ" in ln), "")
    if diff.startswith("check at line ") and ": " in diff:
        diff = diff.split(": ", 1)[1]
    diff = "; ".join(diff.split("; ")[:2])  # "K of N bytes differ; E <unit> output elements of ... differ"
    suspects = diag.get("suspects") if isinstance(diag.get("suspects"), list) else []
    top = suspects[0] if suspects and isinstance(suspects[0], dict) else None
    left, total = (_count(top.get("remaining_bytes")), _count(top.get("total_bytes"))) if top else (0, 0)
    hint = (f"; suspect {top.get('register')} ({left} of {total} differing bytes left)"
            if top and top.get("register") and (top.get("explains") or 2 * left <= total) else "")
    return (diff + hint)[:300]


def _count(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def _attach(run: Path, rows: list[TestRow]) -> None:
    logs = run / "logs"
    for r in rows:
        key = safe_name(r.name)
        log = find_test_file(logs, f"{key}.log")
        if log is not None:
            r.log = rel_link(log.relative_to(run).as_posix())
        diag = find_test_file(logs, f"{key}.diag.json")
        if diag is not None:
            r.diag = read_diagnosis(diag)
            if r.diag:
                r.vacuous += [c for c in r.diag.get("checks", []) if VACUOUS in c and c not in r.vacuous]
                if not r.reason:
                    r.reason = failure_reason("\n".join(r.diag.get("checks", [])))
        for cand in (run / "bundles" / key / "index.html", run / "bundles" / safe_name(r.test_id) / "index.html"):
            if cand.is_file():
                r.bundle = rel_link(cand.relative_to(run).as_posix())
                break


def _e(s: Any) -> str:
    return html.escape(str(s))


def _diag_html(d: dict[str, Any]) -> str:
    out = []
    if d.get("summary"):
        out.append(f"<pre>{_e(d['summary'])}</pre>")
    for reg in d.get("regions", []):
        uri = heatmap_png(reg)
        if uri:
            out.append(f'<img class="heatmap" alt="mismatch heat map, check at line {reg["line"]}" src="{uri}">')
    if d.get("lut"):
        out.append(f'<img class="lutplot" alt="LUT curve" src="{lut_png(d["lut"])}">')
    fp = d.get("fp16")
    if fp:
        params = fp.get("params") or {}
        png = fp16_histogram_png(fp["rule"], np.asarray(fp["expected"], np.uint16),
                                 np.asarray(fp["actual"], np.uint16), **params)
        out.append(f'<img class="fp16hist" alt="FP16 error histogram" src="{png}">')
    return "\n".join(out)


def _bug_html(bug: Any) -> str:
    """A label's bug link: a link only when it is http(s); anything else (``javascript:...``) is text."""
    if not bug:
        return ""
    url = http_link(bug)
    if url is None:
        return f' <span class="bug">{_e(bug)}</span>'
    return f' <a class="bug" href="{_e(url)}" rel="noopener noreferrer">{_e(bug)}</a>'


def _cls(outcome: str) -> str:
    """CSS class of an outcome (a self-consistency pass is not shown as a pass)."""
    return "selfc" if outcome == SELF_CONSISTENCY else outcome.split(":")[0]


def render_report(run_dir: str | Path, db: str | None = None) -> str:
    """The HTML of the run directory's report (``db``: the results database for the run's
    provenance, its comparison with the previous comparable run, each test's history and cluster;
    default ``NVDLA_HIL_RESULTS_DB``, else ``<run_dir>/../results.sqlite`` when it exists; without
    one the page says what it leaves out)."""
    from ..results.runreport import CSS, SCRIPT, run_extras, series_html

    run = Path(run_dir)
    meta = read_run_json(run)  # InputError naming the file when it is not a run record
    junit = run / "junit.xml"
    rows = parse_junit(junit) if junit.exists() else []  # a FIFO or a folder: InputError naming it
    _attach(run, rows)
    extras = run_extras(run, db)
    for r in rows:  # the reason the recorder took from the error itself, when the database has it
        rec = extras.rows.get(f"{r.classname}::{r.name}")
        if rec and rec.get("reason") and r.outcome in ("failed", "error"):
            r.reason = rec["reason"]
    h: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    f"<title>nvdla-hil report {_e(run.name)}</title><style>{_CSS}{CSS}</style></head><body>",
                    f"<h1>nvdla-hil regression {_e(run.name)}</h1>"]
    if meta:
        h.append(f"<p>command <code>{_e(' '.join(meta.get('command', [])))}</code>; started {_e(meta.get('started', '?'))}; "
                 f"{_e(meta.get('seconds', '?'))} s; exit code {_e(meta.get('exit_code', '?'))} "
                 f"({_e(meta.get('result', ''))})</p>")
    h.append(series_html(extras))
    h += _counts_html(rows)
    ordered = sorted(rows, key=lambda r: (_ORDER.get(r.outcome, 2), r.name))
    h += _tests_html(ordered, extras)
    h += _failures_html(run, meta, ordered, extras)
    h += rtl_coverage_html(run)
    h.append(SCRIPT)
    h.append("</body></html>")
    return "\n".join(h)


#: failing tests first in the page's tables
_ORDER = {"failed": 0, "error": 1, INTERRUPTED: 1}


def _counts_html(rows: list[TestRow]) -> list[str]:
    """The outcome counts (vacuous checks apart) and the oracle split of the passing vectors."""
    classes = ["passed", SELF_CONSISTENCY, "failed", "error", "infrastructure", "skipped: not modelled", "skipped: lacks unit",
               "skipped: other", INTERRUPTED]
    counts = {k: sum(r.outcome == k for r in rows) for k in classes}
    n_vac = sum(bool(r.vacuous) for r in rows)
    h: list[str] = []
    h.append('<table class="counts" id="summary"><tr>' + "".join(f"<th>{_e(k)}</th>" for k in classes)
             + "<th>vacuous checks</th><th>total</th></tr><tr>"
             + "".join(f'<td class="{_cls(k)}" data-outcome="{_e(k)}">{counts[k]}</td>' for k in classes)
             + f"<td>{n_vac}</td><td>{len(rows)}</td></tr></table>")
    oracle = oracle_counts(rows)
    if oracle:
        own = oracle.get("model", 0)
        checked = {k: n for k, n in sorted(oracle.items()) if k != "model"}
        h.append(f'<p id="oracle-split">oracle split: <b>{sum(checked.values())}</b> checked against an oracle ('
                 + _e(", ".join(f"{n} {k}" for k, n in checked.items()) or "none") + f'), <b class="selfc">{own}</b> '
                 "self-consistency only" + (" (goldens from the reference model itself: not evidence of correctness)"
                                            if own else "") + "</p>")
    if not rows:
        h.append("<p>no junit.xml in this run directory: no test results</p>")
    return h


def _tests_html(ordered: list[TestRow], extras: Any) -> list[str]:
    """One row per test: target, profile, outcome, time, reason, links, history, cluster."""
    from ..results.runreport import CONTROLS

    h: list[str] = []
    h.append('<h2>Tests</h2>' + CONTROLS + '<table id="tests"><tr><th>test</th><th>target</th><th>profile</th><th>outcome</th>'
             "<th>time</th><th>reason</th><th>links</th><th>history</th><th>cluster</th></tr>")
    for i, r in enumerate(ordered):
        reason = r.reason or (r.message if r.outcome.startswith("skipped") else "")
        vac = "".join(f'<div class="vac">vacuous: {_e(v)}</div>' for v in r.vacuous)
        cause = diagnosis_cause(r.diag) if r.outcome in ("failed", "error") else ""
        vac = (f'<div class="cause">{_e(cause)}</div>' if cause else "") + vac
        links = []
        if r.log:
            links.append(f'<a href="{_e(r.log)}">register log</a>')
        if r.bundle:
            links.append(f'<a href="{_e(r.bundle)}">bundle</a>')
        if r.diag and r.outcome in ("failed", "error"):
            links.append(f'<a href="#d{i}">diff</a>')
        key = f"{r.classname}::{r.name}"
        sig = (extras.rows.get(key) or {}).get("signature")
        cid = extras.cluster_of.get(sig, sig) if sig else ""
        lab = extras.label(sig)
        cluster = (f'<code title="{_e(extras.keys.get(sig or "", ""))}">{_e(cid)}</code>' if cid else "") + (
            f' <span class="label">{_e(lab.get("text"))}</span>' if lab else "")
        h.append(f'<tr data-outcome="{_e(r.outcome)}"><td><code>{_e(r.name)}</code></td><td>{_e(r.target)}</td><td>{_e(r.profile)}</td>'
                 f'<td class="{_cls(r.outcome)}">{_e(r.outcome)}</td><td>{r.time:.3f}</td>'
                 f"<td>{_e(reason)}{vac}</td><td>{' '.join(links)}</td><td>{extras.history_html(key)}</td>"
                 f"<td>{cluster}</td></tr>")
    h.append("</table>")
    return h


def _failures_html(run: Path, meta: dict[str, Any], ordered: list[TestRow], extras: Any) -> list[str]:
    """A section per failing test: reason, cluster and label, the next commands, its diagnosis."""
    from ..results.runreport import next_commands

    h: list[str] = []
    failing = [(i, r) for i, r in enumerate(ordered) if r.outcome in ("failed", "error")]
    if failing:
        h.append("<h2>Failures</h2>")
    for i, r in failing:
        h.append(f'<details class="failure" open><summary><h3 id="d{i}" style="display:inline"><code>{_e(r.name)}</code> '
                 f'({_e(r.profile)} on {_e(r.target)})</h3></summary>')
        h.append(f"<p>{_e(r.reason)}</p>")
        sig = (extras.rows.get(f"{r.classname}::{r.name}") or {}).get("signature")
        if sig:
            lab = extras.label(sig)
            h.append(f'<p class="cluster">cluster <code>{_e(extras.cluster_of.get(sig, sig))}</code>: '
                     f"{_e(extras.keys.get(sig, ''))}"
                     + (f' <span class="label">known: {_e(lab.get("text"))}</span>' if lab else "")
                     + (_bug_html(lab.get("bug")) if lab else "") + "</p>")
        cmds = next_commands(run, meta, r.classname, r.name, r.test_id, r.profile, r.target)
        h.append('<p>next:</p><pre class="next">' + _e("\n".join(cmds)) + "</pre>")
        if r.diag:
            h.append(_diag_html(r.diag))
        else:
            h.append(f"<details><summary>failure text</summary><pre>{_e(r.text[:6000])}</pre></details>")
        h.append("</details>")
    return h


def write_report(run_dir: str | Path, out: str | Path | None = None, db: str | None = None) -> Path:
    """Write ``<run_dir>/report.html`` (or ``out``); returns its path."""
    path = Path(out) if out else Path(run_dir) / "report.html"
    from ...drivers.errors import write_atomic

    write_atomic(path, render_report(run_dir, db))  # a new file renamed over it: never through a planted symlink
    return path


# ---- LUT data of a layer, from the reference model ---------------------------------------------------


def _lut_unit(drv: Any, unit: str) -> bool:
    if unit == "CDP":
        return True
    try:
        ew = drv.read_fields(("SDP", "D_DP_EW_CFG"))
        return not ew["EW_BYPASS"] and not ew["EW_LUT_BYPASS"]
    except Exception:  # noqa: BLE001
        return False


def trace_lut_info(trace: Any, profile: Any, semantics: Semantics = "rtl") -> dict[str, Any] | None:
    """The ``lut`` sidecar entry of a trace whose layer uses a LUT (None otherwise): tables and
    configuration as programmed, hit counts from the reference model's statistics."""
    from ...drivers.driver import NvdlaDriver
    from ..targets.model import ModelTarget
    from ..traces import Trace, parse_trace, run_trace

    t = trace if isinstance(trace, Trace) else parse_trace(trace)
    unit = next((u for u in t.units() if u in ("SDP", "CDP")), None)
    if unit is None:
        return None
    with ModelTarget(profile, semantics=semantics) as m:
        drv = NvdlaDriver(m, profile)
        run_trace(t, m, driver=drv, timeout=1.0)
        if not _lut_unit(drv, unit):
            return None
        pc = drv.precision
        stats = pc.read_statistics(unit, 0).counters()
        return lut_info(unit, pc.read_lut_config(unit, force=True), pc.read_lut(unit, "LE", force=True),
                        pc.read_lut(unit, "LO", force=True), stats)


def vector_lut_info(case: Any, semantics: Semantics = "rtl") -> dict[str, Any] | None:
    """The ``lut`` sidecar entry of a packed vector with a LUT (hit counts from the model)."""
    from ...drivers.driver import NvdlaDriver
    from ..targets.model import ModelTarget
    from ..vectors import Case, execute_case, load_case

    c = case if isinstance(case, Case) else load_case(case)
    if c.lut is None:
        return None
    with ModelTarget(c.profile or "nv_small", semantics=semantics) as m:
        drv = NvdlaDriver(m, c.profile)
        group = drv.consumer_group(c.unit or c.lut.unit)
        execute_case(c, m, drv, timeout=1.0)
        pc = drv.precision
        try:
            stats = pc.read_statistics(c.lut.unit, group).counters()
        except Exception:  # noqa: BLE001
            stats = {}
        return lut_info(c.lut.unit, c.lut.config, pc.read_lut(c.lut.unit, "LE", force=True),
                        pc.read_lut(c.lut.unit, "LO", force=True), stats)


def render_bundle(how: dict[str, Any], status: str, result_text: str, doc: dict[str, Any],
                  stats: dict[str, Any], files: list[str]) -> str:
    """The ``index.html`` of a triage bundle (self-contained; links to the files beside it)."""
    h = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
         f"<title>triage {_e(how.get('test'))}</title><style>{_CSS}</style></head><body>",
         f"<h1>triage bundle: <code>{_e(how.get('test'))}</code></h1>",
         f"<p id=\"status\" class=\"{_e(status)}\">rerun {_e(status)} on {_e(how.get('target'))} "
         f"({_e(how.get('profile'))}, {_e(how.get('semantics'))} semantics"
         + (f", injected bugs {_e(', '.join(how['model_bugs']))}" if how.get("model_bugs") else "")
         + f") in {_e(how.get('seconds'))} s</p>",
         f"<p>source <code>{_e(how.get('source'))}</code>; from run <code>{_e(how.get('run'))}</code>; "
         f"rerun with <code>{_e(how.get('command'))}</code></p>",
         f"<h2>Result</h2><pre>{_e(result_text)}</pre>"]
    if doc.get("regions") or doc.get("lut") or doc.get("summary"):
        h.append("<h2>Model vs target</h2>" + _diag_html(doc))
    if doc.get("suspects"):
        h.append("<h2>Suspect registers (a hint, not a verdict)</h2><table><tr><th>#</th><th>field</th>"
                 "<th>programmed</th><th>as</th><th>differing bytes left</th></tr>")
        for i, s in enumerate(doc["suspects"][:10]):
            h.append(f"<tr><td>{i + 1}</td><td><code>{_e(s['register'])}</code></td><td>{s['programmed']:#x}</td>"
                     f"<td>{s['tried']:#x}</td><td>{s['remaining_bytes']} of {s['total_bytes']}</td></tr>")
        h.append("</table>")
    if stats:
        h.append("<h2>Statistics registers</h2><table><tr><th>unit</th><th>counters</th></tr>"
                 + "".join(f"<tr><td>{_e(u)}</td><td><code>{_e(v)}</code></td></tr>" for u, v in stats.items())
                 + "</table>")
    h.append("<h2>Files</h2><ul>" + "".join(f'<li><a href="{_e(f)}">{_e(f)}</a></li>' for f in files) + "</ul>")
    h.append("</body></html>")
    return "\n".join(h)
