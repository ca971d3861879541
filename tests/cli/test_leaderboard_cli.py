"""`evalign leaderboard` end to end: a hand-made 3-system verdict file with hand-computed win rates and
the Bradley-Terry likelihood equations, --json keys, the seeded bootstrap, `evalign judge` columns,
a panel checked against statsmodels and krippendorff, the self-preference guard, clear input errors,
and the round trip from `evalign datasets export --as pairs --against` into the leaderboard."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.io import read_pairs
from evalign.rank import LeaderboardSettings
from evalign.rank.leaderboard_run import LeaderboardSpec, run_leaderboard

runner = CliRunner()

# x beats y 2-1 with a tie; x beats z 3-1 (one of them with z shown first); y beats z 2-1 and one
# verdict is unparseable. Against z: x wins 3 of 4 (0.75), y 2 of 3 resolved (2/3).
TOY = [
    ("1", "x", "y", "A"), ("2", "x", "y", "A"), ("3", "x", "y", "B"), ("4", "x", "y", "tie"),
    ("1", "x", "z", "A"), ("2", "x", "z", "A"), ("3", "x", "z", "A"), ("4", "z", "x", "A"),
    ("1", "y", "z", "A"), ("2", "y", "z", "B"), ("3", "y", "z", "A"), ("4", "y", "z", "unparseable"),
]
#: per system: (score: wins + ties / 2, resolved battles, opponents' counts) by hand from TOY
SCORE = {"x": 2 + 0.5 + 3, "y": 1 + 0.5 + 2, "z": 1 + 1}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "verdicts.jsonl",
                       [dict(zip(("id", "system_a", "system_b", "verdict"), r, strict=True)) for r in TOY])


def invoke_json(args: list[str]) -> dict:
    res = runner.invoke(app, ["leaderboard", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_toy_by_hand(toy: Path) -> None:
    out = invoke_json([str(toy), "--baseline-system", "z", "--bootstrap", "0"])
    assert set(out) == {"source", "column", "n_rows", "baseline", "orders", "bradley_terry", "lc_difficulty",
                        "position_agreement", "systems", "win_rate_matrix", "panel", "judge", "notes"}
    rows = {r["system"]: r for r in out["systems"]}
    assert [r["system"] for r in out["systems"]] == ["x", "y", "z"]  # BT order
    assert [r["rank"] for r in out["systems"]] == [1, 2, 3]
    assert rows["x"]["win_rate"] == pytest.approx(0.75)
    assert rows["y"]["win_rate"] == pytest.approx(2 / 3)
    assert rows["z"]["win_rate"] == 0.5
    assert {s: (r["n_battles"], r["n_wins"], r["n_ties"], r["n_unparseable"]) for s, r in rows.items()} == {
        "x": (8, 5, 1, 0), "y": (8, 3, 1, 1), "z": (8, 2, 0, 1)}
    # the BT maximum: every system's expected score equals its actual score (ties half), and the mean
    # rating is 1000 without an anchor
    r = {s: rows[s]["bt_score"] for s in rows}
    n = {("x", "y"): 4, ("x", "z"): 4, ("y", "z"): 3}
    expected = dict.fromkeys(r, 0.0)
    for (i, j), k in n.items():
        p = 1 / (1 + 10 ** ((r[j] - r[i]) / 400))
        expected[i] += k * p
        expected[j] += k * (1 - p)
    for s in r:
        assert expected[s] == pytest.approx(SCORE[s], abs=1e-6)
    assert np.mean(list(r.values())) == pytest.approx(1000.0)
    m = out["win_rate_matrix"]
    assert m["systems"] == ["x", "y", "z"]
    assert m["rate"][0][1] == pytest.approx(2.5 / 4) and m["n"][1][2] == 3
    assert "no lc_win_rate: the battles have no len_a / len_b or response_a / response_b" in out["notes"]


def test_anchor_and_seeded_bootstrap(toy: Path) -> None:
    args = [str(toy), "--anchor", "y", "--bootstrap", "50", "--seed", "3"]
    one, two = invoke_json(args), invoke_json(args)
    assert one["systems"] == two["systems"]
    assert {r["system"]: r["bt_score"] for r in one["systems"]}["y"] == pytest.approx(1000.0)
    other = invoke_json([*args[:-1], "4"])
    assert [r["bt_low"] for r in other["systems"]] != [r["bt_low"] for r in one["systems"]]
    assert one["bradley_terry"]["n_bootstrap"] == 50 and one["bradley_terry"]["resample"] == "battles"
    items = invoke_json([*args, "--resample", "items"])
    assert items["bradley_terry"]["resample"] == "items"


def test_text_output_at_80_columns(toy: Path, tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    res = subprocess.run([sys.executable, "-m", "evalign", "leaderboard", str(toy), "--baseline-system", "z",
                          "--bootstrap", "100", "-o", str(tmp_path / "board.csv")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0] == "judge: verdict; agreement with humans: unknown (see --trust-from)"
    assert lines[1].startswith("Leaderboard: verdict on")
    last_table = max(i for i, line in enumerate(lines) if line.startswith("└"))
    assert lines[last_table + 1].startswith("cluster 1 = not significantly below the best")
    assert any(line.startswith("note: no lc_win_rate") for line in lines[last_table + 1:])
    written = pd.read_csv(tmp_path / "board.csv")
    assert written["system"].tolist() == ["x", "y", "z"]
    assert written["win_rate"].tolist() == pytest.approx([0.75, 2 / 3, 0.5])


def test_judge_columns_pool_both_orders(tmp_path: Path) -> None:
    # output of `evalign judge` in relative mode: NAME (both orders resolved), NAME.ab, NAME.ba (each
    # order's verdict mapped back to the pair's orientation)
    rows = [
        {"id": "1", "system_a": "p", "system_b": "q", "j": "A", "j.ab": "A", "j.ba": "A"},
        {"id": "2", "system_a": "p", "system_b": "q", "j": "tie", "j.ab": "A", "j.ba": "B"},
        {"id": "3", "system_a": "p", "system_b": "q", "j": "B", "j.ab": "B", "j.ba": "B"},
        {"id": "4", "system_a": "p", "system_b": "q", "j": "A", "j.ab": "A", "j.ba": "A"},
    ]
    f = write_jsonl(tmp_path / "judged.jsonl", rows)
    out = invoke_json([str(f), "--judge", "j", "--baseline-system", "q", "--bootstrap", "0"])
    wr = {r["system"]: r for r in out["systems"]}
    # pooled: p wins 3 of 4 A-first battles (ab) and 2 of 4 B-first ones (ba): 5 of 8
    assert wr["p"]["win_rate"] == pytest.approx(5 / 8) and wr["p"]["n_battles"] == 8
    assert out["position_agreement"]["agreement"] == pytest.approx(3 / 4)
    assert out["position_agreement"]["n_pairs"] == 4
    combined = invoke_json([str(f), "--judge", "j", "--baseline-system", "q", "--bootstrap", "0", "--orders", "combine"])
    # combined: agreeing orders kept, the disagreeing pair a tie: p wins 2, loses 1, ties 1
    assert {r["system"]: r for r in combined["systems"]}["p"]["win_rate"] == pytest.approx(2.5 / 4)


PANEL = pd.DataFrame({
    "id": [str(i) for i in range(8)],
    "system_a": ["x", "x", "x", "x", "y", "y", "y", "y"],
    "system_b": ["y", "y", "y", "y", "z", "z", "z", "z"],
    "j1": ["A", "A", "B", "tie", "A", "A", "B", "A"],
    "j2": ["A", "B", "B", "tie", "A", "tie", "B", "A"],
    "j3": ["A", "A", "A", "B", "B", "A", "B", "A"],
})


def test_panel_majority_and_agreement(tmp_path: Path) -> None:
    from krippendorff import alpha as kalpha
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    f = tmp_path / "panel.csv"
    PANEL.to_csv(f, index=False)
    out = invoke_json([str(f), "--panel", "j1", "--panel", "j2,j3", "--baseline-system", "y", "--bootstrap", "0"])
    # majority per row: A A B tie(1-1-1 -> tie rule) | A A B A; x vs y: 2 wins, 1 loss, 1 tie
    rows = {r["system"]: r for r in out["systems"]}
    assert rows["x"]["win_rate"] == pytest.approx(2.5 / 4)
    assert rows["z"]["win_rate"] == pytest.approx(1 / 4)
    codes = PANEL[["j1", "j2", "j3"]].replace({"A": 0, "B": 1, "tie": 2}).to_numpy(int)
    panel = out["panel"]
    assert panel["members"] == ["j1", "j2", "j3"] and panel["n_complete"] == 8
    assert panel["fleiss_kappa"] == pytest.approx(sm_fleiss(aggregate_raters(codes)[0]), abs=1e-12)
    assert panel["krippendorff_alpha"] == pytest.approx(
        kalpha(reliability_data=codes.T.astype(float), level_of_measurement="nominal"), abs=1e-9)
    res = runner.invoke(app, ["leaderboard", str(f), "--panel", "j1", "--panel", "j2", "--panel", "j3",
                              "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    assert "panel of j1, j2, j3 (majority): Fleiss' kappa" in " ".join(res.stdout.split())


def test_panel_mean_rule(tmp_path: Path) -> None:
    f = tmp_path / "panel.jsonl"
    PANEL.to_json(f, orient="records", lines=True)
    out = invoke_json([str(f), "--panel", "j1,j2,j3", "--panel-rule", "mean", "--baseline-system", "y",
                       "--bootstrap", "0"])
    # mean of A=+1, tie=0, B=-1: rows 0..3 = +1, +1/3, -1/3, -1/3 -> A A B B; x: 2 of 4
    assert {r["system"]: r for r in out["systems"]}["x"]["win_rate"] == pytest.approx(0.5)
    assert out["panel"]["rule"] == "mean"


def test_self_preference_warning_and_skip(toy: Path) -> None:
    res = runner.invoke(app, ["leaderboard", str(toy), "--judge-model", "org/y", "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "note: self-preference: judge 'org/y' is system 'y': 8 of 12 battles include the judge's own outputs" in text
    out = invoke_json([str(toy), "--judge-model", "org/y", "--skip-self", "--bootstrap", "0"])
    assert [r["system"] for r in out["systems"]] == ["x", "z"]
    assert {r["system"]: r["n_battles"] for r in out["systems"]} == {"x": 4, "z": 4}
    assert any("8 battles including a judge's own outputs dropped" in n for n in out["notes"])


def test_clear_errors(toy: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["leaderboard", str(toy), "--verdict", "winner"])
    assert res.exit_code == 1
    assert f"{toy}, line 1, field 'winner': missing" in res.output
    bad = tmp_path / "bad.csv"
    bad.write_text("system_a,system_b,verdict\nx,y,A\nx,y,maybe\n", encoding="utf-8")
    res = runner.invoke(app, ["leaderboard", str(bad)])
    assert res.exit_code == 1
    assert f"{bad}, line 3, field 'verdict': verdict 'maybe' is not one of A, B, tie, unparseable" in res.output
    nosys = tmp_path / "nosys.jsonl"
    write_jsonl(nosys, [{"system_a": "x", "verdict": "A"}])
    res = runner.invoke(app, ["leaderboard", str(nosys)])
    assert res.exit_code == 1 and f"{nosys}, line 1, field 'system_b': missing" in res.output
    unres = tmp_path / "unresolved.jsonl"
    write_jsonl(unres, [{"system_a": "x", "system_b": "y", "v": "unparseable"}, {"system_a": "x", "system_b": "y", "v": None}])
    res = runner.invoke(app, ["leaderboard", str(unres), "--verdict", "v"])
    assert res.exit_code == 1
    assert f"{unres}, field 'v': no resolved verdict to rank: 1 unparseable, 1 missing" in res.output
    res = runner.invoke(app, ["leaderboard", str(toy), "--baseline-system", "w"])
    assert res.exit_code == 2 and "--baseline-system 'w' is not a system" in res.output and "x, y, z" in res.output
    res = runner.invoke(app, ["leaderboard", str(toy), "--verdict", "verdict", "--panel", "a,b"])
    assert res.exit_code != 0 and "give one of --verdict, --judge or --panel" in res.output
    res = runner.invoke(app, ["leaderboard", str(toy), "--resample", "pairs"])
    assert res.exit_code != 0 and "--resample must be one of battles, items" in res.output


def test_export_pairs_round_trip(tmp_path: Path) -> None:
    """8 Self-Instruct systems x 252 items: --against davinci gives 7 x 252 pairs that `judge` can read;
    a scripted judge (the longer response wins) ranked by `leaderboard` gives the hand-counted win rates."""
    out = tmp_path / "pairs.jsonl"
    res = runner.invoke(app, ["datasets", "export", "self_instruct", "--as", "pairs", "--against", "davinci",
                              "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == 7 * 252
    pairs = read_pairs(out)  # the pair table `evalign judge` reads
    assert len(pairs) == 7 * 252 and set(pairs["system_b"]) == {"davinci"}
    assert pairs.groupby("system_a")["item_id"].nunique().eq(252).all()
    la, lb = pairs["response_a"].str.len(), pairs["response_b"].str.len()
    pairs["longer"] = np.where(la > lb, "A", np.where(la < lb, "B", "tie"))
    judged = tmp_path / "judged.jsonl"
    pairs.to_json(judged, orient="records", lines=True)
    got = invoke_json([str(judged), "--verdict", "longer", "--baseline-system", "davinci", "--bootstrap", "0",
                       "--no-lc"])
    expected = pairs.assign(s=(la > lb) + 0.5 * (la == lb)).groupby("system_a")["s"].mean()
    rows = {r["system"]: r for r in got["systems"]}
    for system, rate in expected.items():
        assert rows[system]["win_rate"] == pytest.approx(rate)
        assert rows[system]["mean_length"] == pytest.approx(pairs.loc[pairs["system_a"] == system,
                                                                      "response_a"].str.len().mean())
    res = runner.invoke(app, ["datasets", "export", "self_instruct", "--as", "pairs", "--against", "all",
                              "-o", str(tmp_path / "all.jsonl"), "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["rows"] == 28 * 252
    res = runner.invoke(app, ["datasets", "export", "self_instruct", "--against", "gpt-9", "-o", str(out)])
    assert res.exit_code == 1 and "--against 'gpt-9' is not a system of the table" in res.output


def test_python_api_on_a_dataframe() -> None:
    import evalign

    df = pd.DataFrame([dict(zip(("id", "system_a", "system_b", "verdict"), r, strict=True)) for r in TOY])
    o = evalign.run_leaderboard(df, evalign.LeaderboardSpec(board=evalign.LeaderboardSettings(baseline="z")))
    assert o.board.table["system"].tolist() == ["x", "y", "z"]
    direct = evalign.leaderboard(df, settings=LeaderboardSettings(baseline="z"))
    assert np.allclose(direct.table["bt_score"], o.board.table["bt_score"])
    assert math.isclose(o.board.table.loc[0, "win_rate"], 0.75)
    assert run_leaderboard(df, LeaderboardSpec()).spec.column == "verdict"


GOLDEN_META = Path(__file__).resolve().parents[1] / "golden" / "meta_llmbar_judge_json.stdout"


def test_judge_trust_from_a_meta_result(toy: Path, tmp_path: Path) -> None:
    # the real `evalign meta --json` output of a judge column 'judge:longer' on LLMBar (a golden file)
    meta = json.loads(GOLDEN_META.read_text())
    row = next(r for r in meta["trust"][0]["rows"] if r["metric"] == "judge:longer" and r["group"] == "(all)")
    res = runner.invoke(app, ["leaderboard", str(toy), "--bootstrap", "0", "--trust-from", str(GOLDEN_META),
                              "--trust-column", "judge:longer"])
    assert res.exit_code == 0, res.output
    first = " ".join(res.output.split("Leaderboard:")[0].split())
    assert first == (f"judge: verdict; agreement with humans: preference_accuracy {row['value']:.3f} "
                     f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}] (item level, n = 100) on {meta['source']}")
    out = invoke_json([str(toy), "--bootstrap", "0", "--trust-from", str(GOLDEN_META), "--trust-column",
                       "judge:longer"])
    assert out["judge"] == {"column": "verdict", "models": [], "trust": {
        "column": "judge:longer", "statistic": "preference_accuracy", "level": "item", "value": row["value"],
        "low": row["ci_low"], "high": row["ci_high"], "n": 100, "source": meta["source"]}}
    assert invoke_json([str(toy), "--bootstrap", "0"])["judge"]["trust"] is None
    # a judge the meta result did not rank, a file that is no meta result, --trust-column alone
    res = runner.invoke(app, ["leaderboard", str(toy), "--trust-from", str(GOLDEN_META)])
    assert res.exit_code == 1
    assert (f"{GOLDEN_META}: the judge column 'verdict' was not ranked there (judges ranked: judge:longer)"
            in " ".join(res.output.split()))
    res = runner.invoke(app, ["leaderboard", str(toy), "--trust-from", str(toy)])
    assert res.exit_code == 1 and f"{toy}: cannot read a meta-evaluation result" in " ".join(res.output.split())
    res = runner.invoke(app, ["leaderboard", str(toy), "--trust-column", "x"])
    assert res.exit_code == 1 and "--trust-column needs --trust-from" in res.output
