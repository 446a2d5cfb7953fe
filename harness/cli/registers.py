"""``nvdla-hil regs``: read, write, dump, list or show registers by name (decoded fields, enum
names) on a target, and check the bundled register map against an nvdla/hw checkout."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..targets import open_target
from .exits import EXIT_BAD_INPUT, BadInput
from .options import add_target_options, target_spec

__all__ = ["add_subcommands"]


def _parse_value(text: str) -> int | str:
    try:
        return int(text, 0)
    except ValueError:
        return text  # an enum name


#: registers that exist only with a profile feature: SDP's LUT (S_LUT_*: NV_NVDLA_SDP_core's LUT
#: is built only when the .spec defines SDP_LUT_ENABLE; CDP's LUT is always there)
_FEATURE_REGISTERS = ((("SDP", "S_LUT_"), "sdp_lut"),)


def _regs_check(profile: Any, reg: Any) -> None:
    """A register of a unit or feature the profile lacks is an error (``regs`` on real hardware
    would read an absent register as 0 and look fine)."""
    from ...drivers.profiles import FeatureMissingError

    if not profile.has_unit(reg.block):
        raise FeatureMissingError(f"{profile.name} has no {reg.block} unit ({reg.full_name})")
    for (block, prefix), feat in _FEATURE_REGISTERS:
        if reg.block == block and reg.name.startswith(prefix) and not profile.has(feat):
            try:
                profile.require(feat)
            except FeatureMissingError as e:
                raise FeatureMissingError(f"{e}: {reg.full_name}") from None


def _regs_values(name: str, values: list[str]) -> dict[str, int | str] | int:
    """``regs write`` arguments: one VALUE, or FIELD=VALUE pairs (each field once)."""
    if not any("=" in a for a in values):
        if len(values) != 1:
            raise BadInput(f"regs write {name}: give one VALUE or FIELD=VALUE pairs, not {len(values)} values")
        try:
            return int(values[0], 0)
        except ValueError:
            raise BadInput(f"regs write {name}: {values[0]!r} is not a number (give 0x..., 0b... or decimal, "
                       "or FIELD=VALUE)") from None
    out: dict[str, int | str] = {}
    for a in values:
        k, eq, v = a.partition("=")
        k = k.strip()
        if not eq or not k or not v:
            raise BadInput(f"regs write {name}: {a!r}: expected FIELD=VALUE")
        if k.upper() in (f.upper() for f in out):
            raise BadInput(f"regs write {name}: field {k} given twice")
        out[k] = _parse_value(v)
    return out


def _cmd_regs(args: argparse.Namespace) -> int:
    from ...drivers.driver import NvdlaDriver
    from ...drivers.profiles import load_profile

    if args.regs_cmd == "check":
        from ...drivers.regcheck import check_against_checkout

        hw = args.nvdla_hw
        if not hw:
            print("nvdla-hil regs check: give --nvdla-hw PATH (or NVDLA_HW)", file=sys.stderr)
            return EXIT_BAD_INPUT
        diffs = check_against_checkout(hw, args.profile or "nv_small")
        for d in diffs:
            print(d)
        print(f"{len(diffs)} difference(s) between the bundled register map and {hw}")
        return 1 if diffs else 0
    if args.profile is not None and ("," in args.profile or not args.profile.strip()):
        raise BadInput(f"--profile {args.profile!r}: regs works on one profile; name one (e.g. nv_small)")
    profile = load_profile((args.profile or "nv_small").split(",")[0])
    if args.regs_cmd == "list":
        rm = profile.regmap
        for block in args.blocks or list(rm.blocks):
            b = rm.block(block)
            for r in b.registers.values():
                fields = ", ".join(f"{f.name}[{f.msb}:{f.lsb}]" for f in r.fields.values())
                flags = ("dual " if r.dual else "") + ("trigger " if r.trigger else "")
                print(f"{r.address:#07x} {r.full_name:45s} {r.access:2s} rst={r.reset:#010x} {flags}{fields}")
        return 0
    if args.regs_cmd == "info":
        r = profile.regmap.register(args.name)
        print(f"{r.full_name} @ {r.address:#x} (offset {r.offset:#x}), access {r.access}, reset {r.reset:#010x}"
              + (", per register group" if r.dual else "") + (", write has side effects" if r.trigger else ""))
        for f in r.fields.values():
            enums = (" {" + ", ".join(f"{k}={v}" for k, v in f.enums.items()) + "}") if f.enums else ""
            print(f"  [{f.msb}:{f.lsb}] {f.name} {f.access} reset={f.reset:#x}{enums}")
        return 0
    if args.regs_cmd in ("read", "write"):
        for name in (args.names if args.regs_cmd == "read" else [args.name]):
            _regs_check(profile, profile.regmap.register(name))
        values = _regs_values(args.name, args.values) if args.regs_cmd == "write" else None
    if args.regs_cmd == "dump":
        for block in args.blocks or []:
            if not profile.has_unit(block):
                raise BadInput(f"regs dump: {profile.name} has no {block} unit "
                           f"(its units: {', '.join(sorted(profile.units))})")
    with open_target(target_spec(args, profile.name)) as target:
        drv = NvdlaDriver(target, profile)
        if args.regs_cmd == "read":
            for name in args.names:
                r = drv.register(name)
                v = drv.read(name)
                decoded = ", ".join(f"{k}={f.decode(fv) or hex(fv)}" for k, f in r.fields.items()
                                    for fv in [f.extract(v)])
                print(f"{r.full_name} = {v:#010x}  ({decoded})")
        elif args.regs_cmd == "write":
            if isinstance(values, dict):
                value = drv.set_fields(args.name, values)
            else:
                assert values is not None
                value = values
                drv.write(args.name, value)
            print(f"{drv.register(args.name).full_name} <= {value:#010x}")
        elif args.regs_cmd == "dump":
            dumped = drv.dump(args.blocks or None)
            if not dumped:
                raise BadInput(f"regs dump {' '.join(args.blocks or [])}: no readable register to dump")
            for name, v in dumped.items():
                print(f"{name:45s} {v:#010x}")
    return 0


# ---- the subcommand ------------------------------------------------------------------------


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("regs", help="read, write, dump, list or check registers by name")
    rs = p.add_subparsers(dest="regs_cmd", metavar="ACTION", required=True)
    for name, hlp in (("read", "read registers (decoded fields)"), ("write", "write a register or fields"),
                      ("dump", "read every register of some blocks"), ("list", "list the register map"),
                      ("info", "show one register's fields"), ("check", "compare the map with an nvdla/hw checkout")):
        q = rs.add_parser(name, help=hlp)
        add_target_options(q)
        if name == "read":
            q.add_argument("names", nargs="+", help="register names, e.g. SDP.D_CVT_SCALE")
        elif name == "write":
            q.add_argument("name", help="register name")
            q.add_argument("values", nargs="+", help="VALUE, or FIELD=VALUE ... (enum names allowed)")
        elif name in ("dump", "list"):
            q.add_argument("blocks", nargs="*", help="blocks (default: all)")
        elif name == "info":
            q.add_argument("name", help="register name")
    p.set_defaults(func=_cmd_regs)
