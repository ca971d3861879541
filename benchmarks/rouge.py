"""The ROUGE family: evalign's ``rouge_1``, ``rouge_2``, ``rouge_l``, ``rouge_lsum`` vs rouge-score.

Data: the 2,016 bundled Self-Instruct (response, reference) pairs, cycled and shuffled (seeded) to
N pairs (default 4,032). For each metric, with and without the Porter stemmer, both implementations
score the same pairs in the same run; the script checks that F-measure, precision and recall are
identical and prints CPU seconds and the speed ratio (rouge-score CPU s / evalign CPU s; both run
single-threaded, so CPU seconds are the fairer figure on a shared machine). rouge-score gets one
``RougeScorer`` per metric, as a user computing one ROUGE type would build it.

Usage: ``python benchmarks/rouge.py [--n 4032] [--seed 0]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rouge_score import rouge_scorer

from evalign.datasets import load_dataset
from evalign.metrics import get_metric

FAMILY = {"rouge_1": "rouge1", "rouge_2": "rouge2", "rouge_l": "rougeL", "rouge_lsum": "rougeLsum"}


def make_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    """``n`` (response, reference) pairs: the bundled items cycled, then shuffled."""
    df = load_dataset("self_instruct").items
    idx = np.resize(np.arange(len(df)), n)
    np.random.default_rng(seed).shuffle(idx)
    return [str(df["response"].iloc[i]) for i in idx], [str(df["reference"].iloc[i]) for i in idx]


def run(name: str, hyps: list[str], refs: list[str], stem: bool) -> tuple[float, float, bool]:
    """CPU seconds of evalign and of rouge-score, and whether F, P and R are all identical."""
    c0 = time.process_time()
    res = get_metric(name, use_stemmer=stem).score(hyps, [[r] for r in refs])
    t_ours = time.process_time() - c0
    key = FAMILY[name]
    c0 = time.process_time()
    scorer = rouge_scorer.RougeScorer([key], use_stemmer=stem)
    peer = [scorer.score(r, h)[key] for h, r in zip(hyps, refs, strict=True)]
    t_peer = time.process_time() - c0
    same = (np.array_equal(res.values, [s.fmeasure for s in peer])
            and np.array_equal(res.extras["precision"], [s.precision for s in peer])
            and np.array_equal(res.extras["recall"], [s.recall for s in peer]))
    return t_ours, t_peer, same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4032, help="number of (response, reference) pairs")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    hyps, refs = make_pairs(args.n, args.seed)
    print(f"ROUGE family, {args.n} pairs from the bundled Self-Instruct items (seed {args.seed}); CPU seconds")
    print(f"{'metric':<11} {'stemmer':<8} {'evalign s':>10} {'rouge-score s':>14} {'speed-up':>9}  identical")
    ok = True
    for name in FAMILY:
        for stem in (False, True):
            t_ours, t_peer, same = run(name, hyps, refs, stem)
            ok &= same
            print(f"{name:<11} {'yes' if stem else 'no':<8} {t_ours:>10.2f} {t_peer:>14.2f} "
                  f"{t_peer / t_ours:>8.1f}x  {same}")
    if not ok:
        raise SystemExit("MISMATCH: evalign differs from rouge-score")


if __name__ == "__main__":
    main()
