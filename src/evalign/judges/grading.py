"""Grading modes: each a registered :class:`Judge` that turns rows into prompts and judge outputs
into columns of the table.

* ``prometheus_absolute`` (mode ``absolute``): Prometheus 2 direct assessment, 1-5 under a score rubric,
  with or without a reference answer. Output ``Feedback ... [RESULT] n``.
* ``prometheus_relative`` (mode ``relative`` / ``pairwise``): Prometheus 2 pairwise ranking of
  responses A and B of a pair table (``[RESULT] A|B``, optionally TIE). By default every pair is
  judged in both orders; the verdict is resolved from both: the same verdict in both orders -> that
  verdict; different verdicts -> tie (position bias cannot be told apart from a real preference); an
  order without a verdict leaves the pair unscored (one order alone would carry the position bias).
* ``geval`` (mode ``geval``): G-Eval style overall quality on the Self-Instruct 1-4 scale (1 best,
  so ``higher_is_better = False``). With top logprobs the score is the probability-weighted mean
  over the tokens ``"1".."4"`` at the score position (renormalised over those found); without,
  the grade of each sample, averaged over ``samples``.
* ``criteria`` (mode ``criteria``): the GPT-4 judge of Doostmohammadi et al. 2024 (Figure 6):
  reasons first, then rates naturalness, relatedness and correctness 1-3 in a JSON object. Each
  rating is a column; the score column is ``correctness`` (``score_criterion``); several samples are
  aggregated per criterion by majority vote with the neutral 2 as fallback.
* ``prometheus_ranking`` (``--mode absolute --ranking``): Prometheus' protocol for preference data:
  responses A and B of a pair are graded independently with the absolute prompt; while the scores
  are equal (or one is unparseable) both are graded again (temperature > 0) up to ``max_rounds``;
  then the pair is a tie (or unparseable).

Output columns (the one convention of every judge; ``J`` is the judge's column name):

* ``J``: item judges: the score (float; NaN when not scored; direction: ``higher_is_better`` of the
  judge, False for G-Eval, where 1 is best). Pair judges: the verdict ``"A"``, ``"B"``, ``"tie"``, or
  ``"unparseable"`` (outputs were read but gave no verdict); None when skipped or when the backend failed.
* ``J.status``: ``scored`` / ``unscored`` / ``skipped``; ``J.reason``: why not scored (a code of
  :data:`evalign.judges.parsing.REASONS`); ``J.feedback``: the judge's text; ``J.error``: the backend's
  error message (redacted) when a call failed.
* per mode: ``J.median``, ``J.std``, ``J.n`` (samples > 1); ``J.naturalness``, ``J.relatedness``,
  ``J.correctness`` (criteria); ``J.method`` (geval: ``logprobs`` / ``samples``); ``J.code`` (pairs:
  +1 = A better, -1 = B better, 0 = tie), ``J.ab``, ``J.ba``, ``J.consistent`` (relative);
  ``J.score_a``, ``J.score_b``, ``J.rounds`` (ranking).
"""

from __future__ import annotations

import math
import statistics
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from evalign.errors import EvalignError
from evalign.judges.parsing import CRITERIA, ParseResult, parse_grade, unscored
from evalign.judges.prompts import Message, Rubric, Template, load_rubric, load_template, resolve_rubric_map
from evalign.registry import Registry
from evalign.signature import Signature, make_signature, stable_hash

#: the status values of ``J.status``
STATUSES = ("scored", "unscored", "skipped")

#: default sampling settings of Prometheus-style judges (Prometheus 2 paper / prometheus-eval)
PROMETHEUS_SAMPLING: dict[str, Any] = {
    "temperature": 1.0,
    "top_p": 0.9,
    "max_tokens": 1024,
    "repetition_penalty": 1.03,
}

#: the sampling settings a judge accepts (all go into the signature and the cache key)
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "repetition_penalty", "seed", "logprobs", "top_logprobs")


def join_instruction(instruction: Any, input_: Any) -> str:
    """The instruction text a judge sees: the instruction, then a blank line and the input when
    there is one (Prometheus: "an instruction (might include an Input inside it)")."""
    ins = "" if _missing(instruction) else str(instruction)
    inp = "" if _missing(input_) else str(input_)
    return f"{ins}\n\n{inp}" if inp.strip() else ins


def all_references(value: Any) -> str | None:
    """Every reference of a cell as one text: a single one as it is; several as ``- `` lines (each on
    its own line, after a line break), or None."""
    if isinstance(value, list | tuple):
        refs = [str(v) for v in value if not _missing(v) and str(v).strip()]
        if not refs:
            return None
        return refs[0] if len(refs) == 1 else "\n" + "\n".join(f"- {r}" for r in refs)
    return first_reference(value)


def prompt_text(messages: Sequence[Message]) -> str:
    """Every message's content joined (what the judge was shown), for echo masking."""
    return "\n".join(m["content"] for m in messages)


def first_reference(value: Any) -> str | None:
    """The reference text of a cell (the first one of a list), or None."""
    if _missing(value):
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list | tuple) and value:
        return str(value[0])
    return None


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


class Judge(ABC):
    """A grading mode. Subclasses set the class variables and implement :meth:`prompts` and
    :meth:`aggregate`; :meth:`parse` reads one output.

    Options (all part of :meth:`signature` and of the cache key of every call):

    * ``template``: template name or file (default per judge).
    * ``rubric``: rubric name, file, mapping or :class:`Rubric` (judges with ``uses_rubric``).
    * ``rubric_column``: a column holding a rubric per row (dict, JSON string or rubric name), used instead.
    * ``rubric_map``: maps the rubric column's values to rubric names (``"hhh"``, a mapping, or
      ``VALUE=RUBRIC`` strings; see :func:`evalign.judges.prompts.resolve_rubric_map`).
    * ``reference``: True (use the reference answer; a row without one is an error), False
      (reference-free template), or None = True when every row has a reference, else False.
    * ``samples``: grades drawn per item (the sample index is part of the cache key; with a
      ``seed``, sample ``s`` uses ``seed + s``).
    * ``reask``: how many times to ask again (showing the unparseable answer) when an output cannot
      be parsed. Each re-ask is a separate, cached call.
    * sampling: ``temperature``, ``top_p``, ``max_tokens``, ``repetition_penalty`` (0 = not sent, for
      servers that reject it), ``seed`` (defaults per judge, see ``sampling_defaults``).
    * ``grammar`` (GBNF, llama.cpp) / ``response_format``: constrain the judge's output.
    * ``column``: the column name (default: the judge name, plus ``[rubric]`` for rubric judges).
    """

    name: ClassVar[str]
    mode: ClassVar[str]
    description: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = True
    pairwise: ClassVar[bool] = False
    uses_rubric: ClassVar[bool] = False
    scale: ClassVar[tuple[int, int]] = (1, 5)
    default_template: ClassVar[str]
    default_rubric: ClassVar[str | None] = None
    sampling_defaults: ClassVar[dict[str, Any]] = dict(PROMETHEUS_SAMPLING)

    def __init__(
        self,
        *,
        template: str | Template | None = None,
        rubric: str | Mapping[str, Any] | Rubric | None = None,
        rubric_column: str | None = None,
        rubric_map: Any = None,
        reference: bool | None = None,
        samples: int = 1,
        reask: int = 0,
        column: str | None = None,
        grammar: str | None = None,
        response_format: dict[str, Any] | None = None,
        **sampling: Any,
    ) -> None:
        unknown = [k for k in sampling if k not in SAMPLING_KEYS]
        if unknown:
            raise EvalignError(f"judge '{self.name}': unknown option(s) {', '.join(unknown)}")
        if samples < 1:
            raise EvalignError(f"samples must be >= 1, got {samples}")
        if reask < 0:
            raise EvalignError(f"reask must be >= 0, got {reask}")
        self.template = template if isinstance(template, Template) else load_template(template or self.default_template)
        if self.uses_rubric:
            self.rubric: Rubric | None = load_rubric(rubric or self.default_rubric or "helpfulness")
        else:
            if rubric is not None or rubric_column is not None:
                raise EvalignError(f"judge '{self.name}' does not use a rubric")
            self.rubric = None
        self.rubric_column = rubric_column
        self.rubric_map = resolve_rubric_map(rubric_map)
        if self.rubric_map and rubric_column is None:
            raise EvalignError("rubric_map (--rubric-map) needs rubric_column (--rubric-column)")
        self.reference = reference
        self.samples = samples
        self.reask = reask
        self.grammar = grammar
        self.response_format = response_format
        self.sampling: dict[str, Any] = dict(self.sampling_defaults)
        self.sampling.update({k: v for k, v in sampling.items() if v is not None})
        if not self.sampling.get("repetition_penalty", 1):
            self.sampling.pop("repetition_penalty")  # 0 = off: not sent (servers that reject it)
        self._column = column

    # -- naming and signature -------------------------------------------------------------------
    @property
    def column(self) -> str:
        """The score column name."""
        if self._column:
            return self._column
        if self.uses_rubric:
            rub = self.rubric_column or (self.rubric.name if self.rubric else "")
            return f"{self.name}[{rub}]"
        return self.name

    def options(self, reference: bool) -> dict[str, Any]:
        """Everything besides the backend that determines the grades."""
        opts: dict[str, Any] = {"mode": self.mode, "template": self.template.tag(reference)}
        if self.uses_rubric:
            if self.rubric_column:
                opts["rubric"] = f"column:{self.rubric_column}"
                if self.rubric_map:
                    opts["rubric_map"] = stable_hash(self.rubric_map)[:8]
            else:
                opts["rubric"] = self.rubric.tag()  # type: ignore[union-attr]
        opts["reference"] = reference
        opts.update(self.sampling)
        opts["samples"] = self.samples
        if self.reask:
            opts["reask"] = self.reask
        if self.grammar is not None:
            from evalign.signature import text_hash

            opts["grammar"] = text_hash(self.grammar)[:8]
        if self.response_format is not None:
            opts["response_format"] = self.response_format
        opts.update(self.extra_options())
        return opts

    def extra_options(self) -> dict[str, Any]:
        """Mode-specific options for the signature."""
        return {}

    def signature(self, backend: Mapping[str, Any], reference: bool, run: Mapping[str, Any] | None = None) -> Signature:
        """The reproducibility signature: judge options plus the backend identity (never a key) and
        what the run decided (``run``, e.g. ``method`` of G-Eval)."""
        opts = {**{f"backend.{k}": v for k, v in backend.items()}, **self.options(reference), **(run or {})}
        return make_signature(self.name, opts)

    # -- requests -------------------------------------------------------------------------------
    def request_settings(self, sample: int) -> dict[str, Any]:
        """Keyword arguments of :class:`~evalign.judges.backends.GenerationRequest` for one sample."""
        s = dict(self.sampling)
        if s.get("seed") is not None:
            s["seed"] = int(s["seed"]) + sample
        if self.grammar is not None:
            s["grammar"] = self.grammar
        if self.response_format is not None:
            s["response_format"] = self.response_format
        return s

    def reask_messages(self, messages: Sequence[Message], output: str, result: ParseResult) -> list[Message]:
        """The conversation for a re-ask: the original prompt, the unreadable answer, and a request
        to answer again in the format."""
        note = (
            f"Your answer could not be read ({result.detail or result.reason}). "
            f"Answer again, following exactly this output format: {self.template.format_hint}"
        )
        return [*messages, {"role": "assistant", "content": output}, {"role": "user", "content": note}]

    @abstractmethod
    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        """``(order, messages)`` for each call one row needs (order ``""``; ``"ab"``/``"ba"`` for pairs)."""

    #: the parser mode of :func:`parse_grade`
    parse_mode: ClassVar[str] = ""

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        """Read one output (a :meth:`Generation.to_json` dict); ``prompt`` is the text the judge was
        shown (lines copied from it are masked)."""
        choice = gen["choices"][0]
        return parse_grade(choice.get("text"), self.parse_mode or self.mode, choice.get("finish_reason"),
                           scale=self.scale, prompt=prompt)

    def next_calls(self, results: Mapping[tuple[int, str], ParseResult]) -> list[tuple[int, str]]:
        """Further ``(sample, order)`` calls one row needs once every call so far has its final
        result (``results``); default none. The ranking protocol asks for its next round here."""
        return []

    def run_options(self, columns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What the run itself decided and the signature must record (e.g. G-Eval's method)."""
        return {}

    @abstractmethod
    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        """Columns (suffix -> value; ``""`` is the score) from the final parse of each
        (sample, order)."""

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        """The columns of a row that has no grade (unscored or skipped)."""
        return {"": None if self.pairwise else float("nan"), "feedback": None, "status": status, "reason": reason}


# --- registry ---------------------------------------------------------------------------------

#: mode names (as used by the CLI's --mode) -> judge names
MODE_ALIASES: dict[str, str] = {
    "absolute": "prometheus_absolute",
    "relative": "prometheus_relative",
    "pairwise": "prometheus_relative",
    "geval": "geval",
    "g-eval": "geval",
    "criteria": "criteria",
    "ranking": "prometheus_ranking",
}

#: the judge registry (plugins from the ``evalign.judges`` entry points; modes are aliases)
JUDGES: Registry[type[Judge]] = Registry("judge or mode", entry_point_group="evalign.judges", aliases=MODE_ALIASES)

J = TypeVar("J", bound=type[Judge])


def register_judge(cls: J) -> J:
    """Class decorator: make a judge available by its ``name``."""
    JUDGES.add(cls.name, cls)
    return cls


def judge_class(name: str) -> type[Judge]:
    """The judge class registered as ``name`` or a mode alias (``absolute``, ``pairwise`` ...)."""
    return JUDGES.get(name)


def get_judge(name: str, **options: Any) -> Judge:
    """A judge instance by name or mode, e.g. ``get_judge("absolute", rubric="helpfulness")``."""
    cls = judge_class(name)
    try:
        return cls(**options)
    except TypeError as e:
        raise EvalignError(f"judge '{name}': bad option ({e})") from e


def list_judges() -> list[type[Judge]]:
    """All registered judge classes (built-in and plugins), sorted by name."""
    return [cls for _, cls in JUDGES.items()]


# --- shared aggregation -------------------------------------------------------------------------


def _reason_of(results: Sequence[ParseResult]) -> str | None:
    reasons = Counter(r.reason for r in results if r.reason)
    return reasons.most_common(1)[0][0] if reasons else None


def numeric_columns(results: Sequence[ParseResult], samples: int) -> dict[str, Any]:
    """Score (mean over scored samples), feedback, status, reason; with several samples also
    median, std (population, ddof=0) and n (scored samples)."""
    scored = [r for r in results if r.ok]
    values = [float(r.value) for r in scored]  # type: ignore[arg-type]
    out: dict[str, Any] = {
        "": statistics.fmean(values) if values else float("nan"),
        "feedback": scored[0].feedback if scored else (results[0].feedback if results else None),
        "status": "scored" if scored else "unscored",
        "reason": None if len(scored) == len(results) else _reason_of(results),
    }
    if samples > 1:
        out["median"] = statistics.median(values) if values else float("nan")
        out["std"] = statistics.pstdev(values) if values else float("nan")
        out["n"] = len(values)
    return out


# --- the judges -------------------------------------------------------------------------------


class _SingleJudge(Judge):
    """A judge of one response per row (item table)."""

    def fields(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> dict[str, str]:
        f = {
            "instruction": join_instruction(row.get("instruction"), row.get("input")),
            "response": "" if _missing(row.get("response")) else str(row.get("response")),
        }
        if reference:
            ref = first_reference(row.get("reference"))
            f["reference_answer"] = ref or ""
        if rubric is not None:
            f["rubric"] = rubric.render("absolute")
        return f

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        return [("", self.template.render(reference, self.fields(row, rubric, reference)))]

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        ordered = [results[k] for k in sorted(results)]
        return numeric_columns(ordered, self.samples)


@register_judge
class PrometheusAbsolute(_SingleJudge):
    """Prometheus 2 absolute grading: a 1-5 score under a rubric (``[RESULT] n``)."""

    name = "prometheus_absolute"
    mode = "absolute"
    description = "Prometheus 2 direct assessment, 1-5 under a score rubric (higher is better)"
    uses_rubric = True
    default_template = "prometheus_absolute"
    default_rubric = "helpfulness"


#: G-Eval's default minimum total probability of the score tokens at the score position
GEVAL_MIN_MASS = 0.5
GEVAL_FALLBACKS = ("samples", "error")


@register_judge
class GEval(_SingleJudge):
    """G-Eval overall quality on the Self-Instruct 1-4 scale (1 best), SemScore Appendix A.3 prompt.

    With top logprobs the score is ``sum(p_i * i) / sum(p_i)`` over the tokens ``"1".."4"`` at the score
    position (method ``logprobs``); when their total probability ``sum(p_i)`` is below ``min_mass``
    (default 0.5) the row is unscored ``low_mass`` (the judge did not mean a score there). A server that
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
        return ParseResult(weighted, None, "logprobs", res.feedback)

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        ordered = [results[k] for k in sorted(results)]
        out = numeric_columns(ordered, self.samples)
        methods = {r.detail for r in ordered if r.ok}
        out["method"] = None if not methods else methods.pop() if len(methods) == 1 else "mixed"
        return out

    def run_options(self, columns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        used = sorted({c.get("method") for c in columns if c.get("method")})
        return {"method": "+".join(used) if used else "none"}


def parse_geval(
    text: str, finish_reason: str | None, scale: tuple[int, int] = (1, 4), prompt: str | None = None
) -> ParseResult:
    """A G-Eval answer: a number that opens the output and ends its line or is followed by a comma
    (``"2"``, ``"- Overall quality: 2"``, ``"2.\\n\\nThe response ..."``), else the end-of-output
    rules of :func:`parse_grade`. A number followed by text on its line (``"1. Read the ..."``, a
    copied list or scale line) is not an answer; lines copied from ``prompt`` never count."""
    import re

    from evalign.judges.parsing import _mask

    if finish_reason != "length":
        masked = _mask(text, prompt)
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


#: the neutral rating of the criteria judge (fallback of the majority vote)
CRITERIA_NEUTRAL = 2


def majority_vote(values: Sequence[int], neutral: int = CRITERIA_NEUTRAL) -> int | None:
    """The value given by more than half of ``values``; ``neutral`` when none is (as Doostmohammadi et
    al. aggregate three annotators: the majority, else the neutral 2); None for no values."""
    if not values:
        return None
    value, count = Counter(values).most_common(1)[0]
    return int(value) if count * 2 > len(values) else neutral


@register_judge
class CriteriaJudge(_SingleJudge):
    """Doostmohammadi et al. 2024 (Figure 6): reasons, then rates naturalness, relatedness and
    correctness 1-3 in JSON. Every rating is a column; the score is ``score_criterion``
    (default ``correctness``, the paper's main criterion); samples are majority-voted per criterion
    (neutral 2 when no majority). All gold answers are shown."""

    name = "criteria"
    mode = "criteria"
    description = "GPT-4 judge of Doostmohammadi et al. 2024: naturalness, relatedness, correctness 1-3 (3 best); score = correctness"
    scale = (1, 3)
    default_template = "criteria"
    sampling_defaults: ClassVar[dict[str, Any]] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024}

    def __init__(self, *, score_criterion: str = "correctness", **kw: Any) -> None:
        if score_criterion not in CRITERIA:
            raise EvalignError(f"score_criterion must be one of {', '.join(CRITERIA)}, got {score_criterion!r}")
        self.score_criterion = score_criterion
        super().__init__(**kw)

    def extra_options(self) -> dict[str, Any]:
        return {"score": self.score_criterion, "aggregate": "majority(2)"}

    def fields(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> dict[str, str]:
        f = super().fields(row, rubric, reference)
        if reference:
            f["reference_answer"] = all_references(row.get("reference")) or ""
        return f

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        ordered = [results[k] for k in sorted(results)]
        scored = [r for r in ordered if r.ok]
        out = numeric_columns(ordered, self.samples)
        for c in CRITERIA:
            v = majority_vote([r.ratings[c] for r in scored])
            out[c] = float("nan") if v is None else float(v)
        out[""] = out[self.score_criterion]
        if self.samples > 1:
            vals = [float(r.ratings[self.score_criterion]) for r in scored]
            out["median"] = statistics.median(vals) if vals else float("nan")
            out["std"] = statistics.pstdev(vals) if vals else float("nan")
        return out

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        out.update({c: float("nan") for c in CRITERIA})
        return out


#: verdict -> code (+1 = A better, -1 = B better, 0 = tie), as in the pair tables' pref columns
VERDICT_CODE = {"A": 1.0, "B": -1.0, "tie": 0.0}
_SWAP = {"A": "B", "B": "A", "tie": "tie"}


def resolve_orders(ab: str | None, ba: str | None) -> str | None:
    """The verdict of a pair from its two orders (both in the original orientation): the same ->
    that verdict; different -> ``"tie"``; an order missing -> the other (one-order judging)."""
    if ab is None or ba is None:
        return ab if ba is None else ba
    return ab if ab == ba else "tie"


def pair_verdict(code: float, failures: Sequence[ParseResult]) -> str | None:
    """The verdict column of a pair: ``"A"`` / ``"B"`` / ``"tie"`` from the mean code; without a
    verdict ``"unparseable"`` when outputs were read, None when the backend failed."""
    if math.isfinite(code):
        return "A" if code > 0 else "B" if code < 0 else "tie"
    if failures and all(f.reason == "backend_error" for f in failures):
        return None
    return "unparseable"


@register_judge
class PrometheusRelative(Judge):
    """Prometheus 2 relative grading of a pair (``[RESULT] A|B``), both orders by default."""

    name = "prometheus_relative"
    mode = "relative"
    description = "Prometheus 2 pairwise ranking, A vs B under a criterion; judged in both orders"
    pairwise = True
    uses_rubric = True
    default_template = "prometheus_relative"
    default_rubric = "helpfulness"

    def __init__(self, *, tie: bool = False, both_orders: bool = True, template: Any = None, **kw: Any) -> None:
        self.tie = tie
        self.both_orders = both_orders
        super().__init__(template=template or ("prometheus_relative_tie" if tie else None), **kw)

    def extra_options(self) -> dict[str, Any]:
        return {"tie": self.tie, "both_orders": self.both_orders}

    @property
    def orders(self) -> tuple[str, ...]:
        """``("ab", "ba")`` or ``("ab",)``."""
        return ("ab", "ba") if self.both_orders else ("ab",)

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        a = "" if _missing(row.get("response_a")) else str(row.get("response_a"))
        b = "" if _missing(row.get("response_b")) else str(row.get("response_b"))
        base = {"instruction": join_instruction(row.get("instruction"), row.get("input"))}
        if reference:
            base["reference_answer"] = first_reference(row.get("reference")) or ""
        if rubric is not None:
            base["rubric"] = rubric.render("relative")
        out = []
        for order in self.orders:
            first, second = (a, b) if order == "ab" else (b, a)
            out.append((order, self.template.render(reference, {**base, "response_A": first, "response_B": second})))
        return out

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        choice = gen["choices"][0]
        return parse_grade(choice.get("text"), "relative", choice.get("finish_reason"), allow_tie=self.tie,
                           prompt=prompt)

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        codes: list[float] = []
        failures: list[ParseResult] = []
        first: dict[str, Any] = {}
        for s in range(self.samples):
            per_order: dict[str, str | None] = {}
            for order in self.orders:
                r = results.get((s, order))
                if r is None or not r.ok:
                    failures.append(r if r is not None else unscored("no_score"))
                    per_order[order] = None
                    continue
                v = r.verdict
                per_order[order] = _SWAP[v] if order == "ba" and v else v
            got = [per_order[o] for o in self.orders]
            if any(g is None for g in got):
                verdict = None  # an order without a verdict: the pair is unscored in this sample
            elif len(got) == 2:
                verdict = resolve_orders(got[0], got[1])
            else:
                verdict = got[0]
            if verdict is not None:
                codes.append(VERDICT_CODE[verdict])
            if s == 0:
                ab_res = results.get((0, "ab"))
                first = {
                    "ab": per_order.get("ab"),
                    "ba": per_order.get("ba"),
                    "consistent": (per_order["ab"] == per_order["ba"])
                    if self.both_orders and per_order.get("ab") is not None and per_order.get("ba") is not None
                    else None,
                    "feedback": ab_res.feedback if ab_res is not None else None,
                }
        mean = statistics.fmean(codes) if codes else float("nan")
        out: dict[str, Any] = {
            "": pair_verdict(mean, failures),
            "code": mean,
            "ab": first.get("ab"),
            "ba": first.get("ba"),
            "consistent": first.get("consistent"),
            "feedback": first.get("feedback"),
            "status": "scored" if codes else "unscored",
            "reason": None if not failures else _reason_of(failures),
        }
        if self.samples > 1:
            out["std"] = statistics.pstdev(codes) if codes else float("nan")
            out["n"] = len(codes)
        return out

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        out.update({"code": float("nan"), "ab": None, "ba": None, "consistent": None})
        return out


#: default number of rounds of the ranking protocol (a first grading and up to 4 re-gradings)
RANKING_MAX_ROUNDS = 5


@register_judge
class PrometheusRanking(_SingleJudge):
    """Prometheus' ranking by absolute grading (Kim et al. 2023/2024: preference data graded with
    the absolute prompt): responses A and B of a pair are graded independently (1-5 under the
    rubric). While their scores are equal, or one is unparseable, both are graded again (a new
    round: temperature > 0, default 1.0 as in the paper, seed + round) up to ``max_rounds`` rounds;
    then the pair is a ``tie`` (equal scores) or ``unparseable``. Every round's call is cached, so a
    resumed run repeats no call. Verdict ``A`` when A's score is higher, ``B`` when B's is.
    """

    name = "prometheus_ranking"
    mode = "ranking"
    parse_mode = "absolute"
    description = "Prometheus ranking by absolute grading of A and B, re-graded while tied (pairs)"
    pairwise = True
    uses_rubric = True
    default_template = "prometheus_absolute"
    default_rubric = "helpfulness"

    def __init__(self, *, max_rounds: int = RANKING_MAX_ROUNDS, **kw: Any) -> None:
        if int(max_rounds) < 1:
            raise EvalignError(f"max_rounds must be >= 1, got {max_rounds}")
        self.max_rounds = int(max_rounds)
        super().__init__(**kw)
        if self.samples != 1:
            raise EvalignError("the ranking protocol draws its own rounds; samples must be 1")
        if float(self.sampling.get("temperature", 0) or 0) <= 0 and self.max_rounds > 1:
            raise EvalignError("the ranking protocol re-grades ties: temperature must be > 0")

    def extra_options(self) -> dict[str, Any]:
        return {"ranking": True, "max_rounds": self.max_rounds}

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        out = []
        for side in ("a", "b"):
            single = {**row, "response": row.get(f"response_{side}")}
            out.append((side, self.template.render(reference, self.fields(single, rubric, reference))))
        return out

    @staticmethod
    def _round(results: Mapping[tuple[int, str], ParseResult], r: int) -> tuple[float | None, float | None]:
        a, b = results.get((r, "a")), results.get((r, "b"))
        return (a.score if a is not None else None), (b.score if b is not None else None)

    def next_calls(self, results: Mapping[tuple[int, str], ParseResult]) -> list[tuple[int, str]]:
        last = max((s for s, _ in results), default=-1)
        if last < 0 or last + 1 >= self.max_rounds:
            return []
        if any(r.reason == "backend_error" for r in results.values()):
            return []  # no verdict possible this run; the next run retries the failed call
        a, b = self._round(results, last)
        if a is not None and b is not None and a != b:
            return []
        return [(last + 1, "a"), (last + 1, "b")]

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        rounds = max((s for s, _ in results), default=-1) + 1
        failures = [r for r in results.values() if not r.ok]
        a, b = self._round(results, rounds - 1) if rounds else (None, None)
        first_a = results.get((0, "a"))
        out: dict[str, Any] = {
            "score_a": float("nan") if a is None else a,
            "score_b": float("nan") if b is None else b,
            "rounds": rounds,
            "feedback": first_a.feedback if first_a is not None else None,
        }
        if a is not None and b is not None:
            verdict = "A" if a > b else "B" if b > a else "tie"
            out.update({"": verdict, "code": VERDICT_CODE[verdict], "status": "scored", "reason": None})
        else:
            out.update({"": pair_verdict(float("nan"), failures), "code": float("nan"), "status": "unscored",
                        "reason": _reason_of(failures) or "no_score"})
        return out

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        out.update({"code": float("nan"), "score_a": float("nan"), "score_b": float("nan"), "rounds": 0})
        return out


def judge_names() -> list[str]:
    """Registered judge names."""
    return JUDGES.names()


__all__ = [
    "MODE_ALIASES",
    "PROMETHEUS_SAMPLING",
    "VERDICT_CODE",
    "CriteriaJudge",
    "GEval",
    "Judge",
    "PrometheusAbsolute",
    "PrometheusRanking",
    "PrometheusRelative",
    "get_judge",
    "judge_class",
    "judge_names",
    "list_judges",
    "logprob_weighted_score",
    "parse_geval",
    "register_judge",
    "resolve_orders",
]
