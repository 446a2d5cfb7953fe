"""Constraints of a fuzz unit and drawing from them: the shipped ``constraints/<unit>.yaml``,
then constraint files, then ``--set`` items, each checked against the unit's schema and the
profile (a constraint can only narrow or reweight the legal space; anything else is a
:class:`~.legal.ConstraintError` naming the file and key); :class:`Sampler` draws a case's values
from its own random stream."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers.profiles import HardwareProfile, load_profile
from .legal import (
    ConstraintError,
    EnumF,
    IntF,
    UnitSpec,
    UnitUnavailable,
    allowed,
    feature_text,
    lacks,
    refusal,
)

CONSTRAINTS_DIR = Path(__file__).with_name("constraints")


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
    schema: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the unit's legal space

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
            why = f": every choice needs the {' or '.join(map(feature_text, missing))}, which {prof.name} lacks" if missing else ""
            raise ConstraintError(f"{where}.choices: nothing left to choose{why}")
    if "value" in raw:
        spec.values = [_coerce(leg, raw["value"], f"{where}.value")]
        missing = lacks(prof, getattr(leg, "needs", {}).get(spec.values[0]))
        if missing:
            raise ConstraintError(f"{where}.value: {spec.values[0]} needs the {', '.join(map(feature_text, missing))}, "
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
                                  f"{', '.join(map(feature_text, lacks(prof, leg.needs.get(spec.default))))}, "
                                  f"which {prof.name} lacks")
        spec.default = ok[0]  # the schema's default narrowed to what the profile has
    return spec


def _parse_doc(unit_spec: UnitSpec, doc: Any, source: str, prof_override: str | None,
               base: Constraints | None) -> Constraints:  # fmt: skip
    unit = unit_spec.name
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
    why = refusal(unit_spec, prof)
    if why:
        raise UnitUnavailable(why)
    schema = unit_spec.schema
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
    return Constraints(unit, prof, {k: out[k] for k in order}, (base.sources if base else []) + [source], schema=schema)


def _read_yaml(path: Path) -> Any:
    from ...drivers import yamlstrict

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


def constraints_for(unit_spec: UnitSpec, *, profile: str | None = None, files: Iterable[str | Path] = (),
                    sets: Iterable[str] = ()) -> Constraints:  # fmt: skip
    """The shipped ``constraints/<unit>.yaml``, then each file, then each ``--set``."""
    unit = unit_spec.name
    shipped = CONSTRAINTS_DIR / f"{unit}.yaml"
    c = _parse_doc(unit_spec, _read_yaml(shipped), str(shipped), profile, None)
    for f in files:
        p = Path(f)
        c = _parse_doc(unit_spec, _read_yaml(p), str(p), profile, c)
    sets = list(sets)
    if sets:
        fl: dict[str, Any] = {}
        for s in sets:
            k, spec = parse_set(s)
            if k in c.fields and c.fields[k].when:
                spec["when"] = c.fields[k].when
                spec["default"] = c.fields[k].default
            fl[k] = spec
        c = _parse_doc(unit_spec, {"fields": fl}, "--set", profile, c)
        c.overrides = sets
    return c


# ---- sampling ----------------------------------------------------------------------------------------------


class Sampler:
    """The field values of one case, drawn under ``c`` from ``rng``; ``dut`` names the target kind
    the case is for (``model``, ``verilator``, ``cmod``, ``serial``), for units that steer clear of a
    target's known limits. Fields are drawn in the constraints' order, so a ``when`` condition
    reads the values before it (pinned ones included)."""

    def __init__(self, c: Constraints, rng: np.random.Generator, dut: str = "model",
                 pinned: dict[str, Any] | None = None) -> None:  # fmt: skip
        """``pinned``: fields that keep these values (corners of an earlier draw), the rest drawn."""
        self.c, self.rng, self.dut = c, rng, dut
        pinned = pinned or {}
        #: fields drawn at an end of their range by their ``extremes`` rate: corners drawn on purpose,
        #: where a layer may compute one value by its nature (a shift past every bit)
        self.corners: list[str] = []
        self.v: dict[str, Any] = {}
        schema = c.schema
        for name, leg in schema.items():  # fields no constraint mentions keep their default
            self.v[name] = leg.default if isinstance(leg, IntF) else leg.dflt()
            if isinstance(leg, EnumF) and lacks(c.profile, leg.needs.get(self.v[name])):
                self.v[name] = (allowed(leg, c.profile) or (self.v[name],))[0]
        for name, spec in c.fields.items():
            if name in pinned:
                self.v[name] = pinned[name]
                self.corners.append(name)
            else:
                self.v[name] = self._draw(spec, name)

    def _draw(self, spec: FieldSpec, name: str = "") -> Any:
        rng = self.rng
        if spec.when and not all(self.v.get(k) in vs or str(self.v.get(k)) in map(str, vs) for k, vs in spec.when.items()):
            return spec.default
        if spec.kind == "value":
            return spec.values[0]
        if spec.kind == "range":
            if spec.extremes and rng.random() < spec.extremes:
                if name:
                    self.corners.append(name)
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


