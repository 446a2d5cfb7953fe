"""The two ways a trace's ``.dat`` file is read give one image.

NVDLA's generator writes one record per line (``{offset:0x10, size:4, payload:0x70 0xae 0x2c
0x18} ,``); such files are read by a vectorised path, anything else line by line. The oracle
here is the records themselves, laid into a numpy image independently of both readers.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nvdla_hil.harness.traces import dat
from nvdla_hil.harness.traces.limits import TraceError


@st.composite
def _records(draw):
    """Increasing, non-overlapping records (gaps allowed), as the generator writes them."""
    n = draw(st.integers(1, 12))
    out, pos = [], draw(st.integers(0, 64))
    for _ in range(n):
        payload = draw(st.binary(min_size=1, max_size=9))
        out.append((pos, payload))
        pos += len(payload) + draw(st.sampled_from([0, 0, 0, 1, 7]))
    return out


def _write(path: Path, records, *, canonical: bool) -> Path:
    lines = ["{"]
    for off, payload in records:
        if canonical:
            body = " ".join(f"0x{b:02x}" for b in payload)
            lines.append(f"{{offset:{off:#x}, size:{len(payload)}, payload:{body}}} ,")
        else:  # decimal offset, one-digit tokens, no trailing comma: still a valid record
            body = "  ".join(f"0x{b:x}" for b in payload)
            lines.append(f"{{ offset : {off} , size : {len(payload)} , payload : {body} }}")
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _expected(records) -> np.ndarray:
    extent = max(off + len(p) for off, p in records)
    image = np.zeros(extent, dtype=np.uint8)
    for off, p in records:
        image[off : off + len(p)] = np.frombuffer(p, dtype=np.uint8)
    return image


@given(records=_records(), canonical=st.booleans())
def test_both_forms_read_as_their_records(tmp_path_factory, records, canonical):
    path = _write(tmp_path_factory.mktemp("dat") / "x.dat", records, canonical=canonical)
    assert (dat._canonical_records(path.read_bytes()) is not None) == canonical
    np.testing.assert_array_equal(dat.load_dat(path), _expected(records))


def test_canonical_errors_are_worded_by_the_line_reader(tmp_path):
    p = tmp_path / "bad.dat"
    p.write_text("{\n{offset:0x0, size:4, payload:0x01 0x02 0x03} ,\n}\n")
    with pytest.raises(TraceError, match=r"bad\.dat:2: record says size 4 but carries 3 bytes"):
        dat.load_dat(p)
    p.write_text("{offset:0x0, size:2, payload:0x01 0x02} ,\n{offset:0x1, size:2, payload:0x05 0x03} ,\n")
    with pytest.raises(TraceError, match=r"bad\.dat:2: record overlaps the record of line 1"):
        dat.load_dat(p)


@pytest.mark.slow  # every public .dat file through both readers: `make test-slow`
def test_public_trace_images_agree_between_readers():
    """Every public ``.dat`` (``NVDLA_TRACE_SETS``) reads to the same image both ways."""
    root = os.environ.get("NVDLA_TRACE_SETS")
    if not root or not Path(root).is_dir():
        pytest.skip("NVDLA_TRACE_SETS (NVDLA's trace_tests folder) is not set")
    files = sorted(Path(root).rglob("*.dat"))[:400]
    assert files
    for f in files:
        with f.open("rb") as fh:
            slow = dat._image(f, dat._records(f, fh))
        assert dat.read_dat(f) == slow, f
