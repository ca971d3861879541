"""The whole loop: scripted teacher -> synth -> train-judge (tiny model) -> verify on a bundled human set
(BIG-bench HHH pairs), printing the before/after trust table."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from scripted_teacher import ScriptedTeacher
from typer.testing import CliRunner

from evalign.cache import Cache
from evalign.cli import app
from evalign.io import write_table
from evalign.synth import SynthSettings, load_seed_rubrics, run_synth


@pytest.mark.slow
def test_synth_train_verify(tiny_llama: Callable[..., Path], tmp_path: Path) -> None:
    settings = SynthSettings(rounds=1, rubrics_per_round=4, instructions_per_rubric=5, relative=True,
                             max_pairs_per_instruction=4)
    res = run_synth(load_seed_rubrics(), ScriptedTeacher(feedback_words=0), settings, cache=Cache(tmp_path / "c.sqlite"))
    print("synth summary:", json.dumps({k: v for k, v in res.summary.as_dict().items()
                                        if k in ("rubrics", "instructions", "rows", "relative_rows", "filters",
                                                 "length_by_score")}, indent=1))
    data = tmp_path / "feedback.jsonl"
    write_table(res.table, data)
    out = tmp_path / "judge"
    args = ["train-judge", str(data), "--base-model", str(tiny_llama(None)), "-o", str(out), "--max-steps", "50",
            "--lr", "8e-3", "--no-lora", "--batch-size", "4", "--grad-accum", "1", "--device", "cpu",
            "--save-steps", "1000", "--eval-dataset", "hhh", "--eval-limit", "12", "--eval-max-tokens", "64",
            "--eval-single-order", "--json"]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    payload = json.loads(run.stdout[run.stdout.index("{"):])
    losses = [v for _, v in payload["losses"]]
    assert payload["global_step"] == 50 and losses[-1] < 0.2 * losses[0]
    # progress on stderr at the first step and every --logging-steps (10), with tokens/s and the ETA, while
    # --json keeps stdout clean
    steps = re.findall(r"^step (\d+)/50: loss \d+\.\d{4}, \d+ tokens/s, ETA (?:\d+ min )?\d+ s$", run.stderr, re.M)
    assert steps == ["1", "10", "20", "30", "40", "50"], steps
    rep = payload["verify"]
    assert rep["kind"] == "pairwise" and rep["labels"] == "human preference labels" and rep["items"] == 12
    rows = {r["judge"]: r for r in rep["table"]}
    print("\nbefore/after trust table (hhh, 12 pairs, relative grading):")
    for r in rep["table"]:
        print(f"  {r['judge']:8s} n={r['n']:2d} {r['statistic']} = {r['value']} [{r['ci_low']}, {r['ci_high']}] "
              f"{r['extra']} {r['note']}")
    # the hf backend holds every answer to the template's shape (llguidance; --constrain auto): even the random
    # base, whose free text never ends in 64 tokens unconstrained, answers "... [RESULT] A|B" within them
    for who in ("base", "trained"):
        assert rows[who]["n"] == 12 and 0.0 <= rows[who]["value"] <= 1.0, rows[who]
        assert "unparseable=0" in rows[who]["extra"].replace(" ", ""), rows[who]
    # the human-readable table prints too
    table = CliRunner().invoke(app, ["verify-judge", "--model", f"base={tiny_llama(None)}", "--model",
                                     f"trained={out}", "--dataset", "hhh", "--limit", "12", "--max-tokens", "64",
                                     "--single-order", "--n-resamples", "200"])
    assert table.exit_code == 0, table.output
    print(table.output)
    assert "Trust: judges vs human preference labels on hhh" in table.output
    assert "base" in table.output and "trained" in table.output
