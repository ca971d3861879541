"""``J.p_a`` and ``J.p`` / ``J.expected`` from a real model's logprobs: SmolLM2-135M-Instruct served by
llama.cpp (the server of tests/judges/test_real_model.py), LLMBar's Vanilla prompt in both orders on
two pairs and G-Eval's prompt on two items (six calls). What is deterministic is asserted: at temperature 0
the answer token is the most likely one, so each call's probability of the first-shown output is
>= 0.5 exactly when its verdict is that output, and ``J.p_a`` is the mean of the two orders' P(A)
recomputed from the stored logprobs."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pandas as pd
import pytest
from llama_server import ServerInfo
from test_real_model import PAIRS, smollm2_gguf, smollm2_server  # noqa: F401  (fixtures)

from evalign.backends import GenerationRequest, OpenAICompatibleBackend
from evalign.backends.types import Constraint
from evalign.cache import Cache
from evalign.judges import get_judge, read_pairs, run_judge

pytestmark = pytest.mark.server


def _backend(info: ServerInfo) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(info.base_url, info.model, api_key_env=None, concurrency=1)


def test_llmbar_p_a_from_the_answer_tokens(smollm2_server: ServerInfo, tmp_path: Path) -> None:  # noqa: F811
    judge = get_judge("llmbar", template="llmbar_vanilla", temperature=0.0, max_tokens=64, seed=7, logprobs=True,
                      top_logprobs=10)
    run = run_judge(read_pairs(pd.DataFrame(PAIRS)), judge, _backend(smollm2_server), cache=Cache(tmp_path / "c.sqlite"))
    col = run.column
    t = run.table
    assert f"{col}.p_a" in t.columns, list(t.columns)
    scored = t[t[f"{col}.status"] == "scored"]
    assert len(scored), "SmolLM2 answered no pair in the format"
    for _, row in scored.iterrows():
        p = float(row[f"{col}.p_a"])
        assert 0.0 <= p <= 1.0
        # P(A) of order ab is the probability of "a"; of order ba, of "b" (A shown second). At
        # temperature 0 each order's answer is its more likely letter: the resolved verdict says how
        # the two probabilities lie against 1/2
        ab, ba = row[f"{col}.ab"], row[f"{col}.ba"]
        if ab == ba == "A":
            assert p >= 0.5
        elif ab == ba == "B":
            assert p <= 0.5
    print("\nSmolLM2 LLMBar Vanilla:", scored[[col, f"{col}.ab", f"{col}.ba", f"{col}.p_a"]].to_dict("records"))


def test_geval_grade_probability(smollm2_server: ServerInfo) -> None:  # noqa: F811
    """G-Eval's prompt to the real model, its answer held to one grade by a GBNF grammar (a 135M model
    rambles before any grade, and a cut-off answer is unparseable), read by the judge's own parser
    with the logprobs the server returns (llama.cpp's, before the grammar: the grade tokens' mass is
    small, so G-Eval's ``min_mass`` guard is off here): J.p, J.expected, J.grade, recomputed from the
    returned top logprobs."""
    judge = get_judge("geval", temperature=0.0, seed=7, top_logprobs=20, min_mass=0.0)
    recs = ({"instruction": "What is the capital of France?", "response": "Paris."},
            {"instruction": "Add 2 and 3.", "response": "2 + 3 = 6."})
    reqs = [GenerationRequest(messages=messages, **{**judge.request_settings(0), "max_tokens": 2,
                                                    "constraint": Constraint(gbnf="root ::= [1-4]")})
            for rec in recs for _, messages in judge.prompts(rec, judge.rubric, False)]

    async def ask() -> list:
        backend = _backend(smollm2_server)
        return [await backend.generate(r) for r in reqs]

    gens = [g.to_json() for g in asyncio.run(ask())]
    for gen in gens:
        out = judge.aggregate({(0, ""): judge.parse(gen)})
        assert out["method"] == "logprobs", out
        choice = gen["choices"][0]
        grade = int(choice["text"])
        probs = {int(t.strip()): math.exp(lp) for t, lp in choice["top_logprobs"][0].items() if t.strip() in "1234"
                 and t.strip()}
        total = sum(probs.values())
        assert out["grade"] == grade
        assert out["p"] == pytest.approx(probs[grade] / total)
        assert out["expected"] == pytest.approx(sum(k * v for k, v in probs.items()) / total)
        # greedy decoding held to a grade picks the most likely grade token: at least 1/4 of the grades' mass
        assert 0.25 <= out["p"] <= 1.0 and 1.0 <= out["expected"] <= 4.0
        assert math.isclose(out["expected"], out[""])  # G-Eval's score is the expected grade
    print("\nSmolLM2 G-Eval:", [(g["choices"][0]["text"], judge.aggregate({(0, ""): judge.parse(g)})["p"]) for g in gens])
