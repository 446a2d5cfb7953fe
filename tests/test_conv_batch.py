"""Batch > 1 direct convolution (nv_full): CDMA ``D_BATCH_NUMBER``/``D_BATCH_STRIDE``, the same layer
on every cube, SDP writing batch ``b`` at ``D_DST_BASE_ADDR + b * D_DST_BATCH_STRIDE``.

Goldens: the C model's outputs (testvectors/conv_batch, ``nvdla-hil fuzz --unit conv --set batch=N
--target cmod --keep``), and the independence of the batches checked against single-batch runs of
the same cubes (each batch's output equals the layer run alone on that cube).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1] / "testvectors"


def _cases() -> list[Path]:
    from nvdla_hil.harness.vectors import find_cases

    return find_cases(ROOT / "conv_batch")


def _batches(path: Path) -> int:
    text = " ".join(path.joinpath("case.yaml").read_text().split())
    return int(text.split(" batches")[0].rsplit(" ", 1)[1])


def test_conv_batch_suite_covers_counts_and_precisions():
    cases = _cases()
    assert len(cases) >= 5
    text = " ".join(" ".join(p.joinpath("case.yaml").read_text().split()) for p in cases)
    for what in ("conv int8 direct", "conv int16 direct", "conv fp16 direct", "BATCH_STRIDE", "DST_BATCH_STRIDE"):
        assert what in text, what
    assert {_batches(p) for p in cases} >= {2, 4, 8}


@pytest.mark.parametrize("path", _cases(), ids=lambda p: p.name)
def test_conv_batch_suite_on_the_model(path: Path):
    """Every batch's output surface equals the C model's, element for element, with the statistics."""
    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import load_case, run_case

    case = load_case(path)
    assert "C model" in case.provenance["note"], case.provenance
    assert len(case.outputs) == _batches(path) > 1
    with ModelTarget(case.profile, semantics="cmod") as t:
        res = run_case(case, t, target_kind="model")
    assert res.status == "passed", res.summary()


def test_batches_are_independent_layers():
    """Batch b of a batched layer = the same layer (batch 1) run on cube b: re-run every batch of the
    first suite case as a single-batch layer on the model and compare with the C model's batch output."""
    import dataclasses

    from nvdla_hil.harness.targets.model import ModelTarget
    from nvdla_hil.harness.vectors import execute_case, load_case

    path = _cases()[0]
    case = load_case(path)
    nb = _batches(path)
    srcs = sorted((s for s in case.inputs if s.name.startswith("src")), key=lambda s: s.name)
    dsts = sorted(case.outputs, key=lambda s: s.name)
    for b in range(nb):
        regs = []
        for r in case.registers:
            f = dict(r.fields or {})
            if r.name in ("CDMA.D_BATCH_NUMBER", "CSC.D_BATCH_NUMBER", "CACC.D_BATCH_NUMBER"):
                f["BATCHES"] = 0
            elif r.name == "SDP.D_FEATURE_MODE_CFG":
                f["BATCH_NUMBER"] = 0
            elif r.name == "CDMA.D_DAIN_ADDR_LOW_0":
                f["DATAIN_ADDR_LOW_0"] = int(srcs[b].address) >> 5
            elif r.name == "SDP.D_DST_BASE_ADDR_LOW":
                f["DST_BASE_ADDR_LOW"] = int(dsts[b].address) >> 5
            regs.append((r.name, f))
        single = dataclasses.replace(case, registers=tuple(_setting(case, n, f) for n, f in regs),
                                     outputs=(dsts[b],), statistics=None)  # fmt: skip
        with ModelTarget(case.profile, semantics="cmod") as t:
            outs, _ = execute_case(single, t)
        got = np.asarray(outs[dsts[b].name], dtype=np.uint8).reshape(-1)
        want = np.fromfile(path / dsts[b].blob, dtype=np.uint8)  # the C model's batch-b surface, packed
        assert got.size == want.size and np.array_equal(got, want), f"batch {b}"


def _setting(case, name: str, fields: dict):  # noqa: ANN001, ANN202
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.vectors import RegisterSetting

    blk, reg = name.split(".", 1)
    r = load_profile(case.profile).regmap.register(blk, reg)
    value = 0
    for k, v in fields.items():
        value = r.field(k).insert(value, int(v))
    return RegisterSetting(name=name, value=value, fields=fields)
