"""Two ``evalign judge`` runs at the same time on one cache pay each call once: the first to lease a
key makes the call, the other waits for its output (two real processes against a counting local
server, the fault proxy in stub mode answering slowly)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fault_proxy import FaultProxy, Slow

N = 6


def start(tmp_path: Path, url: str, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "EVALIGN_CACHE": str(tmp_path / "cache.sqlite")}
    return subprocess.Popen(
        [sys.executable, "-c", "from evalign.cli import main; main()", "judge", str(tmp_path / "items.jsonl"),
         "--base-url", url, "--model", "m", "--concurrency", "2", "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def test_two_concurrent_runs_on_one_cache_pay_each_prompt_once(tmp_path: Path) -> None:
    with (tmp_path / "items.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(N):
            fh.write(json.dumps({"id": f"q{i}", "system": "s", "instruction": f"Say {i}.", "response": "ok"}) + "\n")
    with FaultProxy(None, lambda seen: Slow(0.6)) as proxy:
        procs = [start(tmp_path, proxy.base_url, tmp_path / f"out{k}.jsonl") for k in range(2)]
        results = [p.communicate(timeout=180) for p in procs]
        posts = [s for s in proxy.seen if s.path.endswith("/chat/completions")]
    for p, (_out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    assert len(posts) == N  # before: 12 (each prompt paid by both runs)
    assert len({json.dumps(s.body, sort_keys=True) for s in posts}) == N
    col = "prometheus_absolute[helpfulness]"
    tables = [[json.loads(x) for x in (tmp_path / f"out{k}.jsonl").read_text().splitlines()] for k in range(2)]
    assert [r[col] for r in tables[0]] == [r[col] for r in tables[1]] == [3] * N
    summaries = [json.loads((tmp_path / f"out{k}.jsonl.summary.json").read_text()) for k in range(2)]
    calls = [s["calls"] for s in summaries]
    assert sum(c["new"] for c in calls) == N and sum(c["cached"] for c in calls) == N, calls


def test_full_disk_under_the_cache_stops_the_run_with_one_line(tmp_path: Path) -> None:
    """The cache file may not grow (``max_page_count``, as a full disk): the run stops with one line
    naming the cache file, not an internal error."""
    import pandas as pd
    import pytest

    from evalign.backends import make_backend
    from evalign.cache import Cache
    from evalign.errors import EvalignError
    from evalign.judges import get_judge, run_judge

    table = pd.DataFrame([{"id": f"q{i}", "system": "s", "instruction": "Say " + "x" * 5000 + str(i),
                           "response": "ok"} for i in range(N)])
    cache = Cache(tmp_path / "c.sqlite")
    cache.put_many("filler", {f"f{i}": b"z" * 1000 for i in range(20)})
    assert cache._conn is not None
    pages = cache._conn.execute("PRAGMA page_count").fetchone()[0]
    cache._conn.execute(f"PRAGMA max_page_count={pages}")
    with FaultProxy(None) as proxy, pytest.raises(EvalignError) as info:
        run_judge(table, get_judge("absolute", max_tokens=16), make_backend("openai", base_url=proxy.base_url,
                  model="m", concurrency=1), cache=cache)  # fmt: skip
    msg = str(info.value)
    assert msg.startswith(f"cache {tmp_path / 'c.sqlite'}: cannot write (database or disk is full)"), msg
    cache.close()
