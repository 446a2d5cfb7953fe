"""Every public NVDLA configuration on the model target: NVDLA's own traces of each
configuration folder run on that configuration's profile, poisoned, and pass their CRCs.

The trace sets (a folder of configuration folders, as nvdla/hw ``verif/tests/trace_tests``)
come from ``NVDLA_TRACE_SETS`` (CI: ``../shared/nvdla/trace_tests``); tests that need them
skip cleanly, naming the variable, when it is absent. The golden CRCs are NVDLA's.
"""

from __future__ import annotations

import os
import re
import shutil
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest


from nvdla_hil.harness.cli import main
from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import TraceError, find_trace_sets, parse_trace, run_trace
from nvdla_hil.harness.traces.dat import load_dat

pytestmark = pytest.mark.slow  # NVDLA's traces of every configuration, poisoned: `make test-slow`, CI's second step


@pytest.fixture(scope="module")
def trace_sets() -> Path:
    root = os.environ.get("NVDLA_TRACE_SETS")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA_TRACE_SETS (a folder of per-configuration trace folders, e.g. "
                    "../shared/nvdla/trace_tests) is not set")
    return Path(root)


def test_every_configuration_passes_poisoned(trace_sets: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    sets = find_trace_sets(trace_sets)
    configs = sorted({c for c, _ in sets if c})
    assert all(c is not None for c, _ in sets)
    # NVDLA's public configurations with trace tests, and their traces (6 + 1 + 1 + 63 + 62 + 62)
    assert configs == ["nv_large", "nv_medium_1024_full", "nv_medium_512", "nv_small", "nv_small_256", "nv_small_256_full"]
    assert len(sets) == 195
    junit = tmp_path / "junit.xml"
    code = main(["regress", "--suite", "traces", "--traces", str(trace_sets), "--nvdla-config", "all",
                 "--poison", "--junit", str(junit), "--results-dir", str(tmp_path / "results")])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert (f"summary: {len(sets)} passed, 0 failed, 0 error, 0 bad input, 0 infrastructure, 0 skipped: not modelled, "
            "0 skipped: lacks unit") in out
    # one row per configuration in the per-suite table (its columns: the outcomes the run had)
    for c in configs:
        n = sum(1 for cc, _ in sets if cc == c)
        assert re.search(rf"^traces {re.escape(c)}\s+{n}(\s+0)*$", out, re.M), c  # n passed, every other class 0
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(cases) == len(sets)
    # each ran on its own configuration's profile, except traces whose features it lacks
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    for name, p in props.items():
        cfg = name.split("[", 1)[1].split("/", 1)[0]
        if "ew" in name and cfg in ("nv_small", "nv_small_256"):
            assert p["profile"] == "nv_small_256_full" and f"which {cfg} lacks" in p["profile_note"], name
        else:
            assert p["profile"] == cfg, name


def test_ew_trace_on_a_configuration_without_ew(trace_sets: Path, capsys) -> None:  # noqa: ANN001
    t = trace_sets / "nv_small" / "sdp_3x3x33_ew_int8_reg_0"
    assert main(["trace", str(t), "--nvdla-config", "nv_small"]) == 2
    assert "needs sdp_ew, which nv_small lacks" in capsys.readouterr().err
    assert main(["trace", str(t), "--nvdla-config", "nv_small,nv_small_256_full", "--poison"]) == 0
    out = capsys.readouterr().out
    assert "[nv_small_256_full on model]" in out and "PASSED" in out


def _variant(src: Path, dst: Path, edits: list[tuple[str, str]]) -> Path:
    shutil.copytree(src, dst)
    cfg = dst / f"{src.name}.cfg"
    text = cfg.read_text()
    for a, b in edits:
        assert a in text, a
        text = text.replace(a, b)
    cfg.rename(dst / f"{dst.name}.cfg")
    (dst / f"{dst.name}.cfg").write_text(text)
    return dst


TWO_PORT_CASES = {
    # SDP: input over MCIF, BN operand (NRDMA) over CVIF
    "sdp_3x3x33_bn_int8_mem_0": (
        "0x90000c20, 0x1400", "reg_write(NVDLA_SDP_RDMA.D_NRDMA_CFG_0, 0x32);",
        "reg_write(NVDLA_SDP_RDMA.D_NRDMA_CFG_0, 0x12);", "NRDMA_RAM_TYPE"),
    # convolution: features over MCIF, weights over CVIF
    "dc_13x15x64_5x3x64x16_int8_0": (
        "0x80004100, 0x3c00", "reg_write(NVDLA_CDMA.D_WEIGHT_RAM_TYPE_0, 0x1);",
        "reg_write(NVDLA_CDMA.D_WEIGHT_RAM_TYPE_0, 0x0);", "WEIGHT_RAM_TYPE"),
}


@pytest.mark.parametrize("name", sorted(TWO_PORT_CASES))
def test_engines_on_both_ports(trace_sets: Path, tmp_path: Path, name: str) -> None:
    """One engine of the layer on the secondary port (its RAM_TYPE = CV, its data loaded into
    sec_mem), the others on the primary: NVDLA's CRC of the one-port trace must still match,
    poisoned; with the data on the other port than the register says it must not (these two
    traces are sensitive to that operand: the model reads each engine's own port)."""
    region, ram_mc, ram_cv, field = TWO_PORT_CASES[name]
    src = trace_sets / "nv_small_256_full" / name
    addr = region.split(",")[0]
    moved = [(f"mem_init(pri_mem, {region}, ALL_ZERO);", f"mem_init(sec_mem, {region}, ALL_ZERO);"),
             (f'mem_load(pri_mem, {addr}, "', f'mem_load(sec_mem, {addr}, "')]
    two = _variant(src, tmp_path / "two_port", [*moved, (ram_mc, ram_cv)])
    with ModelTarget("nv_small_256_full") as t:
        res = run_trace(two, t, poison=True)
    assert res.status == "passed", res.summary()
    assert res.checks[0].poisoned
    wrong = _variant(src, tmp_path / "wrong_port", moved)  # data on CV, register still says MC
    with ModelTarget("nv_small_256_full") as t:
        assert run_trace(wrong, t).status == "failed"
    with ModelTarget("nv_small_256") as t, pytest.raises(TraceError, match=r"\.cfg:\d+: mem_init on sec_mem, but "
                                                                        r"nv_small_256 has no secondary memory port"):
        run_trace(two, t)  # no secondary port: the trace is refused before anything is sent
    reg_only = _variant(src, tmp_path / "reg_only", [(ram_mc, ram_cv)])
    with ModelTarget("nv_small_256") as t:  # ... and a layer that selects it is refused naming the field
        res = run_trace(reg_only, t)
    assert res.status == "error" and f"{field} selects the secondary memory port" in res.message


def test_poison_spares_inputs_that_share_the_region(trace_sets: Path, tmp_path: Path) -> None:
    """An output region that also holds the layer's input: only bytes the layer writes and
    never reads are poisoned, so the trace still passes (and would fail if input bytes were
    poisoned: the CRC covers them)."""
    src = trace_sets / "nv_small" / "sdp_8x8x32_bypass_int8_0"
    # NVDLA's trace copies its 0x800-byte input unchanged (its golden CRC is the input's): its output
    # moved to just after the input, one check over both holds input + input
    inp = load_dat(src / "SDP_0_input.dat").tobytes()
    assert len(inp) == 0x800
    shared = _variant(src, tmp_path / "shared", [
        ('mem_load(pri_mem, 0x80080000, "SDP_0_output.dat");\n', ""),
        ("D_DST_BASE_ADDR_LOW_0, 0x80080000", "D_DST_BASE_ADDR_LOW_0, 0x80000800"),
        ("0x80080000, 0x800, 0xf1e8ba9e", f"0x80000000, 0x1000, {zlib.crc32(inp + inp):#x}")])
    with ModelTarget("nv_small", record_reads=True) as t:
        res = run_trace(shared, t, poison=True)
        assert res.status == "passed" and res.checks[0].poisoned, res.summary()
        read = t.memories["pri_mem"].read_mask(0x80000000, 0x1000)
    assert read[:0x800].all() and not read[0x800:].any()  # the input half read (so spared), the output half not


def test_sync_notify_and_wait(tmp_path: Path) -> None:
    ok = tmp_path / "ok"
    ok.mkdir()
    (ok / "ok.cfg").write_text(
        "reg_write(NVDLA_CACC.D_OP_ENABLE_0, 0x1);\n"
        "sync_notify(NVDLA_CACC, L0_CACC);\n"
        "sync_wait(NVDLA_CMAC_A, L0_CACC);  // after CACC\n"
        "reg_write(NVDLA_CMAC_A.D_OP_ENABLE_0, 0x1);\n"
        "intr_notify(CACC_0, s0);\ncheck_crc(s0, pri_mem, 0x80000000, 0x10, 0x12345678);\n")
    t = parse_trace(ok)
    assert [c.kind for c in t.commands][:4] == ["reg_write", "sync_notify", "sync_wait", "reg_write"]
    assert t.commands[2].args == ("NVDLA_CMAC_A", "L0_CACC")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "bad.cfg").write_text("sync_wait(NVDLA_CSC, NEVER);\nsync_notify(NVDLA_CACC, NEVER);\n"
                                 "intr_notify(CACC_0, s0);\ncheck_crc(s0, pri_mem, 0x80000000, 0x10, 0x12345678);\n")
    with pytest.raises(TraceError, match=r"bad\.cfg:1: sync_wait on event 'NEVER' that no earlier sync_notify"):
        parse_trace(bad)


def test_nothing_but_notifies_checks_nothing(tmp_path: Path) -> None:
    """A trace of only sync_* commands checks nothing: refused, never a pass."""
    d = tmp_path / "n"
    d.mkdir()
    (d / "n.cfg").write_text("sync_notify(NVDLA_CACC, E);\nsync_wait(NVDLA_CSC, E);\n")
    with pytest.raises(TraceError, match="checks no memory"):
        parse_trace(d)
