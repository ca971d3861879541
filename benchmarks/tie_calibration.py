"""Tie calibration (pairwise accuracy acc_eq, Deutsch et al. 2023): evalign vs the usual pure-Python sweep.

The usual implementation (the algorithm of mt-metrics-eval's ``tau_optimization.py``, rewritten
here in plain Python without sampling) builds one Python record per pair, sorts the pairs by metric
difference and sweeps them, updating the counts. evalign streams pair differences through numpy,
buckets them by their float64 top bits and sorts only the buckets that can hold the best epsilon.

Data (seeded): N items in ONE group (``grouping="none"``, N*(N-1)/2 pairs); human scores on a 1-5
scale (many ties); two metrics: ``rounded`` (noisy, rounded to 2 decimals: many equal differences,
calibration matters) and ``continuous`` (noisy floats).

Above ``pairwise.SEARCH_MIN_PAIRS`` pairs evalign no longer visits every pair (``meta/tie_search.py``:
counts at any epsilon in O(n log n), branch and bound over epsilon, enumeration of the few pairs left).
For every N up to ``--sweep-max`` the script checks that evalign's epsilon and accuracy are identical
to those of the pair sweep it replaced (the search switched off) and of an independent vectorised
brute force written from the definition (every pair, one full sort of all pair differences, exact
integer counts), and, at 2,000 items, to the pure-Python sweep. At 100,000 items (5 billion pairs)
neither the sweep nor the brute force can run; the script prints evalign's time there beside the
pair sweep's time at 10,000 items (the ratio).

Usage: ``python benchmarks/tie_calibration.py [--sizes 2000 10000 100000] [--python-max 2000]
[--sweep-max 10000] [--seed 0]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from evalign.meta import pairwise
from evalign.meta.pairwise import calibrate_epsilon, pairwise_accuracy


def make_data(n: int, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, size=n).astype(np.float64)
    noise = rng.normal(size=n)
    return {
        "rounded": (human, np.round(0.1 * human + 0.3 * noise, 2)),
        "continuous": (human, 0.2 * human + noise),
    }


def python_sweep(human: list[float], metric: list[float]) -> tuple[float, float]:
    """The usual implementation: one Python record per pair, sort by |difference|, sweep.
    Returns (smallest best epsilon, accuracy)."""
    n = len(human)
    pairs = []
    correct = 0
    for i in range(n):
        hi, mi = human[i], metric[i]
        for j in range(i + 1, n):
            hj, mj = human[j], metric[j]
            htie = hi == hj
            ok = (htie and mi == mj) or (not htie and mi != mj and (hi > hj) == (mi > mj))
            correct += ok
            pairs.append((abs(mi - mj), htie, ok))
    total = len(pairs)
    pairs.sort(key=lambda p: p[0])
    best_eps, best_correct = 0.0, correct  # epsilon = 0 before any pair is turned into a tie
    last = 0.0
    for diff, htie, ok in pairs:
        if diff != last and correct > best_correct:
            best_eps, best_correct = last, correct
        correct += int(htie) - int(ok)  # the pair becomes a metric tie: correct iff human tie
        last = diff
    if correct > best_correct:
        best_eps, best_correct = last, correct
    return best_eps, best_correct / total


def brute_force(human: np.ndarray, metric: np.ndarray) -> tuple[float, float]:
    """Vectorised brute force from the definition: all pairs i < j, correctness as a function of
    epsilon = (#human ties with |d| <= eps) + (#other pairs in the same order with |d| > eps);
    one sort of all |d|, exact integer counts, the first maximum."""
    n = human.size
    ds, hts, cons = [], [], []
    for i in range(n - 1):
        d = metric[i + 1 :] - metric[i]
        dh = human[i + 1 :] - human[i]
        ds.append(np.abs(d))
        hts.append(dh == 0)
        cons.append((dh != 0) & (np.sign(dh) == np.sign(d)))
    d = np.concatenate(ds)
    del ds
    htie = np.concatenate(hts)
    con = np.concatenate(cons)
    del hts, cons
    base = int(con.sum())
    order = np.argsort(d, kind="stable")
    d = d[order]
    delta = htie[order].astype(np.int8) - con[order].astype(np.int8)
    del order, htie, con
    correct = base + np.cumsum(delta, dtype=np.int64)
    last = np.flatnonzero(np.r_[d[1:] != d[:-1], True])
    eps = np.r_[0.0, d[last]]
    counts = np.r_[base, correct[last]]  # epsilon 0 with no zero difference: nothing tied
    if d[0] == 0.0:
        eps, counts = eps[1:], counts[1:]
    i = int(np.argmax(counts))
    return float(eps[i]), float(counts[i] / d.size)


def timed(fn, *args):  # type: ignore[no-untyped-def]
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w0, time.process_time() - c0


def pair_sweep(human: np.ndarray, metric: np.ndarray):  # type: ignore[no-untyped-def]
    """Today's pair sweep (every pair streamed, bucketed): the search switched off."""
    saved = pairwise.SEARCH_MIN_PAIRS
    pairwise.SEARCH_MIN_PAIRS = 10**18
    try:
        return calibrate_epsilon(human, metric)
    finally:
        pairwise.SEARCH_MIN_PAIRS = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 100000])
    ap.add_argument("--python-max", type=int, default=2000, help="largest N for the pure-Python sweep")
    ap.add_argument("--sweep-max", type=int, default=10000, help="largest N for the pair sweep and brute force")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warm = make_data(600, args.seed + 1)["rounded"]
    calibrate_epsilon(*warm)  # first call pays numpy's lazy initialisation; do not time it
    print(f"Tie calibration, one group, human 1-5, times in seconds (wall / CPU); load {os.getloadavg()[0]:.2f}")
    print(f"evalign searches without visiting every pair above {pairwise.SEARCH_MIN_PAIRS:,} pairs")
    all_ok = True
    sweep_at: dict[str, float] = {}
    for n in args.sizes:
        for name, (human, metric) in make_data(n, args.seed).items():
            pairs = n * (n - 1) // 2
            cal, w_cal, c_cal = timed(calibrate_epsilon, human, metric)
            res, w_acc, c_acc = timed(pairwise_accuracy, human, metric)
            same = cal.epsilon == res.epsilon and cal.accuracy == res.accuracy
            print(
                f"N={n:>6} {name:<10} pairs={pairs:>13,}  epsilon={cal.epsilon:.6g} acc={cal.accuracy:.6f}  "
                f"evalign calibrate_epsilon {w_cal:6.2f} / {c_cal:6.2f}  pairwise_accuracy {w_acc:6.2f} / {c_acc:6.2f}"
            )
            if n <= args.sweep_max:
                old, w_old, c_old = timed(pair_sweep, human, metric)
                (b_eps, b_acc), w_bf, _ = timed(brute_force, human, metric)
                same &= cal.epsilon == old.epsilon == b_eps and cal.accuracy == old.accuracy == b_acc
                sweep_at[name] = w_old
                print(
                    f"{'':>8}{'':<11} pair sweep (before the search) {w_old:6.2f} / {c_old:6.2f}  brute force "
                    f"{w_bf:6.2f}  identical: {same}  ratio sweep/evalign (wall) = {w_old / w_cal:.1f}x"
                )
            elif name in sweep_at:
                print(
                    f"{'':>8}{'':<11} pair sweep skipped (N > --sweep-max {args.sweep_max}); evalign at N={n} "
                    f"vs the pair sweep at N={args.sweep_max}: {w_cal:.2f} s vs {sweep_at[name]:.2f} s "
                    f"(ratio {sweep_at[name] / w_cal:.2f}x for {pairs // (args.sweep_max * (args.sweep_max - 1) // 2)}x the pairs)"
                )
            all_ok &= same
            if n <= args.python_max:
                (p_eps, p_acc), w_py, c_py = timed(python_sweep, human.tolist(), metric.tolist())
                same_py = p_eps == cal.epsilon and p_acc == cal.accuracy
                all_ok &= same_py
                print(
                    f"{'':>8}{'':<11} pure-Python sweep {w_py:6.2f} / {c_py:6.2f}  identical: {same_py}  "
                    f"ratio python/evalign (calibrate_epsilon, wall) = {w_py / w_cal:.1f}x, CPU = {c_py / c_cal:.1f}x"
                )
    print(f"load after: {os.getloadavg()[0]:.2f}")
    print("ALL IDENTICAL" if all_ok else "MISMATCH")
    if not all_ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
