"""What the results database and the run record add to a run's ``report.html`` (harness/analysis/report.py):
the run's provenance (commit, seed, injected bugs, host, build key) and its series, the run
against the previous comparable run (new, fixed, still failing, cause changed), each test's
recent history, its failure cluster and known-failure label, the reason as the recorder saw it
(the error's message), the next commands to run for a failure, and the plain script that
filters, sorts and collapses the page's tables (no external file: the page still opens from disk).

The database is ``--results-db`` (``regress``), else ``NVDLA_HIL_RESULTS_DB``, else
``results.sqlite`` beside the run folder. A report made without one says so at its top (a run
folder copied elsewhere): it is never silently poorer.
"""

from __future__ import annotations

import html
import os
import shlex
from pathlib import Path
from typing import Any

__all__ = ["RunExtras", "run_extras", "next_commands", "SCRIPT", "CONTROLS", "CSS", "series_html"]


def _e(s: Any) -> str:
    return html.escape(str(s if s is not None else ""))


def _opt(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None


class RunExtras:
    """Per-test extras of one run (empty when there is no database or it has no such run)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}  # test key -> the run's test row
        self.history: dict[str, list[dict[str, Any]]] = {}  # test key -> latest results, newest first
        self.cluster_of: dict[str, str] = {}
        self.labels: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}
        self.where = ""
        self.missing = ""  # why there is no database (said in the report)
        self.run: dict[str, Any] | None = None  # the run's row
        self.comparison: Any = None  # analysis.Comparison against the previous comparable run
        self.all: Any = None  # the analysis.History it came from

    def label(self, sig: str | None) -> dict[str, Any] | None:
        if not sig:
            return None
        cid = self.cluster_of.get(sig, sig)
        return self.labels.get(cid) or self.labels.get(sig) or next(
            (lab for s, lab in self.labels.items() if self.cluster_of.get(s, s) == cid), None)

    def history_html(self, key: str) -> str:
        cells = []
        for h in reversed(self.history.get(key, [])):  # oldest first, left to right
            o = str(h["outcome"])
            cls = "hf" if o in ("failed", "error") else "hi" if o == "interrupted" else "hp" if o.startswith("passed") else "hs"
            letter = {"hf": "F", "hp": "P", "hi": "I"}.get(cls, "s")
            cells.append(f'<span class="{cls}" title="{_e(h["run_id"])}: {_e(o)} ({float(h.get("duration") or 0):.2f} s)">'
                         f"{letter}</span>")
        return "".join(cells)


def run_extras(run: Path, db: str | None = None, history: int = 10) -> RunExtras:
    """Read the database (``db``, else ``NVDLA_HIL_RESULTS_DB``, else ``<run>/../results.sqlite``
    when it exists) for run ``run``."""
    out = RunExtras()
    run = run.resolve()  # <results>/latest names the newest run
    beside = run.parent / "results.sqlite"
    url = db or os.environ.get("NVDLA_HIL_RESULTS_DB") or (str(beside) if beside.is_file() else None)
    if not url:
        out.missing = (f"no results database: none given and no {beside}; history, clusters, labels and the "
                       f"comparison with earlier runs are left out (give the database: "
                       f"NVDLA_HIL_RESULTS_DB=URL nvdla-hil report RUN_DIR)")
        return out
    try:
        from .analysis import load_history
        from .db import ResultsDB
        from .signature import cluster_map

        with ResultsDB(url) as rdb:
            out.where = rdb.where
            for t in rdb.tests_of([run.name]):
                out.rows[str(t.get("test") or t["nodeid"])] = t
            for key in out.rows:
                out.history[key] = rdb.test_history(key, limit=history)
            sigs = rdb.signatures()
            out.keys = {k: str(v.get("key") or "") for k, v in sigs.items()}
            out.cluster_of = cluster_map(out.keys)
            out.labels = rdb.labels()
            h = load_history(rdb)
            out.run = next((r for r in h.runs if r["id"] == run.name), None) or rdb.run(run.name)
            if out.run is not None and any(r["id"] == run.name for r in h.runs):
                out.comparison = h.compare(out.run)
                out.all = h
    except Exception as e:  # noqa: BLE001 - the report never fails for want of a database
        bad = RunExtras()
        bad.missing = f"results database {url}: {type(e).__name__}: {e}"
        return bad
    if out.run is None:
        out.missing = f"run {run.name} is not in the results database {out.where}"
    return out


def series_html(extras: RunExtras) -> str:
    """The run's provenance and series, and the run against the previous comparable run."""
    from .analysis import commit_of, comparable_key, series_name

    if extras.run is None:
        return f'<p class="nodb" id="nodb">{_e(extras.missing)}</p>'
    r = extras.run
    h = [f'<p id="provenance">commit <code title="{_e(r.get("version"))}">{_e(commit_of(r))}</code> '
         f'(version {_e(r.get("version"))}); seed {_e(r.get("seed") or "-")}; injected bugs '
         f'{_e(r.get("model_bugs") or "none")}; host {_e(r.get("host"))}; build key {_e(r.get("build_key") or "-")}; '
         f'status {_e(r.get("status"))}<br>series {_e(series_name(comparable_key(r)))}</p>']
    cmp = extras.comparison
    if cmp is None:
        return "".join(h)
    if cmp.previous is None:
        h.append('<p id="against">no earlier comparable run (same suite, target, profiles, semantics, injected bugs, '
                 "seed, -k): every failure is new</p>")
    else:
        prev = cmp.previous
        h.append(f'<p id="against">against the previous comparable run <code>{_e(prev["id"])}</code> '
                 f"({_e(commit_of(prev))}): <b>{_e(cmp.counts)}</b></p>")
    hist = extras.all
    rows = []
    for cls, title, found in (("new", "new failure", cmp.new), ("fixed", "fixed", cmp.fixed),
                              ("still", "still failing", cmp.still), ("changed", "CAUSE CHANGED", cmp.changed)):
        for row in found:
            test = str(row.get("test") or row["nodeid"])
            before = cmp.was.get(test) or {}
            rows.append(f'<tr data-change="{cls}" data-test="{_e(test)}"><td class="{cls}">{title}</td>'
                        f'<td><code>{_e(test.split("::")[-1])}</code></td>'
                        f'<td><code>{_e(hist.cluster(before.get("signature")) or "")}</code></td>'
                        f'<td><code>{_e(hist.cluster(row.get("signature")) or "")}</code></td></tr>')
    if rows:
        h.append('<table id="changes"><tr><th>change</th><th>test</th><th>cluster before</th><th>cluster now</th></tr>'
                 + "".join(rows) + "</table>")
    return "".join(h)


def next_commands(run: Path, meta: dict[str, Any], classname: str, name: str, test_id: str, profile: str,
                  target: str) -> list[str]:  # fmt: skip
    """The commands to run next for a failed test: triage it (a bug bundle), rerun it with waves
    on the Verilator target, minimise it to the smallest case that fails the same way."""
    command = [str(c) for c in meta.get("command") or []]
    argv = [str(c) for c in meta.get("pytest_argv") or []]
    bugs: list[str] = []
    for i, a in enumerate(command):
        if a == "--model-bug" and i + 1 < len(command):
            bugs.append(command[i + 1])
    bug_args = "".join(f" --model-bug {shlex.quote(b)}" for b in bugs)
    cmds = [f"nvdla-hil triage {shlex.quote(name)} --run {shlex.quote(str(run))}{bug_args}"]
    suite = classname.rsplit(".", 1)[-1].removeprefix("test_")
    source = ""
    path = None
    if suite == "traces":
        root = _opt(argv, "--nvdla-traces")
        if root:
            source = f" --traces {shlex.quote(root)}"
            path = str(Path(root) / test_id)
    elif suite == "vectors":
        root = _opt(argv, "--nvdla-vectors")
        if root:
            source = f" --vectors {shlex.quote(root)}"
            path = str(Path(root) / test_id)
        else:
            try:
                from ..vectors import bundled_root

                path = str(bundled_root() / test_id)
            except Exception:  # noqa: BLE001
                path = None
    prof = f" --profile {shlex.quote(profile.split(',')[0])}" if profile else ""
    if suite in ("traces", "vectors", "txn"):
        cmds.append(f"nvdla-hil regress --target verilator --nvdla-hw \"$NVDLA_HW\"{prof} --suite {suite}{source} "
                    f"-k {shlex.quote(test_id)} --waves")
    if path and suite in ("traces", "vectors"):
        tgt = target or "model"
        cmds.append(f"nvdla-hil minimize {shlex.quote(path)} --target {tgt}{prof}{bug_args if tgt == 'model' else ''} "
                    f"--out {shlex.quote(str(run / 'minimized' / test_id.replace('/', '_')))}")
    return cmds


CSS = """
#controls{margin:6px 0;padding:4px;background:#f4f4f4;border:1px solid #ddd}
#controls label{margin-right:10px} th.sortable{cursor:pointer} th.sortable:after{content:" \\2195";color:#999}
.hp,.hf,.hs,.hi{display:inline-block;width:12px;font:10px monospace;text-align:center;margin-right:1px;color:#fff}
.hp{background:#3a3} .hf{background:#d22} .hs{background:#aaa} .hi{background:#e80}
.label{background:#ffd;padding:0 4px;border:1px solid #dd8}
.new,.changed{color:#b00;font-weight:bold} .fixed{color:#080} .still{color:#a50} .nodb{color:#b60;font-weight:bold}
tr.hidden{display:none} pre.next{background:#eef4ff}
"""

CONTROLS = """<div id="controls">filter <input id="filter" type="search" placeholder="test, reason, cluster..." size="30">
<label><input type="checkbox" class="oc" value="passed" checked> passed</label>
<label><input type="checkbox" class="oc" value="failed" checked> failed</label>
<label><input type="checkbox" class="oc" value="error" checked> error</label>
<label><input type="checkbox" class="oc" value="skipped" checked> skipped</label>
<label><input type="checkbox" class="oc" value="interrupted" checked> interrupted</label>
<button id="collapse" type="button">collapse failures</button> <button id="expand" type="button">expand failures</button>
<span id="shown"></span></div>"""

SCRIPT = """<script>
(function(){
  var table=document.getElementById('tests'); if(!table) return;
  var rows=function(){return Array.prototype.slice.call(table.querySelectorAll('tr')).slice(1);};
  function apply(){
    var q=document.getElementById('filter').value.toLowerCase();
    var on={}; document.querySelectorAll('input.oc').forEach(function(c){on[c.value]=c.checked;});
    var n=0, all=rows();
    all.forEach(function(r){
      var kind=(r.getAttribute('data-outcome')||'').split(':')[0].split(' ')[0];
      var ok=(on[kind]!==false)&&(!q||r.textContent.toLowerCase().indexOf(q)>=0);
      r.classList.toggle('hidden',!ok); if(ok) n++;});
    document.getElementById('shown').textContent=n+' of '+all.length+' tests shown';
  }
  document.getElementById('filter').addEventListener('input',apply);
  document.querySelectorAll('input.oc').forEach(function(c){c.addEventListener('change',apply);});
  table.querySelectorAll('th').forEach(function(th,col){
    th.classList.add('sortable');
    th.addEventListener('click',function(){
      var asc=th.getAttribute('data-dir')!=='asc'; th.setAttribute('data-dir',asc?'asc':'desc');
      var all=rows(); all.sort(function(a,b){
        var x=a.cells[col].getAttribute('data-sort')||a.cells[col].textContent;
        var y=b.cells[col].getAttribute('data-sort')||b.cells[col].textContent;
        var nx=parseFloat(x), ny=parseFloat(y); var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
        return asc?c:-c;});
      all.forEach(function(r){table.tBodies[0].appendChild(r);});});});
  function setOpen(v){document.querySelectorAll('details.failure').forEach(function(d){d.open=v;});}
  document.getElementById('collapse').addEventListener('click',function(){setOpen(false);});
  document.getElementById('expand').addEventListener('click',function(){setOpen(true);});
  apply();
})();
</script>"""
