"""UARTBone framing (bytes worked by hand from LiteX's Stream2Wishbone / CommUART) and the
SerialTransport end to end through the board emulator (pty and TCP)."""

from __future__ import annotations

import numpy as np
import pytest
from nvdla_hil.drivers.transport import LinkIntegrityError, TransportTimeoutError
from nvdla_hil.drivers.uartbone import (
    BoardMap,
    IntegrityPolicy,
    SerialTransport,
    decode_words,
    encode_read,
    encode_write,
    max_burst_words,
)
from nvdla_hil.harness.boards.emulator import FaultConfig, RegisterFileTarget, fault_campaign, serve_in_thread

LUT_PORT = 0x900C  # stands for a non-readback data port in these tests


# ---- framing: hand-worked byte strings ------------------------------------------------------------
def test_write_incr_single_word():
    # CommUART.write(0x40009008, 0x12345678): cmd 0x01, len 1, addr//4 = 0x10002402 big-endian,
    # then the word big-endian.
    assert encode_write(0x40009008 >> 2, [0x12345678]) == bytes.fromhex("01 01 10002402 12345678")


def test_write_fixed_burst():
    # Two words to one port: cmd 0x03 (CMD_WRITE_BURST_FIXED), len 2.
    assert encode_write(0x4000900C >> 2, [1, 0xA0B0C0D0], incr=False) == bytes.fromhex(
        "03 02 10002403 00000001 A0B0C0D0"
    )


def test_read_commands():
    assert encode_read(0x80000010 >> 2, 3) == bytes.fromhex("02 03 20000004")
    assert encode_read(0x80000010 >> 2, 255, incr=False) == bytes.fromhex("04 FF 20000004")


def test_decode_big_endian_words():
    assert decode_words(bytes.fromhex("00303031 DEADBEEF")).tolist() == [0x00303031, 0xDEADBEEF]
    with pytest.raises(ValueError):
        decode_words(b"\x00\x01\x02")


@pytest.mark.parametrize("n", [0, 256])
def test_burst_length_limits(n):
    with pytest.raises(ValueError):
        encode_read(0, n)


def test_burst_size_from_baud():
    # CommUART rule: 50 ms budget, 10 bits a byte, 6 header bytes: 115200 -> (576-6)//4 = 142.
    assert max_burst_words(115200, write=True) == 142
    assert max_burst_words(3_000_000, write=True) == 255
    assert max_burst_words(9600, write=True) == 10


def test_board_map():
    m = BoardMap(csr_base=0x4000_0000, dram_base=0x1000_0000, dram_nvdla_base=0x8000_0000, dram_size=0x100_0000)
    assert m.csr(0x1000) == 0x4000_1000
    assert m.dram(0x8000_0010, 4) == 0x1000_0010
    assert m.decode(0x1000_0010) == ("dram", 0x8000_0010)
    with pytest.raises(ValueError, match="DRAM window"):
        m.dram(0x8100_0000 - 2, 4)
    with pytest.raises(ValueError, match="overlap"):
        BoardMap(csr_base=0x1000_0000, dram_base=0x1000_0000)


# ---- end to end through the emulator ----------------------------------------------------------------
def _transport(url, policy="verify", **kw):
    kw.setdefault("response_timeout", 2.0)  # a clean link never waits this long; a loaded machine may
    kw.setdefault("board_timeout", 0.005)
    return SerialTransport(url, 3_000_000, policy=IntegrityPolicy(policy), readback_ok=lambda a: a != LUT_PORT, **kw)


@pytest.fixture(params=[("pty", "plain"), ("pty", "verify"), ("tcp", "plain"), ("tcp", "verify")],
                ids=lambda p: "-".join(p))
def link(request):
    mode, policy = request.param
    tgt = RegisterFileTarget()
    with serve_in_thread(tgt, mode=mode, fsm_timeout=0.005) as emu:
        with _transport(emu.url, policy) as t:
            yield t, tgt, emu


def test_register_round_trip(link):
    t, tgt, _ = link
    assert t.sync_value == 0x00303031
    t.write32(0x9008, 0x1234ABCD)
    assert t.read32(0x9008) == 0x1234ABCD
    vals = [(i * 0x01010101) & 0xFFFFFFFF for i in range(300)]  # more than one burst
    t.write_burst(0x5000, vals)
    assert t.read_burst(0x5000, 300) == vals
    t.sync()
    assert [tgt.regs[0x5000 + 4 * i] for i in range(300)] == vals
    assert t.link_report() == ""  # a clean link has nothing to report


def test_fixed_burst_to_port(link):
    t, tgt, emu = link
    t.write_burst(LUT_PORT, list(range(257)), incr=False)
    t.sync()
    assert tgt.regs[LUT_PORT] == 256
    assert emu.stats.bus_writes == 257  # one bus write per word: the burst to the port is sent once
    tgt.regs[0x9010] = 7
    assert t.read_burst(0x9010, 3, incr=False) == [7, 7, 7]


def test_memory_round_trip_unaligned(link):
    t, tgt, _ = link
    tgt.memory.write(0x8000_0000, np.full(16, 0xEE, dtype=np.uint8))
    data = np.random.default_rng(3).integers(0, 256, 5003, dtype=np.uint8)
    t.mem_write(0x8000_0003, data)
    assert np.array_equal(t.mem_read(0x8000_0003, data.size), data)
    t.sync()
    assert np.array_equal(tgt.memory.read(0x8000_0003, data.size), data)
    # bytes around the unaligned head/tail keep their old value (read-modify-write)
    assert tgt.memory.read(0x8000_0000, 3).tolist() == [0xEE] * 3
    assert tgt.memory.read(0x8000_0003 + 5003, 2).tolist() == [0, 0]
    # little-endian bus bytes: word at 0x80000000 holds bytes EE EE EE data[0]
    assert t.mem_read(0x8000_0000, 4).tolist() == [0xEE, 0xEE, 0xEE, int(data[0])]


def test_writes_are_pipelined(link):
    t, tgt, _ = link
    t.sync()
    rt = t.stats.round_trips
    for i in range(20):
        t.write32(LUT_PORT if t.policy.mode == "plain" else 0x5000 + 4 * i, i)
    # plain: no round trip per write; verify: the readback writes wait for one verification pass
    assert t.stats.round_trips == rt
    t.sync()
    if t.policy.mode == "plain":  # and every write arrived, in order
        assert tgt.regs[LUT_PORT] == 19
    else:
        assert [tgt.regs[0x5000 + 4 * i] for i in range(20)] == list(range(20))


def test_wait_irq_polls_intr_status(link):
    t, tgt, _ = link
    assert t.wait_irq(0.0) is False
    tgt.regs[0x100C] = 1 << 6
    assert t.wait_irq(1.0) is True


def test_silent_link_times_out():
    tgt = RegisterFileTarget()
    with serve_in_thread(tgt, faults=FaultConfig(silent_after=200), fsm_timeout=0.005) as emu:
        with _transport(emu.url, "verify", response_timeout=0.05) as t:
            with pytest.raises((TransportTimeoutError, LinkIntegrityError)):
                for _i in range(100):
                    t.read32(0x5000)


def test_non_idempotent_write_is_not_repeated():
    # The link dies right after the port write's bytes: the sync read that should prove
    # the framing never comes back, so the write is reported, not retried.
    tgt = RegisterFileTarget()
    with serve_in_thread(tgt, fsm_timeout=0.005, bus_timeout=0.0) as emu:
        with _transport(emu.url, "verify", response_timeout=0.05) as t:
            emu.faults = FaultConfig(silent_after=emu.stats.bytes_in + 10)
            with pytest.raises((LinkIntegrityError, TransportTimeoutError)):
                t.write32(LUT_PORT, 5)
            assert tgt.regs.get(LUT_PORT) == 5  # it did happen once, and only once
            assert emu.stats.bus_writes == 1


# ---- a corrupted read address: the failure mode that two agreeing reads do not catch ------------------
def _misaddress(emu, header: bytes, n: int) -> list[int]:
    """Corrupt the address of the next ``n`` commands starting with ``header`` (cmd, length,
    address) that the board receives, so they hit unmapped space (reads give 0xFFFFFFFF after
    the bus timeout, 0 s here; writes vanish). Returns the list that counts the corrupted commands."""
    feed, hits = emu.core.feed, []

    def corrupting_feed(data: bytes, now: float) -> bytes:
        buf = bytearray(data)
        at = buf.find(header)
        while at >= 0 and len(hits) < n:
            buf[at + 3] ^= 0x80  # word 0x1000_1400 -> 0x1080_1400: outside both windows
            hits.append(at)
            at = buf.find(header, at + 1)
        return feed(bytes(buf), now)

    emu.core.feed = corrupting_feed
    return hits


@pytest.mark.parametrize("count", [1, 8])
def test_reads_landing_in_zero_space_are_not_accepted(count):
    """Two reads whose addresses were both corrupted into unmapped space agree on all ones; the
    verify policy takes ``uniform_reads`` agreeing reads for a uniform result, so three such
    reads in a row are caught and retried, and the true words come back."""
    tgt = RegisterFileTarget()
    want = [0x12345678 + 0x01010101 * i for i in range(count)]
    for i, v in enumerate(want):
        tgt.regs[0x5000 + 4 * i] = v
    with serve_in_thread(tgt, fsm_timeout=0.005, bus_timeout=0.0) as emu:
        with _transport(emu.url, "verify") as t:
            hits = _misaddress(emu, encode_read(0x4000_5000 >> 2, count), 3)
            assert t.read_burst(0x5000, count) == want
            assert len(hits) == 3 and t.stats.verify_mismatches == 1 and t.stats.retries == 1
            # what a failing test's message carries, so nobody chases a phantom hardware bug
            assert "1 faults, 1 resyncs, 1 retries, 1 read mismatches" in t.link_report()


def test_zero_write_sent_elsewhere_is_not_verified_by_a_misaddressed_read_back():
    """Writing 0 is the common case in NVDLA programming. If the write goes elsewhere and the
    read-back is misaddressed into unmapped space, a single read-back could show the 0 it wants
    (a board whose unmapped space reads 0; a LiteX SoC reads all ones)."""
    tgt = RegisterFileTarget()
    tgt.regs[0x5000] = 0x55
    with serve_in_thread(tgt, fsm_timeout=0.005, bus_timeout=0.0) as emu:
        with _transport(emu.url, "verify") as t:
            writes = _misaddress(emu, encode_write(0x4000_5000 >> 2, [0])[:6], 1)
            reads = _misaddress(emu, encode_read(0x4000_5000 >> 2, 1), 1)
            t.write32(0x5000, 0)
            t.sync()
            assert len(writes) == len(reads) == 1 and t.stats.verify_mismatches == 1
            assert tgt.regs[0x5000] == 0


def test_zero_register_is_confirmed_by_four_reads():
    tgt = RegisterFileTarget()
    with serve_in_thread(tgt, fsm_timeout=0.005, bus_timeout=0.0) as emu:
        with _transport(emu.url, "verify") as t:
            tgt.regs[0x5000] = 7
            tgt.regs[0x5004] = 0
            rt = t.stats.round_trips
            assert t.read32(0x5000) == 7
            assert t.stats.round_trips - rt == 2  # a distinctive value: two agreeing reads
            rt = t.stats.round_trips
            assert t.read32(0x5004) == 0
            assert t.stats.round_trips - rt == 4  # 0 is what a misaddressed read returns


def test_expected_read_that_a_misaddressed_burst_imitates_is_not_trusted():
    """A check's golden says zeros; the board holds something else in one word. The first read
    is misaddressed into other, zero, memory and equals the golden: a uniform burst with no
    distinctive neighbour, so it is read again, the two disagree, and the board's real bytes
    come back (the check fails, as it must)."""
    tgt = RegisterFileTarget()
    truth = np.zeros(64, dtype=np.uint8)
    truth[20] = 0x12
    tgt.memory.write(0x8000_1000, truth)
    with serve_in_thread(tgt, fsm_timeout=0.005, bus_timeout=0.0) as emu:
        with _transport(emu.url, "verify") as t:
            word = BoardMap().dram(0x8000_1000, 64) >> 2
            hits = _misaddress(emu, encode_read(word, 16), 1)
            got = t.mem_read(0x8000_1000, 64, expect=np.zeros(64, dtype=np.uint8))
            assert len(hits) == 1 and t.stats.verify_mismatches == 1
            assert np.array_equal(got, truth)


def test_expected_read_costs_one_read_and_a_word_per_uniform_burst():
    """A read that equals what the caller expects is proven in one read; a uniform burst next
    to a distinctive word is read once more, one word longer; one with no such neighbour takes
    the uniform rule (four reads)."""
    tgt = RegisterFileTarget()
    n = 4096
    data = np.zeros(n, dtype=np.uint8)
    distinct = 508  # words: two whole bursts of 254, so the zero part's first burst has a distinctive neighbour
    data[: 4 * distinct] = np.arange(4 * distinct, dtype=np.uint32).astype(np.uint8) * 7 + 3
    tgt.memory.write(0x8000_0000, data)
    with serve_in_thread(tgt, fsm_timeout=0.005, bus_timeout=0.0) as emu:
        with _transport(emu.url, "verify") as t:
            step = t.max_read_burst - 1
            assert step == 254  # 3 Mbaud: 255-word reads, one word kept for the neighbour
            words = n // 4
            rx = t.stats.rx_bytes
            assert np.array_equal(t.mem_read(0x8000_0000, n, expect=data), data)
            bursts = [(d, min(step, words - d)) for d in range(0, words, step)]
            flat = [d for d, k in bursts if d >= distinct]  # the zero part (bursts 508, 762, 1016)
            edge = [d for d in flat if d - 1 < distinct]  # its first burst has a distinctive neighbour
            assert edge == [508]
            want = 4 * words + sum(4 * (step + 1) if d in edge else 3 * 4 * min(step, words - d) for d in flat)
            assert want == 4 * 1024 + 4 * 255 + 12 * 254 + 12 * 8
            assert t.stats.rx_bytes - rx == want
            # without an expectation: two agreeing reads, four for each uniform burst
            rx = t.stats.rx_bytes
            assert np.array_equal(t.mem_read(0x8000_0000, n), data)
            # 255-word reads at 0, 255, 510, 765 and 4 words at 1020: the two with distinctive words
            # read twice, the three all zero four times
            assert t.stats.rx_bytes - rx == 4 * (2 * 510 + 4 * (255 + 255 + 4))


# ---- fault injection: every operation correct or reported -------------------------------------------------
@pytest.mark.slow  # thousands of operations through a faulty link: `make test-slow`
@pytest.mark.parametrize("mode", ["pty", "tcp"])
def test_fault_injection_no_silent_wrong_values(mode):
    """The 20,000-operation figure comes from bench/bench_serial.py; this is its short form."""
    res = fault_campaign(400, FaultConfig(drop=0.005, corrupt=0.005, seed=1), mode=mode)
    print(res)
    assert res["dropped"] > 0 and res["corrupted"] > 0
    assert res["total"]["silent_wrong"] == 0, res["silent"]
    assert res["total"]["ok"] + res["total"]["reported"] == 400
    assert all(d["ok"] > 0 for d in res["per_op"].values())  # every kind of operation got through
    assert res["link"]["resyncs"] > 0 and res["link"]["verify_mismatches"] > 0


def test_network_ports_turn_nagle_off():
    """pyserial's socket:// leaves Nagle on; a flushed write followed by its check read would
    then wait for the board's delayed ACK on every round trip (bench figure in uartbone)."""
    import socket

    with serve_in_thread(RegisterFileTarget(), mode="tcp", fsm_timeout=0.005) as emu:
        with _transport(emu.url, "verify") as t:
            assert t._port._socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


# ---- a dead or hung board: one clear exception, quickly -------------------------------------------------
def _emu_process(mode: str):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.boards.emulator", "board-emu",
                             "--pty" if mode == "pty" else "--tcp=0", "--backend", "regfile"],
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def _link_work(t, before: dict[str, int]) -> dict[str, int]:
    """What the link did since the ``t.stats.snapshot()`` ``before``: requests sent and waited
    for (``round_trips``), resynchronisations, retries, bytes sent. Counting them says how long a
    dead board was waited for in the link's own terms (each silent request costs its configured
    ``response_timeout``), whatever the machine's load does to the wall clock."""
    now = t.stats.snapshot()
    return {k: now[k] - before[k] for k in ("round_trips", "resyncs", "retries", "tx_bytes")}


def _declared_dead_within_bounded_retries(t, work: dict[str, int]) -> None:
    """The link gave up after at most the failing request and ``dead_after`` silent sync reads in
    one resynchronisation (a port error: at once, with none), never going through its retries."""
    assert work["retries"] == 0 and work["resyncs"] <= 1, work
    assert work["round_trips"] <= 1 + t.policy.dead_after, work


#: a dead board's open fails on its port (a killed emulator's pty or TCP port is gone), or, should
#: the port name have been reused meanwhile by something that does not answer, after the first
#: resynchronisation's silent sync reads: bounded either way, never the retry budget
OPEN_FAILS_BOUNDED = r"cannot open serial port|no answer to \d+ sync reads"


def _lab_for(tmp_path, url: str):
    lab = tmp_path / "lab.yaml"
    lab.write_text(f"lock_dir: {tmp_path}\nboards:\n  arty-7:\n    url: {url}\n    baud: 3000000\n"
                   f"    probe_window: false\n")
    return lab


@pytest.mark.parametrize("mode", ["pty", "tcp"])
def test_killed_board_is_board_dead_error_naming_it(mode, tmp_path):
    """The board's process is killed mid-session: the next operation raises BoardDeadError (a
    LinkIntegrityError) naming the board and its URL within bounded retries (the link's own
    counts, not the wall clock), never a raw SerialException/OSError; later calls fail at once
    (nothing sent, nothing waited for), and so does the next test's open."""
    from nvdla_hil.drivers.uartbone import BoardDeadError
    from nvdla_hil.harness.targets.serial import open_serial_target

    proc, url = _emu_process(mode)
    lab = _lab_for(tmp_path, url)
    try:
        with open_serial_target(lab, "arty-7") as t:
            t.write32(0x5000, 7)
            assert t.read32(0x5000) == 7
            proc.kill()
            proc.wait()
            before = t.stats.snapshot()
            with pytest.raises(BoardDeadError) as ei:
                t.read32(0x5000)
            assert isinstance(ei.value, LinkIntegrityError)
            assert "board 'arty-7'" in str(ei.value) and url in str(ei.value), str(ei.value)
            _declared_dead_within_bounded_retries(t, _link_work(t, before))
            before = t.stats.snapshot()
            with pytest.raises(BoardDeadError, match="declared dead"):
                t.write32(0x5000, 1, posted=False)
            assert _link_work(t, before) == {"round_trips": 0, "resyncs": 0, "retries": 0, "tx_bytes": 0}
        with pytest.raises(BoardDeadError, match="arty-7") as ei:
            with open_serial_target(lab, "arty-7"):
                pass
        assert ei.match(OPEN_FAILS_BOUNDED)
    finally:
        proc.kill()
        proc.wait(10)


def test_hung_board_is_board_dead_error_within_bounded_retries(tmp_path):
    """A board that stops answering (its process stopped: the port stays open) is declared
    dead after two silent sync reads, not after the whole retry budget: counted on the link
    (the failing request, one resynchronisation, its two sync reads; no retry), each silent
    request waiting its configured response_timeout, so the count bounds the time under any load."""
    import signal

    from nvdla_hil.drivers.uartbone import BoardDeadError
    from nvdla_hil.harness.targets.serial import open_serial_target

    proc, url = _emu_process("tcp")
    lab = _lab_for(tmp_path, url)
    try:
        with open_serial_target(lab, "arty-7") as t:
            assert t.read32(0x1000) == 0x00303031
            proc.send_signal(signal.SIGSTOP)
            before = t.stats.snapshot()
            with pytest.raises(BoardDeadError, match=r"no answer to 2 sync reads") as ei:
                t.read32(0x1000)
            assert "board 'arty-7'" in str(ei.value), str(ei.value)
            work = _link_work(t, before)
            assert t.policy.dead_after == 2 and t.policy.retries > 0  # so the counts below tell the two apart
            assert (work["round_trips"], work["resyncs"], work["retries"]) == (1 + t.policy.dead_after, 1, 0), work
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait(10)
