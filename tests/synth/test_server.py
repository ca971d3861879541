"""``evalign synth`` against the real llama.cpp server with a random-weight model: every generation is
garbage, every filter counts it, and nothing reaches the output."""

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
    assert run.exit_code == 0, run.output
    s = json.loads(run.stdout)
    f = s["filters"]
    # 2 brainstorm prompts: nothing parses (random text, or cut off at 24 tokens)
    assert f["rubric_unparseable"] == 2 and s["rubrics"] == 4  # only the 4 seeds remain
    # 4 instruction prompts, all garbage
    assert f["instruction_unparseable"] == 4 and s["instructions"] == 0
    assert sum(s["rejected"]["brainstorm"].values()) == 2 and sum(s["rejected"]["instruction"].values()) == 4
    assert s["rows"] == 0 and s["calls"]["new"] == 6 and f["backend_error"] == 0
    assert out.read_text() == ""  # nothing invalid reaches the output
    again = CliRunner().invoke(app, args)
    assert json.loads(again.stdout)["calls"] == {"total": 6, "cached": 6, "new": 0, "failed": 0}
