"""``evalign judge --batch-api`` as a real subprocess against the fake OpenAI Batch API: killed (-9) and
interrupted (Ctrl-C) while polling, then run again: it re-attaches and no line is submitted twice
(counted by the fake); its verdicts equal those of a synchronous run; ``evalign cache batches``
(``--cancel``) and ``cache clear`` keeping the records of batches in flight."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from fake_batch_api import OK, FakeOpenAI, Fate

from evalign.backends.batch_store import BatchStore
from sigint import default_sigint

N = 8


def items(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(N):
            fh.write(json.dumps({"id": f"q{i}", "system": "s", "instruction": f"What is {i} + {i}?",
                                 "response": f"It is {2 * i}."}) + "\n")
    return path


def judge(src: Path, out: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "-c", "from evalign.cli import main; main()", "judge", str(src), "--base-url", url,
            "--model", "gpt-fake", "--api-key-env", "FAKE_BATCH_KEY", "--constrain", "off", "--name", "J", "-o", str(out), *extra]


def evalign(*args: str) -> list[str]:
    return [sys.executable, "-c", "from evalign.cli import main; main()", *args]


def run(cmd: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EVALIGN_CACHE": str(cache), "FAKE_BATCH_KEY": "sk-fake-batch-0001"}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def stop_while_polling(cmd: list[str], cache: Path, fake: FakeOpenAI, sig: int) -> tuple[int, str]:
    """Start ``cmd`` and send ``sig`` once it has polled its batch twice; its exit code and stderr."""
    env = {**os.environ, "EVALIGN_CACHE": str(cache), "FAKE_BATCH_KEY": "sk-fake-batch-0001"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 90
    while fake.polls < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def batches(cache: Path) -> dict:  # type: ignore[type-arg]
    got = run(evalign("cache", "batches", "--json"), cache)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)  # type: ignore[no-any-return]


def test_kill_9_while_polling_then_rerun_submits_nothing_twice_and_equals_a_sync_run(tmp_path: Path) -> None:
    src = items(tmp_path / "items.jsonl")
    cache = tmp_path / "cache.sqlite"
    with FakeOpenAI() as fake:
        fake.hold = True
        cmd = judge(src, tmp_path / "batched.jsonl", fake.base_url, "--batch-api", "--batch-poll", "0.01")
        rc, _ = stop_while_polling(cmd, cache, fake, signal.SIGKILL)
        assert rc == -signal.SIGKILL
        (rec,) = BatchStore(cache).records()
        assert (rec.state, rec.collected, rec.lines, rec.key_env) == ("in_progress", False, N, "FAKE_BATCH_KEY")
        fake.hold = False
        again = run([*cmd, "--json", "--price", "2/8"], cache)
        assert again.returncode == 0, again.stderr
        assert "re-attached to 1 openai batch(es)" in again.stderr
        assert len(fake.batches) == 1 and len(fake.submitted) == N and set(fake.submitted.values()) == {1}
        summary = json.loads(again.stdout)
        assert summary["batch"] == {"batches": 0, "lines": 0, "failed_lines": 0, "retried_lines": 0, "by_reason": {}}
        assert summary["calls"]["new"] == N
        usage = summary["usage"]  # every answer came through the batch API: priced at the batch multiplier
        assert usage["batched_tokens"]["prompt_tokens"] == usage["prompt_tokens"] > 0
        detail = usage["cost_detail"]
        assert detail["run"]["cost"] == pytest.approx(0.5 * detail["list"]["cost"]) and detail["list"]["cost"] > 0
        sync = run(judge(src, tmp_path / "sync.jsonl", fake.base_url), tmp_path / "other.sqlite")
        assert sync.returncode == 0, sync.stderr
        assert fake.sync_calls == N
    a = pd.read_json(tmp_path / "batched.jsonl", lines=True)
    b = pd.read_json(tmp_path / "sync.jsonl", lines=True)
    for col in ("J", "J.feedback", "J.status", "J.prompt_tokens", "J.completion_tokens"):
        assert a[col].tolist() == b[col].tolist(), col
    assert a["J"].notna().all()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("cache.sqlite*"))
    assert b"sk-fake-batch-0001" not in raw


def test_ctrl_c_while_polling_says_how_to_resume_or_cancel(tmp_path: Path) -> None:
    src = items(tmp_path / "items.jsonl")
    cache = tmp_path / "cache.sqlite"
    with FakeOpenAI() as fake:
        fake.hold = True
        cmd = judge(src, tmp_path / "out.jsonl", fake.base_url, "--batch-api", "--batch-poll", "0.01")
        rc, err = stop_while_polling(cmd, cache, fake, signal.SIGINT)
        assert rc == 130
        assert "left running at the provider" in err and "evalign cache batches --cancel" in err
        cleared = run(evalign("cache", "clear", "--yes"), cache)
        assert cleared.returncode == 0 and "kept the records of 1 provider batch(es) still in flight" in cleared.stderr
        cancelled = run(evalign("cache", "batches", "--cancel"), cache)
        assert cancelled.returncode == 0 and "cancelling" in cancelled.stdout
        assert [b["status"] for b in fake.batches.values()] == ["cancelling"]
        fake.hold = False
        again = run([*cmd, "--json"], cache)  # the cancelled batch's lines are sent again, once
        assert again.returncode == 0, again.stderr
        assert set(fake.submitted.values()) == {2} and len(fake.batches) == 2
    summary = json.loads(again.stdout)
    assert summary["batch"]["by_reason"] == {"canceled": N} and summary["batch"]["retried_lines"] == N
    assert [b["collected"] for b in batches(cache)["batches"]] == [True, True]


def test_batch_options_are_usage_errors_named_as_options(tmp_path: Path) -> None:
    src = items(tmp_path / "items.jsonl")
    for extra, said in ((["--batch-retries", "1"], "--batch-retries goes with --batch-api"),
                        (["--batch-api", "--batch-poll", "0"], "--batch-poll must be > 0 seconds"),
                        (["--batch-api", "--batch-retry", "later"], "--batch-retry must be 'batch' or 'sync'"),
                        (["--batch-api", "--batch-max-requests", "0"], "--batch-max-requests must be an integer >= 1")):
        got = run(judge(src, tmp_path / "o.jsonl", "http://127.0.0.1:9/v1", *extra), tmp_path / "c.sqlite")
        assert got.returncode == 2 and said in got.stderr, (extra, got.stderr)


def test_bench_batch_api_sends_each_sets_calls_as_one_batch(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    with FakeOpenAI() as fake:
        got = run(evalign("bench", "--judge", f"fake=openai:gpt-fake@{fake.base_url}", "--batch-api", "--batch-poll", "0.01", "--per-set", "3", "--sets", "llmbar-natural",
                          "--constrain", "off", "--json"), cache)
        assert got.returncode == 0, got.stderr
        assert len(fake.batches) == 1 and fake.sync_calls == 0
        assert len(fake.submitted) == 6 and set(fake.submitted.values()) == {1}  # 3 pairs, both orders
    profile = json.loads(got.stdout)
    assert profile["runs"] and BatchStore(cache).records()[0].done == 6


def fail_first_line_once() -> Callable[[str, int], Fate]:
    """A fate: the first custom id the fake reads fails once with a 500 line, every other line is answered."""
    first: list[str] = []

    def fate(cid: str, attempt: int) -> Fate:
        if not first:
            first.append(cid)
        return Fate("http", 500, "overloaded") if cid == first[0] and attempt == 0 else OK

    return fate


BLOCK_WITH_ONE_RETRY = {"batches": 2, "lines": 7, "failed_lines": 1, "retried_lines": 1, "by_reason": {"http_500": 1}}


def test_bench_json_has_the_batch_block(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    with FakeOpenAI(fate=fail_first_line_once()) as fake:
        got = run(evalign("bench", "--judge", f"fake=openai:gpt-fake@{fake.base_url}", "--batch-api", "--batch-poll",
                          "0.01", "--per-set", "3", "--sets", "llmbar-natural", "--constrain", "off", "--json"), cache)
        assert got.returncode == 0, got.stderr
        assert len(fake.batches) == 2 and sum(fake.submitted.values()) == 7
        plain = run(evalign("bench", "--judge", f"fake=openai:gpt-fake@{fake.base_url}", "--per-set", "3", "--sets",
                            "llmbar-natural", "--constrain", "off", "--json"), cache)  # from the cache, no batch
        assert plain.returncode == 0, plain.stderr
        assert fake.sync_calls == 0
    assert json.loads(got.stdout)["batch"] == BLOCK_WITH_ONE_RETRY
    assert "batch" not in json.loads(plain.stdout)


def test_probe_json_has_the_batch_block(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    with pairs.open("w") as fh:
        for i in range(3):
            fh.write(json.dumps({"id": i, "system_a": "x", "system_b": "y", "instruction": f"Say hi ({i}).",
                                 "response_a": "Hello!", "response_b": "Hi " * (i + 1), "winner": "A"}) + "\n")
    out = tmp_path / "card.json"
    with FakeOpenAI(fate=fail_first_line_once()) as fake:
        got = run(evalign("probe", str(pairs), "--base-url", fake.base_url, "--model", "gpt-fake", "--api-key-env",
                          "FAKE_BATCH_KEY", "--probe", "position", "--constrain", "off", "--batch-api", "--batch-poll",
                          "0.01", "--out", str(out), "--json"), tmp_path / "c.sqlite")
        assert got.returncode == 0, got.stderr
        n = len(fake.submitted)
    block = json.loads(got.stdout)["batch"]
    assert block == {"batches": 2, "lines": n + 1, "failed_lines": 1, "retried_lines": 1, "by_reason": {"http_500": 1}}
    assert json.loads(out.read_text())["batch"] == block
