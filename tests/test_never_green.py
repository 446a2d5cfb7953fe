"""A misconfigured regression is never green, and bad input is a message, not a traceback.

Every case here is a real run (in-process ``main([...])`` or a subprocess) that must exit 2 with
a message naming the option, file and line, or board; the cases that must *not* be errors (a
vectors-only run with no trace source, ``--allow-empty``) are run too, so a check that rejects
everything fails here. A hung layer fails after a bounded, explained wait.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.harness.cli import regress as regress_cli
from nvdla_hil.harness.cli import trace as trace_cli
from nvdla_hil.harness.cli import main
from nvdla_hil.harness.targets import layer_timeout
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import parse_trace, run_trace
from nvdla_hil.harness.targets.workload import LAYER_LATENCY_CYCLES, estimate_work, explain_timeout, layer_budget, trace_budget

PY = sys.executable
ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_LAB", "NVDLA_HIL_BOARD",
            "NVDLA_HIL_TARGET", "NVDLA_HIL_CONFIG", "NVDLA_HIL_RESULTS")


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No configuration from the environment; run directories go to tmp_path."""
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NVDLA_HIL_RESULTS", str(tmp_path / "results"))
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    env.update(extra)
    return env


def _regress(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["regress", *argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


# ---- 1. regress: bad sources and targets are exit 2, named ---------------------------------------------


def test_missing_traces_path_is_exit_2_naming_option(clean_env, capsys):
    code, out, err = _regress(capsys, "--traces", "/nope", "--suite", "traces")
    assert code == 2, out + err
    assert "--traces /nope" in err and "no such folder" in err
    assert not (clean_env / "results").exists()  # refused before any run started


def test_misspelled_traces_path_with_all_suites(clean_env, capsys, trace_root):
    code, _, err = _regress(capsys, "--traces", str(trace_root) + "_typo")
    assert code == 2 and f"--traces {trace_root}_typo" in err


def test_empty_traces_folder_is_exit_2(clean_env, capsys):
    empty = clean_env / "empty"
    empty.mkdir()
    code, _, err = _regress(capsys, "--traces", str(empty), "--suite", "traces")
    assert code == 2 and f"--traces {empty}" in err and "no NVDLA trace tests" in err


def test_traces_env_naming_a_missing_folder_is_exit_2(clean_env, capsys, monkeypatch):
    monkeypatch.setenv("NVDLA_TRACES", str(clean_env / "gone"))
    code, _, err = _regress(capsys, "--suite", "traces")
    assert code == 2 and "NVDLA_TRACES" in err and str(clean_env / "gone") in err


def test_missing_vectors_path_is_exit_2(clean_env, capsys):
    code, _, err = _regress(capsys, "--suite", "vectors", "--vectors", str(clean_env / "novec"))
    assert code == 2 and f"--vectors {clean_env / 'novec'}" in err and "no such folder" in err


def test_empty_vectors_folder_is_exit_2(clean_env, capsys):
    (clean_env / "vec").mkdir()
    code, _, err = _regress(capsys, "--suite", "vectors", "--vectors", str(clean_env / "vec"))
    assert code == 2 and "no packed test vectors" in err


def test_nvdla_sw_naming_a_missing_checkout_is_exit_2(clean_env, capsys, tmp_path):
    """A loadable run whose nvdla/sw checkout is not there would fail every loadable (exit 1, as
    if the hardware were wrong): it is bad input, said once, before any run starts."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "nvdla_sw" / "flatbufs" / "kmd" / "SDP" / "SDP_X1_L0_0_fbuf"
    if not shared.is_file():
        pytest.skip(f"NVDLA's shared loadables are not beside the repository ({shared})")
    flatbufs = tmp_path / "lds" / "flatbufs" / "kmd" / "SDP"
    flatbufs.mkdir(parents=True)
    (flatbufs / "SDP_X1_L0_0_fbuf").write_bytes(shared.read_bytes())  # a real loadable: found by content
    code, out, err = _regress(capsys, "--suite", "loadables", "--loadables", str(tmp_path / "lds"),
                              "--nvdla-sw", str(tmp_path / "no-sw"))
    assert code == 2, out + err
    assert f"--nvdla-sw (or NVDLA_SW) {tmp_path / 'no-sw'}" in err and "kmd/firmware/scheduler.c is missing" in err
    assert not (clean_env / "results").exists()


def test_verilator_without_checkout_is_exit_2(clean_env, capsys):
    code, _, err = _regress(capsys, "--target", "verilator", "--suite", "vectors")
    assert code == 2 and "--target verilator" in err and "--nvdla-hw" in err


def test_verilator_with_missing_checkout_is_exit_2(clean_env, capsys):
    code, _, err = _regress(capsys, "--target", "verilator", "--nvdla-hw", "/no/hw", "--suite", "vectors")
    assert code == 2 and "--nvdla-hw /no/hw" in err


def test_serial_without_lab_is_exit_2(clean_env, capsys):
    code, _, err = _regress(capsys, "--target", "serial", "--suite", "vectors")
    assert code == 2 and "--target serial" in err and "--lab" in err


def test_serial_without_board_choice_is_exit_2(clean_env, capsys):
    lab = clean_env / "lab.yaml"
    lab.write_text("boards:\n  a:\n    url: socket://127.0.0.1:9\n  b:\n    url: socket://127.0.0.1:10\n")
    code, _, err = _regress(capsys, "--target", "serial", "--lab", str(lab), "--suite", "vectors")
    assert code == 2 and "no board chosen" in err and "known boards: a, b" in err
    code, _, err = _regress(capsys, "--target", "serial", "--lab", str(lab), "--board", "c", "--suite", "vectors")
    assert code == 2 and "no board 'c'" in err


def test_every_test_skipped_is_exit_2_unless_allowed(clean_env, capsys):
    # the sdp_lut vectors need the SDP LUT, which nv_small lacks: every test is skipped
    args = ["--suite", "vectors", "--nvdla-config", "nv_small", "-k", "sdp_lut"]
    code, out, err = _regress(capsys, *args)
    assert code == 2, out + err
    assert "no test ran" in err
    assert "0 passed" in out and "skipped" in out
    code, out, err = _regress(capsys, *args, "--allow-empty")
    assert code == 0, out + err


def test_deselecting_everything_is_exit_2(clean_env, capsys):
    code, _, err = _regress(capsys, "--suite", "vectors", "-k", "no_such_test_anywhere")
    assert code == 2 and "no test ran" in err


def test_vectors_only_run_without_trace_source_is_green(clean_env, capsys, monkeypatch, tmp_path):
    """No trace source configured at all: the trace suite is one named skip, the vectors run."""
    monkeypatch.chdir(tmp_path)  # no ../shared/nvdla next to it
    monkeypatch.setattr(regress_cli, "_default_traces", lambda: None)
    code, out, err = _regress(capsys, "--suite", "all", "-k", "no-trace-source or sdp_cvt")
    assert code == 0, out + err
    assert "no-trace-source" in out and "no trace source configured" in out
    import re

    passed = re.search(r"^summary: (\d+) passed", out, re.M)
    assert passed is not None and int(passed.group(1)) + int(
        (re.search(r"(\d+) passed \(self-consistency\)", out) or [0, "0"])[1]) > 0, out


# ---- 1b. the same through pytest directly (the plugin) -----------------------------------------------


def _pytest(*argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--pyargs", *argv],
                          capture_output=True, text=True, timeout=300, env=_env(**env), cwd="/")


def test_plugin_traces_option_missing_is_usage_error():
    r = _pytest("nvdla_hil.harness.suites.test_traces", "--nvdla-traces", "/nope")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "--nvdla-traces /nope: no such folder" in r.stderr


def test_plugin_traces_env_missing_is_collection_error():
    r = _pytest("nvdla_hil.harness.suites.test_traces", NVDLA_TRACES="/nope/traces")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "NVDLA_TRACES /nope/traces: no such folder" in r.stdout


def test_plugin_verilator_without_checkout_is_usage_error():
    r = _pytest("nvdla_hil.harness.suites.test_vectors", "--nvdla-target", "verilator")
    assert r.returncode == 4 and "--nvdla-hw" in r.stderr


def test_plugin_serial_without_lab_is_usage_error():
    r = _pytest("nvdla_hil.harness.suites.test_vectors", "--nvdla-target", "serial")
    assert r.returncode == 4 and "--nvdla-lab FILE" in r.stderr


def test_plugin_all_skipped_session_is_not_green():
    r = _pytest("nvdla_hil.harness.suites.test_vectors", "--nvdla-config", "nv_small", "-k", "sdp_lut")
    assert r.returncode == 5, r.stdout + r.stderr
    assert "no test ran" in r.stdout
    r = _pytest("nvdla_hil.harness.suites.test_vectors", "--nvdla-config", "nv_small", "-k", "sdp_lut",
                "--nvdla-allow-empty")
    assert r.returncode == 0, r.stdout + r.stderr


def test_plugin_trace_suite_without_source_is_a_named_skip():
    r = _pytest("nvdla_hil.harness.suites", "-k", "no-trace-source or sdp_cvt-s1-000", "-rs")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no trace source configured" in r.stdout and "1 passed" in r.stdout


# ---- 4. lab files: wrong types, ranges and duplicate keys are exit 2 naming file:line and field --------


def _lab(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "lab.yaml"
    p.write_text(textwrap.dedent(body))
    return p


@pytest.mark.parametrize("field,value,needle", [
    ("response_timeout", ".inf", "out of range"),
    ("response_timeout", ".nan", "out of range"),
    ("board_timeout", "fast", "positive number of seconds"),
    ("reset_timeout", "86401", "out of range"),
    ("baud", "1.5", "expected an integer"),
    ("baud", "0", "out of range"),
    ("retries", "1000", "out of range"),
    ("dram_size", "[1, 2]", "expected an integer"),
    ("csr_base", "0x1_0000_0000_0000_0000", "out of range"),
    ("integrity", "5", "expected a non-empty string"),
    ("profile", "7777", "expected a non-empty string"),
])
def test_lab_field_type_and_range(tmp_path, capsys, field, value, needle):
    lab = _lab(tmp_path, f"""\
        boards:
          b1:
            url: socket://127.0.0.1:9
            {field}: {value}
        """)
    code = main(["regs", "read", "--target", "serial", "--lab", str(lab), "--board", "b1", "GLB.S_NVDLA_HW_VERSION"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{lab}:4" in err and repr(field) in err and "'b1'" in err and needle in err
    assert "Traceback" not in err


def test_lab_lock_dir_of_wrong_type(tmp_path, capsys):
    lab = _lab(tmp_path, """\
        lock_dir: 5
        boards:
          b1:
            url: socket://127.0.0.1:9
        """)
    code = main(["regs", "read", "--target", "serial", "--lab", str(lab), "--board", "b1", "GLB.S_NVDLA_HW_VERSION"])
    err = capsys.readouterr().err
    assert code == 2 and f"{lab}:1" in err and "'lock_dir'" in err and "got 5" in err


def test_lab_lock_dir_missing(tmp_path, capsys):
    lab = _lab(tmp_path, f"""\
        boards:
          b1:
            url: socket://127.0.0.1:9
        lock_dir: {tmp_path / 'nolocks'}
        """)
    code = main(["regress", "--target", "serial", "--lab", str(lab), "--suite", "vectors",
                 "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and f"{lab}:4" in err and "not an existing folder" in err


def test_lab_duplicate_key_names_both_lines(tmp_path, capsys):
    lab = _lab(tmp_path, """\
        boards:
          b1:
            url: socket://127.0.0.1:9
            baud: 115200
            baud: 3000000
        """)
    code = main(["regs", "read", "--target", "serial", "--lab", str(lab), "--board", "b1", "GLB.S_NVDLA_HW_VERSION"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{lab}:5" in err and "duplicate key 'baud'" in err and "first at line 4" in err


def test_board_emu_port_out_of_range():
    r = subprocess.run([PY, "-m", "nvdla_hil.harness.cli", "board-emu", "--tcp", "99999"],
                       capture_output=True, text=True, timeout=300)  # a hang guard only (as _pytest's)
    assert r.returncode == 2 and "--tcp" in r.stderr and "99999 is out of range 0..65535" in r.stderr
    assert "Traceback" not in r.stderr
    with pytest.raises(SystemExit) as ei:
        main(["board-emu", "--drop", "2"])
    assert ei.value.code == 2


_HOLDER = """
import sys
from nvdla_hil.harness.boards.lab import BoardLock
lock = BoardLock(sys.argv[1], sys.argv[2], board="bench")
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


def test_regs_read_on_busy_board_names_holder(tmp_path, capsys):
    """The holder locked 127.0.0.1; the lab says localhost: the same board, so busy."""
    lab = _lab(tmp_path, f"""\
        lock_dir: {tmp_path}
        boards:
          b1:
            url: socket://localhost:9
        """)
    holder = subprocess.Popen([PY, "-c", _HOLDER, "socket://127.0.0.1:9", str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code = main(["regs", "read", "--target", "serial", "--lab", str(lab), "--board", "b1", "GLB.S_NVDLA_HW_VERSION"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"board 'b1' busy, held by PID {holder.pid} on " in err and " since " in err
        assert "Traceback" not in err
    finally:
        holder.kill()
        holder.wait()


# ---- 5. a hung layer costs bounded, explained time -------------------------------------------------------


class HangingModel(ModelTarget):
    """The model, except that the layer's done interrupt never comes: the wait for it never
    completes and GLB S_INTR_STATUS reads 0. It says it simulates 1 M cycles/s. Its flat
    per-layer timeout (what a caller that ignored the layer's budget would wait) is deliberately
    long, so "returned before it" tells a budgeted wait from a flat one under any load."""

    cycles_per_second = 1_000_000.0
    layer_timeout_factor = 20.0
    layer_timeout_floor = 0.2
    suggested_layer_timeout = 600.0

    def settled(self) -> bool:  # a device that runs on its own: the interrupt could still come
        return False

    def _wait_irq(self, timeout: float | None) -> bool:
        time.sleep(min(timeout or 0.0, 0.02))
        return False

    def _read32(self, address: int) -> int:
        value = super()._read32(address)
        r = self._by_addr.get(address)
        return 0 if r is not None and r.block == "GLB" and r.name == "S_INTR_STATUS" else value


def test_workload_estimate_scales_with_the_layer(trace_root):
    small = parse_trace(trace_root / "cdp_1x1x1_lrn3_int8_0")
    big = parse_trace(trace_root / "cdp_8x8x32_lrn3_int8_0")
    with ModelTarget("nv_small") as m:
        drv = NvdlaDriver(m, "nv_small")
        ws = estimate_work([(drv.register(c.args[0]), c.args[1]) for c in small.of_kind("reg_write")], drv.profile)
        wb = estimate_work([(drv.register(c.args[0]), c.args[1]) for c in big.of_kind("reg_write")], drv.profile)
    assert ws.layers == wb.layers == 1
    # elements at 1 per cycle + 2 bytes of DMA per element over the 8-byte atom + a fixed latency
    assert wb.cycles == 2048 + 2 * 2048 // 8 + LAYER_LATENCY_CYCLES
    assert ws.cycles == 1 + LAYER_LATENCY_CYCLES
    assert "8x8x32 = 2048 elements at 1/cycle (cdp)" in wb.detail()

    from nvdla_hil.harness.targets.verilator import VerilatorTarget

    class Sim:  # the pace a Verilator target declares (it does not measure its speed)
        suggested_layer_timeout = VerilatorTarget.suggested_layer_timeout
        cycles_per_second = VerilatorTarget.cycles_per_second
        layer_timeout_factor = layer_timeout_floor = None

    b = layer_budget(wb, Sim())
    assert b.rate == 10_000 and b.seconds == 60.0  # the floor: far below the old flat 600 s
    huge = layer_budget(wb, Sim(), factor=1000)
    assert huge.seconds == pytest.approx(1000 * wb.cycles / 10_000)


def test_hung_layer_fails_after_the_estimated_time(trace_root):
    trace = parse_trace(trace_root / "cdp_8x8x32_lrn3_int8_0")
    with HangingModel("nv_small") as t:
        drv = NvdlaDriver(t, "nv_small")
        budget = trace_budget(trace, drv, t)
        assert budget.seconds == pytest.approx(20 * budget.cycles / 1e6) and budget.seconds > 0.2
        t0 = time.monotonic()
        result = run_trace(trace, t, driver=drv, timeout=budget.seconds)
        took = time.monotonic() - t0
    assert result.status == "error", result.summary()
    # the wait that gave up was armed with the budget (the driver names the deadline it used), and
    # it did wait that long: the clock only runs on, so load can lengthen ``took`` but never shorten it
    assert f"no done interrupt within {budget.seconds:g} s" in result.message, result.message
    assert took >= budget.seconds
    assert took < layer_timeout(t)  # ended by the budget, long before the target's flat layer timeout
    why = explain_timeout(result.message, budget)
    assert why is not None
    assert f"waited {budget.seconds:.1f} s" in why and f"{budget.cycles} expected cycles" in why
    assert "factor 20" in why and "1e+06 cycles/s" in why and "CDP: 8x8x32" in why
    assert explain_timeout("1 of 2 checks failed", budget) is None  # only a timeout is explained


def test_trace_command_reports_a_hung_layer(trace_root, capsys, monkeypatch):
    """The command waits the layer's budget (its wait names that deadline), not a flat timeout:
    the target's flat one is 600 s here, so a command that fell back to it fails the bound."""
    monkeypatch.setattr(trace_cli, "open_target", lambda spec: HangingModel(spec.profile))
    path = trace_root / "sdp_8x8x32_bypass_int8_0"
    with HangingModel("nv_small") as t:
        budget = trace_budget(parse_trace(path), NvdlaDriver(t, "nv_small"), t)
        flat = layer_timeout(t)
    assert budget.seconds < flat
    t0 = time.monotonic()
    code = main(["trace", str(path)])
    took = time.monotonic() - t0
    out = capsys.readouterr().out
    assert code == 1, out
    assert "hung layer: waited" in out and "expected cycles" in out and "factor 20" in out
    assert f"no done interrupt within {budget.seconds:g} s" in out, out
    assert took < flat


def test_every_test_skipped_with_xdist_workers_is_exit_2(clean_env, capsys):
    code, out, err = _regress(capsys, "--suite", "vectors", "--nvdla-config", "nv_small", "-k", "sdp_lut", "-j", "2")
    assert code == 2, out + err
    assert "no test ran" in err, out[-4000:] + err


def test_trace_configurations_outside_nvdla_config_is_exit_2(clean_env, capsys):
    sets = os.environ.get("NVDLA_TRACE_SETS")
    if not sets or not Path(sets).is_dir():
        pytest.skip("set NVDLA_TRACE_SETS to a folder of configuration folders (trace_tests)")
    code, out, err = _regress(capsys, "--suite", "traces", "--traces", sets, "--nvdla-config", "nv_full")
    assert code == 2, out + err
    assert f"--nvdla-traces {sets}: its configurations" in out and "none of --nvdla-config (nv_full)" in out
    assert "collected" in err or "interrupted" in err


def test_trace_command_timeout_option_is_named_in_the_message(trace_root, capsys, monkeypatch):
    monkeypatch.setattr(trace_cli, "open_target", lambda spec: HangingModel(spec.profile))
    code = main(["trace", str(trace_root / "sdp_8x8x32_bypass_int8_0"), "--timeout", "0.3"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "hung layer: waited 0.3 s" in out and "given by --timeout" in out
