"""Every command shown in the READMEs' shell blocks works as shown (issue 39): a README that
drifts from the tool fails this suite.

The fenced ``sh`` blocks of README.md, sims/README.md, harness/layouts/README.md and
testvectors/README.md (and their unlabelled blocks whose lines start with ``nvdla-hil``) are
parsed; each command is one test, id ``<file>:<line>``. Every command, whatever happens to it
next, is checked against the tool: its subcommand exists and every option it names is one the
subcommand (or pytest, or the bench script) accepts. Then, by what it is:

* **run**: our command, its prerequisites present: it runs in a fresh folder of its block (the
  commands of a block share it, in order, as in one shell), with the README's paths mapped to
  this machine's (:data:`PLACES`), and must exit as the README implies (0; 1 where it shows a
  failure being found, :data:`EXPECT`);
* **needs X**: a prerequisite is absent (an environment variable, a file of a checkout, a lab
  file): skipped, naming it;
* **long**: a build, a setup or a whole regression (:data:`LONG`): options checked here, run in
  full only by ``-m slow`` where it is bounded (:data:`SLOW_RUNS`); a sweep over many tests is
  never run here (said in its reason);
* **synopsis**: a usage line (``[...]``, ``a|b``, ``...``, ``CASE``): options checked only;
* **external**: another tool (``make``, ``apt-get``, ``git clone``, ``pip install``, labgrid):
  checked where it can be without root or network (a ``make`` target exists, a pip extra is
  declared), else skipped naming the tool.

An unknown command (a new first word in a README) fails until it is classified here.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _checkouts import generated_rtl

ROOT = Path(__file__).resolve().parents[1]
READMES = ("README.md", "sims/README.md", "harness/layouts/README.md", "testvectors/README.md")
BIN = Path(sys.executable).parent
HANG_GUARD_S = 900.0  # a hang guard only

#: README placeholders and paths -> (environment variable whose value replaces them, suffix, what it is);
#: longest first. ``../shared`` is where the project's READMEs put NVDLA's checkouts beside the repository.
PLACES: tuple[tuple[str, str, str, str], ...] = (
    ("~/my-hw/spec/defs/my_cfg.spec", "NVDLA_HW", "/spec/defs/nv_small.spec", "a configuration's .spec (nv_small's)"),
    ("../shared/nvdla/trace_tests", "NVDLA_TRACE_SETS", "", "NVDLA's trace tests"),
    ("../shared/nvdla_src/sw", "NVDLA_SW", "", "an nvdla/sw checkout"),
    ("../shared/nvdla_sw", "NVDLA_LOADABLES", "", "NVDLA's software regression (flatbufs, golden)"),
    ("~/nvdla-hw-v1", "NVDLA_HW_V1", "", "an nvdla/hw nvdlav1 checkout"),
    ("~/nvdla-hw", "NVDLA_HW", "", "an nvdla/hw checkout"),
    ("~/nvdla-sw", "NVDLA_SW", "", "an nvdla/sw checkout"),
)
#: words of a usage line, never a value to run with
PLACEHOLDERS = {"PATH", "CASE", "CASE_A", "CASE_B", "DIR", "FOLDER", "CASE_OR_FOLDER", "EXPR", "FILE", "SPEC", "N",
                "P", "UNIT", "S", "I"}
#: our subcommands that build, set up or sweep: (subcommand path, why not run by default)
LONG: dict[tuple[str, ...], str] = {
    ("sim", "setup"): "runs NVDLA's tmake flow on the checkout (1-2 min)",
    ("sim", "build"): "builds the simulator when not cached (1-2 min; ~7 min with coverage)",
    ("sim", "native"): "builds the native simulator (minutes)",
    ("regress",): "a whole regression",
    ("net", "build-compiler"): "builds protobuf and NVDLA's compiler when not cached (minutes)",
    ("board-emu",): "a server: runs until stopped",
    ("vectors", "regolden"): "re-makes the goldens of a bundled suite on an oracle (and rewrites it)",
    ("coverage", "rtl"): "reads a run's RTL coverage (results/latest of a regress --rtl-coverage run)",
}
#: options that make a command long whatever its subcommand: a simulator or the C model as target, steering
LONG_OPTIONS = {"--target": {"verilator", "cmod", "serial"}, "--steer": None}
#: long commands that -m slow runs in full, as in the README (bounded: a cached build, one suite on the model)
SLOW_RUNS = {
    "nvdla-hil sim build --nvdla-hw ~/nvdla-hw --config nv_small",
    "nvdla-hil sim build --nvdla-hw ~/nvdla-hw --config nv_small_256_full",
    "nvdla-hil net build-compiler --nvdla-sw ../shared/nvdla_src/sw",
    "nvdla-hil regress --suite loadables",
    "pytest --pyargs nvdla_hil.harness.suites --nvdla-target model --nvdla-traces ../shared/nvdla/trace_tests/nv_small",
}
#: exit codes the README implies other than 0: (command start -> code, why)
EXPECT: dict[str, tuple[int, str]] = {
    "nvdla-hil loadable run  .../NN_L0_0_fbuf --model-bug": (1, "the README shows it naming the first wrong layer"),
}
#: cheap equivalents of a small sweep, said here: README command -> (replacement, why)
CHEAPER: dict[str, tuple[str, str]] = {
    "nvdla-hil vectors gen sdp_lut --seed 1 --count 16 --out testvectors/sdp_lut":
        ("nvdla-hil vectors gen sdp_lut --seed 1 --count 4 --out testvectors/sdp_lut",
         "4 cases, not 16 (the next command regenerates case 003)"),
}


@dataclass
class Command:
    file: str
    line: int
    text: str  # as in the README, comment removed, continuation lines joined
    block: int
    env: dict[str, str] = field(default_factory=dict)  # `export` lines of the block before it


def _strip_comment(line: str) -> str:
    out, quote = [], ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).rstrip()


def readme_commands() -> list[Command]:
    cmds: list[Command] = []
    for name in READMES:
        path = ROOT / name
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").split("\n")
        i, block = 0, 0
        while i < len(lines):
            fence = lines[i].strip()
            if not fence.startswith("```"):
                i += 1
                continue
            info = fence[3:].strip()
            body_start = i + 1
            j = body_start
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            body = lines[body_start:j]
            i = j + 1
            block += 1
            shell = info in ("sh", "bash", "shell", "console") or (
                not info and any(ln.startswith("nvdla-hil ") for ln in body))
            if not shell:
                continue
            env: dict[str, str] = {}
            k = 0
            while k < len(body):
                start = k
                text = _strip_comment(body[k])
                while text.endswith("\\") and k + 1 < len(body):
                    k += 1
                    text = text[:-1].rstrip() + " " + _strip_comment(body[k]).strip()
                k += 1
                text = text.strip()
                if not text:
                    continue
                if text.startswith("export "):
                    var, _, val = text[len("export "):].partition("=")
                    env[var] = val
                cmds.append(Command(name, body_start + start + 1, text, block, dict(env)))
    return cmds


COMMANDS = readme_commands()


# ---- checking options against the tool ---------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    from nvdla_hil.harness.cli import build_parser

    return build_parser()


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def _words(text: str) -> list[str]:
    return shlex.split(text.rstrip("&").strip())


def check_cli_options(text: str) -> tuple[str, ...]:
    """Each alternative of an ``nvdla-hil`` line (``a|b``, ``x | regs y``) names a subcommand
    that exists and only options it accepts; returns the subcommand path of the first."""
    words = _words(text)[1:]
    top = _parser()
    alts: list[list[str]] = [[]]
    for w in words:  # "regs list SDP | regs dump CDP": alternatives of one synopsis
        if w == "|":
            alts.append([])
        else:
            alts[-1].append(w)
    first: tuple[str, ...] = ()
    for n, alt in enumerate(alts):
        if n and alt and alt[0] not in _subparsers(top) and words[0] in _subparsers(top):
            # "regs list SDP | regs dump CDP": each alternative is a subcommand of the same command
            alt = [words[0], *alt] if alt[0] in _subparsers(_subparsers(top)[words[0]]) else alt
        for variant in _expand(alt):
            path = _check_one(top, variant, text)
            first = first or path
    return first


def _expand(words: list[str]) -> list[list[str]]:
    """``vectors gen|show|diff ...`` -> one word list per subcommand alternative."""
    for k, w in enumerate(words):
        if "|" in w and not w.startswith("-") and "[" not in w and not any(c in w for c in "=:/"):
            return [v for alt in w.split("|") for v in _expand([*words[:k], alt, *words[k + 1:]])]
    return [words]


def _check_one(top: argparse.ArgumentParser, words: list[str], text: str) -> tuple[str, ...]:
    p, path = top, []
    for w in words:
        subs = _subparsers(p)
        if not subs:
            break
        if w not in subs:
            assert w in ("...",) or w.startswith(("-", "[")), f"{text!r}: {' '.join(['nvdla-hil', *path])} has no subcommand {w!r}"
            break
        p = subs[w]
        path.append(w)
    known = set(p._option_string_actions)
    for w in words:
        flag = w.strip("[]").split("=", 1)[0]
        if flag.startswith("-") and flag not in ("-", "--") and not re.fullmatch(r"-\d+", flag):
            assert flag in known, f"{text!r}: nvdla-hil {' '.join(path)} has no option {flag} (it has {sorted(known)})"
    return tuple(path)


_PYTEST_HELP: list[str] = []


def check_pytest_options(text: str) -> None:
    if not _PYTEST_HELP:
        r = subprocess.run([str(BIN / "pytest"), "--help", "-p", "no:cacheprovider"], capture_output=True, text=True,
                           cwd=ROOT, timeout=HANG_GUARD_S)
        _PYTEST_HELP.append(r.stdout)
    for w in _words(text)[1:]:
        flag = w.split("=", 1)[0]
        if flag.startswith("-"):
            assert re.search(rf"(^|[\s,]){re.escape(flag)}([\s=,]|$)", _PYTEST_HELP[0], re.M), \
                f"{text!r}: pytest (with nvdla-hil's plugin) has no option {flag}"


def check_script_options(text: str) -> None:
    words = _words(text)
    script = ROOT / words[1]
    assert script.is_file(), f"{text!r}: no script {words[1]}"
    r = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=ROOT,
                       timeout=HANG_GUARD_S, env=_env({}))
    assert r.returncode == 0, f"{text!r}: {words[1]} --help failed: {r.stderr[-500:]}"
    for w in words[2:]:
        flag = w.split("=", 1)[0]
        if flag.startswith("-"):
            assert flag in r.stdout, f"{text!r}: {words[1]} has no option {flag}"


# ---- running -------------------------------------------------------------------------------------------


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def localize(text: str, work: Path, env: dict[str, str]) -> tuple[str, list[str]]:
    """The command with the README's paths mapped to this machine's, and the prerequisites
    missing for it (each named)."""
    missing: list[str] = []
    out = text
    for readme, var, suffix, what in PLACES:
        if readme in out:
            val = env.get(var) or os.environ.get(var)
            if not val or not Path(val).exists():
                missing.append(f"needs {var} ({what})")
                continue
            out = out.replace(readme, val + suffix)
    out = re.sub(r"(--nvdla-hw) PATH\b", lambda m: f"{m.group(1)} {os.environ.get('NVDLA_HW', 'PATH')}", out)
    out = out.replace(" /tmp/re", f" {work}/re")
    for m in re.finditer(r"(?<!\S)\.\.\./(\S+)", out):  # ".../NAME": the loadable NAME of the same regression
        root = os.environ.get("NVDLA_LOADABLES")
        hits = sorted(Path(root).glob(f"flatbufs/**/{m.group(1)}")) if root else []
        if not hits:
            missing.append(f"needs NVDLA_LOADABLES with {m.group(1)}")
        else:
            out = out.replace(m.group(0), str(hits[0]))
    for w in _words(out):  # a file of a prerequisite checkout that this checkout does not have
        for var in ("NVDLA_SW", "NVDLA_HW", "NVDLA_LOADABLES", "NVDLA_TRACE_SETS", "NVDLA_HW_V1"):
            root = env.get(var) or os.environ.get(var)
            if root and w.startswith(root) and not Path(w).exists():
                missing.append(f"needs {w} ({var} has no such file)")
    if re.search(r"(?<!\S)lab\.yaml\b", out):
        missing.append("needs a lab file (lab.yaml) with its boards")
    return out, missing


def _is_synopsis(text: str) -> bool:
    words = _words(text)
    return any(("..." in w and not w.startswith(".../")) or w.startswith("[") or w.endswith("]") or w == "|" or w in PLACEHOLDERS
               or ("|" in w and not w.startswith("-")) for w in words)


def _long(text: str, path: tuple[str, ...]) -> str | None:
    for k in range(len(path), 0, -1):
        if path[:k] in LONG:
            return LONG[path[:k]]
    words = _words(text)
    for i, w in enumerate(words):
        if w in LONG_OPTIONS:
            vals = LONG_OPTIONS[w]
            if vals is None or (i + 1 < len(words) and words[i + 1] in vals):
                return f"{w} {words[i + 1] if i + 1 < len(words) else ''}: a simulator, the C model or a board".strip()
    return None


def run(cmd: str, work: Path, env: dict[str, str], expect: int) -> None:
    r = subprocess.run(cmd, shell=True, cwd=work, env=_env(env), capture_output=True, text=True, timeout=HANG_GUARD_S,
                       executable="/bin/bash")
    assert r.returncode == expect, f"$ {cmd}\nexit {r.returncode}, the README implies {expect}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


_WORK: dict[tuple[str, int], Path] = {}


@pytest.fixture
def block_dir(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """The block's work folder in this process, and whether it was made just now."""
    def get(cmd: Command) -> tuple[Path, bool]:
        key = (cmd.file, cmd.block)
        fresh = key not in _WORK
        if fresh:
            _WORK[key] = tmp_path_factory.mktemp(f"readme-{Path(cmd.file).parent.name or 'top'}-{cmd.block}")
        return _WORK[key], fresh
    return get


def _replay_block(cmd: Command, work: Path) -> None:
    """Run the commands of ``cmd``'s block that come before it in ``work`` (results not checked:
    their own tests do): a later command may read what an earlier one wrote, and under xdist the
    earlier one may have run on another worker, in another folder."""
    for c in COMMANDS:
        if (c.file, c.block) != (cmd.file, cmd.block) or c.line >= cmd.line or _plan(c)[0] != "run":
            continue
        if c.text.startswith(("python ", "pytest ")):
            continue
        env, missing = _env_of(c)
        text, more = localize(CHEAPER.get(c.text, (c.text, ""))[0], work, env)
        if missing or more:
            continue
        subprocess.run(text, shell=True, cwd=work, env=_env(env), capture_output=True, timeout=HANG_GUARD_S,
                       executable="/bin/bash", check=False)


def _env_of(cmd: Command) -> tuple[dict[str, str], list[str]]:
    """The block's ``export`` lines, their README paths mapped (``~/nvdla-sw`` -> $NVDLA_SW), and
    the prerequisites missing for them."""
    out: dict[str, str] = {}
    missing: list[str] = []
    for var, val in cmd.env.items():
        for readme, pvar, suffix, what in PLACES:
            if val.startswith(readme):
                if not os.environ.get(pvar) or not Path(os.environ[pvar]).exists():
                    missing.append(f"needs {pvar} ({what})")
                else:
                    val = os.environ[pvar] + suffix + val[len(readme):]
        out[var] = os.path.expanduser(val)
    return out, missing


def _compiler_missing() -> str | None:
    from nvdla_hil.harness.networks.compiler import cached_compiler

    sw = os.environ.get("NVDLA_SW")
    try:
        built = cached_compiler(sw) if sw else None
    except Exception:  # noqa: BLE001 - no usable checkout: the same prerequisite
        built = None
    return None if built else "needs NVDLA's compiler built for $NVDLA_SW (nvdla-hil net build-compiler: minutes when cold)"


#: our commands that need something built first: command start -> what is missing (None: present)
PREREQS = {
    "nvdla-hil net gen": _compiler_missing,  # the network's schema is compiled with the protoc built beside it
    "nvdla-hil net compile": _compiler_missing,
    "nvdla-hil net run lenet/": _compiler_missing,  # runs what its block's `net compile` made
}


def _external(cmd: Command, work: Path) -> None:
    words = _words(cmd.text)
    tool = words[0]
    if tool == "make":
        targets = [w for w in words[1:] if not w.startswith("-")]
        text = (ROOT / "Makefile").read_text()
        for t in targets:
            assert re.search(rf"^{re.escape(t)}:", text, re.M), f"{cmd.text!r}: the Makefile has no target {t}"
        return  # a target that exists; running it (install, the whole suite) is the developer's
    if tool == "pip" and words[1:2] == ["install"]:
        import tomllib

        extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        for w in words[2:]:
            m = re.fullmatch(r"nvdla-hil\[([\w,-]+)\]", w.strip("'\""))
            if m:
                for extra in m.group(1).split(","):
                    assert extra in extras, f"{cmd.text!r}: pyproject.toml declares no extra {extra!r}"
        return
    if tool == "export":
        return
    if tool == "timeout" or tool.startswith("labgrid-"):
        pytest.skip(f"lab tool {tool}: the lab recipe runs as written in tests/test_lab_readme.py (-m slow)")
    pytest.skip(f"external tool {tool}: not run here ({'root' if tool == 'apt-get' else 'network'})")


def _plan(cmd: Command) -> tuple[str, str]:
    """(kind, reason): run, long, synopsis, external, slow-run."""
    words = _words(cmd.text)
    tool = words[0] if words else ""
    if tool in ("make", "apt-get", "git", "pip", "export", "timeout") or tool.startswith("labgrid-"):
        return "external", tool
    if tool == "python" and len(words) > 1 and words[1].startswith("bench/"):
        return "long", "a benchmark (minutes): options checked"
    if tool == "pytest":
        if "--nvdla-target" in words and words[words.index("--nvdla-target") + 1] != "model":
            return "long", "a regression on a simulator or a board: options checked"
        return "collect", "the suites on the model: collected here, run in full by -m slow"
    if tool != "nvdla-hil":
        pytest.fail(f"{cmd.file}:{cmd.line}: README command {cmd.text!r} is not classified in {Path(__file__).name}")
    path = check_cli_options(cmd.text)
    if _is_synopsis(cmd.text):
        return "synopsis", "a usage line: options checked"
    why = _long(cmd.text, path)
    if why:
        return "long", why
    return "run", ""


@pytest.mark.parametrize("cmd", COMMANDS, ids=[f"{c.file}:{c.line}" for c in COMMANDS])
def test_readme_command(cmd: Command, block_dir) -> None:  # noqa: ANN001
    kind, why = _plan(cmd)
    work, fresh = block_dir(cmd)
    if fresh:
        _replay_block(cmd, work)
    env, env_missing = _env_of(cmd)
    if kind == "external":
        _external(cmd, work)
        return
    if cmd.text.startswith("python "):
        check_script_options(cmd.text)
        return
    if cmd.text.startswith("pytest "):
        check_pytest_options(cmd.text)
        if kind == "collect":
            text, missing = localize(cmd.text, work, env)
            missing = env_missing + missing
            if missing:
                pytest.skip("; ".join(dict.fromkeys(missing)))
            run(f"{text} -p no:cacheprovider --collect-only -q", work, env, 0)
        return
    if kind != "run":
        return  # options checked (above); see the reason in the plan
    text = CHEAPER.get(cmd.text, (cmd.text, ""))[0]
    text, missing = localize(text, work, env)
    missing = env_missing + missing + [m for start, check in PREREQS.items() if cmd.text.startswith(start)
                                       for m in [check()] if m]
    if missing:
        pytest.skip("; ".join(dict.fromkeys(missing)))
    expect = next((code for start, (code, _) in EXPECT.items() if cmd.text.startswith(start)), 0)
    run(text, work, env, expect)


@pytest.mark.slow
@pytest.mark.parametrize("text", sorted(SLOW_RUNS))
def test_readme_long_command_runs(text: str, tmp_path: Path) -> None:
    """The bounded long commands, in full (a cached build returns at once)."""
    cmd = next((c for c in COMMANDS if c.text == text), None)
    assert cmd is not None, f"{text!r} is no longer in a README: update SLOW_RUNS"
    env, env_missing = _env_of(cmd)  # the `export` lines of its block
    local, missing = localize(text, tmp_path, env)
    if env_missing + missing:
        pytest.skip("; ".join(dict.fromkeys(env_missing + missing)))
    if text.startswith("nvdla-hil sim build") and os.environ.get("NVDLA_HW"):
        # its block's `sim setup` first (not run here: long); for the shared read-only checkout, once, in its cache copy
        generated_rtl(os.environ["NVDLA_HW"], text.split("--config")[1].split()[0])
    run(local, tmp_path, env, 0)


def test_every_readme_with_commands_was_read() -> None:
    """The parser finds the commands it should: a broken fence would silently drop them."""
    files = {c.file for c in COMMANDS}
    assert {"README.md", "sims/README.md", "testvectors/README.md"} <= files
    assert any(c.text == "nvdla-hil profile list" for c in COMMANDS)
    assert any(c.text.startswith("nvdla-hil fuzz --unit pdp --target verilator") and "--baseline" in c.text
               for c in COMMANDS)  # a continuation line joined


@pytest.mark.parametrize(("text", "says"), [
    ("nvdla-hil profile list --bogus", "has no option --bogus"),
    ("nvdla-hil profle list", "has no subcommand 'profle'"),
    ("nvdla-hil regs list SDP | regs dumpx CDP", "has no subcommand 'dumpx'"),
    ("nvdla-hil vectors gen|shw ...", "has no subcommand 'shw'"),
    ("nvdla-hil regress [--target model] [--suites traces]", "has no option --suites"),
])
def test_a_drifted_command_fails(text: str, says: str) -> None:
    """What a README drifting from the tool looks like to this file (the checks above, on
    commands no README holds)."""
    with pytest.raises(AssertionError, match=re.escape(says)):
        check_cli_options(text)


def test_an_unclassified_command_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="is not classified"):
        _plan(Command("README.md", 1, "frobnicate --all", 1))
