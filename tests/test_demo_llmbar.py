"""The demo's LLMBar table: which published judges it names, and their order diagnostics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalign.datasets import load_dataset
from evalign.demo import LLMBAR_NAMED, best_per_evaluator, llmbar_evaluation, llmbar_judges
from evalign.evaluate import Resampling


def test_best_per_evaluator_by_hand() -> None:
    gold = [1.0, -1.0, 1.0, -1.0]
    pairs = pd.DataFrame({
        "pref_1": gold,
        "judge:x/one": ["A", "A", "A", "A"],  # 2 of 4
        "judge:x/two": ["A", "B", "A", "tie"],  # 3 of 4
        "judge:x/three": ["A", "B", "A", "unparseable"],  # 3 of 4, later: not chosen
        "judge:y/one": ["B", "B", None, "B"],  # 2 of 4 (no verdict = wrong)
        "judge:y/two": ["B", "A", "B", "A"],  # 0 of 4
    })
    judges = [c for c in pairs.columns if c.startswith("judge:")]
    assert best_per_evaluator(pairs, judges) == ["judge:x/two", "judge:y/one"]


def test_the_demo_ranks_each_evaluators_best_and_the_named_vanilla_judges() -> None:
    ds = load_dataset("llmbar")
    chosen = llmbar_judges(ds.pairs, ds.judge_columns)
    evaluators = [j.removeprefix("judge:").split("/")[0] for j in chosen]
    assert sorted(set(evaluators)) == ["chatgpt", "chatgpt-0301", "falcon", "gpt-4", "llama2", "palm2"]
    assert set(LLMBAR_NAMED) <= set(chosen) and len(chosen) == len(set(chosen))
    # each evaluator's pick is its best resolved accuracy over the 419 pairs, recounted here
    gold = ds.pairs["pref_1"].to_numpy()
    for j in chosen:
        if j in LLMBAR_NAMED and chosen.index(j) >= 6:
            continue
        e = j.removeprefix("judge:").split("/")[0]
        own = [c for c in ds.judge_columns if c.startswith(f"judge:{e}/")]

        def acc(c: str) -> float:
            v = ds.pairs[c].map({"A": 1.0, "B": -1.0}).to_numpy(dtype=float)
            return float(np.mean(v == gold))

        assert acc(j) == max(acc(c) for c in own), j
    res = llmbar_evaluation(Resampling(n_resamples=20, n_permutations=20, seed=0), lambda _s: None)
    rows = res.trust[0].for_group().set_index("metric")
    assert res.n_items == 419 and set(chosen) <= set(rows.index)
    v = rows.loc["judge:gpt-4/vanilla"]
    # GPT-4 Vanilla over Natural + Adversarial, recounted from its two orders: 339 of 419 pairs
    # right in both
    right = np.where(gold > 0, "A", "B")
    ab, ba = ds.pairs["judge:gpt-4/vanilla.ab"].to_numpy(), ds.pairs["judge:gpt-4/vanilla.ba"].to_numpy()
    both = int(((ab == right) & (ba == right)).sum())
    assert both == 339 and v["value"] == v["accuracy_both"] == both / 419
    assert v["accuracy_mean"] == ((ab == right).sum() + (ba == right).sum()) / (2 * 419)
    assert 0 <= v["position_agreement"] <= 1 and v["accuracy_mean"] > v["accuracy_both"]
