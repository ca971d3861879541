"""Judge output -> a grade, or an explicit *unscored* result with the reason. Never a guess.

Rules (shared by every mode):

* An output cut off at ``max_tokens`` (``finish_reason == "length"``) is unscored (``truncated``):
  the judge never finished, so whatever number it wrote may not be its final one.
* Text the judge copied from the prompt never counts. Masking is done on the WHOLE output before
  anything else (so it does not depend on a character window): every output line of at least
  :data:`ECHO_MIN_CHARS` characters that occurs in the prompt (when the prompt is given: the
  runner always gives it), the known phrases of the built-in prompts (``(an integer number between
  1 and 5)``, ``a score of 5``, ``A score of 1 means``, ...), and rubric lines ``Score 1: ...``.
  A number followed by ``:`` (a rubric line), by a range (``1-5``, ``1 to 5``) or by more digits or
  letters never counts.
* Only the END of the output is then searched: the last :data:`TAIL_CHARS` characters (widened to
  the start of their first line). A score written early and then followed by a long text is not
  the judge's final word.
* The exact format (``[RESULT] 4``) is tried first; the usual variants (``[SCORE 5]``,
  ``Score: 4 out of 5``, ``So the overall score is 3``, ``[RESULT]: 4``, ``[RESULT] (4)``) next.
* Several different final values, a value off the scale, a fraction, a scale other than the
  judge's (``8/10``), or no value at all give *unscored* with a reason code
  (see :data:`REASONS`).

``parse_grade(text, mode)`` with mode ``absolute`` (1-5), ``relative`` (A / B, tie optional),
``geval`` (1-4) or ``criteria`` (JSON with three 1-3 ratings).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

#: how many characters at the end of the output are searched for the final grade
TAIL_CHARS = 200
#: an output line at least this long (stripped) that occurs in the prompt is an echo and is masked
ECHO_MIN_CHARS = 8

#: reason codes of unscored results
REASONS: dict[str, str] = {
    "truncated": "output cut off at max_tokens (finish_reason=length)",
    "empty": "empty output",
    "blocked": "the provider blocked the prompt or the answer (finish_reason=content_filter: a safety, recitation "
               "or block-list stop, or a refusal)",
    "no_score": "no final score near the end of the output",
    "out_of_range": "the score is outside the scale",
    "not_integer": "the score is not an integer",
    "wrong_scale": "the score is given on another scale (e.g. out of 10)",
    "conflicting": "several different final scores",
    "rubric_levels_listed": "the output lists the scale's levels ([Score 1][Score 2][Score 3] ...), not one grade",
    "tie_not_allowed": "the judge answered tie, but ties were not offered",
    "invalid_json": "no JSON object near the end of the output",
    "missing_field": "a rating is missing from the JSON object",
    "invalid_value": "a rating in the JSON object is not an integer on the scale",
    "backend_error": "the backend failed after its retries (not cached: the next run tries again)",
    "parser_error": "the parser failed on this output (a bug: the text is kept in the feedback column)",
    "low_mass": "G-Eval: the score tokens' total probability at the score position is below --geval-min-mass",
    "no_logprobs": "G-Eval: the server returned no logprobs and --geval-fallback error was given",
    "self_evaluation": "the row's system matches --skip-self (a judge does not grade its own model family)",
    "unknown_label": "the verdict label is not one the prompt offers (e.g. [[A<B]] where [[B>A]] is asked)",
}

MODES = ("absolute", "relative", "geval", "criteria")

#: the criteria rated by the ``criteria`` judge, each on 1..3
CRITERIA = ("naturalness", "relatedness", "correctness")


@dataclass(frozen=True)
class ParseResult:
    """What one judge output says.

    ``value``: the score (float, absolute / geval / criteria) or the verdict (``"A"``, ``"B"``,
    ``"tie"``; relative), or None when unscored. ``reason``: None when a value was read, else a
    code from :data:`REASONS`; ``detail`` says more (e.g. the values that conflicted).
    ``feedback``: the judge's text before the final grade. ``ratings``: per-criterion ratings
    (criteria mode). ``position``: where the grade starts in the output.
    """

    value: float | str | None
    reason: str | None = None
    detail: str = ""
    feedback: str = ""
    ratings: dict[str, int] = field(default_factory=dict)
    #: character offset of the grade in the output (None when unknown)
    position: int | None = None
    #: the output was cut off at max_tokens after the grade was complete (an answer that comes first)
    cut: bool = False

    @property
    def ok(self) -> bool:
        """True when a grade was read."""
        return self.value is not None

    @property
    def score(self) -> float | None:
        """The numeric score, or None (unscored or a verdict)."""
        return self.value if isinstance(self.value, float) else None

    @property
    def verdict(self) -> str | None:
        """The verdict ``"A"``, ``"B"`` or ``"tie"`` (relative mode), or None."""
        return self.value if isinstance(self.value, str) else None


def unscored(reason: str, detail: str = "", feedback: str = "") -> ParseResult:
    """An unscored result with a reason code from :data:`REASONS`."""
    if reason not in REASONS:
        raise ValueError(f"unknown reason code {reason!r}")
    return ParseResult(None, reason, detail or REASONS[reason], feedback)


# --- the end of the output -------------------------------------------------------------------

#: phrases of the built-in prompts that an echoing judge may copy; masked before matching
_PROMPT_ECHOES = (
    r"\(an integer number between 1 and 5\)",
    r"an integer (?:number )?between 1 and 5",
    r"a score of 5",
    r"\bscore of \d+ means\b",
    r"scale of 1-\d+",
    r"\(Score 5\)",
    r"\(A or B\)",
    r"\(A, B or TIE\)",
    r"between 1 and 4",
    r"\(1-4\)",
    r"\(1-3\)",
    r"an integer from 1 to 3",
)
_ECHO_RE = re.compile("|".join(_PROMPT_ECHOES), re.IGNORECASE)
#: a rubric line such as "Score 4: The response ..." (copied from the prompt)
_RUBRIC_LINE_RE = re.compile(r"^\s*Score\s+\d+\s*:.*$", re.IGNORECASE | re.MULTILINE)
#: end-of-sequence tokens some servers leave in the text
_EOS_RE = re.compile(r"(?:</s>|<\|im_end\|>|<\|eot_id\|>|<\|endoftext\|>|<eos>|<end_of_turn>)\s*$")


def _tail(text: str, n: int = TAIL_CHARS) -> tuple[str, int]:
    """The last ``n`` characters of ``text`` (widened to the start of their line if that is
    within 80 more characters) and the offset where they start."""
    start = max(0, len(text) - n)
    if start > 0:
        nl = text.rfind("\n", 0, start)
        if nl >= 0 and start - nl <= 80:
            start = nl + 1
    return text[start:], start


def mask_echo(text: str, prompt: str | None = None) -> str:
    """Blank out echoed prompt lines, known prompt phrases and rubric lines (same length, so
    offsets stay valid). ``prompt``: the text the judge was shown (all messages joined)."""

    def blank(m: re.Match[str]) -> str:
        return " " * len(m.group(0))

    if prompt:
        lines = text.split("\n")
        for i, line in enumerate(lines):
            s = line.strip()
            if len(s) >= ECHO_MIN_CHARS and s in prompt:
                lines[i] = " " * len(line)
        text = "\n".join(lines)
    return _RUBRIC_LINE_RE.sub(blank, _ECHO_RE.sub(blank, text))


def _clean(text: str) -> str:
    return _EOS_RE.sub("", text.rstrip()).rstrip()


def clean_output(text: str) -> str:
    """An output without trailing spaces and the end-of-sequence tokens some servers leave in it."""
    return _clean(text)


# --- numeric scores ------------------------------------------------------------------------------

_NUM = r"(?P<n>-?\d+(?:\.\d+)?)"
_DEN = r"(?:\s*(?:/|out\s+of)\s*(?P<d>\d+))?"
#: a number must not be followed by ":", a range ("1-5", "1 to 5") or more digits / letters
#: (a rubric line, "4th", "3x")
_AFTER = r"(?!\s*:)(?!\s*(?:-|\u2013|to)\s*\d)(?![\w.]*\w)"
#: what may stand between [RESULT] and the number: "Score:", "Result:", "score of", "Rating:"
_LABEL = r"(?:(?:score|result|rating|grade)\s*(?:of|is|:|=)?\s*)?"

#: strong markers: the judge's own "[RESULT]" / "[SCORE]" slots
_STRONG = [
    # exact format and its bracket / colon variants: [RESULT] 4, [RESULT]: 4, [RESULT] (4), [RESULT] [4]
    re.compile(r"\[\s*RESULT\s*\]\s*[:=\-]?\s*" + _LABEL + r"[\(\[]?\s*" + _NUM + r"\s*[\)\]]?" + _DEN + _AFTER,
               re.IGNORECASE),
    # [RESULT 4], [RESULT: 4], [SCORE 5], [SCORE: 5], [Score: 4/5]
    re.compile(r"\[\s*(?:RESULT|SCORE)\s*[:=]?\s*" + _NUM + _DEN + r"\s*\]", re.IGNORECASE),
    # MT-Bench style "Rating: [[4]]"
    re.compile(r"\[\[\s*" + _NUM + _DEN + r"\s*\]\]", re.IGNORECASE),
    # [SCORE] 5
    re.compile(r"\[\s*SCORE\s*\]\s*[:=\-]?\s*[\(\[]?\s*" + _NUM + r"\s*[\)\]]?" + _DEN + _AFTER, re.IGNORECASE),
]
#: a strong marker, with or without a number after it
_STRONG_MARKER = re.compile(r"\[\s*(?:RESULT|SCORE)\b[^\]\n]{0,12}\]?|\[\[[^\]\n]{0,8}\]\]", re.IGNORECASE)

#: weak phrasings: "Score: 4 out of 5", "the overall score is 3", "final score is 4", "Rating: 2"
_WEAK = [
    re.compile(
        r"\b(?:score|rating|grade|result|overall(?:\s+quality)?)\s*(?:is|:|=|of|would\s+be|will\s+be|should\s+be)\s*(?:a\s+)?"
        r"[\(\[\*\"']*\s*" + _NUM + r"\s*[\)\]\*\"']*" + _DEN + _AFTER,
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:I\s+(?:would\s+)?(?:rate|give|score)\s+(?:it|this(?:\s+response)?|the\s+response)(?:\s+a)?)\s*"
               + _NUM + _DEN + _AFTER, re.IGNORECASE),
]


@dataclass(frozen=True)
class _Hit:
    start: int
    value: str
    denominator: str | None
    value_start: int = 0


def _hits(patterns: list[re.Pattern[str]], text: str) -> list[_Hit]:
    """Non-overlapping matches of all patterns, in text order (first pattern wins on overlap)."""
    found: list[tuple[int, int, _Hit]] = []
    for pat in patterns:
        for m in pat.finditer(text):
            s, e = m.span()
            if any(s < fe and fs < e for fs, fe, _ in found):
                continue
            found.append((s, e, _Hit(s, m.group("n"), m.groupdict().get("d"), m.start("n"))))
    return [h for _, _, h in sorted(found, key=lambda t: t[0])]


def _numeric(
    text: str, finish_reason: str | None, lo: int, hi: int, bare_ok: bool, prompt: str | None = None
) -> ParseResult:
    """Shared rules of the numeric modes (scale ``lo..hi``)."""
    if finish_reason == "length":
        return unscored("truncated", feedback=text.strip())
    clean = _clean(text)
    if not clean:
        return unscored("empty")
    masked, offset = _tail(mask_echo(clean, prompt))
    strong = _hits(_STRONG, masked)
    markers = list(_STRONG_MARKER.finditer(masked))
    if strong or markers:
        last_marker = markers[-1].start() if markers else -1
        # the last [RESULT]/[SCORE] marker decides: it must carry a number
        if not strong or strong[-1].start < last_marker - 1:
            return unscored("no_score", "the last [RESULT] marker has no score after it", clean)
        hits = strong
    else:
        hits = _hits(_WEAK, masked)
        if not hits and bare_ok:
            # the whole output (unmasked) is a number
            m = re.fullmatch(r"\s*[\(\[\*]*\s*" + _NUM + r"\s*[\)\]\*]*" + _DEN + r"\s*\.?\s*", clean)
            if m:
                offset = 0
                hits = [_Hit(m.start("n"), m.group("n"), m.group("d"), m.start("n"))]
    if not hits:
        return unscored("no_score", feedback=clean)
    values = {h.value for h in hits}
    if len({float(v) for v in values}) > 1:
        shown = ", ".join(h.value for h in hits)
        if levels_listed([h.value for h in hits]):
            return unscored("rubric_levels_listed", f"the levels {shown} in a row, as the rubric lists them", clean)
        return unscored("conflicting", f"several final scores: {shown}", clean)
    hit = hits[-1]
    feedback = _feedback(clean[: offset + hit.start], sentence=not strong)
    if hit.denominator is not None and int(hit.denominator) != hi:
        return unscored("wrong_scale", f"score {hit.value}/{hit.denominator}, expected a scale of {lo}-{hi}", feedback)
    if "." in hit.value and float(hit.value) != int(float(hit.value)):
        return unscored("not_integer", f"score {hit.value} is not an integer", feedback)
    n = int(float(hit.value))
    if not lo <= n <= hi:
        return unscored("out_of_range", f"score {hit.value} outside {lo}-{hi}", feedback)
    return ParseResult(float(n), None, "", feedback, position=offset + hit.value_start)


def levels_listed(values: list[str]) -> bool:
    """True when ``values`` (in text order) are at least three consecutive integers counting up by
    one (``1, 2, 3``): a judge copying the scale's levels, not giving conflicting grades."""
    try:
        nums = [float(v) for v in values]
    except ValueError:
        return False
    return len(nums) >= 3 and all(b - a == 1 for a, b in itertools.pairwise(nums))


def _feedback(text: str, sentence: bool = False) -> str:
    """The feedback part: the text before the final grade, without a leading ``Feedback:``
    (``sentence``: also without the start of the sentence that states the grade)."""
    text = text.strip()
    if sentence:
        cut = max(text.rfind(c) for c in ".!?\n")
        text = text[: cut + 1] if cut >= 0 else ""
    text = re.sub(r"^\s*(?:###\s*)?Feedback\s*:\s*", "", text, flags=re.IGNORECASE)
    text = re.sub(r"(?:\[\s*(?:RESULT|SCORE)\s*\]?|Score|Rating)\s*[:=]?\s*[\(\[]?\s*$", "", text, flags=re.IGNORECASE)
    return text.strip()


# --- verdicts ------------------------------------------------------------------------------------

_V = r"(?P<v>(?-i:A|B)|TIE)"
_V_AFTER = r"(?!\s+or\b)(?![\w])"
_VERDICT_STRONG = [
    # [RESULT] A, [RESULT]: B, [RESULT] (A), [RESULT] Response A, [RESULT] TIE
    re.compile(r"\[\s*RESULT\s*\]\s*[:=\-]?\s*[\(\[]?\s*(?:Response\s+)?" + _V + r"\s*[\)\]]?" + _V_AFTER,
               re.IGNORECASE),
    # [RESULT: A], [RESULT A], [Response A]
    re.compile(r"\[\s*(?:RESULT\s*[:=]?|Response)\s*" + _V + r"\s*\]", re.IGNORECASE),
    # MT-Bench style [[A]], [[B]], [[C]] (C = tie)
    re.compile(r"\[\[\s*(?P<v>A|B|C|TIE)\s*\]\]", re.IGNORECASE),
]
_VERDICT_MARKER = re.compile(r"\[\s*RESULT\b[^\]\n]{0,12}\]?|\[\[[^\]\n]{0,6}\]\]", re.IGNORECASE)
_VERDICT_WEAK = [
    re.compile(r"(?:^|\n)\s*(?:Final\s+)?(?:Result|Verdict|Answer)\s*[:=]\s*(?:Response\s+)?[\(\[\*\"']*\s*"
               + _V + r"\s*[\)\]\*\"']*" + _V_AFTER, re.IGNORECASE),
    re.compile(r"\b(?:final\s+)?verdict\s+is\s*:?\s*(?:Response\s+)?[\(\[\*\"']*" + _V + _V_AFTER, re.IGNORECASE),
    re.compile(r"\bResponse\s+(?P<v>(?-i:A|B))\s+is\s+(?:the\s+)?better\b", re.IGNORECASE),
]


def _relative(text: str, finish_reason: str | None, allow_tie: bool, prompt: str | None = None) -> ParseResult:
    if finish_reason == "length":
        return unscored("truncated", feedback=text.strip())
    clean = _clean(text)
    if not clean:
        return unscored("empty")
    masked, offset = _tail(mask_echo(clean, prompt))

    def find(patterns: list[re.Pattern[str]]) -> list[tuple[int, str]]:
        found: list[tuple[int, int, str]] = []
        for pat in patterns:
            for m in pat.finditer(masked):
                s, e = m.span()
                if any(s < fe and fs < e for fs, fe, _ in found):
                    continue
                v = m.group("v").upper()
                found.append((s, e, "tie" if v in ("C", "TIE") else v))
        return [(s, v) for s, _, v in sorted(found)]

    hits = find(_VERDICT_STRONG)
    markers = list(_VERDICT_MARKER.finditer(masked))
    if hits or markers:
        if not hits or (markers and hits[-1][0] < markers[-1].start() - 1):
            return unscored("no_score", "the last [RESULT] marker has no verdict after it", clean)
    else:
        hits = find(_VERDICT_WEAK)
    if not hits:
        return unscored("no_score", feedback=clean)
    verdicts = {v for _, v in hits}
    feedback = _feedback(clean[: offset + hits[-1][0]])
    if len(verdicts) > 1:
        return unscored("conflicting", "several final verdicts: " + ", ".join(v for _, v in hits), feedback)
    verdict = verdicts.pop()
    if verdict == "tie" and not allow_tie:
        return unscored("tie_not_allowed", feedback=feedback)
    return ParseResult(verdict, None, "", feedback)


# --- JSON (criteria) -----------------------------------------------------------------------------


def last_json_object(text: str) -> tuple[dict[str, Any], int, int] | None:
    """The last JSON object in ``text`` (the one that ends last; the outermost if nested) with
    its start and end offsets, or None."""
    dec = json.JSONDecoder()
    best: tuple[dict[str, Any], int, int] | None = None
    for m in re.finditer(r"\{", text):
        s = m.start()
        if best is not None and best[1] < s < best[2]:
            continue  # nested in the current best
        try:
            obj, end = dec.raw_decode(text, s)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and (best is None or end > best[2]):
            best = (obj, s, end)
    return best


def _criteria(text: str, finish_reason: str | None, criteria: tuple[str, ...], lo: int, hi: int) -> ParseResult:
    if finish_reason == "length":
        return unscored("truncated", feedback=text.strip())
    clean = _clean(text)
    if not clean:
        return unscored("empty")
    found = last_json_object(clean)
    if found is None:
        return unscored("invalid_json", feedback=clean)
    obj, start, end = found
    rest = clean[end:].strip().strip("`").strip()
    if len(rest) > TAIL_CHARS:
        return unscored("invalid_json", "the last JSON object is not at the end of the output", clean)
    reasoning = obj.get("reasoning", obj.get("explanation", ""))
    feedback = (str(reasoning) if reasoning else clean[:start]).strip()
    ratings: dict[str, int] = {}
    for c in criteria:
        if c not in obj:
            return unscored("missing_field", f"no '{c}' in the JSON object", feedback)
        v = obj[c]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v != int(v):
            return unscored("invalid_value", f"'{c}' = {v!r} is not an integer", feedback)
        if not lo <= int(v) <= hi:
            return unscored("invalid_value", f"'{c}' = {v!r} outside {lo}-{hi}", feedback)
        ratings[c] = int(v)
    score = sum(ratings.values()) / len(ratings)
    return ParseResult(float(score), None, "", feedback, ratings)


# --- public entry point --------------------------------------------------------------------------


def parse_grade(
    text: str | None,
    mode: str = "absolute",
    finish_reason: str | None = None,
    *,
    scale: tuple[int, int] | None = None,
    allow_tie: bool = False,
    criteria: tuple[str, ...] = CRITERIA,
    prompt: str | None = None,
) -> ParseResult:
    """Read the grade from one judge output.

    ``mode``: ``"absolute"`` (integer 1-5, Prometheus ``[RESULT] n``), ``"relative"`` (verdict
    ``"A"``, ``"B"``, or ``"tie"`` when ``allow_tie``), ``"geval"`` (integer 1-4; a bare number is
    accepted as the whole output) or ``"criteria"`` (the last JSON object, with an integer 1-3 for
    each of ``criteria``; the score is their mean). ``scale`` overrides the (low, high) range.
    ``finish_reason == "length"`` always gives unscored ``truncated``; ``content_filter`` without text
    (a provider's safety block) unscored ``blocked``. ``prompt``: the text the judge
    was shown; output lines copied from it are masked (see the module doc).
    Returns a :class:`ParseResult`; ``value`` is None exactly when ``reason`` is set.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
    text = text or ""
    if finish_reason == "content_filter" and not text.strip():
        return unscored("blocked")
    if mode == "absolute":
        lo, hi = scale or (1, 5)
        return _numeric(text, finish_reason, lo, hi, bare_ok=False, prompt=prompt)
    if mode == "geval":
        lo, hi = scale or (1, 4)
        return _numeric(text, finish_reason, lo, hi, bare_ok=True, prompt=prompt)
    if mode == "relative":
        return _relative(text, finish_reason, allow_tie, prompt)
    lo, hi = scale or (1, 3)
    return _criteria(text, finish_reason, criteria, lo, hi)
