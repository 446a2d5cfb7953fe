"""Fuzz units beyond the first five of :mod:`nvdla_hil.harness.fuzz`: one module per unit
family (``pdp.py``, ``conv.py``, ``sdp_fp16.py``, ...), each calling
:func:`~nvdla_hil.harness.fuzz.register_unit` at import. Every module here is imported, in
name order, when :mod:`~nvdla_hil.harness.fuzz` is."""

from __future__ import annotations

import importlib
import pkgutil

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_m}")
