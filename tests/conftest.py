"""Shared fixtures of the project's own tests.

NVDLA's trace tests are outside truth: they are found through ``--nvdla-traces`` (the
plugin's option) or ``NVDLA_TRACES``; tests that need them skip cleanly when absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests: `make test` runs the "ci" profile, derandomised so a run is reproducible
# and a red CI names a failure anyone can replay; `make fuzz` runs "explore" with fresh
# random seeds, ten rounds. A failure found there becomes an @example.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)


@pytest.fixture(scope="session")
def trace_root(pytestconfig: pytest.Config) -> Path:
    root = pytestconfig.getoption("--nvdla-traces", default=None) or os.environ.get("NVDLA_TRACES")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA trace tests not found: pass --nvdla-traces PATH or set NVDLA_TRACES")
    return Path(root)
