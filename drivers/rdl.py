"""A small reader for the SystemRDL subset NVDLA's register spec is written in, and for the
simspec ``arnvdla.uh`` header that describes the older nv_full (v1) design.

What is read (and nothing else is executed or evaluated):

* ``spec/manual/NVDLA_*.rdl`` on nvdla/hw ``master`` (the configurable "v2" design):
  ``property NAME {...};`` declarations (skipped),
  ``regfile regs_NVDLA_X { reg {...} NAME @0xOFF; }``,
  ``reg { name = "..."; enum E { A = 2'd0 {desc="..."}; };
  field { sw = rw; ... } F[msb:lsb]; F->desc="..."; }``,
  registers without ``@`` (placed after the previous one, SystemRDL rule), and the
  ``addrmap { regs_NVDLA_X NVDLA_X @0xBASE; } addrmap_NVDLA;`` that gives the block base.
  ``import FILE`` lines (in ``nvdla.rdl``) are skipped: :func:`parse_rdl_dir` reads every
  ``NVDLA_*.rdl`` file of the directory itself.
* ``cmod/include/arnvdla.uh`` on branch ``nvdlav1`` (the nv_full design has no RDL in the tree):
  ``REG_<blk>_<reg>(_) _(BLK,REG,addr,offset,...)``, ``REG_FLD_...(_) _(BLK,REG,FLD,width,msb,lsb,
  access,...)`` and ``LIST_REG_ENM_...`` enum rows. The access column is the same spec_access
  property as a bit set: R=1, W=2, T=4, O=16 (e.g. 23 = ``rwto``, 19 = ``rwo``, 22 = ``wto``;
  checked against the v2 RDL, where GLB S_INTR_SET.SDP_DONE_SET0 is ``wto``), 0 = constant.

Errors are :class:`RdlSyntaxError` naming file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .regmap import Block, Field, Register, RegisterMap, dump_yaml

__all__ = [
    "RdlSyntaxError",
    "RdlField",
    "RdlReg",
    "RdlBlock",
    "RdlSpec",
    "parse_rdl_text",
    "parse_rdl_dir",
    "parse_arnvdla_uh",
    "import_rdl",
    "import_arnvdla_uh",
    "import_checkout",
    "spec_access_of_code",
]


class RdlSyntaxError(InputError):
    """The register description (an input file of the user's checkout) could not be read; the
    message names file and line. A ``ValueError`` as before."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line


# --------------------------------------------------------------------------------------------
# In-memory model (raw facts, one per RDL construct)


@dataclass
class RdlField:
    name: str
    msb: int
    lsb: int
    props: dict[str, object] = field(default_factory=dict)
    enum: dict[str, int] = field(default_factory=dict)
    line: int = 0

    @property
    def sw(self) -> str:
        return str(self.props.get("sw", "rw"))

    @property
    def spec_access(self) -> str:
        return str(self.props.get("spec_access", ""))

    @property
    def reset(self) -> int:
        value = self.props.get("reset", 0)
        return int(value) if isinstance(value, int) else 0


@dataclass
class RdlReg:
    name: str  # instance name (the address-map name)
    offset: int
    fields: list[RdlField] = field(default_factory=list)
    props: dict[str, object] = field(default_factory=dict)
    file: str = ""
    line: int = 0


@dataclass
class RdlBlock:
    """One ``regfile`` type plus the base its ``addrmap`` instance gives it."""

    type_name: str
    regs: list[RdlReg] = field(default_factory=list)
    name: str | None = None  # instance name with NVDLA_ stripped ("SDP"), set by the addrmap
    base: int | None = None
    file: str = ""
    line: int = 0


@dataclass
class RdlSpec:
    blocks: dict[str, RdlBlock] = field(default_factory=dict)  # by block name ("SDP")
    source: str = ""


# --------------------------------------------------------------------------------------------
# Tokenizer

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*.*?\*/)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<vnum>\d+'[bBdDhHoO][0-9a-fA-F_xXzZ]+)
  | (?P<num>0[xX][0-9a-fA-F_]+|\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<arrow>->)
  | (?P<punct>[{}\[\]:;=@,.+])
    """,
    re.VERBOSE | re.DOTALL,
)

_BASES = {"b": 2, "d": 10, "h": 16, "o": 8}


@dataclass(frozen=True)
class _Tok:
    kind: str  # ident, num, string, punct
    text: str
    line: int
    value: int | str | None = None


def _tokenize(text: str, file: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos, line, n = 0, 1, len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise RdlSyntaxError(file, line, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        s = m.group()
        if kind == "ident":
            toks.append(_Tok("ident", s, line))
        elif kind == "num":
            toks.append(_Tok("num", s, line, int(s.replace("_", ""), 0)))
        elif kind == "vnum":
            width, rest = s.split("'", 1)
            digits = rest[1:].replace("_", "")
            try:
                value = int(digits, _BASES[rest[0].lower()])
            except ValueError:
                raise RdlSyntaxError(file, line, f"bad sized number {s!r}") from None
            if value >= 1 << int(width):
                raise RdlSyntaxError(file, line, f"{s!r} does not fit in {width} bits")
            toks.append(_Tok("num", s, line, value))
        elif kind == "string":
            toks.append(_Tok("string", s, line, s[1:-1]))
        elif kind in ("punct", "arrow"):
            toks.append(_Tok("punct", s, line))
        line += s.count("\n")
        pos = m.end()
    return toks


# --------------------------------------------------------------------------------------------
# Parser


class _Parser:
    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.toks = _tokenize(text, file)
        self.i = 0
        self.blocks: dict[str, RdlBlock] = {}  # by regfile type name
        self.instances: list[tuple[str, str, int, int]] = []  # (type, inst, base, line)

    # -- helpers
    def _err(self, msg: str, tok: _Tok | None = None) -> RdlSyntaxError:
        if tok is None:
            tok = self.toks[self.i] if self.i < len(self.toks) else None
        line = tok.line if tok is not None else (self.toks[-1].line if self.toks else 1)
        return RdlSyntaxError(self.file, line, msg)

    def peek(self, k: int = 0) -> _Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self._err("unexpected end of file")
        self.i += 1
        return tok

    def expect(self, text: str) -> _Tok:
        tok = self.next()
        if tok.text != text:
            raise self._err(f"expected {text!r}, found {tok.text!r}", tok)
        return tok

    def ident(self) -> _Tok:
        tok = self.next()
        if tok.kind != "ident":
            raise self._err(f"expected a name, found {tok.text!r}", tok)
        return tok

    def number(self) -> int:
        tok = self.next()
        if tok.kind != "num":
            raise self._err(f"expected a number, found {tok.text!r}", tok)
        assert isinstance(tok.value, int)
        return tok.value

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.text == text

    def skip_braced(self) -> None:
        self.expect("{")
        depth = 1
        while depth:
            tok = self.next()
            if tok.text == "{":
                depth += 1
            elif tok.text == "}":
                depth -= 1

    def value(self) -> object:
        tok = self.next()
        if tok.kind in ("num", "string"):
            return tok.value
        if tok.kind == "ident":
            if tok.text == "true":
                return True
            if tok.text == "false":
                return False
            return tok.text
        raise self._err(f"expected a property value, found {tok.text!r}", tok)

    def assignment(self, props: dict[str, object]) -> None:
        """``name = value;`` or bare ``name;`` (boolean true)."""
        name = self.ident().text
        if self.at("="):
            self.next()
            props[name] = self.value()
        else:
            props[name] = True
        self.expect(";")

    # -- grammar
    def parse(self) -> None:
        while self.peek() is not None:
            tok = self.peek()
            assert tok is not None
            if tok.text == "import":
                self.next()
                self.next()  # the file name
            elif tok.text == "property":
                self.next()
                self.ident()
                self.skip_braced()
                self.expect(";")
            elif tok.text == "regfile":
                self.regfile()
            elif tok.text == "addrmap":
                self.addrmap()
            elif tok.text == ";":
                self.next()
            else:
                raise self._err(f"unexpected {tok.text!r} at top level", tok)

    def regfile(self) -> None:
        start = self.expect("regfile")
        type_name = self.ident().text
        if type_name in self.blocks:
            raise self._err(f"regfile {type_name!r} defined twice", start)
        block = RdlBlock(type_name, file=self.file, line=start.line)
        self.blocks[type_name] = block
        self.expect("{")
        regwidth = 32
        next_offset = 0
        while not self.at("}"):
            tok = self.peek()
            assert tok is not None
            if tok.text == "default":
                self.next()
                props: dict[str, object] = {}
                self.assignment(props)
                if "regwidth" in props:
                    regwidth = int(props["regwidth"])  # type: ignore[call-overload]  # a num token; int() rejects the rest
            elif tok.text == "reg":
                reg = self.reg(regwidth)
                if reg.offset < 0:
                    reg.offset = next_offset
                next_offset = reg.offset + regwidth // 8
                block.regs.append(reg)
            else:
                raise self._err(f"unexpected {tok.text!r} in regfile {type_name}", tok)
        self.expect("}")
        self.expect(";")

    def reg(self, regwidth: int) -> RdlReg:
        start = self.expect("reg")
        self.expect("{")
        props: dict[str, object] = {}
        enums: dict[str, dict[str, int]] = {}
        fields: list[RdlField] = []
        next_bit = 0
        while not self.at("}"):
            tok = self.peek()
            assert tok is not None
            if tok.text == "enum":
                self.next()
                ename = self.ident().text
                enums[ename] = self.enum_body()
            elif tok.text == "field":
                f = self.field(next_bit, enums)
                if f.msb >= regwidth:
                    raise self._err(
                        f"field {f.name} [{f.msb}:{f.lsb}] exceeds {regwidth}-bit register", tok
                    )
                fields.append(f)
                next_bit = f.msb + 1
            elif tok.kind == "ident" and self.peek(1) is not None and self.peek(1).text == "->":  # type: ignore[union-attr]
                self.next()
                self.next()
                self.ident()  # property name (desc): descriptions are not kept
                self.expect("=")
                self.value()
                self.expect(";")
            elif tok.kind == "ident":
                self.assignment(props)
            else:
                raise self._err(f"unexpected {tok.text!r} in reg", tok)
        self.expect("}")
        inst = self.ident()
        offset = -1
        if self.at("@"):
            self.next()
            offset = self.number()
        self.expect(";")
        return RdlReg(inst.text, offset, fields, props, self.file, inst.line or start.line)

    def enum_body(self) -> dict[str, int]:
        self.expect("{")
        out: dict[str, int] = {}
        while not self.at("}"):
            name = self.ident()
            self.expect("=")
            out[name.text] = self.number()
            if self.at("{"):
                self.skip_braced()
            self.expect(";")
        self.expect("}")
        self.expect(";")
        return out

    def field(self, next_bit: int, enums: dict[str, dict[str, int]]) -> RdlField:
        self.expect("field")
        self.expect("{")
        props: dict[str, object] = {}
        while not self.at("}"):
            self.assignment(props)
        self.expect("}")
        name = self.ident()
        if self.at("["):
            self.next()
            a = self.number()
            if self.at(":"):
                self.next()
                b = self.number()
                msb, lsb = max(a, b), min(a, b)
            else:
                lsb, msb = next_bit, next_bit + a - 1
            self.expect("]")
        else:
            lsb = msb = next_bit
        self.expect(";")
        enum: dict[str, int] = {}
        if "encode" in props:
            ename = str(props["encode"])
            if ename not in enums:
                raise self._err(f"field {name.text} encodes unknown enum {ename!r}", name)
            enum = dict(enums[ename])
        return RdlField(name.text, msb, lsb, props, enum, name.line)

    def addrmap(self) -> None:
        self.expect("addrmap")
        if self.peek() is not None and self.peek().kind == "ident":  # type: ignore[union-attr]  # peek() checked first
            self.next()
        self.expect("{")
        while not self.at("}"):
            type_tok = self.ident()
            inst = self.ident()
            self.expect("@")
            base = self.number()
            self.expect(";")
            self.instances.append((type_tok.text, inst.text, base, type_tok.line))
        self.expect("}")
        if self.peek() is not None and self.peek().kind == "ident":  # type: ignore[union-attr]  # peek() checked first
            self.next()
        self.expect(";")


def _block_name(inst: str) -> str:
    return inst[len("NVDLA_") :] if inst.startswith("NVDLA_") else inst


def parse_rdl_text(text: str, file: str = "<string>") -> RdlSpec:
    """Parse one RDL file; blocks without an addrmap instance are keyed by type name."""
    p = _Parser(text, file)
    p.parse()
    spec = RdlSpec(source=file)
    placed: set[str] = set()
    for type_name, inst, base, line in p.instances:
        if type_name not in p.blocks:
            raise RdlSyntaxError(
                file, line, f"addrmap instance {inst} of unknown regfile {type_name!r}"
            )
        b = p.blocks[type_name]
        b.name, b.base = _block_name(inst), base
        spec.blocks[b.name] = b
        placed.add(type_name)
    for type_name, b in p.blocks.items():
        if type_name not in placed:
            spec.blocks[type_name] = b
    return spec


def parse_rdl_dir(spec_manual_dir: str | Path) -> RdlSpec:
    """Parse every ``NVDLA_*.rdl`` file in ``spec_manual_dir`` (nvdla/hw ``spec/manual``)."""
    d = Path(spec_manual_dir)
    files = sorted(d.glob("NVDLA_*.rdl"))
    if not files:
        raise FileNotFoundError(f"no NVDLA_*.rdl files in {d}")
    spec = RdlSpec(source=str(d))
    for path in files:
        one = parse_rdl_text(path.read_text(encoding="utf-8", errors="replace"), str(path))
        for name, b in one.blocks.items():
            if b.base is None:
                raise RdlSyntaxError(
                    str(path), b.line, f"regfile {b.type_name} has no addrmap base"
                )
            if name in spec.blocks:
                raise RdlSyntaxError(
                    str(path), b.line, f"block {name} also defined in {spec.blocks[name].file}"
                )
            spec.blocks[name] = b
    return spec


# --------------------------------------------------------------------------------------------
# simspec header (nvdlav1 cmod/include/arnvdla.uh)

_ACCESS_BITS = (("r", 1), ("w", 2), ("t", 4), ("o", 16))
_UH_REG = re.compile(
    r"^#define REG_\w+\(_\) _\((\w+),(\w+),(0x[0-9a-fA-F]+),(0x[0-9a-fA-F]+),([^)]*)\)\s*$"
)
_UH_FLD = re.compile(
    r"^#define REG_FLD_\w+\(_\) _\((\w+),(\w+),(\w+),(\d+),(\d+),(\d+),(\d+),(\d+),"
    r"(0x[0-9a-fA-F]+),(0x[0-9a-fA-F]+),(0x[0-9a-fA-F]+),(\w+),(\w+)\)\s*$"
)
_UH_ENM = re.compile(r"^_\((\w+),(\w+),(\w+),(\w+),(\d+|0x[0-9a-fA-F]+)\)\s*\\?\s*$")


def spec_access_of_code(code: int) -> str:
    """simspec access code -> spec_access string (23 -> "rwto", 0 -> "c")."""
    s = "".join(ch for ch, bit in _ACCESS_BITS if code & bit)
    return s or "c"


def parse_arnvdla_uh(text: str, file: str = "arnvdla.uh") -> RdlSpec:
    """Read register/field/enum rows of a simspec ``.uh`` header into the RDL model.

    Block bases are the register address minus its in-block offset (both columns are given).
    Field ``sw`` is taken from the R/W bits of the access code (a constant reads as ``r``).
    """
    spec = RdlSpec(source=file)
    regs: dict[tuple[str, str], RdlReg] = {}
    fields: dict[tuple[str, str, str], RdlField] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if re.match(r"#define REG_FLD_\w+\(_\) _\(", line):
            m = _UH_FLD.match(line)
            if m is None:
                raise RdlSyntaxError(file, lineno, "unreadable REG_FLD row")
            blk, reg, fld = m.group(1), m.group(2), m.group(3)
            width, msb, lsb, code = (int(m.group(k)) for k in (4, 5, 6, 7))
            if msb - lsb + 1 != width:
                raise RdlSyntaxError(file, lineno, f"{reg}.{fld}: width {width} != [{msb}:{lsb}]")
            r = regs.get((blk, reg))
            if r is None:
                raise RdlSyntaxError(
                    file, lineno, f"field {fld} of undeclared register {blk}.{reg}"
                )
            sa = spec_access_of_code(code & 0xFF)
            sw = ("r" if code & 1 or code == 0 else "") + ("w" if code & 2 else "")
            f = RdlField(
                fld,
                msb,
                lsb,
                {"sw": sw, "spec_access": sa, "reset": int(m.group(10), 16)},
                {},
                lineno,
            )
            r.fields.append(f)
            fields[(blk, reg, fld)] = f
        elif re.match(r"#define REG_\w+\(_\) _\(", line):
            m = _UH_REG.match(line)
            if m is None:
                raise RdlSyntaxError(file, lineno, "unreadable REG row")
            blk, reg = m.group(1), m.group(2)
            addr, off = int(m.group(3), 16), int(m.group(4), 16)
            name = _block_name(blk)
            b = spec.blocks.get(name)
            if b is None:
                b = spec.blocks[name] = RdlBlock(
                    blk, name=name, base=addr - off, file=file, line=lineno
                )
            elif b.base != addr - off:
                raise RdlSyntaxError(
                    file, lineno, f"{blk}.{reg}: base {addr - off:#x} != {b.base:#x}"
                )
            r = RdlReg(reg, off, [], {"reset": int(m.group(5).split(",")[3], 16)}, file, lineno)
            b.regs.append(r)
            regs[(blk, reg)] = r
        elif line.startswith("_(") and line.count(",") == 4:
            m = _UH_ENM.match(line)
            if m is None:
                continue
            fe = fields.get((m.group(1), m.group(2), m.group(3)))
            if fe is not None:
                fe.enum[m.group(4)] = int(m.group(5), 0)
    if not spec.blocks:
        raise RdlSyntaxError(file, 1, "no REG_ rows found (not a simspec .uh header?)")
    return spec


# --------------------------------------------------------------------------------------------
# RDL model -> RegisterMap


def _trigger_bits(spec_access: str) -> bool:
    return "t" in spec_access or "o" in spec_access


def build_regmap(spec: RdlSpec, generation: str, source: str = "") -> RegisterMap:
    """Turn parsed RDL into a :class:`~nvdla_hil.drivers.regmap.RegisterMap`.

    Rules (documented in regmap.py): field access from ``sw`` (r/w/rw -> ro/wo/rw); register
    access is rw if it has both readable and writable bits, else ro/wo; ``trigger`` when a
    software-writable field's spec_access carries ``t`` (trigger) or ``o`` (write strobe seen by
    hardware); ``dual`` for registers at or after D_OP_ENABLE in blocks that have one.
    """
    blocks: dict[str, Block] = {}
    for bname in sorted(spec.blocks, key=lambda n: (spec.blocks[n].base or 0, n)):
        rb = spec.blocks[bname]
        assert rb.base is not None
        op_enable = next((r.offset for r in rb.regs if r.name == "D_OP_ENABLE"), None)
        regs: dict[str, Register] = {}
        for rr in sorted(rb.regs, key=lambda r: r.offset):
            fields: dict[str, Field] = {}
            readable = writable = trigger = False
            reset = 0
            for rf in rr.fields:
                sw = rf.sw
                access = {"r": "ro", "w": "wo", "rw": "rw"}.get(sw)
                if access is None:
                    raise RdlSyntaxError(
                        rr.file, rf.line, f"{bname}.{rr.name}.{rf.name}: bad sw {sw!r}"
                    )
                readable |= "r" in sw
                writable |= "w" in sw
                trigger |= "w" in sw and _trigger_bits(rf.spec_access)
                width = rf.msb - rf.lsb + 1
                freset = rf.reset & ((1 << width) - 1)
                reset |= freset << rf.lsb
                fields[rf.name] = Field(
                    rf.name,
                    rf.msb,
                    rf.lsb,
                    access,
                    freset,
                    dict(rf.enum),
                    rf.spec_access,
                    bname,
                    rr.name,
                )
            access = "rw" if readable and writable else ("wo" if writable else "ro")
            dual = op_enable is not None and rr.offset >= op_enable and rr.name.startswith("D_")
            if rr.name in regs:
                raise RdlSyntaxError(rr.file, rr.line, f"register {bname}.{rr.name} defined twice")
            regs[rr.name] = Register(
                rr.name, bname, rr.offset, rb.base + rr.offset, access, reset, dual, trigger, fields
            )
        blocks[bname] = Block(bname, rb.base, regs)
    return RegisterMap(generation, blocks, source=source or spec.source)


def import_rdl(
    spec_manual_dir: str | Path, generation: str = "v2", source: str = ""
) -> RegisterMap:
    """Parse an nvdla/hw ``spec/manual`` directory into a RegisterMap."""
    spec = parse_rdl_dir(spec_manual_dir)
    return build_regmap(spec, generation, source or f"{spec_manual_dir}/NVDLA_*.rdl")


def import_arnvdla_uh(path: str | Path, generation: str = "v1", source: str = "") -> RegisterMap:
    """Parse an nvdlav1 ``cmod/include/arnvdla.uh`` into a RegisterMap."""
    p = Path(path)
    spec = parse_arnvdla_uh(p.read_text(encoding="utf-8", errors="replace"), str(p))
    return build_regmap(spec, generation, source or str(p))


def import_checkout(nvdla_hw_path: str | Path, generation: str) -> RegisterMap:
    """Read the register map of an nvdla/hw working tree: ``spec/manual/NVDLA_*.rdl`` for v2,
    ``cmod/include/arnvdla.uh`` for v1 (branch nvdlav1 has no NVDLA RDL)."""
    root = Path(nvdla_hw_path)
    if generation == "v1":
        uh = root / "cmod" / "include" / "arnvdla.uh"
        if not uh.is_file():
            raise FileNotFoundError(f"{uh} not found (check out nvdla/hw branch nvdlav1)")
        return import_arnvdla_uh(uh, "v1")
    d = root / "spec" / "manual"
    if not any(d.glob("NVDLA_*.rdl")):
        raise FileNotFoundError(f"no NVDLA_*.rdl in {d} (check out nvdla/hw branch master)")
    return import_rdl(d, generation)


def iter_rdl_fields(spec: RdlSpec) -> Iterator[tuple[RdlBlock, RdlReg, RdlField]]:
    for b in spec.blocks.values():
        for r in b.regs:
            for f in r.fields:
                yield b, r, f


def main(argv: list[str] | None = None) -> int:
    """``python -m nvdla_hil.drivers.rdl NVDLA_HW_CHECKOUT OUT.yaml --generation v2 [--source S]``:
    regenerate a packaged register-map YAML from an nvdla/hw working tree."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m nvdla_hil.drivers.rdl", description=main.__doc__)
    ap.add_argument("nvdla_hw", help="nvdla/hw working tree (master for v2, nvdlav1 for v1)")
    ap.add_argument("out", help="YAML file to write")
    ap.add_argument("--generation", choices=("v2", "v1"), default="v2")
    ap.add_argument("--source", default="", help="provenance text, e.g. 'nvdla/hw master <commit>'")
    args = ap.parse_args(argv)
    m = import_checkout(args.nvdla_hw, args.generation)
    if args.source:
        m = m.with_source(args.source)
    dump_yaml(m, args.out)
    nb, nr, nf = m.counts()
    print(f"{args.out}: {m.generation}, {nb} blocks, {nr} registers, {nf} fields")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
