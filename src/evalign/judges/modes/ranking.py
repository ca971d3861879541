"""``prometheus_ranking`` (``--mode absolute --ranking``): Prometheus' protocol for preference data:
responses A and B of a pair are graded independently with the absolute prompt; while the scores are
equal (or one is unparseable) both are graded again (temperature > 0) up to ``max_rounds``; then the
pair is a tie (or unparseable). Rounds with an unparseable grade have their own, smaller cap
(``max_unparseable``): a judge that cannot answer in the format is not asked ``max_rounds`` times."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalign.errors import EvalignError
from evalign.judges.base import VERDICT_CODE, SingleJudge, pair_verdict, reason_of, register_judge
from evalign.judges.parsing import ParseResult
from evalign.judges.prompts import Message, Rubric

#: default number of rounds of the ranking protocol (a first grading and up to 4 re-gradings)
RANKING_MAX_ROUNDS = 5
#: default number of rounds with an unparseable grade after which a pair is given up (unparseable)
RANKING_MAX_UNPARSEABLE = 2


@register_judge
class PrometheusRanking(SingleJudge):
    """Prometheus' ranking by absolute grading (Kim et al. 2023/2024: preference data graded with
    the absolute prompt): responses A and B of a pair are graded independently (1-5 under the
    rubric). While their scores are equal, or one is unparseable, both are graded again (a new
    round: temperature > 0, default 1.0 as in the paper, seed + round) up to ``max_rounds`` rounds;
    then the pair is a ``tie`` (equal scores) or ``unparseable``. Re-grading for an unparseable
    grade stops after ``max_unparseable`` such rounds (default 2; ties alone use ``max_rounds``). Every round's call is cached, so a
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

    def __init__(self, *, max_rounds: int = RANKING_MAX_ROUNDS, max_unparseable: int = RANKING_MAX_UNPARSEABLE,
                 **kw: Any) -> None:
        if int(max_rounds) < 1:
            raise EvalignError(f"max_rounds must be >= 1, got {max_rounds}")
        if int(max_unparseable) < 1:
            raise EvalignError(f"max_unparseable must be >= 1, got {max_unparseable}")
        self.max_rounds = int(max_rounds)
        self.max_unparseable = int(max_unparseable)
        super().__init__(**kw)
        if self.samples != 1:
            raise EvalignError("the ranking protocol draws its own rounds; samples must be 1")
        if float(self.sampling.get("temperature", 0) or 0) <= 0 and self.max_rounds > 1:
            raise EvalignError("the ranking protocol re-grades ties: temperature must be > 0")

    def extra_options(self) -> dict[str, Any]:
        return {"ranking": True, "max_rounds": self.max_rounds, "max_unparseable": self.max_unparseable}

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        out = []
        for side in ("a", "b"):
            single = {**row, "response": row.get(f"response_{side}"), "messages": row.get(f"messages_{side}")}
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
        bad = sum(1 for r in range(last + 1) if None in self._round(results, r))
        if bad >= self.max_unparseable:
            return []  # the judge does not answer in the format: asking again burns rounds
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
                        "reason": reason_of(failures) or "no_score"})
        return out

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        out.update({"code": float("nan"), "score_a": float("nan"), "score_b": float("nan"), "rounds": 0})
        return out
