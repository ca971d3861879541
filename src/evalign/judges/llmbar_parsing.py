"""Reading an LLMBar-style verdict (``Output (a)`` / ``Output (b)``) from a judge's text.

LLMBar (Zeng et al. 2024) asks its judges for one of two answer formats:

* ``direct`` (Vanilla, Vanilla_NoRules, 1-/2-shot, Metrics, Reference, Metrics_Reference, the Swap
  synthesis round): answer ONLY ``Output (a)`` or ``Output (b)``;
* ``cot`` (CoT, the first round of Swap / Swap_CoT, the Swap_CoT synthesis round): a brief
  explanation, then always end with ``Therefore, Output (a) is better.`` or ``Therefore, Output (b)
  is better.``

Upstream parsed with two plain regexes per configuration (``upstream_configs/*/*.json``, "parsing"),
tried in the order ``1`` then ``2``: ``(?:^|\\n) ?Output \\(a\\)`` (a line that starts with the
verdict, anywhere in the text) or ``Output \\(a\\) is better.`` (anywhere). So a text that mentions
"Output (a) is better" anywhere reads as (a), even when it ends with "Therefore, Output (b) is
better.", and ``Output (a) is better than Output (b)`` is (a) only because (a) is tried first.
Measured on the 56,060 texts upstream released (``benchmarks/llmbar_parser.py``), the first
regex read a later description ("\nOutput (a) provides ...") over the opening answer "Output (b)
is better." 144 times and an earlier, reported claim ("Assistant (a) argues that Output (a) is
better") over the concluding one 45 times. This parser keeps upstream's patterns as the floor
(what they read as a verdict still is one, where it is a claim) and adds evalign's rules
(:mod:`evalign.judges.parsing`):

* An output cut off at ``max_tokens`` (``finish_reason == "length"``) is ``truncated``, unscored,
  unless it is ``direct`` and starts with a complete answer (``Output (a) is better than Output (b).
  The sound of``): that verdict is read (upstream reads it too) and the result is marked ``cut``.
* A mention that is not a claim is never read: ``both Output (a) and Output (b)``, ``Output (a) or
  Output (b)``, ``neither Output (a) nor Output (b)``, the prompt's quoted format (``"Therefore,
  Output (a) is better." or "Therefore, Output (b) is better."``), headers and labels
  (``# Output (a):``, ``Output (a): Yes``), descriptions (``Output (a) provides ...``, ``Output
  (b) is incorrect``), negated or conditional claims (``not ... Output (a) is better``, ``if
  Output (a) is better``, ``Output (a) is better if ...``, ``... in terms of ...``) and claims
  reported from someone else (``Assistant (a) argues that Output (a) is better``, ``who thinks
  ...``).
* A claim is ``Output (x) is better`` (``is the better``, ``is superior``, ``is preferred``),
  ``Therefore, Output (x).``, ``I choose Output (x)``, ``the better output ... is Output (x)``, or
  a line holding only ``Output (x)``.
* ``direct``: the verdict is the answer the text starts with (``Output (b)``, ``Output (b) is
  better.``, ``**Output (b)**``, ``# Output (b) is better.``, ``Output (a) (as it is ...)``), the
  rest being an explanation the judge added. A text that does not start with one is read like a
  ``cot`` text.
* ``cot`` (and the rest of ``direct``): the verdict is the LAST claim of a concluding sentence
  (``Therefore``, ``Thus``, ``In conclusion``, ``Overall``, ``I conclude that``, ...), as the prompt
  asks for the verdict at the end; without a concluding sentence, the claims must all name the
  same output, else the text is ``conflicting`` (e.g. Falcon writing "Output (a) is better." and
  later "Output (b) is better.").
* No claim: unscored ``no_score``; an empty text: ``empty``.

Verdicts are in the order the outputs were SHOWN (``A`` = the text's Output (a)); a caller that
showed them reversed maps the verdict back. ``position`` is the offset of the deciding ``Output (x)``
in the stripped text. Returns :class:`evalign.judges.parsing.ParseResult`.
"""

from __future__ import annotations

import re

from evalign.judges.parsing import ParseResult, unscored

STYLES = ("direct", "cot")
#: the answer format of each LLMBar strategy (its final stage; Swap's synthesis round is ``direct``
#: when the strategy is ``Swap``, ``cot`` when ``Swap_CoT``; the first round of both is ``cot``)
STRATEGY_STYLE = {
    "Vanilla": "direct",
    "Vanilla_NoRules": "direct",
    "Vanilla_1shot": "direct",
    "Vanilla_2shot": "direct",
    "Metrics": "direct",
    "Reference": "direct",
    "Metrics_Reference": "direct",
    "CoT": "cot",
    "Swap": "direct",
    "Swap_CoT": "cot",
}

#: a mention of one output: "Output (a)", "output(b)", "Output ( A )"
_MENTION = re.compile(r"output\s*\(\s*([ab])\s*\)", re.IGNORECASE)
#: what joins two mentions that name both outputs: "Output (a) and Output (b)", "Output (a) or
#: Output (b)", the prompt's quoted '"Therefore, Output (a) is better." or "Therefore, Output (b)'
_PAIR_GAP = re.compile(r"(?:\s+is\s+better\.?[\"'”])?[\"'”]?\s*,?\s*(?:and|or|nor|&|/|vs\.?|versus|,)\s+"
                       r"[\"'“]?(?:therefore,\s*)?", re.IGNORECASE)
#: after a mention: a claim "is better" (and close variants)
_IS_BETTER = re.compile(r"[\"'*`_]*\s+is\s+(?:(?:the|clearly|slightly|much|significantly|definitely|indeed)\s+){0,2}"
                        r"(?:better|superior|preferred|preferable|the\s+better)\b", re.IGNORECASE)
#: before a mention: "Therefore, Output (x)", "I choose Output (x)", "the better output is Output (x)"
_LEAD_IN = re.compile(
    r"(?:\btherefore,?|\bI\s+(?:\w+\s+)?(?:choose|select|pick|prefer)|\b(?:answer|choice|decision|verdict)\s*(?:is|:)"
    r"|\bbetter\s+(?:output|one|choice|response)\b[^.\n]{0,60}?\bis)\s*:?\s*[\"'*`_]*$", re.IGNORECASE)
#: after a mention: the end of the verdict ("Output (b).", "Output (b)\n", "Output (b)")
_END = re.compile(r"[\"'*`_]*\s*(?:[.!]|\n|$)")
#: a line that holds only the verdict: before it (from the line start) and after it (to the line end)
_LINE_BEFORE = re.compile(r"(?:^|\n)[ \t#>*\"'`_\-]*$")
_LINE_AFTER = re.compile(r"[\"'*`_ \t]*[.!]?[ \t]*(?:\n|$)")
#: the start of a direct answer: only markup before the first mention
_START = re.compile(r"[\s#>*\"'`_\-]*(?:answer\s*:\s*)?[\"'*`_]*$", re.IGNORECASE)
#: the direct answer may go on with an aside: "Output (a) (as it is tailored ...)", "Output (b) - ..."
_ASIDE = re.compile(r"[\"'*`_]*\s*[(\[\-–—,]")
#: a clause that negates or conditions a claim, or reports someone else's ("Assistant (a) argues that
#: Output (a) is better", "who thinks Output (a) is better")
_NEGATED = re.compile(
    r"\b(?:not|never|whether|if|unless)\b|n't\b|\b(?:assistant\s*\(\s*[ab]\s*\)|who|they|he|she)\s+(?:\w+\s+){0,2}?"
    r"(?:thinks?|believes?|believed|argues?|argued|claims?|claimed|says?|said|suggests?|suggested|states?|stated)\b",
    re.IGNORECASE)
#: after a claim: it holds only in part or under a condition ("Output (a) is better if ...", "... in terms of")
_PARTIAL = re.compile(r"\s+(?:if|when|unless|only|in\s+terms\s+of|with\s+respect\s+to|regarding|on\s+the\s+other)\b",
                      re.IGNORECASE)
#: a concluding sentence: its claim is the verdict
_CONCLUDING = re.compile(r"\b(?:therefore|thus|hence|in\s+conclusion|in\s+summary|overall|to\s+conclude|"
                         r"consequently|in\s+the\s+end|ultimately|final(?:ly)?|conclude|conclusion)\b", re.IGNORECASE)
#: the exact answers (most texts): their results, built once
_EXACT = {f"Output ({x}){p}": ParseResult(x.upper(), None, "", "", position=0)
          for x in "ab" for p in ("", ".")}
_EOS = re.compile(r"(?:</s>|<\|im_end\|>|<\|eot_id\|>|<\|endoftext\|>|<eos>|<end_of_turn>)\s*$")


_CLAUSE_REV = re.compile(r"[^.;:!?,\n]*")
_SENTENCE_REV = re.compile(r"[^.!?\n]*")


def _after_last(text: str, rev: re.Pattern[str]) -> str:
    """``text`` after its last clause / sentence end (``rev`` matches the reversed tail)."""
    m = rev.match(text[::-1])
    return text[len(text) - m.end():] if m else text


def _claims(text: str) -> tuple[tuple[int, str] | None, list[tuple[int, str, bool]]]:
    """The direct answer the text starts with as (offset, ``A`` / ``B``) or None, and every claim as (offset, ``A`` / ``B``,
    concluding), in text order; mentions naming both outputs, headers ("Output (a):") and negated
    or conditional claims are left out."""
    mentions = [(m.start(), m.end(), m.group(1).upper()) for m in _MENTION.finditer(text)]
    paired: set[int] = set()
    for i in range(len(mentions) - 1):
        if _PAIR_GAP.fullmatch(text, mentions[i][1], mentions[i + 1][0]):
            paired.update((i, i + 1))
    leading = None
    claims: list[tuple[int, str, bool]] = []
    for i, (s, e, v) in enumerate(mentions):
        if i in paired:
            continue
        better = _IS_BETTER.match(text, e)
        is_better = better is not None and not _PARTIAL.match(text, better.end())
        ends = is_better or _END.match(text, e) is not None
        if i == 0 and (ends or _ASIDE.match(text, e)) and _START.fullmatch(text, 0, s):
            leading = (s, v)
        if not ends:
            continue
        before = text[max(0, s - 120):s]
        if not is_better:
            lead_in = _LEAD_IN.search(before) is not None
            if not (lead_in or (_LINE_BEFORE.search(before) and _LINE_AFTER.match(text, e))):
                continue
        if is_better and _NEGATED.search(_after_last(before, _CLAUSE_REV)):
            continue
        sentence = _after_last(before, _SENTENCE_REV)
        claims.append((s, v, _CONCLUDING.search(sentence) is not None))
    return leading, claims


#: an output line at least this long (stripped) that occurs in the prompt is an echo and is masked;
#: shorter lines ("Output (a)", "Therefore, Output (b) is better.") are the answer format itself
ECHO_MIN_CHARS = 40


def _mask_echo(text: str, prompt: str) -> str:
    whole = text.strip()
    if "\n" in whole and whole in prompt:  # several lines copied from the prompt: an echo, not an answer
        return " " * len(text)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        s = line.strip()
        if len(s) >= ECHO_MIN_CHARS and s in prompt:
            lines[i] = " " * len(line)
    return "\n".join(lines)


def parse_llmbar(text: str | None, finish_reason: str | None = None, *, style: str = "direct",
                 prompt: str | None = None) -> ParseResult:
    """The verdict ``"A"`` (Output (a)) or ``"B"`` (Output (b)) of one LLMBar judge text, or an
    unscored result with its reason (``truncated``, ``empty``, ``no_score``, ``conflicting``).
    ``style``: ``direct`` or ``cot`` (see the module doc; :data:`STRATEGY_STYLE` maps the strategies).
    ``prompt``: the text the judge was shown (as :func:`evalign.judges.parsing.parse_grade` takes
    it); output lines of at least :data:`ECHO_MIN_CHARS` characters copied from it are masked."""
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    raw = text or ""
    if finish_reason == "length":  # cut off at max_tokens: only an answer that comes first can be whole
        return _before_the_cut(raw, style, prompt)
    clean = raw.strip()
    exact = _EXACT.get(clean)
    if exact is not None:
        return exact
    clean = _EOS.sub("", clean).strip()
    if not clean:
        return unscored("empty")
    leading, claims = _claims(_mask_echo(clean, prompt) if prompt else clean)
    if style == "direct" and leading is not None:
        return ParseResult(leading[1], None, "", clean, position=leading[0])
    if not claims:
        return unscored("no_score", "no 'Output (a)' / 'Output (b)' claim", clean)
    concluding = [c for c in claims if c[2]]
    if concluding:
        pos, verdict, _ = concluding[-1]
    elif len({v for _, v, _ in claims}) == 1:
        pos, verdict, _ = claims[-1]
    else:
        shown = ", ".join(v for _, v, _ in claims)
        return unscored("conflicting", f"claims for both outputs and no concluding one: {shown}", clean)
    return ParseResult(verdict, None, "", clean[:pos].strip(), position=pos)


def _before_the_cut(raw: str, style: str, prompt: str | None) -> ParseResult:
    """An output cut off at ``max_tokens``: in the ``direct`` format the answer comes first, so a
    text that starts with a complete answer (``Output (a) is better than Output (b). The sound of``)
    is read, as upstream reads it, and marked ``cut``; anything else is ``truncated``."""
    clean = _EOS.sub("", raw.strip()).strip()
    if style == "direct" and clean:
        leading, _ = _claims(_mask_echo(clean, prompt) if prompt else clean)
        if leading is not None:
            return ParseResult(leading[1], None, "verdict complete before the output was cut off at max_tokens",
                               clean, position=leading[0], cut=True)
    return unscored("truncated", feedback=raw.strip())


def parse_upstream(text: str | None, parsing: dict[str, str]) -> str | None:
    """Upstream LLMBar's own parse: the first of its ``parsing`` regexes (``{"1": ..., "2": ...}``,
    tried in that order) that matches the stripped text gives ``"1"`` / ``"2"``; None when none does."""
    t = (text or "").strip()
    for value, exp in parsing.items():
        if re.search(exp, t):
            return value
    return None
