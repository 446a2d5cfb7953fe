"""Where the RTL coverage of a session's simulators goes (``regress --rtl-coverage``, ``fuzz
--steer``): per test, a compacted Verilator coverage file (:mod:`nvdla_hil.sims.coverage`),
written when the test releases its simulator. The simulator is a fresh one per test (a warm
reset leaves RAMs and non-reset flops as the previous test left them, so toggles would depend on
the order); its start-up is counted apart (:data:`STARTUP`) so each test's file holds only what
the test did from NVDLA's reset state."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["RAW_PREFIX", "STARTUP", "RtlCoverageFolder", "remove_orphaned_raw_dirs"]


#: the pseudo-test a simulator's start-up (power-up and first reset) is counted under
STARTUP = "<simulator start-up and reset>"


#: the name of a raw-file folder in ``/dev/shm`` starts with this, then the owner's process id
RAW_PREFIX = "nvdla-hil-cov-"


def remove_orphaned_raw_dirs(where: Path) -> list[Path]:
    """Remove the raw-file folders in ``where`` (``RAW_PREFIX<pid>-...``) of this user whose
    process is gone; return them. A folder of a live process, of another user or not named so
    is left alone."""
    gone = []
    for d in where.glob(f"{RAW_PREFIX}*"):
        pid = d.name[len(RAW_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or d.is_symlink() or not d.is_dir() or d.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
        except OSError:  # PermissionError: a live process of another user; the folder vanished
            continue
    return gone


class RtlCoverageFolder:
    """Where the RTL coverage of a session's simulators goes: per test (and per target the test
    opened) the counts Verilator wrote, compacted (:func:`nvdla_hil.sims.coverage.compact`) into
    ``folder/<build key>/``, named after the test the pytest plugin says is running
    (``current_test``), with a ``.json`` beside it naming the test. ``kinds`` selects the
    instrumented build (``sim build --coverage``). The files are merged by
    :func:`nvdla_hil.harness.analysis.rtl_coverage.merge_folder`."""

    def __init__(self, folder: str | os.PathLike[str], kinds: Sequence[str]) -> None:
        from nvdla_hil.sims.build import coverage_kinds

        self.folder = Path(folder)
        self.kinds = tuple(coverage_kinds(list(kinds)))
        if not self.kinds:
            raise ValueError("RTL coverage needs at least one kind (line, toggle)")
        self.current_test = "outside-a-test"
        self._n = 0
        self._lock = threading.Lock()
        self.lost: list[str] = []  # tests whose counts died with their simulator
        self._started: set[str] = set()  # builds whose start-up this process has written
        self._raw: Path | None = None  # the private folder raw files are written to (see _raw_dir)

    def started(self, sim: Any) -> None:
        """A simulator just started (power-up and NVDLA's reset): its counts so far are the
        start-up's (:data:`STARTUP`), not the test's, so every test's file holds only what it
        did from the reset state, whichever process or simulator ran it. The start-up is the
        same every time: it is written once per process and build, then only zeroed."""
        key = str(sim.build.key)
        if key in self._started:
            sim.zero_rtl_coverage()
            return
        self.collect(sim, test=STARTUP)
        self._started.add(key)

    def reset_done(self, sim: Any) -> None:
        """A warm simulator was reset between two tests: drop what the reset counted (toggles
        from the previous test's values, which depend on which test ran before)."""
        sim.zero_rtl_coverage()

    def _raw_dir(self) -> Path:
        """Where the simulator writes a raw file before it is compacted: a private folder in
        memory (``/dev/shm``) when there is one (the raw file is 135 MB on nv_small), else the
        coverage folder itself. Its name holds this process's id, so the folders of processes
        killed before :meth:`close` (SIGKILL, a SIGTERM no handler caught) are removed by the
        next one (:func:`remove_orphaned_raw_dirs`): memory is not leaked night after night."""
        with self._lock:
            if self._raw is None:
                shm = Path("/dev/shm")
                if shm.is_dir() and os.access(shm, os.W_OK):
                    remove_orphaned_raw_dirs(shm)
                    self._raw = Path(tempfile.mkdtemp(prefix=f"{RAW_PREFIX}{os.getpid()}-", dir=shm))
                else:
                    self._raw = self.folder
            return self._raw

    def close(self) -> None:
        """Remove the private raw-file folder (files already compacted stay in ``folder``)."""
        with self._lock:
            raw, self._raw = self._raw, None
        if raw is not None and raw != self.folder:
            shutil.rmtree(raw, ignore_errors=True)

    def collect(self, sim: Any, test: str | None = None) -> Path:
        """Write what ``sim`` counted since its last collection (and zero it), compacted at once
        into ``<folder>/<build key>/<test>.<pid>.<n>.npz`` (a raw file is 135 MB on nv_small)."""
        from nvdla_hil.sims.coverage import compact

        with self._lock:
            self._n += 1
            n = self._n
        test = test or self.current_test
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", test)[-150:].strip("._") or "test"
        self.folder.mkdir(parents=True, exist_ok=True)
        raw = self._raw_dir() / f"{safe}.{os.getpid()}.{n}.dat"
        try:
            sim.write_rtl_coverage(raw)
            return compact(raw, self.folder, test=test, config=sim.profile_name, build=str(sim.build.key))
        finally:
            raw.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"RtlCoverageFolder({str(self.folder)!r}, kinds={','.join(self.kinds)})"
