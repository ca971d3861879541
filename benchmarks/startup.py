"""Start-up of the command line: ``evalign --help``, ``evalign score --help``, and ``evalign score -m
rouge_l`` on the 2,016 bundled Self-Instruct items against a plain rouge-score loop over the same items.

Every figure is the wall time of a whole process (interpreter start, imports, work, exit), as a user
sees it; each command runs ``--repeat`` times and the median is printed. The rouge-score loop is the
peer a user would write: read the JSONL with ``json``, score each response against its reference
with ``rouge_score.rouge_scorer.RougeScorer(["rougeL"])``, write one JSON line per item. ``evalign
score`` reads the same file, validates it, scores, writes the scored table and prints the system
table. The values are checked to be identical (evalign's ``rouge_l`` is rouge-score's ROUGE-L F1).
Goal (issue 32): ``--help`` < 0.3 s on 2 cores; score >= 5x faster than the loop (was 1.6x).

Usage: ``python benchmarks/startup.py [--repeat 5]``. Timings depend on the machine's load (the load
average is printed); compare figures from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the plain rouge-score loop: what a user would write without evalign
PEER = """
import json, sys
from rouge_score import rouge_scorer
scorer = rouge_scorer.RougeScorer(["rougeL"])
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in src:
        rec = json.loads(line)
        f = scorer.score(rec["reference"], rec["response"])["rougeL"].fmeasure
        out.write(json.dumps({"id": rec["id"], "system": rec["system"], "rouge_l": f}) + "\\n")
"""


def timed(cmd: list[str], env: dict[str, str], repeat: int) -> float:
    """The median wall seconds of ``repeat`` runs of ``cmd`` (each must succeed)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if res.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")
    return statistics.median(times)


def self_instruct_items(path: Path) -> int:
    """The bundled Self-Instruct items (2,016: 252 instructions x 8 systems) as JSONL at ``path``."""
    from evalign.datasets import load_dataset
    from evalign.io import write_table

    items = load_dataset("self_instruct").items
    write_table(items, path)
    return len(items)


def same_scores(ours: Path, peer: Path) -> bool:
    """Whether evalign's rouge_l column equals the loop's value on every item."""
    a = {(r["id"], r["system"]): r["rouge_l"] for r in map(json.loads, ours.read_text(encoding="utf-8").splitlines())}
    b = {(r["id"], r["system"]): r["rouge_l"] for r in map(json.loads, peer.read_text(encoding="utf-8").splitlines())}
    return a.keys() == b.keys() and all(a[k] == b[k] for k in a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per command (the median is printed)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evalign-startup-"))
    env = {**os.environ, "EVALIGN_CACHE": str(tmp / "cache.sqlite"), "COLUMNS": "100"}
    items = tmp / "self_instruct.jsonl"
    n = self_instruct_items(items)
    evalign = [sys.executable, "-m", "evalign"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"evalign start-up, {os.cpu_count()} CPUs, load average {load:.2f} (median of {args.repeat} runs; wall s)")
    t_help = timed([*evalign, "--help"], env, args.repeat)
    t_score_help = timed([*evalign, "score", "--help"], env, args.repeat)
    t_python = timed([sys.executable, "-c", "pass"], env, args.repeat)
    print(f"  python -c pass                   {t_python:6.3f} s (the interpreter alone)")
    print(f"  evalign --help                   {t_help:6.3f} s (goal < 0.3 s)")
    print(f"  evalign score --help             {t_score_help:6.3f} s (goal < 0.3 s)")
    ours_out, peer_out = tmp / "scored.jsonl", tmp / "peer.jsonl"
    t_ours = timed([*evalign, "score", str(items), "-m", "rouge_l", "-o", str(ours_out)], env, args.repeat)
    t_peer = timed([sys.executable, "-c", PEER, str(items), str(peer_out)], env, args.repeat)
    same = same_scores(ours_out, peer_out)
    print(f"  evalign score -m rouge_l         {t_ours:6.3f} s ({n} items, scored table written)")
    print(f"  rouge-score loop                 {t_peer:6.3f} s (same items, same values: {same})")
    print(f"  speed-up                         {t_peer / t_ours:6.1f}x (goal >= 5x)")
    if not same:
        raise SystemExit("MISMATCH: evalign rouge_l differs from rouge-score")


if __name__ == "__main__":
    main()
