"""Scripted judges of known behaviour get the profile they must: always the first shown, and always
the longer response (grades that grow with the length); the bench resumes without repeating a call."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau
from scripted import AlwaysFirst, Flaky, PrefersLonger, grade_of

from evalign.bench import BenchSettings, parse_judge, run_bench
from evalign.bench.page import render_page
from evalign.cache import Cache
from evalign.errors import BackendError
from evalign.io import json_safe
from evalign.meta.resampling import Resampling

SETS = ("llmbar-natural", "hhh", "qags")
N = 20


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    AlwaysFirst.calls.clear()
    PrefersLonger.calls.clear()
    settings = BenchSettings(per_set=N, sets=SETS, resampling=Resampling(200, 200), panels={"duo": ("first", "longer")})
    cache = Cache(tmp_path_factory.mktemp("bench") / "cache.sqlite")
    judges = [parse_judge("first=scripted-first:x"), parse_judge("longer=scripted-longer:x")]
    return run_bench(judges, settings, cache=cache), cache, judges, settings


def row(p, key: str, judge: str, scope: str = "set") -> pd.Series:  # type: ignore[no-untyped-def]
    r = p.scope(scope, key)
    return r[r["judge"] == judge].iloc[0]


def test_every_call_once_both_orders_on_pairs(profile) -> None:  # type: ignore[no-untyped-def]
    p, cache, judges, settings = profile
    assert len(AlwaysFirst.calls) == len(PrefersLonger.calls) == 2 * N + 2 * N + N  # pairs in both orders, graded once
    runs = p.runs.set_index(["judge", "set"])
    assert runs.loc[("first", "hhh"), "calls"] == 2 * N and runs.loc[("first", "qags"), "calls"] == N
    assert (p.runs["parse_rate"] == 1.0).all()
    again = run_bench(judges, settings, cache=cache)  # the same bench again: every answer from the cache
    assert len(AlwaysFirst.calls) == 5 * N and (again.runs["new"] == 0).all()
    cols = [c for c in p.rows.columns if c not in ("seconds",)]
    pd.testing.assert_frame_equal(again.rows[cols], p.rows[cols])
    assert again.signature["text"] == p.signature["text"]


def test_always_first_is_never_right_and_never_consistent(profile) -> None:  # type: ignore[no-untyped-def]
    p = profile[0]
    for key in ("llmbar-natural", "hhh"):
        r = row(p, key, "first")
        # the two orders always disagree, so every verdict resolved over both orders is a tie: wrong on
        # every pair without a human tie (these sets have none)
        assert r["value"] == 0.0 and r["with_ties"] == 0.0 and r["n"] == N
        assert r["position_agreement"] == 0.0 and r["prefers_first"] == 1.0 and r["prefers_longer"] == 0.5
        assert r["role"] == "yours" and r["statistic"] == "preference_accuracy_no_ties"
        t = p.tables[key]
        assert set(t["first.ab"]) == {"A"} and set(t["first.ba"]) == {"B"} and set(t["first"]) == {"tie"}
    assert math.isnan(row(p, "qags", "first")["value"])  # a constant grade has no correlation
    assert row(p, "instruction", "first", "category")["value"] == 0.0


def test_prefers_longer_scores_what_length_predicts(profile) -> None:  # type: ignore[no-untyped-def]
    p = profile[0]
    for key in ("llmbar-natural", "hhh"):
        t = p.tables[key]
        la, lb = t["response_a"].str.len().to_numpy(), t["response_b"].str.len().to_numpy()
        label = t["pref_1"].to_numpy()
        # equal lengths: the first shown in each order, so the orders disagree (a tie: wrong)
        expected = float(np.mean(np.sign(la - lb) == label))  # no human ties in these sets
        r = row(p, key, "longer")
        assert r["value"] == pytest.approx(expected, abs=1e-12) and r["with_ties"] == pytest.approx(expected, abs=1e-12)
        assert r["prefers_longer"] == 1.0 and r["position_agreement"] == pytest.approx(float(np.mean(la != lb)))
        assert r["value"] == row(p, key, "longer_is_better")["value"]  # the same calls as the baseline
        assert row(p, key, "longer_is_better")["role"] == "baseline"
    t = p.tables["qags"]
    grades = [float(grade_of(x)) for x in t["response"]]
    assert t["longer"].tolist() == grades
    tau = kendalltau(t["consistency"].to_numpy(), grades).statistic
    assert row(p, "qags", "longer")["value"] == pytest.approx(tau, abs=1e-12)
    assert row(p, "grading", "longer", "category")["value"] == pytest.approx(tau, abs=1e-12)  # one graded set


def test_published_judges_and_panels_stand_beside(profile) -> None:  # type: ignore[no-untyped-def]
    p = profile[0]
    nat = p.scope("set", "llmbar-natural")
    published = nat[nat["role"] == "published"]["judge"].tolist()
    assert sorted(published) == sorted(f"judge:{e}/vanilla" for e in ("gpt-4", "chatgpt", "chatgpt-0301", "llama2",
                                                                     "palm2", "falcon"))
    t = p.tables["llmbar-natural"]
    gpt4 = row(p, "llmbar-natural", "judge:gpt-4/vanilla")
    resolved = t["judge:gpt-4/vanilla"].map({"A": 1.0, "B": -1.0, "tie": 0.0}).to_numpy()
    assert gpt4["value"] == pytest.approx(float(np.mean(resolved == t["pref_1"].to_numpy())), abs=1e-12)
    assert row(p, "qags", "unieval")["role"] == "published"
    duo = row(p, "llmbar-natural", "duo")
    assert duo["role"] == "panel"
    both = np.where(t["first"] == t["longer"], t["first"], "tie")
    assert (t["duo"].to_numpy() == both).all()
    s = p.summary()
    assert s["judge"].tolist()[:3] == ["first", "longer", "duo"]
    assert set(s.columns) >= {"instruction", "instruction.low", "safety", "grading"}


def test_json_and_page(profile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    p = profile[0]
    data = json.loads(json.dumps(json_safe(p.to_json())))
    assert data["judges"] == ["first", "longer", "duo"] and len(data["rows"]) == len(p.rows)
    assert data["signature"]["sets"] == {"llmbar-natural": "llmbar:natural:20/100", "hhh": "hhh:20/221",
                                         "qags": "qags:20/474"}
    assert data["signature"]["templates"]["hhh"]["template"] == "prometheus_relative"
    page = render_page(p)
    assert page.count('<figure class="plot"') == 2  # accuracies and correlations: one plot each
    assert "Set llmbar-natural" in page and "judge:gpt-4/vanilla" in page and p.signature["text"] in page


def test_an_interrupted_bench_resumes_without_repeating_a_call(tmp_path: Path) -> None:
    Flaky.calls.clear()
    Flaky.budget = 25
    cache = Cache(tmp_path / "cache.sqlite")
    settings = BenchSettings(per_set=10, sets=("llmbar-natural", "qags"), resampling=Resampling(50, 50))
    judge = parse_judge("flaky=scripted-flaky:x")
    with pytest.raises(BackendError, match="the server went away"):
        run_bench([judge], settings, cache=cache)
    assert len(Flaky.calls) == 25
    Flaky.budget = 10**9
    p = run_bench([judge], settings, cache=cache)
    assert len(Flaky.calls) == 2 * 10 + 10  # the 25 answered calls were not made again
    keys = [json.dumps(c.messages) for c in Flaky.calls]
    assert len(set(keys)) == len(keys)
    assert p.runs.set_index("set").loc["llmbar-natural", "cached"] == 20


def test_panel_note_says_what_early_stopping_would_save(profile) -> None:  # type: ignore[no-untyped-def]
    p = profile[0]
    # duo = first (a tie on every pair, over both orders) and longer: a tie vote leaves the verdict open for
    # the second member on every pair of the two pairwise sets: nothing saved, said as such
    (note,) = [n for n in p.notes if n.startswith("panel duo:")]
    assert "would judge 80 of the 80 member-pairs of the pairwise sets (0% of the member calls saved)" in note
