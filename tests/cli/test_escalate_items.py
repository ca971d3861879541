"""``evalign escalate`` on an item table (a graded judge's grades with ``J.p``): the decided items carry
the grade as verdict, the items left for people are an item table that ``read_items`` and ``evalign
annotate`` read (graded task), and ``--audit`` adds a seeded random share of the decided items, marked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from evalign.annotate.items import read_items_to_label
from evalign.annotate.store import Store, StoreSettings
from evalign.cli import app
from evalign.io import read_items

runner = CliRunner()


def _items(n: int = 400, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, n).astype(float)
    p = rng.uniform(0.3, 1.0, n)
    grade = np.where(rng.uniform(size=n) < p, human, np.clip(human + rng.choice([-1, 1], n), 1, 5))
    return pd.DataFrame({"id": [f"i{k}" for k in range(n)], "system": "s", "instruction": [f"q{k}" for k in range(n)],
                         "response": [f"r{k}" for k in range(n)], "human": human, "judge:g": grade, "judge:g.p": p})


def test_escalate_item_table_to_people_and_audit(tmp_path: Path) -> None:
    t = _items()
    path = tmp_path / "items.jsonl"
    t.to_json(path, orient="records", lines=True)
    cal = tmp_path / "cal.json"
    res = runner.invoke(app, ["meta", str(path), "--human", "human", "-m", "judge:g", "--grouping", "none",
                              "--bootstrap", "20", "--permutations", "20", "--selective", "--risk", "0.2",
                              "--save-calibration", str(cal)])
    assert res.exit_code == 0, res.output
    th = json.loads(cal.read_text())["judges"][0]["threshold"]
    assert th is not None and 0 < th < 1
    out, rest = tmp_path / "decided.jsonl", tmp_path / "people.jsonl"
    res = runner.invoke(app, ["escalate", str(cal), str(path), "-o", str(out), "--rest", str(rest), "--audit", "0.1",
                              "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    takes = t["judge:g.p"] >= th
    assert summary["table"] == "items" and summary["decided"] == {"judge:g": int(takes.sum())}
    decided = pd.read_json(out, lines=True)
    assert decided["id"].tolist() == t["id"][takes].tolist()
    assert decided["verdict"].tolist() == t["judge:g"][takes].tolist()  # the grade given
    assert (decided["decided_by"] == "judge:g").all()
    people = read_items(rest)  # an item table: what read_items reads
    n_audit = round(0.1 * int(takes.sum()))
    assert len(people) == int((~takes).sum()) + n_audit and summary["audit"] == n_audit
    assert people[~people["audit"]]["id"].tolist() == t["id"][~takes].tolist()
    audited = people[people["audit"]]
    assert set(audited["id"]) <= set(decided["id"]) and audited["reason"].str.startswith("audit").all()
    assert "judge:g" not in people.columns and "human" not in people.columns  # the judge's verdict is not shown
    items = read_items_to_label(rest, "graded")  # what evalign annotate reads
    assert [i.view["response"] for i in items] == people["response"].tolist()
    store = Store(tmp_path / "labels.sqlite")
    store.initialise(items, StoreSettings(task="graded"))
    store.close()
    again = tmp_path / "again.jsonl"
    res = runner.invoke(app, ["escalate", str(cal), str(path), "-o", str(tmp_path / "d2.jsonl"), "--rest", str(again),
                              "--audit", "0.1", "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert read_items(again)["id"].tolist() == people["id"].tolist()  # the audit draw is seeded
    assert "judge:g: decided" in res.output and "decided items drawn for audit" in res.output
