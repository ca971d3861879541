"""``evalign demo --judge``'s live judge without a model: LLMBar's Vanilla prompt as a template, the
verdicts read in both orders, the judge column added to the LLMBar pair table and ranked by the meta
path with the baselines (a scripted backend stands in for SmolLM2; the real model runs in
tests/judges/test_real_model.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evalign.backends import Backend, Generation, GenerationRequest
from evalign.backends.types import Choice, Usage
from evalign.cache import Cache
from evalign.datasets.base import bundled_path
from evalign.demo_judge import LIVE_COLUMN, VANILLA_PROMPT, run_live_judge, vanilla_template, write_live_judge
from evalign.io.data_dir import default_data_dir


class AlwaysFirst(Backend):
    """Answers "Output (a)" to everything (SmolLM2's behaviour with this prompt); counts calls."""

    kind = "always-first"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[GenerationRequest] = []

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    async def generate(self, req: GenerationRequest) -> Generation:
        self.calls.append(req)
        return Generation.from_choices([Choice("Output (a)", "stop")], Usage(1, 1))


def test_vanilla_template_is_upstreams_prompt_with_the_judge_fields() -> None:
    # the shipped copy is upstream's file byte for byte (the data folder holds upstream's prompts)
    upstream = default_data_dir() / "llmbar" / "evaluators" / "upstream_prompts" / "comparison" / "Vanilla.txt"
    raw = upstream.read_text(encoding="utf-8")
    assert bundled_path(*VANILLA_PROMPT).read_text(encoding="utf-8") == raw
    t = vanilla_template()
    assert t.system in raw and t.system.startswith("You are a helpful assistant in evaluating")
    back = t.without_reference.replace("{instruction}", "{input}").replace("{response_A}", "{output_1}")
    back = back.replace("{response_B}", "{output_2}")
    assert back in raw and back.endswith('either "Output (a)" or "Output (b)":')
    msgs = t.render(False, {"instruction": "Say hi.", "response_A": "hi", "response_B": "bye"})
    assert [m["role"] for m in msgs] == ["system", "user"] and "# Output (b):\nbye" in msgs[1]["content"]


def test_live_judge_column_is_ranked_with_the_baselines(tmp_path: Path) -> None:
    be = AlwaysFirst()
    live = run_live_judge(n_pairs=30, seed=3, n_resamples=50, backend=be, cache=Cache(tmp_path / "c.sqlite"))
    t = live.run.table
    assert len(be.calls) == 60  # both orders
    assert t[f"{LIVE_COLUMN}.ab"].tolist() == ["A"] * 30 and t[f"{LIVE_COLUMN}.ba"].tolist() == ["B"] * 30
    assert t[LIVE_COLUMN].tolist() == ["tie"] * 30  # the orders disagree on every pair
    assert len(set(t["id"])) == 30 and all(i.startswith("Natural/") for i in t["id"])
    rows = live.result.trust[0].for_group()
    assert LIVE_COLUMN in rows["metric"].tolist()
    live_row = rows[rows["metric"] == LIVE_COLUMN].iloc[0]
    assert live_row["kind"] == "judge" and live_row["value"] == pytest.approx(0.0)  # ties are wrong on LLMBar
    assert (rows["kind"] == "baseline").sum() >= 2
    paths = write_live_judge(live, tmp_path / "out")
    data = json.loads(paths["live_judge.json"].read_text(encoding="utf-8"))
    assert data["pairs"] == 30 and data["column"] == LIVE_COLUMN
    assert re.match(r"60 of 60 answers parsed, positional agreement 0\.00 over 30 pairs", data["note"])
    # a second run is answered from the cache: no call
    be2 = AlwaysFirst()
    again = run_live_judge(n_pairs=30, seed=3, n_resamples=50, backend=be2, cache=Cache(tmp_path / "c.sqlite"))
    assert be2.calls == [] and again.run.table[LIVE_COLUMN].tolist() == t[LIVE_COLUMN].tolist()


def test_sample_size_is_checked() -> None:
    from evalign.errors import EvalignError

    with pytest.raises(EvalignError, match="--judge-pairs"):
        run_live_judge(n_pairs=0, backend=AlwaysFirst())
