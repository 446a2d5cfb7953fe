"""The C model's time per layer and its known limits (``harness/targets/cmod.py``, the fuzz runner).

One hung layer (``fuzz --unit conv-winograd --target cmod --seed 6162 --first 35``: INT16 Winograd,
compressed weights, kernels 16..27 all zero) waited the flat 900 s. Measured since: NVDLA's C model
never finishes a layer whose compressed weight data ends on a 128-byte boundary (7040 bytes there)
before trailing all-zero kernel groups, at every precision, direct or Winograd (CDMA's data is done,
its weights never are); a zero group first or in between, or data ending off the boundary, runs.
Now a layer waits its budget (the C model's cost of its work), the hang is a named known limit
refused at launch, and the fuzz units steer clear of it for the C model.

Without a checkout only the budget, the limit's check (on generated cases) and the steering run;
with ``NVDLA_HW_V1`` (nvdlav1) and ``NVDLA_HW`` (master, for the AC type headers GCC >= 7 needs)
the C model runs: built into the cache, which takes minutes the first time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.drivers.driver import NvdlaDriver
from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.fuzz.case import generate
from nvdla_hil.harness.fuzz.registry import load_constraints
from nvdla_hil.harness.fuzz.runner import case_time
from nvdla_hil.harness.targets.cmod import KNOWN_LIMITS, CmodTarget, LayerView, compressed_data_ends_before_zero_group
from nvdla_hil.harness.targets.workload import LAYER_LATENCY_CYCLES, case_budget, estimate_work
from nvdla_hil.harness.vectors.load import load_case

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]
HANG = "C model hang: compressed weights whose data ends on a 128-byte boundary before an all-zero kernel group"
SEED, INDEX = 6162, 35  # the case that hung for 900 s


def _case(tmp: Path, dut: str, index: int = INDEX, seed: int = SEED, sets: tuple[str, ...] = ()):
    c = load_constraints("conv-winograd", profile=None, files=[], sets=list(sets))
    return load_case(generate(c, seed, index, tmp / dut / f"{seed}-{index}", semantics="cmod", dut=dut))


def _view(case) -> LayerView:  # noqa: ANN001 - a vectors Case
    """The layer as a target sees it: the case's registers by address and its input surfaces."""
    prof = load_profile("nv_full")
    written = {int(prof.regmap.register(r.name).address): int(r.value) for r in case.registers}

    def mem_read(addr: int, size: int, port: str) -> np.ndarray:
        for i in case.inputs:
            blob = np.asarray(i.packed, dtype=np.uint8)
            if i.port == port and i.address <= addr and addr + size <= i.address + blob.size:
                return blob[addr - i.address : addr - i.address + size]
        return np.zeros(size, np.uint8)

    return LayerView(written, prof.regmap, prof.mac_atomic_k, mem_read)


def _group_nonzeros(case) -> list[int]:  # noqa: ANN001
    w = next(i for i in case.inputs if i.name == "weight")
    a = np.asarray(w.data)
    return [int(np.count_nonzero(a[g : g + 16].view("<u2"))) for g in range(0, a.shape[0], 16)]


def test_the_hung_case_is_the_known_limit_and_cmod_cases_steer_clear(tmp_path: Path) -> None:
    for_model = _case(tmp_path, "model")
    for_cmod = _case(tmp_path, "cmod")
    assert _group_nonzeros(for_model) == [3520, 0]  # 7040 bytes of data, then kernels 16..27 all zero
    assert _group_nonzeros(for_cmod) == [3520, 1]  # the same draws, one weight kept for the C model
    assert compressed_data_ends_before_zero_group(_view(for_model))
    assert not compressed_data_ends_before_zero_group(_view(for_cmod))
    assert [what for what, check in KNOWN_LIMITS if check(_view(for_model))] == [HANG]
    assert "a trailing zero group given 1 weight(s): C model hang" in for_cmod.description
    # the rest of the case is the same layer (the compressed data holds one more weight)
    regs = {r.name: r.value for r in for_model.registers}
    diff = {n for n, v in ((r.name, r.value) for r in for_cmod.registers) if regs.get(n) != v}
    assert diff == {"CDMA.D_WEIGHT_BYTES", "CSC.D_WEIGHT_BYTES"}


def _wgs_view(wgs: list[int], precision: int, kernels: int) -> LayerView:
    """A compressed layer (as a target saw it) whose WGS surface holds ``wgs`` (bytes per group)."""
    rm = load_profile("nv_full").regmap
    enc = {"CDMA.D_WEIGHT_FORMAT": {"WEIGHT_FORMAT": 1}, "CDMA.D_MISC_CFG": {"CONV_MODE": 1, "PROC_PRECISION": precision},
           "CDMA.D_WEIGHT_SIZE_1": {"WEIGHT_KERNEL": kernels - 1}, "CDMA.D_WGS_ADDR_LOW": {"WGS_ADDR_LOW": 0x1000 >> 5},
           "CDMA.D_WEIGHT_RAM_TYPE": {"WEIGHT_RAM_TYPE": 1}}
    written = {int(rm.register(n).address): rm.register(n).encode(**f) for n, f in enc.items()}
    blob = np.asarray(wgs, dtype="<u4").view(np.uint8)

    def mem_read(addr: int, size: int, port: str) -> np.ndarray:
        assert (addr, port) == (0x1000, "pri_mem")
        return blob[:size]

    return LayerView(written, rm, 32, mem_read)


@pytest.mark.parametrize(("wgs", "precision", "kernels", "hangs"), [
    ([7040, 0], 1, 28, True),  # the fuzz case: INT16, 7040 = 55 x 128 bytes, then a zero group
    ([6912, 0], 1, 28, True),  # 54 x 128
    ([2816, 0], 0, 39, True),  # INT8 (groups of 32 kernels): hung on the C model too
    ([256, 0, 0], 2, 35, True),  # FP16, two trailing zero groups
    ([6976, 0], 1, 28, False),  # 64-byte aligned only: runs
    ([7042, 0], 1, 28, False),
    ([7040, 16], 1, 28, False),  # a 128-byte boundary, but no zero group after it
    ([0, 7040], 1, 28, False),  # a zero group first
    ([128, 0, 20], 1, 40, False),  # a zero group in between
    ([0, 0], 1, 29, False),  # no data at all
    ([7040, 0], 1, 16, False),  # one group of 16 kernels: the zero "group" is not there
])
def test_the_limit_is_the_measured_rule(wgs: list[int], precision: int, kernels: int, hangs: bool) -> None:
    """Each row was run on the C model (a case's weights rewritten to these group sizes; 20 s limit):
    the rows marked True never finished, the others did."""
    assert compressed_data_ends_before_zero_group(_wgs_view(wgs, precision, kernels)) is hangs


#: draws (seed, index, kernels) whose compressed weights, drawn for the model, do end on a 128-byte
#: boundary before an all-zero group (found by searching draws; INT8's groups are 32 kernels wide, so
#: its draws need more than 32 kernels to have a second group at all)
UNDER_THE_LIMIT = {"int8": [(28, 11, "33..40")], "int16": [(12, 6, "17..40"), (20, 4, "17..40")],
                   "fp16": [(3, 9, "17..40"), (12, 12, "17..40")]}


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_cmod_cases_never_fall_under_the_limit(tmp_path: Path, precision: str) -> None:
    """Compressed cases drawn for the C model (zero groups and empty kernels forced) never do: the
    same draws made for the model fall under it, and for the C model they are steered clear."""
    for seed, index, kernels in UNDER_THE_LIMIT[precision]:
        sets = (f"precision={precision}", "weight_format=compressed", "zero_groups=1", f"kernels={kernels}")
        for_model = _case(tmp_path, "model", index=index, seed=seed, sets=sets)
        for_cmod = _case(tmp_path, "cmod", index=index, seed=seed, sets=sets)
        assert compressed_data_ends_before_zero_group(_view(for_model)), (seed, index)
        assert not compressed_data_ends_before_zero_group(_view(for_cmod)), (seed, index)
        assert "C model hang" in for_cmod.description, for_cmod.description
    for index in range(3):  # and draws that never came near it stay clear
        case = _case(tmp_path, "cmod", index=index, seed=7, sets=(f"precision={precision}", "weight_format=compressed",
                                                               "zero_groups=1", "kernels=17..40"))
        assert not compressed_data_ends_before_zero_group(_view(case))


def test_budget_scales_with_the_layers_work(tmp_path: Path) -> None:
    """The C model's budget is floor + factor x work cycles / its speed: small for the hung case,
    larger for a layer with more work; the generic budget (other callers) scales too; a target
    without a speed of its own (the model) keeps the generic budget."""
    t = CmodTarget(config="nv_full")  # not opened: the budget needs no process
    drv = NvdlaDriver(t, "nv_full")

    def work(case) -> object:  # noqa: ANN001
        return estimate_work([(drv.register(r.name), r.value) for r in case.registers], drv.profile)

    small_case = _case(tmp_path, "model")
    big_case = _case(tmp_path, "model", index=0, sets=("width=20", "height=16", "channels=64", "kernels=40",
                                                       "precision=int16", "weight_format=uncompressed"))
    small, big = case_time(small_case, drv, t), case_time(big_case, drv, t)
    for b, c in ((small, small_case), (big, big_case)):
        assert b.cycles == work(c).cycles
        busy = b.cycles - LAYER_LATENCY_CYCLES * 2  # two engines: CACC and the flying SDP
        assert b.seconds == pytest.approx(t.layer_timeout_floor + t.layer_timeout_factor * busy / t.work_cycles_per_second)
        assert "CONV:" in b.detail and "the target's cost of the layer" in b.describe()
    assert t.layer_timeout_floor < small.seconds < big.seconds < 900
    generic_small, generic_big = (case_budget(c, drv, t) for c in (small_case, big_case))
    assert generic_small.rate == t.cycles_per_second and generic_small.seconds < generic_big.seconds
    from nvdla_hil.harness.targets.model import ModelTarget

    m = ModelTarget("nv_full")
    assert case_time(small_case, NvdlaDriver(m, "nv_full"), m) == case_budget(small_case, NvdlaDriver(m, "nv_full"), m)


def test_layer_time_bounds_every_request_within_it() -> None:
    t = CmodTarget(config="nv_full", request_timeout=900.0)
    with t.layer_time(12.5):
        assert t.request_timeout == 12.5
    assert t.request_timeout == 900.0
    with pytest.raises(RuntimeError), t.layer_time(3.0):
        raise RuntimeError
    assert t.request_timeout == 900.0


# ---- on NVDLA's C model ---------------------------------------------------------------------------


def _checkouts() -> tuple[str, str]:
    v1, master = os.environ.get("NVDLA_HW_V1"), os.environ.get("NVDLA_HW")
    if not v1 or not master:
        pytest.skip("NVDLA_HW_V1 (nvdlav1) and NVDLA_HW (master) checkouts not set: no C model to run")
    return v1, master


@pytest.fixture(scope="module")
def cmod():
    v1, _ = _checkouts()
    with CmodTarget(nvdla_hw=v1, config="nv_full", request_timeout=900.0) as t:  # the default, said here:
        yield t  # the wait a layer gets without its budget (the hang tests' bound)


def test_known_limit_is_refused_at_launch_on_the_cmod(cmod, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused at launch: the C model never receives the launch write nor a wait for the layer
    (what it was sent is recorded), so nothing of the hang's budget is spent."""
    from nvdla_hil.harness.fuzz.runner import run_budgeted

    sent: list[str] = []
    request = cmod._request

    def record(line: str, **kw):  # noqa: ANN202
        sent.append(line)
        return request(line, **kw)

    monkeypatch.setattr(cmod, "_request", record)
    res = run_budgeted(_case(tmp_path, "model"), cmod, "rtl")
    monkeypatch.undo()
    assert res.status == "skipped", res.message
    assert res.message.startswith(f"CmodLimit: {HANG}: not launched"), res.message
    writes = [line.split()[1:] for line in sent if line.startswith("write ")]
    assert writes, sent  # the layer was programmed...
    assert not any(cmod._is_launch(int(a, 0), int(v, 0)) for a, v in writes)  # ...but never launched
    assert not any(line.startswith("wait_irq") for line in sent), sent  # nor waited for
    cmod.reset()


def test_a_hang_costs_its_budget_and_is_named(cmod, tmp_path: Path) -> None:
    """Run the known hang anyway, with a short budget: the C model is killed when the budget is
    spent (not after its 900 s request timeout), and the error names the limit and says how long it
    waited and why. "Not after 900 s" is the bound: the wait the layer would get without its budget
    is the target's request_timeout, so ending before it is the budget's doing, under any load."""
    from nvdla_hil.harness.fuzz.runner import run_budgeted

    unbudgeted = cmod.request_timeout  # 900 s (the fixture's): far beyond the 8 s budget
    cmod.refuse_known_limits = False
    cmod.layer_timeout_floor, cmod.layer_timeout_factor = 8.0, 0.0
    try:
        t0 = time.monotonic()
        res = run_budgeted(_case(tmp_path, "model"), cmod, "rtl")
        took = time.monotonic() - t0
    finally:
        cmod.refuse_known_limits = True
        del cmod.layer_timeout_floor, cmod.layer_timeout_factor  # the class's values again
    assert res.status == "error", res.message
    assert res.message.startswith(f"{HANG} (a known limit of NVDLA's C model): LayerTimeoutError"), res.message
    assert "no done interrupt within 8 s" in res.message
    assert "hung layer: waited 8.0 s" in res.message and "floor 8 s" in res.message
    assert took < unbudgeted, took  # killed by the budget, not by the request timeout
    cmod.reset()  # the killed model restarts


def test_fuzz_replay_of_the_hung_case_runs_on_the_cmod(tmp_path: Path) -> None:
    """The command that waited 900 s: now the case is drawn for the C model, runs and agrees.
    (A layer that hung again would end by its budget as an error, failing the exit code and the
    summary below; the subprocess timeout only guards against a hang of the command itself.)"""
    v1, master = _checkouts()
    proc = subprocess.run([*CLI, "fuzz", "--unit", "conv-winograd", "--target", "cmod", "--nvdla-hw", v1, "--seed",
                           str(SEED), "--first", str(INDEX), "--count", "1"], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "NVDLA_HW": master}, cwd=tmp_path)
    out = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, out
    assert "summary: 1 cases" in proc.stdout and "1 passed" in proc.stdout, out


# ---- the C model's SDP read-DMA hang (deconv_s3) ------------------------------------------------

HANG_NET = Path(__file__).parent / "data" / "cmod_sdp_rdma_hang" / "deconv_s3-nv_full-int8.nvdla"
SDP_RDMA = "known limit of NVDLA's C model: SDP_RDMA was enabled for one group while the other group was already enabled"


def test_sdp_rdma_enable_order_counts_an_operation_enabled_after_the_next() -> None:
    """The firmware's SDP_RDMA writes as the C model saw them for deconv_s3: groups 0, 1, 0 in turn
    are in order; op 9 (group 0) then op 13 (group 0) before op 11 (group 1), then op 15 (group 1),
    are two enables for the group enabled last (the sequence that hangs the C model)."""
    from nvdla_hil.harness.targets.cmod import _RdmaEnableOrder

    rm = load_profile("nv_full").regmap
    pointer, enable = (int(rm.register(f"SDP_RDMA.{r}").address) for r in ("S_POINTER", "D_OP_ENABLE"))
    order = _RdmaEnableOrder()
    for group in (0, 1, 0, 1, 0):
        order.write("nv_full", pointer, group)
        order.write("nv_full", enable, 1)
        order.write("nv_full", enable, 0)  # a write of 0 enables nothing
    assert order.out_of_order == 0
    for group in (0, 1, 1):  # the last was op 9 (group 0): op 13 (group 0) came next, then 11 and 15 (group 1)
        order.write("nv_full", pointer, group)
        order.write("nv_full", enable, 1)
    assert order.out_of_order == 2  # 13 after 9 (both group 0), 15 after 11 (both group 1)


def test_the_c_models_sdp_rdma_hang_is_named_and_the_model_runs_the_network(tmp_path: Path, nvdla_sw: str) -> None:
    """deconv_s3 (tests/data/cmod_sdp_rdma_hang): NVDLA's C model stops at SDP operation 15 (16 of
    31 operations complete, the rest never start) and the error names the C model's limit; the
    operations it finished agree with the model, which runs all 31 (no golden: "ran, no golden")."""
    v1, master = _checkouts()
    run = [*CLI, "loadable", "run", str(HANG_NET), "--input", f"{HANG_NET}.input.raw", "--profile", "nv_full",
           "--model-semantics", "cmod", "--nvdla-sw", nvdla_sw]
    env = {**os.environ, "NVDLA_HW": master}
    cm = subprocess.run([*run, "--target", "cmod", "--nvdla-hw", v1], capture_output=True, text=True, timeout=600,
                        env=env, cwd=tmp_path)
    out = cm.stdout + cm.stderr
    assert cm.returncode == 1, out
    assert f"operations completed so far: {list(range(15)) + [16]} of 31; {SDP_RDMA}" in out, out
    assert "(the 16 operation(s) that completed agree with the reference model)" in out, out
    md = subprocess.run([*run, "--target", "model"], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert md.returncode == 0, md.stdout + md.stderr
    assert "31 operation(s) handed to the firmware" in md.stdout and "RAN, NO GOLDEN" in md.stdout, md.stdout
    assert SDP_RDMA not in md.stdout + md.stderr
