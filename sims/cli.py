"""``nvdla-hil sim ...`` subcommands (registered by ``nvdla_hil.harness.cli``).

``sim setup`` (prerequisites, tree.make, NVDLA's tmake, known RTL fixes), ``sim build`` (the
cached Verilator + cocotb simulator) and ``sim native`` (NVDLA's own C++ trace player, built
from the same sources and flags, for ``bench/bench_sim.py --native``).
"""

from __future__ import annotations

import argparse

from . import build as _build
from .native import add_native_subcommand
from .setup import add_setup_subcommand

__all__ = ["add_subcommands"]


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    sim = _build.add_subcommands(subparsers)
    add_setup_subcommand(sim)
    add_native_subcommand(sim)
