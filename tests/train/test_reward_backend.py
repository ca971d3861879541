"""The reward backend and judges on tiny random reward models (a Llama with a chat template, a BERT
cross-encoder built from the real all-MiniLM-L6-v2 tokenizer): what the model reads (the tokenizer's own
ids of the rendered conversation, the truncation rule), scores equal to a plain transformers forward,
batching that changes nothing, the judges' columns, the cache per response, and the CLI's choices."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.backends import GenerationRequest, make_backend, returns_scores
from evalign.backends.reward import RewardModelBackend, is_reward_model
from evalign.backends.reward_inputs import RewardEncoder, budget_split, split_conversation
from evalign.cache import Cache
from evalign.cli import app
from evalign.errors import EvalignError, ModelLoadError, UsageError
from evalign.judges import get_judge, run_judge
from evalign.judges.base import judge_for_backend
from evalign.judges.modes.reward import sigmoid
from evalign.train.reward import init_reward_model

WORDS = ["the", "apple", "river", " ", "\n", "good", "Answer:", "1.", "é", "😀", "  x", "END.", "bad"]


def random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(WORDS) for _ in range(rng.randint(1, n)))


@pytest.fixture(scope="module")
def reward_llama(tiny_llama: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with a chat template and an untrained score head (seed 3)."""
    return init_reward_model(tiny_llama("native"), tmp_path_factory.mktemp("rm") / "llama", seed=3, max_length=96)


@pytest.fixture(scope="module")
def reward_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT sequence classifier with the real all-MiniLM-L6-v2 tokenizer (no chat template)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from evalign.backends.models import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=1, initializer_range=0.5)
    out = tmp_path_factory.mktemp("rm") / "bert"
    BertForSequenceClassification(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_budget_split_keeps_the_context_head_and_the_response_tail() -> None:
    assert budget_split(10, 20, 100) == (10, 20)  # fits: everything
    assert budget_split(10, 200, 100) == (10, 90)  # a long response: a short context stays whole
    assert budget_split(200, 10, 100) == (90, 10)  # a short response: the context gets the rest
    assert budget_split(200, 300, 100) == (50, 50)
    assert budget_split(30, 300, 100) == (30, 70)


def test_encoding_is_the_tokenizers_own_and_truncation_keeps_markers(reward_llama: Path, reward_bert: Path) -> None:
    from transformers import AutoTokenizer

    rng = random.Random(0)
    for path in (reward_llama, reward_bert):
        tok = AutoTokenizer.from_pretrained(path)
        enc, short = RewardEncoder(tok, 4096), RewardEncoder(tok, 24)
        for _ in range(60):
            ins, res = random_text(rng, 30), random_text(rng, 30)
            conv = [{"role": "user", "content": ins}, {"role": "assistant", "content": res}]
            ref = (tok(tok.apply_chat_template(conv, tokenize=False), add_special_tokens=False)["input_ids"]
                   if tok.chat_template else tok(ins, res)["input_ids"])
            assert enc.encode(conv) == ref  # nothing cut: exactly what the tokenizer makes of the whole text
            ids = short.encode(conv)
            assert len(ids) <= 24
            if len(ref) <= 24:
                assert ids == ref
            else:  # the end of the conversation (end of turn / [SEP]) is always there
                assert ids[-1] == ref[-1]
        assert enc.truncated == 0 and short.truncated > 0
    tok = AutoTokenizer.from_pretrained(reward_bert)
    ids = RewardEncoder(tok, 12).encode([{"role": "user", "content": "one two three four five six seven"},
                                         {"role": "assistant", "content": "alpha beta gamma delta epsilon zeta eta"}])
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "one", "two", "three", "four", "[SEP]", "gamma", "delta",
                                              "epsilon", "zeta", "eta", "[SEP]"]


def test_split_conversation_with_several_turns(reward_llama: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(reward_llama)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Sum 2+2"},
            {"role": "assistant", "content": "4"}]
    p = split_conversation(tok, msgs)
    assert p.context.endswith("Sum 2+2") and "Be brief." in p.context and "Hello" in p.context
    assert p.response == "4" and p.markers == "</s>\n<|assistant|>\n" and p.suffix == "</s>\n"
    assert p.context + p.markers + p.response + p.suffix == tok.apply_chat_template(msgs, tokenize=False)


def plain_scores(path: Path, ids: list[list[int]]) -> list[float]:
    """One unpadded transformers forward per conversation (the reference)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        return [float(model(input_ids=torch.tensor([x])).logits[0, 0]) for x in ids]


@pytest.mark.parametrize("which", ["llama", "bert"])
def test_scores_equal_a_plain_forward_whatever_the_batching(which: str, reward_llama: Path, reward_bert: Path) -> None:
    path = reward_llama if which == "llama" else reward_bert
    rng = random.Random(1)
    reqs = [GenerationRequest(messages=[{"role": "user", "content": random_text(rng, 20)},
                                        {"role": "assistant", "content": random_text(rng, 40)}]) for _ in range(24)]
    one = RewardModelBackend(str(path), device="cpu", batch_size=1)
    many = RewardModelBackend(str(path), device="cpu", batch_size=7)
    ids = one.encode(reqs)
    ref = plain_scores(path, ids)
    np.testing.assert_allclose(one.score(reqs), ref, rtol=0, atol=1e-5)
    np.testing.assert_allclose(many.score(reqs), ref, rtol=0, atol=1e-5)
    assert len(set(np.round(ref, 4))) > 20  # the scores differ from one response to another
    gens = many.run(reqs)
    assert [g.raw["score"] for g in gens] == pytest.approx(ref, abs=1e-5)
    assert float(gens[0].text) == gens[0].raw["score"] and gens[0].usage.prompt_tokens == len(ids[0])


def pairs_table() -> pd.DataFrame:
    return pd.DataFrame([
        {"id": "p1", "instruction": "Name a fruit.", "input": "", "response_a": "apple", "response_b": "river bad"},
        {"id": "p2", "instruction": "Name a fruit.", "input": "", "response_a": "river bad", "response_b": "apple"},
        {"id": "p3", "instruction": "Say hi", "input": "kindly", "response_a": "hi", "response_b": "hi"},
        {"id": "p4", "instruction": "x", "input": "", "response_a": "good river", "response_b": "the end",
         "messages_a": json.dumps([{"role": "user", "content": "x"}, {"role": "assistant", "content": "good river"}])},
    ])  # fmt: skip


def test_pair_judge_columns_cache_per_response_and_item_scores(reward_llama: Path, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    be = RewardModelBackend(str(reward_llama), device="cpu", batch_size=4)
    run = run_judge(pairs_table(), get_judge("reward_pairwise"), be, cache=cache)
    t = run.table
    # p1 and p2 hold the same two responses to the same instruction, swapped; p3 two equal responses;
    # p4's conversation in messages_a is the default rendering of its A side
    assert run.summary["calls"]["new"] == 5 and run.summary["calls"]["total"] == 5
    assert t.at[0, "reward_pairwise.score_a"] == t.at[1, "reward_pairwise.score_b"]
    assert t.at[2, "reward_pairwise"] == "tie" and t.at[2, "reward_pairwise.code"] == 0.0
    for i in range(4):
        m = t.at[i, "reward_pairwise.score_a"] - t.at[i, "reward_pairwise.score_b"]
        assert t.at[i, "reward_pairwise.margin"] == pytest.approx(m)
        assert t.at[i, "reward_pairwise.p_a"] == pytest.approx(1 / (1 + math.exp(-m)))
        assert t.at[i, "reward_pairwise"] == ("A" if m > 0 else "B" if m < 0 else "tie")
        assert t.at[i, "reward_pairwise.status"] == "scored"
    assert {t.at[0, "reward_pairwise"], t.at[1, "reward_pairwise"]} == {"A", "B"}
    # a tie margin above every difference: all ties
    wide = run_judge(pairs_table(), get_judge("reward_pairwise", tie_margin=1e9), be, cache=cache)
    assert set(wide.table["reward_pairwise"]) == {"tie"} and wide.summary["calls"]["new"] == 0
    # the item judge reads the same cache entries
    items = pd.DataFrame([{"id": "a", "instruction": "Name a fruit.", "response": "apple"},
                          {"id": "b", "instruction": "Name a fruit.", "response": "pear"}])
    it = run_judge(items, get_judge("reward"), be, cache=cache)
    assert it.summary["calls"]["cached"] == 1 and it.summary["calls"]["new"] == 1
    assert it.table.at[0, "reward"] == t.at[0, "reward_pairwise.score_a"]
    assert it.table["reward"].dtype == float and it.summary["kind"] == "score"


def test_reward_judges_refuse_what_does_not_apply(reward_llama: Path) -> None:
    assert sigmoid(0.0) == 0.5 and sigmoid(-1000.0) == 0.0 and sigmoid(1000.0) == 1.0
    with pytest.raises(EvalignError, match="temperature"):
        get_judge("reward", temperature=0.5)
    with pytest.raises(EvalignError, match="tie_margin"):
        get_judge("reward_pairwise", tie_margin=-1)
    assert judge_for_backend("pairwise", True) == "reward_pairwise" and judge_for_backend("absolute", True) == "reward"
    assert judge_for_backend("geval", False) == "geval"
    with pytest.raises(UsageError, match="--mode absolute"):
        judge_for_backend("geval", True)
    with pytest.raises(UsageError, match="--backend reward"):
        judge_for_backend("reward_pairwise", False)
    assert returns_scores(RewardModelBackend) and is_reward_model(reward_llama)
    r = get_judge("reward").parse({"choices": [{"text": "4", "finish_reason": "stop"}], "raw": {}})
    assert not r.ok and r.reason == "parser_error"  # text from a generating backend is not a reward
    be = make_backend("reward", model_path=str(reward_llama), device="cpu")
    with pytest.raises(EvalignError, match="end with the graded assistant turn"):
        be.run([GenerationRequest(messages=[{"role": "user", "content": "x"}])], raise_errors=True)


def test_a_causal_lm_is_not_a_reward_model(tiny_llama: Callable[..., Path]) -> None:
    assert not is_reward_model(tiny_llama("native"))
    with pytest.raises(ModelLoadError, match="train-judge --kind reward"):
        RewardModelBackend(str(tiny_llama("native")), device="cpu")


def test_cli_judge_with_the_reward_backend(reward_llama: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "cache.sqlite"))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in pairs_table().drop(columns="messages_a").to_dict("records")))
    out = tmp_path / "judged.jsonl"
    runner = CliRunner()
    res = runner.invoke(app, ["judge", str(pairs), "--mode", "pairwise", "--backend", "reward", "--model",
                              str(reward_llama), "--tie-margin", "0.0", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["reward_pairwise.status"] for r in rows] == ["scored"] * 4
    assert rows[2]["reward_pairwise"] == "tie" and 0 < rows[0]["reward_pairwise.p_a"] < 1
    bad = runner.invoke(app, ["judge", str(pairs), "--mode", "geval", "--backend", "reward", "--model",
                              str(reward_llama)])
    assert bad.exit_code == 2 and "--mode absolute" in bad.output
    bad = runner.invoke(app, ["judge", str(pairs), "--mode", "pairwise", "--model", "m", "--base-url",
                              "http://localhost:1/v1", "--tie-margin", "0.5"])
    assert bad.exit_code != 0 and "--tie-margin applies to --backend reward" in bad.output


def test_a_run_config_with_the_reward_backend_builds_the_reward_judges() -> None:
    from evalign.run.config import JudgeConfig
    from evalign.run.execute import _judge_mode, _judge_options

    for mode, name in (("pairwise", "reward_pairwise"), ("absolute", "reward")):
        jc = JudgeConfig(mode=mode, backend="reward", model="some-folder")
        judge = get_judge(_judge_mode(jc), **_judge_options(jc))
        assert judge.name == name and judge.column == name
    with pytest.raises(UsageError):
        _judge_mode(JudgeConfig(mode="geval", backend="reward", model="m"))
