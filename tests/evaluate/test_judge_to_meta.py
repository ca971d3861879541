"""A pair judge's output file goes into `evalign meta` as written: its verdict column is ranked in
preference accuracy beside the metrics' baselines, an unparseable verdict counts as wrong."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from evalign.cache import Cache
from evalign.cli import app
from evalign.io import read_pairs, write_table
from evalign.judges import get_judge, run_judge

sys.path.insert(0, str(Path(__file__).parents[1] / "judges"))
from test_runner import ScriptedBackend


def test_pair_judge_output_is_ranked_by_meta(tmp_path: Path) -> None:
    n = 60
    rows = [{"id": i, "instruction": f"Explain idea {i}.", "input": "", "reference": f"Idea {i}.",
             "system_a": "alpha", "system_b": "beta", "response_a": f"a{i}", "response_b": f"b{i}",
             "pref": 1 if i % 2 == 0 else -1} for i in range(n)]
    table = read_pairs(pd.DataFrame(rows), pref=["pref"])

    def answer(req: object) -> str:
        i = int(re.search(r"Explain idea (\d+)\.", req.messages[-1]["content"]).group(1))  # type: ignore[attr-defined]
        return {0: "Feedback: A is better. [RESULT] A", 1: "Feedback: B is better. [RESULT] B", 2: "no idea"}[i % 3]

    judge = get_judge("pairwise", both_orders=False, column="judge:scripted")
    run = run_judge(table, judge, ScriptedBackend(answer), cache=Cache(tmp_path / "c.sqlite"))
    out = tmp_path / "judged.jsonl"
    write_table(run.table, out)
    verdicts = run.table["judge:scripted"].tolist()
    assert verdicts[:3] == ["A", "B", "unparseable"]

    res = CliRunner().invoke(app, ["meta", str(out), "--pref", "pref", "-m", "judge:scripted", "--bootstrap", "50",
                                   "--permutations", "50", "--json"])
    assert res.exit_code == 0, res.output
    rows_out = {r["metric"]: r for r in json.loads(res.stdout)["trust"][0]["rows"]}
    judge_row = rows_out["judge:scripted"]
    # by hand: A is right on even ids, B on odd ids; every third pair has no verdict (wrong)
    correct = sum((i % 3 == 0 and i % 2 == 0) or (i % 3 == 1 and i % 2 == 1) for i in range(n))
    assert judge_row["kind"] == "judge" and judge_row["n"] == n
    assert judge_row["value"] == correct / n and judge_row["n_unparseable"] == n // 3
    assert judge_row["accuracy_parsed"] == correct / (n - n // 3)
    # the labels are +1 / -1 only: the random predictor chooses A or B
    assert rows_out["always_a"]["value"] == 0.5 and rows_out["random"]["value"] == 0.5
