"""`evalign datasets` (the catalogue), `evalign datasets export` (round trip into `meta`), variants,
the default data folder, and `--dataset` on `score`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.cli.dataset_options import CATALOGUE, dataset_table, load_dataset_spec
from evalign.datasets import list_datasets, load_dataset
from evalign.io import read_items, read_pairs
from evalign.io.data_dir import ENV_VAR, default_data_dir

runner = CliRunner()
FAST = ["--bootstrap", "20", "--permutations", "20"]


def test_catalogue_lists_every_adapter() -> None:
    assert set(CATALOGUE) == set(list_datasets())
    res = runner.invoke(app, ["datasets", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = {r["name"]: r for r in out["datasets"]}
    assert list(rows) == list(CATALOGUE)
    assert rows["pandalm"]["ships_with_evalign"] and not rows["pandalm"]["needs_files"]
    assert rows["tulu1"]["tables"] == ["items", "pairs"] and not rows["tulu1"]["ships_with_evalign"]
    assert rows["tulu1"]["files_found"] is True and "open-instruct" in rows["tulu1"]["where"]
    assert rows["prometheus_vicuna"]["labels"].startswith("GPT-4 grades")
    assert "llmbar:mt-bench" in [v["name"] for v in rows["llmbar"]["variants"]]
    # the licence each adapter reports is the one listed
    for name in ("self_instruct", "pandalm", "hhh", "tulu1"):
        assert rows[name]["licence"] == load_dataset(name).licence


def test_catalogue_text_and_missing_files(tmp_path: Path) -> None:
    res = runner.invoke(app, ["datasets", "--data-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    for name in CATALOGUE:
        assert name in text
    assert "tulu1 items+pairs needs files Apache-2.0" in text
    assert f"files: MISSING in {tmp_path / 'tulu1_human_eval'}" in text
    out = json.loads(runner.invoke(app, ["datasets", "--json", "--data-dir", str(tmp_path)]).stdout)
    assert {r["name"]: r["files_found"] for r in out["datasets"]}["tulu1"] is False


def test_default_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "evalign" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_data_dir() == tmp_path / "home" / ".cache" / "evalign" / "data"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_VAR, "rel/data")
    assert default_data_dir() == tmp_path / "rel" / "data"  # made absolute
    # never beside the checkout: with nothing set, a set that is not bundled is not found there
    monkeypatch.delenv(ENV_VAR)
    with pytest.raises(Exception, match=r"looked in .*home/\.cache/evalign/data/tulu1_human_eval"):
        load_dataset("tulu1")


def test_variants() -> None:
    mt = dataset_table("llmbar:mt-bench", as_="pairs")
    assert len(mt) == 200 and set(mt["task"]) == {"Processed/MT-Bench"}
    assert load_dataset_spec("llmbar:MT-Bench").name == "llmbar:mt-bench"
    helpful = load_dataset_spec("hhh:helpful")
    assert len(helpful.pairs) == 59 and set(helpful.pairs["task"]) == {"helpful"}
    vic = load_dataset_spec("tulu1:vicuna")
    assert len(vic.items) == 320 and len(vic.pairs) == 240
    res = runner.invoke(app, ["datasets", "export", "llmbar:nope", "-o", "x.jsonl"])
    assert res.exit_code == 1 and "no variant 'nope'" in res.output and "llmbar:mt-bench" in res.output


def _meta(args: list[str]) -> dict:
    res = runner.invoke(app, ["meta", *args, *FAST, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    out.pop("source")  # "dataset NAME" vs the file's path
    for table in out["trust"]:
        for r in table["rows"]:
            r.pop("s_per_1000", None)  # seconds: differ between runs
    return out


def test_export_items_round_trips_into_meta(tmp_path: Path) -> None:
    path = tmp_path / "tulu.jsonl"
    res = runner.invoke(app, ["datasets", "export", "tulu1", "-o", str(path), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["as"] == "items" and info["rows"] == 1328
    back = read_items(path, human=["acceptable"])
    ds = load_dataset("tulu1")
    pd.testing.assert_series_equal(back["acceptable"], ds.items["acceptable"], check_names=False)
    from_file = _meta([str(path), "--human", "acceptable", "-m", "rouge_l"])
    from_dataset = _meta(["--dataset", "tulu1", "-m", "rouge_l"])
    # the dataset knows its six annotator columns (the human_ceiling row); the file's --human is one column
    ceiling = [r for r in from_dataset["trust"][0]["rows"] if r["metric"] == "human_ceiling"]
    assert len(ceiling) == 1 and 0 < ceiling[0]["value"] < 1
    from_dataset["trust"][0]["rows"].remove(ceiling[0])
    assert from_file == from_dataset
    # 262 of the 332 items have a reference (rouge_l has no value on the other 70)
    assert from_file["n_items"] == 262 and from_file["n_systems"] == 4
    assert from_file["overview"][0]["pairwise_accuracy"] > 0.5


def test_export_items_with_system_human_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "si.jsonl"  # (CSV: io reads a response that is a JSON array as a list; reported)
    res = runner.invoke(app, ["datasets", "export", "self_instruct", "-o", str(path)])
    assert res.exit_code == 0, res.output
    ranks = tmp_path / "si.system_human.json"
    assert f"--system-human {ranks} --lower-is-better" in " ".join(res.stdout.split())
    saved = json.loads(ranks.read_text())
    assert saved["lower_is_better"] is True and saved["values"] == load_dataset("self_instruct").system_human
    from_file = _meta([str(path), "--system-human", str(ranks), "--lower-is-better", "-m", "rouge_l"])
    from_dataset = _meta(["--dataset", "self_instruct", "-m", "rouge_l"])
    assert from_file == from_dataset and from_file["n_systems"] == 8


def test_export_pairs_and_pairs_as_items(tmp_path: Path) -> None:
    # JSONL: PandaLM has empty responses, and an empty CSV cell reads as missing (CHANGELOG 0.2.0)
    pairs_path = tmp_path / "pandalm_pairs.jsonl"
    res = runner.invoke(app, ["datasets", "export", "pandalm", "-o", str(pairs_path)])
    assert res.exit_code == 0, res.output
    assert "999 rows, pairs" in " ".join(res.stdout.split())
    ds = load_dataset("pandalm")
    back = read_pairs(pairs_path)
    assert len(back) == 999
    for c in ("id", "system_a", "system_b", "response_a", "response_b", "pref_1", "pref_2", "pref_3"):
        assert back[c].astype(str).tolist() == ds.pairs[c].astype(str).tolist()

    sides = tmp_path / "pandalm_sides.jsonl"
    assert runner.invoke(app, ["datasets", "export", "pandalm", "--as", "pairs-as-items", "-o", str(sides)]).exit_code == 0
    scored = tmp_path / "scored.jsonl"
    res = runner.invoke(app, ["score", str(sides), "-m", "rouge_l", "-o", str(scored), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["items"] == 1998
    from_file = _meta([str(scored), "--dataset", "pandalm", "-m", "rouge_l"])
    from_dataset = _meta(["--dataset", "pandalm", "-m", "rouge_l"])
    assert from_file == from_dataset and from_file["n_items"] == 999 and from_file["mode"] == "pairs"


def test_score_with_dataset() -> None:
    res = runner.invoke(app, ["score", "--dataset", "self_instruct", "-m", "rouge_l", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["items"] == 2016 and len(out["systems"]) == 8
    res = runner.invoke(app, ["score", "-m", "rouge_l"])
    assert res.exit_code == 2 and "give a FILE of items or --dataset NAME" in res.output
    res = runner.invoke(app, ["score", "--dataset", "llmbar", "-m", "rouge_l"])
    assert res.exit_code == 1 and "reference" in res.output
