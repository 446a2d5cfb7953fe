"""Register-access logs of every test (``--nvdla-log DIR``): suites attach their
:class:`~nvdla_hil.drivers.driver.AccessLog` (and the target's link report) with
:func:`attach_access_log`; the plugin writes it after the test, whatever its outcome. The
``nvdla_target`` fixture does this by itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ...drivers.driver import AccessLog
from .keys import LOGS_KEY, RERUN_WAVES_KEY, UNWRITTEN_KEY

def safe_nodeid(nodeid: str) -> str:
    return nodeid.replace("/", "_").replace("::", "__").replace("[", "_").replace("]", "")


def log_dir(config: pytest.Config) -> Path | None:
    """``--nvdla-log`` (the folder for per-test register-access logs), or None."""
    d = config.getoption("--nvdla-log", default=None)
    return Path(d) if d else None


def attach_access_log(request_or_config, nodeid: str | None, log: AccessLog,  # noqa: ANN001
                      link_report=None) -> None:  # noqa: ANN001
    """Have the plugin write ``log`` (every register access of the test) to ``--nvdla-log`` once
    the test ``nodeid`` ends, whatever its outcome; ``link_report`` (a string, or a callable
    returning one, e.g. ``target.link_report``) is written after it. Without ``--nvdla-log``
    nothing is written. ``request_or_config``: the test's ``request`` or the pytest config."""
    config = getattr(request_or_config, "config", request_or_config)
    if nodeid is None:
        nodeid = request_or_config.node.nodeid
    if log_dir(config) is None:
        return
    config.stash[LOGS_KEY][nodeid] = (log, link_report)


def set_link_report(request_or_config, nodeid: str, link_report) -> None:  # noqa: ANN001
    """Replace the link report attached with :func:`attach_access_log` (e.g. once computed)."""
    config = getattr(request_or_config, "config", request_or_config)
    entry = config.stash[LOGS_KEY].get(nodeid)
    if entry is not None:
        config.stash[LOGS_KEY][nodeid] = (entry[0], link_report)


def write_access_log(config: pytest.Config, nodeid: str, log: AccessLog, link_report=None,  # noqa: ANN001
                     suffix: str = "") -> Path | None:  # fmt: skip
    d = log_dir(config)
    if d is None:
        return None
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{safe_nodeid(nodeid)}{suffix}.log"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"# {nodeid}: {len(log.records)} register accesses\n")
        log.dump(fh)
        try:
            link = link_report() if callable(link_report) else link_report
        except Exception as e:  # noqa: BLE001 - the log matters more than the link record
            link = f"(link record unavailable: {e})"
        if link:
            fh.write(f"# link record\n{link}\n")
    return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item):  # noqa: ANN201
    yield
    entry = item.config.stash[LOGS_KEY].pop(item.nodeid, None)
    if entry is not None:  # the re-run with waves keeps the failing run's log and writes its own beside it
        rerun = RERUN_WAVES_KEY in item.config.stash
        log, link_report = entry
        try:
            write_access_log(item.config, item.nodeid, log, link_report, suffix=".waves-rerun" if rerun else "")
        except OSError as e:  # a full or read-only results disk: the test's outcome stands; said once, at the end
            unwritten = item.config.stash.setdefault(UNWRITTEN_KEY, [])
            unwritten.append(f"{e.filename or log_dir(item.config)}: {e.strerror or e}")
