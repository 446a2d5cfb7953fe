"""Failure signatures: what kind of failure a test had, from the structured failure, not its text.

A failing trace test leaves a diagnosis sidecar (``logs/<test>.diag.json``, harness/analysis/report.py):
the failing check, each differing region as (c, h, w) coordinates of the unit's output cube with
expected and actual values, and the suspect registers of harness/analysis/triage.py. The signature is
made of

* ``outcome``: failed (a check) or error (an exception before/after the check),
* ``check``: the kind of the first failing check (``crc``, ``mem``, ``timeout``, ``interrupt``...),
* ``unit``: the unit(s) whose output cube differs (SDP, CDP, PDP...),
* ``pattern``: how the differing elements lie in the cube (``border``, ``dense``, ``one-channel``,
  ``one-line``, ``one-column``, ``sparse``; ``bytes`` without a cube) and where the worst one is
  (``uniform`` when every error has one size),
* ``magnitude``: the class of the largest |actual - expected| (1, 2-3, 4-15, 16-255, 256+)
  and its sign (``+``, ``-``, ``±``),
* ``suspect``: the first suspect register that explains the bytes exactly (else ``-``),
* ``exception``: the exception type, for errors (``BoardDeadError``, ``TimeoutError``...).

Failures without a sidecar (a setup error, a bad trace, a packed vector) fall back to the
exception type and the error message with its numbers and hex values masked. The id is the
first 12 hex digits of the SHA-256 of the readable key.

Clusters (:func:`cluster_map`): failures with the same signature form one cluster, across tests
and runs. The suspect-register search is budgeted (harness/analysis/triage.py, 10 s in the suites), so on a
busy machine it may end before it finds the register that explains a failure; a signature
without a suspect therefore joins the cluster of the one signature that is identical but for
an explaining suspect, when there is exactly one. A label given to a cluster (:mod:`.labels`)
comes back with it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import numpy as np

__all__ = ["failure_info", "signature_of", "magnitude_class", "coord_pattern", "error_message", "mask_text",
           "cluster_map"]

_MAG_EDGES = ((1, "1"), (3, "2-3"), (15, "4-15"), (255, "16-255"))
_CHECK_RE = re.compile(r"^\S+: (crc|mem|memcmp|file|poll|intr|interrupt|timeout|compare|check|read)\b", re.I)


def magnitude_class(err: int) -> str:
    """The class of an absolute error size: ``0``, ``1``, ``2-3``, ``4-15``, ``16-255``, ``256+``."""
    if err <= 0:
        return "0"
    for edge, name in _MAG_EDGES:
        if err <= edge:
            return name
    return "256+"


def coord_pattern(region: dict[str, Any]) -> dict[str, str]:
    """``pattern``, ``magnitude`` and ``sign`` of one sidecar region (vectorised over its coordinates).

    The pattern is where the differing elements lie: ``border`` (only on the first/last line or
    column: padding, edges), ``dense`` (half of the cube or more), ``one-channel``, ``one-line``,
    ``one-column`` or ``sparse``; then ``uniform`` when every error has one size, else where the
    worst one is (``worst@border`` / ``worst@interior``)."""
    cube = region.get("cube")
    coords = np.asarray(region.get("coords") or [], dtype=np.int64).reshape(-1, 3)
    exp = np.asarray(region.get("expected") or [], dtype=np.int64)
    act = np.asarray(region.get("actual") or [], dtype=np.int64)
    if cube is None or not coords.size or exp.shape != act.shape or exp.size != len(coords):
        return {"pattern": "bytes", "magnitude": "?", "sign": "?"}
    diff = act - exp
    err = np.abs(diff)
    n = int(region.get("n_elements", len(coords)))
    height, width, chans = int(cube["height"]), int(cube["width"]), int(cube["channels"])
    frac = n / max(chans * height * width, 1)
    h, w = coords[:, 1], coords[:, 2]
    on_border = (h == 0) | (h == height - 1) | (w == 0) | (w == width - 1)
    if height > 2 and width > 2 and bool(on_border.all()) and frac < 0.5:
        extent = "border"
    elif frac >= 0.5:
        extent = "dense"
    elif n > 1 and len(np.unique(coords[:, 0])) == 1:
        extent = "one-channel"
    elif n > 1 and len(np.unique(h)) == 1:
        extent = "one-line"
    elif n > 1 and len(np.unique(w)) == 1:
        extent = "one-column"
    else:
        extent = "sparse"
    if int(err.min()) == int(err.max()):
        worst = "uniform"
    else:
        worst = "worst@border" if bool(on_border[int(np.argmax(err))]) else "worst@interior"
    sign = "+" if bool((diff > 0).all()) else "-" if bool((diff < 0).all()) else "±"
    return {"pattern": f"{extent} {worst}", "magnitude": magnitude_class(int(err.max())), "sign": sign}


def mask_text(text: str) -> str:
    """``text`` with hex values, numbers and bracketed test ids masked (``#``), for the fallback key."""
    t = re.sub(r"0x[0-9a-fA-F]+", "#", text)
    t = re.sub(r"\[[^\]]*\]", "[#]", t)
    t = re.sub(r"\d+(\.\d+)?", "#", t)
    return re.sub(r"\s+", " ", t).strip()[:160]


def error_message(exc_type: str, message: str, text: str = "") -> str:
    """The reason of a failure: the first failing check line when there is one, else the
    first line of the error's own message (``Type: message`` for an exception other than
    pytest's ``Failed``) - never a line of a traceback."""
    from ..analysis.junit import failure_reason

    check = failure_reason(message) or failure_reason(text)
    if check:
        return check
    first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    if exc_type and exc_type not in ("Failed", "AssertionError", "Skipped"):
        return f"{exc_type}: {first}" if first else exc_type
    return first or exc_type


def failure_info(outcome: str, when: str, exc_type: str, message: str,
                 diag: dict[str, Any] | None = None, text: str = "") -> dict[str, Any]:  # fmt: skip
    """The structured failure of one test (JSON-able; travels on the report through xdist and Dask)."""
    info: dict[str, Any] = {"outcome": outcome, "when": when, "exception": exc_type or "",
                            "reason": error_message(exc_type, message, text)}
    m = _CHECK_RE.match(info["reason"])
    check = m.group(1).lower() if m else ""
    if "timed out" in message or "timeout" in message.lower()[:200]:
        check = check or "timeout"
    info["check"] = check
    if diag:
        regions = diag.get("regions") or []
        units = sorted({str(r["cube"]["unit"]) for r in regions if r.get("cube")})
        info["unit"] = ",".join(units)
        if regions:
            info.update(coord_pattern(regions[0]))
            info["regions"] = len(regions)
        sus = next((s["register"] for s in diag.get("suspects") or [] if s.get("explains")), "")
        info["suspect"] = sus
        checks = diag.get("checks") or []
        failing = next((c for c in checks if "MISMATCH" in c or "differ" in c), "")
        m = _CHECK_RE.match(failing)
        if m:
            info["check"] = m.group(1).lower()
        if failing and not _CHECK_RE.match(info["reason"]):
            info["reason"] = failing
    return info


def signature_of(info: dict[str, Any]) -> tuple[str, str]:
    """``(id, key)``: the signature of a structured failure (:func:`failure_info`)."""
    outcome = info.get("outcome", "failed")
    exc = info.get("exception", "")
    if info.get("pattern"):
        key = " | ".join([outcome, info.get("check") or "check", info.get("unit") or "?", info["pattern"],
                          f"err {info.get('magnitude', '?')}{info.get('sign', '')}", f"suspect {info.get('suspect') or '-'}"])
    elif info.get("check") and outcome == "failed":
        key = " | ".join([outcome, info["check"], info.get("unit") or "?", mask_text(info.get("reason", ""))])
    else:
        key = " | ".join([outcome, exc or "?", mask_text(info.get("reason", ""))])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:12], key


_SUSPECT_SEP = " | suspect "


def cluster_map(keys: dict[str, str]) -> dict[str, str]:
    """signature id -> the id of its cluster, from ``{id: readable key}`` (see the module doc)."""
    by_base: dict[str, list[tuple[str, str]]] = {}
    for sig, key in keys.items():
        base, _, suspect = (key or "").partition(_SUSPECT_SEP)
        by_base.setdefault(base, []).append((sig, suspect))
    out: dict[str, str] = {}
    for members in by_base.values():
        explained = sorted(s for s, sus in members if sus and sus != "-")
        for sig, sus in members:
            out[sig] = explained[0] if (sus == "-" and len(explained) == 1) else sig
    return out
