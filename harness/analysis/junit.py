"""A regression run's ``junit.xml`` read into one row per test (:class:`TestRow`: outcome, time,
properties, the failure's reason: its first failing check line, never a traceback line), and
the per-test files of a run directory (``logs/<test>.log``, ``logs/<test>.diag.json``).

Shared by the run's report page (:mod:`.report`), the failure signatures and the importer of
past runs (harness/results), and ``nvdla-hil triage``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["VACUOUS", "SELF_CONSISTENCY", "TestRow", "safe_name", "failure_reason", "error_reason", "parse_junit",
           "oracle_counts", "find_test_file"]

#: the mark of a check that matched before the layer ran (it proves nothing)
VACUOUS = "(vacuous: matched before the layer ran)"


def safe_name(nodeid: str) -> str:
    """The file-name form of a test id, as the plugin names ``logs/<test>.log``."""
    return nodeid.replace("/", "_").replace("::", "__").replace("[", "_").replace("]", "")


@dataclass
class TestRow:
    classname: str
    name: str
    time: float
    outcome: str  # passed / passed (self-consistency) / failed / error / skipped: not modelled / lacks unit / other
    message: str = ""
    text: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    vacuous: list[str] = field(default_factory=list)
    log: str | None = None  # relative to the run directory
    bundle: str | None = None
    diag: dict[str, Any] | None = None

    @property
    def profile(self) -> str:
        return self.properties.get("profile", "")

    @property
    def target(self) -> str:
        return self.properties.get("target", "")

    @property
    def test_id(self) -> str:
        m = re.search(r"\[(.*)\]$", self.name)
        return m.group(1) if m else self.name


def failure_reason(text: str) -> str:
    """The first failing check line (holding ``MISMATCH`` or ``differ``) of a failure text."""
    for line in text.splitlines():
        s = line.strip()
        if re.match(r"^(Failed: )?\S+: (FAILED|ERROR) \(", s):
            continue  # the result's header ("x: FAILED (0.1 s) - 1 of 1 outputs differ"), not a check
        if "MISMATCH" in s or "differ" in s:
            return s
    return ""


_TRACEBACK = re.compile(r'^(>|E |Traceback|  File "|\s{4}|[^\s:]+\.py:\d+)')


def error_reason(message: str, bodies: list[str] | tuple[str, ...] = ()) -> str:
    """The reason of a failure: the first failing check line of the error's message, else of the
    failure text outside traceback lines (source lines, ``E`` lines, ``File ...``), else the
    first line of the error's message - never a line of a traceback."""
    found = failure_reason(message)
    if found:
        return found
    for body in bodies:
        found = failure_reason("\n".join(ln for ln in (body or "").splitlines() if not _TRACEBACK.match(ln)))
        if found:
            return found
    first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    return first.removeprefix("Failed: ")


def parse_junit(path: str | Path) -> list[TestRow]:
    """Every testcase of a (xunit1) JUnit file."""
    root = ET.parse(path).getroot()
    rows: list[TestRow] = []
    for tc in root.iter("testcase"):
        props = {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
        row = TestRow(tc.get("classname", ""), tc.get("name", ""), float(tc.get("time") or 0), "passed",
                      properties=props)
        texts: list[str] = []
        for kind in ("failure", "error", "skipped"):
            el = tc.find(kind)
            if el is None:
                continue
            row.message = el.get("message", "") or ""
            body = (el.text or "")
            texts += [row.message, body]
            if kind == "skipped":
                msg = row.message.removeprefix("Skipped: ")
                why = msg if msg else body
                row.outcome = ("skipped: not modelled" if "not modelled:" in why[:40] else
                               "skipped: lacks unit" if "lacks unit:" in why[:40] else "skipped: other")
            else:
                row.outcome = "failed" if kind == "failure" else "error"
                if props.get("verdict") == "infrastructure":  # harness/boards/health.py: not the hardware's result
                    row.outcome = "infrastructure"
        for tag in ("system-out", "system-err"):
            el = tc.find(tag)
            if el is not None and el.text:
                texts.append(el.text)
        texts += list(props.values())
        joined = "\n".join(texts)
        row.text = "\n".join(t for t in texts[:2])
        if row.outcome in ("failed", "error", "infrastructure"):
            row.reason = error_reason(row.message, texts[1:])
        row.vacuous = [ln.strip() for ln in joined.splitlines() if VACUOUS in ln]
        if row.outcome == "passed" and props.get("golden_source") == "model":
            row.outcome = SELF_CONSISTENCY  # goldens from the model itself: never a plain pass
        rows.append(row)
    return rows


#: outcome of a passing packed-vector test whose goldens are the reference model's own
SELF_CONSISTENCY = "passed (self-consistency)"


def oracle_counts(rows: list[TestRow]) -> dict[str, int]:
    """Passing packed-vector tests per ``golden_source`` kind (JUnit property ``golden_source``):
    rtl / cmod / seed / hand are checked against an oracle, model only for self-consistency."""
    out: dict[str, int] = {}
    for r in rows:
        kind = r.properties.get("golden_source")
        if kind and r.outcome in ("passed", SELF_CONSISTENCY):
            out[kind] = out.get(kind, 0) + 1
    return out


def find_test_file(folder: Path, suffix: str) -> Path | None:
    """The first file of ``folder`` whose name ends with ``suffix`` (a test's log or diagnosis), or None."""
    if not folder.is_dir():
        return None
    hits = sorted(p for p in folder.iterdir() if p.name.endswith(suffix))
    return hits[0] if hits else None
