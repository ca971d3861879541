"""Panels over judged columns: `meta --panel` (a trust-table row beside its members, accepted by
`meta --selective` with its vote confidence), `leaderboard --panel NAME=...` with --panel-tie / --panel-min,
a bench config's mapping form, and the panel options' usage errors (exit 2, one line, named)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.bench.config import read_bench_config
from evalign.cli import app

runner = CliRunner()


def _pair_table(n: int = 90, seed: int = 1) -> pd.DataFrame:
    """n pairs with a human label and three judges of accuracies 0.9, 0.7, 0.6 (verdict A or B)."""
    rng = np.random.default_rng(seed)
    truth = rng.choice([1, -1], n)
    rows = {"id": [str(i) for i in range(n)], "system_a": ["x"] * n, "system_b": ["y"] * n,
            "instruction": ["q"] * n, "response_a": ["a"] * n, "response_b": ["b"] * n, "pref_1": truth}
    for name, acc in (("judge:j1", 0.9), ("judge:j2", 0.7), ("judge:j3", 0.6)):
        right = rng.random(n) < acc
        rows[name] = np.where(right == (truth == 1), "A", "B")
    t = pd.DataFrame(rows)
    t.loc[3, "judge:j2"] = "unparseable"  # a failing member never fails the panel
    return t


def test_meta_panel_is_a_row_beside_its_members_and_selective_takes_it(tmp_path: Path) -> None:
    t = _pair_table()
    f = tmp_path / "pairs.jsonl"
    t.to_json(f, orient="records", lines=True)
    votes = t[["judge:j1", "judge:j2", "judge:j3"]].replace({"A": 1.0, "B": -1.0, "unparseable": np.nan})
    votes = votes.to_numpy(float)
    n_a, n_b = (votes == 1).sum(axis=1), (votes == -1).sum(axis=1)
    majority = np.where(n_a > n_b, 1, np.where(n_b > n_a, -1, 0))
    share = np.maximum(n_a, n_b) / (n_a + n_b)
    res = runner.invoke(app, ["meta", str(f), "--pref", "pref_1", "-m", "judge:j1", "--panel",
                              "poll=judge:j1,judge:j2,judge:j3", "--bootstrap", "20", "--permutations", "20", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    acc = float(np.mean(majority == t["pref_1"].to_numpy()))
    rows = {r["metric"]: r for r in out["trust"][0]["rows"]}
    assert {"judge:j1", "judge:j2", "judge:j3", "poll"} <= set(rows)  # the panel is a row beside its members
    assert rows["poll"]["value"] == pytest.approx(acc, abs=1e-12)
    assert rows["poll"]["ci_low"] <= acc <= rows["poll"]["ci_high"]  # the same intervals and paired tests
    assert rows["poll"]["p_vs_best"] is not None or rows["poll"]["rank"] == 1.0
    sel = runner.invoke(app, ["meta", str(f), "--pref", "pref_1", "--panel", "poll=judge:j1,judge:j2,judge:j3",
                              "--selective", "--risk", "0.3", "--json"])
    assert sel.exit_code == 0, sel.output
    report = json.loads(sel.stdout)["selective"]
    (row,) = [r for r in report["rows"] if r["judge"] == "poll"]
    assert row["n"] == len(t)  # every pair has a panel verdict and a confidence
    assert set(report["refused"]) == {"judge:j1", "judge:j2", "judge:j3"}  # the members have no confidence alone
    kept = share >= row["threshold"]
    assert row["coverage"] == pytest.approx(kept.mean(), abs=1e-12)
    assert row["selective_accuracy"] == pytest.approx(float(np.mean((majority == t["pref_1"].to_numpy())[kept])),
                                                      abs=1e-12)


def test_meta_panel_errors_are_usage_errors(tmp_path: Path) -> None:
    f = tmp_path / "pairs.jsonl"
    _pair_table().to_json(f, orient="records", lines=True)
    for args, msg in ((["--panel-tie", "first"], "--panel-tie go with --panel"),
                      (["--panel", "poll=judge:j1,judge:j2", "--panel-rule", "vote"], "--panel-rule must be one of"),
                      (["--panel", "poll=judge:j1,judge:nope"], "--panel poll: no judge column judge:nope"),
                      (["--panel", "poll=judge:j1,judge:j2", "--panel-rule", "weighted"], "--panel-calibration"),
                      (["--panel", "poll=judge:j1,judge:j2", "--panel-min", "0"], "--panel-min must be an integer")):
        res = runner.invoke(app, ["meta", str(f), "--pref", "pref_1", *args])
        assert res.exit_code == 2, res.output
        assert msg in res.output and res.output.count("error:") == 1


def test_meta_weighted_panel_takes_its_weights_from_the_calibration_file(tmp_path: Path) -> None:
    t, cal = _pair_table(seed=1), _pair_table(seed=2)
    f, c = tmp_path / "pairs.jsonl", tmp_path / "cal.csv"
    t.to_json(f, orient="records", lines=True)
    cal.rename(columns={"pref_1": "label"}).to_csv(c, index=False)
    res = runner.invoke(app, ["meta", str(f), "--pref", "pref_1", "--panel", "w=judge:j1,judge:j2,judge:j3",
                              "--panel-rule", "weighted", "--panel-calibration", str(c), "--selective", "--risk", "0.3",
                              "--json"])
    assert res.exit_code == 0, res.output
    from evalign.rank.panel import PanelSettings, calibration_weights, combine_votes, verdict_votes

    members = ["judge:j1", "judge:j2", "judge:j3"]
    w = calibration_weights(verdict_votes(cal, members), cal["pref_1"].to_numpy(float), members)
    r = combine_votes(verdict_votes(t, members), PanelSettings(rule="weighted", weights=w), members=members)
    (row,) = [x for x in json.loads(res.stdout)["selective"]["rows"] if x["judge"] == "w"]
    kept = r.confidence >= row["threshold"]
    assert row["coverage"] == pytest.approx(kept.mean(), abs=1e-12)


PANEL = pd.DataFrame({
    "system_a": ["x", "x", "x", "y"], "system_b": ["y", "y", "z", "z"],
    "j1": ["A", "A", "B", "A"], "j2": ["B", "A", None, "tie"], "j3": ["tie", "B", None, "A"],
})


def test_leaderboard_named_panel_tie_and_min(tmp_path: Path) -> None:
    f = tmp_path / "v.csv"
    PANEL.to_csv(f, index=False)

    def run(*args: str) -> dict:
        res = runner.invoke(app, ["leaderboard", str(f), "--bootstrap", "0", "--json", *args])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    out = run("--panel", "poll=j1,j2,j3")
    assert out["column"] == "poll" and out["panel"]["members"] == ["j1", "j2", "j3"]
    # rows: A/B/tie (no plurality) -> tie; A/A/B -> A; B alone -> B; A/tie/A -> A. x vs y: 1 win + 1 tie
    x = {r["system"]: r for r in run("--panel", "poll=j1,j2,j3", "--baseline-system", "y")["systems"]}["x"]
    assert x["win_rate"] == pytest.approx(0.75)
    # --panel-tie first: row 0 -> A (j1's); --panel-min 2: row 2 (one vote) has no verdict
    x = {r["system"]: r for r in run("--panel", "j1,j2,j3", "--panel-tie", "first", "--panel-min", "2",
                                     "--baseline-system", "y")["systems"]}["x"]
    assert x["win_rate"] == pytest.approx(1.0)
    res = runner.invoke(app, ["leaderboard", str(f), "--panel", "a=j1,j2", "--panel", "j3"])
    assert res.exit_code == 2 and "ranks one panel" in res.output
    # weighted: j1 right on all 4 calibration pairs, j2 and j3 never -> only j1 has a say: x wins both vs y
    cal = tmp_path / "cal.csv"
    pd.DataFrame({"j1": ["A", "B", "A", "B"], "j2": ["B", "A", "B", "A"], "j3": ["B", "A", "B", "A"],
                  "label": ["A", "B", "A", "B"]}).to_csv(cal, index=False)
    x = {r["system"]: r for r in run("--panel", "w=j1,j2,j3", "--panel-rule", "weighted", "--panel-calibration",
                                     str(cal), "--baseline-system", "y")["systems"]}["x"]
    assert x["win_rate"] == pytest.approx(1.0)
    res = runner.invoke(app, ["leaderboard", str(f), "--panel", "w=j1,j2,j3", "--panel-rule", "weighted"])
    assert res.exit_code == 2 and "--panel-calibration" in res.output


def test_bench_config_panel_mapping_form(tmp_path: Path) -> None:
    cfg = tmp_path / "bench.yaml"
    cfg.write_text("panels:\n  old: [a, b]\n  new: {members: [a, b, c], rule: dawid-skene, min: 2}\n", encoding="utf-8")
    s = read_bench_config(cfg).settings
    assert s.panels == {"old": ("a", "b"), "new": ("a", "b", "c")}
    assert set(s.panel_rules) == {"new"}
    assert s.panel_rules["new"].rule == "dawid-skene" and s.panel_rules["new"].min_members == 2
    cfg.write_text("panels:\n  new: {members: [a, b], tie: coin}\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"line 2.*panels.new|panels.new.*tie must be one of tie, abstain, first"):
        read_bench_config(cfg)


def test_bench_add_panels_with_a_rule_gives_a_confidence() -> None:
    from types import SimpleNamespace

    from evalign.bench.judging import add_panels
    from evalign.rank.panel import PanelSettings

    t = pd.DataFrame({"a": ["A", "A", "B"], "b": ["A", "B", "B"], "c": ["B", "tie", "B"]})
    s = SimpleNamespace(table=t, kind="pairwise")
    add_panels([s], {"p": ("a", "b", "c"), "q": ("a", "b")}, {"p": PanelSettings(tie="abstain")})  # type: ignore[list-item]
    assert list(t["p"]) == ["A", "unparseable", "B"]
    np.testing.assert_allclose(t["p.confidence"], [2 / 3, np.nan, 1])
    assert list(t["q"]) == ["A", "tie", "B"] and "q.confidence" not in t.columns  # the list form: today's meaning


def test_run_config_panel_equals_meta_panel(tmp_path: Path) -> None:
    import yaml

    t = _pair_table()
    t.to_json(tmp_path / "pairs.jsonl", orient="records", lines=True)
    members = ["judge:j1", "judge:j2", "judge:j3"]
    cfg = {"version": 1, "name": "p", "evaluations": [{
        "name": "p", "data": {"file": "pairs.jsonl"}, "columns": members,
        "panels": {"poll": {"members": members, "rule": "dawid-skene", "min": 2}},
        "meta": {"human": {"pref_columns": ["pref_1"]}, "resampling": {"n_resamples": 20, "n_permutations": 20},
                 "selective": {"risk": 0.3, "delta": 0.1}}}], "report": {"formats": ["json"]}}
    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = runner.invoke(app, ["run", str(conf), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    got = json.loads((tmp_path / "out" / "p" / "evaluation.json").read_text())["selective"]
    res = runner.invoke(app, ["meta", str(tmp_path / "pairs.jsonl"), "--pref", "pref_1", "-m", ",".join(members),
                              "--panel", "poll=" + ",".join(members), "--panel-rule", "dawid-skene", "--panel-min", "2",
                              "--bootstrap", "20", "--permutations", "20", "--selective", "--risk", "0.3", "--json"])
    assert res.exit_code == 0, res.output
    want = json.loads(res.stdout)["selective"]
    assert [r for r in got["rows"] if r["judge"] == "poll"] == [r for r in want["rows"] if r["judge"] == "poll"]
    assert any(r["judge"] == "poll" for r in got["rows"])
    cfg["evaluations"][0]["panels"] = {"poll": {"members": members, "tie": "coin"}}
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = runner.invoke(app, ["run", str(conf), "--out", str(tmp_path / "out2")])
    assert res.exit_code == 2 and "panels.poll" in res.output and "tie must be one of tie, abstain, first" in res.output


def test_published_cross_set_table_has_the_panel_row_beside_its_members() -> None:
    members = "judge:gpt-4/vanilla,judge:palm2/vanilla,judge:llama2/vanilla"
    res = runner.invoke(app, ["meta", "--published", "--dataset", "llmbar", "--panel", f"poll={members}",
                              "--bootstrap", "20", "--permutations", "20", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["column"]: r for r in json.loads(res.stdout)["rows"] if r["set"] == "llmbar"}
    assert {"poll", *members.split(",")} <= set(rows)
    one = runner.invoke(app, ["meta", "--dataset", "llmbar", "-m", members, "--panel", f"poll={members}",
                              "--bootstrap", "20", "--permutations", "20", "--json"])
    assert one.exit_code == 0, one.output
    (row,) = [r for r in json.loads(one.stdout)["trust"][0]["rows"] if r["metric"] == "poll"]
    assert rows["poll"]["value"] == pytest.approx(row["value"], abs=1e-12)
    assert rows["poll"]["ci_low"] <= rows["poll"]["value"] <= rows["poll"]["ci_high"]


def test_meta_weighted_panel_never_fits_its_weights_on_the_evaluated_items(tmp_path: Path) -> None:
    f = tmp_path / "pairs.jsonl"
    _pair_table().to_json(f, orient="records", lines=True)
    base = ["meta", str(f), "--pref", "pref_1", "--panel", "w=judge:j1,judge:j2,judge:j3", "--panel-rule", "weighted"]
    # --selective --holdout without --panel-calibration: refused, naming the way
    res = runner.invoke(app, [*base, "--selective", "--risk", "0.3", "--holdout", "0.3"])
    assert res.exit_code == 2 and res.output.count("error:") == 1
    assert "--panel-rule weighted with --selective --holdout" in res.output
    assert "--panel-calibration FILE" in res.output
    # the evaluated file itself as the calibration file: refused
    res = runner.invoke(app, [*base, "--panel-calibration", str(f), "--selective", "--risk", "0.3"])
    assert res.exit_code == 2 and res.output.count("error:") == 1
    assert "is FILE itself: the weights would be fitted on the items they are evaluated on" in res.output
    # labelled items apart: --selective --holdout runs
    c = tmp_path / "cal.jsonl"
    _pair_table(seed=2).to_json(c, orient="records", lines=True)
    res = runner.invoke(app, [*base, "--panel-calibration", str(c), "--selective", "--risk", "0.3", "--holdout",
                              "0.3", "--json"])
    assert res.exit_code == 0, res.output
    (row,) = [x for x in json.loads(res.stdout)["selective"]["rows"] if x["judge"] == "w"]
    assert row["holdout_n"] == 27  # 30% of the 90 pairs held out
