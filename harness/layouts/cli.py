"""`nvdla-hil pack / unpack / layouts` subcommands (registered in harness/cli/commands.py).

Files are read with ``np.load(..., allow_pickle=False)`` and written with ``np.save``.
The output may never be the input (``pack a.npy a.npy``), and an existing output is replaced
only with ``--force``; both are exit 2 naming the file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from . import LAYOUTS, LayoutError, get_layout

__all__ = ["add_subcommands", "cmd_layouts", "cmd_pack", "cmd_unpack"]


def _params(spec: Any, items: list[str] | None) -> dict[str, Any]:
    return spec.parse_params(items or [])


def _same_file(a: str, b: str) -> bool:
    pa, pb = Path(a), Path(b)
    try:
        if pa.exists() and pb.exists():
            return pa.samefile(pb)
    except OSError:
        pass
    return pa.resolve() == pb.resolve()


def _check_output(cmd: str, args: argparse.Namespace, output: str) -> None:
    """Refuse to write over the input, or over an existing file without --force."""
    if _same_file(args.input, output):
        raise LayoutError(f"{cmd}: output {output} is the input {args.input}; choose another output file")
    if Path(output).exists() and not getattr(args, "force", False):
        raise LayoutError(f"{cmd}: output {output} exists; pass --force to replace it")


def cmd_pack(args: argparse.Namespace) -> int:
    try:
        _check_output("pack", args, args.output)
        spec = get_layout(args.layout)
        params = _params(spec, args.param)
        try:
            arr = np.load(args.input, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise LayoutError(f"{args.input}: cannot read a .npy array: {exc}") from None
        buf = spec.pack(arr, **params)
        Path(args.output).write_bytes(buf.tobytes())
    except LayoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.layout}: packed {arr.shape} {arr.dtype} -> {buf.size} bytes in {args.output}")
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    try:
        out = args.output if str(args.output).endswith(".npy") else f"{args.output}.npy"  # np.save appends .npy
        if _same_file(args.input, args.output):
            raise LayoutError(f"unpack: output {args.output} is the input {args.input}; choose another output file")
        _check_output("unpack", args, out)
        spec = get_layout(args.layout)
        params = _params(spec, args.param)
        shape = tuple(int(s) for s in args.shape.replace("x", ",").split(",") if s.strip())
        try:
            raw = Path(args.input).read_bytes()
        except OSError as exc:
            raise LayoutError(f"{args.input}: {exc}") from None
        try:
            dtype = np.dtype(args.dtype) if args.dtype else None
        except TypeError:
            raise LayoutError(f"--dtype {args.dtype!r} is not a numpy dtype") from None
        arr = spec.unpack(raw, shape, dtype, **params)
        np.save(args.output, arr, allow_pickle=False)
    except (LayoutError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.layout}: unpacked {len(raw)} bytes -> {arr.shape} {arr.dtype} in {args.output}")
    return 0


def format_layouts(family: str | None = None) -> str:
    lines = []
    for name, spec in sorted(LAYOUTS.items()):
        if family and spec.family != family:
            continue
        lines.append(f"{name}  [{spec.family}] (default dtype {spec.default_dtype})")
        lines.append(f"    {spec.description}")
        for p in spec.parameters:
            choices = f" one of {list(p.choices)}" if p.choices else ""
            lines.append(f"    --param {p.name}=<{p.type.__name__}>  default {p.default!r}{choices}: {p.doc}")
    return "\n".join(lines)


def cmd_layouts(args: argparse.Namespace) -> int:
    print(format_layouts(args.family))
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``pack``, ``unpack`` and ``layouts`` on an argparse subparsers object."""
    param_help = "layout parameter name=value (repeatable); see `layouts` for the names"
    p = subparsers.add_parser("pack", help="pack a .npy array into a memory layout",
                              description="Pack IN.npy into the byte image of --layout, written to OUT.bin.")
    p.add_argument("--layout", required=True, help="layout name (see `layouts`)")
    p.add_argument("--param", action="append", metavar="K=V", help=param_help)
    p.add_argument("input", metavar="IN.npy", help="input array (.npy, no pickles)")
    p.add_argument("output", metavar="OUT.bin", help="output binary file")
    p.add_argument("--force", action="store_true", help="replace OUT.bin if it exists")
    p.set_defaults(func=cmd_pack)

    u = subparsers.add_parser("unpack", help="unpack a memory image into a .npy array",
                              description="Unpack IN.bin laid out as --layout into OUT.npy.")
    u.add_argument("--layout", required=True, help="layout name (see `layouts`)")
    u.add_argument("--shape", required=True, help="logical shape, e.g. 64,8,8 or 64x8x8")
    u.add_argument("--dtype", default=None, help="numpy dtype of the result (default: the layout's)")
    u.add_argument("--param", action="append", metavar="K=V", help=param_help)
    u.add_argument("input", metavar="IN.bin", help="input binary file")
    u.add_argument("output", metavar="OUT.npy", help="output array (.npy)")
    u.add_argument("--force", action="store_true", help="replace OUT.npy if it exists")
    u.set_defaults(func=cmd_unpack)

    ls = subparsers.add_parser("layouts", help="list memory layouts and their parameters",
                               description="List every memory layout with its parameters.")
    ls.add_argument("--family", choices=sorted({s.family for s in LAYOUTS.values()}), help="only this family")
    ls.set_defaults(func=cmd_layouts)
