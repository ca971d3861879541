"""``evalign score``: the local engine (in memory, and sharded with ``--out-dir``) vs ``--engine ray``
with 1 and 2 worker processes on this machine, same data, one run each.

Data: ``--items`` synthetic short items (4 systems; response and reference of 6-12 words drawn
from a 2,000-word vocabulary, seeded), written as JSONL. Each engine runs as its own
``python -m evalign score`` process; peak memory is the largest sum of the resident set sizes of
that process and all its descendants (Ray's raylet, object store and workers included), sampled
every 0.1 s, so shared pages are counted more than once (an upper bound). Items/s are over the
whole command (start-up, reading, validation, scoring, writing, and Ray's start-up).

Prints the table and the ratios (local in-memory time / engine time: > 1 means faster).
Usage: ``python benchmarks/ray_vs_local.py [--items 100000] [--metrics bleu,rouge_l] [--shard-rows 10000]
[--only local,sharded,ray1,ray2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def make_items(path: Path, n: int, seed: int = 0) -> None:
    """``n`` short items as JSONL (4 systems)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(2000)]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            ref = " ".join(rng.choices(vocab, k=rng.randint(6, 12)))
            words = ref.split()
            resp = " ".join(w if rng.random() < 0.6 else rng.choice(vocab) for w in words)
            fh.write(json.dumps({"id": str(i // 4), "system": f"s{i % 4}", "response": resp, "reference": ref}) + "\n")


def run(cmd: list[str]) -> tuple[float, float, dict]:
    """Seconds, peak tree RSS (MiB) and the --json output of ``cmd``."""
    import psutil

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
                total = 0
                for p in procs:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
                peak[0] = max(peak[0], total)
            except psutil.Error:
                pass
            time.sleep(0.1)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, _ = proc.communicate()
    dt = time.perf_counter() - t0
    stop.set()
    th.join()
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return dt, peak[0] / 2**20, json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--metrics", default="bleu,rouge_l")
    ap.add_argument("--shard-rows", type=int, default=10_000)
    ap.add_argument("--only", default="local,sharded,ray1,ray2")
    args = ap.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "items.jsonl"
        make_items(src, args.items)
        base = [sys.executable, "-m", "evalign", "score", str(src), "-m", args.metrics, "--json", "--no-cache"]
        sharded = ["--shard-rows", str(args.shard_rows)]
        runs = {
            "local (in memory)": ("local", base),
            "local --out-dir (sharded)": ("sharded", [*base, "--out-dir", f"{tmp}/o-local", *sharded]),
            "ray, 1 worker": ("ray1", [*base, "--engine", "ray", "--workers", "1", "--out-dir", f"{tmp}/o-r1", *sharded]),
            "ray, 2 workers": ("ray2", [*base, "--engine", "ray", "--workers", "2", "--out-dir", f"{tmp}/o-r2", *sharded]),
        }
        results = {}
        for name, (key, cmd) in runs.items():
            if key in only:
                results[name] = run(cmd)
                print(f"  {name}: {results[name][0]:.1f} s", file=sys.stderr, flush=True)
    print(f"\n{args.items:,} items, metrics {args.metrics}, shards of {args.shard_rows:,} rows, "
          f"{os.cpu_count()} CPUs, one run each\n")
    print("| engine | seconds | items/s | peak RSS (MiB) | time vs local in memory |")
    print("|---|---:|---:|---:|---:|")
    ref = results.get("local (in memory)")
    for name, (dt, rss, _) in results.items():
        ratio = f"{ref[0] / dt:.2f}x" if ref else "-"
        print(f"| {name} | {dt:.1f} | {args.items / dt:,.0f} | {rss:,.0f} | {ratio} |")
    systems = [r[2]["systems"] for r in results.values()]
    print(f"\nsystem scores identical across engines: {all(s == systems[0] for s in systems)}")


if __name__ == "__main__":
    main()
