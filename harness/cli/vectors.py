"""``nvdla-hil vectors``: generate, run, show and diff packed test vectors.

    nvdla-hil vectors gen SUITE --seed N --count K --out DIR
    nvdla-hil vectors gen --from-manifest CASE/case.yaml --out DIR
    nvdla-hil vectors gen SUITE ... --target cmod|verilator [--nvdla-hw DIR]   # goldens from an oracle
    nvdla-hil vectors regolden CASE_OR_FOLDER --target cmod|verilator [--nvdla-hw DIR]
    nvdla-hil vectors run CASE_OR_FOLDER [--target model] [--profile P]
    nvdla-hil vectors show CASE
    nvdla-hil vectors diff CASE_A CASE_B
    nvdla-hil vectors list [FOLDER]

``gen`` without ``--target`` stores the reference model's outputs as goldens (``golden_source``
kind ``model``: self-consistency, never reported as a plain pass); with ``--target`` (or
``regolden`` on cases that exist) every case is run on that oracle and its outputs and counters
become the goldens (``golden_source`` names the build); where the old goldens differ from the
oracle's, each difference is printed (a model bug when the old goldens were the model's).

Exit codes: 0 success, 1 a case failed / cases differ / an oracle run failed, 2 bad input (message
names file and field).
``gen`` refuses to replace a case folder that exists (pass ``--force``), and never writes a case
over the manifest it regenerates from.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from ..vectors import Case, VectorError, bundled_root, find_cases, load_case, run_case, unpack_surface
from ..vectors.run import spec_for_case
from .options import add_target_options, target_spec
from .exits import EXIT_BAD_INPUT, bad_input
from ...semantics import SEMANTICS

__all__ = ["add_subcommands", "show_case", "diff_cases"]


# ---- gen ---------------------------------------------------------------------------------------


def _cmd_gen(args: argparse.Namespace) -> int:
    from ..vectors.generate import SUITES, generate_suite, regenerate

    from ..vectors.generate import case_name

    try:
        if args.from_manifest:
            src = load_case(args.from_manifest)
            p = src.provenance
            if p.get("suite") is not None and p.get("seed") is not None and p.get("index") is not None:
                dest = Path(args.out) / case_name(str(p["suite"]), int(p["seed"]), int(p["index"]))
                if dest.resolve() == src.folder.resolve():
                    return bad_input("vectors", f"--out {args.out}: would write {dest} over the case it regenerates from "
                                     f"({args.from_manifest}); choose another --out")
                if dest.exists() and not args.force:
                    return bad_input("vectors", f"--out {args.out}: case {dest} exists; pass --force to replace it")
            path = regenerate(args.from_manifest, args.out)
            print(f"regenerated {path}")
            return 0
        if not args.suite:
            return bad_input("vectors", f"give a SUITE ({', '.join(SUITES)}) or --from-manifest CASE/case.yaml")
        if args.suite not in SUITES:
            return bad_input("vectors", f"unknown suite {args.suite!r}; suites: {', '.join(SUITES)}")
        if args.count < 1:
            return bad_input("vectors", f"--count {args.count}: give at least 1")
        existing = [Path(args.out) / case_name(args.suite, args.seed, i) for i in range(args.count)]
        existing = [d for d in existing if d.exists()]
        if existing and not args.force:
            more = f" and {len(existing) - 1} more" if len(existing) > 1 else ""
            return bad_input("vectors", f"--out {args.out}: case {existing[0]}{more} exists; pass --force to replace")
        paths = generate_suite(args.suite, args.seed, args.count, args.out, semantics=args.semantics)
    except (VectorError, ValueError) as e:
        return bad_input("vectors", str(e))
    for path in paths:
        print(path)
    if args.target and args.target != "model":
        return _regolden_paths(paths, args)
    return 0


# ---- regolden ------------------------------------------------------------------------------------


def _regolden_paths(paths: list[Path], args: argparse.Namespace) -> int:
    """Run each layer case on the oracle ``args.target`` and store its outputs as the goldens."""
    import time

    from ..targets import open_target
    from ..vectors.generate import regolden

    worst, counts = 0, {"regoldened": 0, "disagreed": 0, "errors": 0, "layout (unchanged, no target runs it)": 0}
    t0 = time.monotonic()
    opened: dict[str, Any] = {}
    try:
        for p in paths:
            try:
                case = load_case(p)
            except VectorError as e:
                print(f"{p}: ERROR {e}")
                worst = max(worst, EXIT_BAD_INPUT)
                counts["errors"] += 1
                continue
            if case.kind == "layout":
                counts["layout (unchanged, no target runs it)"] += 1
                continue
            prof = args.profile or case.profile or "nv_small"
            if prof not in opened:
                spec = target_spec(args, prof, board_memory=False)
                opened[prof] = open_target(spec).__enter__()
            target = opened[prof]
            target.reset()
            r = regolden(case.folder, target)
            if r.error:
                print(f"{case.name}: ERROR (case left unchanged) {r.error}")
                counts["errors"] += 1
                worst = max(worst, 1)
                continue
            counts["regoldened"] += 1
            kind = r.golden_source.get("kind")
            if r.disagreements:
                counts["disagreed"] += 1
                print(f"{case.name}: golden from {kind} ({r.seconds:.1f} s); the old golden DISAGREED:")
                for line in r.disagreements:
                    print(f"  {line}")
            else:
                print(f"{case.name}: golden from {kind} ({r.seconds:.1f} s); the old golden agreed")
    finally:
        for t in opened.values():
            t.__exit__(None, None, None)
    print(f"regolden on {args.target}: " + ", ".join(f"{n} {k}" for k, n in counts.items())
          + f" in {time.monotonic() - t0:.1f} s")
    return worst


def _cmd_regolden(args: argparse.Namespace) -> int:
    root = Path(args.case)
    paths = find_cases(root)
    if not paths:
        return bad_input("vectors", f"no cases (folders with case.yaml) under {root}")
    return _regolden_paths(paths, args)


# ---- run ---------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from ...drivers.profiles import load_profile
    from ..targets import open_target

    root = Path(args.case) if args.case else bundled_root()
    paths = find_cases(root)
    if not paths:
        return bad_input("vectors", f"no cases (folders with case.yaml) under {root}")
    worst = 0
    counts: dict[str, int] = {}
    for p in paths:
        try:
            case = load_case(p)
        except VectorError as e:
            print(f"{p}: ERROR {e}")
            counts["error"] = counts.get("error", 0) + 1
            worst = max(worst, EXIT_BAD_INPUT)
            continue
        if case.kind == "layout":
            res = run_case(case)
        else:
            prof = args.profile or case.profile
            assert prof is not None  # a layer case always names its profile (vectors._load_layer_case)
            if case.features and not all(load_profile(prof).has(f) for f in case.features):
                print(f"{case.name}: SKIPPED - profile {prof} lacks {', '.join(sorted(case.features))}")
                counts["skipped"] = counts.get("skipped", 0) + 1
                continue
            spec = spec_for_case(target_spec(args, prof, board_memory=False), case)
            with open_target(spec) as t:
                res = run_case(case, t, target_kind=args.target)
        print(res.summary() if (args.verbose or not res.passed) else f"{res.name}: {res.status.upper()}")
        counts[res.status] = counts.get(res.status, 0) + 1
        if res.status in ("failed", "error"):
            worst = max(worst, 1)
    print("summary: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return worst


# ---- show --------------------------------------------------------------------------------------


def _stats(a: np.ndarray) -> str:
    if a.size == 0:
        return "empty"
    v = a.astype(np.float64)
    return f"min {v.min():.6g} max {v.max():.6g} mean {v.mean():.6g}"


def show_case(case: Case) -> str:
    """Human summary: what the case programs (registers decoded), its tensors and its golden."""
    lines = [f"case {case.name} ({case.kind})  {case.path}"]
    if case.description:
        lines.append(f"  {case.description}")
    gs = case.golden_source
    what = "checked against an oracle" if case.oracle_checked else "self-consistency only, not an oracle"
    lines.append(f"  golden: {gs.get('kind')} ({what}): " + ", ".join(f"{k}={v}" for k, v in gs.items() if k != "kind"))
    prov = case.provenance
    if prov:
        lines.append("  provenance: " + ", ".join(f"{k}={v}" for k, v in prov.items()))
    if case.kind == "layout":
        lp = case.layout
        assert lp is not None
        lines.append(f"  layout {lp.layout} {lp.params} ({case.family or '?'} family)")
        lines.append(f"  array {lp.dtype} {list(lp.shape)}: {_stats(lp.array)}  [{lp.array_blob}]")
        lines.append(f"  packed {lp.packed.size} bytes [{lp.packed_blob}]")
        return "\n".join(lines)
    lines.append(f"  unit {case.unit} on {case.profile}; features: {', '.join(sorted(case.features)) or '-'}; "
                 f"launch {' -> '.join(case.launch)}")
    from ...drivers.profiles import load_profile

    rm = load_profile(case.profile or "nv_small").regmap
    lines.append(f"  registers ({len(case.registers)}):")
    for r in case.registers:
        reg = rm.register(r.name)
        parts = []
        for f in reg.fields.values():
            v = f.extract(r.value)
            name = f.decode(v)
            parts.append(f"{f.name}={v}" + (f"({name})" if name else ""))
        lines.append(f"    {r.name:34s} = {r.value:#010x}  {' '.join(parts)}")
    if case.lut is not None:
        c = case.lut.config
        lines.append(f"  LUT {case.lut.unit}: LE {c.le_function} start {c.le_start} end {c.le_end} "
                     f"offset {c.le_index_offset} select {c.le_index_select}; LO start {c.lo_start} end {c.lo_end} "
                     f"select {c.lo_index_select}; priorities uflow {c.uflow_priority} oflow {c.oflow_priority} "
                     f"hybrid {c.hybrid_priority}")
        for t, arr in (("LE", case.lut.le), ("LO", case.lut.lo)):
            if arr is not None:
                lines.append(f"    {t} table {arr.size} entries: {_stats(arr)}")
    for name, cv in case.convertors.items():
        lines.append(f"  convertor {name}: offset {cv.offset} scale {cv.scale} shift {cv.shift}")
    for s in case.inputs:
        assert s.data is not None
        lines.append(f"  input  {s.name}: {s.layout} {s.params} {s.dtype} {list(s.shape)} at {s.port}[{s.address:#x}] "
                     f"{s.nbytes} bytes; {_stats(s.data)}")
    for s in case.outputs:
        head = f"  output {s.name}: {s.layout} {s.params} {s.dtype} {list(s.shape)} at {s.port}[{s.address:#x}] " \
               f"{s.nbytes} bytes; rule {s.rule}"
        if s.crc is not None:
            lines.append(head + f"; golden crc {s.crc:#010x}")
        else:
            assert s.packed is not None
            g = unpack_surface(s.layout, s.packed, s.shape, s.dtype, s.params)
            lines.append(head + f"; golden {_stats(g)}")
    if case.statistics is not None:
        lines.append("  expected statistics: " + ", ".join(f"{k}={v}" for k, v in case.statistics.items()))
    return "\n".join(lines)


def _cmd_show(args: argparse.Namespace) -> int:
    try:
        print(show_case(load_case(args.case)))
    except VectorError as e:
        return bad_input("vectors", str(e))
    return 0


# ---- diff --------------------------------------------------------------------------------------


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            key = v.get("reg") or v.get("name") if isinstance(v, dict) else None
            out.update(_flatten(v, f"{prefix}[{key or i}]"))
    else:
        out[prefix] = d
    return out


def diff_cases(a: Case, b: Case) -> list[str]:
    """Manifest differences (field by field) and blob differences (bytes, first offsets)."""
    out: list[str] = []
    fa, fb = _flatten(a.manifest), _flatten(b.manifest)
    for k in sorted(set(fa) | set(fb)):
        if k in ("name",) or k.startswith("provenance.") and k != "provenance.semantics":
            if fa.get(k) != fb.get(k):
                out.append(f"  (info) {k}: {fa.get(k)!r} -> {fb.get(k)!r}")
            continue
        if fa.get(k, "<absent>") != fb.get(k, "<absent>"):
            out.append(f"  {k}: {fa.get(k, '<absent>')!r} -> {fb.get(k, '<absent>')!r}")
    files = sorted({p.name for p in a.folder.iterdir() if p.is_file()} | {p.name for p in b.folder.iterdir() if p.is_file()})
    for name in files:
        if name == "case.yaml":
            continue
        pa, pb = a.folder / name, b.folder / name
        if not pa.is_file() or not pb.is_file():
            out.append(f"  blob {name}: only in {'A' if pa.is_file() else 'B'}")
            continue
        ba, bb = pa.read_bytes(), pb.read_bytes()
        if ba == bb:
            continue
        xa = np.frombuffer(ba, np.uint8)
        xb = np.frombuffer(bb, np.uint8)
        n = min(xa.size, xb.size)
        diff = np.flatnonzero(xa[:n] != xb[:n])
        first = ", ".join(f"{int(i):#x}: {xa[i]:#04x}->{xb[i]:#04x}" for i in diff[:4])
        size = f" (size {xa.size} -> {xb.size})" if xa.size != xb.size else ""
        out.append(f"  blob {name}: {diff.size} of {n} bytes differ{size}" + (f"; first {first}" if first else ""))
    return out


def _cmd_diff(args: argparse.Namespace) -> int:
    try:
        a, b = load_case(args.a), load_case(args.b)
    except VectorError as e:
        return bad_input("vectors", str(e))
    lines = diff_cases(a, b)
    real = [ln for ln in lines if not ln.startswith("  (info)")]
    print(f"{a.path.parent} vs {b.path.parent}: " + ("identical" if not real else f"{len(real)} difference(s)"))
    for ln in lines:
        print(ln)
    return 1 if real else 0


def _cmd_list(args: argparse.Namespace) -> int:
    root = Path(args.folder) if args.folder else bundled_root()
    for p in find_cases(root):
        try:
            c = load_case(p)
            print(f"{p.relative_to(root) if p != root else p.name}  {c.kind:6s} {c.profile or '-':18s} {c.description}")
        except VectorError as e:
            print(f"{p}: ERROR {e}")
    return 0


# ---- registration ----------------------------------------------------------------------------


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("vectors", help="packed test vectors: gen, run, show, diff, list",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="vectors_cmd", required=True)

    g = sub.add_parser("gen", help="generate cases from the reference model (reproducible)")
    g.add_argument("suite", nargs="?", help="suite name")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--count", type=int, default=8)
    g.add_argument("--out", required=True, help="output folder (one sub-folder per case)")
    g.add_argument("--semantics", choices=SEMANTICS, default="rtl")
    g.add_argument("--from-manifest", help="regenerate the case of this case.yaml byte for byte")
    g.add_argument("--force", action="store_true", help="replace case folders that exist")
    add_target_options(g, kinds=("model", "verilator", "cmod"), default="model", profile_default=None, include=("hw",),
                       target_help="run each generated case on this oracle and keep its outputs as the goldens "
                                   "(default model: the reference model's own outputs, self-consistency only)",
                       profile_help="with --target: the oracle's configuration (default: the case's)",
                       hw_help="with --target: the nvdla/hw checkout")
    g.set_defaults(func=_cmd_gen)

    rg = sub.add_parser("regolden", help="re-make the goldens of cases from an oracle (RTL or C model)")
    rg.add_argument("case", help="a case folder or a folder of cases (rewritten in place)")
    add_target_options(rg, kinds=("verilator", "cmod"), default=None, required=True, profile_default=None,
                       include=("hw",), target_help="the oracle whose outputs become the goldens",
                       profile_help="the oracle's configuration (default: the case's)", hw_help="the nvdla/hw checkout")
    rg.set_defaults(func=_cmd_regolden)

    r = sub.add_parser("run", help="run a case or every case below a folder (default: bundled suites)")
    r.add_argument("case", nargs="?")
    add_target_options(r, profile_default=None, include=("semantics", "hw", "lab"),
                       profile_help="hardware profile (default: the case's)")
    r.add_argument("-v", "--verbose", action="store_true", help="print every check")
    r.set_defaults(func=_cmd_run)

    s = sub.add_parser("show", help="human summary of a case")
    s.add_argument("case")
    s.set_defaults(func=_cmd_show)

    d = sub.add_parser("diff", help="manifest and blob differences between two cases")
    d.add_argument("a")
    d.add_argument("b")
    d.set_defaults(func=_cmd_diff)

    ls = sub.add_parser("list", help="list the cases below a folder (default: bundled)")
    ls.add_argument("folder", nargs="?")
    ls.set_defaults(func=_cmd_list)
