"""A regression run's ``junit.xml`` read into one row per test (:class:`TestRow`: outcome, time,
properties, the failure's reason: its first failing check line, never a traceback line), and
the per-test files of a run directory (``logs/<test>.log``, ``logs/<test>.diag.json``).

Shared by the run's report page (:mod:`.report`), the failure signatures and the importer of
past runs (harness/results), and ``nvdla-hil triage``.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...drivers.files import read_regular  # noqa: F401 - re-exported: one rule for every untrusted file

from ...drivers.errors import InputError

__all__ = ["VACUOUS", "SELF_CONSISTENCY", "INTERRUPTED", "TestRow", "safe_name", "failure_reason", "error_reason",
           "parse_junit", "oracle_counts", "find_test_file", "read_regular", "read_run_json", "MAX_JUNIT_BYTES",
           "MAX_RUN_JSON_BYTES"]

#: the largest junit.xml and run.json read from a run directory (a bigger one is refused, naming it)
MAX_JUNIT_BYTES = 256 << 20
MAX_RUN_JSON_BYTES = 4 << 20

#: the outcome of a test the session was stopped in before it had a result (JUnit ``<error
#: type="interrupted">``, written by harness/plugin/junit.py): never a pass
INTERRUPTED = "interrupted"


#: run.json fields and the types they must have when present (written by harness/cli/regress.py)
_RUN_JSON_FIELDS: dict[str, tuple[type, ...]] = {
    "command": (list,), "pytest_argv": (list,), "started": (str,), "ended": (str,), "status": (str,),
    "result": (str,), "host": (str,), "version": (str,), "cwd": (str,), "junit": (str,), "logs": (str,),
    "seconds": (int, float), "exit_code": (int, type(None)), "pytest_exit_code": (int, type(None)),
    "pid": (int, type(None)),
}


def read_run_json(run: str | Path) -> dict[str, Any]:
    """A run directory's ``run.json`` as a dict (``{}`` when there is none); an unreadable,
    oversized or non-regular file, invalid JSON, a document that is not an object or a field of the
    wrong type is an :class:`InputError` naming the file."""
    path = Path(run) / "run.json"
    try:
        data = read_regular(path, MAX_RUN_JSON_BYTES)
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise InputError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: a JSON {type(doc).__name__}, not an object (the run record nvdla-hil regress writes)")
    for key, types in _RUN_JSON_FIELDS.items():
        if key in doc and (not isinstance(doc[key], types) or isinstance(doc[key], bool)):
            raise InputError(f"{path}: field {key!r} is a {type(doc[key]).__name__}, not "
                             + " or ".join("null" if t is type(None) else t.__name__ for t in types))
    for key in ("command", "pytest_argv"):
        if key in doc and not all(isinstance(a, str) for a in doc[key]):
            raise InputError(f"{path}: field {key!r} must be a list of strings")
    if isinstance(doc.get("seconds"), float) and not math.isfinite(doc["seconds"]):
        raise InputError(f"{path}: field 'seconds' is not a finite number")
    return doc

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


def _time(tc: ET.Element, path: Path) -> float:
    raw = tc.get("time") or "0"
    try:
        t = float(raw)
    except ValueError:
        t = math.nan
    if not math.isfinite(t) or t < 0:
        raise InputError(f"{path}: testcase {tc.get('name', '')!r}: time {raw!r} is not a number of seconds")
    return t


def _junit_root(path: Path) -> ET.Element:
    data = read_regular(path, MAX_JUNIT_BYTES)
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:  # pytest writes neither; entities can explode
        raise InputError(f"{path}: a DOCTYPE or ENTITY declaration (not a JUnit file pytest writes)")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise InputError(f"{path}: not valid JUnit XML: {e}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise InputError(f"{path}: not a JUnit file (its root element is <{root.tag}>, not <testsuites>)")
    return root


def parse_junit(path: str | Path) -> list[TestRow]:
    """Every testcase of a (xunit1) JUnit file; a malformed one is an :class:`InputError` naming it."""
    path = Path(path)
    root = _junit_root(path)
    rows: list[TestRow] = []
    for tc in root.iter("testcase"):
        props = {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
        row = TestRow(tc.get("classname", ""), tc.get("name", ""), _time(tc, path), "passed",
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
                if kind == "error" and el.get("type") == INTERRUPTED:  # cut off by an interrupt: no result
                    row.outcome = INTERRUPTED
        for tag in ("system-out", "system-err"):
            el = tc.find(tag)
            if el is not None and el.text:
                texts.append(el.text)
        texts += list(props.values())
        joined = "\n".join(texts)
        row.text = "\n".join(t for t in texts[:2])
        if row.outcome in ("failed", "error", "infrastructure"):
            row.reason = error_reason(row.message, texts[1:])
        elif row.outcome == INTERRUPTED:
            row.reason = row.message
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
