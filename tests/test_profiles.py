"""Hardware profiles derived from nvdla/hw configuration specs (drivers/specdefs.py).

The hand-written spec below restates nv_medium_512's defines from nvdla/hw master
(spec/defs/nv_medium_512.spec); the expected values are read off those lines, not produced by
the code under test. With a checkout (``NVDLA_HW``, and ``NVDLA_HW_V1`` for nvdlav1), every
shipped profile is compared with its spec file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvdla_hil.drivers.profiles import ProfileError, list_profiles, load_profile
from nvdla_hil.drivers.specdefs import SpecError, parse_spec, profile_from_spec
from nvdla_hil.harness.cli import main

MEDIUM_512 = """\
#define FEATURE_DATA_TYPE_INT8
#define WEIGHT_DATA_TYPE_INT8
#define WEIGHT_COMPRESSION_DISABLE
#define WINOGRAD_DISABLE
#define BATCH_DISABLE
#define SECONDARY_MEMIF_DISABLE
#define SDP_LUT_DISABLE
#define SDP_BS_ENABLE
#define SDP_BN_ENABLE
#define SDP_EW_DISABLE
#define BDMA_DISABLE
#define RUBIK_DISABLE
#define RUBIK_CONTRACT_DISABLE
#define RUBIK_RESHAPE_DISABLE
#define PDP_ENABLE
#define CDP_ENABLE
#define RETIMING_DISABLE
#define MAC_ATOMIC_C_SIZE_32
#define MAC_ATOMIC_K_SIZE_16
#define MEMORY_ATOMIC_SIZE_16
#define MAX_BATCH_SIZE_x
#define CBUF_BANK_NUMBER_32
#define CBUF_BANK_WIDTH_32
#define CBUF_BANK_DEPTH_512
#define SDP_BS_THROUGHPUT_4
#define SDP_BN_THROUGHPUT_4
#define SDP_EW_THROUGHPUT_x
#define PDP_THROUGHPUT_2
#define CDP_THROUGHPUT_2
#define PRIMARY_MEMIF_LATENCY_256
#define SECONDARY_MEMIF_LATENCY_x
#define PRIMARY_MEMIF_MAX_BURST_LENGTH_4
#define PRIMARY_MEMIF_WIDTH_128
#define SECONDARY_MEMIF_MAX_BURST_LENGTH_x
#define SECONDARY_MEMIF_WIDTH_x
#define MEM_ADDRESS_WIDTH_64
#define NUM_DMA_READ_CLIENTS_7
#define NUM_DMA_WRITE_CLIENTS_3

#include "projects.spec"
"""


def _spec(tmp_path: Path, text: str, name: str = "my_cfg") -> Path:
    p = tmp_path / "spec" / "defs" / f"{name}.spec"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_medium_512_from_its_spec(tmp_path: Path) -> None:
    d = profile_from_spec(_spec(tmp_path, MEDIUM_512))
    assert d["generation"] == "v2"
    assert (d["atom_bytes"], d["mac_atomic_c"], d["mac_atomic_k"]) == (16, 32, 16)
    assert (d["cbuf_banks"], d["cbuf_bank_width"], d["cbuf_bank_depth"]) == (32, 32, 512)
    assert (d["primary_memif_width"], d["secondary_memif_width"], d["mem_address_width"]) == (128, 0, 64)
    assert d["max_batch"] == 1
    assert d["throughput"] == {"sdp_bs": 4, "sdp_bn": 4, "sdp_ew": 0, "pdp": 2, "cdp": 2}
    f = d["features"]
    assert f["sdp_bs"] and f["sdp_bn"] and f["pdp"] and f["cdp"] and f["int8"]
    assert not (f["sdp_lut"] or f["sdp_ew"] or f["sec_mem"] or f["int16"] or f["fp16"] or f["winograd"])
    assert "CVIF" not in d["units"] and "BDMA" not in d["units"] and "CDP" in d["units"]
    # a shipped profile with the same spec is the same profile
    shipped = load_profile("nv_medium_512")
    assert (shipped.atom_bytes, shipped.mac_atomic_c, shipped.mac_atomic_k) == (16, 32, 16)


def test_spec_path_is_a_profile(tmp_path: Path) -> None:
    p = load_profile(str(_spec(tmp_path, MEDIUM_512)))
    assert p.name == "my_cfg" and p.atom_bytes == 16 and p.regmap.generation == "v2"
    assert p.regmap.has_block("SDP") and not p.regmap.has_block("CVIF")
    # an unshipped configuration of a checkout is found by name
    q = load_profile("my_cfg", nvdla_hw=tmp_path)
    assert q == p


def test_comments_are_not_defines(tmp_path: Path) -> None:
    text = MEDIUM_512.replace("#define SDP_LUT_DISABLE", "//#define SDP_LUT_ENABLE\n#define SDP_LUT_DISABLE")
    text = text.replace("#define PDP_ENABLE", "/* #define PDP_DISABLE */\n#define PDP_ENABLE")
    d = profile_from_spec(_spec(tmp_path, text))
    assert not d["features"]["sdp_lut"] and d["features"]["pdp"]
    assert parse_spec(_spec(tmp_path, text))["PDP_ENABLE"][1] == text.splitlines().index("#define PDP_ENABLE") + 1


@pytest.mark.parametrize(
    "edit, message",
    [
        (("#define SDP_LUT_DISABLE\n", ""), "SDP_LUT_ENABLE / SDP_LUT_DISABLE"),
        (("#define SDP_LUT_DISABLE", "#define SDP_LUT_DISABLE\n#define SDP_LUT_ENABLE"), "SDP_LUT_ENABLE / SDP_LUT_DISABLE"),
        (("#define MAC_ATOMIC_C_SIZE_32\n", ""), "no MAC_ATOMIC_C_SIZE_<n>"),
        (("#define MEMORY_ATOMIC_SIZE_16", "#define MEMORY_ATOMIC_SIZE_16\n#define MEMORY_ATOMIC_SIZE_32"),
         "defined more than once"),
        (("#define SECONDARY_MEMIF_DISABLE", "#define SECONDARY_MEMIF_ENABLE"), "SECONDARY_MEMIF_WIDTH"),
    ],
)
def test_bad_specs_name_the_define(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    with pytest.raises(SpecError, match=message) as e:
        profile_from_spec(_spec(tmp_path, MEDIUM_512.replace(*edit)))
    assert "my_cfg.spec" in str(e.value)


def test_not_a_spec(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no #define"):
        profile_from_spec(_spec(tmp_path, "hello\n"))
    with pytest.raises(ProfileError, match="no such file|cannot read"):
        load_profile(str(tmp_path / "missing.spec"))
    with pytest.raises(ProfileError, match="did you mean nv_medium_512"):
        load_profile("nv_medium512")


def test_profile_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVDLA_HW", raising=False)
    spec = _spec(tmp_path, MEDIUM_512, "nv_medium_512")
    assert main(["profile", "derive", str(spec), "--compare"]) == 0
    assert "0 difference(s)" in capsys.readouterr().out
    wrong = _spec(tmp_path, MEDIUM_512.replace("MAC_ATOMIC_K_SIZE_16", "MAC_ATOMIC_K_SIZE_32"), "nv_medium_512")
    assert main(["profile", "derive", str(wrong), "--compare"]) == 1
    assert "nv_medium_512.mac_atomic_k: shipped 16, spec says 32" in capsys.readouterr().out
    out = tmp_path / "p.yaml"
    assert main(["profile", "derive", str(spec), "--out", str(out)]) == 0
    assert main(["profile", "derive", str(spec), "--out", str(out)]) == 2  # never overwrites unasked
    assert "exists" in capsys.readouterr().err
    assert main(["profile", "derive"]) == 2


@pytest.mark.parametrize("name", list_profiles())
def test_shipped_profiles_match_the_checkout(name: str) -> None:
    """Every shipped profile equals what its spec file says (needs the checkouts)."""
    p = load_profile(name)
    env = "NVDLA_HW_V1" if p.generation == "v1" else "NVDLA_HW"
    hw = os.environ.get(env)
    if not hw:
        pytest.skip(f"set {env} to an nvdla/hw checkout ({'nvdlav1' if p.generation == 'v1' else 'master'}) "
                    "to compare the shipped profile with its spec file")
    d = profile_from_spec(Path(hw) / p.source)
    got = {k: getattr(p, k) for k in d}
    got["units"], got["features"], got["throughput"] = list(p.units), dict(p.features), dict(p.throughput)
    assert got == d
