"""``nvdla-hil sim setup``: get a bare nvdla/hw checkout to generated RTL that ``sim build`` accepts.

Steps, each reported as it happens:
  1. prerequisites of NVDLA's tmake flow (cpp, perl with YAML / Capture::Tiny / XML::Simple,
     java, python3), naming the Debian packages that provide whatever is missing;
  2. ``tree.make``: written with this machine's tool paths when absent; an existing one is never
     overwritten, only validated (every problem reported with the line to change);
  3. NVDLA's own flow, ``tools/bin/tmake -build vmod -projects <config>`` (master; nvdlav1's
     tmake takes ``-project <config>``: :class:`TmakeFlow` reads which from the checkout's own
     script), then a check that it really produced ``outdir/<config>/vmod`` (tmake exits 0
     having built nothing when tree.make is missing or its ``.cleaned`` stamp is stale, and
     nvdlav1's prints ``BUILD PASS`` even when a step failed);
  4. what keeps the generated RTL from a correct Verilator build: RAM models Verilator cannot
     simulate (``build.check_ram_models``: nvdlav1 has no FPGA RAM models) end setup with exit 2
     and the reason, never "setup done"; the known RTL constructs Verilator rejects
     (``build.find_known_rtl_issues``) are changed only with ``--apply-fixes``: then the ``vmod/``
     source line (so regenerating keeps the fix) and the generated copy are changed, a diff is
     printed, the RTL is regenerated and checked again.

nvdla-hil ships no NVDLA file: everything here reads or edits the user's own checkout.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .build import cache_root
from .checkout import is_read_only, working_copy
from .rtl import TMAKE_DEBIAN_PACKAGES, RtlIssue, check_ram_models, find_known_rtl_issues

__all__ = ["Prerequisite", "SetupError", "TmakeFlow", "add_setup_subcommand", "apply_fix", "check_prerequisites",
           "parse_tree_make", "render_tree_make", "run_setup", "run_tmake", "tmake_flow", "tool_paths",
           "validate_tree_make"]

Progress = Callable[[str], None]


class SetupError(RuntimeError):
    """A setup step failed; the message says what to do."""


# ---------------------------------------------------------------------------------------------
# prerequisites
# ---------------------------------------------------------------------------------------------
@dataclass
class Prerequisite:
    name: str
    ok: bool
    detail: str       # path found, or why it is missing
    package: str      # Debian package that provides it


#: (what, executable, perl module or "", Debian package)
_PREREQS: tuple[tuple[str, str, str, str], ...] = (
    ("cpp", "cpp", "", "cpp"),
    ("perl", "perl", "", "perl"),
    ("perl module YAML", "perl", "YAML", "libyaml-perl"),
    ("perl module Capture::Tiny", "perl", "Capture::Tiny", "libcapture-tiny-perl"),
    ("perl module XML::Simple", "perl", "XML::Simple", "libxml-simple-perl"),
    ("java", "java", "", "default-jre-headless"),
    ("python3", "python3", "", "python3"),
)


#: Debian packages of the non-core Perl modules a checkout's tmake may ``use``
_PERL_PACKAGES = {"YAML": "libyaml-perl", "Capture::Tiny": "libcapture-tiny-perl",
                  "XML::Simple": "libxml-simple-perl", "IO::Tee": "libio-tee-perl"}


def check_prerequisites(path: str | None = None, perl_modules: Sequence[str] = ()) -> list[Prerequisite]:
    """Check what NVDLA's ``tmake -build vmod`` runs, plus ``perl_modules`` (those the checkout's
    own tmake ``use``s: nvdlav1's needs IO::Tee). ``path`` replaces ``$PATH`` (tests)."""
    out: list[Prerequisite] = []
    known = {m for _, _, m, _ in _PREREQS if m}
    extra = tuple((f"perl module {m}", "perl", m, _PERL_PACKAGES.get(m, f"CPAN module {m}"))
                  for m in perl_modules if m not in known)
    for what, exe, module, package in _PREREQS + extra:
        found = shutil.which(exe, path=path)
        if not found:
            out.append(Prerequisite(what, False, f"no `{exe}` on PATH", package))
            continue
        if module:
            try:
                r = subprocess.run([found, f"-M{module}", "-e", "1"], capture_output=True, text=True,
                                   timeout=60, check=False)
                ok, err = r.returncode == 0, (r.stderr.strip().splitlines() or [""])[0]
            except (OSError, subprocess.TimeoutExpired) as e:
                ok, err = False, str(e)
            out.append(Prerequisite(what, ok, f"{found} -M{module}" if ok else f"{found} cannot load {module}: {err}",
                                    package))
        elif exe == "java":
            try:
                r = subprocess.run([found, "-version"], capture_output=True, text=True, timeout=60,
                                   check=False)
                ok = r.returncode == 0
                first = (r.stderr or r.stdout).strip().splitlines()
                detail = f"{found} ({first[0]})" if ok and first else f"{found} does not run (`-version` failed)"
            except (OSError, subprocess.TimeoutExpired) as e:
                ok, detail = False, f"{found} does not run: {e}"
            out.append(Prerequisite(what, ok, detail, package))
        else:
            out.append(Prerequisite(what, True, found, package))
    return out


def install_hint(missing: Sequence[Prerequisite]) -> str:
    pkgs = " ".join(dict.fromkeys(p.package for p in missing))
    return f"sudo apt-get install {pkgs}" if pkgs else ""


# ---------------------------------------------------------------------------------------------
# tree.make
# ---------------------------------------------------------------------------------------------
#: variables the vmod flow runs as commands (must name a working program)
_TOOL_VARS = ("CPP", "PERL", "JAVA", "PYTHON")
_ASSIGN_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*[:?]?=\s*(.*?)\s*$")


def parse_tree_make(text: str) -> dict[str, str]:
    """``VAR := value`` lines of a tree.make (comments and other lines ignored)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        m = _ASSIGN_RE.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def tool_paths(path: str | None = None) -> dict[str, str]:
    """This machine's tools for tree.make (absolute paths; "" when not found)."""
    def find(*names: str) -> str:
        for n in names:
            p = shutil.which(n, path=path)
            if p:
                return os.path.abspath(p)
        return ""
    def python3() -> str:
        # not a virtualenv's python (tree.make outlives venvs); the first other python3 on PATH
        venv = Path(sys.prefix).resolve() if sys.prefix != sys.base_prefix else None
        for d in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
            p = shutil.which("python3", path=d) if d else None
            if p and not (venv and Path(p).resolve().is_relative_to(venv)) \
                    and not (Path(d) / "activate").exists():
                return os.path.abspath(p)
        return find("python3")
    return {"CPP": find("cpp"), "GCC": find("gcc", "cc"), "CXX": find("g++", "c++"), "PERL": find("perl"),
            "JAVA": find("java"), "PYTHON": python3()}


def render_tree_make(tools: dict[str, str], projects: Sequence[str]) -> str:
    """The tree.make NVDLA's interactive ``make`` would write, for this machine, no DesignWare."""
    lines = ["## tree.make written by `nvdla-hil sim setup` (what NVDLA's interactive `make` writes)",
             f"PROJECTS := {' '.join(projects)}",
             "USE_DESIGNWARE := 0",
             "DESIGNWARE_DIR := /nonexistent"]
    for var in ("CPP", "GCC", "CXX", "PERL", "JAVA", "PYTHON"):
        if tools.get(var) or var in _TOOL_VARS:
            lines.append(f"{var} := {tools.get(var) or '/nonexistent'}")
    lines += ["SYSTEMC := /nonexistent", "VCS_HOME := /nonexistent", "NOVAS_HOME := /nonexistent",
              "VERDI_HOME := /nonexistent"]
    return "\n".join(lines) + "\n"


def _runs(cmd: str, path: str | None) -> str | None:
    """Resolve a tree.make tool value (absolute path or name on PATH) to an executable."""
    first = cmd.split()[0] if cmd.split() else ""
    if not first:
        return None
    if os.sep in first:
        return first if os.path.isfile(first) and os.access(first, os.X_OK) else None
    return shutil.which(first, path=path)


def validate_tree_make(tree_make: Path, *, path: str | None = None) -> list[str]:
    """Problems that would make tmake fail or build nothing; [] when the file is usable."""
    try:
        values = parse_tree_make(tree_make.read_text(errors="replace"))
    except OSError as e:
        return [f"cannot read {tree_make}: {e}"]
    tools = tool_paths(path)
    problems: list[str] = []
    for var in _TOOL_VARS:  # GCC, CXX, SYSTEMC, ... are not used by the vmod flow
        if var not in values:
            problems.append(f"{var} is not set; add `{var} := {tools.get(var) or f'<path of {var.lower()}>'}`")
            continue
        if not _runs(values[var], path):
            suggestion = tools.get(var)
            problems.append(f"{var} := {values[var]} does not exist or is not executable"
                            + (f"; set `{var} := {suggestion}`" if suggestion else ""))
    py = values.get("PYTHON")
    if py and (exe := _runs(py, path)):
        try:
            r = subprocess.run([exe, "-c", "import sys; print(sys.version_info[0])"], capture_output=True,
                               text=True, timeout=60, check=False)
            major = r.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            major = ""
        if major != "3":
            problems.append(f"PYTHON := {py} is not a Python 3 (NVDLA's defgen needs Python 3); "
                            f"set `PYTHON := {tools.get('PYTHON') or '<path of python3>'}`")
    if values.get("USE_DESIGNWARE", "0").strip() not in ("0", ""):
        dw = values.get("DESIGNWARE_DIR", "")
        if not dw or not Path(dw).is_dir():
            problems.append(f"USE_DESIGNWARE := {values['USE_DESIGNWARE']} but DESIGNWARE_DIR "
                            f"({dw or 'unset'}) is not a directory; set `USE_DESIGNWARE := 0`")
    return problems


def stale_clean_stamp(hw: Path) -> bool:
    """True when tmake would delete tree.make and outdir and exit 0 (``.cleaned`` differs from
    ``.cleanme``: the tree changed since tmake last ran)."""
    cleanme, cleaned = hw / ".cleanme", hw / ".cleaned"
    if not cleaned.exists() or not cleanme.exists():
        return False
    return cleanme.read_bytes() != cleaned.read_bytes()


# ---------------------------------------------------------------------------------------------
# tmake
# ---------------------------------------------------------------------------------------------
_PERL_USE_RE = re.compile(r"^\s*use\s+([A-Z][\w:]*)", re.MULTILINE)
#: Perl modules every perl has (never a prerequisite to install)
_PERL_CORE = frozenset({"Getopt::Long", "Data::Dumper", "Carp", "File::Basename", "File::Path", "Cwd",
                        "File::Spec", "File::Copy", "POSIX"})
#: a failed step in the log of nvdlav1's tmake (its ``make | tee`` hides make's exit status)
_TMAKE_FAIL_RE = re.compile(r"build fail|make(?:\[\d+\])?: \*\*\*|^Error[: ]", re.MULTILINE)


@dataclass(frozen=True)
class TmakeFlow:
    """How this checkout's ``tools/bin/tmake`` is called and how it says it passed.

    master's tmake takes ``-projects <config>`` and reports ``[TMAKE]: <config>: PASS``; nvdlav1's
    takes ``-project <config>``, ``use``s IO::Tee, and prints ``BUILD PASS`` unconditionally (each
    step runs as ``make ... | tee``, so a failing make goes unnoticed): there a pass is the banner
    and no failed step in the log."""

    project_option: str          # "-projects" (master) or "-project" (nvdlav1)
    perl_modules: tuple[str, ...]  # non-core modules the script ``use``s

    def command(self, config: str) -> list[str]:
        return ["./tools/bin/tmake", "-build", "vmod", self.project_option, config]

    def passed(self, log_text: str, config: str) -> str | None:
        """None when the log shows a pass, else what is wrong."""
        if self.project_option == "-projects":
            return None if f"[TMAKE]: {config}: PASS" in log_text else f"tmake did not report `{config}: PASS`"
        bad = _TMAKE_FAIL_RE.search(log_text)
        if bad:
            line = log_text[: bad.start()].count("\n") + 1
            return f"a tmake step failed (log line {line}: {log_text.splitlines()[line - 1].strip()[:160]})"
        return None if "BUILD PASS" in log_text else "tmake did not print BUILD PASS"


def tmake_flow(hw: Path) -> TmakeFlow:
    """Read the checkout's tmake script: which project option it declares, which modules it uses."""
    text = (hw / "tools" / "bin" / "tmake").read_text(errors="replace")
    v1 = re.search(r'"project=s"', text) and not re.search(r'"projects[=|]', text)
    option = "-project" if v1 else "-projects"
    mods = tuple(dict.fromkeys(m for m in _PERL_USE_RE.findall(text) if m not in _PERL_CORE))
    return TmakeFlow(option, mods)


def run_tmake(hw: Path, config: str, progress: Progress, log_path: Path) -> float:
    """Run the checkout's ``tools/bin/tmake -build vmod`` for ``config`` in ``hw`` (:class:`TmakeFlow`);
    check it produced the RTL."""
    vmod = hw / "outdir" / config / "vmod"
    top = vmod / "nvdla" / "top" / "NV_nvdla.v"
    before = top.stat().st_mtime if top.is_file() else None
    flow = tmake_flow(hw)
    cmd = flow.command(config)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    progress(f"  $ cd {hw} && {' '.join(cmd)}   (log: {log_path})")
    t0 = time.monotonic()
    done = threading.Event()

    def ticker() -> None:
        while not done.wait(15.0):
            progress(f"  [tmake] {time.monotonic() - t0:5.0f} s")

    with open(log_path, "w") as log:
        threading.Thread(target=ticker, daemon=True).start()
        try:
            rc = subprocess.run(cmd, cwd=hw, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        finally:
            done.set()
    seconds = time.monotonic() - t0
    text = log_path.read_text(errors="replace")
    if rc != 0:
        tail = "\n".join("    " + ln for ln in text.splitlines()[-15:])
        raise SetupError(f"tmake failed (exit {rc}) after {seconds:.0f} s; its log: {log_path}, "
                         f"NVDLA's per-step logs: {hw}/outdir/{config}.*.log\n{tail}")
    if "does not exist, please run make" in text:
        raise SetupError(f"tmake built nothing: {hw}/tree.make is missing (tmake said so and exited 0)")
    if "out of date" in text:
        raise SetupError("tmake built nothing: it found the tree out of date and deleted tree.make "
                         "and outdir (its .cleaned stamp differed from .cleanme); rerun "
                         "`nvdla-hil sim setup` to write tree.make again")
    if not top.is_file() or (before is not None and top.stat().st_mtime < before):
        raise SetupError(f"tmake exited 0 but {top} was not generated; see {log_path}")
    problem = flow.passed(text, config)
    if problem:
        raise SetupError(f"{problem}; see {log_path}")
    return seconds


# ---------------------------------------------------------------------------------------------
# the known RTL issue
# ---------------------------------------------------------------------------------------------
def _wire_to_assign(line: str) -> str:
    return re.sub(r"^(\s*)wire(\s+)", r"\1assign\2", line, count=1)


def _edit_line(path: Path, lineno: int, progress: Progress) -> bool:
    """Change ``wire`` to ``assign`` on one line of ``path``; print the diff. False if the line
    is not a ``wire`` declaration (already fixed)."""
    data = path.read_bytes().decode(errors="surrogateescape")
    lines = data.splitlines(keepends=True)
    old = lines[lineno - 1]
    new = _wire_to_assign(old)
    if new == old:
        return False
    lines[lineno - 1] = new
    tmp = path.with_name(path.name + ".nvdla-hil-tmp")
    tmp.write_bytes("".join(lines).encode(errors="surrogateescape"))
    shutil.copymode(path, tmp)
    os.replace(tmp, path)
    diff = difflib.unified_diff([old], [new], fromfile=f"{path} (line {lineno}, before)",
                                tofile=f"{path} (after)", n=0)
    progress("".join(f"    {d}" if d.endswith("\n") else f"    {d}\n" for d in diff).rstrip("\n"))
    return True


def apply_fix(issue: RtlIssue, progress: Progress) -> list[Path]:
    """Apply the ``wire`` -> ``assign`` fix to the vmod/ source line and the generated line."""
    changed: list[Path] = []
    if issue.source is not None and _edit_line(issue.source, issue.source_line, progress):
        changed.append(issue.source)
    if _edit_line(issue.generated, issue.line, progress):
        changed.append(issue.generated)
    return changed


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------
def _check_checkout(hw: Path, config: str, progress: Progress) -> int | None:
    """2 when ``hw`` is not an nvdla/hw checkout or lacks ``config``; None to go on."""
    if not (hw / "tools" / "bin" / "tmake").is_file() or not (hw / "vmod").is_dir():
        progress(f"error: {hw} is not an nvdla/hw checkout (no tools/bin/tmake or vmod/); clone "
                 f"https://github.com/nvdla/hw (branch master) and pass its path")
        return 2
    if not (hw / "spec" / "defs" / f"{config}.spec").is_file():
        known = sorted(p.stem for p in (hw / "spec" / "defs").glob("*.spec"))
        progress(f"error: {hw} has no configuration {config} (spec/defs/{config}.spec); "
                 f"it has: {', '.join(known)}")
        return 2
    return None


def _step_prerequisites(hw: Path, path: str | None, progress: Progress) -> int | None:
    """Step 1: the tools and perl modules NVDLA's tmake flow needs; 1 when some are missing."""
    progress("[1/4] prerequisites of NVDLA's tmake flow")
    flow = tmake_flow(hw)
    prereqs = check_prerequisites(path, flow.perl_modules)
    for p in prereqs:
        progress(f"  {'ok     ' if p.ok else 'MISSING'} {p.name}: {p.detail}")
    missing = [p for p in prereqs if not p.ok]
    if missing:
        progress(f"  -> install what is missing (Debian/Ubuntu): {install_hint(missing)}\n"
                 f"     (the whole set: sudo apt-get install {TMAKE_DEBIAN_PACKAGES} python3)\n"
                 f"     then rerun this command.")
        return 1
    return None


def _step_tree_make(hw: Path, config: str, path: str | None, progress: Progress) -> int | None:
    """Step 2: check the user's tree.make (never overwritten) or write one; 1 when the user
    has to act (a broken tree.make, a stale clean stamp that would make tmake build nothing)."""
    progress(f"[2/4] {hw}/tree.make")
    tree_make = hw / "tree.make"
    if tree_make.exists():
        problems = validate_tree_make(tree_make, path=path)
        if problems:
            progress("  your existing tree.make has problems (nvdla-hil never overwrites it; edit it, or "
                     "move it away to let setup write one):")
            for pr in problems:
                progress(f"    - {pr}")
            return 1
        progress("  exists and is valid (tool paths exist, PYTHON is Python 3); left unchanged")
    else:
        tools = tool_paths(path)
        text = render_tree_make(tools, [config])
        tree_make.write_text(text)
        progress("  written (USE_DESIGNWARE := 0; the tools found on PATH):")
        progress("".join(f"    {ln}\n" for ln in text.splitlines()).rstrip("\n"))
        problems = validate_tree_make(tree_make, path=path)
        if problems:  # pragma: no cover - prerequisites were checked above
            for pr in problems:
                progress(f"    - {pr}")
            return 1
    if stale_clean_stamp(hw):
        progress(f"  {hw}/.cleaned differs from .cleanme: tmake would delete tree.make and outdir/ and "
                 f"build nothing. If that is what you want, run `cd {hw} && ./tools/bin/tmake -build vmod` "
                 f"yourself; otherwise `cp {hw}/.cleanme {hw}/.cleaned` and rerun this command.")
        return 1
    return None


def _tmake_log(hw: Path, config: str) -> Path:
    """Where setup keeps the log of NVDLA's tmake run (next to the simulator cache)."""
    return cache_root().parent / "setup" / f"{hw.name}-{config}-tmake.log"


def _step_generate(hw: Path, config: str, tmake: bool, progress: Progress) -> int | None:
    """Step 3: run NVDLA's flow to generate ``outdir/<config>/vmod`` (or, with ``tmake``
    False, check that it is there); 2 when it fails."""
    vmod = hw / "outdir" / config / "vmod"
    if tmake:
        progress(f"[3/4] NVDLA's flow: generate {vmod} (about a minute)")
        try:
            secs = run_tmake(hw, config, progress, _tmake_log(hw, config))
        except SetupError as e:
            progress(f"  error: {e}")
            return 2
        progress(f"  done in {secs:.0f} s: {vmod}")
    else:
        progress(f"[3/4] NVDLA's flow: skipped (--no-tmake); using {vmod}")
        if not (vmod / "nvdla" / "top" / "NV_nvdla.v").is_file():
            progress(f"  error: {vmod} has no generated RTL; run without --no-tmake")
            return 2
    return None


def _step_rtl(hw: Path, config: str, *, apply_fixes: bool, tmake: bool, progress: Progress) -> int | None:
    """Step 4: what keeps the generated RTL from a Verilator build. ASIC-only RAM models: 2;
    known constructs Verilator rejects: listed (1), or with ``apply_fixes`` changed in the
    vmod/ source and the generated file, regenerated and re-checked."""
    vmod = hw / "outdir" / config / "vmod"
    progress("[4/4] what keeps the generated RTL from a Verilator build")
    rams = check_ram_models(vmod)
    if rams:
        for r in rams:
            progress("  error: " + r.replace("\n", "\n  "))
        progress("  setup cannot make this checkout buildable: `nvdla-hil sim build` refuses it for the reason above.")
        return 2
    issues = find_known_rtl_issues(vmod)
    if not issues:
        progress("  none found")
        return None
    if not apply_fixes:
        for i in issues:
            progress("  " + i.message().replace("\n", "\n  "))
        progress("  nothing was changed. Make the change(s) above yourself, or rerun with --apply-fixes to "
                 "let setup change the vmod/ source line(s) and the generated file(s).")
        return 1
    for i in issues:
        progress(f"  {i.generated}:{i.line}: `{i.text}` ({i.width}-bit {i.direction} `{i.port}` "
                 f"redeclared as a 1-bit wire); changing:")
        changed = apply_fix(i, progress)
        if i.source is None:
            progress("  note: the vmod/ source line was not found; regenerating would undo the fix")
        if not changed:
            progress("  (already changed)")
    if tmake and any(i.source is not None for i in issues):
        progress("  regenerating, to check the fix in vmod/ survives tmake:")
        try:
            secs = run_tmake(hw, config, progress, _tmake_log(hw, config))
        except SetupError as e:
            progress(f"  error: {e}")
            return 2
        progress(f"  regenerated in {secs:.0f} s")
    left = find_known_rtl_issues(vmod)
    if left:
        for i in left:
            progress("  still: " + i.message().replace("\n", "\n  "))
        return 1
    progress("  re-checked: none left")
    return None


def run_setup(hw: Path, config: str, *, apply_fixes: bool = False, tmake: bool = True,
              progress: Progress = lambda m: print(m, flush=True), path: str | None = None) -> int:
    """Run every step; return 0 when ``nvdla-hil sim build`` can go ahead, 1 when the user has
    to act (the messages say what), 2 on a hard error."""
    given = hw = Path(hw).expanduser().absolute()
    if hw.is_dir() and is_read_only(hw):  # NVDLA's flow writes tree.make and outdir/: a copy in the cache
        try:
            hw = working_copy(hw, progress)
        except OSError as e:
            progress(f"  error: cannot make a working copy of the read-only checkout {given}: {e}")
            return 2
    steps: tuple[Callable[[], int | None], ...] = (
        lambda: _check_checkout(hw, config, progress),
        lambda: _step_prerequisites(hw, path, progress),
        lambda: _step_tree_make(hw, config, path, progress),
        lambda: _step_generate(hw, config, tmake, progress),
        lambda: _step_rtl(hw, config, apply_fixes=apply_fixes, tmake=tmake, progress=progress),
    )
    for step in steps:
        rc = step()
        if rc is not None:
            return rc
    progress(f"setup done. Next: nvdla-hil sim build --nvdla-hw {given} --config {config}")
    return 0


def _cmd_setup(args: argparse.Namespace) -> int:
    if not args.nvdla_hw:
        print("error: pass --nvdla-hw PATH (your nvdla/hw checkout) or set NVDLA_HW", file=sys.stderr)
        return 2
    return run_setup(Path(args.nvdla_hw), args.config, apply_fixes=args.apply_fixes, tmake=not args.no_tmake)


def add_setup_subcommand(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "setup", help="prepare an nvdla/hw checkout: prerequisites, tree.make, tmake, known RTL fixes",
        description="Check the prerequisites of NVDLA's tmake flow, write (or validate) tree.make, run "
                    "`tools/bin/tmake -build vmod -projects CONFIG`, and check the generated RTL for "
                    "constructs Verilator rejects (changed only with --apply-fixes).")
    s.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"),
                   help="nvdla/hw checkout, branch master (default: $NVDLA_HW)")
    s.add_argument("--config", default="nv_small", help="NVDLA project (default nv_small)")
    s.add_argument("--apply-fixes", action="store_true",
                   help="change the known bad line in the checkout's vmod/ source and generated copy "
                        "(prints a diff; default: only report)")
    s.add_argument("--no-tmake", action="store_true",
                   help="do not run tmake; check the existing outdir/CONFIG/vmod")
    s.set_defaults(func=_cmd_setup)
