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
is complete; ``dla_clear_task`` at the end. The firmware keeps its state in C globals, so one
run at a time uses a library (a lock per library file).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...drivers.errors import NvdlaHilError

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


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(str(path), threading.Lock())


REG_READ = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32)
REG_WRITE = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32)
DATA = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p)
DMA_ADDR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_uint64))
LOG = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p)


class Firmware:
    """The loaded firmware library; ``with Firmware(build) as fw:`` holds its lock.

    The callbacks (Python callables) are installed per task with :meth:`bind`."""

    def __init__(self, build: FirmwareBuild) -> None:
        self.build = build
        self._lock = _lock_for(build.library)
        self._lib = ctypes.CDLL(str(build.library))
        self._lib.fw_execute.argtypes = [ctypes.c_int32, ctypes.c_uint32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32]
        self._lib.fw_process_events.argtypes = [ctypes.POINTER(ctypes.c_uint32)]
        self._keep: tuple = ()

    def __enter__(self) -> Firmware:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lib.fw_set_callbacks(None, None, None, None, None, None)
        self._keep = ()
        self._lock.release()

    def bind(self, reg_read: Callable[[int], int], reg_write: Callable[[int, int], None],
             data_read: Callable[[int, int, int, int], int], data_write: Callable[[int, int, int, int], int],
             dma_address: Callable[[int], int | None], log: Callable[[int, str], None]) -> None:
        """Install the callbacks: register access, descriptor read/write (index, offset, size,
        buffer address), DMA address of an address-list index (None: invalid), log."""

        def _dma(index: int, out) -> int:  # noqa: ANN001 - a ctypes POINTER(c_uint64)
            a = dma_address(index)
            if a is None:
                return -22
            out[0] = a
            return 0

        keep = (REG_READ(reg_read), REG_WRITE(reg_write), DATA(data_read), DATA(data_write), DMA_ADDR(_dma),
                LOG(lambda lvl, msg: log(lvl, msg.decode("utf-8", "replace"))))
        self._keep = keep  # ctypes callbacks must outlive the C side's use of them
        self._lib.fw_set_callbacks(*keep)

    def init(self) -> None:
        err = self._lib.fw_init()
        if err:
            raise FirmwareError(f"dla_register_driver failed ({err})")

    def execute(self, num_addresses: int, atom_size: int, bdma: bool, rubik: bool, weight_compress: bool) -> int:
        return int(self._lib.fw_execute(num_addresses, atom_size, int(bdma), int(rubik), int(weight_compress)))

    def isr(self) -> int:
        return int(self._lib.fw_isr())

    def process_events(self) -> tuple[int, bool]:
        done = ctypes.c_uint32(0)
        err = int(self._lib.fw_process_events(ctypes.byref(done)))
        return err, bool(done.value)

    def clear_task(self) -> None:
        self._lib.fw_clear_task()
