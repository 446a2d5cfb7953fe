"""PDP's line buffer on the RTL (harness/refmodel/pdp.py ``_check_line_buffer``): a slice wider than
the buffer holds for the kernel's rows never raises PDP's done on the nv_small RTL, so the model
refuses it under RTL semantics, naming the rule, and the fuzz generator draws the widest that fits
instead. The widths are the RTL's, measured on the nv_small
Verilator build (2026-11-30, INT8 average, one 8-channel atom): KH 7 / SY 4 width 64 passed, 65
hung; KH 3 / SY 1 32 passed, 33 hung; KH 6 / SY 1 16 passed, 17 and 24 hung; KH 1 width 129 passed."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvdla_hil.harness.fuzz.case import generate
from nvdla_hil.harness.fuzz.registry import load_constraints
from nvdla_hil.harness.fuzz.units import pdp_cdp
from nvdla_hil.harness.refmodel.pdp import line_buffer_columns
from nvdla_hil.harness.vectors.load import load_case

PINNED = ["precision=int8", "method=average", "kernel_w=1", "stride_w=1", "pad_left=0", "pad_right=0", "pad_top=0",
          "pad_bottom=0", "split=0", "height=4", "channels=8", "src_port=pri", "dst_port=pri"]


def _layer(tmp: Path, kh: int, sy: int, width: int) -> Path:
    wide = tmp / "wide.yaml"
    wide.write_text("unit: pdp\nprofile: nv_small\nfields:\n  width: {range: [1, 256]}\n")
    c = load_constraints("pdp", profile="nv_small", files=[wide],
                         sets=[*PINNED, f"kernel_h={kh}", f"stride_h={sy}", f"width={width}"])
    return generate(c, 1, 1, tmp / "out", dut="verilator")


@pytest.mark.parametrize("kh, sy, fits", [(7, 4, 64), (3, 1, 32), (6, 1, 16)])
def test_a_slice_wider_than_the_line_buffer_is_refused_naming_the_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      kh: int, sy: int, fits: int) -> None:
    assert line_buffer_columns(kh, sy) == fits
    case = load_case(_layer(tmp_path, kh, sy, fits))  # the widest that passed on the RTL, drawn as it is
    assert next(r.value for r in case.registers if r.name == "PDP.D_DATA_CUBE_OUT_WIDTH") == fits - 1
    # the generator draws the widest that fits instead of a wider one ...
    case = load_case(_layer(tmp_path, kh, sy, fits + 1))
    assert next(r.value for r in case.registers if r.name == "PDP.D_DATA_CUBE_OUT_WIDTH") == fits - 1
    # ... and a wider one, drawn all the same, is refused by the model under RTL semantics
    monkeypatch.setattr(pdp_cdp, "line_buffer_columns", lambda kh, sh: None)
    with pytest.raises(Exception, match=r"does not fit the line buffer on the RTL.*SPLIT_NUM"):
        _layer(tmp_path, kh, sy, fits + 1)


def test_a_one_row_kernel_keeps_no_lines(tmp_path: Path) -> None:
    assert line_buffer_columns(1, 1) is None
    case = load_case(_layer(tmp_path, 1, 1, 129))  # no line buffer limit: drawn 129 wide
    assert next(r.value for r in case.registers if r.name == "PDP.D_DATA_CUBE_OUT_WIDTH") == 128
