"""Functional coverage: bins hit by hand-made inputs (expected bins derived by hand), the JSON
format and its merge, the session plugin's pieces, and the hooks' no-op guarantee."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nvdla_hil.drivers.precision import LutConfig
from nvdla_hil.harness.analysis import coverage as cm
from nvdla_hil.harness.plugin.coverage import coverage_for_session
from nvdla_hil.harness.refmodel.cdp import CdpConfig, cdp_lrn
from nvdla_hil.harness.refmodel.lut import sdp_lut
from nvdla_hil.harness.refmodel.sdp import output_convert


def _hits(cov: cm.Coverage, prefix: str) -> dict[str, int]:
    return {k[len(prefix) + 1:]: v for k, v in cov.counts.items() if k.startswith(prefix + ".") and v}


def test_sdp_lut_bins_by_hand() -> None:
    # index i = (x - START) >> select, a hit while i <= N-2 (LE 63, LO 255): with select 0 the
    # first hit is d = 1 -> index 1, so entry 0 needs select >= 1.
    # LO linear select 1 from 100: hits x in 101..611; LE linear select 0 from 300: 301..363.
    # Priorities: uflow LO, oflow LE, hybrid LO.
    p = LutConfig(le_function="linear", le_start=300, le_end=364, le_index_select=0,
                  lo_start=100, lo_end=612, lo_index_select=1,
                  uflow_priority="LO", oflow_priority="LE", hybrid_priority="LO")
    x = np.array([
        50,    # both UF                                   -> uflow.prio_lo
        101,   # LO d=1 -> index 0; LE UF                  -> lo_hit, lo.index_first
        200,   # LO index 50; LE UF                        -> lo_hit
        301,   # LO index 100, LE index 1                  -> both_hit.prio_lo, le_linear.hit
        363,   # LO index 131, LE index 63 (last)          -> both_hit.prio_lo, le_linear.hit, le.index_last
        611,   # LO index 255 (last), LE d=311 OF          -> lo_hit, lo.index_last
        2000,  # both OF                                   -> oflow.prio_le
    ])
    cov = cm.Coverage()
    sdp_lut(x, p, np.zeros(65, np.int16), np.zeros(257, np.int16), observer=cov)
    assert _hits(cov, "sdp.lut") == {
        "uflow.prio_lo": 1, "lo_hit": 3, "lo.index_first": 1, "lo.index_last": 1, "both_hit.prio_lo": 2,
        "le_linear.hit": 2, "le.index_last": 1, "oflow.prio_le": 1,
        "cfg.le_select.zero": 1, "cfg.lo_select.pos": 1,
    }


def test_sdp_lut_hybrid_miss_and_exponent() -> None:
    # LO (0, 256]; LE exponent eo = -60 from 1000: OF once d >= 2^4 = 16; disjoint tables:
    # x = 500: LO OF, LE UF -> miss with the hybrid priority (LE)
    p = LutConfig(le_function="exponent", le_start=1000, le_end=1016, le_index_offset=-60,
                  lo_start=0, lo_end=256, lo_index_select=0, hybrid_priority="LE")
    x = np.array([500, 1001, 1002])  # miss; LE exponent hits: d=1 -> k=0, i=60; d=2 -> i=61
    cov = cm.Coverage()
    sdp_lut(x, p, np.zeros(65, np.int16), np.zeros(257, np.int16), observer=cov)
    assert _hits(cov, "sdp.lut") == {"miss.prio_le": 1, "le_hit": 2, "le_exponent.hit": 2,
                                     "cfg.le_offset.neg": 1, "cfg.lo_select.zero": 1}


def test_sdp_out_saturation_and_shift_bins() -> None:
    cov = cm.Coverage()
    x = np.array([-1000, -10, 0, 10, 1000])
    y, flag = output_convert(x, offset=0, scale=1, shift=0, out_bits=8)
    cov.event("sdp_out", x=x, y=y, flag=flag, channels=5, out_bits=8, offset=0, scale=1, shift=0)
    assert _hits(cov, "sdp.out") == {"sat_low": 1, "sat_high": 1, "in_range": 3, "shift.zero": 1}
    cov2 = cm.Coverage()
    cov2.event("sdp_out", x=x, y=y, flag=flag, channels=5, out_bits=8, offset=0, scale=1, shift=63)
    assert _hits(cov2, "sdp.out") == {"in_range": 5, "shift.max": 1}


def test_cdp_bins_by_hand() -> None:
    # one pixel, 2 channels of 8 lanes; window 3; input scale 200 saturates x9 (9 bits): 127*200
    cfg = CdpConfig(normalz_len=0, datin_scale=200, datout_scale=1, datout_shifter=0, mul_bypass=True)
    lut = LutConfig(le_function="linear", le_start=0, le_end=64, lo_start=0, lo_end=256,
                    le_index_select=30, lo_index_select=30)  # huge tables: every sum hits both
    x = np.zeros((1, 1, 8), dtype=np.int8)
    x[..., 0], x[..., 1] = 127, -128
    cov = cm.Coverage()
    cdp_lrn(x, 2, cfg, np.zeros(65, np.int16), np.zeros(257, np.int16), lut, observer=cov)
    h = _hits(cov, "cdp")
    assert h["in.sat_high"] == 1 and h["in.sat_low"] == 1
    assert h["window.3"] == 1 and h["mul_bypass"] == 1 and h["in.shift.zero"] == 1 and h["out.shift.zero"] == 1
    # lanes: sums > 0 at lanes 0..2 (window), 0 at lanes 3..7 -> s <= START = UF on both
    assert h["lut.both_hit.prio_le"] == 3 and h["lut.uflow.prio_le"] == 5
    assert h["lut.le.index_first"] == 3 and h["lut.lo.index_first"] == 3


def test_layer_bins_from_model_target() -> None:
    from nvdla_hil.harness.vectors import load_case, run_case, bundled_root
    from nvdla_hil.harness.targets.model import ModelTarget

    case = load_case(bundled_root() / "cdp_lut" / "cdp_lut-s1-000")
    cov = cm.Coverage()
    with ModelTarget(case.profile, coverage=cov) as t:
        assert run_case(case, t).passed
    c, h, w = case.inputs[0].shape
    assert cov.layers == 1 and cov.profiles == {"nv_small"}
    assert cov.counts["cdp.ports.read.pri"] == 1 and cov.counts["cdp.ports.write.pri"] == 1
    assert cov.counts["cdp.cube.multi_line"] == int(h > 1)
    assert cov.counts["cdp.cube.partial_atom"] == int(c % 8 != 0)
    assert sum(cov.counts[k] for k in cov.counts if k.startswith("cdp.lut.")) > 0


def test_spec_collector_feeds_its_model_targets_only_and_results_are_identical() -> None:
    """A collector is given, never installed process-wide: targets made from a spec with it feed
    it; a target made without one (in the same process, at the same time) feeds nothing."""
    from nvdla_hil.harness.targets import TargetSpec, open_target
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import bundled_root, load_case, run_case

    case = load_case(bundled_root() / "sdp_lut" / "sdp_lut-s1-003")
    with ModelTarget(case.profile) as t:  # no collector: as before
        plain = run_case(case, t)
    cov = cm.Coverage()
    with open_target(TargetSpec(kind="model", profile=case.profile, coverage=cov)) as t, ModelTarget(case.profile) as other:
        observed = run_case(case, t)
        run_case(case, other)
    assert plain.passed and observed.passed
    assert all(np.array_equal(plain.outputs[k], observed.outputs[k]) for k in plain.outputs)
    assert cov.layers == 1 and sum(v for k, v in cov.counts.items() if k.startswith("sdp.lut.")) > 0


def test_json_round_trip_and_merge(tmp_path) -> None:
    a, b = cm.Coverage(), cm.Coverage()
    a.hit("sdp.lut.le_hit", 3)
    b.hit("sdp.lut.le_hit", 2)
    b.hit("cdp.window.9")
    a.layers, b.layers = 1, 2
    pa, pb = a.write(tmp_path / "a.json"), b.write(tmp_path / "b.json")
    m = cm.merge(cm.load(pa), cm.load(pb))
    assert m.counts["sdp.lut.le_hit"] == 5 and m.counts["cdp.window.9"] == 1 and m.layers == 3
    d = json.loads(pa.read_text())
    assert d["format"] == cm.FORMAT and set(d["bins"]) == set(cm.BINS)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": cm.FORMAT, "bins": {"sdp.lut.nope": 1}}))
    with pytest.raises(ValueError, match="unknown bin 'sdp.lut.nope'"):
        cm.load(bad)


def test_reachable_and_table() -> None:
    small = set(cm.reachable(["nv_small"]))
    full = set(cm.reachable(["nv_small_256_full"]))
    assert "sdp.lut.le_hit" not in small and "sdp.lut.le_hit" in full
    assert "cdp.ports.read.sec" not in small and "cdp.ports.read.sec" in full
    cov = cm.Coverage()
    cov.hit("cdp.window.3")
    t = cm.format_table(cov, ["nv_small"], ["cdp.cvt"])
    assert "window.3" in t and "EMPTY" in t and "total: 1 of" in t


def test_session_plugin_merges_workers(tmp_path) -> None:
    class _PM:
        pass

    class _Cfg:
        pluginmanager = _PM()

    worker_cfg = _Cfg()
    worker_cfg.workerinput = {}
    worker_cfg.workeroutput = {}
    w = coverage_for_session(worker_cfg, profiles=["nv_small"])
    w.cov.hit("cdp.window.5", 4)
    w.pytest_sessionfinish(None, 0)
    assert worker_cfg.workeroutput["nvdla_hil_coverage"]["bins"]["cdp.window.5"] == 4

    ctl = coverage_for_session(_Cfg(), tmp_path / "coverage.json", profiles=["nv_small"])

    class _Node:
        workeroutput = worker_cfg.workeroutput

    ctl.pytest_testnodedown(_Node(), None)
    lines: list[str] = []

    class _TR:
        def write_sep(self, *a, **k) -> None:
            pass

        def write_line(self, s: str) -> None:
            lines.append(s)

    ctl.pytest_terminal_summary(_TR())
    ctl.pytest_sessionfinish(None, 0)
    assert cm.load(tmp_path / "coverage.json").counts["cdp.window.5"] == 4
    table = (tmp_path / "coverage.txt").read_text().splitlines()
    assert any("window.5" in ln and "4" in ln for ln in table)
    assert any("reachable bins hit" in ln and "coverage.txt" in ln for ln in lines)  # one line on the terminal


def _bins_of(case_dir: str) -> set[str]:
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import bundled_root, load_case, run_case

    case = load_case(bundled_root() / case_dir)
    cov = cm.Coverage()
    with ModelTarget(case.profile, semantics=case.provenance.get("semantics") or "rtl", coverage=cov) as t:
        assert run_case(case, t).passed
    return {k for k, v in cov.counts.items() if v}


def test_pdp_layer_bins_follow_its_registers() -> None:
    # the case's own description: "fuzz pdp fp16 max 3x7 stride 1x4 pad l/t/r/b 2/6/2/6 (multiple), ..., split 4"
    got = {b for b in _bins_of("pdp_fp16/fuzz-pdp-s21-00001") if b.startswith("pdp.")}
    want = {"pdp.method.max", "pdp.prec.fp16", "pdp.kernel.non_square", "pdp.stride.overlap", "pdp.pad.any", "pdp.split"}
    assert want <= got
    assert not got & {"pdp.method.avg", "pdp.method.min", "pdp.kernel.1x1", "pdp.kernel.8", "pdp.stride.gap",
                      "pdp.pad.asymmetric", "pdp.flying", "pdp.prec.int8", "pdp.prec.int16"}


def test_conv_layer_bins_follow_its_registers() -> None:
    # "fuzz conv-image T_A8B8G8R8 -> int8: 16x5 x_offset 7, 7 kernels 4x4 (pre-extended 16 channels), ..."
    got = {b for b in _bins_of("conv_image/fuzz-conv-image-s1200-00001") if b.startswith("conv.")}
    assert {"conv.direct", "conv.image", "conv.pixel.rgba8", "conv.prec.int8"} <= got
    assert not got & {"conv.winograd", "conv.compressed", "conv.kernel.1x1", "conv.kernel.large", "conv.pixel.mono",
                      "conv.prec.fp16", "conv.prec.int16", "conv.batch"}


@pytest.mark.parametrize("suite,unit", [("pdp_fp16", "pdp"), ("cdp_fp16", "cdp")])
def test_nan_inf_bins_follow_the_c_models_counters(suite: str, unit: str) -> None:
    """The FP16 special-value bins are hit exactly for the layers whose golden statistics (NVDLA's
    C model's NaN/INF input counters, kept with the suite) are non-zero."""
    from nvdla_hil.harness.vectors import bundled_root, find_cases, load_case

    seen = {"nan": 0, "inf": 0}
    for path in find_cases(bundled_root() / suite):
        case = load_case(path)
        if case.statistics is None:  # a layer kept without counters (split width: they are not compared)
            continue
        got = _bins_of(f"{suite}/{path.name}")
        for k in ("nan", "inf"):
            golden = int(case.statistics.get(f"{k}_input", 0))
            assert (f"{unit}.fp16.{k}_in" in got) == (golden > 0), (path.name, k, golden)
            seen[k] += golden > 0
    assert seen["nan"] and seen["inf"]  # the suite has layers of both kinds
