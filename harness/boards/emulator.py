"""A software FPGA board: LiteX's UARTBone bridge in front of any :class:`Transport`.

``nvdla-hil board-emu`` serves a target (the in-process model by default) over a
pseudo-terminal or a TCP socket on 127.0.0.1, speaking the byte protocol that
:mod:`nvdla_hil.drivers.uartbone` documents. It models what matters for a host driver:

* the command FSM of ``Stream2Wishbone`` (LiteX ``litex/soc/cores/uart.py``): unknown
  commands consume ``len`` + address and do nothing; each write word reaches the bus as
  soon as its 4 bytes are in (a burst cut short has already written its first words);
* the 100 ms FSM timer: a command not complete 100 ms after its command byte is dropped,
  and a read reply still being sent when it fires is cut; a zero ``len`` never ends a
  command (read: words stream until the timer; write: words are taken until then);
* the PHY's missing receive FIFO: input that arrives while a read response is being sent, or
  while the bus waits, is lost (bytes already queued behind a read command are discarded);
* unmapped bus addresses follow the SoC's bus timeout (``bus_timeout``, 10 ms a word by
  default): writes are dropped, reads answer 0xFFFFFFFF;
* NVDLA computes a layer while the bridge keeps serving: the bus write that launches it
  returns at once, the done bits of GLB S_INTR_STATUS rise when it is finished, and register
  reads meanwhile see the unit busy (:class:`_Nvdla`).

The default board map holds NVDLA 0x80000000..0xbfffffff (where NVDLA's traces put their
surfaces: 0x80000000, 0x90000000, 0xa0000000).

Fault injection (``FaultConfig``), seeded and applied to every byte in both directions:
dropped bytes, corrupted bytes (XOR with a random non-zero value), a random delay before
each response (``--delay``: a slow board), a link that goes silent after a given number of
received bytes (``--silent-after``: a dead board that still takes bytes) and one that stops
reading altogether (``--wedge-after``: a hung bridge, so the host's writes block).

Where it lives: :mod:`.bridge` (the bridge FSM and NVDLA behind it), :mod:`.faults` (the fault
model), :mod:`.server` (pty/TCP endpoints, ``serve_in_thread``), :mod:`.campaign` (the fault
campaign), :mod:`.regfile` (a plain register-file target); this module is the command line and
re-exports those names for ``from nvdla_hil.harness.boards.emulator import ...``.
"""

from __future__ import annotations

import argparse
import sys

from ...drivers.transport import Transport
from ...drivers.uartbone import BoardMap
from .bridge import DEFAULT_BAUD, DEFAULT_BUS_TIMEOUT, DEFAULT_RESET_ADDRESS, BridgeCore, EmuStats
from .campaign import fault_campaign
from .faults import FaultConfig
from .regfile import RegisterFileTarget
from .server import BoardEmulator, serve_in_thread

_DEFAULT_MAP = BoardMap()
__all__ = [
    "BoardEmulator",
    "BridgeCore",
    "EmuStats",
    "FaultConfig",
    "RegisterFileTarget",
    "add_subcommands",
    "fault_campaign",
    "serve_in_thread",
]


# ---- CLI --------------------------------------------------------------------------------------------
def _make_target(backend: str, profile: str, bugs: list[str] | None = None, bug_after: int | None = None) -> Transport:
    if backend == "regfile":
        return RegisterFileTarget(profile)
    try:
        from ..targets.model import ModelTarget
    except ImportError as e:
        raise SystemExit(f"board-emu: the model target is not available ({e}); use --backend regfile") from None
    if not bugs:
        return ModelTarget(profile=profile)
    if bug_after is None:
        return ModelTarget(profile=profile, bugs=bugs)
    return _degrading_model(ModelTarget, profile, bugs, bug_after)


def _degrading_model(model_cls: type, profile: str, bugs: list[str], after: int) -> Transport:
    """A board that goes bad in service: its datapath bugs (``--model-bug``, the model target's
    fault specs) switch on at its ``after + 1``-th reset, so it passes a health check at session
    start and computes wrong some tests later, as a board with a failing memory or a drifting
    clock does. Each test resets the board (its lab file's ``reset_address``)."""

    class DegradingModel(model_cls):
        def __init__(self) -> None:
            super().__init__(profile=profile)
            from ..targets.faults import parse_bug

            self._pending = [parse_bug(b, self.regmap) for b in bugs]
            self._resets = 0

        def _reset(self) -> None:
            super()._reset()
            self._resets += 1
            if self._resets > after:
                self.bugs = list(self._pending)

    return DegradingModel()


def _int(s: str) -> int:
    return int(s, 0)


def _port(s: str) -> int:
    """A TCP port for ``--tcp``: 0 (any free port) to 65535."""
    try:
        v = int(s, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a port number (0..65535)") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"port {v} is out of range 0..65535 (0 = any free port)")
    return v


def _prob(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{v!r} is not a probability in 0..1")
    return v


def _seconds(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a number of seconds") from None
    if not (0.0 <= v <= 3600.0):
        raise argparse.ArgumentTypeError(f"{v!r} is not a number of seconds in 0..3600")
    return v


def _count(s: str) -> int:
    try:
        v = int(s, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "board-emu",
        help="serve a software NVDLA board over LiteX UARTBone (pty or TCP)",
        description=__doc__.split("\n\n")[0],
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--pty", action="store_true", help="serve on a pseudo-terminal (default)")
    where.add_argument("--tcp", type=_port, metavar="PORT", help="serve on 127.0.0.1:PORT (0 = any free port)")
    p.add_argument("--profile", default="nv_small", help="hardware profile of the model (default nv_small)")
    p.add_argument("--backend", choices=("model", "regfile"), default="model",
                   help="model = the NVDLA model target; regfile = plain RW registers (link tests)")
    p.add_argument("--csr-base", type=_int, default=_DEFAULT_MAP.csr_base, help="board address of the CSB window")
    p.add_argument("--dram-base", type=_int, default=_DEFAULT_MAP.dram_base, help="board address of the DRAM window")
    p.add_argument("--dram-nvdla-base", type=_int, default=_DEFAULT_MAP.dram_nvdla_base,
                   help="NVDLA address the DRAM window starts at")
    p.add_argument("--dram-size", type=_int, default=_DEFAULT_MAP.dram_size,
                   help=f"bytes of the DRAM window (default {_DEFAULT_MAP.dram_size:#x}: NVDLA "
                        f"{_DEFAULT_MAP.dram_nvdla_base:#x}..{_DEFAULT_MAP.dram_nvdla_base + _DEFAULT_MAP.dram_size - 1:#x}, "
                        f"where NVDLA's traces put their surfaces)")
    p.add_argument("--bus-timeout", type=_seconds, default=DEFAULT_BUS_TIMEOUT,
                   help="seconds an access to an unmapped bus address takes before it answers 0xFFFFFFFF "
                        "(LiteX's bus timeout, 1e6 cycles; default 0.01)")
    p.add_argument("--baud", type=_count, default=DEFAULT_BAUD,
                   help="nominal line rate for the 100 ms FSM timer's arithmetic (default 3000000)")
    p.add_argument("--inline-layers", action="store_true",
                   help="compute each layer inside the bus write that launches it (the link stalls meanwhile)")
    p.add_argument("--drop", type=_prob, default=0.0, help="probability a byte is dropped (each direction)")
    p.add_argument("--corrupt", type=_prob, default=0.0, help="probability a byte is corrupted")
    p.add_argument("--delay", type=_seconds, default=0.0, help="max random delay before each response (s)")
    p.add_argument("--silent-after", type=_count, default=None, help="stop answering after N received bytes")
    p.add_argument("--wedge-after", type=_count, default=None,
                   help="stop reading the link at all after N received bytes (a hung bridge: host writes block)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-bug", action="append", default=None, metavar="SPEC",
                   help="model backend: a datapath bug of the board's NVDLA (the model target's fault specs, e.g. "
                        "stuck:SDP:0:0 or SDP.D_CVT_OFFSET.CVT_OFFSET+1); repeatable")
    p.add_argument("--bug-after-resets", type=_count, default=None, metavar="N",
                   help="the --model-bug faults switch on at the board's N+1-th reset (a board that goes bad in "
                        "service: it passes N tests, then computes wrong)")
    p.add_argument("--reset-address", type=_int, default=DEFAULT_RESET_ADDRESS,
                   help="board address whose write resets NVDLA (LiteX ctrl_reset CSR; default 0xf0000000)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        bmap = BoardMap(csr_base=args.csr_base, dram_base=args.dram_base,
                        dram_nvdla_base=args.dram_nvdla_base, dram_size=args.dram_size)
        faults = FaultConfig(drop=args.drop, corrupt=args.corrupt, delay=args.delay,
                             silent_after=args.silent_after, wedge_after=args.wedge_after, seed=args.seed)
    except ValueError as e:
        print(f"board-emu: {e}", file=sys.stderr)
        return 2
    if args.bug_after_resets is not None and not args.model_bug:
        print("board-emu: --bug-after-resets needs --model-bug", file=sys.stderr)
        return 2
    try:
        target = _make_target(args.backend, args.profile, args.model_bug, args.bug_after_resets)
    except ValueError as e:  # a malformed --model-bug (ConfigError names the spec)
        print(f"board-emu: {e}", file=sys.stderr)
        return 2
    mode = "tcp" if args.tcp is not None else "pty"
    with target:
        emu = BoardEmulator(target, bmap, faults, mode=mode, tcp_port=args.tcp or 0, reset_address=args.reset_address,
                            bus_timeout=args.bus_timeout, baud=args.baud or DEFAULT_BAUD, threaded=not args.inline_layers)
        print(emu.url, flush=True)
        try:
            emu.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            emu.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="nvdla-hil")
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_subcommands(sub)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
