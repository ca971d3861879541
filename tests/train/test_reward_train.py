"""``train-judge --kind reward`` (TRL RewardTrainer): the preference rows read, tokenized with the reward
backend's encoder, the loss falling, resume continuing the step count, LoRA merged, the trained model
ranking its training pairs in the reward backend; a few steps on the real SmolLM2; ``judge-data
preference`` (majority labels, ties left out, deduplication against held-out sets)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.backends import GenerationRequest
from evalign.backends.reward import REWARD_RECORD, RewardModelBackend, reward_record
from evalign.backends.reward_inputs import RewardEncoder
from evalign.cli import app
from evalign.errors import InputError
from evalign.train import SIGNATURE_FILE, TrainSettings
from evalign.train.before_after import held_out_table
from evalign.train.preference_data import (
    PreferenceSettings,
    build_preferences,
    length_balanced,
    overlapping,
    preference_rows,
    question_key,
)
from evalign.train.reward import build_reward_trainer, init_reward_model, read_preferences, train_reward_model

FAST = {"batch_size": 4, "gradient_accumulation_steps": 1, "device": "cpu", "logging_steps": 1, "max_length": 64}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def prefs(tmp_path: Path) -> Path:
    """Sixteen rows: the chosen response names the apple river, the rejected one repeats 'bad'."""
    rows = [{"prompt": f"Describe item {i}.", "chosen": f"The apple river is good, item {i}.",
             "rejected": f"bad bad {i}", "source": "toy", "question": str(i)} for i in range(16)]
    return write_jsonl(tmp_path / "prefs.jsonl", rows)


def test_read_preferences_errors_name_line_and_field(tmp_path: Path) -> None:
    ok = read_preferences(write_jsonl(tmp_path / "a.jsonl", [
        {"prompt": "Q", "chosen": "a", "rejected": "b", "margin": 1.5},
        {"prompt": json.dumps([{"role": "system", "content": "S"}, {"role": "user", "content": "Q2"}]),
         "chosen": "", "rejected": "c", "margin": 0}]))  # fmt: skip
    assert ok[0].prompt == (("user", "Q"),) and ok[0].margin == 1.5
    assert ok[1].prompt == (("system", "S"), ("user", "Q2")) and ok[1].chosen == ""
    assert ok[1].conversations()[1][-1] == {"role": "assistant", "content": "c"}
    cases = [({"prompt": "Q", "chosen": "a"}, "line 1.*rejected"), ({"prompt": "", "chosen": "a", "rejected": "b"},
             "line 1.*prompt"), ({"prompt": "Q", "chosen": 3, "rejected": "b"}, "line 1.*chosen"),
             ({"prompt": "Q", "chosen": "a", "rejected": "b", "margin": "x"}, "line 1.*margin")]
    for row, msg in cases:
        with pytest.raises(InputError, match=msg):
            read_preferences(write_jsonl(tmp_path / "b.jsonl", [row]))
    with pytest.raises(InputError, match=r"line 1.*some rows only"):
        read_preferences(write_jsonl(tmp_path / "c.jsonl", [{"prompt": "Q", "chosen": "a", "rejected": "b"},
                                                           {"prompt": "Q", "chosen": "a", "rejected": "b", "margin": 1}]))


def test_trainer_data_is_the_backends_encoding(tiny_llama: Callable[..., Path], prefs: Path, tmp_path: Path) -> None:
    trainer = build_reward_trainer(prefs, tiny_llama("native"), tmp_path / "o", TrainSettings(max_steps=1, **FAST))
    enc = RewardEncoder(trainer.processing_class, 64)
    rows = read_preferences(prefs)
    assert len(trainer.train_dataset) == 16
    for p, r in zip(rows, trainer.train_dataset, strict=True):
        assert r["chosen_ids"] == enc.encode(p.conversations()[0])
        assert r["rejected_ids"] == enc.encode(p.conversations()[1])
    assert trainer.model.config.num_labels == 1 and trainer.evalign_max_length == 64


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True])
def test_train_resume_and_score(lora: bool, tiny_llama: Callable[..., Path], prefs: Path, tmp_path: Path) -> None:
    base = init_reward_model(tiny_llama("native"), tmp_path / "untrained", seed=1, max_length=64)
    out = tmp_path / "rm"
    lr = 3e-3 if lora else 1e-3
    first = train_reward_model(prefs, base, out, TrainSettings(max_steps=6, save_steps=3, learning_rate=lr, seed=1,
                                                               lora=lora, **FAST))
    assert first.global_step == 6 and first.tokens_seen > 0 and len(first.losses) == 6
    logs: list[dict] = []
    second = train_reward_model(prefs, base, out, TrainSettings(max_steps=12, save_steps=3, learning_rate=lr, seed=1,
                                                                lora=lora, **FAST), resume=True, on_log=logs.append)
    assert second.global_step == 12 and second.resumed_from is not None and second.resumed_from.endswith("checkpoint-6")
    assert [s for s, _ in second.losses] == list(range(7, 13))
    assert all("tokens_per_second" in x and "eta_seconds" in x for x in logs if "loss" in x)
    losses = [v for _, v in first.losses + second.losses]
    assert np.mean(losses[-3:]) < 0.5 * math.log(2)  # from chance (log 2) to well below it
    sig = json.loads((out / SIGNATURE_FILE).read_text())
    assert sig["kind"] == "reward" and sig["settings"]["lora"] is lora and sig["global_step"] == 12
    assert reward_record(out)["max_length"] == 64 and (out / REWARD_RECORD).is_file()
    assert not any("lora" in k for k in json.loads((out / "config.json").read_text()))  # merged, a plain model
    be = RewardModelBackend(str(out), device="cpu")
    assert be.max_length == 64
    rows = read_preferences(prefs)
    chosen = be.score([GenerationRequest(messages=p.conversations()[0]) for p in rows])
    rejected = be.score([GenerationRequest(messages=p.conversations()[1]) for p in rows])
    assert all(c > r for c, r in zip(chosen, rejected, strict=True))


@pytest.mark.slow
def test_a_few_steps_on_the_real_smollm2(prefs: Path, tmp_path: Path) -> None:
    """SmolLM2-135M-Instruct (the packaged GGUF, dequantized) gets a score head and trains 2 steps."""
    base = init_reward_model("smollm2-135m-instruct", tmp_path / "smol", seed=0, max_length=48)
    assert json.loads((base / "config.json").read_text())["architectures"] == ["LlamaForSequenceClassification"]
    res = train_reward_model(prefs, base, tmp_path / "trained", TrainSettings(
        max_steps=2, batch_size=2, gradient_accumulation_steps=1, device="cpu", logging_steps=1, max_length=48,
        learning_rate=1e-5, lora=True, lora_target_modules=("q_proj", "v_proj")))
    assert res.global_step == 2 and all(math.isfinite(v) for _, v in res.losses)
    be = RewardModelBackend(str(tmp_path / "trained"), device="cpu")
    s = be.score([GenerationRequest(messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": x}])
                  for x in ("Hello!", "bad bad")])
    assert len(s) == 2 and s[0] != s[1]


def test_preference_rows_majority_ties_and_questions() -> None:
    pairs = pd.DataFrame({"id": ["a", "b", "c", "d", "e"], "instruction": ["Q1", "Q1", "q1 ", "Q3", "Q4"],
                          "input": ["", "", "", "in", ""], "response_a": ["x", "y", "z", "u", "v"],
                          "response_b": ["X", "Y", "Z", "U", "V"],
                          "pref_1": [1, -1, 0, 1, np.nan], "pref_2": [1, -1, 1, -1, np.nan],
                          "pref_3": [-1, np.nan, 0, 0, np.nan]})
    from collections import Counter

    dropped: Counter[str] = Counter()
    rows = preference_rows(pairs, ["pref_1", "pref_2", "pref_3"], "toy", dropped)
    assert [(r["chosen"], r["rejected"]) for r in rows] == [("x", "X"), ("Y", "y")]
    assert rows[0]["agreement"] == pytest.approx(2 / 3) and rows[1]["agreement"] == 1.0
    assert dropped == {"tie": 1, "no_majority": 1}  # c: tie twice; d: one vote each; e: unlabelled, not counted
    assert rows[0]["question"] == rows[1]["question"] == question_key("q1") != question_key("Q3\n\nin")
    assert rows[0]["prompt"] == "Q1" and rows[0]["pair_id"] == "toy/a"


def test_overlap_exact_and_near() -> None:
    held = ["Write a poem about the sea.", "Summarize the following article about cats and dogs in two sentences."]
    prompts = ["write a  poem about the SEA.", "Summarize the following article about cats and dogs in 2 sentences.",
               "Translate to French: hello"]
    assert overlapping(prompts, held, 100).tolist() == [True, False, False]
    assert overlapping(prompts, held, 90).tolist() == [True, True, False]


def test_build_preferences_removes_held_out_duplicates(tmp_path: Path) -> None:
    data = build_preferences(PreferenceSettings(sets=("pandalm",), exclude=("llmbar:natural",), held_out=0.2, seed=1))
    m = data.manifest()
    assert m["sources"] == {"pandalm": len(data.train) + len(data.held_out)}
    assert m["dropped"]["tie"] + m["dropped"]["no_majority"] == 999 - 894 - m["overlap_removed"]["llmbar:natural"]
    assert not set(m["questions"]["train"]) & set(m["questions"]["held_out"])
    runner = CliRunner()
    res = runner.invoke(app, ["judge-data", "preference", "-o", str(tmp_path / "d"), "--set", "pandalm",
                              "--exclude", "hhh", "--near-duplicate", "100", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["rows"]["train"] == 894 and out["overlap_removed"] == {"hhh": 0}
    first = json.loads((tmp_path / "d" / "train.jsonl").read_text().splitlines()[0])
    assert set(first) >= {"prompt", "chosen", "rejected", "source", "question"}


def test_length_balance_per_source() -> None:
    rows = ([{"source": "s", "chosen": "long answer", "rejected": "x"}] * 7
            + [{"source": "s", "chosen": "y", "rejected": "longer one"}] * 3
            + [{"source": "s", "chosen": "same", "rejected": "size"}] * 2
            + [{"source": "t", "chosen": "a", "rejected": "bb"}] * 4)
    keep = length_balanced(rows, seed=0)
    kept = [r for r, k in zip(rows, keep, strict=True) if k]
    s = [len(r["chosen"]) - len(r["rejected"]) for r in kept if r["source"] == "s"]
    assert sum(d > 0 for d in s) == sum(d < 0 for d in s) == 3 and sum(d == 0 for d in s) == 2
    assert not any(r["source"] == "t" for r in kept)  # no chosen-longer row of t: none of its shorter ones kept
    assert keep.tolist() == length_balanced(rows, seed=0).tolist()  # seeded
    data = build_preferences(PreferenceSettings(sets=("pandalm",), balance_length=True, seed=3))
    diffs = [len(r["chosen"]) - len(r["rejected"]) for r in data.train]
    assert sum(d > 0 for d in diffs) == sum(d < 0 for d in diffs)
    assert data.dropped["length_balance"] == 894 - len(data.train)


def test_held_out_table_against_baselines_and_published() -> None:
    gold = np.array([1, 1, -1, -1, 1, -1, 1, 1.0])
    mine = ["A", "A", "B", "B", "A", "B", "A", "B"]  # 7 of 8 right
    pub_ab = ["A", "B", "B", "A", "A", "B", "A", "A"]
    pub_ba = ["A", "A", "B", "A", None, "B", "B", "A"]
    la, lb = np.arange(8) + 10, np.full(8, 13)  # A longer from pair 4 on
    t = held_out_table({"trained": (mine, mine)}, gold, target="trained", published={"pub": (pub_ab, pub_ba)},
                       length_a=la, length_b=lb, n_resamples=200, n_permutations=2000)
    rows = t.table.set_index("judge")
    assert rows.at["trained", "accuracy"] == 7 / 8 and rows.at["random", "accuracy"] == 0.5
    assert rows.at["pub", "accuracy"] == pytest.approx(np.mean([1, .5, 1, 0, .5, 1, .5, 1]))
    assert rows.at["pub", "accuracy_both"] == 4 / 8
    assert rows.at["always_a", "accuracy"] == 5 / 8 and rows.at["always_b", "accuracy"] == 3 / 8
    # longer: pairs 0-2 B longer, 3 equal (no verdict), 4-7 A longer
    assert rows.at["longer", "accuracy"] == np.mean([0, 0, 1, 0, 1, 0, 1, 1])
    assert rows.at["random", "difference"] == pytest.approx(3 / 8) and rows.at["trained", "p_value"] != rows.at[
        "trained", "p_value"]
    assert 0 < rows.at["longer", "p_value"] <= 1 and t.beats == tuple(t.beats)
