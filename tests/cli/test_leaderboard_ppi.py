"""`evalign leaderboard --human` and `--style-control` on PandaLM's 999 round-robin battles (bundled,
Apache-2.0): the published GPT-3.5 verdicts as the judge, a seeded 10% slice of the 3-annotator majority
as the human sample. The PPI win rates are the PPI++ means of each system's battles (recomputed here by
hand), the humans are joined by id and systems in either order, and bad human files are one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.datasets import load_dataset
from evalign.errors import InputError
from evalign.rank.leaderboard_run import run_leaderboard
from evalign.rank.ppi import ppi_mean

runner = CliRunner()
SCORE = {"A": 1.0, "tie": 0.5, "B": 0.0}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, pd.DataFrame, np.ndarray]:
    pairs = load_dataset("pandalm").pairs
    vote = np.sign(np.sign(pairs[["pref_1", "pref_2", "pref_3"]].to_numpy()).sum(axis=1))
    human = np.where(vote > 0, "A", np.where(vote < 0, "B", "tie"))
    base = pairs[["id", "system_a", "system_b", "response_a", "response_b"]]
    judge = base.assign(verdict=pairs["judge:gpt-3.5-turbo"].fillna("unparseable").to_numpy())
    pick = np.sort(np.random.default_rng(0).choice(len(pairs), size=100, replace=False))
    h = base.iloc[pick][["id", "system_a", "system_b"]].assign(verdict=human[pick]).reset_index(drop=True)
    # half of the human rows name the systems the other way round (and so swap the verdict)
    flip = h.index % 2 == 1
    h.loc[flip, ["system_a", "system_b"]] = h.loc[flip, ["system_b", "system_a"]].to_numpy()
    h.loc[flip, "verdict"] = h.loc[flip, "verdict"].map({"A": "B", "B": "A", "tie": "tie"})
    d = tmp_path_factory.mktemp("pandalm")
    judge.to_json(d / "judge.jsonl", orient="records", lines=True)
    h.to_json(d / "human.jsonl", orient="records", lines=True)
    return d / "judge.jsonl", d / "human.jsonl", judge, pick


def test_ppi_win_rates_are_the_ppi_means_of_each_system(files: tuple) -> None:
    jf, hf, judge, pick = files
    out = run_leaderboard(jf, human=hf)
    wr = out.ppi.win_rates.set_index("system")
    assert out.ppi.n_human == 100 and out.ppi.n_battles == 999
    pairs = load_dataset("pandalm").pairs
    vote = np.sign(np.sign(pairs[["pref_1", "pref_2", "pref_3"]].to_numpy()).sum(axis=1))
    labelled = np.zeros(len(judge), dtype=bool)
    labelled[pick] = True
    for system in ("llama-7b", "cerebras-gpt-6.7B"):
        as_a, as_b = (judge["system_a"] == system).to_numpy(), (judge["system_b"] == system).to_numpy()
        mine = as_a | as_b
        yj = judge["verdict"].map(SCORE).fillna(0.5).to_numpy()
        yj = np.where(as_b, 1 - yj, yj)
        yh = np.where(vote > 0, 1.0, np.where(vote < 0, 0.0, 0.5))
        yh = np.where(as_b, 1 - yh, yh)
        r = ppi_mean(yh[mine & labelled], yj[mine & labelled], yj[mine & ~labelled])
        assert wr.loc[system, "ppi"] == pytest.approx(r.estimate, abs=1e-12)
        assert (wr.loc[system, "ppi_low"], wr.loc[system, "ppi_high"]) == pytest.approx((r.low, r.high), abs=1e-12)
        assert wr.loc[system, "n_human"] == int((mine & labelled).sum())
        truth = yh[mine].mean()  # the all-human win rate
        assert wr.loc[system, "ppi_low"] <= truth <= wr.loc[system, "ppi_high"]
    bt = out.ppi.bt.set_index("system")
    assert (bt["ppi_low"] < bt["ppi_bt"]).all() and (bt["ppi_bt"] < bt["ppi_high"]).all()
    assert bt["ppi_bt"].mean() == pytest.approx(1000)


def test_cli_json_and_tables(files: tuple) -> None:
    jf, hf, _, _ = files
    r = runner.invoke(app, ["leaderboard", str(jf), "--human", str(hf), "--style-control", "--bootstrap", "0",
                            "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ppi"]["n_human"] == 100 and len(data["ppi"]["win_rates"]) == 5
    assert {"ppi", "ppi_low", "ppi_high", "judge", "humans", "lam", "n_to_halve"} <= set(data["ppi"]["win_rates"][0])
    assert [c["feature"] for c in data["style_control"]["coefficients"]] == ["length", "headers", "lists", "bold"]
    r = runner.invoke(app, ["leaderboard", str(jf), "--human", str(hf), "--baseline-system", "opt-7b",
                            "--bootstrap", "0", "--no-lc"], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    assert "Prediction-powered win rate against opt-7b" in r.output and "labels to halve" in r.output


def test_bad_human_files(files: tuple, tmp_path: Path) -> None:
    jf, hf, _, _ = files
    rows = pd.read_json(hf, lines=True)
    dup = pd.concat([rows, rows.iloc[[3]]], ignore_index=True)
    dup.to_json(tmp_path / "dup.jsonl", orient="records", lines=True)
    with pytest.raises(InputError, match="a second human verdict") as info:
        run_leaderboard(jf, human=tmp_path / "dup.jsonl")
    assert info.value.line == 101 and info.value.field == "id"
    stray = pd.concat([rows, pd.DataFrame([{"id": "nope", "system_a": "x", "system_b": "y", "verdict": "A"}])])
    stray.to_json(tmp_path / "stray.jsonl", orient="records", lines=True)
    out = run_leaderboard(jf, human=tmp_path / "stray.jsonl")
    assert any("1 human verdicts" in n and "match no battle" in n for n in out.ppi.notes)
    r = runner.invoke(app, ["leaderboard", str(jf), "--human", str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 1 and "missing.jsonl" in r.output and "Traceback" not in r.output
    no_text = pd.read_json(jf, lines=True).drop(columns=["response_a", "response_b"])
    no_text.to_json(tmp_path / "bare.jsonl", orient="records", lines=True)
    with pytest.raises(InputError, match="response_a") as info2:
        run_leaderboard(tmp_path / "bare.jsonl", style_control=True)
    assert info2.value.file and info2.value.file.endswith("bare.jsonl")


def test_every_battle_with_a_human_label(tmp_path: Path) -> None:
    # every battle labelled by people: nothing to predict; the PPI Bradley-Terry is the humans-only fit and
    # the win-rate table says why it has no PPI column (was an unexpected ZeroDivisionError)
    pairs = load_dataset("pandalm").pairs.iloc[:200]
    vote = np.sign(np.sign(pairs[["pref_1", "pref_2", "pref_3"]].to_numpy()).sum(axis=1))
    human = np.where(vote > 0, "A", np.where(vote < 0, "B", "tie"))
    base = pairs[["id", "system_a", "system_b", "response_a", "response_b"]]
    base.assign(verdict=pairs["judge:gpt-3.5-turbo"].fillna("unparseable").to_numpy()).to_json(
        tmp_path / "judge.jsonl", orient="records", lines=True)
    base[["id", "system_a", "system_b"]].assign(verdict=human).to_json(tmp_path / "human.jsonl", orient="records",
                                                                         lines=True)
    r = runner.invoke(app, ["leaderboard", str(tmp_path / "judge.jsonl"), "--human", str(tmp_path / "human.jsonl"),
                            "--bootstrap", "0", "--json"])
    assert r.exit_code == 0, r.output
    ppi = json.loads(r.stdout)["ppi"]
    bt = ppi["bradley_terry"]
    assert len(bt) == 5
    for row in bt:
        assert row["ppi_bt"] == pytest.approx(row["humans_bt"], abs=1e-9)
        assert row["ppi_low"] < row["ppi_bt"] < row["ppi_high"]
    # the humans' own win rate of each system: its mean score over its labelled battles
    h = base.assign(verdict=human)
    for row in ppi["win_rates"]:
        s = row["system"]
        va = h[h["system_a"] == s]["verdict"].astype(object).map(SCORE).astype(float)
        vb = 1.0 - h[h["system_b"] == s]["verdict"].astype(object).map(SCORE).astype(float)
        scores = pd.concat([va, vb])
        assert row["humans"] == pytest.approx(float(scores.mean())) and row["n_human"] == len(scores)
        assert row["ppi"] is None
