"""``evalign report`` end to end on real datasets, with a simple real metric (response length in
words), checked against statistics recomputed here from their definitions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

import evalign.datasets.tulu  # noqa: F401  (registers "tulu1" even before datasets/__init__ imports it)
from evalign.cli import app
from evalign.datasets import load_dataset, pairs_to_items
from evalign.datasets.base import bundled_path
from evalign.io import write_table

runner = CliRunner()


def _words(texts: pd.Series) -> np.ndarray:
    return texts.map(lambda t: float(len(str(t).split()))).to_numpy()


def _cell(md: str, metric: str, column: str) -> str:
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if metric in cells:
            return cells[header.index(column)]
    raise AssertionError(f"no row for {metric} in\n{md}")


def test_system_human_ranks(tmp_path: Path) -> None:
    si = load_dataset("self_instruct")
    items = si.items.assign(length=_words(si.items["response"]))
    write_table(items, tmp_path / "si.jsonl")
    ranks = bundled_path("self_instruct", "human_system_ranking.json")
    out = tmp_path / "out" / "si.html"
    r = runner.invoke(app, ["report", str(tmp_path / "si.jsonl"), "--system-human", str(ranks), "--human-lower-is-better",
                            "-m", "length", "--bootstrap", "100", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    paths = json.loads(r.output)
    assert Path(paths["html"]) == out and out.is_file()
    md = Path(paths["markdown:correlations"]).read_text()
    # Kendall tau-b between mean length per system and human ranks (negated: 1 = best)
    means = items.groupby("system")["length"].mean()
    truth = stats.kendalltau(means.to_numpy(), [-si.system_human[s] for s in means.index]).statistic
    assert _cell(md, "length", "value [low, high]").startswith(f"{truth:.3f} [")
    lb = Path(paths["markdown:leaderboard"]).read_text()
    assert f"| text-davinci-003 | 3 | {means['text-davinci-003']:.3f} (" in lb  # one human column: the rank


def test_item_human_from_dataset(tmp_path: Path, shared_data_dir: Path) -> None:
    ds = load_dataset("tulu1", data_dir=shared_data_dir)
    items = ds.items[["id", "system", "instruction", "input", "reference", "response", "task"]].copy()
    items["length"] = _words(items["response"])
    write_table(items, tmp_path / "tulu.jsonl")  # no human column: it comes from --dataset
    out = tmp_path / "tulu.html"
    r = runner.invoke(app, ["report", str(tmp_path / "tulu.jsonl"), "--dataset", "tulu1", "--data-dir", str(shared_data_dir),
                            "-m", "length", "--judge", "length", "--bootstrap", "100", "-o", str(out)])
    assert r.exit_code == 0, r.output
    files = out.parent / "tulu_files"
    figs = sorted(p.name for p in (files / "figures").iterdir())
    assert figs == ["by_task_heatmap.png", "correlations_intervals.png", "distributions.png", "epsilon_curves.png",
                    "leaderboard_ranks.png", "pair_accuracy_intervals.png", "score_vs_length.png"]
    lb = (files / "tables" / "leaderboard.md").read_text()
    human = ds.items.groupby("system")["acceptable"].mean()
    assert f"| chatgpt | {human['chatgpt']:.3f} | 1 |" in lb
    corr = (files / "tables" / "correlations.md").read_text()
    # item level, grouping by item: Kendall tau-b across the 4 systems of each prompt, averaged
    wide_h = ds.items.pivot(index="id", columns="system", values="acceptable")
    wide_m = items.pivot(index="id", columns="system", values="length")
    taus = [stats.kendalltau(wide_h.loc[i], wide_m.loc[i]).statistic for i in wide_h.index]
    taus = [t for t in taus if np.isfinite(t)]
    line = next(ln for ln in corr.splitlines() if ln.startswith("| item |") and "| length |" in ln)
    assert f"| {np.mean(taus):.3f} [" in line
    # the baselines stand beside the metric in every table: random (0) and longer_is_better for correlations,
    # always_tie for pairwise accuracy, and the human ceiling from the single annotations
    assert "| random | 0.000 [0.000, 0.000] |" in corr and "| longer_is_better |" in corr
    acc = (files / "tables" / "pair_accuracy.md").read_text()
    assert "| always_tie |" in acc and "| human_ceiling |" in acc and "beats_baselines" in acc
    bt = (files / "tables" / "by_task.md").read_text()
    assert bt.splitlines()[0] == "| task | length |" and "| vicuna |" in bt
    assert "Tulu-1 human evaluation" in out.read_text()


def test_pairs_from_dataset(tmp_path: Path) -> None:
    ds = load_dataset("pandalm")
    sides = pairs_to_items(ds.pairs)
    sides["length"] = _words(sides["response"])
    write_table(sides, tmp_path / "sides.jsonl")
    out = tmp_path / "p.html"
    r = runner.invoke(app, ["report", str(tmp_path / "sides.jsonl"), "--dataset", "pandalm", "-m", "length",
                            "--bootstrap", "100", "-o", str(out)])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "p_files" / "tables" / "pair_accuracy.md").read_text()
    eps = float(_cell(md, "length", "epsilon"))
    # recompute from the definition: majority of 3 annotators; metric prefers the longer response
    prefs = ds.pairs[ds.pref_columns].to_numpy()
    major = np.array([max((-1.0, 0.0, 1.0), key=lambda c, row=row: (row == c).sum()) for row in prefs])
    a = sides.loc[sides.side == "a", "length"].to_numpy()
    b = sides.loc[sides.side == "b", "length"].to_numpy()
    call = np.where(np.abs(a - b) <= eps, 0.0, np.sign(a - b))
    acc_ties = (call == major).mean()
    acc_no_ties = (call[major != 0] == major[major != 0]).mean()
    assert _cell(md, "length", "value [low, high]").startswith(f"{acc_ties:.3f} [")
    assert _cell(md, "length", "preference_accuracy_no_ties") == f"{acc_no_ties:.3f}"
    assert (tmp_path / "p_files" / "figures" / "epsilon_curves.png").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give at least one --metric"),
        (["-m", "nope", "--human", "h"], "no metric or judge column 'nope'"),
        (["-m", "length"], "no human judgments"),
        (["-m", "length", "--human", "h", "--system-human", "x.json"], "either --human or --system-human"),
    ],
)
def test_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    df = pd.DataFrame({"id": ["1", "2"], "system": ["s", "s"], "response": ["a", "b b"], "h": [1.0, 2.0], "length": [1.0, 2.0]})
    write_table(df, tmp_path / "t.jsonl")
    from evalign.cli import main  # noqa: F401  (main wraps errors; call through the runner as users do)

    r = runner.invoke(app, ["report", str(tmp_path / "t.jsonl"), *args, "-o", str(tmp_path / "r.html")])
    assert r.exit_code != 0
    assert message in str(r.exception) + r.output
