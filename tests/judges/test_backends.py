"""Tests of the judge backends: the OpenAI-compatible client against a real llama.cpp server (directly
and through a fault-injecting proxy), the retry rules, and the local Hugging Face backend."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import re
import time

import pytest
from fault_proxy import Drop, FaultProxy, Forward, Hang, Malformed, Seen, Status, Truncate, by_attempt

from evalign.backends import (
    Choice,
    Constraint,
    Generation,
    GenerationRequest,
    HFLocalBackend,
    OpenAICompatibleBackend,
    Usage,
    fallback_format,
    fold_system,
    list_backends,
    make_backend,
)
from evalign.backends._http import RetryPolicy, is_retryable_status, parse_retry_after, redact
from evalign.errors import BackendError, EvalignError

SECRET = "sk-evalign-test-7c0ffee5ecret"
KEY_ENV = "EVALIGN_TEST_JUDGE_KEY"


def chat(text: str, **kw: object) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Pure parts: retry rules, requests, results, registry
# ---------------------------------------------------------------------------------------------
def test_parse_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-4") == 0.0
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert parse_retry_after(date, now=now) == pytest.approx(7.0)
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("") is None
    assert parse_retry_after(None) is None


def test_retry_policy_delays() -> None:
    import random

    pol = RetryPolicy(max_retries=6, backoff_base=0.5, backoff_max=4.0, retry_after_max=10.0, rng=random.Random(1))
    for k, cap in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (9, 4.0)]:
        d = pol.delay(k)
        assert cap / 2 <= d <= cap
    assert 3.0 <= pol.delay(0, retry_after=3.0) <= 3.05
    assert 10.0 <= pol.delay(0, retry_after=500.0) <= 10.05  # capped
    assert [s for s in (200, 400, 401, 404, 408, 409, 429, 500, 503) if is_retryable_status(s)] == [
        408, 409, 429, 500, 503,
    ]  # fmt: skip
    assert redact(f"Bearer {SECRET} x", SECRET) == "Bearer *** x"
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


def test_request_validation() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        GenerationRequest()
    with pytest.raises(ValueError, match="exactly one"):
        GenerationRequest(messages=[{"role": "user", "content": "x"}], prompt="x")
    with pytest.raises(ValueError, match=r"messages\[0\]"):
        GenerationRequest(messages=[{"role": "user"}])
    with pytest.raises(ValueError, match="max_tokens"):
        chat("x", max_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        chat("x", top_p=0.0)
    with pytest.raises(ValueError, match="needs logprobs"):
        chat("x", top_logprobs=3)
    req = chat("x", temperature=0.7, seed=4)
    assert req.settings()["temperature"] == 0.7 and "messages" not in req.settings()


def test_generation_json_round_trip() -> None:
    ch = [Choice("a", "stop", [{"a": -0.1}], ["a"], [-0.1]), Choice("b", "length")]
    gen = Generation.from_choices(ch, Usage(3, 4), retries=2, raw={"id": "x"})
    back = Generation.from_json(json.loads(json.dumps(gen.to_json())))
    assert back == gen
    assert gen.text == "a" and gen.top_logprobs == [{"a": -0.1}] and not gen.truncated
    assert back.choices[1].finish_reason == "length" and gen.usage.total_tokens == 7


def test_registry_and_identity_without_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    assert list_backends() == ["anthropic", "gemini", "hf", "multi", "openai", "reward"]
    b = make_backend("openai", base_url="http://127.0.0.1:9/v1/", model="m", api_key_env=KEY_ENV)
    assert isinstance(b, OpenAICompatibleBackend)
    assert b.identity() == {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "endpoint": "chat",
                            "system_prompt": "role"}
    assert SECRET not in repr(b) and SECRET not in json.dumps(b.identity()) and SECRET not in str(vars(b))
    with pytest.raises(EvalignError, match=r"unknown judge backend .nope."):
        make_backend("nope")
    with pytest.raises(ValueError, match="endpoint"):
        OpenAICompatibleBackend("http://x/v1", "m", endpoint="embeddings")  # type: ignore[arg-type]


def test_request_body_carries_llama_cpp_extras() -> None:
    b = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m")
    req = chat("x", max_tokens=7, logprobs=True, top_logprobs=4, repetition_penalty=1.3,
               constraint=Constraint(gbnf='root ::= "a"'), stop=["\n"], seed=5)  # fmt: skip
    body = b.build_body(req)
    assert body["logprobs"] is True and body["top_logprobs"] == 4
    assert body["repeat_penalty"] == 1.3 and body["grammar"] == 'root ::= "a"' and body["seed"] == 5
    vllm = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m", constraint_format="vllm")
    assert vllm.build_body(req)["structured_outputs"] == {"grammar": 'root ::= "a"'} and "grammar" not in vllm.build_body(req)
    assert body["stop"] == ["\n"] and body["max_tokens"] == 7 and "n" not in body
    c = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m", endpoint="completions")
    assert c.build_body(GenerationRequest(prompt="p", logprobs=True, top_logprobs=4))["logprobs"] == 4
    with pytest.raises(ValueError, match="completions"):
        c.build_body(chat("x"))


def test_run_refuses_a_running_loop_and_missing_server_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from llama_server import require_llama_cpp

    require_llama_cpp()  # installed here

    b = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m")

    async def inside() -> None:
        b.run([chat("x")])

    with pytest.raises(RuntimeError, match=r"await backend\.generate_many"):
        asyncio.run(inside())
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "sse_starlette" else real_find_spec(n, *a))
    with pytest.raises(RuntimeError, match=r"missing: sse_starlette\)\. Install it with `pip install 'llama-cpp-python\[server\]'`.*"
                       r"scripts/build_llama_server\.sh"):
        require_llama_cpp()


# ---------------------------------------------------------------------------------------------
# Against the real llama.cpp server
# ---------------------------------------------------------------------------------------------
GRAMMAR = r'''root ::= "Feedback: " [a-z ]{1,30} " [RESULT] " [1-5]'''


@pytest.mark.server
def test_chat_greedy_length_and_usage(llama_server) -> None:
    b = OpenAICompatibleBackend(llama_server.base_url, llama_server.model)
    a, c = b.run([chat("Rate the response.", max_tokens=6), chat("Rate the response.", max_tokens=6)])
    assert isinstance(a, Generation) and isinstance(c, Generation)
    assert a.text == c.text  # greedy decoding is deterministic
    assert a.finish_reason == "length" and a.truncated
    assert a.usage.completion_tokens == 6 and a.usage.prompt_tokens > 5
    assert a.raw["model"] == llama_server.model and a.raw["choices"][0]["message"]["content"] == a.text
    assert b.stats()["requests"] == 2 and b.usage.completion_tokens == 12 and b.retries == 0


@pytest.mark.server
def test_grammar_forces_a_parseable_verdict(llama_server) -> None:
    b = OpenAICompatibleBackend(llama_server.base_url, llama_server.model)
    reqs = [chat(f"Judge answer {i}.", max_tokens=60, temperature=1.0, seed=i, constraint=Constraint(gbnf=GRAMMAR))
            for i in range(3)]
    for g in b.run(reqs):
        assert isinstance(g, Generation)
        assert re.fullmatch(r"Feedback: [a-z ]{1,30} \[RESULT\] [1-5]", g.text), g.text
        assert g.finish_reason == "stop"


@pytest.mark.server
def test_chat_logprobs_normalised(llama_server) -> None:
    b = OpenAICompatibleBackend(llama_server.base_url, llama_server.model)
    (g,) = b.run([chat("Score 1 to 5.", max_tokens=5, logprobs=True, top_logprobs=5)])
    assert isinstance(g, Generation) and g.top_logprobs is not None and g.tokens is not None
    assert len(g.top_logprobs) == len(g.tokens) == len(g.token_logprobs or []) == g.usage.completion_tokens
    raw_pos = g.raw["choices"][0]["logprobs"]["content"]
    for pos, (top, tok, lp, raw) in enumerate(zip(g.top_logprobs, g.tokens, g.token_logprobs or [], raw_pos, strict=True)):
        assert 1 <= len(top) <= 5 and all(v <= 0 for v in top.values())
        assert sum(math.exp(v) for v in top.values()) <= 1.0 + 1e-5
        assert tok == raw["token"] and lp == pytest.approx(raw["logprob"])
        # greedy: the chosen token is the most likely one
        assert lp == pytest.approx(max(top.values()), abs=1e-6), pos


@pytest.mark.server
def test_completions_logprobs_match_chat_shape(llama_server) -> None:
    b = OpenAICompatibleBackend(llama_server.base_url, llama_server.model, endpoint="completions")
    (g,) = b.run([GenerationRequest(prompt="Feedback: good. Score:", max_tokens=4, logprobs=True, top_logprobs=3)])
    assert isinstance(g, Generation) and g.top_logprobs is not None
    raw = g.raw["choices"][0]["logprobs"]
    assert g.tokens == raw["tokens"] and g.token_logprobs == pytest.approx(raw["token_logprobs"])
    assert g.top_logprobs == [{k: pytest.approx(v) for k, v in d.items()} for d in raw["top_logprobs"]]
    assert len(g.top_logprobs) == 4 and g.text == g.raw["choices"][0]["text"]


@pytest.mark.server
def test_seeded_samples_and_n_top_up(llama_server) -> None:
    b = OpenAICompatibleBackend(llama_server.base_url, llama_server.model)
    req = chat("Give a verdict.", max_tokens=12, temperature=1.0, seed=11, n=3)
    g1, g2 = b.run([req, req])
    assert isinstance(g1, Generation) and isinstance(g2, Generation)
    assert len(g1.choices) == 3
    assert [c.text for c in g1.choices] == [c.text for c in g2.choices]  # same seeds, same samples
    assert len({c.text for c in g1.choices}) > 1  # seeds 11, 12, 13 differ
    # llama.cpp ignores n: the backend asked three times and added up the usage
    assert len(g1.raw["responses"]) == 3
    assert g1.usage.completion_tokens == sum(r["usage"]["completion_tokens"] for r in g1.raw["responses"])


# -- through the fault proxy ------------------------------------------------------------------
def _marked(i: int, **kw: object) -> GenerationRequest:
    return chat(f"Judge item [[req-{i}]] now.", max_tokens=4, **kw)


@pytest.mark.server
def test_faults_every_request_answered_or_failed_once(llama_server, fault_proxy: FaultProxy) -> None:
    max_retries = 3
    faults = {
        1: [Status(429, "0")],
        2: [Status(500)],
        3: [Drop()],
        4: [Truncate()],
        5: [Malformed()],
        6: [Hang(4.0)],  # longer than the client timeout
        7: [Status(503), Drop(), Status(502)],
        8: [Status(500)] * (max_retries + 1),  # fails for good
        9: [Truncate(), Truncate()],
        10: [Drop()] * (max_retries + 1),  # fails for good
    }
    fault_proxy.reset(by_attempt({f"[[req-{i}]]": a for i, a in faults.items()}))
    n = 20
    reqs = [_marked(i) for i in range(n)]
    direct = OpenAICompatibleBackend(llama_server.base_url, llama_server.model).run(reqs)
    b = OpenAICompatibleBackend(
        fault_proxy.base_url, llama_server.model, concurrency=4, max_retries=max_retries, timeout=3.0,
        backoff_base=0.02, backoff_max=0.1, seed=0,
    )  # fmt: skip
    done: list[int] = []
    results = b.run(reqs, on_done=lambda i, r: done.append(i))

    assert sorted(done) == list(range(n))  # each reported exactly once
    failed = {i for i, r in enumerate(results) if isinstance(r, BackendError)}
    assert failed == {8, 10}
    assert "failed after 4 attempts" in str(results[8]) and "HTTP 500" in str(results[8])
    for i, r in enumerate(results):
        if i not in failed:
            assert isinstance(r, Generation)
            assert r.text == direct[i].text  # type: ignore[union-attr]
            assert r.retries == len(faults.get(i, []))
    # the proxy saw exactly one request per attempt: none lost, none duplicated
    per_marker: dict[str, int] = {}
    for s in fault_proxy.seen:
        per_marker[s.marker or ""] = per_marker.get(s.marker or "", 0) + 1
    expected = {f"[[req-{i}]]": 1 + min(len(faults.get(i, [])), max_retries) for i in range(n)}
    assert per_marker == expected
    assert b.retries == sum(expected.values()) - n
    assert b.stats()["failures"] == 2 and b.requests == n
    assert 1 < fault_proxy.max_in_flight <= 4


@pytest.mark.server
def test_retry_after_is_honoured(llama_server, fault_proxy: FaultProxy) -> None:
    def schedule(seen: Seen) -> Status | Forward:
        if seen.attempt > 0:
            return Forward()
        if seen.marker == "[[req-0]]":
            return Status(429, "1.2")
        if seen.marker == "[[req-1]]":  # an HTTP-date two seconds ahead (1 s resolution -> wait > 1 s)
            return Status(503, email.utils.formatdate(time.time() + 2, usegmt=True))
        return Forward()

    fault_proxy.reset(schedule)
    b = OpenAICompatibleBackend(fault_proxy.base_url, llama_server.model, backoff_base=0.01, backoff_max=0.02)
    res = b.run([_marked(0), _marked(1)])
    assert all(isinstance(r, Generation) and r.retries == 1 for r in res)
    times: dict[str, list[float]] = {}
    for s in fault_proxy.seen:
        times.setdefault(s.marker or "", []).append(s.t)
    assert times["[[req-0]]"][1] - times["[[req-0]]"][0] >= 1.2
    assert times["[[req-1]]"][1] - times["[[req-1]]"][0] >= 1.0


@pytest.mark.server
def test_rate_limit_pauses_all_workers(llama_server, fault_proxy: FaultProxy) -> None:
    fault_proxy.reset(by_attempt({"[[req-0]]": [Status(429, "1.0")]}))
    b = OpenAICompatibleBackend(fault_proxy.base_url, llama_server.model, concurrency=3, backoff_base=0.01)
    res = b.run([_marked(i) for i in range(9)])
    assert all(isinstance(r, Generation) for r in res) and b.retries == 1
    t429 = next(s.t for s in fault_proxy.seen if isinstance(s.action, Status))
    # after the 429 reached the client, nothing was sent until Retry-After had passed
    # (0.1 s grace for requests that were already on their way)
    assert not [s for s in fault_proxy.seen if t429 + 0.1 < s.t < t429 + 1.0]
    assert len([s for s in fault_proxy.seen if s.t >= t429 + 1.0]) >= 1


@pytest.mark.server
def test_api_key_sent_but_never_leaked(
    llama_server, fault_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    fault_proxy.reset(
        by_attempt({
            "[[req-1]]": [Status(500, body=f"upstream echoed Bearer {SECRET}")] * 2,
            "[[req-2]]": [Status(400, body=f"invalid key {SECRET}")],
        })
    )  # fmt: skip
    b = OpenAICompatibleBackend(
        fault_proxy.base_url, llama_server.model, api_key_env=KEY_ENV, max_retries=1, backoff_base=0.01
    )
    caplog.set_level(logging.DEBUG)
    res = b.run([_marked(0, logprobs=True, top_logprobs=2), _marked(1), _marked(2)])
    assert isinstance(res[0], Generation)
    assert isinstance(res[1], BackendError) and isinstance(res[2], BackendError)
    assert "***" in str(res[1]) and "HTTP 400" in str(res[2])
    assert {s.authorized for s in fault_proxy.seen} == {f"Bearer {SECRET}"}  # the key is sent ...
    texts = [repr(b), str(b.identity()), json.dumps(res[0].raw), repr(res[0]), str(res[1]), str(res[2]),
             repr(res[1]), caplog.text, str(b.stats())]  # fmt: skip
    assert caplog.records  # retries were logged
    for text in texts:
        assert SECRET not in text  # ... and never shown


@pytest.mark.server
def test_fatal_status_stops_the_run(llama_server, fault_proxy: FaultProxy) -> None:
    fault_proxy.reset(lambda seen: Status(401, body="no such key"))
    b = OpenAICompatibleBackend(fault_proxy.base_url, llama_server.model, concurrency=2)
    with pytest.raises(BackendError, match=r"HTTP 401 \(check the API key"):
        b.run([_marked(i) for i in range(10)])
    assert len(fault_proxy.seen) <= 3  # no retries, no new requests after the first 401s


@pytest.mark.server
def test_unreachable_server_is_fatal() -> None:
    from llama_server import free_port

    b = OpenAICompatibleBackend(f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=1, backoff_base=0.01)
    with pytest.raises(BackendError, match="cannot connect"):
        b.run([chat("x"), chat("y")])


@pytest.mark.server
def test_backend_reused_across_event_loops(llama_server) -> None:
    b = OpenAICompatibleBackend(llama_server.base_url, llama_server.model)

    async def one() -> str:
        try:
            return (await b.generate(chat("hello", max_tokens=3))).text
        finally:
            await b.aclose()

    first = asyncio.run(one())
    assert asyncio.run(one()) == first


# ---------------------------------------------------------------------------------------------
# Local Hugging Face backend
# ---------------------------------------------------------------------------------------------
SYS_USER = [{"role": "system", "content": "You are a strict judge."}, {"role": "user", "content": "Rate: 2+2=4"}]


def test_fold_system_and_fallback_format() -> None:
    assert fold_system(SYS_USER) == [{"role": "user", "content": "You are a strict judge.\n\nRate: 2+2=4"}]
    assert fold_system([{"role": "system", "content": "S"}]) == [{"role": "user", "content": "S"}]
    assert fallback_format(SYS_USER) == (
        "### System:\nYou are a strict judge.\n\n### User:\nRate: 2+2=4\n\n### Assistant:\n"
    )


@pytest.mark.parametrize(("template", "folded"), [("raise", True), ("drop", True), ("native", False)])
def test_hf_chat_template_system_handling(tiny_hf_model, template: str, folded: bool) -> None:
    b = HFLocalBackend(str(tiny_hf_model(template)), device="cpu")
    text, add_special = b.render(GenerationRequest(messages=SYS_USER))
    assert not add_special
    if folded:
        assert text == "<s><|user|>\nYou are a strict judge.\n\nRate: 2+2=4</s>\n<|assistant|>\n"
    else:
        assert text.startswith("<s><|system|>\nYou are a strict judge.</s>\n<|user|>\nRate: 2+2=4")


def test_hf_without_template_uses_fallback(tiny_hf_model) -> None:
    b = HFLocalBackend(str(tiny_hf_model(None)), device="cpu")
    assert b.render(GenerationRequest(messages=SYS_USER)) == (fallback_format(SYS_USER), True)
    assert b.identity()["chat_template"] == "fallback"


def test_hf_greedy_batched_matches_model_and_logprobs(tiny_hf_model) -> None:
    import torch

    path = str(tiny_hf_model("raise"))
    b = HFLocalBackend(path, device="cpu", batch_size=3)
    msgs = [[{"role": "user", "content": t}] for t in ("Rate: 2+2=4", "Which is better, A or B? Answer A.", "x")]
    reqs = [GenerationRequest(messages=m, max_tokens=5, logprobs=True, top_logprobs=3) for m in msgs]
    batched = b.run(reqs)
    single = [b.run([r])[0] for r in reqs]
    for g, s in zip(batched, single, strict=True):
        assert isinstance(g, Generation) and isinstance(s, Generation)
        assert g.text == s.text and g.tokens == s.tokens  # left padding does not change the result
        assert g.token_logprobs == pytest.approx(s.token_logprobs, abs=1e-4)
    # the first generated position against a plain forward pass of the model
    tok, model = b.tokenizer, b.model
    for g, m in zip(batched, msgs, strict=True):
        assert isinstance(g, Generation) and g.top_logprobs is not None and g.token_logprobs is not None
        ids = tok(tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True), return_tensors="pt",
                  add_special_tokens=False)["input_ids"]  # fmt: skip
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0, -1].float(), -1)
        best = int(torch.argmax(logp))
        assert g.tokens is not None and g.tokens[0] == tok.decode([best])
        assert g.token_logprobs[0] == pytest.approx(float(logp[best]), abs=1e-4)
        assert len(g.top_logprobs[0]) <= 3 and max(g.top_logprobs[0].values()) == pytest.approx(float(logp[best]), abs=1e-4)
        if g.finish_reason == "length":
            assert g.usage.completion_tokens == 5 and len(g.top_logprobs) == 5
        else:
            assert g.finish_reason == "stop" and g.usage.completion_tokens <= 5
    assert any(g.finish_reason == "length" for g in batched)  # type: ignore[union-attr]
    assert b.stats()["requests"] == 6


def test_hf_sampling_seed_n_and_stop(tiny_hf_model) -> None:
    b = HFLocalBackend(str(tiny_hf_model("native")), device="cpu")
    req = GenerationRequest(prompt="Feedback:", max_tokens=8, temperature=1.0, top_p=0.95, n=3, seed=7)
    g1, g2 = b.run([req]), b.run([req])
    assert isinstance(g1[0], Generation) and isinstance(g2[0], Generation)
    assert len(g1[0].choices) == 3
    assert [c.text for c in g1[0].choices] == [c.text for c in g2[0].choices]
    greedy = b.run([GenerationRequest(prompt="Feedback:", max_tokens=8)])[0]
    assert isinstance(greedy, Generation) and greedy.text
    stop = greedy.text.strip()[:1]
    cut = b.run([GenerationRequest(prompt="Feedback:", max_tokens=8, stop=[stop])])[0]
    assert isinstance(cut, Generation)
    assert cut.text == greedy.text[: greedy.text.find(stop)] and cut.finish_reason == "stop"
    # an output constraint (here a GBNF grammar) holds on the hf backend too (llguidance); a logit bias is refused
    (forced,) = b.run([GenerationRequest(prompt="x", max_tokens=8, temperature=1.0, seed=3,
                                         constraint=Constraint(gbnf='root ::= "Score " [1-5]'))], raise_errors=True)
    assert isinstance(forced, Generation) and re.fullmatch(r"Score [1-5]", forced.text) and forced.finish_reason == "stop"
    with pytest.raises(BackendError, match="logit_bias"):
        b.run([GenerationRequest(prompt="x", logit_bias={"a": 1.0})], raise_errors=True)


def test_hf_repetition_penalty_and_mixed_settings_keep_order(tiny_hf_model) -> None:
    b = HFLocalBackend(str(tiny_hf_model("native")), device="cpu", batch_size=2)
    prompt = "Feedback: the response is good. Score:"
    prompt_ids = set(b.tokenizer(prompt)["input_ids"])
    plain, pen = b.run([GenerationRequest(prompt=prompt, max_tokens=12),
                        GenerationRequest(prompt=prompt, max_tokens=12, repetition_penalty=100.0)])  # fmt: skip
    assert isinstance(plain, Generation) and isinstance(pen, Generation)
    plain_ids, pen_ids = plain.raw["completion_ids"][0], pen.raw["completion_ids"][0]
    # a huge penalty forbids every token already in the context (prompt or generated)
    assert len(set(pen_ids)) == len(pen_ids) and not set(pen_ids) & prompt_ids
    if len(set(plain_ids)) < len(plain_ids) or set(plain_ids) & prompt_ids:
        assert pen_ids != plain_ids
    # requests with different settings run in different batches but come back in input order
    reqs = [GenerationRequest(prompt=f"item {i}", max_tokens=2 + i % 2) for i in range(5)]
    seen: list[int] = []
    out = b.run(reqs, on_done=lambda i, r: seen.append(i))
    assert sorted(seen) == list(range(5))
    assert [g.raw["prompt"] for g in out if isinstance(g, Generation)] == [f"item {i}" for i in range(5)]
    assert all(len(g.raw["completion_ids"][0]) <= 2 + i % 2 for i, g in enumerate(out) if isinstance(g, Generation))


def test_repetition_penalty_fields_by_server() -> None:
    from evalign.backends import GenerationRequest, OpenAICompatibleBackend

    req = GenerationRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=1.0, top_p=0.9,
                            repetition_penalty=1.03)
    local = OpenAICompatibleBackend("http://127.0.0.1:8080/v1", "m").build_body(req)
    assert local["repeat_penalty"] == 1.03 and local["repetition_penalty"] == 1.03
    official = OpenAICompatibleBackend("https://api.openai.com/v1", "gpt-4o").build_body(req)
    assert "repeat_penalty" not in official and "repetition_penalty" not in official
    only_vllm = OpenAICompatibleBackend("http://h/v1", "m", repetition_penalty_fields=("repetition_penalty",)).build_body(req)
    assert "repeat_penalty" not in only_vllm and only_vllm["repetition_penalty"] == 1.03
