"""``nvdla-hil sim native``: NVDLA's own C++ trace player, built like our simulator.

NVDLA's checkout has a stand-alone Verilator testbench (``verif/verilator/nvdla.cpp``, a
C++ CSB/AXI driver that replays ``trace.bin`` files). ``bench/bench_sim.py --native`` compares
our cocotb-driven simulator with it. For that comparison to mean anything the player is built
here from the *same* RTL (the sources ``sim build`` collects, FPGA RAM models included), the same
Verilator flags and defines, the same compiler and ``OPT_FAST``; only the driver differs (C++
instead of cocotb + our wrapper). NVDLA's own ``verif/verilator/Makefile`` is not used: its
file list is stale (ASIC RAM models that simulate wrongly under Verilator, nv_small only).

The player is cached like every build (``<cache>/native-<config>-<hash>/obj/VNV_nvdla``);
the command prints its path. Nothing of NVDLA's is copied into nvdla-hil: the sources are read
from the user's checkout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from .build import BASE_VERILATOR_FLAGS, cache_key, cache_root, thread_flags
from .rtl import NVDLA_DEFINES, check_known_rtl_issues, collect_sources, find_vmod
from .toolchain import (
    BuildError,
    Progress,
    compiler_identity,
    default_progress,
    log_tail,
    make_overrides,
    prune_objects,
    run_logged,
    tool_env,
    verilator_root,
    verilator_version,
)
from .cache import get_or_build

__all__ = ["add_native_subcommand", "build_native"]

PLAYER = "VNV_nvdla"


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
                 cache: Path | None = None, threads: int = 1) -> Path:
    """Build (or reuse) NVDLA's native trace player for ``config``; return its executable
    (``threads`` as for ``sim build``, so the two compare with the same flags)."""
    vmod, cpp, header = native_inputs(nvdla_hw, config)
    problems = check_known_rtl_issues(vmod)
    if problems:
        raise BuildError("the generated RTL has constructs Verilator rejects:\n" + "\n".join(problems))
    ss = collect_sources(vmod)
    flags = [*BASE_VERILATOR_FLAGS, *(f"-D{d}" for d in NVDLA_DEFINES), *thread_flags(threads)]
    vversion = verilator_version()
    key = cache_key(name="native", config=config, toplevel="NV_nvdla", flags=flags, key_parts=[],
                    hashed=[*ss.hashed, header], hashed_base=vmod, own=[cpp], waves=False,
                    vversion=vversion, cocotb_version="-")
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
            log.write(f"nvdla-hil sim native config={config} key={key}\n{vversion}\n{compiler_identity()}\n")
            progress("  verilating ...")
            rc = run_logged(cmd, log, tmp, tool_env(), "verilate", progress)
            if rc != 0:
                raise BuildError(f"Verilator failed (exit {rc}); full log: {log_path}\n{log_tail(log_path)}")
            progress(f"  compiling C++ with {jobs_} jobs ...")
            make = ["make", "-j", str(jobs_), "-C", str(obj), "-f", f"{PLAYER}.mk", "VM_TRACE=0",
                    *make_overrides()]
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
                "build_seconds": round(seconds, 1)}

    data = get_or_build(root, key, build, force=force, progress=progress, what="sim native")
    return Path(data["executable"])


def _cmd_native(args: argparse.Namespace) -> int:
    try:
        exe = build_native(args.nvdla_hw, args.config, jobs=args.jobs, force=args.force, threads=args.threads)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(exe)
    return 0


def add_native_subcommand(sub: argparse._SubParsersAction) -> None:
    n = sub.add_parser(
        "native", help="build (or reuse) NVDLA's native C++ trace player from the same sources and flags",
        description="Build NVDLA's verif/verilator trace player (nvdla.cpp) of your checkout from the RTL "
                    "and Verilator flags `sim build` uses, for `bench/bench_sim.py --native`. Prints "
                    "the executable's path.")
    n.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"),
                   help="nvdla/hw checkout with outdir/<config>/vmod (default: $NVDLA_HW)")
    n.add_argument("--config", default="nv_small", help="NVDLA project (default nv_small)")
    n.add_argument("--jobs", "-j", type=int, default=None, help="parallel C++ compile jobs")
    n.add_argument("--force", action="store_true", help="rebuild even when cached")
    n.add_argument("--threads", type=int, default=1, help="Verilator model threads (as `sim build --threads`)")
    n.set_defaults(func=_cmd_native)
