"""Simulated annotators against a real model: SmolLM2-135M-Instruct served by llama.cpp (the server of
tests/judges/test_real_model.py) on the shortest LLMBar Natural pairs with K = 2 annotators (short
few-shot sets of our own, so each call stays small). What is asserted is what the server returns, not
the model's quality: every ``J.confidence`` lies in [0, 1] and equals the mean over the annotators and
both orders of each call's P(A better), recomputed here from the raw answers the backend received
(the top logprobs at the letter after ``[[``; order ``ba`` mapped back); each annotator's examples are
in the prompts sent for it, and only there; the pair with A and B swapped gets ``1 - p``; another
few-shot file means new calls (the cache key holds it), the same file none; and ``evalign meta
--selective`` calibrates the output."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from llama_server import ServerInfo
from test_real_model import smollm2_gguf, smollm2_server  # noqa: F401  (fixtures)
from typer.testing import CliRunner

from evalign.backends import Generation, GenerationRequest, OpenAICompatibleBackend
from evalign.cache import Cache
from evalign.cli import app
from evalign.evaluate.inputs import InputSettings, load_inputs
from evalign.io.fewshot import read_fewshot
from evalign.judges import get_judge, read_pairs, run_judge
from evalign.judges.base import prompt_text
from evalign.judges.modes.simulated import SimulatedAnnotators, split_order

pytestmark = [pytest.mark.server, pytest.mark.slow]

#: two annotators' examples (upstream's format): short pairs, so the prompts stay small
FEWSHOT = [
    {"annotator": "ann_0", "evaluated_samples": [
        {"instruction": "Name a fruit.", "outputs": ["Apple.", "A car."], "preferences": {"human": 1}},
        {"instruction": "What is 2 + 2?", "outputs": ["5", "4"], "preferences": {"human": 2}}]},
    {"annotator": "ann_1", "evaluated_samples": [
        {"instruction": "Name a colour.", "outputs": ["Table.", "Red."], "preferences": {"human": 2}},
        {"instruction": "Say hello.", "outputs": ["Hello!", "Goodbye."], "preferences": {"human": 1}}]},
]


def write_fewshot(path: Path, sets: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in sets), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    """The two shortest LLMBar Natural pairs (one with A preferred, one with B)."""
    ds = load_inputs(InputSettings(dataset="llmbar:natural")).ds
    assert ds is not None and ds.pairs is not None
    p = ds.pairs.copy()
    size = p["instruction"].str.len() + p["response_a"].str.len() + p["response_b"].str.len()
    p = p.loc[size.sort_values(kind="stable").index[:2]].reset_index(drop=True)
    assert sorted(p["pref_1"]) == [-1.0, 1.0]
    return p[["id", "instruction", "input", "system_a", "system_b", "response_a", "response_b", "pref_1"]]


class Recording(OpenAICompatibleBackend):
    """The OpenAI-compatible backend, keeping every request sent and the answer received."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.sent: list[tuple[list[dict[str, str]], dict[str, Any]]] = []

    async def generate(self, req: GenerationRequest) -> Generation:
        gen = await super().generate(req)
        self.sent.append(([dict(m) for m in req.messages], gen.to_json()))
        return gen


def backend(info: ServerInfo) -> Recording:
    return Recording(info.base_url, info.model, api_key_env=None, concurrency=1, timeout=300)


def p_first(choice: dict[str, Any]) -> float:
    """P(the first-shown response) of one raw answer: at the first generated token "A" / "B" right
    after "[[", the two letters' probabilities renormalised (a letter absent from the top logprobs: 0)."""
    text = ""
    for j, tok in enumerate(choice["tokens"]):
        if tok.strip() in ("A", "B") and text.rstrip().endswith("[["):
            top = choice["top_logprobs"][j]
            a, b = (math.exp(top[k]) if k in top else 0.0 for k in ("A", "B"))
            return a / (a + b)
        text += tok
    raise AssertionError(f"no verdict letter after '[[' in {choice['tokens']}")


@pytest.fixture(scope="module")
def judged(smollm2_server: ServerInfo, pairs: pd.DataFrame,  # noqa: F811
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Recording, SimulatedAnnotators]]:
    tmp = tmp_path_factory.mktemp("simann")
    sets = read_fewshot(write_fewshot(tmp / "fewshot.jsonl", FEWSHOT)).first(2)
    judge = get_judge("simulated_annotators", fewshot=sets, prompt="upstream", seed=7)
    assert isinstance(judge, SimulatedAnnotators)
    be = backend(smollm2_server)
    run = run_judge(read_pairs(pairs), judge, be, cache=Cache(tmp / "c.sqlite"))
    yield run, be, judge


def test_confidence_is_the_mean_of_the_servers_probabilities(judged: Any, pairs: pd.DataFrame) -> None:
    run, be, judge = judged
    t, col = run.table, run.column
    assert len(be.sent) == 2 * 2 * 2 and run.summary.calls.new == 8  # pairs x annotators x orders
    calls = {}
    for i, rec in enumerate(read_pairs(pairs).to_dict("records")):
        for order, messages in judge.prompts(rec, None, False):
            got = [g for m, g in be.sent if m == messages]
            assert len(got) == 1, (i, order)
            calls[(i, order)] = got[0]["choices"][0]
    for i in range(len(pairs)):
        per_call = []
        for order in judge.orders:
            p = p_first(calls[(i, order)])
            per_call.append(p if split_order(order)[0] == "ab" else 1.0 - p)
        want = sum(per_call) / len(per_call)
        assert t.at[i, f"{col}.p_calls"] == 4
        assert t.at[i, f"{col}.p_a"] == pytest.approx(want, abs=1e-12)
        assert 0.0 <= t.at[i, f"{col}.confidence"] <= 1.0
        assert t.at[i, f"{col}.confidence"] == pytest.approx(max(want, 1 - want), abs=1e-12)
        assert t.at[i, col] == ("A" if want > 0.5 else "B" if want < 0.5 else "tie")
        assert t.at[i, f"{col}.confidence_source"] == "simulated_annotators"
    print("\nSmolLM2 simulated annotators:", t[[col, f"{col}.p_a", f"{col}.confidence"]].to_dict("records"))


def test_each_annotators_examples_are_in_its_prompts(judged: Any) -> None:
    _, be, _ = judged
    own = {k: [s["instruction"] for s in FEWSHOT[k]["evaluated_samples"]] for k in range(2)}
    for messages, _ in be.sent:
        text = prompt_text(messages)
        shown = [k for k in range(2) if all(f"[Instruction]\n{q}\n" in text for q in own[k])]
        others = [q for k in range(2) if k not in shown for q in own[k]]
        assert len(shown) == 1 and not any(q in text for q in others)
        k = shown[0]
        for s in FEWSHOT[k]["evaluated_samples"]:
            a, b = s["outputs"]
            pref = "[[A]]" if s["preferences"]["human"] == 1 else "[[B]]"
            assert (f"[Assistant A's response]\n{a}\n\n[Assistant B's response]\n{b}\n\n[Preferred response]\n{pref}"
                    in text)


def test_swapping_a_and_b_gives_one_minus_p(smollm2_server: ServerInfo, pairs: pd.DataFrame,  # noqa: F811
                                            tmp_path: Path) -> None:
    sets = read_fewshot(write_fewshot(tmp_path / "fewshot.jsonl", FEWSHOT)).first(2)
    judge = get_judge("simulated_annotators", fewshot=sets, prompt="evalign", seed=7)
    one = pairs.head(1)
    swapped = one.assign(response_a=one["response_b"], response_b=one["response_a"], pref_1=-one["pref_1"])
    cache = Cache(tmp_path / "c.sqlite")
    a = run_judge(read_pairs(one), judge, backend(smollm2_server), cache=cache).table
    b = run_judge(read_pairs(swapped), judge, backend(smollm2_server), cache=cache).table
    col = judge.column
    assert a.at[0, f"{col}.p_calls"] == b.at[0, f"{col}.p_calls"] == 4
    assert b.at[0, f"{col}.p_a"] == pytest.approx(1.0 - a.at[0, f"{col}.p_a"], abs=1e-6)
    assert b.at[0, f"{col}.confidence"] == pytest.approx(a.at[0, f"{col}.confidence"], abs=1e-6)


def test_cli_cache_key_follows_the_fewshot_file_and_meta_selective_takes_it(
        smollm2_server: ServerInfo, pairs: pd.DataFrame, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "cache.sqlite"))
    table = tmp_path / "pairs.jsonl"
    pairs.head(1).to_json(table, orient="records", lines=True)
    flipped = json.loads(json.dumps(FEWSHOT))
    flipped[1]["evaluated_samples"][0]["preferences"]["human"] = 1  # one label of annotator 1
    files = {"a": write_fewshot(tmp_path / "a.jsonl", FEWSHOT), "b": write_fewshot(tmp_path / "b.jsonl", flipped)}
    runner = CliRunner()

    def judge(name: str) -> dict[str, Any]:
        res = runner.invoke(app, ["judge", str(table), "--mode", "pairwise", "--simulated-annotators", "2",
                                  "--fewshot", str(files[name]), "--fewshot-prompt", "evalign", "--seed", "7",
                                  "--base-url", smollm2_server.base_url, "--model", smollm2_server.model,
                                  "--api-key-env", "NO_KEY_HERE", "--concurrency", "1", "--timeout", "300",
                                  "-o", str(tmp_path / f"out_{name}.jsonl"), "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    first = judge("a")
    assert first["calls"]["new"] == 4 and first["scored"] == 1
    assert judge("a")["calls"]["new"] == 0  # the same few-shot file: every call from the cache
    other = judge("b")
    assert other["calls"]["new"] == 4 and other["signature"] != first["signature"]
    res = runner.invoke(app, ["judge", str(table), "--mode", "pairwise", "--simulated-annotators", "3", "--fewshot",
                              str(files["a"]), "--base-url", smollm2_server.base_url, "--model", "m"])
    assert res.exit_code != 0 and "has 2 annotator(s)" in res.output
    out = tmp_path / "out_a.jsonl"
    row = json.loads(out.read_text().splitlines()[0])
    assert 0.0 <= row["simulated_annotators.confidence"] <= 1.0
    res = runner.invoke(app, ["meta", str(out), "--pref", "pref_1", "-m", "simulated_annotators", "--selective",
                              "--risk", "0.15", "--delta", "0.1", "--bootstrap", "20", "--permutations", "20",
                              "--workers", "1", "--json"])
    assert res.exit_code == 0, res.output
    sel = json.loads(res.stdout)["selective"]
    assert "simulated_annotators" not in sel["refused"]
    assert sel["alone"]["simulated_annotators"]["n"] == 1
    rows = {r["judge"]: r for r in sel["rows"]}
    assert rows["simulated_annotators"]["threshold"] is None  # 1 item < 30: no guarantee, everything to people
