"""A pair judge's output file goes into `evalign meta` as written: its verdict column is ranked in
preference accuracy beside the metrics' baselines, an unparseable verdict counts as wrong."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
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


def test_both_orders_give_the_order_diagnostics_in_meta_and_in_the_judge_summary(tmp_path: Path) -> None:
    """A scripted judge run in both orders: pairs 0 mod 3 always get the first-shown response; the
    others the right one, except that pairs 2 mod 3 get no verdict when B is shown first."""
    n = 30
    rows = [{"id": i, "instruction": f"Explain idea {i}.", "input": "", "reference": f"Idea {i}.",
             "system_a": "alpha", "system_b": "beta", "response_a": f"alpha-answer-{i}.",
             "response_b": f"beta-answer-{i}.", "pref": 1 if i % 2 == 0 else -1} for i in range(n)]
    table = read_pairs(pd.DataFrame(rows), pref=["pref"])

    def answer(req: object) -> str:
        text = req.messages[-1]["content"]  # type: ignore[attr-defined]
        i = int(re.search(r"Explain idea (\d+)\.", text).group(1))  # type: ignore[union-attr]
        a_first = text.index(f"alpha-answer-{i}.") < text.index(f"beta-answer-{i}.")
        if i % 3 == 0:
            return "Feedback: first. [RESULT] A"
        if i % 3 == 2 and not a_first:
            return "no idea"
        right_is_alpha = i % 2 == 0
        return "Feedback: ok. [RESULT] " + ("A" if right_is_alpha == a_first else "B")

    judge = get_judge("pairwise", both_orders=True, column="judge:scripted")
    run = run_judge(table, judge, ScriptedBackend(answer), cache=Cache(tmp_path / "c.sqlite"))
    gold = ["A" if i % 2 == 0 else "B" for i in range(n)]
    ab = ["A" if i % 3 == 0 else gold[i] for i in range(n)]
    ba = ["B" if i % 3 == 0 else None if i % 3 == 2 else gold[i] for i in range(n)]
    t = run.table
    assert t["judge:scripted.ab"].tolist() == ab
    assert [v if isinstance(v, str) else None for v in t["judge:scripted.ba"]] == ba
    # by hand (alpha's response is always the longer one)
    ok_ab = [x == g for x, g in zip(ab, gold, strict=True)]
    ok_ba = [x == g for x, g in zip(ba, gold, strict=True)]
    decided = [(x, 0) for x in ab] + [(x, 1) for x in ba if x is not None]
    want = {
        "accuracy_original": sum(ok_ab) / n,
        "accuracy_swapped": sum(ok_ba) / n,
        "accuracy_mean": (sum(ok_ab) + sum(ok_ba)) / (2 * n),
        "accuracy_both": sum(x and y for x, y in zip(ok_ab, ok_ba, strict=True)) / n,
        "position_agreement": sum(x == y for x, y in zip(ab, ba, strict=True)) / n,
        "prefers_first": sum((x == "A") if o == 0 else (x == "B") for x, o in decided) / len(decided),
        "prefers_longer": sum(x == "A" for x, _ in decided) / len(decided),
    }
    assert want["accuracy_original"] == 25 / 30 and want["accuracy_swapped"] == 15 / 30
    assert want["accuracy_both"] == 10 / 30 and want["position_agreement"] == 10 / 30
    swap = run.summary["bias"]["order_swap"]
    assert swap["position_agreement"] == pytest.approx(want["position_agreement"])
    assert swap["prefers_first"] == pytest.approx(want["prefers_first"])
    length = run.summary["bias"]["length"]
    assert length["prefers_longer"] == pytest.approx(want["prefers_longer"])

    out = tmp_path / "judged.jsonl"
    write_table(run.table, out)
    res = CliRunner().invoke(app, ["meta", str(out), "--pref", "pref", "-m", "judge:*", "--bootstrap", "30",
                                   "--permutations", "30", "--json"])
    assert res.exit_code == 0, res.output
    rows_out = {r["metric"]: r for r in json.loads(res.stdout)["trust"][0]["rows"]}
    row = rows_out["judge:scripted"]
    assert row["value"] == pytest.approx(want["accuracy_both"])  # the ranked verdict: both orders right
    for k, v in want.items():
        assert row[k] == pytest.approx(v), k
    assert rows_out["always_a"]["accuracy_both"] is None  # baselines carry no diagnostics
