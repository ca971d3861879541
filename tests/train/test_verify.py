"""The trust table of ``verify_judges``: values equal scipy / evalign.meta on the same data; n = 0 never crashes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from evalign.cli import app
from evalign.cli.train_judge import judge_models
from evalign.errors import EvalignError
from evalign.judges.prompts import rubric_from_mapping
from evalign.meta import pairwise_preference_accuracy
from evalign.train.verify import (
    VerifyOptions,
    rubric_from_rendered,
    unscored_reason,
    verify_judges,
    verify_models,
)


def test_absolute_table_matches_scipy() -> None:
    rng = np.random.default_rng(0)
    h = rng.integers(1, 6, 50).astype(float)
    m = np.clip(h + rng.integers(-1, 2, 50), 1, 5)
    m[:5] = np.nan  # unscored
    df = pd.DataFrame({"gpt4": h, "trained": m, "base": np.nan})
    rep = verify_judges(df, {"trained": "trained", "base": "base"}, kind="absolute", labels=["gpt4"],
                        label_note="GPT-4 grades (1-5), NOT human ratings", label_source="model", n_resamples=200)
    t = rep.table[rep.table["kind"] == "judge"].set_index("judge")
    ok = ~np.isnan(m)
    assert t.loc["trained", "n"] == 45 and t.loc["trained", "note"] == "5 of 50 items unscored or unlabelled"
    assert np.isclose(t.loc["trained", "value"], stats.pearsonr(h[ok], m[ok]).statistic)
    assert t.loc["trained", "ci_low"] < t.loc["trained", "value"] < t.loc["trained", "ci_high"]
    assert f"spearman={stats.spearmanr(h[ok], m[ok]).statistic:.3f}" in t.loc["trained", "extra"]
    assert t.loc["base", "n"] == 0 and np.isnan(t.loc["base", "value"])
    assert t.loc["base", "note"].startswith("n = 0: no parseable grade")
    assert rep.labels.startswith("GPT-4 grades")
    baselines = rep.table[rep.table["kind"] == "baseline"].set_index("judge")
    assert baselines.loc["random", "value"] == 0.0  # the trivial predictor is shown beside the judges
    assert rep.result.label_source == "model" and rep.result.title == "Agreement with GPT-4 grades (1-5), NOT human ratings"


def test_pairwise_table_matches_meta() -> None:
    rng = np.random.default_rng(1)
    prefs = rng.choice([-1.0, 1.0, 0.0], (60, 3), p=[0.45, 0.45, 0.1])
    verdict = rng.choice([-1.0, 1.0, 0.0, np.nan], 60, p=[0.4, 0.4, 0.1, 0.1])
    df = pd.DataFrame({"p1": prefs[:, 0], "p2": prefs[:, 1], "p3": prefs[:, 2], "v": verdict})
    rep = verify_judges(df, {"trained": "v"}, kind="pairwise", labels=["p1", "p2", "p3"], label_note="human",
                        n_resamples=200)
    ok = ~np.isnan(verdict)
    ref = pairwise_preference_accuracy(prefs[ok], verdict[ok], np.zeros(ok.sum()), epsilon=0.0)
    row = rep.table[rep.table["kind"] == "judge"].iloc[0]
    # every labelled pair counts; a pair without a verdict is wrong
    assert row["n"] == 60 and np.isclose(row["value"], ref.accuracy_with_ties * ok.sum() / 60)
    assert f"parsed={ref.accuracy_with_ties:.3f}" in row["extra"] and f"unparseable={60 - ok.sum()}" in row["extra"].split()
    base = rep.table[rep.table["kind"] == "baseline"].set_index("judge")
    assert {"always_a", "always_b", "always_tie", "random"} <= set(base.index)
    assert np.isclose(base.loc["random", "value"], 1 / 3)


def test_rubric_from_rendered_roundtrip() -> None:
    r = rubric_from_mapping({"criteria": "Is it kind?", **{f"score{i}_description": f"level {i}" for i in range(1, 6)}})
    assert rubric_from_mapping(rubric_from_rendered(r.render())).hash() == r.hash()


def test_n0_from_max_tokens_says_a_larger_limit_is_needed() -> None:
    """A base model cut off at --max-tokens on every item: n = 0, never ranked, and the note says why."""
    why = unscored_reason({"truncated": 12}, 64)
    assert why == "truncated: 12; 12 outputs hit --max-tokens 64 before a grade: a larger --max-tokens is needed"
    assert unscored_reason({"no_score": 3}, 64) == "no_score: 3"
    rng = np.random.default_rng(2)
    prefs = rng.choice([-1.0, 1.0], (12, 3))
    df = pd.DataFrame({"p1": prefs[:, 0], "p2": prefs[:, 1], "p3": prefs[:, 2], "base": np.nan,
                       "trained": rng.choice([-1.0, 1.0], 12)})
    rep = verify_judges(df, {"base": "base", "trained": "trained"}, kind="pairwise", labels=["p1", "p2", "p3"],
                        label_note="human", reasons={"base": why}, n_resamples=100)
    t = rep.table.set_index("judge")
    assert t.loc["base", "n"] == 0 and np.isnan(t.loc["base", "value"]) and t.loc["base", "beats_baselines"] is None
    assert t.loc["base", "note"] == f"n = 0: no parseable grade ({why}); nothing to compare"
    assert t.loc["trained", "n"] == 12 and {"always_a", "always_b", "random"} <= set(t.index)
    assert rep.result is not None and "base" not in set(rep.result.trust[0].rows["metric"])  # never ranked


def test_verify_llmbar_both_orders_has_the_order_table(tiny_llama: Any) -> None:
    """verify-judge on LLMBar in both orders: the before/after order table beside the trust table, with
    the models under their own names, the baselines ranked and a model without any verdict (a random
    tiny Llama cut off at 4 tokens) listed as n = 0, never ranked and not tested."""
    model = str(tiny_llama(None))
    rep = verify_models("llmbar", {"base": model, "trained": model},
                        VerifyOptions(limit=4, max_tokens=4, device="cpu", batch_size=4, n_resamples=50))
    assert rep.orders is not None
    t = rep.orders.table.set_index("judge")
    assert list(t.index[:2]) == ["base", "trained"] and {"always_a", "always_first", "longer"} <= set(t.index)
    assert (t.loc[["base", "trained"], "n"] == 0).all() and t.loc[["base", "trained"], "rank"].isna().all()
    assert t.loc["base", "note"].startswith("n = 0: no verdict (truncated: 4")
    assert t.loc["always_first", "position_agreement"] == 0.0 and t.loc["always_first", "rank"] >= 1
    assert rep.orders.change is not None and rep.orders.change.note == "n = 0 for base, trained"
    assert rep.as_dict()["orders"]["change"]["p_value"] is None or np.isnan(rep.as_dict()["orders"]["change"]["p_value"])
    single = verify_models("llmbar", {"base": model},
                           VerifyOptions(limit=2, max_tokens=4, device="cpu", both_orders=False, n_resamples=50))
    assert single.orders is None  # one order: no order diagnostics


@pytest.mark.parametrize(("spec", "message"), [
    ("=/models/judge", "--model '=/models/judge': the judge name before '=' is empty; give NAME=FOLDER or FOLDER"),
    (" =/models/judge", "--model ' =/models/judge': the judge name before '=' is empty; give NAME=FOLDER or FOLDER"),
    ("base=", "--model 'base=': no model; give NAME=FOLDER or FOLDER"),
])
def test_verify_judge_refuses_an_empty_judge_name_or_model(spec: str, message: str) -> None:
    res = CliRunner().invoke(app, ["verify-judge", "--model", spec, "--dataset", "hhh"])
    assert res.exit_code == 2, res.output
    assert " ".join(res.stderr.split()) == f"error: {message}"


def test_verify_judge_refuses_a_judge_name_given_twice() -> None:
    res = CliRunner().invoke(app, ["verify-judge", "--model", "j=/a", "--model", "j=/b", "--dataset", "hhh"])
    assert res.exit_code == 2, res.output
    assert "the judge name 'j' is given twice ('/a' and '/b')" in res.stderr
    assert judge_models(["/models/base", "trained=/models/t"]) == {"base": "/models/base", "trained": "/models/t"}


def test_held_out_rows_are_the_manifests_held_out_questions(tmp_path: Any) -> None:
    """--held-out: only the rows of the manifest's held-out questions of that set, all of them; a manifest
    without any of the set's questions, or an unreadable one, is one error naming the file."""
    from evalign.train.feedback_data import RecipeSettings, build_recipe
    from evalign.train.verify import dataset_table, held_out_rows

    data, _ = build_recipe(RecipeSettings(recipe="absolute", held_out=0.2, seed=0), tmp_path / "abs")
    manifest = tmp_path / "abs" / "manifest.json"
    table = dataset_table("prometheus_vicuna")[0]
    kept = held_out_rows(table, "prometheus_vicuna", manifest)
    held = {q for q in data.held_out_questions if q.startswith("vicuna:")}
    assert {f"vicuna:{i}" for i in kept["id"]} == held and held
    assert len(kept) == sum(f"vicuna:{i}" in held for i in table["id"])
    trained = {q for q in data.train_questions if q.startswith("vicuna:")}
    assert not trained & {f"vicuna:{i}" for i in kept["id"]}
    other = tmp_path / "other.json"
    other.write_text('{"questions": {"held_out": ["mt_bench:81"]}}', encoding="utf-8")
    with pytest.raises(EvalignError, match=r"other.json: none of its 1 held-out questions is in prometheus_vicuna"):
        held_out_rows(table, "prometheus_vicuna", other)
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(EvalignError, match=r"bad.json: not a judge-data manifest"):
        held_out_rows(table, "prometheus_vicuna", bad)
    for value in ("null", "[]", '"vicuna:1"', "[{}]"):  # issue 32: null was "unexpected TypeError"
        bad.write_text('{"questions": {"held_out": ' + value + "}}", encoding="utf-8")
        with pytest.raises(EvalignError, match=r"bad.json, field 'questions.held_out': must be a non-empty list"):
            held_out_rows(table, "prometheus_vicuna", bad)


def test_verify_hhh_by_ranking_uses_the_hhh_rubrics(tiny_llama: Any) -> None:
    """--ranking on HHH: A and B graded 1-5 apart under their subset's HHH rubric (temperature 1.0 by
    default, the paper's), no order table; a tiny random model gives no grade: n = 0, never ranked."""
    from evalign.train.verify import dataset_table, verify_judge

    table = dataset_table("hhh")[0].head(3)
    judge = verify_judge("pairwise", "judge:x", table, VerifyOptions(ranking=True, max_rounds=2))
    assert judge.name == "prometheus_ranking" and judge.sampling["temperature"] == 1.0
    assert judge.rubric_column == "task" and judge.rubric_map["harmless"] == "hhh_harmlessness"
    model = str(tiny_llama(None))
    rep = verify_models("hhh", {"base": model},
                        VerifyOptions(limit=2, max_tokens=4, device="cpu", ranking=True, n_resamples=50))
    assert rep.orders is None and rep.kind == "pairwise"
    row = rep.table.set_index("judge").loc["base"]
    assert row["n"] == 0 and row["note"].startswith("n = 0: no parseable grade")
