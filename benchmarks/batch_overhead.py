"""Batch-mode overhead (issue 44, Speed): ``--items`` items judged end to end through the OpenAI batch
path (:class:`evalign.backends.batch.BatchBackend`: JSONL built and uploaded, the batch created, polled,
its output file streamed back into the cache) against the fake Batch API of the tests
(tests/backends/fake_batch_api.py, run in its own process so that its CPU is not counted; a batch is
done three polls after it is created), compared with the synchronous path (one ``/chat/completions``
request per item, ``--concurrency`` in flight) on ``--sync-items`` items against the same fake.

Each run is a child process (:func:`evalign.judges.runner.run_judge`, Prometheus absolute grading, a
fresh cache file); the figures: wall seconds, client CPU seconds (user + system of the child) per item,
and the child's peak RSS. Memory flat: the batch path's peak RSS at ``--items`` and at a fifth of it,
per item, against the synchronous path's (the runner keeps each row's verdict in both; a batch path
that held its result file in memory would add the file's size).

Targets: ``--items 50000`` in < 60 s on 2 cores; batch CPU per item within 1.5x of the synchronous path's.
Usage: ``python benchmarks/batch_overhead.py [--items 50000] [--sync-items 5000] [--concurrency 16]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "backends"))

SERVE = """
import sys, time
sys.path.insert(0, {path!r})
from fake_batch_api import FakeOpenAI
with FakeOpenAI() as fake:
    print(fake.base_url, flush=True)
    while True:
        time.sleep(3600)
"""


def table(n: int):  # type: ignore[no-untyped-def]
    """``n`` distinct judge items."""
    import pandas as pd

    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "system": ["s"] * n,
                         "instruction": [f"Explain step {i} of the proof in two sentences." for i in range(n)],
                         "response": [f"Step {i} follows from the previous one by induction." for i in range(n)]})


def child(mode: str, n: int, url: str, concurrency: int, cache: str) -> dict[str, float]:
    """One run in this process: its wall and CPU seconds, peak RSS (MiB) and verdicts."""
    from evalign.backends.batch import BatchSettings
    from evalign.backends.batch_adapters import batch_backend
    from evalign.backends.openai import OpenAICompatibleBackend
    from evalign.cache import Cache
    from evalign.judges.runner import run_judge
    from evalign.judges.spec import JudgeSpec, make_judge

    items = table(n)
    judge = make_judge(JudgeSpec(mode="absolute", constrain="off"))
    be: object = OpenAICompatibleBackend(url, "gpt-fake", api_key_env=None, concurrency=concurrency)
    if mode == "batch":
        be = batch_backend(be, BatchSettings(poll=0.05, poll_max=0.5), cache_path=cache,  # type: ignore[arg-type]
                           on_progress=lambda s: None, on_note=lambda s: None)
    t0, c0 = time.perf_counter(), time.process_time()
    run = run_judge(items, judge, be, cache=Cache(cache))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall_s": wall, "cpu_s": cpu, "rss_mib": rss, "scored": int(run.table[run.column].notna().sum())}


def spawn(mode: str, n: int, url: str, concurrency: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--child", mode, "--items", str(n), "--url", url,
               "--concurrency", str(concurrency), "--cache", str(Path(tmp) / "cache.sqlite")]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ})
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=50_000)
    ap.add_argument("--sync-items", type=int, default=5_000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--child")
    ap.add_argument("--url")
    ap.add_argument("--cache")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.items, a.url, a.concurrency, a.cache)))
        return
    server = subprocess.Popen([sys.executable, "-c", SERVE.format(path=str(ROOT / "tests" / "backends"))],
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()  # type: ignore[union-attr]
        small = spawn("batch", a.items // 5, url, a.concurrency)
        same = spawn("batch", a.sync_items, url, a.concurrency)
        big = spawn("batch", a.items, url, a.concurrency)
        sync = spawn("sync", a.sync_items, url, a.concurrency)
    finally:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        server.kill()
        server.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    fake_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    per = {k: v["cpu_s"] / n * 1e3 for k, v, n in (("batch", big, a.items), ("sync", sync, a.sync_items))}
    print(f"batch path, {a.items} items: {big['wall_s']:.1f} s wall, {big['cpu_s']:.1f} s client CPU "
          f"({per['batch']:.3f} ms/item), peak RSS {big['rss_mib']:.0f} MiB, scored {big['scored']}")
    print(f"batch path, {a.items // 5} items: {small['wall_s']:.1f} s wall, peak RSS {small['rss_mib']:.0f} MiB")
    print(f"batch path, {a.sync_items} items: {same['wall_s']:.1f} s wall, {same['cpu_s']:.1f} s client CPU, peak RSS "
          f"{same['rss_mib']:.0f} MiB (the sync path's at the same size: {sync['rss_mib']:.0f} MiB)")
    print(f"sync path, {a.sync_items} items: {sync['wall_s']:.1f} s wall, {sync['cpu_s']:.1f} s client CPU "
          f"({per['sync']:.3f} ms/item), peak RSS {sync['rss_mib']:.0f} MiB, scored {sync['scored']}")
    slope = (big["rss_mib"] - small["rss_mib"]) * 1024 / (a.items - a.items // 5)
    print(f"CPU per item, batch / sync: {per['batch'] / per['sync']:.2f}x (target <= 1.5x)")
    print(f"peak RSS per extra item on the batch path: {slope:.2f} KiB (the runner's own rows; the output file "
          f"is streamed)")
    print(f"the fake server's CPU over all runs: {fake_cpu:.1f} s; load average now: "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"{a.items}-item target (< 60 s wall): {'met' if big['wall_s'] < 60 else 'NOT met'} ({big['wall_s']:.1f} s)")


if __name__ == "__main__":
    main()
