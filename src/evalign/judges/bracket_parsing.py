"""Reading MT-Bench's and Arena-Hard's bracketed answers: ``[[rating]]``, ``[[A]]`` / ``[[B]]`` /
``[[C]]`` and ``[[A>>B]]`` ... ``[[B>>A]]``.

Upstream parses them so (the floor of these parsers):

* FastChat ``fastchat/llm_judge/common.py``, ``run_judge_single``: the rating is the FIRST match of
  ``\\[\\[(\\d+\\.?\\d*)\\]\\]``, else the first of ``\\[(\\d+\\.?\\d*)\\]``, read with ``ast.literal_eval``;
  none gives -1 (an error). ``run_judge_pair``: ``"[[A]]" in judgment`` gives A, else ``"[[B]]"`` B,
  else ``"[[C]]"`` a tie, else an error.
* Arena-Hard (``lmarena/arena-hard-auto`` ``gen_judgment.py`` ``get_score``; JudgeBench's
  ``ArenaHard`` copies it): the distinct matches of ``\\[\\[([AB<>=]+)\\]\\]``: none - ask once more
  ("continue your judgment and finish by outputting a final verdict label"; evalign's ``--reask``),
  one - that label, several - no verdict. The decision is the label with ``>>`` read as ``>``.

evalign's rules on top (as every evalign parser: never a guess, see :mod:`evalign.judges.parsing`):

* An output cut off at ``max_tokens`` is unscored ``truncated``; an empty one ``empty``.
* Text copied from the prompt never counts. Masked first: an output line equal to a whole line of the
  prompt (at least :data:`~evalign.judges.parsing.ECHO_MIN_CHARS` characters: ``1. Assistant A is
  significantly better: [[A>>B]]`` as the prompt numbers it), and the prompt's own format phrases
  (MT-Bench: ``"[[A]]" if assistant A is better, "[[B]]" if ...``, ``for example: "Rating: [[5]]"``;
  Arena-Hard: ``Example output: "My final verdict is tie: [[A=B]]"`` and its list of the five labelled
  choices when two or more of them are copied). A line copied only in part is an answer: ``Rating:
  [[5]]`` is a 5, and ``Assistant A is significantly better: [[A>>B]]`` (one choice, unnumbered) an A.
* Several different values are ``conflicting`` (upstream takes the first rating, and A before B
  before C), a rating outside 1-10 is ``out_of_range``, an Arena-Hard label that is not one of the
  five is ``unknown_label``.

So where upstream reads one value from a text without copied prompt text, these parsers read the same
(``tests/judges/test_bracket_parsing.py`` checks it on generated texts against upstream's own code).
Verdicts are in the order the answers were SHOWN (``A`` = the first shown).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evalign.judges.parsing import ECHO_MIN_CHARS, ParseResult, clean_output, unscored

#: MT-Bench's rating scale (FastChat's single-answer grading prompts: "on a scale of 1 to 10")
RATING_SCALE = (1, 10)
#: FastChat's patterns (``one_score_pattern`` and its backup)
RATING_RE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
RATING_BACKUP_RE = re.compile(r"\[(\d+\.?\d*)\]")
#: MT-Bench's pairwise answers -> verdicts, in upstream's order of precedence
PAIR_TOKENS = {"[[A]]": "A", "[[B]]": "B", "[[C]]": "tie"}
#: Arena-Hard's pattern (``regex_pattern`` of its judge config)
ARENA_RE = re.compile(r"\[\[([AB<>=]+)\]\]")
#: Arena-Hard's five labels -> verdict (A / B / tie) and strength (2 = significantly, 1 = slightly)
ARENA_LABELS = {"A>>B": ("A", 2), "A>B": ("A", 1), "A=B": ("tie", 0), "B>A": ("B", 1), "B>>A": ("B", 2)}
#: Arena-Hard's list of choices (its system prompt), masked when two or more of them are copied
ARENA_CHOICES = (
    "Assistant A is significantly better: [[A>>B]]",
    "Assistant A is slightly better: [[A>B]]",
    "Tie, relatively the same: [[A=B]]",
    "Assistant B is slightly better: [[B>A]]",
    "Assistant B is significantly better: [[B>>A]]",
)
#: the format phrases of each prompt, masked wherever they are copied
PHRASES = {
    "mtbench_rating": ('for example: "Rating: [[5]]"', '"[[rating]]"'),
    "mtbench_verdict": ('"[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" for a tie',),
    "arena_hard": ('Example output: "My final verdict is tie: [[A=B]]"',),
}
STYLES = tuple(PHRASES)


def _blank(m: re.Match[str]) -> str:
    return " " * len(m.group(0))


def mask_copied(text: str, prompt: str | None, phrases: Sequence[str]) -> str:
    """``text`` with copied prompt text blanked out (same length, offsets stay valid): each line equal
    to a whole prompt line of at least ``ECHO_MIN_CHARS`` characters, and every occurrence of ``phrases``."""
    if prompt:
        prompt_lines = {s for s in (ln.strip() for ln in prompt.split("\n")) if len(s) >= ECHO_MIN_CHARS}
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if line.strip() in prompt_lines:
                lines[i] = " " * len(line)
        text = "\n".join(lines)
    for phrase in phrases:
        text = re.sub(re.escape(phrase).replace(r"\ ", r"\s+"), _blank, text)
    return text


def _mask_arena_choices(text: str) -> str:
    """Arena-Hard's choice lines blanked when two or more different ones are in ``text`` (a copy of
    the list, not an answer)."""
    found = {c for c in ARENA_CHOICES if c in text}
    if len(found) < 2:
        return text
    for c in found:
        text = re.sub(r"(?:\d\.\s*)?" + re.escape(c), _blank, text)
    return text


def parse_bracketed(text: str | None, finish_reason: str | None = None, *, style: str,
                    prompt: str | None = None) -> ParseResult:
    """Read one answer of ``style`` ``mtbench_rating`` (a 1-10 score), ``mtbench_verdict`` (``A`` /
    ``B`` / ``tie``) or ``arena_hard`` (``A`` / ``B`` / ``tie``; ``detail`` = the label, e.g.
    ``A>>B``). ``prompt``: the text the judge was shown (copied lines are masked). See the module doc."""
    if style not in PHRASES:
        raise ValueError(f"unknown style {style!r} (known: {', '.join(STYLES)})")
    if finish_reason == "length":
        return unscored("truncated", feedback=(text or "").strip())
    clean = clean_output(text or "")
    if not clean:
        return unscored("empty")
    masked = mask_copied(clean, prompt, PHRASES[style])
    if style == "arena_hard":
        masked = _mask_arena_choices(masked)
        return _arena(clean, masked)
    if style == "mtbench_verdict":
        return _verdict(clean, masked)
    return _rating(clean, masked)


def _rating(clean: str, masked: str) -> ParseResult:
    hits = list(RATING_RE.finditer(masked)) or list(RATING_BACKUP_RE.finditer(masked))
    if not hits:
        return unscored("no_score", feedback=clean)
    values = {float(m.group(1)) for m in hits}
    feedback = clean[: hits[-1].start()].strip()
    if len(values) > 1:
        return unscored("conflicting", "several ratings: " + ", ".join(m.group(1) for m in hits), feedback)
    value = values.pop()
    lo, hi = RATING_SCALE
    if not lo <= value <= hi:
        return unscored("out_of_range", f"rating {hits[-1].group(1)} outside {lo}-{hi}", feedback)
    return ParseResult(value, None, "", feedback, position=hits[-1].start(1))


def _verdict(clean: str, masked: str) -> ParseResult:
    hits = sorted((m.start(), tok) for tok in PAIR_TOKENS for m in re.finditer(re.escape(tok), masked))
    if not hits:
        return unscored("no_score", feedback=clean)
    feedback = clean[: hits[-1][0]].strip()
    verdicts = {PAIR_TOKENS[tok] for _, tok in hits}
    if len(verdicts) > 1:
        return unscored("conflicting", "several verdicts: " + ", ".join(tok for _, tok in hits), feedback)
    return ParseResult(verdicts.pop(), None, "", feedback, position=hits[-1][0])


def _arena(clean: str, masked: str) -> ParseResult:
    hits = [m for m in ARENA_RE.finditer(masked) if m.group(1)]
    if not hits:
        return unscored("no_score", feedback=clean)
    feedback = clean[: hits[-1].start()].strip()
    labels = {m.group(1) for m in hits}
    if len(labels) > 1:
        return unscored("conflicting", "several labels: " + ", ".join(m.group(1) for m in hits), feedback)
    label = labels.pop()
    if label not in ARENA_LABELS:
        return unscored("unknown_label", f"[[{label}]] is not one of {', '.join(ARENA_LABELS)}", feedback)
    return ParseResult(ARENA_LABELS[label][0], None, label, feedback, position=hits[-1].start())


__all__ = ["ARENA_CHOICES", "ARENA_LABELS", "PAIR_TOKENS", "PHRASES", "RATING_SCALE", "STYLES", "mask_copied",
           "parse_bracketed"]
