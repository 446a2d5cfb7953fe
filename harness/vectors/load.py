"""Loading a case: the manifest and its blobs checked against the format, the profile's register
map and the layout registry; a bad case raises :class:`~.format.VectorError`, nothing is half-loaded."""

from __future__ import annotations

import itertools
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers.errors import InputError
from ...drivers.files import read_regular
from ...drivers.precision import (
    CONVERTORS,
    ConvertorSetting,
    LutConfig,
    PrecisionControl,
    Statistics,
    status_field,
    status_names,
)
from ...drivers.profiles import FEATURES, HardwareProfile
from ...drivers.regmap import RegisterMapError
from ...drivers.yamlstrict import YamlError
from ...drivers.yamlstrict import load as yaml_load_strict
from ..analysis.compare import RULES
from .format import (
    DEFAULT_LAUNCH,
    FORMAT,
    FORMAT_V1,
    LAYER_UNITS,
    MANIFEST,
    MAX_BLOB_BYTES,
    MAX_MANIFEST_BYTES,
    PORTS,
    RESERVED,
    SURFACE_IN,
    SURFACE_OUT,
    TOP_LAYER,
    TOP_LAYOUT,
    UNIT_BLOCK,
    DONE_UNIT,
    Case,
    LayoutPair,
    LutSetting,
    RegisterSetting,
    Surface,
)
from .reader import (
    CaseReader,
    read_description,
    read_dtype,
    read_golden_source,
    read_layout_name,
    read_params,
    read_profile,
    read_provenance,
    read_shape,
)
from .surface import pack_surface, packed_size, resolve_params


def load_case(path: str | Path) -> Case:
    """Load and validate one case (its folder or its ``case.yaml``). Raises :class:`VectorError`."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST
    ctx = CaseReader(path)
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ctx.err(None, f"manifest larger than {MAX_MANIFEST_BYTES} bytes")
        text = read_regular(path, MAX_MANIFEST_BYTES).decode("utf-8")  # a FIFO or device never hangs the run
    except (OSError, UnicodeDecodeError, InputError) as e:
        raise ctx.err(None, f"cannot read manifest: {e}") from None
    try:
        # strict safe loader: a duplicate key (a second `statistics:` silently dropping the
        # first one's checks) is an error naming both lines
        doc = yaml_load_strict(text, str(path))
    except YamlError as e:
        msg = str(e).removeprefix(str(path)).lstrip(":").strip()
        line: str | None
        line, _, rest = msg.partition(": ")
        if line.isdigit():
            line = f"line {line}"
        elif line.startswith("line "):
            pass
        else:
            line, rest = None, msg
        raise ctx.err(line, f"not valid YAML: {rest}") from None
    except RecursionError:
        raise ctx.err(None, "not valid YAML: nested too deeply") from None
    top = ctx.mapping(doc, "", required=("format", "name", "kind"))
    if top["format"] == FORMAT_V1:
        raise ctx.err("format", f"{FORMAT_V1!r} has no golden_source (where the goldens came from); add "
                                f"golden_source and set format: {FORMAT} (testvectors/README.md)")
    if top["format"] != FORMAT:
        raise ctx.err("format", f"expected {FORMAT!r}, got {top['format']!r}")
    name = ctx.string(top["name"], "name")
    kind = ctx.string(top["kind"], "kind", ("layer", "layout"))
    if kind == "layout":
        return _load_layout_case(ctx, top, name)
    return _load_layer_case(ctx, top, name)



def _load_layout_case(ctx: CaseReader, top: dict[str, Any], name: str) -> Case:
    ctx.mapping(top, "", allowed=TOP_LAYOUT, required=("layout",))
    lay = ctx.mapping(top["layout"], "layout", allowed={"name", "params", "dtype", "shape", "data", "packed"},
                      required=("name", "dtype", "shape", "data", "packed"))
    lname = read_layout_name(ctx, lay["name"], "layout.name")
    params = read_params(ctx, lay.get("params"), "layout.params")
    dt = read_dtype(ctx, lay["dtype"], "layout.dtype")
    shape = read_shape(ctx, lay["shape"], "layout.shape")
    try:
        params = resolve_params(lname, params)
        size = packed_size(lname, shape, dt, params)
    except ValueError as e:
        raise ctx.err("layout.params", str(e)) from None
    except MemoryError:
        raise ctx.err("layout.params", f"layout {lname} with these parameters packs to an image too large "
                                       f"to hold") from None
    if size > MAX_BLOB_BYTES:
        raise ctx.err("layout.params", f"layout {lname} packs to {size} bytes, more than a blob may hold "
                                       f"({MAX_BLOB_BYTES})")
    array = ctx.blob(lay["data"], "layout.data", dt, shape)
    packed = ctx.blob(lay["packed"], "layout.packed", np.dtype(np.uint8), None)
    if packed.size != size:
        raise ctx.err("layout.packed", f"blob {lay['packed']!r} has {packed.size} bytes; layout {lname} of shape "
                                       f"{list(shape)} {dt} packs to {size}")
    family = top.get("family")
    if family is not None:
        family = ctx.string(family, "family")
    prof = read_profile(ctx, top["profile"]).name if top.get("profile") is not None else None
    return Case(path=ctx.path, name=name, kind="layout", profile=prof, features=frozenset(),
                description=read_description(ctx, top), family=family,
                provenance=read_provenance(ctx, top.get("provenance")),
                golden_source=read_golden_source(ctx, top.get("golden_source")),
                layout=LayoutPair(lname, params, dt, shape, array, packed, lay["data"], lay["packed"]),
                manifest=top)


def _load_registers(ctx: CaseReader, v: Any, prof: HardwareProfile) -> tuple[RegisterSetting, ...]:
    if v is None:
        return ()
    if not isinstance(v, list):
        raise ctx.err("registers", "expected a list of {reg: BLOCK.REG, fields: {...}} or {reg:, value:}")
    out: list[RegisterSetting] = []
    rm = prof.regmap
    for i, item in enumerate(v):
        where = f"registers[{i}]"
        m = ctx.mapping(item, where, allowed={"reg", "value", "fields"}, required=("reg",))
        rname = ctx.string(m["reg"], f"{where}.reg")
        try:
            reg = rm.register(rname)
        except RegisterMapError as e:
            raise ctx.err(f"{where}.reg", f"{e} (profile {prof.name})") from None
        where = f"{where} ({reg.full_name})"
        if reg.name in RESERVED:
            raise ctx.err(where, f"{reg.name} is written by the runner (launch / LUT); do not list it")
        if not reg.writable or reg.trigger:
            raise ctx.err(where, f"{reg.full_name} is {'read-only' if not reg.writable else 'a trigger register'}")
        if ("value" in m) == ("fields" in m):
            raise ctx.err(where, "give exactly one of value (32-bit integer) or fields (mapping)")
        if "value" in m:
            value = ctx.integer(m["value"], f"{where}.value", 0, 0xFFFFFFFF)
            extra = value & ~reg.defined_mask & 0xFFFFFFFF
            if extra:
                raise ctx.err(f"{where}.value", f"{value:#010x} sets bits {extra:#010x} outside every field")
            out.append(RegisterSetting(reg.full_name, value))
            continue
        flds = ctx.mapping(m["fields"], f"{where}.fields")
        value = reg.reset
        for fname, fval in flds.items():
            fw = f"{where}.fields.{fname}"
            if isinstance(fval, bool) or not isinstance(fval, (int, str)):
                raise ctx.err(fw, f"expected an integer or enum name, got {fval!r}")
            try:
                f = reg.field(fname)
                if f.access == "ro":
                    raise ctx.err(fw, "read-only field")
                value = f.insert(value, fval)
            except RegisterMapError as e:
                raise ctx.err(fw, str(e)) from None
        out.append(RegisterSetting(reg.full_name, value, dict(flds)))
    return tuple(out)


def _load_lut(ctx: CaseReader, v: Any, prof: HardwareProfile) -> LutSetting | None:
    if v is None:
        return None
    m = ctx.mapping(v, "lut", allowed={"unit", "config", "le", "lo"}, required=("unit", "config"))
    unit = ctx.string(m["unit"], "lut.unit", ("SDP", "CDP"))
    cfgm = ctx.mapping(m["config"], "lut.config", allowed={f.name for f in fields(LutConfig)})
    for k, x in cfgm.items():
        if k in ("le_function", "uflow_priority", "oflow_priority", "hybrid_priority"):
            ctx.string(x, f"lut.config.{k}", ("exponent", "linear") if k == "le_function" else ("LE", "LO"))
        else:
            ctx.integer(x, f"lut.config.{k}")
    try:
        cfg = LutConfig(**cfgm)
        regs = PrecisionControl(None).lut_registers(unit, cfg)  # type: ignore[arg-type]  # range checks only
        for reg, flds in regs.items():
            r = prof.regmap.register(unit, reg)
            for fname in flds:
                r.field(fname)
    except (ValueError, RegisterMapError) as e:
        raise ctx.err("lut.config", str(e)) from None
    tables: dict[str, np.ndarray | None] = {}
    for t, n in (("le", 65), ("lo", 257)):
        if m.get(t) is None:
            tables[t] = None
        else:
            tables[t] = ctx.blob(m[t], f"lut.{t}", np.dtype(np.int16), (n,))
    return LutSetting(unit, cfg, tables["le"], tables["lo"])


def _load_convertors(ctx: CaseReader, v: Any, prof: HardwareProfile) -> dict[str, ConvertorSetting]:
    if v is None:
        return {}
    m = ctx.mapping(v, "convertors", allowed=set(CONVERTORS))
    out: dict[str, ConvertorSetting] = {}
    for name, sv in m.items():
        where = f"convertors.{name}"
        c = CONVERTORS[name]
        if not prof.has_unit(c.block):
            raise ctx.err(where, f"{prof.name} has no {c.block} unit")
        s = ctx.mapping(sv, where, allowed={"offset", "scale", "shift"})
        off = ctx.integer(s.get("offset", 0), f"{where}.offset", -(1 << (c.offset_bits - 1)), (1 << (c.offset_bits - 1)) - 1)
        scl = ctx.integer(s.get("scale", 1), f"{where}.scale", -(1 << (c.scale_bits - 1)), (1 << (c.scale_bits - 1)) - 1)
        sh = ctx.integer(s.get("shift", 0), f"{where}.shift", 0, (1 << c.shift_bits) - 1)
        out[name] = ConvertorSetting(off, scl, sh)
    return out


def _load_surface(ctx: CaseReader, item: Any, where: str, prof: HardwareProfile, output: bool) -> Surface:
    allowed = SURFACE_OUT if output else SURFACE_IN
    req = ("name", "layout", "dtype", "shape", "address") + (() if output else ("data",))
    m = ctx.mapping(item, where, allowed=allowed, required=req)
    name = ctx.string(m["name"], f"{where}.name")
    where = f"{where} ({name})"
    lname = read_layout_name(ctx, m["layout"], f"{where}.layout")
    params = read_params(ctx, m.get("params"), f"{where}.params")
    dt = read_dtype(ctx, m["dtype"], f"{where}.dtype")
    shape = read_shape(ctx, m["shape"], f"{where}.shape")
    try:
        params = resolve_params(lname, params)
        nbytes = packed_size(lname, shape, dt, params)
    except ValueError as e:
        raise ctx.err(f"{where}.params", str(e)) from None
    except MemoryError:
        raise ctx.err(f"{where}.params", f"layout {lname} with these parameters packs to an image too large "
                                         f"to hold") from None
    if nbytes > MAX_BLOB_BYTES:
        raise ctx.err(f"{where}.params", f"layout {lname} packs to {nbytes} bytes, more than a surface may "
                                         f"hold ({MAX_BLOB_BYTES})")
    port = ctx.string(m.get("port", "pri_mem"), f"{where}.port", PORTS)
    if port == "sec_mem" and not prof.has("sec_mem"):
        raise ctx.err(f"{where}.port", f"{prof.name} has no secondary memory port")
    addr = ctx.integer(m["address"], f"{where}.address", 0, (1 << prof.mem_address_width) - 1)
    if addr % prof.atom_bytes:
        raise ctx.err(f"{where}.address", f"{addr:#x} is not aligned to the {prof.atom_bytes}-byte memory atom")
    if addr + nbytes > 1 << prof.mem_address_width:
        raise ctx.err(f"{where}.address", f"{addr:#x} + {nbytes} bytes exceeds the {prof.mem_address_width}-bit "
                                          f"address space")
    if not output:
        data = ctx.blob(m["data"], f"{where}.data", dt, shape)
        try:
            packed = pack_surface(lname, data, params)
        except ValueError as e:
            raise ctx.err(f"{where}.layout", str(e)) from None
        return Surface(name, lname, params, dt, shape, addr, port, nbytes, data=data, packed=packed, blob=m["data"])
    if ("expected" in m) == ("crc" in m):
        raise ctx.err(where, "give exactly one of expected (blob of the packed golden) or crc")
    rule = ctx.string(m.get("rule", "bitexact"), f"{where}.rule", tuple(RULES))
    rparams = ctx.mapping(m.get("rule_params") or {}, f"{where}.rule_params")
    for k, x in rparams.items():
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ctx.err(f"{where}.rule_params.{k}", f"expected a number, got {x!r}")
    if rule not in ("bitexact", "sdp") and "max_value" not in rparams and rule in ("cdp", "pdp"):
        raise ctx.err(f"{where}.rule_params", f"rule {rule} needs max_value")
    if "crc" in m:
        crc = ctx.integer(m["crc"], f"{where}.crc", 0, 0xFFFFFFFF)
        return Surface(name, lname, params, dt, shape, addr, port, nbytes, crc=crc, rule="crc")
    exp = ctx.blob(m["expected"], f"{where}.expected", np.dtype(np.uint8), None)
    if exp.size != nbytes:
        raise ctx.err(f"{where}.expected", f"blob {m['expected']!r} has {exp.size} bytes; {lname} of shape "
                                           f"{list(shape)} {dt} needs {nbytes}")
    return Surface(name, lname, params, dt, shape, addr, port, nbytes, packed=exp, rule=rule,
                   rule_params=rparams, blob=m["expected"])


#: the optional top-level key of a layer case holding the status registers the layer sets, as the
#: golden's target read them back (``BLOCK.REGISTER: value``; absent: not compared)
STATUSES = "statuses"


def _load_statuses(ctx: CaseReader, v: Any, prof: HardwareProfile) -> dict[str, int] | None:
    if v is None:
        return None
    known = status_names()
    m = ctx.mapping(v, STATUSES)
    out: dict[str, int] = {}
    for k, x in m.items():
        where = f"{STATUSES}.{k}"
        if not isinstance(k, str) or k not in known:
            raise ctx.err(where, f"not a status register a layer sets; one of: {', '.join(known)}")
        try:
            f = prof.regmap.register(k).field(status_field(k))
        except RegisterMapError as e:
            raise ctx.err(where, f"{e} (profile {prof.name})") from None
        out[k] = ctx.integer(x, where, 0, (1 << f.width) - 1)
    return out


def golden_statuses(case: Case) -> dict[str, int] | None:
    """The golden's status registers of a layer case (``statuses``: ``BLOCK.REGISTER`` -> field
    value, checked when the case loaded), or None when it records none (not compared)."""
    v = case.manifest.get(STATUSES) if case.kind == "layer" else None
    if v is None:
        return None
    return {str(k): int(x) for k, x in v.items()}


def layer_statuses(case: Case) -> tuple[str, ...]:
    """The status registers (``BLOCK.REGISTER``) a layer case's layer sets beyond its unit's
    ``statistics``: ``SDP.D_STATUS`` in EW ALU EQL mode (semantics doc 3.3), the SDP_RDMA NaN /
    Inf input counts when ``SDP_RDMA.D_PERF_ENABLE.PERF_NAN_INF_COUNT_EN`` is set (8.3), and the
    statistics counters of the other engines of a fused layer (CACC of a convolution, PDP fed by
    SDP on the fly, SDP feeding PDP; 8.2-8.4)."""
    if case.kind != "layer" or case.unit is None:
        return ()
    from ...drivers.precision import statistics_registers
    from ...drivers.regmap import load_regmap

    rm = load_regmap("v2")
    written = {r.name: r.value for r in case.registers}

    def fld(reg: str, field: str) -> int:
        r = rm.register(reg)
        return r.field(field).extract(written.get(r.full_name, r.reset))

    blocks = set(case.launch)
    names: list[str] = []
    if "SDP" in blocks and not fld("SDP.D_DP_EW_CFG", "EW_BYPASS") and not fld("SDP.D_DP_EW_CFG", "EW_ALU_BYPASS") \
            and fld("SDP.D_DP_EW_CFG", "EW_ALU_ALGO") == 3:
        names.append("SDP.D_STATUS")
    if "SDP_RDMA" in blocks and fld("SDP_RDMA.D_PERF_ENABLE", "PERF_NAN_INF_COUNT_EN"):
        names += ["SDP_RDMA.D_STATUS_NAN_INPUT_NUM", "SDP_RDMA.D_STATUS_INF_INPUT_NUM"]
    done = DONE_UNIT[case.unit]
    for b in sorted(blocks):
        if b != done:
            names += statistics_registers(b)
    return tuple(names)


def _load_layer_case(ctx: CaseReader, top: dict[str, Any], name: str) -> Case:
    ctx.mapping(top, "", allowed=TOP_LAYER | {STATUSES}, required=("unit", "profile", "outputs"))
    prof = read_profile(ctx, top["profile"])
    unit = ctx.string(top["unit"], "unit", LAYER_UNITS)
    if not prof.has_unit(UNIT_BLOCK[unit]):
        raise ctx.err("unit", f"{prof.name} has no {unit} unit")
    launch = DEFAULT_LAUNCH[unit]
    if top.get("launch") is not None:
        lv = top["launch"]
        if not isinstance(lv, list) or not lv:
            raise ctx.err("launch", "expected a non-empty list of block names")
        launch = tuple(ctx.string(b, f"launch[{i}]") for i, b in enumerate(lv))
        for i, blk in enumerate(launch):
            try:
                prof.regmap.register(blk, "D_OP_ENABLE")
            except RegisterMapError as e:
                raise ctx.err(f"launch[{i}]", str(e)) from None
    registers = _load_registers(ctx, top.get("registers"), prof)
    lut = _load_lut(ctx, top.get("lut"), prof)
    convs = _load_convertors(ctx, top.get("convertors"), prof)
    inputs: list[Surface] = []
    for key, output in (("inputs", False), ("outputs", True)):
        v = top.get(key) or []
        if not isinstance(v, list):
            raise ctx.err(key, "expected a list of surfaces")
        if output and not v:
            raise ctx.err(key, "a layer case needs at least one output")
        for i, item in enumerate(v):
            inputs.append(_load_surface(ctx, item, f"{key}[{i}]", prof, output))
    names = [s.name for s in inputs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ctx.err("inputs/outputs", f"surface name {dup[0]!r} is used twice")
    spans = sorted((s.port, s.address, s.address + s.nbytes, s.name) for s in inputs)
    for a, b in itertools.pairwise(spans):
        if a[0] == b[0] and b[1] < a[2]:
            raise ctx.err("inputs/outputs", f"surfaces {a[3]!r} and {b[3]!r} overlap in {a[0]} "
                                            f"([{a[1]:#x}, {a[2]:#x}) and [{b[1]:#x}, {b[2]:#x}))")
    stats = None
    if top.get("statistics") is not None:
        counters = {f.name for f in fields(Statistics)} - {"block", "group"}
        sm = ctx.mapping(top["statistics"], "statistics", allowed=counters)
        stats = {k: ctx.integer(x, f"statistics.{k}", 0, 0xFFFFFFFF) for k, x in sm.items()}
    _load_statuses(ctx, top.get(STATUSES), prof)  # kept in the manifest: golden_statuses()
    declared: set[str] = set()
    if top.get("features") is not None:
        fv = top["features"]
        if not isinstance(fv, list):
            raise ctx.err("features", "expected a list of feature names")
        for i, f in enumerate(fv):
            declared.add(ctx.string(f, f"features[{i}]", FEATURES))
    case = Case(path=ctx.path, name=name, kind="layer", profile=prof.name, features=frozenset(), unit=unit,
                description=read_description(ctx, top), launch=launch, registers=registers, lut=lut,
                convertors=convs, inputs=tuple(s for s in inputs if s.data is not None),
                outputs=tuple(s for s in inputs if s.data is None), statistics=stats,
                provenance=read_provenance(ctx, top.get("provenance")),
                golden_source=read_golden_source(ctx, top.get("golden_source")), manifest=top)
    feats = frozenset(declared | case_features(case))
    missing = sorted(f for f in feats if not prof.has(f))
    if missing:
        raise ctx.err("profile", f"{prof.name} lacks feature(s) the case needs: {', '.join(missing)}")
    return Case(**{**{f.name: getattr(case, f.name) for f in fields(Case)}, "features": feats})


def case_features(case: Case) -> set[str]:
    """Features a layer case needs from what it programs (SDP EW / LUT stage, secondary port)."""
    feats: set[str] = set()
    if case.unit in ("CDP", "PDP"):
        feats.add(case.unit.lower())
    for r in case.registers:
        if r.name == "SDP.D_DP_EW_CFG":
            from ...drivers.regmap import load_regmap

            reg = load_regmap("v2").register("SDP", "D_DP_EW_CFG")
            if not reg.field("EW_BYPASS").extract(r.value):
                feats.add("sdp_ew")
                if not reg.field("EW_LUT_BYPASS").extract(r.value):
                    feats.add("sdp_lut")
    if case.lut is not None and case.lut.unit == "SDP":
        feats.add("sdp_lut")
    if case.unit == "CONV":
        feats.update(_conv_features(case))
    if any(s.port == "sec_mem" for s in case.inputs + case.outputs):
        feats.add("sec_mem")
    return feats


def _conv_features(case: Case) -> set[str]:
    """CONV case: Winograd (``CDMA.D_MISC_CFG.CONV_MODE``), compressed weights
    (``CDMA.D_WEIGHT_FORMAT``) and the INT16 / FP16 precision (``CDMA.D_MISC_CFG.PROC_PRECISION``)."""
    from ...drivers.regmap import load_regmap

    rm = load_regmap("v1")
    feats: set[str] = set()
    for r in case.registers:
        if r.name == "CDMA.D_MISC_CFG":
            reg = rm.register("CDMA", "D_MISC_CFG")
            if reg.field("CONV_MODE").extract(r.value):
                feats.add("winograd")
            feats.add({0: "int8", 1: "int16", 2: "fp16"}.get(reg.field("PROC_PRECISION").extract(r.value), "int8"))
        elif r.name == "CDMA.D_WEIGHT_FORMAT" and rm.register("CDMA", "D_WEIGHT_FORMAT").field("WEIGHT_FORMAT").extract(r.value):
            feats.add("weight_compression")
    return feats


def find_cases(root: str | Path) -> list[Path]:
    """Every case folder (holding ``case.yaml``) below ``root``, sorted by relative path."""
    root = Path(root)
    if (root / MANIFEST).is_file():
        return [root]
    return sorted((p.parent for p in root.rglob(MANIFEST)), key=lambda p: p.relative_to(root).as_posix())


def bundled_root() -> Path:
    """The folder of the suites shipped in the package (``nvdla_hil.testvectors``)."""
    from importlib import resources

    return Path(str(resources.files("nvdla_hil.testvectors")))


