"""Each dataset adapter on its real files: row counts and label counts from the SOURCE.md notes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalign.datasets import hhh, llmbar, prometheus, tulu
from evalign.datasets.base import load_dataset
from evalign.errors import EvalignError, InputError
from evalign.io.data_dir import ENV_VAR, find_set_dir


# --------------------------------------------------------------------------- Tulu-1
@pytest.fixture(scope="module")
def tulu1(shared_data: Path):
    return tulu.load_tulu1(data_dir=shared_data)


def test_tulu_items_shape_and_references(tulu1) -> None:
    items = tulu1.items
    assert len(items) == 332 * 4
    assert items.groupby("system").size().to_dict() == {
        "chatgpt": 332, "tulu_65B": 332, "tulu_7B": 332, "tulu_human_only_65B": 332
    }
    assert items["task"].value_counts().to_dict() == {"self_instruct": 252 * 4, "vicuna": 80 * 4}
    # references: Self-Instruct for all 252, FastChat GPT-4 answers only for Vicuna 61-70
    has_ref = items.drop_duplicates("id").set_index("id")["reference"].notna()
    assert has_ref[has_ref.index.str.startswith("user_oriented")].all()
    vic = has_ref[has_ref.index.str.startswith("vicuna_")]
    assert sorted(int(i.split("_")[1]) for i in vic[vic].index) == list(range(61, 71))
    row = items[(items.id == "vicuna_61") & (items.system == "chatgpt")].iloc[0]
    assert row["reference"].startswith("Here's a simple C++ program that reads a text file line by line")
    si = items[(items.id == "user_oriented_task_2") & (items.system == "chatgpt")].iloc[0]
    assert si["instruction"].startswith("Rewrite the given text and correct grammar")
    assert si["input"].startswith("If you'd told me year ago")


def test_tulu_acceptability_shares_match_source(tulu1) -> None:
    items = tulu1.items
    cols = [c for c in items.columns if c.startswith("acceptable_")]
    assert len(cols) == 6
    assert int(items["n_acceptable"].sum()) == 2 * 1150  # two judgments per annotation row
    votes = items.melt(id_vars=["system"], value_vars=cols).dropna()
    share = votes.groupby("system")["value"].mean().round(2).to_dict()
    assert share == {"chatgpt": 0.91, "tulu_65B": 0.80, "tulu_human_only_65B": 0.73, "tulu_7B": 0.69}
    assert set(np.unique(votes["value"])) == {0.0, 1.0}
    single = items[items.n_acceptable == 1]
    assert (single["acceptable"] == single["acceptable_1"]).all()
    assert tulu1.human_columns == ["acceptable"]
    assert items["acceptable"].between(0, 1).all()


def test_tulu_preferences_match_source_counts(tulu1) -> None:
    pairs = tulu1.pairs
    assert len(pairs) == 996
    assert (pairs["system_a"] == "tulu_65B").all()
    assert pairs.groupby("system_b").size().to_dict() == {"chatgpt": 332, "tulu_7B": 332, "tulu_human_only_65B": 332}
    prefs = pairs[tulu1.pref_columns]
    assert tulu1.pref_columns == ["pref_1", "pref_2", "pref_3", "pref_4"]
    assert Counter(prefs.notna().sum(axis=1)) == {1: 869, 2: 101, 3: 25, 4: 1}
    strengths = pairs[[f"strength_{k}" for k in range(1, 5)]].stack().dropna()
    # SOURCE.md: tie 376, slightly better 235 + 191, better 188 + 160
    assert strengths.value_counts().to_dict() == {0.0: 376, 1.0: 426, 2.0: 348}
    codes = prefs.stack().dropna()
    assert (codes == 0).sum() == 376
    assert set(codes.unique()) == {-1.0, 0.0, 1.0}
    assert ((codes == 0) == (strengths.to_numpy() == 0)).all()


def test_tulu_preference_orientation_is_flipped_to_the_pair(tulu1, shared_data: Path) -> None:
    """Annotation rows where the annotator saw the other order are flipped: recount from the raw file."""
    pairs = tulu1.pairs
    raw = [json.loads(x) for x in (shared_data / "tulu1_human_eval" / "eval_annotations_tulu_1.jsonl").open()]
    sign = {"a-is-better": 1, "a-is-slightly-better": 1, "tie": 0, "b-is-slightly-better": -1, "b-is-better": -1}
    tulu_wins = sum(
        (sign[a["preference"]] if a["model_a"] == "tulu_65B" else -sign[a["preference"]]) > 0 for a in raw
    )
    assert int((pairs[tulu1.pref_columns] == 1).sum().sum()) == tulu_wins
    # annotation 566 (instance 247): chatgpt shown as A, "a-is-better" -> chatgpt (system_b) better
    p = pairs.iloc[247]
    assert p["system_b"] == "chatgpt"
    assert list(p[["evaluator_1", "evaluator_2"]]) == ["yu", "yu"]
    assert list(p[["pref_1", "pref_2"]]) == [-1.0, -1.0]  # 542: tulu_65B as A, "b-is-better"


def test_tulu_excel_corrupted_texts_come_from_instances(tulu1) -> None:
    """The annotation sheet holds '#ERROR!', 'Other' and an empty cell where Excel evaluated '=IF(' text."""
    items = tulu1.items
    assert not items["response"].isin(["#ERROR!", "Other", ""]).any()
    r = items[(items.id == "user_oriented_task_231")].set_index("system")["response"]
    assert r["tulu_human_only_65B"].startswith('=IF(C7,"U.S.A.",1')
    assert r["tulu_65B"].startswith('=IF(C7="U.S.A." OR')
    assert tulu1.pairs.loc[tulu1.pairs.source_id == "user_oriented_task_231", "response_a"].str.startswith("=IF(").all()


# --------------------------------------------------------------------------- LLMBar, HHH
def test_llmbar_rows_and_labels_per_subset() -> None:
    d = llmbar.load_llmbar()
    p = d.pairs
    counts = p.groupby(["task", "pref_1"]).size().unstack().to_dict("index")
    assert counts == {
        "Natural": {-1.0: 58, 1.0: 42},
        "Adversarial/Neighbor": {-1.0: 59, 1.0: 75},
        "Adversarial/GPTInst": {-1.0: 47, 1.0: 45},
        "Adversarial/GPTOut": {-1.0: 25, 1.0: 22},
        "Adversarial/Manual": {-1.0: 24, 1.0: 22},
    }
    assert p["id"].is_unique and p["reference"].isna().all()
    assert d.licence == "MIT" and d.pref_columns == ["pref_1"]
    first = p.iloc[0]
    assert first["id"] == "Natural/0" and first["system_a"] == "output_1"
    assert llmbar.load_llmbar(["Adversarial/GPTOut"]).pairs.shape[0] == 47
    with pytest.raises(InputError, match="unknown LLMBar subset"):
        llmbar.load_llmbar(["Nope"])


def test_llmbar_processed_from_data_dir(shared_data: Path) -> None:
    d = llmbar.load_llmbar(processed=True, data_dir=shared_data)
    assert d.pairs["task"].value_counts()[["Processed/FairEval", "Processed/LLMEval2", "Processed/MT-Bench"]].tolist() == [66, 200, 200]
    assert len(d.pairs) == 419 + 466


def test_hhh_pairs_alternate_and_keep_gold(shared_data: Path) -> None:
    d = hhh.load_hhh()
    p = d.pairs
    assert p["task"].value_counts().to_dict() == {"honest": 61, "helpful": 59, "harmless": 58, "other": 43}
    assert p["pref_1"].value_counts().to_dict() == {1.0: 111, -1.0: 110}
    raw = [json.loads(x) for x in (shared_data / "bigbench_hhh_alignment" / "hhh_alignment_pairs.jsonl").open()]
    chosen = np.where(p["pref_1"] > 0, p["response_a"], p["response_b"])
    assert list(chosen) == [r["chosen"] for r in raw]
    assert (p["chosen_side"].map({"a": 1.0, "b": -1.0}) == p["pref_1"]).all()


# --------------------------------------------------------------------------- Prometheus
@pytest.mark.parametrize(
    ("loader", "stem", "systems", "dist"),
    [
        (prometheus.load_prometheus_mt_bench, "mt_bench", {"chatgpt", "llama2_chat_13b", "vicuna_13b", "wizardlm_13b"},
         {1: 106, 2: 147, 3: 122, 4: 342, 5: 243}),
        (prometheus.load_prometheus_vicuna, "vicuna", {"chat_gpt", "llama-2-chat", "vicuna", "wizard"},
         {1: 12, 2: 41, 3: 80, 4: 489, 5: 338}),
    ],
)
def test_prometheus_sets(loader, stem, systems, dist, shared_data: Path) -> None:
    d = loader(data_dir=shared_data)
    items = d.items
    assert len(items) == 320 and set(items["system"]) == systems
    assert items.groupby("system").size().eq(80).all()
    scores = items[["gpt4_score_1", "gpt4_score_2", "gpt4_score_3"]].stack().dropna().astype(int)
    assert scores.value_counts().sort_index().to_dict() == dist
    assert np.allclose(items["gpt4_score"], items[["gpt4_score_1", "gpt4_score_2", "gpt4_score_3"]].mean(axis=1))
    assert "NOT human" in d.description
    # our split of the upstream prompts equals the derived parsed file (up to surrounding whitespace)
    parsed = pd.read_json(shared_data / "prometheus_eval_benchmarks" / "parsed" / f"{stem}_eval.parsed.jsonl", lines=True)
    for ours, theirs in [("instruction", "instruction"), ("response", "response"),
                         ("reference", "reference_answer"), ("rubric", "score_rubric")]:
        assert items[ours].tolist() == parsed[theirs].str.strip().tolist()
    assert items["id"].tolist() == parsed["idx"].astype(str).tolist()


def test_split_prompt_names_missing_header() -> None:
    with pytest.raises(InputError, match="Score Rubrics"):
        prometheus.split_prompt("###The instruction to evaluate:\nx\n###Response to evaluate:\ny\n"
                                "###Reference Answer (Score 5):\nz\n", file="f.json", line=3)


# --------------------------------------------------------------------------- data dir, bundled sets
def test_missing_data_dir_error_says_where_to_get_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EvalignError, match=r"open-instruct.*EVALIGN_DATA_DIR"):
        tulu.load_tulu1(data_dir=tmp_path)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(EvalignError, match="prometheus-eval"):
        prometheus.load_prometheus_vicuna()


def test_env_var_and_set_folder_are_found(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, str(shared_data))
    assert find_set_dir("tulu1_human_eval", ["eval_instances_tulu_1.jsonl"], None, where="x") == shared_data / "tulu1_human_eval"
    direct = shared_data / "prometheus_eval_benchmarks"
    assert len(prometheus.load_prometheus_vicuna(data_dir=direct).items) == 320


def test_pandalm_majority_counts() -> None:
    d = load_dataset("pandalm")
    prefs = d.pairs[d.pref_columns]
    majority = prefs.mode(axis=1)[0]
    assert (prefs.eq(majority, axis=0).sum(axis=1) >= 2).all()  # SOURCE.md: every row has a majority
    # PandaLM labels: 0 tie, 1 response1 better (+1), 2 response2 better (-1)
    assert majority.value_counts().to_dict() == {-1.0: 472, 1.0: 422, 0.0: 105}


def test_registered_names() -> None:
    """A fresh interpreter: ``evalign.datasets`` itself must register the adapters."""
    import subprocess
    import sys

    code = "from evalign.datasets import list_datasets; print(','.join(list_datasets()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    names = {"tulu1", "llmbar", "hhh", "prometheus_mt_bench", "prometheus_vicuna", "pandalm", "self_instruct"}
    assert names <= set(out.split(",")), out
    assert len(load_dataset("hhh").pairs) == 221
