"""Weak cases of the reliability round 3 (issue 23) in the meta and datasets commands: non-finite
scores and text scores are errors naming file, line and column; an all-empty human column is
named; ``datasets export -o -`` keeps stdout for the table."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.errors import InputError

runner = CliRunner()


def _rows() -> list[dict[str, Any]]:
    return [{"id": f"q{i}", "system": s, "response": "r", "rating": {"A": 5, "B": 3, "C": 1}[s],
             "score": {"A": 0.9, "B": 0.5, "C": 0.1}[s] + i / 1000} for i in range(12) for s in "ABC"]


def _csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _meta_error(path: Path) -> str:
    res = runner.invoke(app, ["meta", str(path), "--human", "rating", "-m", "score", "--bootstrap", "10",
                              "--permutations", "10"])
    assert res.exit_code == 1, (res.output, res.exception)
    text = " ".join(res.output.split())
    assert text.count("error:") == 1 and "Traceback" not in text and "this is a bug" not in text
    return text


@pytest.mark.parametrize("bad", [float("inf"), float("-inf")])
def test_infinite_scores_in_jsonl_name_line_and_column(tmp_path: Path, bad: float) -> None:
    rows = _rows()
    rows[4]["score"] = bad
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")  # Infinity / -Infinity
    assert "Infinity" in path.read_text()
    assert f"{path}, line 5, field 'score': must be a finite number, got {bad}" in _meta_error(path)


@pytest.mark.parametrize(("cell", "message"), [
    ("nan", "must be a finite number, got nan"),
    ("Infinity", "must be a finite number, got inf"),
    ("-inf", "must be a finite number, got -inf"),
    ("high", "must be a number, got 'high'"),
])
def test_bad_score_cells_in_csv_name_the_line(tmp_path: Path, cell: str, message: str) -> None:
    rows = _rows()
    rows[5]["score"] = cell
    path = _csv(tmp_path / "scored.csv", rows)
    assert f"{path}, line 7, field 'score': {message}" in _meta_error(path)  # the header is line 1


def test_an_all_empty_human_column_is_named(tmp_path: Path) -> None:
    rows = [{**r, "rating": ""} for r in _rows()]
    path = _csv(tmp_path / "scored.csv", rows)
    res = runner.invoke(app, ["meta", str(path), "--human", "rating", "-m", "score", "--bootstrap", "10",
                              "--permutations", "10"])
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert f"{path}: the human rating column 'rating' has no value on any row: nothing to compare with" in text
    assert "no value of score" not in text


def test_a_table_with_infinities_from_elsewhere_is_refused_by_the_arrays() -> None:
    from evalign.meta.breakdown import item_arrays

    table = pd.DataFrame(_rows())
    table.loc[7, "score"] = np.inf
    table.attrs["source"] = "frame"
    with pytest.raises(InputError) as e:
        item_arrays(table, "rating", ["score"])
    assert str(e.value) == "frame, row 8, field 'score': must be a finite number, got inf (id 'q2', system 'B')"


def test_export_to_stdout_keeps_stdout_for_the_table(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([sys.executable, "-m", "evalign", "datasets", "export", "self_instruct", "-o", "-"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2016 and all(json.loads(x)["id"] for x in lines)  # only the table
    assert "wrote - (2016 rows, items" in res.stderr
    assert "system-level human values are written beside an output file only" in res.stderr
    assert list(tmp_path.iterdir()) == []  # no '-.system_human.json' beside standard output
    res2 = runner.invoke(app, ["datasets", "export", "self_instruct", "-o", "-", "--json"])
    assert res2.exit_code == 2 and "--json: not with -o - (standard output carries the table)" in res2.output
