"""`evalign score` and `evalign metrics` end to end, and the CLI's handling of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import sacrebleu
from rouge_score import rouge_scorer
from typer.testing import CliRunner

from evalign.cli import app
from evalign.datasets import load_dataset
from evalign.io import read_items, write_table

runner = CliRunner()


@pytest.fixture(scope="module")
def bundled_jsonl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    items = load_dataset("self_instruct").items
    assert items is not None
    path = tmp_path_factory.mktemp("data") / "self_instruct.jsonl"
    write_table(items, path)
    return path


def test_score_bundled_end_to_end(bundled_jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored.parquet"
    sys_out = tmp_path / "systems.csv"
    res = runner.invoke(app, ["score", str(bundled_jsonl), "-m", "rouge_l", "-m", "bleu,chrf", "-o", str(out),
                              "--system-out", str(sys_out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["items"] == 2016 and len(summary["systems"]) == 8
    scored = read_items(out, human=["rouge_l", "bleu", "chrf"])
    assert len(scored) == 2016
    # every input column kept, one column per metric added
    assert {"id", "system", "instruction", "input", "reference", "response", "task"} <= set(scored.columns)
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    for row in scored.sample(50, random_state=0).itertuples():
        assert row.rouge_l == scorer.score(row.reference, row.response)["rougeL"].fmeasure
    # system-level BLEU is sacrebleu's corpus BLEU over the system's items
    sys_df = pd.read_csv(sys_out).rename(columns={"system": "id"})
    best = scored[scored["system"] == "text-davinci-003"]
    corpus = sacrebleu.corpus_bleu(best["response"].tolist(), [best["reference"].tolist()]).score
    assert sys_df.set_index("id").loc["text-davinci-003", "bleu"] == pytest.approx(corpus, abs=1e-9)
    for r in summary["metrics"]:
        assert r["signature"].startswith(r["name"]) and "evalign:" in r["signature"]


def test_field_mapping_options(tmp_path: Path) -> None:
    src = tmp_path / "x.csv"
    src.write_text("qid,model,output,gold\n1,m1,the cat sat,the cat sat\n2,m1,a dog,the cat\n", encoding="utf-8")
    out = tmp_path / "o.jsonl"
    res = runner.invoke(app, ["score", str(src), "-m", "exact_match", "--id-field", "qid", "--system-field", "model",
                              "--response-field", "output", "--reference-field", "gold", "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["exact_match"] for r in rows] == [1.0, 0.0]
    assert rows[0]["response"] == "the cat sat" and rows[0]["reference"] == "the cat sat" and rows[0]["system"] == "m1"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": 1, "system": "a", "response": "x", "reference": "y"}\n{"id": 2, "system": "a", "response": \n',
         "line 2 column 38: malformed JSON"),
        ('{"id": 1, "system": "a", "response": "x"}\n', "line 1, field 'reference': missing"),
        ('{"id": 1, "system": "a", "response": ["x"], "reference": "y"}\n', "line 1, field 'response': must be a string"),
        ('{"id": 1, "system": "a", "response": "x", "reference": "y"}\n{"id": 1, "system": "a", "response": "z", "reference": "y"}\n',
         "line 2, field 'id': duplicate"),
    ],
)
def test_bad_input_is_one_clear_line_and_no_output(tmp_path: Path, content: str, message: str) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text(content, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["score", str(src), "-m", "rouge_l", "-o", str(out)])
    assert res.exit_code == 1
    text = " ".join(res.output.split())
    assert text.startswith("error:") and str(src) in text and message in text
    assert "Traceback" not in res.output
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_unknown_metric_and_debug_traceback(bundled_jsonl: Path) -> None:
    res = runner.invoke(app, ["score", str(bundled_jsonl), "-m", "nope"])
    assert res.exit_code == 2 and "unknown metric 'nope'" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["--debug", "score", str(bundled_jsonl), "-m", "nope"])
    assert res.exit_code != 0 and res.exception is not None


def test_metrics_listing() -> None:
    res = runner.invoke(app, ["metrics", "--json"])
    assert res.exit_code == 0, res.output
    listed = {m["metric"]: m for m in json.loads(res.stdout)}
    assert {"bleu", "chrf", "rouge_l", "exact_match", "semscore", "bertscore", "bartscore", "pooled_similarity"} <= set(listed)
    assert listed["rouge_l"]["higher_is_better"] is True
    assert all(m["description"] for m in listed.values())


def test_error_text_with_brackets_is_printed_verbatim(bundled_jsonl: Path) -> None:
    res = runner.invoke(app, ["score", str(bundled_jsonl), "-m", "semscore[model=x]"])
    assert res.exit_code == 2
    assert "unknown metric 'semscore[model=x]'" in " ".join(res.output.split())


def test_stdin_to_stdout_and_options_applied() -> None:
    rows = [{"id": i, "system": "s", "response": "the cat sat", "reference": "the cat sat down"} for i in range(3)]
    res = runner.invoke(app, ["score", "-", "-m", "chrf", "--option", "chrf.char_order=4", "-o", "-"],
                        input="".join(json.dumps(r) + "\n" for r in rows))
    assert res.exit_code == 0, res.output
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(out) == 3
    assert out[0]["chrf"] == pytest.approx(sacrebleu.CHRF(char_order=4).sentence_score("the cat sat", ["the cat sat down"]).score)


def test_skip_invalid_counted_in_summary(tmp_path: Path) -> None:
    src = tmp_path / "x.csv"
    src.write_text("id,system,response,reference\n1,a,x,x\n2,a,,y\n3,a,z,\n4,a,w,w\n", encoding="utf-8")
    res = runner.invoke(app, ["score", str(src), "-m", "exact_match", "--skip-invalid", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["items"] == 2 and summary["skipped"] == 2
    assert "line 3, field 'response': missing" in summary["skipped_rows"][0]
    assert "line 4, field 'reference': missing" in summary["skipped_rows"][1]
    assert summary["systems"][0]["exact_match"] == 1.0


def test_metric_options_listing() -> None:
    res = runner.invoke(app, ["metrics", "--options", "--json"])
    assert res.exit_code == 0, res.output
    rows = {(r["metric"], r["option"]): r for r in json.loads(res.stdout)}
    assert rows[("chrf", "char_order")]["values"] == "an integer >= 1"
    assert ("semscore", "cache") not in rows  # Python-only options are not listed
