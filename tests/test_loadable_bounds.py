"""Where NVDLA's firmware or an EMU task names memory (an address-list index, an offset, a size), the
runner checks it in one place (harness/loadables/runtime.py ``address_entry``, ``check_span``):
a loadable is untrusted input, so an index outside the task's list or an access past its memory
entry is a LoadableError naming the task, the entry and the sizes, never a read of other memory."""

from __future__ import annotations

import pytest

from nvdla_hil.harness.loadables.fbs import AddressEntry, Loadable, LoadableError, MemoryEntry, TaskEntry
from nvdla_hil.harness.loadables.runtime import PAGE, address_entry, check_span


def _loadable() -> tuple[Loadable, TaskEntry]:
    mem = MemoryEntry(id=0, domain=0, flags=1, size=3 * PAGE, alignment=4096, contents=(), offsets=(), bind_id=0,
                      tensor_desc_id=0)
    addrs = (AddressEntry(id=0, mem_id=0, offset=0, size=3 * PAGE), AddressEntry(id=1, mem_id=0, offset=256, size=64))
    task = TaskEntry(id=7, interface=1, instance=0, address_list=(1, 0), pre_actions=(), post_actions=())
    return Loadable(version=(0, 7, 0), tasks=(task,), memory=(mem,), addresses=addrs, events=(), blobs=(), tensors=(),
                    relocs=(), submits=()), task


def test_an_address_list_index_names_its_entry_and_nothing_outside_the_list():
    ld, task = _loadable()
    assert address_entry(ld, task, 0, "task 7").offset == 256  # the task's list, not the loadable's
    assert address_entry(ld, task, 1, "task 7").id == 0
    for bad in (2, -1, 1 << 40):
        with pytest.raises(LoadableError, match=rf"^EMU task 7: address-list index {bad} outside its 2 entries$"):
            address_entry(ld, task, bad, "EMU task 7")


@pytest.mark.parametrize("offset,size,ok", [
    (0, 3 * PAGE, True),           # the whole entry
    (3 * PAGE - 4, 4, True),       # its last word
    (3 * PAGE - 4, 8, False),      # one word past it
    (-4, 4, False),                # before it
    (0, -1, False),
    (1 << 62, 1 << 62, False),     # Python integers do not wrap
])
def test_an_access_stays_within_its_memory_entry(offset, size, ok):
    if ok:
        check_span("task 7", "firmware read", 1, offset, size, 3 * PAGE)
        return
    with pytest.raises(LoadableError, match=rf"^task 7: firmware read of {size} bytes at {offset} of address-list "
                                            rf"entry 1 beyond its {3 * PAGE} bytes$"):
        check_span("task 7", "firmware read", 1, offset, size, 3 * PAGE)


def test_a_small_entry_still_has_its_first_page():
    """NVDLA's KMD maps whole pages: the firmware may touch a 64-byte entry's page, not beyond it."""
    check_span("EMU task 7", "write", 0, 0, PAGE, 64)
    with pytest.raises(LoadableError, match="EMU task 7: write of 4 bytes at 4096 of address-list entry 0 beyond its 64 bytes"):
        check_span("EMU task 7", "write", 0, PAGE, 4, 64)
