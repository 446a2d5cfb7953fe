"""The end of a session: the per-test summary table of ``nvdla-hil regress`` (``--nvdla-summary``),
with skips for a unit the target does not model and for hardware a configuration lacks counted
apart, the oracle split of packed-vector tests, the weak passes (a pass whose comparison could not
tell the layer from one that computed nothing: user property ``weak_pass``, counted on the summary
line and listed with why in the summary file), and "nothing ran is not green": a session of the
shipped suites in which tests were collected but none passed or failed exits 5
(``NO_TESTS_COLLECTED``) unless ``--nvdla-allow-empty``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..results.recorder import INTERRUPTED
from ..results.textsafe import term_safe
from .boards import count_board_dead
from .junit import CUT_OFF_KEY, SUITE_FILES, is_suite, junit_classname
from .keys import COUNTS_KEY, PROFILES_KEY, SPEC_KEY, UNWRITTEN_KEY, WAVES_SEEN_KEY, is_worker
from .waves import waves_lines

#: skip-reason prefixes the summary counts apart: a unit the target cannot run yet, and a
#: feature the configuration's hardware does not have
SKIP_NOT_MODELLED = "not modelled"
SKIP_LACKS = "lacks unit"
#: a test that ran but had nothing to compare with (a loadable without a golden dump): a result, never
#: a pass; the same words as ``harness.loadables.check.NO_GOLDEN``
SKIP_NO_GOLDEN = "ran, no golden"


#: the outcome of a passing test whose goldens are the reference model's own (golden_source kind model)
SELF_CONSISTENCY = "passed (self-consistency)"

#: user property of a passing test whose comparison was weak (its value: why), set by a suite
#: (the packed vectors: every compared output a single value or all poison, no non-zero status or
#: statistics register compared; ``harness.vectors.run.Informativeness``)
WEAK_PASS_PROPERTY = "weak_pass"


def weak_line(weak: int, passes: int, where: str | None) -> str:
    """The summary line's weak-pass clause (empty without any)."""
    if not weak:
        return ""
    see = f"see {Path(where).name}" if where else "listed below"
    return f"; {weak} of {passes} passes weak (single-value or unwritten outputs): {see}"


def oracle_split(rows: list[tuple[str, str, float, str]], golden: dict[str, str]) -> str:
    """The summary's oracle line: passing packed-vector tests checked against an oracle (per
    golden_source kind) apart from those that only checked self-consistency. Empty without any."""
    passed = [golden[n] for n, outcome, *_ in rows if n in golden and outcome in ("passed", SELF_CONSISTENCY)]
    if not passed:
        return ""
    kinds: dict[str, int] = {}
    for k in passed:
        if k != "model":
            kinds[k] = kinds.get(k, 0) + 1
    own = passed.count("model")
    line = (f"oracle split: of {len(passed)} passing vector tests, {len(passed) - own} checked against an oracle ("
            + (", ".join(f"{kinds[k]} {k}" for k in sorted(kinds)) or "none") + f"), {own} self-consistency only")
    if own:
        line += " (goldens from the reference model itself: not evidence of correctness)"
    return line


class RegressionSummary:
    """Collects one row per test and prints a table (test, outcome, time, reason) at the end,
    then the counts: skips for a unit the target does not model yet and skips for hardware a
    configuration lacks are counted apart, and per configuration when the traces span several."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: list[tuple[str, str, float, str]] = []
        self.golden: dict[str, str] = {}  # nodeid -> golden_source.kind of packed-vector tests
        self.weak: dict[str, str] = {}  # nodeid -> why its pass was weak

    @staticmethod
    def _reason(report: pytest.TestReport) -> str:
        if report.passed:
            return ""
        if report.skipped and isinstance(report.longrepr, tuple):
            return str(report.longrepr[2]).removeprefix("Skipped: ")
        failure = getattr(report, "nvdla_failure", None)  # the error's own message (harness/results/recorder.py)
        if isinstance(failure, dict) and failure.get("reason"):
            return str(failure["reason"])
        lines = [ln.strip() for ln in report.longreprtext.strip().splitlines()
                 if ln.strip() and not ln.startswith("[gw")]
        first = next((ln for ln in lines if "MISMATCH" in ln or "differ" in ln), None)
        return first or (lines[0] if lines else "")

    @staticmethod
    def outcome_class(outcome: str, why: str) -> str:
        if outcome != "skipped":
            return outcome
        if why.startswith(SKIP_NOT_MODELLED):
            return "skipped: not modelled"
        if why.startswith(SKIP_LACKS):
            return "skipped: lacks unit"
        if why.startswith(SKIP_NO_GOLDEN):
            return SKIP_NO_GOLDEN
        return "skipped: other"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed") or (
            report.when == "teardown" and report.failed
        ):
            outcome: str = "error" if report.when != "call" and report.failed else report.outcome
            if getattr(report, "nvdla_bad_input", None):
                outcome = "bad input"  # counted apart: the input's fault, not the target's
            elif getattr(report, "nvdla_infra", None):
                outcome = "infrastructure"  # board, link or simulator failed: not the hardware's result
            golden = getattr(report, "nvdla_golden", None)
            if golden is not None:
                self.golden[report.nodeid] = golden
                if outcome == "passed" and golden == "model":
                    outcome = SELF_CONSISTENCY  # goldens from the model itself: never a plain pass
            if outcome in ("passed", SELF_CONSISTENCY):
                why = next((v for k, v in (getattr(report, "user_properties", None) or ()) if k == WEAK_PASS_PROPERTY), None)
                if why is not None:
                    self.weak[report.nodeid] = str(why)
            self.rows.append((report.nodeid, outcome, report.duration, self._reason(report)))

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        # long: one table of the run - its rows, skip groups, per-suite counts and totals - read top-down
        tr = terminalreporter
        spec = self.config.stash[SPEC_KEY]
        names: list[str] = self.config.stash[PROFILES_KEY]
        title = term_safe(f"nvdla-hil regression on {spec.kind} ({', '.join(names)})")
        tr.write_sep("=", title)
        lines: list[str] = [title]
        write_line = tr.write_line

        class _Tee:
            @staticmethod
            def write_line(line: str) -> None:
                lines.append(line)
                write_line(line)

        def file_only(line: str) -> None:
            lines.append(line)

        tr = _Tee

        full = bool(self.config.getoption("--nvdla-table", default=False))
        classes = ("passed", SELF_CONSISTENCY, SKIP_NO_GOLDEN, "failed", "error", "bad input", "infrastructure",
                   "skipped: not modelled", "skipped: lacks unit", "skipped: other", INTERRUPTED)
        # expected and numerous: passes, and skips for hardware a configuration lacks or the model does not
        # cover (grouped by reason below); every other outcome is listed by name
        quiet_classes = {"passed", "skipped: not modelled", "skipped: lacks unit"}
        counts: dict[str, int] = {}
        per_group: dict[str, dict[str, int]] = {}
        skip_reasons: dict[str, dict[str, int]] = {}
        rows = self.rows + [(item.nodeid, INTERRUPTED, seconds, f"{why} while the test ran (no result)")
                            for item, seconds, why in self.config.stash.get(CUT_OFF_KEY, [])]
        width = min(max((len(term_safe(n.split("::")[-1])) for n, *_ in rows), default=20), 70)
        hidden = 0
        for nodeid, outcome, dur, why in rows:
            cls = self.outcome_class(outcome, why)
            counts[cls] = counts.get(cls, 0) + 1
            name = nodeid.split("::")[-1]
            group = _group_of(name)
            per_group.setdefault(group, {})[cls] = per_group.setdefault(group, {}).get(cls, 0) + 1
            name = term_safe(name)  # a name read from a file never drives the terminal
            name = name if len(name) <= width else "..." + name[-(width - 3):]
            row = f"{name:<{width}}  {outcome:<8}{dur:8.3f}s  {term_safe(why[:90])}"
            # the terminal leads with what did not pass; every row is in the summary file
            if full or cls not in quiet_classes:
                tr.write_line(row)
            else:
                file_only(row)
                hidden += 1
                if cls.startswith("skipped"):
                    reasons = skip_reasons.setdefault(cls, {})
                    reasons[term_safe(why[:110])] = reasons.get(term_safe(why[:110]), 0) + 1
        if hidden:
            where = self.config.getoption("--nvdla-summary-file", default=None)
            run_dir = self.config.getoption("--nvdla-run-dir", default=None)
            shown = (f"{Path(where).name} in the run folder" if where and run_dir and Path(where).parent == Path(run_dir)
                     else where or "the summary file")
            tr.write_line(f"({hidden} passing or skipped rows: {shown}; --table (pytest: --nvdla-table) lists them)")
        for cls, reasons in skip_reasons.items():  # a skip is not a pass: what was skipped and why
            top = sorted(reasons.items(), key=lambda kv: -kv[1])
            tr.write_line(f"{cls}: {sum(reasons.values())}" + "".join(f"\n  {n} x {r}" for r, n in top[:3])
                          + (f"\n  ... and {len(top) - 3} other reasons" if len(top) > 3 else ""))
        tr.write_line("")
        if len(per_group) > 1:
            shown = [c for c in classes if any(c in cc for cc in per_group.values())]
            col = max(len(c) for c in shown) + 2
            first = max(len("suite / configuration"), *(len(g) for g in per_group)) + 2
            tr.write_line(f"{'suite / configuration':<{first}}" + "".join(f"{c:>{col}}" for c in shown))
            for grp, cc in per_group.items():
                tr.write_line(f"{grp:<{first}}" + "".join(f"{cc.get(c, 0):>{col}}" for c in shown))
            tr.write_line("")
        where = self.config.getoption("--nvdla-summary-file", default=None)
        passes = counts.get("passed", 0) + counts.get(SELF_CONSISTENCY, 0)
        tr.write_line("summary: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in classes
                                              if k not in (SELF_CONSISTENCY, INTERRUPTED, SKIP_NO_GOLDEN) or counts.get(k))
                      + weak_line(len(self.weak), passes, where))
        if self.weak:
            # every weak pass with why: in the summary file (on the terminal too without one, or with --nvdla-table)
            put = tr.write_line if full or not where else file_only
            put(f"weak passes ({len(self.weak)}): passed, but every compared output is one value or unwritten "
                f"and no non-zero status or statistics register was compared")
            for nodeid, why in sorted(self.weak.items()):
                put(f"  {term_safe(nodeid.split('::')[-1])}: {term_safe(why)}")
        split = oracle_split(self.rows, self.golden)
        if split:
            tr.write_line(split)
        for line in waves_lines(self.config):
            tr.write_line(line)
        lock_waits = self.config.pluginmanager.get_plugin("nvdla-hil-lock-waits")
        for line in (lock_waits.lines() if lock_waits else []):  # time waited on other processes' locks
            file_only(line)
        path = self.config.getoption("--nvdla-summary-file", default=None)
        if path:
            from ...drivers.errors import write_atomic

            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, "\n".join(lines) + "\n")  # never a truncated summary
            except OSError as e:
                self.config.stash.setdefault(UNWRITTEN_KEY, []).append(f"{e.filename or path}: {e.strerror or e}")


def _group_of(name: str) -> str:
    """The row of the per-suite table: a trace's configuration, else the suite of the test."""
    if name.startswith("test_trace[") and "/" in name:
        return "traces " + term_safe(name[len("test_trace["):].split("/", 1)[0])
    base = name.split("[", 1)[0]
    return {"test_vector": "vectors", "test_txn": "txn (nv_full)", "test_loadable": "loadables",
            "test_network": "networks"}.get(base, term_safe(base))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    counts = config.stash[COUNTS_KEY]
    counts["suite"] += sum(1 for it in items if is_suite(it))


class RunCounter:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.counts = config.stash[COUNTS_KEY]

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes the testcase
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        junit_classname(self.config, report)
        waves = getattr(report, "nvdla_waves", None)
        if waves:
            self.config.stash[WAVES_SEEN_KEY].append((report.nodeid, waves))
        self.counts["reports"] += 1
        count_board_dead(self.config, report)
        if getattr(report, "nvdla_suite", False) or any(f in report.nodeid.replace("\\", "/") for f in SUITE_FILES):
            self.counts["suite"] += 1
        if report.when == "call" and report.passed and getattr(report, "nvdla_golden", None) == "model":
            # golden from the model itself: not a test checked against an oracle (never a plain pass)
            self.counts["self_consistency"] = self.counts.get("self_consistency", 0) + 1
        elif report.when == "call" and report.outcome in ("passed", "failed"):
            self.counts["ran"] += 1
        elif report.failed:  # an error in set-up or teardown is a result too
            self.counts["ran"] += 1
        elif report.skipped and _skip_text(report).startswith(SKIP_NO_GOLDEN):
            self.counts["ran"] += 1  # it ran; the summary counts it apart from passes and skips


def _skip_text(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return ""


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if is_worker(config) or config.getoption("--nvdla-allow-empty") or config.getoption("collectonly"):
        return
    counts = config.stash.get(COUNTS_KEY, None)
    if counts is None:
        return
    ours = counts["suite"] > 0 or config.getoption("--nvdla-summary")
    if ours and session.exitstatus == pytest.ExitCode.OK and counts["ran"] == 0:
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
        tr = config.pluginmanager.get_plugin("terminalreporter")
        msg = ("nvdla-hil: no test ran (every collected test was skipped or deselected); "
               "this is an error unless --nvdla-allow-empty")
        if counts.get("self_consistency"):
            msg = (f"nvdla-hil: no test was checked against an oracle: {counts['self_consistency']} passed only "
                   f"self-consistency (goldens from the reference model itself); not a green run")
        if tr is not None:
            tr.write_line(msg, red=True)
