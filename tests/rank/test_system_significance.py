"""System-vs-system significance against sacrebleu's own paired bootstrap and approximate
randomization (``sacrebleu.significance.PairedTest``, same seed), and through ``evalign score``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.datasets import load_dataset
from evalign.io import write_table
from evalign.metrics.base import get_metric
from evalign.rank.system_significance import (
    MetricStatistics,
    SignificanceSettings,
    compare_systems,
    estimate_ci,
    mean_score_fn,
    table_statistics,
)

SYSTEMS = ["text-davinci-002", "text-davinci-001", "text-davinci-003", "davinci-self-instruct"]
N_ITEMS = 40  # few items, so that the p-values are neither all minimal nor all 1


@pytest.fixture(scope="module")
def items() -> pd.DataFrame:
    df = load_dataset("self_instruct").items
    assert df is not None
    ids = sorted(df["id"].unique())[:N_ITEMS]
    return df[df["id"].isin(ids) & df["system"].isin(SYSTEMS)].reset_index(drop=True)


def _sacrebleu(items: pd.DataFrame, metric: object, test_type: str) -> dict[str, object]:
    by = {s: items[items["system"] == s].set_index("id") for s in SYSTEMS}
    ids = list(by[SYSTEMS[0]].index)
    refs = [[by[SYSTEMS[0]].at[i, "reference"] for i in ids]]
    named = [(s, [by[s].at[i, "response"] for i in ids]) for s in SYSTEMS]
    _, scores = PairedTest(named, {"m": metric}, refs, test_type=test_type)()
    (key,) = [k for k in scores if k != "System"]
    return dict(zip(scores["System"], scores[key], strict=True))


@pytest.mark.parametrize(("name", "peer"), [("bleu", BLEU()), ("chrf", CHRF())])
def test_paired_bootstrap_equals_sacrebleu(items: pd.DataFrame, name: str, peer: object) -> None:
    ts = table_statistics(items, get_metric(name), SYSTEMS)
    assert ts.n_dropped == 0 and len(ts.ids) == N_ITEMS
    ours = {r.system: r for r in compare_systems(ts.statistics, baseline=SYSTEMS[0])}
    theirs = _sacrebleu(items, peer, "bs")
    assert theirs[SYSTEMS[0]].score == pytest.approx(next(iter(ours.values())).baseline_score, abs=1e-12)
    assert theirs[SYSTEMS[0]].mean == pytest.approx(next(iter(ours.values())).baseline_mean, abs=1e-9)
    assert theirs[SYSTEMS[0]].ci == pytest.approx(next(iter(ours.values())).baseline_ci, abs=1e-9)
    ps = []
    for s in SYSTEMS[1:]:
        assert ours[s].score == pytest.approx(theirs[s].score, abs=1e-12)
        assert ours[s].bootstrap_p == theirs[s].p_value
        assert ours[s].mean == pytest.approx(theirs[s].mean, abs=1e-9)
        assert ours[s].ci == pytest.approx(theirs[s].ci, abs=1e-9)
        ps.append(ours[s].bootstrap_p)
    assert max(ps) > 0.05 and min(ps) < 0.5  # a non-trivial case: not every p at its floor


def test_approximate_randomization_equals_sacrebleu(items: pd.DataFrame) -> None:
    ts = table_statistics(items, get_metric("bleu"), SYSTEMS)
    ours = {r.system: r for r in compare_systems(ts.statistics, baseline=SYSTEMS[0])}
    theirs = _sacrebleu(items, BLEU(), "ar")
    for s in SYSTEMS[1:]:
        assert ours[s].ar_p == theirs[s].p_value
    assert len({round(r.ar_p, 6) for r in ours.values()}) > 1


def test_corpus_score_is_evalign_system_bleu(items: pd.DataFrame) -> None:
    from evalign.scoring import system_scores

    m = get_metric("bleu")
    ts = table_statistics(items, m, SYSTEMS)
    res = compare_systems(ts.statistics, baseline=SYSTEMS[0])
    sys_df = system_scores(items, [m]).set_index("system")["bleu"]
    assert res[0].baseline_score == pytest.approx(sys_df[SYSTEMS[0]], abs=1e-9)
    for r in res:
        assert r.score == pytest.approx(sys_df[r.system], abs=1e-9)


def test_mean_metric_bootstrap_by_hand() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(25), rng.random(25) + 0.1
    ms = MetricStatistics("x", {"a": np.column_stack([a, np.ones(25)]), "b": np.column_stack([b, np.ones(25)])},
                          mean_score_fn)
    (r,) = compare_systems(ms, baseline="a", settings=SignificanceSettings(n_bootstrap=500, n_ar=700, seed=11))
    idx = np.random.default_rng(11).choice(25, size=(500, 25), replace=True)
    sa, sb = a[idx].mean(axis=1), b[idx].mean(axis=1)
    d = np.abs(sb - sa)
    obs = abs(b.mean() - a.mean())
    assert r.bootstrap_p == (np.sum(d - d.mean() > obs) + 1) / 501
    sw = np.random.default_rng(11).integers(2, size=(700, 25), dtype=bool)
    pa = np.where(sw, a, b).mean(axis=1)
    pb = np.where(sw, b, a).mean(axis=1)
    assert r.ar_p == (np.sum(np.abs(pa - pb) > obs) + 1) / 701
    assert (r.mean, r.ci) == pytest.approx(estimate_ci(sb))
    assert r.score == pytest.approx(b.mean()) and r.baseline_score == pytest.approx(a.mean())


def test_system_against_a_copy_of_itself_is_never_significant(items: pd.DataFrame) -> None:
    v = np.column_stack([np.linspace(0, 1, 30), np.ones(30)])
    (r,) = compare_systems(MetricStatistics("x", {"a": v, "b": v.copy()}, mean_score_fn))
    assert r.bootstrap_p == 1.0 and r.ar_p == 1.0
    # the one departure from sacrebleu, whose strict ">" gives a copy its smallest p-value
    copy = items[items["system"] == SYSTEMS[0]].assign(system="copy")
    both = pd.concat([items[items["system"] == SYSTEMS[0]], copy], ignore_index=True)
    (r,) = compare_systems(table_statistics(both, get_metric("bleu"), [SYSTEMS[0], "copy"]).statistics)
    assert r.bootstrap_p == 1.0 and r.ar_p == 1.0 and r.difference == 0.0
    hyps = copy["response"].tolist()
    _, theirs = PairedTest([("a", hyps), ("b", list(hyps))], {"m": BLEU()}, [copy["reference"].tolist()], test_type="bs")()
    assert theirs["BLEU"][1].p_value == 1 / 1001


def test_all_pairs_and_missing_items(items: pd.DataFrame) -> None:
    m = get_metric("rouge_l")
    from evalign.scoring import score

    scored, _ = score(items, [m])
    drop = scored[(scored["system"] == SYSTEMS[1]) & (scored["id"] == scored["id"].iloc[0])].index
    ts = table_statistics(scored.drop(index=drop), m, SYSTEMS)
    assert ts.n_dropped == 1 and len(ts.ids) == N_ITEMS - 1
    res = compare_systems(ts.statistics, all_pairs=True, settings=SignificanceSettings(n_bootstrap=50, n_ar=50))
    assert [(r.baseline, r.system) for r in res] == [
        (SYSTEMS[i], SYSTEMS[j]) for i in range(4) for j in range(i + 1, 4)
    ]


runner = CliRunner()


def test_score_cli_significance(items: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    write_table(items, path)
    res = runner.invoke(app, ["score", str(path), "-m", "bleu", "--significance", "--baseline-system", SYSTEMS[0],
                              "--json"])
    assert res.exit_code == 0, res.output
    sig = json.loads(res.stdout)["significance"]
    rows = sig["metrics"]["bleu"]["comparisons"]
    theirs = _sacrebleu(items, BLEU(), "bs")
    assert sorted(r["system"] for r in rows) == sorted(SYSTEMS[1:])  # sorted; each test starts from the seed
    assert {r["system"]: r["bootstrap_p"] for r in rows} == {s: theirs[s].p_value for s in SYSTEMS[1:]}
    assert sig["n_bootstrap"] == 1000 and sig["n_ar_trials"] == 10000 and sig["seed"] == 12345

    res = runner.invoke(app, ["score", str(path), "-m", "rouge_l", "--significance", "--all-pairs"])
    assert res.exit_code == 0, res.output
    assert res.stdout.count("p_bs") == 6 and res.stdout.count("p_ar") == 6

    res = runner.invoke(app, ["score", str(path), "-m", "bleu", "--significance", "--baseline-system", "nope"])
    assert res.exit_code == 1
    assert "'nope' is not a system" in res.output
