"""Peak memory of ``evalign score`` on one very long response (issue 12, item 7).

Writes a JSONL file with ``--items`` items (default 2) whose first response is ``--mb`` MB of
English-like words (default 50) and whose references are short, runs ``evalign score`` on it in a
child process for each metric set, and prints the child's peak resident memory (``ru_maxrss``)
next to the input size, with the ratio. ``--src`` runs another checkout's code (e.g. the main
branch) for a before/after comparison: ``python benchmarks/memory.py --src /work/main/src``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path


def make_input(path: Path, mb: float, items: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    # a Zipf-like vocabulary of 50,000 made-up words, so n-gram tables grow as in real text
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(50_000)]
    weights = [1.0 / (r + 1) for r in range(len(vocab))]
    target = int(mb * 1_000_000)
    parts: list[str] = []
    size = 0
    while size < target:
        chunk = rng.choices(vocab, weights=weights, k=100_000)
        parts.extend(chunk)
        size += sum(len(w) + 1 for w in chunk)
    long_text = " ".join(parts)[:target]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(items):
            response = long_text if i == 0 else "the cat sat on the mat"
            fh.write(json.dumps({"id": i, "system": "s", "response": response, "reference": "the cat sat on a mat"}) + "\n")
    return path.stat().st_size


def peak_rss_mb(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Peak RSS (MB) of a child process, its wall time (s) and exit code."""
    t0 = time.perf_counter()
    code = os.fork()
    if code == 0:  # child: exec the command (its output discarded) so that wait4 measures only it
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.execvpe(cmd[0], cmd, env)
    _, status, usage = os.wait4(code, 0)
    return usage.ru_maxrss / 1024, time.perf_counter() - t0, os.waitstatus_to_exitcode(status)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--items", type=int, default=2)
    ap.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--metrics", nargs="*", default=["rouge_l", "bleu", "chrf", "exact_match"])
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": args.src}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "long.jsonl"
        in_mb = make_input(src, args.mb, args.items) / 1e6
        base, _, _ = peak_rss_mb([sys.executable, "-c", "import evalign.cli"], env)
        print(f"code: {args.src}")
        print(f"input: {in_mb:.1f} MB ({args.items} items, one response of {args.mb:g} MB); "
              f"python + evalign import alone: {base:.0f} MB peak")
        print(f"{'metric':<12} {'peak RSS MB':>12} {'over import MB':>15} {'x input':>8} {'seconds':>8} {'exit':>5}")
        for m in args.metrics:
            out = Path(tmp) / f"out_{m}.jsonl"
            cmd = [sys.executable, "-c", "from evalign.cli import main; main()", "score", str(src), "-m", m,
                   "-o", str(out), "--json"]
            rss, secs, rc = peak_rss_mb(cmd, env)
            print(f"{m:<12} {rss:>12.0f} {rss - base:>15.0f} {(rss - base) / in_mb:>8.1f} {secs:>8.1f} {rc:>5}")


if __name__ == "__main__":
    main()
