"""Packed test vectors: format, loader and runner (format: ``testvectors/README.md``).

A *case* is a folder holding ``case.yaml`` (the manifest) and raw binary blobs. Two kinds:

* ``layer``: memory-to-memory layer of one unit (SDP, CDP, PDP, or CONV: a flying convolution
  CDMA -> CSC -> CMAC -> CACC -> SDP) on a target. The runner
  loads input surfaces into memory, programs registers (by name), the LUT and convertors
  (through the driver's precision API), launches, waits for the done interrupt, reads the
  output surfaces back, unpacks them and compares them with the golden using the case's
  rule (seed 001); expected statistics are compared with ``compare_statistics``.
* ``layout``: an array and its packed form for one memory layout; the "run" is a pack /
  unpack comparison (no target).

The loader trusts nothing: strict YAML (``drivers/yamlstrict``: safe tags, a duplicate key is an
error naming both lines), blobs are raw bytes (or ``.npy`` whose header is checked against the
file size and :data:`MAX_BLOB_BYTES` before anything is read, ``allow_pickle=False``) confined
to the case folder, every name is checked against the register map / layout registry, every
size against the declared shapes. A bad case raises :class:`VectorError` naming the file and
the field (or line); nothing is half-loaded. Output goldens are compared in full: the
channel-padding lanes of a packed golden are compared byte for byte too (NVDLA writes whole
atoms, and its own traces' CRCs cover those lanes).

Modules: :mod:`.format` (constants, :class:`VectorError`, the case model), :mod:`.surface`
(pack / unpack a surface), :mod:`.reader` (checked access to a manifest), :mod:`.load`
(:func:`load_case`, :func:`find_cases`), :mod:`.write` (:func:`write_case`, ``golden_source``),
:mod:`.run` (:func:`execute_case`, :func:`run_case`), :mod:`.layer` (the layer-building blocks
the generators share), :mod:`.generate` (the bundled suites) and :mod:`.regolden` (goldens from
an oracle). The names below are re-exported for code outside the package.
"""

from __future__ import annotations

from .format import (
                     DEFAULT_LAUNCH,
                     DONE_UNIT,
                     DTYPES,
                     FORMAT,
                     FORMAT_V1,
                     GOLDEN_KINDS,
                     LAYER_UNITS,
                     MANIFEST,
                     MAX_BLOB_BYTES,
                     MAX_MANIFEST_BYTES,
                     ORACLE_KINDS,
                     POISON_BYTE,
                     PORTS,
                     RAW_LAYOUT,
                     Case,
                     Hex,
                     LayoutPair,
                     LutSetting,
                     RegisterSetting,
                     Surface,
                     VectorError,
)
from .load import bundled_root, case_features, find_cases, load_case
from .run import (
                     CaseResult,
                     OutputCheck,
                     compare_surface,
                     execute_case,
                     padding_mask,
                     run_case,
                     run_layout_case,
)
from .surface import pack_surface, packed_size, unpack_surface
from .write import golden_source_of, model_golden_source, write_case

__all__ = [
                     "DEFAULT_LAUNCH",
                     "DONE_UNIT",
                     "DTYPES",
                     "FORMAT",
                     "FORMAT_V1",
                     "GOLDEN_KINDS",
                     "LAYER_UNITS",
                     "MANIFEST",
                     "MAX_BLOB_BYTES",
                     "MAX_MANIFEST_BYTES",
                     "ORACLE_KINDS",
                     "POISON_BYTE",
                     "PORTS",
                     "RAW_LAYOUT",
                     "Case",
                     "CaseResult",
                     "Hex",
                     "LayoutPair",
                     "LutSetting",
                     "OutputCheck",
                     "RegisterSetting",
                     "Surface",
                     "VectorError",
                     "bundled_root",
                     "case_features",
                     "compare_surface",
                     "execute_case",
                     "find_cases",
                     "golden_source_of",
                     "load_case",
                     "model_golden_source",
                     "pack_surface",
                     "packed_size",
                     "padding_mask",
                     "run_case",
                     "run_layout_case",
                     "unpack_surface",
                     "write_case",
]
