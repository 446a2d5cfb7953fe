"""Strict, bounded YAML for untrusted files: safe tags only, a duplicate key is an error naming
the file and line of both occurrences, and nothing in the text can make loading explode.

PyYAML's ``safe_load`` keeps the last of two equal keys silently (a second ``statistics:`` in a
vector would drop the first one's checks), and it builds whatever anchors, aliases and merge keys
describe: a 470-byte alias bomb (``&b1 [*b0, *b0, ...]`` ten levels deep) stands for 10^10
nodes, and a 20,000-long merge-key chain (``m_i: {<<: *m_{i-1}}``) takes quadratic time in
``flatten_mapping``. Before anything is constructed, :func:`load` reads the event stream of the
C parser once and refuses, naming ``file:line``:

* a merge key (``<<``) and an alias to a collection still open (a recursive structure);
* more than :data:`MAX_NODES` nodes *after* alias expansion (each alias counts the whole node
  it names, so a bomb is refused after reading its few hundred bytes);
* nesting deeper than :data:`MAX_DEPTH` (the constructor recurses);
* an integer literal longer than :data:`MAX_INT_CHARS` characters (CPython refuses to convert
  more than 4,300 digits with a bare ``ValueError``; no hardware field needs more than 64 bits);
* a NUL character in any scalar (a file or blob name with NUL reaches ``open`` as a bare
  ``ValueError``);
* text longer than :data:`MAX_TEXT_CHARS`.

Plain aliases of small nodes stay allowed: PyYAML's own dumper writes them when one mapping is
shared (the bundled vector manifests have a few ``params: *id001``), and they count in full.

Every YAML file this project reads — register maps, profiles, vector manifests, lab files, fuzz
constraints, labgrid environments — goes through :func:`load`.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ..errors import InputError

__all__ = ["YamlError", "load", "check_events", "MAX_NODES", "MAX_DEPTH", "MAX_INT_CHARS", "MAX_TEXT_CHARS"]

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where present, as safe

MAX_NODES = 2_000_000  # after alias expansion; the largest shipped file (a register map) has ~60,000
MAX_DEPTH = 64  # shipped files nest at most 8 deep
MAX_INT_CHARS = 100  # 0b + 64 bits with underscores fits
MAX_TEXT_CHARS = 64 << 20

_INTLIKE = re.compile(r"[-+]?(0[box])?[0-9a-fA-F_:]+")


class YamlError(InputError):
    """Malformed, oversized or explosive YAML, or a duplicate key; the message names the file and line."""


class _StrictLoader(_Base):
    pass


def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    out: dict[Any, Any] = {}
    for knode, vnode in node.value:
        key = loader.construct_object(knode, deep=True)
        try:
            hash(key)
        except TypeError:
            raise YamlError(f"line {knode.start_mark.line + 1}: a mapping key must be a scalar") from None
        line = knode.start_mark.line + 1
        if key in seen:
            raise YamlError(f"line {line}: duplicate key {key!r} (first at line {seen[key]})")
        seen[key] = line
        out[key] = loader.construct_object(vnode, deep=True)
    return out


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _line(ev: Any) -> int:
    mark = ev.start_mark
    return mark.line + 1 if mark is not None else 0


def check_events(text: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH,
                 max_int_chars: int = MAX_INT_CHARS) -> None:
    """Refuse explosive or unconvertible YAML from its event stream (nothing is constructed);
    raises :class:`YamlError` starting ``line N:``. Memory: one counter per open collection and
    one per anchor."""
    loader = _Base(text)
    sizes: dict[str, int] = {}  # anchor -> expanded node count
    stack: list[list[Any]] = [[None, 0]]  # [anchor, expanded count] per open collection
    total = 0
    try:
        while loader.check_event():
            ev = loader.get_event()
            if isinstance(ev, yaml.ScalarEvent):
                line = _line(ev)
                v = ev.value
                if "\x00" in v:
                    raise YamlError(f"line {line}: a NUL character in a value")
                plain = not ev.style and ev.tag is None  # plain (libyaml: style ""): resolved by its form
                if plain and v == "<<" or ev.tag == "tag:yaml.org,2002:merge":
                    raise YamlError(f"line {line}: merge keys (<<) are not allowed")
                if plain or ev.tag == "tag:yaml.org,2002:int":
                    if len(v) > max_int_chars and _INTLIKE.fullmatch(v.strip()):
                        raise YamlError(f"line {line}: a number {len(v)} characters long "
                                        f"(at most {max_int_chars})")
                n = 1
                if ev.anchor is not None:
                    sizes[ev.anchor] = 1
            elif isinstance(ev, yaml.AliasEvent):
                line = _line(ev)
                if ev.anchor not in sizes:
                    if any(s[0] == ev.anchor for s in stack):
                        raise YamlError(f"line {line}: alias *{ev.anchor} refers to a node that contains it")
                    raise YamlError(f"line {line}: unknown alias *{ev.anchor}")
                n = sizes[ev.anchor]
            elif isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(stack) > max_depth:
                    raise YamlError(f"line {_line(ev)}: nested more than {max_depth} deep")
                stack.append([ev.anchor, 1])
                continue
            elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, n = stack.pop()
                if anchor is not None:
                    sizes[anchor] = n
                stack[-1][1] += n
                total += 1  # its content is counted already
                continue
            else:
                continue
            stack[-1][1] += n
            total += n
            if total > max_nodes or stack[-1][1] > max_nodes:
                raise YamlError(f"line {line}: more than {max_nodes} nodes once aliases are expanded "
                                "(an alias bomb?)")
    finally:
        dispose = getattr(loader, "dispose", None)
        if dispose is not None:
            dispose()


def load(text: str, source: str = "<yaml>", *, max_nodes: int = MAX_NODES) -> Any:
    """Parse ``text`` strictly and within bounds; errors are :class:`YamlError` starting with
    ``source:line``."""
    if len(text) > MAX_TEXT_CHARS:
        raise YamlError(f"{source}: larger than {MAX_TEXT_CHARS} characters")
    try:
        check_events(text, max_nodes=max_nodes)
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except YamlError as e:
        raise YamlError(f"{source}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e)
        raise YamlError(f"{where}: {problem}") from None
    except RecursionError:
        raise YamlError(f"{source}: nested too deeply") from None
    except ValueError as e:  # a conversion the resolver chose (e.g. a timestamp out of range)
        raise YamlError(f"{source}: {e}") from None
