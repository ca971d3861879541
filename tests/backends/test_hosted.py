"""The native hosted backends (anthropic, gemini) against fakes of their wire formats (fake_providers.py):
headers, bodies, retries, stop reasons, JSON-schema output, Gemini's logprobs, safety blocks, cache usage."""

from __future__ import annotations

import logging
import math

import pytest
from fake_providers import FakeProviders

from evalign.backends import BackendOptions, BackendSpec, GenerationRequest, create_backend
from evalign.backends.anthropic_api import (
    AnthropicBackend,
    anthropic_answer,
    anthropic_body,
    anthropic_schema,
)
from evalign.backends.base import BackendRequestError
from evalign.backends.gemini_api import GeminiBackend, gemini_answer, gemini_body, gemini_schema
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.backends.registry import default_api_key_env
from evalign.errors import UsageError

KEY = "sk-ant-fake-SECRET-123456"
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5,
                                                     "description": "the grade"}},
          "required": ["score"]}


def chat(user: str = "Rate this.", system: str = "You are a fair judge. Use the rubric.") -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                             max_tokens=64)


def fast(cls: type, fake: FakeProviders, **kw: object) -> object:
    url = fake.anthropic_url if cls is AnthropicBackend else fake.gemini_url
    return cls(url, "claude-test" if cls is AnthropicBackend else "gemini-test", api_key_env="FAKE_KEY",
               backoff_base=0.01, **kw)


def test_registered_with_the_providers_urls_and_key_variables() -> None:
    a = create_backend("anthropic", BackendOptions(model="claude-sonnet-4-5", api_key_env=default_api_key_env("anthropic")))
    g = create_backend("gemini", BackendOptions(model="gemini-2.5-flash", api_key_env=default_api_key_env("gemini")))
    assert a.url == "https://api.anthropic.com/v1/messages" and a.api_key_env == "ANTHROPIC_API_KEY"
    assert g.url == ("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent")
    assert g.api_key_env == "GEMINI_API_KEY" and default_api_key_env("openai") == "OPENAI_API_KEY"
    spec = BackendSpec.parse("anthropic:claude-x@http://localhost:9/,prompt_cache=1h")
    assert spec.backend_options().api_key_env == "ANTHROPIC_API_KEY"
    assert BackendSpec.parse("gemini:g,api_key_env=MY_KEY").backend_options().api_key_env == "MY_KEY"
    b = create_backend("anthropic", spec.backend_options())
    assert b.url == "http://localhost:9/v1/messages" and b.prompt_cache == "1h"


def test_anthropic_headers_body_and_answer(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    with FakeProviders(reply=lambda s: "Good answer. [RESULT] 4") as fake:
        backend = fast(AnthropicBackend, fake)
        gen = backend.run([chat()])[0]
        seen = fake.requests[0]
    assert gen.text == "Good answer. [RESULT] 4" and gen.finish_reason == "stop"
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == KEY and seen.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen.headers
    body = seen.body
    assert body["system"] == [{"type": "text", "text": "You are a fair judge. Use the rubric.",
                               "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": "Rate this."}]
    assert body["max_tokens"] == 64 and body["model"] == "claude-test" and "top_p" not in body
    assert gen.usage.prompt_tokens == 10 and gen.usage.cache_write_tokens == 8 and gen.usage.cache_read_tokens == 0
    assert KEY not in str(gen.to_json()) and KEY not in caplog.text


def test_anthropic_prompt_cache_read_on_the_second_call_and_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeProviders() as fake:
        gens = fast(AnthropicBackend, fake, concurrency=1).run([chat("one"), chat("two")])
        hour = fast(AnthropicBackend, fake, prompt_cache="1h").run([chat("three")])[0]
        off = fast(AnthropicBackend, fake, prompt_cache="off").run([chat("four")])[0]
        bodies = [s.body for s in fake.requests]
    assert (gens[0].usage.cache_write_tokens, gens[0].usage.cache_read_tokens) == (8, 0)
    assert (gens[1].usage.cache_write_tokens, gens[1].usage.cache_read_tokens) == (0, 8)
    assert gens[1].usage.prompt_tokens == 9 and gens[1].usage.uncached_tokens == 1
    assert bodies[2]["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert hour.usage.cache_read_tokens == 8
    assert bodies[3]["system"] == [{"type": "text", "text": "You are a fair judge. Use the rubric."}]
    assert off.usage.cache_read_tokens == 0 and off.usage.cache_write_tokens == 0


def test_anthropic_fewshot_turns_end_the_cached_prefix() -> None:
    req = GenerationRequest(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "ex 1"},
                                      {"role": "assistant", "content": "[RESULT] 2"},
                                      {"role": "user", "content": "item"}])
    body = anthropic_body(req, model="m")
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "text", "text": "[RESULT] 2", "cache_control": {"type": "ephemeral"}}]}
    assert body["messages"][2] == {"role": "user", "content": "item"}


@pytest.mark.parametrize("status", [429, 529, 500, 503])
def test_anthropic_retries_429_529_and_5xx_honouring_retry_after(status: int) -> None:
    with FakeProviders() as fake:
        fake.fail_next(status, retry_after="0", times=2)
        backend = fast(AnthropicBackend, fake)
        gen = backend.run([chat()])[0]
        assert len(fake.requests) == 3
    assert gen.text == "[RESULT] 3" and gen.retries == 2


def test_retry_after_is_waited_for() -> None:
    import time

    with FakeProviders() as fake:
        fake.fail_next(529, retry_after="0.6")
        t0 = time.perf_counter()
        fast(GeminiBackend, fake).run([chat()])
        assert time.perf_counter() - t0 >= 0.6 and len(fake.requests) == 2


@pytest.mark.parametrize("cls", [AnthropicBackend, GeminiBackend])
@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_4xx_is_never_retried(cls: type, status: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)
    with FakeProviders() as fake:
        fake.fail_next(status, body={"type": "error", "error": {"message": f"bad request; your key {KEY}"}}, times=3)
        out = fast(cls, fake).run([chat()])[0]
        assert len(fake.requests) == 1
    assert isinstance(out, BackendRequestError) and out.status == status
    assert KEY not in str(out) and "***" in str(out)


@pytest.mark.parametrize(("reason", "finish"), [("end_turn", "stop"), ("stop_sequence", "stop"),
                                                ("max_tokens", "length"), ("refusal", "content_filter")])
def test_anthropic_stop_reasons(reason: str, finish: str) -> None:
    choices, usage = anthropic_answer({"type": "message", "content": [{"type": "text", "text": "x"}],
                                       "stop_reason": reason, "usage": {"input_tokens": 3, "output_tokens": 1}})
    assert choices[0].finish_reason == finish and usage.prompt_tokens == 3


def test_json_schema_output_moves_refused_keywords_into_the_description() -> None:
    req = GenerationRequest(messages=[{"role": "user", "content": "x"}], constraint={"json_schema": SCHEMA})
    body = anthropic_body(req, model="m")
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": {
        "type": "object", "properties": {"score": {"type": "integer",
                                                   "description": "the grade\n\n{minimum: 1, maximum: 5}"}},
        "required": ["score"], "additionalProperties": False}}}
    assert anthropic_schema({"type": "string", "format": "email", "pattern": "a+"}) == {
        "type": "string", "format": "email", "description": "{pattern: a+}"}
    config = gemini_body(req)["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"] == {"type": "OBJECT", "properties": {"score": {
        "type": "INTEGER", "minimum": 1, "maximum": 5, "description": "the grade"}}, "required": ["score"]}
    assert gemini_schema({"type": ["string", "null"], "const": "a"}) == {"type": "STRING", "nullable": True,
                                                                         "enum": ["a"]}


def test_gemini_headers_body_logprobs_and_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)
    top = {"3": 0.6, "4": 0.3, "2": 0.1}
    with FakeProviders(reply=lambda s: "3", top=top) as fake:
        backend = fast(GeminiBackend, fake)
        req = GenerationRequest(messages=chat().messages, max_tokens=5, temperature=0.5, top_p=0.9, seed=7,
                                logprobs=True, top_logprobs=5, stop=["\n"])
        gens = backend.run([req, req])
        seen = fake.requests[0]
    assert seen.path == "/v1beta/models/gemini-test:generateContent"
    assert seen.headers["x-goog-api-key"] == KEY and "authorization" not in seen.headers
    assert seen.body["systemInstruction"] == {"parts": [{"text": "You are a fair judge. Use the rubric."}]}
    assert seen.body["contents"] == [{"role": "user", "parts": [{"text": "Rate this."}]}]
    assert seen.body["generationConfig"] == {"temperature": 0.5, "topP": 0.9, "maxOutputTokens": 5, "seed": 7,
                                             "stopSequences": ["\n"], "responseLogprobs": True, "logprobs": 5}
    gen = gens[0]
    assert gen.text == "3" and gen.finish_reason == "stop" and gen.model == "gemini-fake-001"
    assert gen.tokens == ["3"] and gen.token_logprobs == [pytest.approx(math.log(0.6))]
    assert gen.top_logprobs == [{k: pytest.approx(math.log(v)) for k, v in top.items()}]
    assert gens[0].usage.prompt_tokens == 10 and gens[1].usage.cache_read_tokens + gens[0].usage.cache_read_tokens == 8


def test_gemini_several_samples_in_one_request() -> None:
    with FakeProviders(reply=lambda s: "2") as fake:
        gen = fast(GeminiBackend, fake).run([GenerationRequest(messages=chat().messages, n=3, temperature=1.0)])[0]
        assert len(fake.requests) == 1 and fake.requests[0].body["generationConfig"]["candidateCount"] == 3
    assert [c.text for c in gen.choices] == ["2", "2", "2"]


@pytest.mark.parametrize(("finish", "block", "reason"), [("SAFETY", None, "content_filter"),
                                                          ("RECITATION", None, "content_filter"),
                                                          ("STOP", "PROHIBITED_CONTENT", "content_filter"),
                                                          ("MAX_TOKENS", None, "length")])
def test_gemini_safety_blocks_are_answers_without_text(finish: str, block: str | None, reason: str) -> None:
    with FakeProviders(finish_reason=finish, block_reason=block) as fake:
        gen = fast(GeminiBackend, fake).run([chat()])[0]
        assert len(fake.requests) == 1
    assert gen.finish_reason == reason
    assert (gen.text == "") == (reason == "content_filter")


def test_gemini_answer_is_pure_and_refuses_what_is_no_answer() -> None:
    choices, usage = gemini_answer({"candidates": [{"content": {"parts": [{"text": "thinking", "thought": True},
                                                                          {"text": "A"}]},
                                                    "finishReason": "STOP"}],
                                    "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 1,
                                                      "thoughtsTokenCount": 4, "cachedContentTokenCount": 5}})
    assert choices[0].text == "A" and (usage.prompt_tokens, usage.completion_tokens, usage.cache_read_tokens) == (7, 5, 5)
    with pytest.raises(ValueError, match="candidates"):
        gemini_answer({"error": "x"})


def test_claude_has_no_logprobs_said_once(caplog: pytest.LogCaptureFixture) -> None:
    req = GenerationRequest(messages=chat().messages, logprobs=True, top_logprobs=5)
    with FakeProviders() as fake, caplog.at_level(logging.WARNING):
        gens = fast(AnthropicBackend, fake).run([req, req, req])
        assert "logprobs" not in fake.requests[0].body
    assert all(g.top_logprobs is None for g in gens)
    assert caplog.text.count("Claude returns no logprobs") == 1


def test_service_tier_and_repetition_penalty_only_where_the_host_takes_them() -> None:
    req = GenerationRequest(messages=chat().messages, repetition_penalty=1.1)
    official = OpenAICompatibleBackend("https://api.openai.com/v1", "gpt-4o-mini", service_tier="flex")
    body = official.build_body(req)
    assert "repetition_penalty" not in body and "repeat_penalty" not in body and body["service_tier"] == "flex"
    assert body["prompt_cache_key"].startswith("evalign-") and len(body["prompt_cache_key"]) == 24
    local = OpenAICompatibleBackend("http://localhost:8000/v1", "m").build_body(req)
    assert local["repetition_penalty"] == 1.1 and "prompt_cache_key" not in local
    assert "repetition_penalty" not in anthropic_body(req, model="m")
    with pytest.raises(UsageError, match="service_tier: the anthropic backend takes no service tier"):
        AnthropicBackend(model="claude", service_tier="flex")


def test_anthropic_caches_the_shared_start_of_the_last_turn() -> None:
    template = "###Task: grade the response.\n###Rubric: honesty\n###Response:\n"
    reqs = [GenerationRequest(messages=[{"role": "system", "content": "S"},
                                        {"role": "user", "content": f"{template}Answer number {i}"}]) for i in range(3)]
    with FakeProviders() as fake:
        fast(AnthropicBackend, fake, concurrency=1).run(reqs)
        # a later wave of one request keeps the cut the first wave found
        again = fast(AnthropicBackend, fake, concurrency=1)
        again.run(reqs[:2])
        again.run(reqs[2:])
        bodies = [s.body for s in fake.requests]
    for body in bodies:
        assert body["messages"][-1]["content"] == [
            {"type": "text", "text": template, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": body["messages"][-1]["content"][1]["text"]}]
    assert [b["messages"][-1]["content"][1]["text"] for b in bodies] == [f"Answer number {i}" for i in (0, 1, 2, 0, 1, 2)]
    # byte for byte the same prompt: the blocks join into the user's text
    single = anthropic_body(reqs[0], model="m", user_prefix="no such start")
    assert single["messages"][-1]["content"] == f"{template}Answer number 0"


def test_the_providers_own_url_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(BackendRequestError, match=r"needs a key, and \$ANTHROPIC_API_KEY is not set") as e:
        AnthropicBackend(model="claude-sonnet-4-5").run([chat()])  # nothing is sent
    assert e.value.fatal
    monkeypatch.setenv("GEMINI_API_KEY", "")
    with pytest.raises(BackendRequestError, match=r"\$GEMINI_API_KEY is not set"):
        GeminiBackend(model="gemini-2.5-flash").run([chat()])


def test_anthropic_several_samples_are_several_requests() -> None:
    with FakeProviders(reply=lambda s: "[RESULT] 5") as fake:
        gen = fast(AnthropicBackend, fake).run([GenerationRequest(messages=chat().messages, n=3, temperature=1.0)])[0]
        assert len(fake.requests) == 3 and all("n" not in r.body for r in fake.requests)
    assert [c.text for c in gen.choices] == ["[RESULT] 5"] * 3 and gen.usage.completion_tokens == 6


def test_anthropic_never_sends_temperature_and_top_p_together(caplog: pytest.LogCaptureFixture) -> None:
    def body(t: float, p: float) -> dict:
        return anthropic_body(GenerationRequest(prompt="x", temperature=t, top_p=p), model="m")

    assert body(1.0, 0.9)["top_p"] == 0.9 and "temperature" not in body(1.0, 0.9)  # Prometheus' sampling
    assert body(0.0, 1.0)["temperature"] == 0.0 and "top_p" not in body(0.0, 1.0)
    assert body(0.7, 0.9)["temperature"] == 0.7 and "top_p" not in body(0.7, 0.9)
    assert body(1.5, 1.0)["temperature"] == 1.0
    with FakeProviders() as fake, caplog.at_level(logging.WARNING):
        fast(AnthropicBackend, fake).run([GenerationRequest(prompt="x", temperature=0.5, top_p=0.8)] * 2)
    assert caplog.text.count("top_p 0.8 is not sent with temperature 0.5") == 1
