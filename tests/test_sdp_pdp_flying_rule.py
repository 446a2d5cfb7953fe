"""SDP -> PDP on the fly: the input must end where the last pooling window does (issue 40).

``fuzz --unit sdp-pdp --target verilator --profile nv_small_256_full --seed 7171 --first 24`` drew
SDP 22x4x5 into PDP MAX 2x6 stride 2x6, PAD_TOP 5, output height 1: the one window covers input
row 0 only, and PDP raised done while SDP never did. From NVDLA's RTL (``refmodel/pdp.py``
``_check_flying_tail``, file:line there): on the fly PDP's done follows its last output beat,
not the end of SDP's stream; the done flips PDP's register group and gates its core clock, so the
input rows / columns no window needs meet a stopped PDP. On nv_small_256_full (SDP 2 elements a
cycle into PDP's 1) SDP hangs (3 rows, 1 row, 7 columns past the window all hung on the Verilator
build; the layer with PAD_TOP 2, whose window ends on the last row, completes); on nv_small the tail
is swallowed and the next flying layer writes wrong outputs, then hangs. An RTL limitation: the
C model runs such layers. So:

* the model refuses it under ``rtl`` semantics, naming the rule (the reported layer, replayed with
  ``--set flying_tail=1``: a value, so the random stream is the one that drew it);
* the generator never draws it (``flying_tail`` 0: the cube is trimmed to the last window's reach,
  a convolution's fixed output gets the padding that covers it);
* a layer whose last window ends exactly on the last input column and row is accepted;
* and fuzz's wait for a layer on the Verilator target is ``vectors run``'s budget of the layer's
  work (``targets/workload.py`` ``case_budget``, through ``fuzz/runner.py`` ``run_budgeted``): the
  reported hang cost 60 s, not a flat 600 s.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.fuzz import runner
from nvdla_hil.harness.fuzz.case import generate
from nvdla_hil.harness.fuzz.draw import Sampler
from nvdla_hil.harness.fuzz.registry import load_constraints
from nvdla_hil.harness.fuzz.units.pdp_cdp import _METHOD, _PATHS, _pool_geometry, fit_pool
from nvdla_hil.harness.refmodel.pdp import FLYING_TAIL_RULE, unread_tail
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.targets.verilator import VerilatorTarget
from nvdla_hil.harness.targets.workload import case_budget
from nvdla_hil.harness.vectors import load_case, run_case
from nvdla_hil.harness.vectors.layer import rng_for
from nvdla_hil.semantics import Semantics

SEED, INDEX, PROFILE = 7171, 24, "nv_small_256_full"  # the reported hang


def _fields(case) -> dict[str, dict[str, int]]:  # noqa: ANN001 - a vectors Case
    prof = load_profile(case.profile)
    return {r.name: prof.regmap.register(r.name).decode(r.value) for r in case.registers}


def _tail(case) -> tuple[int, int]:  # noqa: ANN001
    """(columns, rows) of PDP's input past its last window, from the case's registers."""
    f = _fields(case)
    k, p = f["PDP.D_POOLING_KERNEL_CFG"], f["PDP.D_POOLING_PADDING_CFG"]
    cols = unread_tail(f["PDP.D_DATA_CUBE_IN_WIDTH"]["CUBE_IN_WIDTH"] + 1, f["PDP.D_DATA_CUBE_OUT_WIDTH"]["CUBE_OUT_WIDTH"] + 1,
                       k["KERNEL_WIDTH"] + 1, k["KERNEL_STRIDE_WIDTH"] + 1, p["PAD_LEFT"])
    rows = unread_tail(f["PDP.D_DATA_CUBE_IN_HEIGHT"]["CUBE_IN_HEIGHT"] + 1, f["PDP.D_DATA_CUBE_OUT_HEIGHT"]["CUBE_OUT_HEIGHT"] + 1,
                       k["KERNEL_HEIGHT"] + 1, k["KERNEL_STRIDE_HEIGHT"] + 1, p["PAD_TOP"])
    return int(cols), int(rows)


def _with(case, **changes: dict[str, int]):  # noqa: ANN001, ANN202
    """``case`` with register fields changed: ``_with(c, PDP__D_POOLING_PADDING_CFG={"PAD_TOP": 3})``."""
    prof = load_profile(case.profile)
    want = {k.replace("__", "."): v for k, v in changes.items()}
    regs = []
    for r in case.registers:
        if r.name in want:
            reg = prof.regmap.register(r.name)
            value = reg.encode(r.value, **want.pop(r.name))
            r = dataclasses.replace(r, value=value, fields=reg.decode(value))
        regs.append(r)
    assert not want, want
    return dataclasses.replace(case, registers=tuple(regs))


def _run(case, semantics: Semantics = "rtl"):  # noqa: ANN001, ANN202
    with ModelTarget(case.profile, semantics=semantics) as t:
        return run_case(case, t)


def _gen(tmp_path: Path, profile: str, seed: int, index: int, sets: list[str], semantics: Semantics = "rtl"):  # noqa: ANN202
    c = load_constraints("sdp-pdp", profile=profile, sets=sets)
    return load_case(generate(c, seed, index, tmp_path / f"{profile}-{seed}-{index}", semantics=semantics, dut="verilator"))


# ---- (a) the reported layer ---------------------------------------------------------------------------------


def test_reported_layer_is_refused_naming_the_rule(tmp_path: Path) -> None:
    # drawn as before the rule (flying_tail 1 is a value: no draw, the same stream); its golden under
    # the C model's semantics, which run it
    case = _gen(tmp_path, PROFILE, SEED, INDEX, ["flying_tail=1"], semantics="cmod")
    d = case.description.replace("\n", " ")
    assert "cube 22x4x5" in d and "max 2x6 stride 2x6 pad l/t/r/b 0/5/1/0" in d and "-> 3x1" in d, d
    assert _tail(case) == (0, 3)  # the window covers input row 0 only
    res = _run(case)
    assert res.status == "error", res.summary()
    for what in (FLYING_TAIL_RULE, "RTL limitation", "ON_FLYING", "3 row(s) below", "input 5x4, output 3x1"):
        assert what in res.message, (what, res.message)
    assert _run(case, "cmod").passed  # legal for the C model


def test_reported_seed_is_now_drawn_within_the_rule(tmp_path: Path) -> None:
    case = _gen(tmp_path, PROFILE, SEED, INDEX, [])
    d = case.description.replace("\n", " ")
    assert "cube 22x1x5" in d and "max 2x6 stride 2x6 pad l/t/r/b 0/5/1/0" in d and "-> 3x1" in d, d
    assert _tail(case) == (0, 0)
    assert _run(case).passed


# ---- (b) the generator never draws it ------------------------------------------------------------------------


def _geometry(profile: str, sets: list[str], n: int = 2000) -> np.ndarray:
    """``[n, 12]``: (W, OW, KW, SW, PL, PR, H, OH, KH, SH, PT, PB) of ``n`` draws: the memory-source
    geometry (:func:`_pool_geometry`) or a convolution-source fit (:func:`fit_pool`) over a random
    fixed output, as ``gen_sdp_pdp`` draws them."""
    c = load_constraints("sdp-pdp", profile=profile, sets=sets)
    geo = []
    for i in range(n):
        s = Sampler(c, rng_for(40, i), dut="verilator")
        path, method = str(s["path"]), _METHOD[str(s["method"])]
        prec = _PATHS[path] or "int8"
        if path == "conv":
            w, h = (int(v) for v in s.rng.integers(1, 48, size=2))
            g = fit_pool(s, prec, method, w, h)
            assert (g.w, g.h) == (w, h)
        else:
            g = _pool_geometry(s, prec, method, flying=True)
        geo.append((g.w, g.ow, g.kw, g.sw, g.pl, g.pr, g.h, g.oh, g.kh, g.sh, g.pt, g.pb))
    return np.array(geo)


@pytest.mark.parametrize("profile", ["nv_small", "nv_small_256_full", "nv_full"])
def test_generator_geometry_never_leaves_input_past_the_last_window(profile: str) -> None:
    w, ow, kw, sw, pl, pr, h, oh, kh, sh, pt, pb = _geometry(profile, []).T
    assert not unread_tail(w, ow, kw, sw, pl).any() and not unread_tail(h, oh, kh, sh, pt).any()
    # the output sizes are still the hardware's, and an unused trailing pad stays below the stride
    assert ((w + pl + pr - kw) // sw + 1 == ow).all() and ((h + pt + pb - kh) // sh + 1 == oh).all()
    assert ((pr < sw) | (pr <= (ow - 1) * sw + kw - w - pl)).all() and ((pb < sh) | (pb <= (oh - 1) * sh + kh - h - pt)).all()
    assert (kh > sh).any() and (pt > 0).any() and (pb > 0).any() and (pr > 0).any()  # overlap and padding still drawn
    # not vacuous: the same draws with flying_tail 1 (the C model's semantics) do leave input unread
    w, ow, kw, sw, pl, pr, h, oh, kh, sh, pt, pb = _geometry(profile, ["flying_tail=1"], 500).T
    assert unread_tail(w, ow, kw, sw, pl).any() and unread_tail(h, oh, kh, sh, pt).any()


@pytest.mark.parametrize("profile", ["nv_small", "nv_small_256_full", "nv_full"])
def test_generated_cases_keep_to_the_rule_and_pass_on_the_model(profile: str, tmp_path: Path) -> None:
    paths = set()
    for i, sets in enumerate([[]] * 6 + [["path=conv"]] * 2):
        case = _gen(tmp_path, profile, 41, i, sets)  # the golden needs the model under rtl semantics: it accepted
        assert _tail(case) == (0, 0), case.description
        paths.add(case.description.split(":", 1)[0])
    assert any("conv" in p for p in paths) and any("conv" not in p for p in paths), paths


# ---- (c) the boundary is legal --------------------------------------------------------------------------------


@pytest.mark.parametrize("n_in, n_out, k, stride, lead, tail", [
    (4, 1, 6, 6, 2, 0), (4, 1, 6, 6, 3, 1), (4, 1, 6, 6, 5, 3),  # the reported rows: PAD_TOP 2 ends on row 3
    (6, 3, 2, 2, 0, 0), (6, 2, 2, 2, 0, 2), (5, 3, 2, 2, 0, 0),  # a window reaching into PAD_RIGHT is no tail
    (15, 1, 8, 8, 0, 7), (1, 1, 8, 1, 7, 0),
])
def test_unread_tail(n_in: int, n_out: int, k: int, stride: int, lead: int, tail: int) -> None:
    assert unread_tail(n_in, n_out, k, stride, lead) == tail


@pytest.mark.parametrize("profile, sets", [
    # the last window ends on the last row (PAD_TOP 2 + 4 rows = the 6-row kernel) and column (3 x 2 = 6)
    ("nv_small_256_full", ["kernel_h=6", "stride_h=6", "pad_top=2", "pad_bottom=0", "height=4",
                           "kernel_w=2", "stride_w=2", "pad_left=0", "pad_right=0", "width=6"]),
    # ... through the padding it covers: 2 windows of 3 rows over 4 rows + PAD_BOTTOM 2
    ("nv_full", ["path=fp16_to_fp16", "method=average", "kernel_h=3", "stride_h=3", "pad_top=0", "pad_bottom=2",
                 "height=4", "kernel_w=3", "stride_w=2", "pad_left=1", "pad_right=1", "width=6"]),
])
def test_layer_ending_on_the_last_window_is_accepted_one_more_line_is_not(profile: str, sets: list[str],
                                                                        tmp_path: Path) -> None:
    case = _gen(tmp_path, profile, 42, 0, ["split=0", *sets])
    f = _fields(case)
    w, h = f["PDP.D_DATA_CUBE_IN_WIDTH"]["CUBE_IN_WIDTH"] + 1, f["PDP.D_DATA_CUBE_IN_HEIGHT"]["CUBE_IN_HEIGHT"] + 1
    assert (w, h) == (6, 4) and _tail(case) == (0, 0), case.description  # drawn as set: no trimming needed
    assert _run(case).passed
    # one output line fewer (a single output row: its window one row higher): the input then runs past it
    oh, ow = f["PDP.D_DATA_CUBE_OUT_HEIGHT"]["CUBE_OUT_HEIGHT"], f["PDP.D_DATA_CUBE_OUT_WIDTH"]["CUBE_OUT_WIDTH"]
    pad = dict(f["PDP.D_POOLING_PADDING_CFG"], PAD_BOTTOM=0, PAD_RIGHT=0)
    rows = {"PDP__D_DATA_CUBE_OUT_HEIGHT": {"CUBE_OUT_HEIGHT": oh - 1}} if oh else \
        {"PDP__D_POOLING_PADDING_CFG": dict(pad, PAD_TOP=pad["PAD_TOP"] + 1)}
    for changes, want, tail in ((rows, "row(s) below", (0, 1)),
                                ({"PDP__D_DATA_CUBE_OUT_WIDTH": {"CUBE_OUT_WIDTH": ow - 1}}, "column(s) right of", (1, 0))):
        worse = _with(case, **changes)
        assert (np.array(_tail(worse)) >= tail).all() and _tail(worse)[tail.index(1)] > 0
        res = _run(worse)
        assert res.status == "error" and FLYING_TAIL_RULE in res.message and want in res.message, res.summary()


# ---- fuzz's wait for a layer on the Verilator target -------------------------------------------------------------


def test_fuzz_waits_for_a_verilator_layer_as_long_as_its_work_warrants(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """``run_budgeted`` (each fuzz case) waits :func:`case_budget` of the layer, the function
    ``vectors run`` waits (``harness/suites/test_vectors.py``): a floor for a small layer, more for a
    big one, never the Verilator target's flat ``suggested_layer_timeout`` (600 s)."""
    waited: list[float] = []

    def fake_run_case(case, target, drv, *, target_kind, timeout):  # noqa: ANN001, ANN202
        waited.append(timeout)
        return SimpleNamespace(status="passed", message="")

    monkeypatch.setattr(runner, "run_case", fake_run_case)
    small = _gen(tmp_path, PROFILE, SEED, INDEX, ["flying_tail=1"], semantics="cmod")  # the reported layer
    big = _gen(tmp_path, PROFILE, 43, 0, ["path=int8_to_int8", "width=256", "height=64", "channels=32", "kernel_w=1",
                                           "kernel_h=1", "split=0"])
    target = VerilatorTarget(config=PROFILE)  # not opened: its budget attributes only
    assert target.suggested_layer_timeout == 600.0 and not target.work_cycles_per_second
    budgets = []
    for case in (small, big):
        assert runner.run_budgeted(case, target, "rtl").status == "passed"
        budgets.append(case_budget(case, NvdlaDriver(target, load_profile(PROFILE)), target))
    assert waited == [b.seconds for b in budgets]
    assert waited[0] == 60.0 and "floor 60 s" in budgets[0].describe()  # the reported hang: 60 s
    assert waited[1] > 2 * waited[0] and budgets[1].cycles > 10 * budgets[0].cycles  # scales with the work
    assert 600.0 not in waited
