"""``nvdla-hil history`` and ``nvdla-hil dashboard`` (registered in harness/cli/commands.py)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .textsafe import http_link, term_safe

if TYPE_CHECKING:
    from .db import ResultsDB

__all__ = ["add_subcommands", "default_db", "add_db_options"]


def default_db(results_dir: str | os.PathLike[str]) -> str:
    """The embedded default: ``<results-dir>/results.sqlite`` beside the run directories."""
    return str(Path(results_dir) / "results.sqlite")


def add_db_options(p: argparse.ArgumentParser, again: bool = False) -> None:
    """``--results-db`` and ``--results-dir``. ``again``: on a subcommand whose parent has them
    already, so they may come before or after the subcommand (``history import DIR --results-db X``):
    given here they win, not given they leave the parent's value alone."""
    db_default = argparse.SUPPRESS if again else os.environ.get("NVDLA_HIL_RESULTS_DB")
    dir_default = argparse.SUPPRESS if again else os.environ.get("NVDLA_HIL_RESULTS", "results")
    p.add_argument("--results-db", default=db_default, metavar="URL",
                   help="results database: an SQLite file or postgresql://user@host/db "
                        "(default: NVDLA_HIL_RESULTS_DB, else <results-dir>/results.sqlite)")
    p.add_argument("--results-dir", default=dir_default,
                   help="where the run directories are (default: results, or NVDLA_HIL_RESULTS)")


def _open(args: argparse.Namespace, create: bool = False):  # noqa: ANN202
    """The results database; FileNotFoundError when there is none, ResultsDBError (naming it and what
    is wrong: corrupt, an unknown schema version, read-only) when it cannot be used."""
    from .db import ResultsDB

    url = args.results_db or default_db(args.results_dir)
    if not create and "://" not in url and not Path(url).exists():
        raise FileNotFoundError(f"no results database at {url}: nvdla-hil regress records one there "
                                f"(or give --results-db / --results-dir; import old runs with nvdla-hil history import DIR)")
    return ResultsDB(url)


def _fail(cmd: str, e: object) -> int:
    print(f"nvdla-hil {cmd}: {term_safe(e)}", file=sys.stderr)
    return 2


def _cmd_history(args: argparse.Namespace) -> int:
    from .db import ResultsDBError

    action = getattr(args, "history_cmd", None) or "show"
    if action == "label" and args.bug and http_link(args.bug) is None:
        return _fail("history label", f"--bug {args.bug!r}: not an http:// or https:// link "
                                      f"(a bug link is drawn as a link in the report and the dashboard)")
    try:
        with _open(args, create=action == "import") as db:
            return _history_action(db, args, action)
    except (FileNotFoundError, ResultsDBError) as e:
        return _fail("history" if action == "show" else f"history {action}", e)


def _history_action(db: ResultsDB, args: argparse.Namespace, action: str) -> int:
    from .analysis import load_history
    from .history import render_history

    if action == "import":
        from .importer import import_dirs

        try:
            done = import_dirs(db, args.dirs)
        except ValueError as e:  # a malformed run folder (InputError names the file)
            return _fail("history import", e)
        for rid, n, status in done:
            print(term_safe(f"imported {rid}: {n} tests, {status}"))
        print(term_safe(f"{len(done)} run(s) imported into {db.where}"))
        return 0
    if action == "label":
        try:
            sig = db.resolve_signature(args.signature)
        except ValueError as e:
            return _fail("history label", e)
        if args.remove:
            print(term_safe(f"label of {sig} {'removed' if db.remove_label(sig) else 'was not set'}"))
            return 0
        if not args.text:
            return _fail("history label", "give --text TEXT (and --bug URL), or --remove")
        db.set_label(sig, args.text, args.bug or "", args.author or getpass.getuser())
        key = (db.signatures([sig]).get(sig) or {}).get("key", "")
        print(term_safe(f"labelled {sig} ({key}): {args.text}" + (f" ({args.bug})" if args.bug else "")))
        return 0
    h = load_history(db, limit=args.limit, target=args.target, profile=args.profile)
    for note in h.notes:
        print(f"nvdla-hil history: {term_safe(note)}", file=sys.stderr)
    try:
        render_history(h, run_id=args.run, runs_shown=args.show, window=args.window)
    except ValueError as e:
        return _fail("history", e)
    return 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from .analysis import load_history
    from .dashboard import write_dashboard
    from .db import ResultsDBError

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return _fail("dashboard", f"--out {out}: not a folder")
    try:
        with _open(args) as db:
            h = load_history(db, limit=args.limit, target=args.target, profile=args.profile)
            cov = db.rtl_coverage([r["id"] for r in h.runs])
    except (FileNotFoundError, ResultsDBError) as e:
        return _fail("dashboard", e)
    for note in h.notes:
        print(f"nvdla-hil dashboard: {term_safe(note)}", file=sys.stderr)
    if cov.trend:  # the union over nights, from the per-test files the run folders still hold
        from ..analysis.rtl_coverage import union_over_runs

        measured = {e["run_id"]: e.get("run_dir") for trend in cov.trend.values() for e in trend}
        cov.union, cov.union_notes = union_over_runs([(rid, d) for rid, d in measured.items() if d])
    page = write_dashboard(h, out, grid_runs=args.grid_runs, rtl_coverage=cov)
    print(term_safe(f"dashboard: {page} ({len(h.runs)} runs)"))
    return 0


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="runs, new/fixed/flaky tests, duration trends and failure clusters "
                                       "from the results database",
                       description="The results database in the terminal (default action: show). Every "
                                   "nvdla-hil regress records its run there.")
    add_db_options(p)
    p.add_argument("--run", help="the run to look at (an id or its prefix; default: the newest)")
    p.add_argument("--limit", type=int, default=200, help="runs read from the database (default 200)")
    p.add_argument("--show", type=int, default=15, help="runs listed (default 15)")
    p.add_argument("--window", type=int, default=20, help="comparable runs for flaky tests and trends (default 20)")
    p.add_argument("--target", help="only runs on this target")
    p.add_argument("--profile", help="only runs of this profile list (as recorded, e.g. nv_small,nv_small_256_full)")
    hs = p.add_subparsers(dest="history_cmd", metavar="ACTION")
    q = hs.add_parser("show", help="print the history (the default)")
    add_db_options(q, again=True)
    q = hs.add_parser("import", help="import past run directories (results/<run-id>/) into the database")
    q.add_argument("dirs", nargs="+", metavar="DIR", help="run directories, or folders of them")
    add_db_options(q, again=True)
    q = hs.add_parser("label", help="attach a known-failure label (text, bug link) to a failure signature or cluster")
    add_db_options(q, again=True)
    q.add_argument("signature", help="signature id (or a unique prefix), as history and the report show it")
    q.add_argument("--text", help="what this failure is")
    q.add_argument("--bug", help="a link to the bug (http:// or https://)")
    q.add_argument("--author", help="who labelled it (default: the user name)")
    q.add_argument("--remove", action="store_true", help="remove the label")
    p.set_defaults(func=_cmd_history)

    p = sub.add_parser("dashboard", help="write a static HTML dashboard of the results database",
                       description="A static site (index.html, pictures inline) that opens from disk or any web "
                                   "server: pass rate per night per target and profile, a test x run grid, "
                                   "new/fixed/flaky tests, duration trends, failure clusters with labels, links "
                                   "into each run's report.")
    add_db_options(p)
    p.add_argument("--out", required=True, help="folder to write (index.html); created if missing")
    p.add_argument("--limit", type=int, default=200, help="runs read from the database (default 200)")
    p.add_argument("--grid-runs", type=int, default=30, help="runs in the test x run grid (default 30)")
    p.add_argument("--target", help="only runs on this target")
    p.add_argument("--profile", help="only runs of this profile list")
    p.set_defaults(func=_cmd_dashboard)
