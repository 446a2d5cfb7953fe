"""Every subcommand family of ``nvdla-hil``, listed once, in the order of ``nvdla-hil --help``:
each is a module with ``add_subcommands(sub)`` (an argparse subparsers object).

The families of this package are imported as they are: one that fails to import is a broken
install, and says so (exit 3 with the traceback), never a subcommand that silently disappears.
A family that needs an optional extra (``pip install 'nvdla-hil[sim]'``) and cannot be imported
without it still shows in ``--help``; using it says which extra to install (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from .exits import EXIT_BAD_INPUT

__all__ = ["Extra", "add_subcommands", "add_optional"]


@dataclass(frozen=True)
class Extra:
    """An optional extra of the ``nvdla-hil`` distribution (pyproject.toml) and the subcommands of
    the family that needs it (named here: without the extra, its module cannot say them)."""

    name: str
    commands: tuple[str, ...]

    def message(self, command: str, missing: str) -> str:
        return (f"nvdla-hil {command} needs the [{self.name}] extra ({missing} is not installed): "
                f"pip install 'nvdla-hil[{self.name}]'")


def _sims() -> ModuleType:
    from ...sims import cli

    return cli


#: the ``sim`` family (harness-independent simulator builds: sims/cli.py) and its extra
SIM = Extra("sim", ("sim",))


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Add every subcommand of ``nvdla-hil`` to ``sub``."""
    from ..boards import emulator
    from ..layouts import cli as layouts_cli
    from ..results import cli as results_cli
    from . import fuzz, loadable, net, profile, registers, regress, trace, triage, vectors

    for family in (regress, registers, trace, profile, vectors, triage, fuzz, layouts_cli, loadable, net):
        family.add_subcommands(sub)
    add_optional(sub, _sims, SIM)
    for family in (emulator, results_cli):
        family.add_subcommands(sub)


def add_optional(sub: argparse._SubParsersAction, load: Callable[[], ModuleType], extra: Extra) -> None:
    """Add the family ``load`` imports; when it cannot be imported because a package outside
    nvdla-hil is missing (the extra is not installed), add its commands as stand-ins that accept
    any arguments and exit 2 naming the extra to install."""
    try:
        module = load()
    except ImportError as e:
        missing = (e.name or "").split(".")[0]
        if not missing or missing == "nvdla_hil":
            raise  # a module of nvdla-hil itself is missing: a broken install, not an extra
        for command in extra.commands:
            p = sub.add_parser(command, help=f"(needs the [{extra.name}] extra: pip install 'nvdla-hil[{extra.name}]')",
                               add_help=False)
            p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            p.set_defaults(func=_needs_extra(command, extra, missing))
        return
    module.add_subcommands(sub)


def _needs_extra(command: str, extra: Extra, missing: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        print(extra.message(command, missing), file=sys.stderr)
        return EXIT_BAD_INPUT

    return run
