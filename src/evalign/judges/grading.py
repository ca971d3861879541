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
* ``criteria`` (mode ``criteria``): reasons first, then rates naturalness, relatedness and
  correctness 1-3 in a JSON object; the score is their mean.

Columns written for a judge whose column is ``J``: ``J`` (the score; for pairs the resolved verdict
coded +1 = A better, -1 = B better, 0 = tie), ``J.feedback``, ``J.status`` (``scored`` / ``unscored``
/ ``skipped``), ``J.reason`` (why unscored), and per mode: ``J.median``, ``J.std``, ``J.n`` (samples
> 1), ``J.<criterion>`` (criteria), ``J.method`` (geval), ``J.verdict``, ``J.ab``, ``J.ba``,
``J.consistent`` (pairs).
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
from evalign.judges.prompts import Message, Rubric, Template, load_rubric, load_template
from evalign.signature import Signature, make_signature

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
    * ``rubric_column``: a column holding a rubric per row (dict or JSON string), used instead.
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
            opts["rubric"] = f"column:{self.rubric_column}" if self.rubric_column else self.rubric.tag()  # type: ignore[union-attr]
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

    def signature(self, backend: Mapping[str, Any], reference: bool) -> Signature:
        """The reproducibility signature: judge options plus the backend identity (never a key)."""
        opts = {**{f"backend.{k}": v for k, v in backend.items()}, **self.options(reference)}
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

    def parse(self, gen: Mapping[str, Any]) -> ParseResult:
        """Read one output (a :meth:`Generation.to_json` dict)."""
        choice = gen["choices"][0]
        return parse_grade(choice.get("text"), self.mode, choice.get("finish_reason"), scale=self.scale)

    @abstractmethod
    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        """Columns (suffix -> value; ``""`` is the score) from the final parse of each
        (sample, order)."""

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        """The columns of a row that has no grade (unscored or skipped)."""
        return {"": float("nan"), "feedback": None, "status": status, "reason": reason}


# --- registry ---------------------------------------------------------------------------------

_JUDGES: dict[str, type[Judge]] = {}
#: mode names (as used by the CLI's --mode) -> judge names
MODE_ALIASES: dict[str, str] = {
    "absolute": "prometheus_absolute",
    "relative": "prometheus_relative",
    "pairwise": "prometheus_relative",
    "geval": "geval",
    "g-eval": "geval",
    "criteria": "criteria",
}

J = TypeVar("J", bound=type[Judge])


def register_judge(cls: J) -> J:
    """Class decorator: make a judge available by its ``name``."""
    _JUDGES[cls.name] = cls
    return cls


def judge_class(name: str) -> type[Judge]:
    """The judge class registered as ``name`` or a mode alias (``absolute``, ``pairwise`` ...)."""
    key = MODE_ALIASES.get(name, name)
    if key not in _JUDGES:
        known = ", ".join(sorted(set(_JUDGES) | set(MODE_ALIASES)))
        raise EvalignError(f"unknown judge or mode '{name}' (known: {known})")
    return _JUDGES[key]


def get_judge(name: str, **options: Any) -> Judge:
    """A judge instance by name or mode, e.g. ``get_judge("absolute", rubric="helpfulness")``."""
    cls = judge_class(name)
    try:
        return cls(**options)
    except TypeError as e:
        raise EvalignError(f"judge '{name}': bad option ({e})") from e


def list_judges() -> list[type[Judge]]:
    """All registered judge classes, sorted by name."""
    return [_JUDGES[k] for k in sorted(_JUDGES)]


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


@register_judge
class GEval(_SingleJudge):
    """G-Eval style overall quality on the Self-Instruct 1-4 scale (1 best)."""

    name = "geval"
    mode = "geval"
    description = "G-Eval overall quality, 1 (valid, satisfying) - 4 (irrelevant, invalid); lower is better"
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

    def parse(self, gen: Mapping[str, Any]) -> ParseResult:
        choice = gen["choices"][0]
        text = choice.get("text") or ""
        res = parse_geval(text, choice.get("finish_reason"), self.scale)
        if not res.ok:
            return res
        tops = choice.get("top_logprobs")
        if not tops:
            return res
        weighted = logprob_weighted_score(text, choice.get("tokens"), tops, res, self.scale)
        if weighted is None:
            return res
        return ParseResult(weighted, None, "logprobs", res.feedback)

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        ordered = [results[k] for k in sorted(results)]
        out = numeric_columns(ordered, self.samples)
        scored = [r for r in ordered if r.ok]
        out["method"] = (
            None if not scored else "logprobs" if all(r.detail == "logprobs" for r in scored) else "samples"
        )
        return out


def parse_geval(text: str, finish_reason: str | None, scale: tuple[int, int] = (1, 4)) -> ParseResult:
    """A G-Eval answer: a number that opens the output (``"2"``, ``"- Overall quality: 2"``,
    ``"2\\n\\nThe response ..."``), else the end-of-output rules of :func:`parse_grade`.
    A number followed by ``-`` or ``:`` and text is a copied scale line, not an answer."""
    import re

    if finish_reason != "length":
        m = re.match(
            r"\s*(?:-\s*)?(?:Overall(?:\s+quality)?\s*:\s*)?[\(\[\*]*\s*(?P<n>\d+(?:\.\d+)?)\s*[\)\]\*]*"
            r"(?=\s*(?:$|\.\s|\.$|\n|,))",
            text,
            re.IGNORECASE,
        )
        if m:
            v = m.group("n")
            lo, hi = scale
            if float(v) != int(float(v)):
                return unscored("not_integer", f"score {v} is not an integer")
            if not lo <= int(float(v)) <= hi:
                return unscored("out_of_range", f"score {v} outside {lo}-{hi}")
            return ParseResult(float(int(float(v))), None, "", text[m.end() :].strip(), position=m.start("n"))
    return parse_grade(text, "geval", finish_reason, scale=scale)


def logprob_weighted_score(
    text: str,
    tokens: Sequence[str] | None,
    top_logprobs: Sequence[Mapping[str, float]],
    parsed: ParseResult,
    scale: tuple[int, int] = (1, 4),
) -> float | None:
    """G-Eval's probability-weighted score at the score position.

    The score position is the generated token that holds the parsed score digit (located by the
    character offset of the score when the tokens spell the text, else the first token whose text
    is that digit). Over the top logprobs there, the probabilities of the tokens ``"1".."4"``
    (surrounding spaces ignored, equal tokens summed) are renormalised to sum to 1 and
    ``sum(p_i * i)`` is returned; None when the position or no score token is found.
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
    total = sum(probs.values())
    if total <= 0:
        return None
    return sum(k * p for k, p in probs.items()) / total


@register_judge
class CriteriaJudge(_SingleJudge):
    """Reasons, then rates naturalness, relatedness and correctness 1-3 in JSON; score = their mean."""

    name = "criteria"
    mode = "criteria"
    description = "JSON judge: naturalness, relatedness, correctness 1-3 (3 best); score = mean"
    scale = (1, 3)
    default_template = "criteria"
    sampling_defaults: ClassVar[dict[str, Any]] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024}

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        ordered = [results[k] for k in sorted(results)]
        out = numeric_columns(ordered, self.samples)
        scored = [r for r in ordered if r.ok]
        for c in CRITERIA:
            vals = [r.ratings[c] for r in scored]
            out[c] = statistics.fmean(vals) if vals else float("nan")
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

    def parse(self, gen: Mapping[str, Any]) -> ParseResult:
        choice = gen["choices"][0]
        return parse_grade(choice.get("text"), "relative", choice.get("finish_reason"), allow_tie=self.tie)

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
            "": mean,
            "verdict": None if not codes else "A" if mean > 0 else "B" if mean < 0 else "tie",
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
        out.update({"verdict": None, "ab": None, "ba": None, "consistent": None})
        return out


def judge_names() -> list[str]:
    """Registered judge names."""
    return sorted(_JUDGES)


__all__ = [
    "MODE_ALIASES",
    "PROMETHEUS_SAMPLING",
    "VERDICT_CODE",
    "CriteriaJudge",
    "GEval",
    "Judge",
    "PrometheusAbsolute",
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
