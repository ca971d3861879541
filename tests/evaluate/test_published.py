"""The cross-set table: its rows are what ``evalign meta --dataset NAME`` computes for each set's shipped
columns (the same values, intervals, baselines and Alt-Test), sets without columns are listed with why,
and ``evalign meta --published`` / ``evalign report --published`` render it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.evaluate.published import PublishedSettings, published_table
from evalign.meta.resampling import Resampling

runner = CliRunner()
RS = Resampling(n_resamples=100, n_permutations=50)


@pytest.fixture(scope="module")
def table() -> object:
    return published_table(PublishedSettings(resampling=RS, datasets=("pandalm", "hhh", "llmbar")))


def test_rows_are_what_meta_computes(table: object) -> None:
    res = runner.invoke(app, ["meta", "--dataset", "pandalm", "--alt-test", "--bootstrap", "100", "--permutations",
                              "50", "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout)
    rows = table.rows  # type: ignore[attr-defined]
    mine = rows[rows["set"] == "pandalm"].set_index("column")
    assert list(mine.index) == ["judge:gpt-3.5-turbo", "judge:pandalm-7b"]
    trust = {r["metric"]: r for r in meta["trust"][0]["rows"] if r["group"] == "(all)"}
    for col, row in mine.iterrows():
        t = trust[col]
        assert (row["value"], row["ci_low"], row["ci_high"]) == pytest.approx((t["value"], t["ci_low"], t["ci_high"]))
        assert row["beats_baselines"] == t["beats_baselines"] and row["n"] == 999
        assert row["best_baseline"] == "longer_is_better"
        assert row["best_baseline_value"] == pytest.approx(trust["longer_is_better"]["value"])
        alt = next(a for a in meta["alt_test"]["results"] if a["judge"] == col)
        assert row["alt_winning_rate"] == alt["winning_rate"] and row["alt_advantage"] == alt["advantage_probability"]
        assert row["epsilon"] == meta["alt_test"]["epsilon"]
    assert mine["rank"].tolist() == [1.0, 2.0] and set(mine["of"]) == {2}
    llmbar = rows[rows["set"] == "llmbar"]
    assert len(llmbar) == 65 and llmbar["alt_winning_rate"].isna().all()  # one gold label per pair: no Alt-Test
    assert llmbar["rank"].tolist() == list(range(1, 66))
    assert llmbar["value"].is_monotonic_decreasing


def test_sets_without_columns_are_listed(table: object) -> None:
    sets = table.sets.set_index("set")  # type: ignore[attr-defined]
    assert sets.loc["hhh", "status"] == "ships no judge or metric columns"
    assert sets.loc["pandalm", "status"] == "2 column(s) ranked" and sets.loc["pandalm", "annotators"] == 3


def test_cli_and_report(tmp_path: Path) -> None:
    res = runner.invoke(app, ["meta", "--published", "--dataset", "pandalm,hhh", "--top", "1", "--bootstrap", "100",
                              "--permutations", "50"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "pandalm: pref. acc., n 999, 2 column(s); best trivial baseline longer_is_better" in text
    assert "gpt-3.5-turbo" in text and "pandalm-7b" not in text.split("pandalm: pref. acc.")[1].split("hhh")[0]
    assert "hhh: ships no judge or metric columns" in text
    res = runner.invoke(app, ["meta", "--published", "-m", "bleu"])
    assert res.exit_code == 1 and "not with --metric" in res.output
    res = runner.invoke(app, ["meta", "--published", "--dataset", "pandalmm"])
    assert res.exit_code == 1 and "did you mean 'pandalm'" in res.output
    out = tmp_path / "p.html"
    res = runner.invoke(app, ["report", "--published", "--dataset", "pandalm", "--bootstrap", "50", "-o", str(out)])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "p_files" / "tables" / "published.md").read_text()
    assert "judge:gpt-3.5-turbo" in md and "Alt-Test win / adv." in md
