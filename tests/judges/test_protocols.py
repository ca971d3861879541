"""Judge runs against a scripted in-process backend with known answers: the ranking protocol (exact
verdicts, rounds, resume after a kill between rounds), the criteria majority vote, G-Eval's method,
fallback and minimum probability mass, parser errors, --skip-self globs, the output convention."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalign.backends import Backend, BackendRequestError, Choice, Generation, GenerationRequest, Usage
from evalign.cache import Cache
from evalign.judges import get_judge, read_pairs, run_judge
from evalign.judges.grading import PrometheusAbsolute, majority_vote


class Scripted(Backend):
    """Answers ``answer(request)`` (a text, a Choice, or an exception to raise); records requests."""

    kind = "scripted"

    def __init__(self, answer: Callable[[GenerationRequest], Any], model: str = "scripted") -> None:
        super().__init__()
        self.answer = answer
        self.model = model
        self.calls: list[GenerationRequest] = []
        self.concurrency = 3

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model}

    async def generate(self, req: GenerationRequest) -> Generation:
        self.calls.append(req)
        out = self.answer(req)
        if isinstance(out, BaseException):
            raise out
        choice = out if isinstance(out, Choice) else Choice(out, "stop")
        return Generation.from_choices([choice], Usage(1, 1))


def graded(req: GenerationRequest) -> str:
    """The response under evaluation in an absolute prompt."""
    text = req.messages[-1]["content"]  # type: ignore[index]
    m = re.search(r"###Response to evaluate:\n(.*?)\n\n###", text, re.S)
    assert m is not None
    return m.group(1)


# pair -> (score of A, score of B) per round (None = unparseable output); the round is seed - SEED
SEED = 100
SCRIPT = {
    "p0": [(4, 2)],                                  # A at once
    "p1": [(3, 3), (2, 5)],                          # tie, then B
    "p2": [(3, 3), (2, 2), (5, 5)],                  # tie in every round -> tie
    "p3": [(None, 4), (None, 4), (None, 4)],         # A never parseable -> unparseable after 2 rounds
    "p4": [(None, 4), (2, 1)],                       # unparseable, then A
}  # fmt: skip
# p3: unparseable rounds have their own cap (max_unparseable, default 2), below max_rounds
EXPECTED = {"p0": ("A", 1), "p1": ("B", 2), "p2": ("tie", 3), "p3": ("unparseable", 2), "p4": ("A", 2)}


def ranking_answer(req: GenerationRequest) -> str:
    resp = graded(req)
    pair, side = resp.split("-")
    rnd = int(req.seed) - SEED  # type: ignore[arg-type]
    score = SCRIPT[pair][rnd][0 if side == "a" else 1]
    return "Feedback: I cannot tell." if score is None else f"Feedback: fine. [RESULT] {score}"


def pair_table() -> pd.DataFrame:
    rows = [{"id": p, "instruction": f"Task {p}.", "system_a": "alpha", "system_b": "beta",
             "response_a": f"{p}-a", "response_b": f"{p}-b"} for p in SCRIPT]
    return read_pairs(pd.DataFrame(rows))


def test_ranking_protocol_exact_verdicts_and_rounds(tmp_path: Path) -> None:
    judge = get_judge("ranking", rubric="hhh_helpfulness", max_rounds=3, seed=SEED)
    be = Scripted(ranking_answer)
    run = run_judge(pair_table(), judge, be, cache=Cache(tmp_path / "c.sqlite"))
    t = run.table
    col = run.column
    assert col == "prometheus_ranking[hhh_helpfulness]"
    assert dict(zip(t["id"], zip(t[col], t[f"{col}.rounds"], strict=True), strict=True)) == EXPECTED
    assert t[f"{col}.code"].tolist()[:3] == [1.0, -1.0, 0.0] and math.isnan(t[f"{col}.code"][3])
    assert t.loc[1, f"{col}.score_a"] == 2.0 and t.loc[1, f"{col}.score_b"] == 5.0
    assert t[f"{col}.status"].tolist() == ["scored", "scored", "scored", "unscored", "scored"]
    # every round is two calls at temperature 1.0 with seed + round; the maximum is respected
    assert len(be.calls) == 2 * sum(r for _, r in EXPECTED.values())
    assert {c.temperature for c in be.calls} == {1.0}
    assert max(c.seed for c in be.calls) == SEED + 2  # type: ignore[type-var]
    s = run.summary
    assert s.kind == "verdict" and s.distribution == {"A": 2, "B": 1, "tie": 1, "unparseable": 1}
    assert s.rounds == {"1": 1, "2": 3, "3": 1}
    assert "ranking:yes" in s.signature and "max_rounds:3" in s.signature and "max_unparseable:2" in s.signature
    # the absolute prompt with the HHH rubric, one response per call
    assert "###Score Rubrics:\n[" in be.calls[0].messages[-1]["content"]  # type: ignore[index]
    # a rerun makes no call
    be2 = Scripted(ranking_answer)
    again = run_judge(pair_table(), get_judge("ranking", rubric="hhh_helpfulness", max_rounds=3, seed=SEED), be2,
                      cache=Cache(tmp_path / "c.sqlite"))
    assert be2.calls == [] and again.table[col].tolist() == t[col].tolist()


def test_ranking_resume_after_kill_between_rounds_repeats_no_call(tmp_path: Path) -> None:
    """The run dies at its first round-2 call (after round 1 is done and cached); the rerun makes
    only the calls that were not made, and its verdicts equal an uninterrupted run's."""

    def dying(req: GenerationRequest) -> Any:
        if req.seed == SEED + 1:
            return BackendRequestError("server killed", fatal=True)
        return ranking_answer(req)

    cache = Cache(tmp_path / "c.sqlite")
    first = Scripted(dying)
    with pytest.raises(BackendRequestError, match="killed"):
        run_judge(pair_table(), get_judge("ranking", max_rounds=3, seed=SEED), first, cache=cache)
    made = {(graded(c), c.seed) for c in first.calls if c.seed == SEED}
    assert len(made) == 10  # all of round 1
    second = Scripted(ranking_answer)
    run = run_judge(pair_table(), get_judge("ranking", max_rounds=3, seed=SEED), second, cache=cache)
    again = [(graded(c), c.seed) for c in second.calls]
    assert not set(again) & made and len(again) == len(set(again))
    assert all(seed > SEED for _, seed in again)
    col = run.column
    assert dict(zip(run.table["id"], run.table[col], strict=True)) == {k: v[0] for k, v in EXPECTED.items()}
    assert len(made) + len(again) == 2 * sum(r for _, r in EXPECTED.values())


def test_ranking_options_are_checked() -> None:
    from evalign.errors import EvalignError

    with pytest.raises(EvalignError, match="temperature must be > 0"):
        get_judge("ranking", temperature=0.0)
    with pytest.raises(EvalignError, match="max_rounds"):
        get_judge("ranking", max_rounds=0)


# --- criteria --------------------------------------------------------------------------------------


def test_majority_vote_with_neutral_fallback() -> None:
    assert majority_vote([3, 3, 1]) == 3
    assert majority_vote([1, 2, 3]) == 2  # no majority: the neutral 2
    assert majority_vote([1, 3]) == 2 and majority_vote([1]) == 1 and majority_vote([]) is None


def test_criteria_columns_and_majority_over_samples(tmp_path: Path) -> None:
    answers = {0: (3, 1, 3), 1: (3, 2, 1), 2: (1, 2, 2)}  # sample -> (naturalness, relatedness, correctness)

    def answer(req: GenerationRequest) -> str:
        n, r, c = answers[int(req.seed)]  # type: ignore[arg-type]
        return f'Reasoning first.\n{{"reasoning": "ok", "naturalness": {n}, "relatedness": {r}, "correctness": {c}}}'

    table = pd.DataFrame([{"id": "1", "system": "s", "instruction": "Name a prime.", "response": "7",
                           "reference": ["2", "3"]}])
    run = run_judge(table, get_judge("criteria", samples=3, seed=0), Scripted(answer), cache=Cache(tmp_path / "c"))
    row = run.table.iloc[0]
    # naturalness 3,3,1 -> 3; relatedness 1,2,2 -> 2; correctness 3,1,2 -> no majority -> 2
    assert (row["criteria.naturalness"], row["criteria.relatedness"], row["criteria.correctness"]) == (3, 2, 2)
    assert row["criteria"] == 2.0 and row["criteria.status"] == "scored"
    judge = get_judge("criteria", score_criterion="naturalness", samples=3, seed=0)
    assert run_judge(table, judge, Scripted(answer), cache=Cache(tmp_path / "c")).table.iloc[0]["criteria"] == 3.0


# --- G-Eval ------------------------------------------------------------------------------------------


def geval_answer(req: GenerationRequest) -> Choice:
    text = req.messages[-1]["content"]  # type: ignore[index]
    if "no-logprobs" in text:
        return Choice("2", "stop")
    mass = 0.3 if "low-mass" in text else 0.9
    tops = [{"1": math.log(mass / 3), "2": math.log(2 * mass / 3), "x": math.log(1 - mass)}]
    return Choice("2", "stop", top_logprobs=tops, tokens=["2"], token_logprobs=[math.log(2 * mass / 3)])


def geval_table() -> pd.DataFrame:
    rows = [{"id": str(i), "system": "s", "instruction": f"Task {i}.", "response": r}
            for i, r in enumerate(["fine", "fine too", "low-mass", "no-logprobs"])]
    return pd.DataFrame(rows)


def test_geval_method_counts_min_mass_and_fallback(tmp_path: Path) -> None:
    run = run_judge(geval_table(), get_judge("geval"), Scripted(geval_answer), cache=Cache(tmp_path / "c"))
    t = run.table
    assert t["geval"][0] == pytest.approx((1 * 1 / 3 + 2 * 2 / 3) / 1.0)
    assert t["geval.method"].fillna("-").tolist() == ["logprobs", "logprobs", "-", "samples"]
    assert t["geval.reason"][2] == "low_mass" and t["geval.status"][2] == "unscored"
    assert t["geval"][3] == 2.0
    s = run.summary
    assert s.methods == {"logprobs": 2, "samples": 1} and s.higher_is_better is False
    assert "method:logprobs+samples" in s.signature and "min_mass:0.5" in s.signature
    strict = run_judge(geval_table(), get_judge("geval", fallback="error", min_mass=0.2), Scripted(geval_answer),
                       cache=Cache(tmp_path / "c2"))
    st = strict.table
    assert st["geval.reason"][3] == "no_logprobs" and st["geval.status"][2] == "scored"
    assert strict.summary.methods == {"logprobs": 3} and "method:logprobs|" in strict.summary.signature


# --- failures never abort, never silent ----------------------------------------------------------------


class Fragile(PrometheusAbsolute):
    """A judge whose parser crashes on one output."""

    name = "fragile"

    def parse(self, gen: Any, prompt: str | None = None) -> Any:
        if "CRASH" in gen["choices"][0]["text"]:
            raise IndexError("list index out of range")
        return super().parse(gen, prompt)


def test_parser_error_leaves_the_row_unscored_and_keeps_the_text(tmp_path: Path) -> None:
    table = pd.DataFrame([{"id": str(i), "system": "s", "instruction": f"T{i}", "response": f"r{i}"}
                          for i in range(3)])

    def answer(req: GenerationRequest) -> Any:
        text = req.messages[-1]["content"]  # type: ignore[index]
        if "r1" in text:
            return "Feedback: CRASH here [RESULT] 3"
        if "r2" in text:
            return BackendRequestError("HTTP 400: model overloaded", status=400, attempts=3)
        return "Feedback: ok [RESULT] 4"

    run = run_judge(table, Fragile(), Scripted(answer), cache=Cache(tmp_path / "c"))
    t = run.table
    col = run.column
    usage = ["calls", "unparsed", "prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens",
             "seconds", "model"]
    assert list(t.columns[-13:]) == [col, f"{col}.feedback", f"{col}.status", f"{col}.reason", f"{col}.error",
                                     *(f"{col}.{u}" for u in usage)]
    assert t[f"{col}.reason"].fillna("-").tolist() == ["-", "parser_error", "backend_error"]
    # the failed call was not answered: no call, no tokens; the parser error is an answered, unparsed call
    assert t[f"{col}.calls"].tolist() == [1, 1, 0] and t[f"{col}.unparsed"].tolist() == [0, 1, 0]
    assert t[f"{col}.feedback"][1] == "Feedback: CRASH here [RESULT] 3"
    assert t[f"{col}.error"][2] == "HTTP 400: model overloaded" and t[f"{col}.error"][:2].isna().all()
    s = run.summary
    assert s.errors == {"HTTP 400: model overloaded": 1} and s.last_error == "HTTP 400: model overloaded"
    assert s.calls.failed == 1 and s.calls.http_retries == 2 and s.failed_fraction == pytest.approx(1 / 3)


def test_skip_self_takes_glob_patterns(tmp_path: Path) -> None:
    table = pd.DataFrame([{"id": str(i), "system": sys_, "instruction": "T", "response": f"r{i}"}
                          for i, sys_ in enumerate(["gpt-4-0613", "GPT-4o", "llama-2-7b", "judge-model"])])
    be = Scripted(lambda req: "Feedback: ok [RESULT] 4", model="judge-model")
    run = run_judge(table, get_judge("absolute"), be, cache=Cache(tmp_path / "c"), skip_self=["gpt-4*", "self"])
    t = run.table
    assert t[f"{run.column}.status"].tolist() == ["skipped", "skipped", "scored", "skipped"]
    assert t[f"{run.column}.reason"][0] == "self_evaluation" and len(be.calls) == 1


# --- the ranking protocol on the real llama.cpp server (random weights) ----------------------------------


@pytest.mark.server
def test_ranking_protocol_on_the_server(llama_server, fault_proxy, tmp_path: Path) -> None:
    """Random weights with a grammar that forces a grade 1-2: ties are frequent, so rounds are used;
    no pair goes past --max-rounds; ties and verdicts are counted; a rerun makes no call."""
    from fault_proxy import Forward  # noqa: F401  (the proxy counts requests)

    from evalign.backends import make_backend

    grammar = 'root ::= "Feedback: " [a-z ]{3,12} " [RESULT] " [1-2]'
    rows = [{"id": str(i), "instruction": f"Pick a fruit ({i}).", "system_a": "x", "system_b": "y",
             "response_a": f"Apple {i}.", "response_b": f"Pear {'and plum ' * i}."} for i in range(6)]
    table = read_pairs(pd.DataFrame(rows))
    cache = Cache(tmp_path / "c.sqlite")

    def run_once() -> Any:
        judge = get_judge("ranking", grammar=grammar, max_rounds=3, seed=7, max_tokens=48, reference=False)
        backend = make_backend("openai", base_url=fault_proxy.base_url, model=llama_server.model, concurrency=2)
        return run_judge(table, judge, backend, cache=cache)

    run = run_once()
    t, col = run.table, run.column
    posts = [s for s in fault_proxy.seen if s.path.endswith("/chat/completions")]
    rounds = t[f"{col}.rounds"].tolist()
    assert len(posts) == 2 * sum(rounds)  # two calls per round
    assert max(rounds) <= 3 and min(rounds) >= 1
    assert sorted({s.body["seed"] for s in posts}) == list(range(7, 7 + max(rounds)))
    assert {s.body["temperature"] for s in posts} == {1.0}
    for _, row in t.iterrows():  # a decided pair stops; a tie only after the last round
        a, b = row[f"{col}.score_a"], row[f"{col}.score_b"]
        if row[col] in ("A", "B"):
            assert (a > b) == (row[col] == "A") and a != b
        elif row[col] == "tie":
            assert a == b and row[f"{col}.rounds"] == 3
    s = run.summary
    assert sum(s.distribution.values()) == 6 and s.rounds == {str(k): v for k, v in sorted(
        pd.Series(rounds).value_counts().items())}
    assert sum(rounds) > 6  # rounds were used (grades 1-2 tie often)
    fault_proxy.reset()
    again = run_once()
    assert [x for x in fault_proxy.seen if x.path.endswith("/chat/completions")] == []
    assert again.table[col].tolist() == t[col].tolist()
