"""merge_pieces against the rule it implements: the memory set-up commands applied one after
the other, later ones winning (NVDLA's native player, verif/verilator/nvdla.cpp, writes them in
file order). The oracle is that in-order application on a dense array; the pieces include
``.dat`` images with gaps of every size around SMALL_FILL, which merge_pieces sends as dense
runs (gaps read 0) and fills."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_hil.harness.traces.dat import DatImage
from nvdla_hil.harness.traces.memory_setup import SETUP_CHUNK, SMALL_FILL, Fill, merge_pieces

SPAN = 3 * SMALL_FILL  # addresses used: gaps below, at and above SMALL_FILL fit


@st.composite
def dat_images(draw) -> DatImage:
    """An image of disjoint records, with gaps drawn around SMALL_FILL."""
    segments, pos = [], draw(st.integers(0, 64))
    for _ in range(draw(st.integers(0, 6))):
        n = draw(st.integers(1, 48))
        segments.append((pos, bytes(draw(st.binary(min_size=n, max_size=n)))))
        pos += n + draw(st.sampled_from([0, 1, 7, SMALL_FILL - 1, SMALL_FILL, SMALL_FILL + 1]))
    extent = max((o + len(p) for o, p in segments), default=0) + draw(st.integers(0, 16))
    return DatImage(extent, tuple(segments))


pieces_st = st.lists(
    st.tuples(st.sampled_from(["pri_mem", "sec_mem"]), st.integers(0, SPAN // 2),
              st.one_of(dat_images(),
                        st.builds(Fill, st.integers(0, 2 * SMALL_FILL), st.sampled_from([0, 0xFF])),
                        st.binary(min_size=1, max_size=64).map(lambda b: np.frombuffer(b, dtype=np.uint8)))),
    max_size=6)


def _apply_in_order(pieces, port: str) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, written mask) after applying ``port``'s pieces one after the other."""
    mem, written = np.zeros(4 * SPAN, dtype=np.uint8), np.zeros(4 * SPAN, dtype=bool)
    for p, addr, d in pieces:
        if p != port:
            continue
        if isinstance(d, Fill):
            mem[addr:addr + d.size], written[addr:addr + d.size] = d.value, True
        elif isinstance(d, DatImage):
            mem[addr:addr + d.extent], written[addr:addr + d.extent] = d.dense(), True
        else:
            mem[addr:addr + d.size], written[addr:addr + d.size] = d, True
    return mem, written


@settings(max_examples=150, deadline=None)
@given(pieces_st)
def test_merged_writes_equal_the_commands_applied_in_order(pieces):
    merged = merge_pieces(pieces)
    for port in ("pri_mem", "sec_mem"):
        want, want_written = _apply_in_order(pieces, port)
        got, got_written = np.zeros_like(want), np.zeros_like(want_written)
        mine = [(a, d) for p, a, d in merged if p == port]
        for addr, d in mine:
            n = d.size
            assert not got_written[addr:addr + n].any(), "every byte crosses the link once"
            assert isinstance(d, Fill) or n <= SETUP_CHUNK
            got[addr:addr + n] = d.value if isinstance(d, Fill) else d
            got_written[addr:addr + n] = True
        assert np.array_equal(got_written, want_written)
        assert np.array_equal(got, want)
        assert [a for a, _ in mine] == sorted(a for a, _ in mine), "address order per port"


def test_an_image_of_many_small_records_goes_as_one_buffer():
    """8k one-byte records 3 bytes apart (the shape of NVDLA's 8192-channel traces) become one
    dense write, not one per record."""
    image = DatImage(3 * 8192, tuple((3 * i, bytes([i & 0xFF])) for i in range(8192)))
    merged = merge_pieces([("pri_mem", 0x1000, image)])
    assert len(merged) == 1
    port, addr, data = merged[0]
    assert (port, addr) == ("pri_mem", 0x1000)
    assert np.array_equal(data, image.dense())
