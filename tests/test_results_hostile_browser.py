"""Stored script injection: every field a user or a file controls (test names, reasons, failure
messages, label texts, bug links, board/target/profile properties, run.json's command, run folder
names) is filled with payloads, the run's report.html and the dashboard are written by the real
commands, then opened in a real headless Chromium driven over the DevTools protocol (a pipe, no
extra package): every link is clicked and no payload may run.

A payload that runs calls ``pwned(...)`` (a DevTools binding: each call is an event), opens a
dialog, or sets ``document.title``: all three are watched.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nvdla_hil.harness.cli import main
from nvdla_hil.harness.results.db import ResultsDB
from nvdla_hil.harness.results.signature import failure_info, signature_of

#: payloads for every context the pages have: element text, attribute values (quoted either way),
#: URLs (href), script text, comments, CSS
PAYLOADS = [
    "<script>pwned('script');document.title='PWNED'</script>",
    "<img src=x onerror=\"pwned('img')\">",
    "\"><svg onload=pwned('svg-dq')>",
    "'><svg onload=pwned('svg-sq')>",
    "javascript:pwned('href')",
    "</script><script>pwned('close')</script>",
    "--><script>pwned('comment')</script>",
    "</style><script>pwned('style')</script>",
]
BUG_JS = "javascript:pwned('bug')//"
BUG_DATA = "data:text/html,<script>pwned('data')</script>"
BUG_OK = "https://bugs.example.invalid/browse/NV-1"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    pytest.skip("chromium is not installed (apt-get install chromium): the pages are not checked in a browser")


class _DevTools:
    """Chromium with ``--remote-debugging-pipe``: commands on fd 3, answers and events on fd 4."""

    def __init__(self, exe: str, profile: str) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes back
            a = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, pass_fds=(3, 4))  # noqa: PLW1509 - fds 3/4 are the protocol's pipe
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.events: list[dict[str, Any]] = []
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session = ""

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                doc = json.loads(msg)
                if "id" in doc:
                    self._answers.put(doc)
                else:
                    self.events.append(doc)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True,
             timeout: float = 30) -> dict[str, Any]:  # fmt: skip
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            doc = self._answers.get(timeout=max(deadline - time.monotonic(), 0.01))
            if doc["id"] == self._next:
                if "error" in doc:
                    raise RuntimeError(f"{method}: {doc['error']}")
                return doc.get("result", {})

    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for m in ("Page.enable", "Runtime.enable"):
            self.send(m)
        self.send("Runtime.addBinding", {"name": "pwned"})
        self.send("Page.addScriptToEvaluateOnNewDocument", {"source": (
            "window.alert=window.confirm=window.prompt=function(m){pwned('dialog:'+m)};")})

    def navigate(self, url: str) -> None:
        n = len(self.events)
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(e.get("method") == "Page.loadEventFired" for e in self.events[n:]):
                return
            time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return res.get("result", {}).get("value")

    def ran(self) -> list[str]:
        """What injected script did: binding calls and dialogs."""
        return [str(e["params"].get("payload")) for e in self.events if e.get("method") == "Runtime.bindingCalled"] + [
            f"dialog: {e['params'].get('message')}" for e in self.events if e.get("method") == "Page.javascriptDialogOpening"]

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:  # noqa: BLE001 - it is closing anyway
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass


def _click_everything(exe: str, page: Path) -> tuple[list[str], list[str]]:
    """Open ``page``, then click each of its links from a fresh load; returns (what ran, the links)."""
    with tempfile.TemporaryDirectory() as prof:
        dt = _DevTools(exe, prof)
        try:
            dt.open_page()
            dt.navigate(page.as_uri())
            title = dt.evaluate("document.title")
            hrefs = dt.evaluate("Array.from(document.querySelectorAll('a')).map(a => a.href)") or []
            assert title and "PWNED" not in title, title
            for i in range(len(hrefs)):
                dt.navigate(page.as_uri())
                assert "PWNED" not in (dt.evaluate("document.title") or "")
                dt.evaluate(f"document.querySelectorAll('a')[{i}].click()")
                time.sleep(0.3)
                assert "PWNED" not in (dt.evaluate("document.title") or "")
            return dt.ran(), hrefs
        finally:
            dt.close()


def _junit(cases: list[tuple[str, str, str, dict[str, str]]]) -> str:
    from xml.sax.saxutils import quoteattr, escape

    out = ['<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
           f'failures="{sum(k == "failure" for _, k, _, _ in cases)}" skipped="0" tests="{len(cases)}">']
    for name, kind, message, props in cases:
        p = "".join(f"<property name={quoteattr(k)} value={quoteattr(v)} />" for k, v in props.items())
        body = f"<{kind} message={quoteattr(message)}>{escape(message)}\nE   {escape(message)}</{kind}>" if kind else ""
        out.append(f'<testcase classname="nvdla_hil.harness.suites.test_vectors" name={quoteattr(name)} time="0.5">'
                   f"<properties>{p}</properties>{body}</testcase>")
    out.append("</testsuite></testsuites>")
    return "".join(out)


@pytest.fixture()
def hostile_results(tmp_path: Path) -> tuple[Path, Path]:
    """A results folder with two runs (one in a folder named ``javascript:...``), their junit.xml,
    run.json, logs, and a database whose every text field carries a payload; returns (results, run)."""
    results = tmp_path / "results"
    runs = [results / "20261129T000000Z-1-aaaaaa", results / "javascript:pwned('dir')"]
    db = ResultsDB(results / "results.sqlite")
    sigs = []
    for k, run in enumerate(runs):
        (run / "logs").mkdir(parents=True)
        cases = []
        for i, p in enumerate(PAYLOADS):
            name = f"test_vector[sdp/{p}{i}]"
            props = {"target": p, "profile": p, "board": p, "model_semantics": p}
            cases.append((name, "failure" if i % 2 == 0 else "", f"out: {p} MISMATCH", props))
            (run / "logs" / f"test_vector_sdp_{i}.log").write_text(p)
        (run / "junit.xml").write_text(_junit(cases), encoding="utf-8")
        (run / "run.json").write_text(json.dumps({
            "status": "finished", "command": ["nvdla-hil", "regress", *PAYLOADS], "started": PAYLOADS[0],
            "seconds": 1.0, "exit_code": 1, "result": PAYLOADS[1], "pytest_argv": ["--nvdla-vectors", PAYLOADS[2]]}))
        db.start_run(run.name, started=1767225600.0 + k, target=PAYLOADS[6 + k], profile=PAYLOADS[3], suite=PAYLOADS[4],
                     semantics="rtl", selection="", run_dir=str(run), model_bugs=PAYLOADS[5], host=PAYLOADS[6],
                     build_key=f"board:{PAYLOADS[7]}", command=" ".join(PAYLOADS))
        for i, (name, kind, message, props) in enumerate(cases):
            sig = signature_of(failure_info("failed", "call", "Failed", f"{PAYLOADS[i]} MISMATCH")) if kind else None
            if sig:
                sigs.append(sig[0])
            db.record_test(run.name, f"nvdla_hil.harness.suites.test_vectors::{name}", "failed" if kind else "passed",
                           0.5, reason=message, properties=props, signature=sig, name=name,
                           test=f"nvdla_hil.harness.suites.test_vectors::{name}")
        db.finish_run(run.name, 1, "complete", note=PAYLOADS[k + 1])
    for i, sig in enumerate(dict.fromkeys(sigs)):  # stored as an old version or a direct write would leave them
        db.set_label(sig, PAYLOADS[i % len(PAYLOADS)], [BUG_JS, BUG_DATA, BUG_OK][i % 3], PAYLOADS[-1])
    db.close()
    return results, runs[0]


def test_no_payload_runs_in_the_report_or_the_dashboard(hostile_results: tuple[Path, Path], tmp_path: Path) -> None:
    exe = _chromium()
    results, run = hostile_results
    assert main(["report", str(run)]) == 0
    assert main(["report", str(results / "javascript:pwned('dir')")]) == 0
    assert main(["dashboard", "--results-db", str(results / "results.sqlite"), "--out", str(results)]) == 0
    pages = [run / "report.html", results / "javascript:pwned('dir')" / "report.html", results / "index.html"]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script>pwned" not in text and "onerror=\"pwned" not in text and "<svg onload" not in text
        assert 'href="javascript:' not in text.lower() and 'href="data:' not in text.lower()
        ran, hrefs = _click_everything(exe, page)
        assert ran == [], f"{page.name}: injected script ran: {ran}"
        assert hrefs, f"{page.name}: no link was clicked"
        bad = [h for h in hrefs if not h.startswith(("file:", "http:", "https:"))]
        assert bad == [], f"{page.name}: links that are neither files of the run nor http(s): {bad}"
    # the stored bug links: the http(s) one is a link, the javascript: and data: ones are inert text
    dash = (results / "index.html").read_text(encoding="utf-8")
    assert f'href="{BUG_OK}"' in dash and "javascript:pwned(&#x27;bug&#x27;)//" in dash
    # the run folder named javascript:... is linked as a relative path, not as a script URL
    assert "javascript%3Apwned" in dash
    report = (run / "report.html").read_text(encoding="utf-8")
    assert f'href="{BUG_OK}"' in report and 'class="bug">javascript:' in report
