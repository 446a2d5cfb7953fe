"""``nvdla-hil sim native``: NVDLA's own C++ trace player, built as NVDLA builds it.

NVDLA's checkout has a stand-alone Verilator testbench (``verif/verilator/nvdla.cpp``, a
C++ CSB/AXI driver that replays ``trace.bin`` files). ``bench/bench_sim.py --native`` compares
our cocotb-driven simulator with it. The player is built from the *same* RTL as ``sim build``
(the sources it collects, FPGA RAM models included: NVDLA's own file list is stale and names the
ASIC RAM models, which simulate wrongly under Verilator), in one of two styles:

``nvdla`` (the default)
    the flags of NVDLA's ``verif/verilator/Makefile`` and its ``verilator_<project>.f``:
    ``--compiler clang --output-split 250000000 -Wno-moddup -Wno-fatal``, its four defines, no
    ``-O3`` or ``--x-assign``/``--x-initial``, Verilator's own ``OPT_FAST`` (``-Os``), compiled
    with clang++ and ``VM_PARALLEL_BUILDS=1`` as its ``make -f VNV_nvdla.mk CC=clang
    CXX=clang++`` does. Two departures, both forced: ``--no-timing`` (Verilator 5 asks for
    ``--timing`` or ``--no-timing``; NVDLA's Makefile predates it), and g++ when clang++ is not
    installed (said in the key and in the build log).
``ours``
    the flags, defines, compiler and ``OPT_FAST`` of ``sim build``'s default: the
    apples-to-apples check that only the driver differs.

Each style is its own cache entry (``<cache>/native-<config>-<hash>/obj/VNV_nvdla``, the style
in the key); the command prints the player's path. Nothing of NVDLA's is copied into nvdla-hil:
the sources are read from the user's checkout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from .build import BuildOptions, cache_key, cache_root, thread_flags
from .rtl import NVDLA_DEFINES, check_known_rtl_issues, collect_sources, find_vmod
from .toolchain import (
    BuildError,
    Progress,
    compiler_identity,
    cxx_command,
    default_progress,
    find_clang,
    log_tail,
    make_flags,
    make_overrides,
    prune_objects,
    run_logged,
    tool_env,
    verilator_root,
    verilator_version,
)
from .cache import get_or_build

__all__ = ["NATIVE_STYLES", "NVDLA_MAKEFILE_FLAGS", "add_native_subcommand", "build_native", "native_recipe"]

PLAYER = "VNV_nvdla"
NATIVE_STYLES = ("nvdla", "ours")
#: the Verilator flags of NVDLA's verif/verilator/Makefile (VERILATOR_PARAMS) and
#: verilator_<project>.f (the defines come from :data:`NVDLA_DEFINES`, the same four)
NVDLA_MAKEFILE_FLAGS: tuple[str, ...] = ("--compiler", "clang", "--output-split", "250000000",
                                         "-Wno-moddup", "-Wno-fatal")
#: what Verilator 5 needs beyond NVDLA's flags: the RTL has delays, and Verilator 5 asks for
#: --timing or --no-timing (NVDLA's Makefile was written for Verilator 4)
VERILATOR5_FLAGS: tuple[str, ...] = ("--no-timing",)


def native_recipe(style: str = "nvdla", threads: int = 1) -> tuple[list[str], str | None, tuple[str, ...], str]:
    """How the player of ``style`` is built: (Verilator flags, OPT_FAST (None: Verilator's
    default), make flags, C++ compiler)."""
    if style == "nvdla":
        clang = find_clang()
        flags = [*VERILATOR5_FLAGS, *NVDLA_MAKEFILE_FLAGS, *(f"-D{d}" for d in NVDLA_DEFINES),
                 *thread_flags(threads)]
        return flags, None, (*make_flags(None, clang=bool(clang)), "VM_PARALLEL_BUILDS=1"), clang or cxx_command()
    if style == "ours":
        opts = BuildOptions()
        flags = [*opts.verilator_flags(), *(f"-D{d}" for d in NVDLA_DEFINES), *thread_flags(threads)]
        return flags, opts.opt_fast, make_flags(opts.opt_fast), cxx_command()
    raise BuildError(f"unknown native build style {style!r}; styles: {', '.join(NATIVE_STYLES)}")


def native_inputs(nvdla_hw: str | os.PathLike[str] | None, config: str) -> tuple[Path, Path, Path]:
    """(generated vmod, the checkout's nvdla.cpp, generated project.h); BuildError if absent."""
    vmod = find_vmod(nvdla_hw, config)
    hw = vmod.parents[2]
    cpp = hw / "verif" / "verilator" / "nvdla.cpp"
    header = vmod.parent / "spec" / "defs" / "project.h"
    if not cpp.is_file():
        raise BuildError(f"{cpp} is missing: NVDLA's trace player comes from the checkout's verif/verilator")
    if not header.is_file():
        raise BuildError(f"{header} is missing; regenerate with `nvdla-hil sim setup --nvdla-hw {hw} "
                         f"--config {config}`")
    return vmod, cpp, header


def build_native(nvdla_hw: str | os.PathLike[str] | None, config: str = "nv_small", *,
                 jobs: int | None = None, force: bool = False, progress: Progress = default_progress,
                 cache: Path | None = None, threads: int = 1, style: str = "nvdla") -> Path:
    """Build (or reuse) NVDLA's native trace player for ``config``; return its executable
    (``style``: ``nvdla`` as NVDLA's Makefile builds it, ``ours`` with ``sim build``'s flags;
    ``threads`` as for ``sim build``)."""
    vmod, cpp, header = native_inputs(nvdla_hw, config)
    problems = check_known_rtl_issues(vmod)
    if problems:
        raise BuildError("the generated RTL has constructs Verilator rejects:\n" + "\n".join(problems))
    ss = collect_sources(vmod)
    flags, opt_fast, mflags, cxx = native_recipe(style, threads)
    vversion = verilator_version()
    key = cache_key(name="native", config=config, toplevel="NV_nvdla", flags=flags,
                    key_parts=[] if style == "ours" else [f"style={style}"],
                    hashed=[*ss.hashed, header], hashed_base=vmod, own=[cpp], waves=False,
                    vversion=vversion, cocotb_version="-", opt_fast=opt_fast, make_flags=mflags, cxx=cxx)
    root = cache or cache_root()

    def build(tmp: Path) -> dict:
        obj = tmp / "obj"
        obj.mkdir()
        log_path = root / f"{key}.build.log"
        cmd = [str(verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--Mdir", str(obj),
               "--top-module", "NV_nvdla", "--prefix", PLAYER, "-o", PLAYER,
               # nvdla.cpp includes "../spec/defs/project.h": resolve it from outdir/<config>/vmod
               "-CFLAGS", f"-I{vmod}", *flags, *ss.args(), str(vmod / "nvdla" / "top" / "NV_nvdla.v"),
               str(cpp)]
        jobs_ = jobs or max(1, os.cpu_count() or 1)
        t0 = time.monotonic()
        progress(f"sim native: NVDLA's trace player ({config}) -> {root / key}\n  log: {log_path}")
        with open(log_path, "w") as log:
            log.write(f"nvdla-hil sim native config={config} style={style} key={key}\n{vversion}\n"
                      f"{compiler_identity(cxx)}\nVerilator flags: {' '.join(flags)}\n"
                      f"make flags: {' '.join(mflags)}\n")
            progress("  verilating ...")
            rc = run_logged(cmd, log, tmp, tool_env(), "verilate", progress)
            if rc != 0:
                raise BuildError(f"Verilator failed (exit {rc}); full log: {log_path}\n{log_tail(log_path)}")
            progress(f"  compiling C++ with {jobs_} jobs ...")
            make = ["make", "-j", str(jobs_), "-C", str(obj), "-f", f"{PLAYER}.mk", "VM_TRACE=0",
                    *make_overrides(cxx, mflags)]
            rc = run_logged(make, log, tmp, tool_env(), "c++", progress, count_dir=obj,
                            count_glob=f"{PLAYER}*.cpp")
            if rc != 0:
                raise BuildError(f"C++ compile failed (exit {rc}); full log: {log_path}\n{log_tail(log_path)}")
        seconds = time.monotonic() - t0
        prune_objects(obj, PLAYER)
        shutil.copyfile(log_path, tmp / "build.log")
        log_path.unlink()
        progress(f"sim native: done in {seconds:.0f} s -> {root / key}")
        return {"directory": str(tmp), "executable": f"obj/{PLAYER}", "toplevel": "NV_nvdla",
                "config": config, "waves": False, "verilator": vversion,
                "build_seconds": round(seconds, 1), "style": style,
                "verilator_flags": flags, "make_flags": list(mflags), "compiler": compiler_identity(cxx)}

    data = get_or_build(root, key, build, force=force, progress=progress, what="sim native")
    return Path(data["executable"])


def _cmd_native(args: argparse.Namespace) -> int:
    try:
        exe = build_native(args.nvdla_hw, args.config, jobs=args.jobs, force=args.force, threads=args.threads,
                           style=args.style)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(exe)
    return 0


def add_native_subcommand(sub: argparse._SubParsersAction) -> None:
    n = sub.add_parser(
        "native", help="build (or reuse) NVDLA's native C++ trace player, as NVDLA builds it",
        description="Build NVDLA's verif/verilator trace player (nvdla.cpp) of your checkout from the RTL "
                    "`sim build` uses, with the flags and compiler of NVDLA's verif/verilator/Makefile "
                    "(--style nvdla, the default) or with `sim build`'s (--style ours), for "
                    "`bench/bench_sim.py --native`. Prints the executable's path.")
    n.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"),
                   help="nvdla/hw checkout with outdir/<config>/vmod (default: $NVDLA_HW)")
    n.add_argument("--config", default="nv_small", help="NVDLA project (default nv_small)")
    n.add_argument("--jobs", "-j", type=int, default=None, help="parallel C++ compile jobs")
    n.add_argument("--force", action="store_true", help="rebuild even when cached")
    n.add_argument("--threads", type=int, default=1, help="Verilator model threads (as `sim build --threads`)")
    n.add_argument("--style", choices=NATIVE_STYLES, default="nvdla",
                   help="nvdla: NVDLA's Makefile flags, clang++ when installed (default); ours: sim build's flags")
    n.set_defaults(func=_cmd_native)
