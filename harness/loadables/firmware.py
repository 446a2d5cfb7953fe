"""NVDLA's own firmware as a host library: ``kmd/firmware/*.c`` of the user's nvdla/sw checkout
built with our portability shim (``sims/firmware/fw_shim.c``) and driven through ctypes.

Build (cached like the simulator builds, :mod:`nvdla_hil.sims.cache`, under
``~/.cache/nvdla-hil/firmware/<key>``; the key hashes the firmware's sources and headers, the
shim, the compiler's identity and the flags, never paths):

* the register map header is chosen by the configuration, as the firmware's
  ``include/opendla.h`` does: ``DLA_2_CONFIG`` defined selects ``opendla_small.h`` (nv_small's
  map), undefined selects ``opendla_initial.h`` (nvdlav1 = nv_full's map). A profile's
  ``generation`` decides (v1 = nv_full: no define; v2 = the nv_small family: ``DLA_2_CONFIG``).
* the kernel-only spellings the firmware uses (``__packed``, ``__aligned(n)``, fixed-width
  integer and bool types from ``<linux/types.h>``) are given on the command line.

Run: the KMD's sequence of ``kmd/port/linux/nvdla_core_callbacks.c``: ``dla_register_driver``
+ ``dla_clear_task`` once, then per DLA task ``dla_execute_task`` with the ``struct dla_config``
the KMD passes for the configuration (atom size, BDMA, Rubik, weight compression: from the
profile), and after every interrupt ``dla_isr_handler`` + ``dla_process_events`` until the task
is complete; ``dla_clear_task`` at the end.

Isolation: the library runs in a child process of its own (:mod:`.firmware_child`), one per
:class:`Firmware`, so its C globals are that process's and a loadable that makes it crash, hang or
allocate without end fails that run with a :class:`FirmwareError`, never the harness. Its register
and memory callbacks are requests over a pipe to this process, which performs them on the target
in order (register writes and log lines, which need no answer, travel batched with the next
request that does).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ...drivers.errors import NvdlaHilError
from .firmware_child import (
    CALL,
    DATA,
    DMA,
    DMA_ANSWER,
    END,
    FAILED,
    LOG,
    OP_CLEAR,
    OP_EVENTS,
    OP_EXECUTE,
    OP_INIT,
    OP_ISR,
    READY,
    REG_READ,
    REG_WRITE,
    STATUS,
    TAG_DATA_READ,
    TAG_DATA_WRITE,
    TAG_DMA,
    TAG_END,
    TAG_FAILED,
    TAG_LOG,
    TAG_READY,
    TAG_REG_READ,
    TAG_REG_WRITE,
    U32,
)

__all__ = ["FirmwareError", "FirmwareBuild", "find_nvdla_sw", "build_firmware", "Firmware", "firmware_define"]

#: our shim (the repository's sims/firmware, or nvdla_hil/sims/firmware of an installed wheel)
SHIM = Path(__file__).resolve().parents[2] / "sims" / "firmware" / "fw_shim.c"

#: compiler flags every build uses (part of the cache key)
CFLAGS: tuple[str, ...] = (
    "-O2", "-fPIC", "-shared", "-std=gnu99", "-w",
    "-Wl,-Bsymbolic",  # the firmware's calls bind to this library's shim, whichever other is loaded
    "-include", "stdint.h", "-include", "stdbool.h", "-include", "stddef.h",
    "-D__packed=__attribute__((packed))", "-D__aligned(x)=__attribute__((aligned(x)))",
)


class FirmwareError(NvdlaHilError, RuntimeError):
    """The firmware could not be built or loaded (exit 2), or it reported an error or hung while
    a task ran (the run fails)."""


def find_nvdla_sw(path: str | os.PathLike[str] | None = None) -> Path:
    """The user's nvdla/sw checkout: ``path``, else ``$NVDLA_SW``; it must hold kmd/firmware."""
    p = path or os.environ.get("NVDLA_SW")
    if not p:
        raise FirmwareError("no nvdla/sw checkout: pass --nvdla-sw PATH or set NVDLA_SW "
                            "(a clone of github.com/nvdla/sw; its kmd/firmware is built with our shim)")
    root = Path(p).expanduser()
    if not (root / "kmd" / "firmware" / "scheduler.c").is_file():
        raise FirmwareError(f"{root} is not an nvdla/sw checkout: kmd/firmware/scheduler.c is missing")
    return root


def firmware_define(generation: str) -> str | None:
    """``DLA_2_CONFIG`` for the nv_small family (generation v2), none for nvdlav1 (nv_full);
    the firmware's ``include/opendla.h`` picks ``opendla_small.h`` or ``opendla_initial.h``."""
    if generation == "v1":
        return None
    if generation == "v2":
        return "DLA_2_CONFIG"
    raise FirmwareError(f"no firmware register map for a generation-{generation} profile")


@dataclass(frozen=True)
class FirmwareBuild:
    library: Path
    define: str | None
    key: str
    #: the firmware interface version (``include/dla_fw_version.h``; a checkout without the file
    #: predates it: 0.12.5 added it, after the 0.12 data-cube change)
    version: tuple[int, int, int] = (0, 12, 5)


def firmware_version(sw: Path) -> tuple[int, int, int]:
    """FIRMWARE_VERSION_MAJOR/MINOR/SUBMINOR of the checkout's ``dla_fw_version.h``; (0, 11, 0)
    when the file is absent (firmware older than the header, before the 0.12 cube change)."""
    import re

    f = sw / "kmd" / "firmware" / "include" / "dla_fw_version.h"
    if not f.is_file():
        return (0, 11, 0)
    text = f.read_text(errors="replace")
    vals = []
    for part in ("MAJOR", "MINOR", "SUBMINOR"):
        m = re.search(rf"#define\s+FIRMWARE_VERSION_{part}\s+(0x[0-9a-fA-F]+|\d+)", text)
        if not m:
            raise FirmwareError(f"{f}: no FIRMWARE_VERSION_{part}")
        vals.append(int(m.group(1), 0))
    return (vals[0], vals[1], vals[2])


def _sources(sw: Path) -> list[Path]:
    fw = sw / "kmd" / "firmware"
    return sorted(fw.glob("*.c"))


def _headers(sw: Path) -> list[Path]:
    return sorted([*(sw / "kmd" / "firmware").glob("*.h"), *(sw / "kmd" / "firmware" / "include").glob("*.h"),
                   *(sw / "kmd" / "include").glob("*.h")])


def _cc() -> str:
    return os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang") or "cc"


def _compiler_identity(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "unknown"


def build_firmware(nvdla_sw: str | os.PathLike[str] | None, generation: str, *, force: bool = False,
                   progress: Callable[[str], None] | None = None) -> FirmwareBuild:
    """Build (or reuse from the cache) the firmware library for a profile generation."""
    from ...sims.build import cache_root
    from ...sims.cache import get_or_build

    sw = find_nvdla_sw(nvdla_sw)
    define = firmware_define(generation)
    cc = _cc()
    flags = list(CFLAGS) + ([f"-D{define}"] if define else [])
    h = hashlib.sha256()
    for f in [*_sources(sw), *_headers(sw), SHIM]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update("\0".join([_compiler_identity(cc), *flags]).encode())
    key = f"fw-{generation}-{h.hexdigest()[:20]}"
    root = cache_root().parent / "firmware"

    def build(tmp: Path) -> dict:
        lib = tmp / "libnvdla_fw.so"
        cmd = [cc, *flags, "-I", str(sw / "kmd" / "firmware" / "include"), "-I", str(sw / "kmd" / "firmware"),
               "-I", str(sw / "kmd" / "include"), *map(str, _sources(sw)), str(SHIM), "-o", str(lib)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        (tmp / "build.log").write_text(" ".join(cmd) + "\n" + r.stdout + r.stderr)
        if r.returncode:
            raise FirmwareError(f"building NVDLA's firmware failed ({cc} exit {r.returncode}):\n{r.stderr[-2000:]}")
        return {"executable": "libnvdla_fw.so", "define": define or "", "generation": generation}

    data = get_or_build(root, key, build, force=force, progress=progress or (lambda m: None), what="firmware build")
    return FirmwareBuild(Path(data["executable"]), define, key, firmware_version(sw))


#: how long the firmware may go quiet in one call (no register or memory request, no completion)
#: before it is taken as hung: this base, plus :data:`BUDGET_PER_ADDRESS` per address-list entry of
#: the task (the descriptors it walks); a :class:`Firmware` may be given another base
HANG_BUDGET = 10.0
BUDGET_PER_ADDRESS = 0.05
#: the address-list entries the budget counts at most (a hostile count never buys a longer hang)
MAX_BUDGET_ADDRESSES = 4096
#: how long the firmware's process may take to start and load the library
START_BUDGET = 60.0
#: requests one call may make: a loop that keeps calling back never goes quiet
MAX_REQUESTS = 1_000_000
#: the largest descriptor read or write the firmware may ask for (its largest structure, a LUT,
#: is 700 bytes; a whole list of 4096 surface descriptors is under 3 MiB)
MAX_TRANSFER = 64 << 20
#: the firmware process's address-space limit (RLIMIT_AS): the interpreter, ctypes and the
#: library need a few tens of MiB
MEMORY_LIMIT = 1 << 30
#: the child's script: stdlib only, run by path
CHILD = Path(__file__).with_name("firmware_child.py")


def _i32(v: int) -> int:
    return (int(v) + (1 << 31)) % (1 << 32) - (1 << 31)


def _reap(proc: subprocess.Popen, wait: float) -> tuple[int, int]:
    """Wait up to ``wait`` seconds for the process to end, then kill it; (exit code as
    :attr:`subprocess.Popen.returncode` has it, peak resident KiB)."""
    deadline = time.monotonic() + wait
    flags = os.WNOHANG
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, flags)
        except ChildProcessError:  # reaped already
            return (proc.returncode if proc.returncode is not None else 0), 0
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss
        if time.monotonic() < deadline:
            time.sleep(0.002)
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        flags = 0  # and block on it: a killed process ends at once


class _Stopped(Exception):
    """The firmware's process stopped answering: ``hung`` or ``gone`` (its pipe closed)."""


class _Proc:
    """The firmware's process, its ends of the pipes and its captured stderr. :meth:`end` kills and
    reaps it once (it is also the finalizer: at exit, and when the owner is collected)."""

    def __init__(self, proc: subprocess.Popen, rfd: int, wfd: int, stderr: IO[bytes]) -> None:
        self.proc, self.rfd, self.wfd, self.stderr = proc, rfd, wfd, stderr
        self.status: tuple[int, int] | None = None
        self.tail = ""

    def close_pipes(self) -> None:
        for fd in (self.wfd, self.rfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.rfd = self.wfd = -1

    def stderr_tail(self) -> str:
        """The last line the process printed (kept once it has ended)."""
        if self.stderr.closed:
            return self.tail
        try:
            self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(0, self.stderr.tell() - 600))
            lines = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return lines[-1] if lines else ""

    def end(self, wait: float = 0.0) -> tuple[int, int]:
        """(exit code, peak resident KiB), once ended: after ``wait`` seconds it is killed."""
        self.close_pipes()
        if self.status is None:
            self.status = _reap(self.proc, wait)
        if not self.stderr.closed:
            self.tail = self.stderr_tail()
            self.stderr.close()
        return self.status


class _Child:
    """A started firmware process and the parent's side of its protocol (:mod:`.firmware_child`)."""

    def __init__(self, library: Path, memory_limit: int) -> None:
        req_r, req_w = os.pipe()  # the child's requests
        ans_r, ans_w = os.pipe()  # the parent's calls and answers
        stderr = tempfile.TemporaryFile()
        cmd = [sys.executable, "-I", "-S", str(CHILD), str(library), str(ans_r), str(req_w), str(os.getpid()),
               str(memory_limit)]
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                    pass_fds=(ans_r, req_w), close_fds=True)
        except OSError as e:
            for fd in (req_r, ans_w):
                os.close(fd)
            stderr.close()
            raise FirmwareError(f"cannot start the firmware's process ({sys.executable}): {e}") from e
        finally:
            os.close(ans_r)
            os.close(req_w)
        self.p = _Proc(proc, req_r, ans_w, stderr)
        self.pid = proc.pid
        self.ready = False
        self.buf = bytearray()
        self.pos = 0
        self.poller = select.poll()
        self.poller.register(req_r, select.POLLIN)
        self.finish = weakref.finalize(self, self.p.end)

    def send(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.p.wfd, view):]
        except OSError as e:  # EPIPE: the process is gone
            raise _Stopped("gone") from e

    def take(self, st: struct.Struct, budget: float) -> tuple:
        self.need(st.size, budget)
        v = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return v

    def take_bytes(self, n: int, budget: float) -> bytes:
        self.need(n, budget)
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def take_text(self, n: int, cap: int, budget: float) -> str:
        if n > cap:
            raise _Stopped(f"sent a {n}-byte text, more than the {cap} bytes it may")
        return self.take_bytes(n, budget).decode("utf-8", "replace")

    def need(self, n: int, budget: float) -> None:
        if len(self.buf) - self.pos >= n:
            return
        del self.buf[:self.pos]
        self.pos = 0
        while len(self.buf) < n:
            if not self.poller.poll(max(0, int(budget * 1000))):
                raise _Stopped("hung")
            data = os.read(self.p.rfd, max(1 << 16, n - len(self.buf)))
            if not data:
                raise _Stopped("gone")
            self.buf += data

    def end(self, wait: float = 0.0) -> tuple[int, int]:
        """Kill (after ``wait`` seconds) and reap the process: (exit code, peak resident KiB)."""
        status = self.p.end(wait)
        self.finish.detach()
        return status


@dataclass
class _Bound:
    """The callbacks :meth:`Firmware.bind` installed (unbound: what the shim does without any)."""

    reg_read: Callable[[int], int] = lambda addr: 0
    reg_write: Callable[[int, int], None] = lambda addr, value: None
    data_read: Callable[[int, int, int, int], int] = lambda index, offset, size, buf: -errno.EINVAL
    data_write: Callable[[int, int, int, int], int] = lambda index, offset, size, buf: -errno.EINVAL
    dma_address: Callable[[int], int | None] = lambda index: None
    log: Callable[[int, str], None] = lambda level, msg: None


class Firmware:
    """NVDLA's firmware library, run in a process of its own; ``with Firmware(build) as fw:``
    starts that process and ends it.

    The firmware's register and memory callbacks (Python callables, installed per task with
    :meth:`bind`) run here, in the caller's process, on the caller's target: the firmware's
    process asks for each one over a pipe (:mod:`.firmware_child`), in the order the firmware
    makes them. When the firmware crashes (a signal), hangs (no request and no completion within
    :data:`HANG_BUDGET` plus :data:`BUDGET_PER_ADDRESS` per address-list entry, or more than
    :data:`MAX_REQUESTS` in one call) or outgrows its address space (``memory_limit``,
    RLIMIT_AS), the call raises :class:`FirmwareError` naming ``name`` (the loadable) and the
    signal or the limit. Its process is reaped, and the next call starts a new one. The process
    ends with the block, at exit, or (Linux ``PR_SET_PDEATHSIG``) when the thread that started it
    ends, even by SIGKILL: start and use one :class:`Firmware` in one thread.

    Args:
        build: the library (:func:`build_firmware`).
        name: what the errors name (the loadable).
        hang_budget: the base of the hang budget in seconds (default :data:`HANG_BUDGET`).
        memory_limit: the firmware process's RLIMIT_AS in bytes (0: none).
    """

    def __init__(self, build: FirmwareBuild, *, name: str | None = None, hang_budget: float | None = None,
                 memory_limit: int = MEMORY_LIMIT) -> None:
        if not Path(build.library).is_file():
            raise FirmwareError(f"{build.library}: the firmware library is missing (build it with build_firmware)")
        self.build = build
        self.name = name
        self.hang_budget = HANG_BUDGET if hang_budget is None else float(hang_budget)
        self.memory_limit = int(memory_limit)
        if not self.hang_budget > 0 or self.memory_limit < 0:
            raise ValueError(f"hang_budget {hang_budget!r} must be > 0 s and memory_limit {memory_limit!r} >= 0 bytes")
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._bound = _Bound()
        self._addresses = 0
        self._said: deque[str] = deque(maxlen=3)

    @property
    def pid(self) -> int | None:
        """The firmware process's id while it runs."""
        return self._child.pid if self._child is not None else None

    def __enter__(self) -> Firmware:
        self._lock.acquire()
        try:
            self._start()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        finally:
            self._bound = _Bound()
            self._lock.release()

    def close(self) -> None:
        """End the firmware's process: it holds nothing to save, so it is killed and reaped."""
        child, self._child = self._child, None
        if child is not None:
            child.end()

    def bind(self, reg_read: Callable[[int], int], reg_write: Callable[[int, int], None],
             data_read: Callable[[int, int, int, int], int], data_write: Callable[[int, int, int, int], int],
             dma_address: Callable[[int], int | None], log: Callable[[int, str], None]) -> None:
        """Install the callbacks: register access, descriptor read/write (index, offset, size,
        buffer address in this process), DMA address of an address-list index (None: invalid), log."""
        self._bound = _Bound(reg_read, reg_write, data_read, data_write, dma_address, log)

    def init(self) -> None:
        err, _ = self._call("dla_register_driver", OP_INIT)
        if err:
            raise FirmwareError(f"dla_register_driver failed ({err})")

    def execute(self, num_addresses: int, atom_size: int, bdma: bool, rubik: bool, weight_compress: bool) -> int:
        self._addresses = min(max(0, int(num_addresses)), MAX_BUDGET_ADDRESSES)
        return self._call("dla_execute_task", OP_EXECUTE, _i32(num_addresses), int(atom_size) & 0xFFFF_FFFF,
                          int(bdma), int(rubik), int(weight_compress))[0]

    def isr(self) -> int:
        return self._call("dla_isr_handler", OP_ISR)[0]

    def process_events(self) -> tuple[int, bool]:
        err, done = self._call("dla_process_events", OP_EVENTS)
        return err, bool(done)

    def clear_task(self) -> None:
        if self._child is not None:  # a new process has no task to clear
            self._call("dla_clear_task", OP_CLEAR)

    # ---- the parent's side of the protocol ----------------------------------------------------
    def _start(self) -> _Child:
        if self._child is None:
            self._child = _Child(self.build.library, self.memory_limit)
            self._said.clear()
        return self._child

    def _call(self, what: str, op: int, *args: int) -> tuple[int, int]:
        child = self._start()
        if not child.ready:
            self._await_ready(child)
        budget = self.hang_budget + BUDGET_PER_ADDRESS * self._addresses
        try:
            child.send(CALL.pack(op, *(args or (0, 0, 0, 0, 0))))
            return self._serve(child, what, budget)
        except _Stopped as s:
            raise self._failure(child, what, str(s), budget) from None
        except BaseException:  # a callback raised (or Ctrl-C): the firmware is mid-call, end it
            self._drop(child)
            raise

    def _await_ready(self, child: _Child) -> None:
        """The process's first message: ready, or why it could not load the library."""
        try:
            tag = child.take_bytes(1, START_BUDGET)
            if tag == TAG_FAILED:
                text = child.take_text(child.take(FAILED, START_BUDGET)[0], 4000, START_BUDGET)
                raise FirmwareError(f"the firmware's process could not start: {text}")
            if tag != TAG_READY:
                raise _Stopped(f"sent {tag!r} first")
            child.take(READY, START_BUDGET)
            child.ready = True
        except _Stopped as s:
            why = f"did not start within {START_BUDGET:.0f} s" if str(s) == "hung" else f"failed to start ({s})"
            self._drop(child, 5.0)
            tail = child.p.stderr_tail()
            raise FirmwareError(f"the firmware's process ({sys.executable} {CHILD.name}) {why}, exit status "
                                f"{child.p.proc.returncode}" + (f"; it printed: {tail}" if tail else "")) from None
        except BaseException:
            self._drop(child, 5.0)
            raise

    def _serve(self, child: _Child, what: str, budget: float) -> tuple[int, int]:
        cb = self._bound
        for _ in range(MAX_REQUESTS):
            tag = child.take_bytes(1, budget)
            if tag == TAG_REG_WRITE:
                cb.reg_write(*child.take(REG_WRITE, budget))
            elif tag == TAG_LOG:
                level, n = child.take(LOG, budget)
                text = child.take_text(n, 1 << 16, budget)
                self._said.append(text.strip())
                cb.log(level, text)
            elif tag == TAG_REG_READ:
                (addr,) = child.take(REG_READ, budget)
                child.send(U32.pack(int(cb.reg_read(addr)) & 0xFFFF_FFFF))
            elif tag in (TAG_DATA_READ, TAG_DATA_WRITE):
                index, offset, size = child.take(DATA, budget)
                if size > MAX_TRANSFER:
                    raise _Stopped(f"asked to {'read' if tag == TAG_DATA_READ else 'write'} {size} bytes of "
                                   f"address-list entry {index} at once, more than the {MAX_TRANSFER >> 20} MiB a "
                                   "descriptor transfer may be")
                buf = ctypes.create_string_buffer(child.take_bytes(size, budget) if tag == TAG_DATA_WRITE else size)
                if tag == TAG_DATA_WRITE:
                    child.send(STATUS.pack(_i32(cb.data_write(index, offset, size, ctypes.addressof(buf)))))
                    continue
                status = _i32(cb.data_read(index, offset, size, ctypes.addressof(buf)))
                child.send(STATUS.pack(status) + (buf.raw[:size] if status == 0 else b""))
            elif tag == TAG_DMA:
                (index,) = child.take(DMA, budget)
                a = cb.dma_address(index)
                child.send(DMA_ANSWER.pack(-errno.EINVAL, 0) if a is None else DMA_ANSWER.pack(0, int(a) & (1 << 64) - 1))
            elif tag == TAG_END:
                ret, flag = child.take(END, budget)
                return ret, flag
            elif tag == TAG_FAILED:
                raise _Stopped(f"its process failed: {child.take_text(child.take(FAILED, budget)[0], 4000, budget)}")
            else:
                raise _Stopped(f"sent an unknown message {tag!r}")
        raise _Stopped(f"made more than {MAX_REQUESTS} register or memory requests in one call (a runaway loop)")

    def _drop(self, child: _Child, wait: float = 0.0) -> tuple[int, int]:
        if self._child is child:
            self._child = None
        return child.end(wait)

    def _failure(self, child: _Child, what: str, reason: str, budget: float) -> FirmwareError:
        """End the process; the error says why, naming the loadable, the call and the signal or
        the limit."""
        if reason == "hung":
            self._drop(child)
            why = (f"hung in {what}: no register or memory request and no completion within {budget:.3g} s "
                   "(its process was killed)")
        elif reason == "gone":
            code, rss = self._drop(child, 5.0)  # the pipe closed: the process is ending
            if code < 0:
                try:
                    sig = signal.Signals(-code).name
                except ValueError:
                    sig = f"signal {-code}"
                why = f"crashed in {what}: its process died of {sig} (signal {-code})"
            else:
                why = f"ended in {what}: its process exited with status {code}"
            if self.memory_limit and rss * 1024 >= self.memory_limit // 2:
                why += (f", after growing to {rss >> 10} MiB resident under its {self.memory_limit >> 20} MiB "
                        "address-space limit (RLIMIT_AS)")
            tail = child.p.stderr_tail()
            if tail:
                why += f"; it printed: {tail}"
        else:
            self._drop(child)
            why = f"failed in {what}: {reason}"
        said = " | ".join(s for s in self._said if s)
        return FirmwareError(f"{self.name + ': ' if self.name else ''}NVDLA's firmware {why}"
                             + (f"; its last messages: {said}" if said else ""))
