"""nvdla-hil: hardware-in-the-loop harness and register driver for NVDLA.

The code lives in four top-level folders installed as subpackages:
``nvdla_hil.drivers`` (register map, driver, transports), ``nvdla_hil.harness``
(targets, reference model, trace player, pytest plugin, CLI), ``nvdla_hil.sims``
(cocotb/Verilator testbench) and ``nvdla_hil.testvectors`` (packed vectors). This folder holds
the package root and the leaves every layer shares (:mod:`nvdla_hil.errors`, ...).

In the wheel the four folders sit inside ``nvdla_hil/``. In a checkout they sit beside it, and
the package's search path (``__path__``, the mechanism :func:`pkgutil.extend_path` uses) is
extended with the checkout's root, so ``PYTHONPATH=<checkout> python -c "import
nvdla_hil.harness.cli"`` works without an install; nothing changes for an installed wheel.
"""

import os

__version__ = "0.1.0"

#: the folders that are subpackages of ``nvdla_hil``
SUBPACKAGES = ("drivers", "harness", "sims", "testvectors")


def _checkout_root(here: str) -> list[str]:
    """``[root]`` when ``here`` (this folder) is the ``nvdla_hil/`` of a checkout: the
    subpackages are not inside it but beside it, each a package. ``[]`` when installed."""
    if any(os.path.isdir(os.path.join(here, s)) for s in SUBPACKAGES):
        return []
    root = os.path.dirname(here)
    ok = all(os.path.isfile(os.path.join(root, s, "__init__.py")) for s in SUBPACKAGES)
    return [root] if ok else []


__path__.extend(p for p in _checkout_root(os.path.dirname(os.path.abspath(__file__))) if p not in __path__)
