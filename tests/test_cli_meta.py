"""``evalign meta`` end to end: bundled datasets, scored files, system-level human files, errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app, main
from evalign.io import write_table
from evalign.meta.correlation import correlation, system_means
from evalign.meta.pairwise import pairwise_accuracy, pairwise_preference_accuracy

runner = CliRunner()


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def self_instruct_scored() -> pd.DataFrame:
    from evalign.datasets import load_dataset
    from evalign.scoring import score

    return score(load_dataset("self_instruct").items, ["rouge_l"])[0]


def test_self_instruct_system_ranking(self_instruct_scored: pd.DataFrame) -> None:
    out = _json(["meta", "--dataset", "self_instruct", "-m", "rouge_l", "--bootstrap", "50",
                 "--permutations", "20", "--json"])
    assert out["mode"] == "items" and out["n_systems"] == 8 and out["n_items"] == 252
    from evalign.datasets import load_dataset

    ranks = load_dataset("self_instruct").system_human
    systems = sorted(ranks)
    wide = self_instruct_scored.pivot(index="system", columns="id", values="rouge_l").loc[systems].to_numpy()
    human = -np.array([ranks[s] for s in systems])  # rank 1 = best
    ref = correlation(human, system_means(wide), "kendall", "system").value
    corr = out["overview"][0]
    assert corr["metric"] == "rouge_l"
    assert corr["system_kendall"] == pytest.approx(ref)
    row = next(r for r in out["trust"][0]["rows"] if r["metric"] == "rouge_l")
    assert row["kind"] == "metric" and row["rank"] == 1 and row["value"] == pytest.approx(ref)
    assert row["ci_low"] <= row["value"] <= row["ci_high"]
    assert row["s_per_1000"] > 0  # measured in this run
    assert out["systems"][0]["system"] == "text-davinci-003"  # human rank 3 = best of the 8


def test_pandalm_dataset_works() -> None:
    out = _json(["meta", "--dataset", "pandalm", "-m", "rouge_l", "--bootstrap", "30", "--permutations", "20",
                 "--json"])
    assert out["mode"] == "pairs" and out["n_items"] == 999
    from evalign.datasets import load_dataset, pairs_to_items
    from evalign.meta.breakdown import pair_scores
    from evalign.scoring import score

    ds = load_dataset("pandalm")
    scored = score(pairs_to_items(ds.pairs), ["rouge_l"])[0]
    pairs = pair_scores(ds.pairs, scored, ["rouge_l"])
    ref = pairwise_preference_accuracy(pairs[ds.pref_columns].to_numpy(), pairs["rouge_l_a"], pairs["rouge_l_b"])
    rows = {r["metric"]: r for r in out["trust"][0]["rows"]}
    assert rows["rouge_l"]["value"] == pytest.approx(ref.accuracy_with_ties)
    assert out["overview"][0]["epsilon"] == pytest.approx(ref.epsilon)
    assert {"always_tie", "always_a", "always_b", "random", "longer_is_better", "human_ceiling"} <= set(rows)
    assert rows["always_tie"]["value"] == pytest.approx(105 / 999)  # majority ties of the 999 pairs
    assert out["signature"]["statistic"] == "preference_accuracy" and out["signature"]["seed"] == 0


def _item_file(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    n_sys, n_items = 4, 30
    h = rng.integers(1, 6, size=(n_sys, n_items)).astype(float)
    m = np.round(h + rng.normal(size=h.shape), 1)
    rows = [{"id": f"i{j}", "system": f"s{i}", "response": "x", "reference": "y", "rating": h[i, j],
             "score": m[i, j], "kind": "long" if j < 12 else "short"}
            for j in range(n_items) for i in range(n_sys)]
    path = tmp_path / "items.jsonl"
    write_table(pd.DataFrame(rows), path)
    return path, h, m


def test_item_file_with_breakdown(tmp_path: Path) -> None:
    path, h, m = _item_file(tmp_path)
    out = _json(["meta", str(path), "--human", "rating", "--metric", "score", "--by", "kind", "--grouping", "item",
                 "--bootstrap", "40", "--permutations", "20", "--min-group-size", "15", "--json"])
    corr = out["overview"][0]
    assert corr["pairwise_accuracy"] == pytest.approx(pairwise_accuracy(h, m, grouping="item").accuracy)
    assert corr["item_kendall"] == pytest.approx(correlation(h, m, "kendall", "item", "item").value)
    bd = pd.DataFrame(out["breakdown"]["rows"]).set_index("group")
    assert bd.loc["long", "status"] == "too small" and bd.loc["long", "n"] == 12
    eps = corr["epsilon"]
    ref = pairwise_accuracy(h[:, 12:], m[:, 12:], grouping="item", epsilon=eps).accuracy
    assert bd.loc["short", "value"] == pytest.approx(ref)
    assert {g["group"]: g["status"] for g in out["trust"][0]["groups"]} == {"(all)": "ok", "long": "too small",
                                                                         "short": "ok"}
    # the terminal output ends with the trust table
    res = runner.invoke(app, ["meta", str(path), "--human", "rating", "--metric", "score", "--bootstrap", "20",
                              "--permutations", "10"])
    assert res.exit_code == 0
    assert "Which metric or judge to trust" in res.stdout
    assert res.stdout.rstrip().endswith("┘")  # it ends with the trust table


def test_system_human_file_lower_is_better(tmp_path: Path) -> None:
    path, _, m = _item_file(tmp_path)
    ranks = {"s0": 2, "s1": 1, "s2": 4, "s3": 3}
    sh = tmp_path / "ranks.json"
    sh.write_text(json.dumps(ranks))
    out = _json(["meta", str(path), "--system-human", str(sh), "--lower-is-better", "-m", "score",
                 "--bootstrap", "20", "--permutations", "10", "--json"])
    ref = correlation(-np.array([2.0, 1, 4, 3]), system_means(m), "spearman", "system").value
    assert out["overview"][0]["system_spearman"] == pytest.approx(ref)
    assert out["trust"][0]["level"] == "system"


def test_errors_are_one_line_and_name_the_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path, _, _ = _item_file(tmp_path)
    for args, needle in (
        (["--human", "rating", "--metric", "nope"], "'nope'"),
        (["--human", "ratin", "--metric", "score"], "'ratin'"),
        (["--metric", "score"], "--human"),
        (["--human", "rating", "--metric", "score", "--grouping", "pairs"], "--grouping"),
    ):
        res = runner.invoke(app, ["meta", str(path), *args])
        assert res.exit_code == 1, res.output
        assert needle in res.output and "Traceback" not in res.output
    monkeypatch.setattr(sys, "argv", ["evalign", "meta", str(path), "--human", "rating", "-m", "nope"])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "'nope'" in err and len(err.splitlines()) == 1


def test_llmbar_without_references_exits_1_with_the_reason() -> None:
    res = runner.invoke(app, ["meta", "--dataset", "llmbar", "-m", "rouge_l"])
    assert res.exit_code == 1
    assert ("LLMBar has no reference answers: reference-based metrics cannot be computed; judge it with "
            "`evalign judge` first") in " ".join(res.output.split())
    assert "Traceback" not in res.output and "rank" not in res.stdout


def test_tulu_shows_baselines_and_says_which_metrics_do_not_beat_them(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    monkeypatch.setenv("EVALIGN_DATA_DIR", str(shared))
    res = runner.invoke(app, ["meta", "--dataset", "tulu1", "--human", "acceptable", "-m", "rouge_l", "--bootstrap",
                              "50", "--permutations", "50"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    for name in ("always_tie", "random", "longer_is_better", "human_ceiling"):
        assert name in res.stdout
    text = " ".join(res.output.split())
    assert "rouge_l does not beat the best trivial baseline" in text
    assert "rouge_l calls 99.4% of pairs ties" in text


def test_llmbar_ranks_its_shipped_judges_by_default_and_a_glob_selects_them() -> None:
    from evalign.datasets.llmbar_verdicts import judge_columns

    fast = ["--bootstrap", "30", "--permutations", "30", "--json"]
    every = _json(["meta", "--dataset", "llmbar:natural", *fast])
    rows = [r for r in every["trust"][0]["rows"] if r["group"] == "(all)"]
    judges = [r for r in rows if r["kind"] == "judge"]
    assert sorted(r["metric"] for r in judges) == sorted(judge_columns(["Natural"])) and len(judges) == 65
    assert {r["metric"] for r in rows if r["kind"] == "baseline"} >= {"always_a", "always_b", "random"}
    gpt4 = {r["metric"]: r for r in judges if r["metric"].startswith("judge:gpt-4/")}
    # GPT-4 Vanilla on Natural: upstream reports 95.5 (the mean of the two orders); both orders right 93
    v = gpt4["judge:gpt-4/vanilla"]
    assert (v["accuracy_mean"], v["value"], v["accuracy_both"]) == (pytest.approx(0.955), 0.93, 0.93)
    assert all(r["cluster"] is not None and r["ci_low"] <= r["value"] <= r["ci_high"] for r in judges)
    picked = _json(["meta", "--dataset", "llmbar:natural", "-m", "judge:gpt-4/*", *fast])
    names = [r["metric"] for r in picked["trust"][0]["rows"] if r["kind"] == "judge"]
    assert sorted(names) == sorted(gpt4) and len(names) == 15
    assert [r["value"] for r in picked["trust"][0]["rows"] if r["metric"] == "judge:gpt-4/vanilla"] == [0.93]
    res = runner.invoke(app, ["meta", "--dataset", "llmbar:natural", "-m", "judge:gpt-5/*"])
    assert res.exit_code == 1 and "'judge:gpt-5/*' matches no judge column" in " ".join(res.output.split())


def test_a_dataset_without_judge_columns_still_needs_metric() -> None:
    res = runner.invoke(app, ["meta", "--dataset", "hhh"])
    assert res.exit_code == 1
    assert "with --metric (the dataset ships no judge columns)" in " ".join(res.output.split())
