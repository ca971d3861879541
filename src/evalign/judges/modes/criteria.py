"""``criteria`` (mode ``criteria``): the GPT-4 judge of Doostmohammadi et al. 2024 (Figure 6): reasons
first, then rates naturalness, relatedness and correctness 1-3 in a JSON object. Each rating is a column;
the score column is ``correctness`` (``score_criterion``); several samples are aggregated per criterion
by majority vote with the neutral 2 as fallback.

Several criteria of one's own in one call (``criteria=[...]``, ``--criteria``): each a rubric (a
built-in name, a file or a mapping: its question and five score descriptions); the template
``criteria_rubrics`` lists them and asks for one JSON object, reasoning first, then an integer 1-5 per
criterion, and the answer's shape (a JSON schema with exactly those keys) is made from them. Each
criterion is its own column (``J.<name>``) and is read on its own: a criterion missing from an answer
leaves that column empty (the others are kept) and is counted per criterion in the summary
(``criteria``); ``J`` is the mean of the criteria (or ``score_criterion``), unscored unless every
criterion was read. One call per item and sample, cached as every call is."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from evalign.errors import EvalignError
from evalign.judges.base import SingleJudge, all_references, numeric_columns, register_judge
from evalign.judges.parsing import CRITERIA, TAIL_CHARS, ParseResult, last_json_object, unscored
from evalign.judges.prompts import RUBRIC_SCALE, Rubric, load_rubric
from evalign.judges.shapes import AnswerShape

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
class CriteriaJudge(SingleJudge):
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

    def __init__(self, *, score_criterion: str | None = None, criteria: Sequence[Any] | None = None,
                 **kw: Any) -> None:
        self.rubrics: tuple[Rubric, ...] = tuple(load_rubric(c) for c in criteria or ())
        self.names: tuple[str, ...] = tuple(criterion_name(r) for r in self.rubrics) or CRITERIA
        if len(set(self.names)) < len(self.names):
            raise EvalignError(f"criteria need different names, got {', '.join(self.names)}")
        if score_criterion is not None and score_criterion not in self.names:
            raise EvalignError(f"score_criterion must be one of {', '.join(self.names)}, got {score_criterion!r}")
        self.score_criterion = score_criterion or ("correctness" if not self.rubrics else None)
        if self.rubrics:
            kw.setdefault("template", "criteria_rubrics")
            self.scale = (1, RUBRIC_SCALE)  # type: ignore[misc]
        super().__init__(**kw)

    def extra_options(self) -> dict[str, Any]:
        if self.rubrics:
            return {"criteria": ",".join(r.tag() for r in self.rubrics), "score": self.score_criterion or "mean"}
        return {"score": self.score_criterion, "aggregate": "majority(2)"}

    def fields(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> dict[str, str]:
        f = super().fields(row, rubric, reference)
        if reference:
            f["reference_answer"] = all_references(row.get("reference")) or ""
        if self.rubrics:
            f["criteria"] = "\n\n".join(f"{n}: {r.render('absolute')}" for n, r in zip(self.names, self.rubrics,
                                                                                      strict=True))
            example = {"reasoning": "<your reasoning>", **{n: "<1-5>" for n in self.names}}
            f["criteria_json"] = json.dumps(example).replace('"<1-5>"', "<1-5>")
        return f

    def answer_shape(self, order: str) -> AnswerShape | None:
        """With criteria of one's own: one JSON object, reasoning first, an integer 1-5 per criterion."""
        if not self.rubrics:
            return super().answer_shape(order)
        lo, hi = self.scale
        props: dict[str, Any] = {"reasoning": {"type": "string"}}
        props.update({n: {"type": "integer", "minimum": lo, "maximum": hi} for n in self.names})
        return AnswerShape(json={"type": "object", "properties": props})

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        if not self.rubrics:
            return super().parse(gen, prompt)
        choice = gen["choices"][0]
        return parse_each_criterion(choice.get("text") or "", choice.get("finish_reason"), self.names, self.scale)

    def criterion_counts(self, columns: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """Per criterion: items read, items not read, and the mean rating (the summary's ``criteria``)."""
        out: dict[str, dict[str, Any]] = {}
        for n in self.names:
            vals = [float(c[n]) for c in columns if isinstance(c.get(n), float) and math.isfinite(c[n])]
            out[n] = {"scored": len(vals), "unscored": len(columns) - len(vals),
                      "mean": sum(vals) / len(vals) if vals else float("nan")}
        return out

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        if self.rubrics:
            return self._aggregate_each(results)
        ordered = [results[k] for k in sorted(results)]
        scored = [r for r in ordered if r.ok]
        out = numeric_columns(ordered, self.samples)
        for c in CRITERIA:
            v = majority_vote([r.ratings[c] for r in scored])
            out[c] = float("nan") if v is None else float(v)
        crit = self.score_criterion or "correctness"
        out[""] = out[crit]
        if self.samples > 1:
            vals = [float(r.ratings[crit]) for r in scored]
            out["median"] = statistics.median(vals) if vals else float("nan")
            out["std"] = statistics.pstdev(vals) if vals else float("nan")
        return out

    def _aggregate_each(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        """Criteria of one's own: each criterion from the samples that read it (the mean of them);
        ``J`` the mean of the criteria (or ``score_criterion``) when every one was read."""
        ordered = [results[k] for k in sorted(results)]
        out = numeric_columns(ordered, self.samples)
        for n in self.names:
            vals = [r.ratings[n] for r in ordered if n in r.ratings]
            out[n] = statistics.fmean(vals) if vals else float("nan")
        per = [out[n] for n in self.names]
        if all(math.isfinite(v) for v in per):
            out[""] = out[self.score_criterion] if self.score_criterion else statistics.fmean(per)
            out["status"], out["reason"] = "scored", None
        else:
            out[""] = float("nan")
            out["status"] = "unscored"
            out["reason"] = next((r.reason for r in ordered if r.reason), None) or "missing_field"
        return out

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        out.update({c: float("nan") for c in self.names})
        return out


def criterion_name(rubric: Rubric) -> str:
    """A rubric's name as a column suffix and JSON key (letters, digits and ``_``)."""
    name = re.sub(r"[^0-9A-Za-z_]+", "_", rubric.name).strip("_")
    if not name or name == "reasoning":
        raise EvalignError(f"a criterion needs a name (letters, digits, _; not 'reasoning'), got {rubric.name!r}")
    return name


def parse_each_criterion(text: str, finish_reason: str | None, names: Sequence[str],
                         scale: tuple[int, int]) -> ParseResult:
    """The last JSON object of ``text`` read criterion by criterion: ``ratings`` holds each of
    ``names`` given as an integer on ``scale``; the result is read (their mean) when at least one
    is, and ``detail`` names the criteria that were not. Unscored: cut off, no JSON object at the
    end, or no criterion read."""
    if finish_reason == "length":
        return unscored("truncated", feedback=text.strip())
    found = last_json_object(text.strip())
    if found is None or len(text.strip()[found[2]:].strip("` \n")) > TAIL_CHARS:
        return unscored("invalid_json", feedback=text.strip())
    obj, start, _ = found
    lo, hi = scale
    ratings = {n: int(v) for n in names if isinstance(v := obj.get(n), int | float) and not isinstance(v, bool)
               and math.isfinite(v) and v == int(v) and lo <= int(v) <= hi}
    feedback = str(obj.get("reasoning") or text.strip()[:start]).strip()
    missing = [n for n in names if n not in ratings]
    if not ratings:
        return unscored("missing_field", f"no criterion read ({', '.join(missing)})", feedback)
    detail = f"not read: {', '.join(missing)}" if missing else ""
    return ParseResult(statistics.fmean(ratings.values()), None, detail, feedback, ratings)
