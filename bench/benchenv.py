"""What every benchmark script finds the same way: the tool, NVDLA's checkouts and traces, and a
private folder for its files.

* The tool is the running interpreter's (``sys.executable -m nvdla_hil.harness.cli``): a bench
  works from any environment that has nvdla-hil installed (the project's .venv, another venv, an
  installed wheel, CI's), never from a path into the checkout.
* A checkout or trace folder comes from the option, else its environment variable (the same ones
  the CLI reads: ``NVDLA_HW``, ``NVDLA_HW_V1``, ``NVDLA_SW``, ``NVDLA_TRACES``), else the public
  copies beside the repository (``../shared``) when they are there; missing, :func:`need` says in
  one line what to set.
* Files a bench keeps between runs live under the user's cache
  (``~/.cache/nvdla-hil/bench``, ``XDG_CACHE_HOME``), never in a folder shared by every user of
  the machine.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

#: environment variable -> (what it is, the public copy beside the repository)
CHECKOUTS: dict[str, tuple[str, Path]] = {
    "NVDLA_HW": ("an nvdla/hw checkout (master)", SHARED / "nvdla_src" / "hw"),
    "NVDLA_HW_V1": ("an nvdla/hw checkout of branch nvdlav1 (nv_full's C model)", SHARED / "nvdla_src" / "hw-v1"),
    "NVDLA_SW": ("an nvdla/sw checkout (firmware, compiler)", SHARED / "nvdla_src" / "sw"),
    "NVDLA_TRACES": ("a folder of NVDLA's nv_small trace tests", SHARED / "nvdla" / "trace_tests" / "nv_small"),
}


def cli() -> list[str]:
    """``nvdla-hil`` as the running environment has it."""
    return [sys.executable, "-m", "nvdla_hil.harness.cli"]


def default(var: str) -> str | None:
    """``$var``, else the public copy beside the repository when it exists, else None."""
    value = os.environ.get(var)
    if value:
        return value
    fallback = CHECKOUTS[var][1]
    return str(fallback) if fallback.is_dir() else None


def need(value: str | None, var: str, option: str) -> str:
    """``value``, or exit 2 saying in one line which option or variable to set."""
    if value:
        return value
    what = CHECKOUTS[var][0]
    print(f"{Path(sys.argv[0]).name}: needs {what}: pass {option} PATH or set {var}", file=sys.stderr)
    raise SystemExit(2)


def private_folder(name: str) -> Path:
    """A folder of this user's for the bench's kept files (mode 0700)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nvdla-hil" / "bench" / name
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    return base
