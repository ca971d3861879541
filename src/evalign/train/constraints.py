"""Explicit, mechanically checkable constraints of an instruction, and responses that break them.

``judge-data contrastive`` pairs a good response with *the same response* made to break the explicit
constraint its instruction states, where a rule can check the constraint (:func:`find_constraint`):

* ``max_words`` / ``min_words``: "in 50 words or less", "no more than 100 words", "at least 200 words";
  broken by repeating the response until it is over the limit / cutting it under the minimum;
* ``sentences``: "in two sentences", "in one sentence" (exactly ``n``); broken by dropping the last
  sentence (``n`` >= 2) or splitting the one sentence at its first comma or semicolon (``n`` = 1);
* ``items``: "list five ...", "give me 3 examples" (a list of exactly ``n`` lines); broken by dropping
  the last item;
* ``json``: "in JSON format" (the response, outside a code fence, parses as a JSON object or array);
  broken by writing the same content as ``key: value`` lines;
* ``bullets`` / ``numbered``: "as a bullet list", "in a numbered list" (at least two such lines); broken
  by joining the items into one paragraph.

:func:`satisfies` is the check; :func:`broken` returns the changed response only when the check holds
for the original and fails for the change (so a row never claims a break it does not make).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

#: number words the rules read (and digits)
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
           "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20}
_NUM = r"(\d{1,4}|" + "|".join(NUMBERS) + r")"
#: what a list item may be called after "list five ..."
_NOUNS = (r"(?:items|examples|ideas|ways|tips|reasons|things|steps|points|names|questions|facts|benefits|"
          r"suggestions|options|words|sentences|places|books|movies|songs|countries|cities|foods|activities|"
          r"strategies|methods|techniques|features|advantages|disadvantages|tools|skills|topics|titles|uses)")
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("max_words", re.compile(r"\b(?:no more than|not more than|at most|a maximum of|maximum of|up to|within|under|"
                             r"less than|fewer than)\s+" + _NUM + r"\s+words\b", re.I)),
    ("max_words", re.compile(r"\b" + _NUM + r"\s+words\s+or\s+(?:less|fewer)\b", re.I)),
    ("min_words", re.compile(r"\b(?:at least|no less than|no fewer than|a minimum of|minimum of)\s+" + _NUM
                             + r"\s+words\b", re.I)),
    ("sentences", re.compile(r"\b(?:in|using|with|into)\s+(?:exactly\s+|just\s+|only\s+)?" + _NUM
                             + r"\s+sentences?\b", re.I)),
    ("items", re.compile(r"\b(?:list|give|name|provide|suggest|generate|brainstorm|come up with|write down|"
                         r"enumerate)\b(?:\s+(?:me|us|the|top|some|out))*\s+" + _NUM + r"\s+(?:[\w-]+\s+){0,2}?"
                         + r"(?:" + _NOUNS + r"|[a-z-]{3,}s)\b", re.I)),
    ("json", re.compile(r"\bjson\b", re.I)),
    ("bullets", re.compile(r"\bbullet(?:ed)?[\s-]*(?:points?|list|form)\b|\bas bullets\b|\bin bullets\b", re.I)),
    ("numbered", re.compile(r"\bnumbered list\b", re.I)),
)
_BULLET = re.compile(r"^\s*[-*\u2022]\s+\S")
_NUMBERED = re.compile(r"^\s*\d{1,3}[.)]\s+\S")
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n\s*```\s*$", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


@dataclass(frozen=True)
class Constraint:
    """An explicit constraint of an instruction: ``kind`` (see the module doc) and ``n`` (the number
    it states; 0 for formats)."""

    kind: str
    n: int = 0

    def describe(self) -> str:
        """``kind`` and ``n`` as one token (``max_words=50``, ``json``)."""
        return f"{self.kind}={self.n}" if self.n else self.kind


def _number(text: str) -> int:
    t = text.lower()
    return NUMBERS[t] if t in NUMBERS else int(t)


def find_constraint(instruction: str) -> Constraint | None:
    """The first constraint of :data:`_RULES` that ``instruction`` states, or None. Counts outside
    sensible ranges (a list of 1 or over 20 items, a limit of under 5 words) are not read as constraints."""
    for kind, rule in _RULES:
        m = rule.search(instruction)
        if m is None:
            continue
        n = _number(m.group(1)) if m.groups() else 0
        if kind in ("max_words", "min_words") and n < 5:
            continue
        if kind == "max_words" and re.search(r"\b(?:less|fewer) than\s*$|\bunder\s*$",
                                             instruction[:m.start(1)].rstrip(), re.I):
            n -= 1  # "under 50 words": at most 49
        if kind == "items" and not 2 <= n <= 20:
            continue
        if kind == "sentences" and not 1 <= n <= 10:
            continue
        return Constraint(kind, n)
    return None


def words(text: str) -> int:
    """Words of ``text`` (whitespace-separated tokens)."""
    return len(text.split())


def sentences(text: str) -> list[str]:
    """The sentences of ``text``: split after ``.``, ``!`` or ``?`` (and closing quotes or brackets)
    followed by white space; empty pieces dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def list_lines(text: str, pattern: re.Pattern[str] | None = None) -> list[str]:
    """The lines of ``text`` that are list items (bullets ``-``, ``*``, ``•`` or numbers ``1.`` / ``1)``;
    only the given ``pattern`` when set)."""
    pats = (pattern,) if pattern is not None else (_BULLET, _NUMBERED)
    return [ln for ln in text.splitlines() if any(p.match(ln) for p in pats)]


def json_value(text: str) -> Any:
    """The JSON object or array ``text`` holds (alone, or as the only content of a code fence), or None."""
    t = text.strip()
    m = _FENCE.match(t)
    if m:
        t = m.group(1).strip()
    if not t.startswith(("{", "[")):
        return None
    try:
        value = json.loads(t)
    except ValueError:
        return None
    return value if isinstance(value, dict | list) and value else None


def satisfies(constraint: Constraint, response: str) -> bool:
    """Whether ``response`` meets ``constraint`` as the rule checks it."""
    k, n = constraint.kind, constraint.n
    if k == "max_words":
        return 0 < words(response) <= n
    if k == "min_words":
        return words(response) >= n
    if k == "sentences":
        return len(sentences(response)) == n
    if k == "items":
        return len(list_lines(response)) == n
    if k == "json":
        return json_value(response) is not None
    if k == "bullets":
        return len(list_lines(response, _BULLET)) >= 2
    if k == "numbered":
        return len(list_lines(response, _NUMBERED)) >= 2
    raise ValueError(f"unknown constraint kind {k!r}")


def _strip_marker(line: str) -> str:
    return re.sub(r"^\s*(?:[-*\u2022]|\d{1,3}[.)])\s+", "", line).strip()


def _as_paragraph(text: str, pattern: re.Pattern[str] | None) -> str:
    """The list items of ``text`` joined into one paragraph (each item ends with a full stop)."""
    out: list[str] = []
    items: list[str] = []
    for ln in text.splitlines():
        if list_lines(ln, pattern):
            item = _strip_marker(ln)
            items.append(item if item.endswith((".", "!", "?", ":", ";")) else item + ".")
        elif ln.strip():
            if items:
                out.append(" ".join(items))
                items = []
            out.append(ln.strip())
    if items:
        out.append(" ".join(items))
    return "\n\n".join(out)


def _as_lines(value: Any, indent: str = "") -> list[str]:
    """A JSON value as plain ``key: value`` lines (no braces, brackets or quotes)."""
    out: list[str] = []
    pairs = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    for k, v in pairs:
        head = f"{indent}{k}:" if k is not None else f"{indent}"
        if isinstance(v, dict | list):
            if k is not None:
                out.append(head)
            out += _as_lines(v, indent + "  ")
        else:
            out.append(f"{head} {v}".rstrip() if k is not None else f"{indent}{v}")
    return out


def _break(constraint: Constraint, response: str) -> str | None:
    k, n = constraint.kind, constraint.n
    text = response.strip()
    if k == "max_words":
        times = n // max(words(text), 1) + 1
        return "\n\n".join([text] * times)
    if k == "min_words":
        return " ".join(text.split()[: max(n // 2, 1)])
    if k == "sentences":
        parts = sentences(text)
        if n >= 2:
            return " ".join(parts[:-1])
        m = re.search(r"[,;]\s+(\w)", text)
        if m is None:
            return None
        first = text[: m.start()].rstrip() + "."
        return f"{first} {m.group(1).upper()}{text[m.start(1) + 1:]}"
    if k == "items":
        lines = text.splitlines()
        last = max(i for i, ln in enumerate(lines) if list_lines(ln))
        return "\n".join(lines[:last] + lines[last + 1:]).strip()
    if k == "json":
        return "\n".join(_as_lines(json_value(text)))
    if k == "bullets":
        return _as_paragraph(text, _BULLET)
    if k == "numbered":
        return _as_paragraph(text, _NUMBERED)
    raise ValueError(f"unknown constraint kind {k!r}")


def broken(constraint: Constraint, response: str) -> str | None:
    """``response`` changed so that it breaks ``constraint`` (see the module doc), or None when the
    original does not meet the constraint, the rule cannot break it, or the change still meets it."""
    if not satisfies(constraint, response):
        return None
    out = _break(constraint, response)
    if not out or not out.strip() or satisfies(constraint, out) or out.strip() == response.strip():
        return None
    return out
