"""The Alt-Test and the human ceiling inside an evaluation: ``evalign meta --alt-test --epsilon
--agreement``, ``meta_evaluate*(alt_test=, agreement=)``, run configs and the report give the same
figures as the pure functions on the same labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign import meta_evaluate, meta_evaluate_pairs
from evalign.cli import app
from evalign.datasets import load_dataset
from evalign.evaluate.annotators import verdict_labels
from evalign.evaluate.columns import verdict_array, verdict_codes
from evalign.meta.alt_test import AltTestSettings, alt_test_coded
from evalign.meta.ceiling import agreement_ceiling
from evalign.meta.resampling import Resampling

runner = CliRunner()
FAST = {"n_resamples": 100, "n_permutations": 50}


@pytest.fixture(scope="module")
def pandalm() -> object:
    return load_dataset("pandalm")


def _direct(ds: object, settings: AltTestSettings) -> dict:
    pairs = ds.pairs  # type: ignore[attr-defined]
    humans = pairs[ds.pref_columns].to_numpy(dtype=float)  # type: ignore[attr-defined]
    judges = {j: verdict_labels(verdict_array(*verdict_codes(pairs, j))) for j in ds.judge_columns}  # type: ignore[attr-defined]
    return alt_test_coded(humans, judges, annotators=ds.pref_columns, settings=settings, scoring="accuracy")  # type: ignore[attr-defined]


def test_pairs_api_equals_the_pure_functions(pandalm: object) -> None:
    s = AltTestSettings(epsilon=0.2)
    r = meta_evaluate_pairs(pandalm.pairs, pandalm.pref_columns, judges=pandalm.judge_columns,  # type: ignore[attr-defined]
                            alt_test=s, agreement="auto", **FAST)
    direct = _direct(pandalm, s)
    assert r.alt_test is not None and r.alt_test.judges == pandalm.judge_columns  # type: ignore[attr-defined]
    for j, d in direct.items():
        got = r.alt_test[j]
        assert (got.winning_rate, got.advantage_probability, got.n_items) == (d.winning_rate, d.advantage_probability,
                                                                           999)
        assert [a.p_value for a in got.annotators] == [a.p_value for a in d.annotators]
    # the same labels give the same ceiling (Cohen's kappa for preferences)
    pairs = pandalm.pairs  # type: ignore[attr-defined]
    codes = {j: verdict_labels(verdict_array(*verdict_codes(pairs, j))) for j in pandalm.judge_columns}  # type: ignore[attr-defined]
    c = agreement_ceiling(pairs[pandalm.pref_columns].to_numpy(dtype=float), codes, statistic="kappa",  # type: ignore[attr-defined]
                          resampling=Resampling(n_resamples=100, n_permutations=50))
    assert r.ceiling is not None and r.ceiling.statistic == "kappa"
    assert r.ceiling.ceiling == pytest.approx(c.ceiling, abs=1e-12)
    assert [j.value for j in r.ceiling.judges] == pytest.approx([j.value for j in c.judges], abs=1e-12)
    assert [j.verdict for j in r.ceiling.judges] == [j.verdict for j in c.judges]
    # the column group on the trust table: the judges' rows of group (all)
    rows = r.trust[0].rows
    gpt = rows[(rows["metric"] == "judge:gpt-3.5-turbo") & (rows["group"] == "(all)")].iloc[0]
    assert gpt["alt_winning_rate"] == direct["judge:gpt-3.5-turbo"].winning_rate
    assert gpt["alt_advantage"] == direct["judge:gpt-3.5-turbo"].advantage_probability
    assert gpt["kappa_with_humans"] == r.ceiling.judges[0].value
    assert rows.loc[rows["kind"] == "baseline", "alt_winning_rate"].isna().all()
    assert "alt_test" in r.to_json() and r.to_json()["alt_test"]["epsilon"] == 0.2


def _item_table(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(40):
        for system in ("s1", "s2", "s3"):
            truth = rng.integers(1, 6)
            a = [int(np.clip(truth + rng.integers(-1, 2), 1, 5)) for _ in range(3)]
            rows.append({"id": str(item), "system": system, "response": "x", "r1": a[0], "r2": a[1], "r3": a[2],
                         "human": float(np.mean(a)), "judge:good": float(truth),
                         "judge:coin": float(rng.integers(1, 6)), "judge:prob": float(rng.random())})
    return pd.DataFrame(rows)


def test_items_api_equals_the_pure_functions() -> None:
    df = _item_table()
    r = meta_evaluate(df, "human", judges=["judge:good", "judge:coin", "judge:prob"], annotators=["r1", "r2", "r3"],
                      alt_test=0.2, agreement="auto", **FAST)
    assert r.alt_test is not None and r.ceiling is not None
    # a probability is not on the annotators' 1-5 scale: left out, said so
    assert r.alt_test.judges == ["judge:good", "judge:coin"]
    assert any("judge:prob: not on the annotators' scale" in n for n in r.alt_test.notes)
    cells = df.sort_values(["system", "id"], key=lambda s: s if s.name == "system" else s.astype(int))
    humans = cells[["r1", "r2", "r3"]].to_numpy(dtype=float)
    judges = {j: cells[j].to_numpy(dtype=float) for j in ("judge:good", "judge:coin")}
    direct = alt_test_coded(humans, judges, annotators=["r1", "r2", "r3"], settings=AltTestSettings(epsilon=0.2),
                            scoring="neg_rmse")
    for j, d in direct.items():
        assert (r.alt_test[j].winning_rate, r.alt_test[j].advantage_probability) == (d.winning_rate,
                                                                                   d.advantage_probability)
    assert r.alt_test["judge:good"].scoring == "neg_rmse"
    c = agreement_ceiling(humans, judges, statistic="quadratic_kappa", units=cells["id"].to_numpy(),
                          resampling=Resampling(**FAST))
    assert r.ceiling.statistic == "quadratic_kappa"
    assert [j.value for j in r.ceiling.judges] == pytest.approx([j.value for j in c.judges], abs=1e-12)
    assert r.ceiling.judges[0].verdict == "above" and r.ceiling.judges[1].verdict == "below"


def test_cli_meta_states_epsilon_and_says_why_not() -> None:
    res = runner.invoke(app, ["meta", "--dataset", "pandalm", "--epsilon", "0.15", "--bootstrap", "50",
                              "--permutations", "20", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["alt_test"]["epsilon"] == 0.15 and out["alt_test"]["epsilon_source"] == "given"
    assert "ceiling" not in out
    res = runner.invoke(app, ["meta", "--dataset", "pandalm", "--alt-test", "--agreement", "--bootstrap", "50",
                              "--permutations", "20"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "Can these judges replace an annotator?" in text and "epsilon 0.15 (pandalm's annotators are skilled)" in text
    assert "human ceiling: the 3 annotators' mean Cohen's kappa" in text
    # LLMBar has one gold label per pair: no Alt-Test, and the notes say why
    res = runner.invoke(app, ["meta", "--dataset", "llmbar:natural", "-m", "judge:gpt-4/vanilla", "--alt-test",
                              "--bootstrap", "50", "--permutations", "20", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert "alt_test" not in out
    assert any("no Alt-Test: 1 annotator column (pref_1); the labels need at least 2" in n for n in out["notes"])
    res = runner.invoke(app, ["meta", "--dataset", "pandalm", "--epsilon", "1.5"])
    assert res.exit_code == 2 and "error: --epsilon must be a number in [0, 1), got 1.5" in " ".join(res.output.split())


def test_run_config_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("alt.yaml").write_text(
        "version: 1\nname: alt\nevaluations:\n  - name: p\n    data: {dataset: pandalm}\n"
        "    columns: ['judge:pandalm-7b']\n    meta:\n      alt_test: {epsilon: 0.15, q: 0.1}\n"
        "      agreement: auto\n      resampling: {n_resamples: 50, n_permutations: 20}\n", encoding="utf-8")
    res = runner.invoke(app, ["run", "alt.yaml", "-o", "out"])
    assert res.exit_code == 0, res.output
    ev = json.loads((tmp_path / "out" / "p" / "evaluation.json").read_text())
    assert ev["alt_test"]["epsilon"] == 0.15 and ev["alt_test"]["q"] == 0.1
    assert ev["ceiling"]["statistic"] == "kappa"
    table = (tmp_path / "out" / "tables" / "annotators.md").read_text()
    assert "judge:pandalm-7b" in table and "winning rate" in table and "vs ceiling" in table
    Path("bad.yaml").write_text(
        "version: 1\nname: bad\nevaluations:\n  - name: p\n    data: {dataset: pandalm}\n"
        "    columns: ['judge:pandalm-7b']\n    meta:\n      alt_test:\n        epsilon: 2\n", encoding="utf-8")
    res = runner.invoke(app, ["run", "bad.yaml", "--dry-run"])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "bad.yaml, line 9" in text and "must be a number in [0, 1), got 2" in text


def test_calibration_and_the_weighted_verdict(pandalm: object) -> None:
    from evalign.evaluate.calibrated import WEIGHTED
    from evalign.meta.agreement import majority_vote
    from evalign.meta.calibration import pairwise_calibration, weighted_preference_accuracy

    pairs = pandalm.pairs.copy()  # type: ignore[attr-defined]
    rng = np.random.default_rng(3)
    v = pairs["judge:pandalm-7b"]
    p = np.where(v == "A", 0.8, np.where(v == "B", 0.2, 0.5)) + rng.uniform(-0.15, 0.15, len(v))
    pairs["judge:pandalm-7b.p_a"] = p
    r = meta_evaluate_pairs(pairs, pandalm.pref_columns, judges=["judge:pandalm-7b", "judge:gpt-3.5-turbo"],  # type: ignore[attr-defined]
                            **FAST)
    labels = majority_vote(pairs[pandalm.pref_columns].to_numpy(dtype=float), fallback=0.0)  # type: ignore[attr-defined]
    assert [c.judge for c in r.calibration] == ["judge:pandalm-7b"]  # gpt-3.5 states no probability
    direct = pairwise_calibration(p, labels)
    got = r.calibration[0]
    assert (got.n, got.n_left_out) == (direct.n, direct.n_left_out)
    assert (got.ece, got.brier) == pytest.approx((direct.ece, direct.brier), abs=1e-12)
    rows = r.trust[0].rows
    row = rows[(rows["metric"] == "judge:pandalm-7b") & (rows["group"] == "(all)")].iloc[0]
    assert row[WEIGHTED] == pytest.approx(weighted_preference_accuracy(p, labels), abs=1e-12)
    assert np.isnan(rows.loc[rows["metric"] == "judge:gpt-3.5-turbo", WEIGHTED]).all()
    assert r.to_json()["calibration"][0]["binning"] == "10 equal-width bins on [0, 1], weighted by their counts"
