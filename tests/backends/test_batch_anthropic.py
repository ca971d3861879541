"""Batch mode for the native ``anthropic`` backend against a fake of Anthropic's Message Batches API:
answers equal the synchronous path's, results mapped back by custom_id, ``errored`` / ``canceled`` /
``expired`` / absent lines counted by reason and sent again, an ``invalid_request_error`` twice given up,
the key sent as ``x-api-key`` with ``anthropic-version``, and the shared prefix cached for 1 h."""

from __future__ import annotations

from pathlib import Path

from fake_batch_api import MISSING, OK, FakeAnthropic, Fate

from evalign.backends.anthropic_api import AnthropicBackend
from evalign.backends.base import BackendRequestError
from evalign.backends.batch import BatchSettings
from evalign.backends.batch_adapters import batch_backend
from evalign.backends.batch_store import BatchStore
from evalign.backends.types import Generation, GenerationRequest

FAST = BatchSettings(poll=0.001, poll_max=0.01)


def requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(messages=[{"role": "system", "content": "You grade answers. " * 5},
                                        {"role": "user", "content": f"Grade answer {i}."}], max_tokens=64)
            for i in range(n)]


def backend(fake: FakeAnthropic) -> AnthropicBackend:
    return AnthropicBackend(fake.base_url, "claude-fake", api_key_env="FAKE_ANTHROPIC_KEY", max_retries=0)


def test_answers_equal_the_synchronous_path_and_lines_carry_the_1h_cache(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "sk-ant-fake")
    reqs = requests(12)
    with FakeAnthropic() as fake:
        be = batch_backend(backend(fake), FAST, cache_path=tmp_path / "c.sqlite", on_progress=lambda s: None,
                           on_note=lambda s: None)
        got = be.run(reqs)
        sync = backend(fake).run(reqs)
        assert fake.headers_seen == {("2023-06-01", True)}
        params = fake.params[be.key_of(reqs[0])]
    assert params["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert params["max_tokens"] == 64 and params["model"] == "claude-fake"
    for g, s in zip(got, sync, strict=True):
        assert isinstance(g, Generation) and isinstance(s, Generation)
        assert (g.text, g.finish_reason, g.usage) == (s.text, s.finish_reason, s.usage)
    (rec,) = BatchStore(tmp_path / "c.sqlite").records()
    assert (rec.provider, rec.state, rec.done, rec.key_env) == ("anthropic", "ended", 12, "FAKE_ANTHROPIC_KEY")


def test_errored_canceled_expired_and_absent_lines_are_sent_again(tmp_path: Path) -> None:
    reqs = requests(8)
    shapes = [Fate("errored", 400, "bad request"), Fate("canceled"), Fate("expired"), MISSING]
    with FakeAnthropic() as fake:
        be = batch_backend(backend(fake), FAST, cache_path=tmp_path / "c.sqlite", on_progress=lambda s: None,
                           on_note=lambda s: None)
        first = {be.key_of(r): shapes[i] for i, r in enumerate(reqs[:4])}
        fake.fate = lambda cid, attempt: first.get(cid, OK) if attempt == 0 else OK
        got = be.run(reqs)
        assert [fake.submitted[be.key_of(r)] for r in reqs] == [2] * 4 + [1] * 4
    assert all(isinstance(g, Generation) for g in got)
    assert be.batch_summary()["by_reason"] == {"errored": 1, "canceled": 1, "expired": 1, "missing": 1}


def test_invalid_request_error_twice_is_given_up(tmp_path: Path) -> None:
    reqs = requests(2)
    with FakeAnthropic() as fake:
        be = batch_backend(backend(fake), FAST, cache_path=tmp_path / "c.sqlite", on_progress=lambda s: None,
                           on_note=lambda s: None)
        bad = be.key_of(reqs[0])
        fake.fate = lambda cid, attempt: Fate("errored", 400, "max_tokens: too large") if cid == bad else OK
        got = be.run(reqs)
        assert fake.submitted[bad] == 2
    assert isinstance(got[0], BackendRequestError) and "max_tokens: too large" in str(got[0])
    assert isinstance(got[1], Generation)
