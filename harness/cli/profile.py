"""``nvdla-hil profile``: list or show the shipped hardware profiles, or derive profiles from an
nvdla/hw checkout's ``spec/defs/<config>.spec`` (and compare them with the shipped ones)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .exits import bad_input

__all__ = ["add_subcommands", "profile_fields"]


def profile_fields(profile: Any) -> dict[str, Any]:
    """A :class:`~nvdla_hil.drivers.profiles.HardwareProfile`'s fields as plain YAML-safe values, in
    the order and shape of an entry of ``drivers/data/profiles.yaml`` (its name is the entry's
    key): the read-only mappings become dicts and ``units`` a list, so ``profile show``'s output
    is a profiles file's entry as it stands."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(profile):
        if f.name == "name":
            continue
        value = getattr(profile, f.name)
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def _cmd_profile(args: argparse.Namespace) -> int:
    import yaml

    from ...drivers.profiles import list_profiles, load_profile
    from ...drivers.specdefs import SpecError, profile_from_spec, spec_path

    if args.profile_cmd == "list":
        for name in list_profiles():
            p = load_profile(name)
            feats = ", ".join(f for f, on in p.features.items() if on)
            print(f"{name:20s} {p.generation} atom {p.atom_bytes:2d}  MAC C/K {p.mac_atomic_c}/{p.mac_atomic_k}  "
                  f"CBUF {p.cbuf_banks}x{p.cbuf_bank_width}x{p.cbuf_bank_depth}  {feats}")
        return 0
    if args.profile_cmd == "show":
        p = load_profile(args.name, nvdla_hw=args.nvdla_hw)
        print(yaml.safe_dump({p.name: profile_fields(p)}, sort_keys=False, default_flow_style=None, width=100), end="")
        return 0
    # derive: one profile per configuration of a checkout (or given .spec files)
    out: dict[str, dict] = {}
    try:
        sources = [Path(s) for s in args.specs]
        if args.nvdla_hw:
            configs = args.config or sorted(q.stem for q in (Path(args.nvdla_hw) / "spec" / "defs").glob("*.spec")
                                            if q.stem != "projects")
            sources += [spec_path(args.nvdla_hw, c) for c in configs]
        if not sources:
            return bad_input("profile derive", "give --nvdla-hw PATH [--config NAME ...] or .spec files")
        for src in sources:
            out[src.stem] = profile_from_spec(src)
    except SpecError as e:
        return bad_input("profile derive", str(e))
    text = yaml.safe_dump({"format": "nvdla-hil-profiles/1", "profiles": out}, sort_keys=False,
                          default_flow_style=None, width=100)
    if args.out:
        dest = Path(args.out)
        if dest.exists() and not args.force:
            return bad_input("profile derive", f"{dest} exists; pass --force to replace it")
        dest.write_text(text, encoding="utf-8")
        print(f"wrote {len(out)} profile(s) to {dest}")
    else:
        print(text, end="")
    if args.compare:
        bad = 0
        for name, d in out.items():
            try:
                shipped = load_profile(name)
            except ValueError:
                print(f"{name}: not shipped (use the .spec path as --nvdla-config)")
                continue
            for k, v in d.items():
                have: Any = getattr(shipped, k) if k != "units" else list(shipped.units)
                if k in ("features", "throughput"):
                    have = dict(have)
                if have != v:
                    bad += 1
                    print(f"{name}.{k}: shipped {have!r}, spec says {v!r}")
        print(f"{bad} difference(s) between the shipped profiles and the spec files")
        return 1 if bad else 0
    return 0


# ---- the subcommand ------------------------------------------------------------------------


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="list, show or derive hardware profiles (from spec/defs/<config>.spec)")
    ps = p.add_subparsers(dest="profile_cmd", metavar="ACTION", required=True)
    ps.add_parser("list", help="the shipped profiles, one line each")
    q = ps.add_parser("show", help="every field of one profile")
    q.add_argument("name", help="profile name or a path to a .spec file")
    q.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"), help="checkout for unshipped configurations")
    q = ps.add_parser("derive", help="derive profiles from an nvdla/hw checkout's spec/defs/*.spec",
                      description="Read spec/defs/<config>.spec of a checkout (every configuration, or those "
                                  "named with --config) or the .spec files given, and print profiles YAML.")
    q.add_argument("specs", nargs="*", help=".spec files")
    q.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"), help="nvdla/hw checkout")
    q.add_argument("--config", action="append", help="configuration name (repeatable; default: all)")
    q.add_argument("--out", help="write the YAML here instead of printing it")
    q.add_argument("--force", action="store_true", help="replace --out if it exists")
    q.add_argument("--compare", action="store_true", help="compare with the shipped profiles; exit 1 on a difference")
    p.set_defaults(func=_cmd_profile)
