"""Constrained-random differential testing: random layers within the hardware's legal space,
run on a target and on the reference model, every output element compared.

* **Reproducible.** Case ``i`` of seed ``S`` is drawn from its own stream
  ``PCG64(S).jumped(i)`` (the vectors generator's) and the constraints, nothing else; the
  reference-model runs used to aim tables and convertors are deterministic too, so
  ``--seed S --first i --count 1`` replays one case.
* **Constraints are data** (``harness/fuzz/constraints/<unit>.yaml``, format in its README): ranges,
  weights and dependencies per field. What is *legal* lives here, in :data:`SCHEMAS`
  (register field widths, the profile's features; the model target refuses any precision
  combination outside ``harness/refmodel/validity.py``'s tables), so a constraint file or ``--set`` can
  only narrow or reweight the legal space; anything else is an error naming the key.
* **Differential.** The golden of a case is what the reference model (the model target)
  computes; the case then runs on the device under test (any target) through
  :func:`~nvdla_hil.harness.vectors.run_case`, which compares every output element with
  :mod:`~nvdla_hil.harness.analysis.compare` (bit-exact) and the statistics counters.
* **Coverage.** The reference runs feed a :class:`~nvdla_hil.harness.analysis.coverage.Coverage`
  collector; ``until_covered`` keeps drawing cases until every bin the unit aims at that the
  profile can reach is hit, or the budget is spent.

Units (:data:`UNITS`): ``sdp-lut``, ``sdp-bsbn``, ``sdp-ew``, ``sdp-cvt``, ``cdp-lrn``, ``conv``,
``conv-winograd``, ``conv-image``, ``conv-compressed``, ``sdp-fp16``, ``pdp``, ``cdp-fp16``, ``sdp-pdp``,
``cdp-int16``.

Modules: :mod:`.legal` (field kinds, features, :class:`UnitSpec`), :mod:`.draw` (constraints
and :class:`Sampler`), :mod:`.blocks` (building blocks drawn from the sampler; the register
writers are :mod:`nvdla_hil.harness.vectors.layer`'s), ``units/`` (one module per unit family),
:mod:`.registry` (the explicit list of units), :mod:`.case` (one case and its golden) and
:mod:`.runner` (campaigns, :class:`FuzzReport`). The names below are re-exported for code
outside the package.
"""

from __future__ import annotations

from ..vectors.layer import MEM_PORT as PORTS
from ..vectors.layer import PRI_BASE as BASE
from ..vectors.layer import RAM_TYPE
from .blocks import Capture
from .case import case_name, generate
from .draw import (
           CONSTRAINTS_DIR,
           Constraints,
           FieldSpec,
           Sampler,
           constraints_for,
           parse_set,
)
from .legal import (
           ConstraintError,
           EnumF,
           IntF,
           UnitSpec,
           UnitUnavailable,
           allowed,
           lacks,
)
from .registry import (
           GENERATORS,
           SCHEMAS,
           SPECS,
           UNIT_GROUPS,
           UNIT_NEEDS,
           UNITS,
           load_constraints,
           unit_refusal,
           unit_spec,
)
from .runner import FuzzCase, FuzzReport, open_dut, run_fuzz, run_one

__all__ = ["BASE", "CONSTRAINTS_DIR", "GENERATORS", "PORTS", "RAM_TYPE", "SCHEMAS", "SPECS", "UNITS", "UNIT_GROUPS",
           "UNIT_NEEDS", "Capture", "ConstraintError", "Constraints", "EnumF", "FieldSpec", "FuzzCase", "FuzzReport",
           "IntF", "Sampler", "UnitSpec", "UnitUnavailable", "allowed", "case_name", "constraints_for", "generate", "lacks",
           "load_constraints", "open_dut", "parse_set", "run_fuzz", "run_one", "unit_refusal", "unit_spec"]
