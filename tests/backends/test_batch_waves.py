"""Waves in batch mode: rounds that depend on earlier answers (``--ranking`` rounds) are one batch
submission each, calls whose prompts are known together (both responses of every pair in a round) share
one; the verdicts and rounds equal the ranking protocol's exact ones (tests/judges/test_protocols.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
from fake_batch_api import FakeOpenAI

from evalign.backends.batch import BatchSettings
from evalign.backends.batch_adapters import batch_backend
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.cache import Cache
from evalign.io import read_pairs
from evalign.judges.runner import run_judge
from evalign.judges.spec import get_judge

SEED = 100
SCRIPT = {"p0": [(4, 2)], "p1": [(3, 3), (2, 5)], "p2": [(3, 3), (2, 2), (5, 5)]}
EXPECTED = {"p0": ("A", 1), "p1": ("B", 2), "p2": ("tie", 3)}


def answer(body: dict[str, Any]) -> str:
    text = body["messages"][-1]["content"]
    m = re.search(r"###Response to evaluate:\n(.*?)\n\n###", text, re.S)
    assert m is not None
    pair, side = m.group(1).split("-")
    score = SCRIPT[pair][int(body["seed"]) - SEED][0 if side == "a" else 1]
    return f"Feedback: fine. [RESULT] {score}"


def test_ranking_rounds_are_one_wave_each_with_the_protocols_verdicts(tmp_path: Path) -> None:
    rows = [{"id": p, "instruction": f"Task {p}.", "system_a": "alpha", "system_b": "beta",
             "response_a": f"{p}-a", "response_b": f"{p}-b"} for p in SCRIPT]
    with FakeOpenAI(answer=answer) as fake:
        inner = OpenAICompatibleBackend(fake.base_url, "gpt-fake", api_key_env=None, constraint_format="openai")
        be = batch_backend(inner, BatchSettings(poll=0.001, poll_max=0.01), cache_path=tmp_path / "c.sqlite",
                           on_progress=lambda s: None, on_note=lambda s: None)
        judge = get_judge("ranking", rubric="hhh_helpfulness", max_rounds=3, seed=SEED, constrain="off")
        run = run_judge(read_pairs(pd.DataFrame(rows)), judge, be, cache=Cache(tmp_path / "c.sqlite"))
        seeds = [sorted({x["body"]["seed"] for x in fake.inputs[b]}) for b in fake.batches]
        sizes = [len(fake.inputs[b]) for b in fake.batches]
    t, col = run.table, run.column
    assert dict(zip(t["id"], zip(t[col], t[f"{col}.rounds"], strict=True), strict=True)) == EXPECTED
    assert seeds == [[SEED], [SEED + 1], [SEED + 2]]  # one submission per round
    assert sizes == [6, 4, 2]  # both responses of every pair still open
