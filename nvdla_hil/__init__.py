"""nvdla-hil: hardware-in-the-loop harness and register driver for NVDLA.

The code lives in four top-level folders installed as subpackages:
``nvdla_hil.drivers`` (register map, driver, transports), ``nvdla_hil.harness``
(targets, reference model, trace player, pytest plugin, CLI), ``nvdla_hil.sims``
(cocotb/Verilator testbench) and ``nvdla_hil.testvectors`` (packed vectors).
"""

__version__ = "0.1.0"
