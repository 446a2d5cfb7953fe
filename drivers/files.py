"""Untrusted files read safely: only a regular file, of a bounded size.

A FIFO, a device (``/dev/zero``, ``/dev/urandom``) or a folder given where a file belongs could
block forever or never end; a huge file could exhaust memory. Every option and manifest that names
a file the tool reads (run folders, vectors' manifests, lab files, loadables) goes through
:func:`read_regular`: the file is opened without blocking, checked on the open descriptor (a path
swapped for a FIFO meanwhile cannot slip through) and read at most ``limit`` bytes.
"""

from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path

from .errors import InputError

__all__ = ["gunzip_bounded", "read_regular"]


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of ``path``, only when it is a regular file of at most ``limit`` bytes: a FIFO, a
    device or a folder (which could block or never end) and a bigger file are an
    :class:`InputError` naming the file; a missing one is ``FileNotFoundError``."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise
    except OSError as e:
        raise InputError(f"{path}: cannot be read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file (a FIFO, device or folder is never read)")
        if st.st_size > limit:
            raise InputError(f"{path}: {st.st_size} bytes, more than the {limit} this file may have")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as e:
        raise InputError(f"{path}: cannot be read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"{path}: more than the {limit} bytes this file may have")
    return data


def gunzip_bounded(data: bytes, limit: int, where: str | Path) -> bytes:
    """The gzip stream ``data`` (one member, as this project writes) decompressed, at most ``limit``
    bytes: a stream that expands past it (a decompression bomb) or is cut short is an
    :class:`InputError` naming ``where``; nothing past ``limit`` is ever produced."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as e:
        raise InputError(f"{where}: not gzip data: {e}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise InputError(f"{where}: expands past {limit} bytes (a gzip stream this large is not read)")
    if not d.eof:
        raise InputError(f"{where}: the gzip stream is cut short")
    return out
