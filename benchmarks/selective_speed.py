"""Speed of selective calibration (:func:`evalign.meta.selective.calibrate_cascade`): a cascade of
three judges on ``--n`` synthetic verdicts (default 100,000), 5,000 candidate thresholds each; the
target is under 1 s (issue 36). Also times the naive rule written as a Python loop over the
candidates, each re-filtering the array and computing its own bound (``--naive``; slow).

    python benchmarks/selective_speed.py                # 100,000 verdicts x 3 judges, best of 5
    python benchmarks/selective_speed.py --n 10000 --naive
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from evalign.meta.selective import SelectiveSettings, calibrate_cascade, risk_upper_bound


def synthetic(n: int, judges: int, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per judge: confidences in [0.5, 1] and correctness that rises with them."""
    rng = np.random.default_rng(seed)
    out = {}
    for j in range(judges):
        c = rng.uniform(0.5, 1.0, n)
        out[f"judge{j}"] = (c, rng.uniform(size=n) < 0.3 + 0.7 * c)
    return out


def naive_threshold(c: np.ndarray, y: np.ndarray, s: SelectiveSettings) -> float:
    """The same test as a loop over candidates, each re-filtering the array (for comparison)."""
    best = float("inf")
    for lam in np.linspace(0, 1, s.grid)[::-1]:
        sel = c >= lam
        m = int(sel.sum())
        if m < s.min_items:
            continue
        if float(risk_upper_bound(int((~y[sel]).sum()), m, s.delta)) > s.alpha:
            break
        best = float(lam)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--judges", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--naive", action="store_true")
    a = ap.parse_args()
    data = synthetic(a.n, a.judges, 0)
    s = SelectiveSettings(alpha=0.15, delta=0.1)
    calibrate_cascade(data, list(data), s)  # scipy imported, caches warm
    times = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        cas = calibrate_cascade(data, list(data), s)
        times.append(time.perf_counter() - t0)
    print(f"calibrate_cascade: {a.n:,} verdicts x {a.judges} judges, grid {s.grid}: best {min(times):.3f} s, "
          f"median {sorted(times)[len(times) // 2]:.3f} s (of {a.repeats}); thresholds "
          + ", ".join(f"{t:.4f}" for t in cas.thresholds) + f"; coverage {cas.coverage:.3f}")
    if a.naive:
        c, y = data["judge0"]
        t0 = time.perf_counter()
        lam = naive_threshold(c, y, s)
        print(f"naive loop, first judge only: {time.perf_counter() - t0:.3f} s (threshold {lam:.4f}, vectorised "
              f"{cas.thresholds[0]:.4f})")


if __name__ == "__main__":
    main()
