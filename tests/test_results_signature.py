"""Failure signatures from the structured failure (harness/results/signature.py), on hand-worked
regions of an output cube, and the reason of a failure: the error's message, never a traceback line."""

from __future__ import annotations

from pathlib import Path

from nvdla_hil.harness.analysis.report import error_reason, parse_junit
from nvdla_hil.harness.results.signature import (cluster_map, coord_pattern, failure_info, magnitude_class,
                                                 signature_of)

CUBE = {"unit": "SDP", "width": 4, "height": 4, "channels": 2}


def _region(coords, expected, actual, n=None):  # noqa: ANN001, ANN202
    return {"cube": CUBE, "coords": coords, "expected": expected, "actual": actual,
            "n_elements": len(coords) if n is None else n}


def test_coordinate_patterns_hand_worked() -> None:
    every = [[c, h, w] for c in range(2) for h in range(4) for w in range(4)]  # 32 elements, all differ by -1
    assert coord_pattern(_region(every, [5] * 32, [4] * 32)) == {"pattern": "dense uniform", "magnitude": "1", "sign": "-"}
    border = [[0, 0, 1], [1, 3, 2], [0, 2, 0]]  # first line, last line, first column: padding-like
    assert coord_pattern(_region(border, [0, 0, 0], [3, 9, 3]))["pattern"] == "border worst@border"
    chan = [[1, 1, 1], [1, 2, 2]]  # both in channel 1, interior, errors 2 and 20 (worst at (1,2,2))
    got = coord_pattern(_region(chan, [0, 0], [2, -20]))
    assert got == {"pattern": "one-channel worst@interior", "magnitude": "16-255", "sign": "±"}
    assert coord_pattern(_region([[0, 1, 1]], [7], [8]))["pattern"] == "sparse uniform"
    assert coord_pattern({"cube": None, "coords": [], "expected": [], "actual": []})["pattern"] == "bytes"
    assert [magnitude_class(e) for e in (0, 1, 3, 4, 255, 256)] == ["0", "1", "2-3", "4-15", "16-255", "256+"]


def test_same_failure_same_signature_and_unexplained_joins_its_cluster() -> None:
    reg = _region([[c, h, w] for c in range(2) for h in range(4) for w in range(4)], [5] * 32, [4] * 32)
    diag = {"regions": [reg], "checks": ["sync_id_0: crc pri_mem[0x1000+0x100] expected 0x1 got 0x2 MISMATCH"],
            "suspects": [{"register": "SDP.D_CVT_OFFSET.CVT_OFFSET", "explains": True}]}
    a = failure_info("failed", "call", "Failed", "t: FAILED (0.1 s) - 1 of 1 checks failed\n  " + diag["checks"][0], diag)
    assert a["check"] == "crc" and a["unit"] == "SDP" and a["suspect"] == "SDP.D_CVT_OFFSET.CVT_OFFSET"
    assert a["reason"] == diag["checks"][0]
    sid, key = signature_of(a)
    assert key == "failed | crc | SDP | dense uniform | err 1- | suspect SDP.D_CVT_OFFSET.CVT_OFFSET"
    other_test = dict(a, reason="sync_id_3: crc pri_mem[0x9000+0x40] expected 0x5 got 0x6 MISMATCH")
    assert signature_of(other_test)[0] == sid  # addresses and CRCs are not part of it
    unexplained = signature_of(dict(a, suspect=""))  # the budgeted search ended before it found one
    assert unexplained[0] != sid
    cmap = cluster_map({sid: key, unexplained[0]: unexplained[1]})
    assert cmap == {sid: sid, unexplained[0]: sid}
    two = signature_of(dict(a, suspect="SDP.D_CVT_SCALE.CVT_SCALE"))
    cmap = cluster_map({sid: key, unexplained[0]: unexplained[1], two[0]: two[1]})
    assert cmap[unexplained[0]] == unexplained[0]  # ambiguous: stays its own cluster


def test_errors_are_keyed_by_exception_and_masked_message() -> None:
    a = failure_info("error", "setup", "BoardDeadError", "board b0 (tcp://10.0.0.5:1234) does not answer after 3 tries")
    b = failure_info("error", "setup", "BoardDeadError", "board b1 (tcp://10.0.0.7:99) does not answer after 3 tries")
    assert a["reason"].startswith("BoardDeadError: board b0")
    assert signature_of(a)[0] == signature_of(b)[0]
    assert signature_of(a)[1].startswith("error | BoardDeadError | ")


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="1">
<testcase classname="nvdla_hil.harness.suites.test_traces" name="test_trace[x]" time="1.0">
<failure message="nvdla_hil.drivers.uartbone.BoardDeadError: board b0 does not answer">def test_trace(...):
&gt;       if "MISMATCH" in line or "differ" in line:
E       nvdla_hil.drivers.uartbone.BoardDeadError: board b0 does not answer
harness/suites/test_traces.py:120: BoardDeadError</failure></testcase></testsuite></testsuites>"""


def test_reason_is_the_errors_message_never_a_traceback_line(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text(JUNIT)
    (row,) = parse_junit(tmp_path / "junit.xml")
    assert row.outcome == "failed"
    assert row.reason == "nvdla_hil.drivers.uartbone.BoardDeadError: board b0 does not answer"
    assert error_reason("Failed: x: FAILED (1 s) - 1 of 2 checks failed\n  sync_id_1: crc a expected 1 got 2 MISMATCH") \
        == "sync_id_1: crc a expected 1 got 2 MISMATCH"
