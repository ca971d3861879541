"""The batched Kendall bootstrap (``evalign.meta.correlation.kendall_resampled``) against the peer,
``scipy.stats.kendalltau`` called once per resample, on the same seeded data of sf-data2text's
shape: N items, human ratings on 11 levels, a metric with ~N distinct values, B resamples.
Checks that every value agrees (to 1e-12) and prints both times and the ratio.
Usage: ``python benchmarks/kendall_bootstrap.py [--n 2056] [--resamples 1000]``
"""

from __future__ import annotations

import argparse
import importlib
import time

import numpy as np
from scipy import stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2056)
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args()
    correlation = importlib.import_module("evalign.meta.correlation")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 11, args.n).astype(float)
    y = rng.normal(size=args.n).round(3)
    idx = rng.integers(0, args.n, (args.resamples, args.n))
    t = time.perf_counter()
    ours = correlation.kendall_resampled(x, y, idx)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    peer = np.array([stats.kendalltau(x[i], y[i]).statistic for i in idx])
    t_peer = time.perf_counter() - t
    assert np.allclose(ours, peer, rtol=0, atol=1e-12), float(np.max(np.abs(ours - peer)))
    print(f"{args.resamples} resamples of {args.n} items (11 x {len(np.unique(y))} levels): "
          f"evalign {t_ours:.2f} s, scipy.stats.kendalltau per resample {t_peer:.2f} s, "
          f"ratio {t_peer / t_ours:.1f}x; values equal to 1e-12")


if __name__ == "__main__":
    main()
