"""The evaluation layer: baselines against hand-computed cases, guards, alignment, judge verdicts,
corpus system scores and the signature."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalign.datasets.base import bundled_path
from evalign.evaluate import Column, EvalSpec, Human, Resampling, TrustRequest, evaluate
from evalign.evaluate.baselines import human_ceiling_pairs

FAST = Resampling(n_resamples=50, n_permutations=50, seed=0)


def _pairs(labels: list[float], a: list[float], b: list[float]) -> pd.DataFrame:
    n = len(labels)
    return pd.DataFrame({"id": [str(i) for i in range(n)], "instruction": ["q"] * n,
                         "response_a": ["x" * (i + 1) for i in range(n)], "response_b": ["y"] * n,
                         "pref_1": labels, "m_a": a, "m_b": b})


def _row(result, name: str) -> pd.Series:
    return result.trust[0].for_group().set_index("metric").loc[name]


def test_pair_baselines_hand_computed() -> None:
    # 10 pairs: 3 ties, 4 A, 3 B
    labels = [0, 0, 0, 1, 1, 1, 1, -1, -1, -1]
    rng = np.random.default_rng(0)
    t = _pairs([float(x) for x in labels], list(rng.random(10)), list(rng.random(10)))
    r = evaluate(EvalSpec(human=Human(pref_columns=("pref_1",)), columns=(Column("m"),), pairs=t, resampling=FAST,
                          min_group_size=1))
    assert _row(r, "always_tie")["value"] == pytest.approx(3 / 10)
    assert _row(r, "always_a")["value"] == pytest.approx(4 / 10)
    assert _row(r, "always_b")["value"] == pytest.approx(3 / 10)
    assert _row(r, "random")["value"] == pytest.approx(1 / 3)
    assert _row(r, "always_a")["preference_accuracy_no_ties"] == pytest.approx(4 / 7)
    assert _row(r, "random")["preference_accuracy_no_ties"] == pytest.approx(1 / 3)
    # longer_is_better: response_a has i + 1 characters, response_b 1: A is longer except in pair 0 (a tie)
    lib = _row(r, "longer_is_better")
    assert lib["kind"] == "baseline" and np.isnan(lib["rank"])
    # random scores do not beat longer_is_better (tie-calibrated: pairs 0-2 ties, 3-6 right): rank withheld
    assert _row(r, "m")["beats_baselines"] is False and np.isnan(_row(r, "m")["rank"])
    assert r.trust[0].headline is not None and "(longer_is_better = 0.700)" in r.trust[0].headline


def test_item_always_tie_is_share_of_human_ties() -> None:
    # one item group (grouping none), 5 cells: human values 1,1,1,2,3 -> pairs: 10, ties: 3
    table = pd.DataFrame({"id": [str(i) for i in range(5)], "system": ["s"] * 5, "response": ["a", "bb", "c", "dd", "e"],
                          "h": [1.0, 1.0, 1.0, 2.0, 3.0], "m": [0.1, 0.5, 0.2, 0.9, 0.4]})
    r = evaluate(EvalSpec(human=Human(column="h"), columns=(Column("m"),), items=table, grouping="system",
                          trust=(TrustRequest("pairwise_accuracy", "item", "system"),), resampling=FAST,
                          min_group_size=1))
    assert _row(r, "always_tie")["value"] == pytest.approx(3 / 10)
    assert _row(r, "random")["value"] == pytest.approx(1 / 3)
    assert _row(r, "random")["kendall"] == 0.0


def test_human_ceiling_pairs_by_hand() -> None:
    prefs = np.array([[1, 1, 0, -1], [1, -1, 0, -1], [np.nan, 1, 0, 1]], dtype=float)
    # ordered annotator pairs: (0,1): 3/4 agree, (0,2): 2/3, (1,2): 1/3, and the same reversed
    assert human_ceiling_pairs(prefs, "preference_accuracy") == pytest.approx((3 + 2 + 1) * 2 / ((4 + 3 + 3) * 2))


def test_noise_metric_on_tulu_does_not_beat_baselines(shared_data_dir: Path) -> None:
    from evalign.datasets import load_dataset

    ds = load_dataset("tulu1", data_dir=shared_data_dir)
    items = ds.items.copy()
    items["noise"] = np.random.default_rng(1).random(len(items))
    r = evaluate(EvalSpec(human=Human(column="acceptable"), columns=(Column("noise"),), items=items,
                          resampling=Resampling(n_resamples=100, n_permutations=100)))
    row = _row(r, "noise")
    assert row["beats_baselines"] is False
    assert any("noise does not beat the best trivial baseline" in w for w in r.warnings)
    assert any("calls" in w and "ties" in w for w in r.warnings)  # the 90% tie guard
    # the baselines are there: always_tie = the human tie share within items
    assert _row(r, "always_tie")["value"] == pytest.approx(r.overview.set_index("metric").loc["noise", "human_tie_rate"],
                                                           abs=0.05)


def test_guards_constant_human_one_system_one_item() -> None:
    base = pd.DataFrame({"id": ["1", "1", "2", "2", "3", "3"], "system": ["a", "b"] * 3,
                         "response": ["x", "yy"] * 3, "m": [0.1, 0.2, 0.3, 0.1, 0.5, 0.7]})
    const = base.assign(h=1.0)
    r = evaluate(EvalSpec(human=Human(column="h"), columns=(Column("m"),), items=const, resampling=FAST,
                          min_group_size=1))
    assert r.refused and "constant" in r.refused
    assert r.trust[0].for_group()["rank"].isna().all() and r.trust[0].for_group()["cluster"].isna().all()
    one_sys = base[base["system"] == "a"].assign(h=[1.0, 2.0, 3.0])
    r = evaluate(EvalSpec(human=Human(column="h"), columns=(Column("m"),), items=one_sys, resampling=FAST,
                          min_group_size=1))
    assert r.refused and "only one system" in r.refused
    one_item = base[base["id"] == "1"].assign(h=[1.0, 2.0])
    r = evaluate(EvalSpec(human=Human(column="h"), columns=(Column("m"),), items=one_item, resampling=FAST,
                          min_group_size=1))
    assert r.refused and "only one item" in r.refused


def test_metric_missing_for_a_system_is_aligned_with_counts() -> None:
    rng = np.random.default_rng(0)
    rows = [{"id": str(i), "system": s, "response": "x" * (i % 7 + 1), "h": float(rng.integers(1, 5)),
             "full": float(rng.random()), "part": float(rng.random()) if s != "c" else np.nan}
            for i in range(20) for s in ("a", "b", "c")]
    t = pd.DataFrame(rows)
    r = evaluate(EvalSpec(human=Human(column="h"), columns=(Column("full"), Column("part")), items=t, resampling=FAST))
    assert any("aligned on the 40 (system, item) cells" in n and "full 60, part 40" in n for n in r.notes)
    miss = r.missing.set_index(["metric", "system"])
    assert miss.loc[("part", "c"), "missing"] == 20 and miss.loc[("full", "c"), "missing"] == 0
    assert r.n_systems == 2


def test_no_values_is_refused_with_reason() -> None:
    t = pd.DataFrame({"id": ["1", "2"], "system": ["a", "a"], "response": ["x", "y"], "h": [1.0, 2.0],
                      "m": [np.nan, np.nan]})
    r = evaluate(EvalSpec(human=Human(column="h"), columns=(Column("m"),), items=t, resampling=FAST))
    assert r.refused and "nothing to rank" in r.refused and r.trust == ()


def test_pandalm_judge_rows_match_upstream_counts() -> None:
    from evalign.datasets import load_dataset

    ds = load_dataset("pandalm")
    cols = tuple(Column(j, "judge", verdict=True) for j in ds.judge_columns)
    r = evaluate(EvalSpec(human=Human(pref_columns=tuple(ds.pref_columns)), columns=cols, pairs=ds.pairs,
                          resampling=FAST))
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "pandalm_testset"
    test = {x["idx"]: x for x in json.loads((shared / "testset-v1.json").read_text())}
    majority = {i: Counter([x["annotator1"], x["annotator2"], x["annotator3"]]).most_common(1)[0][0]
                for i, x in test.items()}
    gpt = {x["idx"]: x["gpt_result"] for x in json.loads((shared / "gpt-3.5-turbo-testset-v1.json").read_text())}
    panda = {x["idx"]: x["pandalm_result"] for x in json.loads((shared / "pandalm-7b-testset-v1.json").read_text())}
    code = {"1": 1, "2": 2, "Tie": 0, "0": 0}
    gpt_ok = sum(code.get(str(gpt[i])) == majority[i] for i in test)
    garbage = sum(gpt[i] == "garbage" for i in test)
    panda_ok = sum(int(panda[i]) == majority[i] for i in test)
    g = _row(r, "judge:gpt-3.5-turbo")
    assert g["value"] == pytest.approx(gpt_ok / 999)  # unparseable = wrong
    assert g["accuracy_parsed"] == pytest.approx(gpt_ok / (999 - garbage))
    assert g["n_unparseable"] == garbage == 25
    assert _row(r, "judge:pandalm-7b")["value"] == pytest.approx(panda_ok / 999)
    assert (bundled_path("pandalm", "upstream_judge_verdicts.jsonl")).is_file()


def test_corpus_system_score_equals_sacrebleu_and_signature(tmp_path: Path) -> None:
    import sacrebleu

    from evalign.datasets import load_dataset
    from evalign.metrics.base import get_metric
    from evalign.scoring import score, system_scores

    si = load_dataset("self_instruct")
    items = si.items[si.items["system"].isin(["davinci", "text-davinci-003", "davinci-t0-ft"])]
    m = get_metric("bleu")
    scored, _ = score(items, [m])
    r = evaluate(EvalSpec(human=Human(system={k: v for k, v in si.system_human.items()}, higher_is_better=False),
                          columns=(Column("bleu", system_level="corpus", metric=m),), items=scored, resampling=FAST))
    sys_t = r.systems.set_index("system")
    for s, g in scored.groupby("system"):
        ref = sacrebleu.corpus_bleu(g["response"].tolist(), [g["reference"].tolist()]).score
        assert sys_t.loc[s, "bleu (corpus)"] == pytest.approx(ref)
        assert system_scores(scored, ["bleu"]).set_index("system").loc[s, "bleu"] == pytest.approx(ref)
    sig = r.to_json()["signature"]
    for key in ("statistic", "level", "epsilon_rule", "resamples", "permutations", "seed", "evalign", "test"):
        assert key in sig
    assert r.trust[0].to_json()["signature"]["statistic"] == "kendall"
