"""What RTL coverage holes mean (harness/analysis/rtl_holes.py): each unhit point of a small
hand-made design sorted by why, against two profiles, and the register-field gaps named."""

from __future__ import annotations

from pathlib import Path

from nvdla_hil.drivers.profiles import load_profile
from nvdla_hil.harness.analysis import rtl_coverage as rc
from nvdla_hil.harness.analysis import rtl_holes as rh

VMOD = "/hw/outdir/nv_small/vmod"
#: (page, file, line, S, comment, hier, count): every rule's case, one hit point, one plain miss
POINTS = [
    ("v_toggle/fifo", f"{VMOD}/nvdla/cdma/NV_NVDLA_CDMA_fifo.v", 3, "", "pwrbus_ram_pd[0]:0->1", "top.u_cdma", 0),
    ("v_toggle/sdp", f"{VMOD}/nvdla/sdp/NV_NVDLA_SDP_core.v", 9, "", "dp2reg_status_nan_input_num[3]:0->1", "top.u_sdp", 0),
    ("v_toggle/sdp", f"{VMOD}/nvdla/sdp/NV_NVDLA_SDP_core.v", 9, "", "lut_le_data[1]:0->1", "top.u_sdp", 0),
    ("v_toggle/cdp", f"{VMOD}/nvdla/cdp/NV_NVDLA_CDP_DP_lut.v", 9, "", "lut_le_data[1]:0->1", "top.u_cdp", 0),
    ("v_toggle/reg", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_reg.v", 4, "", "reg2dp_cube_in_width[0]:0->1", "top.u_pdp", 1),
    ("v_toggle/reg", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_reg.v", 4, "", "reg2dp_cube_in_width[1]:0->1", "top.u_pdp", 2),
    ("v_toggle/reg", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_reg.v", 4, "", "reg2dp_cube_in_width[2]:0->1", "top.u_pdp", 0),
    ("v_toggle/reg", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_reg.v", 4, "", "reg2dp_cube_in_width[3]:0->1", "top.u_pdp", 0),
    ("v_toggle/dma", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_RDMA_eg.v", 5, "", "dma_rd_req_addr[30]:0->1", "top.u_pdp", 0),
    ("v_toggle/dma", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_RDMA_eg.v", 5, "", "dma_rd_req_addr[3]:0->1", "top.u_pdp", 0),
    ("v_line/rom", f"{VMOD}/nvdla/cfgrom/NV_NVDLA_CFGROM_rom.v", 7, "7", "block", "top.u_cfgrom", 0),
    ("v_line/core", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_core.v", 12, "12", "block", "top.u_pdp", 0),
    ("v_line/core", f"{VMOD}/nvdla/pdp/NV_NVDLA_PDP_core.v", 13, "13", "block", "top.u_pdp", 5),
]


def _run(tmp: Path) -> rc.RunCoverage:
    def key(page: str, f: str, line: int, lines: str, comment: str, hier: str) -> str:
        fields = [("t", page[2:page.index("/")]), ("page", page), ("f", f), ("l", str(line)), ("n", "0")]
        if lines:
            fields.append(("S", lines))
        fields.append(("o", comment))
        return "".join(f"\x01{k}\x02{v}" for k, v in fields) + f"\x01h\x02{hier}"

    raw = tmp / "t.dat"
    raw.write_bytes(("# SystemC::Coverage-3\n" + "".join(f"C '{key(*p[:6])}' {p[6]}\n" for p in POINTS)).encode())
    folder = tmp / "tests"
    folder.mkdir()
    rc.compact(raw, folder, test="suite::t", config="nv_small", build="nvdla-nv_small-k-cov-line-toggle")
    return rc.merge_folder(folder)["nv_small"]


def test_each_unhit_point_is_sorted_by_why_against_the_configurations_features(tmp_path: Path) -> None:
    run = _run(tmp_path)
    small = rh.classify(run, load_profile("nv_small").features)
    assert small["cdma"]["held"] == {"RAM power-down bus: tied by NVDLA's top": 1}
    assert small["sdp"]["absent"] == {"the FP16 datapath": 1, "the SDP LUT": 1}  # nv_small: INT8 only, no SDP LUT
    assert sum(small["cdp"]["absent"].values()) == 0 and sum(small["cdp"]["missed"].values()) == 1  # CDP's own LUT
    assert small["pdp"]["not drawn"] == {"register field values the generators never draw (high bits)": 2,
                                         "address bits above the harness's surface placement": 1}
    assert small["pdp"]["missed"] == {"": 2}  # the low address bit and the line: holes to look at
    assert small["cfgrom"]["not drawn"] == {"CFGROM: read only by CSB reads of its registers, which no suite makes": 1}
    # nv_full has FP16 and the SDP LUT: its NaN counter's bit 3 is a counter never counted that far, the LUT missed
    full = rh.classify(run, load_profile("nv_full").features)
    assert sum(full["sdp"]["absent"].values()) == 0
    assert full["sdp"]["not drawn"] == {"performance counters' high bits": 1} and full["sdp"]["missed"] == {"": 1}


def test_register_fields_set_but_never_to_their_high_values_are_named(tmp_path: Path) -> None:
    run = _run(tmp_path)
    gaps, never = rh.field_gaps(run)
    assert gaps == [("cube_in_width", 2, 4)] and never == []  # bits 0-1 toggled, 2-3 never: values >= 4 never drawn
    text = rh.format_classes(rh.classify(run, load_profile("nv_small").features), gaps, never)
    assert "cube_in_width: bits 2..3 never set (values >= 4 never drawn)" in text
    assert text.splitlines()[0].split()[:5] == ["unit", "held", "absent", "not", "drawn"]
