"""Constrained-random differential testing: random layers within the hardware's legal space,
run on a target and on the reference model, every output element compared.

* **Reproducible.** Case ``i`` of seed ``S`` is drawn from its own stream
  ``PCG64(S).jumped(i)`` (the vectors generator's) and the constraints, nothing else; the
  reference-model runs used to aim tables and convertors are deterministic too, so
  ``--seed S --first i --count 1`` replays one case.
* **Constraints are data** (``harness/constraints/<unit>.yaml``, format in its README): ranges,
  weights and dependencies per field. What is *legal* lives here, in :data:`SCHEMAS`
  (register field widths, the profile's features; the model target refuses any precision
  combination outside ``harness/validity.py``'s tables), so a constraint file or ``--set`` can
  only narrow or reweight the legal space; anything else is an error naming the key.
* **Differential.** The golden of a case is what the reference model (the model target)
  computes; the case then runs on the device under test (any target) through
  :func:`~nvdla_hil.harness.vectors.run_case`, which compares every output element with
  :mod:`~nvdla_hil.harness.compare` (bit-exact) and the statistics counters.
* **Coverage.** The reference runs feed a :class:`~nvdla_hil.harness.coverage.Coverage`
  collector; ``until_covered`` keeps drawing cases until every bin the unit aims at that the
  profile can reach is hit, or the budget is spent.

Units (:data:`UNITS`): ``sdp-lut``, ``sdp-bsbn``, ``sdp-ew``, ``sdp-cvt``, ``cdp-lrn``.
"""

from __future__ import annotations

import contextlib
import math
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..drivers.profiles import HardwareProfile, load_profile
from . import coverage as covmod
from .vectors import Hex, load_case, packed_size, run_case, execute_case, write_case
from .vectors_gen import Draft, _bypass, _lut_tables, _manifest_layer, _rdma_off, _reg, model_version, rng_for

# UNITS comes from the module's __getattr__ (PEP 562)
__all__ = ["UNITS", "SCHEMAS", "ConstraintError", "Constraints", "load_constraints", "generate", "run_fuzz",  # noqa: F822
           "FuzzCase", "FuzzReport", "case_name", "lacks", "allowed", "unit_refusal", "UnitUnavailable"]

CONSTRAINTS_DIR = Path(__file__).with_name("constraints")
BASE = 0x8000_0000
PORTS = {"pri": "pri_mem", "sec": "sec_mem"}
RAM_TYPE = {"pri": 1, "sec": 0}


class ConstraintError(ValueError):
    """A bad constraint file or ``--set``; the message names the file, line and key."""


# ---- schema: what is legal --------------------------------------------------------------------------


@dataclass(frozen=True)
class IntF:
    lo: int
    hi: int
    default: int = 0
    doc: str = ""


@dataclass(frozen=True)
class EnumF:
    values: tuple[Any, ...]
    default: Any = None
    doc: str = ""
    #: value -> the profile feature (or tuple of features, all needed) it needs; a value whose
    #: feature the profile lacks is dropped from every draw on that profile (:func:`allowed`)
    needs: Mapping[Any, str | tuple[str, ...]] = field(default_factory=dict)

    def dflt(self) -> Any:
        return self.values[0] if self.default is None else self.default


# ---- what a profile has: essential and optional features ------------------------------------------------
#
# One mechanism for every unit. A unit declares
#   * its ESSENTIAL features (``register_unit(needs=...)``): a profile without one of them refuses
#     the unit at once (:class:`UnitUnavailable`, a ConstraintError: exit 2, one line naming the
#     unit, the profile and the feature);
#   * its OPTIONAL features per value (``EnumF(needs={value: feature})``): on a profile without the
#     feature the value is dropped from the draw (a constraint file's choices narrow to what the
#     profile has; a fixed ``value`` or ``--set`` that needs it is an error naming the feature).
# Generators that pick among hardware options in code (not from a schema field) narrow with
# :func:`allowed` / :meth:`Sampler.has` the same way.


def lacks(prof: HardwareProfile, needs: str | Iterable[str] | None) -> list[str]:
    """The features of ``needs`` (one name, several, or None) that ``prof`` lacks, in order."""
    if not needs:
        return []
    feats = (needs,) if isinstance(needs, str) else tuple(needs)
    return [f for f in feats if not prof.has(f)]


def allowed(leg: EnumF, prof: HardwareProfile, values: Iterable[Any] | None = None) -> tuple[Any, ...]:
    """The values of ``leg`` (or of ``values``, a subset of them) that ``prof`` has every
    feature for (``leg.needs``): what a generator may draw on this profile. Example, in a
    generator: ``fmt = s.rng.choice(allowed(SCHEMA["format"], prof))``."""
    return tuple(v for v in (leg.values if values is None else values) if not lacks(prof, leg.needs.get(v)))


def _feature_text(f: str) -> str:
    from ..drivers.profiles import _FEATURE_TEXT

    return f"{_FEATURE_TEXT.get(f, f)} ({f})"


class UnitUnavailable(ConstraintError):
    """A fuzz unit whose essential feature the profile lacks; the message is one line naming the
    unit, the profile, the missing feature(s) and the shipped profiles that have them."""


def unit_refusal(unit: str, prof: HardwareProfile) -> str | None:
    """Why ``unit`` cannot run on ``prof`` (one line), or None when the profile has every
    feature the unit declares essential (``register_unit(needs=...)``)."""
    missing = lacks(prof, UNIT_NEEDS.get(unit, ()))
    if not missing:
        return None
    from ..drivers.profiles import list_profiles

    having = [n for n in list_profiles() if not lacks(load_profile(n), missing)]
    return (f"fuzz unit {unit} needs the {', '.join(map(_feature_text, missing))}, which profile {prof.name} lacks"
            + (f" (profiles with it: {', '.join(having)})" if having else ""))


_PORT = EnumF(("pri", "sec"), "pri", needs={"sec": "sec_mem"})
_CUBE = {
    "shape": EnumF(("cube", "1x1xC", "single_line")),
    "width": IntF(1, 8192, 1), "height": IntF(1, 8192, 1), "channels": IntF(1, 8192, 1),
    "gaps": EnumF((0, 1), 0), "src_port": _PORT, "dst_port": _PORT,
    "data": EnumF(("uniform", "edges")),
}
_CVT = {"cvt": EnumF(("fit", "saturate", "random")), "cvt_shift": IntF(0, 63, 0)}
_LUT = {
    "le_function": EnumF(("exponent", "linear")),
    "table": EnumF(("random_walk", "monotone", "random", "extreme")),
    "layout": EnumF(("overlap", "disjoint", "random")),
    "lo_span_pct": IntF(1, 100, 30), "le_span_pct": IntF(1, 100, 30),
    "le_exp_offset": EnumF(("top_in_range", "low", "random"), "low"),
    "le_index_offset": IntF(-128, 127, 0),
    "uflow_priority": EnumF(("LE", "LO")), "oflow_priority": EnumF(("LE", "LO")), "hybrid_priority": EnumF(("LE", "LO")),
    "slope_scale": IntF(-32768, 32767, 0), "slope_shift": IntF(-16, 15, 0),
}
_OPS = {
    "op_port": _PORT, "op_mode": EnumF(("channel", "element")),
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "sdp-lut": {**_CUBE, "bs_mul": IntF(1, 32767, 1), **_LUT, **_CVT},
    "sdp-bsbn": {**_CUBE, **_OPS, "bn_on": EnumF((0, 1), 1, needs={1: "sdp_bn"}), "alu": EnumF(("off", "max", "min", "sum")),
                 "mul": EnumF(("off", "mul", "prelu")), "relu": EnumF((0, 1), 0),
                 "alu_src": EnumF(("reg", "mem")), "mul_src": EnumF(("reg", "mem")),
                 "alu_operand": IntF(-32768, 32767, 0), "alu_shift": IntF(0, 63, 0),
                 "mul_operand": IntF(-32768, 32767, 1), "mul_shift": IntF(0, 63, 0), **_CVT},
    "sdp-ew": {**_CUBE, **_OPS, "ew_alu": EnumF(("off", "max", "min", "sum", "eql")),
               "ew_mul": EnumF(("off", "mul", "prelu")), "ew_alu_src": EnumF(("reg", "mem")),
               "ew_mul_src": EnumF(("reg", "mem")), "op_size": EnumF((1, 2), 2), "cvt_bypass": EnumF((0, 1), 1),
               "op_cvt_offset": IntF(-(1 << 31), (1 << 31) - 1, 0), "op_cvt_scale": IntF(-32768, 32767, 1),
               "op_cvt_truncate": IntF(0, 63, 0), "alu_operand": IntF(-(1 << 31), (1 << 31) - 1, 0),
               "mul_operand": IntF(-(1 << 31), (1 << 31) - 1, 1), "ew_truncate": IntF(0, 1023, 0),
               "lut": EnumF((0, 1), 0, needs={1: "sdp_lut"}), **_LUT, **_CVT},
    "sdp-cvt": {**_CUBE, **_CVT},
    "cdp-lrn": {**_CUBE, "precision": EnumF(("int8", "int16"), "int8", needs={"int16": "int16"}),
                "normalz_len": IntF(0, 3, 0), "sqsum_bypass": EnumF((0, 1), 0), "mul_bypass": EnumF((0, 1), 0),
                "cvt_in": EnumF(("fit", "saturate", "random")), "cvt_in_shift": IntF(0, 31, 0), **_LUT, **_CVT},
}

#: the profile features a unit needs, and the coverage groups it aims at
UNIT_NEEDS = {"sdp-lut": ("sdp_bs", "sdp_lut"), "sdp-ew": ("sdp_ew",), "sdp-bsbn": ("sdp_bs",), "sdp-cvt": (),
              "cdp-lrn": ("cdp",)}
UNIT_GROUPS = {
    "sdp-lut": ("sdp.lut", "sdp.out", "sdp.cube", "sdp.ports"),
    "sdp-bsbn": ("sdp.bs", "sdp.bn", "sdp.out", "sdp.cube", "sdp.ports"),
    "sdp-ew": ("sdp.ew", "sdp.out", "sdp.cube", "sdp.ports"),
    "sdp-cvt": ("sdp.out", "sdp.cube", "sdp.ports"),
    "cdp-lrn": ("cdp.lut", "cdp.cvt", "cdp.cube", "cdp.ports"),
}


def __getattr__(name: str) -> Any:
    """``UNITS``: the registered unit names, in registration order (the built-in ones, then those
    of the modules of harness/fuzzgen/, which call :func:`register_unit` at import)."""
    if name == "UNITS":
        return tuple(SCHEMAS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- constraints: how to draw --------------------------------------------------------------------------


@dataclass
class FieldSpec:
    kind: str  # range | choices | value
    lo: int = 0
    hi: int = 0
    extremes: float = 0.0
    values: list[Any] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    when: dict[str, list[Any]] = field(default_factory=dict)
    default: Any = None


@dataclass
class Constraints:
    unit: str
    profile: HardwareProfile
    fields: dict[str, FieldSpec]  # in drawing order
    sources: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)  # the --set items, as given

    def describe(self) -> str:
        return f"{self.unit} on {self.profile.name} (constraints: {', '.join(self.sources)})"


def _coerce(leg: Any, v: Any, where: str) -> Any:
    if isinstance(leg, IntF):
        if isinstance(v, bool) or not isinstance(v, int):
            try:
                v = int(str(v), 0)
            except ValueError:
                raise ConstraintError(f"{where}: {v!r} is not an integer") from None
        if not leg.lo <= v <= leg.hi:
            raise ConstraintError(f"{where}: {v} is outside the legal range {leg.lo}..{leg.hi}")
        return v
    for cand in leg.values:
        if (v == cand and type(v) is type(cand)) or str(v) == str(cand):
            return cand
    hint = " (YAML reads off/on/no/yes as booleans: quote the value)" if isinstance(v, bool) else ""
    raise ConstraintError(f"{where}: {v!r} is not one of {', '.join(map(str, leg.values))}{hint}")


def _parse_field(name: str, raw: Any, leg: Any, where: str, prof: HardwareProfile,
                 known: list[str]) -> FieldSpec:  # fmt: skip
    if not isinstance(raw, dict):
        raw = {"value": raw}
    keys = {"range", "extremes", "choices", "value", "when", "default", "doc"}
    bad = sorted(set(map(str, raw)) - keys)
    if bad:
        raise ConstraintError(f"{where}: unknown key {bad[0]!r} (keys: {', '.join(sorted(keys))})")
    kinds = [k for k in ("range", "choices", "value") if k in raw]
    if len(kinds) != 1:
        raise ConstraintError(f"{where}: give exactly one of range, choices, value")
    spec = FieldSpec(kinds[0])
    if "range" in raw:
        if not isinstance(leg, IntF):
            raise ConstraintError(f"{where}.range: {name} is not an integer field (choices: {', '.join(map(str, leg.values))})")
        r = raw["range"]
        if not (isinstance(r, list) and len(r) == 2):
            raise ConstraintError(f"{where}.range: give [lo, hi]")
        spec.lo, spec.hi = (_coerce(leg, x, f"{where}.range") for x in r)
        if spec.lo > spec.hi:
            raise ConstraintError(f"{where}.range: lo {spec.lo} > hi {spec.hi}")
        ex = raw.get("extremes", 0)
        if isinstance(ex, bool) or not isinstance(ex, (int, float)) or not 0 <= ex <= 1:
            raise ConstraintError(f"{where}.extremes: a probability 0..1, not {ex!r}")
        spec.extremes = float(ex)
    elif "extremes" in raw:
        raise ConstraintError(f"{where}.extremes: only with range")
    if "choices" in raw:
        ch = raw["choices"]
        items = list(ch.items()) if isinstance(ch, dict) else [(c, 1) for c in ch] if isinstance(ch, list) else None
        if not items:
            raise ConstraintError(f"{where}.choices: give a list or a mapping value: weight")
        for val, w in items:
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                raise ConstraintError(f"{where}.choices.{val}: weight must be a number >= 0, not {w!r}")
            val = _coerce(leg, val, f"{where}.choices")
            if lacks(prof, getattr(leg, "needs", {}).get(val)):
                continue  # the profile lacks what this value needs: not in its legal space
            spec.values.append(val)
            spec.weights.append(float(w))
        if not spec.values or sum(spec.weights) <= 0:
            missing = sorted({f for v, _ in items for f in lacks(prof, getattr(leg, "needs", {}).get(_coerce(leg, v, where)))})
            why = f": every choice needs the {' or '.join(map(_feature_text, missing))}, which {prof.name} lacks" if missing else ""
            raise ConstraintError(f"{where}.choices: nothing left to choose{why}")
    if "value" in raw:
        spec.values = [_coerce(leg, raw["value"], f"{where}.value")]
        missing = lacks(prof, getattr(leg, "needs", {}).get(spec.values[0]))
        if missing:
            raise ConstraintError(f"{where}.value: {spec.values[0]} needs the {', '.join(map(_feature_text, missing))}, "
                                  f"which {prof.name} lacks")
    when = raw.get("when") or {}
    if not isinstance(when, dict):
        raise ConstraintError(f"{where}.when: give a mapping field: value(s)")
    for k, vs in when.items():
        if k not in known:
            raise ConstraintError(f"{where}.when: {k!r} is not an earlier field")
        vs = vs if isinstance(vs, list) else [vs]
        spec.when[k] = vs
    default = raw.get("default", leg.default if isinstance(leg, IntF) else leg.dflt())
    spec.default = _coerce(leg, default, f"{where}.default")
    if isinstance(leg, EnumF) and lacks(prof, leg.needs.get(spec.default)):
        ok = allowed(leg, prof)
        if "default" in raw or not ok:
            raise ConstraintError(f"{where}.default: {spec.default} needs the "
                                  f"{', '.join(map(_feature_text, lacks(prof, leg.needs.get(spec.default))))}, "
                                  f"which {prof.name} lacks")
        spec.default = ok[0]  # the schema's default narrowed to what the profile has
    return spec


def _parse_doc(unit: str, doc: Any, source: str, prof_override: str | None,
               base: Constraints | None) -> Constraints:  # fmt: skip
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConstraintError(f"{source}: the top level must be a mapping (unit, profile, fields)")
    bad = sorted(set(map(str, doc)) - {"unit", "profile", "fields", "description"})
    if bad:
        raise ConstraintError(f"{source}: unknown key {bad[0]!r} (keys: unit, profile, fields, description)")
    if doc.get("unit") is not None and doc["unit"] != unit:
        raise ConstraintError(f"{source}: unit {doc['unit']!r} does not match --unit {unit}")
    pname = prof_override or doc.get("profile") or (base.profile.name if base else "nv_small")
    try:
        prof = load_profile(pname)
    except Exception as e:  # noqa: BLE001
        raise ConstraintError(f"{source}: profile: {e}") from None
    why = unit_refusal(unit, prof)
    if why:
        raise UnitUnavailable(why)
    schema = SCHEMAS[unit]
    fields_raw = doc.get("fields") or {}
    if not isinstance(fields_raw, dict):
        raise ConstraintError(f"{source}: fields must be a mapping")
    out: dict[str, FieldSpec] = {}
    if base is not None:  # re-validate the base on this profile, then merge over it
        out = dict(base.fields)
    order = list(out)
    for name, raw in fields_raw.items():
        if name not in schema:
            raise ConstraintError(f"{source}: fields.{name}: unknown field of {unit} (fields: {', '.join(schema)})")
        known = order[: order.index(name)] if name in order else list(order)
        out[name] = _parse_field(name, raw, schema[name], f"{source}: fields.{name}", prof, known)
        if name not in order:
            order.append(name)
    return Constraints(unit, prof, {k: out[k] for k in order}, (base.sources if base else []) + [source])


def _read_yaml(path: Path) -> Any:
    from ..drivers import yamlstrict

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConstraintError(f"{path}: {e.strerror or e}") from None
    try:
        return yamlstrict.load(text, str(path))
    except yamlstrict.YamlError as e:
        raise ConstraintError(str(e)) from None


def parse_set(item: str) -> tuple[str, Any]:
    """``key=value``, ``key=lo..hi``, ``key=a|b|c`` -> (key, field spec dict)."""
    if "=" not in item:
        raise ConstraintError(f"--set {item!r}: expected key=value")
    k, v = (s.strip() for s in item.split("=", 1))
    if ".." in v:
        lo, hi = v.split("..", 1)
        return k, {"range": [lo.strip(), hi.strip()]}
    if "|" in v:
        return k, {"choices": [x.strip() for x in v.split("|")]}
    return k, {"value": v}


def load_constraints(unit: str, *, profile: str | None = None, files: Iterable[str | Path] = (),
                     sets: Iterable[str] = ()) -> Constraints:  # fmt: skip
    """The shipped ``constraints/<unit>.yaml``, then each file, then each ``--set``."""
    if unit not in SCHEMAS:
        raise ConstraintError(f"unknown unit {unit!r}; units: {', '.join(SCHEMAS)}")
    shipped = CONSTRAINTS_DIR / f"{unit}.yaml"
    c = _parse_doc(unit, _read_yaml(shipped), str(shipped), profile, None)
    for f in files:
        p = Path(f)
        c = _parse_doc(unit, _read_yaml(p), str(p), profile, c)
    sets = list(sets)
    if sets:
        fl: dict[str, Any] = {}
        for s in sets:
            k, spec = parse_set(s)
            if k in c.fields and c.fields[k].when:
                spec["when"] = c.fields[k].when
                spec["default"] = c.fields[k].default
            fl[k] = spec
        c = _parse_doc(unit, {"fields": fl}, "--set", profile, c)
        c.overrides = sets
    return c


# ---- sampling ----------------------------------------------------------------------------------------------


class Sampler:
    def __init__(self, c: Constraints, rng: np.random.Generator) -> None:
        self.c, self.rng = c, rng
        self.v: dict[str, Any] = {}
        schema = SCHEMAS[c.unit]
        for name, leg in schema.items():  # fields no constraint mentions keep their default
            self.v[name] = leg.default if isinstance(leg, IntF) else leg.dflt()
            if isinstance(leg, EnumF) and lacks(c.profile, leg.needs.get(self.v[name])):
                self.v[name] = (allowed(leg, c.profile) or (self.v[name],))[0]
        for name, spec in c.fields.items():
            self.v[name] = self._draw(spec)

    def _draw(self, spec: FieldSpec) -> Any:
        rng = self.rng
        if spec.when and not all(self.v.get(k) in vs or str(self.v.get(k)) in map(str, vs) for k, vs in spec.when.items()):
            return spec.default
        if spec.kind == "value":
            return spec.values[0]
        if spec.kind == "range":
            if spec.extremes and rng.random() < spec.extremes:
                return spec.lo if rng.random() < 0.5 else spec.hi
            return int(rng.integers(spec.lo, spec.hi + 1))
        w = np.asarray(spec.weights, dtype=float)
        return spec.values[int(rng.choice(len(w), p=w / w.sum()))]

    def draw(self, name: str) -> Any:
        """A fresh draw of ``name`` (for repeated quantities: slopes, the BN stage)."""
        spec = self.c.fields.get(name)
        if spec is None:
            return self.v[name]
        return self._draw(spec)

    def __getitem__(self, k: str) -> Any:
        return self.v[k]

    def has(self, feature: str) -> bool:
        """Whether the case's profile has ``feature`` (narrowing a choice made in code)."""
        return self.c.profile.has(feature)


# ---- building blocks ---------------------------------------------------------------------------------------


class _Mem:
    def __init__(self) -> None:
        self.next = {"pri_mem": BASE, "sec_mem": BASE}

    def alloc(self, port: str, nbytes: int) -> int:
        a = self.next[port]
        self.next[port] = (a + nbytes + 0xFFF) // 0x1000 * 0x1000 + 0x1000
        return a


@dataclass
class _Geo:
    w: int
    h: int
    c: int
    line: int
    surf: int


def _geometry(s: Sampler, atom: int) -> _Geo:
    shape = s["shape"]
    w = 1 if shape == "1x1xC" else int(s["width"])
    h = 1 if shape in ("1x1xC", "single_line") else int(s["height"])
    if shape == "single_line" and w == 1:
        w = 2
    c = int(s["channels"])
    gap_l = atom * int(s.rng.integers(1, 3)) if s["gaps"] else 0
    gap_s = atom * int(s.rng.integers(1, 4)) if s["gaps"] else 0
    if w == 1 and h == 1:  # any 1x1xC cube (drawn as such or as a 1x1 "cube") is packed: SURFACE_STRIDE ==
        gap_l = gap_s = 0  # atom (the C model asserts it, cmod/sdp/NV_NVDLA_sdp.cpp:392; the RTL ignores the
        # strides, tests/test_sdp_1x1_pack.py)
    line = w * atom + gap_l
    return _Geo(w, h, c, line, h * line + gap_s)


def _data(s: Sampler, shape: tuple[int, ...], dtype: Any = np.int8) -> np.ndarray:
    info = np.iinfo(dtype)
    if s["data"] == "edges":
        edges = np.array([info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max], dtype=np.int64)
        return s.rng.choice(edges, size=shape).astype(dtype)
    return s.rng.integers(int(info.min), int(info.max) + 1, size=shape, dtype=np.int64).astype(dtype)


def _feature(d: Draft, mem: _Mem, name: str, arr_or_shape: Any, port: str, atom: int, geo: _Geo, *,
             output: bool = False, dtype: str = "int8") -> int:  # fmt: skip
    params = {"atom_bytes": atom, "line_stride": geo.line, "surface_stride": geo.surf}
    shape = list(arr_or_shape.shape) if isinstance(arr_or_shape, np.ndarray) else list(arr_or_shape)
    size = packed_size("nvdla.feature", tuple(shape), np.dtype(dtype), params)
    addr = mem.alloc(PORTS[port], size)
    meta = {"name": name, "layout": "nvdla.feature", "params": params, "dtype": dtype, "shape": shape,
            "address": Hex(addr), "port": PORTS[port]}
    if output:
        d.outputs.append({**meta, "rule": "bitexact"})
    else:
        d.inputs.append((meta, arr_or_shape))
    return addr


def _sdp_io(d: Draft, s: Sampler, prof: HardwareProfile, mem: _Mem) -> tuple[_Geo, np.ndarray]:
    atom = prof.atom_bytes
    geo = _geometry(s, atom)
    x = _data(s, (geo.c, geo.h, geo.w))
    src = _feature(d, mem, "src", x, s["src_port"], atom, geo)
    dst = _feature(d, mem, "dst", (geo.c, geo.h, geo.w), s["dst_port"], atom, geo, output=True)
    for blk in ("SDP_RDMA", "SDP"):
        d.registers += [_reg(f"{blk}.D_DATA_CUBE_WIDTH", WIDTH=geo.w - 1), _reg(f"{blk}.D_DATA_CUBE_HEIGHT", HEIGHT=geo.h - 1),
                        _reg(f"{blk}.D_DATA_CUBE_CHANNEL", CHANNEL=geo.c - 1)]
    d.registers += [
        _reg("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src), _reg("SDP_RDMA.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
        _reg("SDP_RDMA.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=geo.line),
        _reg("SDP_RDMA.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=geo.surf),
        _reg("SDP_RDMA.D_FEATURE_MODE_CFG", FLYING_MODE=0, WINOGRAD=0, IN_PRECISION=0, PROC_PRECISION=0,
             OUT_PRECISION=0, BATCH_NUMBER=0),
        _reg("SDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), _reg("SDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        _reg("SDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=geo.line), _reg("SDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=geo.surf),
        _reg("SDP.D_FEATURE_MODE_CFG", FLYING_MODE=0, OUTPUT_DST=0, WINOGRAD=0, NAN_TO_ZERO=0, BATCH_NUMBER=0),
        _reg("SDP.D_DATA_FORMAT", PROC_PRECISION=0, OUT_PRECISION=0),
        _reg("SDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=RAM_TYPE[s["src_port"]]),
        _reg("SDP.D_DST_DMA_CFG", DST_RAM_TYPE=RAM_TYPE[s["dst_port"]]),
    ]
    return geo, x


def _log_uniform_int(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(np.clip(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))), lo, hi))


def _pick_cvt(s: Sampler, values: np.ndarray, *, mode: str, shift: int, out_max: int = 127, shift_top: int = 63,
              offset_bits: int = 32, scale_lo: int = 1) -> dict[str, int]:  # fmt: skip
    """Convertor settings for pre-convertor ``values``: ``fit`` maps their 1..99 % range onto
    the output range, ``saturate`` overshoots it 3-60x, ``random`` is anything legal."""
    rng = s.rng
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    omax = (1 << (offset_bits - 1)) - 1
    if v.size == 0:
        v = np.zeros(1, dtype=np.int64)
    if mode == "random":
        lo, hi = int(v.min()), int(v.max())
        off = int(np.clip(rng.integers(lo - 64, hi + 65), -omax - 1, omax))
        scale = int(rng.integers(-32768, 32768)) if rng.random() < 0.5 else int(rng.integers(-64, 65))
        return {"offset": off, "scale": scale, "shift": int(shift)}
    p_lo, p_hi = (float(x) for x in np.percentile(v, [1, 99]))
    off = int(np.clip(round((p_lo + p_hi) / 2), -omax - 1, omax))
    half = max((p_hi - p_lo) / 2, 1.0)
    scale = _log_uniform_int(rng, scale_lo, 32767)
    target = out_max * (rng.uniform(0.5, 1.0) if mode == "fit" else rng.uniform(3.0, 60.0))
    sh = int(np.clip(math.ceil(math.log2(max(half * scale / target, 1e-9))), 0, shift_top))
    return {"offset": off, "scale": scale, "shift": sh}


def _tables(s: Sampler) -> dict[str, np.ndarray]:
    rng, kind = s.rng, s["table"]
    if kind == "random_walk":
        return _lut_tables(rng)
    out = {}
    for t, n in (("le", 65), ("lo", 257)):
        if kind == "monotone":
            a = np.sort(rng.integers(-32768, 32768, n))
            a = a if rng.random() < 0.5 else a[::-1]
        elif kind == "random":
            a = rng.integers(-32768, 32768, n)
        else:
            a = rng.choice(np.array([-32768, -32767, -1, 0, 1, 32766, 32767]), n)
        out[t] = np.asarray(a).astype(np.int16)
    return out


def _place_lut(s: Sampler, lo_v: float, hi_v: float, *, cdp: bool, bits: int = 8) -> dict[str, Any]:
    """LUT registers whose tables cover parts of [lo_v, hi_v] as the constraints ask: overlap
    (inputs in both tables, one, and both out-of-range sides), disjoint (inputs between the
    tables: one table under-, the other overflows) or anywhere. ``bits`` 16: CDP INT16, whose
    RTL compares all 38 bits of START (``refmodel/cdp.py`` INT16 step 3)."""
    rng = s.rng
    span = max(hi_v - lo_v, 1.0)
    sel_lo, sel_hi = (-32, 31) if cdp else (-128, 127)
    # CDP INT8 RTL compares START on 22 bits (doc 6.7); CDP INT16 on 38 bits; SDP on 32
    bound = ((1 << 37) - 1 if bits == 16 else (1 << 21) - 1) if cdp else (1 << 31) - 1
    lo_sel = int(np.clip(round(math.log2(max(span * s["lo_span_pct"] / 100 / 256, 1e-9))), max(sel_lo, -31), min(sel_hi, 31)))
    t_lo = 256 * 2.0 ** lo_sel
    cfg: dict[str, Any] = {"le_function": s["le_function"], "lo_index_select": lo_sel}
    if s["le_function"] == "linear":
        le_sel = int(np.clip(round(math.log2(max(span * s["le_span_pct"] / 100 / 64, 1e-9))), max(sel_lo, -31), min(sel_hi, 31)))
        cfg.update(le_index_select=le_sel, le_index_offset=0)
        t_le = 64 * 2.0 ** le_sel
    else:
        mode = s["le_exp_offset"]
        if mode == "top_in_range":
            k = max(int(round(math.log2(max(span * s["le_span_pct"] / 100, 1)))), 0)
            eo = k - 64
        elif mode == "low":
            eo = int(rng.integers(0, 4))
        else:
            eo = int(s["le_index_offset"])
        cfg.update(le_index_offset=eo, le_index_select=0)
        t_le = 2.0 ** min(eo + 64, 62)
    layout = s["layout"]
    if layout == "overlap":
        lo_start = lo_v + rng.uniform(0, 1) * (span - t_lo) if t_lo < span else lo_v - rng.uniform(0, 1) * (t_lo - span)
        le_start = lo_start + rng.uniform(-min(t_le, span), min(t_lo, span))
    elif layout == "disjoint":
        gap = span * rng.uniform(0.05, 0.3)
        first = lo_v + span * rng.uniform(0.0, 0.25)
        if rng.random() < 0.5:  # LO below LE: between them LO overflows and LE underflows
            lo_start = first
            le_start = lo_start + t_lo + gap
        else:  # LE below LO (LE must end: exponent tables never do unless top_in_range/random)
            le_start = first
            lo_start = le_start + min(t_le, 4 * span) + gap
    else:
        lo_start = rng.uniform(lo_v - t_lo, hi_v)
        le_start = rng.uniform(lo_v - min(t_le, span), hi_v)
    lo_start, le_start = (int(np.clip(round(x), -bound - 1, bound)) for x in (lo_start, le_start))
    cfg["lo_start"], cfg["le_start"] = lo_start, le_start
    cfg["lo_end"] = int(np.clip(lo_start + t_lo, -bound - 1, bound))
    cfg["le_end"] = int(np.clip(le_start + t_le, -bound - 1, bound))
    for t in ("le", "lo"):
        for side in ("uflow", "oflow"):
            cfg[f"{t}_slope_{side}_scale"] = int(s.draw("slope_scale"))
            cfg[f"{t}_slope_{side}_shift"] = int(s.draw("slope_shift"))
    for prio in ("uflow_priority", "oflow_priority", "hybrid_priority"):
        cfg[prio] = s[prio]
    return cfg


# ---- units -------------------------------------------------------------------------------------------------


Capture = Callable[[Draft], dict[str, list[dict[str, Any]]]]


def _cvt_draft_placeholder(d: Draft, name: str) -> None:
    d.convertors[name] = {"offset": 0, "scale": 1, "shift": 0}


def gen_sdp_lut(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = _Mem()
    geo, _ = _sdp_io(d, s, prof, mem)
    m = int(s["bs_mul"])
    d.registers += [_reg("SDP.D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=1, BS_ALU_ALGO=0, BS_MUL_BYPASS=0,
                         BS_MUL_PRELU=0, BS_RELU_BYPASS=1),
                    _reg("SDP.D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=0),
                    _reg("SDP.D_DP_BS_MUL_SRC_VALUE", BS_MUL_OPERAND=m)]
    _bypass(d, "BN")
    d.registers.append(_reg("SDP.D_DP_EW_CFG", EW_BYPASS=0, EW_ALU_BYPASS=1, EW_ALU_ALGO=0, EW_MUL_BYPASS=1,
                            EW_MUL_PRELU=0, EW_LUT_BYPASS=0))
    _rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
    cfg = _place_lut(s, -128 * m, 127 * m, cdp=False)
    d.lut = {"unit": "SDP", "config": cfg}
    d.lut_tables = _tables(s)
    _cvt_draft_placeholder(d, "sdp_out")
    ev = capture(d)
    d.convertors["sdp_out"] = _pick_cvt(s, ev["sdp_out"][0]["x"], mode=s["cvt"], shift=s["cvt_shift"])
    d.description = (f"fuzz sdp-lut: LE {cfg['le_function']}, priorities {cfg['uflow_priority']}/{cfg['oflow_priority']}/"
                     f"{cfg['hybrid_priority']}, layout {s['layout']}, BS MUL x{m}, cube {geo.c}x{geo.h}x{geo.w}")
    return d


def _operand_input(d: Draft, s: Sampler, mem: _Mem, prof: HardwareProfile, geo: _Geo, name: str, lo: int, hi: int,
                   bpe: int) -> tuple[int, int, int, bool, int]:  # fmt: skip
    """A memory operand (per channel or per element) of ``bpe`` bytes; returns (addr, line, surf, per_element)."""
    atom = prof.atom_bytes
    per_element = s.draw("op_mode") == "element"
    dt = np.int16 if bpe == 2 else np.int8
    port = s.draw("op_port")
    if per_element:
        arr = s.rng.integers(lo, hi + 1, size=(geo.c, geo.h, geo.w)).astype(dt)
        params = {"atom_bytes": bpe * atom}
        size = packed_size("nvdla.feature", arr.shape, np.dtype(dt), params)
        meta = {"layout": "nvdla.feature", "params": params, "shape": [geo.c, geo.h, geo.w]}
        ls, ss = geo.w * bpe * atom, geo.w * geo.h * bpe * atom
    else:
        cpad = -(-geo.c // atom) * atom
        arr = s.rng.integers(lo, hi + 1, size=(cpad,)).astype(dt)
        size = arr.nbytes
        meta = {"layout": "raw", "params": {}, "shape": [cpad]}
        # a per-channel operand is a packed 1x1xC cube: the RTL ignores its strides (1x1 pack
        # mode), the C model asserts SURFACE_STRIDE == atom * bytes (cmod/sdp/NV_NVDLA_sdp.cpp:392)
        ls = ss = atom * bpe
    addr = mem.alloc(PORTS[port], size)
    d.inputs.append(({"name": name, **meta, "dtype": np.dtype(dt).name, "address": Hex(addr), "port": PORTS[port]}, arr))
    return addr, ls, ss, per_element, RAM_TYPE[port]


def gen_sdp_bsbn(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = _Mem()
    geo, _ = _sdp_io(d, s, prof, mem)
    desc = []
    for _k, (st, dma) in enumerate((("BS", "BRDMA"), ("BN", "NRDMA"))):
        if st == "BN" and not s["bn_on"]:
            _bypass(d, "BN")
            _rdma_off(d, "NRDMA")
            continue
        alu, mul, relu = s.draw("alu"), s.draw("mul"), int(s.draw("relu"))
        srcs = {"ALU": s.draw("alu_src") if alu != "off" else "reg", "MUL": s.draw("mul_src") if mul != "off" else "reg"}
        if srcs["ALU"] == "mem" and srcs["MUL"] == "mem":
            srcs["MUL"] = "reg"  # DATA_USE BOTH (interleaved operands) is not generated
        algo = {"max": 0, "min": 1, "sum": 2}.get(alu, 0)
        d.registers.append(_reg(f"SDP.D_DP_{st}_CFG", **{
            f"{st}_BYPASS": 0, f"{st}_ALU_BYPASS": int(alu == "off"), f"{st}_ALU_ALGO": algo,
            f"{st}_MUL_BYPASS": int(mul == "off"), f"{st}_MUL_PRELU": int(mul == "prelu"), f"{st}_RELU_BYPASS": int(not relu)}))
        d.registers += [
            _reg(f"SDP.D_DP_{st}_ALU_CFG", **{f"{st}_ALU_SRC": int(srcs["ALU"] == "mem"),
                                             f"{st}_ALU_SHIFT_VALUE": int(s.draw("alu_shift"))}),
            _reg(f"SDP.D_DP_{st}_ALU_SRC_VALUE", **{f"{st}_ALU_OPERAND": int(s.draw("alu_operand")) & 0xFFFF}),
            _reg(f"SDP.D_DP_{st}_MUL_CFG", **{f"{st}_MUL_SRC": int(srcs["MUL"] == "mem"),
                                             f"{st}_MUL_SHIFT_VALUE": int(s.draw("mul_shift"))}),
            _reg(f"SDP.D_DP_{st}_MUL_SRC_VALUE", **{f"{st}_MUL_OPERAND": int(s.draw("mul_operand")) & 0xFFFF}),
        ]
        memk = [kk for kk in ("ALU", "MUL") if srcs[kk] == "mem"]
        desc.append(f"{st} alu {alu} mul {mul}{' relu' if relu else ''} ({'/'.join(memk) or 'reg'} operands)")
        if not memk:
            _rdma_off(d, dma)
            continue
        kind = memk[0]
        spec = s.c.fields.get("alu_operand" if kind == "ALU" else "mul_operand")
        lo, hi = (spec.lo, spec.hi) if spec is not None and spec.kind == "range" else (-2000, 2000)
        addr, ls, ss, pe, rt = _operand_input(d, s, mem, prof, geo, f"{st.lower()}_{kind.lower()}", lo, hi, 2)
        d.registers += [
            _reg(f"SDP_RDMA.D_{dma}_CFG", **{f"{dma}_DISABLE": 0, f"{dma}_DATA_USE": 1 if kind == "ALU" else 0,
                                            f"{dma}_DATA_SIZE": 1, f"{dma}_DATA_MODE": int(pe), f"{dma}_RAM_TYPE": rt}),
            _reg(f"SDP_RDMA.D_{st}_BASE_ADDR_LOW", **{f"{st}_BASE_ADDR_LOW": addr}),
            _reg(f"SDP_RDMA.D_{st}_BASE_ADDR_HIGH", **{f"{st}_BASE_ADDR_HIGH": 0}),
            _reg(f"SDP_RDMA.D_{st}_LINE_STRIDE", **{f"{st}_LINE_STRIDE": ls}),
            _reg(f"SDP_RDMA.D_{st}_SURFACE_STRIDE", **{f"{st}_SURFACE_STRIDE": ss}),
        ]
    _bypass(d, "EW")
    _rdma_off(d, "ERDMA")
    _cvt_draft_placeholder(d, "sdp_out")
    ev = capture(d)
    d.convertors["sdp_out"] = _pick_cvt(s, ev["sdp_out"][0]["x"], mode=s["cvt"], shift=s["cvt_shift"])
    d.description = f"fuzz sdp-bsbn: {'; '.join(desc)}, cube {geo.c}x{geo.h}x{geo.w}"
    return d


def gen_sdp_ew(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = _Mem()
    geo, _ = _sdp_io(d, s, prof, mem)
    _bypass(d, "BS", "BN")
    _rdma_off(d, "BRDMA", "NRDMA")
    alu, mul = s["ew_alu"], s["ew_mul"]
    srcs = {"ALU": s["ew_alu_src"] if alu != "off" else "reg", "MUL": s["ew_mul_src"] if mul != "off" else "reg"}
    if srcs["ALU"] == "mem" and srcs["MUL"] == "mem":
        srcs["MUL"] = "reg"
    eql = alu == "eql"
    lut_on = bool(s["lut"]) and not eql
    cfg_fields = dict(EW_BYPASS=0, EW_ALU_BYPASS=int(alu == "off"),
                      EW_ALU_ALGO={"max": 0, "min": 1, "sum": 2, "eql": 3}.get(alu, 0),
                      EW_MUL_BYPASS=int(mul == "off"), EW_MUL_PRELU=int(mul == "prelu"), EW_LUT_BYPASS=1)
    d.registers += [
        _reg("SDP.D_DP_EW_ALU_CFG", EW_ALU_SRC=int(srcs["ALU"] == "mem"), EW_ALU_CVT_BYPASS=int(s["cvt_bypass"])),
        _reg("SDP.D_DP_EW_ALU_SRC_VALUE", EW_ALU_OPERAND=int(s["alu_operand"]) & 0xFFFFFFFF),
        _reg("SDP.D_DP_EW_MUL_CFG", EW_MUL_SRC=int(srcs["MUL"] == "mem"), EW_MUL_CVT_BYPASS=int(s["cvt_bypass"])),
        _reg("SDP.D_DP_EW_MUL_SRC_VALUE", EW_MUL_OPERAND=int(s["mul_operand"]) & 0xFFFFFFFF),
        _reg("SDP.D_DP_EW_TRUNCATE_VALUE", EW_TRUNCATE=int(s["ew_truncate"])),
    ]
    memk = [k for k in ("ALU", "MUL") if srcs[k] == "mem"]
    if memk:
        kind = memk[0]
        bpe = int(s["op_size"])
        lo, hi = (-128, 127) if bpe == 1 else (-32768, 32767)
        addr, ls, ss, pe, rt = _operand_input(d, s, mem, prof, geo, f"ew_{kind.lower()}", lo, hi, bpe)
        d.registers += [
            _reg("SDP_RDMA.D_ERDMA_CFG", ERDMA_DISABLE=0, ERDMA_DATA_USE=1 if kind == "ALU" else 0,
                 ERDMA_DATA_SIZE=int(bpe == 2), ERDMA_DATA_MODE=int(pe), ERDMA_RAM_TYPE=rt),
            _reg("SDP_RDMA.D_EW_BASE_ADDR_LOW", EW_BASE_ADDR_LOW=addr), _reg("SDP_RDMA.D_EW_BASE_ADDR_HIGH", EW_BASE_ADDR_HIGH=0),
            _reg("SDP_RDMA.D_EW_LINE_STRIDE", EW_LINE_STRIDE=ls), _reg("SDP_RDMA.D_EW_SURFACE_STRIDE", EW_SURFACE_STRIDE=ss),
        ]
        d.convertors[f"sdp_ew_{kind.lower()}"] = {"offset": int(s["op_cvt_offset"]), "scale": int(s["op_cvt_scale"]),
                                                   "shift": int(s["op_cvt_truncate"])}
    else:
        _rdma_off(d, "ERDMA")
    d.registers.append(_reg("SDP.D_DP_EW_CFG", **cfg_fields))
    if eql:  # EQL: the convertor must pass values through (cmod asserts offset 0, scale 1, shift 0)
        d.convertors["sdp_out"] = {"offset": 0, "scale": 1, "shift": 0}
    else:
        _cvt_draft_placeholder(d, "sdp_out")
        ev = capture(d)
        x = ev["sdp_out"][0]["x"]
        if lut_on:
            lo_v, hi_v = (float(v) for v in np.percentile(x, [2, 98]))
            cfg = _place_lut(s, lo_v, max(hi_v, lo_v + 64), cdp=False)
            d.lut = {"unit": "SDP", "config": cfg}
            d.lut_tables = _tables(s)
            d.registers[-1]["fields"]["EW_LUT_BYPASS"] = 0
            x = capture(d)["sdp_out"][0]["x"]
        d.convertors["sdp_out"] = _pick_cvt(s, x, mode=s["cvt"], shift=s["cvt_shift"])
    d.description = (f"fuzz sdp-ew: alu {alu} mul {mul} ({'/'.join(memk) or 'reg'} operands){' + LUT' if lut_on else ''}, "
                     f"cube {geo.c}x{geo.h}x{geo.w}")
    return d


def gen_sdp_cvt(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    d = Draft(unit="SDP", profile=prof.name, statistics=True)
    mem = _Mem()
    geo, x = _sdp_io(d, s, prof, mem)
    _bypass(d, "BS", "BN", "EW")
    _rdma_off(d, "BRDMA", "NRDMA", "ERDMA")
    d.convertors["sdp_out"] = _pick_cvt(s, x.astype(np.int64), mode=s["cvt"], shift=s["cvt_shift"])
    c = d.convertors["sdp_out"]
    d.description = f"fuzz sdp-cvt: offset/scale/shift {c['offset']}/{c['scale']}/{c['shift']}, cube {geo.c}x{geo.h}x{geo.w}"
    return d


def gen_cdp_lrn(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    """CDP LRN, INT8 or (``precision`` int16, profiles with INT16: the ``cdp-int16`` unit) INT16:
    window 3..9, SQSUM/MUL bypass, the input convertor (fit / saturate / random), LUT tables
    aimed at the layer's square sums, the output convertor fitted to the LUT products. INT16
    widths (``refmodel/cdp.py``): 16-bit DATIN offset, 17-bit converted input, square sums up
    to 2^37, 32-bit DATOUT offset, INT16 output."""
    i16 = s["precision"] == "int16"
    dtype = "int16" if i16 else "int8"
    d = Draft(unit="CDP", profile=prof.name, statistics=True)
    if i16:
        d.features = tuple(sorted(set(d.features) | {"int16"}))
    mem = _Mem()
    atom = prof.atom_bytes
    geo = _geometry(s, atom)
    x = _data(s, (geo.c, geo.h, geo.w), np.int16 if i16 else np.int8)
    src = _feature(d, mem, "src", x, s["src_port"], atom, geo, dtype=dtype)
    dst = _feature(d, mem, "dst", (geo.c, geo.h, geo.w), s["dst_port"], atom, geo, output=True, dtype=dtype)
    nl = int(s["normalz_len"])
    d.registers += [
        _reg("CDP_RDMA.D_DATA_CUBE_WIDTH", WIDTH=geo.w - 1), _reg("CDP_RDMA.D_DATA_CUBE_HEIGHT", HEIGHT=geo.h - 1),
        _reg("CDP_RDMA.D_DATA_CUBE_CHANNEL", CHANNEL=geo.c - 1),
        _reg("CDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src), _reg("CDP_RDMA.D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
        _reg("CDP_RDMA.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=geo.line),
        _reg("CDP_RDMA.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=geo.surf),
        _reg("CDP_RDMA.D_DATA_FORMAT", INPUT_DATA=int(i16)), _reg("CDP.D_DATA_FORMAT", INPUT_DATA_TYPE=int(i16)),
        _reg("CDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst), _reg("CDP.D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
        _reg("CDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=geo.line), _reg("CDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=geo.surf),
        _reg("CDP.D_LRN_CFG", NORMALZ_LEN=nl),
        _reg("CDP.D_FUNC_BYPASS", SQSUM_BYPASS=int(s["sqsum_bypass"]), MUL_BYPASS=int(s["mul_bypass"])),
        _reg("CDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=RAM_TYPE[s["src_port"]]),
        _reg("CDP.D_DST_DMA_CFG", DST_RAM_TYPE=RAM_TYPE[s["dst_port"]]),
    ]
    rng = s.rng
    mode = s["cvt_in"]
    off_max = 32767 if i16 else 127  # DATIN_OFFSET: 8 bits used at INT8, 16 at INT16
    if mode == "fit":
        o = 512 if i16 else 8
        cin = {"offset": int(rng.integers(-o, o + 1)), "scale": int(rng.integers(1, 4)), "shift": int(rng.integers(0, 3))}
    elif mode == "saturate":
        cin = {"offset": int(rng.integers(-off_max - 1, off_max + 1)),
               "scale": int(rng.integers(8, 400)) * (1 if rng.random() < 0.7 else -1), "shift": int(rng.integers(0, 3))}
    else:
        cin = {"offset": int(rng.integers(-off_max - 1, off_max + 1)), "scale": int(rng.integers(-32768, 32768)),
               "shift": int(s["cvt_in_shift"])}
    d.convertors["cdp_in"] = cin
    _cvt_draft_placeholder(d, "cdp_out")
    # aim the tables at this layer's square sums (a first reference run with any LUT)
    d.lut = {"unit": "CDP", "config": {"le_function": "linear", "lo_index_select": 0, "le_index_select": 0}}
    d.lut_tables = {"le": np.zeros(65, np.int16), "lo": np.zeros(257, np.int16)}
    sums = capture(d)["cdp"][0]["s"]
    lanes = np.arange(sums.shape[-1]) < geo.c
    lo_v, hi_v = (float(v) for v in np.percentile(sums[..., lanes], [2, 98]))
    cfg = _place_lut(s, lo_v, max(hi_v, lo_v + 64), cdp=True, bits=16 if i16 else 8)
    d.lut = {"unit": "CDP", "config": cfg}
    d.lut_tables = _tables(s)
    t = capture(d)["cdp"][0]["t"]
    d.convertors["cdp_out"] = _pick_cvt(s, t, mode=s["cvt"], shift=s["cvt_shift"], offset_bits=32 if i16 else 25,
                                        out_max=32767 if i16 else 127)
    d.description = (f"fuzz cdp-lrn{' int16' if i16 else ''}: window {2 * nl + 3}{' sqsum-bypass' if s['sqsum_bypass'] else ''}"
                     f"{' mul-bypass' if s['mul_bypass'] else ''}, LE {cfg['le_function']}, priorities "
                     f"{cfg['uflow_priority']}/{cfg['oflow_priority']}/{cfg['hybrid_priority']}, layout {s['layout']}, "
                     f"cube {geo.c}x{geo.h}x{geo.w}")
    return d


GENERATORS: dict[str, Callable[[Sampler, HardwareProfile, Capture], Draft]] = {
    "sdp-lut": gen_sdp_lut, "sdp-bsbn": gen_sdp_bsbn, "sdp-ew": gen_sdp_ew, "sdp-cvt": gen_sdp_cvt,
    "cdp-lrn": gen_cdp_lrn,
}


def register_unit(name: str, *, schema: dict[str, Any], needs: tuple[str, ...], groups: tuple[str, ...],
                  generator: Callable[[Sampler, HardwareProfile, Capture], Draft]) -> None:  # fmt: skip
    """Add a fuzz unit: its legal space (``schema``: :class:`IntF` / :class:`EnumF` per field),
    the profile features it cannot run without (``needs``: the unit is refused on a profile
    lacking one, :func:`unit_refusal`), the coverage groups it aims at and its generator.
    Optional features narrow the draw instead: ``EnumF(..., needs={value: feature})`` drops the
    value on a profile without the feature (see "what a profile has" above). The unit's shipped
    constraints are ``constraints/<name>.yaml``. Units live in ``harness/fuzzgen/<module>.py``,
    each calling this at import."""
    if name in SCHEMAS:
        raise ValueError(f"fuzz unit {name!r} registered twice")
    SCHEMAS[name] = schema
    UNIT_NEEDS[name] = tuple(needs)
    UNIT_GROUPS[name] = tuple(groups)
    GENERATORS[name] = generator


# ---- building a case ---------------------------------------------------------------------------------------


class _Capture:
    def __init__(self) -> None:
        self.events: dict[str, list[dict[str, Any]]] = {}

    def event(self, name: str, **data: Any) -> None:
        if name != "layer":
            self.events.setdefault(name, []).append({k: (np.array(v) if isinstance(v, np.ndarray) else v)
                                                     for k, v in data.items()})


def case_name(unit: str, seed: int, index: int) -> str:
    return f"fuzz-{unit}-s{seed}-{index:05d}"


def _provenance(c: Constraints, seed: int, index: int, semantics: str) -> dict[str, Any]:
    note = f"replay: nvdla-hil fuzz --unit {c.unit} --profile {c.profile.name} --seed {seed} --first {index} --count 1"
    files = [s for s in c.sources[1:] if s != "--set"]
    if files:
        note += "".join(f" --constraints {f}" for f in files)
    if c.overrides:
        note += "".join(f" --set {shlex.quote(o)}" for o in c.overrides)  # a shell-ready replay line
    return {"generator": "nvdla-hil fuzz", "suite": f"fuzz:{c.unit}", "seed": seed, "index": index,
            "model_version": model_version(), "semantics": semantics, "note": note}


def _field_values(d: Draft) -> Draft:
    """Generators give addresses and strides in bytes; a register map may declare them as the
    upper bits only (nv_full's v1 map: bits [31:5], 32-byte units), so each byte value is
    shifted by its field's lsb (no-op for the v2 maps) in a copy of the draft. A value that
    is not aligned to the field's unit is a generator bug, named."""
    import copy

    assert d.profile is not None, "a fuzz draft names its profile"
    rm = load_profile(d.profile).regmap
    out = copy.copy(d)
    out.registers = []
    for r in d.registers:
        blk, reg = r["reg"].split(".", 1)
        fl = dict(r["fields"])
        for fname, v in fl.items():
            if "ADDR_LOW" in fname or fname.endswith(("LINE_STRIDE", "SURFACE_STRIDE")):
                lsb = rm.register(blk, reg).field(fname).lsb
                if lsb:
                    if int(v) % (1 << lsb):
                        raise ValueError(f"{r['reg']}.{fname} = {int(v):#x} is not {1 << lsb}-byte aligned")
                    fl[fname] = Hex(int(v) >> lsb) if "ADDR_LOW" in fname else int(v) >> lsb
        out.registers.append({**r, "fields": fl})
    return out


def _run_reference(d: Draft, name: str, prov: dict[str, Any], work: Path, semantics: str, sink: Any):
    from .targets.model import ModelTarget

    man, blobs = _manifest_layer(name, _field_values(d), prov, None)
    if work.exists():
        shutil.rmtree(work)
    write_case(work, man, blobs)
    case = load_case(work)
    with ModelTarget(case.profile or "nv_small", semantics=semantics, coverage=sink if sink is not None else False) as t:
        outputs, stats = execute_case(case, t)
    shutil.rmtree(work)
    st = {k: int(v) for k, v in stats.counters().items()} if stats is not None else None
    return {"outputs": outputs, "statistics": st}


def generate(c: Constraints, seed: int, index: int, work: Path, *, semantics: str = "rtl",
             coverage: covmod.Coverage | None = None) -> Path:  # fmt: skip
    """Draw case ``index`` of ``seed`` under ``c``, compute its golden on the reference model
    (feeding ``coverage``) and write the packed case into ``work/<name>``; returns the folder."""
    rng = rng_for(seed, index)
    s = Sampler(c, rng)
    name = case_name(c.unit, seed, index)
    prov = _provenance(c, seed, index, semantics)
    folder = Path(work) / name

    def capture(d: Draft) -> dict[str, list[dict[str, Any]]]:
        cap = _Capture()
        _run_reference(d, name, prov, folder, semantics, cap)
        return cap.events

    d = GENERATORS[c.unit](s, c.profile, capture)
    golden = _run_reference(d, name, prov, folder, semantics, coverage)
    man, blobs = _manifest_layer(name, _field_values(d), prov, golden)
    write_case(folder, man, blobs)
    load_case(folder)
    return folder


# ---- running -----------------------------------------------------------------------------------------------


@dataclass
class FuzzCase:
    index: int
    name: str
    status: str  # passed / failed / error / skipped
    line: str
    seconds: float
    saved: str | None = None


@dataclass
class FuzzReport:
    unit: str
    profile: str
    seed: int
    cases: list[FuzzCase] = field(default_factory=list)
    coverage: covmod.Coverage = field(default_factory=covmod.Coverage)
    seconds: float = 0.0
    aimed: list[str] = field(default_factory=list)  # reachable bins the unit aims at

    @property
    def failed(self) -> list[FuzzCase]:
        return [c for c in self.cases if c.status in ("failed", "error")]

    def empty_bins(self) -> list[str]:
        return self.coverage.empty(self.aimed)


def open_dut(spec: Any, model_bugs: list[str] | None = None) -> Any:
    """The device under test for ``spec`` (a TargetSpec). The model target as the DUT never
    feeds coverage (the reference run does); ``model_bugs`` injects faults into it only."""
    if spec.kind == "model":
        from .targets.model import ModelTarget

        return ModelTarget(spec.profile, semantics=spec.semantics, bugs=model_bugs or None, coverage=False)
    from .targets import open_target

    return open_target(spec)


def _fail_line(c: Constraints, seed: int, index: int, res: Any) -> str:
    parts = []
    for chk in res.checks:
        if not chk.passed:
            parts.append(f"{chk.name}: {chk.message}")
    if res.statistics is not None and not res.statistics.passed:
        parts.append("statistics: " + "; ".join(res.statistics.format().splitlines()[:3]))
    if not parts:
        parts.append(res.message)
    return f"seed={seed} case={index}: " + " | ".join(parts)


def _keep_case(folder: Path, dest: Path, res: Any, dut: Any, agreed: bool) -> None:
    """Save ``folder`` as a packed vector under ``dest`` whose golden is what the DUT computed
    (its outputs and statistics counters), the provenance naming the DUT and whether the
    reference model agreed. This is how bundled suites get goldens from NVDLA's C model."""
    from ..drivers import yamlstrict

    man = yamlstrict.load((folder / "case.yaml").read_text(encoding="utf-8"), str(folder / "case.yaml"))
    blobs: dict[str, bytes] = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "case.yaml"}
    for o in man["outputs"]:
        blobs[o["expected"]] = np.ascontiguousarray(res.outputs[o["name"]]).tobytes()
    if man.get("statistics") is not None and res.actual_statistics is not None:
        from ..drivers.precision import golden_counters
        from .vectors import golden_source_of

        man["statistics"] = golden_counters(res.actual_statistics, golden_source_of(dut)["kind"])
    describe = getattr(dut, "describe", None)
    who = describe() if describe else type(dut).__name__
    prov = dict(man["provenance"])
    prov["generator"] = "nvdla-hil fuzz --keep"
    prov["note"] = (f"{prov.get('note', '')}; golden: the outputs of {who}; the reference model "
                    f"{'agreed bit for bit' if agreed else 'DISAGREED'} when it was kept").lstrip("; ")
    man["provenance"] = prov
    if dest.exists():
        shutil.rmtree(dest)
    write_case(dest, man, blobs, dut=dut)  # golden_source: derived from the DUT (vectors.golden_source_of)
    load_case(dest)  # what we wrote must load


def run_one(c: Constraints, spec: Any, seed: int, index: int, out: Path | None, *, semantics: str = "rtl",
            model_bugs: list[str] | None = None, dut: Any = None, keep: Path | None = None,
            ) -> tuple[FuzzCase, dict[str, Any]]:  # fmt: skip
    """Generate, run on the DUT, compare; returns the case record and the reference coverage (JSON).
    ``dut`` is an open target kept across cases (else one is opened for this case); ``keep``
    saves the case with the DUT's outputs as its golden (:func:`_keep_case`)."""
    from .targets import layer_timeout

    t0 = time.monotonic()
    cov = covmod.Coverage()
    name = case_name(c.unit, seed, index)
    with tempfile.TemporaryDirectory(prefix="nvdla-fuzz-") as tmp:
        try:
            folder = generate(c, seed, index, Path(tmp), semantics=semantics, coverage=cov)
        except Exception as e:  # noqa: BLE001 - a generator bug must not stop the campaign
            return FuzzCase(index, name, "error", f"seed={seed} case={index}: generation failed: "
                            f"{type(e).__name__}: {e}", time.monotonic() - t0), cov.to_json()
        case = load_case(folder)
        dspec = spec.with_profile(c.profile.name)
        kind = "model" if dspec.kind == "model" else "rtl"
        try:
            if dut is not None:
                res = run_case(case, dut, target_kind=kind, timeout=layer_timeout(dut))
            else:
                with open_dut(dspec, model_bugs) as t:
                    res = run_case(case, t, target_kind=kind, timeout=layer_timeout(t))
        except Exception as e:  # noqa: BLE001 - a target that cannot open is an error of this case
            res = None
            status, line = "error", f"seed={seed} case={index}: {type(e).__name__}: {e}"
        else:
            assert res is not None
            status = res.status
            line = f"seed={seed} case={index}: {res.status}" if res.passed else (
                _fail_line(c, seed, index, res) if res.status == "failed" else f"seed={seed} case={index}: {res.message}")
        saved = None
        if status in ("failed", "error") and out is not None:
            dest = Path(out) / name
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(folder, dest)
            saved = str(dest)
        if keep is not None and res is not None and status in ("passed", "failed") and res.outputs:
            _keep_case(folder, Path(keep) / name, res, dut, status == "passed")
    return FuzzCase(index, name, status, line, time.monotonic() - t0, saved), cov.to_json()


def _run_chunk(c: Constraints, spec: Any, seed: int, idx: list[int], out: Path | None, *, semantics: str,
               model_bugs: list[str] | None, keep: Path | None) -> list[tuple[FuzzCase, dict[str, Any]]]:  # fmt: skip
    """Run cases ``idx`` on one DUT opened for the chunk (a simulator or C model starts once, not
    per case). Every case programs the registers it uses and the runner poisons its outputs, so
    what an earlier case left behind can make a case fail, never pass; the DUT is reset
    between cases all the same, and a DUT that dies is reopened for the next case."""
    dspec = spec.with_profile(c.profile.name)
    results: list[tuple[FuzzCase, dict[str, Any]]] = []
    dut = None
    fresh = True
    try:
        for k in idx:
            if dut is None:
                try:
                    dut = open_dut(dspec, model_bugs)
                    dut.__enter__()
                    fresh = True
                except Exception as e:  # noqa: BLE001 - report it against the case, try again for the next
                    dut = None
                    results.append((FuzzCase(k, case_name(c.unit, seed, k), "error",
                                             f"seed={seed} case={k}: cannot open the target: {type(e).__name__}: {e}", 0.0), {}))
                    continue
            if not fresh:
                # a fresh start for every case: what a layer leaves in the status registers (the
                # C model's counters that a later layer does not update) must not leak into the next
                dut.reset()
            fresh = False
            fc, cj = run_one(c, spec, seed, k, out, semantics=semantics, model_bugs=model_bugs, dut=dut, keep=keep)
            results.append((fc, cj))
            if fc.status == "error":  # the DUT may be gone: start a fresh one
                with contextlib.suppress(Exception):
                    dut.__exit__(None, None, None)
                dut = None
    finally:
        if dut is not None:
            dut.__exit__(None, None, None)
    return results


def _worker(args: tuple) -> list[tuple[FuzzCase, dict[str, Any]]]:
    unit, profile, files, sets, spec, seed, idx, out, semantics, bugs, keep = args
    c = load_constraints(unit, profile=profile, files=files, sets=sets)
    return _run_chunk(c, spec, seed, idx, Path(out) if out else None, semantics=semantics, model_bugs=bugs,
                      keep=Path(keep) if keep else None)


def run_fuzz(unit: str, spec: Any, *, count: int = 50, seed: int = 1, first: int = 0, profile: str | None = None,
             constraint_files: Iterable[str] = (), sets: Iterable[str] = (), out: str | Path | None = None,
             until_covered: bool = False, budget: int = 1000, jobs: int = 1, semantics: str = "rtl",
             model_bugs: list[str] | None = None, log: Callable[[str], None] | None = None,
             keep: str | Path | None = None) -> FuzzReport:  # fmt: skip
    """Run ``count`` cases (``first`` .. ``first+count-1``), or with ``until_covered`` up to
    ``budget`` cases until every bin the unit aims at is hit. ``jobs`` > 1 runs cases in worker
    processes (results and coverage merged in case order); each worker (or this process) keeps
    its DUT open across a chunk of cases. ``keep`` saves every case that ran, golden = the DUT's
    outputs."""
    files, sets = list(constraint_files), list(sets)
    c = load_constraints(unit, profile=profile, files=files, sets=sets)
    rep = FuzzReport(unit, c.profile.name, seed)
    rep.aimed = covmod.reachable([c.profile], UNIT_GROUPS[unit])
    t0 = time.monotonic()
    limit = budget if until_covered else count
    batch = 10 * max(jobs, 1)  # cases per round: each worker opens its DUT once per round
    pool = None
    if jobs > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))
    try:
        i = 0
        while i < limit:
            idx = list(range(first + i, first + min(i + batch, limit)))
            if pool is None:
                results = _run_chunk(c, spec, seed, idx, Path(out) if out else None, semantics=semantics,
                                     model_bugs=model_bugs, keep=Path(keep) if keep else None)
            else:
                per = -(-len(idx) // jobs)
                args = [(unit, profile, files, sets, spec, seed, idx[j:j + per], str(out) if out else None, semantics,
                         model_bugs, str(keep) if keep else None) for j in range(0, len(idx), per)]
                results = [r for chunk in pool.map(_worker, args) for r in chunk]
            for fc, cj in results:
                rep.cases.append(fc)
                if cj:  # a case whose target could not open has no coverage (and says why)
                    rep.coverage.merge(cj)
                if log is not None and fc.status != "passed":
                    log(f"{fc.status.upper()} {unit} {fc.line}" + (f" -> saved {fc.saved}" if fc.saved else ""))
            i += len(idx)
            if until_covered and not rep.empty_bins():
                break
    finally:
        if pool is not None:
            pool.shutdown()
    rep.seconds = time.monotonic() - t0
    return rep


from . import fuzzgen as _fuzzgen  # noqa: E402,F401 - registers the units of harness/fuzzgen/
