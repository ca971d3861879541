"""``--dataset`` / ``--data-dir`` on ``meta``, ``judge`` and ``report`` (declared once in
:mod:`evalign.cli.dataset_options`), ``--pref`` with ``--dataset``, ``meta -m NAME`` reading an
existing ``NAME[...]`` column, and judge's usage errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from evalign.cli import app
from evalign.io import write_table

runner = CliRunner()
FAST = ["--bootstrap", "20", "--permutations", "20"]


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)
    return json.loads(res.stdout)


def test_meta_data_dir_is_read(tmp_path: Path) -> None:
    # an empty data folder: tulu1 does not ship, so the error names the folder it looked in
    res = runner.invoke(app, ["meta", "--dataset", "tulu1", "--data-dir", str(tmp_path), "-m", "rouge_l", *FAST])
    assert res.exit_code == 1 and str(tmp_path) in " ".join(res.output.split()), res.output
    out = _json(["meta", "--dataset", "tulu1", "--data-dir", "/work/shared/data" if Path("/work/shared/data").is_dir()
                 else str(Path(__file__).resolve().parents[3] / "shared" / "data"), "-m", "rouge_l", *FAST, "--json"])
    assert out["n_systems"] == 4 and out["columns"][0]["name"] == "rouge_l"


def test_meta_pref_is_honoured_with_dataset() -> None:
    both = _json(["meta", "--dataset", "pandalm", "-m", "rouge_l", *FAST, "--json"])
    one = _json(["meta", "--dataset", "pandalm", "--pref", "pref_2", "-m", "rouge_l", *FAST, "--json"])
    assert both["mode"] == one["mode"] == "pairs"
    assert "pref_1" in json.dumps(both["human"]) and "pref_3" in json.dumps(both["human"])
    assert "pref_2" in json.dumps(one["human"]) and "pref_1" not in json.dumps(one["human"])
    acc = {o["metric"]: o["preference_accuracy"] for o in one["overview"]} if "preference_accuracy" in \
        one["overview"][0] else None
    acc_all = {o["metric"]: o["preference_accuracy"] for o in both["overview"]} if acc is not None else None
    assert acc is None or acc != acc_all  # one annotator's labels give another accuracy than the majority


def test_meta_variant_of_dataset() -> None:
    whole = _json(["meta", "--dataset", "tulu1", "-m", "rouge_l", *FAST, "--json"])
    vicuna = _json(["meta", "--dataset", "tulu1:vicuna", "-m", "rouge_l", *FAST, "--json"])
    assert vicuna["source"] == "dataset tulu1:vicuna" and 0 < vicuna["n_items"] <= 80 < whole["n_items"]


def test_meta_uses_an_existing_bracketed_column(tmp_path: Path) -> None:
    from evalign.datasets import load_dataset

    items = load_dataset("self_instruct").items.copy()
    rng = np.random.default_rng(0)
    items["rouge_l[variant=x]"] = rng.random(len(items))  # not what rouge_l would compute
    items["discoscore[model=y]"] = rng.random(len(items))
    path = tmp_path / "scored.jsonl"
    write_table(items, path)
    ranks = tmp_path / "ranks.json"
    ranks.write_text(json.dumps(load_dataset("self_instruct").system_human))
    out = _json(["meta", str(path), "--system-human", str(ranks), "--lower-is-better", "-m", "rouge_l",
                 "-m", "discoscore", *FAST, "--json"])
    cols = {c["name"]: c for c in out["columns"]}
    assert set(cols) == {"rouge_l[variant=x]", "discoscore[model=y]"}
    assert cols["rouge_l[variant=x]"]["higher_is_better"] is True
    assert cols["discoscore[model=y]"]["higher_is_better"] is False  # the metric's declared direction
    # the column's own values are used: system means of the random column
    means = items.groupby("system")["rouge_l[variant=x]"].mean()
    got = {r["system"]: r for r in out["systems"]}
    assert np.isclose(got["davinci"]["rouge_l[variant=x]"] if "rouge_l[variant=x]" in got["davinci"]
                      else next(v for k, v in got["davinci"].items() if k.startswith("rouge_l")), means["davinci"])
    # two candidate columns: one clear line naming them
    items["rouge_l[variant=z]"] = 0.5
    write_table(items, path)
    res = runner.invoke(app, ["meta", str(path), "--system-human", str(ranks), "-m", "rouge_l", *FAST])
    assert res.exit_code == 1 and "rouge_l[variant=x], rouge_l[variant=z]" in res.output


def test_report_from_dataset_alone(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", "--dataset", "tulu1:vicuna", "-m", "rouge_l", "--bootstrap", "20",
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    page = out.read_text(encoding="utf-8")
    assert "tulu1:vicuna" in page and "Item explorer" in page


def test_judge_dataset_variant_and_usage_errors(tmp_path: Path) -> None:
    base = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    res = runner.invoke(app, ["judge", "--dataset", "pandalm", "--concurrency", "0", *base])
    assert res.exit_code == 2 and "--concurrency must be an integer >= 1, got 0" in res.output
    res = runner.invoke(app, ["judge", "--dataset", "pandalm", "--mode", "pairwise", "--ranking", *base])
    assert res.exit_code == 2 and "--ranking applies to --mode absolute" in res.output
    res = runner.invoke(app, ["judge", "--dataset", "llmbar:nope", *base])
    assert res.exit_code == 1 and "llmbar:mt-bench" in res.output
    # an empty data folder: the processed MT-Bench subset is not there, and the error names the folder
    res = runner.invoke(app, ["judge", "--dataset", "llmbar:Processed/MT-Bench", "--data-dir", str(tmp_path),
                              "--mode", "pairwise", *base])
    assert res.exit_code == 1 and str(tmp_path) in " ".join(res.output.split()), res.output


def test_judge_reads_pairs_as_items_for_item_judges() -> None:
    from evalign.cli.dataset_options import dataset_table

    t = dataset_table("pandalm", as_="auto-items")
    assert len(t) == 2 * 999 and set(t["side"]) == {"a", "b"}
    assert isinstance(t, pd.DataFrame)
