"""Hostile-input campaign over the surfaces added last: loadables through NVDLA's firmware
(``loadable show|run``), the results database (``history``, ``dashboard``, ``regress
--results-db``), run folders (``history import``, ``report``) and the fields a report or the
dashboard draws (labels, bug links, test names from vector folders). At least 1,000 inputs by
default (``--quick``: about 60), each run through the real command
(``sys.executable -m nvdla_hil.harness.cli``) in a child of its own session, at most
``--workers`` at a time, killed after ``--timeout`` seconds (``regress`` steps: ``--regress-timeout``,
pytest starts in them).

    .venv/bin/python bench/bench_hostile.py [--quick] [--workers 2] [--timeout 10] [--only CLASS] [--keep DIR]
                                            [--cli "python wrapper.py"]

Classes: ``loadable`` (byte mutations of NVDLA's regression loadables, tables redirected at one
shared table, lists lengthened, small files built to expand near the budgets, network-descriptor
and size edits, ``--dump`` aimed at an input), ``results-db`` (truncated, pages overwritten,
schema versions, rows of the wrong type, read-only, a folder, a FIFO, device symlinks),
``run-folder`` (malformed junit.xml / run.json: lists, huge, deep nesting, entity bombs,
FIFOs, symlinks out of the folder, a report.html symlink to a file outside) and ``fields``
(labels, bug links, authors and vector names holding HTML and terminal-escape payloads) and ``net``
(``net gen|compile|run`` on copies of a generated network folder with one file spoiled: net.json,
calib.json, net.prototxt, net.caffemodel, input/expected.npy, and outputs aimed at inputs or
through symlinks: bench/bench_hostile_net.py).

Printed per class: inputs, commands run, tracebacks (exit 3, or "Traceback" / "INTERNALERROR" in
stderr), hangs (killed at the timeout), wrong exit codes (an input built to be bad must exit 2; a
mutant that may still be valid may exit 0, 1 or 2; a crash by a signal is wrong), children over
1 GiB peak RSS (``wait4``'s rusage: the command and the children it reaped, NVDLA's firmware
among them), inputs overwritten (every input file hashed before and after, and files outside
the inputs that a symlink inside points at), scripts (a payload left live in the generated
HTML: a script, an event-handler attribute or a javascript:/data:/vbscript: link holding the
payload's marker - a static check; tests/test_results_hostile_browser.py opens them in Chromium)
and raw terminal escapes (ESC/BEL written to the terminal). The campaign passes with 0 in every
column but inputs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import html.parser
import os
import random
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchenv.py and the input builders beside this script
from bench_hostile_inputs import (  # noqa: E402
    LOADABLES, Job, db_jobs, fields_jobs, fields_setup, loadable_jobs, rundir_jobs)
from bench_hostile_net import net_jobs, net_setup  # noqa: E402
from benchenv import cli, default  # noqa: E402

GIB_KIB = 1 << 20  # ru_maxrss is in KiB
MARK = "pwned"  # every payload calls pwned(...): found live in a page, it would run

# ---- hashing inputs -----------------------------------------------------------------------------------


def snapshot(paths: list[Path], skip: set[Path]) -> dict[str, str]:
    """path -> digest of every regular file (content), symlink (its target) and FIFO under ``paths``;
    symlinks are never followed (a file they point at is listed as an input of its own)."""
    out: dict[str, str] = {}

    def one(p: Path) -> None:
        if p in skip:
            return
        try:
            st = os.lstat(p)
        except OSError:
            out[str(p)] = "missing"
            return
        if stat.S_ISLNK(st.st_mode):
            out[str(p)] = "link:" + os.readlink(p)
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[str(p)] = h.hexdigest()
        elif stat.S_ISDIR(st.st_mode):
            for q in sorted(p.iterdir()):
                one(q)
        else:
            out[str(p)] = f"mode:{stat.S_IFMT(st.st_mode):o}"

    for p in paths:
        one(p)
    return out


# ---- the static HTML check ------------------------------------------------------------------------------


class _LiveScan(html.parser.HTMLParser):
    """Finds payload markers that a browser would run: inside <script>, in an on* attribute, or in a
    javascript:/data:/vbscript: URL; and any element a payload injects (svg/img/iframe with the marker)."""

    URL_ATTRS = ("href", "src", "action", "formaction", "xlink:href", "data")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        for name, value in attrs:
            v = value or ""
            if name.startswith("on") and MARK in v:
                self.found.append(f"<{tag} {name}={v[:60]!r}>")
            squashed = "".join(ch for ch in v if ch > " ").lower()
            if name in self.URL_ATTRS and squashed.startswith(("javascript:", "data:", "vbscript:")):
                self.found.append(f"<{tag} {name}={v[:60]!r}>")
            if name == "style" and ("expression(" in squashed or "javascript:" in squashed):
                self.found.append(f"<{tag} style={v[:60]!r}>")
        if tag == "meta" and any(n == "http-equiv" and (v or "").lower() == "refresh" for n, v in attrs):
            self.found.append("<meta http-equiv=refresh>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and MARK in data:
            i = data.index(MARK)
            self.found.append(f"<script>...{data[max(0, i - 30):i + 30]!r}")


def live_payloads(page: str) -> list[str]:
    scan = _LiveScan()
    scan.feed(page)
    scan.close()
    return scan.found


# ---- the runner ---------------------------------------------------------------------------------------------

COLUMNS = ("inputs", "commands", "tracebacks", "hangs", "wrong_exit", "rss_over_1g", "overwritten", "scripts",
           "term_escapes")


def _limits() -> None:  # in the child, before exec: a runaway allocation cannot take the machine
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


class Pool:
    """At most ``workers`` jobs at once; a job's steps run one after the other, each in a child of
    its own session (killed with everything it started at its timeout)."""

    def __init__(self, workers: int, timeout: float, regress_timeout: float, logs: Path, env: dict[str, str],
                 command: list[str] | None = None) -> None:
        self.workers, self.timeout, self.regress_timeout = workers, timeout, regress_timeout
        self.logs, self.env = logs, env
        self.command = command or cli()
        self.per: dict[str, Counter] = {}
        self.fails: list[str] = []
        self.problems: list[dict[str, str]] = []  # kind, label, column, text: for --json
        self.peak_kib = 0
        self._n = 0

    def _start(self, job: Job, k: int) -> tuple[int, float, Path]:
        self._n += 1
        log = self.logs / f"{self._n:06d}"
        with open(log.with_suffix(".out"), "wb") as out, open(log.with_suffix(".err"), "wb") as err:
            p = subprocess.Popen([*self.command, *job.steps[k].argv], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env=self.env, cwd=self.logs, start_new_session=True, preexec_fn=_limits)
        p.returncode = 0  # reaped below with os.wait4 (its rusage): Popen must not wait for it
        return p.pid, time.monotonic(), log

    def run(self, jobs: list[Job]) -> None:
        pending = list(jobs)
        running: dict[int, tuple[Job, int, float, Path, dict[str, str], list]] = {}
        while pending or running:
            while pending and len(running) < self.workers:
                job = pending.pop(0)
                before = snapshot(job.inputs, job.skip_hash)
                pid, t0, log = self._start(job, 0)
                running[pid] = (job, 0, t0, log, before, [])
            pid, status, ru = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for p, (job, k, t0, log, before, res) in list(running.items()):
                    limit = self.regress_timeout if job.steps[k].regress else self.timeout
                    if t0 > 0 and now - t0 > limit:
                        try:
                            os.killpg(p, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                        running[p] = (job, k, -1.0, log, before, res)
                time.sleep(0.01)
                continue
            if pid not in running:
                continue
            job, k, t0, log, before, res = running.pop(pid)
            if t0 < 0:  # what it started may still be around: its session is gone with it
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            res.append((os.waitstatus_to_exitcode(status), t0 < 0, ru.ru_maxrss, log))
            if k + 1 < len(job.steps):
                npid, nt0, nlog = self._start(job, k + 1)
                running[npid] = (job, k + 1, nt0, nlog, before, res)
                continue
            self._verdict(job, before, res)

    def _verdict(self, job: Job, before: dict[str, str], res: list) -> None:  # noqa: ANN001
        c = self.per.setdefault(job.kind, Counter())
        c["inputs"] += 1
        problems: list[tuple[str, str]] = []  # (column, what)
        bad: Counter[str] = Counter()
        for step, (code, hung, rss, log) in zip(job.steps, res, strict=True):
            c["commands"] += 1
            err = log.with_suffix(".err").read_bytes()
            out = log.with_suffix(".out").read_bytes()
            self.peak_kib = max(self.peak_kib, rss)
            c["peak_kib"] = max(c["peak_kib"], rss)
            c[f"exit {code}"] += 1
            tb = not hung and (code == 3 or b"Traceback (most recent call last)" in err or b"INTERNALERROR" in err)
            wrong = not hung and not tb and not (code == 2 or (step.expect == "maybe" and code in (0, 1))
                                                 or (step.expect == "0" and code == 0))
            what = {"hangs": hung, "tracebacks": tb, "wrong_exit": wrong, "rss_over_1g": rss > GIB_KIB,
                    "term_escapes": b"\x1b" in out + err or b"\x07" in out + err}
            for key, hit in what.items():
                if hit:
                    bad[key] = 1
                    tail = (err or out).decode(errors="replace").strip().splitlines()[-6:]
                    problems.append((key, f"{key} (exit {code}, {rss // 1024} MiB): nvdla-hil "
                                     f"{' '.join(step.argv)[:300]!r}" + "".join(f"\n      {ln[:300]!r}" for ln in tail)))
        after = snapshot(job.inputs, job.skip_hash)
        changed = sorted(p for p in before if after.get(p) != before[p])
        if changed:
            bad["overwritten"] = 1
            problems.append(("overwritten", f"overwritten: {changed[:4]}"))
        for page in job.html:
            if page.is_file():
                text = page.read_text(encoding="utf-8", errors="replace")
                c["pages"] += 1
                c["pages_marked"] += MARK in text
                live = live_payloads(text)
                if live:
                    bad["scripts"] = 1
                    problems.append(("scripts", f"scripts: {page}: {live[:3]}"))
        for p in job.cleanup:
            subprocess.run(["chattr", "-i", str(p)], capture_output=True, check=False)
        c.update(bad)
        if problems:
            self.fails.append(f"[{job.kind}] {job.label!r}\n    " + "\n    ".join(t for _, t in problems))
            self.problems += [{"kind": job.kind, "label": job.label, "column": k, "text": t} for k, t in problems]


def _table(per: dict[str, Counter], seconds: float, timeout: float) -> Counter:
    heads = ("inputs", "commands", "tracebk", f"hang>{timeout:.0f}s", "wrong exit", "RSS>1GiB", "overwrit",
             "scripts", "raw esc")
    print(f"{'class':<12}" + "".join(f"{h:>11}" for h in heads) + f"{'peak RSS':>11}  exit codes")
    total: Counter = Counter()
    for kind, c in per.items():
        codes = ", ".join(f"{k.split()[1]}:{v}" for k, v in sorted(c.items()) if k.startswith("exit "))
        print(f"{kind:<12}" + "".join(f"{c[k]:>11}" for k in COLUMNS) + f"{c['peak_kib'] / 1024:>8.0f} MiB  {codes}")
        for k in COLUMNS:
            total[k] += c[k]
        total["peak_kib"] = max(total["peak_kib"], c["peak_kib"])
    print(f"{'total':<12}" + "".join(f"{total[k]:>11}" for k in COLUMNS)
          + f"{total['peak_kib'] / 1024:>8.0f} MiB  in {seconds:.0f} s, load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about 60 inputs (the test's size)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before a command counts as a hang")
    ap.add_argument("--regress-timeout", type=float, default=90.0, help="the same for a regress command")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--only", choices=("loadable", "results-db", "run-folder", "fields", "net"))
    ap.add_argument("--nvdla-sw", default=default("NVDLA_SW"), help="nvdla/sw checkout (or NVDLA_SW)")
    ap.add_argument("--keep", help="keep the inputs and logs here (default: a private temporary folder)")
    ap.add_argument("--show", type=int, default=30, help="problems printed in full")
    ap.add_argument("--json", help="write the figures and every problem here (JSON)")
    ap.add_argument("--cli", help="the command run instead of `python -m nvdla_hil.harness.cli` (split like a shell "
                    "would), e.g. a wrapper trying pending changes")
    args = ap.parse_args(argv)
    if args.workers < 1 or args.timeout <= 0:
        ap.error("--workers and --timeout must be positive")
    sizes = {"loadable": 24, "results-db": 12, "run-folder": 14, "fields": 6, "net": 16} if args.quick else \
        {"loadable": 440, "results-db": 240, "run-folder": 250, "fields": 90, "net": 330}
    n_regress = 1 if args.quick else 6
    rng = random.Random(args.seed)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nvdla-hostile-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    logs = work / "logs"
    logs.mkdir()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NVDLA_HIL_RESULTS": str(work / "default-results")}
    env.pop("NVDLA_HIL_RESULTS_DB", None)
    if args.nvdla_sw:
        env["NVDLA_SW"] = args.nvdla_sw
    want = (lambda k: args.only in (None, k))  # noqa: E731
    pool = Pool(args.workers, args.timeout, args.regress_timeout, logs, env, shlex.split(args.cli) if args.cli else None)
    t0 = time.monotonic()
    jobs: list[Job] = []
    try:
        if want("loadable"):
            if not LOADABLES.joinpath("flatbufs").is_dir() or not args.nvdla_sw:
                print("loadable: skipped: needs NVDLA's regression loadables (NVDLA_LOADABLES or ../shared/nvdla_sw) "
                      "and an nvdla/sw checkout (--nvdla-sw or NVDLA_SW)", file=sys.stderr)
            else:
                jobs += loadable_jobs(work, rng, sizes["loadable"])
        if want("results-db"):
            jobs += db_jobs(work, rng, sizes["results-db"], n_regress)
        if want("run-folder"):
            jobs += rundir_jobs(work, rng, sizes["run-folder"])
        if want("net"):
            if not args.nvdla_sw:
                print("net: skipped: needs an nvdla/sw checkout (--nvdla-sw or NVDLA_SW) with its compiler",
                      file=sys.stderr)
            else:  # the base network folder first: every input is a copy of it
                base, setup_jobs = net_setup(work)
                pool.run(setup_jobs)
                jobs += net_jobs(work, rng, sizes["net"], base)
        setup = fields_setup(work) if want("fields") else None
        if setup:  # the regression first: the labels go on its failures
            pool.run([setup[1]])
            jobs += fields_jobs(work, rng, sizes["fields"], setup[0])
        # regressions start pytest: one at a time after the rest, never two on a small machine's cores
        pool.run([j for j in jobs if not any(s.regress for s in j.steps)])
        workers, pool.workers = pool.workers, 1
        pool.run([j for j in jobs if any(s.regress for s in j.steps)])
        pool.workers = workers
    finally:  # an immutable database left behind by an interrupt
        for p in (p for j in jobs for p in j.cleanup):
            subprocess.run(["chattr", "-i", str(p)], capture_output=True, check=False)
    total = _table(pool.per, time.monotonic() - t0, args.timeout)
    pages = sum(c["pages"] for c in pool.per.values())
    print(f"pages checked for live payloads: {pages}, {sum(c['pages_marked'] for c in pool.per.values())} of them "
          "showing the payloads (escaped)")
    for f in pool.fails[: args.show]:
        print(f)
    if len(pool.fails) > args.show:
        print(f"... and {len(pool.fails) - args.show} more inputs with problems")
    if args.json:
        Path(args.json).write_text(json.dumps({"classes": {k: dict(c) for k, c in pool.per.items()},
                                               "total": dict(total), "problems": pool.problems}, indent=1))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    bad = sum(total[k] for k in COLUMNS[2:])
    print("campaign: " + ("PASS" if bad == 0 else "FAIL") + f" ({total['inputs']} hostile inputs, "
          f"{total['commands']} commands)")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
