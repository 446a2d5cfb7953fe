"""Cmod target: NVDLA's own SystemC C model (``cmod/`` of the user's nvdla/hw checkout).

The C model is NVDLA's architectural reference: the same register file and DMA traffic as the
RTL, computed by NVIDIA's C++ (including the FP16/INT16 datapaths our model does not cover).
Nothing of it is shipped here: :func:`build_cmod` compiles the user's checkout with its own
``cmod/Makefile`` (into a cache directory outside the checkout and the repository), then links
our host program ``sims/cmod/cmod_server.cpp`` against the resulting ``libnvdla_cmod.so``.

Which model a checkout holds:

* nvdla/hw **master**: ``cmod/`` is built per configuration; it includes the configuration's
  generated ``outdir/<config>/spec/defs/project.h`` and ``outdir/<config>/spec/manual/opendla.h``
  (made by ``tools/bin/tmake -build cmod_top -project <config>``, or any build that runs the
  ``defs`` and ``manual`` steps, e.g. the Verilator flow). The register map is the configuration's.
* nvdla/hw **nvdlav1**: ``cmod/`` is nv_full's (its register header ``cmod/include/arnvdla.h`` is
  checked in), so the only configuration is ``nv_full`` and the register map is v1's.

Build requirements: g++, GNU make, SystemC 2.3 with TLM-2.0 (Debian/Ubuntu: ``libsystemc-dev``;
or ``$SYSTEMC_HOME`` with ``include/`` and ``lib*/``). Debian's libsystemc is compiled as C++17
and SystemC checks the language standard at link time, so the model is compiled with
``-std=c++17`` (its Makefile says ``-std=c++11``; the later flag wins); no source change is needed.

The host process (one per target) instantiates ``scsim::cmod::NV_nvdla``, binds its CSB socket,
both AXI sockets (DBB = ``pri_mem``, CVSRAM = ``sec_mem``) and its interrupt, and serves one text
request per line over an inherited socket (``sims/cmod/cmod_server.cpp`` documents the protocol).
External memory is a pair of 4 GiB sparse files both processes map, as on the Verilator target.
The model runs only while a request is served; every CSB access advances simulated time by
``csb_ns`` so that register polling makes progress, and ``wait_irq`` waits for the interrupt
for at most ``irq_max_ns`` of simulated time (wall-clock limits apply on top).

Time: the model computes a layer in software, in wall clock proportional to the layer's work
(:mod:`.workload`'s estimate less its fixed latency, at :attr:`CmodTarget.work_cycles_per_second`);
a caller bounds the layer's requests by that budget with :meth:`CmodTarget.layer_time` and waits
for its interrupt as long, never the flat 900 s (the fuzz runner does). Known limits of the C
model (:data:`KNOWN_LIMITS`: layers it never finishes) are refused at the launching
``CDMA.D_OP_ENABLE`` write with a :class:`CmodLimit` naming the limit (a skip, as a layer our model
does not cover; never a pass); a request that runs out of time on such a layer names it too
(:meth:`CmodTarget.known_limit`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...drivers.profiles import load_profile
from ...drivers.regmap import RegisterMap, RegisterMapError
from ...drivers.transport import TransportError, TransportTimeoutError
from ...sims.cache import cache_base
from ...sims.lockwait import holder_of, wait_for, write_holder
from ..refmodel.base import UnitNotModelled
from .builds import BuildCache, resolve_build
from .simproc import SimProcessTarget  # the process client (spawn, line protocol, deadlines, memory)

__all__ = ["KNOWN_LIMITS", "CmodBuild", "CmodBuildError", "CmodCrashed", "CmodLimit", "CmodTarget", "LayerView",
           "build_cmod", "cmod_cache_root", "compressed_data_ends_before_zero_group"]

_SERVER_SRC = Path(__file__).resolve().parents[2] / "sims" / "cmod" / "cmod_server.cpp"
_log = logging.getLogger(__name__)
Progress = Callable[[str], None]


def _default_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class CmodBuildError(RuntimeError):
    """The C model could not be built; the message names the cause and the log."""


class CmodCrashed(TransportError):
    """The C model process exited or broke the protocol."""


class CmodLimit(UnitNotModelled):
    """A layer NVDLA's C model is known not to finish (:data:`KNOWN_LIMITS`), refused before it
    runs; the message names the limit. Reported as a skip (the layer is not checked), never a pass."""


# ---------------------------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------------------------
def cmod_cache_root() -> Path:
    env = os.environ.get("NVDLA_HIL_CMOD_CACHE")
    if env:
        return Path(env)
    return cache_base() / "cmod"


@dataclass
class CmodBuild:
    """A finished C-model build (``manifest.json`` in its directory)."""

    directory: str
    executable: str
    library: str
    nvdla_hw: str
    config: str
    flavor: str  # "master" (per-configuration cmod) or "nvdlav1" (nv_full)
    key: str
    systemc: str
    build_seconds: float = 0.0
    peak_rss_mb: int = 0

    @classmethod
    def load(cls, directory: Path) -> CmodBuild:
        return cls(**json.loads((Path(directory) / "manifest.json").read_text()))

    def save(self) -> None:
        (Path(self.directory) / "manifest.json").write_text(json.dumps(asdict(self), indent=2))


def _find_systemc() -> tuple[str, str, str]:
    """(include dir, library dir, description) of SystemC 2.3 with TLM."""
    home = os.environ.get("SYSTEMC_HOME") or os.environ.get("SYSTEMC")
    cands: list[tuple[Path, Path]] = []
    if home:
        h = Path(home)
        for libname in ("lib-linux64", "lib64", "lib", "lib-linux"):
            cands.append((h / "include", h / libname))
    cands += [(Path("/usr/include"), Path("/usr/lib/x86_64-linux-gnu")), (Path("/usr/include"), Path("/usr/lib64")),
              (Path("/usr/include"), Path("/usr/lib/aarch64-linux-gnu")), (Path("/usr/local/include"), Path("/usr/local/lib"))]
    for inc, lib in cands:
        if (inc / "systemc.h").is_file() and (inc / "tlm.h").is_file() and any(lib.glob("libsystemc*.so*")):
            ver = ""
            vh = inc / "sysc" / "kernel" / "sc_ver.h"
            if vh.is_file():
                m = re.search(r'#define\s+SC_VERSION_ORIGINATOR\s+"(\w+)".*?SC_VERSION_MAJOR\s+(\d+).*?'
                              r'SC_VERSION_MINOR\s+(\d+).*?SC_VERSION_PATCH\s+(\d+)', vh.read_text(), re.DOTALL)
                if m:
                    ver = f"SystemC {m[2]}.{m[3]}.{m[4]} ({m[1]})"
            return str(inc), str(lib), ver or f"SystemC in {inc}"
    raise CmodBuildError("SystemC 2.3 with TLM-2.0 not found (systemc.h + tlm.h + libsystemc.so). "
                         "Debian/Ubuntu: apt-get install libsystemc-dev; otherwise set SYSTEMC_HOME.")


def _systemc_std(libdir: str) -> str:
    """The C++ standard libsystemc was compiled with (SystemC refuses to link across standards)."""
    libs = sorted(Path(libdir).glob("libsystemc*.so*"))
    try:
        out = subprocess.run(["nm", "-D", str(libs[0])], check=False, capture_output=True, text=True, timeout=60).stdout
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "c++17"
    m = re.search(r"sc_api_version_\d+_\d+_\d+_cxx(\d{4})(\d\d)L", out)
    if not m:
        return "c++17"
    return {"1997": "c++98", "2011": "c++11", "2014": "c++14", "2017": "c++17", "2020": "c++20"}.get(m[1], "c++17")


def _flavor(hw: Path, config: str) -> tuple[str, list[Path]]:
    """("master"|"nvdlav1", generated files the build needs) or CmodBuildError saying why not."""
    mk = hw / "cmod" / "Makefile"
    top = hw / "cmod" / "nvdla_top" / "NV_nvdla.h"
    if not mk.is_file() or not top.is_file():
        raise CmodBuildError(f"{hw} has no NVDLA C model (expected {mk} and {top})")
    if (hw / "cmod" / "include" / "arnvdla.h").is_file():
        if config != "nv_full":
            raise CmodBuildError(f"{hw} is an nvdlav1 checkout: its C model is nv_full's (asked for {config})")
        return "nvdlav1", []
    gen = [hw / "outdir" / config / "spec" / "defs" / "project.h", hw / "outdir" / config / "spec" / "manual" / "opendla.h"]
    missing = [p for p in gen if not p.is_file()]
    if missing:
        if not (hw / "spec" / "defs" / f"{config}.spec").is_file():
            raise CmodBuildError(f"{hw} has no configuration {config} (no spec/defs/{config}.spec)")
        raise CmodBuildError(
            f"the C model of {config} needs the generated headers {', '.join(str(p) for p in missing)}; "
            f"generate them in the checkout with: cd {hw} && tools/bin/tmake -build manual -project {config} "
            f"(needs tree.make with CPP/PERL/JAVA, as for the RTL build)")
    return "master", [p.parent for p in gen]


def _hash_tree(h: hashlib._Hash, root: Path, suffixes: tuple[str, ...], replace: dict[str, Path] | None = None) -> None:
    """Hash the sources under ``root``; ``replace``: relative path -> the file built in its place."""
    for f in sorted(root.rglob("*")):
        if f.is_file() and (f.suffix in suffixes or f.name == "Makefile"):
            rel = str(f.relative_to(root))
            data = (replace[rel] if replace and rel in replace else f).read_bytes()
            h.update(f"{rel}\0{len(data)}\0".encode())
            h.update(data)


#: nvdlav1's AC types (2016) that GCC >= 7 rejects; a master checkout's (2018) compile
_AC_TYPES = ("hls/include/ac_int.h", "hls/include/ac_fixed.h")


def _ac_types_from(hw: Path, flavor: str, master: str | os.PathLike[str] | None) -> dict[str, Path]:
    """For an nvdlav1 checkout: the AC type headers of the master checkout ``master`` (default
    ``$NVDLA_HW``) that differ from the checkout's, by path under ``cmod/``; the build uses them
    in a copy of ``cmod/`` (the checkout is left as it is). Empty: build the checkout as it is."""
    src = master if master is not None else os.environ.get("NVDLA_HW")
    if flavor != "nvdlav1" or not src:
        return {}
    m = Path(src).expanduser().resolve() / "cmod"
    if m == hw / "cmod" or not all((m / a).is_file() and (hw / "cmod" / a).is_file() for a in _AC_TYPES):
        return {}
    if all((m / a).read_bytes() == (hw / "cmod" / a).read_bytes() for a in _AC_TYPES):
        return {}
    return {a: m / a for a in _AC_TYPES}


def _overlay(hw: Path, out: Path, replace: dict[str, Path]) -> Path:
    """A copy of the checkout's ``cmod/`` (and ``tools/make``) under ``out/src`` with ``replace``
    put in place; the folder to build in place of the checkout."""
    src = out / "src"
    shutil.copytree(hw / "cmod", src / "cmod", copy_function=shutil.copyfile)
    if (hw / "tools" / "make").is_dir():
        shutil.copytree(hw / "tools" / "make", src / "tools" / "make", copy_function=shutil.copyfile)
    for d in [src, *(p for p in src.rglob("*") if p.is_dir())]:
        d.chmod(0o755)  # a read-only checkout's folders: the cache must stay removable
    for rel, f in replace.items():
        shutil.copyfile(f, src / "cmod" / rel)
    return src


def _gxx_version() -> str:
    try:
        return subprocess.run(["g++", "--version"], check=False, capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired) as e:
        raise CmodBuildError(f"g++ not found ({e}); Debian: apt-get install g++ make") from e


def _log_tail(path: Path, n: int = 20) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errs = [ln for ln in lines if "error:" in ln or "Error " in ln or "undefined reference" in ln]
    pick = errs[:n] if errs else lines[-n:]
    return "\n".join("    " + ln[:400] for ln in pick)


def build_cmod(nvdla_hw: str | os.PathLike[str] | None = None, config: str | None = None, *,
               jobs: int | None = None, force: bool = False, cxxflags: str = "-O2",
               progress: Progress = _default_progress, cache: Path | None = None,
               ac_types: str | os.PathLike[str] | None = None) -> CmodBuild:
    """Build (or reuse from the cache) NVDLA's C model of ``nvdla_hw`` and our host around it.

    ``nvdla_hw`` defaults to ``$NVDLA_HW``; ``config`` to ``nv_full`` for an nvdlav1 checkout
    and ``nv_small`` otherwise. The checkout is only read (the object files, our ``tree.make``
    and the library go to the cache directory). An nvdlav1 checkout whose AC type headers (2016)
    differ from those of the master checkout ``ac_types`` (default ``$NVDLA_HW``) is built from a
    copy of its ``cmod/`` in the cache with the master's headers (GCC >= 7 rejects the old ones)."""
    hw_arg = nvdla_hw or os.environ.get("NVDLA_HW")
    if not hw_arg:
        raise CmodBuildError("no nvdla/hw checkout given (nvdla_hw=... or $NVDLA_HW)")
    hw = Path(hw_arg).expanduser().resolve()
    if config is None:
        config = "nv_full" if (hw / "cmod" / "include" / "arnvdla.h").is_file() else "nv_small"
    flavor, gen_dirs = _flavor(hw, config)
    if not _SERVER_SRC.is_file():
        raise CmodBuildError(f"our host source {_SERVER_SRC} is missing")
    sc_inc, sc_lib, sc_desc = _find_systemc()
    std = _systemc_std(sc_lib)
    gxx = _gxx_version()
    flags = f"{cxxflags} -std={std}"
    h = hashlib.sha256()
    for part in ("cmod-v1", flavor, config, gxx, sc_desc, sc_inc, sc_lib, flags):
        h.update(part.encode() + b"\0")
    replace = _ac_types_from(hw, flavor, ac_types)
    _hash_tree(h, hw / "cmod", (".cpp", ".h", ".hpp", ".uh", ".c"), replace)
    for d in gen_dirs:
        _hash_tree(h, d, (".h", ".uh"))
    h.update(_SERVER_SRC.read_bytes())
    key = f"{flavor}-{config}-{h.hexdigest()[:16]}"
    root = cache or cmod_cache_root()
    out = root / key
    exe = out / "cmod_server"
    if not force and (out / "manifest.json").is_file() and exe.is_file():
        progress(f"cmod build: cached {out}")
        return CmodBuild.load(out)
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        # another process building the same model: say who, and how long we waited (lockwait)
        wait_for(root / f"{key}.lock", lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), holder_of(fd),
                 say=progress, what="cmod build", why="another process is building this C model")
        write_holder(fd, "cmod build")
        try:
            if not force and (out / "manifest.json").is_file() and exe.is_file():
                progress(f"cmod build: cached {out} (built by another process)")
                return CmodBuild.load(out)
            return _build_locked(hw, config, flavor, key, out, exe, sc_inc, sc_lib, sc_desc, flags, jobs, progress,
                                 replace)
        finally:
            os.ftruncate(fd, 0)  # no holder any more (the lock goes with the descriptor)
    finally:
        os.close(fd)


def _build_locked(hw: Path, config: str, flavor: str, key: str, out: Path, exe: Path, sc_inc: str,
                  sc_lib: str, sc_desc: str, flags: str, jobs: int | None, progress: Progress,
                  replace: dict[str, Path]) -> CmodBuild:  # fmt: skip
    if out.exists():
        shutil.rmtree(out)
    obj = out / "o"
    obj.mkdir(parents=True)
    checkout = hw
    if replace:
        hw = _overlay(hw, out, replace)
        progress(f"cmod build: {checkout}'s cmod/ copied to {hw} with {', '.join(str(f) for f in replace.values())}")
    lib = obj / "libnvdla_cmod.so"
    log_path = out / "build.log"
    # NVDLA's make files include $(DEPTH)/$(TREE_MAKE) (nvdlav1 has no tree.make until the user
    # runs the top-level configure step); every tool path is given on the command line, so a
    # tree.make of ours naming the project is enough and the checkout is left as it is.
    tree = out / "tree.make"
    tree.write_text(f"## written by nvdla-hil for the C model build; tools are set on the make command line\n"
                    f"PROJECTS := {config}\n")
    jobs = jobs or max(1, os.cpu_count() or 1)
    make = ["make", "-k", "-j", str(jobs), "-C", str(hw / "cmod"),
            f"TREE_MAKE={os.path.relpath(tree, hw)}", f"PROJECT={config}", "OUTDIR=outdir",
            "SYSTEMC=/nonexistent-use-SYSTEMC_INC_DIR", f"SYSTEMC_INC_DIR={sc_inc}", f"SYSTEMC_LIB_DIR={sc_lib}",
            f"BUILD_DIR={obj}", f"CXXFLAGS={flags}", "CC=g++", "CXX=g++", "GCC=g++", str(lib)]
    link = ["g++", *flags.split(), "-DSC_INCLUDE_DYNAMIC_PROCESSES",
            f"-I{hw / 'cmod' / 'include'}", f"-I{hw / 'cmod' / 'nvdla_top'}", f"-I{sc_inc}",
            "-o", str(exe), str(_SERVER_SRC), f"-L{obj}", f"-Wl,-rpath,{obj}", "-lnvdla_cmod",
            f"-L{sc_lib}", f"-Wl,-rpath,{sc_lib}", "-lsystemc", "-lpthread"]
    t0 = time.monotonic()
    progress(f"cmod build: {flavor} {config} from {hw} -> {out} ({jobs} jobs; a few minutes)\n  log: {log_path}")
    with open(log_path, "w") as log:
        log.write(f"nvdla-hil cmod build {flavor} {config}\n{sc_desc}\n$ {' '.join(make)}\n")
        log.flush()
        rc = subprocess.run(make, check=False, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        if rc != 0 or not lib.is_file():
            hint = ""
            if "iv_extend" in log_path.read_text(errors="replace"):
                hint = ("\n  cause: the checkout's cmod/hls/include/ac_int.h and ac_fixed.h (AC types of 2016, "
                        "as on nvdlav1) do not compile with GCC >= 7; replace both with the 2018 versions "
                        "of a master checkout's cmod/hls/include/ (or github.com/hlslibs/ac_types), or set NVDLA_HW "
                        "to a master checkout: the build then takes them from it, in a copy of cmod/ in the cache")
            raise CmodBuildError(f"building NVDLA's cmod failed (make exit {rc}); log {log_path}:\n"
                                 f"{_log_tail(log_path)}{hint}")
        log.write(f"\n$ {' '.join(link)}\n")
        log.flush()
        rc = subprocess.run(link, check=False, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        if rc != 0:
            raise CmodBuildError(f"linking the cmod host failed (exit {rc}); log {log_path}:\n{_log_tail(log_path)}")
    import resource

    seconds = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    b = CmodBuild(directory=str(out), executable=str(exe), library=str(lib), nvdla_hw=str(checkout), config=config,
                  flavor=flavor, key=key, systemc=sc_desc, build_seconds=round(seconds, 1), peak_rss_mb=int(peak))
    b.save()
    progress(f"cmod build: done in {seconds:.0f} s (largest compiler process {peak} MiB) -> {exe}")
    return b


# ---------------------------------------------------------------------------------------------
# known limits
# ---------------------------------------------------------------------------------------------
class LayerView:
    """The layer a target was programmed with: the last value written to each register (by CSB
    address, decoded through the profile's register map) and external memory."""

    def __init__(self, written: dict[int, int], regmap: RegisterMap, mac_atomic_k: int,
                 mem_read: Callable[[int, int, str], np.ndarray]) -> None:
        self.written, self.regmap, self.mac_atomic_k, self.mem_read = written, regmap, mac_atomic_k, mem_read

    def field(self, spec: str) -> int:
        """``"CDMA.D_MISC_CFG.CONV_MODE"``: the field of the register's last written value (0 if never written)."""
        f = self.regmap.field(spec)
        reg = self.regmap.register(spec.rsplit(".", 1)[0])
        return int(f.extract(self.written.get(int(reg.address), 0)))

    def in_place(self, spec: str) -> int:
        """The field's bits where they sit in the register (an address field of 32-byte units: the byte address)."""
        f = self.regmap.field(spec)
        reg = self.regmap.register(spec.rsplit(".", 1)[0])
        return self.written.get(int(reg.address), 0) & f.mask


def compressed_data_ends_before_zero_group(layer: LayerView) -> bool:
    """A convolution with compressed weights whose data (the sum of the WGS entries, the bytes of
    each kernel group's non-zero weights) ends on a 128-byte boundary with one or more all-zero
    kernel groups after it (groups of MAC atomic K kernels at INT8, half that at INT16/FP16).
    NVDLA's C model (nvdlav1) never finishes such a layer: CDMA's data is done, its weights never
    are (``S_INTR_STATUS`` stays ``CDMA_DAT_DONE``). Measured on every precision, direct and
    Winograd; a zero group first or in between, or data that ends off the boundary, runs."""
    if layer.field("CDMA.D_WEIGHT_FORMAT.WEIGHT_FORMAT") != 1:
        return False
    kernels = layer.field("CDMA.D_WEIGHT_SIZE_1.WEIGHT_KERNEL") + 1
    int8 = layer.field("CDMA.D_MISC_CFG.PROC_PRECISION") == 0
    group = max(layer.mac_atomic_k if int8 else layer.mac_atomic_k // 2, 1)
    groups = -(-kernels // group)
    addr = (layer.in_place("CDMA.D_WGS_ADDR_HIGH.WGS_ADDR_HIGH") << 32) | layer.in_place("CDMA.D_WGS_ADDR_LOW.WGS_ADDR_LOW")
    port = "pri_mem" if layer.field("CDMA.D_WEIGHT_RAM_TYPE.WEIGHT_RAM_TYPE") == 1 else "sec_mem"
    wgs = np.ascontiguousarray(layer.mem_read(addr, 4 * groups, port), dtype=np.uint8).view("<u4")
    nonzero = np.flatnonzero(wgs)
    return bool(nonzero.size and nonzero[-1] < groups - 1 and int(wgs.astype(np.int64).sum()) % 128 == 0)


#: layers NVDLA's C model does not finish: (what, check of the programmed layer); the target
#: refuses them at launch (:class:`CmodLimit`) and names them when a request runs out of time
KNOWN_LIMITS: tuple[tuple[str, Callable[[LayerView], bool]], ...] = (
    ("C model hang: compressed weights whose data ends on a 128-byte boundary before an all-zero kernel group",
     compressed_data_ends_before_zero_group),
)
#: the write that launches a convolution in the C model (checked there: a refused layer never starts)
_LAUNCH = "CDMA.D_OP_ENABLE"

#: A hang of the C model's SDP that the RTL has no cause for (read in nvdlav1 cmod/sdp/NV_NVDLA_sdp.cpp,
#: confirmed on a debug-level log of the hung run): ``SdpRdmaHardwareLayerExecutionTrigger`` wakes its
#: four sub-DMA threads, then writes the operation's record into ``sdp_config_fifo_`` (one entry), then
#: waits for their four done events. When the SDP core has not yet taken the previous operation's
#: record, the write blocks, the done events fire before the wait and are lost, and the read DMA never
#: leaves that group: the next SDP operation of the group waits for its record forever. It happens
#: when an SDP operation is enabled after the next one (the read DMA waits on group G while group
#: 1 - G is already enabled, so it starts 1 - G at once): NVDLA's firmware does that when an SDP
#: operation waits on another engine (a Rubik) while the next SDP is programmed. :meth:`CmodTarget.hang_hint`
#: names it when such an enable order preceded a hang of SDP.
SDP_RDMA_LOST_WAKEUP = (
    "known limit of NVDLA's C model: SDP_RDMA was enabled for one group while the other group was already "
    "enabled (an SDP operation enabled after the next one); the C model's read DMA then loses its done events "
    "(cmod/sdp/NV_NVDLA_sdp.cpp SdpRdmaHardwareLayerExecutionTrigger notifies its sub-DMA threads before it "
    "writes its one-entry config FIFO) and a later SDP operation of that group never finishes. The RTL keeps "
    "no such FIFO; nvdla-hil's model runs the sequence"
)


class _RdmaEnableOrder:
    """SDP_RDMA's enables in the order written: the group of each (``S_POINTER.PRODUCER`` as last
    written) and how many came for the same group as the enable before (an operation enabled
    after the next one: :data:`SDP_RDMA_LOST_WAKEUP`)."""

    def __init__(self) -> None:
        self.out_of_order = 0
        self._producer = 0
        self._last: int | None = None
        self._addrs: tuple[int, int] | None = None

    def write(self, profile: str, address: int, value: int) -> None:
        if self._addrs is None:
            try:
                rm = load_profile(profile).regmap
                self._addrs = (int(rm.register("SDP_RDMA.S_POINTER").address),
                               int(rm.register("SDP_RDMA.D_OP_ENABLE").address))  # fmt: skip
            except (RegisterMapError, ValueError):
                self._addrs = (-1, -1)
        pointer, enable = self._addrs
        if address == pointer:
            self._producer = value & 1
        elif address == enable and value & 1:
            self.out_of_order += self._last == self._producer
            self._last = self._producer


# ---------------------------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------------------------


class CmodTarget(SimProcessTarget):
    """Transport onto NVDLA's C model (one host process per open target).

    Args:
        build: a :class:`CmodBuild`, the directory of one, or ``None`` to build (or reuse the
            cached build of) ``nvdla_hw``/``config``.
        nvdla_hw: nvdla/hw checkout (default ``$NVDLA_HW``).
        config: ``nv_small`` etc. for a master checkout, ``nv_full`` for nvdlav1 (default: by
            checkout). It is also the profile (register map) the target reports.
        request_timeout: wall-clock seconds for one request. The model computes a layer while
            it serves whichever request follows the layer's last ``D_OP_ENABLE`` write (usually
            that write itself), so one request can take as long as a layer: a large INT8
            convolution takes minutes of wall clock in the C model.
        irq_max_ns: simulated-time budget of one ``wait_irq`` (the model computes in delta
            cycles; a layer takes a few ns of simulated time).
        irq_settle_ns: when ``wait_irq`` finds the line already high, simulate this long first.
        csb_ns: simulated time after each CSB access.
        run_dir: where the model's log goes (default: a fresh temp dir, kept on failure).
        build_cache: the session's :class:`~.builds.BuildCache` (its ``TargetSpec``'s): the
            checkout is content-checked once per configuration, not on every open (``None``:
            checked on every open against the on-disk cache).
    """

    suggested_layer_timeout: float = 900.0
    #: The C model runs the datapath in software: a layer costs wall clock in proportion to its
    #: work (:func:`.workload.estimate_work`'s cycles less the fixed per-layer latency, which costs
    #: it nothing), measured on nv_full with 2 busy cores: a direct INT8 convolution 64x24x24 by
    #: 64 3x3 kernels (~17.6k work cycles) took 179 s (~100/s), small layers (1-9k) 0.4-6.5 s.
    #: A layer may take floor + factor x work / ``work_cycles_per_second`` (the fuzz runner's
    #: budget, ``fuzz/runner.py``).
    work_cycles_per_second: float = 100.0
    layer_timeout_factor: float = 4.0
    layer_timeout_floor: float = 30.0
    #: for :func:`.workload.layer_budget` (callers that do not use ``work_cycles_per_second``):
    #: whole cycles, latency included, at a rate that still gives the 179 s layer 2.5x its time
    cycles_per_second: float = 500.0
    sim_name = "C model"
    crashed_error = CmodCrashed
    log_name = "cmod.log"
    run_prefix = "nvdla-hil-cmod-"
    mem_prefix = "nvdla-hil-cmod-"
    quit_line = b"quit\n"

    def __init__(self, build: CmodBuild | str | os.PathLike[str] | None = None, *,
                 nvdla_hw: str | os.PathLike[str] | None = None, config: str | None = None,
                 request_timeout: float = 900.0, irq_max_ns: int = 1_000_000, irq_settle_ns: int = 100,
                 csb_ns: float = 1.0, startup_timeout: float = 60.0,
                 run_dir: str | os.PathLike[str] | None = None, jobs: int | None = None,
                 build_cache: BuildCache | None = None, layer_timeout: float | None = None) -> None:
        if layer_timeout is not None:  # --layer-timeout: a request computes a whole layer here
            request_timeout = max(request_timeout, layer_timeout)
            self.suggested_layer_timeout = layer_timeout
        super().__init__(request_timeout=request_timeout, startup_timeout=startup_timeout, run_dir=run_dir)
        self._build_arg = build
        self._build_cache = build_cache
        self._nvdla_hw = nvdla_hw
        self._config = config
        self._jobs = jobs
        self.irq_max_ns = int(irq_max_ns)
        self.irq_settle_ns = int(irq_settle_ns)
        self.csb_ns = csb_ns
        self.build: CmodBuild | None = None
        self.profile_name = config or "nv_small"
        self.sim_ns = 0
        #: refuse a layer of :data:`KNOWN_LIMITS` at launch (off: run it and name it when it runs out of time)
        self.refuse_known_limits = True
        self._written: dict[int, int] = {}  # CSB address -> last value written (the layer's registers)
        self._launch_addr: int | None = None
        self._rdma_order = _RdmaEnableOrder()

    # ---- life cycle ---------------------------------------------------------------------------
    def _resolve_build(self) -> CmodBuild:
        def make() -> CmodBuild:
            return build_cmod(self._nvdla_hw, self._config, jobs=self._jobs)

        key = ("cmod", str(self._nvdla_hw or os.environ.get("NVDLA_HW")), str(self._config))
        return resolve_build(self._build_arg, CmodBuild, make, self._build_cache, key)

    def _open(self) -> None:
        try:
            self.build = self._resolve_build()
        except CmodBuildError as e:
            raise TransportError(f"cannot build NVDLA's C model: {e}") from e
        self.profile_name = self.build.config
        try:
            self._start()
        except BaseException:
            self._teardown()
            raise

    def _start(self) -> None:
        self._make_run_dir()
        self._map_memory()  # sparse 4 GiB files, unlinked at once; the model inherits the descriptors
        self._spawn()

    def _spawn(self) -> None:
        assert self.build is not None
        env = dict(os.environ)
        env["NVDLA_HIL_CSB_NS"] = repr(float(self.csb_ns))
        # the cmod drives some signals from more than one process (BDMA), which SystemC's
        # writer check rejects (E115) unless SystemC's documented switch turns the check off
        if env.get("NVDLA_HIL_SC_WRITE_CHECK") != "1":
            env.setdefault("SC_SIGNAL_WRITE_CHECK", "DISABLE")
        self._spawn_process([self.build.executable], env, log_mode="ab")
        hello = self._recv(self.startup_timeout, "model start-up")
        if hello[:1] != ["hello"]:
            raise self._fail(CmodCrashed(f"unexpected greeting {hello!r}; log {self.log_path}"))

    # ---- requests ---------------------------------------------------------------------------------
    def _recv(self, timeout: float, what: str) -> list[str]:
        line = self._recv_line(timeout, what)
        words = line.decode(errors="replace").split()
        if words[:1] == ["err"]:
            raise TransportError(f"C model: {' '.join(words[1:])} ({what})")
        if words[:1] != ["ok"]:
            raise self._fail(CmodCrashed(f"C model broke the protocol during {what}: {line[:200]!r}"))
        if words and words[-1].startswith("t="):
            self.sim_ns = int(words[-1][2:])
            words = words[:-1]
        return words[1:]

    def _request(self, line: str, *, timeout: float | None = None) -> list[str]:
        if self._sock is None:
            raise TransportError("the C model is not running")
        self._send_line(line.encode() + b"\n")
        try:
            return self._recv(timeout or self.request_timeout, line.split()[0])
        except TransportTimeoutError as e:
            limit = self.known_limit()
            if limit is None:
                raise
            raise TransportTimeoutError(f"{limit} (a known limit of NVDLA's C model): {e}") from e

    # ---- the layer's time and known limits ------------------------------------------------------
    @contextlib.contextmanager
    def layer_time(self, seconds: float) -> Iterator[None]:
        """Within the block, every request (the one that computes a layer included) may take
        ``seconds`` of wall clock instead of ``request_timeout``: a layer's budget, so that a
        hung layer costs its budget, not 900 s."""
        old = self.request_timeout
        self.request_timeout = float(seconds)
        try:
            yield
        finally:
            self.request_timeout = old

    def known_limit(self) -> str | None:
        """The :data:`KNOWN_LIMITS` entry the programmed layer falls under, or None."""
        try:
            prof = load_profile(self.profile_name)
            view = LayerView(self._written, prof.regmap, prof.mac_atomic_k, self._mem_read)
            return next((what for what, check in KNOWN_LIMITS if check(view)), None)
        except (RegisterMapError, ValueError, IndexError, KeyError, OSError):  # no such registers, memory out of range or closed
            return None

    def hang_hint(self, units: set[str]) -> str:
        """What is known to hang these units (a network's operations that did not finish) on the C
        model: :data:`SDP_RDMA_LOST_WAKEUP` after an out-of-order SDP_RDMA enable ("" otherwise)."""
        return SDP_RDMA_LOST_WAKEUP if "SDP" in units and self._rdma_order.out_of_order else ""

    def _is_launch(self, address: int, value: int) -> bool:
        if self._launch_addr is None:
            try:
                self._launch_addr = int(load_profile(self.profile_name).regmap.register(_LAUNCH).address)
            except (RegisterMapError, ValueError):
                self._launch_addr = -1
        return address == self._launch_addr and bool(value & 1)

    # ---- Transport API ------------------------------------------------------------------------
    def _read32(self, address: int) -> int:
        return int(self._request(f"read {address:#x}")[0])

    def _write32(self, address: int, value: int, posted: bool) -> None:
        self._written[address] = value
        self._rdma_order.write(self.profile_name, address, value)
        if self.refuse_known_limits and self._is_launch(address, value) and (limit := self.known_limit()):
            raise CmodLimit(f"{limit}: not launched (NVDLA's C model never finishes such a layer; "
                            f"run it anyway with refuse_known_limits = False)")
        self._request(f"write {address:#x} {value:#x}")

    def _wait_irq(self, timeout: float | None) -> bool:
        wall = self.request_timeout * 10 if timeout is None else float(timeout)
        r = self._request(f"wait_irq {self.irq_max_ns} {self.irq_settle_ns}",
                          timeout=max(wall, 0.0) + self.request_timeout)
        return r[0] == "1"

    def _reset(self) -> None:
        """No reset line in the C model: restart the process (memory is kept)."""
        self._written.clear()
        self._rdma_order = _RdmaEnableOrder()
        self._stop_process()
        self._spawn()

    # ---- extras ---------------------------------------------------------------------------------
    def run_ns(self, ns: int) -> None:
        """Advance simulated time by ``ns`` nanoseconds."""
        self._request(f"run {int(ns)}")

    def irq_level(self) -> int:
        return int(self._request("status")[0])

    def describe(self) -> str:
        b = self.build
        if b is None:
            return f"CmodTarget({self._config}, not built)"
        return f"NVDLA C model {b.config} ({b.flavor} checkout {b.nvdla_hw}; {b.systemc}; {b.directory})"

    def __repr__(self) -> str:
        return f"CmodTarget(config={self._config!r}, open={self.is_open})"


def _main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - manual use
    import argparse

    p = argparse.ArgumentParser(prog="python -m nvdla_hil.harness.targets.cmod",
                                description="Build NVDLA's C model of a checkout and our host around it.")
    p.add_argument("--nvdla-hw", default=None, help="nvdla/hw checkout (default $NVDLA_HW)")
    p.add_argument("--config", default=None, help="nv_small, ... (master) or nv_full (nvdlav1)")
    p.add_argument("--jobs", "-j", type=int, default=None)
    p.add_argument("--force", action="store_true")
    a = p.parse_args(argv)
    try:
        b = build_cmod(a.nvdla_hw, a.config, jobs=a.jobs, force=a.force)
    except CmodBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(b.executable)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())
