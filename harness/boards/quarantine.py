"""The lab's record of quarantined boards, in the manner of LAVA's health checks: a board that
failed its known-good layer (at session start or after consecutive failures mid-run) is kept out of
every later session until someone repairs it and deletes its entry.

The record is ``nvdla-hil-quarantine.json`` in the lab's lock folder, ``{board: {"since", "reason",
"host", "pid"}}``, written whole (a temporary file renamed into place) so two sessions never
leave a torn file; a labgrid board also gets the reason as its place's comment (best effort).
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from ...drivers.errors import write_atomic

__all__ = ["QUARANTINE_FILE", "quarantine", "quarantine_path", "quarantined", "release_hint"]

#: the lab's quarantine record, in its lock folder
QUARANTINE_FILE = "nvdla-hil-quarantine.json"


def quarantine_path(lab) -> Path:  # noqa: ANN001 - a Lab
    return Path(lab.lock_dir) / QUARANTINE_FILE


def quarantined(lab) -> dict[str, dict]:  # noqa: ANN001
    """The lab's quarantined boards (an unreadable or malformed record counts as none)."""
    try:
        doc = json.loads(quarantine_path(lab).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) else {}


def release_hint(lab, name: str) -> str:  # noqa: ANN001
    """How to bring a repaired board back: what to delete, and where."""
    return f"once it is repaired, delete its entry {name!r} from {quarantine_path(lab)}"


def quarantine(lab, cfg, reason: str) -> None:  # noqa: ANN001 - a Lab, a BoardConfig
    """Record ``cfg``'s board as quarantined in the lab's state file (and, for a labgrid board, as a
    comment on its place, best effort)."""
    record = quarantined(lab)
    record[cfg.name] = {"since": datetime.now(UTC).isoformat(timespec="seconds"), "reason": reason,
                        "host": socket.gethostname(), "pid": os.getpid()}
    write_atomic(quarantine_path(lab), json.dumps(record, indent=2) + "\n")
    if cfg.labgrid_place:
        import subprocess
        import sys

        from .labgrid_place import coordinator_address

        client = Path(sys.executable).with_name("labgrid-client")
        if client.exists():
            subprocess.run([str(client), "-x", coordinator_address(cfg.labgrid_coordinator), "-p", cfg.labgrid_place,
                            "set-comment", f"nvdla-hil quarantine: {reason}"[:500]], capture_output=True, timeout=60,
                           check=False)
