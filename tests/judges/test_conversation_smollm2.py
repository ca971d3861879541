"""A multi-turn MT-Bench pair judged end to end on the real offline model: SmolLM2-135M-Instruct served
by llama.cpp's server (the fixture of ``test_real_model.py``). Four calls in all (the prompts are ~450
tokens; under load a call takes long on two cores): the pair in both orders, then each order's prompt
sent once more with ``max_tokens`` 1 to read the server's own prompt-token count. What is asserted is
what is deterministic, not the tiny judge's quality: both orders made with FastChat's multi-turn
prompt, every call counted (scored or unscored with a known reason), the table's token counts equal to
the server's ``usage``, and a resumed run makes no call."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from test_real_model import smollm2_gguf, smollm2_server  # noqa: F401  (the session's SmolLM2 server)

from evalign.backends import OpenAICompatibleBackend
from evalign.cache import Cache
from evalign.judges import get_judge, read_pairs, run_judge
from evalign.judges.parsing import REASONS

pytestmark = pytest.mark.server

PAIRS = Path(__file__).resolve().parent / "data" / "mtbench_pairs.jsonl"


def test_multi_turn_pair_on_smollm2(smollm2_server, tmp_path: Path) -> None:  # noqa: F811
    table = read_pairs(PAIRS, pref=["pref_1", "pref_2", "pref_3"]).head(1)  # the two-turn pair, turn 2 graded
    assert table["turn"].tolist() == [2]
    judge = get_judge("mtbench_pair", temperature=0.0, max_tokens=48, seed=7)
    prompts = dict(judge.prompts(table.to_dict("records")[0], None, False))
    assert prompts["ab"][-1]["content"].startswith("<|The Start of Assistant A's Conversation with User|>")
    assert "You should focus on who provides a better answer to the second user question" in prompts["ab"][0]["content"]
    cache = Cache(tmp_path / "c.sqlite")
    be = OpenAICompatibleBackend(smollm2_server.base_url, smollm2_server.model, api_key_env=None, concurrency=1,
                                 timeout=600, idle_timeout=600)
    run = run_judge(table, judge, be, cache=cache)
    row = run.table.iloc[0]
    s = run.summary
    assert s.items == 1 and s.scored + s.unscored == 1 and s.calls.new == 2
    assert row["mtbench_pair.status"] == "scored" or row["mtbench_pair.reason"] in REASONS
    assert row["mtbench_pair.calls"] == 2 and row["mtbench_pair.model"] == "smollm2"
    assert 0 < row["mtbench_pair.completion_tokens"] <= 2 * 48 and row["mtbench_pair.seconds"] > 0
    # the server's own count of each order's prompt (the same messages, max_tokens 1)
    counted = 0
    for order in ("ab", "ba"):
        body = {"model": smollm2_server.model, "messages": prompts[order], "max_tokens": 1, "temperature": 0.0}
        r = httpx.post(f"{smollm2_server.base_url}/chat/completions", json=body, timeout=600)
        counted += int(r.json()["usage"]["prompt_tokens"])
    assert row["mtbench_pair.prompt_tokens"] == counted == s.usage["prompt_tokens"]
    # resumed: answered from the cache, the same usage, no call
    again = run_judge(table, judge, OpenAICompatibleBackend(smollm2_server.base_url, smollm2_server.model,
                                                            api_key_env=None), cache=cache)
    assert again.summary.calls.new == 0 and again.summary.usage == {**s.usage, "new_calls": 0,
                                                                    "new_prompt_tokens": 0, "new_completion_tokens": 0}
    assert json.dumps(again.table.iloc[0]["mtbench_pair.feedback"]) == json.dumps(row["mtbench_pair.feedback"])
