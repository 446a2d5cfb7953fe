"""NVDLA's public checkouts the project's tests default to, so nothing skips for want of one.

``../shared/nvdla_src`` beside the repository holds nvdla/hw master (``hw``: RTL, spec, master's
C model and AC headers), nvdla/hw nvdlav1 (``hw-v1``: nv_full's C model) and nvdla/sw (``sw``).
They are read-only (in CI too): every build goes to the cache, and NVDLA's tmake flow runs in a
working copy there (nvdla_hil/sims/checkout.py). ``NVDLA_HW``, ``NVDLA_HW_V1`` (and ``NVDLA_SW``)
point the tests at your own checkouts instead.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

SHARED_SRC = Path(__file__).resolve().parents[1].parent / "shared" / "nvdla_src"
#: the environment variable of each checkout, and its folder in ../shared/nvdla_src
#: (nvdla/sw is found by the ``nvdla_sw`` fixture of conftest.py, NVDLA_SW else ``sw``)
DEFAULTS = {"NVDLA_HW": "hw", "NVDLA_HW_V1": "hw-v1"}


def set_default_checkouts(environ: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, str]:
    """Point each unset checkout variable at the shared checkout (when it is there); the ones set."""
    chosen = {}
    for var, sub in DEFAULTS.items():
        if not environ.get(var) and (SHARED_SRC / sub).is_dir():
            environ[var] = chosen[var] = str(SHARED_SRC / sub)
    return chosen


def generated_rtl(hw: str | os.PathLike[str], config: str = "nv_small") -> Path:
    """The tree that holds ``outdir/<config>/vmod`` for the nvdla/hw checkout ``hw``. A read-only
    checkout (the shared one) gets it made once, by ``sim setup`` in its working copy in the cache
    (about a minute; one process at a time); a writable checkout without it is the user's to set
    up: the test skips, naming the command."""
    from nvdla_hil.sims.cache import cache_base
    from nvdla_hil.sims.checkout import generated_root, is_generated, is_read_only
    from nvdla_hil.sims.setup import run_setup

    hw = Path(hw).expanduser().resolve()
    root = generated_root(hw, config)
    if is_generated(root, config):
        return root
    if not is_read_only(hw):
        pytest.skip(f"{hw} has no generated RTL of {config}: run nvdla-hil sim setup --nvdla-hw {hw} --config {config}")
    lock = cache_base() / "src" / f".setup-{hw.name}-{config}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    with open(lock, "w") as f:
        fcntl.lockf(f, fcntl.LOCK_EX)  # another xdist worker may be generating it
        if not is_generated(generated_root(hw, config), config):
            rc = run_setup(hw, config, apply_fixes=config != "nv_small", progress=lines.append)
            if rc != 0:
                pytest.fail(f"sim setup of the read-only checkout {hw} ({config}) failed (exit {rc}):\n" +
                            "\n".join(lines[-30:]))
    return generated_root(hw, config)
