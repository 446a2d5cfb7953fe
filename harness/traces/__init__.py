"""NVDLA trace tests: parser and player.

A trace (``<name>/<name>.cfg`` plus ``*.dat`` memory images) is NVDLA's own sanity test format
(nvdla/hw ``verif/tests/trace_tests``); nv_full's traceplayer tests (``input.txn``) have their
own format. The package follows a trace's dataflow, one module per step:

=====================  ===========================================================================
:mod:`.limits`         bounds on untrusted numbers and files; :class:`TraceError` (file:line)
:mod:`.parse`          the ``.cfg`` grammar into :class:`Trace` commands, what a trace must check
:mod:`.dat`            ``.dat`` memory images
:mod:`.sets`           where the traces are, and their configurations
:mod:`.needs`          what a trace needs of the hardware, checked against a profile
:mod:`.memory_setup`   the memory set-up, merged so that every byte crosses the link once
:mod:`.lean`           the lean set-up of a slow link: only the bytes the layers touch
:mod:`.checks`         check and trace results, the CRC of a checked region
:mod:`.player`         :func:`run_trace`: set up, program, wait for each sync point, check
:mod:`.txn`            nv_full's ``input.txn`` format and its player
=====================  ===========================================================================

The names below are re-exported for callers of ``nvdla_hil.harness.traces``; code inside the
project imports each from the module that defines it.
"""

from __future__ import annotations

from .checks import CheckResult, TraceResult
from .dat import load_dat
from .limits import MAX_REGION_BYTES, MAX_TRACE_BYTES, TraceError
from .needs import check_against_profile, trace_features
from .parse import Trace, TraceCommand, parse_trace
from .player import POISON_BYTE, run_trace, run_traces
from .sets import find_trace_sets, find_traces

__all__ = [
    "TraceError",
    "TraceCommand",
    "Trace",
    "CheckResult",
    "TraceResult",
    "parse_trace",
    "load_dat",
    "find_traces",
    "find_trace_sets",
    "run_trace",
    "run_traces",
    "trace_features",
    "POISON_BYTE",
    "MAX_REGION_BYTES",
    "check_against_profile",
    "MAX_TRACE_BYTES",
]
