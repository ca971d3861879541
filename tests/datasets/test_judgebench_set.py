"""JudgeBench on its real files: the pairs, the published verdicts in evalign's layout, and
JudgeBench's own accuracy equal to what upstream's ``compute_final_metrics`` returned on every verdict file,
per judge and per source category (``judgebench/reference/upstream_metrics.json`` in the data folder: upstream's
outputs; no upstream code runs here)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalign.datasets import judgebench
from evalign.datasets.catalogue import load_dataset_spec
from evalign.errors import InputError
from evalign.evaluate import EvalSpec, Resampling, evaluate
from evalign.evaluate.inputs import InputSettings, load_inputs
from evalign.evaluate.spec import Column

GPT = "gpt-4o-2024-05-13"
CLAUDE = "claude-3-5-sonnet-20240620"


@pytest.fixture(scope="module")
def gpt(shared_data: Path) -> Any:
    return judgebench.load_judgebench("gpt-4o", data_dir=shared_data)


@pytest.fixture(scope="module")
def upstream(shared_data: Path) -> dict[str, Any]:
    """What upstream's compute_final_metrics returned (in percent) on each verdict file, by file name."""
    path = shared_data / "judgebench" / "reference" / "upstream_metrics.json"
    if not path.is_file():
        pytest.fail(f"upstream's JudgeBench metrics are missing: expected {path} (see judgebench/SOURCE.md)")
    return json.loads(path.read_text(encoding="utf-8"))["files"]


def _upstream_of(upstream: dict[str, Any], model: str, key: str) -> dict[str, Any]:
    """Upstream's record of the one verdict file the test's glob key names (checked to be that file)."""
    found = [r for name, r in upstream.items() if r["response_model"] == model and r["test_key"] == key]
    assert len(found) == 1, (model, key)
    return found[0]


def _raw(shared_data: Path, model: str, judge: str | None = None) -> list[dict[str, Any]]:
    folder = shared_data / "judgebench"
    path = (folder / "data" / f"dataset=judgebench,response_model={model}.jsonl" if judge is None
            else next((folder / "outputs").glob(f"dataset=judgebench,response_model={model},*{judge}*.jsonl")))
    return [json.loads(line) for line in path.open(encoding="utf-8")]


def test_pairs_labels_and_categories(gpt: Any, shared_data: Path) -> None:
    pairs = gpt.pairs
    assert len(pairs) == 350 and pairs["id"].is_unique
    assert Counter(pairs["pref_1"]) == {1.0: 193, -1.0: 157}  # A>B 193, B>A 157
    assert pairs["category"].value_counts().to_dict() == {"mmlu-pro": 154, "livebench-reasoning": 98,
                                                          "livebench-math": 56, "livecodebench": 42}
    raw = _raw(shared_data, GPT)[17]
    row = pairs.iloc[17]
    assert (row["id"], row["task"], row["instruction"], row["response_b"]) == (
        raw["pair_id"], raw["source"], raw["question"], raw["response_B"])
    assert row["pref_1"] == (1.0 if raw["label"] == "A>B" else -1.0)
    claude = judgebench.load_judgebench("claude", data_dir=shared_data)
    assert len(claude.pairs) == 270 and claude.judge_columns == ["judge:claude-3-haiku/arena-hard"]


def test_judge_columns_in_evalign_layout(gpt: Any, shared_data: Path) -> None:
    assert gpt.judge_columns == ["judge:o1-mini/arena-hard", "judge:grm-gemma-2b-rewardmodel-ft",
                                 "judge:internlm2-20b-reward", "judge:internlm2-7b-reward",
                                 "judge:skywork-reward-gemma-2-27b", "judge:skywork-reward-llama-3.1-8b"]
    pairs = gpt.pairs.set_index("id")
    # o1-mini: game 2 shows B first, so its decision is flipped back; the two games resolve as evalign judge does
    o1 = {r["pair_id"]: r["judgments"] for r in _raw(shared_data, GPT, "o1-mini")}
    flip = {"A>B": "B", "B>A": "A", "A=B": "tie"}
    own = {"A>B": "A", "B>A": "B", "A=B": "tie"}
    for pid, (g1, g2) in list(o1.items())[:60]:
        ab, ba = own[g1["decision"]], flip[g2["decision"]]
        assert pairs.at[pid, "judge:o1-mini/arena-hard.ab"] == ab
        assert pairs.at[pid, "judge:o1-mini/arena-hard.ba"] == ba
        assert pairs.at[pid, "judge:o1-mini/arena-hard"] == (ab if ab == ba else "tie")
    # reward models: the scores of A and B in the table's frame
    rm = _raw(shared_data, GPT, "Skywork-Reward-Gemma-2-27B")
    col = "judge:skywork-reward-gemma-2-27b"
    for r in rm[:25]:
        s1 = r["judgments"][0]["judgment"]["scores"]
        assert pairs.at[r["pair_id"], f"{col}.score_a"] == pytest.approx(s1[0])
        assert pairs.at[r["pair_id"], f"{col}.score_b"] == pytest.approx(s1[1])
    both = gpt.pairs[[f"{col}.score_a", f"{col}.score_b"]].to_numpy()
    expect = np.where(both[:, 0] > both[:, 1], "A", np.where(both[:, 0] < both[:, 1], "B", "tie"))
    assert (gpt.pairs[col].to_numpy() == expect).all()
    assert (gpt.pairs[col] == "tie").sum() == 3  # the three pairs with equal scores
    assert set(gpt.pairs[f"{col}.status"]) == {"scored"}


def test_o1_mini_verdict_counts(gpt: Any) -> None:
    # from the raw games (o1-mini, 350 pairs): A>B/B>A in the two shown orders = consistent, the rest ties
    v = Counter(gpt.pairs["judge:o1-mini/arena-hard"])
    assert v == {"A": 121, "B": 114, "tie": 115}


FILES = [(GPT, "o1-mini", "judge:o1-mini/arena-hard"),
         (GPT, "GRM-Gemma-2B", "judge:grm-gemma-2b-rewardmodel-ft"),
         (GPT, "internlm2-20b", "judge:internlm2-20b-reward"),
         (GPT, "internlm2-7b", "judge:internlm2-7b-reward"),
         (GPT, "Skywork-Reward-Gemma", "judge:skywork-reward-gemma-2-27b"),
         (GPT, "Skywork-Reward-Llama", "judge:skywork-reward-llama-3.1-8b"),
         (CLAUDE, "claude-3-haiku", "judge:claude-3-haiku/arena-hard")]


def test_reference_names_every_verdict_file(upstream: dict[str, Any], shared_data: Path) -> None:
    files = sorted(p.name for p in (shared_data / "judgebench" / "outputs").glob("*.jsonl"))
    assert sorted(upstream) == files and len(files) == 7
    for model, key, column in FILES:
        rec = _upstream_of(upstream, model, key)
        assert rec["evalign_column"] == column
        assert rec["n_pairs"] == len(_raw(shared_data, model, key))


@pytest.mark.parametrize(("model", "key", "column"), FILES)
def test_statistic_equals_upstream_per_judge_and_category(model: str, key: str, column: str,
                                                           upstream: dict[str, Any], shared_data: Path) -> None:
    ds = judgebench.load_judgebench("gpt-4o" if model == GPT else "claude", data_dir=shared_data)
    rec = _upstream_of(upstream, model, key)
    raw = _raw(shared_data, model, key)
    pairs = ds.pairs.set_index("id").loc[[r["pair_id"] for r in raw]].reset_index()
    assert judgebench.judgebench_statistic(pairs, column) == pytest.approx(rec["all"] / 100, abs=1e-12)
    for cat in judgebench.CATEGORIES:
        part = pairs[pairs["category"] == cat]
        assert len(part) == rec["n_pairs_by_category_startswith"][cat], cat
        mine = judgebench.judgebench_statistic(part, column)
        assert mine == pytest.approx(rec["by_category_startswith"][cat] / 100, abs=1e-12), cat


def test_meta_shows_upstream_statistic_beside_evalign_per_category(shared_data: Path,
                                                                   upstream: dict[str, Any]) -> None:
    inputs = load_inputs(InputSettings(dataset="judgebench", data_dir=shared_data))
    ds = inputs.ds
    spec = EvalSpec(human=inputs.human, columns=tuple(Column(j, "judge", verdict=True) for j in ds.judge_columns),
                    items=inputs.items, pairs=inputs.pairs, by="category", statistics=ds.statistics,
                    resampling=Resampling(n_resamples=20, n_permutations=20), baselines=False)
    rows = evaluate(spec).trust[0].rows.set_index(["group", "metric"])
    for model, key, column in FILES[:6]:
        rec = _upstream_of(upstream, model, key)
        assert rows.at[("(all)", column), "judgebench_accuracy"] == pytest.approx(rec["all"] / 100)
        assert rows.at[("livecodebench", column), "judgebench_accuracy"] == pytest.approx(
            rec["source_equals_livecodebench"] / 100)
    # evalign's statistic needs both orders right: below upstream's for o1-mini, equal for the reward models
    o1 = rows.loc[("(all)", "judge:o1-mini/arena-hard")]
    assert o1["value"] == pytest.approx(203 / 350) and o1["judgebench_accuracy"] == pytest.approx(230 / 350)
    grm = rows.loc[("(all)", "judge:grm-gemma-2b-rewardmodel-ft")]
    assert grm["value"] == pytest.approx(grm["judgebench_accuracy"])


def test_missing_files_and_bad_variant(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="judgebench"):
        judgebench.load_judgebench("gpt-4o", data_dir=tmp_path)
    with pytest.raises(InputError, match="unknown response model"):
        judgebench.load_judgebench("gemini", data_dir=tmp_path)
    bad = tmp_path / "judgebench" / "data"
    bad.mkdir(parents=True)
    (bad / f"dataset=judgebench,response_model={GPT}.jsonl").write_text(
        json.dumps({"pair_id": "p", "original_id": 1, "source": "x", "question": "q", "response_model": "m",
                    "response_A": "a", "response_B": "b", "label": "A=B"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="A>B or B>A") as e:
        judgebench.load_judgebench("gpt-4o", data_dir=tmp_path)
    assert "line 1" in str(e.value) and "label" in str(e.value)


def test_judge_name_rule() -> None:
    assert judgebench.judge_name("o1-mini-2024-09-12", "arena_hard") == "judge:o1-mini/arena-hard"
    assert judgebench.judge_name("claude-3-haiku-20240307", "arena_hard") == "judge:claude-3-haiku/arena-hard"
    assert judgebench.judge_name("Skywork_Skywork-Reward-Gemma-2-27B", "reward_model") == \
        "judge:skywork-reward-gemma-2-27b"
    assert load_dataset_spec("judgebench:claude").name == "judgebench:claude"
