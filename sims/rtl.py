"""The generated NVDLA RTL a simulator is built from: where the user's checkout holds it
(``<nvdla_hw>/outdir/<config>/vmod``, made by NVDLA's ``tmake`` flow), which files Verilator
reads, the wrapper's port widths, and the constructs Verilator rejects.

Rules learnt from the RTL:
  * the ASIC RAM models (``rams/model`` + ``rams/synth``) use ``#0.1`` delays and simulate
    wrongly under Verilator, so the FPGA RAM models (``rams/fpga/model``) are used;
  * NVDLA's own ``verif/verilator`` file list is stale; sources are collected from the tree.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .checkout import generated_root, is_generated
from .toolchain import BuildError

#: Debian packages NVDLA's tmake flow needs (perl modules, cpp, a Java runtime for Ordt.jar).
TMAKE_DEBIAN_PACKAGES = "libyaml-perl libcapture-tiny-perl libxml-simple-perl cpp default-jre-headless"
#: Defines NVDLA's own Verilator flow uses (no PLI, no DesignWare, synthesis view).
NVDLA_DEFINES: tuple[str, ...] = ("NO_PLI_OR_EMU", "NO_PLI", "DESIGNWARE_NOEXIST", "SYNTHESIS")
SOURCE_SUFFIXES = (".v", ".sv", ".vh", ".svh", ".vlib")


def find_vmod(nvdla_hw: str | os.PathLike[str] | None, config: str) -> Path:
    """Return ``<nvdla_hw>/outdir/<config>/vmod`` or raise BuildError saying how to create it."""
    if not nvdla_hw:
        nvdla_hw = os.environ.get("NVDLA_HW")
    if not nvdla_hw:
        raise BuildError("no nvdla/hw checkout given: pass --nvdla-hw PATH or set NVDLA_HW")
    root = Path(nvdla_hw).expanduser().resolve()
    if not root.is_dir():
        raise BuildError(f"--nvdla-hw {root} is not a directory")
    gen = generated_root(root, config)  # a read-only checkout's: its working copy
    vmod = gen / "outdir" / config / "vmod"
    if not is_generated(gen, config):
        raise BuildError(
            f"{vmod} has no generated RTL (nvdla/top/NV_nvdla.v missing).\n"
            f"Generate it with NVDLA's tmake flow in your nvdla/hw checkout (master branch; a read-only one is "
            f"copied to the cache first):\n"
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
