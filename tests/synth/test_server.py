"""``evalign synth`` against the real llama.cpp server with a random-weight model: every generation is
garbage, every filter counts it, nothing reaches the output, and the run fails saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalign.cli import app


@pytest.mark.server
@pytest.mark.slow
def test_synth_with_random_llama_server(synth_llama_server, tmp_path: Path) -> None:
    llama_server = synth_llama_server
    out = tmp_path / "fc.jsonl"
    args = ["synth", "-o", str(out), "--backend", "openai", "--base-url", llama_server.base_url, "--model",
            llama_server.model, "--rounds", "1", "--rubrics-per-round", "2", "--include-seed-rubrics",
            "--seed-rubric", "helpfulness", "--seed-rubric", "honesty", "--seed-rubric", "harmlessness",
            "--seed-rubric", "reasoning", "--instructions-per-rubric", "1", "--max-tokens", "24", "--json"]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 1, run.output  # nothing useful: an error with the reason, the summary still printed
    # the error line (the cache's "created" notice may follow it)
    assert " ".join(run.stderr.split()).startswith(
        f"error: no training row to write, {out} not written: no instruction was kept for the 4 rubrics (4 "
        f"unparseable, 0 near-duplicates, 0 failed calls) (the counts are in {out}.summary.json)")
    s = json.loads(run.stdout)
    assert s == json.loads(Path(f"{out}.summary.json").read_text()) and s["out"] is None
    f = s["filters"]
    # 2 brainstorm prompts: nothing parses (random text, or cut off at 24 tokens)
    assert f["rubric_unparseable"] == 2 and s["rubrics"] == 4  # only the 4 seeds remain
    # 4 instruction prompts, all garbage
    assert f["instruction_unparseable"] == 4 and s["instructions"] == 0
    assert sum(s["rejected"]["brainstorm"].values()) == 2 and sum(s["rejected"]["instruction"].values()) == 4
    assert s["rows"] == 0 and s["calls"]["new"] == 6 and f["backend_error"] == 0
    assert not out.exists()  # no empty training file
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 1, again.output
    assert json.loads(again.stdout)["calls"] == {"total": 6, "cached": 6, "new": 0, "failed": 0}


def test_synth_rounds_0_without_seed_rubrics_is_refused_before_any_call(tmp_path: Path) -> None:
    out = tmp_path / "fc.jsonl"
    run = CliRunner().invoke(app, ["synth", "-o", str(out), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                                   "--rounds", "0"])
    assert run.exit_code == 1, run.output
    assert " ".join(run.stderr.split()) == (
        "error: nothing to generate: rounds=0 x rubrics_per_round=4 brainstorms no rubric and include_seed_rubrics "
        "is off (give --rounds >= 1 or --include-seed-rubrics)")
    assert not out.exists() and not Path(f"{out}.summary.json").exists()
