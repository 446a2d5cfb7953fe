"""One small error tree (``nvdla_hil/errors.py``): a caller catches what it means. Each layer's
errors sit under that layer's base, so ``except TransportError`` catches a dead board and never a
malformed vector, ``except InputError`` every malformed file and no link fault."""

from __future__ import annotations

import pytest

from nvdla_hil.errors import ConfigError, InputError, ModelError, NvdlaHilError, RegisterMapError, TransportError
from nvdla_hil.harness.boards.lab import LabError
from nvdla_hil.harness.fuzz import ConstraintError
from nvdla_hil.harness.layouts import LayoutError
from nvdla_hil.harness.loadables.fbs import LoadableError
from nvdla_hil.harness.refmodel.base import InvalidLayer, UnitNotModelled
from nvdla_hil.harness.targets.cmod import CmodCrashed
from nvdla_hil.harness.targets.verilator import SimulatorCrashed
from nvdla_hil.harness.traces import TraceError
from nvdla_hil.harness.vectors import VectorError
from nvdla_hil.drivers.profiles import ProfileError
from nvdla_hil.drivers.regmap import UnknownRegisterError
from nvdla_hil.drivers.transport import LinkIntegrityError, TransportTimeoutError
from nvdla_hil.drivers.uartbone import BoardDeadError
from nvdla_hil.drivers.yamlstrict import YamlError

LAYERS = {
    TransportError: [TransportTimeoutError, LinkIntegrityError, BoardDeadError, SimulatorCrashed, CmodCrashed],
    RegisterMapError: [UnknownRegisterError, ProfileError],
    InputError: [VectorError, TraceError, LoadableError, LabError, YamlError, ConstraintError, LayoutError],
    ModelError: [UnitNotModelled, InvalidLayer],
}


@pytest.mark.parametrize("base", list(LAYERS), ids=lambda b: b.__name__)
def test_each_layer_catches_its_own_and_nothing_else(base):
    assert issubclass(base, NvdlaHilError)
    for cls in LAYERS[base]:
        assert issubclass(cls, base), f"{cls.__name__} is not a {base.__name__}"
    for other, classes in LAYERS.items():
        if other is not base:
            stray = [c.__name__ for c in classes if issubclass(c, base)]
            assert not stray, f"except {base.__name__} would also catch {stray}"


def test_callers_that_caught_the_builtin_still_do():
    """The tree was added under the classes callers already caught: a malformed file is still a
    ValueError, a link fault an OSError, an unknown register a KeyError."""
    assert issubclass(VectorError, ValueError) and issubclass(TraceError, ValueError)
    assert issubclass(TransportError, OSError) and issubclass(TransportTimeoutError, TimeoutError)
    assert issubclass(UnknownRegisterError, KeyError)
    assert issubclass(UnitNotModelled, NotImplementedError)
    assert issubclass(ConfigError, ValueError)
