"""evalign's one YAML reader, for every YAML file it reads (run and bench configs, suites, templates,
rubrics, probe files, price files): :func:`load_yaml` / :func:`read_yaml`, and :func:`load_marked` /
:func:`read_marked` for YAML that remembers where each value came from (mappings and lists whose
entries know their 1-based line, so that a config error can name the file, the line and the key).

A YAML file is untrusted input, so parsing is bounded: YAML tags (``!!python/tuple``, ``!custom``,
even ``!!str``) are refused wherever they appear, and before anything is built the document's
size *with its aliases expanded* is measured in one memoised pass over the node graph (each node
once): more than :data:`MAX_VALUES` values, nesting deeper than :data:`MAX_DEPTH` or an alias
that contains itself is one error naming the file and the line (a 505-byte "billion laughs"
document of nine levels of ``&a [*b, *b, ...]`` is refused at once instead of expanding 10^9
values).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalign.errors import InputError

#: the most values (mappings, lists and scalars, aliases expanded) one YAML document may hold
MAX_VALUES = 100_000
#: the deepest nesting of mappings and lists one YAML document may have (aliases expanded)
MAX_DEPTH = 64


class MarkedMap(dict[str, Any]):
    """A YAML mapping: a dict whose ``lines[key]`` is the 1-based line of each key and ``line``
    the line where the mapping starts."""

    line: int = 0
    lines: dict[str, int]


class MarkedList(list[Any]):
    """A YAML sequence: a list whose ``lines[i]`` is the 1-based line of item ``i``."""

    line: int = 0
    lines: list[int]


def load_marked(text: str, file: str, *, what: str = "config") -> Any:
    """Parse one YAML document (bounded, see the module doc) into plain values, :class:`MarkedMap`
    and :class:`MarkedList`. A YAML syntax error, a tag, a key that is not a text or a duplicate key
    is an :class:`InputError` naming ``file`` and the line (``what``: the kind of file, for the
    message)."""
    import yaml

    node = _bounded_node(text, file, what)
    return None if node is None else _convert(node, yaml.SafeLoader(""), file)


def load_yaml(text: str, file: str, *, what: str = "YAML file") -> Any:
    """Parse one YAML document (bounded, see the module doc) into plain values (dicts, lists,
    scalars; keys of any plain type, as ``yaml.safe_load`` builds them). Errors as :func:`load_marked`'s."""
    import yaml

    node = _bounded_node(text, file, what)
    return None if node is None else yaml.SafeLoader("").construct_document(node)


def _bounded_node(text: str, file: str, what: str) -> Any:
    """The document's node graph, checked before anything is built: no tag, not too deep, not too
    many values with its aliases expanded, no alias inside itself (None: an empty document)."""
    import yaml

    try:
        _refuse_tags(text, file, what)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise InputError(f"not valid YAML (malformed YAML: {e.problem or e})", file=file,
                         line=mark.line + 1 if mark is not None else None) from None
    except yaml.YAMLError as e:  # (a reader error: a character YAML does not allow)
        raise InputError(f"not valid YAML (malformed YAML: {e})", file=file) from None
    except RecursionError:  # the parser's own recursion, before any limit of ours could be checked
        raise InputError(f"the YAML is nested deeper than {MAX_DEPTH} levels: not read", file=file) from None
    if node is not None:
        _measure(node, file, {}, set(), 1)
    return node


def _refuse_tags(text: str, file: str, what: str = "config") -> None:
    """A YAML tag anywhere in ``text`` is an :class:`InputError` naming its line (tags make
    values of other types than the plain ones a config is made of); so is nesting deeper than
    :data:`MAX_DEPTH`, found while scanning (the scanner's work grows with the nesting, so a deep
    document is stopped before it is read whole)."""
    import yaml

    opens = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken, yaml.BlockSequenceStartToken,
             yaml.BlockMappingStartToken)
    closes = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)
    depth = 0
    for tok in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(tok, yaml.TagToken):
            handle, suffix = tok.value
            raise InputError(f"YAML tags are not read in a {what} (found '{handle or ''}{suffix}'): write plain "
                             "values", file=file, line=tok.start_mark.line + 1)
        depth += isinstance(tok, opens) - isinstance(tok, closes)
        if depth > MAX_DEPTH:
            raise InputError(f"the YAML is nested deeper than {MAX_DEPTH} levels: not read", file=file,
                             line=tok.start_mark.line + 1)


def _measure(node: Any, file: str, memo: dict[int, tuple[int, int]], active: set[int], depth: int) -> tuple[int, int]:
    """(values, height) of ``node`` with its aliases expanded, each node measured once (``memo``);
    over :data:`MAX_VALUES` values, :data:`MAX_DEPTH` levels or a node inside itself is an
    :class:`InputError` naming the line of the node where the limit is passed."""
    import yaml

    key = id(node)
    line = node.start_mark.line + 1
    if depth > MAX_DEPTH:
        raise InputError(f"the YAML is nested deeper than {MAX_DEPTH} levels (aliases expanded): not read",
                         file=file, line=line)
    if key in active:
        raise InputError("an alias that contains itself (a recursive YAML document)", file=file, line=line)
    if key not in memo:
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        active.add(key)
        size, height = 1, 0
        for child in children:
            s, h = _measure(child, file, memo, active, depth + 1)
            size, height = size + s, max(height, h + 1)
            if size > MAX_VALUES:
                raise InputError(f"the YAML expands to more than {MAX_VALUES:,} values (through its aliases): "
                                 "not read", file=file, line=line)
        active.discard(key)
        memo[key] = (size, height)
    size, height = memo[key]
    if depth + height > MAX_DEPTH:
        raise InputError(f"the YAML is nested deeper than {MAX_DEPTH} levels (aliases expanded): not read",
                         file=file, line=line)
    return size, height


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


def _text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start}); save the file as UTF-8",
                         file=str(path)) from None


def read_marked(path: str | Path, *, what: str = "config") -> Any:
    """:func:`load_marked` of a UTF-8 file (an unreadable file is an :class:`InputError`)."""
    return load_marked(_text(path), str(path), what=what)


def read_yaml(path: str | Path, *, what: str = "YAML file") -> Any:
    """:func:`load_yaml` of a UTF-8 file (an unreadable file is an :class:`InputError`)."""
    return load_yaml(_text(path), str(path), what=what)
