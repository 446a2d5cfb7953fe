"""Register map, RDL reader and hardware profiles.

Expected values are hand-copied from nvdla/hw: master spec/manual/NVDLA_*.rdl (v2) and
nvdlav1 cmod/include/arnvdla.h (v1), not produced by the code under test.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from nvdla_hil.drivers import rdl
from nvdla_hil.drivers.profiles import (
    FeatureMissingError,
    HardwareProfile,
    ProfileError,
    list_profiles,
    load_profile,
)
from nvdla_hil.drivers.regcheck import compare_regmaps
from nvdla_hil.drivers.regmap import (
    FieldRangeError,
    RegisterMap,
    RegisterMapError,
    RegmapFormatError,
    UnitNotPresentError,
    UnknownFieldError,
    UnknownRegisterError,
    dump_yaml,
    load_regmap,
    regmap_from_yaml,
)
from nvdla_hil.drivers.regcheck import check_against_checkout, compare_with_rdl

FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="module")
def v2() -> RegisterMap:
    return load_regmap("v2")


@pytest.fixture(scope="module")
def v1() -> RegisterMap:
    return load_regmap("v1")


# ---------------------------------------------------------------------------------- facts: v2

V2_BASES = {  # addrmap lines of master spec/manual/NVDLA_*.rdl
    "CFGROM": 0x0,
    "GLB": 0x1000,
    "MCIF": 0x2000,
    "CDMA": 0x3000,
    "CSC": 0x4000,
    "CMAC_A": 0x5000,
    "CMAC_B": 0x6000,
    "CACC": 0x7000,
    "SDP_RDMA": 0x8000,
    "SDP": 0x9000,
    "PDP_RDMA": 0xA000,
    "PDP": 0xB000,
    "CDP_RDMA": 0xC000,
    "CDP": 0xD000,
    "GEC": 0xE000,
    "CVIF": 0xF000,
    "BDMA": 0x10000,
    "RBK": 0x11000,
}

V1_BASES = {  # arnvdla.h (nvdlav1): first register address of each block
    "GLB": 0x0,
    "GEC": 0x1000,
    "MCIF": 0x2000,
    "CVIF": 0x3000,
    "BDMA": 0x4000,
    "CDMA": 0x5000,
    "CSC": 0x6000,
    "CMAC_A": 0x7000,
    "CMAC_B": 0x8000,
    "CACC": 0x9000,
    "SDP_RDMA": 0xA000,
    "SDP": 0xB000,
    "PDP_RDMA": 0xC000,
    "PDP": 0xD000,
    "CDP_RDMA": 0xE000,
    "CDP": 0xF000,
    "RBK": 0x10000,
}


def test_block_bases(v2: RegisterMap, v1: RegisterMap) -> None:
    assert {n: b.base for n, b in v2.blocks.items()} == V2_BASES
    assert {n: b.base for n, b in v1.blocks.items()} == V1_BASES


def test_counts() -> None:
    # v2: `grep -c "reg {"` / `grep -c "field {"` over NVDLA_*.rdl = 531 / 1282;
    # v1: `grep -c "^// Register" arnvdla.h` = 427
    assert load_regmap("v2").counts() == (18, 531, 1282)
    assert load_regmap("v1").counts()[:2] == (17, 427)


@pytest.mark.parametrize(
    "name, v2_addr, v1_addr",
    [
        ("SDP.S_LUT_ACCESS_CFG", 0x9008, 0xB008),
        ("GLB.S_INTR_STATUS", 0x100C, 0xC),
        ("GLB.S_NVDLA_HW_VERSION", 0x1000, 0x0),
        ("CDP.D_DATOUT_OFFSET", 0xD080, 0xF080),
        ("SDP.D_OP_ENABLE", 0x9038, 0xB038),
        ("SDP.D_DP_BS_CFG", 0x9058, 0xB058),
        ("CDMA.D_OP_ENABLE", 0x3010, 0x5010),
        ("CDP.D_OP_ENABLE", 0xD048, 0xF048),
        ("RBK.D_OP_ENABLE", 0x11008, 0x10008),
    ],
)
def test_addresses(v2: RegisterMap, v1: RegisterMap, name: str, v2_addr: int, v1_addr: int) -> None:
    assert v2.register(name).address == v2_addr
    assert v1.register(name).address == v1_addr
    assert v2.by_address(v2_addr).full_name == name
    assert v1.by_address(v1_addr).full_name == name


def test_v1_only_addresses(v1: RegisterMap) -> None:
    assert v1.register("BDMA.CFG_OP").address == 0x4030
    assert v1.register("GEC.FEATURE").address == 0x1000


def test_resets(v2: RegisterMap, v1: RegisterMap) -> None:
    # v2 D_DP_BS_CFG: BS_BYPASS, BS_ALU_BYPASS, BS_MUL_BYPASS, BS_MUL_PRELU, BS_RELU_BYPASS reset 1
    assert v2.register("SDP.D_DP_BS_CFG").reset == 0x73
    assert v2.register("SDP.D_DP_BN_CFG").reset == 0x53
    assert v2.register("SDP.D_DP_EW_CFG").reset == 0x53
    assert v1.register("SDP.D_DP_BS_CFG").reset == 0x0  # NVDLA_SDP_D_DP_BS_CFG_0_RESET_VAL
    assert v1.register("CDMA.D_MISC_CFG").reset == 0x1100
    assert v1.register("GLB.S_NVDLA_HW_VERSION").reset == 0x303031


def test_field_geometry_and_enums(v2: RegisterMap) -> None:
    cfg = v2.register("SDP.S_LUT_ACCESS_CFG")
    assert (cfg.field("LUT_ADDR").msb, cfg.field("LUT_ADDR").lsb) == (9, 0)
    tid = cfg.field("LUT_TABLE_ID")
    assert (tid.msb, tid.lsb, tid.enums) == (16, 16, {"LE": 0, "LO": 1})
    assert cfg.field("LUT_ACCESS_TYPE").enums == {"READ": 0, "WRITE": 1}
    algo = v2.register("SDP.D_DP_BS_CFG").field("BS_ALU_ALGO")
    assert (algo.msb, algo.lsb, algo.enums) == (3, 2, {"MAX": 0, "MIN": 1, "SUM": 2})
    st = v2.register("SDP.S_STATUS").field("STATUS_1")
    assert (st.msb, st.lsb, st.access) == (17, 16, "ro")
    assert st.enums == {"IDLE": 0, "RUNNING": 1, "PENDING": 2}


def test_access_rules(v2: RegisterMap) -> None:
    ptr = v2.register("SDP.S_POINTER")
    assert ptr.field("PRODUCER").access == "rw" and ptr.field("CONSUMER").access == "ro"
    assert ptr.access == "rw" and ptr.writable_mask == 0x1 and ptr.readable_mask == 0x10001
    assert v2.register("GLB.S_INTR_SET").access == "wo"
    assert not v2.register("GLB.S_INTR_SET").readable
    assert v2.register("SDP.S_STATUS").access == "ro"
    assert not v2.register("SDP.S_STATUS").writable
    assert v2.register("SDP.S_STATUS").writable_mask == 0


def test_trigger_and_dual(v2: RegisterMap, v1: RegisterMap) -> None:
    for m in (v2, v1):
        for name in (
            "SDP.D_OP_ENABLE",
            "CDMA.D_OP_ENABLE",
            "SDP.S_LUT_ACCESS_DATA",
            "CDP.S_LUT_ACCESS_DATA",
            "GLB.S_INTR_SET",
            "GLB.S_INTR_STATUS",
        ):
            assert m.register(name).trigger, name
        for name in ("SDP.S_POINTER", "SDP.D_DP_BS_CFG", "GLB.S_INTR_MASK", "CDP.D_DATOUT_OFFSET"):
            assert not m.register(name).trigger, name
        assert m.register("SDP.D_OP_ENABLE").dual
        assert m.register("SDP.D_DP_BS_CFG").dual
        assert m.register("CDP.D_DATOUT_OFFSET").dual
        assert not m.register("SDP.S_POINTER").dual
        assert not m.register("SDP.S_LUT_ACCESS_CFG").dual
        assert not m.register("GLB.S_INTR_STATUS").dual
    # every dual register of a block sits at or after that block's D_OP_ENABLE
    for r in v2.registers(all_units=True):
        if r.dual:
            assert r.offset >= v2.register(r.block, "D_OP_ENABLE").offset


# ---------------------------------------------------------------------------------- lookups


def test_lookup_forms(v2: RegisterMap) -> None:
    r = v2.register("SDP", "S_POINTER")
    assert v2.register("SDP.S_POINTER") is r
    assert v2.register("NVDLA_SDP.S_POINTER_0") is r
    assert v2.register("NVDLA_SDP_S_POINTER_0") is r
    assert v2.register("NVDLA_SDP_RDMA.S_POINTER_0").block == "SDP_RDMA"
    assert v2.register("NVDLA_SDP_RDMA_S_POINTER_0").block == "SDP_RDMA"
    assert r.full_name == "SDP.S_POINTER"
    assert v2.block("NVDLA_SDP").base == 0x9000
    assert v2.field("SDP.S_LUT_ACCESS_CFG.LUT_ADDR").width == 10
    names = [x.full_name for x in v2.registers()]
    assert len(names) == 531 and names[0] == "CFGROM.CFGROM_HW_VERSION"
    addrs = [x.address for x in v2.registers()]
    assert addrs == sorted(addrs)


def test_unknown_names_suggest(v2: RegisterMap) -> None:
    with pytest.raises(
        UnknownRegisterError,
        match=r"unknown register 'SDP\.S_LUT_ACESS_CFG'; "
        r"did you mean SDP\.S_LUT_ACCESS_CFG",
    ):
        v2.register("SDP.S_LUT_ACESS_CFG")
    with pytest.raises(UnknownRegisterError, match="did you mean SDP"):
        v2.register("SDPP.S_POINTER")
    with pytest.raises(UnknownFieldError, match=r"SDP\.S_LUT_ACCESS_CFG\.LUT_ADR.*LUT_ADDR"):
        v2.register("SDP.S_LUT_ACCESS_CFG").field("LUT_ADR")
    with pytest.raises(KeyError):  # also a KeyError for dict-style callers
        v2.register("SDP.NOPE")
    with pytest.raises(UnknownRegisterError, match="0x9ffc"):
        v2.by_address(0x9FFC)
    with pytest.raises(RegisterMapError):
        load_regmap("v3")


# ---------------------------------------------------------------------------------- fields


def test_field_bit_ops(v2: RegisterMap) -> None:
    cfg = v2.register("SDP.S_LUT_ACCESS_CFG")
    addr, tid, typ = (cfg.field(n) for n in ("LUT_ADDR", "LUT_TABLE_ID", "LUT_ACCESS_TYPE"))
    assert (addr.width, addr.mask, addr.max_value) == (10, 0x3FF, 0x3FF)
    assert (tid.mask, typ.mask) == (0x10000, 0x20000)
    assert addr.extract(0xFFFF_F123) == 0x123
    assert addr.insert(0xFFFF_FFFF, 0x5) == 0xFFFF_FC05
    assert tid.insert(0x5, "LO") == 0x10005
    assert typ.insert(tid.insert(0, "LO"), "WRITE") == 0x30000
    assert tid.decode(1) == "LO" and tid.decode(7) is None and addr.decode(0) is None
    assert cfg.encode(LUT_ADDR=3, LUT_TABLE_ID="LO", LUT_ACCESS_TYPE="WRITE") == 0x30003
    assert cfg.decode(0x30003) == {"LUT_ADDR": 3, "LUT_TABLE_ID": 1, "LUT_ACCESS_TYPE": 1}


def test_field_range_errors(v2: RegisterMap) -> None:
    addr = v2.register("SDP.S_LUT_ACCESS_CFG").field("LUT_ADDR")
    with pytest.raises(FieldRangeError, match=r"SDP\.S_LUT_ACCESS_CFG\.LUT_ADDR.*0\.\.0x3ff"):
        addr.insert(0, 0x400)
    with pytest.raises(FieldRangeError):
        addr.insert(0, -1)
    with pytest.raises(ValueError):  # FieldRangeError is a ValueError
        v2.register("SDP.S_LUT_ACCESS_CFG").field("LUT_TABLE_ID").insert(0, "LX")
    with pytest.raises(FieldRangeError, match="no enum values"):
        addr.insert(0, "LE")
    with pytest.raises(FieldRangeError, match="expected an int"):
        addr.insert(0, 1.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- YAML


def test_yaml_round_trip(tmp_path: Path, v2: RegisterMap, v1: RegisterMap) -> None:
    for m in (v2, v1):
        p = tmp_path / f"{m.generation}.yaml"
        dump_yaml(m, p)
        back = regmap_from_yaml(yaml.load(p.read_text(), Loader=FAST_SAFE_LOADER), str(p))
        assert compare_regmaps(back, m) == []
        assert back.generation == m.generation


def test_packaged_yaml_is_plain_data() -> None:
    text = (Path(rdl.__file__).parent / "data" / "regmap_v2.yaml").read_text()
    assert "Copyright" not in text and "License" not in text and "desc" not in text
    data = yaml.load(text, Loader=FAST_SAFE_LOADER)
    assert data["format"] == "nvdla-hil-regmap/1" and data["generation"] == "v2"
    assert data["blocks"]["SDP"]["base"] == 0x9000
    assert data["blocks"]["SDP"]["registers"]["S_LUT_ACCESS_CFG"]["offset"] == 0x8


def test_malformed_yaml_names_entry() -> None:
    good = {
        "format": "nvdla-hil-regmap/1",
        "generation": "v2",
        "blocks": {
            "X": {
                "base": 0x100,
                "registers": {
                    "R": {
                        "offset": 4,
                        "reset": 0,
                        "access": "rw",
                        "fields": {"F": {"bits": [3, 0], "access": "rw", "reset": 0}},
                    }
                },
            }
        },
    }
    assert regmap_from_yaml(good).register("X.R").address == 0x104
    bad = yaml.safe_load(yaml.safe_dump(good))
    bad["blocks"]["X"]["registers"]["R"]["fields"]["F"]["bits"] = [40, 0]
    with pytest.raises(RegmapFormatError, match=r"X\.R\.F"):
        regmap_from_yaml(bad, "f.yaml")
    bad = yaml.safe_load(yaml.safe_dump(good))
    del bad["blocks"]["X"]["registers"]["R"]["offset"]
    with pytest.raises(RegmapFormatError, match=r"f\.yaml: X\.R: missing 'offset'"):
        regmap_from_yaml(bad, "f.yaml")
    with pytest.raises(RegmapFormatError):
        regmap_from_yaml({"format": "other"})


# ---------------------------------------------------------------------------------- RDL reader

SAMPLE_RDL = """\
property spec_access { type = string; component = field; };
regfile regs_NVDLA_FOO{
    default regwidth=32;
    reg {
        name = "S_A";
        desc = "text with // inside";
        enum S_A_M_enum { OFF = 1'd0 {desc = "x";}; ON = 1'd1; };
        field { encode = S_A_M_enum; sw = rw; hw = r; spec_access = rwto; reset = 0x1; } M[0:0];
        M->desc = "y";
        field { sw = r; hw = w; spec_access = r; reset = 2'h3; } S[17:16];
    }S_A @0x10;
    reg {
        field { sw = w; hw = r; spec_access = w; reset = 0; } W[31:0];
    }S_B;
};
addrmap {
    regs_NVDLA_FOO NVDLA_FOO @0x4000;
}addrmap_NVDLA;
"""


def test_rdl_parser_small_sample() -> None:
    spec = rdl.parse_rdl_text(SAMPLE_RDL, "foo.rdl")
    m = rdl.build_regmap(spec, "v2")
    a = m.register("FOO.S_A")
    assert (a.address, a.reset, a.access, a.trigger) == (0x4010, 0x30001, "rw", True)
    assert a.field("M").enums == {"OFF": 0, "ON": 1} and a.field("S").access == "ro"
    b = m.register("FOO.S_B")  # no @: placed after the previous register
    assert (b.offset, b.access, b.trigger) == (0x14, "wo", False)


@pytest.mark.parametrize(
    "text, line, msg",
    [
        ("regfile r {\n  reg { field { sw = rw; } F[0:0] }X @0x0;\n};", 2, "expected ';'"),
        ("regfile r {\n\n  reg { field { sw = rw; } F[40:0]; }X @0x0;\n};", 3, "exceeds 32-bit"),
        ("regfile r {\n  reg { field { encode = E; } F[0:0]; }X @0x0;\n};", 2, "unknown enum"),
        (
            "regfile r {\n  reg { field { sw = rw; reset = 2'd7; } F[1:0]; }X;\n};",
            2,
            "does not fit",
        ),
        ("regfile r {\n  reg { }X @0x0;\n}\n", 3, "end of file"),
        ("addrmap {\n  nope N @0x0;\n} a;", 2, "unknown regfile"),
        ("regfile r { $ };", 1, "unexpected character"),
    ],
)
def test_rdl_errors_name_file_and_line(text: str, line: int, msg: str) -> None:
    with pytest.raises(rdl.RdlSyntaxError, match=rf"^bad\.rdl:{line}: .*{msg}"):
        rdl.parse_rdl_text(text, "bad.rdl")


def test_rdl_never_evaluates() -> None:
    with pytest.raises(rdl.RdlSyntaxError):
        rdl.parse_rdl_text(
            'regfile r { reg { field { reset = __import__("os"); } F[0:0]; }X; };', "evil.rdl"
        )


SAMPLE_UH = """\
#define REG_NVDLA_FOO_BAR(_) _(NVDLA_FOO,BAR,0x3008,0x8,1,4,0x30003,0x1,0x30003,0x0,0x0,NOARY,FLD)
#define REG_FLD_NVDLA_FOO_BAR_EN(_) _(NVDLA_FOO,BAR,EN,1,0,0,23,0,0x1,0x1,0x1,OFF,ENM)
#define LIST_REG_ENM_NVDLA_FOO_BAR_EN(_) \\
_(NVDLA_FOO,BAR,EN,OFF,0) \\
_(NVDLA_FOO,BAR,EN,ON,1)
#define REG_FLD_NVDLA_FOO_BAR_ST(_) _(NVDLA_FOO,BAR,ST,2,17,16,1,0,0x3,0x0,0x3,NOINITENM,NOENM)
#define _REG_FLD_base(_base,_rnam,_fnam,_fsiz,_msb,_lsb,_read,_parity,_mask,_rstv) _base
"""


def test_uh_parser_small_sample() -> None:
    m = rdl.build_regmap(rdl.parse_arnvdla_uh(SAMPLE_UH, "x.uh"), "v1")
    r = m.register("FOO.BAR")
    assert (r.address, r.reset, r.access, r.trigger) == (0x3008, 0x1, "rw", True)
    assert r.field("EN").spec_access == "rwto" and r.field("EN").enums == {"OFF": 0, "ON": 1}
    assert r.field("ST").access == "ro" and (r.field("ST").msb, r.field("ST").lsb) == (17, 16)
    assert rdl.spec_access_of_code(22) == "wto" and rdl.spec_access_of_code(0) == "c"
    with pytest.raises(rdl.RdlSyntaxError, match=r"x\.uh:1: "):
        rdl.parse_arnvdla_uh("#define REG_FLD_X(_) _(A,B)\n", "x.uh")


# ---------------------------------------------------------------------------------- profiles


def test_profiles_values() -> None:
    assert list_profiles() == ["nv_small", "nv_small_256", "nv_small_256_full", "nv_medium_512",
                               "nv_medium_1024_full", "nv_large", "nv_full"]
    s = load_profile("nv_small")
    assert isinstance(s, HardwareProfile) and s.generation == "v2"
    assert (s.atom_bytes, s.mac_atomic_c, s.mac_atomic_k) == (8, 8, 8)
    assert s.cbuf_bytes == 32 * 8 * 512 == 128 * 1024
    assert not s.has("sdp_lut") and not s.has("sdp_ew") and s.has("sdp_bs") and s.has("int8")
    assert not s.sdp_lut and s.sdp_bn
    f = load_profile("nv_small_256_full")
    assert f.has("sdp_lut") and f.has("sdp_ew") and f.has("sec_mem") and f.atom_bytes == 8
    assert f.has_unit("CVIF") and not s.has_unit("CVIF")
    full = load_profile("nv_full")
    assert full.generation == "v1" and full.atom_bytes == 32
    assert all(full.has(x) for x in ("winograd", "rubik", "bdma", "int16", "fp16"))
    assert load_profile("nv_large").mac_atomic_c == 64
    # the configurations whose geometries differ (nvdla/hw master spec/defs)
    m = load_profile("nv_medium_512")
    assert (m.atom_bytes, m.mac_atomic_c, m.mac_atomic_k, m.cbuf_bank_width) == (16, 32, 16, 32)
    assert not m.has("sec_mem") and not m.has("sdp_lut") and m.mem_address_width == 64
    s256 = load_profile("nv_small_256")
    assert (s256.atom_bytes, s256.mac_atomic_c, s256.mac_atomic_k) == (8, 32, 8) and not s256.has("sdp_ew")
    for p in map(load_profile, list_profiles()):  # units exist in that generation's map
        assert set(p.units) <= set(load_regmap(p.generation).blocks), p.name


def test_profile_errors() -> None:
    s = load_profile("nv_small")
    with pytest.raises(FeatureMissingError, match=r"^nv_small has no SDP LUT \(sdp_lut\)$"):
        s.require("sdp_lut")
    with pytest.raises(UnitNotPresentError):
        s.require("bdma")
    s.require("sdp_bs")
    with pytest.raises(ProfileError, match="did you mean sdp_lut"):
        s.has("sdp_lutt")
    with pytest.raises(ProfileError, match=r"nv_smal.*did you mean nv_small.*nv_full"):
        load_profile("nv_smal")


def test_restricted_regmap() -> None:
    m = load_profile("nv_small").regmap
    assert m.register("SDP.S_LUT_ACCESS_CFG").address == 0x9008
    with pytest.raises(UnitNotPresentError, match="nv_small has no BDMA unit"):
        m.register("BDMA.CFG_OP")
    with pytest.raises(UnitNotPresentError, match="nv_small has no RBK"):
        m.by_address(0x11008)
    with pytest.raises(UnitNotPresentError, match="CVIF"):
        m.block("CVIF")
    assert not m.has_block("GEC") and m.has_block("SDP")
    assert {r.block for r in m.registers()} == set(load_profile("nv_small").units)
    assert load_profile("nv_full").regmap.register("BDMA.CFG_OP").address == 0x4030
    with pytest.raises(RegisterMapError, match="v1 design"):
        load_regmap("v2").restricted_to(load_profile("nv_full"))


TRACES = Path(os.environ.get("NVDLA_TRACES", Path(__file__).resolve().parents[1] / "../shared/nvdla/trace_tests/nv_small"))


@pytest.mark.skipif(not TRACES.is_dir(), reason="NVDLA nv_small trace tests not available")
def test_every_trace_register_resolves_on_nv_small() -> None:
    """NVDLA's own nv_small traces (outside truth) only name registers our nv_small map has."""
    m = load_profile("nv_small").regmap
    names = set()
    for cfg in TRACES.glob("*/*.cfg"):
        names |= set(re.findall(r"reg_write\((NVDLA_\w+\.\w+)", cfg.read_text()))
    assert len(names) > 100
    for n in sorted(names):
        m.register(n)


# ---------------------------------------------------------------------------------- upstream


NVDLA_HW = os.environ.get("NVDLA_HW")
needs_hw = pytest.mark.skipif(not NVDLA_HW, reason="set NVDLA_HW to an nvdla/hw working tree")


@needs_hw
def test_packaged_v2_matches_checkout() -> None:
    manual = Path(NVDLA_HW or "") / "spec" / "manual"
    if not any(manual.glob("NVDLA_*.rdl")):
        pytest.skip(f"{manual} has no NVDLA_*.rdl (not a master checkout)")
    assert compare_with_rdl(load_regmap("v2"), manual) == []
    assert check_against_checkout(NVDLA_HW or "", "nv_small") == []
    # independent of the parser: every `}NAME @0xOFF;` line gives the same address
    m = load_regmap("v2")
    for path in manual.glob("NVDLA_*.rdl"):
        text = path.read_text()
        base = int(re.search(r"regs_NVDLA_\w+\s+NVDLA_\w+\s*@(0x[0-9a-fA-F]+);", text).group(1), 16)  # type: ignore[union-attr]
        block = path.stem[len("NVDLA_") :]
        for name, off in re.findall(r"\}\s*(\w+)\s*@(0x[0-9a-fA-F]+);", text):
            assert m.register(block, name).address == base + int(off, 16)


NVDLA_HW_V1 = os.environ.get("NVDLA_HW_V1")


@pytest.mark.skipif(not NVDLA_HW_V1, reason="set NVDLA_HW_V1 to an nvdla/hw nvdlav1 checkout")
def test_packaged_v1_matches_checkout() -> None:
    if not (Path(NVDLA_HW_V1 or "") / "cmod" / "include" / "arnvdla.uh").is_file():
        pytest.fail(f"NVDLA_HW_V1={NVDLA_HW_V1} has no cmod/include/arnvdla.uh (not an nvdlav1 checkout)")
    assert check_against_checkout(NVDLA_HW_V1 or "", "nv_full") == []


def test_compare_reports_differences(v2: RegisterMap) -> None:
    spec = rdl.parse_rdl_text(SAMPLE_RDL, "foo.rdl")
    a = rdl.build_regmap(spec, "v2")
    spec.blocks["FOO"].regs[0].fields[0].props["reset"] = 0
    spec.blocks["FOO"].base = 0x5000
    b = rdl.build_regmap(spec, "v2")
    diffs = compare_regmaps(a, b)
    assert "FOO: base 0x4000 != upstream 0x5000" in diffs
    assert "FOO.S_A: reset 0x30001 != upstream 0x30000" in diffs
    assert "FOO.S_A.M: reset 1 != upstream 0" in diffs
