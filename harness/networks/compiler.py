"""NVDLA's own network compiler (``umd/apps/compiler``: ``nvdla_compiler``) built from the
user's nvdla/sw checkout into the cache, and run on a Caffe model.

Build (cached like the simulator and firmware builds, :mod:`nvdla_hil.sims.cache`, under
``~/.cache/nvdla-hil/compiler/<key>``; one builder per key, the others wait on its lock and say
which process holds it; the key hashes every file of the checkout's ``umd/`` tree, the C++
compiler's identity and the flags, never paths). The checkout is never written: its ``umd/``
tree is copied into the build directory and built there, in steps:

1. ``protobuf``: the bundled protobuf 2.6.1 (``umd/external/protobuf-2.6``; the public snapshot
   lacks the prebuilt ``libprotobuf.a``): ``configure --disable-shared --with-pic`` with
   :data:`PROTOBUF_CXXFLAGS` (gcc 12 defaults to C++17, which 2.6.1 predates), then
   ``libprotobuf.la`` and ``protoc`` (``protoc`` reads the checkout's ``ditcaffe.proto`` at run
   time: :mod:`.caffe`); ``libprotobuf.a`` is put where both compiler Makefiles link it;
2. ``compiler``: ``TOP=<umd> make compiler``; a ``priv/Type.h`` without ``#include <limits>``
   (gcc 12 no longer includes it transitively) gets one in the copy.

The entry keeps ``bin/nvdla_compiler``, ``bin/libnvdla_compiler.so`` (the executable's rpath is
``.``: it runs with ``LD_LIBRARY_PATH`` set to ``bin/``), ``bin/protoc`` and one log per step; a
failed step is named with the tail of its log, which is kept beside the entry
(``<key>.<step>.log``).

Run (:func:`compile_network`), with the compiler's quirks handled: it writes
``./fast-math.nvdla`` into its working directory (so it runs in a private temporary one), it
lower-cases the ``--calibtable`` path (so the table is copied in under a lower-case name) and
aborts on a layer missing from it; only ``nv_full``, ``nv_large`` and ``nv_small`` are accepted
as ``--configtarget``; the default precision is INT8.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...drivers.errors import ConfigError, NvdlaHilError

__all__ = ["CONFIGS", "INFORMATS", "PRECISIONS", "CompilerBuild", "CompilerError", "CompileResult", "build_compiler",
           "cached_compiler", "compile_network", "find_umd", "known_issues", "run_step"]

Config = Literal["nv_full", "nv_large", "nv_small"]
Precision = Literal["int8", "fp16"]
#: the ``--configtarget`` names the compiler accepts (its help text's opendla-* names are refused)
CONFIGS: tuple[Config, ...] = ("nv_full", "nv_large", "nv_small")
PRECISIONS: tuple[Precision, ...] = ("int8", "fp16")
InFormat = Literal["ncxhwx", "nchw", "nhwc"]
#: the compiler's ``--informat``: nhwc (its default) makes the first convolution read the input
#: as a pitch-linear image (image mode); ncxhwx and nchw as a feature surface
INFORMATS: tuple[InFormat, ...] = ("ncxhwx", "nchw", "nhwc")

#: protobuf 2.6.1's configure flags and C++ flags (part of the cache key)
PROTOBUF_CONFIGURE: tuple[str, ...] = ("--disable-shared", "--with-pic")
PROTOBUF_CXXFLAGS = "-O2 -std=gnu++98"
#: make's default parallelism (the machines this runs on are small and shared; not in the key)
JOBS = 2
#: bumped when the build recipe below changes (part of the cache key)
RECIPE = 1
#: seconds a compilation may take
COMPILE_TIMEOUT = 900.0

Progress = Callable[[str], None]


class CompilerError(NvdlaHilError, RuntimeError):
    """The compiler could not be built (the step is named, with the tail of its log), or it
    refused a network (its output is quoted)."""


@dataclass(frozen=True)
class CompilerBuild:
    """A usable cached build: the compiler, its library's folder and the bundled ``protoc``."""

    compiler: Path
    libdir: Path
    protoc: Path
    key: str


@dataclass(frozen=True)
class CompileResult:
    loadable: Path
    seconds: float
    log: str


def find_umd(path: str | os.PathLike[str] | None = None) -> Path:
    """The ``umd/`` folder of the user's nvdla/sw checkout: ``path``, else ``$NVDLA_SW``."""
    p = path or os.environ.get("NVDLA_SW")
    if not p:
        raise ConfigError("no nvdla/sw checkout: pass --nvdla-sw PATH or set NVDLA_SW "
                          "(a clone of github.com/nvdla/sw; its umd/ compiler is built into the cache)")
    umd = Path(p).expanduser() / "umd"
    for need in ("Makefile", "apps/compiler/main.cpp", "external/protobuf-2.6/configure",
                 "core/src/compiler/caffe/ditcaffe/ditcaffe.proto"):
        if not (umd / need).is_file():
            raise ConfigError(f"{Path(p)} is not an nvdla/sw checkout with the compiler: umd/{need} is missing")
    return umd


def _cache_dir() -> Path:
    from ...sims.build import cache_root

    return cache_root().parent / "compiler"


def _tools() -> tuple[str, str]:
    cxx = os.environ.get("CXX") or shutil.which("g++") or "g++"
    make = shutil.which("make") or "make"
    return cxx, make


def _identity(tool: str) -> str:
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "unknown"


def _key(umd: Path, cxx: str) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in umd.rglob("*") if p.is_file() and "out" not in p.relative_to(umd).parts[:1]):
        h.update(str(f.relative_to(umd)).encode() + b"\0" + f.read_bytes() + b"\0")
    h.update("\0".join([_identity(cxx), *PROTOBUF_CONFIGURE, PROTOBUF_CXXFLAGS, f"recipe {RECIPE}"]).encode())
    return f"compiler-{h.hexdigest()[:20]}"


def run_step(step: str, cmd: list[str], cwd: Path, logs: Path, keep: Path, *,
             env: dict[str, str] | None = None, timeout: float = 3600.0) -> None:
    """Run one build step, its output to ``logs/<step>.log``; raise naming the step and the
    tail of its log (a copy is kept beside the cache entry, which a failed build never becomes)."""
    log = logs / f"{step}.log"
    with open(log, "a") as f:
        f.write(f"$ (cd {cwd} && {' '.join(cmd)})\n")
        f.flush()
        try:
            r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout, check=False)
            rc: int | str = r.returncode
        except subprocess.TimeoutExpired:
            rc = f"timed out after {timeout:.0f} s"
        except OSError as e:
            rc = str(e)
    if rc != 0:
        kept = keep.with_name(f"{keep.name}.{step}.log")
        try:
            shutil.copyfile(log, kept)
        except OSError:
            kept = log
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise CompilerError(f"building NVDLA's compiler failed at step {step!r} ({' '.join(cmd[:2])}: "
                            f"{'exit ' + str(rc) if isinstance(rc, int) else rc}); log {kept}, last lines:\n{tail}")


def _ensure_limits(type_h: Path) -> None:
    text = type_h.read_text()
    if "<limits>" not in text:
        type_h.write_text("#include <limits>\n" + text)


def _settle_autotools(tree: Path) -> None:
    """Give the copied protobuf tree the timestamp order autotools expects (a checkout's mtimes
    are arbitrary; out of order, make would try to re-run aclocal/automake, which need not be
    installed): sources, then ``aclocal.m4``, then ``configure``/``config.h.in``/``Makefile.in``."""
    base = time.time() - 3600
    order = {"aclocal.m4": 1, "configure": 2, "config.h.in": 2, "Makefile.in": 2}
    for f in tree.rglob("*"):
        if f.is_file() and not f.is_symlink():
            t = base + 10 * order.get(f.name, 0)
            os.utime(f, (t, t))


def _build_into(tmp: Path, key: str, umd: Path, cxx: str, make: str, progress: Progress,
                jobs: int = JOBS) -> dict[str, object]:
    t0 = time.monotonic()
    keep = tmp.parent / key
    for old in tmp.parent.glob(f"{key}.*.log"):  # a failed earlier attempt's
        old.unlink(missing_ok=True)
    src = tmp / "umd"
    logs = tmp / "logs"
    logs.mkdir()
    progress(f"compiler build: copying {umd} into {src}")
    shutil.copytree(umd, src, symlinks=True, ignore=shutil.ignore_patterns("out"))
    pb = src / "external" / "protobuf-2.6"
    _settle_autotools(pb)
    env = dict(os.environ, CXX=cxx, CXXFLAGS=PROTOBUF_CXXFLAGS)
    progress("compiler build: protobuf 2.6.1 (configure, libprotobuf, protoc; a few minutes)")
    run_step("protobuf-configure", ["sh", "./configure", *PROTOBUF_CONFIGURE], pb, logs, keep, env=env)
    run_step("protobuf", [make, "-C", "src", f"-j{jobs}", "libprotobuf.la", "protoc"], pb, logs, keep, env=env)
    lib = pb / "src" / ".libs" / "libprotobuf.a"
    for where in ("apps/compiler", "core/src/compiler"):
        shutil.copyfile(lib, src / where / "libprotobuf.a")
    _ensure_limits(src / "core" / "src" / "compiler" / "include" / "priv" / "Type.h")
    progress("compiler build: nvdla_compiler (several minutes)")
    run_step("compiler", [make, f"-j{jobs}", f"TOP={src}", "compiler"], src, logs, keep,
             env={k: v for k, v in os.environ.items() if k not in ("CXXFLAGS", "CFLAGS", "MAKEFLAGS")})
    bin_ = tmp / "bin"
    bin_.mkdir()
    outs = {"nvdla_compiler": src / "out/apps/compiler/nvdla_compiler/nvdla_compiler",
            "libnvdla_compiler.so": src / "out/core/src/compiler/libnvdla_compiler/libnvdla_compiler.so",
            "protoc": pb / "src" / "protoc"}
    for name, path in outs.items():
        if not path.is_file():
            raise CompilerError(f"building NVDLA's compiler: the build succeeded but {path} is missing")
        shutil.copy2(path, bin_ / name)
    shutil.rmtree(src)  # the entry keeps the executables and the logs only
    return {"executable": "bin/nvdla_compiler", "build_seconds": round(time.monotonic() - t0, 1),
            "cxx": _identity(cxx)}


def _entry(data: dict[str, object]) -> CompilerBuild:
    exe = Path(str(data["executable"]))
    return CompilerBuild(exe, exe.parent, exe.parent / "protoc", str(data["key"]))


def build_compiler(nvdla_sw: str | os.PathLike[str] | None, *, force: bool = False,
                   progress: Progress | None = None, jobs: int | None = None) -> CompilerBuild:
    """Build (or reuse from the cache) NVDLA's compiler from the checkout's ``umd/``."""
    from ...sims.cache import get_or_build

    umd = find_umd(nvdla_sw)
    cxx, make = _tools()
    say = progress or (lambda m: None)
    key = _key(umd, cxx)
    data = get_or_build(_cache_dir(), key, lambda tmp: _build_into(tmp, key, umd, cxx, make, say, jobs or JOBS),
                        force=force, progress=say, what="compiler build")
    return _entry(data)


def cached_compiler(nvdla_sw: str | os.PathLike[str] | None) -> CompilerBuild | None:
    """The cached build for the checkout, or None when it is not built (never builds)."""
    from ...sims.cache import CacheEntryError, check_entry

    umd = find_umd(nvdla_sw)
    key = _key(umd, _tools()[0])
    try:
        return _entry(check_entry(_cache_dir() / key, key, verify_hash=False))
    except CacheEntryError:
        return None


def compile_network(build: CompilerBuild, prototxt: Path, caffemodel: Path, out: Path, *, config: Config,
                    precision: Precision, calib: Path | None = None, informat: InFormat = "ncxhwx") -> CompileResult:
    """Compile a Caffe model into the loadable ``out``; INT8 needs the calibration table."""
    if config not in CONFIGS:
        raise ConfigError(f"unknown configuration {config!r}: the compiler accepts {', '.join(CONFIGS)}")
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}: expected {' or '.join(PRECISIONS)}")
    if informat not in INFORMATS:
        raise ConfigError(f"unknown input format {informat!r}: expected {', '.join(INFORMATS)}")
    if precision == "int8" and calib is None:
        raise ConfigError("an INT8 compilation needs a calibration table (nvdla-hil net gen writes one)")
    for f in (prototxt, caffemodel, *([calib] if calib else [])):
        if not Path(f).is_file():
            raise ConfigError(f"{f}: no such file")
    with tempfile.TemporaryDirectory(prefix="nvdla-compile-") as d:
        work = Path(d)
        # relative, lower-case names: the compiler lower-cases the --calibtable path
        shutil.copyfile(prototxt, work / "net.prototxt")
        shutil.copyfile(caffemodel, work / "net.caffemodel")
        cmd = [str(build.compiler), "--prototxt", "net.prototxt", "--caffemodel", "net.caffemodel",
               "--configtarget", config, "--cprecision", precision, "--informat", informat]
        if calib is not None and precision == "int8":
            shutil.copyfile(calib, work / "calib.json")
            cmd += ["--calibtable", "calib.json"]
        env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(
            [str(build.libdir), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]))
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=COMPILE_TIMEOUT,
                               check=False)
        except subprocess.TimeoutExpired:
            raise CompilerError(f"nvdla_compiler did not finish within {COMPILE_TIMEOUT:.0f} s") from None
        seconds = time.monotonic() - t0
        log = r.stdout + r.stderr
        produced = work / "fast-math.nvdla"
        if r.returncode != 0 or not produced.is_file():
            why = (f"killed by signal {-r.returncode} (134/SIGABRT: often a layer missing from the calibration "
                   f"table)" if r.returncode < 0 else f"exit {r.returncode}")
            tail = "\n".join(log.splitlines()[-20:])
            raise CompilerError(f"nvdla_compiler refused {prototxt} for {config} {precision} ({why}"
                                f"{'' if r.returncode else ', no fast-math.nvdla written'}); last lines:\n{tail}")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(produced, out)
    return CompileResult(out, seconds, log)


def _int(v: object, default: int) -> int:
    """``v`` as an int, else ``default`` (``net.json`` is the user's: a bad value names no issue)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _pool_edge(p: dict[str, object], hw: int | None) -> bool:
    """An AVE pooling whose last window reaches past the input plus its padding (Caffe's ceil mode)."""
    if p.get("pool") != "AVE" or p.get("global") or hw is None:
        return False
    k, st, pad = _int(p.get("kernel"), 1), max(1, _int(p.get("stride"), 1)), _int(p.get("pad"), 0)
    return bool((hw + 2 * pad - k) % st)


def known_issues(layers: list[dict[str, object]], config: str, precision: str,
                 informat: str = "ncxhwx", input_channels: int = 0) -> list[str]:  # long: one case per known compiler bug
    """The known bugs and limits of NVDLA's compiler (nvdla/sw 79538ba1, observed with the zoo's
    networks and checked against NVDLA's C model where it runs) that a network compiled for
    ``config``/``precision``/``informat`` meets; ``layers``: ``net.json``'s ``layer_specs``
    (``name``, ``type``, ``params``, ``in_hw``: the input's height); ``input_channels``: the
    network input's channels (0: not known). Reported, never worked around."""
    out: list[str] = []
    for la in layers:
        if not isinstance(la, dict):
            continue
        t, name = str(la.get("type")), str(la.get("name"))
        params = la.get("params")
        p: dict[str, object] = params if isinstance(params, dict) else {}
        in_hw = la.get("in_hw")
        hw = in_hw if isinstance(in_hw, int) else None
        if t in ("Sigmoid", "TanH") and precision == "int8":
            out.append(f"{name}: {t} in INT8 is not implemented in NVDLA's compiler (CompilerFeatures.md); it "
                       f"compiles to an empty LUT and the output is zero")
        if t == "LRN" and precision == "int8":
            out.append(f"{name}: LRN in INT8 is not implemented in NVDLA's compiler (CompilerFeatures.md); it refuses "
                       f"it (\"Couldn't narrow down to suitable SF\", EngineEdge.cpp determineSurfaceFormat)")
        if t == "Convolution" and _int(p.get("group"), 1) > 1 and precision == "int8":
            out.append(f"{name}: group convolution in INT8 is not implemented in NVDLA's compiler "
                       f"(CompilerFeatures.md); it compiles, the output is wrong")
        if t == "Eltwise" and p.get("operation") == "MAX":
            out.append(f"{name}: Eltwise MAX from Caffe: the compiler refuses it (\"error: parsing layer type "
                       f"Eltwise\"): Network::addElementWise checks op < EnumMax<ElementWiseOperation>() = 3, and "
                       f"ew_kMAX is 3")
        if t == "Deconvolution":
            if _int(p.get("kernel"), 0) != _int(p.get("stride"), 1):
                out.append(f"{name}: a deconvolution whose kernel is not its stride: the compiler refuses it "
                           f"(\"Padding issue\", DeconvolutionOp.cpp preProcessAuxData)")
            if config in ("nv_small", "nv_large"):
                out.append(f"{name}: deconvolution for {config}: the compiler emits a Rubik operation, a unit "
                           f"{config} lacks (its own TargetConfig says isRubikCapable false)")
        if t == "Pooling" and _pool_edge(p, hw):
            out.append(f"{name}: average pooling at Caffe's ceil-mode edge: the compiler divides the edge windows "
                       f"by the full window, Caffe by the window clipped to the input")
        if t == "Pooling" and p.get("global") and hw is not None and hw > 8:
            out.append(f"{name}: a global pooling {hw} wide: it compiles, NVDLA's firmware rejects it "
                       f"(Invalid pool_width: at most 8)")
    if precision == "fp16" and config in ("nv_small", "nv_large"):
        out.append(f"{config} has no FP16 datapath (nvdla/hw's {config}.spec: FEATURE_DATA_TYPE_INT8 only); the "
                   f"compiler writes an FP16 loadable for it anyway, which the {config} profile refuses")
    if informat == "nhwc" and input_channels > 4:
        out.append(f"image input (--informat nhwc) of {input_channels} channels: a pixel format carries at most 4; "
                   f"the compiler writes a 4-channel image input tensor for the network anyway, so its input cannot "
                   f"be bound")
    first = layers[0] if layers and isinstance(layers[0], dict) else {}
    if informat == "nhwc" and config != "nv_small" and first.get("type") == "Convolution":
        out.append("image input (--informat nhwc) on nv_full/nv_large: the compiler's image-mode first convolution "
                   "disagrees with the float network when it uses channel post-extension (LeNet's 5x5, ResNet's "
                   "7x7) and in FP16; NVDLA's C model computes what the model does (nv_small's image input agrees)")
    return out
