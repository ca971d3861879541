"""``evalign judge`` as a real subprocess against broken servers (the fault proxy in stub mode, no
model): a server that never answers, one that answers HTML with 200, one that answers 400 to
everything (with the API key echoed in its body); and option values checked before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_proxy import FaultProxy, Forward, Hang, Seen, Status

from evalign.backends import GenerationRequest, OpenAICompatibleBackend

SECRET = "sk-live-ZXQSECRETKEY-0123456789"


def write_items(path: Path, n: int = 3) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "system": "s", "instruction": f"Say {i}.", "response": "ok"}) + "\n")
    return path


def judge(args: list[str], tmp_path: Path, timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "EVALIGN_KEY": SECRET, "EVALIGN_CACHE": str(tmp_path / "cache.sqlite")}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "from evalign.cli import main; main()", "judge", *args, "--api-key-env", "EVALIGN_KEY"],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip
    return proc, time.monotonic() - t0


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    err = [x for x in lines if x.startswith("error")]
    assert len(err) == 1, proc.stderr
    return " ".join(proc.stderr[proc.stderr.index("error"):].split())


def test_server_that_never_answers_is_bounded(tmp_path: Path) -> None:
    src = write_items(tmp_path / "items.jsonl")
    with FaultProxy(None, lambda seen: Hang(60)) as proxy:
        proc, took = judge([str(src), "--base-url", proxy.base_url, "--model", "m", "--timeout", "1",
                            "--max-retries", "1", "-o", str(tmp_path / "out.jsonl")], tmp_path)
        assert proc.returncode == 1 and took < 30
        msg = one_line_error(proc)
        assert "3 of 3 judge calls failed after retries" in msg and "timed out after 1 s" in msg
        # --deadline stops everything, even with a long per-request timeout
        proc, took = judge([str(src), "--base-url", proxy.base_url, "--model", "m", "--timeout", "60",
                            "--deadline", "2"], tmp_path)
    assert proc.returncode == 1 and took < 30
    assert "deadline of 2 s" in one_line_error(proc)


def test_html_with_200_is_a_clear_error(tmp_path: Path) -> None:
    src = write_items(tmp_path / "items.jsonl")
    page = "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>It works</body></html>"
    with FaultProxy(None, lambda seen: Status(200, body=page)) as proxy:
        proc, took = judge([str(src), "--base-url", proxy.base_url, "--model", "m"], tmp_path)
        assert len(proxy.calls) <= 3  # fatal at once: no retries (the 3 rows may be in flight together)
    assert proc.returncode == 1 and took < 30
    msg = one_line_error(proc)
    assert "HTTP 200 with a web page" in msg and "Welcome to nginx!" in msg and "--base-url" in msg


def test_400_to_everything_exits_1_with_the_message_and_no_key(tmp_path: Path) -> None:
    src = write_items(tmp_path / "items.jsonl", n=4)
    # the server echoes the key, placed so that it straddles character 300 of the body
    body = json.dumps({"error": {"message": "x" * 270 + f" Authorization: Bearer {SECRET} rejected; "
                                 "system role not supported by this chat template"}})
    out = tmp_path / "out.jsonl"
    with FaultProxy(None, lambda seen: Status(400, body=body)) as proxy:
        proc, _ = judge([str(src), "--base-url", proxy.base_url, "--model", "m", "-o", str(out)], tmp_path)
        assert {s.authorized for s in proxy.seen} == {f"Bearer {SECRET}"}
    assert proc.returncode == 1
    msg = one_line_error(proc)
    assert "4 of 4 judge calls failed after retries" in msg and "HTTP 400" in msg
    assert "--system-prompt fold" in msg  # the hint for a rejected system role
    assert "Backend errors" in proc.stdout
    # the key is nowhere: not in any output, file, or a prefix of it
    texts = [proc.stdout, proc.stderr] + [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    for text in texts:
        assert "ZXQSECRETKEY" not in text and "sk-live" not in text
    table = [json.loads(x) for x in out.read_text().splitlines()]
    col = "prometheus_absolute[helpfulness]"
    assert all(r[f"{col}.reason"] == "backend_error" and "HTTP 400" in r[f"{col}.error"] for r in table)
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())
    assert summary["failed_fraction"] == 1.0 and "HTTP 400" in summary["last_error"]


def test_system_prompt_fold_sends_no_system_message() -> None:
    msgs = [{"role": "system", "content": "Be fair."}, {"role": "user", "content": "Grade this."}]
    fold = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m", system_prompt="fold")
    assert fold.build_body(GenerationRequest(messages=msgs))["messages"] == [
        {"role": "user", "content": "Be fair.\n\nGrade this."}]
    assert fold.identity()["system_prompt"] == "fold"
    role = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m")
    assert role.build_body(GenerationRequest(messages=msgs))["messages"] == msgs


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--base-url", "not a url"], "--base-url"),
        (["--base-url", "ftp://example.com/v1"], "--base-url"),
        (["--concurrency", "0"], "--concurrency"),
        (["--timeout", "0"], "--timeout"),
        (["--max-retries", "-1"], "--max-retries"),
        (["--temperature", "-1"], "--temperature"),
        (["--top-p", "1.5"], "--top-p"),
        (["--limit", "0"], "--limit"),
        (["--limit", "-5"], "--limit"),
        (["--samples", "0"], "--samples"),
        (["--max-failed", "2"], "--max-failed"),
        (["--max-rounds", "0"], "--max-rounds"),
        (["--system-prompt", "inline"], "--system-prompt"),
        (["--geval-fallback", "guess"], "--geval-fallback"),
        (["--connect-timeout", "0"], "--connect-timeout"),
        (["--deadline", "-1"], "--deadline"),
    ],
)
def test_bad_option_values_are_usage_errors(tmp_path: Path, args: list[str], option: str) -> None:
    src = write_items(tmp_path / "items.jsonl")
    base = {"--base-url": "http://127.0.0.1:9/v1"}
    if "--base-url" not in args:
        args = [*args, "--base-url", base["--base-url"]]
    proc, took = judge([str(src), "--model", "m", *args], tmp_path)
    assert proc.returncode == 2
    msg = one_line_error(proc)
    assert f"{option} must be" in msg and took < 30


def refuse_grammar(seen: Seen) -> Status | Forward:
    """A server that answers 400 to any request carrying a GBNF grammar (and the stub answer otherwise)."""
    if seen.body and "grammar" in seen.body:
        return Status(400, body=json.dumps({"error": {"message": "unsupported field: grammar"}}))
    return Forward()


def test_a_server_that_refuses_the_constraint_gets_one_line(tmp_path: Path) -> None:
    """--constrain auto: one note line naming the refusal, and the run goes on unconstrained (every
    row read from the unconstrained answers); --constrain on: that line is the error, exit 1."""
    src = write_items(tmp_path / "items.jsonl")
    out = tmp_path / "out.jsonl"
    with FaultProxy(None, refuse_grammar) as proxy:
        proc, _ = judge([str(src), "--base-url", proxy.base_url, "--model", "m", "--constraint-format", "llama.cpp",
                         "--max-tokens", "64", "-o", str(out), "--json"], tmp_path)
        posts = [s for s in proxy.seen if s.path.endswith("/chat/completions")]
        refused = [s for s in posts if "grammar" in (s.body or {})]
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    notes = [x for x in proc.stderr.splitlines() if x.startswith("note")]
    assert len(notes) == 1, proc.stderr
    assert "refused the output constraint" in notes[0] and "HTTP 400" in notes[0] and "unsupported field" in notes[0]
    assert "going on without the constraint" in notes[0]
    summary = json.loads(proc.stdout)
    assert summary["scored"] == 3 and summary["constraint"]["sent"] is False
    assert summary["constraint"]["note"] == notes[0].removeprefix("note: ")
    assert refused and len(posts) - len(refused) >= 3  # the unconstrained calls were made
    with FaultProxy(None, refuse_grammar) as proxy:
        proc, _ = judge([str(src), "--base-url", proxy.base_url, "--model", "m", "--constraint-format", "llama.cpp",
                         "--max-tokens", "64", "--constrain", "on", "--no-cache"], tmp_path)
    assert proc.returncode == 1
    msg = one_line_error(proc)
    assert "refused the output constraint" in msg and "--constrain on" in msg


def test_a_server_that_cannot_take_the_shape_is_said_before_any_call(tmp_path: Path) -> None:
    """The stub says nothing of its kind (no owned_by): read as an OpenAI-style server, which takes a
    JSON schema only; the regex shape of the Prometheus template is not sent (one note), and with
    --constrain on the run stops before any call."""
    src = write_items(tmp_path / "items.jsonl")
    with FaultProxy(None) as proxy:
        proc, _ = judge([str(src), "--base-url", proxy.base_url, "--model", "m", "--json"], tmp_path)
        notes = [x for x in proc.stderr.splitlines() if x.startswith("note")]
        assert proc.returncode == 0 and len(notes) == 1, proc.stderr
        assert "constraint format openai: no owned_by" in notes[0] and "--constraint-format llama.cpp or vllm" in notes[0]
        proxy.reset()
        proc, _ = judge([str(src), "--base-url", proxy.base_url, "--model", "m", "--constrain", "on"], tmp_path)
        assert not [s for s in proxy.seen if s.path.endswith("/chat/completions")]
    assert proc.returncode == 1 and "cannot constrain the output" in one_line_error(proc)
