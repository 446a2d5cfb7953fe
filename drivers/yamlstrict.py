"""Strict YAML for untrusted files: safe tags only, and a duplicate key is an error naming the
file and line of both occurrences.

PyYAML's ``safe_load`` keeps the last of two equal keys silently (a second ``statistics:`` in a
vector would drop the first one's checks). Every YAML file this project reads — register maps,
profiles, vector manifests, lab files, fuzz constraints — goes through :func:`load`.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["YamlError", "load"]

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where present, as safe


class YamlError(ValueError):
    """Malformed YAML or a duplicate key; the message names the file and line."""


class _StrictLoader(_Base):
    pass


def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
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


def load(text: str, source: str = "<yaml>") -> Any:
    """Parse ``text`` strictly; errors are :class:`YamlError` starting with ``source``."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except YamlError as e:
        raise YamlError(f"{source}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e)
        raise YamlError(f"{where}: {problem}") from None
