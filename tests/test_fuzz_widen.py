"""RTL coverage holes fed back into the fuzz constraints (harness/fuzz/widen.py, ``coverage rtl RUN
--widen UNIT``): the generator's own fields traced to the register fields they set, a register
field never set high widening the field that drives it, and the file written loading as
constraints. The expected register values follow NVDLA's encoding of a size as size - 1
(``D_DATA_CUBE_IN_WIDTH``: "width - 1", NVDLA's data-format and register documents)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nvdla_hil.harness.analysis import rtl_coverage as rc
from nvdla_hil.harness.fuzz.registry import load_constraints
from nvdla_hil.harness.fuzz.widen import constraints_text, field_drivers, widen

REG = "/hw/outdir/nv_small/vmod/nvdla/pdp/NV_NVDLA_PDP_RDMA_reg.v"


def test_each_size_field_is_traced_to_its_register_field_as_size_minus_one() -> None:
    c = load_constraints("pdp", profile="nv_small")
    got = {(d.field, d.register): d for d in field_drivers(c, ["width", "height", "channels"])}
    for name, reg in (("width", "PDP_RDMA.D_DATA_CUBE_IN_WIDTH.CUBE_IN_WIDTH"),
                      ("height", "PDP_RDMA.D_DATA_CUBE_IN_HEIGHT.CUBE_IN_HEIGHT"),
                      ("channels", "PDP_RDMA.D_DATA_CUBE_IN_CHANNEL.CUBE_IN_CHANNEL")):
        d = got[(name, reg)]
        assert (d.slope, d.lo, d.at_lo) == (1.0, 1, 0)  # size 1 is register value 0
    # nothing traced to a one-bit flag, nor a field to a register field of another dimension
    assert not [d for d in got.values() if d.register.endswith("_BYPASS")]
    assert ("width", "PDP_RDMA.D_DATA_CUBE_IN_HEIGHT.CUBE_IN_HEIGHT") not in got


def test_a_register_field_never_set_high_widens_its_field_two_bits_past(tmp_path: Path) -> None:
    c = load_constraints("pdp", profile="nv_small")
    drivers = field_drivers(c, ["height", "channels", "kernel_h"])
    # CUBE_IN_HEIGHT (13 bits) never above bit 3: the height range reaches register value 2^6 - 1
    gaps = [("reg2dp_cube_in_height", 4, 13), ("reg2dp_d0_cube_in_channel", 12, 13), ("reg2dp_kernel_height", 3, 4)]
    by = {w.field: w for w in widen(c, gaps, drivers)}
    assert (by["height"].lo, by["height"].hi, by["height"].old_hi) == (1, 64, c.fields["height"].hi)
    # bit 12 of 13: every bit set is register value 8191, 8192 channels, the unit's legal maximum
    assert (by["channels"].hi, by["channels"].capped) == (8192, False)
    # KERNEL_HEIGHT's bit 3 needs a kernel of 9 or more: PDP's kernels stop at 8, which the shipped
    # range draws already (the holes report calls such bits unreachable, nothing to widen)
    assert "kernel_h" not in by
    ws = list(by.values())
    out = tmp_path / "widened.yaml"
    out.write_text(constraints_text(c, ws, "RUN"))
    w = load_constraints("pdp", profile="nv_small", files=[out])
    assert (w.fields["height"].lo, w.fields["height"].hi) == (1, 64)
    assert w.fields["kernel_w"] == c.fields["kernel_w"]  # the rest as shipped


def test_no_gap_a_field_drives_widens_nothing() -> None:
    c = load_constraints("pdp", profile="nv_small")
    drivers = field_drivers(c, ["height"])
    assert widen(c, [("reg2dp_dma_rd_req_addr", 8, 32)], drivers) == []
    assert widen(c, [("reg2dp_cube_in_height", 1, 13)], drivers) == []  # the shipped range sets bit 2 already


def _run_folder(tmp: Path, address_bits: range = range(0)) -> Path:
    """A fuzz run's coverage folder of one test: ``reg2dp_cube_in_height`` bits 0..3 toggled, 4..12 not
    (and ``reg2dp_src_base_addr_low`` bits ``address_bits``, none toggled)."""
    def key(signal: str, bit: int) -> str:
        fields = [("t", "toggle"), ("page", "v_toggle/reg"), ("f", REG), ("l", "4"), ("n", "0"),
                  ("o", f"{signal}[{bit}]:0->1")]
        return "".join(f"\x01{k}\x02{v}" for k, v in fields) + "\x01h\x02top.u_pdp_rdma"

    tmp.mkdir(parents=True, exist_ok=True)
    raw = tmp / "t.dat"
    lines = [f"C '{key('reg2dp_cube_in_height', b)}' {int(b < 4)}\n" for b in range(13)]
    lines += [f"C '{key('reg2dp_src_base_addr_low', b)}' 0\n" for b in address_bits]
    raw.write_bytes(("# SystemC::Coverage-3\n" + "".join(lines)).encode())
    folder = tmp / "cov" / "tests"
    folder.mkdir(parents=True)
    rc.compact(raw, folder, test="fuzz-pdp-s1-00000", config="nv_small", build="nvdla-nv_small-k-cov-line-toggle")
    return tmp / "cov"


def test_cli_writes_the_widened_constraints_once_and_never_overwrites(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    out = tmp_path / "pdp-widened.yaml"
    cmd = [sys.executable, "-m", "nvdla_hil.harness.cli", "coverage", "rtl", str(run), "--widen", "pdp",
           "--widen-out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"--constraints {out}" in r.stdout
    text = out.read_text()
    assert "height: {range: [1, 64]" in text and "CUBE_IN_HEIGHT bits 4..12 never set" in text
    assert load_constraints("pdp", profile="nv_small", files=[out]).fields["height"].hi == 64
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 2 and "not overwritten" in again.stderr
    assert out.read_text() == text
    bad = subprocess.run(cmd[:-4] + ["--widen", "nosuch"], capture_output=True, text=True, timeout=300, check=False)
    assert bad.returncode == 2 and "unknown unit 'nosuch'" in bad.stderr


def test_steering_feeds_the_baselines_holes_into_its_constraints(tmp_path: Path) -> None:
    """``fuzz --steer rtl-coverage --baseline RUN`` widens before it draws (harness/fuzz/steer.py
    ``hole_constraints``): the same range as ``coverage rtl RUN --widen``, from the baseline's own
    build folder, and nothing for a baseline of another configuration."""
    from nvdla_hil.harness.fuzz.steer import hole_constraints

    run = _run_folder(tmp_path)
    c = load_constraints("pdp", profile="nv_small")
    out = tmp_path / "holes"
    out.mkdir()
    f, widened = hole_constraints(c, run / "tests", out)
    assert f is not None and f.parent == out
    assert widened == ["height [1, 64]"]
    assert load_constraints("pdp", profile="nv_small", files=[f]).fields["height"].hi == 64
    other = load_constraints("pdp", profile="nv_small_256_full")
    assert hole_constraints(other, run, out) == (None, [])  # the baseline measured nv_small's RTL


def test_address_bits_never_toggled_widen_the_surfaces_placement(tmp_path: Path) -> None:
    """A baseline that never toggled DMA address bits above the harness's placement (bits 24 and up:
    every surface sat in the first MiBs above 0x80000000) gets the cases' placement drawn over its
    whole legal range (``place_mib``, harness/fuzz/legal.py), which no shipped constraint draws; a
    case placed there has every surface and every address register 1920 MiB higher."""
    from nvdla_hil.harness.fuzz.case import sampler_for
    from nvdla_hil.harness.fuzz.legal import PLACE_MIB
    from nvdla_hil.harness.fuzz.registry import GENERATORS
    from nvdla_hil.harness.fuzz.steer import hole_constraints

    c = load_constraints("pdp", profile="nv_small")
    assert "place_mib" not in c.fields  # uniform draws stay where every seed had them
    out = tmp_path / "holes"
    out.mkdir()
    _, widened = hole_constraints(c, _run_folder(tmp_path / "low") / "tests", out)
    assert widened == ["height [1, 64]"]  # address bits 0..23: within the placement, nothing to widen
    f, widened = hole_constraints(c, _run_folder(tmp_path / "high", range(24, 31)) / "tests", out)
    assert f is not None and widened == ["height [1, 64]", f"place_mib [0, {PLACE_MIB.hi}]"]
    wide = load_constraints("pdp", profile="nv_small", files=[f])
    assert (wide.fields["place_mib"].lo, wide.fields["place_mib"].hi) == (0, 1920)

    def addresses(pinned: dict) -> tuple[list[int], int]:
        s = sampler_for(c, 5, 0, 0, "verilator")
        s.v.update(pinned)
        d = GENERATORS["pdp"](s, c.profile, lambda d: {})
        low = next(v for r in d.registers for k, v in r["fields"].items() if k == "SRC_BASE_ADDR_LOW")
        return [int(o["address"]) for o in [*(m for m, _ in d.inputs), *d.outputs]], int(low)

    (at0, low0), (at_hi, low_hi) = addresses({}), addresses({"place_mib": 1920})
    assert all(a >= 0x8000_0000 for a in at0) and [a - b for a, b in zip(at_hi, at0, strict=True)] == [1920 << 20] * len(at0)
    assert low_hi - low0 == 1920 << 20 or (low_hi - low0) << 5 == 1920 << 20  # the register holds the address (or address >> 5)
