"""NVDLA's firmware in a process of its own (harness/loadables/firmware.py, firmware_child.py):
a loadable that makes the firmware crash, hang or allocate without end fails its run with a
FirmwareError naming the loadable and the signal or the limit, and the harness goes on.

Real cases. A shared loadable whose network descriptor has ``stat_list_index`` changed from -1 to
a valid address-list entry makes NVDLA's firmware (built from ``$NVDLA_SW``) crash: with
``STAT_ENABLE`` it writes its per-operation statistics through ``processor->stat_data_desc``,
which nothing ever set. The behaviour the KMD's firmware cannot be made to show on demand (a
hang, a runaway allocation, a runaway loop of requests) comes from a stand-in library compiled
here that has the shim's ``fw_*`` entry points. Its first ``fw_execute`` argument picks what it
does. The same stand-in pins down the protocol: every callback arrives in the firmware's order,
with its values."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nvdla_hil.harness.loadables import firmware as fwmod
from nvdla_hil.harness.loadables.firmware import Firmware, FirmwareBuild, FirmwareError

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_sw"
GOOD = "PDP_L0_0_small"  # nv_small, one PDP operation: the quickest shared loadable

STAND_IN = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef uint32_t (*rr_t)(uint32_t);
typedef void (*rw_t)(uint32_t, uint32_t);
typedef int32_t (*data_t)(uint64_t, uint64_t, uint32_t, void *);
typedef int32_t (*dma_t)(int32_t, uint64_t *);
typedef void (*log_t)(int32_t, const char *);
static rr_t rr; static rw_t rw; static data_t dr, dw; static dma_t da; static log_t lg;
static int inits;

void fw_set_callbacks(rr_t a, rw_t b, data_t c, data_t d, dma_t e, log_t f)
{ rr = a; rw = b; dr = c; dw = d; da = e; lg = f; }
int32_t fw_init(void) { return ++inits > 0 ? 0 : 1; }
int32_t fw_isr(void) { return inits; }
int32_t fw_process_events(uint32_t *done) { *done = 1; return 0; }
void fw_clear_task(void) { }

int32_t fw_execute(int32_t mode, uint32_t a, int32_t b, int32_t c, int32_t d)
{
	volatile uint64_t spin = 0;
	char buf[8];
	uint64_t addr = 0;
	int32_t s, i;
	uint32_t v;

	switch (mode) {
	case 1: return *(volatile int32_t *)(uintptr_t)8;                 /* SIGSEGV */
	case 2: for (;;) spin++;                                          /* hangs, silent */
	case 3: for (;;) { char *p = malloc(1 << 20); if (!p) abort(); memset(p, 1, 1 << 20); }
	case 4: for (;;) rw(0x100, 1);                                    /* never ends, never quiet */
	}
	rw(0x100, 0xA);
	rw(0x104, 0xB);
	lg(1, "hello");
	v = rr(0x100);
	s = dr(3, 4, 8, buf);
	if (s)
		return s;
	for (i = 0; i < 4; i++) { char t = buf[i]; buf[i] = buf[7 - i]; buf[7 - i] = t; }
	s = dw(3, 0, 8, buf);
	if (s)
		return s;
	s = da(2, &addr);
	rw(0x108, (uint32_t)addr);
	rw(0x10c, (uint32_t)da(9, &addr));
	rw(0x110, (uint32_t)s);
	lg(2, "done");
	return (int32_t)v + 7;
}
"""
NORMAL, SEGV, HANG, ALLOC, LOOP = 5, 1, 2, 3, 4


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> FirmwareBuild:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler for the stand-in firmware")
    d = tmp_path_factory.mktemp("standin")
    (d / "standin.c").write_text(STAND_IN)
    lib = d / "libstandin.so"
    subprocess.run([cc, "-O1", "-fPIC", "-shared", "-o", str(lib), str(d / "standin.c")], check=True, timeout=120)
    return FirmwareBuild(lib, None, "stand-in")


def _gone(pid: int) -> bool:
    """The process has ended: no longer there, or a zombie (of init, once its parent died)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def _reaped(pid: int) -> bool:
    """Our child ``pid`` has been reaped already (no zombie left behind)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


class Recorder:
    """Callbacks that record what the firmware asked, with a register file for reads."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.regs: dict[int, int] = {}

    def reg_read(self, addr: int) -> int:
        self.events.append(("R", addr))
        return self.regs.get(addr, 0)

    def reg_write(self, addr: int, value: int) -> None:
        self.events.append(("W", addr, value))
        self.regs[addr] = value

    def data_read(self, index: int, offset: int, size: int, buf: int) -> int:
        self.events.append(("D", index, offset, size))
        data = bytes(range(offset, offset + size))
        ctypes.memmove(buf, data, size)
        return 0

    def data_write(self, index: int, offset: int, size: int, buf: int) -> int:
        self.events.append(("S", index, offset, ctypes.string_at(buf, size)))
        return 0

    def dma_address(self, index: int) -> int | None:
        self.events.append(("A", index))
        return 0x8000_0000 + index * 0x1000 if index < 5 else None

    def log(self, level: int, msg: str) -> None:
        self.events.append(("L", level, msg))

    def bind(self, fw: Firmware) -> None:
        fw.bind(self.reg_read, self.reg_write, self.data_read, self.data_write, self.dma_address, self.log)


# ---- the protocol ------------------------------------------------------------------------------
def test_every_callback_arrives_in_order_with_its_values(stand_in: FirmwareBuild) -> None:
    rec = Recorder()
    with Firmware(stand_in) as fw:
        rec.bind(fw)
        fw.init()
        assert fw.execute(NORMAL, 32, True, False, False) == 0xA + 7
        assert fw.isr() == 1
        assert fw.process_events() == (0, True)
        fw.clear_task()
        pid = fw.pid
    assert rec.events == [
        ("W", 0x100, 0xA), ("W", 0x104, 0xB), ("L", 1, "hello"), ("R", 0x100), ("D", 3, 4, 8),
        ("S", 3, 0, bytes(range(4, 12))[::-1]), ("A", 2), ("W", 0x108, 0x8000_2000), ("A", 9),
        ("W", 0x10C, (-22) & 0xFFFF_FFFF), ("W", 0x110, 0), ("L", 2, "done"),
    ]
    assert pid is not None and _reaped(pid) and fw.pid is None  # reaped on leaving the block


def test_a_callback_that_raises_ends_the_call_and_the_next_call_starts_afresh(stand_in: FirmwareBuild) -> None:
    rec = Recorder()

    def boom(addr: int) -> int:
        raise RuntimeError(f"read of {addr:#x} refused")

    with Firmware(stand_in) as fw:
        fw.bind(boom, rec.reg_write, rec.data_read, rec.data_write, rec.dma_address, rec.log)
        first = fw.pid
        with pytest.raises(RuntimeError, match="read of 0x100 refused"):
            fw.execute(NORMAL, 32, False, False, False)
        assert fw.pid is None and _reaped(first)
        rec.bind(fw)
        assert fw.execute(NORMAL, 32, False, False, False) == 0xA + 7
        assert fw.pid not in (None, first)


# ---- crash, hang, runaway allocation, runaway loop ------------------------------------------------
def test_a_crash_names_the_signal_and_the_loadable_and_the_process_goes_on(stand_in: FirmwareBuild) -> None:
    with Firmware(stand_in, name="crasher") as fw:
        Recorder().bind(fw)
        fw.init()
        pid = fw.pid
        with pytest.raises(FirmwareError) as e:
            fw.execute(SEGV, 32, False, False, False)
        assert str(e.value).startswith("crasher: NVDLA's firmware crashed in dla_execute_task")
        assert "SIGSEGV (signal 11)" in str(e.value)
        assert _reaped(pid)  # reaped: no zombie left
        fw.clear_task()  # after a crash: nothing to clear, no second error
        assert fw.execute(NORMAL, 32, False, False, False) == 0xA + 7  # in a new process


def test_a_hang_is_killed_after_its_budget(stand_in: FirmwareBuild, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hang is cut by the 0.3 s budget this Firmware was given, not by the default one: the
    default is made 600 s here, so a call that ignored its own budget would take 600 s and fail
    the bound below however loaded the machine is, and a correct one has 600 s of headroom."""
    monkeypatch.setattr(fwmod, "HANG_BUDGET", 600.0)
    with Firmware(stand_in, name="sleeper", hang_budget=0.3) as fw:
        fw.init()  # the process is up: the budget below is the firmware's alone
        pid = fw.pid
        t0 = time.monotonic()
        with pytest.raises(FirmwareError, match=r"^sleeper: NVDLA's firmware hung in dla_execute_task: no register "
                                                r"or memory request and no completion within 0\.4 s"):
            fw.execute(HANG, 32, False, False, False)  # mode 2: two address-list entries, +0.05 s each
        assert time.monotonic() - t0 < fwmod.HANG_BUDGET  # ended by its own budget, not the default
        assert _reaped(pid)
        Recorder().bind(fw)
        assert fw.execute(NORMAL, 32, False, False, False) == 0xA + 7


def test_a_runaway_allocation_names_the_address_space_limit(stand_in: FirmwareBuild) -> None:
    with Firmware(stand_in, name="hog", memory_limit=256 << 20) as fw:
        with pytest.raises(FirmwareError) as e:
            fw.execute(ALLOC, 32, False, False, False)
    msg = str(e.value)
    assert msg.startswith("hog: NVDLA's firmware crashed in dla_execute_task: its process died of SIGABRT")
    assert "under its 256 MiB address-space limit (RLIMIT_AS)" in msg


def test_a_call_that_never_stops_asking_is_ended(stand_in: FirmwareBuild, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fwmod, "MAX_REQUESTS", 5000)
    writes: list[int] = []
    with Firmware(stand_in, name="looper") as fw:
        fw.bind(lambda a: 0, lambda a, v: writes.append(a), lambda *a: -22, lambda *a: -22, lambda i: None,
                lambda lvl, m: None)
        with pytest.raises(FirmwareError, match="^looper: NVDLA's firmware failed in dla_execute_task: made more "
                                                "than 5000 register or memory requests in one call"):
            fw.execute(LOOP, 32, False, False, False)
    assert len(writes) == 5000


def _cpu_ticks(pid: int) -> int:
    """User + system CPU time ``pid`` has used, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_the_firmware_process_dies_with_its_parent(stand_in: FirmwareBuild, tmp_path: Path) -> None:
    """The harness killed outright (SIGKILL: no atexit, no finalizer) takes the firmware with it.

    The parent is killed once the child is known to spin in fw_execute: a child blocked on its
    pipe uses no CPU, so CPU time it burns after init answered is the hang (an event, not a
    guess that 0.2 s of wall clock sufficed; a child still idle would just see EOF and exit).
    The wait for its end is bounded by the hang budget the parent gave it (a hang guard: once the
    parent is dead nothing but PR_SET_PDEATHSIG ends the spinning child)."""
    budget = 600.0
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from nvdla_hil.harness.loadables.firmware import Firmware, FirmwareBuild
        fw = Firmware(FirmwareBuild(Path({str(stand_in.library)!r}), None, "stand-in"), hang_budget={budget})
        fw.init()
        print(fw.pid, flush=True)
        fw.execute({HANG}, 32, False, False, False)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        child = int(line)
        idle = _cpu_ticks(child)  # init has answered: from here the child only uses CPU in fw_execute's loop
        guard = time.monotonic() + budget
        while not _gone(child) and parent.poll() is None and time.monotonic() < guard:
            if _cpu_ticks(child) >= idle + 10:
                break
            time.sleep(0.05)
        assert not _gone(child) and parent.poll() is None
        assert _cpu_ticks(child) >= idle + 10  # the child is spinning in fw_execute
    finally:
        parent.kill()
        parent.wait()  # SIGKILL: it ends
    deadline = time.monotonic() + budget
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


# ---- NVDLA's own firmware on a hostile shared loadable --------------------------------------------
@pytest.fixture(scope="module")
def shared() -> Path:
    root = Path(os.environ.get("NVDLA_LOADABLES") or SHARED)
    if not (root / "flatbufs").is_dir():
        pytest.skip("NVDLA's software regression is not here: set NVDLA_LOADABLES (e.g. ../shared/nvdla_sw)")
    return root


def with_stat_list(path: Path, index: int) -> bytes:
    """The loadable with its network descriptors' ``stat_list_index`` (int16 at byte 12 of the
    40-byte ``dla_network_desc``, -1 in every shared loadable) set to ``index``."""
    from nvdla_hil.harness.loadables.check import read_loadable
    from nvdla_hil.harness.loadables.fbs import IFACE_DLA1
    from nvdla_hil.harness.loadables.runtime import entry_bytes

    data = bytearray(path.read_bytes())
    ld = read_loadable(path)
    for t in ld.tasks:
        if t.interface != IFACE_DLA1:
            continue
        a = ld.addresses[t.address_list[0]]
        nd = entry_bytes(ld, a.mem_id)[a.offset:a.offset + 40]
        assert data.count(nd) == 1 and struct.unpack_from("<h", nd, 12) == (-1,)
        assert 0 <= index < len(t.address_list)
        struct.pack_into("<h", data, data.find(nd) + 12, index)
    return bytes(data)


def test_a_loadable_that_crashes_the_firmware_fails_and_a_good_one_runs_next(shared: Path, nvdla_sw: str,
                                                                             tmp_path: Path) -> None:
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.loadables.check import read_loadable
    from nvdla_hil.harness.loadables.dimg import md5
    from nvdla_hil.harness.loadables.firmware import build_firmware
    from nvdla_hil.harness.loadables.runtime import run_loadable
    from nvdla_hil.harness.targets.model import ModelTarget

    good = shared / f"flatbufs/kmd/PDP/{GOOD}_fbuf"
    bad = tmp_path / f"{GOOD}_stat_fbuf"
    bad.write_bytes(with_stat_list(good, 1))
    prof = load_profile("nv_small")
    with Firmware(build_firmware(nvdla_sw, prof.generation), name=bad.name) as fw:
        with ModelTarget(prof) as t, pytest.raises(FirmwareError) as e:
            run_loadable(read_loadable(bad), prof, t, fw)
        assert str(e.value).startswith(f"{bad.name}: NVDLA's firmware crashed in dla_process_events: its process "
                                       "died of SIGSEGV (signal 11)")
        assert "Completed PDP operation index 0" in str(e.value)  # its last words: the statistics come next
        with ModelTarget(prof) as t:
            res = run_loadable(read_loadable(good), prof, t, fw)
    golden = next(shared.glob(f"golden/{GOOD}_*/dla/lead.md5")).read_text().split()[0]
    assert md5(res.dump) == golden


def test_regress_reports_the_crash_and_runs_the_rest(shared: Path, nvdla_sw: str, tmp_path: Path) -> None:
    """``regress --suite loadables`` over a folder with the crashing loadable beside good ones: exit
    1 (a test failed), not 139; the JUnit report and the run record are whole."""
    root = tmp_path / "regression"
    src_golden = next(shared.glob(f"golden/{GOOD}_*/dla"))
    for name, data in ((f"{GOOD}_stat", with_stat_list(shared / f"flatbufs/kmd/PDP/{GOOD}_fbuf", 1)),
                       (GOOD, (shared / f"flatbufs/kmd/PDP/{GOOD}_fbuf").read_bytes()),
                       ("SDP_X1_L0_0_small", (shared / "flatbufs/kmd/SDP/SDP_X1_L0_0_small_fbuf").read_bytes())):
        (root / "flatbufs/kmd/X").mkdir(parents=True, exist_ok=True)
        (root / f"flatbufs/kmd/X/{name}_fbuf").write_bytes(data)
        golden = src_golden if name != "SDP_X1_L0_0_small" else next(shared.glob("golden/SDP_X1_L0_0_small_*/dla"))
        shutil.copytree(golden, root / f"golden/{name}_000000/dla")
    cli = Path(sys.executable).with_name("nvdla-hil")
    r = subprocess.run([str(cli), "regress", "--target", "model", "--suite", "loadables", "--loadables", str(root),
                        "--nvdla-sw", nvdla_sw, "--results-dir", str(tmp_path / "results")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    run = tmp_path / "results" / "latest"
    junit = next(run.glob("*.xml")).read_text()
    assert 'failures="1"' in junit and "SIGSEGV" in junit and f"{GOOD}_stat" in junit
    # and the rest ran: the two good loadables after the crash each passed
    import xml.etree.ElementTree as ET

    cases = {tc.get("name"): [c.tag for c in tc if c.tag in ("failure", "error", "skipped")]
             for tc in ET.fromstring(junit).iter("testcase")}
    assert len(cases) == 3, cases
    assert [n for n, bad in cases.items() if bad] == [n for n in cases if f"{GOOD}_stat" in n], cases
    assert sum(1 for n, bad in cases.items() if not bad) == 2, cases
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "finished" and record["exit_code"] == 1


def test_a_library_that_cannot_load_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "libnot.so"
    bad.write_bytes(b"not an ELF file")
    with Firmware(FirmwareBuild(bad, None, "bad")) as fw:
        with pytest.raises(FirmwareError, match=r"^the firmware's process could not start: cannot load .*libnot\.so"):
            fw.init()
        assert fw.pid is None
