"""``evalign judge --cascade CAL.json`` on a real model: SmolLM2-135M-Instruct (llama-cpp-python's
server) as two judges (LLMBar's Vanilla and Vanilla-without-rules templates, top logprobs, both
orders), each reached through its own counting proxy. The calibration file is written by ``evalign
meta --selective --save-calibration`` (the judges' specs and signatures read from the summaries
``evalign judge`` wrote beside its outputs). Asserted: the second judge is asked only about the items
the first left (the proxy's requests, by the ``[[req-N]]`` marker in each prompt), the decided rows
are those the two judges' own runs give at the recorded thresholds (verdict, judge, confidence), the
people's file is read by ``read_pairs`` and ``evalign annotate``, and the calibration holds no key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fault_proxy import FaultProxy
from llama_server import LlamaServer, ServerInfo
from typer.testing import CliRunner

from evalign.annotate.items import read_items_to_label
from evalign.backends.model_source import packaged_gguf_path
from evalign.cli import app
from evalign.io import read_pairs

pytestmark = [pytest.mark.server, pytest.mark.slow]
runner = CliRunner()
SECRET = "sk-cascade-0123456789"
N = 6
QUESTIONS = [("Name the capital of France.", "Paris.", "Berlin is in Germany."),
             ("Give a synonym of 'happy'.", "Sad.", "Joyful."),
             ("What is 2 + 2?", "4", "22"),
             ("Name a primary colour.", "Red.", "Purple."),
             ("Translate 'gato' to English.", "Cat.", "Dog."),
             ("Name an animal that barks.", "A dog.", "A fish.")]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """llama-cpp-python's server with SmolLM2-135M-Instruct (fails, not skips, when either is missing)."""
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    with LlamaServer(packaged_gguf_path("smollm2-135m-instruct"), n_ctx=4096, n_threads=2, log_path=log) as info:
        yield info


def _judge(info: ServerInfo, url: str, src: Path, out: Path, name: str, template: str) -> None:
    res = runner.invoke(app, ["judge", str(src), "--mode", "pairwise", "--template", template, "--base-url", url,
                              "--model", info.model, "--top-logprobs", "5", "--temperature", "0", "--max-tokens", "8",
                              "--concurrency", "1", "--name", name, "-o", str(out), "--json"],
                        env={"OPENAI_API_KEY": SECRET})
    assert res.exit_code == 0, res.output


def _split(conf: np.ndarray) -> float:
    """A cut between two of these confidences (the widest gap inside their range)."""
    s = np.sort(conf)
    k = int(np.argmax(np.diff(s)))
    return float((s[k] + s[k + 1]) / 2), float(s[k + 1] - s[k])


def _calibration_table(c1: float, g1: float, c2: float, g2: float, n: int = 400) -> pd.DataFrame:
    """Labelled pairs on which ``small`` (verdict A, confidence = its p_a) is right exactly at or above
    ``c1`` (many wrong just below it) and ``large`` (verdict B) is right on what small leaves exactly
    at or above ``c2``: the thresholds meta finds cut between the live confidences."""
    rng = np.random.default_rng(0)
    half = n // 2
    conf1 = np.concatenate([rng.uniform(c1, 0.99, half), rng.uniform(c1 - g1 / 4, c1, half)])
    conf2 = np.concatenate([rng.uniform(0.5, 0.99, half),
                            np.concatenate([rng.uniform(c2, 0.99, half // 2), rng.uniform(c2 - g2 / 4, c2, half // 2)])])
    pref = np.where(conf1 >= c1, 1.0, np.where(conf2 >= c2, -1.0, 1.0))  # +1: A better
    return pd.DataFrame({"id": [f"c{i}" for i in range(n)], "instruction": [f"q{i}" for i in range(n)],
                         "response_a": "a", "response_b": "b",
                         "pref_1": pref, "small": "A", "small.status": "scored", "small.p_a": conf1, "large": "B",
                         "large.status": "scored", "large.p_a": 1 - conf2})


def test_cascade_calls_the_next_judge_only_on_what_is_left(smollm2: ServerInfo, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.jsonl"
    pd.DataFrame([{"id": f"p{i}", "instruction": f"[[req-{i}]] {q}", "response_a": a, "response_b": b}
                  for i, (q, a, b) in enumerate(QUESTIONS[:N])]).to_json(fresh, orient="records", lines=True)
    runs = tmp_path / "runs"
    runs.mkdir()
    with FaultProxy(smollm2.root_url) as p1, FaultProxy(smollm2.root_url) as p2:
        # each judge on every fresh pair, alone: the verdicts and confidences the cascade must reproduce
        _judge(smollm2, p1.base_url, fresh, runs / "small.jsonl", "small", "llmbar_vanilla")
        _judge(smollm2, p2.base_url, runs / "small.jsonl", runs / "both.jsonl", "large", "llmbar_vanilla_norules")
        alone = pd.read_json(runs / "both.jsonl", lines=True)
        assert len(p1.calls) == len(p2.calls) == 2 * N  # both orders
        p_small, p_large = alone["small.p_a"].to_numpy(float), alone["large.p_a"].to_numpy(float)
        conf1, conf2 = np.maximum(p_small, 1 - p_small), np.maximum(p_large, 1 - p_large)
        assert np.isfinite(conf1).all() and np.isfinite(conf2).all()
        c1, g1 = _split(conf1)
        c2, g2 = _split(conf2[conf1 < c1]) if np.sum(conf1 < c1) > 1 else (float(conf2.min()) - 1e-3, 1e-3)
        calib = runs / "calibration.jsonl"
        _calibration_table(c1, g1, c2, g2).to_json(calib, orient="records", lines=True)
        cal = tmp_path / "cal.json"
        res = runner.invoke(app, ["meta", str(calib), "--pref", "pref_1", "-m", "small,large", "--bootstrap", "20",
                                  "--permutations", "20", "--selective", "--risk", "0.15", "--cascade", "small,large",
                                  "--save-calibration", str(cal)])
        assert res.exit_code == 0, res.output
        record = json.loads(cal.read_text())
        assert SECRET not in cal.read_text()
        t1, t2 = (j["threshold"] for j in record["judges"])
        assert t1 is not None and t2 is not None, record
        for j, template in zip(record["judges"], ("llmbar_vanilla", "llmbar_vanilla_norules"), strict=True):
            assert j["spec"]["options"]["template"] == template and j["spec"]["backend"]["kind"] == "openai"
            assert f"template:{template}@" in j["signature"]["judge"]
        p1.reset()
        p2.reset()
        out, rest = tmp_path / "decided.jsonl", tmp_path / "people.jsonl"
        res = runner.invoke(app, ["judge", str(fresh), "--cascade", str(cal), "-o", str(out), "--rest", str(rest),
                                  "--no-cache", "--json"], env={"OPENAI_API_KEY": SECRET})
        assert res.exit_code == 0, res.output
        summary = json.loads(res.stdout)
        first = {s.marker for s in p1.calls}
        second = [s.marker for s in p2.calls]
    by_small = conf1 >= t1
    by_large = ~by_small & (conf2 >= t2)
    assert 0 < by_small.sum() < N  # the first judge decides some, not all
    left = {f"[[req-{i}]]" for i in np.flatnonzero(~by_small)}
    assert first == {f"[[req-{i}]]" for i in range(N)}
    assert set(second) == left and len(second) == 2 * len(left)  # only what the first left, both orders
    assert [s["sent"] for s in summary["stages"]] == [N, len(left)]
    assert [s["calls"] for s in summary["stages"]] == [2 * N, 2 * len(left)]
    decided = pd.read_json(out, lines=True)
    want = alone[by_small | by_large]
    assert decided["id"].tolist() == want["id"].tolist()
    assert decided["decided_by"].tolist() == ["small" if s else "large" for s in by_small[by_small | by_large]]
    conf = np.where(by_small, conf1, conf2)[by_small | by_large]
    assert decided["confidence"].to_numpy() == pytest.approx(conf, abs=1e-9)
    p_used = np.where(by_small, p_small, p_large)[by_small | by_large]
    assert decided["verdict"].tolist() == ["A" if p > 0.5 else "B" if p < 0.5 else "tie" for p in p_used]
    people = read_pairs(rest)
    assert people["id"].tolist() == alone["id"][~(by_small | by_large)].tolist()
    assert set(people["reason"]) <= {"no judge sure enough"}
    if len(people):
        items = read_items_to_label(rest, "pairwise")  # what evalign annotate reads
        assert [i.key for i in items] == people["id"].tolist()


def test_both_orders_mapped_back_before_calibration_and_escalation(smollm2: ServerInfo, tmp_path: Path) -> None:
    """A pairwise judge in both orders: the swapped order's P(first shown) is P(B), mapped back to the
    original order (p_a of the swapped call = 1 - p_first) and averaged; the confidence that is
    calibrated and escalated is that of the mapped p_a."""
    from evalign.backends.openai import OpenAICompatibleBackend
    from evalign.cache import Cache
    from evalign.evaluate.escalate import escalate
    from evalign.judges import get_judge, run_judge

    rows = [{"id": f"p{i}", "instruction": q, "response_a": a, "response_b": b} for i, (q, a, b) in enumerate(QUESTIONS)]
    table = read_pairs(pd.DataFrame(rows))
    swapped = read_pairs(pd.DataFrame([{**r, "response_a": r["response_b"], "response_b": r["response_a"]}
                                       for r in rows]))
    be = OpenAICompatibleBackend(smollm2.base_url, smollm2.model, api_key_env=None, concurrency=1, timeout=300)

    def run(t: pd.DataFrame, both: bool) -> np.ndarray:
        judge = get_judge("pairwise", template="llmbar_vanilla", column="j", temperature=0.0, max_tokens=8,
                          logprobs=True, top_logprobs=5, both_orders=both)
        return run_judge(t, judge, be, cache=Cache(tmp_path / f"c{both}.sqlite")).table

    both = run(table, True)
    p_ab = run(table, False)["j.p_a"].to_numpy(float)  # P(A) with A shown first
    p_ba = run(swapped, False)["j.p_a"].to_numpy(float)  # P(B) with B shown first: the swapped order's p_first
    p_a = both["j.p_a"].to_numpy(float)
    ok = np.isfinite(p_ab) & np.isfinite(p_ba)  # an answer with no verdict letter has no P(first shown)
    assert ok.sum() >= 4
    assert p_a[ok] == pytest.approx((p_ab[ok] + (1 - p_ba[ok])) / 2, abs=1e-6)  # swapped mapped back, then the mean
    assert not np.allclose(p_a[ok], (p_ab[ok] + p_ba[ok]) / 2)  # not the unmapped mean (SmolLM2 favours the first)
    only_ab = np.isfinite(p_ab) & ~np.isfinite(p_ba)
    assert p_a[only_ab] == pytest.approx(p_ab[only_ab], abs=1e-6)
    only_ba = ~np.isfinite(p_ab) & np.isfinite(p_ba)
    assert p_a[only_ba] == pytest.approx(1 - p_ba[only_ba], abs=1e-6)
    cal = {"risk": 0.15, "delta": 0.1, "judges": [{"column": "j", "threshold": 0.5, "signature": {
        "confidence_source": "max(J.p_a, 1 - J.p_a) (P(A better))"}}]}
    decided, people, _ = escalate(cal, both)
    has = np.isfinite(p_a)
    assert decided["id"].tolist() == both["id"][has].tolist() and people["id"].tolist() == both["id"][~has].tolist()
    assert decided["confidence"].to_numpy() == pytest.approx(np.maximum(p_a, 1 - p_a)[has])
    assert decided["verdict"].tolist() == ["A" if p > 0.5 else "B" if p < 0.5 else "tie" for p in p_a[has]]
