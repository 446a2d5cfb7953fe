"""Text read from files and databases, made safe where it is shown: :func:`term_safe` for a
terminal (a test name holding ``ESC ] 0 ; title BEL`` or ``ESC [ 2 J`` must not retitle the
window or clear the screen), :func:`http_link` and :func:`rel_link` for an HTML ``href`` (a
label's bug link ``javascript:...`` must never become a link that runs script).

Every name that comes from a file (a vector case, a trace, a JUnit testcase, a label, a board)
goes through :func:`term_safe` before it is printed: the regression summary, the live progress,
the failure clusters at the end of a run, ``nvdla-hil history`` and ``nvdla-hil dashboard``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlsplit

__all__ = ["term_safe", "is_term_safe", "http_link", "rel_link", "LINK_SCHEMES"]

#: C0 controls (tab and newline included: a name is one line), DEL, C1 controls (``\x9b`` is a
#: CSI on some terminals), and the Unicode bidirectional overrides and isolates that reorder what
#: a terminal shows ("Trojan source")
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

#: the schemes a link read from a file or database may have
LINK_SCHEMES = ("http", "https")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def term_safe(text: Any, *, lines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``), so
    printing it can neither move the cursor, clear the screen, set the window title nor hide text.
    ``lines``: keep newlines and tabs (a multi-line failure text)."""
    s = str(text if text is not None else "")
    if lines:
        return "\n".join(_UNSAFE.sub(_escape, ln).replace("\\x09", "\t") for ln in s.split("\n"))
    return _UNSAFE.sub(_escape, s)


def is_term_safe(text: str, *, lines: bool = False) -> bool:
    """True when ``text`` has nothing :func:`term_safe` would escape."""
    return term_safe(text, lines=lines) == text


def http_link(url: Any) -> str | None:
    """``url`` when it is an absolute ``http(s)://host/...`` link, else None (``javascript:``,
    ``data:``, ``file:``, a scheme hidden behind control characters or blanks: no link is drawn)."""
    s = str(url or "").strip()
    if not s or _UNSAFE.search(s) or any(c.isspace() for c in s):
        return None
    try:
        parts = urlsplit(s)
    except ValueError:
        return None
    if parts.scheme.lower() not in LINK_SCHEMES or not parts.netloc:
        return None
    return s


def rel_link(path: str) -> str:
    """An ``href`` for a path relative to the page the tool wrote (a log, a bundle, a run's report):
    percent-encoded, so a folder named ``javascript:x`` or ``a#b`` stays a relative path."""
    return quote(path.replace("\\", "/"), safe="/")
