"""Every row of the seed 000 precision conversion tables (convolution, SDP, LRN, pooling).
The expectations below are transcribed from the seed text, not from the module."""

import pytest

from nvdla_hil.harness.refmodel.validity import InvalidPrecisionConfig, check_config, check_precisions

P = ("int8", "int16", "fp16")

# convolution table: (input format, output) -> (pipeline, weight) or None
CONV = {
    ("int", "int8"): "int8", ("int", "int16"): "int16", ("int", "fp16"): "fp16",
    ("fp16img", "int8"): None, ("fp16img", "int16"): None, ("fp16img", "fp16"): "fp16",
    ("int8", "int8"): "int8", ("int8", "int16"): None, ("int8", "fp16"): None,
    ("int16", "int8"): None, ("int16", "int16"): "int16", ("int16", "fp16"): None,
    ("fp16", "int8"): None, ("fp16", "int16"): None, ("fp16", "fp16"): "fp16",
}
SDP = {
    ("int8", "int8"): "int32", ("int8", "int16"): "int32", ("int8", "fp16"): None,
    ("int16", "int8"): "int32", ("int16", "int16"): "int32", ("int16", "fp16"): "int32",
    ("fp16", "int8"): None, ("fp16", "int16"): "fp32", ("fp16", "fp16"): "fp32",
}
NOCONV = {(i, o): (i if i == o else None) for i in P for o in P}


@pytest.mark.parametrize("key, pipe", CONV.items(), ids=[f"{k[0]}->{k[1]}" for k in CONV])
def test_conv_table(key, pipe):
    inp, out = key
    if inp in ("int", "fp16img"):
        args = dict(mode="image")
        inp = "int16" if inp == "int" else "fp16"
    else:
        args = dict(mode="feature")
    if pipe is None:
        with pytest.raises(InvalidPrecisionConfig, match="seed 000, Convolution conversion table: input .* -> output "
                           + out.upper() + " is not supported"):
            check_precisions("conv", inp, out, **args)
    else:
        row = check_precisions("conv", inp, out, **args)
        assert row.pipeline == pipe and row.weight == pipe


def test_conv_image_uint8_and_weight_check():
    assert check_precisions("conv", "uint8", "fp16", mode="image").pipeline == "fp16"
    check_precisions("conv", "int8", "int16", mode="image", weight_precision="int16")
    with pytest.raises(InvalidPrecisionConfig, match="weight precision INT16, got INT8"):
        check_precisions("conv", "int8", "int16", mode="image", weight_precision="int8")


@pytest.mark.parametrize("key, pipe", SDP.items(), ids=[f"{k[0]}->{k[1]}" for k in SDP])
def test_sdp_table(key, pipe):
    i, o = key
    if pipe is None:
        with pytest.raises(InvalidPrecisionConfig) as ei:
            check_precisions("sdp", i, o)
        assert str(ei.value) == f"seed 000, SDP conversion table: input {i.upper()} -> output {o.upper()} is not supported"
    else:
        assert check_precisions("sdp", i, o).pipeline == pipe


def test_sdp_message_example_from_brief():
    with pytest.raises(InvalidPrecisionConfig, match=r"^seed 000, SDP conversion table: input INT8 -> output FP16 is not supported$"):
        check_precisions("sdp", 0, 2)  # register codes


@pytest.mark.parametrize("unit, table", [("cdp", "LRN \\(CDP\\)"), ("lrn", "LRN \\(CDP\\)"),
                                         ("pdp", "Pooling \\(PDP\\)"), ("pooling", "Pooling \\(PDP\\)")])
@pytest.mark.parametrize("key", list(NOCONV), ids=[f"{k[0]}->{k[1]}" for k in NOCONV])
def test_lrn_and_pooling_tables(unit, table, key):
    i, o = key
    if NOCONV[key] is None:
        with pytest.raises(InvalidPrecisionConfig, match=f"seed 000, {table} conversion table: input {i.upper()} -> output {o.upper()}"):
            check_precisions(unit, i, o)
    else:
        assert check_precisions(unit, i, o).pipeline == i


def test_sdp_flying_same_bit_depth():
    check_precisions("sdp", "int16", "fp16", flying=True)
    check_precisions("sdp", "fp16", "int16", flying=True)
    with pytest.raises(InvalidPrecisionConfig, match="on-the-fly"):
        check_precisions("sdp", "int16", "int8", flying=True)


def test_sdp_proc_precision():
    check_precisions("sdp", "int16", "int8", proc_precision="int8")     # seed: "always INT8"
    check_precisions("sdp", "int16", "int8", proc_precision="int16")    # input precision also accepted
    check_precisions("sdp", "fp16", "int16", proc_precision="fp16")
    with pytest.raises(InvalidPrecisionConfig, match="processing precision FP16, got INT16"):
        check_precisions("sdp", "fp16", "int16", proc_precision="int16")
    with pytest.raises(InvalidPrecisionConfig, match="processing precision INT16, got INT8"):
        check_precisions("sdp", "int16", "fp16", proc_precision="int8")


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown unit"):
        check_precisions("rubik", "int8", "int8")
    with pytest.raises(InvalidPrecisionConfig, match="precision code 3"):
        check_precisions("sdp", 3, 0)


class Regs:
    def __init__(self, **values):
        self.v = {tuple(k.split("__")): val for k, val in values.items()}

    def __call__(self, block, reg, field):
        return self.v.get((block, reg, field), 0)


def test_config_sdp_offline_ok_and_bad():
    good = Regs(SDP_RDMA__D_FEATURE_MODE_CFG__IN_PRECISION=1, SDP_RDMA__D_FEATURE_MODE_CFG__PROC_PRECISION=1,
                SDP_RDMA__D_FEATURE_MODE_CFG__OUT_PRECISION=2, SDP__D_DATA_FORMAT__PROC_PRECISION=1,
                SDP__D_DATA_FORMAT__OUT_PRECISION=2)
    assert check_config(good, ["sdp"])["sdp"].pipeline == "int32"
    bad = Regs(SDP__D_DATA_FORMAT__OUT_PRECISION=2, SDP_RDMA__D_FEATURE_MODE_CFG__OUT_PRECISION=2)
    with pytest.raises(InvalidPrecisionConfig, match="SDP conversion table: input INT8 -> output FP16"):
        check_config(bad, ["sdp"])
    mismatch = Regs(SDP__D_DATA_FORMAT__OUT_PRECISION=1)
    with pytest.raises(InvalidPrecisionConfig, match="SDP_RDMA.D_FEATURE_MODE_CFG.OUT_PRECISION = INT8 but SDP.D_DATA_FORMAT.OUT_PRECISION = INT16"):
        check_config(mismatch, ["sdp"])


def test_config_sdp_flying_reads_cacc():
    regs = Regs(SDP__D_FEATURE_MODE_CFG__FLYING_MODE=1, CACC__D_MISC_CFG__PROC_PRECISION=2,
                SDP__D_DATA_FORMAT__PROC_PRECISION=2, SDP__D_DATA_FORMAT__OUT_PRECISION=1)
    assert check_config(regs, ["sdp"])["sdp"].pipeline == "fp32"


def test_config_conv_image_and_feature():
    img = Regs(CDMA__D_DATAIN_FORMAT__DATAIN_FORMAT=1, CDMA__D_DATAIN_FORMAT__PIXEL_FORMAT=5,  # T_R16_F
               CDMA__D_MISC_CFG__PROC_PRECISION=0)
    with pytest.raises(InvalidPrecisionConfig, match="FP16 image -> output INT8"):
        check_config(img, ["conv"])
    fp16_engines = {f"{b}__D_MISC_CFG__PROC_PRECISION": 2 for b in ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")}
    img8 = Regs(CDMA__D_DATAIN_FORMAT__DATAIN_FORMAT=1, CDMA__D_DATAIN_FORMAT__PIXEL_FORMAT=12, **fp16_engines)
    assert check_config(img8, ["conv"])["conv"].pipeline == "fp16"
    feat = Regs(CDMA__D_MISC_CFG__IN_PRECISION=1, CSC__D_MISC_CFG__IN_PRECISION=1, CDMA__D_MISC_CFG__PROC_PRECISION=0)
    with pytest.raises(InvalidPrecisionConfig, match="Convolution conversion table: input INT16 -> output INT8"):
        check_config(feat, ["conv"])
    int16 = {f"{b}__D_MISC_CFG__PROC_PRECISION": 1 for b in ("CDMA", "CSC", "CMAC_A", "CMAC_B")}
    cacc = Regs(CDMA__D_MISC_CFG__IN_PRECISION=1, CSC__D_MISC_CFG__IN_PRECISION=1, **int16)
    with pytest.raises(InvalidPrecisionConfig, match="CACC.D_MISC_CFG.PROC_PRECISION = INT8"):
        check_config(cacc, ["conv"])
    # INT16 programmed in one CMAC half only: refused naming it (the engines are separate)
    lone = Regs(CMAC_B__D_MISC_CFG__PROC_PRECISION=1)
    with pytest.raises(InvalidPrecisionConfig, match="CMAC_B.D_MISC_CFG.PROC_PRECISION = INT16; they must agree"):
        check_config(lone, ["conv"])
    wino = Regs(CSC__D_MISC_CFG__CONV_MODE=1)
    with pytest.raises(InvalidPrecisionConfig, match="CDMA.D_MISC_CFG.CONV_MODE = DIRECT but CSC.D_MISC_CFG.CONV_MODE = WINOGRAD"):
        check_config(wino, ["conv"])


def test_config_cdp_pdp():
    assert check_config(Regs(), ["cdp", "pdp"]).keys() == {"cdp", "pdp"}
    with pytest.raises(InvalidPrecisionConfig, match="CDP_RDMA.D_DATA_FORMAT.INPUT_DATA = INT8 but CDP.D_DATA_FORMAT.INPUT_DATA_TYPE = INT16"):
        check_config(Regs(CDP__D_DATA_FORMAT__INPUT_DATA_TYPE=1), ["cdp"])
    offline = Regs(PDP__D_OPERATION_MODE_CFG__FLYING_MODE=1, PDP__D_DATA_FORMAT__INPUT_DATA=2)
    with pytest.raises(InvalidPrecisionConfig, match="PDP_RDMA"):
        check_config(offline, ["pdp"])
    flying = Regs(PDP__D_DATA_FORMAT__INPUT_DATA=2, SDP__D_DATA_FORMAT__OUT_PRECISION=2)
    assert check_config(flying, ["pdp"])["pdp"].pipeline == "fp16"
    with pytest.raises(InvalidPrecisionConfig, match="not a precision code"):
        check_config(Regs(PDP__D_DATA_FORMAT__INPUT_DATA=3, SDP__D_DATA_FORMAT__OUT_PRECISION=3), ["pdp"])
