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

from evalign.cache import Cache
from evalign.judges import get_judge, read_pairs, run_judge
from evalign.judges.backends import GenerationRequest, OpenAICompatibleBackend

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
    """G-Eval's prompt to the real model, its first line only (``stop``: a weak model rambles on and a
    cut-off answer is unparseable), read by the judge's own parser: J.p, J.expected, J.grade."""
    judge = get_judge("geval", temperature=0.0, seed=7)
    recs = ({"instruction": "What is the capital of France?", "response": "Paris."},
            {"instruction": "Add 2 and 3.", "response": "2 + 3 = 6."})
    reqs = [GenerationRequest(messages=messages, **{**judge.request_settings(0), "max_tokens": 6, "stop": ["\n"]})
            for rec in recs for _, messages in judge.prompts(rec, judge.rubric, False)]

    async def ask() -> list:
        backend = _backend(smollm2_server)
        return [await backend.generate(r) for r in reqs]

    got = []
    for gen in asyncio.run(ask()):
        out = judge.aggregate({(0, ""): judge.parse(gen.to_json())})
        if out.get("method") == "logprobs":
            got.append(out)
    assert got, "SmolLM2 opened no G-Eval answer with a grade"
    for out in got:
        p, e, g = out["p"], out["expected"], out["grade"]
        # greedy decoding: the chosen grade is the most likely grade token, so it has at least 1/4
        assert 0.25 <= p <= 1.0 and 1.0 <= e <= 4.0 and g in (1.0, 2.0, 3.0, 4.0)
        assert math.isclose(e, out[""])  # G-Eval's score is the expected grade
    print("\nSmolLM2 G-Eval:", got)
