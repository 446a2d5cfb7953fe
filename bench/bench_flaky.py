"""Run the project's test suite N times and print each test's flake rate.

A flaky test is one whose outcome differs between identical runs. This runs ``pytest`` (the same
command as ``make test`` unless ``--pytest-args`` says otherwise) ``--runs`` times, each with its
own JUnit file, optionally with ``--load K`` CPU-bound processes beside it (a shared CI host),
and prints, per test that did not pass every time: passes, failures/errors, skips, and the first
line of each distinct failure message. Exit 0 when no test flipped, 1 when one did (a test that
failed every run is a plain failure, listed apart), 2 when a run collected nothing.

    python bench/bench_flaky.py --runs 5 --load 2           # make flaky RUNS=5 LOAD=2
    python bench/bench_flaky.py --runs 20 --pytest-args "tests/test_labgrid.py -n 2"

Figures, not timed asserts: wall time and load average of each run are printed beside it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class TestRecord:
    outcomes: list[str] = field(default_factory=list)  # one per run that collected it
    messages: dict[str, int] = field(default_factory=dict)  # first line of a failure -> count

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for o in self.outcomes:
            out[o] += 1
        return dict(out)


def outcomes_of(junit: Path) -> dict[str, tuple[str, str]]:
    """test id -> (outcome, first message line) from one JUnit file (pytest's own writer)."""
    tree = ET.parse(junit)
    out: dict[str, tuple[str, str]] = {}
    for case in tree.getroot().iter("testcase"):
        tid = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
                msg = (child.get("message") or child.text or "").strip().splitlines()[0:1]
                msg = msg[0][:200] if msg else ""
                break
            if child.tag == "skipped":
                outcome = "skipped"
        # a test can have a failure and then an error in teardown: the first bad one counts
        if tid in out and out[tid][0] != "passed":
            continue
        out[tid] = (outcome, msg)
    return out


def run_once(i: int, pytest_args: list[str], load: int, folder: Path, python: str) -> tuple[Path, float, int]:
    junit = folder / f"run-{i:03d}.xml"
    hogs = [subprocess.Popen([python, "-c", "while True: pass"]) for _ in range(load)]
    t0 = time.monotonic()
    try:
        r = subprocess.run([python, "-m", "pytest", *pytest_args, f"--junitxml={junit}", "-q", "-p", "no:cacheprovider"],
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    return junit, time.monotonic() - t0, r.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="how many times to run the suite (default 5)")
    ap.add_argument("--load", type=int, default=0, help="CPU-bound processes beside each run (default 0)")
    ap.add_argument("--pytest-args", default="-n 2 tests --hypothesis-profile=ci -m 'not slow'",
                    help="what follows `pytest` (default: make test's)")
    ap.add_argument("--keep", type=Path, help="keep the JUnit files in this folder (default: a private temporary one)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.load < 0:
        print("bench_flaky: --runs must be >= 1 and --load >= 0", file=sys.stderr)
        return 2
    pytest_args = shlex.split(args.pytest_args)
    records: dict[str, TestRecord] = defaultdict(TestRecord)
    with tempfile.TemporaryDirectory(prefix="nvdla-hil-flaky-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(args.runs):
            junit, wall, rc = run_once(i, pytest_args, args.load, folder, sys.executable)
            load_avg = os.getloadavg()[0]
            if not junit.exists():
                print(f"run {i + 1}: pytest exit {rc}, no JUnit written ({wall:.0f} s)", file=sys.stderr)
                return 2
            got = outcomes_of(junit)
            n = defaultdict(int)
            for tid, (outcome, msg) in got.items():
                rec = records[tid]
                rec.outcomes.append(outcome)
                n[outcome] += 1
                if msg:
                    rec.messages[msg] = rec.messages.get(msg, 0) + 1
            print(f"run {i + 1}/{args.runs}: exit {rc}, {n['passed']} passed, {n['failed']} failed, {n['error']} error, "
                  f"{n['skipped']} skipped in {wall:.0f} s (load {load_avg:.1f}, {args.load} CPU-bound beside)", flush=True)
    flaky = {t: r for t, r in records.items() if len({o for o in r.outcomes if o != "skipped"}) > 1
             or (len(r.outcomes) < args.runs)}
    broken = {t: r for t, r in records.items() if t not in flaky and set(r.outcomes) <= {"failed", "error"}}
    print(f"\n{len(records)} tests, {args.runs} runs: {len(flaky)} flaky, {len(broken)} failing every run")
    for title, group in (("flaky (outcome differs between runs)", flaky), ("failing every run", broken)):
        if not group:
            continue
        print(f"\n{title}:")
        for tid, rec in sorted(group.items(), key=lambda kv: -sum(o in ("failed", "error") for o in kv[1].outcomes)):
            c = rec.counts()
            bad = c.get("failed", 0) + c.get("error", 0)
            print(f"  {bad}/{len(rec.outcomes)} bad ({bad / len(rec.outcomes):.0%})  {tid}  {c}")
            for msg, k in sorted(rec.messages.items(), key=lambda kv: -kv[1])[:3]:
                print(f"      {k}x {msg}")
    return 1 if flaky else 0


if __name__ == "__main__":
    sys.exit(main())
