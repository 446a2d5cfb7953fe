"""A read-only nvdla/hw checkout (a CI image's, a shared lab copy, ``../shared/nvdla_src/hw``) is
never written: NVDLA's tmake flow writes ``tree.make`` and ``outdir/`` into the tree it runs in,
so ``sim setup`` runs it in a working copy under the cache, ``<cache>/src/<name>-<key>``, and
``sim build`` (:func:`~.rtl.find_vmod`) finds the generated RTL there.

The key is the checkout's resolved path and the relative path, size and modification time of
every file in it (``outdir/`` and ``.git/`` aside): a checkout that changes gets a fresh copy;
an unchanged one finds the copy (and the RTL generated in it) again. A copy is made in a
temporary folder and renamed into place, so a half-made copy is never used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
from collections.abc import Callable
from pathlib import Path

from .cache import cache_base

__all__ = ["is_generated", "is_read_only", "working_copy", "working_copy_path", "generated_root"]

#: folders of a checkout that are the flow's output or version control, not its sources
_SKIP = frozenset({"outdir", ".git"})


def _cache_src() -> Path:
    """``<cache>/src``, beside the simulator builds and the C model (:func:`~.cache.cache_base`)."""
    return cache_base() / "src"


def is_read_only(hw: Path) -> bool:
    """True when NVDLA's flow must not write the checkout: its top folder (or an ``outdir/`` it
    has) is not writable, or is marked read-only (no owner write bit: root could write it, but
    whoever marked it so does not want it written)."""
    def closed(p: Path) -> bool:
        return not os.access(p, os.W_OK) or not p.stat().st_mode & stat.S_IWUSR

    out = hw / "outdir"
    return closed(hw) or (out.is_dir() and closed(out))


def _fingerprint(hw: Path) -> str:
    h = hashlib.sha256(str(hw).encode())
    for top, dirs, files in os.walk(hw):
        dirs[:] = sorted(d for d in dirs if not (top == str(hw) and d in _SKIP))
        for name in sorted(files):
            p = os.path.join(top, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            h.update(f"{os.path.relpath(p, hw)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def working_copy_path(hw: Path) -> Path:
    """Where the working copy of the read-only checkout ``hw`` is (or would be) in the cache."""
    hw = Path(hw).expanduser().resolve()
    return _cache_src() / f"{hw.name}-{_fingerprint(hw)}"


def working_copy(hw: Path, progress: Callable[[str], None]) -> Path:
    """The tree NVDLA's flow may write for checkout ``hw``: ``hw`` itself when it is writable,
    else its working copy in the cache (made now if there is none: a few seconds, the size of
    the checkout, about 50 MB for nvdla/hw master)."""
    hw = Path(hw).expanduser().resolve()
    if not is_read_only(hw):
        return hw
    dest = working_copy_path(hw)
    if dest.is_dir():
        progress(f"  {hw} is read-only: NVDLA's flow runs in its working copy {dest}")
        return dest
    progress(f"  {hw} is read-only: copying it to {dest} for NVDLA's flow (tree.make and outdir/ go there)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".tmp-{dest.name}-{socket.gethostname()}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(hw, tmp, symlinks=True, ignore=lambda d, names: [n for n in names if Path(d) == hw and n in _SKIP])
    for top, dirs, files in os.walk(tmp):  # a read-only checkout's modes: the copy is the flow's to write
        for name in [*dirs, *files]:
            p = os.path.join(top, name)
            if not os.path.islink(p):
                os.chmod(p, stat.S_IMODE(os.lstat(p).st_mode) | stat.S_IWUSR | stat.S_IRUSR)
    os.chmod(tmp, 0o755)
    try:
        os.rename(tmp, dest)
    except OSError:  # another process made it first: theirs is the same checkout's copy
        shutil.rmtree(tmp, ignore_errors=True)
        if not dest.is_dir():
            raise
    return dest


def is_generated(root: Path, config: str) -> bool:
    """``root`` holds NVDLA's generated RTL of ``config`` (``outdir/<config>/vmod``, its top level)."""
    return (Path(root) / "outdir" / config / "vmod" / "nvdla" / "top" / "NV_nvdla.v").is_file()


def generated_root(hw: Path, config: str) -> Path:
    """The tree that holds ``outdir/<config>/vmod`` for checkout ``hw``: the checkout itself, or
    the working copy ``sim setup`` generated it in when the checkout is read-only; ``hw`` when
    neither has it (the caller says how to generate it)."""
    hw = Path(hw).expanduser().resolve()
    if is_generated(hw, config) or not is_read_only(hw):
        return hw
    copy = working_copy_path(hw)
    return copy if is_generated(copy, config) else hw
