"""The small regular-expression dialect answer shapes are written in, and its translation to GBNF.

A judge template declares what its answer looks like as a regex of this dialect (see
:mod:`evalign.judges.shapes`); each backend sends it in its own form: the canonical regex
(:func:`to_regex`: vLLM's ``structured_outputs``, llguidance on the ``hf`` backend, hypothesis in the
tests) or a GBNF grammar (:func:`to_gbnf`: llama.cpp). The dialect is the part of Python's ``re``
syntax that every engine reads the same way, over ASCII:

* literal characters, and the escapes ``\\n``, ``\\t``, ``\\r``, ``\\d`` and a backslash before any
  ASCII punctuation (``\\[``, ``\\.``, ``\\(`` ...);
* character classes ``[a-z0-9_]`` and negated classes ``[^...]``, which mean printable ASCII, tab and
  newline minus the listed characters (never a non-ASCII character: each character of an answer is
  then at least one token, the bound :mod:`evalign.judges.shapes` relies on);
* groups ``(...)`` / ``(?:...)``, alternation ``|``, and the repetitions ``?``, ``*``, ``+``,
  ``{m}``, ``{m,n}``, ``{m,}``; ``^`` at the start and ``$`` at the end are ignored.

:func:`parse` gives a tree of :class:`Lit`, :class:`Cls`, :class:`Seq`, :class:`Alt`, :class:`Rep`
and :class:`Text` (the free text of a shape, whose longest length is chosen when the tree is
rendered); :func:`width` its shortest and longest match in characters. A syntax outside the dialect
is a :class:`RegexDialectError` naming the offset.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

#: every character the dialect knows: printable ASCII, tab and newline
ASCII = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\t", "\n"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_META = set("\\.^$|?*+()[]{}")


class RegexDialectError(ValueError):
    """A regex outside the dialect (the message names the offset)."""


@dataclass(frozen=True)
class Lit:
    """A literal string."""

    text: str


@dataclass(frozen=True)
class Cls:
    """A set of characters (sorted, never empty)."""

    chars: frozenset[str]


@dataclass(frozen=True)
class Seq:
    """Items one after the other."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    """One of the options."""

    options: tuple[Node, ...]


@dataclass(frozen=True)
class Rep:
    """``item`` repeated ``lo`` to ``hi`` times (``hi`` None: no upper bound)."""

    item: Node
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Text:
    """Free text of the characters ``chars``: 0 to n of them, n chosen at rendering."""

    chars: frozenset[str]


Node = Lit | Cls | Seq | Alt | Rep | Text


# --- parsing ---------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.i = 0

    def error(self, msg: str) -> RegexDialectError:
        return RegexDialectError(f"{msg} at offset {self.i} of {self.src!r}")

    def peek(self) -> str | None:
        return self.src[self.i] if self.i < len(self.src) else None

    def alt(self) -> Node:
        options = [self.seq()]
        while self.peek() == "|":
            self.i += 1
            options.append(self.seq())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def seq(self) -> Node:
        items: list[Node] = []
        while self.peek() not in (None, "|", ")"):
            item = self.quantified(self.atom())
            if isinstance(item, Seq) and not item.items:
                continue  # an anchor
            if isinstance(item, Lit) and items and isinstance(items[-1], Lit):
                items[-1] = Lit(items[-1].text + item.text)  # one literal, not one per character
            else:
                items.append(item)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def atom(self) -> Node:
        c = self.src[self.i]
        self.i += 1
        if c == "(":
            if self.src.startswith("?:", self.i):
                self.i += 2
            elif self.peek() == "?":
                raise self.error("only (...) and (?:...) groups are in the dialect")
            inner = self.alt()
            if self.peek() != ")":
                raise self.error("unclosed group")
            self.i += 1
            return inner
        if c == "[":
            return self.cls()
        if c == "\\":
            return self.escape()
        if c == ".":
            raise self.error("'.' is not in the dialect (write the characters as a class, e.g. [^\\n])")
        if c in "^$" and (self.i == 1 if c == "^" else self.i == len(self.src)):
            return Seq(())
        if c in _META:
            raise self.error(f"unexpected {c!r}")
        if c not in ASCII:
            raise self.error(f"non-ASCII character {c!r}")
        return Lit(c)

    def escape(self) -> Node:
        c = self.peek()
        if c is None:
            raise self.error("trailing backslash")
        self.i += 1
        if c in _ESCAPES:
            return Lit(_ESCAPES[c])
        if c == "d":
            return Cls(frozenset(string.digits))
        if c in string.punctuation or c == " ":
            return Lit(c)
        raise self.error(f"escape \\{c} is not in the dialect")

    def class_char(self) -> str:
        c = self.src[self.i]
        self.i += 1
        if c != "\\":
            if c not in ASCII:
                raise self.error(f"non-ASCII character {c!r}")
            return c
        e = self.peek()
        if e is None:
            raise self.error("trailing backslash")
        self.i += 1
        if e in _ESCAPES:
            return _ESCAPES[e]
        if e in string.punctuation or e == " ":
            return e
        raise self.error(f"escape \\{e} is not in the dialect inside a class")

    def cls(self) -> Node:
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        chars: set[str] = set()
        first = True
        while True:
            if self.peek() is None:
                raise self.error("unclosed character class")
            if self.peek() == "]" and not first:
                self.i += 1
                break
            first = False
            if self.src.startswith("\\d", self.i):
                self.i += 2
                chars.update(string.digits)
                continue
            lo = self.class_char()
            if self.peek() == "-" and self.i + 1 < len(self.src) and self.src[self.i + 1] != "]":
                self.i += 1
                hi = self.class_char()
                if ord(hi) < ord(lo):
                    raise self.error(f"bad range {lo!r}-{hi!r}")
                chars.update(chr(x) for x in range(ord(lo), ord(hi) + 1))
            else:
                chars.add(lo)
        out = (ASCII - chars) if negated else frozenset(chars)
        if not out:
            raise self.error("empty character class")
        return Cls(frozenset(out))

    def quantified(self, node: Node) -> Node:
        while True:
            c = self.peek()
            if c == "?":
                lo, hi = 0, 1
            elif c == "*":
                lo, hi = 0, None
            elif c == "+":
                lo, hi = 1, None
            elif c == "{" and (m := re.match(r"\{(\d+)(,(\d*))?\}", self.src[self.i :])):
                lo = int(m.group(1))
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                if hi is not None and hi < lo:
                    raise self.error(f"bad repetition {m.group(0)}")
                self.i += len(m.group(0)) - 1
            else:
                return node
            self.i += 1
            if self.peek() in ("?", "+") and c in "?*+}":
                raise self.error("lazy and possessive repetitions are not in the dialect")
            node = Rep(node, lo, hi)


def parse(regex: str) -> Node:
    """The tree of ``regex`` (a :class:`RegexDialectError` when it is outside the dialect)."""
    p = _Parser(regex)
    node = p.alt()
    if p.i != len(regex):
        raise p.error("unbalanced ')'")
    return node


# --- properties ------------------------------------------------------------------------------------


def width(node: Node) -> tuple[int, int | None]:
    """Shortest and longest match in characters (longest None: unbounded); :class:`Text` counts 0."""
    if isinstance(node, Lit):
        return len(node.text), len(node.text)
    if isinstance(node, Cls):
        return 1, 1
    if isinstance(node, Text):
        return 0, 0
    if isinstance(node, Seq):
        lo, hi = 0, 0  # type: tuple[int, int | None]
        for item in node.items:
            a, b = width(item)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(node, Alt):
        ws = [width(o) for o in node.options]
        highs = [b for _, b in ws]
        return min(a for a, _ in ws), None if None in highs else max(b for b in highs if b is not None)
    a, b = width(node.item)
    return a * node.lo, None if node.hi is None or b is None else b * node.hi


def texts(node: Node) -> int:
    """How many :class:`Text` slots the tree has."""
    if isinstance(node, Text):
        return 1
    if isinstance(node, Seq | Alt):
        return sum(texts(n) for n in (node.items if isinstance(node, Seq) else node.options))
    if isinstance(node, Rep):
        return texts(node.item)
    return 0


# --- rendering -------------------------------------------------------------------------------------


def _regex_char(c: str, in_class: bool) -> str:
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    if c == "\r":
        return "\\r"
    special = "\\]^-[" if in_class else _META
    return "\\" + c if c in special else c


def _ranges(chars: frozenset[str]) -> list[tuple[str, str]]:
    codes = sorted(ord(c) for c in chars)
    out: list[tuple[str, str]] = []
    start = prev = codes[0]
    for x in codes[1:]:
        if x != prev + 1:
            out.append((chr(start), chr(prev)))
            start = x
        prev = x
    out.append((chr(start), chr(prev)))
    return out


def _regex_class(chars: frozenset[str]) -> str:
    parts = [_regex_char(a, True) + ("" if a == b else ("" if ord(b) == ord(a) + 1 else "-") + _regex_char(b, True))
             for a, b in _ranges(chars)]
    return "[" + "".join(parts) + "]"


def to_regex(node: Node, text_max: int = 0) -> str:
    """The canonical regex of the tree (explicit ASCII classes; each :class:`Text` as at most
    ``text_max`` of its characters): what vLLM, llguidance and Python's ``re`` read alike."""
    if isinstance(node, Lit):
        return "".join(_regex_char(c, False) for c in node.text)
    if isinstance(node, Cls):
        return _regex_class(node.chars) if len(node.chars) > 1 else _regex_char(next(iter(node.chars)), False)
    if isinstance(node, Text):
        return f"{_regex_class(node.chars)}{{0,{text_max}}}"
    if isinstance(node, Seq):
        return "".join(f"(?:{to_regex(i, text_max)})" if isinstance(i, Alt) else to_regex(i, text_max)
                       for i in node.items)
    if isinstance(node, Alt):
        return "|".join(to_regex(o, text_max) for o in node.options)
    inner = to_regex(node.item, text_max)
    if not (isinstance(node.item, Cls) or (isinstance(node.item, Lit) and len(node.item.text) == 1)):
        inner = f"(?:{inner})"
    return inner + _count(node)


def _count(node: Rep) -> str:
    """The repetition of ``node`` as ``{m}`` / ``{m,n}`` / ``{m,}`` (the same in regex and GBNF)."""
    if node.hi == node.lo:
        return f"{{{node.lo}}}"
    return f"{{{node.lo},{'' if node.hi is None else node.hi}}}"


def _gbnf_char(c: str, in_class: bool) -> str:
    if c.isalnum() or (c == " " and not in_class) or (c in string.punctuation and c not in '"\\[]-^'):
        return c
    return f"\\x{ord(c):02X}"


def _gbnf(node: Node, text_max: int) -> str:
    if isinstance(node, Lit):
        return '"' + "".join(_gbnf_char(c, False) for c in node.text) + '"' if node.text else '""'
    if isinstance(node, Cls | Text):
        body = "".join(_gbnf_char(a, True) + ("" if a == b else "-" + _gbnf_char(b, True))
                       for a, b in _ranges(node.chars))
        return f"[{body}]" + (f"{{0,{text_max}}}" if isinstance(node, Text) else "")
    if isinstance(node, Seq):
        return "(" + " ".join(_gbnf(i, text_max) for i in node.items) + ")" if node.items else '""'
    if isinstance(node, Alt):
        return "(" + " | ".join(_gbnf(o, text_max) for o in node.options) + ")"
    return _gbnf(node.item, text_max) + _count(node)


def to_gbnf(node: Node, text_max: int = 0) -> str:
    """The tree as a GBNF grammar (llama.cpp; ``root`` is the whole answer)."""
    return f"root ::= {_gbnf(node, text_max)}\n"


def gbnf_from_regex(regex: str) -> str:
    """A dialect regex as a GBNF grammar (what the llama.cpp form of a constraint is made from)."""
    return to_gbnf(parse(regex))
