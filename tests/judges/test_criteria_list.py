"""Several criteria in one call (issue 29, item 2): the criteria judge with criteria of one's own
(rubrics) asks for one JSON object per item, constrained to exactly those keys; each criterion is a
column, read and counted on its own (a criterion missing from an answer leaves only its column empty);
one call per item, cached."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalign.backends import Backend, Generation, GenerationRequest, Usage
from evalign.backends.types import Choice
from evalign.cache import Cache
from evalign.errors import EvalignError
from evalign.judges import get_judge, run_judge

CRITERIA = ["helpfulness", "honesty", "harmlessness"]


class JSONBackend(Backend):
    """Answers each request with ``answer(request)``; records the requests; takes a regex constraint."""

    kind = "json-script"
    constraint_forms = ("regex", "json_schema")

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer
        self.seen: list[GenerationRequest] = []

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    async def generate(self, req: GenerationRequest) -> Generation:
        self.seen.append(req)
        self._count(Usage(10, 5))
        return Generation.from_choices([Choice(self.answer(req), "stop")], Usage(10, 5))


def answer_of(req: GenerationRequest) -> str:
    """Row q2 leaves honesty out; the others rate every criterion by the instruction's digit."""
    assert req.messages is not None
    prompt = req.messages[-1]["content"]
    k = int(re.search(r"Question (\d)", prompt).group(1))  # type: ignore[union-attr]
    obj: dict[str, Any] = {"reasoning": f"row {k}", "helpfulness": k, "honesty": 6 - k, "harmlessness": 3}
    if k == 2:
        obj.pop("honesty")
    return json.dumps(obj)


def items() -> pd.DataFrame:
    return pd.DataFrame([{"id": f"q{k}", "system": "s", "instruction": f"Question {k}", "response": "ok"}
                         for k in (1, 2, 3)])


def test_each_criterion_is_its_own_column_from_one_call(tmp_path: Path) -> None:
    judge = get_judge("criteria", criteria=CRITERIA, max_tokens=200)
    be = JSONBackend(answer_of)
    cache = Cache(tmp_path / "c.sqlite")
    run = run_judge(items(), judge, be, cache=cache)
    t, col = run.table, run.column
    assert be.requests == 3  # one call per item for all three criteria
    for req in be.seen:  # each call constrained to one JSON object with exactly these keys, reasoning first
        assert req.constraint is not None and req.constraint.regex is not None
        assert re.fullmatch(req.constraint.regex, answer_of(req)) or "honesty" not in answer_of(req)
        assert list(req.constraint.json_schema["properties"]) == ["reasoning", *CRITERIA]  # type: ignore[index]
    assert t[f"{col}.helpfulness"].tolist() == [1.0, 2.0, 3.0]
    assert t[f"{col}.harmlessness"].tolist() == [3.0, 3.0, 3.0]
    honesty = t[f"{col}.honesty"].tolist()
    assert honesty[0] == 5.0 and honesty[2] == 3.0 and pd.isna(honesty[1])
    # J: the mean of the criteria, where every one was read
    assert t[col].tolist()[0] == pytest.approx((1 + 5 + 3) / 3) and pd.isna(t[col].tolist()[1])
    assert t[f"{col}.status"].tolist() == ["scored", "unscored", "scored"]
    assert t[f"{col}.reason"].tolist()[1] == "missing_field"
    counts = run.summary.criteria
    assert counts["helpfulness"]["scored"] == 3 and counts["honesty"] == {"scored": 2, "unscored": 1, "mean": 4.0}
    # cached: the same run again makes no call
    again = run_judge(items(), judge, JSONBackend(answer_of), cache=cache)
    assert again.summary.calls.new == 0 and again.summary.calls.cached == 3
    assert again.table[f"{col}.honesty"].equals(t[f"{col}.honesty"])


def test_score_criterion_and_names_are_checked() -> None:
    judge = get_judge("criteria", criteria=CRITERIA, score_criterion="honesty")
    assert judge.names == tuple(CRITERIA) and judge.scale == (1, 5)
    with pytest.raises(EvalignError, match="score_criterion must be one of"):
        get_judge("criteria", criteria=CRITERIA, score_criterion="correctness")
    with pytest.raises(EvalignError, match="different names"):
        get_judge("criteria", criteria=["honesty", "honesty"])
    # the paper's judge is unchanged: its three criteria, correctness the score
    paper = get_judge("criteria")
    assert paper.names == ("naturalness", "relatedness", "correctness") and paper.score_criterion == "correctness"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_answer_the_constraint_allows_reads_every_criterion(data: st.DataObject) -> None:
    judge = get_judge("criteria", criteria=CRITERIA, max_tokens=160)
    c = judge.constraint(160)
    assert c is not None and c.regex is not None
    text = data.draw(st.from_regex(re.compile(c.regex), fullmatch=True))
    res = judge.parse_call({"choices": [{"text": text, "finish_reason": "stop"}]}, None, "")
    assert res.ok and set(res.ratings) == set(CRITERIA) and res.detail == ""


def test_max_tokens_too_small_for_the_shape(tmp_path: Path) -> None:
    """auto: one note and the run goes on unconstrained (the calls of constrain off); on: that line is the error."""
    notes: list[str] = []
    be = JSONBackend(answer_of)
    run = run_judge(items(), get_judge("criteria", criteria=CRITERIA, max_tokens=24), be,
                    cache=Cache(tmp_path / "c.sqlite"), on_note=notes.append)
    assert len(notes) == 1 and "max_tokens 24 is too small for the answer's shape" in notes[0]
    assert run.summary.constraint["sent"] is False and all(r.constraint is None for r in be.seen)
    off = run_judge(items(), get_judge("criteria", criteria=CRITERIA, max_tokens=24, constrain="off"),
                    JSONBackend(answer_of), cache=Cache(tmp_path / "c.sqlite"))
    assert off.summary.calls.cached == 3  # the same calls as constrain off
    with pytest.raises(EvalignError, match="too small"):
        run_judge(items(), get_judge("criteria", criteria=CRITERIA, max_tokens=24, constrain="on"),
                  JSONBackend(answer_of), cache=Cache(tmp_path / "c.sqlite"))
