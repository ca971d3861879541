"""YAML that remembers where each value came from: mappings and lists whose entries know their
1-based line, so that a config error can name the file, the line and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalign.errors import InputError


class MarkedMap(dict[str, Any]):
    """A YAML mapping: a dict whose ``lines[key]`` is the 1-based line of each key and ``line``
    the line where the mapping starts."""

    line: int = 0
    lines: dict[str, int]


class MarkedList(list[Any]):
    """A YAML sequence: a list whose ``lines[i]`` is the 1-based line of item ``i``."""

    line: int = 0
    lines: list[int]


def load_marked(text: str, file: str) -> Any:
    """Parse one YAML document (safe tags only) into plain values, :class:`MarkedMap` and
    :class:`MarkedList`. A YAML syntax error or a duplicate key is an :class:`InputError`
    naming ``file`` and the line."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise InputError(f"not valid YAML: {e.problem or e}", file=file,
                         line=mark.line + 1 if mark is not None else None) from None
    if node is None:
        return None
    constructor = yaml.SafeLoader("")
    return _convert(node, constructor, file)


def _convert(node: Any, constructor: Any, file: str) -> Any:
    import yaml

    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)  # YAML merge keys (<<)
        out = MarkedMap()
        out.line = node.start_mark.line + 1
        out.lines = {}
        for k_node, v_node in node.value:
            key = _convert(k_node, constructor, file)
            line = k_node.start_mark.line + 1
            if not isinstance(key, str):
                raise InputError(f"a key must be a text, got {key!r}", file=file, line=line)
            if key in out:
                raise InputError(f"key '{key}' given twice (first on line {out.lines[key]})", file=file, line=line)
            out[key] = _convert(v_node, constructor, file)
            out.lines[key] = line
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = MarkedList(_convert(v, constructor, file) for v in node.value)
        seq.line = node.start_mark.line + 1
        seq.lines = [v.start_mark.line + 1 for v in node.value]
        return seq
    return constructor.construct_object(node, deep=True)


def read_marked(path: str | Path) -> Any:
    """:func:`load_marked` of a UTF-8 file (an unreadable file is an :class:`InputError`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start})", file=str(path)) from None
    return load_marked(text, str(path))
