"""One answer everywhere (issue 20): the random baseline is right for the labels and says what it
is; a table whose metrics do not beat the baselines ranks nothing and says so under itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.evaluate import Column, EvalSpec, Human, Resampling, TrustRequest, evaluate
from evalign.evaluate.baselines import human_ties, random_accuracy

FAST = Resampling(n_resamples=50, n_permutations=50, seed=0)


def _row(result, name: str) -> pd.Series:
    return result.trust[0].for_group().set_index("metric").loc[name]


def _pairs(labels: list[float]) -> pd.DataFrame:
    n = len(labels)
    rng = np.random.default_rng(0)
    return pd.DataFrame({"id": [str(i) for i in range(n)], "instruction": ["q"] * n,
                         "response_a": ["x" * (i + 1) for i in range(n)], "response_b": ["y"] * n,
                         "pref_1": labels, "m_a": rng.random(n), "m_b": rng.random(n)})


def test_random_is_one_half_without_human_ties() -> None:
    # 6 A, 4 B, no tie: a coin flip between A and B is right on half of the pairs
    t = _pairs([1.0] * 6 + [-1.0] * 4)
    r = evaluate(EvalSpec(human=Human(pref_columns=("pref_1",)), columns=(Column("m"),), pairs=t, resampling=FAST,
                          min_group_size=1))
    rnd = _row(r, "random")
    assert rnd["value"] == 0.5 and rnd["preference_accuracy_no_ties"] == 0.5
    assert rnd["ci_low"] == rnd["ci_high"] == 0.5
    assert "A or B" in rnd["definition"] and "1/2" in rnd["definition"]
    assert _row(r, "always_a")["value"] == 0.6 and _row(r, "always_tie")["value"] == 0.0
    assert _row(r, "always_a")["definition"] == "always prefers response A"
    assert pd.isna(_row(r, "m")["definition"])


def test_random_is_one_third_with_a_human_tie() -> None:
    t = _pairs([1.0] * 6 + [-1.0] * 3 + [0.0])
    r = evaluate(EvalSpec(human=Human(pref_columns=("pref_1",)), columns=(Column("m"),), pairs=t, resampling=FAST,
                          min_group_size=1))
    rnd = _row(r, "random")
    assert rnd["value"] == pytest.approx(1 / 3) and rnd["preference_accuracy_no_ties"] == pytest.approx(1 / 3)
    assert "A, B or tie" in rnd["definition"]


def test_human_ties_by_grouping() -> None:
    # systems x items; no two systems share a rating within an item, but item 0 and 1 share values
    h = np.array([[1.0, 2.0], [2.0, 3.0], [3.0, 1.0]])
    assert not human_ties(h, level="item", grouping="item", is_pairs=False)
    assert human_ties(h, level="item", grouping="none", is_pairs=False)
    assert not human_ties(h, level="item", grouping="system", is_pairs=False)
    # system means 1.5, 2.5, 2.0: no tie; make two equal
    assert not human_ties(h, level="system", grouping="none", is_pairs=False)
    assert human_ties(np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]), level="system", grouping="none", is_pairs=False)
    # pairs: majority of three annotators, no majority = tie
    assert human_ties(np.array([[1.0, 1.0], [-1.0, 1.0], [0.0, 1.0]]), level="item", grouping="item", is_pairs=True)
    assert not human_ties(np.array([[1.0, -1.0], [1.0, -1.0], [0.0, 1.0]]), level="item", grouping="item",
                          is_pairs=True)
    assert random_accuracy(True) == 1 / 3 and random_accuracy(False) == 0.5


def test_item_random_without_ties_within_items() -> None:
    # 3 systems x 4 items, distinct ratings within each item: pairwise accuracy within items
    rng = np.random.default_rng(1)
    rows = [{"id": f"i{j}", "system": f"s{s}", "response": "r" * (s + 1), "h": float((s + j) % 3),
             "m": float(rng.random())} for s in range(3) for j in range(4)]
    r = evaluate(EvalSpec(human=Human(column="h"), columns=(Column("m"),), items=pd.DataFrame(rows),
                          trust=(TrustRequest("pairwise_accuracy", "item", "item"),), resampling=FAST,
                          min_group_size=1))
    assert _row(r, "random")["value"] == 0.5
    assert _row(r, "always_tie")["value"] == 0.0
    assert _row(r, "random")["kendall"] == 0.0


def test_pandalm_random_is_one_third() -> None:
    from evalign.datasets import load_dataset

    ds = load_dataset("pandalm")
    cols = tuple(Column(j, "judge", verdict=True) for j in ds.judge_columns)
    r = evaluate(EvalSpec(human=Human(pref_columns=tuple(ds.pref_columns)), columns=cols, pairs=ds.pairs,
                          resampling=FAST))
    assert _row(r, "random")["value"] == pytest.approx(1 / 3)
    assert "A, B or tie" in _row(r, "random")["definition"]
    rows = {x["metric"]: x for x in r.to_json()["trust"][0]["rows"]}
    assert rows["random"]["definition"] == _row(r, "random")["definition"] and rows["always_tie"]["definition"]


def test_llmbar_random_is_one_half_in_meta(tmp_path: Path, shared_data_dir: Path) -> None:
    """LLMBar has no human tie: `evalign meta` on its pairs with a judge column (the longer response
    wins; LLMBar has no references for a metric) shows random = 0.5 with its definition."""
    runner = CliRunner()
    out = tmp_path / "pairs.jsonl"
    res = runner.invoke(app, ["datasets", "export", "llmbar:natural", "--data-dir", str(shared_data_dir),
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    pairs = pd.read_json(out, lines=True, dtype=False)
    la, lb = pairs["response_a"].str.len(), pairs["response_b"].str.len()
    pairs["judge:longer"] = ["A" if a > b else "B" if b > a else "tie" for a, b in zip(la, lb, strict=True)]
    pairs.to_json(tmp_path / "judged.jsonl", orient="records", lines=True)
    args = ["meta", str(tmp_path / "judged.jsonl"), "-m", "judge:longer", "--pref", "pref_1", "--bootstrap", "50",
            "--permutations", "50"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["metric"]: r for r in json.loads(res.stdout)["trust"][0]["rows"]}
    assert rows["random"]["value"] == 0.5
    assert rows["random"]["definition"].startswith("uniform random choice of A or B")
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "baseline random: uniform random choice of A or B" in res.output


def test_tulu1_acceptability_ranks_nothing_and_says_so_under_its_table(shared_data_dir: Path) -> None:
    """Tulu-1 acceptability: the metrics call almost every pair a tie and do not beat the baselines:
    no rank or cluster, the headline above the table, the warning (statistic and the baseline's
    value in that table) directly under it."""
    args = ["meta", "--dataset", "tulu1", "--data-dir", str(shared_data_dir), "--human", "acceptable",
            "-m", "bleu", "-m", "chrf", "-m", "rouge_l", "--bootstrap", "100", "--permutations", "100"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    t = json.loads(res.stdout)["trust"][0]
    main = [r for r in t["rows"] if r["group"] == "(all)"]
    assert all(r["rank"] is None and r["cluster"] is None for r in main)
    assert {r["metric"]: r["beats_baselines"] for r in main if r["kind"] == "metric"} == dict.fromkeys(
        ["bleu", "chrf", "rouge_l"], False)
    best = max((r for r in main if r["kind"] == "baseline" and r["metric"] != "human_ceiling"),
               key=lambda r: r["value"])
    assert t["headline"] == (f"No answer: no metric or judge beats the best trivial baseline on pairwise_accuracy "
                             f"({best['metric']} = {best['value']:.3f}); ranks and clusters withheld")
    (warning,) = t["warnings"]  # chrF and ROUGE-L tie to 1e-16: their order is not the point
    names, _, rest = warning.partition(" do not beat ")
    assert sorted(names.split(", ")) == ["bleu", "chrf", "rouge_l"]
    assert rest == (f"the best trivial baseline on pairwise_accuracy ({best['metric']} = {best['value']:.3f}) "
                    "significantly at alpha 0.05")
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    head = lines.index(t["headline"])
    assert lines[head + 1].startswith("Which metric or judge to trust")
    ranked = [ln for ln in lines[head:] if ln.startswith("│") and ("metric" in ln or "baseline" in ln)]
    assert ranked and all(ln.split("│")[1].strip() == "-" for ln in ranked)
    warn = next(i for i, ln in enumerate(lines) if ln.startswith(f"warning: {names} do not beat"))
    # directly under its table: after it only the continuation of the same table and its legend
    between = lines[head:warn]
    assert all(not ln.startswith(("warning:", "Agreement", "Missing")) for ln in between)
    assert lines[warn - 1].startswith("baseline ")
    assert warn > max(i for i, ln in enumerate(lines) if ln.startswith("└"))


def test_a_metric_that_beats_the_baselines_keeps_its_rank() -> None:
    t = _pairs([1.0] * 30 + [-1.0] * 30)
    t["m_a"] = np.r_[np.ones(30), np.zeros(30)]
    t["m_b"] = np.r_[np.zeros(30), np.ones(30)]
    r = evaluate(EvalSpec(human=Human(pref_columns=("pref_1",)), columns=(Column("m"),), pairs=t, resampling=FAST))
    assert _row(r, "m")["rank"] == 1 and _row(r, "m")["beats_baselines"] is True
    assert r.trust[0].headline is None and r.trust[0].warnings == ()


def test_report_shows_the_headline_and_warning_under_its_table() -> None:
    from evalign.report import build_report
    from evalign.report.assemble import from_results

    t = _pairs([0.0] * 3 + [1.0] * 4 + [-1.0] * 3)
    r = evaluate(EvalSpec(human=Human(pref_columns=("pref_1",)), columns=(Column("m"),), pairs=t, resampling=FAST,
                          min_group_size=1))
    table = r.trust[0]
    assert table.headline and table.warnings
    page = build_report(from_results([r], pairs=t)).html
    section = page[page.index('<section id="pair_accuracy">'):]
    section = section[:section.index("</section>")]
    after_table = section[section.index("</table>"):]
    notes = after_table[:after_table.index("<figure") if "<figure" in after_table else None]
    assert '<ul class="note warn">' in notes and table.headline in notes
    assert f"warning: {table.warnings[0]}" in notes
    assert "random: uniform random choice of A, B or tie" in notes
    # not repeated among the notes at the end of the page
    assert page.count(table.warnings[0]) == 1
    assert "definition" not in section[:section.index("</table>")]


def test_one_call_api_equals_the_command_line() -> None:
    import evalign

    data = evalign.load_dataset("self_instruct")
    r = evalign.meta_evaluate(data.items, human=data.system_human, human_lower_is_better=True,
                              metrics=["bleu", "rouge_l"], n_resamples=50, n_permutations=50)
    res = CliRunner().invoke(app, ["meta", "--dataset", "self_instruct", "-m", "bleu", "-m", "rouge_l",
                                   "--bootstrap", "50", "--permutations", "50", "--json"])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)["trust"][0]["rows"]
    api = r.to_pandas()
    assert list(api["metric"]) == [x["metric"] for x in cli]
    assert api["value"].tolist() == pytest.approx([x["value"] for x in cli])
    assert {c["name"]: c["system_level"] for c in r.columns} == {"bleu": "corpus", "rouge_l": "mean"}
    t = r.trust[0]
    assert t.table is t.rows and r.to_pandas().equals(t.rows) and r.to_json()["trust"][0]["rows"]


def test_one_call_pairs_api_on_a_dataframe() -> None:
    import evalign

    t = _pairs([1.0] * 30 + [-1.0] * 30)
    t["judge:perfect"] = ["A"] * 30 + ["B"] * 30
    r = evalign.meta_evaluate_pairs(t, prefs="pref_1", metrics=["m"], judges=["judge:perfect"], n_resamples=50,
                                    n_permutations=50)
    ranking = r.to_pandas().set_index("metric")
    assert ranking.loc["judge:perfect", "value"] == 1.0 and ranking.loc["judge:perfect", "rank"] == 1
    assert ranking.loc["judge:perfect", "kind"] == "judge" and ranking.loc["random", "value"] == 0.5
    t["J"] = t["judge:perfect"]  # issue 32: any verdict column given as a judge, whatever its name
    named = evalign.meta_evaluate_pairs(t, prefs="pref_1", judges=["J"], n_resamples=50, n_permutations=50)
    assert named.to_pandas().set_index("metric").loc["J", "value"] == 1.0
    with pytest.raises(evalign.InputError, match="neither a judge's verdict column"):
        evalign.meta_evaluate_pairs(t, prefs="pref_1", metrics=["J"], n_resamples=50, n_permutations=50)


def test_public_names_and_ranking_aliases() -> None:
    import evalign
    from evalign.meta.trust import TrustReport

    assert {"load_dataset", "meta_evaluate", "meta_evaluate_pairs", "EvalResult"} <= set(evalign.__all__)
    assert set(evalign.__all__) <= set(dir(evalign))
    for name in evalign.__all__:
        assert getattr(evalign, name) is not None
    rep = TrustReport(table=pd.DataFrame({"metric": ["a"]}), groups=pd.DataFrame(), statistic="kendall",
                      level="system", confidence=0.95, alpha=0.05, n_resamples=1, n_permutations=1, seed=0)
    assert rep.rows is rep.table and rep.to_pandas().equals(rep.table)
