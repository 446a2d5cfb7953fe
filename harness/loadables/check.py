"""One loadable, end to end: parse, pick the profile, build the firmware, run it on a target,
dump the output, compare with the golden (MD5 as NVDLA's regression does, element-wise when it
differs) and, when the output is wrong, name the first wrong layer against the model.

The profile a loadable was written for is decided from its descriptors (see
:func:`.runtime.loadable_config`): feature surfaces with 8-byte atoms are nv_small's, with
32-byte atoms nv_full's; a loadable without feature surfaces (BDMA, Rubik) uses units only
nv_full has. NVDLA's KMD has exactly these two configurations for the firmware's two register
maps (``nvdla_config_small`` atom 8 with ``opendla_small.h``; ``nvdla_config_os_initial`` atom
32 with ``opendla_initial.h``); the shared ``_small`` loadables are the 8-byte ones.

Files named by the user (the loadable, its golden, an input) are untrusted: only regular files
are read (:func:`read_regular`: a FIFO, a device or a directory is refused before any read, so
nothing hangs), their size checked before reading. A loadable is found by its content (a
FlatBuffers file whose root table has the Loadable's shape: :func:`looks_like_loadable`), not by
its name. A run without a golden is neither passed nor failed: its status is
:data:`NO_GOLDEN`. Every :class:`LoadableError` a check raises names the loadable's file.
"""

from __future__ import annotations

import glob
import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...drivers.profiles import HardwareProfile, load_profile
from .dimg import MAX_DIMG_BYTES, compare_dimg
from .fbs import Loadable, LoadableError, parse_loadable
from .firmware import Firmware, FirmwareError, build_firmware
from .localise import LayerDiff, first_difference
from .runtime import RunResult, check_profile, input_from_file, loadable_config, run_loadable

__all__ = ["Verdict", "profile_for_loadable", "read_loadable", "check_loadable", "find_loadables", "MAX_LOADABLE",
           "NO_GOLDEN", "read_regular", "check_regular", "looks_like_loadable", "MAX_INPUT", "with_file", "golden_for",
           "loadable_name"]

MAX_LOADABLE = 512 << 20
#: the largest input file read (a raw tensor or a PGM)
MAX_INPUT = 256 << 20
#: the status of a run that completed with nothing to compare its output with
NO_GOLDEN = "ran, no golden"
#: files looked at when a folder is searched for loadables
MAX_SCAN_FILES = 100_000


@dataclass
class Verdict:
    name: str
    profile: str
    target: str
    status: str  # passed, failed, NO_GOLDEN
    seconds: float
    message: str = ""
    md5: str = ""
    expected_md5: str = ""
    comparison: dict = field(default_factory=dict)
    layer: LayerDiff | None = None
    result: RunResult | None = None
    compared: bool = False  # the output was compared with a golden

    @property
    def outcome(self) -> str:
        """passed, failed, or :data:`NO_GOLDEN` (the run completed; nothing to compare with)."""
        return NO_GOLDEN if self.status == "passed" and not self.compared else self.status


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: str | os.PathLike[str], what: str, limit: int) -> os.stat_result:
    """Refuse (:class:`LoadableError` naming ``what`` and the path) anything but a regular file
    of at most ``limit`` bytes; nothing is opened."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise LoadableError(f"{what} {os.fspath(path)}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise LoadableError(f"{what} {os.fspath(path)}: {_kind(st.st_mode)}, not a regular file; only regular "
                            "files are read")
    if st.st_size > limit:
        raise LoadableError(f"{what} {os.fspath(path)}: {st.st_size} bytes, more than the {limit} allowed")
    return st


def read_regular(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (:func:`check_regular`); opened
    without blocking and checked again on the open file, so a path swapped for a FIFO meanwhile
    cannot hang the read either."""
    check_regular(path, what, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise LoadableError(f"{what} {os.fspath(path)}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise LoadableError(f"{what} {os.fspath(path)}: {_kind(st.st_mode)}, not a regular file")
        data = f.read(min(st.st_size, limit) + 1)  # read(n) allocates n bytes up front
    if len(data) > min(st.st_size, limit):
        raise LoadableError(f"{what} {os.fspath(path)}: grew past its {st.st_size} bytes while it was read")
    return data


def read_loadable(path: str | os.PathLike[str], what: str = "loadable") -> Loadable:
    """A loadable file, parsed; its errors name the file."""
    return parse_loadable(read_regular(path, what, MAX_LOADABLE), os.fspath(path))


def looks_like_loadable(path: str | os.PathLike[str]) -> bool:
    """A regular file shaped like a FlatBuffers ``Loadable`` (loadable.fbs has no file
    identifier): a root offset inside the file, the root table's vtable inside it with at most
    the Loadable's slots and some spare, the required ``version`` and at least one of the lists,
    each pointing at a vector inside the file. A DIMG, text or any other file fails at once."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or not 16 <= st.st_size <= MAX_LOADABLE:
            return False
        with open(path, "rb") as f:
            buf = f.read(min(st.st_size, 1 << 20))
    except OSError:
        return False
    n, size = len(buf), st.st_size
    root = struct.unpack_from("<I", buf, 0)[0]
    if root % 4 or not 8 <= root <= n - 4:
        return False
    vt = root - struct.unpack_from("<i", buf, root)[0]
    if not 4 <= vt <= n - 4:
        return False
    vt_len, obj_len = struct.unpack_from("<HH", buf, vt)
    if vt_len % 2 or not 6 <= vt_len <= 4 + 2 * 24 or vt + vt_len > n or obj_len < 4:
        return False
    slots = struct.unpack_from(f"<{(vt_len - 4) // 2}H", buf, vt + 4)
    if not slots[0]:  # version: required
        return False
    lists = 0
    for off in slots[1:9]:
        if not off:
            continue
        pos = root + off
        if pos + 4 > n:
            return False
        vec = pos + struct.unpack_from("<I", buf, pos)[0]
        if vec + 4 > size:
            return False
        if vec + 4 <= n and vec + 4 + 4 * struct.unpack_from("<I", buf, vec)[0] > size:
            return False
        lists += 1
    return lists > 0


def with_file(path: str | os.PathLike[str], e: LoadableError) -> LoadableError:
    """``e`` with the file it is about at its front (unless it names it already)."""
    p = os.fspath(path)
    if p in str(e) or Path(p).name in str(e):
        return e
    return LoadableError(f"{p}: {e}")


def profile_for_loadable(ld: Loadable) -> str:
    """nv_small for 8-byte-atom surfaces, else nv_full (module docstring)."""
    atoms = loadable_config(ld)["atoms"]
    return "nv_small" if atoms == [8] else "nv_full"


def loadable_name(path: Path) -> str:
    """The test's name: the file's name without NVDLA's ``_fbuf`` suffix (or an extension)."""
    name = path.name
    return name[:-len("_fbuf")] if name.endswith("_fbuf") else (path.stem or name)


def find_loadables(root: str | os.PathLike[str]) -> list[tuple[str, Path, Path | None]]:
    """(name, loadable, golden dump or None) of every loadable below ``root``, found by content
    (:func:`looks_like_loadable`, whatever its name; symbolic links and hidden folders are not
    followed); its golden in NVDLA's regression layout, ``golden/<name>_<hash>/dla/o_000000.dimg``."""
    r = Path(root)
    found: list[Path] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(r):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in sorted(filenames):
            seen += 1
            if seen > MAX_SCAN_FILES:
                raise LoadableError(f"{r}: more than {MAX_SCAN_FILES} files to look through for loadables")
            f = Path(dirpath) / fn
            if not f.is_symlink() and looks_like_loadable(f):
                found.append(f)
    return [(loadable_name(f), f, golden_for(r, loadable_name(f))) for f in sorted(found)]


def golden_for(root: str | os.PathLike[str], name: str) -> Path | None:
    """``golden/<name>_<hash>/dla/o_000000.dimg`` below ``root`` (NVDLA's regression layout), or None."""
    golden = [g for g in sorted(Path(root).glob(f"golden/{glob.escape(name)}_*/dla/o_000000.dimg"))
              if g.parents[1].name.rsplit("_", 1)[0] == name]
    return golden[0] if golden else None


def check_loadable(path: str | os.PathLike[str], *, spec, nvdla_sw: str | None, golden: str | os.PathLike[str] | None = None,
                   input_path: str | None = None, open_target: Callable | None = None, localise: bool = True,
                   log: Callable[[str], None] | None = None, profile: HardwareProfile | None = None) -> Verdict:
    """Run one loadable on the target ``spec`` describes (its profile is the loadable's own
    unless ``profile`` is given); a malformed loadable or golden, or a configuration mismatch,
    raises :class:`LoadableError` naming the file, a firmware that cannot be built
    :class:`FirmwareError`."""
    try:
        return _check(path, spec=spec, nvdla_sw=nvdla_sw, golden=golden, input_path=input_path,
                      open_target=open_target, localise=localise, log=log, profile=profile)
    except LoadableError as e:
        raise with_file(path, e) from None


def _check(path: str | os.PathLike[str], *, spec, nvdla_sw: str | None, golden: str | os.PathLike[str] | None,  # noqa: ANN001
           input_path: str | None, open_target: Callable | None, localise: bool,
           log: Callable[[str], None] | None, profile: HardwareProfile | None) -> Verdict:
    from ..targets import open_target as default_open
    from ..targets.model import ModelTarget

    opener = open_target or default_open
    ld = read_loadable(path)
    name = loadable_name(Path(path))
    prof = profile or load_profile(spec.profile)
    check_profile(ld, prof, name)
    expected = read_regular(golden, "golden", MAX_DIMG_BYTES) if golden is not None else None
    inp = None
    if input_path:
        ins = [m for m in ld.memory if m.flags & 4]
        if not ins:
            raise LoadableError(f"{name} has no INPUT memory entry for --input")
        tensor = ld.tensors[ins[0].tensor_desc_id]
        inp = input_from_file(input_path, tensor, read_regular(input_path, "input", min(MAX_INPUT, tensor.size + (1 << 20))))
    fw = Firmware(build_firmware(nvdla_sw, prof.generation), name=name)
    bugs = spec.extra.get("model_bugs") if spec.kind == "model" else None
    partial: RunResult | None = None
    with fw:
        try:
            with opener(spec) as target:
                res = run_loadable(ld, prof, target, fw, input_data=inp, snapshot=True, log=log)
            status, msg = "passed", ""
        except FirmwareError as e:
            res, status, msg = None, "failed", str(e)
            partial = getattr(e, "partial", None)  # the operations that completed before it failed
        v = Verdict(name, prof.name, spec.kind, status, res.seconds if res else 0.0, msg, result=res)
        if res is not None:
            from .dimg import md5

            v.md5 = md5(res.dump)
            if expected is not None:
                try:
                    cmp = compare_dimg(res.dump, expected, res.meta.numbering, expected_name=f"golden {golden}")
                except LoadableError as e:
                    raise with_file(golden, e) from None  # type: ignore[arg-type]
                v.comparison, v.expected_md5, v.compared = cmp, cmp["expected_md5"], True
                if not cmp["md5_equal"]:
                    v.status = "failed"
                    v.message = _describe(cmp)
        plain_model = spec.kind == "model" and not bugs
        if localise and v.status == "failed" and not plain_model:
            try:
                with ModelTarget(prof, semantics=spec.semantics) as ref:
                    ref_res = run_loadable(ld, prof, ref, fw, input_data=inp, snapshot=True)
            except FirmwareError as e:  # the firmware fails on the model too: nothing to localise against
                v.message += f"\n(not localised: on the reference model too, {e})"
                return v
            if res is None:  # the run did not finish: the operations it completed, against the reference
                done = partial.snapshots if partial is not None else []
                keys = {(s.task, s.op.index) for s in done}
                v.layer = first_difference(done, [s for s in ref_res.snapshots if (s.task, s.op.index) in keys],
                                           prof.atom_bytes)
                if v.layer is None:
                    v.message += (f"\n(the {len(keys)} operation(s) that completed agree with the reference model)"
                                  if keys else "\n(no operation completed)")
            else:
                v.layer = first_difference(res.snapshots, ref_res.snapshots, prof.atom_bytes)
            if v.layer is not None:  # first: a summary table shows a failure's first line
                v.message = v.layer.summary() + ("\n" + v.message if v.message else "")
    return v


def _describe(cmp: dict) -> str:
    if cmp.get("differ") == -1:
        return f"output dump header differs from the golden: {cmp['header'][0]} vs {cmp['header'][1]}"
    (fc, fa, fe), (wc, wa, we) = cmp["first"], cmp["worst"]
    ulp = f", at most {cmp['max_ulp']} FP16 ulp" if cmp.get("max_ulp") is not None else ""
    return (f"output MD5 {cmp['actual_md5']} != golden {cmp['expected_md5']}: {cmp['differ']} elements differ{ulp}; "
            f"first at (c,h,w)={fc} actual {fa:#x} expected {fe:#x}; worst at {wc} actual {wa:#x} expected {we:#x}")


def with_bugs(spec, bugs: list[str] | None):  # noqa: ANN001, ANN201 - a TargetSpec
    """The spec with model bugs injected (model target only)."""
    if not bugs:
        return spec
    return replace(spec, extra={**spec.extra, "model_bugs": list(bugs)})
