"""The lean memory set-up for slow links (``run_trace(setup="lean")``): only the bytes the
layers read and the checked regions cross the link, nothing is read before the run, and the
never-green guarantees hold: a target that computes nothing fails even when its memory still
holds the right answer from an earlier run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import parse_trace, run_trace

pytestmark = pytest.mark.slow  # serial trace runs on a slow link: `make test-slow`, CI's second step

TRACES = ["cdp_8x8x32_lrn3_int8_0", "pdp_8x9x19_3x3_ave_int8_0", "sdp_3x3x33_bs_bn_int8_0", "dc_6x8x192_3x3x192x32_int8_0",
          "sdp_pdp_32x16x32_pass_through_int8_0"]


class Counting(ModelTarget):
    """A model target that counts the bytes crossing its "link" and when they cross."""

    def __init__(self, *a, **k) -> None:  # noqa: ANN002, ANN003
        super().__init__(*a, **k)
        self.tx = self.rx = 0
        self.rx_before_launch = 0
        self.launched = False

    def mem_write(self, address, data, port="pri_mem"):  # noqa: ANN001, ANN201
        self.tx += np.asarray(data).size
        return super().mem_write(address, data, port=port)

    def mem_read(self, address, size, port="pri_mem", **kw):  # noqa: ANN001, ANN003, ANN201
        self.rx += size
        if not self.launched:
            self.rx_before_launch += size
        return super().mem_read(address, size, port=port, **kw)

    def _write32(self, address, value, posted):  # noqa: ANN001, ANN202
        if self._lookup(address).name == "D_OP_ENABLE" and value & 1:
            self.launched = True
        return super()._write32(address, value, posted)


class Idle(Counting):
    """A broken accelerator: every layer completes but writes nothing."""

    def _run(self, layer, group):  # noqa: ANN001, ANN202
        from nvdla_hil.harness.refmodel.base import LayerResult

        status = self.regmap.register("GLB", "S_INTR_STATUS")
        self._events.append((status.field(f"{layer.done[0]}_DONE_STATUS{group}").mask, None))
        self.layers_run.append((layer.done[0], group, LayerResult()))


def _trace(trace_root: Path, name: str):  # noqa: ANN202
    p = trace_root / name
    if not p.is_dir():
        pytest.skip(f"{name} not in {trace_root}")
    return parse_trace(p)


@pytest.mark.parametrize("name", TRACES)
def test_lean_passes_like_full_and_moves_fewer_bytes(trace_root: Path, name: str) -> None:
    tr = _trace(trace_root, name)
    got = {}
    for mode in ("full", "lean"):
        with Counting("nv_small") as t:
            r = run_trace(tr, t, poison=True, setup=mode)
        assert r.status == "passed", r.summary()
        assert r.setup == mode
        got[mode] = (t.tx, t.rx, t.rx_before_launch, [(c.vacuous, c.poisoned) for c in r.checks])
    (ftx, frx, _, fck), (ltx, lrx, lpre, lck) = got["full"], got["lean"]
    assert lck == fck  # same vacuity and poisoning verdicts, decided without reading
    assert lpre == 0  # nothing read before the run
    checked = sum(c.args[3] for c in tr.of_kind("check_crc"))
    assert lrx == checked  # each checked region read once, after the run
    assert ltx + lrx < ftx + frx


@pytest.mark.parametrize("setup", ["full", "lean"])
def test_stale_right_answer_does_not_pass(trace_root: Path, setup: str) -> None:
    """Run a trace correctly, then again on the same memory with an accelerator that computes
    nothing: the output regions still hold the right answer, and the run must fail."""
    tr = _trace(trace_root, "sdp_3x3x33_bs_bn_int8_0")
    with Counting("nv_small") as good:
        assert run_trace(tr, good, poison=True, setup=setup).passed
        memories = good.memories
    with Idle("nv_small") as bad:
        bad.memories = memories  # the board's DRAM keeps last run's output
        r = run_trace(tr, bad, poison=True, setup=setup)
    assert r.status == "failed", r.summary()


def test_lean_falls_back_to_full_when_the_model_cannot_run_it(trace_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nvdla_hil.harness.traces import player

    tr = _trace(trace_root, "sdp_3x3x33_bs_bn_int8_0")
    monkeypatch.setattr(player, "footprint", lambda *a, **k: None)  # as for a unit the model refuses
    with Counting("nv_small") as t:
        r = run_trace(tr, t, poison=True, setup="lean")
    assert r.setup.startswith("full (the model cannot run this trace")
    assert t.rx_before_launch > 0  # the full set-up's vacuity read
    # nothing poisoned without the model's masks: the output region has gaps the SDP never writes,
    # which a whole-region poison would turn into a false failure of this correct run
    assert r.status == "passed", r.summary()
    assert r.setup.endswith("; no region poisoned (only the model can say which bytes the layers write)")
    assert [c.poisoned for c in r.checks] == [False]
    assert "\n  memory set-up: full (the model cannot run this trace" in r.summary()  # said where a user reads it


def test_auto_is_lean_only_on_a_slow_link(trace_root: Path) -> None:
    tr = _trace(trace_root, "sdp_3x3x33_bs_bn_int8_0")
    with Counting("nv_small") as t:
        assert run_trace(tr, t, poison=True).setup == "full"
        t.lean_setup = True  # what a serial target says of its link
        assert run_trace(tr, t, poison=True).setup == "lean"
