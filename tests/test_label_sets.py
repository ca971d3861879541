"""Datasets say what they hold (issue 20, item 4): `evalign datasets` lists each dataset's label sets,
`--labels NAME` picks one with the same flag in every verb (meta, report, datasets export, run configs),
a subset of a dataset's annotator columns is a warning naming how many there are, and
`report --dataset NAME` alone computes the dataset's default metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evalign.cli import app
from evalign.datasets import CATALOGUE, default_metrics, label_set, load_dataset_spec
from evalign.errors import EvalignError
from evalign.io import read_pairs

runner = CliRunner()
FAST = ["--bootstrap", "20", "--permutations", "20"]


def _values(out: dict) -> list[tuple[str, str, float]]:
    """The (group, metric, value) rows of every trust table (timings left out)."""
    return [(r["group"], r["metric"], r["value"]) for t in out["trust"] for r in t["rows"]]


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, (res.output, res.exception)
    return json.loads(res.stdout)


def test_datasets_lists_label_sets() -> None:
    res = runner.invoke(app, ["datasets"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    tulu = lines.index(next(ln for ln in lines if ln.startswith("tulu1  ")))
    block = lines[tulu:tulu + 6]
    assert any(ln.startswith("  --labels acceptability (default): human acceptability per output")
               and "1-6 annotators per item" in ln for ln in block)
    assert any(ln.startswith("  --labels preference: ") and "4 annotator columns" in ln for ln in block)
    assert "  --labels preference: human preference A / B / tie; 3 annotators per pair" in lines
    rows = {r["name"]: r for r in _json(["datasets"])["datasets"]}
    sets = {s["name"]: s for s in rows["tulu1"]["label_sets"]}
    assert sets["acceptability"]["column"] == "acceptable" and sets["acceptability"]["default"]
    assert sets["preference"]["pref"] == ["pref_1", "pref_2", "pref_3", "pref_4"]
    assert not sets["preference"]["default"]


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_each_label_set_matches_its_dataset(name: str) -> None:
    """Every built-in dataset declares its label sets, and each names columns the loaded set has."""
    entry = CATALOGUE[name]
    assert entry.label_sets, name
    ds = load_dataset_spec(name)
    for ls in entry.label_sets.values():
        if ls.kind == "item":
            assert ds.items is not None and ls.column in ds.human_columns
        elif ls.kind == "pairs":
            assert list(ls.pref) == list(ds.pref_columns)
        else:
            assert ds.system_human


def test_labels_name_errors() -> None:
    with pytest.raises(EvalignError, match=r"no label set 'prefrence' \(did you mean 'preference'\?\)"):
        label_set("tulu1", "prefrence")
    assert label_set("tulu1:vicuna", "Preference").pref == ("pref_1", "pref_2", "pref_3", "pref_4")
    res = runner.invoke(app, ["meta", "--dataset", "tulu1", "--labels", "preference", "--pref", "pref_1", "-m",
                              "rouge_l"])
    assert res.exit_code != 0 and "--labels picks the labels: not with --pref" in res.output
    res = runner.invoke(app, ["meta", "scored.jsonl", "--labels", "preference", "-m", "rouge_l"])
    assert res.exit_code != 0


def test_meta_labels_preference_uses_every_annotator_and_one_pref_warns() -> None:
    args = ["meta", "--dataset", "tulu1:vicuna", "-m", "rouge_l", *FAST]
    by_set = _json([*args, "--labels", "preference"])
    by_flags = _json([*args, "--pref", "pref_1", "--pref", "pref_2", "--pref", "pref_3", "--pref", "pref_4"])
    assert by_set["mode"] == "pairs" and _values(by_set) == _values(by_flags)
    assert not any("annotator columns" in w for w in by_set["warnings"])
    one = _json([*args, "--pref", "pref_1"])
    assert "labels: 1 of the 4 annotator columns of tulu1:vicuna (pref_1); all 4: --labels preference" in one["warnings"]
    acc_set = _json([*args, "--labels", "acceptability"])
    acc_flag = _json([*args, "--human", "acceptable"])
    assert acc_set["mode"] == "items" and _values(acc_set) == _values(acc_flag)


def test_export_labels_picks_the_table(tmp_path: Path) -> None:
    out = tmp_path / "prefs.jsonl"
    res = runner.invoke(app, ["datasets", "export", "tulu1", "--labels", "preference", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert len(read_pairs(out)) == 996
    res = runner.invoke(app, ["datasets", "export", "tulu1", "--labels", "preference", "--as", "items", "-o",
                              str(out)])
    assert res.exit_code != 0 and "--as pairs or pairs-as-items, not items" in res.output


def test_run_config_data_labels(tmp_path: Path) -> None:
    from evalign.run import load_config
    from evalign.run.execute import load_data

    cfg = {"version": 1, "name": "t", "metrics": ["rouge_l"],
           "evaluations": [{"name": "tulu", "data": {"dataset": "tulu1:vicuna", "labels": "preference"}}]}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    ev = load_config(path).evaluations[0]
    assert ev.data.labels == "preference"
    assert load_data(ev)["human"].pref_columns == ("pref_1", "pref_2", "pref_3", "pref_4")
    cfg["evaluations"][0]["data"]["labels"] = "votes"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    with pytest.raises(EvalignError, match="no label set 'votes'"):
        load_config(path)


def test_report_dataset_alone_uses_its_default_metrics(tmp_path: Path) -> None:
    assert default_metrics(load_dataset_spec("self_instruct")) == ["bleu", "chrf", "rouge_l"]
    assert default_metrics(load_dataset_spec("pandalm")) == ["bleu", "chrf", "rouge_l", "judge:gpt-3.5-turbo",
                                                             "judge:pandalm-7b"]
    assert default_metrics(load_dataset_spec("hhh")) == []  # no references, no judge columns
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", "--dataset", "self_instruct", "--bootstrap", "20", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    ev = json.loads(res.stdout)["evaluation"]
    assert {r["metric"] for r in ev["overview"]} == {"bleu", "chrf", "rouge_l"}
    assert out.is_file()
    res = runner.invoke(app, ["report", "--dataset", "hhh", "-o", str(out)])
    assert res.exit_code != 0 and "no references and no judge columns" in res.output
