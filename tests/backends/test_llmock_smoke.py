"""An outside check of the OpenAI batch path: evalign's :class:`~evalign.backends.batch.BatchBackend` and
its synchronous backend against LLMock (``llmock`` on PyPI, a third-party mock of OpenAI's
``/v1/chat/completions``, Files API and ``/v1/batches``, run as a real HTTP server in a thread), not
against the fakes this project wrote. LLMock's ``echo`` style answers ``Hello! You said: PROMPT`` (the
messages' text joined, cut at 120 characters), so each answer is known before the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from llmock.routers import batch as llmock_batch
from llmock.simulation import MockResponseSettings
from llmock.testing import LLMockServer

from evalign.backends.batch import BatchSettings
from evalign.backends.batch_adapters import batch_backend
from evalign.backends.batch_store import BatchStore
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.backends.types import Generation, GenerationRequest

FAST = BatchSettings(poll=0.01, poll_max=0.05)


def test_openai_batch_path_against_llmock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llmock_batch, "_BATCH_DELAY", 0.0)  # LLMock ends a batch 3 s after its creation
    monkeypatch.setenv("LLMOCK_RESPONSE_STYLE", "echo")
    monkeypatch.setenv("LLMOCK_SMOKE_KEY", "sk-llmock-smoke")
    prompts = [f"Grade answer {i}: it is {2 * i}." for i in range(5)]
    reqs = [GenerationRequest(messages=[{"role": "system", "content": "You grade."}, {"role": "user", "content": p}],
                              max_tokens=32) for p in prompts]
    with LLMockServer(responses=MockResponseSettings(response_style="echo")) as server:
        url = server.base_url("openai")
        inner = OpenAICompatibleBackend(url, "gpt-4o", api_key_env="LLMOCK_SMOKE_KEY", max_retries=0)
        be = batch_backend(inner, FAST, cache_path=tmp_path / "c.sqlite", on_progress=lambda s: None,
                           on_note=lambda s: None)
        got = be.run(reqs)
        sync = OpenAICompatibleBackend(url, "gpt-4o", api_key_env="LLMOCK_SMOKE_KEY").run(reqs)
    for g, s, p in zip(got, sync, prompts, strict=True):
        assert isinstance(g, Generation) and isinstance(s, Generation), (g, s)
        assert g.text == s.text == f"Hello! You said: You grade. {p}"[: len("Hello! You said: ") + 120]
        assert g.finish_reason == s.finish_reason == "stop"
    assert be.batch_summary() == {"batches": 1, "lines": 5, "failed_lines": 0, "retried_lines": 0, "by_reason": {}}
    (rec,) = BatchStore(tmp_path / "c.sqlite").records()
    assert (rec.provider, rec.state, rec.done, rec.failed) == ("openai", "completed", 5, 0)
