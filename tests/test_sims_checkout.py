"""A read-only nvdla/hw checkout is never written (sims/checkout.py): NVDLA's flow runs in a copy
in the cache, made once per state of the checkout, and the build finds the RTL there."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nvdla_hil.sims.checkout import generated_root, is_read_only, working_copy, working_copy_path
from nvdla_hil.sims.rtl import find_vmod
from nvdla_hil.sims.toolchain import BuildError


def _checkout(root: Path) -> Path:
    """A small tree shaped like nvdla/hw (tmake, a vmod source), then marked read-only as CI's is."""
    hw = root / "hw"
    (hw / "tools" / "bin").mkdir(parents=True)
    (hw / "tools" / "bin" / "tmake").write_text("#!/usr/bin/env perl\n")
    (hw / "tools" / "bin" / "tmake").chmod(0o555)
    (hw / "vmod" / "nvdla" / "top").mkdir(parents=True)
    (hw / "vmod" / "nvdla" / "top" / "NV_nvdla.v").write_text("module NV_nvdla; endmodule\n")
    (hw / "outdir").mkdir()  # the flow's output of an earlier run: never copied
    (hw / "outdir" / "junk").write_text("x")
    return hw


def _mark_read_only(hw: Path) -> None:
    for top, dirs, files in os.walk(hw):
        for name in [*dirs, *files]:
            p = Path(top, name)
            p.chmod(stat.S_IMODE(p.stat().st_mode) & ~0o222)
    hw.chmod(0o555)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NVDLA_HIL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_marked_read_only_checkout_is_copied_once_and_never_written(tmp_path: Path, cache: Path) -> None:
    hw = _checkout(tmp_path)
    assert not is_read_only(hw) and working_copy(hw, print) == hw.resolve()  # writable: the flow runs in it
    _mark_read_only(hw)
    assert is_read_only(hw)  # even for root, who could write it: its folder says read-only
    said: list[str] = []
    copy = working_copy(hw, said.append)
    assert copy.parent == cache / "src" and copy == working_copy_path(hw) and "copying" in said[0]
    assert (copy / "tools" / "bin" / "tmake").stat().st_mode & stat.S_IXUSR  # still runnable
    assert os.access(copy / "vmod" / "nvdla" / "top" / "NV_nvdla.v", os.W_OK)  # --apply-fixes may edit it
    assert not (copy / "outdir").exists()  # an old outdir/ is not the copy's
    (copy / "tree.make").write_text("PROJECTS := nv_small\n")  # what setup writes
    assert not (hw / "tree.make").exists()
    said.clear()
    assert working_copy(hw, said.append) == copy and "working copy" in said[0] and (copy / "tree.make").is_file()
    assert not list((cache / "src").glob(".tmp-*"))  # made in a temporary folder, renamed into place


def test_a_changed_checkout_gets_a_fresh_copy(tmp_path: Path, cache: Path) -> None:
    hw = _checkout(tmp_path)
    _mark_read_only(hw)
    first = working_copy(hw, lambda _: None)
    v = hw / "vmod" / "nvdla" / "top" / "NV_nvdla.v"
    hw.chmod(0o755)
    v.chmod(0o644)
    v.write_text("module NV_nvdla; wire a; endmodule\n")  # the checkout moved on
    _mark_read_only(hw)
    second = working_copy(hw, lambda _: None)
    assert second != first and "wire a" in (second / "vmod" / "nvdla" / "top" / "NV_nvdla.v").read_text()


def test_the_build_finds_the_rtl_generated_in_the_copy(tmp_path: Path, cache: Path) -> None:
    hw = _checkout(tmp_path)
    _mark_read_only(hw)
    with pytest.raises(BuildError, match="read-only one is copied to the cache"):
        find_vmod(hw, "nv_small")  # nothing generated yet: says how
    copy = working_copy(hw, lambda _: None)
    top = copy / "outdir" / "nv_small" / "vmod" / "nvdla" / "top"
    top.mkdir(parents=True)
    (top / "NV_nvdla.v").write_text("module NV_nvdla; endmodule\n")  # what tmake generates
    assert generated_root(hw, "nv_small") == copy
    assert find_vmod(hw, "nv_small") == copy / "outdir" / "nv_small" / "vmod"
    assert generated_root(hw, "nv_small_256_full") == hw.resolve()  # not generated: the checkout, for the message
