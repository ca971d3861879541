"""The probability a pairwise judge gives its verdict, read from the logprobs of its answer tokens.

When the backend returns top logprobs (request ``logprobs=True, top_logprobs=K``; ``--option
top_logprobs=5``), the answer position is the generated token that holds the verdict letter: the
token after ``Output (`` in LLMBar's templates ("Output (a)" / "Output (b)"), after ``[RESULT]`` in
Prometheus' relative template ("[RESULT] A" / "[RESULT] B"). At that position the probabilities of
the choices' tokens (surrounding spaces ignored, case-insensitive for LLMBar's letters) are summed
and renormalised over the choices, a choice absent from the top logprobs having probability 0 (as
alpaca_eval's ``logprob_parser`` takes a missing token's logprob as -inf). The probability of the
first-shown response, ``p_first``, travels with the parse result; :func:`p_a` resolves it over
samples and both presentation orders into ``J.p_a`` = P(A is better) (the mean of the orders' P(A),
the shown-second response being A in order ``ba``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalign.judges.parsing import ParseResult

#: LLMBar's answer: the letter after "Output (" (a = the first-shown output)
LLMBAR = (re.compile(r"output\s*\(\s*$", re.IGNORECASE), {"A": ("a",), "B": ("b",)}, True)
#: Prometheus' relative answer: the letter after "[RESULT]" (A = the first-shown response)
PROMETHEUS = (re.compile(r"\[RESULT\]\s*$"), {"A": ("A",), "B": ("B",), "tie": ("TIE",)}, False)


@dataclass(frozen=True)
class ProbParseResult(ParseResult):
    """A :class:`~evalign.judges.parsing.ParseResult` with what the logprobs tell: the probability
    the judge gave the first-shown response (``p_first``, pairwise), or the chosen ``grade``, its
    probability ``p_grade`` and the probability-weighted grade ``expected`` (graded); None where
    the logprobs do not tell."""

    p_first: float | None = None
    grade: float | None = None
    p_grade: float | None = None
    expected: float | None = None


def choice_probabilities(tokens: Sequence[str] | None, top_logprobs: Sequence[Mapping[str, float]] | None,
                         prefix: re.Pattern[str], choices: Mapping[str, Sequence[str]], *,
                         casefold: bool = False, last: bool = False) -> dict[str, float] | None:
    """The probability of each choice at the answer position: the first (``last``: the last)
    generated token whose text, stripped, is one of the choices' tokens and whose preceding text
    ends with ``prefix``; at that position each choice's tokens' probabilities summed (spaces
    stripped; ``casefold``: case ignored) and renormalised over the choices. None when there is no
    such position, no logprobs there, or none of the choices is among them."""
    if not tokens or not top_logprobs:
        return None
    norm = (lambda t: t.strip().casefold()) if casefold else (lambda t: t.strip())
    wanted = {norm(t): c for c, ts in choices.items() for t in ts}
    text, positions = "", []
    for j, tok in enumerate(tokens):
        if norm(tok) in wanted and prefix.search(text):
            positions.append(j)
        text += tok
    if not positions:
        return None
    j = positions[-1] if last else positions[0]
    if j >= len(top_logprobs) or not top_logprobs[j]:
        return None
    mass = dict.fromkeys(choices, 0.0)
    for tok, lp in top_logprobs[j].items():
        c = wanted.get(norm(tok))
        if c is not None and lp is not None and math.isfinite(lp):
            mass[c] += math.exp(lp)
    total = sum(mass.values())
    if total <= 0:
        return None
    return {c: v / total for c, v in mass.items()}


def first_shown_probability(choice: Mapping[str, Any], style: tuple[re.Pattern[str], Mapping[str, Sequence[str]], bool],
                            *, last: bool = False) -> float | None:
    """P(the first-shown response is better) from one generated choice (a dict with ``tokens`` and
    ``top_logprobs``) in the answer format ``style`` (:data:`LLMBAR` or :data:`PROMETHEUS`)."""
    prefix, choices, casefold = style
    probs = choice_probabilities(choice.get("tokens"), choice.get("top_logprobs"), prefix, choices,
                                 casefold=casefold, last=last)
    return None if probs is None else probs["A"]


def with_probability(result: ParseResult, p_first: float | None = None, *, grade: float | None = None,
                     p_grade: float | None = None, expected: float | None = None) -> ParseResult:
    """``result`` carrying what the logprobs tell (unchanged when they tell nothing or the result
    has no value)."""
    if not result.ok or (p_first is None and p_grade is None and expected is None):
        return result
    return ProbParseResult(result.value, result.reason, result.detail, result.feedback, dict(result.ratings),
                           result.position, result.cut, p_first=p_first, grade=grade, p_grade=p_grade,
                           expected=expected)


def grade_columns(results: Sequence[ParseResult]) -> dict[str, float]:
    """``J.p`` (mean over samples of the probability of the chosen grade), ``J.expected`` (mean of
    the probability-weighted grades) and ``J.grade`` (the first sample's chosen grade), from the
    results that carry them; {} when none does."""
    got = [r for r in results if getattr(r, "p_grade", None) is not None]
    if not got:
        return {}
    return {"p": sum(r.p_grade for r in got) / len(got),  # type: ignore[attr-defined]
            "expected": sum(r.expected for r in got) / len(got),  # type: ignore[attr-defined]
            "grade": got[0].grade}  # type: ignore[attr-defined]


def p_a(results: Mapping[tuple[int, str], ParseResult], orders: Sequence[str], samples: int) -> float | None:
    """``J.p_a``: P(response A is better), the mean over samples and presentation orders of each
    call's P(A) (order ``ab``: ``p_first``; order ``ba``: ``1 - p_first``); None when no call has one."""
    vals = []
    for s in range(samples):
        for order in orders:
            r = results.get((s, order))
            p = getattr(r, "p_first", None)
            if p is not None:
                vals.append(p if order != "ba" else 1.0 - p)
    return sum(vals) / len(vals) if vals else None


def grade_probability(probs: Mapping[int, float] | None, grade: float | None) -> tuple[float | None, float | None]:
    """From a grade distribution ``{grade: probability}`` (not necessarily normalised) and the
    chosen ``grade``: (``J.p``, the probability of the chosen grade, renormalised; ``J.expected``,
    the probability-weighted grade). (None, None) when there is no distribution."""
    total = sum(probs.values()) if probs else 0.0
    if not probs or total <= 0:
        return None, None
    p = probs.get(int(grade), 0.0) / total if grade is not None else None
    return p, sum(k * v for k, v in probs.items()) / total


__all__ = ["LLMBAR", "PROMETHEUS", "ProbParseResult", "choice_probabilities", "first_shown_probability",
           "grade_columns", "grade_probability", "p_a", "with_probability"]
