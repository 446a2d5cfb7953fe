"""The DIMG dump follows the output surface's real format (harness/loadables/dimg.py): an INT8
FEATURE_X8 output (nv_small's 8-byte atoms) is dumped x8 and decodes back to its cube, on every
app numbering; a FEATURE-labelled output over 8-byte atoms is dumped as NVDLA's test app does
(x32, which NVDLA's own _small goldens are) with a note saying its elements are not the cube.

Oracles: a cube placed by hand at ``(c // 8) * surf + h * line + w * 8 + c % 8`` (the x8 rule
of ``NvDlaImage::getAddrOffset``); NVDLA's golden dumps (lead.md5); the model's output surface as
the localiser decodes it with the profile's atom."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest
from flatbuffers.table import Table

from nvdla_hil.harness.loadables.dimg import meta_for_tensor, pack_dimg, read_dimg
from nvdla_hil.harness.loadables.fbs import PIXEL_FEATURE, PIXEL_FEATURE_X8, TensorDesc

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_sw"
SRC_SW = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_src" / "sw"


def _tensor(c: int, h: int, w: int, pixel: int, dtype: int = 4, line: int | None = None) -> TensorDesc:
    line = line or w * 8
    surf = line * h
    size = surf * -(-c // 8)
    return TensorDesc("out", 0, 0, size, 0, 1, dtype, 0, pixel, 0, (1, c, h, w), (1, line, surf, 0, 0, 0, 0, 0))


@pytest.mark.parametrize("numbering", ["2018", "2019"])
def test_an_x8_surface_dump_decodes_back_to_its_cube(numbering: str) -> None:
    c, h, w = 21, 3, 5  # channels not a multiple of 8, line stride padded
    t = _tensor(c, h, w, PIXEL_FEATURE_X8, line=w * 8 + 16)
    cube = np.random.default_rng(7).integers(0, 256, (c, h, w), dtype=np.uint8)
    buf = np.zeros(t.size, np.uint8)
    for ci in range(c):
        for hi in range(h):
            for wi in range(w):
                buf[(ci // 8) * t.strides[2] + hi * t.strides[1] + wi * 8 + ci % 8] = cube[ci, hi, wi]
    meta = meta_for_tensor(t, numbering, atom=8)
    assert (meta.layout, meta.atom, meta.format, meta.numbering, meta.note) == ("F8_x8_I", 8, 41, "2019", "")
    dump = pack_dimg(meta, buf)
    back_meta, el = read_dimg(dump, "dump", meta.numbering)
    assert back_meta.layout == "F8_x8_I" and np.array_equal(el, cube)


def test_a_feature_label_over_8_byte_atoms_is_dumped_as_the_app_does_with_a_note() -> None:
    t = _tensor(32, 8, 8, PIXEL_FEATURE)  # the shared _small loadables' output tensors
    meta = meta_for_tensor(t, "2018", atom=8)
    assert (meta.layout, meta.format, meta.atom) == ("F8_x32_I", 40, 32)
    assert "8-byte atoms" in meta.note and "not the output cube in order" in meta.note
    assert meta_for_tensor(t, "2018", atom=32).note == ""


def _shared() -> Path:
    env = os.environ.get("NVDLA_LOADABLES")
    p = Path(env) if env else SHARED
    if not (p / "flatbufs").is_dir():
        pytest.skip("NVDLA's software regression is not here (NVDLA_LOADABLES or ../shared/nvdla_sw)")
    return p


def _sw() -> str:
    for sw in (os.environ.get("NVDLA_SW"), str(SRC_SW)):
        if sw and (Path(sw) / "kmd" / "firmware" / "scheduler.c").is_file():
            return sw
    pytest.skip("no nvdla/sw checkout (NVDLA_SW) whose kmd/firmware runs the loadables")


def test_shared_small_goldens_match_and_an_x8_labelled_output_dumps_its_cube(tmp_path: Path) -> None:
    """CDP_L0_0_small on the model: as shipped (FEATURE), the dump is NVDLA's golden byte for byte;
    with its output tensor relabelled FEATURE_X8 (pixel_format 37) the dump is x8 and its
    elements are the CDP's output surface as the localiser reads it with nv_small's 8-byte atoms."""
    from nvdla_hil.harness.loadables.check import check_loadable
    from nvdla_hil.harness.loadables.fbs import parse_loadable
    from nvdla_hil.harness.loadables.localise import surface_elements
    from nvdla_hil.harness.targets import TargetSpec

    root, sw = _shared(), _sw()
    src = root / "flatbufs/kmd/CDP/CDP_L0_0_small_fbuf"
    golden = next(root.glob("golden/CDP_L0_0_small_*/dla/o_000000.dimg"))
    v = check_loadable(src, spec=TargetSpec("model", "nv_small"), nvdla_sw=sw, golden=golden)
    assert v.status == "passed" and v.md5 == (golden.parent / "lead.md5").read_text().split()[0], v.message
    assert "8-byte atoms" in v.result.meta.note

    buf = bytearray(src.read_bytes())
    ld = parse_loadable(bytes(buf))
    ti = next(m for m in ld.memory if m.flags & 8).tensor_desc_id
    root_t = Table(bytes(buf), struct.unpack_from("<I", buf, 0)[0])
    vec = root_t.Vector(root_t.Offset(4 + 2 * 6))
    t = Table(bytes(buf), root_t.Indirect(vec + 4 * ti))
    pos = t.Pos + t.Offset(4 + 2 * 8)  # TensorDescListEntry.pixel_format
    assert buf[pos] == PIXEL_FEATURE
    buf[pos] = PIXEL_FEATURE_X8
    x8 = tmp_path / "CDP_x8_fbuf"
    x8.write_bytes(bytes(buf))
    v8 = check_loadable(x8, spec=TargetSpec("model", "nv_small"), nvdla_sw=sw)
    assert v8.outcome == "ran, no golden" and v8.result is not None
    meta, el = read_dimg(v8.result.dump, "dump", v8.result.meta.numbering)
    assert (meta.layout, v8.result.meta.note) == ("F8_x8_I", "")
    cdp = [s for s in v8.result.snapshots if s.op.name == "CDP"][-1]
    cube = surface_elements(cdp, 8)
    assert cube is not None and cube.shape == el.shape == (32, 8, 8)
    assert np.array_equal(el, cube) and len(np.unique(cube)) >= 3  # a real output: 0, 127 and 128 mixed
    # the x32 dump of the same surface is not the cube: the misordering the note names
    _, el32 = read_dimg(v.result.dump, "dump")
    assert not np.array_equal(el32, cube)
