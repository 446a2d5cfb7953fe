"""One loadable, end to end: parse, pick the profile, build the firmware, run it on a target,
dump the output, compare with the golden (MD5 as NVDLA's regression does, element-wise when it
differs) and, when the output is wrong, name the first wrong layer against the model.

The profile a loadable was written for is decided from its descriptors (see
:func:`.runtime.loadable_config`): feature surfaces with 8-byte atoms are nv_small's, with
32-byte atoms nv_full's; a loadable without feature surfaces (BDMA, Rubik) uses units only
nv_full has. NVDLA's KMD has exactly these two configurations for the firmware's two register
maps (``nvdla_config_small`` atom 8 with ``opendla_small.h``; ``nvdla_config_os_initial`` atom
32 with ``opendla_initial.h``); the shared ``_small`` loadables are the 8-byte ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...drivers.profiles import HardwareProfile, load_profile
from .dimg import compare_dimg
from .fbs import Loadable, LoadableError, parse_loadable
from .firmware import Firmware, FirmwareError, build_firmware
from .localise import LayerDiff, first_difference
from .runtime import RunResult, check_profile, input_from_file, loadable_config, run_loadable

__all__ = ["Verdict", "profile_for_loadable", "read_loadable", "check_loadable", "find_loadables", "MAX_LOADABLE"]

MAX_LOADABLE = 512 << 20


@dataclass
class Verdict:
    name: str
    profile: str
    target: str
    status: str  # passed, failed
    seconds: float
    message: str = ""
    md5: str = ""
    expected_md5: str = ""
    comparison: dict = field(default_factory=dict)
    layer: LayerDiff | None = None
    result: RunResult | None = None


def read_loadable(path: str | os.PathLike[str]) -> Loadable:
    p = Path(path)
    size = p.stat().st_size
    if size > MAX_LOADABLE:
        raise LoadableError(f"{p}: {size} bytes, more than the {MAX_LOADABLE} a loadable may have")
    return parse_loadable(p.read_bytes(), p.name)


def profile_for_loadable(ld: Loadable) -> str:
    """nv_small for 8-byte-atom surfaces, else nv_full (module docstring)."""
    atoms = loadable_config(ld)["atoms"]
    return "nv_small" if atoms == [8] else "nv_full"


def find_loadables(root: str | os.PathLike[str]) -> list[tuple[str, Path, Path | None]]:
    """(name, loadable, golden dump or None) of NVDLA's regression layout: ``flatbufs/**/<name>_fbuf``
    and ``golden/<name>_<hash>/dla/o_000000.dimg``."""
    r = Path(root)
    out = []
    for f in sorted(r.glob("flatbufs/**/*_fbuf")):
        name = f.name[:-len("_fbuf")]
        golden = [g for g in sorted(r.glob(f"golden/{name}_*/dla/o_000000.dimg"))
                  if g.parents[1].name.rsplit("_", 1)[0] == name]
        out.append((name, f, golden[0] if golden else None))
    return out


def check_loadable(path: str | os.PathLike[str], *, spec, nvdla_sw: str | None, golden: str | os.PathLike[str] | None = None,
                   input_path: str | None = None, open_target: Callable | None = None, localise: bool = True,
                   log: Callable[[str], None] | None = None, profile: HardwareProfile | None = None) -> Verdict:
    """Run one loadable on the target ``spec`` describes (its profile is the loadable's own
    unless ``profile`` is given); a malformed loadable or a configuration mismatch raises
    :class:`LoadableError`, a firmware that cannot be built :class:`FirmwareError`."""
    from ..targets import open_target as default_open
    from ..targets.model import ModelTarget

    opener = open_target or default_open
    ld = read_loadable(path)
    name = Path(path).name.removesuffix("_fbuf")
    prof = profile or load_profile(spec.profile)
    check_profile(ld, prof, name)
    fw = Firmware(build_firmware(nvdla_sw, prof.generation))
    inp = None
    if input_path:
        ins = [m for m in ld.memory if m.flags & 4]
        if not ins:
            raise LoadableError(f"{name} has no INPUT memory entry for --input")
        inp = input_from_file(input_path, ld.tensors[ins[0].tensor_desc_id])
    bugs = spec.extra.get("model_bugs") if spec.kind == "model" else None
    with fw:
        try:
            with opener(spec) as target:
                res = run_loadable(ld, prof, target, fw, input_data=inp, snapshot=True, log=log)
            status, msg = "passed", ""
        except FirmwareError as e:
            res, status, msg = None, "failed", str(e)
        v = Verdict(name, prof.name, spec.kind, status, res.seconds if res else 0.0, msg, result=res)
        if res is not None:
            from .dimg import md5

            v.md5 = md5(res.dump)
            if golden is not None:
                cmp = compare_dimg(res.dump, Path(golden).read_bytes())
                v.comparison, v.expected_md5 = cmp, cmp["expected_md5"]
                if not cmp["md5_equal"]:
                    v.status = "failed"
                    v.message = _describe(cmp)
        plain_model = spec.kind == "model" and not bugs
        if localise and v.status == "failed" and not plain_model:
            with ModelTarget(prof, semantics=spec.semantics) as ref:
                ref_res = run_loadable(ld, prof, ref, fw, input_data=inp, snapshot=True)
            v.layer = first_difference(res.snapshots if res else [], ref_res.snapshots, prof.atom_bytes)
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
