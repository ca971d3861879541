"""``prometheus_relative`` (mode ``relative`` / ``pairwise``): Prometheus 2 pairwise ranking of
responses A and B of a pair table (``[RESULT] A|B``, optionally TIE). By default every pair is judged in
both orders; the verdict is resolved from both: the same verdict in both orders -> that verdict;
different verdicts -> tie (position bias cannot be told apart from a real preference); an order without
a verdict leaves the pair unscored (one order alone would carry the position bias)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from evalign.judges.base import (
    SWAP_VERDICT,
    VERDICT_CODE,
    Judge,
    first_reference,
    is_missing,
    pair_instruction,
    pair_verdict,
    reason_of,
    register_judge,
    resolve_orders,
    turn_fields,
)
from evalign.judges.logprobs import PROMETHEUS, first_shown_probability, p_a, with_probability
from evalign.judges.option_rules import SAMPLES_VOTES
from evalign.judges.parsing import ParseResult, parse_grade, unscored
from evalign.judges.prompts import Message, Rubric


@register_judge
class PrometheusRelative(Judge):
    """Prometheus 2 relative grading of a pair (``[RESULT] A|B``), both orders by default."""

    name = "prometheus_relative"
    mode = "relative"
    description = "Prometheus 2 pairwise ranking, A vs B under a criterion; judged in both orders"
    pairwise = True
    response_placeholders = ("response_A", "response_B")
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
        a = "" if is_missing(row.get("response_a")) else str(row.get("response_a"))
        b = "" if is_missing(row.get("response_b")) else str(row.get("response_b"))
        base: dict[str, str] = {}
        if reference:
            base["reference_answer"] = first_reference(row.get("reference")) or ""
        if rubric is not None:
            base["rubric"] = rubric.render("relative")
        out = []
        for order in self.orders:
            first, second = (a, b) if order == "ab" else (b, a)
            shown = {"instruction": pair_instruction(row, order), **turn_fields(row, order, reference)}
            out.append((order, self.template.render(reference, {**base, **shown, "response_A": first,
                                                                 "response_B": second})))
        return out

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        choice = gen["choices"][0]
        res = parse_grade(choice.get("text"), "relative", choice.get("finish_reason"), allow_tie=self.tie,
                          prompt=prompt)
        return with_probability(res, first_shown_probability(choice, PROMETHEUS))

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
                per_order[order] = SWAP_VERDICT[v] if order == "ba" and v else v
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
            "reason": None if not failures else reason_of(failures),
        }
        if self.samples > 1:
            out["std"] = statistics.pstdev(codes) if codes else float("nan")
            out["n"] = len(codes)
        prob = p_a(results, self.orders, self.samples)  # from the answer tokens' logprobs, when returned
        if prob is not None:
            out["p_a"] = prob
        else:
            out.update(self.samples_votes(str(out[""]), codes))
        return out

    def samples_votes(self, verdict: str, codes: list[float]) -> dict[str, Any]:
        """Without logprobs, with several samples at a temperature above 0: ``confidence``, the share of
        the samples whose code is the verdict's (``confidence_source`` ``samples_votes``); else nothing."""
        if self.samples < 2 or not codes or float(self.sampling.get("temperature") or 0) <= 0:
            return {}
        code = VERDICT_CODE.get(verdict)
        share = sum(c == code for c in codes) / len(codes) if code is not None else float("nan")
        return {"confidence": share, "confidence_source": SAMPLES_VOTES}

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        out.update({"code": float("nan"), "ab": None, "ba": None, "consistent": None})
        return out
