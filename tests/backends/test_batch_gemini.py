"""Batch mode for the native ``gemini`` backend against a fake of the Gemini API's batch mode (inline
requests with ``metadata.key``; a batch over the inline limit as a JSONL file of ``{"key", "request"}``
lines through the Files API's resumable upload, its answers a responses file): answers equal the
synchronous path's, mapped by key (or by position when the API leaves the metadata out), per-key errors
and absent answers counted and sent again, the same 400 twice given up, the key sent as ``x-goog-api-key``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_batch_api import MISSING, OK, FakeGemini, Fate

from evalign.backends.base import BackendRequestError
from evalign.backends.batch import BatchSettings
from evalign.backends.batch_adapters import batch_backend
from evalign.backends.batch_store import BatchStore
from evalign.backends.gemini_api import GeminiBackend
from evalign.backends.types import Generation, GenerationRequest

FAST = BatchSettings(poll=0.001, poll_max=0.01)


def requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(messages=[{"role": "system", "content": "You grade answers."},
                                        {"role": "user", "content": f"Grade answer {i}."}], max_tokens=64)
            for i in range(n)]


def batched(fake: FakeGemini, cache: Path, inline_max: int | None = None):  # type: ignore[no-untyped-def]
    inner = GeminiBackend(fake.base_url, "gemini-fake", api_key_env="FAKE_GEMINI_KEY", max_retries=0)
    be = batch_backend(inner, FAST, cache_path=cache, on_progress=lambda s: None, on_note=lambda s: None)
    if inline_max is not None:  # the fake refuses inline creates over its limit, as the API does over 20 MB
        be.adapter.inline_max_bytes = fake.inline_limit = inline_max
    return be


@pytest.mark.parametrize("echo_keys", [True, False])
def test_answers_equal_the_synchronous_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo_keys: bool) -> None:
    monkeypatch.setenv("FAKE_GEMINI_KEY", "gm-fake-key")
    reqs = requests(10)
    with FakeGemini() as fake:
        fake.echo_keys = echo_keys
        be = batched(fake, tmp_path / "c.sqlite")
        got = be.run(reqs)
        sync = GeminiBackend(fake.base_url, "gemini-fake", api_key_env="FAKE_GEMINI_KEY").run(reqs)
        assert fake.keys_seen == {"gm-fake-key"} and fake.sync_calls == 10
        assert fake.modes == ["inline"] and fake.uploads == []
    for g, s in zip(got, sync, strict=True):
        assert isinstance(g, Generation) and isinstance(s, Generation)
        assert (g.text, g.finish_reason, g.usage) == (s.text, s.finish_reason, s.usage)
    (rec,) = BatchStore(tmp_path / "c.sqlite").records()
    assert (rec.provider, rec.state, rec.done) == ("gemini", "BATCH_STATE_SUCCEEDED", 10)


def test_a_batch_over_the_inline_limit_goes_as_an_uploaded_file(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GEMINI_KEY", "gm-fake-key")
    reqs = requests(30)
    with FakeGemini() as fake:
        be = batched(fake, tmp_path / "c.sqlite", inline_max=2_000)
        got = be.run(reqs)
        sync = GeminiBackend(fake.base_url, "gemini-fake", api_key_env="FAKE_GEMINI_KEY").run(reqs)
        assert fake.modes == ["file"] and len(fake.uploads) == 1 and fake.uploads[0] > 2_000
        (name,) = [n for n in fake.files if n.startswith("files/up")]
        lines = [json.loads(ln) for ln in fake.files[name].splitlines()]
        assert [ln["key"] for ln in lines] == [be.key_of(r) for r in reqs]
        assert lines[0]["request"] == be.inner.build_body(reqs[0])
        assert fake.keys_seen == {"gm-fake-key"}
    for g, s in zip(got, sync, strict=True):  # the responses file came back in reverse order
        assert isinstance(g, Generation) and isinstance(s, Generation)
        assert (g.text, g.finish_reason, g.usage) == (s.text, s.finish_reason, s.usage)
    (rec,) = BatchStore(tmp_path / "c.sqlite").records()
    assert (rec.provider, rec.state, rec.done, rec.detail.get("input_file")) == (
        "gemini", "BATCH_STATE_SUCCEEDED", 30, name)


def test_the_fake_refuses_an_inline_batch_over_its_limit(tmp_path: Path) -> None:
    """The check of the test above: sent inline, the same batch is refused (what the file path avoids)."""
    with FakeGemini() as fake:
        be = batched(fake, tmp_path / "c.sqlite", inline_max=2_000)
        be.adapter.inline_max_bytes = 10**9
        with pytest.raises(BackendRequestError, match="exceeds the limit"):
            be.run(requests(30))
        assert fake.modes == []


@pytest.mark.parametrize("inline_max", [None, 300])
def test_per_key_errors_and_absent_answers_are_sent_again(tmp_path: Path, inline_max: int | None) -> None:
    reqs = requests(6)
    with FakeGemini() as fake:
        be = batched(fake, tmp_path / "c.sqlite", inline_max)
        ks = [be.key_of(r) for r in reqs]
        first = {ks[0]: Fate("error", 500, "internal"), ks[1]: MISSING}
        bad = ks[2]

        def fate(key: str, attempt: int) -> Fate:
            if key == bad:
                return Fate("error", 400, "Invalid JSON payload")
            return first.get(key, OK) if attempt == 0 else OK

        fake.fate = fate
        got = be.run(reqs)
        assert [fake.submitted[k] for k in ks] == [2, 2, 2, 1, 1, 1]
        assert set(fake.modes) == {"inline" if inline_max is None else "file"}
    assert isinstance(got[2], BackendRequestError) and "Invalid JSON payload" in str(got[2])
    assert all(isinstance(got[i], Generation) for i in (0, 1, 3, 4, 5))
    assert be.batch_summary()["by_reason"] == {"http_500": 1, "missing": 1, "http_400": 2}
