"""``geval`` (mode ``geval``): G-Eval style overall quality on the Self-Instruct 1-4 scale (1 best,
so ``higher_is_better = False``). With top logprobs the score is the probability-weighted mean over the
tokens ``"1".."4"`` at the score position (renormalised over those found); without, the grade of each
sample, averaged over ``samples``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from evalign.errors import EvalignError
from evalign.judges.base import SingleJudge, numeric_columns, register_judge
from evalign.judges.logprobs import grade_columns, grade_probability, with_probability
from evalign.judges.parsing import ParseResult, mask_echo, parse_grade, unscored

#: G-Eval's default minimum total probability of the score tokens at the score position
GEVAL_MIN_MASS = 0.5
GEVAL_FALLBACKS = ("samples", "error")


@register_judge
class GEval(SingleJudge):
    """G-Eval overall quality on the Self-Instruct 1-4 scale (1 best), SemScore Appendix A.3 prompt.

    With top logprobs the score is ``sum(p_i * i) / sum(p_i)`` over the tokens ``"1".."4"`` at the score
    position (method ``logprobs``); when their total probability ``sum(p_i)`` is below ``min_mass``
    (default 0.5) the row is unscored ``low_mass`` (the judge did not mean a score there; also when the
    answer was constrained to the score, shape ``[1-4]``: the constraint makes the answer readable,
    not the judge sure). A server that
    returns no logprobs: ``fallback="samples"`` (default) reads the sampled integer (method ``samples``;
    counted in the summary and recorded in the signature), ``fallback="error"`` leaves the row unscored
    ``no_logprobs``.
    """

    name = "geval"
    mode = "geval"
    description = "G-Eval overall quality (SemScore A.3), 1 (valid, satisfying) - 4 (irrelevant, invalid); lower is better"
    higher_is_better = False
    scale = (1, 4)
    default_template = "geval"
    sampling_defaults: ClassVar[dict[str, Any]] = {
        "temperature": 1.0,
        "top_p": 1.0,
        "max_tokens": 64,
        "logprobs": True,
        "top_logprobs": 10,
    }

    def __init__(self, *, fallback: str = "samples", min_mass: float = GEVAL_MIN_MASS, **kw: Any) -> None:
        if fallback not in GEVAL_FALLBACKS:
            raise EvalignError(f"G-Eval fallback must be one of {', '.join(GEVAL_FALLBACKS)}, got {fallback!r}")
        if not 0.0 <= float(min_mass) <= 1.0:
            raise EvalignError(f"G-Eval min_mass must be in [0, 1], got {min_mass}")
        self.fallback = fallback
        self.min_mass = float(min_mass)
        super().__init__(**kw)

    def extra_options(self) -> dict[str, Any]:
        return {"fallback": self.fallback, "min_mass": self.min_mass}

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        choice = gen["choices"][0]
        text = choice.get("text") or ""
        res = parse_geval(text, choice.get("finish_reason"), self.scale, prompt=prompt)
        if not res.ok:
            return res
        tops = choice.get("top_logprobs")
        if not tops or not self.sampling.get("logprobs"):
            if self.sampling.get("logprobs") and self.fallback == "error":
                return unscored("no_logprobs", feedback=res.feedback)
            return ParseResult(res.value, None, "samples", res.feedback, position=res.position)
        found = score_token_probabilities(text, choice.get("tokens"), tops, res, self.scale)
        if found is None:
            if self.fallback == "error":
                return unscored("no_logprobs", "no logprobs at the score position", res.feedback)
            return ParseResult(res.value, None, "samples", res.feedback, position=res.position)
        total = sum(found.values())
        if total < self.min_mass:
            return unscored("low_mass", f"score tokens' probability {total:.3g} < {self.min_mass:g}", res.feedback)
        weighted = sum(k * p for k, p in found.items()) / total
        p_grade, expected = grade_probability(found, res.score)
        return with_probability(ParseResult(weighted, None, "logprobs", res.feedback), grade=res.score,
                                p_grade=p_grade, expected=expected)

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        ordered = [results[k] for k in sorted(results)]
        out = numeric_columns(ordered, self.samples)
        out.update(grade_columns(ordered))  # J.p, J.expected, J.grade: the grade distribution, with logprobs
        methods = {r.detail for r in ordered if r.ok}
        out["method"] = None if not methods else methods.pop() if len(methods) == 1 else "mixed"
        return out

    def run_options(self, columns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        used = sorted({c.get("method") for c in columns if c.get("method")})
        return {"method": "+".join(used) if used else "none"}

    def run_notes(self, columns: Sequence[Mapping[str, Any]]) -> list[str]:
        """One note when logprobs were asked and some rows had none (a backend that returns none, such as
        Claude's): how many rows fell back to the sampled grade, or were left unscored ``no_logprobs``."""
        if not self.sampling.get("logprobs"):
            return []
        sampled = sum(1 for c in columns if c.get("method") in ("samples", "mixed"))
        refused = sum(1 for c in columns if c.get("reason") == "no_logprobs")
        if not sampled and not refused:
            return []
        what = (f"{sampled} of {len(columns)} rows read the sampled grade instead (--geval-fallback samples)"
                if sampled else f"{refused} of {len(columns)} rows left unscored no_logprobs (--geval-fallback error)")
        return [f"G-Eval: the backend returned no logprobs at the score position (Claude returns none): {what}; "
                "their J.p / J.expected stay empty"]


def parse_geval(
    text: str, finish_reason: str | None, scale: tuple[int, int] = (1, 4), prompt: str | None = None
) -> ParseResult:
    """A G-Eval answer: a number that opens the output and ends its line or is followed by a comma
    (``"2"``, ``"- Overall quality: 2"``, ``"2.\\n\\nThe response ..."``), else the end-of-output
    rules of :func:`parse_grade`. A number followed by text on its line (``"1. Read the ..."``, a
    copied list or scale line) is not an answer; lines copied from ``prompt`` never count."""
    if finish_reason != "length":
        masked = mask_echo(text, prompt)
        m = re.match(
            r"\s*(?:-\s*)?(?:Overall(?:\s+quality)?\s*:\s*)?[\(\[\*]*\s*(?P<n>\d+(?:\.\d+)?)\s*[\)\]\*]*"
            r"(?=[ \t]*(?:$|\n|,)|\.[ \t]*(?:$|\n))",
            text,
            re.IGNORECASE,
        )
        if m and masked[m.start("n")] == text[m.start("n")]:  # not on an echoed line
            v = m.group("n")
            lo, hi = scale
            if float(v) != int(float(v)):
                return unscored("not_integer", f"score {v} is not an integer")
            if not lo <= int(float(v)) <= hi:
                return unscored("out_of_range", f"score {v} outside {lo}-{hi}")
            return ParseResult(float(int(float(v))), None, "", text[m.end() :].strip(), position=m.start("n"))
    return parse_grade(text, "geval", finish_reason, scale=scale, prompt=prompt)


def score_token_probabilities(
    text: str,
    tokens: Sequence[str] | None,
    top_logprobs: Sequence[Mapping[str, float]],
    parsed: ParseResult,
    scale: tuple[int, int] = (1, 4),
) -> dict[int, float] | None:
    """The probability of each score token at the score position: ``{score: p}`` over the integer
    tokens of the scale found in the top logprobs there (surrounding spaces ignored, equal tokens
    summed; probabilities, not renormalised). None when the position is not found.

    The score position is the generated token that holds the parsed score digit (located by the
    character offset of the score when the tokens spell the text, else the first token whose text
    is that digit).
    """
    if parsed.score is None:
        return None
    digit = str(int(parsed.score))
    pos: int | None = None
    if tokens and parsed.position is not None and "".join(tokens) == text:
        acc = 0
        for j, t in enumerate(tokens):
            if acc <= parsed.position < acc + len(t):
                pos = j
                break
            acc += len(t)
    if pos is None and tokens:
        pos = next((j for j, t in enumerate(tokens) if t.strip() == digit), None)
    if pos is None or pos >= len(top_logprobs):
        return None
    probs: dict[int, float] = {}
    lo, hi = scale
    for tok, lp in top_logprobs[pos].items():
        s = tok.strip()
        if s.isdigit() and lo <= int(s) <= hi and len(s) == 1 and lp is not None and math.isfinite(lp):
            probs[int(s)] = probs.get(int(s), 0.0) + math.exp(lp)
    return probs


def logprob_weighted_score(
    text: str,
    tokens: Sequence[str] | None,
    top_logprobs: Sequence[Mapping[str, float]],
    parsed: ParseResult,
    scale: tuple[int, int] = (1, 4),
) -> float | None:
    """G-Eval's probability-weighted score at the score position: over
    :func:`score_token_probabilities`, renormalised to sum to 1, ``sum(p_i * i)``; None when the
    position or no score token is found."""
    probs = score_token_probabilities(text, tokens, top_logprobs, parsed, scale)
    total = sum(probs.values()) if probs else 0.0
    if not probs or total <= 0:
        return None
    return sum(k * p for k, p in probs.items()) / total
