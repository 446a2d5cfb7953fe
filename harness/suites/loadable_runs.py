"""What the loadables and networks suites share: a loadable run through NVDLA's firmware on the
profile it was written for, on the session's target left in its reset state (the firmware and
NVDLA's traces assume every unit at group 0).

:func:`firmware_checkout` skips a test when there is no nvdla/sw checkout (``--nvdla-sw`` or
``NVDLA_SW``); :func:`run_on_its_profile` skips it ("lacks unit") when the run may not use the
loadable's profile, else runs it (:func:`~nvdla_hil.harness.loadables.check.check_loadable`) and
records its profile and output MD5 as JUnit properties. Each suite decides what the verdict means.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nvdla_hil.harness.plugin import SKIP_LACKS, configured_profiles, suite_spec
from nvdla_hil.harness.targets import firmware_spec, open_target

__all__ = ["SKIP_NO_SW", "firmware_checkout", "run_on_its_profile"]

SKIP_NO_SW = "no nvdla/sw checkout"


def firmware_checkout(config: pytest.Config, name: str) -> str:
    """The nvdla/sw checkout whose firmware runs ``name``; a skip saying what to pass without one."""
    sw = config.getoption("--nvdla-sw", default=None) or os.environ.get("NVDLA_SW") or None
    if not sw:
        pytest.skip(f"{SKIP_NO_SW}: {name} runs through NVDLA's firmware (kmd/firmware); pass --nvdla-sw PATH "
                    "or set NVDLA_SW to an nvdla/sw checkout")
    return sw


def run_on_its_profile(name: str, path: Path, golden: Path | None, config: pytest.Config,
                       record_property: Callable[[str, object], None], warm_pool: Any, sw: str,
                       input_path: Path | None = None, profile: str | None = None) -> tuple[Any, Any, Any]:  # fmt: skip
    """(verdict, target spec, profile) of ``path`` run on the profile it was written for
    (``profile``, else the one :func:`~nvdla_hil.harness.loadables.check.profile_for_loadable` reads)."""
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.loadables.check import check_loadable, profile_for_loadable, read_loadable

    prof_name = profile or profile_for_loadable(read_loadable(path))
    if prof_name not in configured_profiles(config):
        pytest.skip(f"{SKIP_LACKS}: {name} was written for {prof_name}; the run may use "
                    f"{', '.join(configured_profiles(config))}")
    prof = load_profile(prof_name)
    record_property("profile", prof.name)
    spec = firmware_spec(suite_spec(config, prof))  # back-to-back convolutions: nvdla/hw#183 (clock gating "auto")
    if spec.extra.get("clock_gating") is False:
        record_property("rtl_clock_gating", "off")

    @contextlib.contextmanager
    def open_in_reset_state(s):  # noqa: ANN001, ANN202 - a TargetSpec; a target
        with open_target(s, warm=warm_pool) as t:
            not_reset = t.not_in_reset_state()
            if not_reset:
                pytest.skip(f"{path.name}: {not_reset}")
            yield t

    v = check_loadable(path, spec=spec, nvdla_sw=sw, golden=golden, open_target=open_in_reset_state,
                       input_path=str(input_path) if input_path else None)
    record_property("md5", v.md5)
    return v, spec, prof
