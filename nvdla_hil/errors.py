"""The tool's error tree: one root and one base per layer, so a caller catches what it means.

A leaf module (it imports nothing) so every layer, the reference model included, can raise
these without importing the driver package::

    NvdlaHilError                       the root: an error the tool raises on purpose
    +-- TransportError (OSError)        the link or the board: an access could not be completed
    +-- RegisterMapError                the register map or the hardware profile: a name, field,
    |                                   value or unit the map / profile does not have
    +-- InputError (ValueError)         an untrusted input file (trace, vector, lab file, YAML)
    +-- ModelError                      the reference model cannot model this layer
    +-- ConfigError (ValueError)        an option or configuration that cannot work
    +-- ResultsError (OSError)          results cannot be written

Each layer's own errors subclass its base where they are defined (``drivers/transport.py``,
``drivers/regmap.py``, ``drivers/profiles.py``, ``drivers/yamlstrict.py``,
``harness/refmodel/base.py``, ...). The command line's exit code follows
(``harness/cli``, :func:`nvdla_hil.drivers.errors.is_own_error`): any of these is exit 2 with
its message; anything else is an internal error, exit 3.
"""

from __future__ import annotations

__all__ = ["NvdlaHilError", "TransportError", "RegisterMapError", "InputError", "ModelError", "ConfigError",
           "ResultsError"]


class NvdlaHilError(Exception):
    """Base of the errors the tool raises on purpose, with a message naming what is wrong."""


class TransportError(NvdlaHilError, OSError):
    """A register or memory access could not be completed (the link or the board)."""


class RegisterMapError(NvdlaHilError):
    """Base of register-map and hardware-profile errors (an unknown register, a field value that
    does not fit, a unit or feature the profile lacks, a malformed map or profile)."""


class InputError(NvdlaHilError, ValueError):
    """A malformed or out-of-bounds input file (trace, vector, lab file, YAML): names file and line."""


class ModelError(NvdlaHilError):
    """The reference model cannot model this layer (a unit or mode it does not cover)."""


class ConfigError(NvdlaHilError, ValueError):
    """An option or configuration that cannot work (a unit the profile lacks, a missing checkout)."""


class ResultsError(NvdlaHilError, OSError):
    """Results cannot be written (a full or read-only disk); the message names the path."""

    def __str__(self) -> str:
        if self.filename is not None and self.strerror:
            return f"{self.filename}: {self.strerror}"
        return str(self.strerror or super().__str__())
