"""A trace's ``.dat`` memory images: ``{offset:0x.., size:N, payload:0x.. 0x..},`` records
(braces on their own lines are allowed), read into sparse :class:`DatImage` segments.

``.dat`` files must be ASCII, regular files inside the trace folder (a symlink that resolves
elsewhere is refused without reading it), at most :data:`~.limits.MAX_DAT_BYTES` with lines of
at most :data:`~.limits.MAX_DAT_LINE`, hold at least one record, records must fit
:data:`~.limits.MAX_REGION_BYTES`, and records that overlap must agree byte for byte. Errors
are :class:`~.limits.TraceError` naming the file and line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .limits import MAX_DAT_BYTES, MAX_DAT_LINE, MAX_REGION_BYTES, NUMBER, TraceError, parse_number, regular_file

__all__ = ["DatImage", "read_dat", "load_dat"]

_A = re.ASCII
_DAT_HEAD = re.compile(rf"^\{{\s*offset\s*:\s*({NUMBER})\s*,\s*size\s*:\s*({NUMBER})\s*,\s*payload\s*:", _A)
# payload tokens 0xH or 0xHH, each followed by white space or the end (no backtracking)
_PAYLOAD = re.compile(r"(?:\s*0[xX][0-9a-fA-F]{1,2}(?![0-9a-zA-Z]))*\s*", _A)
# The form NVDLA's trace generator writes, one record per line: ``{offset:0x10, size:4,
# payload:0x70 0xae 0x2c 0x18} ,`` (and lone braces). Files wholly in this form are read in a
# few passes of the regex engine and numpy (:func:`_canonical_records`); anything else takes
# the line-by-line path, which also words every error.
_CANON_RECORD = rb"\{offset:0x([0-9a-fA-F]{1,15}), size:([1-9][0-9]{0,9}), payload:((?:0x[0-9a-fA-F]{2} )*0x[0-9a-fA-F]{2})\} ?,?"
_CANON_FILE = re.compile(rb"(?:(?:[{}]|" + _CANON_RECORD + rb")[ \t\r]*\n)*(?:(?:[{}]|" + _CANON_RECORD
                         + rb")[ \t\r]*)?")
_CANON_LINE = re.compile(_CANON_RECORD)
#: files up to this size may take the canonical path (read whole; larger ones stream by line)
CANONICAL_MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class DatImage:
    """A ``.dat`` image: ``extent`` bytes from its base (gaps read 0), ``segments`` sorted,
    disjoint ``(offset, bytes)`` runs of record payload."""

    extent: int
    segments: tuple[tuple[int, bytes], ...]

    def dense(self) -> np.ndarray:
        image = np.zeros(self.extent, dtype=np.uint8)
        for off, payload in self.segments:
            image[off : off + len(payload)] = np.frombuffer(payload, dtype=np.uint8)
        return image


def _check_file(path: Path, where: Path | str, folder: Path | None) -> None:
    """``path`` is a regular file of at most :data:`MAX_DAT_BYTES` (inside ``folder`` when given,
    checked without reading it); errors name ``where``."""
    if folder is not None:
        try:
            resolved = path.resolve(strict=True)
        except FileNotFoundError:
            raise TraceError(where, None, f"missing data file {path.name}: No such file or directory") from None
        except (OSError, RuntimeError) as e:
            raise TraceError(where, None, f"cannot resolve data file {path.name}: {e}") from None
        if not resolved.is_relative_to(folder.resolve()):
            raise TraceError(where, None, f"data file {path.name} resolves outside the trace folder "
                                          f"(a symlink?); refused")
    regular_file(path, where, "data file", MAX_DAT_BYTES, unreadable="missing")


def _record(path: Path, lineno: int, line: str) -> tuple[int, bytes]:
    """``(offset, payload)`` of one record line."""
    m = _DAT_HEAD.match(line)
    body = line[m.end():].rstrip() if m else ""
    if body.endswith(","):
        body = body[:-1].rstrip()
    if m is None or not body.endswith("}") or _PAYLOAD.fullmatch(body, 0, len(body) - 1) is None:
        raise TraceError(path, lineno, f"malformed memory record: {line[:80]!r}")
    off = parse_number(path, lineno, m.group(1), "record offset")
    size = parse_number(path, lineno, m.group(2), "record size")
    tokens = body[:-1].split()
    if len(tokens) != size:
        raise TraceError(path, lineno, f"record says size {size} but carries {len(tokens)} bytes")
    if off + size > MAX_REGION_BYTES:
        raise TraceError(path, lineno, f"record {off:#x}+{size:#x} runs past the bound of one image "
                                       f"({MAX_REGION_BYTES:#x} bytes)")
    if all(len(t) == 4 for t in tokens):
        return off, bytes.fromhex("".join(t[2:] for t in tokens))
    return off, bytes(int(t[2:], 16) for t in tokens)


def _records(path: Path, fh: BinaryIO) -> list[tuple[int, bytes, int]]:
    """``(offset, payload, line)`` of every record, line by line (each at most :data:`MAX_DAT_LINE`)."""
    records: list[tuple[int, bytes, int]] = []
    lineno = 0
    while True:
        rawline = fh.readline(MAX_DAT_LINE + 1)
        if not rawline:
            break
        lineno += 1
        if len(rawline) > MAX_DAT_LINE and not rawline.endswith(b"\n"):
            raise TraceError(path, lineno, f"line longer than {MAX_DAT_LINE} characters")
        try:
            line = rawline.decode("ascii").strip()
        except UnicodeDecodeError as e:
            raise TraceError(path, lineno, f"byte {rawline[e.start]:#04x} at column {e.start + 1} is not "
                                           f"ASCII text") from None
        if not line or line in ("{", "}"):
            continue
        off, payload = _record(path, lineno, line)
        records.append((off, payload, lineno))
    return records


def _canonical_records(data: bytes) -> DatImage | None:
    """The image of a file wholly in the canonical form whose records come in increasing,
    non-overlapping offset order (as NVDLA's generator writes them), else ``None``.

    Same checks as the line-by-line path: size equals the byte count, every record inside
    :data:`MAX_REGION_BYTES`, lines within :data:`MAX_DAT_LINE`; vectorised instead of one
    Python call per record."""
    if not data.isascii() or _CANON_FILE.fullmatch(data) is None:
        return None
    if max(map(len, data.split(b"\n"))) > MAX_DAT_LINE:
        return None
    found = _CANON_LINE.findall(data)
    if not found:
        return None
    offs_t, sizes_t, payloads = zip(*found, strict=True)
    off = np.array([int(t, 16) for t in offs_t], dtype=np.int64)
    size = np.array([int(t) for t in sizes_t], dtype=np.int64)
    carried = (np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads)) + 1) // 5
    end = off + size
    if (carried != size).any() or (end > MAX_REGION_BYTES).any() or (off[1:] < end[:-1]).any():
        return None  # the line-by-line path words the error (or merges the overlap)
    blob = bytes.fromhex(b"".join(payloads).replace(b"0x", b"").decode())
    starts = np.flatnonzero(np.r_[True, off[1:] != end[:-1]])  # a gap opens a new segment
    stops = np.r_[starts[1:], len(off)]
    pos = np.r_[0, np.cumsum(size)]
    segments = tuple((int(off[a]), blob[pos[a] : pos[b]]) for a, b in zip(starts, stops, strict=True))
    return DatImage(int(end.max()), segments)


def _image(path: Path, records: list[tuple[int, bytes, int]]) -> DatImage:
    """The records merged into sorted, disjoint segments; overlapping records must agree."""
    if not records:
        raise TraceError(path, None, "no memory records (an empty data file)")
    records.sort(key=lambda r: r[0])
    extent = max(off + len(p) for off, p, _ in records)
    segments: list[tuple[int, bytearray, int]] = []  # (offset, bytes, line of the last record)
    for off, payload, lineno in records:
        if segments and off <= segments[-1][0] + len(segments[-1][1]):
            start, buf, prev = segments[-1]
            common = min(start + len(buf), off + len(payload)) - off
            if common > 0 and buf[off - start : off - start + common] != payload[:common]:
                i = next(k for k in range(common) if buf[off - start + k] != payload[k])
                raise TraceError(path, lineno, f"record overlaps the record of line {prev} with different "
                                               f"bytes (offset {off + i:#x})")
            buf += payload[common:]
            segments[-1] = (start, buf, lineno)
        else:
            segments.append((off, bytearray(payload), lineno))
    return DatImage(extent, tuple((off, bytes(buf)) for off, buf, _ in segments))


def read_dat(path: Path, *, where: Path | str | None = None, folder: Path | None = None) -> DatImage:
    """Read and check a ``.dat`` file (see :func:`load_dat`). ``where`` (the ``.cfg`` line that
    loads it) is named when the file is missing or refused; ``folder``, when given, is the
    trace folder the file must resolve inside (its content is never read or echoed then)."""
    where = where or path
    _check_file(path, where, folder)
    try:
        fh = path.open("rb")
    except OSError as e:
        raise TraceError(where, None, f"missing data file {path.name}: {e.strerror}") from e
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= CANONICAL_MAX_BYTES:
            data = fh.read(size + 1)  # one byte more: a file that grew since takes the other path
            image = _canonical_records(data) if len(data) <= size else None
            if image is not None:
                return image
            fh.seek(0)
        records = _records(path, fh)
    return _image(path, records)


def load_dat(path: Path, *, trace_path: Path | None = None) -> np.ndarray:
    """Read a ``.dat`` memory image: ``{offset:0x.., size:N, payload:0x.. 0x..},`` records
    (braces on their own lines are allowed). Returns the image as ``uint8``, gaps zero.

    The file must be ASCII, hold at least one record, records must fit
    :data:`MAX_REGION_BYTES` and records that overlap must agree; errors are
    :class:`TraceError` naming the ``.dat`` file and line (``trace_path`` when it is missing)."""
    return read_dat(Path(path), where=trace_path).dense()
