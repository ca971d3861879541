"""Round trips (issue 20): every table `evalign datasets export` writes (JSONL, CSV, Parquet) reads
back into `score`, `meta` and `report` with the same numbers as the dataset itself; an empty text
(PandaLM has empty responses) reads back as an empty text, never as missing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.io import read_items, read_pairs, write_table

FORMATS = ("jsonl", "csv", "parquet")
PREFS = ["--pref", "pref_1", "--pref", "pref_2", "--pref", "pref_3"]
FAST = ["--bootstrap", "20"]


def _run(args: list[str], cwd: Path) -> str:
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("roundtrip")


def _trust_values(evaluation: dict) -> list[tuple[str, str, float]]:
    return [(r["group"], r["metric"], r["value"]) for t in evaluation["trust"] for r in t["rows"]]


@pytest.mark.parametrize("fmt", FORMATS)
def test_pairs_as_items_read_back_into_score(work: Path, fmt: str) -> None:
    out = work / f"items.{fmt}"
    _run(["datasets", "export", "pandalm", "--as", "pairs-as-items", "-o", str(out)], work)
    table = read_items(out)
    assert len(table) == 1998 and int((table["response"] == "").sum()) == 54
    assert not table["response"].isna().any()
    scored = work / f"scored_{fmt}.jsonl"
    _run(["score", str(out), "-m", "bleu", "-m", "exact_match", "-o", str(scored)], work)
    direct = work / "scored_dataset.jsonl"
    if not direct.exists():
        _run(["score", "--dataset", "pandalm", "-m", "bleu", "-m", "exact_match", "-o", str(direct)], work)
    key = ["id", "system", "side"]
    a = pd.read_json(scored, lines=True, dtype=False).sort_values(key).reset_index(drop=True)
    b = pd.read_json(direct, lines=True, dtype=False).sort_values(key).reset_index(drop=True)
    assert a[key].equals(b[key])
    assert a["bleu"].tolist() == b["bleu"].tolist() and a["exact_match"].tolist() == b["exact_match"].tolist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_pairs_read_back_into_meta_and_report(work: Path, fmt: str) -> None:
    out = work / f"pairs.{fmt}"
    _run(["datasets", "export", "pandalm", "--as", "pairs", "-o", str(out)], work)
    pairs = read_pairs(out, pref=["pref_1", "pref_2", "pref_3"])
    assert int((pairs["response_a"] == "").sum() + (pairs["response_b"] == "").sum()) == 54
    cols = ["-m", "bleu", "-m", "judge:gpt-3.5-turbo"]
    meta = json.loads(_run(["meta", str(out), *PREFS, *cols, *FAST, "--permutations", "20", "--json"], work))
    ref = json.loads(_run(["meta", "--dataset", "pandalm", *cols, *FAST, "--permutations", "20", "--json"], work))
    assert _trust_values(meta) == _trust_values(ref)
    assert meta["overview"] == ref["overview"]
    rep = json.loads(_run(["report", str(out), *PREFS, "-m", "bleu", *FAST, "-o", str(work / f"r_{fmt}.html"),
                           "--json"], work))
    rep_ref = json.loads(_run(["report", "--dataset", "pandalm", "-m", "bleu", *FAST, "-o",
                               str(work / "r_dataset.html"), "--json"], work))
    assert _trust_values(rep["evaluation"]) == _trust_values(rep_ref["evaluation"])


def test_csv_tells_an_empty_text_from_a_missing_value(tmp_path: Path) -> None:
    df = pd.DataFrame({"id": ["1", "2", "3", "4"], "system": ["s"] * 4,
                       "response": ["", 'say ""hi"",\n""', "x", ""], "reference": ["r", "r", "", None]})
    for fmt in ("csv", "tsv"):
        write_table(df, tmp_path / f"t.{fmt}")
        back = read_items(tmp_path / f"t.{fmt}")
        assert back["response"].tolist() == df["response"].tolist()
        assert back["reference"].tolist()[:3] == ["r", "r", ""] and back["reference"].isna().tolist()[3]
    text = (tmp_path / "t.csv").read_text(encoding="utf-8")
    assert text.splitlines()[1] == '1,s,"",r' and text.splitlines()[-1] == '4,s,"",'


@pytest.mark.parametrize("fmt", FORMATS)
def test_items_read_back_into_meta(work: Path, fmt: str) -> None:
    out = work / f"tulu.{fmt}"
    _run(["datasets", "export", "tulu1", "-o", str(out)], work)
    cols = ["--human", "acceptable", "-m", "rouge_l", *FAST, "--permutations", "20", "--json"]
    meta = json.loads(_run(["meta", str(out), *cols], work))
    ref = json.loads(_run(["meta", "--dataset", "tulu1", *cols], work))
    # the human ceiling needs the dataset's annotator columns, which a file does not declare
    assert _trust_values(meta) == [v for v in _trust_values(ref) if v[1] != "human_ceiling"]
    assert meta["n_items"] == ref["n_items"] == 262 and meta["overview"] == ref["overview"]
