"""Bounds on a trace's untrusted numbers and files, and :class:`TraceError`, which names the
file and line of what broke them.

Untrusted numbers are bounded before anything is allocated (constants below, with their
measurements): every address and ``address + size`` fits the 64-bit address space; one
``mem_init``/``check_crc`` region and one ``.dat`` image extent are at most
:data:`MAX_REGION_BYTES`; all ``mem_init`` sizes plus ``.dat`` image extents of one trace at
most :data:`MAX_TRACE_BYTES`. ``.cfg`` and ``.dat`` files must be ASCII (the error names the
line of the first other byte) and regular files.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ...drivers.errors import InputError

__all__ = ["TraceError", "ADDRESS_LIMIT", "MAX_REGION_BYTES", "MAX_TRACE_BYTES", "MAX_CFG_BYTES", "MAX_DAT_BYTES",
           "MAX_DAT_LINE", "NUMBER", "parse_number", "check_region", "ascii_text", "regular_file"]

# Bounds on untrusted numbers and files, checked before anything is allocated. Measured over
# every trace of /work/shared/nvdla/trace_tests and nvdla/hw verif/tests/trace_tests (470
# traces, 608 .dat files): largest mem_init 0x7b64b00 bytes (~124 MiB, nv_small_256_full
# sdp_13x4x29_ew_lut_int8), largest .dat image extent 0x5c8c088 (~93 MiB, same trace), largest
# check_crc 0x867900 (~8.4 MiB), largest total set-up of one trace 0x7b682a0 (~124 MiB),
# highest end address 0xa00c0e40, largest .dat file 1 MiB (0xfca49 bytes), largest .cfg
# 22 KiB, longest .dat record 32 bytes (~170 characters).
ADDRESS_LIMIT = 1 << 64  # addresses and address + size fit the 64-bit address space
#: one mem_init / check_crc region or one .dat image extent: ~8x the largest public region
MAX_REGION_BYTES = 1 << 30
#: all mem_init sizes plus .dat image extents of one trace: ~32x the largest public trace
MAX_TRACE_BYTES = 4 << 30
#: a .cfg file: ~700x the largest public one
MAX_CFG_BYTES = 16 << 20
#: a .dat file: ~500x the largest public one (a dense 93 MiB image would be ~500 MiB of text)
MAX_DAT_BYTES = 512 << 20
#: one .dat line: a record of ~200 KiB payload (public records are 32 bytes)
MAX_DAT_LINE = 1 << 20


class TraceError(InputError):
    """A malformed trace or data file; the message names file and line."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")
        self.path, self.line = str(path), line


#: a number as the files spell it: 0x-hex or decimal (:func:`parse_number` bounds its value)
NUMBER = r"(?:0[xX][0-9a-fA-F]+|[0-9]+)"


def parse_number(path: Path | str, line: int | None, token: str, what: str, bits: int = 64) -> int:
    """An unsigned decimal or 0x-hex number of at most ``bits`` bits; never converts a
    thousand-digit string (the length is checked first)."""
    if token[:2] in ("0x", "0X"):
        digits, base, most = token[2:], 16, (bits + 3) // 4
    else:
        digits, base, most = token, 10, len(str(1 << bits))
        if len(token) > 1 and token[0] == "0":
            raise TraceError(path, line, f"{what} {token[:24]!r}: decimal with a leading zero (octal?)")
    if not digits or len(digits.lstrip("0")) > most:
        raise TraceError(path, line, f"{what} {token[:24]}{'...' if len(token) > 24 else ''} does not fit {bits} bits")
    value = int(digits, base)
    if value >= 1 << bits:
        raise TraceError(path, line, f"{what} {token[:24]} does not fit {bits} bits")
    return value


def check_region(path: Path, line: int, what: str, addr: int, size: int) -> None:
    """One region: 1..:data:`MAX_REGION_BYTES` bytes, inside the 64-bit address space."""
    if not 1 <= size <= MAX_REGION_BYTES:
        raise TraceError(path, line, f"{what} size {size:#x} is not 1..{MAX_REGION_BYTES:#x} bytes "
                                     f"(the bound of one region, {MAX_REGION_BYTES >> 30} GiB)")
    if addr + size > ADDRESS_LIMIT:
        raise TraceError(path, line, f"{what} {addr:#x}+{size:#x} runs past the 64-bit address space")


def ascii_text(path: Path, raw: bytes) -> str:
    """``raw`` as text; a byte outside ASCII is an error naming its line and column."""
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise TraceError(path, line, f"byte {raw[e.start]:#04x} at column {col} is not ASCII text") from None


def regular_file(path: Path, where: Path | str, what: str, limit: int, *, unreadable: str = "cannot read") -> os.stat_result:
    """``path``'s status: a regular file of at most ``limit`` bytes, else an error at ``where``
    (``unreadable``: how the message names a file that cannot be opened)."""
    try:
        st = path.stat()
    except OSError as e:
        raise TraceError(where, None, f"{unreadable} {what} {path.name}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TraceError(where, None, f"{what} {path.name} is not a regular file")
    if st.st_size > limit:
        raise TraceError(where, None, f"{what} {path.name} is {st.st_size} bytes, more than {limit} "
                                      f"({limit >> 20} MiB); refused")
    return st
