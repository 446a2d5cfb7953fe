"""The session's memo of simulator builds (``harness/targets/builds.py``): each (checkout,
configuration) resolves once, a build whose executable has gone is resolved again, a copy sent to
a worker starts empty, and a spec's copies share one memo."""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from pathlib import Path

from nvdla_hil.harness.targets import TargetSpec
from nvdla_hil.harness.targets.builds import BuildCache

@dataclass
class _Build:
    executable: Path

def test_each_key_is_resolved_once_while_its_executable_exists(tmp_path):
    exe = tmp_path / "Vtop"
    exe.write_bytes(b"\x7fELF")
    calls: list[str] = []

    def make() -> _Build:
        calls.append("made")
        return _Build(exe)

    cache = BuildCache()
    first = cache.get(("hw", "nv_small"), make)
    assert cache.get(("hw", "nv_small"), make) is first
    assert calls == ["made"] and len(cache) == 1
    cache.get(("hw", "nv_large"), make)
    assert calls == ["made", "made"] and len(cache) == 2
    exe.unlink()  # a cleaned build folder: the memo must not hand out a dead executable
    cache.get(("hw", "nv_small"), make)
    assert calls == ["made", "made", "made"]

def test_a_copy_starts_empty(tmp_path):
    exe = tmp_path / "Vtop"
    exe.write_bytes(b"")
    cache = BuildCache()
    cache.get("k", lambda: _Build(exe))
    assert len(cache) == 1
    assert len(pickle.loads(pickle.dumps(cache))) == 0
    assert len(copy.deepcopy(cache)) == 0

def test_a_specs_copies_share_one_memo():

    spec = TargetSpec(kind="verilator", profile="nv_small", nvdla_hw="/hw")
    assert spec.with_profile("nv_large").build_cache is spec.build_cache
    assert TargetSpec(kind="verilator").build_cache is not spec.build_cache  # another session: its own


def test_a_target_runs_the_build_it_was_given_else_the_memo(tmp_path):
    from nvdla_hil.harness.targets.builds import resolve_build

    exe = tmp_path / "Vtop"
    exe.write_bytes(b"")

    class Loaded(_Build):
        @classmethod
        def load(cls, folder: Path) -> Loaded:
            return cls(folder / "Vtop")

    made: list[int] = []

    def make() -> Loaded:
        made.append(1)
        return Loaded(exe)

    given = Loaded(exe)
    assert resolve_build(given, Loaded, make, BuildCache(), "k") is given
    assert resolve_build(str(tmp_path), Loaded, make, None, "k").executable == exe  # a build folder: loaded
    cache = BuildCache()
    first = resolve_build(None, Loaded, make, cache, "k")
    assert resolve_build(None, Loaded, make, cache, "k") is first and made == [1]
    resolve_build(None, Loaded, make, None, "k")  # no memo: built (found in the disk cache) every time
    assert made == [1, 1]
