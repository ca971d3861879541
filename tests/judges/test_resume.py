"""Kill tests: ``evalign judge`` as a real subprocess, interrupted halfway (SIGINT, SIGKILL), then run
again. A request-counting proxy in front of the real server shows that no finished call is made
twice, and the resumed result equals an uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from evalign.cache import Cache
from sigint import default_sigint  # tests/, on the path

GRAMMAR = 'root ::= "Feedback: " [a-z ]{10,30} " [RESULT] " [1-5]'
N_ITEMS = 10
SAMPLES = 2
TOTAL = N_ITEMS * SAMPLES


def write_items(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(N_ITEMS):
            fh.write(json.dumps({"id": f"q{i}", "system": "s", "instruction": f"Explain step {i}.",
                                 "reference": "A clear explanation.", "response": "Because " * (i + 1)}) + "\n")
    return path


def command(src: Path, out: Path, url: str, model: str, grammar: Path) -> list[str]:
    return [
        sys.executable, "-c", "from evalign.cli import main; main()", "judge", str(src), "--mode", "absolute",
        "--base-url", url, "--model", model, "--grammar", str(grammar), "--samples", str(SAMPLES), "--seed", "5",
        "--max-tokens", "128", "--concurrency", "2", "-o", str(out),
    ]  # fmt: skip


def posts(proxy) -> list:  # type: ignore[no-untyped-def]
    return [s for s in proxy.seen if s.path.endswith("/chat/completions")]


def run_to_end(cmd: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EVALIGN_CACHE": str(cache)}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)


def interrupt_halfway(cmd: list[str], cache: Path, partial: Path, sig: int) -> int:
    """Start the command and send ``sig`` once about half of the calls are logged as finished."""
    env = {**os.environ, "EVALIGN_CACHE": str(cache)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)  # SIGINT works in a background job too
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            done = len(partial.read_text().splitlines()) - 1 if partial.exists() else 0
            if done >= TOTAL // 2:
                proc.send_signal(sig)
                break
            time.sleep(0.01)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode


@pytest.fixture(scope="module")
def reference_run(llama_server, tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, Path, Path]:
    """An uninterrupted run of the same command (its own cache), straight to the server."""
    tmp = tmp_path_factory.mktemp("reference")
    src = write_items(tmp / "items.jsonl")
    grammar = tmp / "g.gbnf"
    grammar.write_text(GRAMMAR)
    out = tmp / "judged.jsonl"
    done = run_to_end(command(src, out, llama_server.base_url, llama_server.model, grammar), tmp / "ref.sqlite")
    assert done.returncode == 0, done.stderr
    summary = json.loads(Path(f"{out}.summary.json").read_text())
    assert summary["calls"]["new"] == TOTAL
    return pd.read_json(out, lines=True), src, grammar


@pytest.mark.server
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_interrupted_run_resumes_without_repeating_calls(
    llama_server, fault_proxy, tmp_path: Path, reference_run: tuple[pd.DataFrame, Path, Path], sig: int
) -> None:
    expected, src, grammar = reference_run
    out = tmp_path / "judged.jsonl"
    partial = Path(f"{out}.partial.jsonl")
    cache_path = tmp_path / "run.sqlite"
    cmd = command(src, out, fault_proxy.base_url, llama_server.model, grammar)

    rc = interrupt_halfway(cmd, cache_path, partial, sig)
    assert rc == (130 if sig == signal.SIGINT else -signal.SIGKILL)
    assert not out.exists()  # no half-written final table
    assert partial.exists()
    with Cache(cache_path) as cache:
        finished = cache.count("judge")
    assert 0 < finished < TOTAL
    first_requests = len(posts(fault_proxy))
    assert finished <= first_requests <= finished + 2  # at most the calls in flight were lost

    fault_proxy.reset()
    done = run_to_end(cmd, cache_path)
    assert done.returncode == 0, done.stderr
    second = posts(fault_proxy)
    # only the calls that had not finished are made, each once
    assert len(second) == TOTAL - finished
    bodies = [json.dumps(s.body, sort_keys=True) for s in second]
    assert len(set(bodies)) == len(bodies)
    with Cache(cache_path) as cache:
        assert cache.count("judge") == TOTAL
    summary = json.loads(Path(f"{out}.summary.json").read_text())
    assert summary["calls"]["cached"] == finished and summary["calls"]["new"] == TOTAL - finished
    assert not partial.exists()

    got = pd.read_json(out, lines=True)
    # every column as the uninterrupted run wrote it, but the calls' latencies (measured, never the same)
    timing = [c for c in got.columns if c.endswith(".seconds")]
    assert timing and (got[timing] > 0).all().all()
    pd.testing.assert_frame_equal(got.drop(columns=timing), expected.drop(columns=timing))
    col = "prometheus_absolute[helpfulness]"
    assert (got[f"{col}.status"] == "scored").all()
