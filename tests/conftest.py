"""Shared fixtures of the project's own tests.

NVDLA's trace tests are outside truth: they are found through ``--nvdla-traces`` (the
plugin's option) or ``NVDLA_TRACES``; tests that need them skip cleanly when absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def trace_root(pytestconfig: pytest.Config) -> Path:
    root = pytestconfig.getoption("--nvdla-traces", default=None) or os.environ.get("NVDLA_TRACES")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA trace tests not found: pass --nvdla-traces PATH or set NVDLA_TRACES")
    return Path(root)
