"""Targets: where a test runs. Each is a :class:`~nvdla_hil.drivers.transport.Transport`
and a context manager that always releases its board, process or files.

==============  ==========================================================================
``model``       in-process virtual NVDLA on the bit-exact reference model (default)
``verilator``   the public NVDLA RTL under Verilator, driven by cocotb (``sims/``)
``serial``      an FPGA board over a UART bridge (LiteX UARTBone), from a lab file
``cmod``        NVDLA's SystemC C model of the user's checkout, driven by our host (sims/cmod/)
==============  ==========================================================================
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...drivers.errors import ConfigError
from ...drivers.transport import Transport
from .builds import BuildCache
from .workload import layer_timeout
from ...semantics import Semantics

if TYPE_CHECKING:
    from .verilator import WarmSimulators

__all__ = ["TargetSpec", "TARGETS", "NEEDS_CHECKOUT", "checkout_problem", "clock_gating_spec", "firmware_spec",
           "check_extra", "open_target", "layer_timeout"]

TARGETS = ("model", "verilator", "serial", "cmod")
#: the targets built from the user's nvdla/hw checkout: the RTL (master) or the C model (nvdlav1)
NEEDS_CHECKOUT = ("verilator", "cmod")


def checkout_problem(kind: str, nvdla_hw: str | None, *, target_option: str = "--target") -> str | None:
    """Why a ``kind`` target cannot be opened with the checkout ``nvdla_hw`` (``--nvdla-hw`` or
    NVDLA_HW), or None when it can: the CLI and the pytest plugin (``target_option``
    ``--nvdla-target``) refuse a run with this message before anything starts."""
    if kind not in NEEDS_CHECKOUT:
        return None
    if not nvdla_hw:
        return f"{target_option} {kind} needs an nvdla/hw checkout: --nvdla-hw PATH (or NVDLA_HW)"
    if not Path(nvdla_hw).expanduser().is_dir():
        return f"--nvdla-hw {nvdla_hw}: no such folder (the nvdla/hw checkout for {target_option} {kind})"
    return None


@dataclass(frozen=True)
class TargetSpec:
    """How to open a target; built from pytest options, CLI flags or a lab file."""

    kind: str = "model"
    profile: str = "nv_small"
    semantics: Semantics = "rtl"  # model target: follow the RTL or the C model on every [DIFF]
    nvdla_hw: str | None = None  # verilator: path of the user's nvdla/hw checkout
    waves: bool = False  # verilator: dump FST waves
    #: verilator: NVDLA's second-level clock gating, "on" as the RTL ships, "off" (nvdla/hw#183), or
    #: "auto": on, except for firmware-driven runs (:func:`firmware_spec`); "off" is also in ``extra``
    rtl_clock_gating: str = "auto"
    lab: str | None = None  # serial: lab file
    board: str | None = None  # serial: board name in the lab file
    extra: dict[str, Any] = field(default_factory=dict)
    #: model: the :class:`~nvdla_hil.harness.analysis.coverage.Coverage` its layers feed (None: no coverage)
    coverage: Any = field(default=None, compare=False, repr=False)
    #: told of every target :func:`open_target` creates from this spec (the pytest plugin records
    #: what each test ran on: target, profile, board or RTL build)
    observer: Callable[[Transport, TargetSpec], None] | None = field(default=None, compare=False, repr=False)
    #: serial: the session's :class:`~.serial.BoardMemoryBook` (what its boards' memory holds from
    #: one test to the next, so a slow link does not resend it); None: every test starts unknowing
    memory_book: Any = field(default=None, compare=False, repr=False)
    #: verilator, cmod: the builds this spec's targets resolved (one content check of the checkout per
    #: configuration, shared by every copy of the spec: ``replace``/``with_profile`` keep it)
    build_cache: BuildCache = field(default_factory=BuildCache, compare=False, repr=False)
    #: verilator: where each target's RTL coverage goes (a :class:`~.verilator.RtlCoverageFolder`:
    #: an instrumented build is used and each test's counts are written when its target is
    #: released); None: the plain build, no RTL coverage
    rtl_coverage: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in TARGETS:
            raise ValueError(f"unknown target {self.kind!r}; targets: {', '.join(TARGETS)}")

    def with_profile(self, profile: str) -> TargetSpec:
        return replace(self, profile=profile)


def firmware_spec(spec: TargetSpec) -> TargetSpec:
    """The spec a firmware-driven run (a loadable, a compiled network: convolutions back to back)
    uses: on the verilator target with clock gating "auto", NVDLA's clock gating off, since with
    it on nvdla/hw#183 hangs the RTL after a convolution that fills its weight banks
    (:data:`~.verilator.SLCG_WEIGHT_LEAK`); single layers (traces, vectors, fuzz) keep it on."""
    if spec.kind != "verilator" or spec.rtl_clock_gating != "auto":
        return spec
    return replace(spec, extra={**spec.extra, "clock_gating": False})


def clock_gating_spec(spec: TargetSpec, choice: str) -> TargetSpec:
    """``spec`` with ``--rtl-clock-gating`` ``choice`` (on, off, auto; meaningful for verilator)."""
    if choice not in ("on", "off", "auto"):
        raise ValueError(f"RTL clock gating {choice!r}: expected on, off or auto")
    extra = {k: v for k, v in spec.extra.items() if k != "clock_gating"}
    if spec.kind == "verilator" and choice == "off":
        extra["clock_gating"] = False
    return replace(spec, rtl_clock_gating=choice, extra=extra)


def open_target(spec: TargetSpec, warm: WarmSimulators | None = None) -> Transport:
    """Create the target described by ``spec``: a :class:`Transport`, not yet opened; ``with``
    it (``__enter__`` opens it and returns the target itself) or ``open()``/``close()`` it. The
    same on every target: model, verilator and serial (:class:`~.serial.SerialTarget`, which
    takes its board on open and releases it on close).

    ``warm``: a :class:`~.verilator.WarmSimulators` pool; a verilator spec it accepts (no waves)
    then gives a lease of one of its simulators (:class:`~.verilator.WarmTarget`: opening it
    resets an idle simulator to the state of a fresh start, closing it hands the simulator
    back). Every other spec, or ``warm=None``, creates a fresh target as without it."""
    target = warm.lease(spec) if warm is not None and warm.accepts(spec) else _create(spec)
    if spec.observer is not None:
        spec.observer(target, spec)
    return target


def check_extra(spec: TargetSpec, options: Iterable[str]) -> None:
    """``spec.extra`` holds only ``options`` of its kind of target: a key meant for another (a
    verilator option on the model target) or misspelt is a ConfigError naming it, not silently
    ignored nor a TypeError from deep inside a constructor."""
    unknown = sorted(set(spec.extra) - set(options))
    if unknown:
        raise ConfigError(f"the {spec.kind} target has no option {', '.join(map(repr, unknown))} "
                          f"(its options: {', '.join(sorted(options)) or 'none'})")


def _options(cls: type, given: Iterable[str]) -> list[str]:
    """The keyword-only arguments of ``cls``'s constructor that ``_create`` does not pass itself."""
    taken = set(given)
    return [n for n, p in inspect.signature(cls).parameters.items() if p.kind is p.KEYWORD_ONLY and n not in taken]


def _create(spec: TargetSpec) -> Transport:
    if spec.kind == "model":
        from .model import ModelTarget

        check_extra(spec, ("model_bugs",))
        return ModelTarget(spec.profile, semantics=spec.semantics, bugs=spec.extra.get("model_bugs"), coverage=spec.coverage)
    if spec.kind == "cmod":
        from .cmod import CmodTarget

        check_extra(spec, _options(CmodTarget, ("nvdla_hw", "config", "build_cache")))
        return CmodTarget(nvdla_hw=spec.nvdla_hw, config=spec.profile, build_cache=spec.build_cache, **spec.extra)
    if spec.kind == "verilator":
        from .verilator import VerilatorTarget

        check_extra(spec, _options(VerilatorTarget, ("nvdla_hw", "config", "waves", "build_cache", "rtl_coverage")))
        return VerilatorTarget(nvdla_hw=spec.nvdla_hw, config=spec.profile, waves=spec.waves,
                               build_cache=spec.build_cache, rtl_coverage=spec.rtl_coverage, **spec.extra)
    from .serial import SerialTarget

    if not spec.lab or not spec.board:
        raise ValueError("the serial target needs a lab file and a board name (--nvdla-lab lab.yaml --nvdla-board NAME, "
                         "or NVDLA_HIL_LAB / NVDLA_HIL_BOARD)")
    check_extra(spec, _options(SerialTarget, ("memory_book",)))
    return SerialTarget(spec.lab, spec.board, memory_book=spec.memory_book, **spec.extra)
