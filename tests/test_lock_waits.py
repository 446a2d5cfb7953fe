"""A wait for a lock another process holds says who holds it (pid, command, since), at once and
then periodically, says when the holder is gone, and is measured and reported apart from the
test's own time (issue 39).

Every holder here is a real process that holds the lock until the test releases it through its
stdin (a line, or end of file): no wait depends on a guessed number of seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nvdla_hil.harness.boards.locks import BoardLock
from nvdla_hil.sims import cache as simcache
from nvdla_hil.sims import lockwait

HANG_GUARD_S = 300.0  # only for a test that would otherwise hang; every wait ends on its event

#: holds the build lock of cache entry <root>/k while it "builds", until a line on stdin
_CACHE_HOLDER = r"""
import sys
from pathlib import Path
from nvdla_hil.sims import cache

def build(tmp):
    print("held", flush=True)
    sys.stdin.readline()  # until the test releases it
    (tmp / "obj").mkdir()
    exe = tmp / "obj" / "sim"
    exe.write_bytes(b"\x7fELF" + bytes(200))
    exe.chmod(0o755)
    return {"executable": "obj/sim", "config": "x"}

cache.get_or_build(Path(sys.argv[1]), "k", build, progress=lambda m: None)
"""

#: holds a board lock (flock) until a line on stdin
_BOARD_HOLDER = r"""
import sys
from nvdla_hil.harness.boards.locks import BoardLock
lk = BoardLock("socket://127.0.0.1:7", sys.argv[1], board="arty")
lk.acquire()
print("held", flush=True)
sys.stdin.readline()
lk.release()
"""

#: takes a flock, names itself as holder, forks a process that inherits the lock and exits: the
#: lock is then kept by a process the record does not name (the named holder is gone)
_FORKING_HOLDER = r"""
import fcntl, os, sys
from nvdla_hil.sims import lockwait
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
lockwait.write_holder(fd, "test holder")
if os.fork() == 0:   # the heir: keeps the lock until a line (or end of file) on stdin
    sys.stdin.readline()
    os._exit(0)
print("held", flush=True)
os._exit(0)
"""


def _holder(script: str, *args: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "held"
    return p


def _release(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.write("go\n")
    p.stdin.flush()


class _Says:
    """A ``say``/``progress`` callback that keeps every message, and sets ``waiting`` at the
    first "waiting for" message (then runs ``on_wait``, e.g. releasing the holder)."""

    def __init__(self, on_wait=None) -> None:  # noqa: ANN001
        self.msgs: list[str] = []
        self.waiting = threading.Event()
        self.on_wait = on_wait

    def __call__(self, msg: str) -> None:
        self.msgs.append(msg)
        if "waiting for" in msg and not self.waiting.is_set():
            self.waiting.set()
            if self.on_wait is not None:
                self.on_wait(msg)


def test_a_build_waiting_on_another_process_says_who_and_records_the_wait(tmp_path: Path) -> None:
    holder = _holder(_CACHE_HOLDER, str(tmp_path))
    says = _Says()
    got: dict = {}

    def waiter() -> None:
        with lockwait.recording() as waits:
            got["data"] = simcache.get_or_build(tmp_path, "k", lambda tmp: pytest.fail("built twice"), progress=says)
        got["waits"] = waits

    t = threading.Thread(target=waiter)
    try:
        t.start()
        assert says.waiting.wait(HANG_GUARD_S), says.msgs
        first = next(m for m in says.msgs if "waiting for" in m)
        # at once: the lock, and its holder by pid and command line
        assert f"sim build: waiting for {tmp_path / 'k.lock'}: held by pid {holder.pid} (" in first, first
        assert f"({sys.executable} -c " in first, first  # the holder's command line
        assert " since 20" in first and "another process is building this entry" in first, first
        _release(holder)
        t.join(HANG_GUARD_S)
    finally:
        with contextlib.suppress(OSError):
            holder.stdin.close()  # type: ignore[union-attr]  # end of file: a holder still waiting goes on
        holder.wait(HANG_GUARD_S)
    assert holder.returncode == 0
    assert got["data"]["executable"] == str(tmp_path / "k" / "obj" / "sim")
    assert any("built by another process" in m for m in says.msgs), says.msgs
    [w] = got["waits"]  # one wait, recorded apart
    assert w.path == str(tmp_path / "k.lock") and w.seconds > 0 and f"pid {holder.pid}" in w.holder
    assert w.what == "sim build"
    assert (tmp_path / "k.lock").read_text() == ""  # released: no holder named any more


def test_the_wait_is_said_again_while_it_lasts_and_a_free_lock_costs_nothing(tmp_path: Path) -> None:
    """With ``remind=0`` every poll after the first says "still waiting ... s so far"; the holder is
    released at the first reminder, so the test waits for exactly one."""
    path = tmp_path / "x.lock"
    holder = _holder(_BOARD_HOLDER, str(tmp_path))
    lock_file = next(tmp_path.glob("nvdla-hil-*.lock"))
    msgs: list[str] = []

    def say(m: str) -> None:
        msgs.append(m)
        if m.startswith("demo: still waiting"):
            _release(holder)

    fd = os.open(lock_file, os.O_RDWR)
    try:
        with lockwait.recording() as waits:
            waited = lockwait.wait_for(lock_file, lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                                       lockwait.holder_of(fd), say=say, what="demo", remind=0.0)
        assert waited > 0 and [w.seconds for w in waits] == [waited]
        assert msgs[0].startswith(f"demo: waiting for {lock_file}: held by pid {holder.pid} (")
        assert any(m.startswith(f"demo: still waiting for {lock_file} (") and "s so far): held by pid" in m
                   for m in msgs), msgs
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
        if holder.poll() is None:
            holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(HANG_GUARD_S)
    # a lock nobody holds: no message, no recorded wait
    with lockwait.recording() as waits:
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            assert lockwait.wait_for(path, lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                                     lockwait.holder_of(fd), say=pytest.fail) == 0.0
        finally:
            os.close(fd)
    assert waits == []


def test_a_board_lock_wait_names_the_holder_and_is_recorded(tmp_path: Path) -> None:
    holder = _holder(_BOARD_HOLDER, str(tmp_path))
    says = _Says(on_wait=lambda m: _release(holder))
    lk = BoardLock("socket://127.0.0.1:7", tmp_path, board="arty", say=says)
    try:
        with lockwait.recording() as waits:
            lk.acquire(wait=None)  # waits as long as it takes: released at the first message
        info = json.loads(lk.path.read_text())
        assert info["pid"] == os.getpid() and info["board"] == "arty" and info["cmd"]  # we are the holder now
        lk.release()
    finally:
        if holder.poll() is None:
            holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(HANG_GUARD_S)
    first = says.msgs[0]
    assert first.startswith(f"board 'arty': waiting for {lk.path}: held by pid {holder.pid} ("), first
    [w] = waits
    assert w.seconds > 0 and f"pid {holder.pid}" in w.holder


def test_a_holder_that_is_gone_is_said(tmp_path: Path) -> None:
    """The named holder exited, but a process that inherited its descriptor keeps the lock: the
    message says the named process is gone."""
    path = tmp_path / "inherited.lock"
    holder = _holder(_FORKING_HOLDER, str(path))
    holder.wait(HANG_GUARD_S)  # the named holder has exited; its heir holds the lock
    gone = holder.pid
    says = _Says(on_wait=lambda m: _release(holder))  # the heir reads the same stdin pipe
    fd = os.open(path, os.O_RDWR)
    try:
        waited = lockwait.wait_for(path, lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                                   lockwait.holder_of(fd), say=says)
    finally:
        os.close(fd)
        holder.stdin.close()  # type: ignore[union-attr]
    assert waited > 0
    first = says.msgs[0]
    assert f"held by pid {gone} (" in first and "that process is gone" in first, first


_INNER_TEST = r'''
import subprocess, sys
from pathlib import Path
from nvdla_hil.sims import cache

HOLDER = {holder!r}


def test_waits_for_a_build(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    Path({pid_file!r}).write_text(str(p.pid))

    def progress(m):
        if "waiting for" in m:  # the holder finishes once we have said that we wait
            p.stdin.write("go\n")
            p.stdin.flush()

    cache.get_or_build(tmp_path, "k", lambda tmp: 1 / 0, progress=progress)
    assert p.wait() == 0


def test_waits_for_nothing():
    pass
'''


def test_a_pytest_run_reports_the_wait_apart_from_the_tests_time(tmp_path: Path) -> None:
    """In a session of nvdla-hil (``--nvdla-target model``), a test that waited for a lock has the
    JUnit properties ``lock_wait_s`` and ``lock_waits`` (the lock, its holder's pid) and a line in
    the terminal summary; a test that did not wait has neither."""
    pid_file = tmp_path / "holder.pid"
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_inner.py").write_text(_INNER_TEST.format(holder=_CACHE_HOLDER, pid_file=str(pid_file)))
    junit = tmp_path / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "0",
                        "--nvdla-target", "model", f"--junitxml={junit}", "test_inner.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = int(pid_file.read_text())
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_waits_for_a_build"].iter("property")}
    assert float(props["lock_wait_s"]) > 0, props
    assert f"k.lock (held by pid {pid} (" in props["lock_waits"], props
    # the test's time includes the wait; the property says how much of it was waiting
    assert float(cases["test_waits_for_a_build"].get("time")) >= float(props["lock_wait_s"])
    others = {p.get("name") for p in cases["test_waits_for_nothing"].iter("property")}
    assert "lock_wait_s" not in others and "lock_waits" not in others
    assert "nvdla-hil lock waits" in r.stdout and "lock waits: 1 test(s) waited" in r.stdout, r.stdout
    assert "test_inner.py::test_waits_for_a_build: " in r.stdout and f"held by pid {pid} (" in r.stdout, r.stdout


def test_a_crafted_holder_record_is_described_safely() -> None:
    """The lock file is writable by whoever shares the cache: a pid no process can have is not
    probed (a 10**30 pid made ``os.kill`` raise OverflowError), and control characters in the
    record never reach the terminal."""
    from nvdla_hil.sims.lockwait import describe_holder, holder_alive

    for pid in (10**30, -1, 0, True, "12"):
        assert holder_alive({"pid": pid}) is None
        describe_holder({"pid": pid})
    text = describe_holder({"pid": 1, "cmd": "make\x1b]0;pwned\x07 -j2\nsecond line", "since": "x" * 1000})
    assert "\x1b" not in text and "\x07" not in text and "\n" not in text and "make?]0;pwned? -j2?second line" in text
    assert describe_holder({"text": "\x1b[2J"}) == "an unknown process (?[2J)"
