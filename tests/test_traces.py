"""Trace parsing (errors name file and line), .dat loading, CRC, vacuous checks and poisoning."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.harness.targets.model import ModelTarget
from nvdla_hil.harness.traces import TraceError, load_dat, parse_trace, run_trace, trace_features


def _write_trace(tmp_path: Path, body: str, dat: str | None = "{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04},\n") -> Path:
    d = tmp_path / "t_case"
    d.mkdir()
    (d / "t_case.cfg").write_text(body)
    if dat is not None:
        (d / "in.dat").write_text(dat)
    return d


GOOD = """// comment line
mem_init(pri_mem, 0x80000000, 0x10, ALL_ZERO);
mem_load(pri_mem, 0x80000000, "in.dat");
reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x3); // trailing comment
intr_notify(SDP_0, sync_id_0);
check_crc(sync_id_0, 1, 0x80000000, 0x4, 0xb63cfbcd);
"""


def test_parse_good_trace(tmp_path):
    tr = parse_trace(_write_trace(tmp_path, GOOD))
    assert [c.kind for c in tr.commands] == ["mem_init", "mem_load", "reg_write", "intr_notify", "check_crc"]
    assert tr.commands[2].args == ("NVDLA_SDP.D_CVT_SCALE_0", 3)
    assert tr.commands[3].args == ("SDP", 0, "sync_id_0")
    assert tr.commands[4].args == ("sync_id_0", "pri_mem", 0x80000000, 4, 0xB63CFBCD)
    assert tr.units() == ["SDP"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("reg_wrte(NVDLA_SDP.D_CVT_SCALE_0, 0x3);", "unknown command 'reg_wrte'"),
        ("reg_write(NVDLA_SDP.D_CVT_SCALE_0 0x3);", "malformed reg_write"),
        ("reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x1ffffffff);", "does not fit 32 bits"),
        ('mem_load(pri_mem, 0x0, "../../etc/passwd");', "must stay inside the trace folder"),
        ("mem_init(pri_mem, 0x0, 0x10, RANDOM);", "unsupported mem_init pattern"),
        ("mem_init(xyz_mem, 0x0, 0x10, ALL_ZERO);", "unknown memory 'xyz_mem'"),
        ("intr_notify(SDP, sync_id_0);", "is not UNIT_GROUP"),
        ("check_crc(sync_id_9, 1, 0x0, 0x4, 0x0);", "no intr_notify fires"),
    ],
)
def test_parse_errors_name_file_and_line(tmp_path, line, message):
    d = _write_trace(tmp_path, GOOD + line + "\n")
    with pytest.raises(TraceError, match=message) as ei:
        parse_trace(d)
    assert f"t_case.cfg:{GOOD.count(chr(10)) + 1}" in str(ei.value)


def test_unknown_register_names_trace_line(tmp_path):
    d = _write_trace(tmp_path, GOOD.replace("D_CVT_SCALE_0", "D_CVT_SCAEL_0"))
    with ModelTarget("nv_small") as t, pytest.raises(TraceError, match=r"t_case\.cfg:4: .*did you mean SDP\.D_CVT_SCALE"):
        run_trace(d, t)


def test_missing_data_file_names_trace_line(tmp_path):
    d = _write_trace(tmp_path, GOOD, dat=None)
    with ModelTarget("nv_small") as t, pytest.raises(TraceError, match=r"t_case\.cfg:3.*missing data file in\.dat"):
        run_trace(d, t)


def test_malformed_dat_names_dat_line(tmp_path):
    d = _write_trace(tmp_path, GOOD, dat="{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04},\n{offset:0x4, size:3, payload:0x01},\n")
    with pytest.raises(TraceError, match=r"in\.dat:2: record says size 3 but carries 1 bytes"):
        load_dat(d / "in.dat")


def test_dat_records_relative_with_gaps(tmp_path):
    p = tmp_path / "x.dat"
    p.write_text("{\n{offset:0x4, size:2, payload:0xaa 0xbb},\n{offset:0x0, size:1, payload:0x7},\n}\n")
    assert load_dat(p).tolist() == [7, 0, 0, 0, 0xAA, 0xBB]


def test_crc_is_zlib_crc32_of_loaded_image(trace_root):
    # shared/nvdla/README.md: the 0x800-byte input of cdp_8x8x32_lrn3_int8_0 has CRC 0xf1e8ba9e
    image = load_dat(trace_root / "cdp_8x8x32_lrn3_int8_0" / "CDP_0_input.dat")
    assert image.size == 0x800
    assert zlib.crc32(image.tobytes()) == 0xF1E8BA9E


class _DeadTarget(ModelTarget):
    """A target that raises the done interrupt but never writes memory."""

    def _run(self, layer, group):
        status = self.regmap.register("GLB", "S_INTR_STATUS")
        for unit in layer.done:
            self._regs[(status.address, 0)] |= status.field(f"{unit}_DONE_STATUS{group}").mask
        for b in layer.blocks:
            self._set(b, "D_OP_ENABLE", 0, group)


def test_vacuous_check_detected_and_poison_catches_it(trace_root):
    vacuous = trace_root / "sdp_1x8192x1_pass_through_int8_0"  # output region already holds the golden CRC
    with _DeadTarget("nv_small") as t:
        res = run_trace(vacuous, t)
        assert res.passed and res.checks[0].vacuous and "vacuous" in res.message
    with _DeadTarget("nv_small") as t:
        res = run_trace(vacuous, t, poison=True)
        assert res.status == "failed" and res.checks[0].poisoned
    with ModelTarget("nv_small") as t:
        assert run_trace(vacuous, t, poison=True).passed


def test_trace_features(trace_root):
    assert trace_features(parse_trace(trace_root / "sdp_3x3x33_ew_le_exp_int8")) == {"sdp_ew", "sdp_lut"}
    assert trace_features(parse_trace(trace_root / "sdp_3x3x33_ew_int8_reg_0")) == {"sdp_ew"}
    assert trace_features(parse_trace(trace_root / "cdp_8x8x32_lrn3_int8_0")) == set()


def test_every_shared_trace_parses(trace_root):
    from nvdla_hil.harness.traces import find_traces

    paths = find_traces(trace_root)
    assert len(paths) == 63  # NVDLA's nv_small trace tests
    for p in paths:
        assert parse_trace(p).of_kind("intr_notify")


def test_memory_setup_is_merged_in_file_order():
    from nvdla_hil.harness.traces.memory_setup import merge_pieces as _merge_pieces

    a = np.arange(8, dtype=np.uint8)
    merged = _merge_pieces([
        ("pri_mem", 100, np.zeros(16, dtype=np.uint8)),  # mem_init
        ("pri_mem", 104, a),  # mem_load over it
        ("pri_mem", 200, np.full(4, 9, dtype=np.uint8)),  # separate range
        ("sec_mem", 100, np.ones(2, dtype=np.uint8)),
        ("pri_mem", 110, np.full(10, 7, dtype=np.uint8)),  # later, overlapping and extending
    ])
    assert [(p, addr, d.size) for p, addr, d in merged] == [("pri_mem", 100, 20), ("pri_mem", 200, 4), ("sec_mem", 100, 2)]
    assert merged[0][2].tolist() == [0] * 4 + list(range(6)) + [7] * 10
