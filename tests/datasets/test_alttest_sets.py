"""The Alt-Test's sets as catalogue datasets (alttest-mtbench, summeval, 10k-prompts) on their real
files: counts, annotators per item, labels hand-checked against the raw JSON, the LLM judges."""

from __future__ import annotations

import ast
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalign.datasets import alttest, alttest_mtbench, prompts10k, summeval
from evalign.errors import InputError

CODE = {"model_a": 1.0, "model_b": -1.0, "tie": 0.0}


def _raw(shared_data: Path, name: str, kind: str) -> dict[str, dict[str, Any]]:
    return json.loads((shared_data / "alttest" / name / f"{kind}_annotations.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def mtbench(shared_data: Path) -> Any:
    return alttest_mtbench.load_alttest_mtbench(data_dir=shared_data)


def test_mtbench_items_per_turn_with_messages(mtbench: Any, shared_data: Path) -> None:
    pairs = mtbench.pairs
    assert len(pairs) == 120 and pairs["id"].is_unique
    assert pairs["turn"].value_counts().to_dict() == {1: 60, 2: 60}
    assert pairs["question_id"].nunique() == 42
    assert [len(m) for m in pairs.loc[pairs.turn == 1, "messages_a"]] == [2] * 60
    assert [len(m) for m in pairs.loc[pairs.turn == 2, "messages_b"]] == [4] * 60
    prompts = json.loads((shared_data / "alttest" / "mtbench" / "prompts.json").read_text(encoding="utf-8"))
    row = pairs.set_index("id").loc["100__alpaca-13b__gpt-3.5-turbo__2"]
    conv_b = ast.literal_eval(prompts["100__alpaca-13b__gpt-3.5-turbo__2"]["conversation_b"])
    assert row["messages_b"] == [{"role": m["role"], "content": m["content"]} for m in conv_b]
    assert row["instruction"] == conv_b[2]["content"] and row["response_b"] == conv_b[3]["content"]
    assert (row["system_a"], row["system_b"], row["task"]) == ("alpaca-13b", "gpt-3.5-turbo", "roleplay")
    # the turns agree with FastChat's questions (checked when loading); the reference is the turn's
    fast = {json.loads(x)["question_id"]: json.loads(x) for x in
            (shared_data / "fastchat_mt_bench" / "mt_bench" / "question.jsonl").open(encoding="utf-8")}
    first = pairs.set_index("id").loc["104__gpt-3.5-turbo__gpt-4__1"]
    assert first["instruction"] == fast[104]["turns"][0]
    assert first["reference"] == fast[104]["reference"][0]
    assert int(pairs["reference"].notna().sum()) == 46


def test_mtbench_annotators_and_labels_match_raw(mtbench: Any, shared_data: Path) -> None:
    pairs = mtbench.pairs.set_index("id")
    humans = _raw(shared_data, "mtbench", "human")
    assert list(humans) == ["author_0", "author_4", "expert_24"] and mtbench.pref_columns == ["pref_1", "pref_2",
                                                                                               "pref_3"]
    assert Counter(pairs[["pref_1", "pref_2", "pref_3"]].notna().sum(axis=1)) == {2: 114, 3: 6}
    assert [int(pairs[c].notna().sum()) for c in ("pref_1", "pref_2", "pref_3")] == [74, 84, 88]
    for k, who in enumerate(humans, start=1):
        for item, label in list(humans[who].items())[:15]:
            assert pairs.at[item, f"pref_{k}"] == CODE[label]
    llms = _raw(shared_data, "mtbench", "llm")
    assert mtbench.judge_columns == [f"judge:{m}" for m in alttest.LLMS]
    for item, label in llms["gpt-4o"].items():
        assert pairs.at[item, "judge:gpt-4o"] == {"model_a": "A", "model_b": "B", "tie": "tie"}[label]


def test_mtbench_refuses_turns_that_differ_from_fastchat(shared_data: Path, tmp_path: Path) -> None:
    shutil.copytree(shared_data / "alttest" / "mtbench", tmp_path / "alttest" / "mtbench")
    shutil.copytree(shared_data / "fastchat_mt_bench", tmp_path / "fastchat_mt_bench")
    path = tmp_path / "alttest" / "mtbench" / "prompts.json"
    prompts = json.loads(path.read_text(encoding="utf-8"))
    item = next(iter(prompts))
    prompts[item]["conversation_a"] = prompts[item]["conversation_a"].replace("a", "b", 1)
    path.write_text(json.dumps(prompts), encoding="utf-8")
    with pytest.raises(InputError, match="differ from MT-Bench question"):
        alttest_mtbench.load_alttest_mtbench(data_dir=tmp_path)


@pytest.fixture(scope="module")
def summ(shared_data: Path) -> Any:
    return summeval.load_summeval(data_dir=shared_data)


def test_summeval_table(summ: Any, shared_data: Path) -> None:
    items = summ.items
    assert len(items) == 1600 and items["id"].nunique() == 100 and items["system"].nunique() == 16
    assert (items.groupby("id").size() == 16).all()
    humans = _raw(shared_data, "summeval", "human")
    llms = _raw(shared_data, "summeval", "llm")
    row = items[(items.id == "dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2") & (items.system == "M11")].iloc[0]
    for a in summeval.ASPECTS:
        key = f"dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2__M11__{a}"
        assert [row[f"{a}_{k}"] for k in (1, 2, 3)] == [humans[e][key] for e in ("e0", "e1", "e2")]
        assert row[a] == pytest.approx(np.mean([humans[e][key] for e in ("e0", "e1", "e2")]))
        assert row[f"judge:gemini_pro/{a}"] == llms["gemini_pro"][key]
    for a in summeval.ASPECTS:  # 3 experts on every summary and aspect
        assert (items[summ.annotators_of(a)].notna().sum(axis=1) == 3).all()
        assert summ.columns_for(a) == [f"judge:{m}/{a}" for m in alttest.LLMS]
    assert len(summ.judge_columns) == 24 and not summ.lower_is_better


def test_10k_prompts_table(shared_data: Path) -> None:
    ds = prompts10k.load_10k_prompts(data_dir=shared_data)
    items = ds.items
    humans = _raw(shared_data, "10k_prompts", "human")
    assert len(items) == 1698 and items["id"].is_unique and set(items["system"]) == {"prompt"}
    assert len(ds.annotator_columns) == 13
    assert Counter(items["n_annotators"]) == {2: 1307, 3: 338, 4: 49, 5: 4}
    assert [int(items[c].notna().sum()) for c in ds.annotator_columns] == [len(v) for v in humans.values()]
    who = list(humans)[6]  # the 7th annotator: 224 prompts
    item, label = next(iter(humans[who].items()))
    row = items.set_index("id").loc[item]
    assert row["quality_7"] == label
    assert row["quality"] == pytest.approx(np.mean([h[item] for h in humans.values() if item in h]))
    assert ds.judge_columns == [f"judge:{m}" for m in alttest.LLMS]
    assert (ds.grouping, ds.statistic) == ("none", "kendall")


def test_read_alttest_any_set(shared_data: Path) -> None:
    wax = alttest.read_alttest("wax", shared_data)
    assert len(wax.humans) == 8 and list(wax.llms) == list(alttest.LLMS)
    assert list(alttest.read_alttest("lesion", shared_data).llms) == ["gemini_flash", "gemini_pro", "gpt-4o", "gpt-4o-mini"]
    with pytest.raises(InputError, match="unknown Alt-Test set"):
        alttest.read_alttest("nosuch", shared_data)
