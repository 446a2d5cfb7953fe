"""``nvdla-hil sim ...`` subcommands (registered by ``nvdla_hil.harness.cli``)."""

from __future__ import annotations

from .build import add_subcommands

__all__ = ["add_subcommands"]
