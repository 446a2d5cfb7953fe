"""``nvdla-hil net``: whole networks through NVDLA's own compiler (harness/networks):
``build-compiler`` (nvdla/sw's umd compiler into the cache), ``gen`` (a Caffe model of the zoo
with seeded weights, its calibration table and an input), ``compile`` (the cached compiler: a
loadable) and ``run`` (the loadable through ``loadable run``'s machinery on a target, its output
compared with the float forward pass: a sanity check, not a golden)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..networks.compiler import CONFIGS, INFORMATS, PRECISIONS
from ..targets import firmware_spec
from .options import add_target_options, target_spec

__all__ = ["add_subcommands"]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("net", help="make Caffe networks, compile them with NVDLA's compiler, run them")
    ns = p.add_subparsers(dest="net_cmd", metavar="ACTION", required=True)
    q = ns.add_parser("build-compiler", help="build nvdla/sw's compiler (umd) into the cache")
    _sw(q)
    q.add_argument("--force", action="store_true", help="rebuild even when the cache holds a build")
    q.add_argument("--jobs", "-j", type=int, default=None, help="make's parallel jobs (default 2)")
    q.set_defaults(func=_cmd_build)
    q = ns.add_parser("gen", help="write a network of the zoo: Caffe model, calibration table, input, float output")
    q.add_argument("network", help="the zoo's network: " + ", ".join(_zoo()))
    q.add_argument("--out", help="folder to write (default: ./<network>)")
    q.add_argument("--seed", type=int, default=0, help="seed of the weights and the input (default 0)")
    q.add_argument("--force", action="store_true", help="overwrite a folder that holds a network")
    _sw(q)
    q.set_defaults(func=_cmd_gen)
    q = ns.add_parser("compile", help="compile a generated network with the cached NVDLA compiler")
    q.add_argument("folder", help="a folder `net gen` wrote")
    q.add_argument("--config", choices=CONFIGS, default="nv_full", help="the compiler's --configtarget (default nv_full)")
    q.add_argument("--precision", choices=PRECISIONS, default="fp16", help="compute precision (default fp16)")
    q.add_argument("--informat", choices=INFORMATS, default="ncxhwx",
                   help="the compiler's input format (default ncxhwx: a feature surface; nhwc, the compiler's own "
                        "default, makes the first convolution read an image)")
    q.add_argument("-o", "--output", help="the loadable (default: <folder>/<config>-<precision>[-<informat>].nvdla)")
    _sw(q)
    q.set_defaults(func=_cmd_compile)
    q = ns.add_parser("run", help="run a compiled network on a target; compare with the float forward pass")
    q.add_argument("loadable", help="a loadable `net compile` wrote")
    q.add_argument("--net", help="the network's folder (default: the loadable's folder)")
    q.add_argument("--dump", help="write the output DIMG here")
    q.add_argument("--force", action="store_true", help="--dump may replace an existing file (never an input)")
    add_target_options(q)
    _sw(q)
    q.set_defaults(func=_cmd_run)


def _sw(q: argparse.ArgumentParser) -> None:
    q.add_argument("--nvdla-sw", default=os.environ.get("NVDLA_SW"),
                   help="nvdla/sw checkout whose umd/ compiler is built into the cache (or NVDLA_SW)")


def _cmd_build(args: argparse.Namespace) -> int:
    from ..networks.compiler import build_compiler

    t0 = time.monotonic()
    b = build_compiler(args.nvdla_sw, force=args.force, progress=_say, jobs=args.jobs)
    print(f"nvdla_compiler: {b.compiler} ({time.monotonic() - t0:.1f} s)")
    return 0


def _zoo() -> list[str]:
    from ..networks.zoo import ZOO

    return list(ZOO)


def _compiler(nvdla_sw: str | None):  # noqa: ANN202 - a CompilerBuild
    from ..networks.compiler import build_compiler

    return build_compiler(nvdla_sw, progress=_say)


def _protoc(nvdla_sw: str | None) -> Path | None:
    """The checkout's protoc (built with the compiler); a protoc on PATH spares the build."""
    import shutil

    from ..networks.compiler import cached_compiler

    cached = cached_compiler(nvdla_sw)
    if cached is not None:
        return cached.protoc
    return None if shutil.which("protoc") else _compiler(nvdla_sw).protoc


def _cmd_gen(args: argparse.Namespace) -> int:
    from ..networks.caffe import load_schema, write_caffe
    from ..networks.compiler import find_umd
    from ..networks.run import generate
    from ..networks.zoo import make_network
    from ..networks.inputs import check_gen_folder

    make_network(args.network)  # an unknown name fails before the checkout is looked at
    out = check_gen_folder(args.out or args.network, args.force)
    umd = find_umd(args.nvdla_sw)
    schema = load_schema(umd, _protoc(args.nvdla_sw))
    files = generate(args.network, args.seed, out, lambda net, p, m: write_caffe(schema, net, p, m))
    print(f"{args.network} (seed {args.seed}) in {out}: {files.prototxt.name}, {files.caffemodel.name}, "
          f"{files.calib.name}, input.npy, expected.npy (schema {schema.source})")
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    from ..networks.caffe import load_schema
    from ..networks.compiler import CompilerError, compile_network, find_umd
    from ..networks.inputs import check_calibration, check_model, check_output, compiler_failed, load_net
    from ..networks.run import issues_for

    files = load_net(Path(args.folder))
    if args.precision == "int8":
        check_calibration(files)
    out = Path(args.output) if args.output else files.loadable(args.config, args.precision, args.informat)
    check_output(out, "-o/--output" if args.output else "the loadable", files, force=True)
    check_model(files)
    build = _compiler(args.nvdla_sw)
    check_model(files, load_schema(find_umd(args.nvdla_sw), build.protoc))
    try:
        r = compile_network(build, files.prototxt, files.caffemodel, out, config=args.config,
                            precision=args.precision, calib=files.calib, informat=args.informat)
    except Exception as e:
        for issue in issues_for(files, args.config, args.precision, args.informat):
            _say(f"known compiler issue: {issue}")
        if isinstance(e, CompilerError):
            raise compiler_failed(files, f"compile ({args.config} {args.precision} {args.informat})", e) from None
        raise
    print(f"compiled {files.meta['network']} for {args.config} {args.precision}: {out} ({r.seconds:.1f} s)")
    for issue in issues_for(files, args.config, args.precision, args.informat):
        _say(f"known compiler issue: {issue}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    import re

    from ..loadables.check import profile_for_loadable, read_loadable
    from ..loadables.firmware import find_nvdla_sw
    from ..networks.inputs import check_output, check_scratch, load_net, write_output
    from ..networks.run import issues_for, run_network

    find_nvdla_sw(args.nvdla_sw)
    loadable = Path(args.loadable)
    files = load_net(Path(args.net) if args.net else loadable.parent, arrays=True)
    raw = check_scratch(loadable.with_name(loadable.name + ".input.raw"), files)
    if args.dump:
        check_output(args.dump, "--dump", files, loadable, raw, force=args.force)
    # the configuration `net compile` named the loadable after: nv_large's atoms are nv_full's, so
    # the loadable alone would run nv_large's buffer sizes on nv_full's (a CBUF entry-size refusal)
    m = re.fullmatch(r"(nv_full|nv_large|nv_small)-(int8|fp16)(?:-(nchw|nhwc))?", loadable.stem)
    named = m.group(1) if m else None
    prof = args.profile.split(",")[0] if args.profile else named or profile_for_loadable(read_loadable(loadable))
    config, informat = (m.group(1), m.group(3) or "ncxhwx") if m else (prof, "ncxhwx")
    t0 = time.monotonic()
    try:
        r = run_network(loadable, files, spec=firmware_spec(target_spec(args, prof)), nvdla_sw=args.nvdla_sw,
                        log=lambda s: print(f"  {s}"))
    except Exception:
        # what the compiler is known to get wrong comes first: it may be why the run cannot start
        for issue in issues_for(files, config, m.group(2) if m else "int8", informat):
            print(f"  known compiler issue: {issue}", file=sys.stderr)
        raise
    if args.dump and r.dump:
        write_output(args.dump, r.dump, "--dump", files, loadable, raw, force=args.force)
    print(f"{'PASS' if r.status == 'passed' else 'FAIL'} {files.meta['network']} {loadable.name} on {args.target} "
          f"({prof}, {r.precision}): run {r.seconds:.2f} s, wall {time.monotonic() - t0:.2f} s")
    print(f"  {r.message}")
    precision = m.group(2) if m else r.precision
    for issue in issues_for(files, config, precision, informat):
        print(f"  known compiler issue: {issue}")
    return 0 if r.status == "passed" else 1
