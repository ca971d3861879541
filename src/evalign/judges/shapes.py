"""Answer shapes: what a judge's answer looks like, declared once per template (``answer:`` in its
YAML file), sent to every backend as a :class:`~evalign.backends.types.Constraint`.

A shape is either a verdict regex, optionally after free text, or a JSON object::

    # Prometheus: feedback, then " [RESULT] n"
    answer:
      text: true            # free text first (bounded, see below)
      exclude: "[]"         # characters the free text may not hold (so it never writes a marker)
      verdict: ' \\[RESULT\\] [1-5]'

    # an answer with no text: only the verdict
    answer:
      verdict: 'Output \\((a|b)\\)'

    # a JSON object, keys in this order (strings without enum/pattern are free text)
    answer:
      json:
        type: object
        properties:
          reasoning: {type: string}
          naturalness: {type: integer, minimum: 1, maximum: 3}
        required: [reasoning, naturalness]

The regex is in the dialect of :mod:`evalign.backends.regex_gbnf` (ASCII; the verdict of
bounded length). The JSON object is written compactly (``{"k": v, "k2": v2}``, Python's
``json.dumps`` layout), which the canonical regex fixes.

**The bound.** Free text is printable ASCII and newlines (less ``exclude``; in a JSON string printable
ASCII less ``"`` and ``\\``), so each of its characters is at least one token of any tokenizer (byte-level BPE,
SentencePiece with byte fallback, tiktoken). A call with ``max_tokens`` M gives the text at most
``M - W - 1`` characters, W being the longest verdict (or JSON skeleton) in characters: the answer
then always ends, verdict included, before ``max_tokens`` (the last token left for the end of
sequence). :func:`text_budget` computes it; a ``max_tokens`` too small for the verdict is an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalign.backends.regex_gbnf import (
    ASCII,
    Alt,
    Lit,
    Node,
    RegexDialectError,
    Seq,
    Text,
    parse,
    texts,
    to_regex,
    width,
)
from evalign.backends.types import Constraint
from evalign.errors import EvalignError, InputError
from evalign.signature import stable_hash

#: the characters of free text: printable ASCII and newline (each at least one token)
TEXT_CHARS = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\n"}
#: tokens kept free after the answer (the end-of-sequence token)
EOS_MARGIN = 1
#: JSON schema keys a shape understands, by type
_JSON_TYPES = ("string", "integer", "boolean")


@dataclass(frozen=True)
class AnswerShape:
    """The shape of an answer (see the module doc). ``verdict``: a dialect regex (empty for a JSON
    shape); ``text``: free text before it; ``exclude``: characters the free text may not hold;
    ``json``: the JSON schema of a JSON answer."""

    verdict: str = ""
    text: bool = False
    exclude: str = ""
    json: Mapping[str, Any] | None = None
    _tree: Node = field(default=Seq(()), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tree", self._build())

    def _build(self) -> Node:
        chars = TEXT_CHARS - set(self.exclude)
        if self.json is not None:
            return json_tree(self.json, chars - {'"', "\\", "\n"})
        verdict = parse(self.verdict)
        _lo, hi = width(verdict)
        if hi is None:
            raise RegexDialectError(f"the verdict {self.verdict!r} has no longest length (use {{m,n}}, not * or +)")
        return Seq((Text(frozenset(chars)), verdict)) if self.text else verdict

    @property
    def tree(self) -> Node:
        """The shape's tree (its free text as :class:`~evalign.backends.regex_gbnf.Text`)."""
        return self._tree

    @property
    def fixed_width(self) -> int:
        """The longest answer without its free text, in characters."""
        return int(width(self._tree)[1] or 0)

    def text_budget(self, max_tokens: int) -> int:
        """Most characters of each free text so the answer ends within ``max_tokens`` (see the
        module doc); an error when the verdict itself does not fit."""
        n = texts(self._tree)
        room = max_tokens - self.fixed_width - EOS_MARGIN
        if room < 0:
            raise EvalignError(f"max_tokens {max_tokens} is too small for the answer's shape: its verdict takes up "
                               f"to {self.fixed_width} tokens (raise --max-tokens)")
        return room // n if n else 0

    def regex(self, max_tokens: int) -> str:
        """The canonical regex of the answer for a call of ``max_tokens``."""
        return to_regex(self._tree, self.text_budget(max_tokens))

    def json_schema(self, max_tokens: int) -> dict[str, Any] | None:
        """The JSON schema (free-text strings bounded by ``maxLength`` and a pattern), or None."""
        if self.json is None:
            return None
        budget = self.text_budget(max_tokens)
        schema: dict[str, Any] = json.loads(json.dumps(self.json))
        for prop in schema.get("properties", {}).values():
            if _free_string(prop):
                prop["maxLength"] = budget
        schema["additionalProperties"] = False
        schema["required"] = list(schema.get("properties", {}))
        return schema

    def constraint(self, max_tokens: int, name: str = "answer") -> Constraint:
        """The constraint of a call of ``max_tokens`` (its regex, and its JSON schema for a JSON shape)."""
        return Constraint(regex=self.regex(max_tokens), json_schema=self.json_schema(max_tokens), name=name)

    def as_dict(self) -> dict[str, Any]:
        """The shape in its file form."""
        if self.json is not None:
            return {"json": dict(self.json), **({"exclude": self.exclude} if self.exclude else {})}
        out: dict[str, Any] = {"verdict": self.verdict}
        if self.text:
            out["text"] = True
        if self.exclude:
            out["exclude"] = self.exclude
        return out

    def tag(self) -> str:
        """``shape#hash`` (8 hex) as recorded in signatures."""
        return f"shape#{stable_hash(self.as_dict())[:8]}"


def _free_string(prop: Mapping[str, Any]) -> bool:
    return prop.get("type") == "string" and "enum" not in prop and "const" not in prop


def _json_value(prop: Mapping[str, Any], chars: frozenset[str], where: str) -> Node:
    """The tree of one property's JSON value."""
    kind = prop.get("type")
    if kind not in _JSON_TYPES:
        raise ValueError(f"{where}: type must be one of {', '.join(_JSON_TYPES)}, got {kind!r}")
    values = prop.get("enum", [prop["const"]] if "const" in prop else None)
    if kind == "integer" and values is None:
        lo, hi = prop.get("minimum"), prop.get("maximum")
        if not isinstance(lo, int) or not isinstance(hi, int) or not 0 <= hi - lo <= 100:
            raise ValueError(f"{where}: an integer needs 'enum', or 'minimum' and 'maximum' at most 100 apart")
        values = list(range(lo, hi + 1))
    if kind == "boolean":
        values = [True, False]
    if values is None:  # free text
        return Seq((Lit('"'), Text(chars), Lit('"')))
    if not values:
        raise ValueError(f"{where}: empty enum")
    lits = [Lit(json.dumps(v)) for v in values]
    if any(not set(lit.text) <= ASCII for lit in lits):
        raise ValueError(f"{where}: enum values must be ASCII")
    return lits[0] if len(lits) == 1 else Alt(tuple(lits))


def json_tree(schema: Mapping[str, Any], chars: frozenset[str]) -> Node:
    """The tree of a compact JSON object of ``schema`` (an object of string / integer / boolean
    properties, all required, in their order; free-text strings of ``chars``)."""
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), Mapping) or not schema["properties"]:
        raise ValueError("a JSON answer is an object: type 'object' with 'properties'")
    items: list[Node] = [Lit("{")]
    for i, (key, prop) in enumerate(schema["properties"].items()):
        if not isinstance(prop, Mapping):
            raise ValueError(f"properties.{key} must be a mapping")
        items.append(Lit((", " if i else "") + json.dumps(str(key)) + ": "))
        items.append(_json_value(prop, chars, f"properties.{key}"))
    items.append(Lit("}"))
    return Seq(tuple(items))


def shape_from_mapping(data: Any, *, file: str | None = None, field: str = "answer") -> AnswerShape:
    """An :class:`AnswerShape` from its file form; a bad declaration is an :class:`InputError`
    naming the file and field."""
    if not isinstance(data, Mapping):
        raise InputError(f"must be a mapping with 'verdict' (and 'text', 'exclude') or 'json', got "
                         f"{type(data).__name__}", file=file, field=field)
    unknown = [k for k in data if k not in ("verdict", "text", "exclude", "json")]
    if unknown:
        raise InputError("unknown key (an answer shape has verdict, text, exclude or json)", file=file,
                         field=f"{field}.{unknown[0]}")
    if ("verdict" in data) == ("json" in data):
        raise InputError("give either 'verdict' (a regex) or 'json' (a JSON schema)", file=file, field=field)
    for key, kind in (("verdict", str), ("exclude", str), ("text", bool), ("json", Mapping)):
        if key in data and not isinstance(data[key], kind):
            raise InputError(f"must be a {kind.__name__}", file=file, field=f"{field}.{key}")
    try:
        return AnswerShape(verdict=str(data.get("verdict", "")), text=bool(data.get("text", False)),
                           exclude=str(data.get("exclude", "")), json=data.get("json"))
    except (RegexDialectError, ValueError) as exc:
        key = "json" if "json" in data else "verdict"
        raise InputError(str(exc), file=file, field=f"{field}.{key}") from None
