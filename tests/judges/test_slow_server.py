"""Runs that fit slow local servers (issue 18, item 5): streamed answers told apart from hung ones
(``timeout`` / ``idle_timeout``), abandoned requests counted and said, the HF backend stopping on
cancel, the ranking protocol's cap on unparseable rounds, parse reasons that say what was seen, and
a pairwise column not named after a rubric nobody chose. No model server needed: the fault proxy
answers as a stub."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

import pytest
from fault_proxy import FaultProxy, Stall, Trickle, by_attempt

from evalign.backends import BackendRequestError, GenerationRequest, OpenAICompatibleBackend
from evalign.backends._http import merge_stream, sse_data
from evalign.backends.llama_server import LlamaServer
from evalign.judges import get_judge
from evalign.judges.parsing import ParseResult, parse_grade

REQ = GenerationRequest(messages=[{"role": "user", "content": "grade [[req-1]]"}], max_tokens=8)


def test_merge_stream_rebuilds_chat_and_completions_answers() -> None:
    chat = [
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"content": "[RESULT]"},
                                  "logprobs": {"content": [{"token": "[RESULT]", "logprob": -0.1}]}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"content": " 4"}, "finish_reason": "stop",
                                  "logprobs": {"content": [{"token": " 4", "logprob": -0.5}]}}]},
        {"id": "c1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
    ]
    out = merge_stream(chat)
    assert out["choices"] == [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": "[RESULT] 4"},
                               "logprobs": {"content": [{"token": "[RESULT]", "logprob": -0.1},
                                                        {"token": " 4", "logprob": -0.5}]}}]
    assert out["usage"] == {"prompt_tokens": 9, "completion_tokens": 2} and out["id"] == "c1"
    comp = [{"choices": [{"index": 0, "text": "A", "logprobs": {"tokens": ["A"], "token_logprobs": [-1.0],
                                                                 "top_logprobs": [{"A": -1.0}]}}]},
            {"choices": [{"index": 0, "text": "B", "finish_reason": "length",
                          "logprobs": {"tokens": ["B"], "token_logprobs": [-2.0], "top_logprobs": [{"B": -2.0}]}}]}]
    merged = merge_stream(comp)
    assert merged["usage"] == {"prompt_tokens": 0, "completion_tokens": 2, "counted_from_chunks": True}
    c = merged["choices"][0]
    assert c["text"] == "AB" and c["finish_reason"] == "length"
    assert c["logprobs"]["tokens"] == ["A", "B"] and c["logprobs"]["token_logprobs"] == [-1.0, -2.0]
    assert sse_data(": ping") is None and sse_data("data: [DONE]") == "[DONE]"


def test_a_streaming_server_is_waited_for_past_the_timeout() -> None:
    """Six events 0.4 s apart (2.4 s in all) with --timeout 1 and --idle-timeout 1: the answer is
    read whole, in ONE request (nothing abandoned, nothing re-sent)."""
    with FaultProxy(None, by_attempt({"[[req-1]]": [Trickle(0.4)]})) as proxy:
        be = OpenAICompatibleBackend(proxy.base_url, "m", stream=True, api_key_env=None, timeout=1.0, idle_timeout=1.0,
                                     max_retries=2)
        t0 = time.monotonic()
        gen = be.run([REQ], raise_errors=True)[0]
        took = time.monotonic() - t0
        assert gen.text == "Feedback: ok [RESULT] 3" and gen.finish_reason == "stop"  # type: ignore[union-attr]
        assert gen.usage.completion_tokens == 6  # type: ignore[union-attr]
        assert took > 2.0 and len(proxy.seen) == 1
        assert proxy.seen[0].body["stream"] is True  # type: ignore[index]
        assert be.stats()["abandoned"] == 0 and be.stats()["retries"] == 0


def test_a_hung_stream_is_abandoned_after_the_idle_timeout_and_the_retry_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with FaultProxy(None, by_attempt({"[[req-1]]": [Stall(30), Stall(30)]})) as proxy:
        be = OpenAICompatibleBackend(proxy.base_url, "m", stream=True, api_key_env=None, timeout=5.0, idle_timeout=0.5,
                                     max_retries=1, backoff_base=0.01)
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING), pytest.raises(BackendRequestError) as info:
            be.run([REQ], raise_errors=True)
        assert time.monotonic() - t0 < 4.0
        assert "no byte from the server for 0.5 s (--idle-timeout)" in str(info.value)
        assert info.value.attempts == 2 and len(proxy.seen) == 2
        assert be.abandoned == 1
        assert any("abandoned on a timeout" in r.getMessage() for r in caplog.records)


def test_without_streaming_the_timeout_bounds_the_whole_answer() -> None:
    with FaultProxy(None, by_attempt({"[[req-1]]": [Trickle(0.4)]})) as proxy:
        be = OpenAICompatibleBackend(proxy.base_url, "m", api_key_env=None, timeout=1.0, stream=False,
                                     max_retries=0)
        with pytest.raises(BackendRequestError, match=r"timed out after 1 s waiting for an answer"):
            be.run([REQ], raise_errors=True)
        assert "stream" not in proxy.seen[0].body  # type: ignore[operator]


def test_a_server_that_ignores_stream_is_read_as_json() -> None:
    with FaultProxy(None) as proxy:  # the stub answers JSON whatever was asked
        be = OpenAICompatibleBackend(proxy.base_url, "m", stream=True, api_key_env=None)
        gen = be.run([REQ], raise_errors=True)[0]
        assert gen.text == "Feedback: ok [RESULT] 3" and gen.usage.prompt_tokens == 7  # type: ignore[union-attr]


def test_hf_backend_stops_within_seconds_when_cancelled(tiny_hf_model) -> None:
    """A batch that would generate 4,000 tokens is cancelled after 0.5 s: the await ends at once and
    the worker thread within a few seconds (the stop flag ends generate() at its next token)."""
    from evalign.backends.hf import HFLocalBackend

    be = HFLocalBackend(str(tiny_hf_model("native")), device="cpu", batch_size=2)
    reqs = [GenerationRequest(messages=[{"role": "user", "content": f"Score {i}"}], max_tokens=4000)
            for i in range(2)]
    done: list[int] = []

    async def main() -> float:
        task = asyncio.ensure_future(be.generate_many(reqs, lambda i, g: done.append(i)))
        await asyncio.sleep(0.5)
        task.cancel()
        t0 = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t0

    before = set(threading.enumerate())
    t0 = time.monotonic()
    assert asyncio.run(main()) < 1.0
    assert time.monotonic() - t0 < 6.0  # asyncio.run waited for the worker thread, which stopped early
    assert done == [] and not [t for t in set(threading.enumerate()) - before if t.is_alive()]
    # the flag is cleared for the next run: a short request still works
    gen = be.run([GenerationRequest(messages=[{"role": "user", "content": "Score"}], max_tokens=3)])[0]
    assert gen.usage.completion_tokens >= 1  # type: ignore[union-attr]


def test_listed_rubric_levels_are_not_called_conflicting() -> None:
    r = parse_grade("[Score 1][Score 2][Score 3]", "absolute", "stop")
    assert r.reason == "rubric_levels_listed" and "1, 2, 3" in r.detail
    assert parse_grade("[RESULT] 3 and then [RESULT] 4", "absolute", "stop").reason == "conflicting"
    assert parse_grade("[RESULT] 1 [RESULT] 3 [RESULT] 5", "absolute", "stop").reason == "conflicting"


def test_ranking_gives_up_after_its_unparseable_cap() -> None:
    judge = get_judge("ranking", max_rounds=5, max_unparseable=2)
    bad, four = ParseResult(None, "no_score"), ParseResult(4.0)
    one_bad = {(0, "a"): bad, (0, "b"): four}
    assert judge.next_calls(one_bad) == [(1, "a"), (1, "b")]
    two_bad = {**one_bad, (1, "a"): four, (1, "b"): bad}
    assert judge.next_calls(two_bad) == []
    ties = {(r, s): four for r in range(3) for s in "ab"}  # ties alone go on to max_rounds
    assert judge.next_calls(ties) == [(3, "a"), (3, "b")]
    assert "max_unparseable" in judge.extra_options()


def test_a_pairwise_column_is_named_after_a_rubric_only_when_one_was_chosen() -> None:
    assert get_judge("pairwise").column == "prometheus_relative"
    assert get_judge("pairwise", rubric="harmlessness").column == "prometheus_relative[harmlessness]"
    assert get_judge("absolute").column == "prometheus_absolute[helpfulness]"
    assert get_judge("ranking").column == "prometheus_ranking[helpfulness]"


def test_cli_takes_idle_timeout_and_checks_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evalign.cli import app

    src = tmp_path / "items.jsonl"
    src.write_text('{"id": "q", "instruction": "Say hi.", "response": "hi"}\n')
    res = CliRunner().invoke(app, ["judge", str(src), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                                   "--idle-timeout", "0"])
    assert res.exit_code != 0 and "--idle-timeout" in res.output


def test_a_stream_cut_before_its_finish_reason_is_retried_not_read_as_empty() -> None:
    """A stream that closes after its first event (as llama-cpp-python's server does to a streamed answer
    when another request arrives) is not an (empty) answer: it is retried, and said when retries run out."""
    with FaultProxy(None, by_attempt({"[[req-1]]": [Stall(0.1)]})) as proxy:
        be = OpenAICompatibleBackend(proxy.base_url, "m", stream=True, api_key_env=None, max_retries=1)
        gen = be.run([REQ], raise_errors=True)[0]
        assert gen.text == "Feedback: ok [RESULT] 3" and len(proxy.seen) == 2  # type: ignore[union-attr]
    with FaultProxy(None, by_attempt({"[[req-1]]": [Stall(0.1)]})) as proxy:
        be = OpenAICompatibleBackend(proxy.base_url, "m", stream=True, api_key_env=None, max_retries=0)
        with pytest.raises(BackendRequestError, match="ended before the answer was finished"):
            be.run([REQ], raise_errors=True)


def test_evalign_starts_llama_cpp_servers_that_do_not_interrupt_streams(tmp_path: Path) -> None:
    cmd = LlamaServer(tmp_path / "m.gguf").command()
    assert cmd[cmd.index("--interrupt_requests") + 1] == "False"
