"""ROUGE-L: evalign's ``rouge_l`` (rouge-score tokenizer + rapidfuzz LCS) vs rouge-score.

Data: the 2,016 bundled Self-Instruct (response, reference) pairs, cycled and shuffled (seeded)
to N pairs (default 10,000). Both implementations score the same pairs in the same run, with
and without the Porter stemmer; the script checks the values are identical and prints the
times and the speed ratio.

Two data sets are timed: ``cycled`` (texts repeat, as references do across systems, so
evalign's per-text tokenization cache helps) and ``distinct`` (a unique token is appended to
every text, so nothing repeats and the cache cannot help).

Usage: ``python benchmarks/rouge_l.py [--n 10000] [--seed 0]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rouge_score import rouge_scorer

from evalign.datasets import load_dataset
from evalign.metrics import get_metric


def make_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    """``n`` (response, reference) pairs: the bundled items cycled, then shuffled."""
    df = load_dataset("self_instruct").items
    idx = np.resize(np.arange(len(df)), n)
    np.random.default_rng(seed).shuffle(idx)
    return [str(df["response"].iloc[i]) for i in idx], [str(df["reference"].iloc[i]) for i in idx]


def run(hyps: list[str], refs: list[str], stem: bool) -> tuple[tuple[float, float], tuple[float, float], bool]:
    """(wall, CPU) seconds for evalign and for rouge-score, and whether all values are identical.
    Both run single-threaded, so CPU seconds are the fairer figure on a shared machine."""
    w0, c0 = time.perf_counter(), time.process_time()
    ours = get_metric("rouge_l", use_stemmer=stem).score(hyps, [[r] for r in refs]).values
    t_ours = (time.perf_counter() - w0, time.process_time() - c0)

    w0, c0 = time.perf_counter(), time.process_time()
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stem)
    peer = np.array([scorer.score(r, h)["rougeL"].fmeasure for h, r in zip(hyps, refs, strict=True)])
    t_peer = (time.perf_counter() - w0, time.process_time() - c0)
    return t_ours, t_peer, bool(np.array_equal(ours, peer))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="number of (response, reference) pairs")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    hyps, refs = make_pairs(args.n, args.seed)
    datasets = {
        "cycled": (hyps, refs),
        "distinct": ([f"{h} uniqh{i}" for i, h in enumerate(hyps)], [f"{r} uniqr{i}" for i, r in enumerate(refs)]),
    }
    print(f"ROUGE-L, {args.n} pairs from the bundled Self-Instruct items (seed {args.seed})")
    print("seconds as wall / CPU; speed-up = rouge-score CPU s / evalign CPU s")
    print(f"{'data':<9} {'stemmer':<8} {'evalign s':>15} {'rouge-score s':>15} {'speed-up':>9}  identical")
    all_same = True
    for data_name, (h, r) in datasets.items():
        for stem in (False, True):
            (w_ours, c_ours), (w_peer, c_peer), same = run(h, r, stem)
            all_same &= same
            print(
                f"{data_name:<9} {'yes' if stem else 'no':<8} {w_ours:>7.2f} / {c_ours:<5.2f} "
                f"{w_peer:>7.2f} / {c_peer:<5.2f} {c_peer / c_ours:>8.1f}x  {same}"
            )
    if not all_same:
        raise SystemExit("MISMATCH: evalign rouge_l differs from rouge-score")


if __name__ == "__main__":
    main()
