"""The target options every subcommand that runs something shares, defined once: ``--target``,
``--profile``/``--nvdla-config``, ``--model-semantics``, ``--nvdla-hw``, ``--waves``, ``--rtl-clock-gating``, ``--rtl-build``,
``--lab``/``--board`` and the labgrid place options (``--lg-place``, ``--lg-env``,
``--lg-coordinator``); and the :class:`~nvdla_hil.harness.targets.TargetSpec` built from them.

A subcommand takes the whole set (``regress``, ``regs``, ``trace``, ``loadable run``) or the part
that means something for it (``fuzz``, ``vectors``, ``minimize``, ``triage``: ``include``), and
may say what ``--target`` or ``--profile`` means for it (``fuzz --target`` is the device under
test, ``vectors gen --target`` the oracle of the goldens).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection, Sequence

from ..targets import TARGETS, TargetSpec, clock_gating_spec
from ..targets.rtl_build import RTL_BUILDS
from .exits import BadInput
from ...semantics import SEMANTICS

__all__ = ["ALL_TARGET_OPTIONS", "add_target_options", "target_spec", "labgrid_lab"]

#: the optional members of the set (``--target`` and ``--profile`` are always there)
ALL_TARGET_OPTIONS = ("semantics", "hw", "waves", "lab", "labgrid")
_FROM_ENV = object()  # the default of --target: NVDLA_HIL_TARGET, else model; of --profile: NVDLA_HIL_CONFIG


def add_target_options(p: argparse.ArgumentParser, *, kinds: Sequence[str] = TARGETS, default: object = _FROM_ENV,
                       required: bool = False, profile_default: object = _FROM_ENV,
                       include: Collection[str] = ALL_TARGET_OPTIONS,
                       target_help: str | None = None, profile_help: str | None = None,
                       hw_help: str | None = None, group: bool = True) -> None:
    """Add the shared target options to ``p`` (in an argument group "target" unless ``group`` is
    false): ``--target`` (one of ``kinds``) and ``--profile`` always, the members of
    ``include`` (:data:`ALL_TARGET_OPTIONS`) besides; ``*_help`` says what an option means for
    this subcommand when that differs from the shared text; ``default``/``profile_default``
    replace the environment's default (NVDLA_HIL_TARGET, NVDLA_HIL_CONFIG) where the
    subcommand's own default is another (the case's profile, the run's target)."""
    unknown = set(include) - set(ALL_TARGET_OPTIONS)
    if unknown:
        raise ValueError(f"add_target_options: no such target option {sorted(unknown)}")
    g = p.add_argument_group("target") if group else p
    g.add_argument("--target", choices=tuple(kinds), required=required,
                   default=(os.environ.get("NVDLA_HIL_TARGET", "model") if default is _FROM_ENV else default),
                   help=target_help or "where to run (default: model, the in-process virtual NVDLA)")
    g.add_argument("--profile", "--nvdla-config", dest="profile",
                   default=os.environ.get("NVDLA_HIL_CONFIG") if profile_default is _FROM_ENV else profile_default,
                   help=profile_help or "hardware profile (nv_small, nv_small_256_full, nv_full, ...)")
    if "semantics" in include:
        g.add_argument("--model-semantics", choices=SEMANTICS, default="rtl",
                       help="model target: follow the RTL (default) or NVDLA's C model where they differ")
    if "hw" in include:
        g.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW"),
                       help=hw_help or "nvdla/hw checkout (verilator and cmod targets)")
        g.add_argument("--layer-timeout", type=float, default=None, metavar="SECONDS",
                       help="verilator and cmod targets: wall-clock seconds one layer may take (default 600 on "
                            "the RTL, 900 on the C model; ResNet-18 at 224x224 needs hours on the C model)")
    if "waves" in include:
        g.add_argument("--waves", action="store_true", help="verilator target: dump FST waves")
        g.add_argument("--rtl-clock-gating", choices=("auto", "on", "off"),
                       default=os.environ.get("NVDLA_HIL_RTL_CLOCK_GATING", "auto"),
                       help="verilator target: NVDLA's second-level clock gating, on as the RTL ships, or off, which "
                            "works round nvdla/hw#183 (back-to-back convolutions of compiled networks hang with it "
                            "on); auto (default; NVDLA_HIL_RTL_CLOCK_GATING): off for loadables and networks, on "
                            "for everything else")
        g.add_argument("--rtl-build", choices=RTL_BUILDS, default=os.environ.get("NVDLA_HIL_RTL_BUILD", "plain"),
                       help="verilator target: the plain simulator build (default; NVDLA_HIL_RTL_BUILD), or pgo: "
                            "compiled with the profile of NVDLA's trace tests run on an instrumented build (trained "
                            "once per checkout: same cycles, about 1.3x fewer CPU-seconds each)")
    if "lab" in include:
        g.add_argument("--lab", default=os.environ.get("NVDLA_HIL_LAB"), help="lab file (serial target)")
        g.add_argument("--board", default=os.environ.get("NVDLA_HIL_BOARD"), help="board name (serial target)")
    if "labgrid" in include:
        g.add_argument("--lg-place", default=None, metavar="NAME",
                       help="serial target without --lab: the board is this labgrid place (or LG_PLACE)")
        g.add_argument("--lg-env", default=None, metavar="FILE",
                       help="serial target without --lab: the labgrid place of this labgrid environment (or LG_ENV)")
        g.add_argument("--lg-coordinator", default=None, metavar="HOST:PORT",
                       help="labgrid coordinator of --lg-place (or LG_COORDINATOR)")


def target_spec(args: argparse.Namespace, profile: str | None = None, *, board_memory: bool = True) -> TargetSpec:
    """The target the shared options name, on ``profile`` (default: the first of ``--profile``,
    else nv_small). ``board_memory``: several tests in one command share a record of what the
    serial target's board holds, so a slow link does not resend it."""
    prof = profile or (args.profile.split(",")[0] if args.profile else "nv_small")
    book = None
    if args.target == "serial" and board_memory:  # several traces in one command: what the board holds is not resent
        from ..targets.serial import BoardMemoryBook

        book = BoardMemoryBook()
    layer = getattr(args, "layer_timeout", None)
    if layer is not None and not 0 < layer < 1e7:
        raise BadInput(f"--layer-timeout {layer:g}: expected seconds above 0")
    extra = {"layer_timeout": layer} if layer is not None and args.target in ("verilator", "cmod") else {}
    spec = TargetSpec(kind=args.target, profile=prof, semantics=getattr(args, "model_semantics", "rtl"),
                      nvdla_hw=getattr(args, "nvdla_hw", None), waves=getattr(args, "waves", False),
                      lab=getattr(args, "lab", None), board=getattr(args, "board", None), memory_book=book, extra=extra)
    from ..traces.pgo import rtl_build_spec

    try:  # NVDLA_HIL_RTL_BUILD is the option's default, which argparse does not check
        spec = rtl_build_spec(spec, getattr(args, "rtl_build", None) or os.environ.get("NVDLA_HIL_RTL_BUILD", "plain"))
    except ValueError as e:
        raise BadInput(f"--rtl-build / NVDLA_HIL_RTL_BUILD {e}") from None
    try:  # NVDLA_HIL_RTL_CLOCK_GATING is the option's default, which argparse does not check
        return clock_gating_spec(spec, getattr(args, "rtl_clock_gating", None)
                                 or os.environ.get("NVDLA_HIL_RTL_CLOCK_GATING", "auto"))  # a command without the option
    except ValueError as e:
        raise BadInput(f"--rtl-clock-gating / NVDLA_HIL_RTL_CLOCK_GATING: {e}") from None


def labgrid_lab(args: argparse.Namespace) -> None:
    """``--target serial`` with a labgrid place (``--lg-place``/``--lg-env``, or LG_PLACE/LG_ENV)
    instead of ``--lab``: a one-board lab file for the place (shared per user, see
    :func:`~nvdla_hil.harness.boards.labgrid_place.place_lab_file`) becomes ``--lab``/``--board``."""
    if getattr(args, "target", None) != "serial" or getattr(args, "lab", None) or not hasattr(args, "lg_place"):
        return
    from ..boards.lab import LabError
    from ..boards.labgrid_place import PlaceBoardMismatch, place_lab_file

    place = args.lg_place or os.environ.get("LG_PLACE")
    prof = args.profile.split(",")[0] if args.profile else "nv_small"
    try:
        found = place_lab_file(place, args.lg_env, args.lg_coordinator, profile=prof, board=args.board)
    except PlaceBoardMismatch as e:
        raise BadInput(f"--board {e.board} and the labgrid place {e.place} name two boards: give one") from None
    except LabError as e:
        raise BadInput(f"{'--lg-place' if place else '--lg-env'}: {e}") from None
    if found is not None:
        args.lab, args.board = found
