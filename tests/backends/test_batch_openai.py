"""Batch mode (``--batch-api``) against a fake of OpenAI's Batch API (tests/backends/fake_batch_api.py):
the batch lifecycle, results out of order, every per-line failure shape counted by reason and sent
again, the same 4xx twice given up with the provider's message, a whole batch failing validation or
expiring half done, keys absent from every file, splitting, the deadline, and the records in the cache."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fake_batch_api import MISSING, OK, FakeOpenAI, Fate

from evalign.backends.base import BackendRequestError
from evalign.backends.batch import BatchSettings
from evalign.backends.batch_adapters import batch_backend, cancel_in_flight
from evalign.backends.batch_store import BatchStore
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.backends.types import Generation, GenerationRequest
from evalign.cache import Cache
from evalign.errors import EvalignError

FAST = BatchSettings(poll=0.001, poll_max=0.01)


def requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(messages=[{"role": "system", "content": "You grade."},
                                        {"role": "user", "content": f"Grade answer {i}."}], max_tokens=64)
            for i in range(n)]


def batched(fake: FakeOpenAI, cache: Path, settings: BatchSettings = FAST):  # type: ignore[no-untyped-def]
    inner = OpenAICompatibleBackend(fake.base_url, "gpt-fake", api_key_env=None, max_retries=0)
    return batch_backend(inner, settings, cache_path=cache, on_progress=lambda line: None, on_note=lambda line: None)


def keys_of(be, reqs):  # type: ignore[no-untyped-def]
    return [be.key_of(r) for r in reqs]


def test_lifecycle_results_out_of_order_equal_the_synchronous_answers(tmp_path: Path) -> None:
    reqs = requests(30)
    with FakeOpenAI() as fake:
        be = batched(fake, tmp_path / "c.sqlite")
        got = be.run(reqs)
        sync = OpenAICompatibleBackend(fake.base_url, "gpt-fake", api_key_env=None).run(reqs)
        (bid,) = fake.batches
        assert fake.history[bid] == ["in_progress", "finalizing", "completed"]  # created as validating
        out = fake.files[fake.batches[bid]["output_file_id"]].decode().splitlines()
    order = [json.loads(x)["custom_id"] for x in out]
    assert order == list(reversed(keys_of(be, reqs)))  # the fake answers in reverse: mapped back by custom_id
    assert all(isinstance(g, Generation) for g in got)
    for g, s in zip(got, sync, strict=True):
        assert isinstance(s, Generation)
        assert (g.text, g.finish_reason, g.usage, g.model, g.system_fingerprint) == (
            s.text, s.finish_reason, s.usage, s.model, s.system_fingerprint)
    assert be.batch_summary() == {"batches": 1, "lines": 30, "failed_lines": 0, "retried_lines": 0, "by_reason": {}}
    (rec,) = BatchStore(tmp_path / "c.sqlite").records()
    assert (rec.provider, rec.state, rec.collected, rec.lines, rec.done, rec.failed) == ("openai", "completed", True,
                                                                                         30, 30, 0)
    assert rec.batch_id == bid and rec.key_env is None and rec.url == fake.base_url


def test_every_per_line_failure_shape_is_counted_by_reason_and_sent_again(tmp_path: Path) -> None:
    reqs = requests(20)
    shapes = [Fate("http", 500, "server error"), Fate("http_error_file", 429, "rate limited"),
              Fate("error", message="something broke", code="server_error"), MISSING]

    with FakeOpenAI() as fake:
        be = batched(fake, tmp_path / "c.sqlite")
        ks = keys_of(be, reqs)
        first = {k: shapes[i % 4] for i, k in enumerate(ks[:8])}
        fake.fate = lambda cid, attempt: first.get(cid, OK) if attempt == 0 else OK
        got = be.run(reqs)
        assert all(fake.submitted[k] == (2 if k in first else 1) for k in ks)
    assert all(isinstance(g, Generation) for g in got)
    s = be.batch_summary()
    assert s["by_reason"] == {"http_500": 2, "http_429": 2, "error": 2, "missing": 2}
    assert (s["batches"], s["lines"], s["failed_lines"], s["retried_lines"]) == (2, 28, 8, 8)


def test_same_client_error_twice_is_given_up_with_the_providers_message(tmp_path: Path) -> None:
    reqs = requests(4)
    with FakeOpenAI() as fake:
        be = batched(fake, tmp_path / "c.sqlite")
        bad = keys_of(be, reqs)[0]
        fake.fate = lambda cid, attempt: Fate("http", 400, "Invalid 'max_tokens': too large") if cid == bad else OK
        got = be.run(reqs)
        assert fake.submitted[bad] == 2  # never a third time
    assert isinstance(got[0], BackendRequestError) and got[0].status == 400
    assert "Invalid 'max_tokens': too large" in str(got[0]) and "same client error twice" in str(got[0])
    assert all(isinstance(g, Generation) for g in got[1:])


def test_a_line_failing_every_time_is_sent_retries_plus_one_times(tmp_path: Path) -> None:
    reqs = requests(3)
    with FakeOpenAI() as fake:
        be = batched(fake, tmp_path / "c.sqlite")
        bad = keys_of(be, reqs)[1]
        fake.fate = lambda cid, attempt: Fate("error", message="overloaded") if cid == bad else OK
        got = be.run(reqs)
        assert fake.submitted[bad] == 3  # --batch-retries 2
    assert isinstance(got[1], BackendRequestError) and "overloaded" in str(got[1])
    assert be.batch_summary()["by_reason"] == {"error": 3}


def test_retries_sent_as_ordinary_requests_with_retry_sync(tmp_path: Path) -> None:
    reqs = requests(6)
    with FakeOpenAI() as fake:
        be = batched(fake, tmp_path / "c.sqlite", BatchSettings(poll=0.001, retry="sync"))
        fake.fate = lambda cid, attempt: MISSING if cid == keys_of(be, reqs)[2] else OK
        got = be.run(reqs)
        assert fake.sync_calls == 1 and len(fake.batches) == 1
    assert all(isinstance(g, Generation) for g in got)


def test_whole_batch_validation_failure_is_sent_again(tmp_path: Path) -> None:
    reqs = requests(5)
    with FakeOpenAI() as fake:
        fake.outcomes = ["failed"]
        be = batched(fake, tmp_path / "c.sqlite")
        got = be.run(reqs)
        states = [b["status"] for b in fake.batches.values()]
    assert states == ["failed", "completed"]
    assert all(isinstance(g, Generation) for g in got)
    assert be.batch_summary()["by_reason"] == {"batch_failed": 5}
    recs = BatchStore(tmp_path / "c.sqlite").records()
    assert [(r.state, r.done, r.failed) for r in recs] == [("failed", 0, 5), ("completed", 5, 0)]


def test_batch_expiring_half_done_keeps_its_finished_lines(tmp_path: Path) -> None:
    reqs = requests(10)
    with FakeOpenAI() as fake:
        fake.outcomes = ["expired_half"]
        be = batched(fake, tmp_path / "c.sqlite")
        got = be.run(reqs)
        ks = keys_of(be, reqs)
        assert [fake.submitted[k] for k in ks] == [1] * 5 + [2] * 5  # only the unfinished half again
    assert all(isinstance(g, Generation) for g in got)
    assert be.batch_summary()["by_reason"] == {"expired": 5}


def test_keys_absent_from_every_file_are_sent_again(tmp_path: Path) -> None:
    reqs = requests(6)
    with FakeOpenAI(fate=lambda cid, attempt: MISSING if attempt == 0 else OK) as fake:
        be = batched(fake, tmp_path / "c.sqlite")
        got = be.run(reqs)
        first = fake.batches[next(iter(fake.batches))]
        assert first["output_file_id"] is None and first["error_file_id"] is None
    assert all(isinstance(g, Generation) for g in got)
    assert be.batch_summary()["by_reason"] == {"missing": 6}


def test_waves_split_by_max_requests_one_line_per_distinct_key(tmp_path: Path) -> None:
    reqs = requests(20)
    with FakeOpenAI() as fake:
        be = batched(fake, tmp_path / "c.sqlite", BatchSettings(poll=0.001, max_requests=7))
        got = be.run(reqs + reqs[:5])  # duplicates: one line each
        sizes = [len(fake.inputs[b]) for b in fake.batches]
    assert sizes == [7, 7, 6]
    assert len(got) == 25 and got[20].text == got[0].text  # type: ignore[union-attr]


def test_custom_ids_must_fit_every_provider(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        be = batched(fake, tmp_path / "c.sqlite")
        with pytest.raises(ValueError, match="custom id"):
            asyncio.run(be.generate_many(requests(1), keys=["has a space"]))
        with pytest.raises(ValueError, match="custom id"):
            asyncio.run(be.generate_many(requests(1), keys=["x" * 65]))


def test_deadline_leaves_batches_running_and_a_rerun_collects_them(tmp_path: Path) -> None:
    reqs = requests(4)
    cache = tmp_path / "c.sqlite"
    with FakeOpenAI() as fake:
        fake.hold = True
        be = batched(fake, cache, BatchSettings(poll=0.01, deadline=0.2))
        with pytest.raises(BackendRequestError, match=r"deadline.*left running at the provider") as e:
            be.run(reqs)
        assert e.value.fatal
        assert Cache(cache).batch_held(keys_of(be, reqs)) == set(keys_of(be, reqs))  # claimed meanwhile
        assert Cache(cache).claim("judge", keys_of(be, reqs)) == []
        fake.hold = False
        got = batched(fake, cache).run(reqs)
        assert len(fake.batches) == 1 and max(fake.submitted.values()) == 1  # re-attached, nothing twice
    assert all(isinstance(g, Generation) for g in got)
    assert Cache(cache).batch_held(keys_of(be, reqs)) == set()


def test_cancel_in_flight_uses_the_recorded_url_and_key_variable(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test-123456")
    with FakeOpenAI() as fake:
        fake.hold = True
        inner = OpenAICompatibleBackend(fake.base_url, "gpt-fake", api_key_env="FAKE_KEY", max_retries=0)
        be = batch_backend(inner, BatchSettings(poll=0.01, deadline=0.1), cache_path=tmp_path / "c.sqlite",
                           on_progress=lambda line: None, on_note=lambda line: None)
        with pytest.raises(BackendRequestError):
            be.run(requests(2))
        store = BatchStore(tmp_path / "c.sqlite")
        ((rec, state),) = cancel_in_flight(store)
        assert state == "cancelling" and fake.batches[rec.batch_id]["status"] == "cancelling"
        assert fake.keys_seen == {"sk-test-123456"}
    raw = (tmp_path / "c.sqlite").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("c.sqlite-*"))
    assert b"sk-test-123456" not in raw and b"FAKE_KEY" in raw  # the variable's name, never the key


def test_a_plain_run_never_sends_calls_held_by_a_batch(tmp_path: Path) -> None:
    import pandas as pd

    from evalign.judges.runner import run_judge
    from evalign.judges.spec import JudgeSpec, make_judge

    cache = tmp_path / "c.sqlite"
    table = pd.DataFrame({"id": ["a", "b"], "system": ["s", "s"], "instruction": ["Say hi.", "Say bye."],
                          "response": ["hi", "bye"]})
    with FakeOpenAI() as fake:
        fake.hold = True
        judge = make_judge(JudgeSpec(mode="absolute", constrain="off"))
        be = batched(fake, cache, BatchSettings(poll=0.01, deadline=0.2))
        with pytest.raises(BackendRequestError, match="deadline"):
            run_judge(table, judge, be, cache=Cache(cache))
        plain = OpenAICompatibleBackend(fake.base_url, "gpt-fake", api_key_env=None)
        with pytest.raises(EvalignError, match="in provider batches still in flight"):
            run_judge(table, judge, plain, cache=Cache(cache))
        assert fake.sync_calls == 0
        fake.hold = False
        batched_run = run_judge(table, judge, batched(fake, cache), cache=Cache(cache))
        again = run_judge(table, judge, plain, cache=Cache(cache))  # without --batch-api: all from the cache
        assert fake.sync_calls == 0 and max(fake.submitted.values()) == 1
    col = batched_run.column
    assert batched_run.table[col].tolist() == again.table[col].tolist()
    assert again.summary.as_dict()["calls"]["cached"] == 2


def test_a_backend_without_a_batch_api_is_a_usage_error(tmp_path: Path) -> None:
    from evalign.backends import BackendOptions, create_backend
    from evalign.errors import UsageError

    multi = create_backend("openai", BackendOptions(model="m", base_url=["http://a:1/v1", "http://b:1/v1"]))
    with pytest.raises(UsageError, match="several --base-url has no batch API"):
        batch_backend(multi, FAST, cache_path=tmp_path / "c.sqlite")


def test_a_submission_the_provider_never_received_leaves_no_record(tmp_path: Path) -> None:
    inner = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "gpt-fake", api_key_env=None, max_retries=0)
    be = batch_backend(inner, FAST, cache_path=tmp_path / "c.sqlite", on_progress=lambda s: None,
                       on_note=lambda s: None)
    with pytest.raises(BackendRequestError, match=r"POST http://127\.0\.0\.1:9/v1/files"):
        be.run(requests(2))
    assert BatchStore(tmp_path / "c.sqlite").records() == []  # nothing claimed, nothing to look for
    assert Cache(tmp_path / "c.sqlite").batch_held([be.key_of(r) for r in requests(2)]) == set()


def test_a_batch_created_just_before_a_failure_is_found_by_its_submission_id(tmp_path: Path) -> None:
    reqs = requests(5)
    with FakeOpenAI() as fake:
        be = batched(fake, tmp_path / "c.sqlite")
        real = be.adapter.submit

        async def lost_answer(fh, n, submission):  # type: ignore[no-untyped-def]
            await real(fh, n, submission)  # the provider created the batch, but its answer never came
            raise BackendRequestError("connection reset while reading the answer")

        be.adapter.submit = lost_answer  # type: ignore[method-assign]
        with pytest.raises(BackendRequestError, match="connection reset"):
            be.run(reqs)
        (rec,) = BatchStore(tmp_path / "c.sqlite").records()
        assert rec.batch_id == next(iter(fake.batches)) and not rec.collected  # found by its metadata
        got = batched(fake, tmp_path / "c.sqlite").run(reqs)
        assert len(fake.batches) == 1 and set(fake.submitted.values()) == {1}
    assert all(isinstance(g, Generation) for g in got)
