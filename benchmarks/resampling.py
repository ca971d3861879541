"""Trust table at human-judgment scale: evalign's resampling now vs the code before the fast path.

A pair-table trust table (:func:`evalign.meta.trust.trust_table_pairs`: preference accuracy with
ties, each metric's epsilon calibrated once, a percentile bootstrap over pairs, and the paired
permutation tests the significance clusters need) is timed on the same seeded synthetic data:

* ``new``: this working tree (per-pair 0/1 vectors computed once per metric, resamples and swaps
  as float32 matrix-vector products over one cached matrix of draws, exact integer sums);
* ``old``: the package as of commit ``OLD_COMMIT`` (one ``pairwise_preference_accuracy`` call per
  pair, float64 weight matrices rebuilt per call), exported with ``git archive`` into a temporary
  folder and run in a subprocess.

Data: N pairs, three annotators (codes +1/-1/0, about 15% ties), M metrics of different quality,
rounded to 2 decimals so ties and epsilon calibration matter. Both runs use 1,000 resamples and
1,000 permutations at seed 0; the script checks that both trust tables are identical (every
value, interval, cluster and p-value) and prints the times and the ratio. The old code needs
about 6.5 minutes at 100,000 pairs x 5 metrics, so by default it runs at ``--old-n`` pairs (both
versions are timed there), and the new code alone at ``--n``.

Usage: ``python benchmarks/resampling.py [--n 100000] [--old-n 5000] [--metrics 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np
import pandas as pd

#: the last commit before the fast resampling path (main when the work started)
OLD_COMMIT = "3eab37a"
ROOT = Path(__file__).resolve().parent.parent
ANNOTATORS = ("pref_1", "pref_2", "pref_3")


def make_pairs(n: int, n_metrics: int, seed: int) -> tuple[pd.DataFrame, list[str]]:
    """``n`` pairs with three annotators and ``n_metrics`` metric score columns ``m<i>_a``/``m<i>_b``."""
    rng = np.random.default_rng(seed)
    truth = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.425, 0.15, 0.425])
    cols: dict[str, np.ndarray] = {"id": np.array([str(i) for i in range(n)])}
    for k, name in enumerate(ANNOTATORS):
        agree = rng.random(n) < 0.75 + 0.05 * k
        cols[name] = np.where(agree, truth, rng.choice([-1.0, 0.0, 1.0], size=n))
    names = []
    q = rng.normal(size=n)
    for i in range(n_metrics):
        signal = 0.8 - 0.15 * i
        cols[f"m{i}_a"] = np.round(q + signal * truth + rng.normal(size=n), 2)
        cols[f"m{i}_b"] = np.round(q + rng.normal(size=n), 2)
        names.append(f"m{i}")
    return pd.DataFrame(cols), names


def run_trust(n: int, n_metrics: int, n_resamples: int, n_permutations: int) -> dict:
    """Time one trust table in this process (imports evalign from ``sys.path``)."""
    import evalign
    from evalign.meta.trust import trust_table_pairs

    pairs, names = make_pairs(n, n_metrics, seed=0)
    w0, c0 = time.perf_counter(), time.process_time()
    rep = trust_table_pairs(pairs, list(ANNOTATORS), names, n_resamples=n_resamples,
                            n_permutations=n_permutations, seed=0)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    table = rep.for_group()[["metric", "rank", "cluster", "value", "ci_low", "ci_high", "p_vs_best", "epsilon",
                             "preference_accuracy_no_ties"]]
    records = json.loads(json.dumps(table.to_dict("records"), default=lambda o: o.item()))
    return {"wall": wall, "cpu": cpu, "table": records, "package": str(Path(evalign.__file__).parent)}


def run_old(n: int, n_metrics: int, n_resamples: int, n_permutations: int) -> dict:
    """The same trust table with the package of ``OLD_COMMIT``, in a subprocess."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", OLD_COMMIT, "src"], check=True,
                          capture_output=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(data)) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src")}
        out = subprocess.run(
            [sys.executable, __file__, "--worker", "--n", str(n), "--metrics", str(n_metrics),
             "--resamples", str(n_resamples), "--permutations", str(n_permutations)],
            check=True, capture_output=True, text=True, env=env,
        ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="pairs for the new code alone")
    ap.add_argument("--old-n", type=int, default=5_000, help="pairs for old vs new (0 = skip the old code)")
    ap.add_argument("--metrics", type=int, default=5)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--permutations", type=int, default=1000)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_trust(args.n, args.metrics, args.resamples, args.permutations)))
        return

    print(f"trust_table_pairs: {args.metrics} metrics, 3 annotators, {args.resamples} resamples, "
          f"{args.permutations} permutations, seed 0; {os.cpu_count()} CPU cores")
    print("seconds as wall / CPU; ratio = old wall / new wall")
    print(f"{'pairs':>8} {'old (' + OLD_COMMIT + ') s':>18} {'new s':>15} {'ratio':>8}  identical")
    ok = True
    if args.old_n:
        old = run_old(args.old_n, args.metrics, args.resamples, args.permutations)
        new = run_trust(args.old_n, args.metrics, args.resamples, args.permutations)
        same = pd.DataFrame(old["table"]).equals(pd.DataFrame(new["table"]))  # exact; NaN equals NaN
        ok &= same
        print(f"{args.old_n:>8} {old['wall']:>9.2f} / {old['cpu']:<6.2f} {new['wall']:>7.2f} / {new['cpu']:<6.2f}"
              f" {old['wall'] / new['wall']:>7.1f}x  {same}")
    if args.n != args.old_n:
        new = run_trust(args.n, args.metrics, args.resamples, args.permutations)
        print(f"{args.n:>8} {'-':>18} {new['wall']:>7.2f} / {new['cpu']:<6.2f} {'-':>8}  -")
        print(f"goal: {args.n} pairs x {args.metrics} metrics under 10 s: "
              f"{'met' if new['wall'] < 10 else 'NOT met'} ({new['wall']:.2f} s wall)")
    if not ok:
        raise SystemExit("MISMATCH: the old and new trust tables differ")


if __name__ == "__main__":
    main()
