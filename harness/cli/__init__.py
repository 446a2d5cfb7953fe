"""``nvdla-hil`` command line: regression, registers, traces, vectors, layouts, sims, boards.

Every subcommand has ``--help``. One module per subcommand family: :mod:`.regress`,
:mod:`.registers` (``regs``), :mod:`.trace`, :mod:`.profile`, :mod:`.vectors`, :mod:`.triage`
(``report``, ``triage``, ``minimize``), :mod:`.fuzz` (``fuzz``, ``coverage``), :mod:`.loadable`,
and those of other folders (``layouts/cli.py``, ``sims/cli.py``, ``boards/emulator.py``,
``results/cli.py``), all listed in :mod:`.commands`; the target options they share and the
target they name: :mod:`.options`; the exit codes: :mod:`.exits`.

Exit codes (the contract; ``regress --help`` repeats it):

* **0** only when at least one test (or check) ran and none failed;
* **1** when a test or check failed (or had an error while running);
* **2** for bad input or configuration, with a message naming what is wrong: the file and
  line, the option, the register or the board (only the tool's own error types, and an
  ``OSError`` naming a path: :func:`exit_code_for`);
* **130** when Ctrl-C or SIGTERM stopped the command;
* **3** for an internal error (any other exception): its traceback, "please report".

Inside ``regress`` a malformed trace, vector or manifest found while the suite runs is the
outcome "bad input" (one line naming file and line, counted apart) and exits 2 if nothing failed. For ``regress`` that includes a missing or
  empty ``--traces``/``--vectors`` folder (or ``NVDLA_TRACES``), ``--target verilator`` without
  an nvdla/hw checkout, ``--target serial`` without a lab file and board, a board another
  regression holds, a lab file that does not load, an explicit ``--junit`` file that exists
  (without ``--force``), a collection error, and a run in which no test ran (every test
  skipped or deselected, or none collected) unless ``--allow-empty`` was given.

Results are never lost: each ``regress`` writes into its own run directory
``<results-dir>/<run-id>/`` (run-id: UTC timestamp, PID and a random suffix, created with
``os.mkdir`` so two runs never share one) holding ``junit.xml``, ``summary.txt`` (the printed
table), ``logs/`` (one register-access log per test, with the link record when the target
has one) and ``run.json`` (written as "running" at the start, "finished" or "interrupted" at the
end: :func:`run_state`), each written whole or not at all; ``<results-dir>/latest`` is then
pointed at it atomically (a temporary symlink moved over it with ``os.replace``). Commands
that write files (``trace --log``, ``pack``, ``unpack``, ``vectors gen``, ``profile derive
--out``, ``regress --junit``) refuse to overwrite an existing file unless ``--force``, and
never overwrite their own input.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from ..results.rundir import new_run_dir, point_latest, run_state
from .commands import add_subcommands
from .exits import EXIT_INFRASTRUCTURE, EXIT_INTERNAL, EXIT_INTERRUPTED, describe, exit_code_for
from .options import labgrid_lab

__all__ = ["main", "build_parser", "run_state", "new_run_dir", "point_latest", "exit_code_for", "EXIT_INTERRUPTED",
           "EXIT_INTERNAL", "EXIT_INFRASTRUCTURE"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nvdla-hil",
        description="Hardware-in-the-loop test harness and register driver for NVDLA accelerators.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_subcommands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args._argv = list(sys.argv[1:] if argv is None else argv)
    try:
        labgrid_lab(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"nvdla-hil {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `nvdla-hil regs dump | head`: the reader left; not an error of ours
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the interpreter's final flush is quiet
        return 0
    except Exception as e:  # noqa: BLE001 - the exit-code contract decides below
        code = exit_code_for(e)
        if code == EXIT_INTERNAL:
            import traceback

            traceback.print_exc()
            print(f"nvdla-hil {args.command}: internal error, please report (the traceback above; "
                  f"{type(e).__name__}: {e})", file=sys.stderr)
        else:
            print(f"nvdla-hil {args.command}: {describe(e)}", file=sys.stderr)
        return code
