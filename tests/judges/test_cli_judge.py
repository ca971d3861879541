"""``evalign judge`` against the real llama.cpp server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app

ABS_GRAMMAR = 'root ::= "Feedback: " [a-z ]{5,40} " [RESULT] " [1-5]'
PAIR_GRAMMAR = 'root ::= "Feedback: " [a-z ]{5,30} " [RESULT] " ("A" | "B")'


def write_items(path: Path, n: int = 5) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({
                "id": f"q{i}", "system": "sys", "instruction": f"Name a colour ({i}).",
                "reference": "Blue.", "response": "Red " * (i + 1), "human": 1 + i % 2,
            }) + "\n")  # fmt: skip
    return path


def write_pairs(path: Path, n: int = 3) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({
                "id": i, "instruction": f"Say hello ({i}).", "system_a": "x", "system_b": "y",
                "response_a": "Hello!", "response_b": "Hi there " * (i + 1),
            }) + "\n")  # fmt: skip
    return path


@pytest.mark.server
def test_absolute_run_writes_table_summary_and_reports(llama_server, fault_proxy, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-SECRET-4f9d2"
    monkeypatch.setenv("EVALIGN_JUDGE_KEY", secret)
    src = write_items(tmp_path / "items.jsonl")
    grammar = tmp_path / "g.gbnf"
    grammar.write_text(ABS_GRAMMAR)
    out = tmp_path / "judged.jsonl"
    args = ["judge", str(src), "--mode", "absolute", "--rubric", "honesty", "--base-url", fault_proxy.base_url,
            "--model", llama_server.model, "--api-key-env", "EVALIGN_JUDGE_KEY", "--grammar", str(grammar),
            "--max-tokens", "96", "--seed", "3", "--samples", "2", "--human", "human", "-o", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "Bias audit" in res.output and "Score distribution" in res.output
    assert "Spearman score vs length | human = 1" in res.output
    table = pd.read_json(out, lines=True)
    col = "prometheus_absolute[honesty]"
    assert (table[f"{col}.status"] == "scored").all() and table[f"{col}.n"].tolist() == [2] * 5
    summary = json.loads((tmp_path / "judged.jsonl.summary.json").read_text())
    assert summary["scored"] == 5 and summary["calls"]["new"] == 10
    assert "rubric:honesty#" in summary["signature"] and "samples:2" in summary["signature"]
    assert not (tmp_path / "judged.jsonl.partial.jsonl").exists()
    # the key went to the server, and nowhere else
    assert {s.authorized for s in fault_proxy.seen if s.path.endswith("/chat/completions")} == {f"Bearer {secret}"}
    cache_dir = Path(os.environ["EVALIGN_CACHE"]).parent
    for f in [*cache_dir.iterdir(), *tmp_path.iterdir()]:
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f
    assert secret not in res.output

    # the same command again: everything from the cache
    fault_proxy.reset()
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    again = json.loads(res.stdout)
    assert again["calls"]["cached"] == 10 and again["calls"]["new"] == 0
    assert [s for s in fault_proxy.seen if s.path.endswith("/chat/completions")] == []
    # --no-cache: every call anew
    res = CliRunner().invoke(app, [*args, "--json", "--no-cache"])
    assert json.loads(res.stdout)["calls"]["new"] == 10


@pytest.mark.server
def test_gibberish_summary_counts_unscored_by_reason(llama_server, tmp_path: Path) -> None:
    src = write_items(tmp_path / "items.jsonl", n=4)
    res = CliRunner().invoke(app, ["judge", str(src), "--mode", "criteria", "--no-reference", "--base-url",
                                   llama_server.base_url, "--model", llama_server.model, "--max-tokens", "24",
                                   "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["unscored"] == 4 and sum(s["unscored_by_reason"].values()) == 4
    assert set(s["unscored_by_reason"]) <= {"truncated", "invalid_json", "empty"}
    assert "reference:no" in s["signature"] and "template:criteria@2-noref#" in s["signature"]


@pytest.mark.server
def test_pairwise_file_and_dataset(llama_server, tmp_path: Path) -> None:
    src = write_pairs(tmp_path / "pairs.jsonl")
    grammar = tmp_path / "g.gbnf"
    grammar.write_text(PAIR_GRAMMAR)
    out = tmp_path / "pairs_judged.csv"
    base = ["--base-url", llama_server.base_url, "--model", llama_server.model, "--grammar", str(grammar),
            "--max-tokens", "96", "--seed", "1"]
    res = CliRunner().invoke(app, ["judge", str(src), "--mode", "pairwise", *base, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "position_agreement" in res.output and "prefers_first" in res.output
    t = pd.read_csv(out)
    col = "prometheus_relative"  # no --rubric: not named after the default rubric
    assert set(t[f"{col}.ab"]) <= {"A", "B"} and set(t[col]) <= {"A", "B", "tie"}
    res = CliRunner().invoke(app, ["judge", "--dataset", "pandalm", "--mode", "pairwise", "--limit", "2", *base,
                                   "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["items"] == 2 and s["calls"]["new"] == 4 and s["bias"]["order_swap"]["n_pairs"] == 2


def test_errors_are_one_line(tmp_path: Path) -> None:
    src = write_items(tmp_path / "items.jsonl", n=2)
    bad = tmp_path / "rubric.yaml"
    bad.write_text("criteria: Is it polite?\nscore1: a\nscore2: b\nscore3: c\nscore5: e\n")
    proc = subprocess.run(
        [sys.executable, "-c", "from evalign.cli import main; main()", "judge", str(src), "--rubric", str(bad),
         "--base-url", "http://127.0.0.1:9/v1", "--model", "m"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    err = " ".join(proc.stderr.split())
    assert f"{bad}, field 'score4_description': missing or empty description of score 4" in err
    assert "Traceback" not in proc.stderr
    res = CliRunner().invoke(app, ["judge", str(src), "--model", "m"])
    assert res.exit_code == 1 and "--base-url is required" in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["judge", str(src), "--mode", "geval", "--rubric", "honesty", "--base-url",
                                   "http://127.0.0.1:9/v1", "--model", "m"])
    assert res.exit_code == 1 and "does not use a rubric" in res.output
    res = CliRunner().invoke(app, ["judge", str(src), "--length-unit", "tokens", "--base-url",
                                   "http://127.0.0.1:9/v1", "--model", "m"])
    assert res.exit_code == 1 and "--length-unit must be one of chars, words" in res.output
