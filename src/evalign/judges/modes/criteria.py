"""``criteria`` (mode ``criteria``): the GPT-4 judge of Doostmohammadi et al. 2024 (Figure 6): reasons
first, then rates naturalness, relatedness and correctness 1-3 in a JSON object. Each rating is a column;
the score column is ``correctness`` (``score_criterion``); several samples are aggregated per criterion
by majority vote with the neutral 2 as fallback."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from evalign.errors import EvalignError
from evalign.judges.base import SingleJudge, all_references, numeric_columns, register_judge
from evalign.judges.parsing import CRITERIA, ParseResult
from evalign.judges.prompts import Rubric

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
