"""What a session knows its board's memory holds (``BoardMemoryBook``), and what the serial
target then leaves off the wire: bytes the board already holds, poison where the board already
holds something unlike the expected output, the gaps of a checked region. Each shortcut must
keep the never-green guarantees: a board that computes nothing still fails, a record that went
stale (somebody wrote the board behind the host's back) costs a rerun, never a wrong verdict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


from nvdla_hil.drivers.uartbone import BoardMap
from nvdla_hil.harness.boards.emulator import serve_in_thread
from nvdla_hil.harness.targets.memory import KnownMemory, poison_pattern
from nvdla_hil.harness.targets import TargetSpec, open_target
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.targets.serial import BoardMemoryBook
from nvdla_hil.harness.traces import parse_trace, run_trace
from nvdla_hil.harness.vectors import bundled_root, find_cases, load_case, run_case

pytestmark = pytest.mark.slow  # serial regressions measuring bytes on the wire: `make test-slow`, CI's second step

LAB = """\
lock_dir: {lock}
boards:
  emu:
    url: {url}
    baud: 3000000
    profile: nv_small
    integrity: {integrity}
    reset_address: 0xf0000000
"""
TRACE = "cdp_8x8x32_lrn3_int8_2"  # an 8.8 MB checked region of which the layer writes 29 KB


class SwitchableModel(ModelTarget):
    """The emulated board's NVDLA; ``idle = True`` makes every layer complete without writing."""

    idle = False
    stray: tuple[int, bytes] | None = None  # (address, bytes) a buggy layer also writes

    def _run(self, layer, group):  # noqa: ANN001, ANN202
        if not self.idle:
            out = super()._run(layer, group)
            if self.stray is not None:
                self.memories["pri_mem"].write(self.stray[0], self.stray[1])
            return out
        from nvdla_hil.harness.refmodel.base import LayerResult

        status = self.regmap.register("GLB", "S_INTR_STATUS")
        self._events.append((status.field(f"{layer.done[0]}_DONE_STATUS{group}").mask, None))
        self.layers_run.append((layer.done[0], group, LayerResult()))


@pytest.fixture(params=["plain", "verify"])
def bench(request, tmp_path):
    model = SwitchableModel("nv_small")
    with serve_in_thread(model, BoardMap(), mode="tcp") as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(LAB.format(lock=tmp_path, url=emu.url, integrity=request.param))
        yield model, TargetSpec(kind="serial", profile="nv_small", lab=str(lab), board="emu",
                                memory_book=BoardMemoryBook())


def _run(spec: TargetSpec, trace):  # noqa: ANN001, ANN202
    with open_target(spec) as t:
        r = run_trace(trace, t, poison=True)
        return r, t.stats.tx_bytes, t.stats.rx_bytes


def _trace(trace_root: Path, name: str):  # noqa: ANN202
    if not (trace_root / name).is_dir():
        pytest.skip(f"{name} not in {trace_root}")
    return parse_trace(trace_root / name)


def test_known_memory_learns_forgets_and_restricts():
    km = KnownMemory()
    km.learn(0x1000, np.arange(16, dtype=np.uint8))
    known, vals = km.lookup(0x0FFC, 24)
    assert known.tolist() == [False] * 4 + [True] * 16 + [False] * 4
    assert vals[4:20].tolist() == list(range(16))
    km.forget(0x1004, 4)
    assert km.lookup(0x1000, 16)[0].tolist() == [True] * 4 + [False] * 4 + [True] * 8
    part = km.only([(0x1008, 0x100C)])
    assert part.lookup(0x1000, 16)[0].tolist() == [False] * 8 + [True] * 4 + [False] * 4
    other = KnownMemory()
    other.learn_from(km)
    assert np.array_equal(other.lookup(0x1000, 16)[0], km.lookup(0x1000, 16)[0])
    small = KnownMemory(limit=1 << 16)
    small.learn(0, np.zeros(3 << 16, dtype=np.uint8))  # past its limit: knows nothing, never something wrong
    assert not small.lookup(0, 16)[0].any()


def test_poison_is_never_uniform():
    p = poison_pattern(0x8000_0000, 1 << 16).view("<u4")
    assert (p[1:] != p[:-1]).all()


def test_second_run_sends_less_and_an_idle_board_still_fails(bench, trace_root):
    model, spec = bench
    tr = _trace(trace_root, TRACE)
    first, tx1, rx1 = _run(spec, tr)
    assert first.status == "passed", first.summary()
    checked = sum(c.args[3] for c in tr.of_kind("check_crc"))
    assert tx1 < checked // 10  # the region's gaps are not sent, only the input and the poison
    second, tx2, rx2 = _run(spec, tr)
    assert second.status == "passed" and second.trusted_bytes > 0
    assert tx2 < tx1  # the input is already on the board
    # the board now holds the right answer: a board that computes nothing must still fail,
    # so every written byte that holds its expected value is poisoned again
    model.idle = True
    idle, _, _ = _run(spec, tr)
    assert idle.status == "failed", idle.summary()
    assert not any(c.vacuous for c in idle.checks)


def test_a_stale_record_costs_a_rerun_not_a_wrong_verdict(bench, trace_root):
    model, spec = bench
    tr = _trace(trace_root, TRACE)
    first, _, _ = _run(spec, tr)
    assert first.status == "passed"
    # behind the host's back: the input image on the board changes
    addr = next(c.args[1] for c in tr.of_kind("mem_load"))
    model.memories["pri_mem"].write(addr, np.full(64, 0x3C, dtype=np.uint8))
    again, _, _ = _run(spec, tr)
    assert again.status == "passed", again.summary()
    assert "rerun" in again.setup


def test_another_user_of_the_board_voids_the_record(bench, trace_root, tmp_path):
    model, spec = bench
    tr = _trace(trace_root, TRACE)
    assert _run(spec, tr)[0].status == "passed"
    from dataclasses import replace

    with open_target(replace(spec, memory_book=None)) as t:  # e.g. `nvdla-hil regs` in between
        t.mem_write(0x8000_0000, np.ones(8, dtype=np.uint8))
    r, tx, _ = _run(spec, tr)
    assert r.status == "passed" and r.trusted_bytes == _run(replace(spec, memory_book=BoardMemoryBook()), tr)[0].trusted_bytes


def test_gaps_holding_other_bytes_cost_a_rerun(bench, trace_root):
    model, spec = bench
    tr = _trace(trace_root, TRACE)
    _, _, addr, size, _ = tr.of_kind("check_crc")[0].args
    model.memories["pri_mem"].write(addr + size - 4096, np.full(4096, 0x77, dtype=np.uint8))  # left by someone
    r, _, _ = _run(spec, tr)
    assert r.status == "passed", r.summary()
    assert "rerun" in r.setup


def test_vectors_reuse_what_the_board_holds(bench):
    model, spec = bench
    case = next(load_case(p) for p in find_cases(bundled_root()) if load_case(p).launch == ("PDP", "PDP_RDMA")
                and load_case(p).profile == "nv_small")
    sent = []
    for _ in range(2):
        with open_target(spec) as t:
            r = run_case(case, t)
            sent.append(t.stats.tx_bytes)
        assert r.status == "passed", r.summary()
    assert sent[1] < sent[0] and r.trusted_bytes > 0
    model.idle = True
    with open_target(spec) as t:
        assert run_case(case, t).status == "failed"


def test_a_stray_write_into_a_gap_fails_and_a_verified_read_costs_about_one_read(bench, trace_root):
    """The gaps of a checked region are neither sent nor (with probes, under verify) read
    twice; a layer that writes where it should not is still caught."""
    model, spec = bench
    tr = _trace(trace_root, TRACE)
    _, _, addr, size, _ = tr.of_kind("check_crc")[0].args
    r, tx, rx = _run(spec, tr)
    assert r.status == "passed", r.summary()
    assert tx + rx < 1.1 * size  # one read of the region, whichever integrity
    model.stray = (addr + size // 2 + 1, b"\x01")
    bad, _, _ = _run(spec, tr)
    assert bad.status == "failed", bad.summary()


def test_probes_only_where_the_check_can_restore_them():
    """A probe sits only in bytes nothing touches and only inside checks whose expected bytes the
    model knows (its CRC equals the check's): elsewhere nothing would restore the set-up's bytes."""
    from nvdla_hil.harness.traces import CheckResult
    from nvdla_hil.harness.traces.lean import Footprint as _Footprint, plant_probes as _plant

    lo, n = 0x8000_0000, 8192
    known_ck = CheckResult("s0", "crc", "pri_mem", lo, 4096, 0, line=1)
    unknown_ck = CheckResult("s1", "crc", "pri_mem", lo + 4096, 4096, 0, line=2)
    fp = _Footprint(reads={}, finals={1: np.zeros(4096, dtype=np.uint8)})
    free = np.ones(n, dtype=bool)
    free[:64] = False  # written by a layer
    target = np.zeros(n, dtype=np.uint8)
    need = np.zeros(n, dtype=bool)
    probes: dict = {}
    _plant([known_ck, unknown_ck], lo, free, target, need, fp, 1016, probes, np.zeros(n, dtype=bool),
           np.zeros(n, dtype=np.uint8))
    assert set(probes) == {1}
    planted = np.flatnonzero(need)
    assert planted.size and planted.min() >= 64 and planted.max() < 4096
    assert np.array_equal(np.flatnonzero(probes[1].mask), planted)
    assert (np.diff(planted[::4]) == 1016).all() and (planted[::4] % 4 == 0).all()
