"""The bench's sample: fixed, seeded, stratified, and the same whatever the row order."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalign.bench.load import load_set
from evalign.bench.sample import allocate, pair_labels, sample_set, strata
from evalign.bench.settings import BenchSettings
from evalign.bench.suite import load_suite
from evalign.errors import InputError


def test_the_sample_ids_at_seed_0() -> None:
    suite = load_suite()
    nat = load_set(suite.get("llmbar-natural"), BenchSettings(per_set=5)).table
    assert nat["id"].tolist() == ["Natural/14", "Natural/16", "Natural/26", "Natural/84", "Natural/94"]
    adv = load_set(suite.get("llmbar-adversarial"), BenchSettings(per_set=8)).table
    assert adv["id"].tolist() == ["Adversarial/Neighbor/40", "Adversarial/Neighbor/73", "Adversarial/Neighbor/124",
                                  "Adversarial/GPTInst/15", "Adversarial/GPTInst/37", "Adversarial/GPTOut/26",
                                  "Adversarial/GPTOut/33", "Adversarial/Manual/43"]
    mt = load_set(suite.get("alttest-mtbench"), BenchSettings(per_set=6)).table
    assert mt["id"].tolist() == ["95__claude-v1__gpt-3.5-turbo__1", "104__gpt-3.5-turbo__vicuna-13b-v1.2__2",
                                 "115__alpaca-13b__gpt-3.5-turbo__2", "115__claude-v1__gpt-3.5-turbo__1",
                                 "138__alpaca-13b__gpt-3.5-turbo__2", "158__alpaca-13b__gpt-3.5-turbo__1"]
    assert mt["turn"].tolist() == [1, 2, 2, 1, 2, 1]  # stratified by turn (60 / 60) and label
    tc = load_set(suite.get("topical-chat"), BenchSettings(per_set=6)).table
    assert list(zip(tc["id"], tc["system"], strict=True)) == [
        ("10", "New Human Generated"), ("30", "Argmax Decoding"), ("34", "Nucleus Decoding (p = 0.5)"),
        ("37", "Nucleus Decoding (p = 0.7)"), ("41", "Nucleus Decoding (p = 0.3)"), ("43", "Original Ground Truth")]
    # one response of each of the six systems: stratified by system
    other = load_set(suite.get("llmbar-natural"), BenchSettings(per_set=5, seed=1)).table
    assert other["id"].tolist() != nat["id"].tolist()


def test_allocation_is_proportional_with_largest_remainders() -> None:
    assert allocate({"a": 134, "b": 92, "c": 47, "d": 46}, 8) == {"a": 4, "b": 2, "c": 1, "d": 1}
    assert allocate({"a": 1, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}  # ties: the first name
    assert allocate({"a": 5, "b": 2}, 10) == {"a": 5, "b": 2}
    assert allocate({"x": 10, "y": 30}, 4) == {"x": 1, "y": 3}


def test_labels_and_strata_of_pairs() -> None:
    t = pd.DataFrame({"id": ["1", "2", "3", "4"], "pref_1": [1.0, -1.0, 0.0, 1.0], "pref_2": [1.0, 1.0, 0.0, float("nan")],
                      "task": ["x", "x", "y", "y"]})
    assert pair_labels(t, ["pref_1", "pref_2"]) == ["A", "tie", "tie", "A"]
    assert strata(t, ["task", "label"], ["pref_1", "pref_2"]) == ["x\x1fA", "x\x1ftie", "y\x1ftie", "y\x1fA"]
    with pytest.raises(InputError, match="no column 'topic' to stratify by"):
        strata(t, ["topic"])
    with pytest.raises(InputError, match="unit '1' appears twice"):
        sample_set(pd.concat([t, t]), 2, seed=0, key="k")


def table(n: int) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "task": [f"t{i % 3}" for i in range(n)],
                         "pref_1": [1.0 if i % 2 else -1.0 for i in range(n)]})


@settings(max_examples=40, deadline=None)
@given(n_rows=st.integers(3, 60), n=st.integers(1, 70), seed=st.integers(0, 5), shuffle=st.randoms())
def test_the_sample_ignores_row_order_and_keeps_the_strata(n_rows: int, n: int, seed: int, shuffle: object) -> None:
    t = table(n_rows)
    kw = {"seed": seed, "key": "set", "stratify": ["task", "label"], "pref": ["pref_1"]}
    got = sample_set(t, n, **kw)  # type: ignore[arg-type]
    rows = list(range(n_rows))
    shuffle.shuffle(rows)  # type: ignore[attr-defined]
    again = sample_set(t.iloc[rows].reset_index(drop=True), n, **kw)  # type: ignore[arg-type]
    assert sorted(got["id"]) == sorted(again["id"])
    assert len(got) == min(n, n_rows)
    sizes = t.groupby(["task", "pref_1"]).size()
    drawn = got.groupby(["task", "pref_1"]).size().reindex(sizes.index, fill_value=0)
    assert ((drawn - sizes * min(n, n_rows) / n_rows).abs() < 1.0 + 1e-9).all()  # proportional to within one
    bigger = sample_set(t, min(n + 5, n_rows), **kw)  # type: ignore[arg-type]
    assert len(set(got["id"]) - set(bigger["id"])) <= len(sizes)  # a larger sample keeps nearly every unit
