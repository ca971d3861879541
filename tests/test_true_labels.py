"""Labels that are true (issue 20, item 6): integers print as integers, model-graded labels are named by
their grader, a breakdown's n counts the items with a label and a score, no path of this machine in a
signature or a note, and the same flag means the same thing in `meta` and `report`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.datasets import load_dataset_spec
from evalign.datasets.base import bundled_path
from evalign.evaluate import baselines as B
from evalign.evaluate import guards as G
from evalign.evaluate.spec import Human
from evalign.meta.breakdown import breakdown
from evalign.report.build import _relative
from evalign.report.data import ReportData
from evalign.report.tables import format_results, leaderboard_display
from evalign.scoring import score

runner = CliRunner()
FAST = ["--bootstrap", "20", "--permutations", "20"]


def test_ranks_clusters_and_counts_print_as_integers() -> None:
    rows = pd.DataFrame({"rank": [1.0, 2.0, np.nan], "cluster": [1.0, 2.0, np.nan], "n": [120.0, 120.0, 120.0],
                         "metric": ["a", "b", "random"], "value": [0.51234, 0.4, 0.333]})
    out = format_results(rows)
    assert list(out["rank"]) == ["1", "2", "-"] and list(out["cluster"]) == ["1", "2", "-"]
    assert list(out["n"]) == ["120"] * 3 and list(out["value"]) == ["0.512", "0.400", "0.333"]


def test_model_grades_are_named_by_their_grader() -> None:
    gpt4 = Human(column="gpt4_score", source="model", label="GPT-4 grades")
    assert gpt4.rater == "GPT-4" and Human(column="h").rater == "human"
    defs = B.definitions("pairwise_accuracy", True, gpt4.rater)
    assert defs["always_tie"] == "calls every pair a tie (its accuracy is the share of GPT-4 ties)"
    assert "annotator" not in defs["human_ceiling"] and "GPT-4 grade" in defs["human_ceiling"]
    (w,) = G.tie_warnings({"m": 0.95}, {"m": 0.1}, gpt4.rater)
    assert w.endswith("counts the GPT-4 ties")
    lb = pd.DataFrame({"system": ["a", "b"], "gpt4": [4.0, 3.0], "bleu": [10.0, 12.0]})
    data = ReportData(leaderboard=lb, human_system_col="gpt4", metric_cols=["bleu"], labels="GPT-4 grades",
                      rater="GPT-4")
    assert list(leaderboard_display(data).columns) == ["system", "GPT-4 (gpt4)", "GPT-4 rank", "bleu"]


def test_meta_on_gpt4_grades_says_gpt4_not_human() -> None:
    res = runner.invoke(app, ["meta", "--dataset", "prometheus_vicuna", "-m", "rouge_l", *FAST, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = out["trust"][0]["rows"]
    tie = next(r for r in rows if r["metric"] == "always_tie")
    assert tie["definition"] == "calls every pair a tie (its accuracy is the share of GPT-4 ties)"
    ceiling = next(r for r in rows if r["metric"] == "human_ceiling")
    assert "GPT-4 grade" in ceiling["definition"]
    assert not any("human ties" in w for w in out["warnings"])
    text = runner.invoke(app, ["meta", "--dataset", "prometheus_vicuna", "-m", "rouge_l", *FAST],
                         env={"COLUMNS": "200"}).output
    assert "GPT-4_tie_rate" in text and "human_tie_rate" not in text and "human ties" not in text


def test_breakdown_n_counts_items_with_a_label_and_a_score() -> None:
    """Tulu-1: 332 prompts, but only 262 have a reference (252 Self-Instruct, 10 Vicuna): a reference
    metric scores only those, and the breakdown's n says so (it said 332 / 80)."""
    items = score(load_dataset_spec("tulu1").items, ["rouge_l"])[0]
    b = breakdown(items, human="acceptable", metrics=["rouge_l"], by="task", wide=False)
    assert dict(zip(b["group"], b["n"], strict=True)) == {"(all)": 262, "self_instruct": 252, "vicuna": 10}
    scored = items.dropna(subset=["rouge_l", "acceptable"])
    assert scored.groupby("task")["id"].nunique().to_dict() == {"self_instruct": 252, "vicuna": 10}


def test_no_path_of_this_machine_in_signatures_and_notes() -> None:
    from evalign.backends.models import bundled_minilm_path
    from evalign.metrics import get_metric

    path = bundled_minilm_path()
    assert path is not None and os.path.isabs(str(path))
    sig = str(get_metric("semscore", model=str(path)).signature())
    assert sig.startswith("semscore|model:all-MiniLM-L6-v2|model_id:") and str(path) not in sig
    note = "run `evalign score -m bertscore --option bertscore.model=/path/to/model` where you have them"
    assert _relative(note) == note  # an example command is kept as written (it was mangled to to/model)
    home = str(Path.home())
    assert _relative(f"cache in {home}/.cache/evalign/x.sqlite") == "cache in evalign/x.sqlite"


def test_lower_is_better_flags_mean_the_same_in_meta_and_report(tmp_path: Path) -> None:
    ranks = str(bundled_path("self_instruct", "human_system_ranking.json"))
    items = load_dataset_spec("self_instruct").items.assign(length=lambda d: d["response"].str.len().astype(float))
    path = tmp_path / "si.jsonl"
    items.to_json(path, orient="records", lines=True)

    def meta(*flags: str) -> dict:
        res = runner.invoke(app, ["meta", str(path), "--system-human", ranks, *flags, "-m", "length", *FAST,
                                  "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    def report(*flags: str) -> dict:
        res = runner.invoke(app, ["report", str(path), "--system-human", ranks, *flags, "-m", "length",
                                  "--bootstrap", "20", "-o", str(tmp_path / "r.html"), "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["evaluation"]

    def kendall(out: dict, name: str = "length") -> float:
        return next(r["value"] for r in out["trust"][0]["rows"] if r["metric"] == name)

    k = kendall(meta("--lower-is-better"))
    assert kendall(meta("--human-lower-is-better")) == k
    assert kendall(report("--human-lower-is-better")) == pytest.approx(k)
    assert kendall(report("--lower-is-better")) == pytest.approx(k)  # the human switch, as in meta
    assert kendall(report("--lower-is-better", "--metric-lower-is-better", "length")) == pytest.approx(-k)
    assert kendall(meta("--lower-is-better", "--metric-lower-is-better", "length")) == pytest.approx(-k)
    res = runner.invoke(app, ["report", str(path), "--system-human", ranks, "--lower-is-better", "length", "-m",
                              "length", "-o", str(tmp_path / "r.html")])
    assert res.exit_code != 0  # a metric name after the switch is no longer taken
